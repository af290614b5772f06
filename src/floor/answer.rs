//! The retention answer: its shape (the floors row and `status --json`
//! share it, docs/runbook.md) and how the terms become `trim_to`, `blocked_by`, the
//! floor, and the NOT READY cases.

use crate::rows::Stamped;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, Serializer};

use super::counted::{counted_set, Generation};
use super::parsed::ParsedRows;
use super::published::{PublishedBy, PublishedFloor, PublishedGateView, PublishedTerm};
use super::{terms, DomainRead, Policy};
use crate::archive::state::{self as archive_state, ArchiveState};
use crate::config::Domain;
use crate::rows::{Incarnation, Timestamp, Unreadable};
use crate::stream_check::{bypasses, Bypass};

/// The seven terms (`archive_floor` is `n/a` without an archive), in the
/// order of the terms table (ties sort this way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TermName {
    Applied,
    MinHold,
    BackupFloor,
    SnapshotFloor,
    FeedAckFloor,
    AgeFloor,
    ArchiveFloor,
    ReplicaFloor,
}

impl TermName {
    pub fn as_str(self) -> &'static str {
        match self {
            TermName::Applied => "applied",
            TermName::MinHold => "min_hold",
            TermName::BackupFloor => "backup_floor",
            TermName::SnapshotFloor => "snapshot_floor",
            TermName::FeedAckFloor => "feed_ack_floor",
            TermName::AgeFloor => "age_floor",
            TermName::ArchiveFloor => "archive_floor",
            TermName::ReplicaFloor => "replica_floor",
        }
    }
}

/// A term's state: the word, never a sentinel number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TermState {
    /// Permits deleting up to `seq` (0 permits nothing, and says why).
    Value { seq: u64, reason: Option<String> },
    /// Read, and binds nothing.
    Unbounded,
    /// The domain does not have this term.
    NotApplicable,
    /// Could not be read: blocks the tick.
    Unreadable { error: String, cause: Cause },
}

/// Why a term is unreadable: what the remedy branches on (the error text
/// is for people).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    /// A bucket nodes write does not exist (`crewlet retention init`).
    MissingBucket,
    /// A row (or key) that does not have the contract's shape.
    Row,
    /// A counted node's position is past the log's end.
    AheadOfLog,
    /// The broker did not answer, or answered an error.
    Read,
    /// The archive's segments do not reach its published frontier.
    Archive,
    /// No server of the broker's list can be reached: nothing was read.
    Unreachable,
}

/// The broker cannot be reached: since when, and the servers tried. While
/// it lasts every answer is [`Answer::unreachable`] and the one alarm is
/// `broker_unreachable`: a read that could not be made is never a reason
/// to reanchor, evict or delete a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    pub since: Timestamp,
    /// The server list, redacted.
    pub servers: String,
    /// The servers answer but refuse this sidecar's credentials (the
    /// refusal, as the server gave it): `broker_refused`, not an outage of
    /// the network.
    pub refused: Option<String>,
}

impl Outage {
    /// The reason every term is unreadable for.
    pub fn reason(&self) -> String {
        match &self.refused {
            Some(why) => format!(
                "the broker refuses this sidecar's credentials ({why}; since {}; servers tried: {})",
                self.since, self.servers
            ),
            None => format!(
                "the broker is unreachable (since {}; servers tried: {})",
                self.since, self.servers
            ),
        }
    }
}

/// One term of the answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Term {
    pub term: TermName,
    pub state: TermState,
    /// What binds: a node, a hold, a backup, a consumer.
    pub detail: Option<String>,
    /// This term's value is `trim_to` (before clamping to the log).
    pub binding: bool,
    /// What it holds back, on a term that binds or blocks (else `None`).
    pub held: Option<Held>,
    /// `replica_floor` only: each replica and named consumer with what it
    /// has confirmed, and the replicas left out (docs/trim-floor.md,
    /// Replicas).
    pub replicas: Option<std::sync::Arc<Copies>>,
}

/// The copies behind `replica_floor`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Copies {
    pub consumers: Vec<ReplicaCopy>,
    /// Replicas left out by `replicas.ignore`.
    pub ignored: Vec<String>,
}

/// One replica or named consumer, as the term counted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Hash)]
pub struct ReplicaCopy {
    #[serde(rename = "name")]
    pub consumer: String,
    /// Named in `replicas.consumers` (else found by its ack policy).
    pub named: bool,
    /// What it has confirmed stored, by the feed's rules.
    pub confirmed: u64,
    /// When its ack floor last moved (the broker's word).
    pub last_active: Option<Timestamp>,
    /// The stream that copies through it, where visible.
    pub feeds: Option<String>,
}

/// What one pin costs (docs/status-json.md, What a pin holds): the records
/// the trim would also delete were this term not there, their bytes, and
/// since when it has held the trim at or below its current value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Held {
    /// Records on the log between `trim_to` and the trim without this
    /// term (0 when another term binds at the same point).
    pub records: u64,
    /// An estimate: `records` times the log's mean record size (its bytes
    /// over its message count).
    pub bytes: u64,
    /// The broker time this term first bound at or below its current value
    /// (an unreadable term counts as 0), carried in the floors row.
    pub since: Timestamp,
}

impl Term {
    pub fn state_is_unreadable(&self) -> bool {
        matches!(self.state, TermState::Unreadable { .. })
    }

    pub fn seq(&self) -> Option<u64> {
        match &self.state {
            TermState::Value { seq, .. } => Some(*seq),
            _ => None,
        }
    }
}

impl Serialize for Term {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("term", &self.term)?;
        match &self.state {
            TermState::Value { seq, reason } => {
                m.serialize_entry("state", "value")?;
                m.serialize_entry("seq", seq)?;
                m.serialize_entry("reason", reason)?;
            }
            TermState::Unbounded => m.serialize_entry("state", "unbounded")?,
            TermState::NotApplicable => m.serialize_entry("state", "n/a")?,
            TermState::Unreadable { error, .. } => {
                m.serialize_entry("state", "unreadable")?;
                m.serialize_entry("error", error)?;
            }
        }
        m.serialize_entry("detail", &self.detail)?;
        m.serialize_entry("binding", &self.binding)?;
        m.serialize_entry("held_records", &self.held.map(|h| h.records))?;
        m.serialize_entry("held_bytes", &self.held.map(|h| h.bytes))?;
        m.serialize_entry("pinned_since", &self.held.map(|h| h.since))?;
        if let Some(c) = &self.replicas {
            m.serialize_entry("consumers", &c.consumers)?;
            m.serialize_entry("ignored", &c.ignored)?;
        }
        m.end()
    }
}

/// Whether a floor has been published for the current generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FloorState {
    /// No enabled tick has published a floor yet.
    None,
    /// A reanchor opened this generation; no tick has concluded on it yet.
    NoneAtGeneration,
    Published,
}

/// A node's standing on one log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    Counted,
    /// Evicted, still inside the fence window: still counted.
    Evicting,
    /// Evicted past the fence window: not counted.
    Evicted,
    AheadOfLog,
    LogDiverged,
    /// Counted from the pin the last published floors row carries: its
    /// row was lost with a recreated positions bucket (docs/trim-floor.md,
    /// A lost bucket lifts no pin), until it reports again or is evicted.
    Carried,
}

/// A row of the node table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRow {
    pub node: smol_str::SmolStr,
    /// Holds a presence lease now.
    pub live: bool,
    /// The position it reported (whatever its generation).
    pub seq: Option<u64>,
    pub generation: Option<u64>,
    /// Set when the row belongs to a generation the log has left.
    pub left_gen: Option<u64>,
    pub state: NodeState,
    /// When the node last reported a position (its row's `updated_at`).
    pub updated_at: Option<Timestamp>,
    /// For a carried pin: the `created` time of the positions bucket its
    /// position was read from (null otherwise).
    #[serde(default)]
    pub carried_from: Option<Timestamp>,
}

/// How far the gates view has read a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateView {
    /// Every gate record at or below this sequence is absorbed (or skipped),
    /// in this incarnation of the log; null when the view has not read this
    /// incarnation (or cannot be read). The purge never passes it.
    pub absorbed_to: Option<u64>,
    /// Gate records that were not absorbed, with the reason.
    pub skipped: Vec<crate::gate::Skipped>,
    /// Why the view cannot absorb this log's gate records (the
    /// `gates_unabsorbed` alarm); null when it can.
    pub error: Option<GateFault>,
    /// When `error` was first seen (null without one).
    pub since: Option<Timestamp>,
}

/// Why a gates view cannot be read or advanced (docs/trim-floor.md, The gates view
/// and the purge). Each says what to fix; the alarm's remedy branches on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GateFault {
    /// The gates bucket could not be read.
    BucketUnreadable { message: String },
    /// The cursor row does not parse.
    CursorMalformed { key: String, message: String },
    /// The cursor is past the log's last sequence: the log was restored.
    CursorPastLog {
        key: String,
        cursor: u64,
        last_seq: u64,
    },
    /// The duty holder's absorption failed this tick.
    AbsorbFailed { message: String },
}

impl std::fmt::Display for GateFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateFault::BucketUnreadable { message } => write!(f, "{message}"),
            GateFault::CursorMalformed { message, .. } => write!(f, "{message}"),
            GateFault::CursorPastLog {
                key,
                cursor,
                last_seq,
            } => write!(
                f,
                "the cursor {key} is at {cursor}, past the log's last sequence {last_seq}"
            ),
            GateFault::AbsorbFailed { message } => write!(f, "absorbing failed: {message}"),
        }
    }
}

/// What bounded the purge below `trim_to` (`purge_clamped_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PurgeClamp {
    /// The gates view's cursor (or the lack of one).
    Gates,
    /// A hold re-read just before the purge.
    Hold,
    /// A live data node re-read just before the purge.
    Presence,
    /// The proof that every purged record is older than `min_age`.
    Age,
}

/// Why a domain is NOT READY: nothing is concluded or purged on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// The live stream's `created` is not the generation's.
    Recreated,
    /// A counted node's position is past the log's end.
    AheadOfLog,
    /// The floors row does not parse (`row`), or the floors bucket could
    /// not be read (a failed read, not a missing bucket: before the first
    /// run there is nothing published, and nothing wrong).
    FloorUnreadable { error: String, row: bool },
    /// There is no floors row, but positions rows name a later generation
    /// than the one a missing row would start at: the row was lost, and
    /// the generation (with the backups and archive it admits) is unknown.
    GenerationUnknown { highest: u64 },
    /// The log carries the sidecar's adoption mark, but the floors bucket
    /// that held its memory is missing, was recreated, or holds no row for
    /// it: the pins that memory carried are unknown ([`super::memory`]).
    MemoryLost {
        lost: super::memory::Lost,
        /// The broker time of the first tick that found it lost (its note
        /// in the gates bucket), or this answer's own instant when no
        /// earlier tick noted it.
        since: Timestamp,
        /// Whether a note of an earlier tick says so (`since` is then its).
        noted: bool,
    },
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Recreated => f.write_str("wrong_stream (recreated)"),
            NotReady::AheadOfLog => f.write_str("wrong_stream (ahead_of_log)"),
            NotReady::FloorUnreadable { error, .. } => write!(f, "floor_unreadable ({error})"),
            NotReady::GenerationUnknown { highest } => write!(
                f,
                "generation_unknown (there is no floors row, but positions name generation {highest})"
            ),
            NotReady::MemoryLost { lost, since, .. } => {
                write!(
                    f,
                    "memory_lost ({lost}, since {since}: the pins it kept are unknown)"
                )
            }
        }
    }
}

/// On the wire (the floors row, `status --json`) the reason is its words.
impl Serialize for NotReady {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a dry run would have purged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WouldPurge {
    pub records: u64,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// The retention answer for one domain: the floors row, and what `status`
/// shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub domain: String,
    pub stream: String,
    pub generation: u64,
    pub stream_created: Option<Timestamp>,
    /// When the current generation was opened: the stream's `created` for
    /// generation 0, the reanchor's instant after. A backup completed (or
    /// an acknowledgement given) before it speaks of a history this
    /// generation does not continue, and does not count.
    pub generation_opened_at: Option<Timestamp>,
    /// First sequence certainly still on the log; `None` before the first
    /// enabled tick of a generation.
    pub floor: Option<u64>,
    /// What this tick licenses deleting up to (0 when blocked).
    pub trim_to: u64,
    pub trim_floor_state: FloorState,
    pub dry_run: bool,
    pub would_purge: Option<WouldPurge>,
    pub terms: Vec<Term>,
    pub blocked_by: Vec<TermName>,
    pub held_since: Option<Timestamp>,
    pub soft_ceiling_bytes: u64,
    pub max_bytes: i64,
    pub reserve_bytes: u64,
    pub bytes: u64,
    pub headroom_fraction: f64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// `wrong_stream (recreated)`, `wrong_stream (ahead_of_log)`, or
    /// `floor_unreadable`; null when ready.
    pub not_ready: Option<NotReady>,
    /// The gates bucket could not be read: nobody was treated as evicted.
    pub evictions_unreadable: bool,
    /// The node table. Shown by `status`, never published: the floors row
    /// must stay small whatever the fleet's size (a KV value is at most the
    /// broker's max_payload, 1 MiB by default).
    #[serde(skip)]
    pub nodes: Vec<NodeRow>,
    /// Stream info could not be read; nothing else about the log is known.
    pub stream_error: Option<String>,
    /// How old the backup point the trim reads is (seconds), for the
    /// `backup_age` alarm; null when there is none.
    pub backup_age_secs: Option<u64>,
    /// That backup point is older than `backup_max_age`.
    pub backup_stale: bool,
    /// The stream's `created` when it differs from the generation's
    /// (`wrong_stream (recreated)`), so status can print both.
    pub live_stream_created: Option<Timestamp>,
    /// The stream's own limits that delete records behind the trim.
    pub broker_retention_bypass: Vec<Bypass>,
    /// Warnings about the stream's settings that are not bypasses
    /// (`deny_delete: false`). Shown by `status`, not published.
    pub stream_warnings: Vec<String>,
    /// Streams that mirror or source the log through an ephemeral
    /// consumer: invisible to the log, so the trim cannot wait for them
    /// (`replica_unprotected`). Shown by `status`, not published.
    pub unprotected_copies: Vec<String>,
    /// When the floors row this answer follows was written (null if none).
    pub published_at: Option<Timestamp>,
    /// For a domain with a `gate_subject`: how far the gates view has
    /// absorbed the log, and records it skipped. The purge never passes an
    /// unabsorbed gate record.
    pub gate_view: Option<GateView>,
    /// What bounded the purge below `trim_to`: the gates view (known when
    /// the answer is computed), or a pin or the age proof found just
    /// before the purge. Null when nothing did.
    pub purge_clamped_by: Option<PurgeClamp>,
    /// On an archived domain: the archive's frontier and state (null
    /// without an archive).
    pub archive: Option<ArchiveState>,
    /// An explicit trim's requested watermark and what bounded it (null
    /// when none was requested).
    pub requested: Option<RequestedView>,
    /// A digest of this sidecar's configuration of the domain where it
    /// decides a purge ([`config_digest`]), published with the row.
    pub config_digest: String,
    /// The floors row this answer read: who published it, and under which
    /// configuration digest (null before any, or in a row of an older
    /// version); the `config_drift` alarm compares it with ours.
    #[serde(skip)]
    pub published_config: Option<(String, String)>,
    /// The configuration fields the digest is made of, as this sidecar
    /// has them (published with the row: `config_drift` names the ones
    /// that differ).
    pub config: std::collections::BTreeMap<String, Option<String>>,
    /// The floors row this answer read: its `config` fields, `session`
    /// and `at` (what `config_drift` compares, and how another sidecar
    /// with this one's node id shows itself).
    #[serde(skip)]
    pub published_by: Option<PublishedBy>,
    /// The memory this answer keeps, carried by the floors row under
    /// `memory` so that a lost bucket lifts no pin ([`super::members`]).
    pub memory: super::members::MemoryRecord,
    /// The `_members` values to write before the row, when the membership
    /// changed ([`super::remember::keep`]).
    #[serde(skip)]
    pub members_write: Option<std::sync::Arc<super::remember::MembersWrite>>,
    /// The live holds on this log now (id, seq), taken only when the
    /// memory is lost: what status names then.
    #[serde(skip)]
    pub live_holds: Vec<(String, u64)>,
    /// The format of the floors row this answer read (1: the previous
    /// release's, which names none); `None` without a row.
    #[serde(skip)]
    pub published_format: Option<u32>,
    /// The log's adoption mark is to be written after this answer is
    /// published, and before anything it licenses is purged
    /// ([`super::memory`]).
    #[serde(skip)]
    pub mark_due: Option<super::memory::MarkDue>,
    pub by: String,
    pub session: String,
    pub at: Timestamp,
}

/// PURE: a digest of what decides a purge on `domain` (the gate subject,
/// the archive's store, the feed consumer, the backup policy and
/// `min_age`): two sidecars whose digests differ would not trim the log
/// alike (the `config_drift` alarm). The first 16 hex digits of SHA-256
/// over a canonical JSON of those settings.
pub fn config_digest(domain: &Domain, policy: &super::Policy) -> String {
    use sha2::Digest;
    // The canonical JSON is written from a struct whose fields are in the
    // order serde_json's map sorts them: the bytes are those of the map
    // the digest was first defined over, without building a map and its
    // strings for every log on every tick (a fleet of a thousand logs
    // digests a thousand of these a tick).
    #[derive(Serialize)]
    struct Canonical<'a> {
        archive: Option<String>,
        backup_floor: String,
        backup_max_age_ns: String,
        feed_consumer: Option<&'a str>,
        gate_subject: Option<&'a str>,
        min_age_ns: String,
        // Sidecars with different ticks disagree on the lease's life: the
        // one whose three ticks outlast the bucket's max_age never purges.
        tick_ns: String,
    }
    let canonical = Canonical {
        archive: domain.archive.as_ref().map(|a| a.store().id()),
        backup_floor: format!("{:?}", policy.backup_floor),
        backup_max_age_ns: policy.backup_max_age.as_nanos().to_string(),
        feed_consumer: domain.feed_consumer.as_deref(),
        gate_subject: domain.gate_subject.as_deref(),
        min_age_ns: policy.min_age.as_nanos().to_string(),
        tick_ns: policy.tick.as_nanos().to_string(),
    };
    // Strings and nulls always serialize; were it ever to fail, a digest
    // of nothing would differ from every sidecar's, which config_drift says.
    let Ok(bytes) = serde_json::to_vec(&canonical) else {
        return String::new();
    };
    crate::human::hex(&sha2::Sha256::digest(bytes)[..8])
}

/// PURE: what the digest is made of, as the configuration says each
/// (`null` for what is not set), so that `config_drift` can name the
/// fields that differ and both values.
pub fn config_fields(
    domain: &Domain,
    policy: &super::Policy,
) -> std::collections::BTreeMap<String, Option<String>> {
    let dur = |d: std::time::Duration| Some(crate::config::Dur(d).to_string());
    [
        ("gate_subject", domain.gate_subject.clone()),
        ("archive", domain.archive.as_ref().map(|a| a.store().id())),
        ("feed_consumer", domain.feed_consumer.clone()),
        (
            "backup_floor",
            Some(format!("{:?}", policy.backup_floor).to_lowercase()),
        ),
        ("backup_max_age", dur(policy.backup_max_age)),
        ("min_age", dur(policy.min_age)),
        ("tick", dur(policy.tick)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Answer {
    /// This answer as it stands while the broker cannot be reached: every
    /// term the domain has is unreadable for that reason alone, nothing is
    /// licensed, and nothing read about the log or its rows (NOT READY,
    /// node states, the stream's settings) is claimed as current.
    pub fn unreachable(mut self, outage: &Outage) -> Answer {
        let reason = outage.reason();
        let mut blocked = Vec::new();
        for t in &mut self.terms {
            if matches!(t.state, TermState::NotApplicable) {
                continue;
            }
            t.state = TermState::Unreadable {
                error: reason.clone(),
                cause: Cause::Unreachable,
            };
            t.detail = None;
            t.binding = false;
            blocked.push(t.term);
        }
        self.blocked_by = blocked;
        self.trim_to = 0;
        self.would_purge = None;
        self.not_ready = None;
        self.nodes.clear();
        self.broker_retention_bypass.clear();
        self.stream_warnings.clear();
        self.unprotected_copies.clear();
        self.stream_error = Some(reason);
        self.purge_clamped_by = None;
        self
    }

    /// `blocked_by` as words joined by `sep`, or `-` when empty.
    pub fn blocked_names(&self, sep: &str) -> String {
        if self.blocked_by.is_empty() {
            return "-".into();
        }
        self.blocked_by
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(sep)
    }
}

/// The requested watermark as the answer shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestedView {
    /// `R`: permits deleting up to `R - 1`.
    pub seq: u64,
    pub by: String,
    pub at: Timestamp,
    pub reason: String,
    /// What bounded the point it moves the trim to: a term, `requested` or
    /// `last_seq`; null when the answer concludes nothing.
    pub bounded_by: Option<String>,
    /// The request's row cannot be read (null when it can).
    pub error: Option<String>,
    /// The watermark was asked in an earlier incarnation or generation of
    /// the log: it trims nothing here (`error` says which), and the next
    /// request starts afresh.
    pub stale: bool,
}

/// PURE: where a requested watermark `r` moves the trim (docs/http.md, Explicit
/// trim): `min(r - 1, safety, last_seq)`, safety the minimum of every term
/// but `age_floor`, and what bounded it. The caller takes the maximum with
/// `trim_to`.
pub fn explicit_point(terms: &[Term], r: u64, last_seq: u64) -> (u64, Bound) {
    let mut best = (r.saturating_sub(1), Bound::Requested);
    for t in terms.iter().filter(|t| t.term != TermName::AgeFloor) {
        if let Some(seq) = t.seq() {
            if seq < best.0 {
                best = (seq, Bound::Term(t.term));
            }
        }
    }
    if last_seq < best.0 {
        best = (last_seq, Bound::LastSeq);
    }
    best
}

/// What bounds an explicit trim: the request itself, a term, or the log's
/// end. Its words are the `bounded_by` of the requested view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Requested,
    Term(TermName),
    LastSeq,
}

impl Bound {
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Requested => "requested",
            Bound::Term(t) => t.as_str(),
            Bound::LastSeq => "last_seq",
        }
    }
}

/// PURE: one domain's answer, in the steps of docs/trim-floor.md, The tick,
/// step by step: the generation and whether the live stream is its
/// ([`lineage`]), the counted set, the seven terms ([`seven_terms`]),
/// `trim_to` and the binding term ([`conclude`]), an explicit trim's
/// watermark ([`requested_view`]), `blocked_by` ([`blocked_by_of`]), the
/// floor, and the capacity figures ([`capacity_of`]).
pub fn compute(
    domain: &Domain,
    policy: &Policy,
    rows: &ParsedRows,
    read: &DomainRead,
    now: DateTime<Utc>,
) -> Answer {
    let stream = domain.stream.as_str();
    let at = Timestamp(now);
    let previous = rows.published(stream);
    let published = previous.as_ref().ok().and_then(|p| p.as_ref());
    let line = lineage(rows, read, &previous);
    let mut not_ready = line.not_ready.clone();
    // The incarnation the gates view belongs to: the live stream at the
    // domain's generation (unknown when either is).
    let incarnation = super::incarnation(rows, stream, read);

    let state = read.stream.as_ref().ok();
    // The last row's memory, where a recreated bucket or a carried member
    // makes it needed (docs/trim-floor.md, The sidecar's memory).
    let recalled = super::remember::recall(rows, stream);
    let set = counted_set(
        stream,
        rows,
        state,
        Generation {
            number: line.generation,
            created: line.gen_created,
        },
        incarnation,
        policy.fence_window,
        recalled.remembered(),
        now,
    );
    // Without a floors row, positions that name a later generation than 0
    // mean the row was lost: starting over at 0 would count a restored
    // log's old backups and segments again. (A missing row makes no other
    // NOT READY case, so this takes the place lineage would have given it.)
    if matches!(previous, Ok(None)) && not_ready.is_none() {
        let seen =
            set.highest_generation
                .max(super::recorded_generation(rows, stream, line.live_created));
        if let Some(highest) = seen.filter(|g| *g > 0) {
            not_ready = Some(NotReady::GenerationUnknown { highest });
        }
    }
    // A marked log whose memory is gone (docs/trim-floor.md, The log
    // remembers that it was adopted): after generation_unknown, which
    // names the remedy that also opens the memory afresh.
    let memory = match state {
        Some(s) => super::memory_of(rows, stream, s),
        None => super::memory::Memory::Unknown,
    };
    // Since when: the note an earlier tick left, or this answer's instant.
    let note = rows.gates.as_ref().ok().and_then(|g| g.lost.get(stream));
    let lost_since = |lost| NotReady::MemoryLost {
        lost,
        since: note.map_or(at, |n| n.since),
        noted: note.is_some(),
    };
    if let super::memory::Memory::Lost(lost) = memory {
        if not_ready.is_none() {
            not_ready = Some(lost_since(lost));
        }
    }
    // A memory needed (a bucket it names recreated, or members it carries)
    // that cannot be read back whole has lost what it kept.
    if let super::remember::Recalled::Unreadable = &recalled {
        if not_ready.is_none() {
            not_ready = Some(lost_since(super::memory::Lost::MembershipUnreadable));
        }
    }
    if !set.ahead.is_empty() && not_ready.is_none() {
        not_ready = Some(NotReady::AheadOfLog);
    }
    let carried_holds =
        super::remember::carried_holds(rows, stream, recalled.remembered(), incarnation, now);
    // Holds that pin though the bucket does not show them live: carried
    // over a recreated bucket, or a join hold whose readmission is not
    // absorbed yet.
    let lapsed = super::lapsed_join_holds(rows, stream, incarnation, now);
    let extra_holds: Vec<terms::ExtraHold> = carried_holds
        .iter()
        .map(|(id, seq)| terms::ExtraHold {
            id,
            seq: *seq,
            owner: "remembered",
            why: "carried from a recreated holds bucket",
        })
        .chain(lapsed.iter().map(|(id, seq, owner)| terms::ExtraHold {
            id,
            seq: *seq,
            owner,
            why: "expired, its readmission not yet absorbed",
        }))
        .collect();
    let (mut terms, backup_age, archive) = seven_terms(
        domain,
        policy,
        rows,
        read,
        &line,
        &set,
        published,
        &extra_holds,
        at,
        now,
    );
    let stood = |name: TermName| {
        terms.iter().find(|t| t.term == name).map_or(
            super::remember::Stood::Unreadable,
            |t| match t.state {
                TermState::Value { seq, .. } => super::remember::Stood::Value(seq),
                TermState::Unreadable { .. } => super::remember::Stood::Unreadable,
                _ => super::remember::Stood::Unbounded,
            },
        )
    };
    let (memory_record, members_write) = super::remember::keep(
        rows,
        stream,
        &set,
        (
            &carried_holds,
            &lapsed.iter().map(|(id, _, _)| *id).collect::<Vec<_>>(),
        ),
        &recalled,
        (stood(TermName::Applied), stood(TermName::MinHold)),
        now,
    );
    // Named only by a lost memory's remedy: not copied on every tick.
    let live_holds: Vec<(String, u64)> = match &rows.holds {
        Ok(h) if matches!(not_ready, Some(NotReady::MemoryLost { .. })) => h
            .get(stream)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|h| h.as_ref().ok())
            .filter(|(_, h)| h.expires_at.0 > now)
            .map(|(k, h)| (k.hold_id.clone(), h.seq))
            .collect(),
        _ => Vec::new(),
    };

    let any_unreadable = terms
        .iter()
        .any(|t| matches!(t.state, TermState::Unreadable { .. }));
    let last_seq = state.map_or(0, |s| s.last_seq);
    let first_seq = state.map_or(0, |s| s.first_seq);
    let concludes = !any_unreadable && not_ready.is_none();
    let mut trim_to = conclude(&mut terms, concludes, last_seq);
    let requested = requested_view(
        rows,
        stream,
        incarnation,
        &mut terms,
        &mut trim_to,
        concludes,
        last_seq,
        at,
    );
    let blocked_by = blocked_by_of(&terms);
    let fresh_request = requested
        .as_ref()
        .filter(|r| r.error.is_none() && !r.stale)
        .map(|r| r.seq);
    hold_costs(
        &mut terms,
        &blocked_by,
        Costs {
            trim_to,
            ready: not_ready.is_none(),
            request: fresh_request,
            state,
            before: published.and_then(|(p, _)| p.terms.as_deref()),
            at,
        },
    );
    let held_since = if blocked_by.is_empty() {
        None
    } else {
        Some(line.prev_held.unwrap_or(at))
    };

    let dry_run = !policy.trim_enabled;
    let (floor, trim_floor_state) = if dry_run || !concludes {
        (line.prev_floor, line.prev_state)
    } else {
        let next = trim_to.saturating_add(1);
        (
            Some(line.prev_floor.map_or(next, |f| f.max(next))),
            FloorState::Published,
        )
    };
    let would_purge = if dry_run && concludes {
        super::check_purge(trim_to, first_seq, last_seq).map(|target| WouldPurge {
            records: target - first_seq,
            first_seq,
            last_seq: trim_to,
        })
    } else {
        None
    };
    let cap = capacity_of(domain, state);

    let mut answer = Answer {
        domain: domain.name.clone(),
        stream: stream.to_string(),
        generation: line.generation,
        stream_created: line.gen_created,
        generation_opened_at: line.generation_opened_at,
        floor,
        trim_to,
        trim_floor_state,
        dry_run,
        would_purge,
        terms,
        blocked_by,
        held_since,
        soft_ceiling_bytes: cap.soft_ceiling_bytes,
        max_bytes: cap.max_bytes,
        reserve_bytes: cap.reserve_bytes,
        bytes: cap.bytes,
        headroom_fraction: cap.headroom_fraction,
        first_seq,
        last_seq,
        not_ready,
        evictions_unreadable: set.evictions_unreadable,
        nodes: set.nodes,
        stream_error: read.stream.as_ref().err().map(ToString::to_string),
        backup_age_secs: backup_age.map(|d| d.as_secs()),
        backup_stale: backup_age.is_some_and(|d| d > policy.backup_max_age),
        live_stream_created: if line.recreated {
            line.live_created
        } else {
            None
        },
        broker_retention_bypass: state.map(|s| bypasses(&s.facts)).unwrap_or_default(),
        stream_warnings: state
            .and_then(|s| crate::stream_check::delete_warning(stream, &s.facts))
            .into_iter()
            .collect(),
        unprotected_copies: read.unprotected.clone(),
        published_at: published.map(|(p, _)| p.at),
        gate_view: domain.gate_subject.as_ref().map(|_| {
            gate_view(
                rows,
                stream,
                incarnation,
                last_seq,
                read.absorbed.as_ref(),
                published.and_then(|(p, _)| p.gate_view.as_ref()),
                at,
            )
        }),
        purge_clamped_by: None,
        archive,
        requested,
        config_digest: config_digest(domain, policy),
        published_config: published
            .and_then(|(p, _)| p.config_digest.clone().map(|d| (p.by.clone(), d))),
        config: config_fields(domain, policy),
        published_by: published.map(|(p, _)| PublishedBy {
            by: p.by.clone(),
            session: p.session.clone(),
            at: p.at,
            config: p.config.clone().unwrap_or_default(),
        }),
        memory: memory_record,
        members_write,
        live_holds,
        published_format: published.map(|(p, _)| p.format.unwrap_or(1)),
        mark_due: match memory {
            super::memory::Memory::Due(due) => Some(due),
            _ => None,
        },
        by: policy.by.clone(),
        session: policy.session.clone(),
        at,
    };
    if super::licensed_purge(&answer).is_some()
        && super::purge_target(&answer) < super::licensed_purge(&answer)
    {
        answer.purge_clamped_by = Some(PurgeClamp::Gates);
    }
    answer
}

/// What the floors row this tick read says of the domain's history: the
/// generation, the `created` it belongs to, the floor and `held_since`
/// carried over, and whether the domain is NOT READY on that count.
#[derive(Debug, Clone)]
struct Lineage {
    generation: u64,
    gen_created: Option<Timestamp>,
    live_created: Option<Timestamp>,
    generation_opened_at: Option<Timestamp>,
    prev_floor: Option<u64>,
    prev_state: FloorState,
    prev_held: Option<Timestamp>,
    recreated: bool,
    not_ready: Option<NotReady>,
}

/// Step 1: the generation this answer belongs to, and whether the live
/// stream is the one the floor was published for.
fn lineage(
    rows: &ParsedRows,
    read: &DomainRead,
    previous: &Result<Option<(&PublishedFloor, u64)>, Unreadable>,
) -> Lineage {
    let live_created = read.stream.as_ref().ok().map(|s| s.created);
    let mut not_ready: Option<NotReady> = None;
    let (generation, gen_created, prev_floor, prev_state, prev_held, opened_at) = match previous {
        Err(e) => {
            not_ready = Some(NotReady::FloorUnreadable {
                error: e.to_string(),
                row: rows.floors.is_ok(),
            });
            (0, live_created, None, FloorState::None, None, None)
        }
        // A missing row starts at generation 0 (unless positions name a
        // later one: [`compute`] judges that from the counted set's walk).
        Ok(None) => (0, live_created, None, FloorState::None, None, None),
        Ok(Some((p, _))) => {
            let held = if p.blocked_by.is_empty() {
                None
            } else {
                p.held_since
            };
            (
                p.generation,
                p.stream_created.or(live_created),
                p.floor,
                p.trim_floor_state,
                held,
                p.generation_opened_at,
            )
        }
    };
    let recreated = match (gen_created, live_created) {
        (Some(g), Some(l)) => g != l,
        _ => false,
    };
    if recreated && not_ready.is_none() {
        not_ready = Some(NotReady::Recreated);
    }
    Lineage {
        generation,
        gen_created,
        live_created,
        // Generation 0 opened with the stream; a row written before rows
        // carried the instant falls back to the same.
        generation_opened_at: opened_at.or(gen_created),
        prev_floor,
        prev_state,
        prev_held,
        recreated,
        not_ready,
    }
}

/// Step 2: the seven terms, in the order of the terms table
/// (`archive_floor` is `n/a` without an archive), with the age of the
/// backup point the trim reads and the archive's state.
#[allow(clippy::too_many_arguments)]
fn seven_terms(
    domain: &Domain,
    policy: &Policy,
    rows: &ParsedRows,
    read: &DomainRead,
    line: &Lineage,
    set: &super::counted::CountedSet,
    published: Option<&(&PublishedFloor, u64)>,
    extra_holds: &[terms::ExtraHold],
    at: Timestamp,
    now: DateTime<Utc>,
) -> (Vec<Term>, Option<std::time::Duration>, Option<ArchiveState>) {
    let stream = domain.stream.as_str();
    let state = read.stream.as_ref().ok();
    let applied = terms::applied(stream, set);
    let min_hold = terms::min_hold(stream, &rows.holds, extra_holds, now);
    // Backups of an earlier incarnation or generation do not count: the
    // later of the stream's created and the generation's opening.
    let history_from = match (line.gen_created, line.generation_opened_at) {
        (Some(c), Some(o)) => Some(c.max(o)),
        (c, o) => c.or(o),
    };
    let (backup, backup_age) =
        terms::backup_floor(stream, &rows.backups, policy, history_from, now);
    let snapshot = terms::snapshot_floor(
        stream,
        &rows.snapshots,
        set,
        line.generation,
        policy.snapshot_quorum,
    );
    let feed = terms::feed_ack_floor(
        domain.feed_consumer.as_deref(),
        &read.feed,
        state.map(|s| s.last_seq),
    );
    let age = terms::age_floor(&read.stream, &read.young_seq, policy.min_age);
    let mut terms = vec![applied, min_hold, backup, snapshot, feed, age];
    let archive = domain.archive.as_ref().map(|_| {
        let published = published.and_then(|(p, _)| p.archive.as_ref());
        archive_of(read, published, state.map_or(0, |s| s.first_seq), at)
    });
    // The seventh term, `n/a` without an archive (docs/archive-format.md).
    terms.push(match &archive {
        Some(a) => terms::archive_floor(a),
        None => Term {
            term: TermName::ArchiveFloor,
            state: TermState::NotApplicable,
            detail: None,
            binding: false,
            held: None,
            replicas: None,
        },
    });
    // The eighth, `n/a` where nothing copies the log durably and no
    // consumer is named (docs/trim-floor.md, Replicas).
    terms.push(terms::replica_floor(
        &read.replicas,
        state.map(|s| s.last_seq),
    ));
    (terms, backup_age, archive)
}

/// Step 3: `trim_to`, the minimum of the terms and `last_seq`, with the
/// binding term marked; 0 (nothing licensed) when the answer does not
/// conclude (a term unreadable, or NOT READY).
fn conclude(terms: &mut [Term], concludes: bool, last_seq: u64) -> u64 {
    let minimum = terms.iter().filter_map(Term::seq).min();
    if !concludes {
        return 0;
    }
    if let Some(min) = minimum {
        if let Some(t) = terms.iter_mut().find(|t| t.seq() == Some(min)) {
            t.binding = true;
        }
    }
    minimum.unwrap_or(last_seq).min(last_seq)
}

/// Step 4: an explicit trim (docs/http.md): `max(trim_to, min(R - 1,
/// safety, last_seq))`, safety every term but `age_floor`. Only on an
/// answer that concludes; an unreadable request raises nothing, and one
/// of another incarnation is shown, never applied.
#[allow(clippy::too_many_arguments)]
fn requested_view(
    rows: &ParsedRows,
    stream: &str,
    incarnation: Option<Incarnation>,
    terms: &mut [Term],
    trim_to: &mut u64,
    concludes: bool,
    last_seq: u64,
    at: Timestamp,
) -> Option<RequestedView> {
    match rows.requested(stream) {
        Ok(None) => None,
        // A watermark of another incarnation or generation was asked for in
        // a history this log no longer is: shown, never applied (a new
        // request replaces it).
        Ok(Some(r)) if !incarnation.is_some_and(|i| r.belongs_to(&i)) => {
            let made_in = match (r.stream_created, r.generation) {
                (Some(c), Some(g)) => format!("stream created {c}, generation {g}"),
                _ => "a version that did not record its incarnation".to_string(),
            };
            Some(RequestedView {
                seq: r.seq,
                by: r.by,
                at: r.at,
                reason: r.reason,
                bounded_by: None,
                error: Some(format!(
                    "stale (of an earlier incarnation): it was asked in {made_in}, so it trims nothing here, and the next trim request starts afresh"
                )),
                stale: true,
            })
        }
        Ok(Some(r)) => {
            let mut view = RequestedView {
                seq: r.seq,
                by: r.by,
                at: r.at,
                reason: r.reason,
                bounded_by: None,
                error: None,
                stale: false,
            };
            if concludes {
                let (point, by) = explicit_point(terms, r.seq, last_seq);
                if point > *trim_to {
                    *trim_to = point;
                    for t in terms.iter_mut() {
                        t.binding = by == Bound::Term(t.term);
                    }
                    view.bounded_by = Some(by.as_str().to_string());
                } else {
                    // The request moves nothing: what binds is what
                    // bound the trim already.
                    view.bounded_by = Some(terms.iter().find(|t| t.binding).map_or_else(
                        || Bound::LastSeq.as_str().to_string(),
                        |t| t.term.as_str().to_string(),
                    ));
                }
            }
            Some(view)
        }
        Err(e) => Some(RequestedView {
            seq: 0,
            by: String::new(),
            at,
            reason: String::new(),
            bounded_by: None,
            error: Some(format!("{e}; the request raises nothing until it is fixed")),
            stale: false,
        }),
    }
}

/// What [`hold_costs`] weighs a pin against.
struct Costs<'a> {
    trim_to: u64,
    /// No NOT READY reason: the answer would conclude with every term read.
    ready: bool,
    /// An explicit trim's watermark that applies (docs/http.md).
    request: Option<u64>,
    state: Option<&'a super::StreamState>,
    /// The terms of the floors row this answer follows.
    before: Option<&'a [PublishedTerm]>,
    at: Timestamp,
}

/// The seq a pin is judged at: its value, or 0 for an unreadable term (it
/// permits nothing).
fn pin_seq(t: &Term) -> u64 {
    t.seq().unwrap_or(0)
}

/// Step 5b: what each binding or blocking term holds back. The records are
/// those the trim would also delete without the term: the answer computed
/// again with the term left out (the others, `last_seq`, an applying
/// explicit trim), counted on the log above `trim_to`. `pinned_since` is
/// kept from the row while the term stays pinned at or above where it
/// was (it has held the trim at or below its current value since then),
/// and starts now when it is new or moved lower.
fn hold_costs(terms: &mut [Term], blocked_by: &[TermName], c: Costs) {
    let (first_seq, last_seq) = c.state.map_or((0, 0), |s| (s.first_seq, s.last_seq));
    // The log's mean record size, from its own counts.
    let per_record = c
        .state
        .filter(|s| s.messages > 0)
        .map_or(0.0, |s| s.bytes as f64 / s.messages as f64);
    let pinned: Vec<usize> = (0..terms.len())
        .filter(|&i| terms[i].binding || blocked_by.contains(&terms[i].term))
        .collect();
    for i in pinned {
        let others: Vec<Term> = terms
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, t)| t.clone())
            .collect();
        let concludes = c.ready && !others.iter().any(Term::state_is_unreadable);
        let mut without = if concludes {
            others
                .iter()
                .filter_map(Term::seq)
                .min()
                .unwrap_or(last_seq)
                .min(last_seq)
        } else {
            0
        };
        if let (Some(r), true) = (c.request, concludes) {
            without = without.max(explicit_point(&others, r, last_seq).0);
        }
        let lower = c.trim_to.max(first_seq.saturating_sub(1));
        let records = without.min(last_seq).saturating_sub(lower);
        let seq = pin_seq(&terms[i]);
        let since = c
            .before
            .and_then(|b| b.iter().find(|p| p.term == terms[i].term))
            .and_then(|p| {
                let was = if p.state == "unreadable" { 0 } else { p.seq? };
                p.pinned_since.filter(|_| seq >= was)
            })
            .unwrap_or(c.at);
        terms[i].held = Some(Held {
            records,
            bytes: (records as f64 * per_record).round() as u64,
            since,
        });
    }
}

/// Step 5: `blocked_by`: unreadable terms first (table order), then every
/// value below the age policy's, lowest first. The archive only follows
/// the other terms (the fold goes as far as they allow): it holds the trim
/// back only where it binds below all of them.
fn blocked_by_of(terms: &[Term]) -> Vec<TermName> {
    let mut blocked_by: Vec<TermName> = terms
        .iter()
        .filter(|t| matches!(t.state, TermState::Unreadable { .. }))
        .map(|t| t.term)
        .collect();
    let age_seq = terms
        .iter()
        .find(|t| t.term == TermName::AgeFloor)
        .and_then(Term::seq);
    if let Some(age_seq) = age_seq {
        let others = terms
            .iter()
            .filter(|t| t.term != TermName::ArchiveFloor)
            .filter_map(Term::seq)
            .min();
        let mut below: Vec<(u64, TermName)> = terms
            .iter()
            .filter(|t| {
                t.term != TermName::ArchiveFloor
                    || t.seq().is_some_and(|s| others.is_none_or(|o| s < o))
            })
            .filter_map(|t| t.seq().filter(|s| *s < age_seq).map(|s| (s, t.term)))
            .collect();
        below.sort();
        blocked_by.extend(below.into_iter().map(|(_, n)| n));
    }
    blocked_by
}

/// The four capacity figures of `status` (and `max_bytes`).
struct Capacity {
    bytes: u64,
    max_bytes: i64,
    reserve_bytes: u64,
    soft_ceiling_bytes: u64,
    headroom_fraction: f64,
}

/// Step 6: the capacity figures: the reserve is the top sixteenth of
/// `max_bytes` on a log with a gate reserve, the soft ceiling what is
/// below it, the headroom `1 - bytes / soft ceiling`, not below 0.
fn capacity_of(domain: &Domain, state: Option<&super::StreamState>) -> Capacity {
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
fn archive_of(
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
fn gate_view(
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
        Err(super::BucketError::Missing { .. }) => {}
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
