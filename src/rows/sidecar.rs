//! The rows the sidecar writes beside the floors row (docs/contract.md):
//! the duty lease, gate rows and operation rows in the gates bucket, gate
//! records on the log, the requested watermark; and the incarnation every
//! kept row is stamped with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::*;

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
    /// The release's row format ([`crate::rows::FORMAT`]; 0: written
    /// before rows carried it).
    #[serde(default)]
    pub format: u32,
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
    /// The release's row format ([`crate::rows::FORMAT`]; 0: written
    /// before rows carried it).
    #[serde(default)]
    pub format: u32,
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
    /// The release's row format ([`crate::rows::FORMAT`]; 0: written
    /// before rows carried it).
    #[serde(default)]
    pub format: u32,
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

/// The key of the duty holder's tick row in the floors bucket.
pub const TICK_KEY: &str = "_tick";

/// The duty holder's word that it ticked (floors bucket, key `_tick`),
/// written every tick as its last write: a log's row is current while
/// `_tick` is under three ticks old and does not name the log in
/// `unpublished` (docs/contract.md, `crewlet_floors` — the published answer). A quiet fleet's
/// rows are not rewritten; this one key says they still stand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickRow {
    pub at: Timestamp,
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub format: u32,
    /// The logs whose answer this tick could not publish.
    #[serde(default)]
    pub unpublished: Vec<String>,
}

impl TickRow {
    /// Parses `_tick`'s value (one of a newer format is unreadable).
    pub fn parse(key: &str, body: &[u8]) -> Result<TickRow, Unreadable> {
        let t: TickRow = parse_json(key, body).map_err(|e| Unreadable(format!("floors {e}")))?;
        super::known_format(&format!("floors key {key}"), t.format)?;
        Ok(t)
    }
}

/// The key of what nodes need to know of the sidecar's configuration, in
/// the floors bucket (docs/contract.md, `crewlet_floors` — the published
/// answer).
pub const CONTRACT_KEY: &str = "_contract";

/// What a node needs to know of the sidecar's configuration, so that no
/// node copies the sidecar's YAML by hand: written by the duty holder when
/// it changes (floors bucket, key `_contract`). Durations are written as
/// the configuration writes them (`30s`, `7d`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractRow {
    #[serde(default)]
    pub format: u32,
    /// The presence bucket's TTL: renew a lease every third of it.
    pub presence_ttl: String,
    pub domains: Vec<ContractDomain>,
    pub at: Timestamp,
    #[serde(default)]
    pub by: String,
}

/// One log, as a node needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractDomain {
    pub stream: String,
    /// Records on this subject are gate records, not data (null: the log
    /// takes none).
    pub gate_subject: Option<String>,
    /// The generation to report positions in (0 for a log never
    /// reanchored), also before any floors row exists.
    pub generation: u64,
    /// How often nodes take snapshots, and how many counted nodes must
    /// hold a verified one before `snapshot_floor` moves.
    pub snapshots: Option<ContractSnapshots>,
    /// Which copies count: `engine` (announced, verified manifests) or
    /// `operator` (an acknowledgement), and how old the newest may be.
    pub backups: Option<ContractBackups>,
    /// No record younger than this is purged.
    pub min_age: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractSnapshots {
    pub interval: String,
    pub quorum: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractBackups {
    pub policy: String,
    pub max_age: String,
}

impl ContractRow {
    /// Parses `_contract`'s value (one of a newer format is unreadable).
    pub fn parse(key: &str, body: &[u8]) -> Result<ContractRow, Unreadable> {
        let c: ContractRow =
            parse_json(key, body).map_err(|e| Unreadable(format!("floors {e}")))?;
        super::known_format(&format!("floors key {key}"), c.format)?;
        Ok(c)
    }

    /// The row without who wrote it and when: what decides whether it
    /// changed.
    pub fn content(&self) -> (&str, &[ContractDomain]) {
        (&self.presence_ttl, &self.domains)
    }
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
    /// The release's row format ([`crate::rows::FORMAT`]; 0: written
    /// before rows carried it).
    #[serde(default)]
    pub format: u32,
}

impl Stamped for Requested {
    fn made_in(&self) -> Option<Incarnation> {
        stamped(self.stream_created, self.generation)
    }
}

impl Requested {
    /// Parses `_requested.<stream>`'s value.
    pub fn parse(key: &str, _stream: &str, body: &[u8]) -> Result<Requested, Unreadable> {
        let r: Requested = parse_json(key, body).map_err(|e| Unreadable(format!("floors {e}")))?;
        super::known_format(&format!("floors key {key}"), r.format)?;
        Ok(r)
    }

    pub fn key(stream: &str) -> String {
        format!("{REQUESTED_PREFIX}{stream}")
    }
}
