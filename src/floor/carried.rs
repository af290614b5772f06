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
///
/// Every pin is written with its `bucket_created`, as readers of earlier
/// versions require it. Read back, a pin without one (a row of a later
/// version may leave out what equals its bucket's `created` under
/// `buckets`) is its bucket's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "Written")]
pub struct PinsRecord {
    /// The `created` time of each node-written bucket the answer read,
    /// by role (`presence`, `positions`, `holds`, `backups`, `snapshots`).
    pub buckets: BTreeMap<String, Timestamp>,
    /// Counted nodes with a position on this log (docs/decisions.md says
    /// why a live data node's is left out), by node id.
    pub nodes: BTreeMap<SmolStr, NodePin>,
    /// Live holds on this log, by hold id.
    pub holds: BTreeMap<String, HoldPin>,
}

/// A counted node's position as the answer counted it: its row's `seq`,
/// or 0 for a row of another generation or incarnation, or one that
/// diverged (never a position it merely reported).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct NodePin {
    pub seq: u64,
    pub generation: u64,
    /// The `created` time of the positions bucket the row was read from.
    pub bucket_created: Timestamp,
}

/// A live hold as its row said.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct HoldPin {
    pub seq: u64,
    pub owner: String,
    pub expires_at: Timestamp,
    /// The `created` time of the holds bucket the row was read from.
    pub bucket_created: Timestamp,
}

/// `pins` as a row is read: a pin's own `bucket_created` may be missing
/// (a later version may leave out what equals its bucket's).
#[derive(Deserialize)]
struct Written {
    #[serde(default)]
    buckets: BTreeMap<String, Timestamp>,
    #[serde(default)]
    nodes: BTreeMap<SmolStr, WrittenNode>,
    #[serde(default)]
    holds: BTreeMap<String, WrittenHold>,
}

#[derive(Deserialize)]
struct WrittenNode {
    seq: u64,
    generation: u64,
    #[serde(default)]
    bucket_created: Option<Timestamp>,
}

#[derive(Deserialize)]
struct WrittenHold {
    seq: u64,
    owner: String,
    expires_at: Timestamp,
    #[serde(default)]
    bucket_created: Option<Timestamp>,
}

/// What a pin without its own `bucket_created` was read from: its
/// bucket's, or (a row that names neither, which no sidecar writes) the
/// epoch, which any bucket read now differs from: the pin is then carried,
/// the side that keeps records.
fn read_from(
    buckets: &BTreeMap<String, Timestamp>,
    role: &str,
    own: Option<Timestamp>,
) -> Timestamp {
    own.or_else(|| buckets.get(role).copied())
        .unwrap_or(Timestamp(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH))
}

impl From<Written> for PinsRecord {
    fn from(w: Written) -> Self {
        let nodes = w
            .nodes
            .into_iter()
            .map(|(node, p)| {
                let bucket_created = read_from(&w.buckets, "positions", p.bucket_created);
                (
                    node,
                    NodePin {
                        seq: p.seq,
                        generation: p.generation,
                        bucket_created,
                    },
                )
            })
            .collect();
        let holds = w
            .holds
            .into_iter()
            .map(|(id, h)| {
                let bucket_created = read_from(&w.buckets, "holds", h.bucket_created);
                (
                    id,
                    HoldPin {
                        seq: h.seq,
                        owner: h.owner,
                        expires_at: h.expires_at,
                        bucket_created,
                    },
                )
            })
            .collect();
        PinsRecord {
            buckets: w.buckets,
            nodes,
            holds,
        }
    }
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
    /// The floors bucket's own `created`, compared with the log's mark
    /// (`floor::memory`); never recorded among the pins' buckets.
    pub floors: Option<Timestamp>,
}

impl BucketsCreated {
    /// By role, as the row records them (the node-written buckets only).
    pub fn by_role(&self) -> BTreeMap<String, Timestamp> {
        self.roles()
            .map(|(role, c)| (role.to_string(), c))
            .collect()
    }

    /// The same, borrowed: nothing allocated for a role already recorded.
    pub fn roles(&self) -> impl Iterator<Item = (&'static str, Timestamp)> {
        [
            ("presence", self.presence),
            ("positions", self.positions),
            ("holds", self.holds),
            ("backups", self.backups),
            ("snapshots", self.snapshots),
        ]
        .into_iter()
        .filter_map(|(role, c)| Some((role, c?)))
    }
}

/// A pin that a bucket about to be created empty would have held, and
/// that the published floors rows' memory will carry over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CarriedOver<'a> {
    Node {
        stream: &'a str,
        node: &'a str,
        /// The remembered `applied` it counts at.
        at: u64,
    },
    Hold {
        stream: &'a str,
        id: &'a str,
        /// The remembered `min_hold` + 1 it pins at.
        seq: u64,
        expires_at: Timestamp,
        /// A readmission's join hold: it pins until its readmission is
        /// absorbed, past its expiry too.
        until_absorbed: bool,
    },
}

/// What `crewlet retention init` says before it recreates a missing
/// positions or holds bucket: every member the published rows' memory
/// carries over it (a hold only while it is live).
pub fn carried_over<'a>(
    rows: &'a [(String, super::members::Remembered)],
    positions_missing: bool,
    holds_missing: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<CarriedOver<'a>> {
    let mut out = Vec::new();
    for (stream, memory) in rows {
        if positions_missing {
            let at = memory.applied.unwrap_or(0);
            out.extend(
                memory
                    .membership
                    .nodes
                    .keys()
                    .map(|node| CarriedOver::Node { stream, node, at }),
            );
        }
        if holds_missing {
            let seq = memory.min_hold.map_or(1, |m| m.saturating_add(1));
            out.extend(
                memory
                    .membership
                    .holds
                    .iter()
                    .filter(|(_, h)| h.kept_at(now))
                    .map(|(id, h)| CarriedOver::Hold {
                        stream,
                        id,
                        seq,
                        expires_at: h.expires_at,
                        until_absorbed: h.until_absorbed,
                    }),
            );
        }
    }
    out
}

impl CarriedOver<'_> {
    /// The pin, and how it ends, in one sentence.
    pub fn words(&self) -> String {
        match self {
            CarriedOver::Node { stream, node, at } => format!(
                "{node} stays counted on {stream} at {at} until it reports again, or is evicted: crewlet retention evict {node} -confirm {node}"
            ),
            CarriedOver::Hold {
                stream,
                id,
                seq,
                expires_at,
                until_absorbed,
            } => {
                let until = if *until_absorbed {
                    "until its readmission is absorbed".to_string()
                } else {
                    format!("until it expires at {expires_at}")
                };
                format!(
                    "hold {id} keeps {stream} from {seq} {until}; to end it sooner: crewlet retention release -stream {stream} {id}"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).expect("instant")
    }

    /// Whether a bucket is the one a memory was written from is decided in
    /// one place, `counted::recreated`.
    #[test]
    fn only_a_recreated_bucket_carries_a_pin() {
        let old = at("2026-12-01T00:00:00.000000001Z");
        let new = at("2026-12-02T00:00:00Z");
        let mut m = super::super::members::Remembered::default();
        m.buckets.insert("positions".into(), old);
        let carried_by = |now| super::super::counted::recreated(&m, "positions", now);
        assert!(carried_by(Some(new)), "recreated: carried");
        assert!(
            !carried_by(Some(old)),
            "the same bucket: its owner ended it"
        );
        assert!(!carried_by(None), "not read: nothing to judge");
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

    /// Every pin is written with its own `bucket_created` (readers of
    /// earlier versions require it); a pin read without one is its
    /// bucket's; one without either reads as carried.
    #[test]
    fn every_pin_is_written_with_its_bucket_and_read_without_one_as_its_buckets() {
        let (old, new) = (at("2026-12-01T00:00:00Z"), at("2026-12-02T00:00:00Z"));
        let mut r = PinsRecord::default();
        r.buckets.insert("positions".into(), new);
        r.buckets.insert("holds".into(), new);
        for (node, created) in [("node-1", new), ("node-2", old)] {
            r.nodes.insert(
                node.into(),
                NodePin {
                    seq: 7,
                    generation: 1,
                    bucket_created: created,
                },
            );
        }
        r.holds.insert(
            "h".into(),
            HoldPin {
                seq: 3,
                owner: "ops".into(),
                expires_at: new,
                bucket_created: new,
            },
        );
        let v = serde_json::to_value(&r).expect("json");
        assert_eq!(
            v["nodes"],
            serde_json::json!({
                "node-1": {"seq": 7, "generation": 1, "bucket_created": "2026-12-02T00:00:00Z"},
                "node-2": {"seq": 7, "generation": 1, "bucket_created": "2026-12-01T00:00:00Z"},
            })
        );
        assert_eq!(v["holds"]["h"]["bucket_created"], "2026-12-02T00:00:00Z");
        let back: PinsRecord = serde_json::from_value(v).expect("parse");
        assert_eq!(back, r);
        let compact = serde_json::json!({
            "buckets": {"positions": "2026-12-02T00:00:00Z", "holds": "2026-12-02T00:00:00Z"},
            "nodes": {
                "node-1": {"seq": 7, "generation": 1},
                "node-2": {"seq": 7, "generation": 1, "bucket_created": "2026-12-01T00:00:00Z"},
            },
            "holds": {"h": {"seq": 3, "owner": "ops", "expires_at": "2026-12-02T00:00:00Z"}},
        });
        assert_eq!(
            serde_json::from_value::<PinsRecord>(compact).expect("parse"),
            r
        );
        let earlier = serde_json::json!({
            "buckets": {"positions": "2026-12-02T00:00:00Z", "holds": "2026-12-02T00:00:00Z"},
            "nodes": {
                "node-1": {"seq": 7, "generation": 1, "bucket_created": "2026-12-02T00:00:00Z"},
                "node-2": {"seq": 7, "generation": 1, "bucket_created": "2026-12-01T00:00:00Z"},
            },
            "holds": {"h": {"seq": 3, "owner": "ops", "expires_at": "2026-12-02T00:00:00Z", "bucket_created": "2026-12-02T00:00:00Z"}},
        });
        assert_eq!(
            serde_json::from_value::<PinsRecord>(earlier).expect("parse"),
            r
        );
        // Neither its own nor its bucket's: carried by whatever bucket is
        // read now.
        let bare: PinsRecord = serde_json::from_value(
            serde_json::json!({"nodes": {"n": {"seq": 1, "generation": 0}}}),
        )
        .expect("parse");
        assert_eq!(
            super::super::members::Remembered::from_pins(&bare)
                .membership
                .nodes
                .get("n"),
            Some(&true),
            "a pin read from no bucket is carried"
        );
    }
}
