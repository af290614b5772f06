//! The contract's rows and keys (docs/contract.md): what nodes, tools and the
//! sidecar write into JetStream KV, parsed strictly so that a row that is not
//! exactly what the contract says becomes an error naming its key, never a
//! guess. Pure: bytes and strings in, typed rows or [`RowError`] out.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest node id the rule allows (docs/contract.md, Words).
pub const NODE_ID_MAX: usize = 64;

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

/// Checks the node id rule: an ASCII letter or digit, then letters, digits,
/// `.`, `_` or `-`, at most 64 characters. Hold ids, backup ids and domain
/// names follow the same rule. Returns what is wrong, for the caller to
/// prefix with the field it came from.
pub fn check_node_id(id: &str) -> Result<(), String> {
    let allowed =
        "an ASCII letter or digit, then letters, digits, '.', '_' or '-', at most 64 characters";
    let Some(first) = id.chars().next() else {
        return Err(format!("is empty; allowed: {allowed}"));
    };
    if id.len() > NODE_ID_MAX {
        return Err(format!(
            "is {} characters long; allowed: {allowed}",
            id.len()
        ));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(format!("{id:?} starts with {first:?}; allowed: {allowed}"));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!("{id:?} contains {bad:?}; allowed: {allowed}"));
    }
    Ok(())
}

/// Checks a JetStream stream (or consumer) name the way the server would
/// refuse it: empty, too long, or containing whitespace, `.`, `*`, `>` or a
/// path separator.
pub fn check_stream_name(name: &str) -> Result<(), String> {
    let allowed = "1 to 255 printable characters without whitespace, '.', '*', '>', '/' or '\\'";
    if name.is_empty() {
        return Err(format!("is empty; allowed: {allowed}"));
    }
    if name.len() > 255 {
        return Err(format!("is {} bytes long; allowed: {allowed}", name.len()));
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
        return Err(format!("{name:?} contains {bad:?}; allowed: {allowed}"));
    }
    Ok(())
}

/// Checks a KV bucket name as async-nats and the server accept it:
/// `[A-Za-z0-9_-]+`.
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    let allowed = "letters, digits, '_' and '-' only (at least one)";
    if name.is_empty() {
        return Err(format!("is empty; allowed: {allowed}"));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
    {
        return Err(format!("{name:?} contains {bad:?}; allowed: {allowed}"));
    }
    Ok(())
}

/// Checks a literal NATS subject: dot-separated non-empty tokens, no
/// wildcards, no whitespace.
pub fn check_literal_subject(subject: &str) -> Result<(), String> {
    let allowed =
        "a literal subject: non-empty tokens separated by '.', without '*', '>' or whitespace";
    if subject.is_empty() {
        return Err(format!("is empty; allowed: {allowed}"));
    }
    for token in subject.split('.') {
        if token.is_empty() {
            return Err(format!(
                "{subject:?} has an empty token; allowed: {allowed}"
            ));
        }
        if token == "*" || token == ">" || token.contains(['*', '>']) {
            return Err(format!(
                "{subject:?} contains a wildcard; allowed: {allowed}"
            ));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{subject:?} contains whitespace; allowed: {allowed}"
            ));
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

/// An RFC 3339 instant in UTC, as every row carries it (a broker's or a
/// node's clock reading, never a monotonic one: named apart from
/// `std::time::Instant`, which it is not). Parsing refuses an offset other
/// than zero so that no row's meaning depends on a timezone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    pub fn parse(text: &str) -> Result<Self, String> {
        let parsed = DateTime::parse_from_rfc3339(text)
            .map_err(|e| format!("{text:?} is not an RFC 3339 timestamp ({e})"))?;
        if parsed.offset().local_minus_utc() != 0 {
            return Err(format!(
                "{text:?} is not in UTC; timestamps are RFC 3339 with 'Z'"
            ));
        }
        Ok(Timestamp(parsed.with_timezone(&Utc)))
    }

    /// Nanosecond RFC 3339 with trailing zeros trimmed (Go's RFC3339Nano),
    /// the way the broker prints `created`, so that an instant an operator
    /// copies from our output matches the broker's exactly.
    pub fn to_rfc3339(&self) -> String {
        use chrono::{Datelike, Timelike};
        let t = &self.0;
        // Written digit by digit: a status of 10,000 nodes prints tens of
        // thousands of these per tick, and chrono's `format` parses its
        // pattern on every call. Years outside 0..=9999 (chrono prints
        // them with a sign) and leap seconds take chrono's own way; a unit
        // test holds the two ways to the same text.
        let nanos = t.nanosecond();
        if !(0..=9999).contains(&t.year()) || nanos >= 1_000_000_000 {
            return by_chrono(t);
        }
        fn put(text: &mut String, v: u32, width: u32) {
            for k in (0..width).rev() {
                text.push(char::from(b'0' + (v / 10u32.pow(k) % 10) as u8));
            }
        }
        let mut text = String::with_capacity(30);
        put(&mut text, t.year() as u32, 4);
        for (sep, v) in [
            ('-', t.month()),
            ('-', t.day()),
            ('T', t.hour()),
            (':', t.minute()),
            (':', t.second()),
        ] {
            text.push(sep);
            put(&mut text, v, 2);
        }
        if nanos != 0 {
            // The fraction without its trailing zeros (Go's RFC3339Nano).
            let (mut fraction, mut digits) = (nanos, 9);
            while fraction % 10 == 0 {
                fraction /= 10;
                digits -= 1;
            }
            text.push('.');
            put(&mut text, fraction, digits);
        }
        text.push('Z');
        text
    }
}

/// [`Timestamp::to_rfc3339`] by chrono's `format`: the way for the
/// instants it does not write itself, and what the tests hold it to.
fn by_chrono(t: &DateTime<Utc>) -> String {
    use chrono::Timelike;
    let base = t.format("%Y-%m-%dT%H:%M:%S");
    match t.nanosecond() {
        0 => format!("{base}Z"),
        n => format!("{base}.{}Z", format!("{n:09}").trim_end_matches('0')),
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Parsed from the text where it lies: a tick parses two of these
        // per positions row, and a String each was an allocation each.
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                // As a String's: the operator's words for a wrong type
                // (crate::human) are keyed on it.
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(Text)
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

/// A presence lease (bucket `presence`, key `<node>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceRow {
    pub node: String,
    /// `"data"` among them marks a node that applies logs.
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub version: String,
    pub started_at: Timestamp,
}

impl PresenceRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row: Self = parse_json(key, body)?;
        node_id_field(key, "node", &row.node)?;
        expect_key(key, row.node.clone())?;
        Ok(row)
    }

    pub fn is_data(&self) -> bool {
        self.roles.iter().any(|r| r == "data")
    }
}

/// Whether a node's applier still continues the log (docs/contract.md, `crewlet_positions` — where each node stands on each log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PositionStatus {
    Ok,
    LogDiverged,
}

impl<'de> Deserialize<'de> for PositionStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_of(
            d,
            &[
                ("ok", PositionStatus::Ok),
                ("log_diverged", PositionStatus::LogDiverged),
            ],
        )
    }
}

/// A field a node writes as one of a few names (`status`, `skip_reason`,
/// a hold's `kind`). serde's derived enum
/// calls a `null` or a number there a syntax error, which an operator would
/// read as a row that is not JSON; this names what was found and what is
/// allowed (`unknown value "tired"; allowed: "", "sole_node", …`).
fn one_of<'de, D: Deserializer<'de>, T: Copy>(
    d: D,
    names: &'static [(&'static str, T)],
) -> Result<T, D::Error> {
    struct Names<T: 'static>(&'static [(&'static str, T)]);
    impl<T: Copy> serde::de::Visitor<'_> for Names<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            // What a null or a number is told: the names it may be.
            let allowed: Vec<String> = self.0.iter().map(|(name, _)| format!("{name:?}")).collect();
            write!(f, "one of {}", allowed.join(", "))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            match self.0.iter().find(|(name, _)| *name == v) {
                Some((_, value)) => Ok(*value),
                None => {
                    let allowed: Vec<String> =
                        self.0.iter().map(|(name, _)| format!("{name:?}")).collect();
                    Err(E::custom(format!(
                        "unknown value {v:?}; allowed: {}",
                        allowed.join(", ")
                    )))
                }
            }
        }
    }
    d.deserialize_str(Names(names))
}

/// Where one node stands on one log (bucket `positions`, key `<stream>.<node>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionRow {
    pub node: String,
    pub stream: String,
    /// Last applied sequence, inclusive.
    pub seq: u64,
    /// With `stream_created`, names the number space `seq` belongs to.
    pub generation: u64,
    pub stream_created: Timestamp,
    pub updated_at: Timestamp,
    pub status: PositionStatus,
}

impl PositionRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row = Self::parse_checked(key, body)?;
        Ok(PositionRow {
            node: row.node.into_owned(),
            stream: row.stream.into_owned(),
            seq: row.seq,
            generation: row.generation,
            stream_created: row.stream_created,
            updated_at: row.updated_at,
            status: row.status,
        })
    }

    pub fn key(stream: &str, node: &str) -> String {
        format!("{stream}.{node}")
    }

    /// As [`PositionRow::parse`], keeping only the values: the node and
    /// stream are read where they lie in the body and checked against the
    /// key, never copied. A tick parses every row of the fleet; the copies
    /// were four allocations a row.
    pub fn parse_values(key: &str, body: &[u8]) -> Result<Position, RowError> {
        let row = Self::parse_checked(key, body)?;
        Ok(Position {
            seq: row.seq,
            generation: row.generation,
            stream_created: row.stream_created,
            updated_at: row.updated_at,
            status: row.status,
        })
    }

    /// The row as it lies in the body, with every check both parses make:
    /// the node id, the stream name, and the key naming both.
    fn parse_checked<'a>(key: &str, body: &'a [u8]) -> Result<wire::PositionRow<'a>, RowError> {
        let row: wire::PositionRow = parse_json(key, body)?;
        node_id_field(key, "node", &row.node)?;
        check_stream_name(&row.stream)
            .map_err(|e| RowError::malformed(key, format!("stream {e}")))?;
        let named = key
            .strip_prefix(row.stream.as_ref())
            .and_then(|k| k.strip_prefix('.'))
            == Some(row.node.as_ref());
        if !named {
            expect_key(key, Self::key(&row.stream, &row.node))?;
        }
        Ok(row)
    }
}

/// A positions row borrowed from its body.
mod wire {
    use std::borrow::Cow;

    use serde::Deserialize;

    use super::{PositionStatus, Timestamp};

    /// The fields of [`super::PositionRow`], in its order, its strings
    /// borrowed where they are not escaped. Named as the row is: serde's
    /// words for a row of the wrong shape name the struct ("expected
    /// struct PositionRow with 7 elements").
    #[derive(Deserialize)]
    pub(super) struct PositionRow<'a> {
        #[serde(borrow)]
        pub node: Cow<'a, str>,
        #[serde(borrow)]
        pub stream: Cow<'a, str>,
        pub seq: u64,
        pub generation: u64,
        pub stream_created: Timestamp,
        pub updated_at: Timestamp,
        pub status: PositionStatus,
    }
}

/// A positions row as the floor keeps it: its key names the stream and the
/// node, which parsing proved the row repeats, so the two strings are not
/// kept a second time (100,000 rows are scanned on every computation, and
/// half their size was those two strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub seq: u64,
    pub generation: u64,
    pub stream_created: Timestamp,
    pub updated_at: Timestamp,
    pub status: PositionStatus,
}

impl From<PositionRow> for Position {
    fn from(r: PositionRow) -> Position {
        Position {
            seq: r.seq,
            generation: r.generation,
            stream_created: r.stream_created,
            updated_at: r.updated_at,
            status: r.status,
        }
    }
}

/// Who placed a hold and why (docs/contract.md, `crewlet_holds` — live pins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldKind {
    Backup,
    Join,
    #[default]
    Operator,
}

impl<'de> Deserialize<'de> for HoldKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_of(
            d,
            &[
                ("backup", HoldKind::Backup),
                ("join", HoldKind::Join),
                ("operator", HoldKind::Operator),
            ],
        )
    }
}

/// A live pin (bucket `holds`, key `<stream>.<hold-id>`). The key carries
/// the stream and the id; the body does not repeat them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldRow {
    /// First sequence the holder still needs: the hold permits deleting up
    /// to `seq - 1`.
    pub seq: u64,
    pub owner: String,
    #[serde(default)]
    pub kind: HoldKind,
    #[serde(default)]
    pub reason: String,
    /// Required: a hold that never expires is a leak, not a pin.
    pub expires_at: Timestamp,
}

/// The parts of a holds key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldKey {
    pub stream: String,
    pub hold_id: String,
}

impl HoldKey {
    /// Stream names hold no `.`, so the first dot separates stream from id.
    pub fn parse(key: &str) -> Result<Self, RowError> {
        let (stream, hold_id) = key
            .split_once('.')
            .ok_or_else(|| RowError::malformed(key, "expected <stream>.<hold-id>"))?;
        check_stream_name(stream).map_err(|e| RowError::malformed(key, format!("stream {e}")))?;
        check_node_id(hold_id).map_err(|e| RowError::malformed(key, format!("hold id {e}")))?;
        Ok(HoldKey {
            stream: stream.to_string(),
            hold_id: hold_id.to_string(),
        })
    }
}

impl HoldRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<(HoldKey, Self), RowError> {
        let hold_key = HoldKey::parse(key)?;
        let row: Self = parse_json(key, body)?;
        if row.owner.trim().is_empty() {
            return Err(RowError::malformed(
                key,
                "owner is empty; name who placed the hold",
            ));
        }
        Ok((hold_key, row))
    }
}

/// A backup manifest (bucket `backups`, key `<node>.<backup-id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupManifest {
    pub id: String,
    pub node: String,
    pub taken_at: Timestamp,
    /// Absent: the backup never finished, and the manifest is debris.
    #[serde(default)]
    pub completed_at: Option<Timestamp>,
    #[serde(default)]
    pub verified: bool,
    #[serde(default)]
    pub owner: String,
    /// Highest sequence the backed-up database holds, per stream.
    pub positions: BTreeMap<String, u64>,
}

impl BackupManifest {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row: Self = parse_json(key, body)?;
        node_id_field(key, "node", &row.node)?;
        node_id_field(key, "id", &row.id)?;
        for stream in row.positions.keys() {
            check_stream_name(stream)
                .map_err(|e| RowError::malformed(key, format!("positions: stream name {e}")))?;
        }
        // Node ids may hold dots, so the key is checked against the body
        // rather than split.
        expect_key(key, Self::key(&row.node, &row.id))?;
        Ok(row)
    }

    pub fn key(node: &str, id: &str) -> String {
        format!("{node}.{id}")
    }

    /// Counts for `backup_floor: engine` only when finished and verified.
    pub fn counts(&self) -> bool {
        self.verified && self.completed_at.is_some()
    }
}

/// Prefix of operator acknowledgement keys in the backups bucket.
pub const ACK_PREFIX: &str = "_ack.";

/// An operator's acknowledgement (bucket `backups`, key `_ack.<stream>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckRow {
    pub stream: String,
    pub position: u64,
    pub by: String,
    pub at: Timestamp,
}

impl AckRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row: Self = parse_json(key, body)?;
        check_stream_name(&row.stream)
            .map_err(|e| RowError::malformed(key, format!("stream {e}")))?;
        expect_key(key, Self::key(&row.stream))?;
        Ok(row)
    }

    pub fn key(stream: &str) -> String {
        format!("{ACK_PREFIX}{stream}")
    }
}

/// Why a node cannot take a new snapshot artefact (docs/contract.md, `crewlet_snapshots` — what each node can donate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    #[serde(rename = "")]
    None,
    SoleNode,
    Lagging,
    Unhydrated,
    Deferred,
    InsufficientSpace,
    AheadOfLog,
    LogDiverged,
    Failed,
}

impl<'de> Deserialize<'de> for SkipReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use SkipReason::*;
        one_of(
            d,
            &[
                ("", None),
                ("sole_node", SoleNode),
                ("lagging", Lagging),
                ("unhydrated", Unhydrated),
                ("deferred", Deferred),
                ("insufficient_space", InsufficientSpace),
                ("ahead_of_log", AheadOfLog),
                ("log_diverged", LogDiverged),
                ("failed", Failed),
            ],
        )
    }
}

/// One snapshot artefact a node can donate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artefact {
    pub position: u64,
    pub generation: u64,
    pub taken_at: Timestamp,
    pub verified: bool,
}

/// What a node can donate (bucket `snapshots`, key `<node>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRow {
    pub node: String,
    pub updated_at: Timestamp,
    pub skip_reason: SkipReason,
    #[serde(default)]
    pub artefacts: BTreeMap<String, Artefact>,
}

impl SnapshotRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row: Self = parse_json(key, body)?;
        node_id_field(key, "node", &row.node)?;
        expect_key(key, row.node.clone())?;
        Ok(row)
    }
}

/// The trim duty lease (bucket `duty`, key [`DUTY_KEY`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DutyRow {
    pub holder: String,
    pub session: String,
    pub claimed_at: Timestamp,
    /// The broker time of the write (absent in rows of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewed_at: Option<Timestamp>,
    /// A fresh id per write, so that a re-read after a lost answer tells
    /// whether this write is the one there (docs/trim-floor.md, Fencing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal: Option<String>,
}

/// The one key of the duty bucket.
pub const DUTY_KEY: &str = "retention";

impl DutyRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row: Self = parse_json(key, body)?;
        node_id_field(key, "holder", &row.holder)?;
        Ok(row)
    }
}

/// Which way a gate points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateState {
    Evicted,
    Admitted,
}

/// The gate in force for a node on a log (bucket `gates`, key `<stream>.<node>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateRow {
    pub node: String,
    pub stream: String,
    pub state: GateState,
    pub op_id: String,
    /// The gate record's own sequence on the log.
    pub seq: u64,
    /// The gate record's broker timestamp: the fence window runs from here.
    pub landed_at: Timestamp,
    pub by: String,
    #[serde(default)]
    pub force: bool,
    #[serde(default)]
    pub reason: String,
    /// The incarnation of the log the record was read from (docs/trim-floor.md, The
    /// gates view and the purge). A row of another incarnation, or one
    /// written before rows carried it, never applies.
    #[serde(default)]
    pub stream_created: Option<Timestamp>,
    #[serde(default)]
    pub generation: Option<u64>,
}

/// One incarnation of a log: the stream's `created` and the domain's
/// generation. A recreated stream, or a re-anchored one, is another
/// incarnation, and nothing read from the old one applies to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incarnation {
    pub stream_created: Timestamp,
    pub generation: u64,
}

/// What the sidecar keeps about a log between ticks, stamped with the
/// incarnation it was made in (docs/trim-floor.md, Watermarks belong to
/// one incarnation): the gates view's cursor and rows, the requested
/// watermark, the published floor. One comparison decides for every one of
/// them: it counts in incarnation `i` only if it was made in `i`, and a
/// row that does not say (of an older version) counts in none.
pub trait Stamped {
    /// The incarnation it was made in, when it says.
    fn made_in(&self) -> Option<Incarnation>;

    /// Whether it counts in incarnation `i` of its log.
    fn belongs_to(&self, i: &Incarnation) -> bool {
        self.made_in().as_ref() == Some(i)
    }
}

/// The incarnation a row's `stream_created` and `generation` name, when
/// both are there.
pub fn stamped(stream_created: Option<Timestamp>, generation: Option<u64>) -> Option<Incarnation> {
    Some(Incarnation {
        stream_created: stream_created?,
        generation: generation?,
    })
}

impl Stamped for GateRow {
    fn made_in(&self) -> Option<Incarnation> {
        stamped(self.stream_created, self.generation)
    }
}

impl GateRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row: Self = parse_json(key, body)?;
        node_id_field(key, "node", &row.node)?;
        OpId::check_syntax(&row.op_id)
            .map_err(|e| RowError::malformed(key, format!("op_id {e}")))?;
        expect_key(key, PositionRow::key(&row.stream, &row.node))?;
        Ok(row)
    }
}

/// The gesture a gate record makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateSign {
    Evict,
    Readmit,
}

impl GateSign {
    pub fn as_str(self) -> &'static str {
        match self {
            GateSign::Evict => "evict",
            GateSign::Readmit => "readmit",
        }
    }
}

/// Prefix of the id of a readmission's `join` hold (`join-<op-id>`).
pub const JOIN_HOLD_PREFIX: &str = "join-";

/// Prefix of operation keys in the gates bucket.
pub const OP_PREFIX: &str = "_op.";

/// Which gesture an operation id names (bucket `gates`, key `_op.<op-id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRow {
    pub op_id: String,
    pub sign: GateSign,
    pub node: String,
    /// Where the gesture's record stands on each log it reached.
    pub logs: BTreeMap<String, u64>,
}

impl OpRow {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, RowError> {
        let row: Self = parse_json(key, body)?;
        OpId::check_syntax(&row.op_id)
            .map_err(|e| RowError::malformed(key, format!("op_id {e}")))?;
        node_id_field(key, "node", &row.node)?;
        expect_key(key, format!("{OP_PREFIX}{}", row.op_id))?;
        Ok(row)
    }
}

/// The body of a gate record on a log (docs/contract.md, Gate records on the log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateRecordBody {
    pub kind: GateSign,
    pub node: String,
    pub op_id: String,
    pub by: String,
    pub at: Timestamp,
    #[serde(default)]
    pub force: bool,
    #[serde(default)]
    pub reason: String,
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
    pub fn check_syntax(text: &str) -> Result<(), String> {
        let allowed = "a ULID: 26 characters of Crockford base32 (0-9, A-Z without I, L, O, U)";
        if text.len() > 128 {
            return Err(format!("is {} bytes long; allowed: {allowed}", text.len()));
        }
        if text.len() != 26 {
            return Err(format!(
                "{text:?} is {} characters long; allowed: {allowed}",
                text.len()
            ));
        }
        if let Some(bad) = text.chars().find(|c| !CROCKFORD.contains(*c)) {
            return Err(format!("{text:?} contains {bad:?}; allowed: {allowed}"));
        }
        if text.as_bytes()[0] > b'7' {
            return Err(format!("{text:?} overflows 128 bits; allowed: {allowed}"));
        }
        Ok(())
    }

    /// Full check: syntax, and the instant it carries is not more than five
    /// minutes past `now` (a clock that far ahead minted it, or a hand did).
    pub fn parse(text: &str, now: DateTime<Utc>) -> Result<Self, String> {
        Self::check_syntax(text)?;
        let ulid = ulid::Ulid::from_string(text).map_err(|e| format!("{text:?}: {e}"))?;
        let minted_ms = ulid.timestamp_ms();
        let now_ms = u64::try_from(now.timestamp_millis()).unwrap_or(0);
        if minted_ms > now_ms.saturating_add(5 * 60 * 1000) {
            return Err(format!(
                "{text:?} was minted more than 5 minutes in the future; mint a new one or omit -op-id"
            ));
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

/// The key prefix of a requested watermark in the floors bucket.
pub const REQUESTED_PREFIX: &str = "_requested.";

/// An explicit trim's requested watermark (docs/http.md, Explicit trim): `seq`
/// permits deleting up to `seq - 1`, never past any term but `age_floor`.
/// It only moves forward.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requested {
    pub seq: u64,
    pub by: String,
    pub at: Timestamp,
    #[serde(default)]
    pub reason: String,
    /// The incarnation the watermark was made in (the stream's `created`
    /// and the domain's generation): it means nothing in another. A row
    /// without them (older versions) belongs to none.
    #[serde(default)]
    pub stream_created: Option<Timestamp>,
    #[serde(default)]
    pub generation: Option<u64>,
}

impl Stamped for Requested {
    fn made_in(&self) -> Option<Incarnation> {
        stamped(self.stream_created, self.generation)
    }
}

impl Requested {
    /// Parses `_requested.<stream>`'s value.
    pub fn parse(key: &str, _stream: &str, body: &[u8]) -> Result<Requested, String> {
        parse_json(key, body).map_err(|e| format!("floors {e}"))
    }

    pub fn key(stream: &str) -> String {
        format!("{REQUESTED_PREFIX}{stream}")
    }
}

#[cfg(test)]
mod tests {
    use super::by_chrono;

    proptest::proptest! {
        #![proptest_config(crate::seeded::config(256))]
        #[test]
        fn an_instant_prints_as_chrono_printed_it(
            secs in -70_000_000_000i64..300_000_000_000,
            nanos in proptest::prop_oneof![
                proptest::strategy::Just(0u32),
                proptest::strategy::Just(500_000_000u32),
                0u32..1_000_000_000,
            ],
        ) {
            let t = chrono::DateTime::from_timestamp(secs, nanos).expect("in range");
            proptest::prop_assert_eq!(super::Timestamp(t).to_rfc3339(), by_chrono(&t));
        }
    }

    #[test]
    fn edge_instants_print_as_chrono_printed_them() {
        use chrono::{NaiveDate, TimeZone, Utc};
        let leap = NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_250_000_000))
            .expect("a leap second");
        let year = |y: i32| {
            Utc.with_ymd_and_hms(y, 1, 2, 3, 4, 5)
                .single()
                .expect("a date")
        };
        for t in [
            Utc.from_utc_datetime(&leap),
            year(0),
            year(9999),
            year(10_000),
            year(-1),
            Utc.with_ymd_and_hms(2026, 12, 3, 0, 0, 0)
                .single()
                .expect("a date"),
        ] {
            assert_eq!(super::Timestamp(t).to_rfc3339(), by_chrono(&t), "{t:?}");
        }
    }

    /// An operator's trial: a malformed row said the JSON parser's text
    /// (`invalid type: string "lots", expected u64 at line 1 column 52`).
    #[test]
    fn a_malformed_row_names_the_field_and_what_is_allowed() {
        let body = br#"{"node":"n1","stream":"S","seq":"lots","generation":0,"stream_created":"2026-11-01T00:00:00Z","updated_at":"2026-11-01T00:00:00Z"}"#;
        let e = super::PositionRow::parse("S.n1", body)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            e,
            r#"key S.n1: field seq: string "lots" is not a whole number, 0 or more"#
        );
        let e = super::PositionRow::parse("S.n1", b"{\"node\": ")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("is not a JSON object"), "{e}");
        assert!(!e.contains("line 1"), "{e}");
    }

    use super::*;

    fn now() -> DateTime<Utc> {
        Timestamp::parse("2026-11-30T01:00:00Z")
            .map(|i| i.0)
            .expect("fixed instant")
    }

    #[test]
    fn node_id_rule() {
        let cases: &[(&str, bool)] = &[
            ("node-1", true),
            ("n", true),
            ("9", true),
            ("a.b_c-d", true),
            ("", false),
            ("-node", false),
            (".node", false),
            ("node 1", false),
            ("node-1 ", false),
            (" node-1", false),
            ("nöde", false),
            ("node/1", false),
            ("node*", false),
        ];
        for (id, ok) in cases {
            assert_eq!(check_node_id(id).is_ok(), *ok, "{id:?}");
        }
        assert!(check_node_id(&"a".repeat(64)).is_ok());
        let err = check_node_id(&"a".repeat(65)).unwrap_err();
        assert!(err.contains("65 characters"), "{err}");
    }

    #[test]
    fn stream_bucket_and_subject_names() {
        assert!(check_stream_name("CREWLET_TRACKER_LOG").is_ok());
        assert!(
            check_stream_name("tracker-é").is_ok(),
            "printable non-ASCII"
        );
        for bad in [
            "", "A.B", "A B", "A*", "A>", "a/b", "a\\b", "a\tb", "a\u{7f}", "a\u{a0}b", "a\u{85}",
        ] {
            assert!(check_stream_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_bucket_name("crewlet_floors-1").is_ok());
        for bad in ["", "a.b", "a b", "a$"] {
            assert!(check_bucket_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_literal_subject("crewlet.tracker.gate").is_ok());
        for bad in ["", "a..b", "a.*", "a.>", ".a", "a.", "a b"] {
            assert!(check_literal_subject(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn subject_filters() {
        let cases = [
            ("crewlet.tracker.>", "crewlet.tracker.gate", true),
            ("crewlet.*.gate", "crewlet.tracker.gate", true),
            ("crewlet.tracker", "crewlet.tracker.gate", false),
            ("crewlet.tracker.gate", "crewlet.tracker.gate", true),
            ("crewlet.>", "crewlet", false),
            ("*", "a.b", false),
            (">", "a.b", true),
        ];
        for (f, s, want) in cases {
            assert_eq!(subject_matches(f, s), want, "{f} ~ {s}");
        }
    }

    #[test]
    fn instants_round_trip_nanoseconds() {
        let i = Timestamp::parse("2026-11-30T01:02:03.418226517Z").expect("valid");
        assert_eq!(i.to_rfc3339(), "2026-11-30T01:02:03.418226517Z");
        let trimmed = Timestamp::parse("2026-11-30T01:02:03.3271603Z").expect("valid");
        assert_eq!(trimmed.to_rfc3339(), "2026-11-30T01:02:03.3271603Z");
        let whole = Timestamp::parse("2026-11-30T01:02:03Z").expect("valid");
        assert_eq!(whole.to_rfc3339(), "2026-11-30T01:02:03Z");
        assert!(Timestamp::parse("2026-11-30T01:02:03+02:00").is_err());
        assert!(Timestamp::parse("yesterday").is_err());
        assert!(Timestamp::parse("2026-11-30T01:02:03+00:00").is_ok());
    }

    const POS: &str = r#"{"node": "node-3", "stream": "CREWLET_TRACKER_LOG", "seq": 918100123,
        "generation": 0, "stream_created": "2026-11-02T10:00:00.418226517Z",
        "updated_at": "2026-11-30T01:00:00Z", "status": "ok"}"#;

    #[test]
    fn position_rows() {
        let row = PositionRow::parse("CREWLET_TRACKER_LOG.node-3", POS.as_bytes()).expect("valid");
        assert_eq!(row.seq, 918100123);
        assert_eq!(row.status, PositionStatus::Ok);

        // The key names another node than the body.
        let err = PositionRow::parse("CREWLET_TRACKER_LOG.node-4", POS.as_bytes()).unwrap_err();
        assert!(matches!(err, RowError::KeyMismatch { .. }), "{err}");
        // The key names another stream than the body.
        let err = PositionRow::parse("CREWLET_PAGES_LOG.node-3", POS.as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("CREWLET_PAGES_LOG.node-3"),
            "{err}"
        );

        let bad_bodies = [
            ("negative seq", POS.replace("918100123", "-1")),
            ("string seq", POS.replace("918100123", "\"918100123\"")),
            ("unknown status", POS.replace("\"ok\"", "\"fine\"")),
            (
                "node with trailing space",
                POS.replace("\"node-3\"", "\"node-3 \""),
            ),
            ("empty node", POS.replace("\"node-3\"", "\"\"")),
            ("missing generation", POS.replace("\"generation\": 0,", "")),
            (
                "bad timestamp",
                POS.replace("2026-11-30T01:00:00Z", "last tuesday"),
            ),
            ("not json", "seq=5".to_string()),
            ("empty", String::new()),
        ];
        for (what, body) in bad_bodies {
            let r = PositionRow::parse("CREWLET_TRACKER_LOG.node-3", body.as_bytes());
            assert!(r.is_err(), "{what} should be refused");
            let msg = r.unwrap_err().to_string();
            assert!(msg.contains("CREWLET_TRACKER_LOG.node-3"), "{what}: {msg}");
        }
        let diverged = POS.replace("\"ok\"", "\"log_diverged\"");
        let row =
            PositionRow::parse("CREWLET_TRACKER_LOG.node-3", diverged.as_bytes()).expect("valid");
        assert_eq!(row.status, PositionStatus::LogDiverged);
    }

    /// The floor's parse of a positions row (values only, strings borrowed)
    /// accepts and refuses exactly what the whole row's parse does, with
    /// the same words: over valid rows, every refusal above, escaped
    /// strings (which cannot be borrowed), keys that name another node or
    /// stream, or a prefix of either, and wrong types of every field.
    #[test]
    fn the_floors_parse_of_a_position_is_the_rows_parse() {
        let key = "CREWLET_TRACKER_LOG.node-3";
        let mut cases: Vec<(String, String)> = Vec::new();
        let bodies = [
            POS.to_string(),
            POS.replace("\"ok\"", "\"log_diverged\""),
            POS.replace("918100123", "-1"),
            POS.replace("918100123", "\"918100123\""),
            POS.replace("\"ok\"", "\"fine\""),
            POS.replace("\"node-3\"", "\"node-3 \""),
            POS.replace("\"node-3\"", "\"\""),
            POS.replace("\"node-3\"", "\"node\\u002d3\""),
            POS.replace("\"CREWLET_TRACKER_LOG\"", "\"CREWLET\\u005fTRACKER_LOG\""),
            POS.replace("\"CREWLET_TRACKER_LOG\"", "\"CREWLET.TRACKER\""),
            POS.replace("\"node-3\"", "7"),
            POS.replace("\"generation\": 0,", ""),
            POS.replace("\"generation\": 0,", "\"generation\": 0.5,"),
            POS.replace("2026-11-30T01:00:00Z", "last tuesday"),
            POS.replace("\"2026-11-30T01:00:00Z\"", "12"),
            POS.replace("\"2026-11-30T01:00:00Z\"", "null"),
            POS.replace(
                "\"2026-11-02T10:00:00.418226517Z\"",
                "\"2026-11-02T10:00:00+02:00\"",
            ),
            POS.replace("\"status\": \"ok\"", "\"status\": \"ok\", \"extra\": [1]"),
            "seq=5".to_string(),
            String::new(),
            "[]".to_string(),
            "{}".to_string(),
        ];
        for body in bodies {
            for k in [
                key,
                "CREWLET_TRACKER_LOG.node-4",
                "CREWLET_TRACKER_LOG.node-",
                "CREWLET_TRACKER_LOG.node-33",
                "CREWLET_PAGES_LOG.node-3",
                "CREWLET_TRACKER_LO.node-3",
                "CREWLET_TRACKER_LOGnode-3",
                "CREWLET.TRACKER.node-3",
            ] {
                cases.push((k.to_string(), body.clone()));
            }
        }
        let mut accepted = 0;
        for (k, body) in &cases {
            let whole = PositionRow::parse(k, body.as_bytes()).map(Position::from);
            let values = PositionRow::parse_values(k, body.as_bytes());
            assert_eq!(
                values.as_ref().map_err(ToString::to_string),
                whole.as_ref().map_err(ToString::to_string),
                "key {k}, body {body}"
            );
            assert_eq!(values, whole, "key {k}, body {body}");
            accepted += usize::from(values.is_ok());
        }
        // Under their own key: valid, diverged, the two escaped spellings,
        // and the one with a field the contract does not name.
        assert_eq!(accepted, 5, "rows accepted");
    }

    #[test]
    fn hold_rows() {
        let body = br#"{"seq": 918000000, "owner": "backup-nightly", "kind": "backup",
            "reason": "nightly", "expires_at": "2026-11-30T03:00:00Z"}"#;
        let (key, row) = HoldRow::parse("CREWLET_TRACKER_LOG.h-1", body).expect("valid");
        assert_eq!(key.stream, "CREWLET_TRACKER_LOG");
        assert_eq!(key.hold_id, "h-1");
        assert_eq!(row.kind, HoldKind::Backup);

        let defaulted = br#"{"seq": 5, "owner": "alice", "expires_at": "2026-11-30T03:00:00Z"}"#;
        let (_, row) = HoldRow::parse("S.h.2", defaulted).expect("valid");
        assert_eq!(row.kind, HoldKind::Operator);

        for (key, body) in [
            ("S", &defaulted[..]),
            ("S.-bad", &defaulted[..]),
            ("S.h", br#"{"seq": 5, "owner": "alice"}"#),
            (
                "S.h",
                br#"{"seq": 5, "owner": " ", "expires_at": "2026-11-30T03:00:00Z"}"#,
            ),
            (
                "S.h",
                br#"{"seq": 5, "owner": "a", "kind": "pin", "expires_at": "2026-11-30T03:00:00Z"}"#,
            ),
        ] {
            assert!(
                HoldRow::parse(key, body).is_err(),
                "{key} {}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn backup_rows() {
        let body =
            br#"{"id": "2026-11-30T00-00Z", "node": "node-1", "taken_at": "2026-11-30T00:00:00Z",
            "completed_at": "2026-11-30T00:10:00Z", "verified": true, "owner": "platform-oncall",
            "positions": {"CREWLET_TRACKER_LOG": 918100000}}"#;
        let m = BackupManifest::parse("node-1.2026-11-30T00-00Z", body).expect("valid");
        assert!(m.counts());
        assert!(BackupManifest::parse("node-2.2026-11-30T00-00Z", body).is_err());

        let debris = br#"{"id": "b1", "node": "n.1", "taken_at": "2026-11-30T00:00:00Z",
            "verified": true, "positions": {}}"#;
        let m = BackupManifest::parse("n.1.b1", debris).expect("valid");
        assert!(!m.counts(), "no completed_at: debris");

        let ack =
            br#"{"stream": "S", "position": 10, "by": "alice", "at": "2026-11-30T00:00:00Z"}"#;
        assert_eq!(AckRow::parse("_ack.S", ack).expect("valid").position, 10);
        assert!(AckRow::parse("_ack.T", ack).is_err());
    }

    #[test]
    fn snapshot_rows() {
        let body = br#"{"node": "node-2", "updated_at": "2026-11-30T00:00:00Z", "skip_reason": "",
            "artefacts": {"S": {"position": 9, "generation": 0, "taken_at": "2026-11-30T00:00:00Z", "verified": true}}}"#;
        let row = SnapshotRow::parse("node-2", body).expect("valid");
        assert_eq!(row.skip_reason, SkipReason::None);
        assert_eq!(row.artefacts["S"].position, 9);
        let lagging = String::from_utf8_lossy(body)
            .replace("\"skip_reason\": \"\"", "\"skip_reason\": \"lagging\"");
        assert_eq!(
            SnapshotRow::parse("node-2", lagging.as_bytes())
                .expect("valid")
                .skip_reason,
            SkipReason::Lagging
        );
        let unknown = String::from_utf8_lossy(body)
            .replace("\"skip_reason\": \"\"", "\"skip_reason\": \"tired\"");
        assert!(SnapshotRow::parse("node-2", unknown.as_bytes()).is_err());
        assert!(SnapshotRow::parse("node-3", body).is_err());
    }

    #[test]
    fn a_null_skip_reason_is_named_with_what_is_allowed() {
        // The row is one JSON object: its problem is the field's value.
        let body =
            br#"{"node": "node-2", "updated_at": "2026-11-30T00:00:00Z", "skip_reason": null}"#;
        let e = SnapshotRow::parse("node-2", body)
            .expect_err("null")
            .to_string();
        assert!(!e.contains("not a JSON object"), "{e}");
        assert!(e.contains("skip_reason") && e.contains("null"), "{e}");
        let tired =
            br#"{"node": "node-2", "updated_at": "2026-11-30T00:00:00Z", "skip_reason": "tired"}"#;
        let e = SnapshotRow::parse("node-2", tired)
            .expect_err("tired")
            .to_string();
        assert!(
            e.contains("skip_reason") && e.contains("\"tired\"") && e.contains("\"sole_node\""),
            "{e}"
        );
        let status = br#"{"node":"n1","stream":"S","seq":1,"generation":0,"stream_created":"2026-11-01T00:00:00Z","updated_at":"2026-11-01T00:00:00Z","status":7}"#;
        let e = PositionRow::parse("S.n1", status)
            .expect_err("7")
            .to_string();
        assert!(e.contains("field status") && e.contains('7'), "{e}");
        let kind =
            br#"{"seq": 5, "owner": "alice", "kind": null, "expires_at": "2026-11-30T00:00:00Z"}"#;
        let e = HoldRow::parse("S.h1", kind)
            .expect_err("null kind")
            .to_string();
        assert!(
            e.contains("field kind") && e.contains("\"operator\""),
            "{e}"
        );
        // A body that is not one JSON object is still said so.
        let e = SnapshotRow::parse("node-2", b"{\"node\": ")
            .expect_err("cut")
            .to_string();
        assert!(e.contains("not a JSON object"), "{e}");
    }

    #[test]
    fn op_ids() {
        let id = OpId::mint(now());
        assert_eq!(id.as_str().len(), 26);
        assert!(OpId::parse(id.as_str(), now()).is_ok());
        assert_ne!(OpId::mint(now()), OpId::mint(now()), "two mints differ");
        assert_eq!(id.minted_ms(), now().timestamp_millis() as u64);

        let future = OpId::mint(now() + chrono::Duration::minutes(6));
        assert!(OpId::parse(future.as_str(), now()).is_err());
        let near = OpId::mint(now() + chrono::Duration::minutes(4));
        assert!(OpId::parse(near.as_str(), now()).is_ok());

        let valid = id.as_str().to_string();
        for bad in [
            String::new(),
            format!(" {valid}"),
            format!("{valid} "),
            valid[..25].to_string(),
            valid.to_lowercase(),
            "my-operation-0000000000000".to_string(),
            "8ZZZZZZZZZZZZZZZZZZZZZZZZZ".to_string(),
            "A".repeat(200),
        ] {
            assert!(OpId::parse(&bad, now()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn gate_rows() {
        let op = OpId::mint(now());
        let body = format!(
            r#"{{"node": "node-4", "stream": "S", "state": "evicted", "op_id": "{op}",
            "seq": 12, "landed_at": "2026-11-30T00:00:00Z", "by": "alice"}}"#
        );
        let row = GateRow::parse("S.node-4", body.as_bytes()).expect("valid");
        assert_eq!(row.state, GateState::Evicted);
        assert!(GateRow::parse("S.node-5", body.as_bytes()).is_err());
        let op_body = format!(
            r#"{{"op_id": "{op}", "sign": "evict", "node": "node-4", "logs": {{"S": 12}}}}"#
        );
        assert!(OpRow::parse(&format!("_op.{op}"), op_body.as_bytes()).is_ok());
        assert!(OpRow::parse("_op.X", op_body.as_bytes()).is_err());
    }
}
