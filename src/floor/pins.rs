//! PURE: the pins re-read just before a purge (floor.md, Pins that arrive
//! during a tick). A hold, or a new live data node, that lands after the
//! tick's read must still bound that tick's purge: the duty holder reads
//! the holds and presence buckets again right after publishing, and the
//! purge target can only go down.

use chrono::{DateTime, Utc};

use super::answer::{Answer, NodeState, PurgeClamp};
use super::parsed::ByNode;
use super::terms::Holds;
use super::BucketError;
use crate::rows::PresenceRow;

/// The holds and presence buckets as re-read before the purge.
#[derive(Debug, Clone)]
pub struct Pins {
    pub holds: Holds,
    pub presence: Result<ByNode<PresenceRow>, BucketError>,
}

/// The purge target once the re-read pins are honoured: `target` (the
/// `seq` a purge would send) or lower, `None` when nothing may go, and
/// which pin lowered it. Unreadable pins purge nothing.
pub fn clamp_to_pins(
    answer: &Answer,
    target: u64,
    pins: &Pins,
    now: DateTime<Utc>,
) -> (Option<u64>, Option<PurgeClamp>) {
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
    for (node, row) in presence {
        let known = answer.nodes.iter().find(|n| n.node == *node);
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
