//! PURE: retention answers → alarms, each with its measurement and the
//! remedy an on-call engineer acts on (docs/runbook.md, Alarms). `status`, the
//! running sidecar and `run --once` all evaluate alarms here.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::{BackupPolicy, Dur};
use crate::floor::{Answer, NodeState, NotReady, Outage, TermName, TermState};
use crate::human;
use crate::stream_check::bypass_remedy;

mod remedies;
mod replicas;
mod types;
pub use remedies::{announce_command, evict_advice, memory_lost_remedy, recreate_consumer};
use remedies::{
    archive_remedy, differing_fields, gates_remedy, held_remedy, not_ready_remedy,
    unreadable_remedy,
};
use replicas::{replica_behind, replica_unprotected};
use types::since;
pub use types::*;

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
        .filter_map(|a| a.borrow().current_at)
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
        // A lease that cannot be read (a leader being elected, a server
        // lost at the head of the list) says nothing of who holds it; a
        // fresh floors row says someone trims.
        DutyView::Unreadable(_) if fresh_row => {}
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
pub(super) struct Ctx<'a> {
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

/// `floor_stale`: the floors row is not known to stand within three ticks
/// (its own `at`, or the duty holder's `_tick` of the same session that
/// does not name it).
fn floor_stale(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let p = c.p;
    let now = c.now;
    let duty = c.duty;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    // floor_stale: the floors row is not known to stand within 3 ticks
    // (the holder's `_tick`, or the row's own time). Without a lease and
    // without a row it is duty_unheld's to say.
    let stale_after = p.tick * 3;
    let stale = match (a.current_at.or(a.published_at), duty) {
        (Some(at), _) => (since(now, at) > stale_after).then(|| {
            format!(
                "the floors row was last confirmed {} ago, by a write or the duty holder's tick (3 ticks is {})",
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

#[cfg(test)]
mod tests;
