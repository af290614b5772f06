//! Property tests against a deliberately naive reference model: record `r`
//! may go iff every counted node has applied it, no live hold needs it, the
//! counted backup covers it, k snapshots cover it, the feed acked it, and it
//! is older than `min_age`; and, on a log that takes gate records, the gates
//! view of this incarnation has absorbed it. The model asks that of every
//! record one at a time; the real code takes a minimum of terms and clamps
//! the purge to the view's cursor. With an archive, a record may go only
//! if it is in a segment the archive can vouch for: one at or below the
//! published frontier, or read back and verified, with every segment
//! before it the same, and nothing the frontier promised missing. They must agree on the purge point, and
//! the purge must never take a record the model keeps.

use crate::rows::Unreadable;
use proptest::prelude::*;
use serde_json::json;

use super::tests::{ts, World, CREATED, S};
use super::*;

#[derive(Debug, Clone)]
pub(crate) struct NodeCase {
    pub(crate) row: Option<u64>,
    pub(crate) current_gen: bool,
    pub(crate) diverged: bool,
    pub(crate) live_data: bool,
    /// 0: no gate, 1: evicting (inside the window), 2: evicted, 3: an
    /// eviction of another incarnation of the log, 4: readmitted.
    pub(crate) gate: u8,
    pub(crate) snapshot: Option<(u64, bool, bool)>,
}

#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) nodes: Vec<NodeCase>,
    pub(crate) holds: Vec<(u64, bool)>,
    /// position, verified, complete, stale
    pub(crate) backup: Option<(u64, bool, bool, bool)>,
    /// ack_floor, delivered, ack_pending, pending; or an unreadable consumer
    pub(crate) feed: Option<Option<(u64, u64, u64, u64)>>,
    pub(crate) young: Option<u64>,
    pub(crate) k: u32,
    pub(crate) missing: [bool; 5],
    /// The log takes gate records; its view's cursor.
    pub(crate) gates: Option<CursorCase>,
    /// The floors row belongs to another `created`: NOT READY.
    pub(crate) recreated: bool,
    pub(crate) archive: Option<ArchiveCase>,
    /// An explicit trim's requested watermark `R`.
    pub(crate) requested: Option<u64>,
}

/// An archived domain's archive as listed this tick.
#[derive(Debug, Clone)]
pub(crate) struct ArchiveCase {
    /// (first, last, verified this tick: None when not read back).
    segments: Vec<(u64, u64, Option<bool>)>,
    /// (first_archived, frontier) the floors row published, when it had
    /// segments behind it.
    published: Option<(u64, u64)>,
    listing_fails: bool,
}

/// A run of segments from `start` (lengths 1..=8), then perhaps a gap and a
/// stray one, perhaps one taken out of the middle; a published frontier at
/// a segment's end, between ends, or none.
fn archive_case(first: u64, last: u64) -> impl Strategy<Value = ArchiveCase> {
    (
        prop_oneof![Just(1u64), Just(first), (1..=first + 2)],
        prop::collection::vec((1u64..=8, prop::option::weighted(0.8, prop::bool::weighted(0.85))), 0..8),
        prop::option::weighted(0.2, (1u64..=3, 1u64..=5)),
        prop::option::weighted(0.1, 0usize..8),
        prop_oneof![2 => Just(None), 3 => (0usize..8).prop_map(Some), 1 => (0usize..8).prop_map(|i| Some(i + 100))],
        prop::bool::weighted(0.03),
    )
        .prop_map(move |(start, lens, stray, removed, published_at, listing_fails)| {
            let mut segments = Vec::new();
            let mut at = start;
            for (len, verified) in lens {
                let end = at + len - 1;
                if end > last {
                    break;
                }
                segments.push((at, end, verified));
                at = end + 1;
            }
            let ends: Vec<(u64, u64)> = segments.iter().map(|(a, b, _)| (*a, *b)).collect();
            let published = published_at.and_then(|i| {
                let a = ends.first()?.0;
                match ends.get(i) {
                    Some((_, end)) => Some((a, *end)),
                    // Past the segments, or between two ends.
                    None if i >= 100 => ends.get(i - 100).map(|(_, end)| (a, end + 1)),
                    None => None,
                }
            });
            if let Some((gap, len)) = stray {
                let s = at + gap;
                if s + len - 1 <= last {
                    segments.push((s, s + len - 1, Some(true)));
                }
            }
            if let Some(i) = removed {
                if i < segments.len() {
                    segments.remove(i);
                }
            }
            ArchiveCase {
                segments,
                published,
                listing_fails,
            }
        })
}

/// The gates view's cursor for the log.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CursorCase {
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

pub(crate) fn case() -> impl Strategy<Value = Case> {
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
            (
                prop::option::weighted(0.5, archive_case(1, last)),
                prop::option::weighted(0.3, 1..=last + 1),
            ),
        )
            .prop_map(
                |(
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
                    (archive, requested),
                )| {
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
                        archive,
                        requested,
                    }
                },
            )
    })
}

pub(crate) fn world(c: &Case) -> World {
    let mut w = World::new();
    w.presence = Some(vec![]);
    w.positions = Some(vec![]);
    w.backups = Some(vec![]);
    w.snapshots = Some(vec![]);
    w.stream = Ok(StreamState {
        first_seq: c.first,
        last_seq: c.last,
        bytes: 1,
        messages: (c.last + 1).saturating_sub(c.first),
        consumers: 0,
        max_bytes: 1 << 30,
        created: Timestamp::parse(CREATED).expect("valid"),
        first_ts: Timestamp::parse(CREATED).expect("valid"),
        last_ts: Timestamp::parse(CREATED).expect("valid"),
        facts: Default::default(),
        clustered: false,
        mark: None,
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
            .ok_or_else(|| Unreadable::from("consumer not found")),
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
    if let Some(a) = &c.archive {
        use crate::archive::state::{ArchiveRead, ListError, Listed};
        let name = |f: u64, l: u64| crate::archive::segment::name(S, 0, f, l);
        w.domain.archive = Some(crate::config::ArchiveConfig {
            segment_records: 10,
            segment_bytes: crate::config::size::Size(1 << 20),
            fold_per_tick: 1,
            ..crate::config::ArchiveConfig::of(&crate::archive::state::Store::Dir("/a".into()))
        });
        let mut listing: Vec<Listed> = a
            .segments
            .iter()
            .map(|(f, l, _)| Listed {
                name: name(*f, *l),
                first_seq: *f,
                last_seq: *l,
                bytes: 1,
            })
            .collect();
        listing.sort_by(|x, y| x.name.cmp(&y.name));
        w.archive = Some(ArchiveRead {
            store: "dir:/a".into(),
            reused: false,
            listing: if a.listing_fails {
                Err(ListError {
                    missing: false,
                    message: "listing failed".into(),
                })
            } else {
                Ok(listing)
            },
            verified: a
                .segments
                .iter()
                .filter_map(|(f, l, v)| {
                    v.map(|ok| {
                        (
                            name(*f, *l),
                            if ok {
                                Ok(())
                            } else {
                                Err(Unreadable::from("checksum"))
                            },
                        )
                    })
                })
                .collect(),
            fold: None,
        });
        if let Some((first_archived, frontier)) = a.published {
            let created = if c.recreated {
                "2026-10-01T00:00:00Z"
            } else {
                CREATED
            };
            w.floor_row(json!({"stream": S, "generation": 0, "stream_created": created,
                "floor": null, "trim_floor_state": "none", "at": ts(-10),
                "archive": {"store": "dir:/a", "frontier": frontier, "first_archived": first_archived,
                            "segments": 1, "bytes": 1, "last_fold_at": null, "error": null}}));
        }
    }
    if let Some(r) = c.requested {
        let row = json!({"seq": r, "by": "oncall", "at": ts(-5), "reason": "model", "stream_created": CREATED, "generation": 0}).to_string();
        w.floors
            .get_or_insert_with(Vec::new)
            .push((format!("_requested.{S}"), row));
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

/// Can the archive vouch for record `r` (docs/archive-format.md, The seventh term)?
/// Records below where its segments start are gone from both (or were
/// never archived: an empty archive starts below the log). Otherwise `r`
/// must lie in a segment of the run that starts with the first listed
/// one and has no gap or overlap up to it, each of the run's segments up
/// to it at or below the published frontier or verified this tick; a
/// published frontier must end a segment of that run, starting no later
/// than the published first; and an unpublished archive must meet the log.
fn archived(c: &Case, r: u64) -> bool {
    let Some(a) = &c.archive else {
        return true;
    };
    if a.listing_fails {
        return false;
    }
    let mut segs: Vec<(u64, u64, Option<bool>)> = a.segments.clone();
    segs.sort_by_key(|s| (s.0, s.1));
    let mut run = Vec::new();
    for s in segs {
        match run.last() {
            None => run.push(s),
            Some((_, l, _)) if *l + 1 == s.0 => run.push(s),
            Some(_) => break,
        }
    }
    if let Some((published_first, frontier)) = a.published {
        let starts_in_time = run.first().is_some_and(|s| s.0 <= published_first);
        if !starts_in_time || !run.iter().any(|s| s.1 == frontier) {
            return false;
        }
    }
    let Some(start) = run.first().map(|s| s.0) else {
        return r < c.first;
    };
    if a.published.is_none() && start > c.first.max(1) {
        return r < c.first;
    }
    if r < start {
        return true;
    }
    let trusted = |s: &(u64, u64, Option<bool>)| {
        a.published.is_some_and(|(_, p)| s.1 <= p) || s.2 == Some(true)
    };
    for s in &run {
        if !trusted(s) {
            return false;
        }
        if r <= s.1 {
            return true;
        }
    }
    false
}

/// May `r` go under an explicit trim's watermark `R`: every rule but the
/// age rule, for records below `R` (docs/http.md: an operator may trim younger
/// than `min_age`, never past anything else).
fn may_go_requested(c: &Case, r: u64) -> bool {
    let Some(req) = c.requested else {
        return false;
    };
    let mut no_age = c.clone();
    no_age.young = None;
    r < req && may_go(&no_age, r) && archived(c, r)
}

/// May `r` go: the six rules and the archive's, or the watermark's.
pub(crate) fn may_go_req(c: &Case, r: u64) -> bool {
    may_go_all(c, r) || may_go_requested(c, r)
}

/// May `r` go: the six rules, and the archive's.
fn may_go_all(c: &Case, r: u64) -> bool {
    may_go(c, r) && archived(c, r)
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
    // A lost floors row: there is none, yet a position names a later
    // generation (1) than the 0 a missing row would start at.
    let floors_row = c.recreated || c.archive.as_ref().is_some_and(|a| a.published.is_some());
    if !floors_row && c.nodes.iter().any(|n| n.row.is_some() && !n.current_gen) {
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
    #![proptest_config(crate::seeded::config(4000))]

    #[test]
    fn trim_to_is_the_longest_prefix_the_model_allows(c in case()) {
        let a = world(&c).answer();
        // The model's answer: the longest run 1..=r where every record may go.
        let mut expect = 0;
        while expect < c.last && may_go_req(&c, expect + 1) {
            expect += 1;
        }
        prop_assert_eq!(a.trim_to, expect, "case {:?}\nanswer terms {:?}", c, a.terms);
        // The purge: exactly the records that may go and are absorbed, from
        // first_seq on.
        let mut upto = c.first - 1;
        while upto < c.last && may_go_req(&c, upto + 1) && absorbed(&c, upto + 1) {
            upto += 1;
        }
        let want = (upto >= c.first).then_some(upto + 1);
        prop_assert_eq!(purge_target(&a), want, "case {:?}\nanswer terms {:?}", c, a.terms);
        if let Some(target) = purge_target(&a) {
            prop_assert!(target > c.first && target <= c.last + 1);
            for r in c.first..target {
                prop_assert!(may_go_req(&c, r) && absorbed(&c, r), "purge to {} takes {} which the model keeps", target, r);
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
