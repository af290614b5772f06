//! Each alarm fires with its measurement and remedy, and clears when its
//! cause is gone.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::floor::tests::{now, ts, World, CREATED, S};
use crate::floor::Cause;
use crate::rows::Timestamp;

fn policy() -> AlarmPolicy {
    AlarmPolicy {
        tick: Duration::from_secs(10),
        held_alarm_after: Duration::from_secs(86400),
        backup_max_age: Duration::from_secs(86400),
        backup_floor: BackupPolicy::Engine,
        backup_owner: Some("platform-oncall".into()),
        gates_bucket: "crewlet_gates".into(),
        max_clock_skew: Duration::from_secs(2),
        node: "node-1".into(),
        min_capacity: 1 << 30,
        duty_bucket: "crewlet_duty".into(),
        duty_ttl: Duration::from_secs(30),
        fence_margin: Duration::from_secs(12),
        duty_max_age: None,
        presence_bucket: "crewlet_presence".into(),
        presence_ttl: Duration::from_secs(30),
        presence_max_age: None,
        credentials: "nats.user alice and its password".into(),
        session: None,
    }
}

fn held() -> DutyView {
    DutyView::Held {
        holder: "node-1".into(),
        claimed_at: Timestamp(now() - chrono::Duration::hours(1)),
    }
}

/// A world whose floors row is fresh, so floor_stale stays quiet.
fn fresh() -> World {
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published", "at": ts(-5)}));
    w
}

fn alarms(w: &World) -> Vec<Alarm> {
    evaluate(&[w.answer()], &held(), None, &policy(), now(), None)
}

fn names(a: &[Alarm]) -> Vec<&str> {
    a.iter().map(|a| a.alarm.as_str()).collect()
}

#[test]
fn a_healthy_domain_has_none() {
    assert_eq!(alarms(&fresh()), vec![]);
}

#[test]
fn duty_unheld_is_fleet_level_and_quiet_between_cron_runs() {
    let with_duty =
        |w: &World, duty: &DutyView| evaluate(&[w.answer()], duty, None, &policy(), now(), None);
    let unheld = |w: &World| with_duty(w, &DutyView::Unheld);
    // `run --once` from cron: no lease between runs, a fresh row. Calm.
    assert_eq!(names(&unheld(&fresh())), Vec::<&str>::new());
    // Nothing ever published, and no lease: nobody trims.
    let a = unheld(&World::new());
    assert_eq!(names(&a), ["duty_unheld"]);
    assert_eq!(a[0].line(), "ALARM duty_unheld *: no sidecar holds the trim duty and no floors row was published within 3 ticks (30s); nothing is being trimmed — start a sidecar with node.duty: true (crewlet retention run), or check the cron job that runs crewlet retention run --once");
    // The cron runs stopped (or run less often than every 3 ticks).
    let mut stopped = World::new();
    stopped.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published", "at": ts(-60)}));
    let a = unheld(&stopped);
    assert_eq!(names(&a), ["duty_unheld", "floor_stale"]);
    assert!(
        a[1].remedy
            .contains("set retention.tick to the cron interval"),
        "{}",
        a[1].remedy
    );
    // The lease unreadable (a status through a list that starts with a
    // dead server, a leader being elected): a fresh row says someone
    // trims, so nothing is said of the duty; with no fresh row, it is
    // said as unreadable.
    let unreadable = |w: &World| {
        with_duty(
            w,
            &DutyView::Unreadable("reading the duty lease: no answer within 1s".into()),
        )
    };
    assert_eq!(names(&unreadable(&fresh())), Vec::<&str>::new());
    let a = unreadable(&World::new());
    assert_eq!(names(&a), ["duty_unheld"]);
    assert!(a[0].measurement.contains("could not be read"), "{a:?}");
}

#[test]
fn log_headroom() {
    let mut w = fresh();
    if let Ok(s) = &mut w.stream {
        s.bytes = 970_000_000;
    }
    let a = alarms(&w);
    assert_eq!(names(&a), ["log_headroom"]);
    assert!(
        a[0].measurement.starts_with("headroom_fraction 0.036"),
        "{}",
        a[0].measurement
    );
    assert!(
        a[0].remedy
            .contains("the trim is held by backup_floor, applied")
            && a[0]
                .remedy
                // 1097 MiB holds appends to 1,078,394,880 bytes, of which
                // 970,000,000 is under nine tenths; 1096 MiB is not.
                .contains(
                    "crewlet retention set-capacity CREWLET_TRACKER_LOG 1097MiB -confirm 1097MiB"
                ),
        "{}",
        a[0].remedy
    );
}

#[test]
fn backup_age_names_the_owner_and_clears() {
    let mut w = fresh();
    w.backup("node-1", "b1", 800, -3 * 86400 - 60, true, true);
    let a = alarms(&w);
    assert_eq!(names(&a), ["backup_age"]);
    assert_eq!(
        a[0].measurement,
        "the newest complete backup is 3 days old (backup_max_age is 24h)"
    );
    assert!(a[0].remedy.contains("(owner: platform-oncall)"));
    w.backup("node-1", "b1", 800, -60, true, true);
    assert_eq!(alarms(&w), vec![]);
    // Under operator, the acknowledgement is what is aged.
    let mut w = fresh();
    w.policy.backup_floor = BackupPolicy::Operator;
    let mut p = policy();
    p.backup_floor = BackupPolicy::Operator;
    let a = evaluate(&[w.answer()], &held(), None, &p, now(), None);
    assert_eq!(
        a[0].measurement,
        format!("no acknowledgement has been given for {S}")
    );
    assert!(a[0]
        .remedy
        .contains(&format!("crewlet retention ack -stream {S} -position N")));
}

/// Manifests completed before the log's generation opened do not count,
/// and backup_age says that, not that no backup names the log.
#[test]
fn backup_age_over_manifests_older_than_the_generation_says_so() {
    let mut w = fresh();
    for (id, days) in [("b1", 40), ("b2", 35)] {
        w.backup("node-1", id, 800, -days * 86400, true, true);
    }
    let a = alarms(&w);
    let age = a
        .iter()
        .find(|x| x.alarm == "backup_age")
        .expect("backup_age");
    assert!(
        age.measurement.contains(
            "no verified backup of CREWLET_TRACKER_LOG was completed since this generation opened"
        ) && age.measurement.contains("2 older one(s)"),
        "{age:?}"
    );
}

#[test]
fn term_unreadable_names_the_error_and_init() {
    let mut w = fresh();
    w.holds = None;
    let a = alarms(&w);
    assert_eq!(names(&a), ["term_unreadable"]);
    assert_eq!(
        a[0].measurement,
        "min_hold is unreadable: bucket crewlet_holds does not exist; run `crewlet retention init`"
    );
    assert_eq!(
        a[0].remedy,
        "create the missing bucket: crewlet retention init"
    );
}

#[test]
fn trim_held_names_the_absent_node_and_the_evict_command() {
    let mut w = World::new();
    w.node("node-4", false, Some(120));
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 121, "trim_floor_state": "published",
        "blocked_by": ["applied"], "held_since": ts(-2 * 86400), "at": ts(-5)}));
    let a = alarms(&w);
    assert_eq!(names(&a), ["trim_held"]);
    // The trim's clock, named: held_since, two days back (a date).
    let m = &a[0].measurement;
    assert!(
        m.starts_with(
            "blocked_by applied, backup_floor: the trim has been held for 2 days (held_since 20"
        ) && m.ends_with("; held_alarm_after is 24h)"),
        "{m}"
    );
    assert!(
        a[0].remedy
            .starts_with("node-4 is not live and has not reported since "),
        "{}",
        a[0].remedy
    );
    // This domain takes no gate records: the remedy says so, and never
    // names an eviction that could not land.
    assert!(a[0].remedy.ends_with("it pins applied at 120: start it, or this log takes no gate records (domain tracker has no gate_subject), so node-4 cannot be evicted from it; set a gate_subject to make eviction possible"), "{}", a[0].remedy);
    assert!(!a[0].remedy.contains("retention evict"), "{}", a[0].remedy);
    let mut gated = w.clone();
    gated.domain.gate_subject = Some("crewlet.tracker.gate".into());
    let a = alarms(&gated);
    assert!(a[0].remedy.ends_with("it pins applied at 120: start it, or if it is not coming back, evict it: crewlet retention evict node-4 -confirm node-4"), "{}", a[0].remedy);
    // Inside the fence window its eviction is under way: no second one.
    let mut evicting = gated.clone();
    evicting.gate("node-4", "evicted", 10);
    let a = alarms(&evicting);
    assert!(a[0].remedy.ends_with("start it, or wait: its eviction has landed, and it stops being counted once the fence window passes"), "{}", a[0].remedy);
    // Not yet long enough: quiet.
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 121, "trim_floor_state": "published",
        "blocked_by": ["applied"], "held_since": ts(-3600), "at": ts(-5)}));
    assert_eq!(alarms(&w), vec![]);
}

#[test]
fn not_ready_prints_the_reanchor_command() {
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": "2026-11-01T00:00:00Z", "floor": 5, "trim_floor_state": "published", "at": ts(-5)}));
    let a = alarms(&w);
    assert_eq!(names(&a), ["not_ready"]);
    assert_eq!(a[0].remedy, format!("if the new stream is the one to keep: crewlet retention reanchor -stream {S} -confirm {CREATED} ({REANCHOR_COST})"));
}

#[test]
fn broker_retention_bypass() {
    let mut w = fresh();
    if let Ok(s) = &mut w.stream {
        s.facts.max_age = std::time::Duration::from_secs(86400);
        s.facts.discard_new = true;
    }
    let a = alarms(&w);
    assert_eq!(names(&a), ["broker_retention_bypass"]);
    assert!(
        a[0].measurement.ends_with("max_age = 86400s"),
        "{}",
        a[0].measurement
    );
}

#[test]
fn a_trim_held_by_the_backup_names_its_owner_not_another_alarm() {
    let mut w = fresh();
    w.backup("node-1", "b1", 100, -60, true, true);
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published",
        "blocked_by": ["backup_floor"], "held_since": ts(-2 * 86400), "at": ts(-5)}));
    let a = alarms(&w);
    let held = a
        .iter()
        .find(|x| x.alarm == "trim_held")
        .expect("trim_held");
    assert!(
        held.remedy
            .contains("platform-oncall takes and verifies a backup"),
        "{}",
        held.remedy
    );
    assert!(
        !held.remedy.contains("alarm"),
        "names no other alarm: {}",
        held.remedy
    );
}

#[test]
fn floor_stale() {
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published", "at": ts(-120)}));
    let a = alarms(&w);
    assert_eq!(names(&a), ["floor_stale"]);
    assert_eq!(
        a[0].measurement,
        "the floors row was last confirmed 2 minutes ago, by a write or the duty holder's tick (3 ticks is 30s)"
    );
    // Nobody holds the duty and the row is stale: nobody trims, and if it
    // is cron that runs the ticks, they are further apart than 3 ticks.
    let a = evaluate(
        &[w.answer()],
        &DutyView::Unheld,
        None,
        &policy(),
        now(),
        None,
    );
    assert_eq!(names(&a), ["duty_unheld", "floor_stale"]);
    // The holder's tick a few seconds ago vouches for the unchanged row,
    // however old it is; a tick that names the log as unpublished does not.
    let row = json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published", "at": ts(-120), "by": "node-1", "session": "s"});
    let tick = |unpublished: serde_json::Value| json!({"at": ts(-5), "by": "node-1", "session": "s", "format": 2, "unpublished": unpublished});
    w.floors = Some(vec![
        (S.into(), row.to_string()),
        ("_tick".into(), tick(json!([])).to_string()),
    ]);
    assert_eq!(names(&alarms(&w)), Vec::<String>::new());
    w.floors = Some(vec![
        (S.into(), row.to_string()),
        ("_tick".into(), tick(json!([S])).to_string()),
    ]);
    assert_eq!(names(&alarms(&w)), ["floor_stale"]);
    // A tick of another duty session vouches only for the rows it wrote.
    w.floors = Some(vec![
        (S.into(), row.to_string()),
        (
            "_tick".into(),
            json!({"at": ts(-5), "by": "node-1", "session": "later", "format": 2, "unpublished": []})
                .to_string(),
        ),
    ]);
    assert_eq!(names(&alarms(&w)), ["floor_stale"]);
    // A tick of a newer release vouches for nothing.
    w.floors = Some(vec![
        (S.into(), row.to_string()),
        (
            "_tick".into(),
            json!({"at": ts(-5), "format": 99}).to_string(),
        ),
    ]);
    assert_eq!(names(&alarms(&w)), ["floor_stale"]);
}

/// A floors row that is there but does not parse is not "nothing
/// published": the alarm says the row does not parse, and why.
#[test]
fn floor_stale_over_a_row_that_does_not_parse_says_so() {
    let mut w = World::new();
    w.floors = Some(vec![(S.to_string(), "{\"stream\": 7}".to_string())]);
    let a = alarms(&w);
    let stale = a
        .iter()
        .find(|x| x.alarm == "floor_stale")
        .expect("floor_stale");
    assert!(
        stale.measurement.contains("the floors row does not parse")
            && stale.measurement.contains("stream")
            && !stale
                .measurement
                .contains("no floors row has been published"),
        "{stale:?}"
    );
}

/// An operator's trial: under `backup_floor: operator` the trim waits for an
/// acknowledgement, not an announced backup: the remedy prints the `ack`
/// that would move it, with the position the other terms allow.
#[test]
fn a_trim_held_under_operator_policy_prints_the_ack() {
    let mut w = fresh();
    w.policy.backup_floor = BackupPolicy::Operator;
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published",
        "blocked_by": ["backup_floor"], "held_since": ts(-2 * 86400), "at": ts(-5)}));
    let mut p = policy();
    p.backup_floor = BackupPolicy::Operator;
    let a = evaluate(&[w.answer()], &held(), None, &p, now(), None);
    let held = a
        .iter()
        .find(|x| x.alarm == "trim_held")
        .expect("trim_held");
    let next = w
        .answer()
        .terms
        .iter()
        .filter(|t| t.term != TermName::BackupFloor)
        .filter_map(|t| t.seq())
        .min()
        .expect("another term binds next");
    assert!(
        held.remedy.contains(&format!(
            "crewlet retention ack -stream {S} -position {next}"
        )),
        "{}",
        held.remedy
    );
    assert!(!held.remedy.contains("backup announce"), "{}", held.remedy);
}

/// An operator's trial: a hold that pins the log is released by its own id,
/// printed whole, never a placeholder.
#[test]
fn a_trim_held_by_a_hold_prints_its_release() {
    let mut w = fresh();
    w.hold("nightly-7", 40, 3600);
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published",
        "blocked_by": ["min_hold"], "held_since": ts(-2 * 86400), "at": ts(-5)}));
    let a = alarms(&w);
    let held = a
        .iter()
        .find(|x| x.alarm == "trim_held")
        .expect("trim_held");
    assert!(
        held.remedy
            .contains(&format!("crewlet retention release -stream {S} nightly-7")),
        "{}",
        held.remedy
    );
    assert!(!held.remedy.contains("HOLD_ID"), "{}", held.remedy);
}

/// An outage is one fleet-level condition: every term unreadable for it
/// alone, nothing licensed, and no row remedy whatever the rows said when
/// last read.
#[test]
fn an_outage_is_one_alarm_and_no_row_remedy() {
    let mut w = World::new();
    // Rows that, read, would raise alarms naming reanchor and evict.
    w.floors = Some(vec![(S.into(), "not json".into())]);
    let outage = Outage {
        since: Timestamp(now() - chrono::Duration::seconds(90)),
        servers: "nats://a:4222,nats://b:4222".into(),
        refused: None,
    };
    let answer = w.answer().unreachable(&outage);
    assert_eq!(answer.trim_to, 0);
    assert!(answer.not_ready.is_none());
    assert!(answer
        .terms
        .iter()
        .filter(|t| !matches!(t.state, TermState::NotApplicable))
        .all(|t| matches!(
            &t.state,
            TermState::Unreadable { error, cause: Cause::Unreachable } if error.contains("nats://a:4222")
        )));
    assert!(crate::floor::purge_target(&answer).is_none());
    let a = evaluate(&[answer], &held(), None, &policy(), now(), Some(&outage));
    assert_eq!(names(&a), ["broker_unreachable"]);
    assert_eq!(a[0].domain, None);
    let line = a[0].line();
    assert!(
        line.contains("nats://a:4222,nats://b:4222") && line.contains("90 seconds ago"),
        "{line}"
    );
    for dangerous in ["reanchor", "evict", "delete"] {
        assert!(!line.contains(dangerous), "{line}");
    }
}

/// A duty bucket that keeps the lease for less than three of this
/// sidecar's ticks is said, not left to stall the purge silently: with a
/// 10 s tick and a 6 s `max_age`, a fence grants nothing.
#[test]
fn a_duty_bucket_shorter_than_three_ticks_is_config_drift() {
    let a = World::new().answer();
    let mut p = policy();
    p.duty_max_age = Some(Duration::from_secs(6));
    let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
    let drift = alarms
        .iter()
        .find(|x| x.alarm == "config_drift" && x.domain.is_none())
        .expect("the alarm");
    for want in [
        "crewlet_duty expires its lease after 6s (max_age)",
        "three of sidecar node-1's ticks (30s)",
        "each fence grants 0s, too little to purge: this sidecar never purges",
    ] {
        assert!(drift.measurement.contains(want), "{want}: {drift:?}");
    }
    assert!(
        drift
            .remedy
            .contains("nats stream edit KV_crewlet_duty --max-age 30s"),
        "{drift:?}"
    );
    // Three ticks or longer (a longer lease only slows a failover), or
    // not read: nothing to say.
    for max_age in [
        Some(Duration::from_secs(30)),
        Some(Duration::from_secs(60)),
        None,
    ] {
        p.duty_max_age = max_age;
        let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
        assert!(
            !alarms.iter().any(|x| x.alarm == "config_drift"),
            "{max_age:?}: {alarms:?}"
        );
    }
}

/// A presence bucket without a TTL is named with the command that gives
/// it one; a TTL, or one not read, says nothing.
#[test]
fn a_presence_bucket_without_a_ttl_is_config_drift() {
    let a = fresh().answer();
    let mut p = policy();
    p.presence_max_age = Some(Duration::ZERO);
    let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
    let drift = alarms
        .iter()
        .find(|x| x.alarm == "config_drift")
        .expect("the alarm");
    assert!(
        drift.measurement.contains("crewlet_presence has no TTL"),
        "{drift:?}"
    );
    assert!(
        drift
            .remedy
            .contains("nats stream edit KV_crewlet_presence --max-age 30s"),
        "{drift:?}"
    );
    for max_age in [Some(Duration::from_secs(30)), None] {
        p.presence_max_age = max_age;
        let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
        assert!(
            !alarms.iter().any(|x| x.alarm == "config_drift"),
            "{max_age:?}: {alarms:?}"
        );
    }
}

/// `replica_behind`: the replicas' term binds and its consumer has been
/// quiet past `held_alarm_after`; quiet for less, or another term binding,
/// says nothing.
#[test]
fn replica_behind_names_the_consumer_and_how_far_short() {
    use crate::floor::{FeedState, ReplicaState, ReplicasRead};
    let with_delivered = |last_active: i64, delivered: Option<i64>, confirmed: u64| {
        let mut w = fresh();
        w.replicas = Some(Ok(ReplicasRead {
            replicas: vec![ReplicaState {
                consumer: "dr".into(),
                named: false,
                state: FeedState {
                    ack_floor_seq: confirmed,
                    delivered_seq: confirmed,
                    num_ack_pending: 5,
                    num_pending: 10,
                },
                last_active: Some(Timestamp(now() + chrono::Duration::seconds(last_active))),
                delivered_active: delivered
                    .map(|d| Timestamp(now() + chrono::Duration::seconds(d))),
                paused: false,
                paused_until: None,
                feeds: None,
            }],
            ignored: vec![],
            ..Default::default()
        }));
        let mut p = policy();
        p.held_alarm_after = Duration::from_secs(3600);
        evaluate(&[w.answer()], &held(), None, &p, now(), None)
    };
    let with = |last_active: i64, confirmed: u64| with_delivered(last_active, None, confirmed);
    let a = with(-2 * 3600, 0);
    let behind = a
        .iter()
        .find(|x| x.alarm == "replica_behind")
        .unwrap_or_else(|| panic!("{a:?}"));
    assert!(
        behind.measurement.starts_with("consumer dr (a mirror's or source's durable consumer) has confirmed up to 0, 1000 record(s) short of the log's last sequence 1000")
            && behind.measurement.contains("2 hours ago"),
        "{behind:?}"
    );
    assert!(
        behind
            .remedy
            .contains("nats consumer info CREWLET_TRACKER_LOG dr")
            && behind.remedy.contains("replicas.ignore: [dr]"),
        "{behind:?}"
    );
    // Quiet for less than held_alarm_after: nothing yet.
    assert!(!with(-60, 0).iter().any(|x| x.alarm == "replica_behind"));
    // Confirmed nothing for two hours but delivered to a minute ago: the
    // copy is confirming (a durable sourcing consumer answers only now
    // and then), not behind.
    assert!(!with_delivered(-2 * 3600, Some(-60), 0)
        .iter()
        .any(|x| x.alarm == "replica_behind"));
    // Delivery stopped too: behind, judged from the later of the two.
    let a = with_delivered(-3 * 3600, Some(-2 * 3600), 0);
    assert!(
        a.iter()
            .any(|x| x.alarm == "replica_behind" && x.measurement.contains("2 hours ago")),
        "{a:?}"
    );
}

/// `config_drift` names the fields that differ, with both values; and a
/// row published since this sidecar started, under its node id, by a
/// session it never had, says that two sidecars share the node id.
#[test]
fn config_drift_names_the_fields_and_a_shared_node_id() {
    let mut a = World::new().answer();
    let mut theirs = a.config.clone();
    std::sync::Arc::make_mut(&mut theirs).insert("min_age".into(), Some("3d".into()));
    std::sync::Arc::make_mut(&mut theirs).insert("tick".into(), Some("5s".into()));
    a.published_config = Some(("node-2".into(), "0123456789abcdef".into()));
    a.published_by = Some(crate::floor::PublishedBy {
        by: "node-2".into(),
        session: "s9".into(),
        at: Timestamp(now()),
        config: theirs,
    });
    // A row of this release's format: digests are compared within one.
    a.published_format = Some(crate::floor::members::FORMAT);
    let p = policy();
    let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
    let drift = alarms
        .iter()
        .find(|x| x.alarm == "config_drift")
        .expect("config_drift");
    for want in [
        "min_age: 7d here, 3d in the row",
        "tick: 10s here, 5s in the row",
    ] {
        assert!(drift.measurement.contains(want), "{want}: {drift:?}");
    }
    assert!(!drift.measurement.contains("gate_subject"), "{drift:?}");

    // The same node id, another session, since this one started.
    let mut a = World::new().answer();
    a.published_by = Some(crate::floor::PublishedBy {
        by: "node-1".into(),
        session: "s9".into(),
        at: Timestamp(now()),
        config: a.config.clone(),
    });
    let mut p = policy();
    p.session = Some((
        vec!["s1".into()],
        Timestamp(now() - chrono::Duration::minutes(5)),
    ));
    let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
    assert!(
        alarms.iter().any(|x| x.alarm == "config_drift"
            && x.measurement
                .contains("another sidecar runs with node.id node-1")),
        "{alarms:?}"
    );
    // Its own earlier session, or a row from before it started: nothing.
    for (sessions, started) in [
        (
            vec!["s1".to_string(), "s9".to_string()],
            now() - chrono::Duration::minutes(5),
        ),
        (vec!["s1".to_string()], now() + chrono::Duration::minutes(5)),
    ] {
        p.session = Some((sessions, Timestamp(started)));
        let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
        assert!(
            !alarms.iter().any(|x| x.alarm == "config_drift"),
            "{alarms:?}"
        );
    }
}

/// Remedies match their causes: with the holds bucket unreadable,
/// `trim_held` does not send the operator to list and release holds (a
/// command that then fails); a NOT READY offering a reanchor says what it
/// costs.
#[test]
fn remedies_match_their_causes() {
    let mut w = World::new();
    w.holds = None;
    let a = w.answer();
    let mut p = policy();
    p.held_alarm_after = Duration::ZERO;
    let mut a = a;
    a.held_since = Some(Timestamp(now() - chrono::Duration::hours(1)));
    let alarms = evaluate(std::slice::from_ref(&a), &held(), None, &p, now(), None);
    let held_alarm = alarms
        .iter()
        .find(|x| x.alarm == "trim_held")
        .expect("trim_held");
    assert!(
        held_alarm
            .remedy
            .contains("the holds bucket cannot be read")
            && !held_alarm.remedy.contains("crewlet retention holds"),
        "{held_alarm:?}"
    );
    let mut w = World::new();
    w.floor_row(serde_json::json!({"stream": S, "generation": 0, "stream_created": "2026-10-01T00:00:00Z", "floor": 5, "trim_floor_state": "published", "at": ts(-5)}));
    let a = w.answer();
    let alarms = evaluate(
        std::slice::from_ref(&a),
        &held(),
        None,
        &policy(),
        now(),
        None,
    );
    let nr = alarms
        .iter()
        .find(|x| x.alarm == "not_ready")
        .expect("not_ready");
    assert!(
        nr.remedy.contains("reanchor") && nr.remedy.contains("voids every backup"),
        "{nr:?}"
    );
}

/// A row of another release is `version_skew`, naming its writer and both
/// formats, and never `config_drift` (digests are compared only within a
/// format): newer, this sidecar publishes nothing for the log; older,
/// another sidecar not upgraded yet holds the duty. A row of this format,
/// or one this sidecar wrote, says nothing.
#[test]
fn version_skew_names_the_writer_and_both_formats() {
    let ours = crate::floor::members::FORMAT;
    let mut a = World::new().answer();
    a.published_by = Some(crate::floor::PublishedBy {
        by: "node-2".into(),
        session: "s".into(),
        at: a.at,
        config: Default::default(),
    });
    a.published_config = Some(("node-2".into(), "0000000000000000".into()));
    let skew = |a: &crate::floor::Answer| {
        let alarms = evaluate(
            std::slice::from_ref(a),
            &held(),
            None,
            &policy(),
            now(),
            None,
        );
        assert!(
            !alarms.iter().any(|x| x.alarm == "config_drift"),
            "an upgrade is not config_drift: {alarms:?}"
        );
        alarms.into_iter().find(|x| x.alarm == "version_skew")
    };
    a.published_format = Some(ours + 1);
    let newer = skew(&a).expect("a newer row");
    for want in [
        "node-2".to_string(),
        format!("format {}", ours + 1),
        format!("knows format {ours}"),
        "publishes nothing".to_string(),
    ] {
        assert!(newer.measurement.contains(&want), "{want}: {newer:?}");
    }
    a.published_format = Some(1);
    let older = skew(&a).expect("an older row");
    assert!(older.measurement.contains("format 1"), "{older:?}");
    assert!(older.remedy.contains("upgrade node-2"), "{older:?}");
    a.published_format = Some(ours);
    a.published_config = None;
    assert!(skew(&a).is_none());
    a.published_format = Some(1);
    a.published_by = Some(crate::floor::PublishedBy {
        by: "node-1".into(),
        session: "s".into(),
        at: a.at,
        config: Default::default(),
    });
    assert!(
        skew(&a).is_none(),
        "this sidecar's own row, before its upgrade"
    );
}

/// A node carried by the memory counts for every alarm: below what the log
/// still holds, it is `node_behind_log` like any counted node (the records
/// it needs went, whoever purged them); at `first_seq - 1` it can catch up.
#[test]
fn a_carried_node_below_the_log_is_node_behind_log() {
    let mut a = World::new().answer();
    a.first_seq = 500;
    a.nodes.push(crate::floor::NodeRow {
        node: "node-9".into(),
        live: false,
        seq: Some(300),
        generation: Some(a.generation),
        left_gen: None,
        state: NodeState::Carried,
        updated_at: None,
        carried_from: Some(a.at),
    });
    let alarms = evaluate(
        std::slice::from_ref(&a),
        &held(),
        None,
        &policy(),
        now(),
        None,
    );
    let behind = alarms
        .iter()
        .find(|x| x.alarm == "node_behind_log")
        .expect("the alarm");
    assert!(behind.measurement.contains("node-9"), "{behind:?}");
    if let Some(n) = a.nodes.last_mut() {
        n.seq = Some(499);
    }
    let alarms = evaluate(
        std::slice::from_ref(&a),
        &held(),
        None,
        &policy(),
        now(),
        None,
    );
    assert!(
        !alarms
            .iter()
            .any(|x| x.alarm == "node_behind_log" && x.measurement.contains("node-9")),
        "{alarms:?}"
    );
}

/// `replica_floor` unreadable says what to do for its own reason: a named
/// consumer missing is named (never an empty name), a listing that failed
/// never speaks of named consumers, whichever alarm says it.
#[test]
fn an_unreadable_replica_term_is_remedied_for_its_reason() {
    let with_read = |read: Result<crate::floor::ReplicasRead, crate::rows::Unreadable>| {
        let mut w = fresh();
        w.replicas = Some(read);
        let mut p = policy();
        p.held_alarm_after = Duration::ZERO;
        evaluate(&[w.answer()], &held(), None, &p, now(), None)
    };
    let a = with_read(Err(
        "consumers of CREWLET_TRACKER_LOG: no answer within 1s".into()
    ));
    let unreadable = a
        .iter()
        .find(|x| x.alarm == "term_unreadable")
        .unwrap_or_else(|| panic!("{a:?}"));
    assert!(!unreadable.remedy.contains("named"), "{unreadable:?}");
    assert!(
        unreadable
            .remedy
            .contains("nats consumer ls CREWLET_TRACKER_LOG"),
        "{unreadable:?}"
    );
    let a = with_read(Ok(crate::floor::ReplicasRead {
        missing_named: vec!["cdc".into()],
        ..Default::default()
    }));
    for x in a
        .iter()
        .filter(|x| x.alarm == "term_unreadable" || x.alarm == "trim_held")
    {
        assert!(
            x.remedy.contains(
                "consumer cdc is named in domains[].replicas.consumers but does not exist"
            ),
            "{x:?}"
        );
        assert!(!x.remedy.contains("consumer  "), "{x:?}");
    }
}
