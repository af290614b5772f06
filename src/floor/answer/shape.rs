//! The answer's shape: what the floors row and `status --json` share
//! (docs/runbook.md), the terms, the NOT READY cases, the gates view and
//! the configuration digest. How an answer is computed is in the parent
//! module.

use serde::{Deserialize, Serialize, Serializer};

use crate::archive::state::ArchiveState;
use crate::config::Domain;
use crate::floor::published::PublishedBy;
use crate::rows::Timestamp;
use crate::stream_check::Bypass;

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
    /// A copy of the log names a durable consumer the log does not have
    /// (`replica_unprotected`).
    Orphaned,
    /// A consumer `replicas.consumers` names does not exist on the log
    /// (the term's `detail` names it).
    MissingNamed,
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
    /// What it has been delivered (`delivered.stream_seq`): past
    /// `confirmed` while the copy's answer is on its way. Not serialized:
    /// it moves with every delivery, and the floors row, which carries
    /// these, is written only when it changes.
    #[serde(skip)]
    pub delivered: u64,
    /// When it last delivered (the broker's word): a copy still being
    /// delivered to is confirming, not behind. Not serialized, as above.
    #[serde(skip)]
    pub delivered_active: Option<Timestamp>,
    /// Paused on the broker, and until when (absent: until resumed);
    /// both absent while it is not paused.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<Timestamp>,
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
    /// it: the pins that memory carried are unknown ([`crate::floor::memory`]).
    MemoryLost {
        lost: crate::floor::memory::Lost,
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
    /// Streams that copy the log through a durable consumer the log does
    /// not have: the trim waits for them (`replica_unprotected`). Shown by
    /// `status`, not published.
    pub orphaned_copies: Vec<crate::floor::OrphanedCopy>,
    /// When the floors row this answer follows was written (null if none).
    pub published_at: Option<Timestamp>,
    /// Until when that row is known to stand: the duty holder's last
    /// `_tick`, where it does not name this log as unpublished, or the
    /// row's own `at` (null without a row). `floor_stale` is judged on it.
    #[serde(skip)]
    pub current_at: Option<Timestamp>,
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
    pub config: ConfigFields,
    /// The floors row this answer read: its `config` fields, `session`
    /// and `at` (what `config_drift` compares, and how another sidecar
    /// with this one's node id shows itself).
    #[serde(skip)]
    pub published_by: Option<PublishedBy>,
    /// The memory this answer keeps, carried by the floors row under
    /// `memory` so that a lost bucket lifts no pin ([`crate::floor::members`]).
    pub memory: crate::floor::members::MemoryRecord,
    /// The `_members` values to write before the row, when the membership
    /// changed ([`crate::floor::remember::keep`]).
    #[serde(skip)]
    pub members_write: Option<std::sync::Arc<crate::floor::remember::MembersWrite>>,
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
    /// ([`crate::floor::memory`]).
    #[serde(skip)]
    pub mark_due: Option<crate::floor::memory::MarkDue>,
    pub by: String,
    pub session: String,
    pub at: Timestamp,
}

/// PURE: a digest of what decides a purge on `domain` (the gate subject,
/// the archive's store, the feed consumer, the backup policy and
/// `min_age`): two sidecars whose digests differ would not trim the log
/// alike (the `config_drift` alarm). The first 16 hex digits of SHA-256
/// over a canonical JSON of those settings.
/// A domain's configuration fields as its answers and rows say them:
/// shared, since a fleet's thousand answers each carry one every tick.
pub type ConfigFields = std::sync::Arc<std::collections::BTreeMap<String, Option<String>>>;

/// The configuration digest and fields of each domain under one policy,
/// computed once ([`crate::floor::Policy::from_config`]; a running sidecar
/// keeps them from its start) rather than for every answer of every tick.
/// An entry answers only for the domain and
/// policy settings it was computed from; anything else is computed afresh.
#[derive(Debug, Clone, Default)]
pub struct Settings(std::sync::Arc<std::collections::HashMap<String, Setting>>);

#[derive(Debug)]
struct Setting {
    domain: Domain,
    inputs: SettingInputs,
    digest: String,
    fields: ConfigFields,
}

/// The policy's share of a domain's settings.
type SettingInputs = (
    crate::config::BackupPolicy,
    std::time::Duration,
    std::time::Duration,
    std::time::Duration,
);

fn setting_inputs(policy: &crate::floor::Policy) -> SettingInputs {
    (
        policy.backup_floor,
        policy.backup_max_age,
        policy.min_age,
        policy.tick,
    )
}

impl Settings {
    /// Every domain's settings under `policy`.
    pub fn of(domains: &[Domain], policy: &crate::floor::Policy) -> Settings {
        Settings(std::sync::Arc::new(
            domains
                .iter()
                .map(|d| {
                    (
                        d.stream.clone(),
                        Setting {
                            domain: d.clone(),
                            inputs: setting_inputs(policy),
                            digest: config_digest(d, policy),
                            fields: std::sync::Arc::new(config_fields(d, policy)),
                        },
                    )
                })
                .collect(),
        ))
    }

    /// `domain`'s digest and fields under `policy`: kept where they were
    /// computed from the same, else computed now.
    pub fn get(&self, domain: &Domain, policy: &crate::floor::Policy) -> (String, ConfigFields) {
        match self.0.get(&domain.stream) {
            Some(s) if s.domain == *domain && s.inputs == setting_inputs(policy) => {
                (s.digest.clone(), s.fields.clone())
            }
            _ => (
                config_digest(domain, policy),
                std::sync::Arc::new(config_fields(domain, policy)),
            ),
        }
    }
}

pub fn config_digest(domain: &Domain, policy: &crate::floor::Policy) -> String {
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
    policy: &crate::floor::Policy,
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
        self.orphaned_copies.clear();
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
