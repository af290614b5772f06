//! PURE: the alarms about the log's copies: `replica_unprotected` (a copy
//! the log cannot see, or whose durable consumer is gone) and
//! `replica_behind` (a copy that stopped taking records), each with the
//! remedy that fits the copy's state (docs/runbook.md, Alarms).

use chrono::{DateTime, Utc};

use super::remedies;
use super::types::{since, Alarm, AlarmName, AlarmPolicy};
use super::Ctx;
use crate::config::Dur;
use crate::floor::{Answer, TermName};
use crate::human;

/// `replica_unprotected`: a copy of the log through an ephemeral
/// consumer (it pins nothing), or through a durable consumer the log does
/// not have (the trim waits for it), each with how to protect it.
pub(super) fn replica_unprotected(c: &Ctx) -> Vec<Alarm> {
    let a = c.a;
    let d = || Some(c.a.domain.clone());
    let mut found = Vec::new();
    if !a.unprotected_copies.is_empty() {
        found.push(Alarm {
            alarm: AlarmName::ReplicaUnprotected,
            domain: d(),
            measurement: format!(
                "{} cop{} {} through an ephemeral consumer: the log cannot see what {} stored, so the trim cannot wait for {}",
                human::list(&a.unprotected_copies),
                if a.unprotected_copies.len() == 1 { "ies" } else { "y" },
                a.stream,
                if a.unprotected_copies.len() == 1 { "it has" } else { "they have" },
                if a.unprotected_copies.len() == 1 { "it" } else { "them" },
            ),
            remedy: "recreate its mirror or source with a durable consumer of its own on the log (docs/contract.md, Protecting a mirror or source); until then it may miss records the trim deletes".into(),
        });
    }
    for o in &a.orphaned_copies {
        found.push(Alarm {
            alarm: AlarmName::ReplicaUnprotected,
            domain: d(),
            measurement: format!(
                "{} {} {} through durable consumer {}, which does not exist on the log: nothing is purged until it is back or the copy is left out",
                o.stream,
                if o.mirror { "mirrors" } else { "sources" },
                a.stream,
                o.consumer
            ),
            remedy: remedies::recreate_consumer(&a.stream, o),
        });
    }
    found
}

/// `replica_behind` (docs/trim-floor.md, Replicas): the replicas' term
/// binds, and the consumer that binds has neither confirmed nor been
/// delivered anything for longer than `held_alarm_after` (since its ack
/// floor or its delivered sequence last moved, whichever is later; since
/// the trim was first held where the broker gives neither). A copy still
/// being delivered to is confirming, not behind: a durable sourcing
/// consumer confirms only now and then.
pub(super) fn replica_behind(a: &Answer, p: &AlarmPolicy, now: DateTime<Utc>) -> Option<Alarm> {
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
    let quiet_since = match (copy.last_active, copy.delivered_active) {
        (Some(a), Some(d)) => Some(a.max(d)),
        (a, d) => a.or(d),
    }
    .or(a.held_since)?;
    let quiet_for = since(now, quiet_since);
    if quiet_for <= p.held_alarm_after {
        return None;
    }
    let kind = match (&copy.feeds, copy.named) {
        (Some(s), _) => format!("the durable consumer stream {s} copies the log through"),
        (None, true) => "named in replicas.consumers".to_string(),
        (None, false) => "a mirror's or source's durable consumer".to_string(),
    };
    let paused = match (copy.paused, copy.paused_until) {
        (false, _) => String::new(),
        (true, Some(until)) => format!(
            "; it is paused on the broker until {}",
            human::clock(until.0, now)
        ),
        (true, None) => "; it is paused on the broker".into(),
    };
    let s = &a.stream;
    let remedy = if copy.paused {
        format!(
            "it is paused: resume it (nats consumer resume {s} {name}) if nobody paused it on purpose; if the copy is gone for good, {}",
            gone_for_good(s, name, copy.named)
        )
    } else if copy.named {
        format!(
            "check the system that reads through it (nats consumer info {s} {name}: its last activity); if it is gone for good, {}",
            gone_for_good(s, name, true)
        )
    } else {
        format!(
            "check the copy's link: nats consumer info {s} {name} (its last activity), the stream it feeds and any leaf node between; if the copy is gone for good, {}",
            gone_for_good(s, name, false)
        )
    };
    Some(Alarm {
        alarm: AlarmName::ReplicaBehind,
        domain: Some(a.domain.clone()),
        measurement: format!(
            "consumer {name} ({kind}) has confirmed up to {}, {} record(s) short of the log's last sequence {}; nothing delivered or confirmed since {} ({} ago, held_alarm_after is {}){paused}, and it pins the trim",
            copy.confirmed,
            a.last_seq.saturating_sub(copy.confirmed),
            a.last_seq,
            human::clock(quiet_since.0, now),
            human::age(quiet_for),
            Dur(p.held_alarm_after)
        ),
        remedy,
    })
}

/// How to stop waiting for a copy or consumer gone for good: a named one
/// leaves `replicas.consumers` (`replicas.ignore` refuses a named
/// consumer), a replica is left out or its consumer deleted.
fn gone_for_good(stream: &str, name: &str, named: bool) -> String {
    if named {
        format!("take it out of domains[].replicas.consumers (crewlet retention status --if-ignored {name} previews it) or delete it (nats consumer rm {stream} {name})")
    } else {
        format!("leave it out (domains[].replicas.ignore: [{name}]) or delete its consumer (nats consumer rm {stream} {name}); crewlet retention status --if-ignored {name} previews either")
    }
}
