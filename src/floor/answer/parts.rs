//! The parts of an answer read straight from one domain's read: its
//! capacity figures, its archive, and its gates view.

use super::shape::{GateFault, GateView};
use crate::archive::state::{self as archive_state, ArchiveState};
use crate::config::Domain;
use crate::floor::parsed::ParsedRows;
use crate::floor::published::PublishedGateView;
use crate::floor::DomainRead;
use crate::rows::{Incarnation, Stamped, Timestamp, Unreadable};
/// The four capacity figures of `status` (and `max_bytes`).
pub(super) struct Capacity {
    pub(super) bytes: u64,
    pub(super) max_bytes: i64,
    pub(super) reserve_bytes: u64,
    pub(super) soft_ceiling_bytes: u64,
    pub(super) headroom_fraction: f64,
}

/// Step 6: the capacity figures: the reserve is the top sixteenth of
/// `max_bytes` on a log with a gate reserve, the soft ceiling what is
/// below it, the headroom `1 - bytes / soft ceiling`, not below 0.
pub(super) fn capacity_of(domain: &Domain, state: Option<&crate::floor::StreamState>) -> Capacity {
    let (bytes, max_bytes) = state.map_or((0, -1), |s| (s.bytes, s.max_bytes));
    let cap = u64::try_from(max_bytes).unwrap_or(0);
    let reserve_bytes = if domain.gate_reserve { cap / 16 } else { 0 };
    let soft_ceiling_bytes = cap - reserve_bytes;
    let headroom_fraction = if soft_ceiling_bytes == 0 {
        0.0
    } else {
        (1.0 - bytes as f64 / soft_ceiling_bytes as f64).max(0.0)
    };
    Capacity {
        bytes,
        max_bytes,
        reserve_bytes,
        soft_ceiling_bytes,
        headroom_fraction,
    }
}

/// The archive of an archived domain as this read sees it: what was read
/// of it, against the state the floors row published.
pub(super) fn archive_of(
    read: &DomainRead,
    published: Option<&serde_json::Value>,
    log_first_seq: u64,
    now: Timestamp,
) -> ArchiveState {
    let unreadable = |store: String, why: String| ArchiveState {
        store,
        frontier: None,
        first_archived: None,
        segments: 0,
        bytes: 0,
        last_fold_at: None,
        error: Some(why),
        failing_segment: None,
        failing_since: Some(now),
        unreadable: true,
        missing_bucket: false,
        may_fold: false,
    };
    let Some(r) = &read.archive else {
        return unreadable(String::new(), "the archive was not read".into());
    };
    let published = match published
        .filter(|v| !v.is_null())
        .map(|v| serde_json::from_value::<ArchiveState>(v.clone()))
    {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            return unreadable(
                r.store.clone(),
                format!("the floors row's archive state does not parse ({e})"),
            )
        }
    };
    archive_state::assess(r, published.as_ref(), log_first_seq, now)
}

/// The gates view of `stream` as this read sees it (docs/trim-floor.md, The gates
/// view and the purge): the cursor of this incarnation, or why there is
/// none it can prove.
pub(super) fn gate_view(
    rows: &ParsedRows,
    stream: &str,
    incarnation: Option<Incarnation>,
    last_seq: u64,
    absorbed: Option<&Result<(), Unreadable>>,
    published: Option<&PublishedGateView>,
    now: Timestamp,
) -> GateView {
    let key = crate::gate::Cursor::key(stream);
    let mut absorbed_to = None;
    let mut skipped = Vec::new();
    let mut error = None;
    match &rows.gates {
        // Not created yet (the sidecar never ran): no cursor, nothing
        // absorbed, nothing purged past it, and nothing wrong to say.
        Err(crate::floor::BucketError::Missing { .. }) => {}
        Err(e) => {
            error = Some(GateFault::BucketUnreadable {
                message: e.to_string(),
            })
        }
        Ok(g) => match g.cursors.get(stream) {
            None => {}
            Some(Err(message)) => {
                error = Some(GateFault::CursorMalformed {
                    key,
                    message: message.to_string(),
                })
            }
            // Another incarnation's cursor proves nothing about this one.
            Some(Ok(c)) if !incarnation.is_some_and(|i| c.belongs_to(&i)) => {}
            // Past this answer's last_seq, and not absorbed by this reader
            // just now: the log ends before the view, it was restored. (An
            // absorber that succeeded this tick proved the cursor against
            // the leader's last_seq, read after this answer's: records
            // landed since, which is no restore.)
            Some(Ok(c)) if c.seq > last_seq && !matches!(absorbed, Some(Ok(()))) => {
                error = Some(GateFault::CursorPastLog {
                    key,
                    cursor: c.seq,
                    last_seq,
                });
            }
            Some(Ok(c)) => {
                // Within this answer's cut: no purge passes last_seq anyway.
                absorbed_to = Some(c.seq.min(last_seq));
                skipped = c.skipped.clone();
            }
        },
    }
    match absorbed {
        Some(Err(message)) if error.is_none() => {
            error = Some(GateFault::AbsorbFailed {
                message: message.to_string(),
            })
        }
        // A reader that does not absorb (status, a sidecar without the
        // duty) keeps the holder's finding while the view has not moved.
        None if error.is_none() => {
            if let Some(p) = published.filter(|p| p.absorbed_to == absorbed_to) {
                error = p.error.clone();
            }
        }
        _ => {}
    }
    let since = error.as_ref().map(|_| {
        published
            .filter(|p| p.error.is_some())
            .and_then(|p| p.since)
            .unwrap_or(now)
    });
    GateView {
        absorbed_to,
        skipped,
        error,
        since,
    }
}
