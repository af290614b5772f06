//! Property tests against a deliberately naive reference model: record `r`
//! may go iff every counted node has applied it, no live hold needs it, the
//! counted backup covers it, k snapshots cover it, the feed acked it, and it
//! is older than `min_age`; and, on a log that takes gate records, the gates
//! view of this incarnation has absorbed it. The model asks that of every
//! record one at a time; the real code takes a minimum of terms and clamps
//! the purge to the view's cursor. They must agree on the purge point, and
//! the purge must never take a record the model keeps.

use proptest::prelude::*;
use serde_json::json;

use super::tests::{ts, World, CREATED, S};
use super::*;

#[derive(Debug, Clone)]
struct NodeCase {
    row: Option<u64>,
    current_gen: bool,
    diverged: bool,
    live_data: bool,
    /// 0: no gate, 1: evicting (inside the window), 2: evicted, 3: an
    /// eviction of another incarnation of the log, 4: readmitted.
    gate: u8,
    snapshot: Option<(u64, bool, bool)>,
}

#[derive(Debug, Clone)]
struct Case {
    first: u64,
    last: u64,
    nodes: Vec<NodeCase>,
    holds: Vec<(u64, bool)>,
    /// position, verified, complete, stale
    backup: Option<(u64, bool, bool, bool)>,
    /// ack_floor, delivered, ack_pending, pending; or an unreadable consumer
    feed: Option<Option<(u64, u64, u64, u64)>>,
    young: Option<u64>,
    k: u32,
    missing: [bool; 5],
    /// The log takes gate records; its view's cursor.
    gates: Option<CursorCase>,
    /// The floors row belongs to another `created`: NOT READY.
    recreated: bool,
}

/// The gates view's cursor for the log.
#[derive(Debug, Clone, Copy)]
enum CursorCase {
    /// Not read yet: nothing is purged.
    None,
    /// Absorbed up to this sequence, in this incarnation.
    At(u64),
    /// Of another incarnation: proves nothing.
    OtherIncarnation(u64),
    /// Does not parse: nothing is purged.
    Malformed,
}

fn cursor_case(last: u64) -> impl Strategy<Value = CursorCase> {
    prop_oneof![
        1 => Just(CursorCase::None),
        6 => (0..=last + 2).prop_map(CursorCase::At),
        1 => (0..=last + 2).prop_map(CursorCase::OtherIncarnation),
        1 => Just(CursorCase::Malformed),
    ]
}

fn node_case(last: u64) -> impl Strategy<Value = NodeCase> {
    (
        prop::option::weighted(0.8, 0..=last + 2),
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.1),
        any::<bool>(),
        prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8), 1 => Just(4u8)],
        prop::option::of((
            0..=last,
            prop::bool::weighted(0.8),
            prop::bool::weighted(0.85),
        )),
    )
        .prop_map(
            |(row, current_gen, diverged, live_data, gate, snapshot)| NodeCase {
                row,
                current_gen,
                diverged,
                live_data,
                gate,
                snapshot,
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (1u64..60).prop_flat_map(|last| {
        (
            1..=last + 1,
            Just(last),
            prop::collection::vec(node_case(last), 0..6),
            prop::collection::vec((1..=last + 1, any::<bool>()), 0..3),
            prop::option::weighted(
                0.85,
                (
                    0..=last,
                    prop::bool::weighted(0.85),
                    prop::bool::weighted(0.85),
                    prop::bool::weighted(0.15),
                ),
            ),
            prop::option::of(prop::option::weighted(
                0.9,
                (0..=last, 0..=last, 0..3u64, 0..3u64),
            )),
            prop::option::of(1..=last),
            1u32..4,
            prop::array::uniform5(prop::bool::weighted(0.05)),
            prop::option::weighted(0.5, cursor_case(last)),
            prop::bool::weighted(0.05),
        )
            .prop_map(
                |(first, last, nodes, holds, backup, feed, young, k, missing, gates, recreated)| {
                    Case {
                        first,
                        last,
                        nodes,
                        holds,
                        backup,
                        feed,
                        young,
                        k,
                        missing,
                        gates,
                        recreated,
                    }
                },
            )
    })
}

fn world(c: &Case) -> World {
    let mut w = World::new();
    w.presence = Some(vec![]);
    w.positions = Some(vec![]);
    w.backups = Some(vec![]);
    w.snapshots = Some(vec![]);
    w.stream = Ok(StreamState {
        first_seq: c.first,
        last_seq: c.last,
        bytes: 1,
        max_bytes: 1 << 30,
        created: Instant::parse(CREATED).expect("valid"),
        facts: Default::default(),
    });
    w.policy.snapshot_quorum = c.k;
    for (i, n) in c.nodes.iter().enumerate() {
        let name = format!("node-{i}");
        w.node(&name, n.live_data, None);
        if let Some(seq) = n.row {
            let (gen, created) = if n.current_gen {
                (0, CREATED)
            } else {
                (1, "2026-10-01T00:00:00Z")
            };
            w.position(
                &name,
                seq,
                gen,
                created,
                if n.diverged { "log_diverged" } else { "ok" },
            );
        }
        match n.gate {
            1 => {
                w.gate(&name, "evicted", 10);
            }
            2 => {
                w.gate(&name, "evicted", 600);
            }
            3 => {
                w.gate(&name, "evicted", 600);
                if let Some((_, v)) = w.gates.as_mut().and_then(|g| g.last_mut()) {
                    *v = v.replace(CREATED, "2026-10-01T00:00:00Z");
                }
            }
            4 => {
                w.gate(&name, "admitted", 600);
            }
            _ => {}
        }
        if let Some((pos, verified, current)) = n.snapshot {
            w.snapshot(&name, pos, if current { 0 } else { 1 }, verified);
        }
    }
    for (i, (seq, live)) in c.holds.iter().enumerate() {
        w.hold(&format!("h{i}"), *seq, if *live { 600 } else { -600 });
    }
    if let Some((pos, verified, complete, stale)) = c.backup {
        w.backup(
            "node-0",
            "b1",
            pos,
            if stale { -2 * 86400 } else { -60 },
            verified,
            complete,
        );
    }
    if let Some(feed) = c.feed {
        w.domain.feed_consumer = Some("feed".into());
        w.feed = Some(
            feed.map(|(a, d, ap, p)| FeedState {
                ack_floor_seq: a,
                delivered_seq: d.max(a),
                num_ack_pending: ap,
                num_pending: p,
            })
            .ok_or_else(|| "consumer not found".to_string()),
        );
    }
    w.young = Ok(c.young);
    if let Some(cursor) = c.gates {
        let row = |seq: u64, created: &str| {
            Some(
                json!({"stream": S, "seq": seq, "skipped": [], "stream_created": created, "generation": 0}),
            )
        };
        w.gated(match cursor {
            CursorCase::None => None,
            CursorCase::At(seq) => row(seq, CREATED),
            CursorCase::OtherIncarnation(seq) => row(seq, "2026-10-01T00:00:00Z"),
            CursorCase::Malformed => Some(json!({"seq": "x"})),
        });
    }
    if c.recreated {
        w.floor_row(
            json!({"stream": S, "generation": 0, "stream_created": "2026-10-01T00:00:00Z",
            "floor": null, "trim_floor_state": "none", "at": ts(-10)}),
        );
    }
    let buckets = [
        &mut w.presence,
        &mut w.positions,
        &mut w.holds,
        &mut w.backups,
        &mut w.snapshots,
    ];
    for (bucket, gone) in buckets.into_iter().zip(c.missing) {
        if gone {
            *bucket = None;
        }
    }
    w
}

/// Has the gates view absorbed record `r`? (A log without gate records
/// has nothing to absorb.)
fn absorbed(c: &Case, r: u64) -> bool {
    match c.gates {
        None => true,
        Some(CursorCase::At(seq)) => seq <= c.last && r <= seq,
        Some(_) => false,
    }
}

/// The reference model, written from the English rules and nothing else.
fn may_go(c: &Case, r: u64) -> bool {
    let [presence_gone, positions_gone, holds_gone, backups_gone, snapshots_gone] = c.missing;
    if presence_gone || positions_gone || holds_gone || backups_gone || r > c.last || r == 0 {
        return false;
    }
    // A recreated stream is not the log the floor belongs to.
    if c.recreated {
        return false;
    }
    let counted: Vec<&NodeCase> = c
        .nodes
        .iter()
        .filter(|n| (n.row.is_some() || n.live_data) && n.gate != 2)
        .collect();
    // A restored log is never trimmed on positions it does not hold.
    if counted
        .iter()
        .any(|n| n.current_gen && !n.diverged && n.row.is_some_and(|s| s > c.last))
    {
        return false;
    }
    for n in &counted {
        let applied = n.current_gen && !n.diverged && n.row.is_some_and(|s| s >= r);
        if !applied {
            return false;
        }
    }
    if c.holds.iter().any(|(seq, live)| *live && *seq <= r) {
        return false;
    }
    match c.backup {
        Some((pos, true, true, false)) if pos >= r => {}
        _ => return false,
    }
    if counted.len() > 1 {
        if snapshots_gone {
            return false;
        }
        let covering = counted
            .iter()
            .filter(|n| !(n.diverged && n.row.is_some()))
            .filter(|n| matches!(n.snapshot, Some((pos, true, true)) if pos >= r))
            .count();
        if covering < c.k as usize {
            return false;
        }
    }
    if let Some(feed) = c.feed {
        let Some((ack, delivered, ack_pending, pending)) = feed else {
            return false;
        };
        let delivered = delivered.max(ack);
        let acked = if ack_pending > 0 {
            ack
        } else if pending > 0 {
            delivered
        } else {
            c.last.max(delivered)
        };
        if acked < r {
            return false;
        }
    }
    match c.young {
        Some(y) => r < y,
        None => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn trim_to_is_the_longest_prefix_the_model_allows(c in case()) {
        let a = world(&c).answer();
        // The model's answer: the longest run 1..=r where every record may go.
        let mut expect = 0;
        while expect < c.last && may_go(&c, expect + 1) {
            expect += 1;
        }
        prop_assert_eq!(a.trim_to, expect, "case {:?}\nanswer terms {:?}", c, a.terms);
        // The purge: exactly the records that may go and are absorbed, from
        // first_seq on.
        let mut upto = c.first - 1;
        while upto < c.last && may_go(&c, upto + 1) && absorbed(&c, upto + 1) {
            upto += 1;
        }
        let want = (upto >= c.first).then_some(upto + 1);
        prop_assert_eq!(purge_target(&a), want, "case {:?}\nanswer terms {:?}", c, a.terms);
        if let Some(target) = purge_target(&a) {
            prop_assert!(target > c.first && target <= c.last + 1);
            for r in c.first..target {
                prop_assert!(may_go(&c, r) && absorbed(&c, r), "purge to {} takes {} which the model keeps", target, r);
            }
        }
        // The published floor is never below a previous one and covers trim_to.
        if let Some(f) = a.floor {
            prop_assert!(f > a.trim_to || a.trim_to == 0);
        }
    }

    #[test]
    fn the_floor_never_moves_down(c in case(), prev in 1u64..80) {
        let mut w = world(&c);
        w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": prev,
            "trim_floor_state": "published", "at": ts(-10)}));
        let a = w.answer();
        prop_assert!(a.floor.is_some_and(|f| f >= prev));
    }
}
