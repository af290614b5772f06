//! PURE: the retention answer (docs/architecture.md). Rows, stream state, the
//! feed consumer and `now` go in; the counted set, the seven terms,
//! `trim_to`, `blocked_by`, the floor and the NOT READY cases come out. No
//! NATS, no clock, no files: the tick and `status` both call [`compute`],
//! so there is one implementation of the answer.

mod answer;
pub mod carried;
mod counted;
mod licensed;
pub mod members;
pub mod memory;
pub mod parsed;
mod pins;
mod published;
pub mod remember;
mod row;
mod terms;

#[cfg(test)]
pub(crate) mod model_tests;
#[cfg(test)]
pub(crate) mod tests;

use crate::rows::Stamped;
use std::time::Duration;

/// The retention answer for one domain.
pub use answer::compute;
pub use answer::{
    explicit_point, Answer, Cause, ConfigFields, FloorState, GateFault, GateView, Held, NodeRow,
    NodeState, NotReady, Outage, PurgeClamp, ReplicaCopy, RequestedView, Settings, Term, TermName,
    TermState, WouldPurge,
};
pub use licensed::Licensed;
pub use parsed::ParsedRows;
pub use pins::{clamp_to_pins, Pins, ReadPresence};
pub use published::{PublishedBy, PublishedFloor};
pub use row::{row_stands, FloorsRow, RowDigest, WrittenRow};

use crate::config::{BackupPolicy, Config};
use crate::rows::{Incarnation, Timestamp, Unreadable};

/// PURE: the highest generation of `stream` that the sidecar's own rows
/// outside the floors bucket record for the live incarnation (`created`):
/// the reanchor's anchor and the gates view's cursor. With the positions
/// rows, what shows that a lost floors row was not generation 0 (a
/// reanchor before any node reported in its generation leaves no
/// position to show it).
pub fn recorded_generation(
    rows: &ParsedRows,
    stream: &str,
    created: Option<Timestamp>,
) -> Option<u64> {
    let g = rows.gates.as_ref().ok()?;
    let created = created?;
    let anchor = g
        .anchors
        .get(stream)
        .filter(|a| a.stream_created == created)
        .map(|a| a.generation);
    let cursor = g
        .cursors
        .get(stream)
        .and_then(|c| c.as_ref().ok())
        .filter(|c| c.stream_created == Some(created))
        .and_then(|c| c.generation);
    anchor.max(cursor)
}

/// PURE: whether `stream` still has the sidecar's memory, from its mark in
/// `state`, the floors bucket as `rows` read it, and whether that bucket
/// holds the log's row (a row that does not parse is there).
pub fn memory_of(rows: &ParsedRows, stream: &str, state: &StreamState) -> memory::Memory {
    let floors = match &rows.floors {
        Ok(_) => memory::FloorsBucket::Read(rows.created.floors),
        Err(BucketError::Missing { .. }) => memory::FloorsBucket::Missing,
        Err(_) => memory::FloorsBucket::Unreadable,
    };
    let row = !matches!(rows.published(stream), Ok(None));
    memory::judge(state.mark.as_ref(), floors, row)
}

/// One KV entry as read: key, raw value, revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: Vec<u8>,
    pub revision: u64,
}

/// Why a bucket could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BucketError {
    /// A missing bucket is unreadable, never empty: a missing holds bucket
    /// read as empty would lift every pin.
    #[error("bucket {bucket} does not exist; run `crewlet retention init`")]
    Missing { bucket: String },
    #[error("bucket {bucket} could not be read: {reason}")]
    Failed { bucket: String, reason: String },
}

/// A bucket's live entries (deleted and expired keys left out), or why it
/// could not be read.
pub type Bucket = Result<Vec<Entry>, BucketError>;

/// Every bucket the answer reads, each read once per tick for all domains.
#[derive(Debug, Clone)]
pub struct Rows {
    pub presence: Bucket,
    pub positions: Bucket,
    pub holds: Bucket,
    pub backups: Bucket,
    pub snapshots: Bucket,
    pub gates: Bucket,
    pub floors: Bucket,
}

/// The stream's state and settings from stream info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    pub first_seq: u64,
    pub last_seq: u64,
    pub bytes: u64,
    /// How many records it holds (its own count: gaps left by deletes are
    /// not counted).
    pub messages: u64,
    /// How many consumers it has (replica consumers are listed only on a
    /// log that has any).
    pub consumers: usize,
    /// -1 when unset.
    pub max_bytes: i64,
    /// The stream's incarnation (generations are keyed to it).
    pub created: Timestamp,
    /// The stamps of its first and last records, as the same stream info
    /// gives them (meaningless when it is empty): where they settle the
    /// age lookup, it is not sent ([`young_by_stamps`]).
    pub first_ts: Timestamp,
    pub last_ts: Timestamp,
    /// Its own limits, for `broker_retention_bypass`.
    pub facts: crate::stream_check::StreamFacts,
    /// Its answer came from a replicated (raft) group: a cluster. There a
    /// consumer's answer must name its leader; a single server's consumer
    /// answers name none (docs/trim-floor.md, Proven current).
    pub clustered: bool,
    /// The sidecar's adoption mark in its configuration's `metadata`
    /// (docs/trim-floor.md, The log remembers that it was adopted).
    pub mark: Option<crate::rows::Mark>,
}

/// PURE: the age lookup's answer (the first record stamped at or after
/// `cutoff`) where the log's first and last stamps settle it: the last
/// older than the cutoff, none is young; the first already as young, the
/// first is. `None`: the cutoff falls between them, and the lookup is
/// sent. Like the lookup, this reads the stamps as in sequence order; the
/// age proof before each purge does not, and clamps a slice whose stamps
/// are out of order (docs/trim-floor.md, The tick, step by step).
pub fn young_by_stamps(s: &StreamState, cutoff: Timestamp) -> Option<Option<u64>> {
    if s.messages == 0 || s.last_seq < s.first_seq {
        return Some(None);
    }
    if s.last_ts < cutoff {
        Some(None)
    } else if s.first_ts >= cutoff {
        Some(Some(s.first_seq))
    } else {
        None
    }
}

/// The feed consumer's state from consumer info.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedState {
    pub ack_floor_seq: u64,
    pub delivered_seq: u64,
    pub num_ack_pending: u64,
    pub num_pending: u64,
}

/// A replica (a mirror or source copying the log through a durable
/// consumer of its own) or a consumer the domain names, as read
/// (docs/trim-floor.md, Replicas).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaState {
    pub consumer: String,
    /// Named in `replicas.consumers` (not found by its ack policy).
    pub named: bool,
    pub state: FeedState,
    /// When its ack floor last moved, by the broker.
    pub last_active: Option<Timestamp>,
    /// When it last delivered, by the broker: a copy still being
    /// delivered to is alive, whatever its ack floor says (a durable
    /// sourcing consumer confirms only now and then).
    pub delivered_active: Option<Timestamp>,
    /// Paused on the broker (`nats consumer pause`), and until when
    /// (`None`: until resumed).
    pub paused: bool,
    pub paused_until: Option<Timestamp>,
    /// The stream that copies through it, when this account can see it (a
    /// copy in another domain is not).
    pub feeds: Option<String>,
}

/// What was read of a log's replicas.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplicasRead {
    pub replicas: Vec<ReplicaState>,
    /// Replicas found and left out by `replicas.ignore`.
    pub ignored: Vec<String>,
    /// Every consumer the log's listing named, replica or not: a copy
    /// whose durable consumer is not among them is orphaned.
    pub present: Vec<String>,
    /// Consumers `replicas.consumers` names that the log does not have:
    /// the term is unreadable until they exist or leave the list.
    pub missing_named: Vec<String>,
}

/// The `max_ack_pending` docs/contract.md gives a copy's durable
/// consumer: the server confirms what a copy stored at the latest every
/// this many deliveries, so its pin trails by at most this many records
/// (the server's default, 1000, leaves a healthy copy looking behind).
pub const COPY_MAX_ACK_PENDING: u64 = 256;

/// A stream this sidecar can see that copies the log through a durable
/// consumer which does not exist on the log (deleted, or never made):
/// what it has stored is invisible, so the trim waits until the consumer
/// is back or the copy is left out (`replica_unprotected`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OrphanedCopy {
    /// The stream that copies the log.
    pub stream: String,
    /// The durable consumer its mirror or source names.
    pub consumer: String,
    /// Where that consumer must deliver (the copy's configuration says).
    pub deliver_subject: String,
    /// A mirror (keeps the log's sequence numbers), not a source.
    pub mirror: bool,
}

/// What was read for one domain beyond the buckets, in read order: stream
/// info, then consumer info, then the age lookup.
#[derive(Debug, Clone)]
pub struct DomainRead {
    pub stream: Result<StreamState, Unreadable>,
    /// `None` when the domain has no feed consumer configured.
    pub feed: Option<Result<FeedState, Unreadable>>,
    /// The log's replicas and named consumers; `None` where the server
    /// has no durable sourcing (before 2.14) and no consumer is named.
    pub replicas: Option<Result<ReplicasRead, Unreadable>>,
    /// Streams this sidecar can see that mirror or source the log through
    /// an ephemeral consumer, which nothing can protect
    /// (`replica_unprotected`); empty when none, or not read.
    pub unprotected: Vec<String>,
    /// Streams this sidecar can see that copy the log through a durable
    /// consumer the log does not have (not left out by `replicas.ignore`).
    pub orphaned: Vec<OrphanedCopy>,
    /// The first retained sequence stamped at or after `now - min_age`;
    /// `Ok(None)` when every retained record is older (or none is retained).
    pub young_seq: Result<Option<u64>, Unreadable>,
    /// For a domain with a `gate_subject`, when this reader brought the
    /// gates view up to date (the duty holder): whether that worked.
    /// `None` when it did not try.
    pub absorbed: Option<Result<(), Unreadable>>,
    /// The broker's clock in the stream-info answer (docs/decisions.md, "Pins, clocks, fences, reads"):
    /// this domain's answer is computed at that instant.
    pub clock: Option<crate::clock::Reading>,
    /// On an archived domain: its archive as read (and folded) this tick;
    /// `None` when not read (the term is then unreadable).
    pub archive: Option<crate::archive::state::ArchiveRead>,
}

/// The policy the answer is computed under, taken from the configuration.
#[derive(Debug, Clone)]
pub struct Policy {
    pub min_age: Duration,
    pub backup_floor: BackupPolicy,
    pub backup_max_age: Duration,
    pub snapshot_quorum: u32,
    pub fence_window: Duration,
    /// `retention.tick`: in the configuration digest, since sidecars with
    /// different ticks disagree on the duty lease's life.
    pub tick: Duration,
    pub trim_enabled: bool,
    /// This sidecar's node id (`by` in the answer).
    pub by: String,
    /// The duty session the answer is published under ("" when none).
    pub session: String,
    /// Each configured domain's digest and fields under this policy.
    pub settings: answer::Settings,
}

impl Policy {
    pub fn from_config(config: &Config, session: &str) -> Self {
        let mut policy = Policy::with_settings(config, session, Default::default());
        policy.settings = answer::Settings::of(&config.domains, &policy);
        policy
    }

    /// As [`Policy::from_config`], with each domain's settings computed
    /// earlier for the same configuration: a running sidecar keeps them
    /// across ticks rather than digesting every domain's again each tick
    /// (an entry that does not match is computed afresh anyway).
    pub fn with_settings(config: &Config, session: &str, settings: answer::Settings) -> Self {
        let r = &config.retention;
        Policy {
            min_age: r.min_age.0,
            backup_floor: r.backup_floor,
            backup_max_age: r.backup_max_age.0,
            snapshot_quorum: r.snapshot_quorum,
            fence_window: r.fence_window.0,
            tick: r.tick.0,
            trim_enabled: config.trim.enabled,
            by: config.node.id.clone(),
            session: session.to_string(),
            settings,
        }
    }
}

/// The purge `trim_to` alone licenses: the `seq` to send (keep sequences
/// `>=` it), or `None` when there is nothing to do. It can never be 0 (a
/// full purge) nor past `last_seq + 1` (which would renumber the stream).
pub fn licensed_purge(answer: &Answer) -> Option<u64> {
    if answer.not_ready.is_some() || answer.dry_run || answer.stream_error.is_some() {
        return None;
    }
    if answer
        .terms
        .iter()
        .any(|t| matches!(t.state, TermState::Unreadable { .. }))
    {
        return None;
    }
    check_purge(answer.trim_to, answer.first_seq, answer.last_seq)
}

/// The purge the answer licenses once the gates view clamps it: on a domain
/// with a `gate_subject`, never past a gate record the view has not
/// absorbed in this incarnation (`min(trim_to, absorbed_to) + 1`), and
/// nothing at all without a cursor it can prove. This is the only place a
/// purge target is made; pins re-read before the purge and the age proof
/// may only lower it ([`clamp_to_pins`]).
pub fn purge_target(answer: &Answer) -> Option<u64> {
    licensed_purge(answer)?;
    let upto = match &answer.gate_view {
        None => answer.trim_to,
        Some(view) => answer.trim_to.min(view.absorbed_to?),
    };
    check_purge(upto, answer.first_seq, answer.last_seq)
}

/// What a purge may send (`{"seq": target}`: keep sequences at or above
/// it): made only from an answer ([`licensed_target`]), whose rules it
/// carries, and only ever lowered after that (the age proof, the pins
/// re-read). [`crate::broker::Broker::purge_to`] takes nothing else, so no
/// path can hand the purge a number of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PurgeTarget(u64);

impl PurgeTarget {
    /// The `seq` the purge sends.
    pub fn seq(self) -> u64 {
        self.0
    }

    /// The same license, lowered to `seq`: `None` for anything above what
    /// the answer licensed (or 1 and below: nothing to purge).
    pub fn lowered_to(self, seq: u64) -> Option<PurgeTarget> {
        (seq > 1 && seq <= self.0).then_some(PurgeTarget(seq))
    }

    /// The bench purges streams it made itself, with no answer to take a
    /// target from.
    #[cfg(feature = "bench")]
    pub fn for_bench(seq: u64) -> PurgeTarget {
        PurgeTarget(seq)
    }
}

/// The purge `answer` licenses, as the type the purge takes: what
/// [`purge_target`] gives. Only an answer computed from rows proven
/// current ([`Licensed`]) licenses one.
pub fn licensed_target(answer: &Licensed) -> Option<PurgeTarget> {
    purge_target(answer).map(PurgeTarget)
}

/// The incarnation of `stream` a read belongs to: the live stream's
/// `created` at the domain's generation (the floors row's, 0 before the
/// first row). `None` when either cannot be read. The gates view and the
/// gate rows that apply are this incarnation's.
pub fn incarnation(rows: &ParsedRows, stream: &str, read: &DomainRead) -> Option<Incarnation> {
    let created = read.stream.as_ref().ok()?.created;
    incarnation_at(rows, stream, created).ok()
}

/// As [`incarnation`], for a stream whose `created` is known; `Err` names
/// the floors row that cannot be read.
pub fn incarnation_at(
    rows: &ParsedRows,
    stream: &str,
    stream_created: Timestamp,
) -> Result<Incarnation, Unreadable> {
    let generation = match rows.published(stream) {
        Ok(Some((p, _))) => p.generation,
        Ok(None) => 0,
        Err(e) => {
            return Err(Unreadable(format!(
                "the floors row of {stream} cannot be read ({e})"
            )))
        }
    };
    Ok(Incarnation {
        stream_created,
        generation,
    })
}

/// The readmission join holds on `answer`'s log that may be lifted: the
/// answer counts the node again (its readmission record is the gate in
/// force in this incarnation), or a later gate superseded the readmission.
/// Returns the hold ids.
pub fn retired_join_holds(answer: &Answer, rows: &ParsedRows) -> Vec<String> {
    let (Ok(holds), Ok(gates)) = (&rows.holds, &rows.gates) else {
        return Vec::new();
    };
    let Some(created) = answer.stream_created else {
        return Vec::new();
    };
    if answer.not_ready.is_some() {
        return Vec::new();
    }
    let incarnation = Incarnation {
        stream_created: created,
        generation: answer.generation,
    };
    let mut out = Vec::new();
    for (hold_id, op_id) in join_holds(holds, &answer.stream) {
        let Some(op) = gates.ops.get(op_id) else {
            continue;
        };
        let Some(at) = op.logs.get(&answer.stream) else {
            continue;
        };
        let in_force = gates
            .rows
            .get(&answer.stream)
            .and_then(|r| r.get(&op.node))
            .filter(|g| g.belongs_to(&incarnation));
        let counted = answer.nodes.iter().any(|n| {
            *n.node == *op.node && !matches!(n.state, NodeState::Evicted | NodeState::Evicting)
        });
        let done = match in_force {
            Some(g) if g.op_id == op_id => counted,
            Some(g) => g.seq > *at,
            None => false,
        };
        if done {
            out.push(hold_id.to_string());
        }
    }
    out
}

/// The readmission join holds on `stream` (well-formed, of kind `join`):
/// each hold id with the operation id it names.
fn join_holds<'a>(
    holds: &'a parsed::HoldsByStream,
    stream: &str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    holds
        .get(stream)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|h| h.as_ref().ok())
        .filter(|(_, hold)| hold.kind == crate::rows::HoldKind::Join)
        .filter_map(|(key, _)| {
            let op_id = key.hold_id.strip_prefix(crate::rows::JOIN_HOLD_PREFIX)?;
            Some((key.hold_id.as_str(), op_id))
        })
}

/// The readmission join holds on `answer`'s log whose readmission record
/// the gates view has not absorbed yet (in this incarnation): the duty
/// holder extends each every tick (docs/trim-floor.md, Pins that arrive during a
/// tick), so that a hold of ten ticks never lapses while absorbing fails.
/// Returns the hold ids.
pub fn unabsorbed_join_holds(answer: &Answer, rows: &ParsedRows) -> Vec<String> {
    let Ok(holds) = &rows.holds else {
        return Vec::new();
    };
    let incarnation = answer.stream_created.map(|created| Incarnation {
        stream_created: created,
        generation: answer.generation,
    });
    join_holds(holds, &answer.stream)
        .filter(|(_, op_id)| !join_absorbed(rows, &answer.stream, incarnation, op_id))
        .map(|(hold_id, _)| hold_id.to_string())
        .collect()
}

/// Whether the readmission `op_id` names is absorbed on `stream` in this
/// incarnation: the gate in force on its node is this readmission's
/// record, or a later one. An unreadable view proves neither.
fn join_absorbed(
    rows: &ParsedRows,
    stream: &str,
    incarnation: Option<Incarnation>,
    op_id: &str,
) -> bool {
    match (&rows.gates, incarnation) {
        (Ok(gates), Some(i)) => gates.ops.get(op_id).is_some_and(|op| {
            let at = op.logs.get(stream);
            gates
                .rows
                .get(stream)
                .and_then(|r| r.get(&op.node))
                .filter(|g| g.belongs_to(&i))
                .is_some_and(|g| g.op_id == op_id || at.is_some_and(|at| g.seq > *at))
        }),
        _ => false,
    }
}

/// PURE: join holds on `stream` past their `expires_at` whose readmission
/// is not absorbed yet: each still pins (docs/trim-floor.md, A readmission's
/// join holds are confirmed, or it stops). Its lifetime only covers the
/// sidecars being down longer than the duty holder could extend it; the
/// trim must still not pass the node before its readmission is absorbed.
/// Each as (hold id, `seq`, owner).
pub fn lapsed_join_holds<'r>(
    rows: &'r ParsedRows,
    stream: &str,
    incarnation: Option<Incarnation>,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<(&'r str, u64, &'r str)> {
    let Ok(holds) = &rows.holds else {
        return Vec::new();
    };
    holds
        .get(stream)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|h| h.as_ref().ok())
        .filter(|(_, h)| h.kind == crate::rows::HoldKind::Join && h.expires_at.0 <= now)
        .filter_map(|(key, h)| {
            let op_id = key.hold_id.strip_prefix(crate::rows::JOIN_HOLD_PREFIX)?;
            (!join_absorbed(rows, stream, incarnation, op_id)).then_some((
                key.hold_id.as_str(),
                h.seq,
                h.owner.as_str(),
            ))
        })
        .collect()
}

/// The age proof's test for one record: stamped at or after the cutoff
/// (`now - min_age`), it is young and must stay.
pub fn is_young(stamped: Timestamp, cutoff: chrono::DateTime<chrono::Utc>) -> bool {
    stamped.0 >= cutoff
}

/// How far the fold may go this tick (docs/archive-format.md, The fold): the minimum
/// `T` of the six terms other than `archive_floor`, at most `last_seq`;
/// `None` when the answer concludes nothing (NOT READY, a term
/// unreadable) or the archive cannot be folded from its frontier.
pub fn fold_to(answer: &Answer) -> Option<u64> {
    if answer.not_ready.is_some() || answer.stream_error.is_some() {
        return None;
    }
    let archive = answer.archive.as_ref()?;
    if archive.unreadable || !archive.may_fold {
        return None;
    }
    let six = || {
        answer
            .terms
            .iter()
            .filter(|t| t.term != TermName::ArchiveFloor)
    };
    if six().any(Term::state_is_unreadable) {
        return None;
    }
    let t = six().filter_map(Term::seq).min().unwrap_or(answer.last_seq);
    Some(t.min(answer.last_seq))
}

/// `Some(trim_to + 1)` exactly when `first_seq < trim_to + 1 <= last_seq + 1`.
pub fn check_purge(trim_to: u64, first_seq: u64, last_seq: u64) -> Option<u64> {
    let target = trim_to.checked_add(1)?;
    if trim_to == 0 || target <= first_seq || trim_to > last_seq {
        return None;
    }
    Some(target)
}
