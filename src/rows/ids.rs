//! The contract's words (docs/contract.md, Words): node, stream, bucket
//! ids and literal subjects, checked as the server and the contract would
//! refuse them, and the operation ids gestures run under.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Invalid;

/// Longest node id the rule allows (docs/contract.md, Words).
pub const NODE_ID_MAX: usize = 64;

/// Checks the node id rule: an ASCII letter or digit, then letters, digits,
/// `.`, `_` or `-`, at most 64 characters. Hold ids, backup ids and domain
/// names follow the same rule. Returns what is wrong, for the caller to
/// prefix with the field it came from.
pub fn check_node_id(id: &str) -> Result<(), Invalid> {
    let allowed =
        "an ASCII letter or digit, then letters, digits, '.', '_' or '-', at most 64 characters";
    let Some(first) = id.chars().next() else {
        return Err(Invalid::from(format!("is empty; allowed: {allowed}")));
    };
    if id.len() > NODE_ID_MAX {
        return Err(Invalid::from(format!(
            "is {} characters long; allowed: {allowed}",
            id.len()
        )));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(Invalid::from(format!(
            "{id:?} starts with {first:?}; allowed: {allowed}"
        )));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Invalid::from(format!(
            "{id:?} contains {bad:?}; allowed: {allowed}"
        )));
    }
    Ok(())
}

/// Checks a JetStream stream (or consumer) name the way the server would
/// refuse it: empty, too long, or containing whitespace, `.`, `*`, `>` or a
/// path separator.
pub fn check_stream_name(name: &str) -> Result<(), Invalid> {
    let allowed = "1 to 255 printable characters without whitespace, '.', '*', '>', '/' or '\\'";
    if name.is_empty() {
        return Err(Invalid::from(format!("is empty; allowed: {allowed}")));
    }
    if name.len() > 255 {
        return Err(Invalid::from(format!(
            "is {} bytes long; allowed: {allowed}",
            name.len()
        )));
    }
    // A plain ASCII name passes at a byte's cost: every positions row names
    // its stream, and the Unicode checks below were a visible part of a
    // full read. (A graphic ASCII byte is neither whitespace nor control.)
    if name
        .bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b'.' | b'*' | b'>' | b'/' | b'\\'))
    {
        return Ok(());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '.' | '*' | '>' | '/' | '\\'))
    {
        return Err(Invalid::from(format!(
            "{name:?} contains {bad:?}; allowed: {allowed}"
        )));
    }
    Ok(())
}

/// Checks a KV bucket name as async-nats and the server accept it:
/// `[A-Za-z0-9_-]+`.
pub fn check_bucket_name(name: &str) -> Result<(), Invalid> {
    let allowed = "letters, digits, '_' and '-' only (at least one)";
    if name.is_empty() {
        return Err(Invalid::from(format!("is empty; allowed: {allowed}")));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
    {
        return Err(Invalid::from(format!(
            "{name:?} contains {bad:?}; allowed: {allowed}"
        )));
    }
    Ok(())
}

/// Checks a literal NATS subject: dot-separated non-empty tokens, no
/// wildcards, no whitespace.
pub fn check_literal_subject(subject: &str) -> Result<(), Invalid> {
    let allowed =
        "a literal subject: non-empty tokens separated by '.', without '*', '>' or whitespace";
    if subject.is_empty() {
        return Err(Invalid::from(format!("is empty; allowed: {allowed}")));
    }
    for token in subject.split('.') {
        if token.is_empty() {
            return Err(Invalid::from(format!(
                "{subject:?} has an empty token; allowed: {allowed}"
            )));
        }
        if token == "*" || token == ">" || token.contains(['*', '>']) {
            return Err(Invalid::from(format!(
                "{subject:?} contains a wildcard; allowed: {allowed}"
            )));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Invalid::from(format!(
                "{subject:?} contains whitespace; allowed: {allowed}"
            )));
        }
    }
    Ok(())
}

/// Does the subject filter `filter` (which may hold `*` and `>`) match the
/// literal subject `subject`? Used to check that a domain's `gate_subject`
/// lands on its stream.
pub fn subject_matches(filter: &str, subject: &str) -> bool {
    let mut f = filter.split('.');
    let mut s = subject.split('.');
    loop {
        match (f.next(), s.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// An operation id: a ULID minted by the client before its first request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct OpId(String);

/// Crockford base32, upper case, as ULIDs are printed.
const CROCKFORD: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

impl OpId {
    /// Mints a fresh id at `now`.
    pub fn mint(now: DateTime<Utc>) -> Self {
        let ms = u64::try_from(now.timestamp_millis()).unwrap_or(0);
        OpId(ulid::Ulid::from_parts(ms, rand_bits()).to_string())
    }

    /// Syntax only: 26 characters of upper-case Crockford base32, first
    /// character at most `7` (a larger one overflows the 128 bits).
    pub fn check_syntax(text: &str) -> Result<(), Invalid> {
        let allowed = "a ULID: 26 characters of Crockford base32 (0-9, A-Z without I, L, O, U)";
        if text.len() > 128 {
            return Err(Invalid::from(format!(
                "is {} bytes long; allowed: {allowed}",
                text.len()
            )));
        }
        if text.len() != 26 {
            return Err(Invalid::from(format!(
                "{text:?} is {} characters long; allowed: {allowed}",
                text.len()
            )));
        }
        if let Some(bad) = text.chars().find(|c| !CROCKFORD.contains(*c)) {
            return Err(Invalid::from(format!(
                "{text:?} contains {bad:?}; allowed: {allowed}"
            )));
        }
        if text.as_bytes()[0] > b'7' {
            return Err(Invalid::from(format!(
                "{text:?} overflows 128 bits; allowed: {allowed}"
            )));
        }
        Ok(())
    }

    /// Full check: syntax, and the instant it carries is not more than five
    /// minutes past `now` (a clock that far ahead minted it, or a hand did).
    pub fn parse(text: &str, now: DateTime<Utc>) -> Result<Self, Invalid> {
        Self::check_syntax(text)?;
        let ulid = ulid::Ulid::from_string(text).map_err(|e| format!("{text:?}: {e}"))?;
        let minted_ms = ulid.timestamp_ms();
        let now_ms = u64::try_from(now.timestamp_millis()).unwrap_or(0);
        if minted_ms > now_ms.saturating_add(5 * 60 * 1000) {
            return Err(Invalid::from(format!(
                "{text:?} was minted more than 5 minutes in the future; mint a new one or omit -op-id"
            )));
        }
        Ok(OpId(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The instant the id carries.
    pub fn minted_ms(&self) -> u64 {
        ulid::Ulid::from_string(&self.0)
            .map(|u| u.timestamp_ms())
            .unwrap_or(0)
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// 80 random bits for a ULID. The standard library's hasher is randomly
/// keyed per process; mixing in time and a counter gives distinct values per
/// call without adding an RNG crate for ten bytes.
fn rand_bits() -> u128 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut out: u128 = 0;
    for _ in 0..2 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out = (out << 64) | u128::from(h.finish());
    }
    out & ((1u128 << 80) - 1)
}
