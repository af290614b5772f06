//! The six terms (docs/trim-floor.md, Each term in detail), one function each. A term
//! says what it permits deleting up to, or that it binds nothing, does not
//! apply, or could not be read.

use std::cmp::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::answer::{Cause, Term, TermName, TermState};
use super::counted::CountedSet;
use super::parsed::{Backups, ByNode, HoldsByStream};
use super::{BucketError, FeedState, Policy, StreamState};
use crate::config::{BackupPolicy, Dur};
use crate::human;
use crate::rows::{BackupManifest, SnapshotRow, Timestamp, Unreadable};

fn value(name: TermName, seq: u64, detail: Option<String>, reason: Option<String>) -> Term {
    Term {
        term: name,
        state: TermState::Value { seq, reason },
        detail,
        binding: false,
        held: None,
        replicas: None,
    }
}

fn unreadable(name: TermName, cause: Cause, error: impl Into<String>) -> Term {
    Term {
        term: name,
        state: TermState::Unreadable {
            error: error.into(),
            cause,
        },
        detail: None,
        binding: false,
        held: None,
        replicas: None,
    }
}

/// A bucket that could not be read, as a term.
fn bucket(name: TermName, e: &BucketError) -> Term {
    let cause = match e {
        BucketError::Missing { .. } => Cause::MissingBucket,
        BucketError::Failed { .. } => Cause::Read,
    };
    unreadable(name, cause, e.to_string())
}

fn plain(name: TermName, state: TermState) -> Term {
    Term {
        term: name,
        state,
        detail: None,
        binding: false,
        held: None,
        replicas: None,
    }
}

/// `applied`: the lowest position over the counted set.
pub fn applied(stream: &str, set: &CountedSet) -> Term {
    if let Some((e, cause)) = &set.unreadable {
        return unreadable(TermName::Applied, *cause, e.clone());
    }
    if let Some((node, seq)) = set.ahead.first() {
        return unreadable(
            TermName::Applied,
            Cause::AheadOfLog,
            format!("{node} reports position {seq}, past the log's last sequence (ahead_of_log)"),
        );
    }
    match set.counted.iter().min_by_key(|c| c.effective_seq) {
        None => plain(TermName::Applied, TermState::Unbounded),
        Some(c) => {
            let reason = if c.effective_seq == 0 {
                c.zero_reason.map(|z| z.words(c.node, stream))
            } else {
                None
            };
            value(
                TermName::Applied,
                c.effective_seq,
                Some(c.node.to_string()),
                reason,
            )
        }
    }
}

/// The holds bucket, parsed: stream → holds on it.
pub type Holds = Result<std::sync::Arc<HoldsByStream>, BucketError>;

/// `min_hold`: one below the lowest live hold's `seq`.
/// A hold that pins though the holds bucket does not show it live: one
/// carried over a recreated bucket, or a join hold past its expiry whose
/// readmission is not absorbed yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraHold<'a> {
    pub id: &'a str,
    pub seq: u64,
    pub owner: &'a str,
    /// Said in the term's detail.
    pub why: &'static str,
}

pub fn min_hold(stream: &str, holds: &Holds, extra: &[ExtraHold], now: DateTime<Utc>) -> Term {
    let all = match holds {
        Ok(h) => h,
        Err(e) => return bucket(TermName::MinHold, e),
    };
    // The lowest live hold: (seq, id, owner, why it pins when not live).
    let mut lowest: Option<(u64, &str, &str, Option<&str>)> = None;
    for h in all.get(stream).map(Vec::as_slice).unwrap_or_default() {
        let h = match h {
            Ok(h) => h,
            Err(err) => return unreadable(TermName::MinHold, Cause::Row, format!("holds {err}")),
        };
        if h.1.expires_at.0 <= now {
            continue;
        }
        if lowest.is_none_or(|l| h.1.seq < l.0) {
            lowest = Some((h.1.seq, &h.0.hold_id, &h.1.owner, None));
        }
    }
    for h in extra {
        if lowest.is_none_or(|l| h.seq < l.0) {
            lowest = Some((h.seq, h.id, h.owner, Some(h.why)));
        }
    }
    match lowest {
        None => plain(TermName::MinHold, TermState::Unbounded),
        Some((seq, id, owner, carried)) => {
            let permits = seq.saturating_sub(1);
            let reason = (permits == 0)
                .then(|| format!("hold {id} ({owner}) needs every record from {seq}"));
            let detail = match carried {
                Some(why) => format!("{id} ({owner}, {why})"),
                None => format!("{id} ({owner})"),
            };
            value(TermName::MinHold, permits, Some(detail), reason)
        }
    }
}

/// `backup_floor` under either policy. Also returns the age of the backup
/// point the trim reads (for the `backup_age` alarm): `None` when there is
/// none at all. A manifest completed (or an acknowledgement given) before
/// `created` (the later of the stream's created and the generation's
/// opening) speaks of another history and does not count.
pub fn backup_floor(
    stream: &str,
    backups: &Result<std::sync::Arc<Backups>, BucketError>,
    policy: &Policy,
    created: Option<Timestamp>,
    now: DateTime<Utc>,
) -> (Term, Option<Duration>) {
    let before_stream = |t: Timestamp| created.is_some_and(|c| t < c);
    let b = match backups {
        Ok(b) => b,
        Err(e) => return (bucket(TermName::BackupFloor, e), None),
    };
    match policy.backup_floor {
        BackupPolicy::Operator => match b.acks.get(stream) {
            None => (value(TermName::BackupFloor, 0, None, Some("no acknowledgement has been given".into())), None),
            Some(Err(err)) => (unreadable(TermName::BackupFloor, Cause::Row, format!("backups {err}")), None),
            Some(Ok(ack)) if before_stream(ack.at) => (
                value(
                    TermName::BackupFloor,
                    0,
                    None,
                    Some(format!("the only acknowledgement predates this generation of the stream (given {}, generation opened {})", ack.at, created.map(|c| c.to_string()).unwrap_or_default())),
                ),
                None,
            ),
            Some(Ok(ack)) => {
                let age = now.signed_duration_since(ack.at.0).to_std().unwrap_or_default();
                (value(TermName::BackupFloor, ack.position, Some(format!("acknowledged by {}", ack.by)), None), Some(age))
            }
        },
        BackupPolicy::Engine => {
            let mut newest: Option<&BackupManifest> = None;
            let mut earlier = 0;
            let naming = match b.naming(stream) {
                Ok(naming) => naming,
                Err(err) => return (unreadable(TermName::BackupFloor, Cause::Row, format!("backups {err}")), None),
            };
            for m in naming {
                if m.completed_at.is_some_and(before_stream) {
                    earlier += 1;
                    continue;
                }
                if newest.is_none_or(|n| m.completed_at > n.completed_at) {
                    newest = Some(m);
                }
            }
            let Some(m) = newest else {
                let reason = if earlier > 0 {
                    format!("no verified backup of {stream} was completed since this generation opened ({}); {earlier} older one(s) speak of a history the log no longer holds", created.map(|c| c.to_string()).unwrap_or_default())
                } else {
                    format!("no verified backup names {stream}")
                };
                return (value(TermName::BackupFloor, 0, None, Some(reason)), None);
            };
            let completed = m.completed_at.map(|c| c.0).unwrap_or(now);
            let age = now.signed_duration_since(completed).to_std().unwrap_or_default();
            let detail = Some(format!("{} on {}", m.id, m.node));
            if age > policy.backup_max_age {
                let reason = format!("the newest complete backup is {} old (backup_max_age is {})", human::age(age), Dur(policy.backup_max_age));
                return (value(TermName::BackupFloor, 0, detail, Some(reason)), Some(age));
            }
            let seq = m.positions.get(stream).copied().unwrap_or(0);
            (value(TermName::BackupFloor, seq, detail, None), Some(age))
        }
    }
}

/// `snapshot_floor`: the k-th highest verified snapshot over the counted set.
pub fn snapshot_floor(
    stream: &str,
    snapshots: &Result<std::sync::Arc<ByNode<SnapshotRow>>, BucketError>,
    set: &CountedSet,
    generation: u64,
    k: u32,
) -> Term {
    if let Some((_, cause)) = &set.unreadable {
        return unreadable(
            TermName::SnapshotFloor,
            *cause,
            "the counted set is unknown (see applied)",
        );
    }
    // A sole node's recovery artefact is a backup.
    if set.counted.len() <= 1 {
        return plain(TermName::SnapshotFloor, TermState::Unbounded);
    }
    let rows = match snapshots {
        Ok(r) => r,
        Err(e) => return bucket(TermName::SnapshotFloor, e),
    };
    let mut held: Vec<(u64, &str)> = Vec::new();
    // Both are in node order: a merge, not a lookup per node, with one
    // comparison a step (the names' bytes are the walk's cost).
    let mut snaps = rows.iter().peekable();
    for c in &set.counted {
        let row = loop {
            match snaps.peek() {
                Some((n, r)) => match n.as_str().cmp(c.node) {
                    Ordering::Less => {
                        snaps.next();
                    }
                    Ordering::Equal => break Some(r),
                    Ordering::Greater => break None,
                },
                None => break None,
            }
        };
        let Some(row) = row else { continue };
        let row = match row {
            Err(err) => {
                return unreadable(
                    TermName::SnapshotFloor,
                    Cause::Row,
                    format!("snapshots {err}"),
                )
            }
            Ok(r) => r,
        };
        if c.diverged {
            continue;
        }
        if let Some(a) = row.artefacts.get(stream) {
            if a.verified && a.generation == generation {
                held.push((a.position, c.node));
            }
        }
    }
    let k = k.max(1) as usize;
    if held.len() < k {
        return value(
            TermName::SnapshotFloor,
            0,
            None,
            Some(format!(
                "{} of {} counted nodes hold a verified snapshot of {stream} at this generation (snapshot_quorum is {k})",
                held.len(),
                set.counted.len()
            )),
        );
    }
    // The k-th highest, without sorting them all; ties go to the first
    // node by name. `held` is in node order (the counted set is), so its
    // index breaks a tie as the name would, without comparing names.
    let mut ranked: Vec<(u64, usize)> = held
        .iter()
        .enumerate()
        .map(|(i, (seq, _))| (*seq, i))
        .collect();
    ranked.select_nth_unstable_by(k - 1, |a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let (seq, at) = ranked[k - 1];
    let node = held[at].1;
    value(TermName::SnapshotFloor, seq, Some(node.to_string()), None)
}

/// What a consumer has confirmed: acknowledged, never merely delivered; a
/// consumer with nothing outstanding is caught up to what it has seen, and
/// one with nothing pending either to the `last_seq` read before it.
fn confirmed(f: &FeedState, last_seq_before: Option<u64>) -> u64 {
    if f.num_ack_pending == 0 {
        if f.num_pending == 0 {
            match last_seq_before {
                Some(last) => last.max(f.delivered_seq),
                None => f.delivered_seq,
            }
        } else {
            f.delivered_seq
        }
    } else {
        f.ack_floor_seq
    }
}

/// `replica_floor`: the least any replica or named consumer has confirmed
/// stored, by the feed's rules (docs/trim-floor.md, Replicas).
pub fn replica_floor(
    read: &Option<Result<super::ReplicasRead, Unreadable>>,
    orphaned: &[super::OrphanedCopy],
    last_seq_before: Option<u64>,
) -> Term {
    let Some(read) = read else {
        return plain(TermName::ReplicaFloor, TermState::NotApplicable);
    };
    let r = match read {
        Err(e) => return unreadable(TermName::ReplicaFloor, Cause::Read, e.clone()),
        Ok(r) => r,
    };
    // A copy whose durable consumer is gone has stored what nobody can
    // read: the trim waits until the consumer is back or the copy is left
    // out, never past what the copy may lack.
    if !orphaned.is_empty() {
        let error = match orphaned {
            [o] => format!(
                "{} copies the log through durable consumer {}, which does not exist: what it has stored cannot be read (replica_unprotected)",
                o.stream, o.consumer
            ),
            many => {
                let said: Vec<String> = many
                    .iter()
                    .map(|o| format!("{} (through {})", o.stream, o.consumer))
                    .collect();
                format!(
                    "{} copy the log through durable consumers that do not exist: what they have stored cannot be read (replica_unprotected)",
                    crate::human::list(&said)
                )
            }
        };
        return unreadable(TermName::ReplicaFloor, Cause::Orphaned, error);
    }
    if let Some(first) = r.missing_named.first() {
        let error = match r.missing_named.as_slice() {
            [one] => {
                format!("consumer {one} (named in replicas.consumers) does not exist on the log")
            }
            many => format!(
                "consumers {} (named in replicas.consumers) do not exist on the log",
                crate::human::list(many)
            ),
        };
        let mut t = unreadable(TermName::ReplicaFloor, Cause::MissingNamed, error);
        t.detail = Some(first.clone());
        return t;
    }
    let copies: Vec<super::answer::ReplicaCopy> = r
        .replicas
        .iter()
        .map(|c| super::answer::ReplicaCopy {
            consumer: c.consumer.clone(),
            named: c.named,
            confirmed: confirmed(&c.state, last_seq_before),
            last_active: c.last_active,
            delivered: c.state.delivered_seq,
            delivered_active: c.delivered_active,
            paused: c.paused,
            paused_until: c.paused_until,
            feeds: c.feeds.clone(),
        })
        .collect();
    // The least confirmed; ties to the first in name order, so the detail
    // does not flap between ticks.
    let least = copies
        .iter()
        .map(|c| (c.confirmed, c.consumer.as_str()))
        .min()
        .map(|(seq, name)| (seq, name.to_string()));
    let mut t = match least {
        None => plain(TermName::ReplicaFloor, TermState::Unbounded),
        Some((seq, name)) => {
            let reason = (seq == 0).then(|| format!("{name} has confirmed nothing yet"));
            value(TermName::ReplicaFloor, seq, Some(name), reason)
        }
    };
    t.replicas = Some(std::sync::Arc::new(super::answer::Copies {
        consumers: copies,
        ignored: r.ignored.clone(),
    }));
    t
}

/// `feed_ack_floor`: acknowledged, never merely delivered; an idle
/// filtered consumer is caught up to what it has seen.
pub fn feed_ack_floor(
    consumer: Option<&str>,
    feed: &Option<Result<FeedState, Unreadable>>,
    last_seq_before: Option<u64>,
) -> Term {
    let (Some(name), Some(feed)) = (consumer, feed) else {
        return plain(TermName::FeedAckFloor, TermState::NotApplicable);
    };
    match feed {
        Err(e) => unreadable(TermName::FeedAckFloor, Cause::Read, e.clone()),
        Ok(f) => {
            let seq = confirmed(f, last_seq_before);
            let reason = (seq == 0).then(|| format!("{name} has acknowledged nothing yet"));
            value(TermName::FeedAckFloor, seq, Some(name.to_string()), reason)
        }
    }
}

/// `age_floor`: one below the first retained record young enough to keep.
pub fn age_floor(
    state: &Result<StreamState, Unreadable>,
    young_seq: &Result<Option<u64>, Unreadable>,
    min_age: Duration,
) -> Term {
    let s = match state {
        Ok(s) => s,
        Err(e) => return unreadable(TermName::AgeFloor, Cause::Read, format!("stream info: {e}")),
    };
    let young = match young_seq {
        Ok(y) => *y,
        Err(e) => return unreadable(TermName::AgeFloor, Cause::Read, format!("age lookup: {e}")),
    };
    match young {
        // A lookup can land below first_seq only if the log moved between
        // reads; never permit more than the log's own first record allows.
        Some(seq) => {
            let permits = seq.saturating_sub(1).min(s.last_seq);
            let reason = (permits == 0)
                .then(|| format!("every record is younger than min_age ({})", Dur(min_age)));
            value(TermName::AgeFloor, permits, None, reason)
        }
        None => value(TermName::AgeFloor, s.last_seq, None, None),
    }
}

/// `archive_floor`: the archive's frontier, the highest sequence durably
/// folded in this generation (docs/archive-format.md, The seventh term).
pub fn archive_floor(a: &crate::archive::state::ArchiveState) -> Term {
    let state = match a.frontier {
        Some(seq) if !a.unreadable => TermState::Value {
            seq,
            reason: (seq == 0).then(|| "nothing has been folded into the archive yet".to_string()),
        },
        _ => TermState::Unreadable {
            error: a
                .error
                .clone()
                .unwrap_or_else(|| "the archive cannot be read".into()),
            cause: if a.missing_bucket {
                Cause::MissingBucket
            } else {
                Cause::Archive
            },
        },
    };
    Term {
        term: TermName::ArchiveFloor,
        state,
        detail: Some(a.store.clone()),
        binding: false,
        held: None,
        replicas: None,
    }
}
