//! The alarms' types: every alarm's name (one table), an alarm as status
//! prints it, and the policy the evaluation reads.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::{BackupPolicy, Config};
use crate::rows::Timestamp;

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

/// How long ago `then` was, at `now` (0 for a time ahead).
pub(super) fn since(now: DateTime<Utc>, then: Timestamp) -> Duration {
    now.signed_duration_since(then.0)
        .to_std()
        .unwrap_or_default()
}

/// What a reanchor costs, said wherever one is offered.
pub(super) const REANCHOR_COST: &str = "a new generation voids every backup and snapshot taken before it, and counts every node at 0 until it reports in the new generation: the trim waits for all of them";
