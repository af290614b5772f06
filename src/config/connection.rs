//! Where the connection settings come from, as the `nats` CLI takes them:
//! flags, then the environment, then a `nats` CLI context, then the
//! configuration file, then the local default (docs/configuration.md, Connecting).
//!
//! The server URL, the TLS files and the authentication each come from the
//! highest source that sets them. Authentication (creds, nkey, user and
//! password, token) is taken whole from one source: `--token T` over a file
//! with `creds:` means the token, not both; only a user or a password
//! given alone is completed from below (docs/decisions.md).
//!
//! Pure but for [`load_context`] and [`selected_context`], which read the
//! context files.

use crate::rows::Invalid;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::DEFAULT_URL;
use super::{NatsConfig, TlsConfig};

/// The connection flags every command takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    pub server: Option<String>,
    pub creds: Option<PathBuf>,
    pub nkey: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub tlscert: Option<PathBuf>,
    pub tlskey: Option<PathBuf>,
    pub tlsca: Option<PathBuf>,
    pub context: Option<String>,
}

/// Where a setting came from, for `validate` and `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(&'static str),
    Env(&'static str),
    Context(String),
    File,
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "{flag}"),
            Source::Env(var) => write!(f, "${var}"),
            Source::Context(name) => write!(f, "nats context {name}"),
            Source::File => write!(f, "the configuration file"),
            Source::Default => write!(f, "the default"),
        }
    }
}

/// A `nats` CLI context file (`~/.config/nats/context/NAME.json`): the
/// fields crewlet uses. The file has more (description, JetStream domain,
/// colour scheme, …), which are not ours to judge; an empty string is unset,
/// as the `nats` CLI writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Context {
    pub url: String,
    pub creds: String,
    pub nkey: String,
    pub user: String,
    pub password: String,
    pub token: String,
    pub cert: String,
    pub key: String,
    pub ca: String,
}

/// The context in use and why: its name and what named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub name: String,
    pub by: &'static str,
}

/// Which context applies: `--context`, else `$NATS_CONTEXT`, else the one
/// the `nats` CLI has selected (`context.txt`), the last only when the
/// configuration file has no `nats:` section (a file that says how to
/// connect is not overridden by a desktop's selection).
pub fn choose_context(
    flag: Option<&str>,
    env: Option<&str>,
    selected: Option<&str>,
    file_has_nats: bool,
) -> Option<Chosen> {
    let named = |s: Option<&str>| {
        s.map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    if let Some(name) = named(flag) {
        return Some(Chosen {
            name,
            by: "--context",
        });
    }
    if let Some(name) = named(env) {
        return Some(Chosen {
            name,
            by: "$NATS_CONTEXT",
        });
    }
    if file_has_nats {
        return None;
    }
    named(selected).map(|name| Chosen {
        name,
        by: "the nats CLI's selected context",
    })
}

/// The `nats` CLI's configuration directory: `$XDG_CONFIG_HOME/nats`, else
/// `~/.config/nats`.
pub fn nats_dir(xdg: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    xdg.filter(|x| !x.is_empty())
        .map(|x| Path::new(x).join("nats"))
        .or_else(|| {
            home.filter(|h| !h.is_empty())
                .map(|h| Path::new(h).join(".config").join("nats"))
        })
}

/// The selected context's name from `context.txt`, if there is one.
pub fn selected_context(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("context.txt"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Reads context `name` from `dir/context/NAME.json`. A missing or
/// malformed file is an error naming the path (exit 2).
pub fn load_context(dir: &Path, chosen: &Chosen) -> Result<Context, Invalid> {
    let name = &chosen.name;
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(Invalid::from(format!(
            "nats context {name:?} (from {}): a context name has no '/', '\\' or leading '.'",
            chosen.by
        )));
    }
    let path = dir.join("context").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "no such nats context {name} (from {}): no file {}; `nats context ls` lists them",
                chosen.by,
                path.display()
            )
        } else {
            format!("cannot read nats context {}: {e}", path.display())
        }
    })?;
    serde_json::from_str(&text).map_err(|e| {
        Invalid(format!(
            "nats context {} is not valid JSON: {e}",
            path.display()
        ))
    })
}

/// The connection settings in effect, and where the server URL came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    pub nats: NatsConfig,
    pub url: String,
    pub url_source: Source,
}

/// One source's connection settings, before they are layered.
#[derive(Debug, Clone, Default)]
struct Layer {
    url: Option<String>,
    auth: Auth,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

#[derive(Debug, Clone, Default)]
struct Auth {
    creds: Option<PathBuf>,
    nkey: Option<PathBuf>,
    user: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

impl Auth {
    fn is_set(&self) -> bool {
        self.creds.is_some()
            || self.nkey.is_some()
            || self.user.is_some()
            || self.password.is_some()
            || self.token.is_some()
    }
}

fn text(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

fn path(s: Option<String>, home: Option<&str>) -> Option<PathBuf> {
    text(s).map(|p| expand_home(&p, home))
}

/// `~/x` as the `nats` CLI writes paths in contexts.
fn expand_home(p: &str, home: Option<&str>) -> PathBuf {
    match (p.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => Path::new(h).join(rest),
        _ => PathBuf::from(p),
    }
}

/// Layers flags, environment, context and file (docs/runbook.md's precedence).
/// `env` answers a variable's value; `home` expands `~/` in context paths.
pub fn effective(
    file: &NatsConfig,
    flags: &Flags,
    env: &dyn Fn(&str) -> Option<String>,
    context: Option<(&Chosen, &Context)>,
    home: Option<&str>,
) -> Effective {
    let flag = Layer {
        url: text(flags.server.clone()),
        auth: Auth {
            creds: flags.creds.clone(),
            nkey: flags.nkey.clone(),
            user: text(flags.user.clone()),
            password: flags.password.clone(),
            token: text(flags.token.clone()),
        },
        ca: flags.tlsca.clone(),
        cert: flags.tlscert.clone(),
        key: flags.tlskey.clone(),
    };
    let environment = Layer {
        url: text(env("NATS_URL")),
        auth: Auth {
            creds: path(env("NATS_CREDS"), None),
            nkey: path(env("NATS_NKEY"), None),
            user: text(env("NATS_USER")),
            password: text(env("NATS_PASSWORD")),
            token: text(env("NATS_TOKEN")),
        },
        ..Layer::default()
    };
    let ctx = context
        .map(|(_, c)| Layer {
            url: text(Some(c.url.clone())),
            auth: Auth {
                creds: path(Some(c.creds.clone()), home),
                nkey: path(Some(c.nkey.clone()), home),
                user: text(Some(c.user.clone())),
                password: text(Some(c.password.clone())),
                token: text(Some(c.token.clone())),
            },
            ca: path(Some(c.ca.clone()), home),
            cert: path(Some(c.cert.clone()), home),
            key: path(Some(c.key.clone()), home),
        })
        .unwrap_or_default();
    let tls = file.tls.clone().unwrap_or_default();
    let from_file = Layer {
        url: text(file.url.clone()),
        auth: Auth {
            creds: file.creds.clone(),
            nkey: file.nkey.clone(),
            user: file.user.clone(),
            password: file.password.clone(),
            token: file.token.clone(),
        },
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
    };
    let context_source =
        || Source::Context(context.map(|(c, _)| c.name.clone()).unwrap_or_default());
    let layers: [(&Layer, Source); 4] = [
        (&flag, Source::Flag("--server")),
        (&environment, Source::Env("NATS_URL")),
        (&ctx, context_source()),
        (&from_file, Source::File),
    ];
    let (url, url_source) = layers
        .iter()
        .find_map(|(l, s)| l.url.clone().map(|u| (u, s.clone())))
        .unwrap_or_else(|| (DEFAULT_URL.to_string(), Source::Default));
    // The highest source that sets any authentication supplies it; a user
    // or password it lacks beside the other comes from the next source that
    // has one (`--password` over a context's user and old password).
    let mut auth = layers
        .iter()
        .map(|(l, _)| &l.auth)
        .find(|a| a.is_set())
        .cloned()
        .unwrap_or_default();
    if auth.user.is_some() != auth.password.is_some() {
        for (l, _) in &layers {
            if auth.user.is_none() {
                auth.user = l.auth.user.clone();
            }
            if auth.password.is_none() {
                auth.password = l.auth.password.clone();
            }
        }
    }
    let first = |pick: fn(&Layer) -> Option<PathBuf>| layers.iter().find_map(|(l, _)| pick(l));
    let (ca, cert, key) = (
        first(|l| l.ca.clone()),
        first(|l| l.cert.clone()),
        first(|l| l.key.clone()),
    );
    let mut nats = file.clone();
    nats.url = Some(url.clone());
    nats.creds = auth.creds;
    nats.nkey = auth.nkey;
    nats.user = auth.user;
    nats.password = auth.password;
    nats.token = auth.token;
    nats.tls =
        (ca.is_some() || cert.is_some() || key.is_some()).then_some(TlsConfig { ca, cert, key });
    Effective {
        nats,
        url,
        url_source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn flags_then_env_then_context_then_file_then_default() {
        let mut file = NatsConfig::default();
        let none = env_of(&[]);
        let e = effective(&file, &Flags::default(), &none, None, None);
        assert_eq!(
            (e.url.as_str(), e.url_source),
            (DEFAULT_URL, Source::Default)
        );

        file.url = Some("nats://file:1".into());
        let e = effective(&file, &Flags::default(), &none, None, None);
        assert_eq!(
            (e.url.as_str(), e.url_source),
            ("nats://file:1", Source::File)
        );

        let chosen = Chosen {
            name: "prod".into(),
            by: "--context",
        };
        let ctx = Context {
            url: "nats://ctx:2".into(),
            ..Context::default()
        };
        let e = effective(&file, &Flags::default(), &none, Some((&chosen, &ctx)), None);
        assert_eq!(e.url_source, Source::Context("prod".into()));
        assert_eq!(e.url, "nats://ctx:2");

        let env = env_of(&[("NATS_URL", "nats://env:3")]);
        let e = effective(&file, &Flags::default(), &env, Some((&chosen, &ctx)), None);
        assert_eq!(
            (e.url.as_str(), e.url_source),
            ("nats://env:3", Source::Env("NATS_URL"))
        );

        let flags = Flags {
            server: Some("nats://flag:4".into()),
            ..Flags::default()
        };
        let e = effective(&file, &flags, &env, Some((&chosen, &ctx)), None);
        assert_eq!(
            (e.url.as_str(), e.url_source),
            ("nats://flag:4", Source::Flag("--server"))
        );
        assert_eq!(e.nats.url.as_deref(), Some("nats://flag:4"));
    }

    #[test]
    fn authentication_comes_whole_from_one_source() {
        let file = NatsConfig {
            creds: Some("/etc/crewlet/sidecar.creds".into()),
            ..NatsConfig::default()
        };
        let env = env_of(&[("NATS_TOKEN", "s3cret")]);
        let e = effective(&file, &Flags::default(), &env, None, None);
        assert_eq!(e.nats.token.as_deref(), Some("s3cret"));
        assert_eq!(
            e.nats.creds, None,
            "the file's creds are not sent beside the token"
        );

        let flags = Flags {
            user: Some("ops".into()),
            password: Some("pw".into()),
            ..Flags::default()
        };
        let e = effective(&file, &flags, &env, None, None);
        assert_eq!(
            (
                e.nats.user.as_deref(),
                e.nats.password.as_deref(),
                e.nats.token.as_deref()
            ),
            (Some("ops"), Some("pw"), None)
        );
        let e = effective(&file, &Flags::default(), &env_of(&[]), None, None);
        assert_eq!(
            e.nats.creds, file.creds,
            "the file's own when nothing above sets any"
        );

        // A password alone keeps the user of the source below.
        let env = env_of(&[("NATS_USER", "ops"), ("NATS_PASSWORD", "old")]);
        let flags = Flags {
            password: Some("new".into()),
            ..Flags::default()
        };
        let e = effective(&file, &flags, &env, None, None);
        assert_eq!(
            (
                e.nats.user.as_deref(),
                e.nats.password.as_deref(),
                e.nats.creds
            ),
            (Some("ops"), Some("new"), None)
        );
    }

    #[test]
    fn context_paths_expand_home_and_tls_fields_layer_one_by_one() {
        let chosen = Chosen {
            name: "c".into(),
            by: "$NATS_CONTEXT",
        };
        let ctx = Context {
            creds: "~/keys/ops.creds".into(),
            ca: "~/ca.pem".into(),
            ..Context::default()
        };
        let flags = Flags {
            tlscert: Some("/flag/cert.pem".into()),
            ..Flags::default()
        };
        let file = NatsConfig {
            tls: Some(TlsConfig {
                ca: Some("/file/ca.pem".into()),
                cert: Some("/file/cert.pem".into()),
                key: Some("/file/key.pem".into()),
            }),
            ..NatsConfig::default()
        };
        let e = effective(
            &file,
            &flags,
            &env_of(&[]),
            Some((&chosen, &ctx)),
            Some("/home/op"),
        );
        assert_eq!(e.nats.creds, Some(PathBuf::from("/home/op/keys/ops.creds")));
        let tls = e.nats.tls.expect("tls");
        assert_eq!(tls.ca, Some(PathBuf::from("/home/op/ca.pem")));
        assert_eq!(tls.cert, Some(PathBuf::from("/flag/cert.pem")));
        assert_eq!(tls.key, Some(PathBuf::from("/file/key.pem")));
    }

    #[test]
    fn which_context() {
        let c = |f, e, s, n| choose_context(f, e, s, n).map(|c| (c.name, c.by));
        assert_eq!(
            c(Some("a"), Some("b"), Some("s"), true),
            Some(("a".into(), "--context"))
        );
        assert_eq!(
            c(None, Some("b"), Some("s"), true),
            Some(("b".into(), "$NATS_CONTEXT"))
        );
        assert_eq!(
            c(None, None, Some("s"), true),
            None,
            "a file with nats: wins over the selection"
        );
        assert_eq!(
            c(None, None, Some("s"), false).map(|x| x.0),
            Some("s".to_string())
        );
        assert_eq!(c(None, Some(" "), None, false), None);
    }

    #[test]
    fn nats_cli_directory() {
        assert_eq!(
            nats_dir(Some("/x"), Some("/h")),
            Some(PathBuf::from("/x/nats"))
        );
        assert_eq!(
            nats_dir(None, Some("/h")),
            Some(PathBuf::from("/h/.config/nats"))
        );
        assert_eq!(nats_dir(Some(""), None), None);
    }
}
