//! PURE: retention answers → alarms, each with its measurement and the
//! remedy an on-call engineer acts on (docs/runbook.md, Alarms). `status`, the
//! running sidecar and `run --once` all evaluate alarms here.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::{BackupPolicy, Config, Dur};
use crate::floor::{Answer, Cause, GateFault, NodeState, NotReady, Outage, TermName, TermState};
use crate::human;
use crate::rows::Timestamp;
use crate::stream_check::bypass_remedy;

/// Defines [`AlarmName`] and its list from one table, so that the list
/// cannot leave a name out.
macro_rules! alarm_names {
    ($($variant:ident => $name:literal,)*) => {
        /// Every alarm there is (docs/runbook.md, Alarms); each has a
        /// runbook entry, which a test checks.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum AlarmName {
            $($variant,)*
        }

        impl AlarmName {
            /// Every alarm, in the order of its name.
            pub const ALL: &'static [AlarmName] = &[$(AlarmName::$variant,)*];

            /// Its name, as the output, the logs and the metrics carry it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(AlarmName::$variant => $name,)*
                }
            }
        }
    };
}

alarm_names! {
    ArchiveFailing => "archive_failing",
    BackupAge => "backup_age",
    BrokerRefused => "broker_refused",
    BrokerRetentionBypass => "broker_retention_bypass",
    BrokerUnreachable => "broker_unreachable",
    ClockSkew => "clock_skew",
    ConfigDrift => "config_drift",
    DutyUnheld => "duty_unheld",
    FloorStale => "floor_stale",
    GatesUnabsorbed => "gates_unabsorbed",
    LogHeadroom => "log_headroom",
    NodeBehindLog => "node_behind_log",
    NotReady => "not_ready",
    ReplicaBehind => "replica_behind",
    ReplicaUnprotected => "replica_unprotected",
    TermUnreadable => "term_unreadable",
    TrimHeld => "trim_held",
    VersionSkew => "version_skew",
}

/// Every alarm's name (docs/runbook.md, Alarms), from [`AlarmName::ALL`].
pub fn names() -> Vec<&'static str> {
    AlarmName::ALL.iter().map(|a| a.as_str()).collect()
}

impl std::fmt::Display for AlarmName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AlarmName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// `alarm == "trim_held"`, as the outputs spell it.
impl PartialEq<&str> for AlarmName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One active alarm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Alarm {
    pub alarm: AlarmName,
    /// `None` for a fleet-level alarm (`duty_unheld`).
    pub domain: Option<String>,
    pub measurement: String,
    pub remedy: String,
}

impl Alarm {
    /// `ALARM <name> <domain>: <measurement> — <remedy>`.
    pub fn line(&self) -> String {
        format!(
            "ALARM {} {}: {} — {}",
            self.alarm,
            self.domain.as_deref().unwrap_or("*"),
            self.measurement,
            self.remedy
        )
    }

    /// The alarm as one JSON object for `--log-format json`, in the shape
    /// `run`'s own JSON log lines have (docs/runbook.md, Alarms): the
    /// same keys whichever command printed it, so that one alerting rule
    /// (`"event": "alarm_raised"`) serves both.
    pub fn json_line(&self, at: DateTime<Utc>) -> String {
        serde_json::json!({
            "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "level": "WARN",
            "event": "alarm_raised",
            "alarm": self.alarm,
            "domain": self.domain.as_deref().unwrap_or("*"),
            "measurement": self.measurement,
            "remedy": self.remedy,
            "message": self.line(),
        })
        .to_string()
    }
}

/// `broker_refused` (docs/runbook.md): the servers answer but refuse
/// this sidecar's credentials or TLS settings. `refusal` is the error,
/// `credentials` what the configuration gives (never the secret).
pub fn broker_refused(refusal: &str, credentials: &str) -> Alarm {
    Alarm {
        alarm: AlarmName::BrokerRefused,
        domain: None,
        measurement: refusal.to_string(),
        remedy: format!(
            "check the credentials ({credentials}) and the account's permissions on the server; the sidecar retries until they are taken"
        ),
    }
}

/// What is known about the duty lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DutyView {
    Held {
        holder: String,
        claimed_at: Timestamp,
    },
    Unheld,
    Unreadable(String),
}

/// The settings alarms read.
#[derive(Debug, Clone)]
pub struct AlarmPolicy {
    pub tick: Duration,
    pub held_alarm_after: Duration,
    pub backup_max_age: Duration,
    pub backup_floor: BackupPolicy,
    pub backup_owner: Option<String>,
    /// The gates bucket, named in the `gates_unabsorbed` remedy.
    pub gates_bucket: String,
    pub max_clock_skew: Duration,
    /// This sidecar's node id, named in the `clock_skew` remedy.
    pub node: String,
    /// The least ceiling `set-capacity` takes, for the command the
    /// `log_headroom` remedy prints.
    pub min_capacity: u64,
    /// The duty bucket, and the lease this configuration wants (three
    /// ticks) and what a fence takes off it.
    pub duty_bucket: String,
    pub duty_ttl: Duration,
    pub fence_margin: Duration,
    /// The duty bucket's own `max_age` as read this time (`None`: not
    /// read). A lease the bucket keeps for less than three of this
    /// sidecar's ticks is a configuration mismatch (`config_drift`).
    pub duty_max_age: Option<Duration>,
    /// The presence bucket, the TTL this configuration gives it, and its
    /// own `max_age` as read this time (`None`: not read). Without a TTL
    /// a node that stops stays live for ever (`config_drift`).
    pub presence_bucket: String,
    pub presence_ttl: Duration,
    pub presence_max_age: Option<Duration>,
    /// Which credentials the configuration gives (never the secret), for
    /// `broker_refused`'s remedy.
    pub credentials: String,
    /// The duty sessions this sidecar has had and when it started (a
    /// running sidecar; `None` for `status`): a floors row published since
    /// by another session under this node id means two sidecars share it.
    pub session: Option<(Vec<String>, Timestamp)>,
}

impl AlarmPolicy {
    pub fn from_config(c: &Config) -> Self {
        AlarmPolicy {
            tick: c.retention.tick.0,
            held_alarm_after: c.retention.held_alarm_after.0,
            backup_max_age: c.retention.backup_max_age.0,
            backup_floor: c.retention.backup_floor,
            backup_owner: c.retention.backup_owner.clone(),
            gates_bucket: c.buckets.gates.clone(),
            max_clock_skew: c.retention.max_clock_skew.0,
            node: c.node.id.clone(),
            min_capacity: crate::capacity::minimum(c.retention.allow_unsafe_limits),
            duty_bucket: c.buckets.duty.clone(),
            duty_ttl: c.retention.duty_ttl(),
            fence_margin: c.retention.fence_margin(),
            duty_max_age: None,
            presence_bucket: c.buckets.presence.clone(),
            presence_ttl: c.retention.presence_ttl.0,
            presence_max_age: None,
            credentials: crate::config::credentials_named(&c.nats),
            session: None,
        }
    }
}

fn since(now: DateTime<Utc>, then: Timestamp) -> Duration {
    now.signed_duration_since(then.0)
        .to_std()
        .unwrap_or_default()
}

/// Every active alarm, fleet-level first, then per domain in order.
/// `clock_offset` is how far the broker's clock is ahead of this sidecar's
/// (none read: unknown, no alarm). During an `outage` the one alarm is
/// `broker_unreachable`: every term is unreadable for that reason alone,
/// and no row-level remedy (reanchor, evict, delete a row) may be printed
/// for a read that could not be made.
pub fn evaluate(
    answers: &[impl std::borrow::Borrow<Answer>],
    duty: &DutyView,
    clock_offset: Option<chrono::Duration>,
    policy: &AlarmPolicy,
    now: DateTime<Utc>,
    outage: Option<&Outage>,
) -> Vec<Alarm> {
    if let Some(o) = outage {
        return vec![match &o.refused {
            // The servers answer, and refuse: the credentials are what to
            // look at, not the network.
            Some(why) => broker_refused(
                &format!(
                    "the broker refuses this sidecar's credentials: {why} (servers tried: {}; since {}, {} ago); every term is unreadable until it takes them, and nothing is purged",
                    o.servers,
                    o.since,
                    human::age(since(now, o.since))
                ),
                &policy.credentials,
            ),
            None => broker_unreachable(o, now),
        }];
    }
    let mut out = Vec::new();
    if let Some(o) = crate::clock::skew_past(clock_offset, policy.max_clock_skew) {
        let abs = o.abs().to_std().unwrap_or_default();
        let side = if o > chrono::Duration::zero() {
            "behind"
        } else {
            "ahead of"
        };
        out.push(Alarm {
            alarm: AlarmName::ClockSkew,
            domain: None,
            measurement: format!(
                "the clock of sidecar {} is {:.1}s {side} the broker's (max_clock_skew is {}); every time rule uses the broker's clock",
                policy.node,
                abs.as_secs_f64(),
                Dur(policy.max_clock_skew)
            ),
            remedy: format!(
                "fix NTP (chrony or timedatectl) on the host of sidecar {}, or on the broker's host if that is the one off",
                policy.node
            ),
        });
    }
    if let Some(alarm) = duty_lease_mismatch(policy) {
        out.push(alarm);
    }
    if let Some(alarm) = presence_without_ttl(policy) {
        out.push(alarm);
    }
    // A `run --once` from cron releases the lease between runs: a fleet
    // whose floors rows are fresh is being trimmed, lease or not.
    let stale_after = policy.tick * 3;
    let fresh_row = answers
        .iter()
        .filter_map(|a| a.borrow().published_at)
        .any(|at| since(now, at) <= stale_after);
    match duty {
        DutyView::Held { .. } => {}
        DutyView::Unheld if fresh_row => {}
        DutyView::Unheld => out.push(Alarm {
            alarm: AlarmName::DutyUnheld,
            domain: None,
            measurement: format!(
                "no sidecar holds the trim duty and no floors row was published within 3 ticks ({}); nothing is being trimmed",
                Dur(stale_after)
            ),
            remedy: "start a sidecar with node.duty: true (crewlet retention run), or check the cron job that runs crewlet retention run --once".into(),
        }),
        DutyView::Unreadable(e) => out.push(Alarm {
            alarm: AlarmName::DutyUnheld,
            domain: None,
            measurement: format!("the duty lease could not be read: {e}"),
            remedy: "check the duty bucket (crewlet retention init creates it) and the broker"
                .into(),
        }),
    }
    for a in answers {
        domain_alarms(a.borrow(), duty, policy, now, &mut out);
    }
    out
}

/// What one domain's alarms are judged from.
struct Ctx<'a> {
    a: &'a Answer,
    duty: &'a DutyView,
    p: &'a AlarmPolicy,
    now: DateTime<Utc>,
}

/// Every alarm of one domain, in the order they are said: one function
/// per alarm (docs/runbook.md has an entry for each).
fn domain_alarms(
    a: &Answer,
    duty: &DutyView,
    p: &AlarmPolicy,
    now: DateTime<Utc>,
    out: &mut Vec<Alarm>,
) {
    let c = Ctx { a, duty, p, now };
    let each: [fn(&Ctx) -> Vec<Alarm>; 15] = [
        log_headroom,
        backup_age,
        term_unreadable,
        |c| node_behind_log(c.a).into_iter().collect(),
        trim_held,
        |c| replica_behind(c.a, c.p, c.now).into_iter().collect(),
        replica_unprotected,
        config_drift,
        config_drift_node_id,
        version_skew,
        gates_unabsorbed,
        archive_failing,
        not_ready,
        broker_retention_bypass,
        floor_stale,
    ];
    for alarm in each {
        out.extend(alarm(&c));
    }
}

/// `log_headroom`: under a tenth of the soft ceiling left, with the least ceiling that clears it.
fn log_headroom(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if a.stream_error.is_none() && a.max_bytes > 0 && a.headroom_fraction < 0.10 {
        let held = if a.blocked_by.is_empty() {
            "the trim is not held; the log holds what min_age and the nodes need".to_string()
        } else {
            format!("the trim is held by {}", a.blocked_names(", "))
        };
        found.push(Alarm {
            alarm: AlarmName::LogHeadroom,
            domain: d(),
            measurement: format!(
                "headroom_fraction {:.3}: {} of a soft ceiling of {}",
                a.headroom_fraction,
                human::bytes(a.bytes),
                human::bytes(a.soft_ceiling_bytes)
            ),
            remedy: {
                let least = crate::capacity::least_clearing_headroom(
                    a.bytes,
                    a.reserve_bytes > 0,
                    p.min_capacity,
                );
                format!(
                    "{held}; clear that first, or raise the ceiling to at least {} (the least that leaves a tenth of headroom): {}",
                    human::bytes(least),
                    crate::capacity::command(&a.stream, least)
                )
            },
        });
    }
    found
}

/// `backup_age`: no counted backup or acknowledgement, or the newest older than `backup_max_age`.
fn backup_age(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    let owner = p
        .backup_owner
        .as_deref()
        .map(|o| format!(" (owner: {o})"))
        .unwrap_or_else(|| " (no backup_owner is configured: set retention.backup_owner)".into());
    let backup_term = a.terms.iter().find(|t| t.term == TermName::BackupFloor);
    if let Some(t) = backup_term {
        if !matches!(t.state, TermState::Unreadable { .. }) {
            let stale = a.backup_age_secs.map(|_| a.backup_stale);
            let measurement = match (p.backup_floor, stale) {
                // The term's own reason when it has one: after a reanchor
                // the manifests are there but speak of the history before
                // it, and "none names the log" would send the operator
                // looking for manifests they can see.
                (BackupPolicy::Engine, None) => Some(match &t.state {
                    TermState::Value {
                        reason: Some(why), ..
                    } => why.clone(),
                    _ => format!("no verified backup names {}", a.stream),
                }),
                (BackupPolicy::Operator, None) => Some(format!(
                    "no acknowledgement has been given for {}",
                    a.stream
                )),
                (_, Some(true)) => {
                    let age = human::age(Duration::from_secs(a.backup_age_secs.unwrap_or(0)));
                    Some(match p.backup_floor {
                        BackupPolicy::Engine => format!(
                            "the newest complete backup is {age} old (backup_max_age is {})",
                            Dur(p.backup_max_age)
                        ),
                        BackupPolicy::Operator => format!(
                            "the acknowledgement is {age} old (backup_max_age is {})",
                            Dur(p.backup_max_age)
                        ),
                    })
                }
                (_, Some(false)) => None,
            };
            if let Some(measurement) = measurement {
                let remedy = match p.backup_floor {
                    BackupPolicy::Engine => format!("run and verify a backup, then announce it ({}){owner}", announce_command(&a.stream)),
                    BackupPolicy::Operator => format!("once a copy is off-site: crewlet retention ack -stream {} -position N{owner}", a.stream),
                };
                found.push(Alarm {
                    alarm: AlarmName::BackupAge,
                    domain: d(),
                    measurement,
                    remedy,
                });
            }
        }
    }
    found
}

/// `term_unreadable`: one per term that cannot be read.
fn term_unreadable(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    for t in &a.terms {
        if let TermState::Unreadable { error, cause } = &t.state {
            found.push(Alarm {
                alarm: AlarmName::TermUnreadable,
                domain: d(),
                measurement: format!("{} is unreadable: {error}", t.term.as_str()),
                remedy: unreadable_remedy(a, t.term, *cause),
            });
        }
    }
    found
}

/// `trim_held`: the trim held past `held_alarm_after`.
fn trim_held(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let now = c.now;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if let (Some(held_since), Some(first)) = (a.held_since, a.blocked_by.first()) {
        let held_for = since(now, held_since);
        if held_for > p.held_alarm_after {
            found.push(Alarm {
                alarm: AlarmName::TrimHeld,
                domain: d(),
                // The trim's clock (held_since), named as such: the
                // remedy's pin phrase says "pinned for" on the term's own.
                measurement: format!(
                    "blocked_by {}: the trim has been held for {} (held_since {}; held_alarm_after is {})",
                    a.blocked_names(", "),
                    human::age(held_for),
                    human::clock(held_since.0, now),
                    Dur(p.held_alarm_after)
                ),
                remedy: held_remedy(a, p, *first, now),
            });
        }
    }
    found
}

/// `replica_unprotected`: a copy of the log through an ephemeral consumer.
fn replica_unprotected(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if !a.unprotected_copies.is_empty() {
        found.push(Alarm {
            alarm: AlarmName::ReplicaUnprotected,
            domain: d(),
            measurement: format!(
                "{} copies {} through an ephemeral consumer: the log cannot see what it has stored, so the trim cannot wait for it",
                a.unprotected_copies.join(", "),
                a.stream
            ),
            remedy: "recreate its mirror or source with a durable consumer of its own on the log (docs/contract.md, Protecting a mirror or source); until then it may miss records the trim deletes".into(),
        });
    }
    found
}

/// `config_drift`: another sidecar published this log's row under another configuration of the domain.
fn config_drift(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    // Another sidecar published this log's row under a configuration of
    // the domain that decides its purge otherwise: the two would trim it
    // differently, and whichever holds the duty wins silently.
    // Digests are compared only between rows of one format: an upgrade is
    // not a drift (version_skew says it).
    let same_format = a.published_format == Some(crate::floor::members::FORMAT);
    if let Some((by, theirs)) = &a.published_config {
        if same_format && *by != p.node && *theirs != a.config_digest {
            let differ = a
                .published_by
                .as_ref()
                .map(|pb| differing_fields(&a.config, &pb.config))
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| {
                    "its gate_subject, archive, feed_consumer, backup policy, min_age or tick differ".into()
                });
            found.push(Alarm {
                alarm: AlarmName::ConfigDrift,
                domain: d(),
                measurement: format!(
                    "the floors row of {} was published by {by} under another configuration of domain {} (digest {theirs}, this sidecar's {}): {differ}",
                    a.stream, a.domain, a.config_digest
                ),
                remedy: format!(
                    "make every sidecar's configuration of domain {} the same (compare their domains[] entry and retention section; crewlet validate --config on each)",
                    a.domain
                ),
            });
        }
    }
    found
}

/// `version_skew`: the log's row was written by a sidecar of another
/// release: a newer format (this sidecar publishes nothing for the log and
/// never overwrites it), or an older one (another sidecar, not upgraded
/// yet, holds the duty).
fn version_skew(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let ours = crate::floor::members::FORMAT;
    let (Some(theirs), Some(pb)) = (a.published_format, &a.published_by) else {
        return Vec::new();
    };
    let d = Some(a.domain.clone());
    if theirs > ours {
        return vec![Alarm {
            alarm: AlarmName::VersionSkew,
            domain: d,
            measurement: format!(
                "the floors row of {} was written by {} in format {theirs}; this sidecar ({}, crewlet {}) knows format {ours}, so it publishes nothing for this log",
                a.stream, pb.by, c.p.node, env!("CARGO_PKG_VERSION")
            ),
            remedy: format!(
                "upgrade {} to the release {} runs (docs/upgrading.md gives the order)",
                c.p.node, pb.by
            ),
        }];
    }
    // A row that names no writer was written by no sidecar release (a
    // tool, a hand): there is no older sidecar to name.
    if theirs < ours && !pb.by.is_empty() && pb.by != c.p.node {
        return vec![Alarm {
            alarm: AlarmName::VersionSkew,
            domain: d,
            measurement: format!(
                "the floors row of {} was written by {} in format {theirs}, an older release than this sidecar's (format {ours})",
                a.stream, pb.by
            ),
            remedy: format!(
                "upgrade {} (docs/upgrading.md gives the order); until then it holds the duty with the older release's rules",
                pb.by
            ),
        }];
    }
    Vec::new()
}

/// `config_drift`: two sidecars with one node id.
fn config_drift_node_id(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    // Two sidecars with one node id: a row published since this one
    // started, under this node id, by another session.
    if let (Some((sessions, started)), Some(pb)) = (&p.session, &a.published_by) {
        if pb.by == p.node
            && !sessions.contains(&pb.session)
            && !pb.session.is_empty()
            && pb.at > *started
        {
            found.push(Alarm {
                alarm: AlarmName::ConfigDrift,
                domain: d(),
                measurement: format!(
                    "another sidecar runs with node.id {}: it published the floors row of {} at {} under duty session {}, which is not this sidecar's",
                    p.node, a.stream, pb.at, pb.session
                ),
                remedy: "give every sidecar a node.id of its own (node.id in each one's configuration); two with one id cannot be told apart in the duty lease or the floors row".into(),
            });
        }
    }
    found
}

/// `gates_unabsorbed`: gate records the view cannot absorb.
fn gates_unabsorbed(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let now = c.now;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if let Some(view) = &a.gate_view {
        if let Some(fault) = &view.error {
            let first = view.absorbed_to.map_or(a.first_seq.max(1), |c| c + 1);
            let since = view
                .since
                .map(|s| format!(" since {s} ({} ago)", human::age(since(now, s))))
                .unwrap_or_default();
            found.push(Alarm {
                alarm: AlarmName::GatesUnabsorbed,
                domain: d(),
                measurement: format!(
                    "the gates view of {} cannot absorb gate records from {first}{since}: {fault}; nothing from {first} on is purged",
                    a.stream
                ),
                remedy: gates_remedy(a, fault, &p.gates_bucket),
            });
        }
    }
    found
}

/// `archive_failing`: the fold is failing.
fn archive_failing(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let now = c.now;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if let Some(arch) = a.archive.as_ref().filter(|s| !s.unreadable) {
        if let Some(error) = &arch.error {
            let since = arch
                .failing_since
                .map(|s| format!(" since {s} ({} ago)", human::age(since(now, s))))
                .unwrap_or_default();
            let at = arch
                .failing_segment
                .as_deref()
                .map(|s| format!(" at {s}"))
                .unwrap_or_default();
            found.push(Alarm {
                alarm: AlarmName::ArchiveFailing,
                domain: d(),
                measurement: format!(
                    "the fold of {}{at} is failing{since}: {error}; nothing past the frontier {} is purged",
                    a.stream,
                    arch.frontier.unwrap_or(0)
                ),
                remedy: archive_remedy(a, &arch.store),
            });
        }
    }
    found
}

/// `not_ready`: the floor belongs to another incarnation, or cannot be read.
fn not_ready(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if let Some(why) = &a.not_ready {
        found.push(Alarm {
            alarm: AlarmName::NotReady,
            domain: d(),
            measurement: format!("NOT READY: {why}"),
            remedy: not_ready_remedy(a),
        });
    }
    found
}

/// `broker_retention_bypass`: the stream's own limits can delete what the floor protects.
fn broker_retention_bypass(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if !a.broker_retention_bypass.is_empty() {
        let list: Vec<String> = a
            .broker_retention_bypass
            .iter()
            .map(|b| format!("{} = {}", b.limit, b.value))
            .collect();
        found.push(Alarm {
            alarm: AlarmName::BrokerRetentionBypass,
            domain: d(),
            measurement: format!(
                "stream {}'s own limits can delete records the floor protects: {}",
                a.stream,
                list.join(", ")
            ),
            remedy: bypass_remedy(&a.stream, &a.broker_retention_bypass),
        });
    }
    found
}

/// `floor_stale`: the newest floors row is older than three ticks.
fn floor_stale(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let now = c.now;
    let duty = c.duty;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    // floor_stale: the newest floors row is older than 3 ticks. Without a
    // lease and without a row it is duty_unheld's to say.
    let stale_after = p.tick * 3;
    let stale = match (a.published_at, duty) {
        (Some(at), _) => (since(now, at) > stale_after).then(|| {
            format!(
                "the floors row was last written {} ago (3 ticks is {})",
                human::age(since(now, at)),
                Dur(stale_after)
            )
        }),
        (None, DutyView::Held { holder, claimed_at }) => (since(now, *claimed_at) > stale_after)
            .then(|| match &a.not_ready {
                // A row is there, but no time can be read from it.
                Some(NotReady::FloorUnreadable { error, row: true }) => format!(
                    "the floors row does not parse ({error}), so no answer can be read from it; {holder} claimed the duty {} ago",
                    human::age(since(now, *claimed_at))
                ),
                _ => format!(
                    "no floors row has been published since {holder} claimed the duty {} ago",
                    human::age(since(now, *claimed_at))
                ),
            }),
        (None, _) => None,
    };
    if let (Some(measurement), None) = (stale, &a.stream_error) {
        let who = match duty {
            DutyView::Held { holder, .. } => format!("read the duty holder's logs ({holder}): its ticks are failing to publish"),
            _ => "no sidecar holds the duty now: if crewlet retention run --once runs from cron, set retention.tick to the cron interval (the row is stale after 3 ticks); otherwise read the last holder's logs".to_string(),
        };
        found.push(Alarm {
            alarm: AlarmName::FloorStale,
            domain: d(),
            measurement,
            remedy: who,
        });
    }
    found
}

/// The outage as its one alarm: since when, the servers tried, and that
/// nothing is to be done to the fleet's rows.
fn broker_unreachable(o: &Outage, now: DateTime<Utc>) -> Alarm {
    Alarm {
        alarm: AlarmName::BrokerUnreachable,
        domain: None,
        measurement: format!(
            "no server answers (servers tried: {}) since {} ({} ago); every term is unreadable until one does, and nothing is purged",
            o.servers,
            o.since,
            human::age(since(now, o.since))
        ),
        remedy: "check that nats-server runs on the servers named and that this host reaches them (nats server ping); nothing to do to the fleet's rows".into(),
    }
}

/// The command that announces a verified backup of `stream` (placeholders
/// for what only the backup job knows).
pub fn announce_command(stream: &str) -> String {
    format!("crewlet retention backup announce -node NODE -id ID -position {stream}=SEQ -verified")
}

fn unreadable_remedy(a: &Answer, term: TermName, cause: Cause) -> String {
    match (cause, term) {
        (Cause::MissingBucket, _) => "create the missing bucket: crewlet retention init".into(),
        (Cause::AheadOfLog, _) => {
            "see the not_ready alarm: a node reports a position past the log's end".into()
        }
        (Cause::Unreachable, _) => "see broker_unreachable: nothing to do to the fleet's rows".into(),
        // A read that failed says nothing about the rows: never a reason to
        // evict or delete one.
        (Cause::Read, TermName::Applied | TermName::SnapshotFloor | TermName::MinHold | TermName::BackupFloor) => "the read is tried again every tick; if it keeps failing, check the broker (nats server check jetstream) and the bucket named above (nats kv ls lists those that answer)".into(),
        (_, TermName::Applied | TermName::SnapshotFloor) => "fix or remove the row named above (nats kv get/put), or evict its node; check the presence and positions buckets".into(),
        (_, TermName::MinHold) => "fix or release the hold named above (crewlet retention release)".into(),
        (_, TermName::BackupFloor) => "fix or delete the backup row named above".into(),
        (_, TermName::FeedAckFloor) => format!("check that the feed consumer exists on the stream (nats consumer ls {}) and the broker answers", a.stream),
        (_, TermName::AgeFloor) => format!("check that the stream exists and the broker answers (nats stream info {})", a.stream),
        (Cause::Archive, TermName::ArchiveFloor) => format!("segments the archive had published are gone from its store: restore them from a copy of the store (crewlet retention verify-archive -stream {} lists what is there); nothing is purged until they are back", a.stream),
        (_, TermName::ArchiveFloor) => format!("check the archive's store ({}) and the broker; crewlet retention verify-archive -stream {} reads every segment", a.archive.as_ref().map_or("", |s| s.store.as_str()), a.stream),
        (_, TermName::ReplicaFloor) => format!("check the consumers on the stream (nats consumer ls {}): a consumer named in replicas.consumers must exist; if it is gone for good, take it out of the list", a.stream),
    }
}

/// The duty bucket expires its lease sooner than three of this sidecar's
/// ticks: the sidecar's renewals come too late to keep it, and each fence
/// grants less than it needs (nothing at all once the bucket's `max_age`
/// is within the fence margin), so it stalls without purging. Said as
/// `config_drift`: sidecars (or the bucket) configured with different
/// ticks.
fn duty_lease_mismatch(p: &AlarmPolicy) -> Option<Alarm> {
    let max_age = p.duty_max_age.filter(|m| !m.is_zero() && *m < p.duty_ttl)?;
    let window = crate::config::fence_window(p.duty_ttl, max_age, p.fence_margin);
    let effect = if window < crate::config::MIN_FENCE_GRANT {
        format!(
            "each fence grants {}, too little to purge: this sidecar never purges",
            Dur(window)
        )
    } else {
        format!(
            "the lease lapses between its renewals, and each fence grants only {}",
            Dur(window)
        )
    };
    Some(Alarm {
        alarm: AlarmName::ConfigDrift,
        domain: None,
        measurement: format!(
            "the duty bucket {} expires its lease after {} (max_age), sooner than three of sidecar {}'s ticks ({}): {effect}",
            p.duty_bucket,
            Dur(max_age),
            p.node,
            Dur(p.duty_ttl)
        ),
        remedy: format!(
            "give every sidecar the same retention.tick, and the bucket a max_age of three ticks: nats stream edit KV_{} --max-age {}",
            p.duty_bucket,
            Dur(p.duty_ttl)
        ),
    })
}

/// `replica_behind` (docs/trim-floor.md, Replicas): the replicas' term
/// binds, and the consumer that binds has confirmed nothing for longer
/// than `held_alarm_after` (since its ack floor last moved; since the trim
/// was first held where the broker gives no such time).
fn replica_behind(a: &Answer, p: &AlarmPolicy, now: DateTime<Utc>) -> Option<Alarm> {
    let t = a
        .terms
        .iter()
        .find(|t| t.term == TermName::ReplicaFloor && t.binding)?;
    let name = t.detail.as_deref()?;
    let copy = t
        .replicas
        .as_ref()?
        .consumers
        .iter()
        .find(|c| c.consumer == name)?;
    let quiet_since = copy.last_active.or(a.held_since)?;
    let quiet_for = since(now, quiet_since);
    if quiet_for <= p.held_alarm_after {
        return None;
    }
    let kind = match (&copy.feeds, copy.named) {
        (Some(s), _) => format!("the durable consumer stream {s} copies the log through"),
        (None, true) => "named in replicas.consumers".to_string(),
        (None, false) => "a mirror's or source's durable consumer".to_string(),
    };
    Some(Alarm {
        alarm: AlarmName::ReplicaBehind,
        domain: Some(a.domain.clone()),
        measurement: format!(
            "consumer {name} ({kind}) has confirmed up to {}, {} record(s) short of the log's last sequence {}; nothing confirmed since {} ({} ago, held_alarm_after is {}), and it pins the trim",
            copy.confirmed,
            a.last_seq.saturating_sub(copy.confirmed),
            a.last_seq,
            human::clock(quiet_since.0, now),
            human::age(quiet_for),
            Dur(p.held_alarm_after)
        ),
        remedy: format!(
            "check the copy's link: nats consumer info {s} {name} (its last activity), the stream it feeds and any leaf node between; if the copy is gone for good, leave it out (domains[].replicas.ignore: [{name}]) or delete its consumer (nats consumer rm {s} {name})",
            s = a.stream
        ),
    })
}

/// The presence bucket keeps its leases for ever (`max_age` 0, as a NATS
/// client's usual create-or-open makes it): a node that stops stays live,
/// its pin with it, and `evict` refuses it as `node_live`. Said as
/// `config_drift`: the bucket is not configured as this sidecar's
/// `retention.presence_ttl` says (docs/decisions.md, A presence bucket
/// without a TTL is config_drift).
fn presence_without_ttl(p: &AlarmPolicy) -> Option<Alarm> {
    if p.presence_max_age != Some(Duration::ZERO) {
        return None;
    }
    Some(Alarm {
        alarm: AlarmName::ConfigDrift,
        domain: None,
        measurement: format!(
            "the presence bucket {} has no TTL (max_age 0): a node that stops stays live for ever, and its position pins every log until it is evicted, which refuses a live node",
            p.presence_bucket
        ),
        remedy: format!(
            "give the bucket retention.presence_ttl as its max_age: nats stream edit KV_{} --max-age {}",
            p.presence_bucket,
            Dur(p.presence_ttl)
        ),
    })
}

/// The configuration fields that differ, each with both values:
/// `min_age: 7d here, 3d in the row`.
fn differing_fields(
    ours: &std::collections::BTreeMap<String, Option<String>>,
    theirs: &std::collections::BTreeMap<String, Option<String>>,
) -> String {
    let shown = |v: Option<&Option<String>>| match v {
        Some(Some(v)) => v.clone(),
        Some(None) => "not set".into(),
        None => "unknown".into(),
    };
    ours.keys()
        .chain(theirs.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| ours.get(*k) != theirs.get(*k) && theirs.contains_key(*k))
        .map(|k| {
            format!(
                "{k}: {} here, {} in the row",
                shown(ours.get(k)),
                shown(theirs.get(k))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Counted nodes whose own row, on the current generation, is below
/// `first_seq - 1`: the records they need to catch up by replay are gone
/// (docs/runbook.md, node_behind_log). A node carried by the memory is a
/// counted node, at the remembered position. A node without a row, or of
/// another generation, does not raise it.
fn node_behind_log(a: &Answer) -> Option<Alarm> {
    if a.stream_error.is_some() || a.first_seq <= 1 {
        return None;
    }
    let behind: Vec<&crate::floor::NodeRow> = a
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.state,
                NodeState::Counted | NodeState::Evicting | NodeState::Carried
            ) && n.left_gen.is_none()
                && n.seq.is_some_and(|s| s.saturating_add(1) < a.first_seq)
        })
        .collect();
    let first = behind.first()?;
    let named: Vec<String> = behind
        .iter()
        .take(5)
        .map(|n| format!("{} at {}", n.node, n.seq.unwrap_or(0)))
        .collect();
    let more = match behind.len() {
        0..=5 => String::new(),
        n => format!(" and {} more", n - 5),
    };
    Some(Alarm {
        alarm: AlarmName::NodeBehindLog,
        domain: Some(a.domain.clone()),
        measurement: format!(
            "{}{more} report(s) a position below what {} still holds (its first record is {}): the records they need to catch up by replay are gone",
            named.join(", "),
            a.stream,
            a.first_seq
        ),
        remedy: format!(
            "restore {} from a snapshot or a backup (crewlet retention snapshots lists who holds one); it then reports its new position; {}",
            first.node,
            evict_advice(a, first)
        ),
    })
}

/// What an operator can do about a node that pins a log, past starting it:
/// evict it (with the command) where an eviction can land, and not while
/// its eviction is already under way or where the log takes no gate
/// records.
pub fn evict_advice(a: &Answer, node: &crate::floor::NodeRow) -> String {
    if node.state == NodeState::Evicting {
        return "wait: its eviction has landed, and it stops being counted once the fence window passes"
            .into();
    }
    if a.gate_view.is_none() {
        return format!(
            "this log takes no gate records (domain {} has no gate_subject), so {} cannot be evicted from it; set a gate_subject to make eviction possible",
            a.domain, node.node
        );
    }
    format!(
        "if it is not coming back, evict it: crewlet retention evict {} -confirm {}",
        node.node, node.node
    )
}

fn held_remedy(a: &Answer, p: &AlarmPolicy, binding: TermName, now: DateTime<Utc>) -> String {
    match binding {
        TermName::Applied => {
            let node = a.terms.iter().find(|t| t.term == TermName::Applied).and_then(|t| t.detail.clone());
            match node.and_then(|n| a.nodes.iter().find(|r| *r.node == *n)) {
                Some(row) if !row.live => {
                    let since_txt = row
                        .updated_at
                        .map(|u| format!(" and has not reported since {} ({} ago)", u, human::age(since(now, u))))
                        .unwrap_or_default();
                    format!(
                        "{} is not live{since_txt}; it pins applied at {}: start it, or {}",
                        row.node,
                        row.seq.unwrap_or(0),
                        evict_advice(a, row)
                    )
                }
                Some(row) if row.state == NodeState::LogDiverged => format!("{} reports log_diverged: rebuild it from a snapshot, or {}", row.node, evict_advice(a, row)),
                Some(row) if row.seq.is_none() => format!("{} is live but has not reported a position on {}: check that it applies this log", row.node, a.stream),
                Some(row) => format!("{} is live but its position is not advancing past {}: check its applier", row.node, row.seq.unwrap_or(0)),
                None => "a counted node pins applied: see the node table".into(),
            }
        }
        // The holds bucket cannot be read: no hold can be listed or
        // released until it can (term_unreadable says why).
        TermName::MinHold
            if a
                .terms
                .iter()
                .any(|t| t.term == TermName::MinHold && t.state_is_unreadable()) =>
        {
            "the holds bucket cannot be read (term_unreadable says why): a missing one is recreated by crewlet retention init, and the holds the floors row carries stay in force until they expire; nothing can be listed or released until then".into()
        }
        TermName::MinHold => {
            let detail = a.terms.iter().find(|t| t.term == TermName::MinHold).and_then(|t| t.detail.clone());
            // The term's detail is "<id> (<owner>)": the id is its first word.
            match detail.as_deref().and_then(|d| d.split_whitespace().next().map(|id| (d, id))) {
                Some((detail, id)) => format!(
                    "the hold {detail} pins the log: release it when its holder is done (crewlet retention release -stream {} {})",
                    a.stream,
                    human::shell_word(id)
                ),
                None => format!(
                    "a hold pins the log: see which (crewlet retention holds -stream {}) and release it when its holder is done",
                    a.stream
                ),
            }
        }
        // Under the operator policy the trim waits for an acknowledgement:
        // the one that would move it is up to what the other terms allow.
        TermName::BackupFloor if p.backup_floor == BackupPolicy::Operator => {
            let next = a
                .terms
                .iter()
                .filter(|t| t.term != TermName::BackupFloor)
                .filter_map(|t| t.seq())
                .min()
                .unwrap_or(a.last_seq)
                .min(a.last_seq);
            let who = p.backup_owner.as_deref().map(|o| format!("{o} acknowledges")).unwrap_or_else(|| "acknowledge".into());
            format!(
                "the acknowledged backup point holds the trim: once a copy of {} up to {next} is safe, {who} it (crewlet retention ack -stream {} -position {next})",
                a.stream, a.stream
            )
        }
        TermName::BackupFloor => match &p.backup_owner {
            Some(o) => format!("the backup point holds the trim: {o} takes and verifies a backup and announces it ({})", announce_command(&a.stream)),
            None => format!("the backup point holds the trim: take and verify a backup and announce it ({}); set retention.backup_owner to name who does", announce_command(&a.stream)),
        },
        TermName::SnapshotFloor => "too few counted nodes hold a verified snapshot: check the nodes' snapshot skip reasons (crewlet retention snapshots)".into(),
        TermName::FeedAckFloor => format!("the feed consumer on {} is not acknowledging: fix the feed", a.stream),
        TermName::AgeFloor => "nothing to do: min_age holds the trim".into(),
        TermName::ArchiveFloor => format!("the archive's fold is behind: see archive_failing if it fires; otherwise raise archive.fold_per_tick so that each tick folds more (crewlet retention verify-archive -stream {} shows what is archived)", a.stream),
        TermName::ReplicaFloor => {
            let who = a.terms.iter().find(|t| t.term == TermName::ReplicaFloor).and_then(|t| t.detail.clone()).unwrap_or_default();
            format!("the copy through consumer {who} has not stored the records: check its link (nats consumer info {} {who}); if the copy is gone for good, leave it out (replicas.ignore) or delete its consumer", a.stream)
        }
    }
}

fn archive_remedy(a: &Answer, store: &str) -> String {
    let check = match store.split_once(':') {
        Some(("object_store", b)) => format!("check the object store {b} (nats object info {b}: does it exist, is its stream full or at a limit?)"),
        Some(("dir", d)) => format!("check the directory {d} (free space, permissions, the mount)"),
        _ => "check the archive's store".into(),
    };
    format!(
        "{check}; the next tick retries from the frontier; crewlet retention verify-archive -stream {} reads every segment and names the bad one",
        a.stream
    )
}

fn gates_remedy(a: &Answer, fault: &GateFault, bucket: &str) -> String {
    match fault {
        GateFault::BucketUnreadable { .. } => {
            format!("check that the gates bucket {bucket} exists and the broker answers (crewlet retention init creates it)")
        }
        GateFault::CursorMalformed { key, .. } => format!(
            "delete the malformed row so that the view is rebuilt from the log: nats kv del {bucket} {key}"
        ),
        GateFault::CursorPastLog { .. } => format!(
            "the log ends before the view's cursor, so it was restored: open a new generation (crewlet retention reanchor -stream {}), which starts a fresh view",
            a.stream
        ),
        GateFault::AbsorbFailed { .. } => format!(
            "the error names what failed; check the gates bucket {bucket} and the gate records on {} (the duty holder logs gates_unabsorbed each tick)",
            a.stream
        ),
    }
}

/// The way out of `memory_lost` (docs/runbook.md, not_ready): the nodes
/// and live holds the buckets hold now, the preview of adopting exactly
/// these, and the confirmed `adopt` (after `init` where the floors bucket
/// itself is gone: `adopt` writes the log's first row into it).
pub fn memory_lost_remedy(a: &Answer, lost: &crate::floor::memory::Lost) -> String {
    let nodes: Vec<String> = a
        .nodes
        .iter()
        .map(|n| match n.seq {
            Some(seq) => format!("{} at {seq}", n.node),
            None => n.node.to_string(),
        })
        .collect();
    let holds: Vec<String> = a
        .live_holds
        .iter()
        .map(|(id, seq)| format!("{id} at {seq}"))
        .collect();
    let seen = format!(
        "nodes seen now: {}; live holds seen now: {}",
        if nodes.is_empty() {
            "none".to_string()
        } else {
            nodes.join(", ")
        },
        if holds.is_empty() {
            "none".to_string()
        } else {
            holds.join(", ")
        }
    );
    let init = if matches!(lost, crate::floor::memory::Lost::FloorsMissing) {
        "recreate the floors bucket (crewlet retention init), then "
    } else {
        ""
    };
    let adopt = match a.stream_created {
        Some(c) => format!("crewlet retention adopt -stream {} -confirm {c}", a.stream),
        None => format!(
            "crewlet retention adopt -stream {} (it prints the -confirm to give)",
            a.stream
        ),
    };
    format!(
        "a node or hold the lost memory kept but no bucket shows now is no longer protected once adopted ({seen}); if every pin still needed is among them (or restored into its bucket), preview: crewlet retention status --if-adopted {}; then {init}adopt: {adopt}",
        a.stream
    )
}

/// What a reanchor costs, said wherever one is offered.
const REANCHOR_COST: &str = "a new generation voids every backup and snapshot taken before it, and counts every node at 0 until it reports in the new generation: the trim waits for all of them";

fn not_ready_remedy(a: &Answer) -> String {
    match &a.not_ready {
        Some(NotReady::Recreated) => match a.live_stream_created {
            Some(c) => format!("if the new stream is the one to keep: crewlet retention reanchor -stream {} -confirm {c} ({REANCHOR_COST})", a.stream),
            None => format!("run crewlet retention reanchor -stream {} to see the live stream's created", a.stream),
        },
        Some(NotReady::AheadOfLog) => {
            let ahead: Vec<String> = a.nodes.iter().filter(|r| r.state == NodeState::AheadOfLog).map(|r| format!("{} at {}", r.node, r.seq.unwrap_or(0))).collect();
            format!(
                "the log ends at {} but {} report(s) past it: the log was restored or rebuilt; decide which history to keep before anything is trimmed (reanchor, or rebuild the nodes)",
                a.last_seq,
                ahead.join(", ")
            )
        }
        Some(NotReady::FloorUnreadable { row: false, .. }) => "the read is tried again every tick; if it keeps failing, check the broker (nats server check jetstream) and the floors bucket (nats kv ls lists the buckets that answer); nothing to do to the rows".into(),
        Some(NotReady::FloorUnreadable { .. }) => format!(
            "a tick never overwrites an unreadable floors row; replace it with a new generation: crewlet retention reanchor -stream {} (prints the -confirm to give)",
            a.stream
        ),
        Some(NotReady::GenerationUnknown { highest }) => match a.stream_created {
            Some(c) => format!(
                "the floors row was lost; open the generation after {highest}: crewlet retention reanchor -stream {} -confirm {c} ({REANCHOR_COST})",
                a.stream
            ),
            None => format!(
                "the floors row was lost; run crewlet retention reanchor -stream {} to see the -confirm that opens the generation after {highest}",
                a.stream
            ),
        },
        Some(NotReady::MemoryLost { lost, .. }) => memory_lost_remedy(a, lost),
        None => "see the status of this domain".into(),
    }
}

#[cfg(test)]
mod tests;
