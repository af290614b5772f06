//! Bearer tokens and their scopes (docs/http.md, Tokens and scopes). The file
//! holds each token's name, the SHA-256 of the token (never the token) and
//! its scopes; a presented token is hashed and compared with every entry
//! in constant time. The file is read again whenever it changes, so a
//! `crewlet token add` or `revoke` takes effect without a restart.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What a token may do: each route declares one (docs/http.md, Tokens and
/// scopes). `trim` is never implied by another: it is irreversible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Read,
    Trim,
    Gate,
    Ack,
    Capacity,
    Erase,
}

impl Scope {
    pub const ALL: [Scope; 6] = [
        Scope::Read,
        Scope::Trim,
        Scope::Gate,
        Scope::Ack,
        Scope::Capacity,
        Scope::Erase,
    ];

    /// Its name in the tokens file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Trim => "trim",
            Scope::Gate => "gate",
            Scope::Ack => "ack",
            Scope::Capacity => "capacity",
            Scope::Erase => "erase",
        }
    }

    /// The scope a name names, if any.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every scope's name, for messages.
fn scope_names() -> String {
    Scope::ALL.map(Scope::as_str).join(", ")
}

/// One entry of the tokens file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    /// SHA-256 of the token, lower-case hex.
    pub sha256: String,
    pub scopes: Vec<String>,
}

impl Entry {
    /// Whether the token carries `scope`.
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes.iter().any(|s| Scope::parse(s) == Some(scope))
    }
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFile {
    #[serde(default)]
    pub tokens: Vec<Entry>,
}

/// The SHA-256 of a token, hex, as the file stores it.
pub fn hash(token: &str) -> String {
    crate::human::hex(&Sha256::digest(token.as_bytes()))
}

/// Checks a scope list as given on the command line (`read,trim`).
pub fn parse_scopes(text: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: Vec<Scope> = Vec::new();
    for s in text.split(',').map(str::trim) {
        let Some(scope) = Scope::parse(s) else {
            return Err(format!("{s:?} is not a scope; allowed: {}", scope_names()));
        };
        if !seen.contains(&scope) {
            seen.push(scope);
            out.push(scope.as_str().to_string());
        }
    }
    Ok(out)
}

impl TokenFile {
    /// Parses and checks the file's text: names by the node id rule and
    /// unique, hashes of 64 hex digits, known scopes.
    pub fn parse(text: &str) -> Result<TokenFile, String> {
        let file: TokenFile = if text.trim().is_empty() {
            TokenFile::default()
        } else {
            serde_yaml::from_str(text).map_err(|e| format!("not a tokens file: {e}"))?
        };
        for (i, t) in file.tokens.iter().enumerate() {
            crate::rows::check_node_id(&t.name)
                .map_err(|e| format!("tokens[{i}].name: token name {e}"))?;
            if file.tokens[..i].iter().any(|o| o.name == t.name) {
                return Err(format!("tokens[{i}].name: {:?} is listed twice", t.name));
            }
            if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "tokens[{i}].sha256: not a SHA-256 in hex (64 hex digits)"
                ));
            }
            for s in &t.scopes {
                if Scope::parse(s).is_none() {
                    return Err(format!(
                        "tokens[{i}].scopes: {s:?} is not a scope; allowed: {}",
                        scope_names()
                    ));
                }
            }
        }
        Ok(file)
    }

    /// The entry a presented token matches, compared in constant time
    /// against every entry (so the time taken says nothing of which, or
    /// whether, one matched).
    pub fn find(&self, token: &str) -> Option<&Entry> {
        let presented = hash(token);
        let mut found = None;
        for t in &self.tokens {
            let same: bool = presented
                .as_bytes()
                .ct_eq(t.sha256.to_ascii_lowercase().as_bytes())
                .into();
            if same && found.is_none() {
                found = Some(t);
            }
        }
        found
    }

    pub fn to_text(&self) -> Result<String, String> {
        serde_yaml::to_string(self).map_err(|e| e.to_string())
    }
}

/// A new token: 256 random bits from the OS, URL-safe.
pub fn mint() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness from the OS: {e}"))?;
    use base64::Engine;
    Ok(format!(
        "crewlet_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// Reads the file (missing: no tokens).
pub fn load(path: &Path) -> Result<TokenFile, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => TokenFile::parse(&t).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TokenFile::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the file whole (a temporary file, then a rename), readable by
/// its owner only: the hashes are not secrets, but the names and scopes
/// say who may trim.
pub fn store(path: &Path, file: &TokenFile) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text = file.to_text()?;
    let tmp = path.with_extension("tmp");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
    written
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The file's modification time and size when read, and what it held.
type Stamped = (Option<(SystemTime, u64)>, Result<TokenFile, String>);

/// The tokens file as the server sees it: read again when its size or
/// modification time changes.
#[derive(Debug)]
pub struct Watched {
    path: Option<PathBuf>,
    stamp: std::sync::Mutex<Stamped>,
}

impl Watched {
    pub fn new(path: Option<PathBuf>) -> Watched {
        Watched {
            path,
            stamp: std::sync::Mutex::new((None, Ok(TokenFile::default()))),
        }
    }

    /// The current tokens, or why the file cannot be read (then nothing is
    /// authorised: an unreadable file never lets a request through).
    pub fn current(&self) -> Result<TokenFile, String> {
        let Some(path) = &self.path else {
            return Err("no http.tokens_file is configured".into());
        };
        let now = std::fs::metadata(path)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
        let mut guard = match self.stamp.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if guard.0.is_none() || guard.0 != now {
            let loaded = load(path);
            if let Err(e) = &loaded {
                tracing::warn!(event = "tokens_unreadable", error = %e, "the tokens file cannot be read; every request that needs a token is refused");
            }
            *guard = (now, loaded);
        }
        guard.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_by_hash_and_files_are_checked() {
        let t = mint().expect("token");
        assert!(t.len() >= 8 + 43, "256 bits: {t}");
        assert_ne!(t, mint().expect("another"));
        let file = TokenFile {
            tokens: vec![
                Entry {
                    name: "grafana".into(),
                    sha256: hash("other"),
                    scopes: vec!["read".into()],
                },
                Entry {
                    name: "ops".into(),
                    sha256: hash(&t),
                    scopes: vec!["read".into(), "trim".into()],
                },
            ],
        };
        assert_eq!(file.find(&t).map(|e| e.name.as_str()), Some("ops"));
        assert!(file.find("nope").is_none());
        let back = TokenFile::parse(&file.to_text().expect("text")).expect("parse");
        assert_eq!(back, file);
        assert!(
            !file.to_text().expect("text").contains(&t),
            "the token is never stored"
        );
        for (bad, says) in [
            ("tokens: [{name: a, sha256: xyz, scopes: [read]}]", "sha256"),
            ("tokens: [{name: 'a b', sha256: '0000000000000000000000000000000000000000000000000000000000000000', scopes: [read]}]", "name"),
            ("tokens: [{name: a, sha256: '0000000000000000000000000000000000000000000000000000000000000000', scopes: [admin]}]", "admin"),
            ("tokens: [{name: a, sha256: '0000000000000000000000000000000000000000000000000000000000000000', scopes: []}, {name: a, sha256: '0000000000000000000000000000000000000000000000000000000000000000', scopes: []}]", "twice"),
        ] {
            let e = TokenFile::parse(bad).expect_err(bad);
            assert!(e.contains(says), "{e}");
        }
        assert_eq!(
            parse_scopes("read,trim,read").expect("ok"),
            ["read", "trim"]
        );
        assert!(parse_scopes("read,root").unwrap_err().contains("root"));
    }
}
