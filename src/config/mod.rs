//! The YAML configuration (docs/configuration.md § Configuration reference): its types, named
//! defaults, a pure parser and `validate()`, which returns every problem
//! with the line it stands on, not just the first.
//!
//! Parsing is done section by section (and domain by domain) so that a type
//! error in one place does not hide a range error in another: an operator
//! fixing a file at 3 a.m. should see all of it in one run.

pub mod connection;
pub mod duration;
mod locate;
pub mod resolve;
pub mod size;

use crate::rows::Invalid;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rows;
pub use locate::SourceMap;

mod checks;
mod cloud;
mod parse;
mod types;

use checks::*;
pub use parse::check;
pub use types::*;

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One thing wrong with a configuration (or with the broker it names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    /// The field path, e.g. `domains[1].name`.
    pub field: String,
    /// 1-based line in the file, when the field (or its section) is there.
    pub line: Option<usize>,
    /// What is wrong and what is allowed.
    pub message: String,
    /// A stable name for problems that are also alarms
    /// (`broker_retention_bypass`).
    pub code: Option<&'static str>,
    /// While `check` runs: what the parser took out for this problem
    /// (none once `check` returns).
    pub(crate) mark: Option<parse::Mark>,
}

impl Problem {
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            mark: None,
            severity: Severity::Error,
            field: field.into(),
            line: None,
            message: message.into(),
            code: None,
        }
    }

    pub fn warning(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            mark: None,
            severity: Severity::Warning,
            ..Problem::error(field, message)
        }
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `error: <file>:<line>: <field>: <message>`.
    pub fn render(&self, file: &str) -> String {
        let word = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let at = match self.line {
            Some(line) => format!("{file}:{line}"),
            None => file.to_string(),
        };
        let code = self.code.map(|c| format!("{c}: ")).unwrap_or_default();
        format!("{word}: {at}: {}: {code}{}", self.field, self.message)
    }
}

/// The outcome of reading a configuration text: the config when nothing is
/// an error, every problem found, and the source map for later problems
/// (the broker checks) to find their lines.
#[derive(Debug, Clone)]
pub struct Checked {
    pub config: Option<Config>,
    pub problems: Vec<Problem>,
    pub source: SourceMap,
    /// The file has a `nats:` section (the `nats` CLI's selected context is
    /// used only for a file without one).
    pub has_nats_section: bool,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(Problem::is_error)
    }
}

/// One server of a list as the client takes it: `host:port` (or a bare
/// `host`) without a scheme is a `nats://` server, as the `nats` CLI and
/// NATS's own clients read it.
pub fn server_url(url: &str) -> String {
    let url = url.trim();
    if url.contains("://") || url.is_empty() {
        url.to_string()
    } else {
        format!("nats://{url}")
    }
}

/// Checks one server URL of a list: `nats`, `tls`, `ws` or `wss` (no
/// scheme: `nats`, [`server_url`]).
pub fn check_url(url: &str) -> Result<(), Invalid> {
    let allowed = "nats://host:port, tls://host:port, ws(s)://host:port, host:port, or `embedded`";
    let url = server_url(url);
    let url = url.as_str();
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{:?} is not a URL; allowed: {allowed}", redact_url(url)))?;
    if !matches!(scheme, "nats" | "tls" | "ws" | "wss") {
        return Err(Invalid::from(format!(
            "scheme {scheme:?} is not supported; allowed: {allowed}"
        )));
    }
    let host = rest.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(Invalid::from(format!(
            "{:?} names no host; allowed: {allowed}",
            redact_url(url)
        )));
    }
    Ok(())
}

/// A URL fit to print: any `user:password@` or `token@` is replaced.
/// Which credentials the configuration gives, for a refusal's remedy
/// (never the secret itself).
pub fn credentials_named(n: &NatsConfig) -> String {
    if let Some(c) = &n.creds {
        format!("nats.creds {}", c.display())
    } else if let Some(k) = &n.nkey {
        format!("nats.nkey {}", k.display())
    } else if let Some(u) = &n.user {
        format!("nats.user {u} and its password")
    } else if n.token.is_some() {
        "nats.token".into()
    } else {
        "none are configured: nats.creds, nkey, user or token".into()
    }
}

pub fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests;
