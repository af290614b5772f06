//! The counted set of a log (docs/trim-floor.md, The counted set): every node with a
//! positions row for the stream and every live data node, less those whose
//! eviction landed more than `fence_window` ago. Each counted node carries
//! the position the trim may assume it holds.

use crate::rows::Stamped;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::answer::{Cause, NodeRow, NodeState};
use super::members::Remembered;
use super::parsed::{ByNode, ParsedRows};
use super::StreamState;
use crate::rows::{GateRow, GateState, Incarnation, PositionStatus, PresenceRow, Timestamp};

/// Why a counted node is assumed to hold nothing; worded only when it binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroReason {
    NoRow,
    LeftGen(u64),
    /// The row names the current generation but another `created` time:
    /// a log of the same name that no longer exists, or (when the time is
    /// the log's own, cut short) a node that passed it through a date type
    /// of lower precision.
    OtherLog {
        named: Timestamp,
        log: Option<Timestamp>,
    },
    Diverged,
    AtZero,
}

impl ZeroReason {
    pub fn words(self, node: &str, stream: &str) -> String {
        match self {
            ZeroReason::NoRow => format!("{node} has not reported a position on {stream}"),
            ZeroReason::LeftGen(g) => {
                format!("{node}'s position is from a generation the log has left (left gen {g})")
            }
            ZeroReason::OtherLog { named, log } => match log {
                Some(log) if cut_short(named, log) => format!(
                    "{node}'s position names the log as created at {named}, which is the log's \
                     creation time {log} cut short: a row carries stream_created exactly as the \
                     broker gives it, to the nanosecond (see docs/contract.md)"
                ),
                Some(log) => format!(
                    "{node}'s position is from another log of this name (created at {named}; \
                     this one was created at {log}): the node must start over on this log"
                ),
                None => format!(
                    "{node}'s position is from another log of this name (created at {named})"
                ),
            },
            ZeroReason::Diverged => format!(
                "{node} reports log_diverged: it applied a history this log does not continue"
            ),
            ZeroReason::AtZero => format!("{node} is at position 0"),
        }
    }
}

/// Whether `named` is `log` with its fraction cut to fewer digits (a
/// millisecond or microsecond date type, or whole seconds).
fn cut_short(named: Timestamp, log: Timestamp) -> bool {
    use chrono::Timelike;
    let (a, b) = (named.0, log.0);
    if a == b || a.timestamp() != b.timestamp() {
        return false;
    }
    let nanos = b.nanosecond();
    [1_000_000_000, 1_000_000, 1_000]
        .iter()
        .any(|unit| a.nanosecond() == nanos / unit * unit)
}

/// One node as the trim sees it on one log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted<'a> {
    pub node: &'a str,
    /// The position the trim may assume (0 when the node has no current row).
    pub effective_seq: u64,
    /// Why `effective_seq` is 0 when it is.
    pub zero_reason: Option<ZeroReason>,
    /// The row's own status (`log_diverged` rows' snapshots do not count).
    pub diverged: bool,
}

/// The result: counted nodes, the node table, and what blocks.
#[derive(Debug, Clone, Default)]
pub struct CountedSet<'a> {
    pub counted: Vec<Counted<'a>>,
    pub nodes: Vec<NodeRow>,
    /// Presence or positions could not be read, or a row was malformed.
    pub unreadable: Option<(String, Cause)>,
    /// Nodes whose current-generation position is past the log's end.
    pub ahead: Vec<(String, u64)>,
    /// The gates bucket could not be read: nobody is treated as evicted.
    pub evictions_unreadable: bool,
    /// The highest generation any well-formed row on this log names
    /// (whatever its node's state): without a floors row, a later one than
    /// 0 means the row was lost. Taken in the walk that judges the rows,
    /// so the answer reads the 100,000 rows once.
    pub highest_generation: Option<u64>,
}

/// The generation the answer belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Generation {
    pub number: u64,
    pub created: Option<Timestamp>,
}

static NO_PRESENCE: ByNode<PresenceRow> = BTreeMap::new();

fn bucket_cause(e: &super::BucketError) -> (String, Cause) {
    let cause = match e {
        super::BucketError::Missing { .. } => Cause::MissingBucket,
        super::BucketError::Failed { .. } => Cause::Read,
    };
    (e.to_string(), cause)
}
static NO_POSITIONS: ByNode<super::parsed::Position> = BTreeMap::new();

#[allow(clippy::too_many_arguments)]
pub fn counted_set<'a>(
    stream: &str,
    rows: &'a ParsedRows,
    state: Option<&StreamState>,
    generation: Generation,
    incarnation: Option<Incarnation>,
    fence_window: Duration,
    carried: Option<&'a Remembered>,
    now: DateTime<Utc>,
) -> CountedSet<'a> {
    let mut out = CountedSet::default();
    let fence = chrono::Duration::from_std(fence_window).unwrap_or(chrono::Duration::MAX);

    // Gates first: an evicted node's rows, however wrong, change nothing.
    let empty = BTreeMap::new();
    let gates: &BTreeMap<String, GateRow> = match &rows.gates {
        Ok(g) => g.rows.get(stream).unwrap_or(&empty),
        // Before the sidecar's first run its gates bucket does not exist:
        // nothing was absorbed, so nobody is evicted by the view.
        Err(super::BucketError::Missing { .. }) => &empty,
        Err(_) => {
            out.evictions_unreadable = true;
            &empty
        }
    };
    // A gate row of another incarnation of the log never applies (the next
    // gate on that node in this one replaces it).
    let gate_state = |node: &str| -> Option<NodeState> {
        let g = gates.get(node)?;
        if g.state != GateState::Evicted || !incarnation.is_some_and(|i| g.belongs_to(&i)) {
            return None;
        }
        Some(if now.signed_duration_since(g.landed_at.0) > fence {
            NodeState::Evicted
        } else {
            NodeState::Evicting
        })
    };

    let presence = match &rows.presence {
        Ok(p) => p,
        Err(e) => {
            out.unreadable = Some(bucket_cause(e));
            &NO_PRESENCE
        }
    };
    for (node, row) in presence {
        if let Err(err) = row {
            if out.unreadable.is_none() && gate_state(node) != Some(NodeState::Evicted) {
                out.unreadable = Some((format!("presence {err}"), Cause::Row));
            }
        }
    }
    let positions = match &rows.positions {
        Ok(p) => p.get(stream).unwrap_or(&NO_POSITIONS),
        Err(e) => {
            if out.unreadable.is_none() {
                out.unreadable = Some(bucket_cause(e));
            }
            &NO_POSITIONS
        }
    };

    // Nodes with a row on this log and live data nodes without one, in
    // name order, each with whether it is live: both maps are sorted, so
    // one merge answers all three questions without a lookup per node.
    // Each node is judged as the merge reaches it, while its row is in
    // cache: a second pass over 100,000 rows missed the cache on every one
    // (docs/performance.md, The pure floor).
    type Seen<'r> = Option<&'r super::parsed::Parsed<super::parsed::Position>>;
    out.nodes.reserve(positions.len());
    out.counted.reserve(positions.len());
    let mut rows_it = positions.iter().peekable();
    let mut live_it = presence.iter().peekable();
    loop {
        // One comparison a step: the names' bytes are the walk's cost.
        let order = match (rows_it.peek(), live_it.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((a, _)), Some((b, _))) => a.as_str().cmp(b.as_str()),
        };
        let (name, seen, live): (&'a smol_str::SmolStr, Seen<'a>, bool) = match order {
            Ordering::Equal => {
                let (Some((n, r)), Some(_)) = (rows_it.next(), live_it.next()) else {
                    break;
                };
                (n, Some(r), true)
            }
            Ordering::Less => {
                let Some((n, r)) = rows_it.next() else { break };
                (n, Some(r), false)
            }
            Ordering::Greater => {
                let Some((n, p)) = live_it.next() else { break };
                if !matches!(p, Ok(p) if p.is_data()) {
                    continue;
                }
                (n, None, true)
            }
        };
        let node: &'a str = name;
        let gate = gate_state(node);
        let evicted = gate == Some(NodeState::Evicted);
        let mut row = NodeRow {
            node: name.clone(),
            live,
            seq: None,
            generation: None,
            left_gen: None,
            state: gate.unwrap_or(NodeState::Counted),
            updated_at: None,
            carried_from: None,
        };
        let mut effective_seq = 0;
        let mut zero_reason = Some(ZeroReason::NoRow);
        let mut diverged = false;
        match seen {
            None => {}
            Some(Err(err)) if !evicted && out.unreadable.is_none() => {
                out.unreadable = Some((format!("positions {err}"), Cause::Row));
            }
            Some(Err(_)) => {}
            Some(Ok(p)) => {
                out.highest_generation = out.highest_generation.max(Some(p.generation));
                row.seq = Some(p.seq);
                row.updated_at = Some(p.updated_at);
                row.generation = Some(p.generation);
                let current = p.generation == generation.number
                    && Some(p.stream_created) == generation.created;
                diverged = p.status == PositionStatus::LogDiverged;
                if !current {
                    row.left_gen = Some(p.generation);
                    zero_reason = Some(if p.generation == generation.number {
                        ZeroReason::OtherLog {
                            named: p.stream_created,
                            log: generation.created,
                        }
                    } else {
                        ZeroReason::LeftGen(p.generation)
                    });
                } else if diverged {
                    if !evicted {
                        row.state = NodeState::LogDiverged;
                    }
                    zero_reason = Some(ZeroReason::Diverged);
                } else {
                    effective_seq = p.seq;
                    zero_reason = (p.seq == 0).then_some(ZeroReason::AtZero);
                    if let Some(s) = state {
                        if p.seq > s.last_seq && !evicted {
                            row.state = NodeState::AheadOfLog;
                            out.ahead.push((node.to_string(), p.seq));
                        }
                    }
                }
            }
        }
        if !evicted {
            out.counted.push(Counted {
                node,
                effective_seq,
                zero_reason,
                diverged,
            });
        }
        out.nodes.push(row);
    }
    if out.unreadable.is_none() {
        if let Some(memory) = carried {
            carry(&mut out, memory, rows, generation, state, &gate_state);
        }
    }
    if out.unreadable.is_some() {
        out.ahead.clear();
    }
    out
}

/// The members the memory keeps that no bucket shows now
/// (docs/trim-floor.md, The sidecar's memory): a remembered node that is
/// not in the counted set by a row or a live lease, where the positions or
/// presence bucket was recreated since the memory was written (or that the
/// memory already carried), stays counted (`carried`) at the remembered
/// `applied` (at or below its own last position: never above what it
/// needed) until it reports again or its eviction lands.
fn carry<'a>(
    out: &mut CountedSet<'a>,
    memory: &'a Remembered,
    rows: &ParsedRows,
    generation: Generation,
    state: Option<&StreamState>,
    gate_state: &dyn Fn(&str) -> Option<NodeState>,
) {
    let lost = recreated(memory, "positions", rows.created.positions)
        || recreated(memory, "presence", rows.created.presence);
    let at = memory.applied.unwrap_or(0);
    let from = memory.buckets.get("positions").copied();
    // Added apart and merged after: the walk's table must stay sorted
    // while it is searched.
    let mut rows_added = Vec::new();
    let mut counted_added = Vec::new();
    for (name, was_carried) in &memory.membership.nodes {
        if !(lost || *was_carried) {
            continue;
        }
        if out
            .nodes
            .binary_search_by(|n| n.node.as_str().cmp(name.as_str()))
            .is_ok()
        {
            // Its row, or its live lease, counts it: its owner wrote again.
            continue;
        }
        let node: &'a str = name;
        let gate = gate_state(node);
        if gate == Some(NodeState::Evicted) {
            // The eviction landed: the pin ends, and the memory forgets it.
            continue;
        }
        let mut row = NodeRow {
            node: name.clone(),
            live: false,
            seq: Some(at),
            generation: Some(generation.number),
            left_gen: None,
            state: gate.unwrap_or(NodeState::Carried),
            updated_at: None,
            carried_from: from,
        };
        // Remembered past the log's end (the log was restored): as a row
        // there, NOT READY rather than a license to the end.
        if state.is_some_and(|s| at > s.last_seq) {
            row.state = NodeState::AheadOfLog;
            out.ahead.push((node.to_string(), at));
        }
        rows_added.push(row);
        counted_added.push(Counted {
            node,
            effective_seq: at,
            zero_reason: (at == 0).then_some(ZeroReason::AtZero),
            diverged: false,
        });
    }
    if !rows_added.is_empty() {
        out.nodes.extend(rows_added);
        out.counted.extend(counted_added);
        // The table and the counted set stay in name order, as the walk
        // made them.
        out.nodes.sort_by(|a, b| a.node.cmp(&b.node));
        out.counted.sort_by(|a, b| a.node.cmp(b.node));
    }
}

/// Whether the bucket of `role` read now (created `now`) is not the one
/// the memory was written from.
pub fn recreated(memory: &Remembered, role: &str, now: Option<Timestamp>) -> bool {
    match (memory.buckets.get(role), now) {
        (Some(was), Some(now)) => *was != now,
        _ => false,
    }
}
