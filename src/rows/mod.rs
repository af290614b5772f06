//! The contract's rows and keys (docs/contract.md): what nodes, tools and the
//! sidecar write into JetStream KV, parsed strictly so that a row that is not
//! exactly what the contract says becomes an error naming its key, never a
//! guess. Pure: bytes and strings in, typed rows or [`RowError`] out.

//!
//! The rows by who writes them: [`node`] (nodes and tools), [`sidecar`]
//! (the sidecar beside the floors row); [`ids`] (the words of the
//! contract and operation ids) and [`time`] ([`Timestamp`]); here, the
//! [`RowError`] every parser returns and the parsing they share.

use serde::Deserialize;

mod ids;
mod mark;
mod node;
mod sidecar;
mod time;
pub(crate) mod whole;
pub use ids::*;
pub use mark::*;
pub use node::*;
pub use sidecar::*;
pub use time::*;

/// The format of the rows this release writes (the floors row, its
/// `_members` keys, the gates view's rows, an explicit trim's watermark,
/// the duty lease): raised whenever a field changes meaning. A row without
/// `format` is an earlier release's (the floors row's previous release, 1,
/// carried `pins`).
pub const FORMAT: u32 = 2;

/// A row of `format` this release can read: one written by a newer
/// release (a higher format) is unreadable, never read as if it meant what
/// this release's rows mean (docs/upgrading.md).
pub fn known_format(key: &str, format: u32) -> Result<(), Unreadable> {
    if format > FORMAT {
        return Err(Unreadable(format!(
            "{key} was written by a newer release (format {format}); this release reads up to format {FORMAT}"
        )));
    }
    Ok(())
}

/// Whether `body` names a `format` above this release's: a row this
/// release must neither read nor overwrite (read leniently: only the
/// field `format`).
pub fn written_by_newer(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Format {
        #[serde(default)]
        format: u32,
    }
    serde_json::from_slice::<Format>(body).is_ok_and(|f| f.format > FORMAT)
}

/// Why something a judgement stands on could not be read: the sentence an
/// operator reads (a term's `unreadable` reason, a row that does not parse,
/// a stream the broker did not answer for). A type of its own, so that the
/// pure layers never pass a failed read around as a bare string that could
/// be taken for a name or a value (a tidy test keeps `Result<_, String>`
/// out of them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

impl From<String> for Unreadable {
    fn from(s: String) -> Self {
        Unreadable(s)
    }
}

impl From<&str> for Unreadable {
    fn from(s: &str) -> Self {
        Unreadable(s.to_string())
    }
}

impl From<RowError> for Unreadable {
    fn from(e: RowError) -> Self {
        Unreadable(e.to_string())
    }
}

impl From<Unreadable> for String {
    fn from(u: Unreadable) -> Self {
        u.0
    }
}

/// A value a check refused: what is wrong with it and what is allowed, for
/// the caller to prefix with the field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl From<String> for Invalid {
    fn from(s: String) -> Self {
        Invalid(s)
    }
}

impl From<&str> for Invalid {
    fn from(s: &str) -> Self {
        Invalid(s.to_string())
    }
}

impl From<Invalid> for String {
    fn from(i: Invalid) -> Self {
        i.0
    }
}

/// Why a row, key or id was refused. The message is written for an operator
/// reading `status`: it names the key and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    #[error("key {key}: {message}")]
    Malformed { key: String, message: String },
    #[error("key {key}: the key names {in_key} but the row says {in_row}")]
    KeyMismatch {
        key: String,
        in_key: String,
        in_row: String,
    },
}

impl RowError {
    /// The key of the row that was refused.
    pub fn key(&self) -> &str {
        match self {
            RowError::Malformed { key, .. } | RowError::KeyMismatch { key, .. } => key,
        }
    }

    fn malformed(key: &str, message: impl Into<String>) -> Self {
        RowError::Malformed {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// Parses a row, or says what is wrong with it as an operator reads it:
/// the field, what it holds and what is allowed (`field seq: the string
/// "lots" is not a whole number, 0 or more`), never the parser's own text
/// with its line and column.
pub(crate) fn parse_json<'a, T: Deserialize<'a>>(key: &str, body: &'a [u8]) -> Result<T, RowError> {
    let not_json = || {
        RowError::malformed(
            key,
            "is not a JSON object (the row must be one JSON object; see docs/contract.md)",
        )
    };
    // The common case first, at full speed (a tick parses every row of the
    // fleet); only a row that fails is parsed again, tracking the path,
    // to say which field.
    let first = match serde_json::from_slice::<T>(body) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    // serde_json reports a value of the wrong kind where it expects one
    // of a set of names as a syntax error; a body that is one JSON object
    // is not one, whatever the parser calls it.
    let one_object = || {
        matches!(
            serde_json::from_slice::<serde_json::Value>(body),
            Ok(serde_json::Value::Object(_))
        )
    };
    if (first.is_syntax() || first.is_eof()) && !one_object() {
        return Err(not_json());
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let Err(e) = parsed else {
        // It parses whole but for what follows it: not one JSON object.
        return Err(not_json());
    };
    let inner = e.inner();
    if inner.is_syntax() || inner.is_eof() {
        if !one_object() {
            return Err(not_json());
        }
        return Err(RowError::malformed(
            key,
            format!(
                "field {}: the value is not one of those allowed here (see docs/contract.md)",
                e.path()
            ),
        ));
    }
    let raw = inner.to_string();
    // serde_json appends " at line L column C": not an operator's concern.
    let raw = match raw.rsplit_once(" at line ") {
        Some((head, tail)) if tail.contains(" column ") => head.to_string(),
        _ => raw,
    };
    let message = crate::human::serde_message(&raw);
    let path = e.path().to_string();
    Err(if path.is_empty() || path == "." || path == "?" {
        RowError::malformed(key, message)
    } else {
        RowError::malformed(key, format!("field {path}: {message}"))
    })
}

fn node_id_field(key: &str, field: &str, value: &str) -> Result<(), RowError> {
    check_node_id(value).map_err(|e| RowError::malformed(key, format!("{field} {e}")))
}

fn expect_key(key: &str, expected: String) -> Result<(), RowError> {
    if key == expected {
        Ok(())
    } else {
        Err(RowError::KeyMismatch {
            key: key.to_string(),
            in_key: key.to_string(),
            in_row: expected,
        })
    }
}

#[cfg(test)]
mod tests;
