//! PURE: pins that outlive a lost bucket (docs/trim-floor.md, A lost bucket
//! lifts no pin). A positions or holds row lost with its bucket is not its
//! owner ending the pin, so every published floors row records the pins its
//! answer was computed from, with the creation time of the bucket each was
//! read from. When a later tick finds that bucket recreated (another
//! `created`), a pin the new bucket does not hold is *carried*: it stays in
//! force until its owner writes again, the hold expires, or an eviction
//! lands.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

use crate::rows::Timestamp;

/// What a floors row carries under `pins`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinsRecord {
    /// The `created` time of each node-written bucket the answer read,
    /// by role (`presence`, `positions`, `holds`, `backups`, `snapshots`).
    #[serde(default)]
    pub buckets: BTreeMap<String, Timestamp>,
    /// Counted nodes with a position on this log (docs/decisions.md says
    /// why a live data node's is left out), by node id.
    #[serde(default)]
    pub nodes: BTreeMap<SmolStr, NodePin>,
    /// Live holds on this log, by hold id.
    #[serde(default)]
    pub holds: BTreeMap<String, HoldPin>,
}

/// A counted node's position as the answer counted it: its row's `seq`,
/// or 0 for a row of another generation or incarnation, or one that
/// diverged (never a position it merely reported).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePin {
    pub seq: u64,
    pub generation: u64,
    /// The `created` time of the positions bucket the row was read from.
    pub bucket_created: Timestamp,
}

/// A live hold as its row said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldPin {
    pub seq: u64,
    pub owner: String,
    pub expires_at: Timestamp,
    /// The `created` time of the holds bucket the row was read from.
    pub bucket_created: Timestamp,
}

/// The creation times of the node-written buckets as this tick read them
/// (`None`: not read, or the bucket is missing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketsCreated {
    pub presence: Option<Timestamp>,
    pub positions: Option<Timestamp>,
    pub holds: Option<Timestamp>,
    pub backups: Option<Timestamp>,
    pub snapshots: Option<Timestamp>,
}

impl BucketsCreated {
    /// By role, as the row records them.
    pub fn by_role(&self) -> BTreeMap<String, Timestamp> {
        [
            ("presence", self.presence),
            ("positions", self.positions),
            ("holds", self.holds),
            ("backups", self.backups),
            ("snapshots", self.snapshots),
        ]
        .into_iter()
        .filter_map(|(role, c)| Some((role.to_string(), c?)))
        .collect()
    }
}

/// Whether a pin read from a bucket created at `from` is carried by a
/// bucket now created at `now`: the bucket was recreated since (a pin read
/// from the current bucket and missing from it was ended by its owner).
pub fn carried_by(from: Timestamp, now: Option<Timestamp>) -> bool {
    now.is_some_and(|n| n != from)
}

/// A pin that a bucket about to be created empty would have held, and
/// that the published floors rows will carry over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CarriedOver<'a> {
    Node {
        stream: &'a str,
        node: &'a str,
        pin: &'a NodePin,
    },
    Hold {
        stream: &'a str,
        id: &'a str,
        pin: &'a HoldPin,
    },
}

/// What `crewlet retention init` says before it recreates a missing
/// positions or holds bucket: every pin the published rows carry from it
/// (a hold only while it is live).
pub fn carried_over<'a>(
    rows: &'a [(String, PinsRecord)],
    positions_missing: bool,
    holds_missing: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<CarriedOver<'a>> {
    let mut out = Vec::new();
    for (stream, pins) in rows {
        if positions_missing {
            out.extend(pins.nodes.iter().map(|(node, pin)| CarriedOver::Node {
                stream,
                node,
                pin,
            }));
        }
        if holds_missing {
            out.extend(
                pins.holds
                    .iter()
                    .filter(|(_, h)| h.expires_at.0 > now)
                    .map(|(id, pin)| CarriedOver::Hold { stream, id, pin }),
            );
        }
    }
    out
}

impl CarriedOver<'_> {
    /// The pin, and how it ends, in one sentence.
    pub fn words(&self) -> String {
        match self {
            CarriedOver::Node { stream, node, pin } => format!(
                "{node} stays counted on {stream} at {} (generation {}) until it reports again, or is evicted: crewlet retention evict {node} -confirm {node}",
                pin.seq, pin.generation
            ),
            CarriedOver::Hold { stream, id, pin } => format!(
                "hold {id} ({}) keeps {stream} from {} until it expires at {}; its owner ends it sooner by placing it again and releasing it",
                pin.owner, pin.seq, pin.expires_at
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).expect("instant")
    }

    #[test]
    fn only_a_recreated_bucket_carries_a_pin() {
        let old = at("2026-12-01T00:00:00.000000001Z");
        let new = at("2026-12-02T00:00:00Z");
        assert!(carried_by(old, Some(new)), "recreated: carried");
        assert!(
            !carried_by(old, Some(old)),
            "the same bucket: its owner ended it"
        );
        assert!(!carried_by(old, None), "not read: nothing to judge");
    }

    #[test]
    fn the_record_reads_back_as_written_and_an_old_row_has_none() {
        let mut r = PinsRecord::default();
        r.buckets
            .insert("positions".into(), at("2026-12-01T00:00:00Z"));
        r.nodes.insert(
            "node-3".into(),
            NodePin {
                seq: 182,
                generation: 0,
                bucket_created: at("2026-12-01T00:00:00Z"),
            },
        );
        let text = serde_json::to_string(&r).expect("json");
        let back: PinsRecord = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, r);
        let empty: PinsRecord = serde_json::from_str("{}").expect("parse");
        assert_eq!(empty, PinsRecord::default());
    }
}
