//! PURE: evictions and readmissions (docs/decisions.md, "Evictions and readmissions";
//! docs/contract.md, Gate records on the log and Operation ids). The judgement before anything
//! is written, the gate record itself, absorbing records from a log into
//! the gates view in log order, each log's outcome, and the admission rule
//! of the gate reserve. No NATS: the broker module feeds and writes.

use crate::rows::Stamped;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::human::Surface;
use crate::rows::{
    check_node_id, GateRecordBody, GateRow, GateSign, GateState, Incarnation, OpId, OpRow,
    Timestamp, Unreadable,
};

/// Why a gesture was refused, with its exit code (docs/runbook.md, Exit codes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NodeIdInvalid(String),
    ConfirmMismatch {
        node: String,
        given: String,
    },
    ConfirmMissing,
    OpIdInvalid(String),
    NodeLive(String),
    Unjudged(String),
    BelowFloor(String),
    ReadmissionUnjudged(String),
    UnknownNode(String),
    NotEvicted(String),
    /// A readmission's join hold was not confirmed by a published answer
    /// in time: the holds placed are released and no record is written.
    JoinHoldUnconfirmed {
        stream: String,
        detail: String,
    },
}

impl std::error::Error for Refusal {}

/// As the CLI says it (flags); [`Refusal::words`] says it for a surface.
impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.words(Surface::Cli))
    }
}

impl Refusal {
    /// The refusal in words, its options named as `surface` takes them
    /// (`-force` on the command line, `"force": true` in an HTTP body).
    pub fn words(&self, surface: Surface) -> String {
        let confirm = surface.option("confirm");
        let force = surface.switch("force");
        let code = self.code();
        match self {
            Refusal::NodeIdInvalid(e) => format!("{code}: the node id {e}"),
            Refusal::ConfirmMismatch { node, given } => {
                format!("{code}: {confirm} {given:?} does not repeat the node id {node:?}")
            }
            Refusal::ConfirmMissing => {
                format!("{code}: {confirm} is required (repeat the node id)")
            }
            Refusal::OpIdInvalid(e) => format!("{code}: {} {e}", surface.option("op-id")),
            Refusal::NodeLive(node) => format!("{code}: {node} holds a live presence lease; stop it first, or {force} for a node wedged in a way that still renews its lease"),
            Refusal::Unjudged(e) => format!("{code}: presence cannot be read ({e}); nothing written. {force} takes the eviction past this (logged as forced unjudged)"),
            Refusal::BelowFloor(e) => format!("{code}: {e}"),
            Refusal::ReadmissionUnjudged(e) => format!("{code}: {e}; nothing written"),
            Refusal::UnknownNode(node) => format!("{code}: the fleet has never seen {node} (no position on any log, no presence lease, no gate row); check the name, or {force} to evict it anyway; nothing written"),
            Refusal::NotEvicted(node) => format!("{code}: {node} is not evicted on any log that takes gate records; nothing to readmit, nothing written"),
            Refusal::JoinHoldUnconfirmed { stream, detail } => format!("{code}: the join hold on {stream} was not shown in force by a published answer ({detail}); the join holds are released and nothing is written. Check that a sidecar holds the trim duty and publishes (crewlet retention status), then readmit again"),
        }
    }

    /// 2 for bad input, 1 for a judgement.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Refusal::NodeIdInvalid(_)
                | Refusal::ConfirmMismatch { .. }
                | Refusal::ConfirmMissing
                | Refusal::OpIdInvalid(_)
        )
    }

    /// The stable reason code.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NodeIdInvalid(_) => "node_id_invalid",
            Refusal::ConfirmMismatch { .. } => "confirm_mismatch",
            Refusal::ConfirmMissing => "confirm_missing",
            Refusal::OpIdInvalid(_) => "op_id_invalid",
            Refusal::NodeLive(_) => "node_live",
            Refusal::Unjudged(_) => "unjudged",
            Refusal::BelowFloor(_) => "below_floor",
            Refusal::ReadmissionUnjudged(_) => "readmission_unjudged",
            Refusal::UnknownNode(_) => "unknown_node",
            Refusal::NotEvicted(_) => "not_evicted",
            Refusal::JoinHoldUnconfirmed { .. } => "join_hold_unconfirmed",
        }
    }
}

/// Checks the input of a gesture, in the order the spec fixes: the
/// operation id before anything else is judged, then the node id, then the
/// confirmation. Returns the id to use (minted when none was given).
pub fn check_input(
    node: &str,
    confirm: Option<&str>,
    op_id: Option<&str>,
    now: DateTime<Utc>,
) -> Result<OpId, Refusal> {
    let op = match op_id {
        Some(text) => OpId::parse(text, now).map_err(|e| Refusal::OpIdInvalid(e.0))?,
        None => OpId::mint(now),
    };
    check_node_id(node).map_err(|e| Refusal::NodeIdInvalid(e.0))?;
    match confirm {
        None => Err(Refusal::ConfirmMissing),
        Some(c) if c != node => Err(Refusal::ConfirmMismatch {
            node: node.to_string(),
            given: c.to_string(),
        }),
        Some(_) => Ok(op),
    }
}

/// What is known about the node's presence lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    Live,
    Absent,
    Unreadable(String),
}

/// How an eviction passed its judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictJudged {
    Clear,
    /// `-force` past a live lease.
    ForcedLive,
    /// `-force` past unreadable presence (logged as forced unjudged).
    ForcedUnjudged,
}

pub fn judge_evict(node: &str, presence: &Presence, force: bool) -> Result<EvictJudged, Refusal> {
    match (presence, force) {
        (Presence::Absent, _) => Ok(EvictJudged::Clear),
        (Presence::Live, true) => Ok(EvictJudged::ForcedLive),
        (Presence::Live, false) => Err(Refusal::NodeLive(node.to_string())),
        (Presence::Unreadable(_), true) => Ok(EvictJudged::ForcedUnjudged),
        (Presence::Unreadable(e), false) => Err(Refusal::Unjudged(e.clone())),
    }
}

/// An eviction names a node the fleet has seen (a position, a lease, a
/// gate row), unless forced: a typo must not write a record.
pub fn judge_known(node: &str, seen: bool, force: bool) -> Result<(), Refusal> {
    if seen || force {
        Ok(())
    } else {
        Err(Refusal::UnknownNode(node.to_string()))
    }
}

/// A readmission names a node that is evicted somewhere.
pub fn judge_evicted(node: &str, evicted: bool) -> Result<(), Refusal> {
    if evicted {
        Ok(())
    } else {
        Err(Refusal::NotEvicted(node.to_string()))
    }
}

/// What readmission compares on one log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadmitFacts {
    pub stream: String,
    /// The node's position, if it has one at the log's current generation.
    pub position: Option<u64>,
    /// Set when the node's row belongs to a generation the log has left.
    pub left_gen: Option<u64>,
    pub floor: Option<u64>,
    pub first_seq: u64,
    pub generation: u64,
}

/// Readmission is judged on every log before any is written: the node's
/// position must reach `max(floor, first_seq) - 1` on each (a node that has
/// never reported holds nothing; one of a left generation is refused).
pub fn judge_readmit(node: &str, logs: &[Result<ReadmitFacts, Unreadable>]) -> Result<(), Refusal> {
    let mut below = Vec::new();
    for log in logs {
        let f = log
            .as_ref()
            .map_err(|e| Refusal::ReadmissionUnjudged(e.to_string()))?;
        let bound = f.floor.unwrap_or(0).max(f.first_seq).saturating_sub(1);
        let held = f.position.unwrap_or(0);
        if f.left_gen.is_some() || held < bound {
            let pos = match (f.position, f.left_gen) {
                (_, Some(g)) => format!("a position of generation {g}, which the log has left"),
                (Some(p), None) => format!("position {p}"),
                (None, None) => "no position".to_string(),
            };
            let floor = f
                .floor
                .map(|x| x.to_string())
                .unwrap_or_else(|| "none".into());
            below.push(format!(
                "{node} has {pos} on {} but needs {bound} (floor {floor}, first_seq {}, generation {})",
                f.stream, f.first_seq, f.generation
            ));
        }
    }
    if below.is_empty() {
        Ok(())
    } else {
        Err(Refusal::BelowFloor(format!(
            "{}; let it catch up (or adopt a snapshot) and run this again",
            below.join("; ")
        )))
    }
}

/// The headers of a gate record.
pub const H_GATE: &str = "Crewlet-Gate";
pub const H_NODE: &str = "Crewlet-Node";
pub const H_OP: &str = "Crewlet-Op-Id";

/// `Nats-Msg-Id` of a gate record: the broker's duplicate window collapses a
/// resend of the same gesture onto the first record.
pub fn msg_id(op: &OpId, sign: GateSign, stream: &str, node: &str) -> String {
    format!("{op}.{}.{stream}.{node}", sign.as_str())
}

/// One gesture: what every log's gate record says.
#[derive(Debug, Clone, Copy)]
pub struct Gesture<'a> {
    pub op: &'a OpId,
    pub sign: GateSign,
    pub node: &'a str,
    pub by: &'a str,
    pub force: bool,
    pub reason: &'a str,
}

/// The gate record of `g` for `stream`: headers and JSON body.
pub fn record(
    g: &Gesture,
    stream: &str,
    now: DateTime<Utc>,
) -> (Vec<(&'static str, String)>, Vec<u8>) {
    let body = GateRecordBody {
        kind: g.sign,
        node: g.node.to_string(),
        op_id: g.op.to_string(),
        by: g.by.to_string(),
        at: Timestamp(now),
        force: g.force,
        reason: g.reason.to_string(),
    };
    let headers = vec![
        ("Nats-Msg-Id", msg_id(g.op, g.sign, stream, g.node)),
        (H_GATE, g.sign.as_str().to_string()),
        (H_NODE, g.node.to_string()),
        (H_OP, g.op.to_string()),
    ];
    (headers, serde_json::to_vec(&body).unwrap_or_default())
}

/// A gate record read back from a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub seq: u64,
    /// The broker's timestamp: the fence window runs from here.
    pub landed_at: Timestamp,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

/// A record the view could not absorb, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub seq: u64,
    pub reason: String,
}

/// Prefix of the absorption cursor keys in the gates bucket.
pub const CURSOR_PREFIX: &str = "_absorbed.";

/// How far the gates view has read a log (gates bucket, key
/// `_absorbed.<stream>`): every gate record at or below `seq` has been
/// absorbed or skipped. The trim never purges past it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub stream: String,
    pub seq: u64,
    /// The most recent records skipped as malformed (at most 20).
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// The incarnation of the log `seq` counts in. A cursor of another
    /// incarnation (or one written before cursors carried it) proves
    /// nothing about this log: the view starts afresh from its first
    /// sequence.
    #[serde(default)]
    pub stream_created: Option<Timestamp>,
    #[serde(default)]
    pub generation: Option<u64>,
    /// The release's row format ([`crate::rows::FORMAT`]; 0: written
    /// before rows carried it).
    #[serde(default)]
    pub format: u32,
}

impl crate::rows::Stamped for Cursor {
    fn made_in(&self) -> Option<Incarnation> {
        crate::rows::stamped(self.stream_created, self.generation)
    }
}

impl Cursor {
    pub fn key(stream: &str) -> String {
        format!("{CURSOR_PREFIX}{stream}")
    }

    /// Parses a cursor row strictly: a malformed cursor is an error that
    /// names its key, never a view that starts over (that would purge
    /// records it has not read).
    pub fn parse(key: &str, body: &[u8]) -> Result<Cursor, Unreadable> {
        let c: Cursor =
            serde_json::from_slice(body).map_err(|e| format!("gates key {key}: {e}"))?;
        crate::rows::known_format(&format!("gates key {key}"), c.format)?;
        if Cursor::key(&c.stream) != key {
            return Err(Unreadable(format!(
                "gates key {key}: the row names stream {}",
                c.stream
            )));
        }
        Ok(c)
    }
}

/// Where a reanchor records the generation it opened, outside the floors
/// bucket: a floors row lost after a reanchor, before any node reported in
/// the new generation, must not read as generation 0 again
/// (docs/trim-floor.md, Watermarks belong to one incarnation).
pub const ANCHOR_PREFIX: &str = "_anchor.";

/// A reanchor's record in the gates bucket under `_anchor.<stream>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub stream: String,
    pub generation: u64,
    pub stream_created: Timestamp,
    pub generation_opened_at: Timestamp,
    #[serde(default)]
    pub by: String,
    /// The release's row format ([`crate::rows::FORMAT`]; 0: written
    /// before rows carried it).
    #[serde(default)]
    pub format: u32,
}

impl Anchor {
    pub fn key(stream: &str) -> String {
        format!("{ANCHOR_PREFIX}{stream}")
    }

    /// Parses an anchor row strictly (its key must name its stream).
    pub fn parse(key: &str, body: &[u8]) -> Result<Anchor, Unreadable> {
        let a: Anchor =
            serde_json::from_slice(body).map_err(|e| format!("gates key {key}: {e}"))?;
        crate::rows::known_format(&format!("gates key {key}"), a.format)?;
        if Anchor::key(&a.stream) != key {
            return Err(Unreadable(format!(
                "gates key {key}: the row names stream {}",
                a.stream
            )));
        }
        Ok(a)
    }
}

/// Where the duty holder notes when a log was first found to have lost
/// the sidecar's memory (docs/trim-floor.md, The log remembers that it was
/// adopted): the gates bucket, which is not the floors bucket that was
/// lost, so that status says since when whoever asks.
pub const LOST_PREFIX: &str = "_lost.";

/// The note under `_lost.<stream>`: the broker time of the first tick that
/// found the log's memory lost, and what was lost then. Written once (by
/// create), deleted by the first tick that finds the memory intact again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostNote {
    pub stream: String,
    pub since: Timestamp,
    #[serde(default)]
    pub lost: String,
    #[serde(default)]
    pub format: u32,
}

impl LostNote {
    pub fn key(stream: &str) -> String {
        format!("{LOST_PREFIX}{stream}")
    }

    /// Parses a note strictly (its key must name its stream).
    pub fn parse(key: &str, body: &[u8]) -> Result<LostNote, Unreadable> {
        let n: LostNote =
            serde_json::from_slice(body).map_err(|e| format!("gates key {key}: {e}"))?;
        crate::rows::known_format(&format!("gates key {key}"), n.format)?;
        if LostNote::key(&n.stream) != key {
            return Err(Unreadable(format!(
                "gates key {key}: the row names stream {}",
                n.stream
            )));
        }
        Ok(n)
    }
}

/// The part of the gates view one log's absorption reads.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Gate rows of this log, by node.
    pub gates: BTreeMap<String, GateRow>,
    /// Operation rows, by op id.
    pub ops: BTreeMap<String, OpRow>,
}

/// What absorbing wrote (or would write).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Absorbed {
    pub gates: Vec<GateRow>,
    pub ops: Vec<OpRow>,
    pub cursor: Option<Cursor>,
    /// Newly skipped records, for the log.
    pub skipped: Vec<Skipped>,
}

fn parse_record(r: &LogRecord) -> Result<GateRecordBody, Unreadable> {
    let body: GateRecordBody =
        serde_json::from_slice(&r.body).map_err(|e| format!("body is not a gate record: {e}"))?;
    check_node_id(&body.node).map_err(|e| format!("node {e}"))?;
    OpId::check_syntax(&body.op_id).map_err(|e| format!("op_id {e}"))?;
    let header = |name: &str| r.headers.get(name).map(String::as_str);
    if header(H_GATE) != Some(body.kind.as_str())
        || header(H_NODE) != Some(body.node.as_str())
        || header(H_OP) != Some(body.op_id.as_str())
    {
        return Err("headers and body disagree (Crewlet-Gate, Crewlet-Node, Crewlet-Op-Id)".into());
    }
    Ok(body)
}

/// Absorbs `records` (this log's gate records after the cursor, in log
/// order) into `view`. `scanned_to` is the last sequence the scan covered:
/// the new cursor.
pub fn absorb(
    stream: &str,
    incarnation: Incarnation,
    view: &View,
    previous: Option<&Cursor>,
    records: &[LogRecord],
    scanned_to: u64,
) -> Absorbed {
    // A cursor of another incarnation proves nothing here: start afresh.
    let previous = previous.filter(|c| c.belongs_to(&incarnation));
    // Rows of another incarnation never apply: any record replaces them.
    let mut gates: BTreeMap<String, GateRow> = view
        .gates
        .iter()
        .filter(|(_, g)| g.belongs_to(&incarnation))
        .map(|(n, g)| (n.clone(), g.clone()))
        .collect();
    let mut ops = view.ops.clone();
    let mut changed_gates: BTreeMap<String, GateRow> = BTreeMap::new();
    let mut changed_ops: BTreeMap<String, OpRow> = BTreeMap::new();
    let mut skipped = Vec::new();
    let from = previous.map_or(0, |c| c.seq);
    for r in records.iter().filter(|r| r.seq > from) {
        let body = match parse_record(r) {
            Ok(b) => b,
            Err(reason) => {
                skipped.push(Skipped {
                    seq: r.seq,
                    reason: reason.to_string(),
                });
                continue;
            }
        };
        if let Some(op) = ops.get(&body.op_id) {
            if op.sign != body.kind || op.node != body.node {
                skipped.push(Skipped {
                    seq: r.seq,
                    reason: format!(
                        "op_reused: {} names {} {} already",
                        body.op_id,
                        op.sign.as_str(),
                        op.node
                    ),
                });
                continue;
            }
            if let Some(&at) = op.logs.get(stream) {
                if at != r.seq {
                    skipped.push(Skipped {
                        seq: r.seq,
                        reason: format!("duplicate of operation {} already at {at}", body.op_id),
                    });
                    continue;
                }
            }
        }
        // The same record read again (a fresh view of a re-anchored log
        // re-reads what an earlier generation absorbed) leaves the
        // operation as it is but still makes the gate row of this view.
        let known = ops
            .get(&body.op_id)
            .is_some_and(|op| op.logs.get(stream) == Some(&r.seq));
        if !known {
            let mut op = ops.get(&body.op_id).cloned().unwrap_or(OpRow {
                op_id: body.op_id.clone(),
                sign: body.kind,
                node: body.node.clone(),
                logs: BTreeMap::new(),
                format: crate::rows::FORMAT,
            });
            op.logs.insert(stream.to_string(), r.seq);
            ops.insert(op.op_id.clone(), op.clone());
            changed_ops.insert(op.op_id.clone(), op);
        }
        // Log order decides: a later record on the same node wins.
        if gates.get(&body.node).is_none_or(|g| g.seq < r.seq) {
            let row = GateRow {
                node: body.node.clone(),
                stream: stream.to_string(),
                state: match body.kind {
                    GateSign::Evict => GateState::Evicted,
                    GateSign::Readmit => GateState::Admitted,
                },
                op_id: body.op_id.clone(),
                seq: r.seq,
                landed_at: r.landed_at,
                by: body.by.clone(),
                force: body.force,
                reason: body.reason.clone(),
                stream_created: Some(incarnation.stream_created),
                generation: Some(incarnation.generation),
                format: crate::rows::FORMAT,
            };
            gates.insert(body.node.clone(), row.clone());
            changed_gates.insert(body.node.clone(), row);
        }
    }
    let mut all_skipped = previous.map(|c| c.skipped.clone()).unwrap_or_default();
    all_skipped.extend(skipped.iter().cloned());
    let keep_from = all_skipped.len().saturating_sub(20);
    let to = scanned_to.max(from);
    let cursor = Cursor {
        stream: stream.to_string(),
        seq: to,
        skipped: all_skipped[keep_from..].to_vec(),
        stream_created: Some(incarnation.stream_created),
        generation: Some(incarnation.generation),
        format: crate::rows::FORMAT,
    };
    Absorbed {
        gates: changed_gates.into_values().collect(),
        ops: changed_ops.into_values().collect(),
        cursor: (previous != Some(&cursor)).then_some(cursor),
        skipped,
    }
}

/// One log's answer to a gesture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum LogOutcome {
    /// On the log at `seq`, and absorbed into the gates view.
    Applied { seq: u64 },
    /// On the log at `seq`, not yet absorbed.
    Pending { seq: u64 },
    /// No answer (timeout, dropped connection): finish with the same id.
    Unknown { error: String },
    /// Not written, and why.
    NotWritten { reason: NotWritten, detail: String },
}

/// Why a log's record was not written (docs/trim-floor.md, Evictions and
/// readmissions): what the finishing command depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotWritten {
    /// Past even the gate reserve: raise the ceiling, then the same op id.
    LogFull,
    /// The op id names another gesture: start a new one.
    OpReused,
    /// A later gate on the node undid it: start a new one.
    Superseded,
    /// The broker refused it (not on the log): the same op id retries.
    Refused,
}

impl NotWritten {
    pub fn as_str(self) -> &'static str {
        match self {
            NotWritten::LogFull => "log_full",
            NotWritten::OpReused => "op_reused",
            NotWritten::Superseded => "superseded",
            NotWritten::Refused => "refused",
        }
    }

    /// Whether finishing takes a new gesture rather than the same op id.
    pub fn needs_new_gesture(self) -> bool {
        matches!(self, NotWritten::OpReused | NotWritten::Superseded)
    }
}

impl LogOutcome {
    pub fn finished(&self) -> bool {
        matches!(
            self,
            LogOutcome::Applied { .. } | LogOutcome::Pending { .. }
        )
    }

    /// The words printed after the stream name.
    pub fn text(&self) -> String {
        match self {
            LogOutcome::Applied { seq } => format!("applied at {seq}"),
            LogOutcome::Pending { seq } => {
                format!("pending at {seq} (on the log; the gates view has not absorbed it yet)")
            }
            LogOutcome::Unknown { error } => format!("unknown ({error})"),
            LogOutcome::NotWritten { reason, detail } => {
                format!("not written: {} ({detail})", reason.as_str())
            }
        }
    }
}

/// Where the operation already stands, before anything is written: a
/// retry first looks the operation up in the gates bucket (docs/trim-floor.md,
/// Evictions and readmissions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prior {
    /// The id is new.
    New,
    /// The id names this gesture; `logs` holds where it already landed.
    Same { logs: BTreeMap<String, u64> },
    /// The id names another gesture: start a new one.
    Reused { sign: GateSign, node: String },
    /// A later gate on the node undid it on `stream`: start a new one.
    Superseded {
        logs: BTreeMap<String, u64>,
        stream: String,
        by_op: String,
    },
}

/// Classifies an operation id against the gates view: the `_op` row and
/// each log's gate row for the node.
pub fn prior(
    op: &OpId,
    sign: GateSign,
    node: &str,
    op_row: Option<&OpRow>,
    gate_rows: &BTreeMap<String, GateRow>,
) -> Prior {
    let Some(row) = op_row else { return Prior::New };
    if row.sign != sign || row.node != node {
        return Prior::Reused {
            sign: row.sign,
            node: row.node.clone(),
        };
    }
    for (stream, &at) in &row.logs {
        if let Some(g) = gate_rows.get(stream) {
            if g.op_id != op.as_str() && g.seq > at {
                return Prior::Superseded {
                    logs: row.logs.clone(),
                    stream: stream.clone(),
                    by_op: g.op_id.clone(),
                };
            }
        }
    }
    Prior::Same {
        logs: row.logs.clone(),
    }
}

/// Whether a record may be admitted to a log (the gate reserve,
/// docs/contract.md). Publishers that honour the reserve call this with the
/// published `soft_ceiling_bytes` (floors row) and the stream's `max_bytes`
/// before publishing: ordinary records only up to the soft ceiling, gate
/// records (an eviction or a readmission, nothing else) up to `max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    Ordinary,
    Gate,
}

/// The answer of [`admission`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// Refused before anything is sent: the log is full for this kind.
    Refuse {
        limit_bytes: u64,
        would_hold: u64,
    },
}

/// See [`RecordKind`]. `stream_bytes` is what the log holds now,
/// `record_bytes` the record's size (payload plus headers and subject).
pub fn admission(
    kind: RecordKind,
    stream_bytes: u64,
    record_bytes: u64,
    soft_ceiling_bytes: u64,
    max_bytes: u64,
) -> Admission {
    let limit = match kind {
        RecordKind::Ordinary => soft_ceiling_bytes,
        RecordKind::Gate => max_bytes,
    };
    let would_hold = stream_bytes.saturating_add(record_bytes);
    if would_hold <= limit {
        Admission::Admit
    } else {
        Admission::Refuse {
            limit_bytes: limit,
            would_hold,
        }
    }
}

#[cfg(test)]
mod tests;
