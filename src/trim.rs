//! One tick (read → absorb gates → compute → publish → age proof → re-read
//! pins → fence → purge) and the loop that runs it every `retention.tick`
//! until shutdown. The order is the safety argument: a tick whose answer
//! could not be published deletes nothing, and a purge is sent only by the
//! holder of the duty lease (a compare-and-set renewal just before it), to
//! at most this tick's `trim_to`, lowered by the gates view, the pins that
//! landed meanwhile and the age proof, re-checked against fresh stream
//! info.

use crate::rows::Stamped;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use crate::alarms::{self, Alarm, AlarmPolicy, DutyView};
use crate::broker::gates::GatedLog;
use crate::broker::read::Raw;
use crate::broker::Broker;
use crate::config::Config;
use crate::duty::{Duty, DutyStatus};
use crate::failpoint::failpoint;
use crate::floor::{self, Answer, DomainRead, Outage, ParsedRows, Policy};

/// The most records the age proof scans on one log in one tick. A larger
/// slice is purged in steps of at most this many records, one per tick
/// (docs/performance.md gives the cost).
pub const AGE_PROOF_MAX_RECORDS: u64 = 100_000;

/// What happened to one domain in a tick.
#[derive(Debug, Clone)]
pub struct DomainTick {
    pub answer: Answer,
    /// `None` when this sidecar did not hold the duty (or the answer was
    /// not publishable); else the new revision or why it failed.
    pub published: Option<Result<u64, String>>,
    /// `None` when nothing was licensed; else records purged or why not.
    pub purged: Option<Result<u64, String>>,
}

/// What a tick did, for logs, `--once` and the demo.
#[derive(Debug, Clone)]
pub struct TickReport {
    pub domains: Vec<DomainTick>,
    pub duty: DutyStatus,
    pub alarms: Vec<Alarm>,
    /// The broker could not be reached: every answer says so, and the one
    /// alarm is `broker_unreachable`.
    pub outage: Option<Outage>,
    /// How the buckets were read: from views kept across ticks, or whole.
    pub views: crate::broker::view::Took,
}

impl TickReport {
    /// Nothing about any log could be read (`run --once` exits 3).
    pub fn broker_failed(&self) -> bool {
        self.outage.is_some()
            || (!self.domains.is_empty()
                && self.domains.iter().all(|d| d.answer.stream_error.is_some()))
    }

    /// The broker itself did not answer. Only then does the loop back off
    /// (a missing stream on a live broker is an alarm, not a reason to tick
    /// less often, and a holder that waited longer than its lease would
    /// lose it).
    pub fn broker_unreachable(&self) -> bool {
        self.outage.is_some()
    }
}

/// PURE: the connection is up, and yet neither the duty lease nor
/// anything about any log could be read: a broker that takes connections
/// and answers nothing is an outage too.
pub fn read_nothing(duty: &DutyStatus, domains: &[DomainTick]) -> bool {
    matches!(duty, DutyStatus::Unknown(_))
        && !domains.is_empty()
        && domains.iter().all(|d| d.answer.stream_error.is_some())
}

impl TickReport {
    /// The `status --json` view of this tick (docs/status-json.md): what it
    /// computed and, where it published, the row it wrote.
    pub fn status(
        &self,
        sidecar: &Sidecar,
        server: Option<(String, String)>,
    ) -> crate::report::Status {
        let domains = self
            .domains
            .iter()
            .map(|d| crate::report::DomainStatus {
                published: matches!(d.published, Some(Ok(_)))
                    .then(|| serde_json::to_value(floor::FloorsRow::from(&d.answer)).ok())
                    .flatten(),
                answer: d.answer.clone(),
            })
            .collect();
        let (duty_holder, duty_claimed_at) = match &self.duty {
            DutyStatus::Held => (
                Some(sidecar.config.node.id.clone()),
                Some(sidecar.duty.claimed_at()),
            ),
            DutyStatus::Other {
                holder, claimed_at, ..
            } => (Some(holder.clone()), Some(*claimed_at)),
            _ => (None, None),
        };
        crate::report::Status {
            at: crate::rows::Timestamp(Utc::now()),
            node: sidecar.config.node.id.clone(),
            duty_holder,
            duty_claimed_at,
            server,
            domains,
            alarms: self.alarms.clone(),
        }
    }

    /// Records purged by this tick, over every domain.
    pub fn purged(&self) -> u64 {
        self.domains
            .iter()
            .filter_map(|d| d.purged.as_ref().and_then(|p| p.as_ref().ok()))
            .sum()
    }
}

/// Called after each tick of [`Sidecar::run`] with the tick's report and
/// how long it took (the HTTP surface records its answer).
pub type Observer = Arc<dyn Fn(&Sidecar, &TickReport, Duration) + Send + Sync>;

/// A running sidecar: configuration, connection, duty lease, and the alarms
/// it last reported (to log changes only).
pub struct Sidecar {
    pub config: Config,
    pub broker: Broker,
    pub duty: Duty,
    active: BTreeSet<(String, Option<String>)>,
    /// How far the broker's clock is ahead of ours, as last read.
    offset: Option<chrono::Duration>,
    /// Log alarms as they start and clear (a running sidecar); off for
    /// `run --once`, which prints them itself.
    pub log_alarms: bool,
    /// Told of every tick of [`Sidecar::run`].
    pub observer: Option<Observer>,
    /// Since when ticks have read nothing on a connection that is up.
    failing_since: Option<DateTime<Utc>>,
    /// Ticks run so far: every `retention.full_read_every`-th (the first
    /// included) reads every bucket whole.
    ticks: u64,
    /// What each domain's last answer line said ([`log_domain`]).
    logged: BTreeMap<String, Logged>,
}

/// Reads everything one domain needs beyond the buckets, in the order
/// docs/trim-floor.md, Read order, fixes: stream info, then the consumer, then the age lookup.
pub async fn read_domain(
    broker: &Broker,
    domain: &crate::config::Domain,
    min_age: Duration,
    now: DateTime<Utc>,
) -> DomainRead {
    let (stream, clock) = match broker.stream_state_at(&domain.stream).await {
        Ok((s, c)) => (Ok(s), Some(c)),
        Err(e) => (Err(e), None),
    };
    // The age cutoff on the broker's clock as it answered, never ours.
    let now = clock.map_or(now, |c| c.broker);
    // The consumer after stream info (the feed rule needs last_seq read
    // first); the age lookup beside it.
    let feed = async {
        match &domain.feed_consumer {
            Some(c) => Some(broker.feed_state(&domain.stream, c).await),
            None => None,
        }
    };
    let replicas = broker.replicas(
        &domain.stream,
        &domain.replicas.consumers,
        &domain.replicas.ignore,
        broker.durable_sourcing(),
    );
    let young = async {
        match &stream {
            Err(e) => Err(e.clone()),
            // Nothing retained, or no record can be young: no request needed.
            Ok(s) if s.last_seq < s.first_seq || min_age.is_zero() => Ok(None),
            Ok(_) => {
                let cutoff =
                    now - chrono::Duration::from_std(min_age).unwrap_or(chrono::Duration::MAX);
                broker.first_seq_at_or_after(&domain.stream, cutoff).await
            }
        }
    };
    let (feed, replicas, young_seq) = tokio::join!(feed, replicas, young);
    // The floor is pure: what it keeps of a fault is its sentence, the
    // term's `unreadable` reason.
    DomainRead {
        stream: stream.map_err(String::from),
        feed: feed.map(|f| f.map_err(String::from)),
        replicas: replicas.map(|r| r.map_err(String::from)),
        unprotected: Vec::new(),
        young_seq: young_seq.map_err(String::from),
        absorbed: None,
        clock,
        archive: None,
    }
}

/// One fresh read: the buckets as read and parsed, and every domain's
/// answer.
pub struct Fresh {
    /// The raw gates and floors entries.
    pub raw: Raw,
    pub parsed: ParsedRows,
    pub answers: Vec<Answer>,
    /// How far the broker's clock is ahead of ours (none read: `None`).
    pub offset: Option<chrono::Duration>,
    /// Each domain's reads beyond the buckets (a preview computes on them
    /// again).
    pub reads: Vec<DomainRead>,
}

/// Every domain's answer from one fresh read (the buckets once, then each
/// domain's stream concurrently), without absorbing gate records. `status`
/// uses this.
pub async fn answers(broker: &Broker, config: &Config, session: &str, now: DateTime<Utc>) -> Fresh {
    let ((raw, parsed), listings) = tokio::join!(
        broker.read_all(&config.buckets),
        prefetch_archives(broker, config)
    );
    let policy = Policy::from_config(config, session);
    let mut reads = read_domains(broker, config, &policy, now).await;
    read_archives(broker, config, parsed.get(), &mut reads, listings).await;
    let answers = compute_all(config, &policy, &parsed, &reads, now);
    Fresh {
        raw,
        parsed: parsed.into_inner(),
        answers,
        offset: clock_offset(&reads),
        reads,
    }
}

/// Every domain's reads beyond the buckets, concurrently.
pub async fn read_domains(
    broker: &Broker,
    config: &Config,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Vec<DomainRead> {
    let reads = futures::future::join_all(
        config
            .domains
            .iter()
            .map(|d| read_domain(broker, d, policy.min_age, now)),
    );
    // What no consumer protects: one listing of the account's streams for
    // every domain; said, never a pin (a listing that fails says nothing,
    // and costs the trim nothing).
    let streams: Vec<&str> = config.domains.iter().map(|d| d.stream.as_str()).collect();
    let (mut reads, copies) = tokio::join!(reads, broker.unprotected_copies(&streams));
    if let Ok(copies) = copies {
        for (read, d) in reads.iter_mut().zip(&config.domains) {
            read.unprotected = copies
                .unprotected
                .get(&d.stream)
                .cloned()
                .unwrap_or_default();
            if let Some(Ok(r)) = &mut read.replicas {
                for c in &mut r.replicas {
                    c.feeds = copies
                        .feeds
                        .get(&(d.stream.clone(), c.consumer.clone()))
                        .cloned();
                }
            }
        }
    }
    reads
}

/// The log, generation and incarnation an archived domain's segments
/// belong to, from this read (`None` when the stream or floors row cannot
/// be read: the answer then concludes nothing anyway).
pub fn archive_target(
    parsed: &ParsedRows,
    domain: &crate::config::Domain,
    read: &DomainRead,
) -> Option<crate::archive::fold::Target> {
    let incarnation = floor::incarnation(parsed, &domain.stream, read)?;
    Some(crate::archive::fold::Target {
        stream: domain.stream.clone(),
        generation: incarnation.generation,
        stream_created: incarnation.stream_created.to_rfc3339(),
    })
}

/// The archive state the floors row this tick read published for `stream`
/// (none when it does not parse: the answer says so).
fn published_archive(
    parsed: &ParsedRows,
    stream: &str,
) -> Option<crate::archive::state::ArchiveState> {
    let (p, _) = parsed.published(stream).ok()??;
    serde_json::from_value(p.archive?).ok()
}

/// Each domain's store listing where it is an Object Store (`None`
/// otherwise), taken beside the bucket reads: the listing does not depend
/// on the log's incarnation, only what is taken from it does, so its
/// round trips need not wait for stream info. Taken a little earlier in
/// the tick, it can only miss a segment written since (a lower archive
/// floor, never a higher one).
pub async fn prefetch_archives(broker: &Broker, config: &Config) -> Vec<Option<Listing>> {
    futures::future::join_all(config.domains.iter().map(|d| async move {
        let archive = d.archive.as_ref()?;
        archive.store().prefetch(broker).await
    }))
    .await
}

/// A store's whole listing, or why it could not be had.
pub type Listing = Result<Vec<crate::archive::state::Listed>, crate::archive::state::ListError>;

/// Reads every archived domain's archive, concurrently, after stream info
/// (which names the incarnation its segments belong to), from the
/// listings [`prefetch_archives`] took.
pub async fn read_archives(
    broker: &Broker,
    config: &Config,
    parsed: &ParsedRows,
    reads: &mut [DomainRead],
    listings: Vec<Option<Listing>>,
) {
    let found = futures::future::join_all(
        config
            .domains
            .iter()
            .zip(reads.iter())
            .zip(listings.into_iter().chain(std::iter::repeat_with(|| None)))
            .map(|((d, read), listing)| async move {
                let archive = d.archive.as_ref()?;
                let target = archive_target(parsed, d, read)?;
                let published = published_archive(parsed, &d.stream);
                Some(
                    crate::archive::read(
                        broker,
                        &archive.store(),
                        &target,
                        published.as_ref(),
                        listing,
                    )
                    .await,
                )
            }),
    )
    .await;
    for (read, found) in reads.iter_mut().zip(found) {
        read.archive = found;
    }
}

/// Every domain's answer from what was read: pure. The rows must be a
/// read proven current: the tick publishes and purges by these answers.
pub fn compute_all(
    config: &Config,
    policy: &Policy,
    parsed: &crate::proven::Proven<ParsedRows>,
    reads: &[DomainRead],
    now: DateTime<Utc>,
) -> Vec<Answer> {
    compute_each(config, policy, parsed.get(), reads, now)
}

/// Every domain's answer from `rows` and its reads, each at the broker's
/// instant in its own stream info. [`compute_all`] gives it proven rows;
/// a preview of a gesture gives it rows changed in memory, whose answers
/// are never published or purged by.
pub fn compute_each(
    config: &Config,
    policy: &Policy,
    rows: &ParsedRows,
    reads: &[DomainRead],
    now: DateTime<Utc>,
) -> Vec<Answer> {
    config
        .domains
        .iter()
        .zip(reads)
        .map(|(d, read)| {
            floor::compute(d, policy, rows, read, read.clock.map_or(now, |c| c.broker))
        })
        .collect()
}

/// How far the broker's clock is ahead of ours, from this tick's reads.
pub fn clock_offset(reads: &[DomainRead]) -> Option<chrono::Duration> {
    let readings: Vec<crate::clock::Reading> = reads.iter().filter_map(|r| r.clock).collect();
    crate::clock::offset_of(&readings)
}

/// The duty as the alarms see it.
pub fn duty_view(status: &DutyStatus, duty: &Duty) -> DutyView {
    match status {
        DutyStatus::Held => DutyView::Held {
            holder: duty.holder().to_string(),
            claimed_at: duty.claimed_at(),
        },
        DutyStatus::Other {
            holder, claimed_at, ..
        } => DutyView::Held {
            holder: holder.clone(),
            claimed_at: *claimed_at,
        },
        DutyStatus::Free => DutyView::Unheld,
        DutyStatus::Unknown(e) => DutyView::Unreadable(e.clone()),
    }
}

impl Sidecar {
    pub fn new(config: Config, broker: Broker) -> Sidecar {
        let duty = Duty::new(
            &config.buckets.duty,
            &config.node.id,
            config.node.duty,
            config.retention.duty_ttl(),
            config.retention.fence_margin(),
        );
        // A read that hangs (a server lost, a leader being elected) is
        // given up within a tick, so that a tick, a read tried twice
        // included, stays inside the lease of three ticks.
        let broker = broker.with_read_timeout(config.retention.read_timeout());
        Sidecar {
            config,
            broker,
            duty,
            active: BTreeSet::new(),
            offset: None,
            log_alarms: true,
            observer: None,
            failing_since: None,
            ticks: 0,
            logged: BTreeMap::new(),
        }
    }

    /// One tick. Never panics on anything the broker says; a failure is in
    /// the report and the logs.
    pub async fn tick(&mut self) -> TickReport {
        // Every time rule runs on the broker's clock: each answer is
        // computed at the instant of its own stream info; `now` (our clock
        // moved by the offset last read) serves only where none was read.
        // The lease and the rows are independent, so they are read together.
        let now = crate::clock::broker_now(self.offset, Utc::now());
        let mode = self.read_mode();
        let held_before = self.duty.holds();
        let (duty, (mut raw, mut parsed, mut views), mut listings) = tokio::join!(
            self.duty.claim_or_renew(&self.broker, now),
            self.broker.read_all_viewed(&self.config.buckets, mode),
            prefetch_archives(&self.broker, &self.config)
        );
        // A sidecar that newly claims the duty reads every bucket whole
        // before it acts on them (docs/trim-floor.md, Incremental views).
        if !held_before && self.duty.holds() && views.kept > 0 {
            ((raw, parsed, views), listings) = tokio::join!(
                self.broker
                    .read_all_viewed(&self.config.buckets, crate::broker::view::Mode::Fresh),
                prefetch_archives(&self.broker, &self.config)
            );
        }
        self.ticks += 1;
        let policy = Policy::from_config(&self.config, self.duty.session());
        let mut reads = read_domains(&self.broker, &self.config, &policy, now).await;
        crate::failpoint::failpoint("after_stream_info").await;
        let offset = clock_offset(&reads);
        if offset.is_some() {
            self.offset = offset;
        }
        // The gates view is brought up to date after stream info: it belongs
        // to the incarnation that info names.
        if self.duty.holds() && self.absorb_gates(&mut raw, parsed.get(), &mut reads).await {
            parsed = self.broker.with_gates_absorbed(parsed, &raw);
        }
        read_archives(
            &self.broker,
            &self.config,
            parsed.get(),
            &mut reads,
            listings,
        )
        .await;
        let mut answers = compute_all(&self.config, &policy, &parsed, &reads, now);
        let parsed = parsed.into_inner();
        if self.duty.holds() {
            // Fold before the publish: the answer published is the one the
            // archive's new frontier bounds.
            self.fold_all(&policy, &parsed, &mut reads, &mut answers, now)
                .await;
        }
        let mut domains: Vec<DomainTick> = answers
            .into_iter()
            .map(|answer| DomainTick {
                answer,
                published: None,
                purged: None,
            })
            .collect();
        if self.duty.holds() {
            // Publish every answer first, then purge: a tick whose answer
            // could not be published deletes nothing.
            for d in &mut domains {
                self.publish(&parsed, d).await;
                // The row this answer follows is now the one just written
                // (a run that starts over an older row is not stale).
                if matches!(d.published, Some(Ok(_))) {
                    d.answer.published_at = Some(d.answer.at);
                }
            }
            self.purge_all(&parsed, &mut domains).await;
            self.retire_join_holds(&parsed, &domains).await;
            self.extend_join_holds(&parsed, &domains).await;
        }
        let now = crate::clock::broker_now(self.offset, Utc::now());
        let failing_since = *self.failing_since.get_or_insert(now);
        let outage = self.broker.outage().or_else(|| {
            read_nothing(&duty, &domains).then(|| Outage {
                since: crate::rows::Timestamp(failing_since),
                servers: self.broker.url.clone(),
                refused: None,
            })
        });
        match &outage {
            // Told once, as the outage alarm; what each read said is no
            // news while no server answers.
            Some(o) => {
                for d in &mut domains {
                    d.answer = d.answer.clone().unreachable(o);
                }
            }
            None => {
                self.failing_since = None;
                for d in &domains {
                    log_domain(d, self.duty.holds(), &mut self.logged);
                }
            }
        }
        let mut policy = AlarmPolicy::from_config(&self.config);
        policy.duty_max_age = self.duty.bucket_max_age();
        if outage.is_none() {
            policy.presence_max_age = self
                .broker
                .lease_max_age(&self.config.buckets.presence)
                .await
                .ok()
                .flatten();
        }
        policy.session = Some((self.duty.sessions(), self.duty.started()));
        let view = duty_view(&duty, &self.duty);
        let all: Vec<Answer> = domains.iter().map(|d| d.answer.clone()).collect();
        let alarms = alarms::evaluate(&all, &view, offset, &policy, now, outage.as_ref());
        self.log_alarm_changes(&alarms, outage.is_some());
        TickReport {
            domains,
            duty,
            alarms,
            outage,
            views,
        }
    }

    /// Whole on the first tick and every `retention.full_read_every`-th,
    /// else from the views kept across ticks.
    fn read_mode(&self) -> crate::broker::view::Mode {
        let every = u64::from(self.config.retention.full_read_every.max(1));
        if self.ticks % every == 0 {
            crate::broker::view::Mode::Fresh
        } else {
            crate::broker::view::Mode::Kept
        }
    }

    /// Brings the gates view up to date with every log that takes gate
    /// records (the purge is clamped to what it has absorbed), working on
    /// the gates bucket as this tick read it, and records in each domain's
    /// read whether that worked. Returns whether the gates bucket may have
    /// changed.
    async fn absorb_gates(
        &self,
        raw: &mut Raw,
        parsed: &ParsedRows,
        reads: &mut [DomainRead],
    ) -> bool {
        let mut touched = false;
        for (d, read) in self.config.domains.iter().zip(reads.iter_mut()) {
            let Some(subject) = &d.gate_subject else {
                continue;
            };
            if let Err(e) = raw.gates() {
                read.absorbed = Some(Err(e.to_string()));
                continue;
            }
            let Some(incarnation) = floor::incarnation(parsed, &d.stream, read) else {
                // Stream info or the floors row is unreadable: the answer
                // says so, and nothing is purged on this log.
                continue;
            };
            let log = GatedLog {
                stream: &d.stream,
                subject,
                incarnation,
                // The answer compares the cursor with this tick's last_seq.
                upto: read.stream.as_ref().ok().map(|s| s.last_seq),
            };
            touched = true;
            match self
                .broker
                .absorb_raw(&self.config.buckets.gates, &log, raw)
                .await
            {
                Ok(r) => {
                    if r.absorbed > 0 {
                        tracing::info!(event = "gates_absorbed", domain = %d.name, records = r.absorbed, cursor = r.cursor, "absorbed gate records into the gates view");
                    }
                    read.absorbed = Some(Ok(()));
                }
                Err(e) => {
                    // Where absorbing stopped: the first sequence past the
                    // cursor this incarnation proved (the log's first without
                    // one); the purge goes no further.
                    let first_unabsorbed = parsed
                        .gates
                        .as_ref()
                        .ok()
                        .and_then(|g| g.cursors.get(&d.stream))
                        .and_then(|c| c.as_ref().ok())
                        .filter(|c| c.belongs_to(&incarnation))
                        .map_or_else(
                            || read.stream.as_ref().map_or(1, |s| s.first_seq.max(1)),
                            |c| c.seq + 1,
                        );
                    tracing::warn!(event = "gates_unabsorbed", domain = %d.name, first_unabsorbed, error = %e, "the gates view could not be brought up to date; the purge stops at what it has absorbed");
                    read.absorbed = Some(Err(e.to_string()));
                }
            }
        }
        touched
    }

    /// Folds each archived domain whose answer concluded: the slice
    /// `(frontier, T]`, `T` the minimum of the other six terms, then
    /// computes its answer again with the new frontier (docs/archive-format.md, The
    /// fold). A fold error leaves the frontier at the last durable segment.
    async fn fold_all(
        &self,
        policy: &Policy,
        parsed: &ParsedRows,
        reads: &mut [DomainRead],
        answers: &mut [Answer],
        now: DateTime<Utc>,
    ) {
        let mut folded = false;
        for (i, d) in self.config.domains.iter().enumerate() {
            let (Some(archive), Some(answer), Some(read)) =
                (&d.archive, answers.get(i), reads.get_mut(i))
            else {
                continue;
            };
            let (Some(to), Some(from)) = (
                floor::fold_to(answer),
                answer.archive.as_ref().and_then(|a| a.frontier),
            ) else {
                continue;
            };
            // Nothing to fold (the other terms hold the trim at or below
            // the frontier): no fold runs, so none is reported, and the
            // answer stands as computed. A fold that failed earlier stays
            // failing (its finding is kept while the frontier has not
            // moved) instead of being cleared by a fold that never ran.
            if to <= from {
                continue;
            }
            let Some(target) = archive_target(parsed, d, read) else {
                continue;
            };
            let Some(found) = read.archive.as_mut() else {
                continue;
            };
            // A fold may take at most a tick, so that the tick stays inside
            // its lease; what it did not reach waits for the next one.
            let deadline = tokio::time::Instant::now() + self.config.retention.tick.0;
            let store = archive.store();
            let result = crate::archive::fold::fold(
                &self.broker,
                &store,
                &target,
                (from, to),
                archive.limits(),
                deadline,
            )
            .await;
            let (written, error) = match result {
                Ok(f) => {
                    if !f.written.is_empty() {
                        tracing::info!(event = "archive_folded", domain = %d.name, segments = f.written.len(), already_there = f.already_there, frontier = f.frontier, "folded into the archive");
                    }
                    (f.written, None)
                }
                Err(e) => {
                    tracing::warn!(event = "archive_failing", domain = %d.name, segment = e.segment.as_deref().unwrap_or("-"), frontier = e.frontier, error = %e.reason, "the fold stopped; nothing past the frontier is purged");
                    (e.written, Some((e.segment, e.reason)))
                }
            };
            folded |= !written.is_empty();
            if let Ok(listing) = found.listing.as_mut() {
                for w in &written {
                    found.verified.push((w.name.clone(), Ok(())));
                    listing.retain(|l| l.name != w.name);
                    listing.push(w.clone());
                }
                listing.sort_by(|a, b| a.name.cmp(&b.name));
            }
            found.fold = Some(crate::archive::state::FoldOutcome {
                at: crate::rows::Timestamp(crate::clock::broker_now(self.offset, Utc::now())),
                segments: written.len(),
                error,
            });
            let at = read.clock.map_or(now, |c| c.broker);
            if let Some(slot) = answers.get_mut(i) {
                *slot = floor::compute(d, policy, parsed, read, at);
            }
        }
        if folded {
            failpoint("after_fold").await;
        }
    }

    /// Publishes the answer with compare-and-set on the revision read this
    /// tick.
    async fn publish(&self, rows: &ParsedRows, d: &mut DomainTick) {
        let a = &d.answer;
        let revision = match rows.published(&a.stream) {
            Ok(p) => p.map(|(_, rev)| rev),
            // An unreadable floors row is never overwritten: the floor it
            // holds may be above anything this tick could conclude.
            Err(_) => return,
        };
        if a.stream_error.is_some() {
            return;
        }
        // A lost floors row is not replaced by a guess: there is no floor
        // this tick could stand behind until a confirmed reanchor.
        if matches!(a.not_ready, Some(floor::NotReady::GenerationUnknown { .. })) {
            return;
        }
        d.published = Some(self.write_row(a, revision).await);
        match &d.published {
            // The row now written is this answer: what it says of the last
            // publish (the kept answer, its alarms) is this one, as status
            // reading the row afresh says.
            Some(Ok(_)) => d.answer.published_at = Some(d.answer.at),
            Some(Err(e)) => {
                tracing::warn!(event = "publish_failed", domain = %d.answer.domain, error = %e, "the answer was not published; nothing is purged this tick");
            }
            None => {}
        }
    }

    async fn write_row(&self, a: &Answer, revision: Option<u64>) -> Result<u64, String> {
        let body = floor::FloorsRow::from(a).to_bytes()?;
        self.broker
            .put_if(&self.config.buckets.floors, &a.stream, body, revision)
            .await
            .map_err(|e| e.to_string())
    }

    /// The purges the published answers license, each lowered by the pins
    /// re-read just before it and fenced by a compare-and-set on the duty
    /// lease.
    async fn purge_all(&mut self, parsed: &ParsedRows, domains: &mut [DomainTick]) {
        let licensed = |d: &DomainTick| {
            matches!(d.published, Some(Ok(_))) && floor::purge_target(&d.answer).is_some()
        };
        if !domains.iter().any(licensed) {
            return;
        }
        failpoint("after_publish").await;
        // The age proof first (it may scan many headers), so that the pins
        // re-read stays the last read before each purge.
        let mut targets: Vec<(usize, Option<u64>, Option<floor::PurgeClamp>)> = Vec::new();
        for (i, d) in domains.iter().enumerate().filter(|(_, d)| licensed(d)) {
            let Some(target) = floor::purge_target(&d.answer) else {
                continue;
            };
            let (target, by) = self.prove_old(&d.answer, target).await;
            targets.push((i, target, by));
        }
        // Right after publishing and right before each purge: a hold or a
        // live data node that landed after this tick's read still bounds
        // it. Read again for each log, immediately before its fence: a pin
        // placed while an earlier log was fenced and purged (a
        // readmission's join hold on the next log) is seen.
        for (i, target, by) in targets {
            let pins = self.broker.read_pins_viewed(&self.config.buckets).await;
            let now = crate::clock::broker_now(self.offset, Utc::now());
            if let Some(d) = domains.get_mut(i) {
                self.purge_one(d, target, by, &pins, &parsed.presence, now)
                    .await;
            }
        }
    }

    /// The age proof (docs/decisions.md, "Pins, clocks, fences, reads"): the slice about to be purged holds
    /// no record younger than `now - min_age`, whatever order the log's
    /// timestamps are in. A bounded, headers-only scan from the log's first
    /// sequence; a slice it cannot prove is clamped below the first young
    /// (or unscanned) record, or not purged.
    async fn prove_old(&self, a: &Answer, target: u64) -> (Option<u64>, Option<floor::PurgeClamp>) {
        let min_age = self.config.retention.min_age.0;
        if min_age.is_zero() {
            return (Some(target), None);
        }
        let now = crate::clock::broker_now(self.offset, Utc::now());
        let cutoff = now - chrono::Duration::from_std(min_age).unwrap_or(chrono::Duration::MAX);
        // Records below an explicit trim's watermark may be young: the
        // operator asked for them to go (docs/http.md); the proof covers the
        // rest of the slice.
        let from = match a.requested.as_ref().filter(|r| r.error.is_none()) {
            Some(r) => a.first_seq.max(r.seq),
            None => a.first_seq,
        };
        if from > target - 1 {
            return (Some(target), None);
        }
        match self
            .broker
            .first_unproven(&a.stream, from, target - 1, cutoff, AGE_PROOF_MAX_RECORDS)
            .await
        {
            Ok(None) => (Some(target), None),
            Ok(Some(keep)) if keep >= target => (Some(target), None),
            Ok(Some(keep)) => {
                tracing::info!(event = "purge_clamped", domain = %a.domain, by = "age", keep_from = keep, "the age proof keeps a record the age lookup did not");
                (
                    (keep > a.first_seq).then_some(keep),
                    Some(floor::PurgeClamp::Age),
                )
            }
            Err(e) => {
                tracing::warn!(event = "age_proof_failed", domain = %a.domain, error = %e, "the slice could not be proved old; nothing purged");
                (None, Some(floor::PurgeClamp::Age))
            }
        }
    }

    async fn purge_one(
        &mut self,
        d: &mut DomainTick,
        target: Option<u64>,
        proof_by: Option<floor::PurgeClamp>,
        pins: &crate::proven::Proven<floor::Pins>,
        before: &floor::ReadPresence,
        now: DateTime<Utc>,
    ) {
        let (Some(created), Some(Ok(revision))) = (d.answer.stream_created, d.published.clone())
        else {
            return;
        };
        let (target, pinned_by) = match target {
            Some(t) => floor::clamp_to_pins(&d.answer, t, pins, before, now),
            None => (None, None),
        };
        if let Some(by) = pinned_by.or(proof_by) {
            // The row says what bounded the purge; the answer and its `at`
            // are the same, so a hold waiting for a later tick is not
            // misled by this write.
            d.answer.purge_clamped_by = Some(by);
            match self.write_row(&d.answer, Some(revision)).await {
                Ok(rev) => d.published = Some(Ok(rev)),
                Err(e) => {
                    tracing::warn!(event = "publish_failed", domain = %d.answer.domain, error = %e, "the clamped answer was not published; nothing purged");
                    d.purged = Some(Err(e));
                    return;
                }
            }
            tracing::info!(event = "purge_clamped", domain = %d.answer.domain, by = ?by, target = ?target, "the purge is bounded below trim_to");
        }
        let Some(target) = target else {
            return;
        };
        failpoint("after_pins").await;
        // Fencing: a compare-and-set renewal of the lease, immediately
        // before the purge; its permit bounds everything up to the purge.
        let Some(permit) = self.duty.fence(&self.broker, now).await else {
            d.purged = Some(Err(
                "the duty lease could not be renewed before the purge".into()
            ));
            return;
        };
        failpoint("after_fence").await;
        let a = &d.answer;
        // The purge takes the answer's own license, lowered to what the
        // age proof and the pins allowed: never a number above it.
        let Some(licensed) = floor::licensed_target(a).and_then(|l| l.lowered_to(target)) else {
            d.purged = Some(Err(format!(
                "the purge target {target} is not within what the answer licenses; nothing purged"
            )));
            return;
        };
        match self
            .broker
            .purge_to(&a.stream, licensed, created, permit)
            .await
        {
            Ok(n) => d.purged = Some(Ok(n)),
            Err(e @ crate::broker::write::PurgeError::FenceExpired { .. }) => {
                tracing::warn!(event = "fence_expired", domain = %a.domain, error = %e, "the fence's deadline passed before the purge could be sent; nothing purged, the next tick starts over");
                d.purged = Some(Err(e.to_string()));
            }
            Err(e) => {
                // The floor is now ahead of the log: the safe direction.
                tracing::warn!(event = "purge_failed", domain = %a.domain, error = %e, "the floor is ahead of the log until a later tick purges");
                d.purged = Some(Err(e.to_string()));
            }
        }
    }

    /// Lifts the join holds of readmissions a published answer now counts
    /// (docs/decisions.md, "Pins, clocks, fences, reads").
    async fn retire_join_holds(&self, rows: &ParsedRows, domains: &[DomainTick]) {
        let bucket = &self.config.buckets.holds;
        for d in domains
            .iter()
            .filter(|d| matches!(d.published, Some(Ok(_))))
        {
            for id in floor::retired_join_holds(&d.answer, rows) {
                let key = format!("{}.{id}", d.answer.stream);
                if let Ok(Some(e)) = self.broker.kv_entry(bucket, &key).await {
                    match self.broker.kv_delete_at(bucket, &key, e.revision).await {
                        Ok(()) => {
                            tracing::info!(event = "join_hold_lifted", domain = %d.answer.domain, hold = %id, "a readmitted node is counted again; its join hold is lifted")
                        }
                        Err(e) => {
                            tracing::warn!(event = "join_hold_kept", domain = %d.answer.domain, hold = %id, error = %e, "could not lift a join hold; it expires by itself")
                        }
                    }
                }
            }
        }
    }

    /// Extends (by another ten ticks from now, on the broker's clock, with
    /// compare-and-set) every join hold whose readmission record is not
    /// absorbed yet, so that the trim cannot pass the readmitted node
    /// however long absorbing fails (docs/trim-floor.md, Pins that arrive during a
    /// tick).
    async fn extend_join_holds(&self, rows: &ParsedRows, domains: &[DomainTick]) {
        let bucket = &self.config.buckets.holds;
        let ttl = chrono::Duration::from_std(self.config.retention.tick.0 * 10)
            .unwrap_or(chrono::Duration::zero());
        let until = crate::rows::Timestamp(crate::clock::broker_now(self.offset, Utc::now()) + ttl);
        for d in domains {
            for id in floor::unabsorbed_join_holds(&d.answer, rows) {
                let key = format!("{}.{id}", d.answer.stream);
                let Ok(Some(e)) = self.broker.kv_entry(bucket, &key).await else {
                    continue;
                };
                let Ok((_, mut hold)) = crate::rows::HoldRow::parse(&key, &e.value) else {
                    continue;
                };
                if hold.expires_at >= until {
                    continue;
                }
                hold.expires_at = until;
                let Ok(body) = serde_json::to_vec(&hold) else {
                    continue;
                };
                match self.broker.kv_update(bucket, &key, body, e.revision).await {
                    Ok(_) => {
                        tracing::info!(event = "join_hold_extended", domain = %d.answer.domain, hold = %id, until = %until, "the readmission is not absorbed yet; its join hold is extended")
                    }
                    Err(e) => {
                        tracing::warn!(event = "join_hold_not_extended", domain = %d.answer.domain, hold = %id, error = %e, "could not extend a join hold; the next tick tries again")
                    }
                }
            }
        }
    }

    /// Logs each alarm as it starts and clears. During an outage the
    /// others are unknown, not cleared: they stay as they were, and the
    /// first tick after it says which did clear meanwhile.
    fn log_alarm_changes(&mut self, alarms: &[Alarm], outage: bool) {
        if !self.log_alarms {
            return;
        }
        let mut now: BTreeSet<(String, Option<String>)> = alarms
            .iter()
            .map(|a| (a.alarm.to_string(), a.domain.clone()))
            .collect();
        if outage {
            now.extend(self.active.iter().cloned());
        }
        for a in alarms {
            if !self
                .active
                .contains(&(a.alarm.to_string(), a.domain.clone()))
            {
                tracing::warn!(event = "alarm_raised", alarm = a.alarm.as_str(), domain = a.domain.as_deref().unwrap_or("*"), measurement = %a.measurement, remedy = %a.remedy, "{}", a.line());
            }
        }
        for (name, domain) in self.active.difference(&now) {
            tracing::info!(event = "alarm_cleared", alarm = %name, domain = domain.as_deref().unwrap_or("*"), "alarm cleared");
        }
        self.active = now;
    }

    /// Runs until `shutdown` is notified. A tick that has started always
    /// finishes (publish, then purge) before the lease is released.
    pub async fn run(&mut self, shutdown: Arc<Notify>, max_ticks: Option<u32>) {
        let tick = self.config.retention.tick.0;
        let mut failures: u32 = 0;
        let mut ticks: u32 = 0;
        loop {
            let started = std::time::Instant::now();
            let report = self.tick().await;
            if let Some(o) = &self.observer {
                o(self, &report, started.elapsed());
            }
            ticks = ticks.saturating_add(1);
            if max_ticks.is_some_and(|m| ticks >= m) {
                break;
            }
            if report.broker_unreachable() {
                failures = failures.saturating_add(1);
            } else {
                failures = 0;
            }
            // Back off while the broker is gone: 1, 2, 4, then 8 ticks.
            let wait = tick * 2u32.pow(failures.min(3));
            if failures > 0 {
                tracing::warn!(
                    event = "tick_failed",
                    failures,
                    retry_in_secs = wait.as_secs_f64(),
                    "nothing about any log could be read; retrying"
                );
            }
            tokio::select! {
                _ = shutdown.notified() => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        self.duty.release(&self.broker).await;
        self.broker.close_views().await;
    }
}

/// What a domain's log line says, to tell whether the answer changed
/// since the last line (a calm fleet's unchanged answer is logged at
/// DEBUG, not at INFO every tick).
type Logged = (i64, u64, String, bool, u64, bool);

fn log_domain(d: &DomainTick, holder: bool, last: &mut BTreeMap<String, Logged>) {
    let a = &d.answer;
    let blocked = a.blocked_names(",");
    let floor = a.floor.map(|f| f as i64).unwrap_or(-1);
    let purged = match &d.purged {
        Some(Ok(n)) => *n,
        _ => 0,
    };
    let unreadable = a
        .terms
        .iter()
        .any(|t| matches!(t.state, floor::TermState::Unreadable { .. }));
    if let Some(why) = &a.not_ready {
        tracing::warn!(event = "not_ready", domain = %a.domain, reason = %why, floor, trim_to = a.trim_to, "NOT READY: nothing purged");
    } else if unreadable {
        tracing::warn!(event = "trim_blocked", domain = %a.domain, blocked_by = %blocked, floor, trim_to = a.trim_to, dry_run = a.dry_run, "a term is unreadable: nothing purged");
    } else if purged > 0 {
        tracing::info!(event = "trim_purged", domain = %a.domain, floor, trim_to = a.trim_to, purged, blocked_by = %blocked, dry_run = a.dry_run, "published, then purged");
    } else {
        let would = a.would_purge.map(|w| w.records).unwrap_or(0);
        // Whether this sidecar holds the duty is part of it: a handover
        // is said, whatever the answer.
        let now: Logged = (floor, a.trim_to, blocked.clone(), a.dry_run, would, holder);
        let changed = last.get(&a.domain) != Some(&now);
        match (holder, changed) {
            (false, true) => {
                tracing::info!(event = "trim_observed", domain = %a.domain, floor, trim_to = a.trim_to, blocked_by = %blocked, dry_run = a.dry_run, "computed (another sidecar holds the duty)")
            }
            (false, false) => {
                tracing::debug!(event = "trim_observed", domain = %a.domain, floor, trim_to = a.trim_to, blocked_by = %blocked, dry_run = a.dry_run, "computed (another sidecar holds the duty), unchanged")
            }
            (true, true) => {
                tracing::info!(event = "trim_published", domain = %a.domain, floor, trim_to = a.trim_to, purged, would_purge = would, blocked_by = %blocked, dry_run = a.dry_run, "published")
            }
            (true, false) => {
                tracing::debug!(event = "trim_published", domain = %a.domain, floor, trim_to = a.trim_to, purged, would_purge = would, blocked_by = %blocked, dry_run = a.dry_run, "published, unchanged")
            }
        }
        last.insert(a.domain.clone(), now);
        return;
    }
    // A line of another kind: the next unchanged answer is said again.
    last.remove(&a.domain);
}
