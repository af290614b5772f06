//! The counted set of a log (floor.md, The counted set): every node with a
//! positions row for the stream and every live data node, less those whose
//! eviction landed more than `fence_window` ago. Each counted node carries
//! the position the trim may assume it holds.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::answer::{NodeRow, NodeState};
use super::{BucketError, Rows, StreamState};
use crate::rows::{GateRow, GateState, PositionRow, PositionStatus, PresenceRow, RowError};

/// One node as the trim sees it on one log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub node: String,
    /// The position the trim may assume (0 when the node has no current row).
    pub effective_seq: u64,
    /// Why `effective_seq` is 0 when it is, for the term's reason.
    pub zero_reason: Option<String>,
    /// The row's own status (`log_diverged` rows' snapshots do not count).
    pub diverged: bool,
}

/// The result: counted nodes, the node table, and what blocks.
#[derive(Debug, Clone, Default)]
pub struct CountedSet {
    pub counted: Vec<Counted>,
    pub nodes: Vec<NodeRow>,
    /// Presence or positions could not be read, or a row was malformed.
    pub unreadable: Option<String>,
    /// Nodes whose current-generation position is past the log's end.
    pub ahead: Vec<(String, u64)>,
    /// The gates bucket could not be read: nobody is treated as evicted.
    pub evictions_unreadable: bool,
}

/// A node's row on this log, as parsed or as refused.
struct PositionSeen {
    row: Result<PositionRow, RowError>,
}

#[allow(clippy::too_many_arguments)]
pub fn counted_set(
    stream: &str,
    rows: &Rows,
    state: Option<&StreamState>,
    generation: u64,
    created: Option<crate::rows::Instant>,
    fence_window: Duration,
    now: DateTime<Utc>,
) -> CountedSet {
    let mut out = CountedSet::default();

    // Gates first: an evicted node's rows, however wrong, change nothing.
    let mut gates: BTreeMap<String, GateRow> = BTreeMap::new();
    match &rows.gates {
        Ok(entries) => {
            let prefix = format!("{stream}.");
            for e in entries.iter().filter(|e| e.key.starts_with(&prefix)) {
                // A gate row we cannot read evicts nobody (the safe way).
                if let Ok(g) = GateRow::parse(&e.key, &e.value) {
                    gates.insert(g.node.clone(), g);
                }
            }
        }
        Err(BucketError::Missing { .. }) | Err(BucketError::Failed { .. }) => {
            out.evictions_unreadable = true
        }
    }
    let gate_state = |node: &str| -> Option<NodeState> {
        let g = gates.get(node)?;
        if g.state != GateState::Evicted {
            return None;
        }
        let since = now.signed_duration_since(g.landed_at.0);
        let fence = chrono::Duration::from_std(fence_window).unwrap_or(chrono::Duration::MAX);
        Some(if since > fence {
            NodeState::Evicted
        } else {
            NodeState::Evicting
        })
    };

    let presence = match &rows.presence {
        Ok(entries) => {
            let mut live = BTreeMap::new();
            for e in entries {
                match PresenceRow::parse(&e.key, &e.value) {
                    Ok(p) => {
                        live.insert(p.node.clone(), p.is_data());
                    }
                    Err(err) => {
                        if gate_state(&e.key) != Some(NodeState::Evicted) {
                            out.unreadable = Some(format!("presence {err}"));
                        }
                    }
                }
            }
            live
        }
        Err(e) => {
            out.unreadable = Some(e.to_string());
            BTreeMap::new()
        }
    };

    let mut positions: BTreeMap<String, PositionSeen> = BTreeMap::new();
    match &rows.positions {
        Ok(entries) => {
            let prefix = format!("{stream}.");
            for e in entries.iter().filter(|e| e.key.starts_with(&prefix)) {
                let node = e.key[prefix.len()..].to_string();
                positions.insert(
                    node,
                    PositionSeen {
                        row: PositionRow::parse(&e.key, &e.value),
                    },
                );
            }
        }
        Err(e) => {
            if out.unreadable.is_none() {
                out.unreadable = Some(e.to_string());
            }
        }
    }

    let mut names: Vec<String> = positions.keys().cloned().collect();
    for (node, data) in &presence {
        if *data && !positions.contains_key(node) {
            names.push(node.clone());
        }
    }
    names.sort();

    for node in names {
        let live = presence.contains_key(&node);
        let gate = gate_state(&node);
        let seen = positions.get(&node);
        let mut row = NodeRow {
            node: node.clone(),
            live,
            seq: None,
            generation: None,
            left_gen: None,
            state: gate.unwrap_or(NodeState::Counted),
            updated_at: None,
        };
        let evicted = gate == Some(NodeState::Evicted);
        let mut effective_seq = 0;
        let mut zero_reason = Some(format!("{node} has not reported a position on {stream}"));
        let mut diverged = false;
        match seen.map(|s| &s.row) {
            None => {}
            Some(Err(err)) if !evicted && out.unreadable.is_none() => {
                out.unreadable = Some(format!("positions {err}"));
            }
            Some(Err(_)) => {}
            Some(Ok(p)) => {
                row.seq = Some(p.seq);
                row.updated_at = Some(p.updated_at);
                row.generation = Some(p.generation);
                let current = p.generation == generation && Some(p.stream_created) == created;
                diverged = p.status == PositionStatus::LogDiverged;
                if !current {
                    row.left_gen = Some(p.generation);
                    zero_reason = Some(format!(
                        "{node}'s position is from a generation the log has left (left gen {})",
                        p.generation
                    ));
                } else if diverged {
                    if !evicted {
                        row.state = NodeState::LogDiverged;
                    }
                    zero_reason = Some(format!("{node} reports log_diverged: it applied a history this log does not continue"));
                } else {
                    effective_seq = p.seq;
                    zero_reason = None;
                    if let Some(s) = state {
                        if p.seq > s.last_seq && !evicted {
                            row.state = NodeState::AheadOfLog;
                            out.ahead.push((node.clone(), p.seq));
                        }
                    }
                }
            }
        }
        if effective_seq == 0 && zero_reason.is_none() {
            zero_reason = Some(format!("{node} is at position 0"));
        }
        if !evicted {
            out.counted.push(Counted {
                node: node.clone(),
                effective_seq,
                zero_reason,
                diverged,
            });
        }
        out.nodes.push(row);
    }
    if out.unreadable.is_some() {
        out.ahead.clear();
    }
    out
}
