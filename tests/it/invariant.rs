//! The invariant's cases: each test is a way a purge once took a record
//! something still needed, or a gesture reported a success that was not
//! true (docs/testing.md lists them). Each failed on the code before its
//! fix.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fleet::*;
use crate::support::{create_stream, log_stream, Operator, Run};

const GATE: &str = "crewlet.tracker.gate";

/// The operator's configuration for a [`Fleet`].
fn operator(f: &Fleet) -> Operator {
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.server.url()
    ))
}

/// Publishes an eviction of `node` on the log as the gesture would, by
/// hand (so that no absorption follows it); returns its sequence.
async fn raw_eviction(f: &Fleet, node: &str) -> u64 {
    f.raw_gate(node, crewlet::rows::GateSign::Evict).await.1
}

/// The term `name` of the tick's (only) answer.
fn term(r: &crewlet::tick::TickReport, name: crewlet::floor::TermName) -> crewlet::floor::Term {
    r.domains[0]
        .answer
        .terms
        .iter()
        .find(|t| t.term == name)
        .expect("every answer has every term")
        .clone()
}

fn alarm_names(r: &crewlet::tick::TickReport) -> Vec<&'static str> {
    r.alarms.iter().map(|a| a.alarm.as_str()).collect()
}

fn has_alarm(run: &Run, name: &str) -> bool {
    run.stderr
        .lines()
        .any(|l| l.starts_with(&format!("ALARM {name} ")))
}

/// Hole 1: a gate record the gates view has not absorbed was purged when
/// absorbing failed (here: a malformed cursor row), so an eviction was lost
/// for good.
#[tokio::test]
async fn the_purge_never_passes_an_unabsorbed_gate_record() {
    let f = Fleet::new(10).await;
    let gate_seq = raw_eviction(&f, "node-9").await;
    assert_eq!(gate_seq, 11);
    f.publish(9).await;
    f.healthy(&[("node-1", 20)], 20).await;
    f.put(
        "crewlet_gates",
        &format!("_absorbed.{STREAM}"),
        json!({"bogus": true}),
    )
    .await;

    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert_eq!(r.domains[0].answer.trim_to, 20, "every term permits 20");
    assert_eq!(
        f.first_seq().await,
        1,
        "without a cursor it can prove, nothing is purged"
    );
    let row = f.floors_row().await.expect("published");
    assert_eq!(row["purge_clamped_by"], "gates", "{row}");
    assert!(
        alarm_names(&r).contains(&"gates_unabsorbed"),
        "{:?}",
        r.alarms
    );
    let op = operator(&f);
    let run = op.status();
    assert!(has_alarm(&run, "gates_unabsorbed"), "{run:?}");
    assert!(
        run.stderr.contains(&format!("_absorbed.{STREAM}")),
        "the alarm names the row to fix: {run:?}"
    );

    // The remedy: remove the malformed cursor; the view is rebuilt from the
    // log, the eviction absorbed, and the trim proceeds.
    f.delete("crewlet_gates", &format!("_absorbed.{STREAM}"))
        .await;
    let r = s.tick().await;
    assert!(
        !alarm_names(&r).contains(&"gates_unabsorbed"),
        "{:?}",
        r.alarms
    );
    let g = f
        .get("crewlet_gates", &format!("{STREAM}.node-9"))
        .await
        .expect("the eviction was absorbed");
    assert_eq!(g["seq"], 11);
    assert_eq!(f.first_seq().await, 21);
}

/// Hole 2: after a stream was recreated and re-anchored, the view's cursor
/// still pointed into the old log, so a new eviction was never absorbed
/// while the gesture said `pending` and exited 0.
#[tokio::test]
async fn a_recreated_stream_starts_a_fresh_gates_view() {
    let f = Fleet::new(30).await;
    f.healthy(&[("node-1", 30)], 30).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let cursor = f
        .get("crewlet_gates", &format!("_absorbed.{STREAM}"))
        .await
        .expect("cursor");
    assert_eq!(cursor["seq"], 30);

    f.recreate_stream().await;
    f.publish(5).await;
    let created = f.created().await;
    let op = operator(&f);
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "{run:?}");
    f.position_at("node-1", 5, 1, &created, "ok").await;
    f.position_at("node-4", 2, 1, &created, "ok").await;

    let (run, v) = op.json(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["logs"][0]["outcome"], "applied", "{v}");
    assert_eq!(v["logs"][0]["seq"], 6, "{v}");
    let g = f
        .get("crewlet_gates", &format!("{STREAM}.node-4"))
        .await
        .expect("gate row");
    assert_eq!(g["stream_created"], Value::from(created.clone()));
    assert_eq!(g["generation"], 1);

    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = s.tick().await;
    assert_eq!(node_state(&r, "node-4"), crewlet::floor::NodeState::Evicted);
}

/// `crewlet retention run --once` for `op`'s configuration, paused for
/// `pause_ms` between publishing and purging (CREWLET_FAILPOINT).
fn paused_once(op: &Operator, pause_ms: u64) -> std::process::Child {
    let failpoint = format!("after_publish:sleep={pause_ms}");
    op.spawn(
        &["retention", "run", "--once"],
        &[("RUST_LOG", "warn"), ("CREWLET_FAILPOINT", &failpoint)],
    )
}

async fn wait_child(child: std::process::Child) -> String {
    crate::support::finished(child).await.stderr
}

/// Waits for the tick in flight to publish its answer.
async fn published(f: &Fleet) {
    assert!(
        eventually(10, || async { f.floors_row().await.is_some() }).await,
        "the tick publishes"
    );
}

/// Hole 3: a hold written after the tick's read and before its purge was
/// ignored by that purge.
#[tokio::test]
async fn a_hold_placed_during_a_tick_bounds_its_purge() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = operator(&f);
    let child = paused_once(&op, 1500);
    published(&f).await;
    assert_eq!(f.floors_row().await.expect("row")["trim_to"], 20);
    f.hold("late", 6, 600).await;
    let log = wait_child(child).await;
    assert_eq!(f.first_seq().await, 6, "the hold keeps 6 on: {log}");
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["purge_clamped_by"], "hold", "{row}");
}

/// Hole 3: a live data node that appeared after the tick's read counts at
/// position 0 at once: that purge deletes nothing.
#[tokio::test]
async fn a_data_node_that_appears_during_a_tick_stops_its_purge() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = operator(&f);
    let child = paused_once(&op, 1500);
    published(&f).await;
    f.presence("node-7", &["data"]).await;
    let log = wait_child(child).await;
    assert_eq!(f.first_seq().await, 1, "node-7 is about to replay: {log}");
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["purge_clamped_by"], "presence", "{row}");
}

/// Hole 6: the purge was fenced by a read of the duty key; a renewal whose
/// answer was lost dropped the lease for a whole TTL (duty_unheld, no
/// trim) although the write had landed.
#[tokio::test]
async fn a_renewal_whose_answer_was_lost_keeps_the_lease() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let mut s = f.sidecar().await;
    assert_eq!(s.tick().await.duty, crewlet::tick::duty::DutyStatus::Held);
    // The broker stops answering while the next renewal is in flight and
    // resumes after the client gave up on it: the write lands, its answer
    // never arrives.
    f.server.signal(libc::SIGSTOP);
    let pid_resume = {
        let server = &f.server;
        let started = std::time::Instant::now();
        let resume = async {
            tokio::time::sleep(Duration::from_millis(5600)).await;
            server.signal(libc::SIGCONT);
        };
        let (r, ()) = tokio::join!(s.tick(), resume);
        (r, started.elapsed())
    };
    let (first, _) = pid_resume;
    let second = s.tick().await;
    assert!(
        first.duty == crewlet::tick::duty::DutyStatus::Held
            || second.duty == crewlet::tick::duty::DutyStatus::Held,
        "the lease is ours again at once, not after its TTL: {:?} then {:?}",
        first.duty,
        second.duty
    );
    let row = f.get("crewlet_duty", "retention").await.expect("the lease");
    assert_eq!(row["session"], Value::from(s.duty.session()));
}

/// Hole 6: every purge is fenced by a compare-and-set renewal just before
/// it; a lease that changed hands while the tick was in flight purges
/// nothing.
#[tokio::test]
async fn a_lease_taken_during_the_tick_purges_nothing() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = operator(&f);
    let child = paused_once(&op, 1500);
    published(&f).await;
    // The lease expires and another sidecar claims it.
    f.delete("crewlet_duty", "retention").await;
    f.put(
        "crewlet_duty",
        "retention",
        json!({"holder": "node-2", "session": crewlet::rows::OpId::mint(chrono::Utc::now()).as_str(), "claimed_at": ts(0)}),
    )
    .await;
    let log = wait_child(child).await;
    assert_eq!(f.first_seq().await, 1, "nothing purged: {log}");
    assert_eq!(
        f.get("crewlet_duty", "retention").await.expect("lease")["holder"],
        "node-2",
        "the new holder's lease is untouched"
    );
}

fn hold_args<'a>(seq: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "retention",
        "hold",
        "-stream",
        STREAM,
        "-seq",
        seq,
        "-ttl",
        "1h",
        "-owner",
        "backup-job",
    ];
    v.extend_from_slice(extra);
    v
}

/// Hole 3: `hold` printed success for records already gone, and silently
/// replaced another person's hold of the same id.
#[tokio::test]
async fn hold_is_refused_when_too_late_or_taken_and_confirmed_otherwise() {
    let f = Fleet::new(40).await;
    f.healthy(&[("node-1", 20)], 40).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    s.duty.release(&s.broker).await;
    assert_eq!(f.first_seq().await, 21);
    let op = operator(&f);

    // Records below 21 are gone: too_late, and nothing stays behind.
    let run = op.run(&hold_args("5", &["-id", "late"]));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("too_late: records below 21 are gone"),
        "{run:?}"
    );
    assert!(f
        .get("crewlet_holds", &format!("{STREAM}.late"))
        .await
        .is_none());

    // Past the log's end: bad input.
    let run = op.run(&hold_args("42", &[]));
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("past the log's end"), "{run:?}");

    // No lease held: confirmed at once.
    let run = op.run(&hold_args("25", &["-id", "mine"]));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), "mine");
    assert!(
        run.stderr.contains("held CREWLET_TRACKER_LOG from 25"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("no sidecar holds the trim duty"),
        "{run:?}"
    );

    // The same id again: hold_exists, the first hold untouched.
    let run = op.run(&hold_args("30", &["-id", "mine"]));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("hold_exists"), "{run:?}");
    let row = f
        .get("crewlet_holds", &format!("{STREAM}.mine"))
        .await
        .expect("hold");
    assert_eq!(row["seq"], 25);
    // -replace updates it.
    let run = op.run(&hold_args("30", &["-id", "mine", "-replace"]));
    assert_eq!(run.code, 0, "{run:?}");
    let row = f
        .get("crewlet_holds", &format!("{STREAM}.mine"))
        .await
        .expect("hold");
    assert_eq!(row["seq"], 30);

    // -no-wait: placed, not yet confirmed.
    let run = op.run(&hold_args("31", &["-no-wait"]));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("not yet confirmed"), "{run:?}");

    // While a sidecar holds the duty, the hold waits for its next answer.
    let l = Loop::start(&f).await;
    assert!(
        eventually(5, || async {
            f.get("crewlet_duty", "retention").await.is_some()
        })
        .await
    );
    // The command runs beside the loop (this test's runtime must not block).
    let cfg = op.cfg.clone();
    let run = tokio::task::spawn_blocking(move || {
        let mut args = hold_args("32", &["-id", "waited", "--json", "--config"]);
        args.push(&cfg);
        crate::support::crewlet(&args)
    })
    .await
    .expect("join");
    let v: Value = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["outcome"], "held", "{v}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("confirmed by an answer published after it")),
        "{v}"
    );
    l.stop().await;
}

/// Hole 3: between a readmission's judgement and its record being
/// absorbed, nothing stopped a purge from passing the node. Now a `join`
/// hold at its position + 1 is placed first, and lifted once a published
/// answer counts the node again.
#[tokio::test]
async fn a_readmission_holds_the_log_until_the_node_counts_again() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100)], 100).await;
    f.position("node-4", 20).await;
    f.snapshot("node-4", 20).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let op = operator(&f);
    let run = op.run(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 101, "node-4 no longer pins the log");

    // node-4 catches up and is readmitted; no tick is in flight.
    f.position("node-4", 101).await;
    s.duty.release(&s.broker).await;
    let (run, v) = op.json(&[
        "retention",
        "readmit",
        "node-4",
        "-confirm",
        "node-4",
        "-by",
        "alice",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let id = format!("join-{}", v["op_id"].as_str().expect("op id"));
    let hold = f
        .get("crewlet_holds", &format!("{STREAM}.{id}"))
        .await
        .expect("the join hold is placed before the record");
    assert_eq!(hold["seq"], 102);
    assert_eq!(hold["kind"], "join");
    assert_eq!(hold["owner"], "alice");

    // The next tick counts node-4 again and lifts the hold.
    let r = s.tick().await;
    assert_eq!(node_state(&r, "node-4"), crewlet::floor::NodeState::Counted);
    assert!(
        f.get("crewlet_holds", &format!("{STREAM}.{id}"))
            .await
            .is_none(),
        "lifted once a published answer counts the node"
    );
}

/// Hole 9: a bucket read that delivered fewer keys than the bucket holds
/// was taken as complete. Here the holds bucket is a mirror of another
/// (its messages keep the origin's subjects, so a reader of its own
/// subjects is offered nothing): read as empty, it lifted every pin.
#[tokio::test]
async fn a_read_short_of_the_buckets_state_is_unreadable() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    f.hold("keep", 6, 600).await;
    f.js.create_stream(async_nats::jetstream::stream::Config {
        name: "KV_holds_mirror".into(),
        mirror: Some(async_nats::jetstream::stream::Source {
            name: "KV_crewlet_holds".into(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("mirror");
    assert!(
        eventually(5, || async {
            f.js.get_stream("KV_holds_mirror")
                .await
                .is_ok_and(|s| s.cached_info().state.messages == 1)
        })
        .await,
        "the mirror holds the hold"
    );
    let mut config = f.config.clone();
    config.buckets.holds = "holds_mirror".into();
    let mut s = crewlet::tick::Sidecar::new(config, f.broker().await);
    let r = s.tick().await;
    let hold = term(&r, crewlet::floor::TermName::MinHold);
    assert!(hold.state_is_unreadable(), "{hold:?}");
    assert_eq!(f.first_seq().await, 1, "nothing purged");
    // A second tick answers from the views the first built; each bucket
    // keeps one reader (its watcher), never one per tick, and the log's
    // own readers are deleted just after their read.
    let r = s.tick().await;
    assert!(term(&r, crewlet::floor::TermName::MinHold).state_is_unreadable());
    assert!(r.views.kept > 0, "{:?}", r.views);
    let readers = |stream: &'static str, most: usize| {
        let js = f.js.clone();
        async move {
            eventually(5, || async {
                js.get_stream(stream)
                    .await
                    .is_ok_and(|s| s.cached_info().state.consumer_count <= most)
            })
            .await
        }
    };
    for stream in [
        "KV_crewlet_positions",
        "KV_crewlet_presence",
        "KV_crewlet_gates",
    ] {
        assert!(
            readers(stream, 1).await,
            "{stream} keeps more than its watcher"
        );
    }
    assert!(readers(STREAM, 0).await, "the log keeps its readers");
    // A view that goes deletes its watcher.
    drop(s);
    for stream in ["KV_crewlet_positions", "KV_crewlet_presence"] {
        assert!(
            readers(stream, 0).await,
            "{stream} keeps a dropped view's watcher"
        );
    }
}

/// Hole 10: a positions or holds key without the contract's shape was
/// skipped; a domain could be named like another domain's stream.
#[tokio::test]
async fn keys_without_the_contracts_shape_are_unreadable() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    f.put(
        "crewlet_holds",
        STREAM,
        json!({"seq": 3, "owner": "x", "expires_at": ts(600)}),
    )
    .await;
    f.put("crewlet_positions", STREAM, json!({"seq": 2})).await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    for name in [
        crewlet::floor::TermName::Applied,
        crewlet::floor::TermName::MinHold,
    ] {
        let t = a.terms.iter().find(|t| t.term == name).expect("term");
        match &t.state {
            crewlet::floor::TermState::Unreadable { error, .. } => {
                assert!(error.contains(&format!("key {STREAM}:")), "{error}")
            }
            other => panic!("{name:?} is {other:?}"),
        }
    }
    assert_eq!(f.first_seq().await, 1);

    // A domain named like another domain's stream is refused.
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - {{name: tracker, stream: {STREAM}}}\n  - {{name: {STREAM}, stream: OTHER_LOG}}\n",
        f.server.url()
    ));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("is the stream of domains[0]"),
        "{run:?}"
    );
}

/// Hole 5: every time rule ran on the sidecar's clock. A sidecar whose
/// clock is an hour fast saw a hold that still had ten minutes to live as
/// expired, and purged what it pinned.
#[tokio::test]
async fn time_rules_run_on_the_brokers_clock() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    f.hold("soon", 6, 600).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = operator(&f);
    let run = crate::support::faketime("+1h", &["retention", "run", "--once", "--config", &op.cfg]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        f.first_seq().await,
        6,
        "the hold is live on the broker's clock: {run:?}"
    );
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("ALARM clock_skew *: the clock of sidecar node-1 is")),
        "{run:?}"
    );
    // On the broker's clock the answer is not an hour ahead either.
    let at = crewlet::rows::Timestamp::parse(
        f.floors_row().await.expect("row")["at"]
            .as_str()
            .expect("at"),
    )
    .expect("instant");
    let off = (at.0 - chrono::Utc::now()).num_seconds().abs();
    assert!(off < 60, "published at {at}, {off}s from now");
}

/// Hole 4: `age_floor` trusted the broker's ordering of timestamps. Here
/// the log is a mirror whose origin was replaced by a mirror of an older
/// stream: records 1..5 are young, 6..10 carry older stamps. The broker's
/// start-time lookup then finds no young record at all, and the purge took
/// the young ones. The age proof scans the slice's timestamps first.
#[tokio::test]
async fn young_records_before_older_stamps_are_kept() {
    let (f, old, young) = Fleet::with_out_of_order_stamps().await;
    f.healthy(&[("node-1", 10)], 10).await;
    // min_age puts the cutoff half-way between the two stamps.
    let mid = old + (young - old) / 2;
    let mut config = f.config.clone();
    config.domains[0].gate_subject = None;
    config.retention.min_age =
        crewlet::config::Dur((chrono::Utc::now() - mid).to_std().expect("past"));
    let mut s = crewlet::tick::Sidecar::new(config, f.broker().await);
    let r = s.tick().await;
    assert_eq!(
        f.first_seq().await,
        1,
        "the young records 1..5 stay: {:?}",
        r.domains[0].answer.terms
    );
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["purge_clamped_by"], "age", "{row}");
}

/// Hole 7: a log restored from an older copy keeps its `created`; once
/// re-anchored, a backup of the history it lost still counted.
#[tokio::test]
async fn backups_from_before_the_generation_do_not_count() {
    let mut f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    let created = f.created().await;
    let copy = f.copy_log().await;
    f.publish(50).await;
    f.healthy(&[("node-1", 100)], 100).await;
    // The log is restored from the older copy; the backup of 1..100 stays.
    f.restore_log(&copy).await;
    assert_eq!(f.created().await, created);
    let op = operator(&f);
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "{run:?}");
    let opened = f.floors_row().await.expect("row")["generation_opened_at"].clone();
    assert!(opened.as_str().is_some(), "{opened}");
    f.position_at("node-1", 50, 1, &created, "ok").await;
    let r = f.sidecar().await.tick().await;
    let backup = term(&r, crewlet::floor::TermName::BackupFloor);
    assert_eq!(backup.seq(), Some(0), "{backup:?}");
    assert_eq!(
        f.first_seq().await,
        1,
        "nothing purged on a backup of the lost history"
    );
    let row = f.floors_row().await.expect("row");
    assert_eq!(
        row["generation_opened_at"], opened,
        "the tick keeps when the generation opened"
    );
}

/// Hole 8: bypass detection missed settings that delete records on their
/// own (a work queue, per-message TTLs, delete markers); deny_delete: false
/// went unmentioned.
#[tokio::test]
async fn every_setting_that_deletes_records_is_a_bypass() {
    use async_nats::jetstream::stream::RetentionPolicy;
    let f = Fleet::new(0).await;
    let mut wq = log_stream("WQ_LOG", &["wq.>"], GIB);
    wq.retention = RetentionPolicy::WorkQueue;
    let mut ttl = log_stream("TTL_LOG", &["ttl.>"], GIB);
    ttl.allow_message_ttl = true;
    let mut markers = log_stream("MARK_LOG", &["mark.>"], GIB);
    markers.allow_message_ttl = true;
    markers.subject_delete_marker_ttl = Some(Duration::from_secs(60));
    let mut deletable = log_stream("DEL_LOG", &["del.>"], GIB);
    deletable.deny_delete = false;
    for c in [wq, ttl, markers, deletable] {
        create_stream(&f.js, c).await;
    }
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - {{name: wq, stream: WQ_LOG}}\n  - {{name: ttl, stream: TTL_LOG}}\n  - {{name: mark, stream: MARK_LOG}}\n  - {{name: del, stream: DEL_LOG}}\n",
        f.server.url()
    ));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    for want in [
        "domains[0].stream: broker_retention_bypass: stream WQ_LOG's own limits can delete records the floor protects (retention = workqueue)",
        "(allow_msg_ttl = true)",
        "subject_delete_marker_ttl = 60s",
        "warning:",
        "$JS.API.STREAM.MSG.DELETE.DEL_LOG",
    ] {
        assert!(run.stdout.contains(want), "{want}: {run:?}");
    }
    let run = op.status();
    let bypass: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("ALARM broker_retention_bypass"))
        .collect();
    assert_eq!(bypass.len(), 3, "{run:?}");
    assert!(
        run.stdout
            .contains("warning: stream DEL_LOG has deny_delete: false"),
        "{run:?}"
    );
}

/// Hole 11: `floor_unreadable` named a remedy (a confirmed reanchor) that
/// refused. Now the printed command opens a new generation.
#[tokio::test]
async fn an_unreadable_floors_row_has_a_working_way_out() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    f.put(
        "crewlet_floors",
        STREAM,
        json!({"stream": STREAM, "generation": 2, "floor": "broken"}),
    )
    .await;
    let op = operator(&f);
    let run = op.status();
    assert!(has_alarm(&run, "not_ready"), "{run:?}");
    let remedy = format!("crewlet retention reanchor -stream {STREAM}");
    assert!(run.stderr.contains(&remedy), "{run:?}");
    // The remedy prints the command that finishes it ...
    let run = op.run(&["retention", "reanchor", "-stream", STREAM]);
    assert_eq!(run.code, 1, "{run:?}");
    let line = run
        .stdout
        .lines()
        .find_map(|l| {
            l.split_once("to open generation 3 on it: ")
                .map(|(_, c)| c.to_string())
        })
        .unwrap_or_else(|| panic!("no command printed: {run:?}"));
    // ... and that command works.
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let run = op.run(&args);
    assert_eq!(run.code, 0, "{line}: {run:?}");
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["generation"], 3);
    assert_eq!(row["trim_floor_state"], "none_at_generation");
    let r = f.sidecar().await.tick().await;
    assert_eq!(r.domains[0].answer.not_ready, None);
}

/// Hole 12: with allow_unsafe_limits a test fleet could not run with
/// min_age: 1s (snapshot_interval's floor of 1s broke the cross-field
/// rule for every min_age under 2s). Here one does, on a real broker.
#[tokio::test]
async fn a_test_fleet_runs_with_min_age_one_second() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.server.url()
    ));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("warning:"),
        "the unsafe limits are named: {run:?}"
    );
    assert!(!run.stdout.contains("error:"), "{run:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let run = op.run(&["retention", "run", "--once"]);
    assert_eq!(
        f.first_seq().await,
        21,
        "a second-old log is trimmed: {run:?}"
    );
}
