//! PURE: what an answer remembers, and what it takes from the memory the
//! last published row kept (docs/trim-floor.md, The sidecar's memory). The
//! counted set carries remembered nodes (`counted::carry`); here, the
//! remembered holds a recreated holds bucket no longer shows, and the
//! memory this answer keeps for the next: its record for the row, and the
//! `_members` values to write when the membership changed.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::counted::{recreated, CountedSet};
use super::members::{Digester, HoldMember, Membership, MemoryRecord, Remembered};
use super::parsed::{Kept, ParsedRows};
use super::NodeState;
use crate::rows::Unreadable;

/// What a tick writes besides the row when the membership changed: the
/// `_members` values, in key order, and the keys of the last membership
/// past them (to delete once the row names the new one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembersWrite {
    pub chunks: Vec<Vec<u8>>,
    pub stale: std::ops::Range<u32>,
}

/// The memory the last row kept, read back where this answer needs it: a
/// bucket it was written from was recreated, or it carries members.
pub enum Recalled {
    /// No row, or a row that kept nothing.
    None,
    /// Not needed this tick: every bucket is the one it names, and it
    /// carries nothing.
    NotNeeded,
    Read(Remembered),
    /// Needed and cannot be read whole: the log has lost its memory.
    Unreadable,
}

impl Recalled {
    pub fn remembered(&self) -> Option<&Remembered> {
        match self {
            Recalled::Read(r) => Some(r),
            _ => None,
        }
    }
}

/// PURE: the last row's memory, read back when the answer needs it.
pub fn recall(rows: &ParsedRows, stream: &str) -> Recalled {
    let Some(kept) = rows.published_memory(stream) else {
        return Recalled::None;
    };
    let was = kept.buckets();
    let moved = |role: &str, now| match (was.get(role), now) {
        (Some(w), Some(n)) => *w != n,
        _ => false,
    };
    let lost = moved("positions", rows.created.positions)
        || moved("presence", rows.created.presence)
        || moved("holds", rows.created.holds);
    if !lost && !kept.carries() {
        return Recalled::NotNeeded;
    }
    match rows.remembered(stream) {
        Some(Ok(r)) => Recalled::Read(r),
        Some(Err(_)) => Recalled::Unreadable,
        None => Recalled::None,
    }
}

/// The remembered holds a recreated holds bucket (or an earlier tick's
/// carrying) no longer shows, live until their `expires_at` (a lapsed join
/// hold: until its readmission is absorbed), each pinning at the
/// remembered `min_hold` + 1. None while the holds bucket cannot be read
/// (the term is then unreadable anyway).
pub fn carried_holds<'r>(
    rows: &ParsedRows,
    stream: &str,
    memory: Option<&'r Remembered>,
    incarnation: Option<super::Incarnation>,
    now: DateTime<Utc>,
) -> Vec<(&'r str, u64)> {
    let (Some(memory), Ok(holds)) = (memory, &rows.holds) else {
        return Vec::new();
    };
    let lost = recreated(memory, "holds", rows.created.holds);
    let seq = memory.min_hold.map_or(1, |m| m.saturating_add(1));
    let current = holds.get(stream).map(Vec::as_slice).unwrap_or_default();
    let held = |id: &str| {
        current
            .iter()
            .any(|h| h.as_ref().is_ok_and(|(k, _)| k.hold_id == id))
    };
    memory
        .membership
        .holds
        .iter()
        .filter(|(id, h)| {
            let live = h.expires_at.0 > now
                || (h.until_absorbed
                    && id
                        .strip_prefix(crate::rows::JOIN_HOLD_PREFIX)
                        .is_some_and(|op| !super::join_absorbed(rows, stream, incarnation, op)));
            (lost || h.carried) && live && !held(id)
        })
        .map(|(id, _)| (id.as_str(), seq))
        .collect()
}

/// A term's value as the memory keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stood {
    Value(u64),
    /// Nothing binds (no node, no hold).
    Unbounded,
    /// Not read this tick: the last value read is kept.
    Unreadable,
}

/// PURE: the memory this answer keeps, and what to write for it. The
/// nodes come from the counted set (every node in it, live or not, carried
/// ones marked), the holds from the live holds now and the carried ones; a
/// part that could not be read this tick keeps what the last memory said
/// (and a last memory that cannot be read back is kept as its record,
/// unchanged). The `_members` values are written only when the digest
/// differs from the last row's.
pub fn keep(
    rows: &ParsedRows,
    stream: &str,
    set: &CountedSet,
    (carried, lapsed): (&[(&str, u64)], &[&str]),
    recalled: &Recalled,
    (applied, min_hold): (Stood, Stood),
    now: DateTime<Utc>,
) -> (MemoryRecord, Option<Arc<MembersWrite>>) {
    let kept = rows.published_memory(stream);
    let mut buckets = kept.map(|k| k.buckets().clone()).unwrap_or_default();
    // Each tick of a quiet log finds every role recorded as it is: no
    // key is copied for it.
    for (role, created) in rows.created.roles() {
        if buckets.get(role) != Some(&created) {
            buckets.insert(role.to_string(), created);
        }
    }
    let nodes_read = set.unreadable.is_none() && rows.created.positions.is_some();
    let live_holds = match (&rows.holds, rows.created.holds) {
        (Ok(h), Some(_)) => Some(h.get(stream).map(Vec::as_slice).unwrap_or_default()),
        _ => None,
    };
    let last = |s: Stood, before: Option<u64>| match s {
        Stood::Value(v) => Some(v),
        Stood::Unbounded => None,
        Stood::Unreadable => before,
    };
    let record_before = match kept {
        Some(Kept::Record(r)) => Some(r),
        _ => None,
    };
    // What the last memory said, for a part not read now.
    let before: Option<Result<Remembered, Unreadable>> = if nodes_read && live_holds.is_some() {
        None
    } else {
        match recalled {
            Recalled::Read(r) => Some(Ok(r.clone())),
            _ => rows.remembered(stream),
        }
    };
    let (applied_before, min_hold_before) = match (recalled.remembered(), record_before) {
        (Some(r), _) => (r.applied, r.min_hold),
        (None, Some(r)) => (r.applied, r.min_hold),
        (None, None) => match kept {
            Some(Kept::Pins(p)) => {
                let r = Remembered::from_pins(p);
                (r.applied, r.min_hold)
            }
            _ => (None, None),
        },
    };
    if let (Some(Err(_)), Some(r)) = (&before, record_before) {
        // The membership is not read now, and the last one cannot be read
        // back: the record stands as it was (its keys are not rewritten).
        let mut r = r.clone();
        r.buckets = buckets;
        r.applied = last(applied, applied_before);
        r.min_hold = last(min_hold, min_hold_before);
        return (r, None);
    }
    let before = before.and_then(Result::ok);
    // The nodes as the answer counts them, in name order (the counted
    // set's table is sorted): digested as they stand, and copied into a
    // membership only when it changed. A copy every tick was most of a
    // quiet fleet's cost of the memory (docs/performance.md).
    let counted_nodes = || {
        set.nodes
            .iter()
            .filter(|n| n.state != NodeState::Evicted)
            .map(|n| (&n.node, n.state == NodeState::Carried))
    };
    let mut m = Membership::default();
    match (live_holds, &before) {
        (Some(current), _) => {
            for (k, h) in current.iter().filter_map(|h| h.as_ref().ok()) {
                // A join hold past its expiry still pins while its
                // readmission is unabsorbed: remembered like a live one.
                // Carried, a join hold cannot be extended by the duty
                // holder any more, so it pins until its readmission is
                // absorbed, whatever its expiry.
                if h.expires_at.0 > now || lapsed.contains(&k.hold_id.as_str()) {
                    m.holds.insert(
                        k.hold_id.clone(),
                        HoldMember {
                            expires_at: h.expires_at,
                            carried: false,
                            // Only a readmission's own join hold (named by
                            // its operation) has a readmission to wait for.
                            until_absorbed: h.kind == crate::rows::HoldKind::Join
                                && k.hold_id.starts_with(crate::rows::JOIN_HOLD_PREFIX),
                        },
                    );
                }
            }
            let remembered = recalled.remembered();
            for (id, _) in carried {
                if let Some(h) = remembered.and_then(|r| r.membership.holds.get(*id)) {
                    m.holds.insert(
                        (*id).to_string(),
                        HoldMember {
                            expires_at: h.expires_at,
                            carried: true,
                            until_absorbed: h.until_absorbed,
                        },
                    );
                }
            }
        }
        (None, Some(b)) => m.holds = b.membership.holds.clone(),
        (None, None) => {}
    }
    let mut d = Digester::default();
    // The digest is the membership's, fed in name order: a table out of
    // order (never, as the walk makes it) is put in order first.
    let sorted = set.nodes.windows(2).all(|w| w[0].node < w[1].node);
    match (nodes_read, &before) {
        (true, _) if sorted => counted_nodes().for_each(|(n, c)| d.node(n, c)),
        (true, _) => {
            let ordered: std::collections::BTreeMap<_, _> = counted_nodes().collect();
            ordered.into_iter().for_each(|(n, c)| d.node(n, c));
        }
        (false, Some(b)) => b.membership.nodes.iter().for_each(|(n, c)| d.node(n, *c)),
        (false, None) => {}
    }
    for (id, h) in &m.holds {
        d.hold(id, *h);
    }
    let mut record = d.finish();
    record.buckets = buckets;
    record.applied = last(applied, applied_before);
    record.min_hold = last(min_hold, min_hold_before);
    match record_before {
        Some(r) if r.digest == record.digest => {
            record.keys = r.keys;
            (record, None)
        }
        _ => {
            match (nodes_read, &before) {
                (true, _) => m.nodes = counted_nodes().map(|(n, c)| (n.clone(), c)).collect(),
                (false, Some(b)) => m.nodes = b.membership.nodes.clone(),
                (false, None) => {}
            }
            let chunks = m.chunks();
            record.keys = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
            let stale = record.keys..record_before.map_or(0, |r| r.keys).max(record.keys);
            (record, Some(Arc::new(MembersWrite { chunks, stale })))
        }
    }
}
