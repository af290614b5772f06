//! PURE: the pins re-read just before a purge (docs/trim-floor.md, Pins that arrive
//! during a tick). A hold, or a new live data node, that lands after the
//! tick's read must still bound that tick's purge: the duty holder reads
//! the holds and presence buckets again right after publishing, and the
//! purge target can only go down.

use chrono::{DateTime, Utc};

use super::answer::{Answer, NodeState, PurgeClamp};
use super::parsed::ByNode;
use super::terms::Holds;
use super::BucketError;
use crate::proven::Proven;
use crate::rows::PresenceRow;

/// The holds and presence buckets as re-read before the purge.
#[derive(Debug, Clone)]
pub struct Pins {
    pub holds: Holds,
    pub presence: Result<std::sync::Arc<ByNode<PresenceRow>>, BucketError>,
}

/// Presence as the tick read it (the answer was computed from it).
pub type ReadPresence = Result<std::sync::Arc<ByNode<PresenceRow>>, BucketError>;

/// The purge target once the re-read pins are honoured: `target` (the
/// `seq` a purge would send) or lower, `None` when nothing may go, and
/// which pin lowered it. Unreadable pins purge nothing. A lease is news
/// only if it differs from what the tick read (`before`): the answer has
/// already judged every lease it saw, an evicted node's included.
pub fn clamp_to_pins(
    answer: &Answer,
    target: u64,
    pins: &Proven<Pins>,
    before: &ReadPresence,
    now: DateTime<Utc>,
) -> (Option<u64>, Option<PurgeClamp>) {
    let pins = pins.get();
    let holds = match &pins.holds {
        Ok(h) => h,
        Err(_) => return (None, Some(PurgeClamp::Hold)),
    };
    let mut target = target;
    let mut by = None;
    for h in holds
        .get(&answer.stream)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let Ok((_, hold)) = h else {
            return (None, Some(PurgeClamp::Hold));
        };
        // A hold keeps `seq` and everything after it.
        if hold.expires_at.0 > now && hold.seq < target {
            target = hold.seq;
            by = Some(PurgeClamp::Hold);
        }
    }
    let presence = match &pins.presence {
        Ok(p) => p,
        Err(_) => return (None, Some(PurgeClamp::Presence)),
    };
    let before = before.as_ref().ok();
    for (node, row) in presence.iter() {
        if before.and_then(|b| b.get(node)) == Some(row) {
            continue;
        }
        // The node table is in name order (counted_set builds it from
        // sorted maps): a binary search per lease, not a scan.
        let known = answer
            .nodes
            .binary_search_by(|n| n.node.as_str().cmp(node.as_ref()))
            .ok()
            .and_then(|i| answer.nodes.get(i));
        // An evicted node stays out whatever its lease says.
        if known.is_some_and(|n| n.state == NodeState::Evicted) {
            continue;
        }
        match row {
            // Whether it is a data node is unknown: it may be one.
            Err(_) => return (None, Some(PurgeClamp::Presence)),
            // A live data node this answer did not count counts at 0.
            Ok(p) if p.is_data() && known.is_none() => return (None, Some(PurgeClamp::Presence)),
            Ok(_) => {}
        }
    }
    (Some(target).filter(|t| *t > answer.first_seq), by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::tests::{now, World};

    /// The pins as a world's buckets hold them.
    fn pins(w: &World) -> Proven<Pins> {
        let rows = crate::floor::ParsedRows::from_rows(&w.rows());
        Proven::fixture(Pins {
            holds: rows.holds,
            presence: rows.presence,
        })
    }

    #[test]
    fn pins_that_landed_during_the_tick_lower_the_purge() {
        // The answer was computed before any of these landed.
        let w = World::new();
        let a = w.answer();
        let read = crate::floor::ParsedRows::from_rows(&w.rows()).presence;
        let clamp = |p: &World| clamp_to_pins(&a, 801, &pins(p), &read, now());
        assert_eq!(clamp(&w), (Some(801), None));

        let mut later = w.clone();
        later.hold("late", 300, 600);
        later.hold("gone", 100, -600);
        assert_eq!(
            clamp(&later),
            (Some(300), Some(PurgeClamp::Hold)),
            "a live hold keeps its seq on; an expired one nothing"
        );
        let mut early = w.clone();
        early.hold("first", 1, 600);
        assert_eq!(
            clamp(&early),
            (None, Some(PurgeClamp::Hold)),
            "nothing left to purge"
        );
        let mut bad = w.clone();
        bad.holds = Some(vec![(format!("{}.x", a.stream), "{".into())]);
        assert_eq!(clamp(&bad).0, None);
        let mut gone = w.clone();
        gone.holds = None;
        assert_eq!(clamp(&gone).0, None);

        let mut joined = w.clone();
        joined.node("node-9", true, None);
        assert_eq!(
            clamp(&joined),
            (None, Some(PurgeClamp::Presence)),
            "a new live data node counts at 0"
        );
        let mut known = w.clone();
        known.node("node-1", true, None);
        assert_eq!(clamp(&known).0, Some(801));
    }

    #[test]
    fn an_evicted_nodes_lease_changes_nothing() {
        let mut w = World::new();
        w.node("node-4", false, Some(10));
        w.gate("node-4", "evicted", 600);
        let a = w.answer();
        let read = crate::floor::ParsedRows::from_rows(&w.rows()).presence;
        let mut back = w.clone();
        back.node("node-4", true, None);
        assert_eq!(
            clamp_to_pins(&a, 801, &pins(&back), &read, now()).0,
            Some(801)
        );
        // A malformed lease of a node the table does not list: one the
        // tick already saw (and judged) is no news; a new one may be a data
        // node, and stops the purge.
        let mut odd = w.clone();
        odd.presence
            .get_or_insert_with(Vec::new)
            .push(("node-5".into(), "{".into()));
        let mut seen = odd.clone();
        seen.gate("node-5", "evicted", 600);
        let seen_read = crate::floor::ParsedRows::from_rows(&seen.rows()).presence;
        let a = seen.answer();
        assert_eq!(
            clamp_to_pins(&a, 801, &pins(&odd), &seen_read, now()).0,
            Some(801)
        );
        assert_eq!(clamp_to_pins(&a, 801, &pins(&odd), &read, now()).0, None);
    }
}
