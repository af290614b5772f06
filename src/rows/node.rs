//! The rows nodes and tools write (docs/contract.md): presence leases,
//! positions, holds, backup manifests and acknowledgements, snapshot
//! registers.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use super::*;

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
    #[serde(deserialize_with = "super::whole::number")]
    pub seq: u64,
    /// With `stream_created`, names the number space `seq` belongs to.
    #[serde(deserialize_with = "super::whole::number")]
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
        #[serde(deserialize_with = "crate::rows::whole::number")]
        pub seq: u64,
        #[serde(deserialize_with = "crate::rows::whole::number")]
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
    #[serde(deserialize_with = "super::whole::number")]
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
    #[serde(deserialize_with = "super::whole::map")]
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
    #[serde(deserialize_with = "super::whole::number")]
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
    #[serde(deserialize_with = "super::whole::number")]
    pub position: u64,
    #[serde(deserialize_with = "super::whole::number")]
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
