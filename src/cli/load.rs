//! What every command needs before it acts: the configuration file found
//! and checked, the connection settings resolved as the `nats` CLI resolves
//! them, the broker connected (or embedded), and the who of `-by`.

use super::*;

/// Exit 1, naming the command that creates it, when the domain's stream
/// does not exist on a broker that answers (exit 3 is for a broker that
/// does not: cron pages on the code).
pub(crate) async fn require_stream(
    broker: &crate::broker::Broker,
    config: &Config,
    domain: &crate::config::Domain,
) -> Result<(), Exit> {
    match broker.stream_config(&domain.stream).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            crate::cli::say::error_coded(
                "stream_missing",
                format_args!(
                    "stream {} does not exist (domain {}); create it: {}",
                    domain.stream,
                    domain.name,
                    crate::stream_check::create_command(domain, config.buckets.replicas)
                ),
            );
            Err(Exit::Attention)
        }
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            Err(Exit::Unreachable)
        }
    }
}

/// Exit 1 naming `init` when bucket `name` does not exist on a broker that
/// answers.
pub(crate) async fn require_bucket(broker: &crate::broker::Broker, name: &str) -> Result<(), Exit> {
    match broker.bucket_settings(name).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            crate::cli::say::error_coded(
                "bucket_missing",
                format_args!("bucket {name} does not exist; create it: crewlet retention init"),
            );
            Err(Exit::Attention)
        }
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            Err(Exit::Unreachable)
        }
    }
}

/// A configuration that has been found, read and validated.
pub struct Loaded {
    pub path: PathBuf,
    pub config: Config,
    /// The file's warnings (a loaded file has no errors).
    pub warnings: Vec<config::Problem>,
    /// The server dialled and where it came from.
    pub server: Server,
}

/// Finds and reads the configuration text. Errors are printed; the caller
/// exits 2.
pub fn read_config_text(cli: &Cli) -> Result<(PathBuf, String), Exit> {
    let env = std::env::var("CREWLET_CONFIG").ok();
    let path = match resolve::config_path(cli.config.as_deref(), env.as_deref(), Path::is_file) {
        Ok(p) => p,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Err(Exit::Usage);
        }
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(e) => {
            crate::cli::say::error(format_args!("{}: cannot read: {e}", path.display()));
            Err(Exit::Usage)
        }
    }
}

/// Loads the configuration for a command that acts on it: any error is
/// printed, every one, and nothing is read from or written to the broker.
/// The connection settings in `config.nats` are the effective ones (flags,
/// environment, context, file).
pub fn load_config(cli: &Cli) -> Result<Loaded, Exit> {
    let (path, text) = read_config_text(cli)?;
    let checked = config::check(&text);
    let file = path.display().to_string();
    match checked.config {
        Some(mut config) => {
            let server = apply_connection(cli, checked.has_nats_section, &mut config)?;
            Ok(Loaded {
                path,
                config,
                warnings: checked.problems,
                server,
            })
        }
        None => {
            for p in checked.problems.iter().filter(|p| p.is_error()) {
                eprintln!("{}", p.render(&file));
            }
            eprintln!("run `crewlet validate` for the full report");
            Err(Exit::Usage)
        }
    }
}

/// The server dialled and where it came from, for `validate` and `status`.
#[derive(Debug, Clone)]
pub struct Server {
    /// Redacted.
    pub url: String,
    pub source: connection::Source,
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (from {})", self.url, self.source)
    }
}

/// The connection flags as the layering takes them.
pub fn connection_flags(cli: &Cli) -> connection::Flags {
    connection::Flags {
        server: cli.nats_url.clone(),
        creds: cli.creds.clone(),
        nkey: cli.nkey.clone(),
        user: cli.user.clone(),
        password: cli.password.clone(),
        token: cli.token.clone(),
        tlscert: cli.tlscert.clone(),
        tlskey: cli.tlskey.clone(),
        tlsca: cli.tlsca.clone(),
        context: cli.context.clone(),
    }
}

/// Replaces `config.nats`'s connection settings with the effective ones
/// (docs/runbook.md's precedence). A context that cannot be read is a
/// configuration error (exit 2).
pub fn apply_connection(
    cli: &Cli,
    file_has_nats: bool,
    config: &mut Config,
) -> Result<Server, Exit> {
    let var = |k: &str| std::env::var(k).ok();
    let flags = connection_flags(cli);
    let dir = connection::nats_dir(var("XDG_CONFIG_HOME").as_deref(), var("HOME").as_deref());
    let selected = dir.as_deref().and_then(connection::selected_context);
    let chosen = connection::choose_context(
        flags.context.as_deref(),
        var("NATS_CONTEXT").as_deref(),
        selected.as_deref(),
        file_has_nats,
    );
    let context = match (&chosen, &dir) {
        (Some(c), Some(d)) => match connection::load_context(d, c) {
            Ok(ctx) => Some((c, ctx)),
            Err(e) => {
                crate::cli::say::error(format_args!("{e}"));
                return Err(Exit::Usage);
            }
        },
        (Some(c), None) => {
            crate::cli::say::error(format_args!(
                "nats context {} (from {}): neither $XDG_CONFIG_HOME nor $HOME is set, so there is no context directory",
                c.name, c.by
            ));
            return Err(Exit::Usage);
        }
        (None, _) => None,
    };
    let home = var("HOME");
    let effective = connection::effective(
        &config.nats,
        &flags,
        &var,
        context.as_ref().map(|(c, ctx)| (*c, ctx)),
        home.as_deref(),
    );
    config.nats = effective.nats;
    Ok(Server {
        url: config::redact_url(&effective.url),
        source: effective.url_source,
    })
}

/// The configured streams, for "not configured" errors.
/// The configured domain `-stream` names (its stream or its name), or the
/// error that lists those configured.
pub fn domain_named(config: &Config, stream: &str) -> Result<config::Domain, String> {
    config.domain(stream).cloned().ok_or_else(|| {
        format!(
            "-stream {stream:?} is not configured; configured: {}",
            configured(config)
        )
    })
}

pub fn configured(config: &Config) -> String {
    config.configured()
}

/// Columns two spaces apart, the last unpadded.
pub fn columns(rows: &[Vec<String>]) -> String {
    crate::report::table(rows, "")
}

pub fn by_name(flag: Option<&str>) -> String {
    let named = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    named(flag.map(str::to_string))
        .or_else(|| named(account_name()))
        .or_else(|| named(std::env::var("USER").ok()))
        .or_else(|| named(std::env::var("LOGNAME").ok()))
        .unwrap_or_else(|| "unknown".into())
}

/// The login name of the process's real user, from the password database.
pub(super) fn account_name() -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero passwd is a valid value for an out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live memory of the size given;
    // getpwuid_r writes the entry's strings into `buf` and points `pw` at
    // them, and sets `found` to null when there is no entry.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into `buf`, NUL-terminated, while `buf` lives.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    name.to_str().ok().map(str::to_string)
}

/// The broker URL to dial (the effective `nats.url`, see
/// [`apply_connection`]), or `None` when it is the embedded broker.
pub fn target_url(config: &Config) -> Option<String> {
    let url = config
        .nats
        .url
        .clone()
        .unwrap_or_else(|| config::DEFAULT_URL.to_string());
    (url.trim() != EMBEDDED_URL).then_some(url)
}

/// Connects, starting the embedded broker first when `nats.url` is
/// `embedded` (and `--nats-url` does not override it).
pub async fn connect_or_embed(
    config: &Config,
) -> Result<(Broker, Option<crate::embedded::EmbeddedServer>), Exit> {
    if target_url(config).is_some() {
        return connect(config).await.map(|b| (b, None));
    }
    let server = match crate::embedded::EmbeddedServer::start(
        &config.nats.embedded_dir,
        config.nats.embedded_port,
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Err(Exit::Unreachable);
        }
    };
    match broker::connect(
        &server.url,
        &config.nats,
        &format!("crewlet/{}", config.node.id),
    )
    .await
    {
        Ok(b) => Ok((b, Some(server))),
        Err(e) => {
            say_connect_error(&e);
            server.stop().await;
            Err(if e.is_configuration() {
                Exit::Usage
            } else {
                Exit::Unreachable
            })
        }
    }
}

/// Says why a connection failed; a refusal of the credentials with its
/// own code, `broker_refused` (in `--json`: `"error": "broker_refused"`),
/// as the running sidecar's alarm names it.
fn say_connect_error(e: &broker::ConnectError) {
    match e {
        broker::ConnectError::Refused { .. } => {
            crate::cli::say::error_coded("broker_refused", format_args!("{e}"))
        }
        _ => crate::cli::say::error(format_args!("{e}")),
    }
}

/// Connects as configured. An unreachable broker is printed (URL redacted)
/// and ends the command with exit 3.
pub async fn connect(config: &Config) -> Result<Broker, Exit> {
    let Some(url) = target_url(config) else {
        crate::cli::say::error(format_args!("nats.url is `embedded`, which only `crewlet retention run` and `crewlet demo` start; pass --nats-url to reach a running broker"));
        return Err(Exit::Usage);
    };
    match broker::connect(&url, &config.nats, &format!("crewlet/{}", config.node.id)).await {
        Ok(b) => Ok(b),
        Err(e) => {
            say_connect_error(&e);
            // A refused credential, an unreadable creds/nkey/TLS file or a
            // bad URL is configuration (2), not the network (3).
            Err(if e.is_configuration() {
                Exit::Usage
            } else {
                Exit::Unreachable
            })
        }
    }
}
