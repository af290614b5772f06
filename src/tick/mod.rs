//! One tick (read → absorb gates → compute → publish → age proof → re-read
//! pins → fence → purge) and the loop that runs it every `retention.tick`
//! until shutdown. The order is the safety argument: a tick whose answer
//! could not be published deletes nothing, and a purge is sent only by the
//! holder of the duty lease (a compare-and-set renewal just before it), to
//! at most this tick's `trim_to`, lowered by the gates view, the pins that
//! landed meanwhile and the age proof, re-checked against fresh stream
//! info.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use crate::alarms::{self, Alarm, AlarmPolicy};
use crate::broker::Broker;
use crate::config::Config;
use crate::floor::{self, Answer, Outage, Policy};
use crate::tick::duty::{Duty, DutyStatus};

/// The most records the age proof scans on one log in one tick. A larger
/// slice is purged in steps of at most this many records, one per tick
/// (docs/performance.md gives the cost).
pub const AGE_PROOF_MAX_RECORDS: u64 = 100_000;

/// How many floors rows a tick writes at once: enough to hide the round
/// trips of a large fleet, few enough not to queue a burst the size of the
/// fleet on the broker. At a thousand logs, 256 wrote the rows in 33 ms
/// where 64 took 40 and a thousand no less than 256 (docs/performance.md,
/// A fleet of many logs).
pub const PUBLISH_CONCURRENCY: usize = 256;

/// What happened to one domain in a tick.
#[derive(Debug, Clone)]
pub struct DomainTick {
    /// Computed from rows proven current: the only answer a purge can be
    /// taken from.
    pub answer: crate::floor::Licensed,
    /// `None` when this sidecar did not hold the duty (or the answer was
    /// not publishable); else the new revision or why it failed.
    pub published: Option<Result<u64, String>>,
    /// `None` when nothing was licensed; else records purged or why not.
    pub purged: Option<Result<u64, String>>,
    /// The row already said this answer, and was left as it stood (its
    /// `at` here): `published` is its revision.
    pub stood: Option<crate::rows::Timestamp>,
    /// `None` when no adoption mark was due; else whether it was written
    /// (a purge waits for it).
    pub mark: Option<Result<(), String>>,
    /// The digest of the row this answer would write, taken just before
    /// the publish ([`floor::row_stands`]); `None` until then.
    pub digest: Option<floor::RowDigest>,
}

/// What a tick did, for logs, `--once` and the demo.
#[derive(Debug, Clone)]
pub struct TickReport {
    pub domains: Vec<DomainTick>,
    pub duty: DutyStatus,
    pub alarms: Vec<Alarm>,
    /// The alarms `run` raises (logs, exports) this tick: those that have
    /// held for `retention.alarm_grace` (all of `alarms` for `run --once`).
    pub raised: Vec<Alarm>,
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
                    .then(|| {
                        let row = floor::FloorsRow::from(&d.answer);
                        // A row left as it stood says its own time.
                        let row = match d.stood {
                            Some(at) => floor::FloorsRow { at, ..row },
                            None => row,
                        };
                        serde_json::to_value(row).ok()
                    })
                    .flatten(),
                answer: (*d.answer).clone(),
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
            duty_unknown: match &self.duty {
                DutyStatus::Unknown(e) => Some(e.clone()),
                _ => None,
            },
            server,
            domains,
            // What `run` raised: the same alarms its logs and metrics
            // carry (all of them for `run --once`).
            alarms: self.raised.clone(),
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

/// An alarm as the loop keeps track of it: its name and its domain (none
/// for a fleet-level alarm).
type AlarmKey = (crate::alarms::AlarmName, Option<String>);

/// Called after each tick of [`Sidecar::run`] with the tick's report and
/// how long it took (the HTTP surface records its answer).
pub type Observer = Arc<dyn Fn(&Sidecar, &TickReport, Duration) + Send + Sync>;

/// A running sidecar: configuration, connection, duty lease, and the alarms
/// it last reported (to log changes only).
pub struct Sidecar {
    pub config: Config,
    pub broker: Broker,
    pub duty: Duty,
    /// The alarms raised (logged, exported), by name and domain.
    active: BTreeSet<AlarmKey>,
    /// Every alarm whose condition holds, and since when (this process's
    /// monotonic clock): raised once it has held for
    /// `retention.alarm_grace`.
    pending: BTreeMap<AlarmKey, std::time::Instant>,
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
    /// The floors row this process last wrote for each log, so that an
    /// unchanged answer is not written again every tick
    /// ([`floor::row_stands`]). Behind a lock: the rows are written
    /// together.
    written: std::sync::Mutex<std::collections::HashMap<String, floor::WrittenRow>>,
    /// How long the last tick took ([`floor::row_stands`]).
    last_took: Duration,
    /// The account's stream listing as kept between ticks.
    account: account::AccountStreams,
    /// Each domain's configuration digest and fields, computed once.
    settings: floor::Settings,
    /// What `_contract` says of the configuration, made once.
    contract: publish::ContractConsts,
}

mod account;
pub mod duty;
mod fold;
mod gates;
mod join;
mod publish;
pub use publish::write_members;
mod read;
pub mod spread;
pub use read::*;

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
        let settings = Policy::from_config(&config, "").settings;
        let config_for_contract = config.retention.clone();
        Sidecar {
            config,
            broker,
            duty,
            active: BTreeSet::new(),
            pending: BTreeMap::new(),
            offset: None,
            log_alarms: true,
            observer: None,
            failing_since: None,
            ticks: 0,
            logged: BTreeMap::new(),
            written: Default::default(),
            last_took: Duration::ZERO,
            account: Default::default(),
            settings,
            contract: publish::ContractConsts::of(&config_for_contract),
        }
    }

    /// Forgets which floors rows this process wrote, as a restart would:
    /// the next tick writes every row (the bench times a tick of each
    /// kind).
    #[cfg(feature = "bench")]
    pub fn forget_written(&self) {
        if let Ok(mut w) = self.written.lock() {
            w.clear();
        }
    }

    /// One tick. Never panics on anything the broker says; a failure is in
    /// the report and the logs.
    pub async fn tick(&mut self) -> TickReport {
        // Every time rule runs on the broker's clock: each answer is
        // computed at the instant of its own stream info; `now` (our clock
        // moved by the offset last read) serves only where none was read.
        // The lease and the rows are independent, so they are read together.
        let started = std::time::Instant::now();
        let now = crate::clock::broker_now(self.offset, Utc::now());
        let mode = self.read_mode();
        let held_before = self.duty.holds();
        // The presence bucket's age limit (for the alarms) beside them: a
        // round trip a tick is worth hiding on a quiet fleet.
        let (duty, (mut raw, mut parsed, mut views), mut listings, presence_max_age) = tokio::join!(
            self.duty.claim_or_renew(&self.broker, now),
            self.broker.read_all_viewed(&self.config.buckets, mode),
            prefetch_archives(&self.broker, &self.config),
            self.broker.lease_max_age(&self.config.buckets.presence)
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
        let policy =
            Policy::with_settings(&self.config, self.duty.session(), self.settings.clone());
        let logs: Vec<&str> = self
            .config
            .domains
            .iter()
            .map(|d| d.stream.as_str())
            .collect();
        let (states, index) = self.account.read(&self.broker, &logs).await;
        let mut reads = read_listed(
            &self.broker,
            &self.config,
            &policy,
            now,
            states,
            index.as_deref().map(|i| &i.copies),
        )
        .await;
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
        if self.duty.holds() {
            // Fold before the publish: the answer published is the one the
            // archive's new frontier bounds.
            self.fold_all(&policy, &parsed, &mut reads, &mut answers, now)
                .await;
        }
        let parsed = parsed.into_inner();
        let mut domains: Vec<DomainTick> = answers
            .into_iter()
            .map(|answer| DomainTick {
                answer,
                published: None,
                purged: None,
                stood: None,
                mark: None,
                digest: None,
            })
            .collect();
        if self.duty.holds() {
            // Publish every answer first, then purge: a tick whose answer
            // could not be published deletes nothing. Each domain's row is
            // its own key, written by its own compare-and-set, so the
            // writes go out together (a fleet of a thousand logs would
            // otherwise wait a round trip per log, docs/performance.md);
            // none is purged before every write has answered.
            use futures::StreamExt;
            // Each row's digest first, on every core: whether the row
            // stands is decided from it, and the answers do not change
            // between here and the publish.
            let digests = spread::map(domains.len(), |i| {
                floor::FloorsRow::from(&domains[i].answer).digest()
            });
            for (d, digest) in domains.iter_mut().zip(digests) {
                d.digest = digest;
            }
            let this: &Sidecar = self;
            // Only the answers with a write due (a row, an adoption mark)
            // become a task: the rows left standing are settled here.
            let due: Vec<(&mut DomainTick, Option<Option<u64>>)> = domains
                .iter_mut()
                .filter_map(|d| {
                    let row = this.row_due(&parsed, d);
                    (row.is_some() || d.answer.mark_due.is_some()).then_some((d, row))
                })
                .collect();
            futures::stream::iter(due)
                .for_each_concurrent(PUBLISH_CONCURRENCY, |(d, row)| {
                    let parsed = &parsed;
                    async move {
                        if let Some(revision) = row {
                            this.publish(d, revision).await;
                        }
                        this.mark(parsed, d).await;
                    }
                })
                .await;
            self.purge_all(&parsed, &mut domains).await;
            // A fence that found the duty gone ends the holder's writes.
            if self.duty.holds() {
                self.note_memory(&parsed, &domains).await;
                self.retire_join_holds(&parsed, &domains).await;
                self.extend_join_holds(&parsed, &domains).await;
                // The tick's last write (docs/contract.md, `crewlet_floors`
                // — the published answer).
                let read = parsed.floors.as_ref().ok().and_then(|f| f.tick_revision);
                self.write_tick(&domains, read).await;
                self.write_contract(&parsed, &domains).await;
            }
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
            policy.presence_max_age = presence_max_age.ok().flatten();
        }
        policy.session = Some((self.duty.sessions(), self.duty.started()));
        let view = duty_view(&duty, &self.duty);
        // Borrowed: an answer carries every counted node's pin.
        let all: Vec<&Answer> = domains.iter().map(|d| &*d.answer).collect();
        let alarms = alarms::evaluate(&all, &view, offset, &policy, now, outage.as_ref());
        let raised = self.raise_after_grace(&alarms, outage.is_some());
        self.last_took = started.elapsed();
        TickReport {
            domains,
            duty,
            alarms,
            raised,
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

    /// The alarms `run` raises this tick: those whose condition has held
    /// for `retention.alarm_grace` (docs/runbook.md, Alarms), each logged
    /// as it is raised and as it clears. One that ends within the grace (a
    /// leader election, a server restart) is logged as `alarm_suppressed`,
    /// never raised. During an outage the others are unknown, not
    /// cleared: they stay as they were, and the first tick after it says
    /// which did clear meanwhile. Off (`run --once`): every alarm read,
    /// nothing logged.
    fn raise_after_grace(&mut self, alarms: &[Alarm], outage: bool) -> Vec<Alarm> {
        if !self.log_alarms {
            return alarms.to_vec();
        }
        let grace = self.config.retention.alarm_grace().0;
        let at = std::time::Instant::now();
        // Each alarm's key made once: the alarm and its domain.
        let keyed: Vec<(AlarmKey, &Alarm)> = alarms
            .iter()
            .map(|a| ((a.alarm, a.domain.clone()), a))
            .collect();
        let holding: BTreeSet<&AlarmKey> = keyed.iter().map(|(k, _)| k).collect();
        // Ended: raised ones clear (below); ones never raised were
        // suppressed. During an outage nothing is known to have ended.
        if !outage {
            let active = &self.active;
            self.pending.retain(|k, since| {
                if holding.contains(k) {
                    return true;
                }
                if !active.contains(k) {
                    let domain = k.1.as_deref().unwrap_or("*");
                    tracing::info!(
                        event = "alarm_suppressed",
                        alarm = %k.0,
                        domain,
                        lasted_ms = u64::try_from(at.duration_since(*since).as_millis()).unwrap_or(u64::MAX),
                        alarm_grace = %crate::config::Dur(grace),
                        "alarm {} {domain} ended within alarm_grace ({}): not raised",
                        k.0,
                        crate::config::Dur(grace)
                    );
                }
                false
            });
        }
        let mut raised = Vec::new();
        let mut now: BTreeSet<AlarmKey> = BTreeSet::new();
        for (k, a) in keyed {
            let since = *self.pending.entry(k.clone()).or_insert(at);
            let was_raised = self.active.contains(&k);
            if was_raised || at.duration_since(since) >= grace {
                if !was_raised {
                    tracing::warn!(event = "alarm_raised", alarm = a.alarm.as_str(), domain = a.domain.as_deref().unwrap_or("*"), measurement = %a.measurement, remedy = %a.remedy, "{}", a.line());
                }
                raised.push(a.clone());
                now.insert(k);
            }
        }
        if outage {
            now.extend(self.active.iter().cloned());
        }
        for (name, domain) in self.active.difference(&now) {
            tracing::info!(event = "alarm_cleared", alarm = %name, domain = domain.as_deref().unwrap_or("*"), "alarm cleared");
        }
        self.active = now;
        raised
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
