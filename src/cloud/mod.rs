//! The archive in cloud object storage (docs/archive-format.md, Cloud
//! object storage), through the object_store crate: segments put whole with
//! a conditional create (never overwritten), read back whole, listed under
//! the prefix. Every object_store use stays in this module, as every
//! async-nats use stays in src/broker/.
//!
//! Each call is bounded by the sidecar's read timeout, retries included: a
//! store that answers slowly or not at all fails the call, it never holds
//! the tick past its deadline.

pub mod access;
pub mod credentials;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::archive::remote::{Cloud, Remote};
use crate::archive::segment;
use crate::archive::state::{ListError, Listed, Put};
use crate::within::within;
use credentials::{Env, ProcessEnv};

/// A connected store: one HTTP client (and its pool of connections) per
/// store for the life of the process, shared by every tick.
pub struct Client {
    remote: Remote,
    store: Arc<dyn ObjectStore>,
    limit: Duration,
    /// The last listing this process took of each log's generation, and
    /// how many ticks have reused it since
    /// ([`Client::listing_unless_settled`]); all forgotten at every write
    /// through this client.
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_log: HashMap<(String, u64), (Vec<Listed>, u32)>,
    /// Writes begun through this client: a listing taken while one began
    /// is not kept (it may predate the write).
    writes: u64,
}

/// A kept listing serves at most this many ticks before the store is
/// listed again, so that a segment removed from under the archive (a
/// lifecycle rule, a hand) is seen within as many ticks even when nothing
/// the listing covers is still in the log.
pub const REUSE_AT_MOST: u32 = 30;

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("store", &self.remote.id())
            .finish_non_exhaustive()
    }
}

type ClientKey = (Remote, Duration, Option<std::time::SystemTime>);
type Clients = Mutex<HashMap<ClientKey, Arc<Client>>>;

/// The client of `remote`, made on first use and kept: a tick names its
/// store anew each time, and a new client would open new connections (and
/// a TLS handshake each) every tick. A `credentials_file` rewritten (a key
/// rotated, a session token renewed) makes a new client. `limit` bounds
/// each call.
///
/// It reads files (the credentials, their modification time): from the
/// tick, call [`client_within`], which keeps a mount that stopped
/// answering off the tick's threads.
pub fn client(remote: &Remote, limit: Duration) -> Result<Arc<Client>, String> {
    static CLIENTS: OnceLock<Clients> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let written = remote
        .credentials_file
        .as_ref()
        .and_then(|f| std::fs::metadata(f).ok()?.modified().ok());
    let key = (remote.clone(), limit, written);
    if let Some(c) = clients.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Ok(c);
    }
    let store = build(remote, limit, &ProcessEnv)?;
    let made = Arc::new(Client {
        remote: remote.clone(),
        store,
        limit,
        kept: Mutex::new(Kept::default()),
    });
    if let Ok(mut m) = clients.lock() {
        m.insert(key, made.clone());
    }
    Ok(made)
}

/// [`client`] on a blocking thread, given up after `limit`.
pub async fn client_within(remote: &Remote, limit: Duration) -> Result<Arc<Client>, String> {
    let r = remote.clone();
    let made = tokio::task::spawn_blocking(move || client(&r, limit));
    match tokio::time::timeout(limit, made).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => Err(format!("{}: {e}", remote.id())),
        Err(_) => Err(format!(
            "{}: its client could not be made within {} (a credentials file that does not answer?)",
            remote.id(),
            crate::human::duration(limit)
        )),
    }
}

/// Why no client could be made: the field to fix, and what is wrong.
fn refuse(remote: &Remote, why: impl std::fmt::Display) -> String {
    format!("{}: {why}", remote.id())
}

fn options(limit: Duration) -> (object_store::ClientOptions, object_store::RetryConfig) {
    // The client's own timeouts lie past the call's bound, so that a store
    // that does not answer is said as such ("no answer within") rather
    // than as the HTTP client's error.
    let client = object_store::ClientOptions::new()
        .with_timeout(limit * 2)
        .with_connect_timeout(limit * 2);
    // Retries within the call's own bound: a call that retries past it is
    // given up by the caller anyway.
    let retry = object_store::RetryConfig {
        max_retries: 2,
        retry_timeout: limit,
        ..Default::default()
    };
    (client, retry)
}

/// Builds the object_store client of `remote`. Credentials come from the
/// YAML's `credentials_file`, else where the cloud's own tools look; the
/// instance's metadata service only when `instance_metadata` allows it
/// (docs/configuration.md, Cloud archive credentials).
pub fn build(
    remote: &Remote,
    limit: Duration,
    env: &dyn Env,
) -> Result<Arc<dyn ObjectStore>, String> {
    // reqwest is built without a TLS provider of its own; ring's is the one
    // async-nats uses already. Installing it twice is refused, harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (client, retry) = options(limit);
    let built: Result<Arc<dyn ObjectStore>, object_store::Error> = match remote.cloud {
        Cloud::S3 => {
            let mut b = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(&remote.bucket)
                .with_client_options(client)
                .with_retry(retry);
            let profile = credentials::aws_profile(remote.profile.as_deref(), env);
            match s3_keys(remote, &profile, env)? {
                Some(k) => {
                    b = b
                        .with_access_key_id(k.access_key_id)
                        .with_secret_access_key(k.secret_access_key);
                    if let Some(t) = k.session_token {
                        b = b.with_token(t);
                    }
                }
                None if env.var("AWS_ACCESS_KEY_ID").is_some() => {}
                None if remote.instance_metadata => {}
                None => {
                    return Err(refuse(
                        remote,
                        "no credentials: set credentials_file, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in the AWS credentials file; instance_metadata is false, so no metadata service, container endpoint or token exchange is asked",
                    ))
                }
            }
            if !remote.instance_metadata {
                // Belt and braces: nothing may fall through to a metadata
                // address (the keys above already settle the provider).
                b = b.with_metadata_endpoint("http://127.0.0.1:1");
            }
            let region = remote.region.clone().or_else(|| {
                env.var("AWS_REGION")
                    .or_else(|| env.var("AWS_DEFAULT_REGION"))
                    .or_else(|| {
                        let f = credentials::aws_shared_file(env, "AWS_CONFIG_FILE", "config")?;
                        let text = std::fs::read_to_string(f).ok()?;
                        credentials::aws_region(&text, &profile)
                    })
            });
            if let Some(r) = region {
                b = b.with_region(r);
            }
            if let Some(e) = &remote.endpoint {
                b = b.with_endpoint(e).with_allow_http(remote.allow_http);
            }
            b.build().map(|s| Arc::new(s) as _)
        }
        Cloud::Gcs => {
            let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(&remote.bucket)
                .with_client_options(client.with_allow_http(remote.allow_http))
                .with_retry(retry);
            if let Some(f) = &remote.credentials_file {
                b = b.with_service_account_path(f.display().to_string());
            } else if !remote.instance_metadata && !gcs_has_keys(env) {
                return Err(refuse(
                    remote,
                    "no credentials: set credentials_file (a service-account key), or GOOGLE_APPLICATION_CREDENTIALS; instance_metadata is false, so the metadata server is not asked",
                ));
            }
            if let Some(e) = &remote.endpoint {
                b = b.with_config(object_store::gcp::GoogleConfigKey::BaseUrl, e);
            }
            b.build().map(|s| Arc::new(s) as _)
        }
        Cloud::Azure => {
            let mut b = object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_container_name(&remote.bucket)
                .with_client_options(client)
                .with_retry(retry)
                .with_allow_http(remote.allow_http);
            if let Some(a) = &remote.account {
                b = b.with_account(a);
            }
            if !remote.instance_metadata && !azure_has_keys(env) {
                return Err(refuse(
                    remote,
                    "no credentials: set AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN or a service principal (AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID); instance_metadata is false, so no managed identity is asked",
                ));
            }
            if !remote.instance_metadata {
                b = b.with_config(
                    object_store::azure::AzureConfigKey::MsiEndpoint,
                    "http://127.0.0.1:1",
                );
            }
            if let Some(e) = &remote.endpoint {
                b = b.with_endpoint(e.clone());
            }
            b.build().map(|s| Arc::new(s) as _)
        }
    };
    built.map_err(|e| refuse(remote, e))
}

/// The AWS keys of the YAML's credentials file, else of the shared
/// credentials file when the environment holds no keys of its own (the
/// order the AWS tools take).
fn s3_keys(
    remote: &Remote,
    profile: &str,
    env: &dyn Env,
) -> Result<Option<credentials::AwsKeys>, String> {
    if let Some(f) = &remote.credentials_file {
        return credentials::read_aws_keys(f, profile)
            .map(Some)
            .map_err(|e| refuse(remote, e));
    }
    if env.var("AWS_ACCESS_KEY_ID").is_some() {
        return Ok(None);
    }
    let Some(shared) =
        credentials::aws_shared_file(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials")
    else {
        return Ok(None);
    };
    if !shared.exists() {
        return Ok(None);
    }
    // A shared file without this profile is not an error: the other
    // sources (a role, a token file) may still answer.
    Ok(credentials::read_aws_keys(&shared, profile).ok())
}

fn gcs_has_keys(env: &dyn Env) -> bool {
    [
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_SERVICE_ACCOUNT",
        "GOOGLE_SERVICE_ACCOUNT_PATH",
        "GOOGLE_SERVICE_ACCOUNT_KEY",
    ]
    .iter()
    .any(|k| env.var(k).is_some())
}

fn azure_has_keys(env: &dyn Env) -> bool {
    [
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCESS_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_SAS_KEY",
        "AZURE_STORAGE_CLIENT_SECRET",
        "AZURE_CLIENT_SECRET",
        "AZURE_STORAGE_USE_EMULATOR",
    ]
    .iter()
    .any(|k| env.var(k).is_some())
}

impl Client {
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// The object key of `name`, as written: no character is encoded, so
    /// that the key listed is the key written (the crate's `From` would
    /// percent-encode some that a stream name may hold).
    fn key(&self, name: &str) -> Result<Key, String> {
        let key = self.remote.key(name);
        Key::parse(&key)
            .map_err(|e| format!("{}: {key:?} is not an object key: {e}", self.remote.id()))
    }

    fn at(&self, name: &str) -> String {
        format!("{}/{name}", self.remote.id())
    }

    /// The bytes of segment `name`, or `None` when there is none.
    pub async fn get_segment(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        let at = self.at(name);
        within(self.limit, || format!("reading {at}"), async {
            match self.store.get(&self.key(name)?).await {
                Ok(r) => r
                    .bytes()
                    .await
                    .map(|b| Some(b.to_vec()))
                    .map_err(|e| format!("reading {at}: {}", self.said(access::Op::Read, &e))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(format!("reading {at}: {}", self.said(access::Op::Read, &e))),
            }
        })
        .await
    }

    /// Puts segment `name` whole, unless it is there: a conditional create
    /// (`If-None-Match: *`), one request, so an upload cut short leaves
    /// nothing. An object already there with the same bytes is a re-fold,
    /// with other bytes an error; it is never overwritten.
    pub async fn put_segment(&self, name: &str, bytes: &[u8]) -> Result<Put, String> {
        self.forget();
        let at = self.at(name);
        let create = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let payload = PutPayload::from(bytes.to_vec());
        let put = within(self.limit, || format!("writing {at}"), async {
            Ok(self.store.put_opts(&self.key(name)?, payload, create).await)
        })
        .await?;
        match put {
            Ok(_) => Ok(Put::Written),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                match self.get_segment(name).await? {
                    Some(there) if there == bytes => Ok(Put::AlreadyThere),
                    Some(_) => Err(format!(
                        "{at} exists with other content than this fold wrote; it is never overwritten (check what wrote it, and verify-archive)"
                    )),
                    None => Err(format!(
                        "{at}: the store refused to create it as already there, yet it cannot be read (try again next tick)"
                    )),
                }
            }
            Err(e @ object_store::Error::NotImplemented { .. }) => Err(format!(
                "writing {at}: the store does not offer a conditional create ({e}); crewlet writes a segment only where it cannot overwrite one"
            )),
            Err(e) => Err(format!("writing {at}: {}", self.said(access::Op::Write, &e))),
        }
    }

    /// Replaces segment `name` with `bytes` (an erasure's rewrite of the
    /// same range): one PUT, which the store applies whole or not at all,
    /// so a reader sees the old segment or the new one, never a part.
    pub async fn replace_segment(&self, name: &str, bytes: &[u8], op: &str) -> Result<(), String> {
        self.forget();
        let at = self.at(name);
        let payload = PutPayload::from(bytes.to_vec());
        within(self.limit, || format!("rewriting {at} ({op})"), async {
            self.store
                .put_opts(&self.key(name)?, payload, PutOptions::default())
                .await
                .map(|_| ())
                .map_err(|e| {
                    format!(
                        "rewriting {at} ({op}): {}",
                        self.said(access::Op::Write, &e)
                    )
                })
        })
        .await
    }

    fn forget(&self) {
        if let Ok(mut kept) = self.kept.lock() {
            kept.by_log.clear();
            kept.writes += 1;
        }
    }

    /// The listing of `stream`'s `generation` this process took last,
    /// while `settled` says it may stand (it ends where the published
    /// frontier does) and it has served fewer than [`REUSE_AT_MOST`] ticks,
    /// and `true`; else a fresh one, kept, and `false`. A tick with nothing
    /// to fold then asks the store nothing (docs/decisions.md, Cloud
    /// archives through object_store).
    pub async fn listing_unless_settled(
        &self,
        stream: &str,
        generation: u64,
        settled: impl Fn(&[Listed]) -> bool,
    ) -> (Result<Vec<Listed>, ListError>, bool) {
        if let Ok(mut kept) = self.kept.lock() {
            if let Some((all, reused)) = kept.by_log.get_mut(&(stream.to_string(), generation)) {
                if *reused < REUSE_AT_MOST && settled(all) {
                    *reused += 1;
                    return (Ok(all.clone()), true);
                }
            }
        }
        (self.listing(stream, generation).await, false)
    }

    /// Every segment of `stream`'s `generation`, in sequence order (only
    /// that log's objects are listed, so the listing grows with its own
    /// archive, not every log's), kept for
    /// [`Client::listing_unless_settled`]. A bucket that does not exist
    /// says so.
    pub async fn listing(&self, stream: &str, generation: u64) -> Result<Vec<Listed>, ListError> {
        let id = self.remote.id();
        let writes_before = self.kept.lock().map(|k| k.writes).ok();
        let listed = within(self.limit, || format!("listing {id}"), async {
            let prefix = self.key(&format!("{stream}/{generation}"))?;
            let mut all = Vec::new();
            let mut items = self.store.list(Some(&prefix));
            while let Some(item) = items.next().await {
                let meta =
                    item.map_err(|e| format!("listing {id}: {}", self.said(access::Op::List, &e)))?;
                let key = meta.location.to_string();
                let Some(name) = self.remote.name_of(&key) else {
                    continue;
                };
                if let Some((s, g, first_seq, last_seq)) = segment::parse_name(name) {
                    if s == stream && g == generation {
                        all.push(Listed {
                            name: name.to_string(),
                            first_seq,
                            last_seq,
                            bytes: meta.size,
                        });
                    }
                }
            }
            all.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(all)
        })
        .await;
        if let (Ok(all), Ok(mut kept)) = (&listed, self.kept.lock()) {
            // A write begun while this listing ran may be missing from it.
            if Some(kept.writes) == writes_before {
                kept.by_log
                    .insert((stream.to_string(), generation), (all.clone(), 0));
            }
        }
        listed.map_err(|message| ListError {
            // A missing cloud bucket is the operator's to create (crewlet
            // creates no cloud bucket): not `init`'s remedy.
            missing: false,
            message,
        })
    }
}

/// What an object_store error means to an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The credentials are known and lack the permission.
    Denied,
    /// The credentials are not the store's (an unknown key, a bad secret).
    Unknown,
    /// The object, or the bucket, is not there.
    Missing,
    Other,
}

/// The kind of `e`. A listing's refusal comes wrapped in a `Generic` error
/// (the crate maps the status of single-object calls only), so the
/// status and the S3 error code are read from the error's own words, the
/// one place the crate leaves them.
pub(crate) fn kind(e: &object_store::Error) -> Kind {
    let mut words = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        words.push(' ');
        words.push_str(&s.to_string());
        source = s.source();
    }
    let unknown = [
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidClientTokenId",
        "ExpiredToken",
        "AuthenticationFailed",
    ]
    .iter()
    .any(|c| words.contains(c));
    match e {
        _ if unknown => Kind::Unknown,
        object_store::Error::PermissionDenied { .. } => Kind::Denied,
        object_store::Error::Unauthenticated { .. } => Kind::Unknown,
        object_store::Error::NotFound { .. } => Kind::Missing,
        _ if words.contains("status code: 403") => Kind::Denied,
        _ if words.contains("status code: 401") => Kind::Unknown,
        _ if words.contains("status code: 404") || words.contains("NoSuchBucket") => Kind::Missing,
        _ => Kind::Other,
    }
}

impl Client {
    /// An object_store error in words an operator acts on: a refusal
    /// names the permission `op` needs, in the cloud's own name.
    pub(crate) fn said(&self, op: access::Op, e: &object_store::Error) -> String {
        match kind(e) {
            Kind::Denied => format!(
                "these credentials may not {}: grant {} ({e})",
                op.verb(),
                access::permission(self.remote.cloud, op)
            ),
            Kind::Unknown => format!(
                "the store does not accept these credentials (check credentials_file, or the cloud's environment variables and files) ({e})"
            ),
            Kind::Missing | Kind::Other => e.to_string(),
        }
    }
}
