//! `crewlet retention erase` (and `POST /v1/streams/{s}/erase`): every
//! record on one literal subject removed from the live log (a purge
//! filtered to that subject, never one without the filter) and from the
//! archive (each segment that holds one rewritten without it, verified,
//! then put in the old one's place), with one row in the erasures bucket
//! that is the erasure's own account.
//!
//! An erasure is resumable under its operation id and never counts a
//! record twice: the row is written before each step with what that step
//! will remove (the live log up to a sequence, one segment), so a retry
//! that finds the step done adds what the row says, and one that finds it
//! undone does it.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::archive::segment;
use crate::broker::streams::StreamRead;
use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::exit::{Class, Exit, InputFault};
use crate::rows::{OpId, Timestamp};

mod render;
mod segments;
pub use render::{json, text};
use segments::{leader_entry, rewrite, settle};

/// What an operator asked for, as typed.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// The stream or domain name.
    pub stream: String,
    pub subject: String,
    pub reason: Option<String>,
    pub confirm: Option<String>,
    pub op_id: Option<String>,
    /// Who: the OS account from the CLI, `token:NAME` over HTTP.
    pub by: String,
    /// Where it was asked: refusals name its options as that surface
    /// takes them (`-confirm`, or the body field `"confirm"`).
    pub surface: crate::human::Surface,
}

/// Input refused before anything is read.
#[derive(Debug, Clone)]
pub struct BadInput {
    pub code: InputFault,
    pub message: String,
}

/// A segment being rewritten: what its rewrite removes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub segment: String,
    pub records: u64,
}

/// The row in the erasures bucket, key `<stream>.<op_id>`. The first nine
/// fields are the contract's; `live_through`, `pending` and `finished`
/// are the erasure's progress, so that a retry resumes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureRow {
    pub op_id: String,
    pub stream: String,
    pub subject: String,
    pub reason: String,
    pub by: String,
    pub at: Timestamp,
    pub live_records: u64,
    pub archived_records: u64,
    pub segments_rewritten: u64,
    /// The live log's records on the subject up to here are counted (and
    /// purged, or about to be).
    #[serde(default)]
    pub live_through: u64,
    #[serde(default)]
    pub pending: Option<Pending>,
    #[serde(default)]
    pub finished: bool,
}

/// Why an erasure was not done; nothing written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The subject is the log's gate subject.
    GateSubject,
    /// A configured stream the broker does not have.
    StreamMissing,
    /// The broker did not answer.
    Unreachable,
    SubjectNotInStream,
    /// The op id names another erasure.
    OpReused,
    /// Another run of the same op id is at it.
    InProgress,
}

impl Refusal {
    /// The stable code (`--json`'s and the HTTP answer's `error`).
    pub fn code(self) -> &'static str {
        match self {
            Refusal::GateSubject => "gate_subject",
            Refusal::StreamMissing => "stream_missing",
            Refusal::Unreachable => "unreachable",
            Refusal::SubjectNotInStream => "subject_not_in_stream",
            Refusal::OpReused => "op_reused",
            Refusal::InProgress => "in_progress",
        }
    }
}

/// What an erasure came to.
#[derive(Debug, Clone)]
pub enum Outcome {
    BadInput(BadInput),
    /// Refused; nothing written.
    Refused {
        refusal: Refusal,
        message: String,
    },
    /// It stopped part-way: the row says how far; the same op id
    /// finishes it.
    Stopped {
        row: Box<ErasureRow>,
        message: String,
    },
    /// Finished (`again`: this op id had finished before; nothing done).
    Done {
        row: Box<ErasureRow>,
        again: bool,
    },
}

impl Outcome {
    pub fn class(&self) -> Class {
        match self {
            Outcome::BadInput(_) => Class::BadInput,
            Outcome::Done { .. } => Class::Done,
            Outcome::Refused {
                refusal: Refusal::Unreachable,
                ..
            } => Class::Unreachable,
            Outcome::Refused {
                refusal: Refusal::StreamMissing,
                ..
            } => Class::Missing,
            Outcome::Refused { .. } | Outcome::Stopped { .. } => Class::Refused,
        }
    }

    pub fn exit(&self) -> Exit {
        self.class().exit()
    }
}

/// What the erasure cannot reach, said in every report.
pub const NOT_REACHED: &str = "This cannot reach copies that nodes have already applied into their own databases, backups taken of the log or of those databases, or any consumer that has already delivered these records; erase them there too. It did not wait for the trim floor: records a node had not applied yet are gone as well.";

/// A literal subject: tokens of printable characters without spaces,
/// none empty, none a wildcard.
pub fn check_subject(subject: &str) -> Result<(), String> {
    let allowed = "one literal subject: dot-separated tokens of printable characters, no spaces, no empty token, no wildcard (* or >)";
    if subject.is_empty() {
        return Err(format!("-subject is empty; allowed: {allowed}"));
    }
    if subject.len() > 1024 {
        return Err(format!(
            "-subject is {} bytes; allowed: at most 1024",
            subject.len()
        ));
    }
    for token in subject.split('.') {
        if token.is_empty() {
            return Err(format!(
                "-subject {subject:?} has an empty token; allowed: {allowed}"
            ));
        }
        if token == "*" || token == ">" {
            return Err(format!(
                "-subject {subject:?} is a wildcard ({token}); allowed: {allowed}"
            ));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "-subject {subject:?} has a space or a control character; allowed: {allowed}"
            ));
        }
    }
    Ok(())
}

/// Checks the input alone, before anything is read.
pub fn check(config: &Config, ask: &Ask) -> Result<(Domain, OpId), BadInput> {
    let bad = |code, message: String| BadInput { code, message };
    let domain = config.domain(&ask.stream).cloned().ok_or_else(|| {
        bad(
            InputFault::UnknownStream,
            format!(
                "{:?} is not configured; configured: {}",
                ask.stream,
                config.configured()
            ),
        )
    })?;
    check_subject(&ask.subject).map_err(|e| {
        bad(
            InputFault::SubjectInvalid,
            format!("subject_invalid: {e}; nothing written"),
        )
    })?;
    if ask.confirm.as_deref() != Some(ask.subject.as_str()) {
        return Err(bad(
            InputFault::ConfirmMismatch,
            format!(
                "confirm_mismatch: {} {} does not repeat the subject {:?}; nothing written",
                ask.surface.option("confirm"),
                ask.confirm
                    .as_deref()
                    .map_or_else(|| "is missing and".to_string(), |c| format!("{c:?}")),
                ask.subject
            ),
        ));
    }
    let reason = ask.reason.as_deref().unwrap_or("").trim();
    if reason.is_empty() {
        return Err(bad(
            InputFault::ReasonMissing,
            format!("reason_missing: {} is required: it is the one thing about the erased records that survives; nothing written", ask.surface.option("reason")),
        ));
    }
    if reason.chars().count() > 1024 || reason.chars().any(char::is_control) {
        return Err(bad(
            InputFault::BadRequest,
            "-reason: at most 1024 characters, without control characters".into(),
        ));
    }
    let op = match &ask.op_id {
        Some(text) => OpId::parse(text, Utc::now()).map_err(|e| {
            bad(
                InputFault::OpIdInvalid,
                format!("op_id_invalid: -op-id {e}"),
            )
        })?,
        None => OpId::mint(Utc::now()),
    };
    Ok((domain, op))
}

fn key(stream: &str, op: &OpId) -> String {
    format!("{stream}.{op}")
}

/// Writes the erasure's row by compare-and-set on the revision it last
/// wrote (or read), so that two runs of one erasure at once (a retry
/// beside a run still going) never overwrite each other's counts: the one
/// that loses stops and says so.
struct Saver<'a> {
    broker: &'a Broker,
    bucket: String,
    key: String,
    /// The revision last written or read (an atomic only to be `Sync`:
    /// one run writes its row from one task). 0: none yet.
    revision: std::sync::atomic::AtomicU64,
}

impl Saver<'_> {
    fn current(&self) -> Option<u64> {
        Some(self.revision.load(std::sync::atomic::Ordering::Relaxed)).filter(|r| *r > 0)
    }

    fn set(&self, revision: u64) {
        self.revision
            .store(revision, std::sync::atomic::Ordering::Relaxed);
    }

    async fn save(&self, row: &ErasureRow) -> Result<(), String> {
        use crate::broker::kv::CasError;
        let bytes = serde_json::to_vec(row).map_err(|e| e.to_string())?;
        let written = match self.current() {
            None => {
                self.broker
                    .kv_create(&self.bucket, &self.key, bytes.clone())
                    .await
            }
            Some(r) => {
                self.broker
                    .kv_update(&self.bucket, &self.key, bytes.clone(), r)
                    .await
            }
        };
        match written {
            Ok(r) => {
                self.set(r);
                Ok(())
            }
            Err(CasError::Exists { .. } | CasError::Conflict { .. }) => Err(format!(
                "another run of this erasure changed {}/{} meanwhile; let it finish, then run the finish command to see it done",
                self.bucket, self.key
            )),
            // No answer: the write may have landed. It did if the row now
            // holds exactly what was written.
            Err(CasError::Failed { reason, .. }) => {
                match self.broker.kv_entry(&self.bucket, &self.key).await {
                    Ok(Some(e)) if e.value == bytes => {
                        self.set(e.revision);
                        Ok(())
                    }
                    _ => Err(format!("writing {}/{}: {reason}", self.bucket, self.key)),
                }
            }
        }
    }
}

/// The command that finishes this erasure.
pub fn finish_command(ask: &Ask, stream: &str, op: &str) -> String {
    let w = crate::human::shell_word;
    format!(
        "crewlet retention erase -stream {stream} -subject {} -reason {} -confirm {} -op-id {op}",
        w(&ask.subject),
        w(ask.reason.as_deref().unwrap_or("").trim()),
        w(&ask.subject)
    )
}

/// A refusal and its sentence.
pub type Refused = (Refusal, String);

/// PURE: whether `subject` may be erased from `stream`: the gate subject
/// carries no one's data and the gates view depends on it (judged before
/// anything is read, with `subjects` still `None`); a subject the stream
/// does not take (its `subjects` as read) is a typo, not an erasure.
pub fn judge_target(
    stream: &str,
    gate_subject: Option<&str>,
    subjects: Option<&[String]>,
    subject: &str,
) -> Result<(), Refused> {
    if gate_subject == Some(subject) {
        return Err((
            Refusal::GateSubject,
            format!("gate_subject: {subject} is the gate subject of {stream}: the gates view depends on those records, and they carry no one's data; nothing written"),
        ));
    }
    let Some(subjects) = subjects else {
        return Ok(());
    };
    if !subjects
        .iter()
        .any(|p| crate::rows::subject_matches(p, subject))
    {
        return Err((
            Refusal::SubjectNotInStream,
            format!(
                "subject_not_in_stream: {stream} takes {}, not {subject}; nothing written",
                subjects.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Where an erasure starts, from the row its op id already has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// No row: a new erasure.
    Fresh,
    /// A row of this erasure that did not finish: resume it.
    Resume(Box<ErasureRow>),
    /// It finished before: nothing to do.
    Finished(Box<ErasureRow>),
}

/// PURE: what the row already under `op` (as read: absent, or its value
/// parsed or not) means for an erasure of `subject` from `stream`: a
/// row of another erasure refuses the op id (`op_reused`).
pub fn judge_prior(
    stream: &str,
    subject: &str,
    op: &str,
    place: &str,
    prior: Option<Result<ErasureRow, String>>,
) -> Result<Start, Refused> {
    match prior {
        None => Ok(Start::Fresh),
        Some(Err(e)) => Err((
            Refusal::OpReused,
            format!("{place} exists and is not an erasure row ({e}); start a new erasure without -op-id"),
        )),
        Some(Ok(r)) if r.subject != subject || r.stream != stream => Err((
            Refusal::OpReused,
            format!(
                "op_reused: {op} erased {} from {}; start a new erasure without -op-id",
                r.subject, r.stream
            ),
        )),
        Some(Ok(r)) if r.finished => Ok(Start::Finished(Box::new(r))),
        Some(Ok(r)) => Ok(Start::Resume(Box::new(r))),
    }
}

/// What the judge needs: the subjects the stream takes, and the row its
/// op id already has in the erasures bucket (with its revision).
#[derive(Debug, Clone)]
pub struct Facts {
    pub subjects: Vec<String>,
    /// Absent, or its value parsed (or why it does not parse), and the
    /// revision it was read at.
    pub prior: Option<(Result<ErasureRow, String>, u64)>,
    /// Where the row lives (`bucket/key`), for the words.
    pub place: String,
    /// The broker's clock is not read: a new row's `at` is this sidecar's.
    pub now: chrono::DateTime<Utc>,
}

/// FACTS (IO): the stream's subjects, the erasures bucket (`init` creates
/// it; so does the first erasure) and the row under the op id.
pub async fn facts(
    config: &Config,
    broker: &Broker,
    domain: &Domain,
    op: &OpId,
) -> Result<Facts, Outcome> {
    let stream = &domain.stream;
    let unreachable = |message: String| Outcome::Refused {
        refusal: Refusal::Unreachable,
        message,
    };
    let subjects = match broker.stream_facts(stream).await {
        Ok(StreamRead::Found(f)) => f.subjects,
        Ok(StreamRead::Missing) => {
            return Err(Outcome::Refused {
                refusal: Refusal::StreamMissing,
                message: format!("stream {stream} does not exist on the broker; nothing written"),
            })
        }
        Err(e) => return Err(unreachable(format!("{e}; nothing written"))),
    };
    let bucket = &config.buckets.erasures;
    if let Some(spec) = crate::buckets::contract_buckets(config)
        .into_iter()
        .find(|b| &b.name == bucket)
    {
        if let Err(e) = broker.ensure_bucket(&spec).await {
            return Err(unreachable(format!(
                "the erasures bucket {bucket}: {e}; nothing written"
            )));
        }
    }
    let k = key(stream, op);
    let prior = match broker.kv_entry(bucket, &k).await {
        Err(e) => return Err(unreachable(format!("{e}; nothing written"))),
        Ok(None) => None,
        Ok(Some(entry)) => Some((
            serde_json::from_slice::<ErasureRow>(&entry.value).map_err(|e| e.to_string()),
            entry.revision,
        )),
    };
    Ok(Facts {
        subjects,
        prior,
        place: format!("{bucket}/{k}"),
        now: Utc::now(),
    })
}

/// What [`apply`] carries out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// It finished before: nothing to do.
    Finished(Box<ErasureRow>),
    /// The row to write first (new, or resumed at `revision`), then the
    /// steps it has not done.
    Run {
        row: Box<ErasureRow>,
        /// The revision the row was read at (0: a new row, created).
        revision: u64,
    },
}

/// JUDGE (pure): the subject against the stream ([`judge_target`]), the
/// row under the op id ([`judge_prior`]), and the row to start from.
pub fn judge(domain: &Domain, ask: &Ask, op: &OpId, facts: &Facts) -> Result<Plan, Refused> {
    let stream = &domain.stream;
    judge_target(
        stream,
        domain.gate_subject.as_deref(),
        Some(&facts.subjects),
        &ask.subject,
    )?;
    let revision = facts.prior.as_ref().map_or(0, |(_, r)| *r);
    let prior = facts.prior.as_ref().map(|(row, _)| row.clone());
    match judge_prior(stream, &ask.subject, op.as_str(), &facts.place, prior)? {
        Start::Finished(r) => Ok(Plan::Finished(r)),
        Start::Resume(row) => Ok(Plan::Run { row, revision }),
        Start::Fresh => Ok(Plan::Run {
            row: Box::new(ErasureRow {
                op_id: op.to_string(),
                stream: stream.clone(),
                subject: ask.subject.clone(),
                reason: ask.reason.as_deref().unwrap_or("").trim().to_string(),
                by: ask.by.clone(),
                at: Timestamp(facts.now),
                live_records: 0,
                archived_records: 0,
                segments_rewritten: 0,
                live_through: 0,
                pending: None,
                finished: false,
            }),
            revision: 0,
        }),
    }
}

/// The whole erasure past its [`check`]: the gate subject refused before
/// anything is read (nor the erasures bucket created), then [`facts`],
/// [`judge`], [`apply`]. `started` is called once it is judged and its row
/// written, before anything is removed (the CLI says its op id and
/// finishing command then). The CLI and `POST …/erase` call this.
pub async fn perform(
    config: &Config,
    broker: &Broker,
    domain: &Domain,
    ask: &Ask,
    op: OpId,
    started: impl FnOnce(&OpId) + Send,
) -> Outcome {
    let refused = |(refusal, message): Refused| Outcome::Refused { refusal, message };
    if let Err(r) = judge_target(
        &domain.stream,
        domain.gate_subject.as_deref(),
        None,
        &ask.subject,
    ) {
        return refused(r);
    }
    let facts = match facts(config, broker, domain, &op).await {
        Ok(f) => f,
        Err(o) => return o,
    };
    match judge(domain, ask, &op, &facts) {
        Ok(plan) => apply(config, broker, domain, &op, plan, started).await,
        Err(r) => refused(r),
    }
}

/// APPLY (IO): the row written first (compare-and-set on the revision
/// read), then the live log in counted rounds, then, on an archived
/// domain, every segment that holds the subject rewritten, the row saved
/// before each step; nothing here decides whether to erase.
pub async fn apply(
    config: &Config,
    broker: &Broker,
    domain: &Domain,
    op: &OpId,
    plan: Plan,
    started: impl FnOnce(&OpId) + Send,
) -> Outcome {
    let (mut row, revision) = match plan {
        Plan::Finished(row) => return Outcome::Done { row, again: true },
        Plan::Run { row, revision } => (*row, revision),
    };
    let stream = domain.stream.clone();
    let subject = row.subject.clone();
    let bucket = config.buckets.erasures.clone();
    let k = key(&stream, op);
    let saver = Saver {
        broker,
        bucket: bucket.clone(),
        key: k.clone(),
        revision: std::sync::atomic::AtomicU64::new(0),
    };
    saver.set(revision);
    let stopped = |row: &ErasureRow, message: String| Outcome::Stopped {
        row: Box::new(row.clone()),
        message,
    };
    // The row first: a crash from here on leaves the erasure's own trace.
    if let Err(e) = saver.save(&row).await {
        return Outcome::Refused {
            refusal: Refusal::InProgress,
            message: format!("{e}; nothing written by this run"),
        };
    }
    // Judged and begun: from here the same op id finishes it.
    started(op);

    // The live log, in rounds: count what is on the subject up to the
    // last sequence, record it, purge it; again until none is left (a
    // publisher may still be writing to it). A retry first completes the
    // purge its row recorded.
    for _ in 0..10 {
        if row.live_through > 0 {
            if let Err(e) = broker
                .purge_subject_below(&stream, &subject, row.live_through + 1)
                .await
            {
                return stopped(&row, format!("the live purge of {subject}: {e}"));
            }
        }
        let (count, last) = match broker.subject_count(&stream, &subject).await {
            Ok(c) => c,
            Err(e) => return stopped(&row, format!("counting {subject} on {stream}: {e}")),
        };
        if count == 0 {
            break;
        }
        row.live_records += count;
        row.live_through = last;
        if let Err(e) = saver.save(&row).await {
            return stopped(&row, format!("writing {bucket}/{k}: {e}"));
        }
        if let Err(e) = broker
            .purge_subject_below(&stream, &subject, last + 1)
            .await
        {
            return stopped(&row, format!("the live purge of {subject}: {e}"));
        }
    }
    match broker.subject_count(&stream, &subject).await {
        Ok((0, _)) => {}
        Ok((n, _)) => {
            return stopped(
                &row,
                format!("{n} records on {subject} keep arriving faster than they are erased; stop what publishes them"),
            )
        }
        Err(e) => return stopped(&row, format!("counting {subject} on {stream}: {e}")),
    }

    // Between the live purge and the archive (the crash and broker-loss
    // tests stop here).
    crate::failpoint::failpoint("erase_after_live").await;
    if let Some(archive) = &domain.archive {
        if let Err(message) = settle(config, broker, &stream).await {
            return stopped(&row, message);
        }
        let store = archive.store();
        // Every generation's segments hold the subject's records: one that
        // cannot be known would be skipped, so it stops here instead.
        let generation = match leader_entry(broker, &config.buckets.floors, &stream).await {
            Ok(Some(e)) => match crate::floor::PublishedFloor::parse(&stream, &e.value) {
                Ok(p) => p.generation,
                Err(e) => {
                    return stopped(
                        &row,
                        format!("the floors row cannot be read ({e}), so the archive's generations are unknown"),
                    )
                }
            },
            Ok(None) => 0,
            Err(e) => return stopped(&row, format!("reading the floors row: {e}")),
        };
        for g in 0..=generation {
            let listing = match store.list(broker, &stream, g).await {
                Ok(l) => l,
                Err(e) if e.missing => continue,
                Err(e) => return stopped(&row, format!("listing the archive: {}", e.message)),
            };
            for listed in listing {
                if let Err(message) =
                    rewrite(broker, &store, &listed.name, &subject, op, &mut row, &saver).await
                {
                    return stopped(&row, message);
                }
            }
        }
        if let Some(p) = row.pending.clone() {
            // A pending segment no longer listed: it cannot hold the subject.
            row.pending = None;
            tracing::warn!(event = "erase_pending_gone", segment = %p.segment, "a segment pending rewrite is no longer listed");
        }
    }
    row.finished = true;
    if let Err(e) = saver.save(&row).await {
        return stopped(&row, e);
    }
    Outcome::Done {
        row: Box::new(row),
        again: false,
    }
}

#[cfg(test)]
mod tests;
