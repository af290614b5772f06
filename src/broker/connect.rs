//! Opening the broker connection from `nats:` settings: URL, creds, nkey,
//! user/password, token, TLS and a connect timeout. Secrets never reach an
//! error message or a log line; URLs are printed redacted.

use std::path::Path;

use async_nats::ConnectOptions;

use crate::config::{redact_url, NatsConfig};

/// A connected client and its JetStream context. Both are private to this
/// module tree: everything outside `src/broker/` speaks plain data to the
/// methods here (a test keeps it that way).
#[derive(Clone)]
pub struct Broker {
    pub(super) js: async_nats::jetstream::Context,
    /// The URL dialled, redacted, for messages.
    pub url: String,
    /// KV handles by bucket. A handle holds no rows, only the bucket's
    /// stream settings; keeping it saves a stream-info request on every
    /// write. A handle that fails is dropped and fetched again.
    pub(super) stores: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<String, async_nats::jetstream::kv::Store>>,
    >,
    /// How long one read may take before it is given up as unreadable.
    pub(super) read_timeout: std::time::Duration,
    /// What the client library has told us of the connection.
    pub(super) link: std::sync::Arc<Link>,
    /// The buckets' incremental views, kept across ticks (`view.rs`).
    pub(super) views: std::sync::Arc<super::view::Views>,
    /// Each Object Store bucket's last listing, with the stream state it
    /// was taken at (`archive.rs`).
    pub(super) listings: std::sync::Arc<super::archive::Listings>,
    /// Each log's replicas as this process's last whole listing named
    /// them: one missing from the next listing is unreadable until its
    /// leader confirms its deletion (docs/trim-floor.md, Proven current).
    pub(super) replicas_seen: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<String, std::collections::BTreeSet<String>>>,
    >,
    /// Consumers the next listings leave out (tests: a listing that skipped
    /// a consumer, as one asked by offset while another is deleted can).
    pub(super) listing_skips: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

/// The connection as the client library's events told it: whether it was
/// ever up (the first connection is not a reconnection) and since when it
/// is down.
#[derive(Debug, Default)]
pub struct Link {
    ever: std::sync::atomic::AtomicBool,
    down_since: std::sync::Mutex<Option<chrono::DateTime<chrono::Utc>>>,
    /// The server's refusal of this client's credentials on the last
    /// attempt to connect again (cleared once connected).
    refused: std::sync::Mutex<Option<String>>,
    /// When a client error was last logged, and how many were left out
    /// since: at most one line a minute ([`Link::client_error`]).
    errors: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

/// The least time between two `broker_client_error` lines.
const CLIENT_ERROR_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Link {
    /// Logs a client error the library reported, at most once a minute,
    /// with how many it left out since the last line: a reconnection
    /// refused over and over is a condition, said once, not a line per
    /// attempt.
    fn client_error(&self, error: &str) {
        let mut g = match self.errors.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let now = std::time::Instant::now();
        // While the connection is down, its errors are the outage itself,
        // which `broker_disconnected` and the alarm already say.
        let down = self.down_since().is_some();
        if down
            || g.0
                .is_some_and(|last| now.duration_since(last) < CLIENT_ERROR_EVERY)
        {
            g.1 += 1;
            return;
        }
        let left_out = std::mem::take(&mut g.1);
        g.0 = Some(now);
        tracing::warn!(
            event = "broker_client_error",
            error = %error,
            left_out,
            "the broker client reports an error (at most one line a minute; {left_out} left out since the last)"
        );
    }

    fn refused(&self) -> Option<String> {
        match self.refused.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn set_refused(&self, why: Option<String>) {
        match self.refused.lock() {
            Ok(mut g) => *g = why,
            Err(p) => *p.into_inner() = why,
        }
    }

    fn down_since(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        match self.down_since.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        }
    }

    fn set_down_since(&self, at: Option<chrono::DateTime<chrono::Utc>>) {
        match self.down_since.lock() {
            Ok(mut g) => *g = at,
            Err(p) => *p.into_inner() = at,
        }
    }

    /// Records a connection; returns how long it was down before, or
    /// `None` for the first one.
    fn connected(&self) -> Option<chrono::Duration> {
        self.set_refused(None);
        let before = self.down_since();
        self.set_down_since(None);
        let was_up = self.ever.swap(true, std::sync::atomic::Ordering::SeqCst);
        was_up.then(|| before.map_or(chrono::Duration::zero(), |b| chrono::Utc::now() - b))
    }

    /// Records a lost connection (the first moment it was lost is kept).
    fn disconnected(&self) {
        if self.down_since().is_none() {
            self.set_down_since(Some(chrono::Utc::now()));
        }
    }
}

impl Broker {
    /// `f` within the read timeout, its error or the timeout as a
    /// sentence starting with `what` ("stream T: no answer within 5s").
    pub(super) async fn bounded<T, E: std::fmt::Display>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, super::Fault> {
        match tokio::time::timeout(self.read_timeout, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(super::Fault::Failed(format!("{what}: {e}"))),
            Err(_) => Err(super::Fault::Unanswered(format!(
                "{what}: no answer within {}",
                crate::config::Dur(self.read_timeout)
            ))),
        }
    }

    /// Bounds every read by `timeout` (the sidecar takes its tick: a read
    /// that hangs must not outlive the duty lease of three ticks, even
    /// tried twice).
    /// How long one read may take (a store call in the fold is bounded
    /// alike).
    pub fn read_timeout(&self) -> std::time::Duration {
        self.read_timeout
    }

    pub fn with_read_timeout(mut self, timeout: std::time::Duration) -> Broker {
        self.read_timeout = timeout;
        self
    }
}

/// Why no connection was made. Only `Unreachable` is the network (exit
/// 3); a refused credential, an unreadable creds/nkey/TLS file or a URL
/// that does not parse is configuration (exit 2, docs/runbook.md).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot reach the broker at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("cannot read {what} {path}: {reason}")]
    Material {
        what: &'static str,
        path: String,
        reason: String,
    },
    #[error("the broker at {url} refused the connection: {reason}; check the credentials and TLS settings")]
    Refused { url: String, reason: String },
    #[error("the server URL {url} is not usable: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("the broker at {url} runs nats-server {version}, which crewlet does not support: it needs 2.10 or later (the message get by sequence and subject the reads are proven with, the purge and key-value API as crewlet uses them); upgrade the server")]
    Unsupported { url: String, version: String },
}

/// PURE: whether a nats-server version string (`2.10.26`, `v2.9.10`)
/// names a release crewlet supports: 2.10 and later. One that does not
/// parse is let through (a build of its own; the reads prove themselves).
pub fn supported_server(version: &str) -> bool {
    at_least(version, (2, 10))
}

/// PURE: whether a nats-server version has durable sourcing (a mirror or
/// source copying through a durable consumer of its own: 2.14 and later),
/// without which no consumer is a replica (docs/trim-floor.md, Replicas).
pub fn durable_sourcing(version: &str) -> bool {
    at_least(version, (2, 14))
}

/// Whether `version` is at least `major.minor`; one that does not parse
/// (a build of one's own) is taken to be.
fn at_least(version: &str, least: (u64, u64)) -> bool {
    let v = version.trim().trim_start_matches('v');
    let mut parts = v.split(['.', '-']).map(|p| p.parse::<u64>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= least,
        _ => true,
    }
}

impl ConnectError {
    /// Configuration (not the network): exit 2 rather than 3.
    pub fn is_configuration(&self) -> bool {
        !matches!(self, ConnectError::Unreachable { .. })
    }
}

/// The servers of a comma-separated list (`nats://a:4222,nats://b:4222`),
/// as the `nats` CLI takes them.
pub fn server_list(url: &str) -> Vec<String> {
    url.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(crate::config::server_url)
        .collect()
}

fn read_secret(what: &'static str, path: &Path) -> Result<String, ConnectError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| ConnectError::Material {
            what,
            path: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// Connects with every configured credential. `url` comes from
/// `crate::config::connection::effective` (or the embedded broker).
pub async fn connect(
    url: &str,
    nats: &NatsConfig,
    client_name: &str,
) -> Result<Broker, ConnectError> {
    let shown = redact_url(url);
    let link = std::sync::Arc::new(Link::default());
    let events = link.clone();
    let mut opts = ConnectOptions::new()
        .name(client_name)
        // Without retry_on_initial_connect a broker that is not there is
        // reported at once (exit 3) rather than waited for; once connected,
        // reconnects are unlimited so a long-running sidecar rides out a
        // broker restart.
        .connection_timeout(nats.connect_timeout.0)
        .max_reconnects(None)
        // The sidecar says itself when the broker goes and comes back (the
        // client library's own lines are below the one-shot log level).
        .event_callback(move |event| {
            let link = events.clone();
            async move {
                match event {
                    async_nats::Event::Disconnected => {
                        link.disconnected();
                        tracing::warn!(
                            event = "broker_disconnected",
                            "lost the connection to the broker; reconnecting"
                        )
                    }
                    // A reconnection the server refused: the credentials
                    // were revoked or rotated, or the account's resolver
                    // lost them (async-nats reports it as a client error
                    // and keeps trying). A live connection whose user is
                    // revoked is told so by the server before it closes.
                    async_nats::Event::ClientError(async_nats::ClientError::Other(e))
                        if refusal(&e) =>
                    {
                        if link.refused().is_none() {
                            tracing::warn!(
                                event = "broker_refusing",
                                error = %e,
                                "the broker refuses this sidecar's credentials; retrying"
                            );
                        }
                        link.set_refused(Some(e));
                    }
                    async_nats::Event::ServerError(
                        async_nats::ServerError::AuthorizationViolation,
                    ) => {
                        link.set_refused(Some("authorization violation".into()));
                    }
                    async_nats::Event::ClientError(e) => link.client_error(&e.to_string()),
                    async_nats::Event::ServerError(e) => link.client_error(&e.to_string()),
                    async_nats::Event::Connected => {
                        // The first connection is the one `started` logs.
                        if let Some(down) = link.connected() {
                            tracing::info!(
                                event = "broker_reconnected",
                                down_for = %crate::human::age(down.to_std().unwrap_or_default()),
                                "connected to the broker again"
                            )
                        }
                    }
                    _ => {}
                }
            }
        });
    if let Some(creds) = &nats.creds {
        opts = opts
            .credentials_file(creds)
            .await
            .map_err(|e| ConnectError::Material {
                what: "nats.creds file",
                path: creds.display().to_string(),
                reason: e.to_string(),
            })?;
    }
    if let Some(nkey) = &nats.nkey {
        opts = opts.nkey(read_secret("nats.nkey seed file", nkey)?);
    }
    if let (Some(user), Some(password)) = (&nats.user, &nats.password) {
        opts = opts.user_and_password(user.clone(), password.clone());
    }
    if let Some(token) = &nats.token {
        opts = opts.token(token.clone());
    }
    if let Some(tls) = &nats.tls {
        for (what, path) in [
            ("nats.tls.ca", &tls.ca),
            ("nats.tls.cert", &tls.cert),
            ("nats.tls.key", &tls.key),
        ] {
            if let Some(p) = path {
                if let Err(e) = std::fs::metadata(p) {
                    return Err(ConnectError::Material {
                        what,
                        path: p.display().to_string(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        if let Some(ca) = &tls.ca {
            opts = opts.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
            opts = opts.add_client_certificate(cert.clone(), key.clone());
        }
        opts = opts.require_tls(true);
    }
    let servers = server_list(url);
    for server in &servers {
        if let Err(reason) = crate::config::check_url(server) {
            return Err(ConnectError::BadUrl {
                url: redact_url(server),
                reason: reason.0,
            });
        }
    }
    let client = async_nats::connect_with_options(servers, opts)
        .await
        .map_err(|e| {
            use async_nats::ConnectErrorKind as K;
            let reason = e.to_string();
            let url = shown.clone();
            match e.kind() {
                K::ServerParse => ConnectError::BadUrl { url, reason },
                K::Authentication | K::AuthorizationViolation | K::Tls => {
                    ConnectError::Refused { url, reason }
                }
                // A certificate the configured CA does not trust surfaces as
                // an IO error of kind InvalidData (the TLS handshake), not a
                // network failure.
                K::Io if invalid_data(&e) => ConnectError::Refused { url, reason },
                K::Dns | K::TimedOut | K::Io | K::MaxReconnects => {
                    ConnectError::Unreachable { url, reason }
                }
            }
        })?;
    // An unsupported server is refused at once, naming its version,
    // rather than failing in some read on every tick.
    let version = client.server_info().version;
    if !supported_server(&version) {
        return Err(ConnectError::Unsupported {
            url: shown,
            version,
        });
    }
    let js = async_nats::jetstream::new(client);
    Ok(Broker {
        js,
        url: shown,
        stores: Default::default(),
        read_timeout: super::read::READ_TIMEOUT,
        link,
        views: Default::default(),
        listings: Default::default(),
        replicas_seen: Default::default(),
        listing_skips: Default::default(),
    })
}

impl Broker {
    /// The outage the connection is in, if it is down: since the client
    /// library said it was lost (or since now, when it has not said so
    /// yet), and the servers tried (redacted).
    /// Whether the server this connection reaches has durable sourcing.
    pub fn durable_sourcing(&self) -> bool {
        durable_sourcing(&self.js.client().server_info().version)
    }

    pub fn outage(&self) -> Option<crate::floor::Outage> {
        use async_nats::connection::State;
        if self.js.client().connection_state() == State::Connected {
            return None;
        }
        Some(crate::floor::Outage {
            since: crate::rows::Timestamp(self.link.down_since().unwrap_or_else(chrono::Utc::now)),
            servers: self.url.clone(),
            refused: self.link.refused(),
        })
    }
}

/// Whether a client error async-nats reports while connecting again is the
/// server refusing the credentials (its words for the two kinds).
fn refusal(e: &str) -> bool {
    e == "authorization violation" || e == "failed signing nonce"
}

/// Whether an IO error of kind `InvalidData` is in `e`'s source chain.
fn invalid_data(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::InvalidData {
                return true;
            }
        }
        next = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_2_10_and_later_is_supported() {
        for ok in [
            "2.10.26",
            "v2.11.11",
            "2.15.1",
            "3.0.0",
            "2.10.0-beta.1",
            "custom",
        ] {
            assert!(supported_server(ok), "{ok}");
        }
        for old in ["2.9.10", "v2.9.25", "1.4.1"] {
            assert!(!supported_server(old), "{old}");
        }
    }

    #[test]
    fn server_lists() {
        assert_eq!(
            server_list("nats://a:4222, nats://b:4223,,"),
            ["nats://a:4222", "nats://b:4223"]
        );
        // As the nats CLI takes them: no scheme is nats://.
        assert_eq!(
            server_list("127.0.0.1:4222, tls://b:4223, c"),
            ["nats://127.0.0.1:4222", "tls://b:4223", "nats://c"]
        );
    }
}
