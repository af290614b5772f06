//! Safety by construction: each test is a place where a newer path once
//! crossed an older guard. Each failed on the code before its fix: a
//! purge could go out past what something still needed, or a guard was
//! skipped on a path that forgot it.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fleet::*;
use crate::support::{create_stream, log_stream, Operator};

const GATE: &str = "crewlet.tracker.gate";

/// Leak 9: `allow_rollup_hdrs: true` lets one publish delete every earlier
/// record (or a subject's), and a `max_age` under a second was read as 0:
/// neither was a `broker_retention_bypass`.
#[tokio::test]
async fn rollups_and_a_sub_second_max_age_are_bypasses() {
    let f = Fleet::new(0).await;
    let mut rollup = log_stream("ROLLUP_LOG", &["rollup.>"], GIB);
    rollup.allow_rollup = true;
    let mut quick = log_stream("QUICK_LOG", &["quick.>"], GIB);
    quick.max_age = Duration::from_millis(500);
    for c in [rollup, quick] {
        create_stream(&f.js, c).await;
    }
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - {{name: rollup, stream: ROLLUP_LOG}}\n  - {{name: quick, stream: QUICK_LOG}}\n",
        f.server.url()
    ));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    for want in [
        "domains[0].stream: broker_retention_bypass: stream ROLLUP_LOG's own limits can delete records the floor protects (allow_rollup_hdrs = true)",
        "--no-allow-rollup",
        "domains[1].stream: broker_retention_bypass: stream QUICK_LOG's own limits can delete records the floor protects (max_age = 500ms)",
    ] {
        assert!(run.stdout.contains(want), "{want}: {run:?}");
    }
    let run = op.status();
    let bypass: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("ALARM broker_retention_bypass"))
        .collect();
    assert_eq!(bypass.len(), 2, "{run:?}");
}

/// The operator's configuration for a [`Fleet`]: a 1 s tick (a 3 s lease)
/// and a clock skew allowance that leaves the holder a fence of 1.5 s.
fn operator(f: &Fleet) -> Operator {
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.server.url()
    ))
}

/// `crewlet retention run --once` for `op`'s configuration with
/// `CREWLET_FAILPOINT` set to `failpoint`.
fn once_with(op: &Operator, failpoint: &str) -> std::process::Child {
    op.spawn(
        &["retention", "run", "--once"],
        &[("RUST_LOG", "info"), ("CREWLET_FAILPOINT", failpoint)],
    )
}

async fn wait_child(child: std::process::Child) -> String {
    crate::support::finished(child).await.stderr
}

/// Leak 2: the gap between the fence and the purge was unbounded. A stall
/// after the fence (a leader election, here a pause) outlived the lease;
/// another sidecar claimed the duty and a hold was placed against its
/// answer, and the first holder's purge still went out at its old target.
/// The fence is a deadline: a purge that cannot be sent before it is not.
#[tokio::test]
async fn a_purge_stalled_past_its_fence_is_not_sent() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = operator(&f);
    // The lease lives 3 s; the stall after the fence lasts 4 s.
    let child = once_with(&op, "after_fence:sleep=4000");
    if !eventually(10, || async { f.floors_row().await.is_some() }).await {
        panic!("the tick publishes: {}", wait_child(child).await);
    }
    tokio::time::sleep(Duration::from_millis(3200)).await;
    // The lease has expired: another sidecar holds the duty, and a hold
    // confirmed against its answer keeps 6 on.
    f.delete("crewlet_duty", "retention").await;
    f.put(
        "crewlet_duty",
        "retention",
        json!({"holder": "node-2", "session": crewlet::rows::OpId::mint(chrono::Utc::now()).as_str(), "claimed_at": ts(0)}),
    )
    .await;
    f.hold("late", 6, 600).await;
    let log = wait_child(child).await;
    assert_eq!(f.first_seq().await, 1, "nothing purged: {log}");
    assert!(log.contains("fence_expired"), "{log}");
}

/// Leak 4: a fence's permit was as long as this sidecar's configuration
/// made the lease (three of its ticks), but the broker expires the lease by
/// the duty bucket's own `max_age`, which a sidecar with a shorter tick may
/// have set. Here the bucket keeps the lease 1 s while this sidecar's 2 s
/// tick made its fence 3.5 s: the lease expired at the broker, another
/// sidecar claimed it, and the first one's purge still went out. The fence
/// now lasts no longer than the bucket's lease.
#[tokio::test]
async fn a_fence_lasts_no_longer_than_the_duty_buckets_own_lease() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let mut duty =
        f.js.get_stream("KV_crewlet_duty")
            .await
            .expect("the duty bucket")
            .cached_info()
            .config
            .clone();
    duty.max_age = Duration::from_secs(1);
    duty.duplicate_window = duty.max_age;
    f.js.update_stream(&duty).await.expect("a 1 s lease");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 2s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.server.url()
    ));
    let child = once_with(&op, "after_fence:sleep=3000");
    if !eventually(10, || async { f.floors_row().await.is_some() }).await {
        panic!("the tick publishes: {}", wait_child(child).await);
    }
    // The broker expires the lease after 1 s: another sidecar claims it
    // while the first one's purge is still waiting to be sent.
    let broker = f.broker().await;
    let lease = json!({"holder": "node-2", "session": crewlet::rows::OpId::mint(chrono::Utc::now()).as_str(), "claimed_at": ts(0)});
    let claimed = eventually(2, || async {
        broker
            .kv_create("crewlet_duty", "retention", lease.to_string().into_bytes())
            .await
            .is_ok()
    })
    .await;
    let log = wait_child(child).await;
    assert!(claimed, "the broker expired the 1 s lease: {log}");
    assert_eq!(f.first_seq().await, 1, "nothing purged: {log}");
    assert!(log.contains("fence_expired"), "{log}");
    assert!(
        log.contains("duty_bucket_short") && log.contains("expires its lease after 1s"),
        "the log says why: {log}"
    );
}

/// Leak 3: a definite compare-and-set refusal of the lease's renewal was
/// treated like a lost answer: the key was re-read, found with our holder
/// and session (written by someone else), its revision adopted, and the
/// tick went on to purge. A refusal gives the duty up for the tick.
#[tokio::test]
async fn a_refused_renewal_gives_the_duty_up() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let mut s = f.sidecar().await;
    assert_eq!(s.tick().await.duty, crewlet::tick::duty::DutyStatus::Held);
    let session = s.duty.session().to_string();
    // Someone else writes the lease key with our very value.
    let lease = f.get("crewlet_duty", "retention").await.expect("the lease");
    f.put("crewlet_duty", "retention", lease).await;
    let r = s.tick().await;
    assert_ne!(
        r.duty,
        crewlet::tick::duty::DutyStatus::Held,
        "a refused renewal is a lost lease"
    );
    assert!(r
        .domains
        .iter()
        .all(|d| d.published.is_none() && d.purged.is_none()));
    assert_ne!(
        s.duty.session(),
        session,
        "a lost lease means a new session"
    );
}

/// Leak 3: each renewal writes a value of its own (`renewed_at`, the
/// broker time of the write, and `renewal`, a fresh id), so that a re-read
/// after a lost answer tells whose write is there.
#[tokio::test]
async fn every_renewal_writes_a_value_of_its_own() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let first = f.get("crewlet_duty", "retention").await.expect("the lease");
    s.tick().await;
    let second = f.get("crewlet_duty", "retention").await.expect("the lease");
    for row in [&first, &second] {
        assert!(row["renewed_at"].is_string(), "{row}");
        assert!(row["renewal"].is_string(), "{row}");
        assert_eq!(row["session"], Value::from(s.duty.session()));
    }
    assert_ne!(first["renewal"], second["renewal"]);
}

/// Leak 6: the requested watermark of an explicit trim outlived its
/// incarnation. `trim --entry 1000000` before the log was recreated and
/// reanchored made every later tick trim the new log to its safety terms,
/// young records included, with no age proof: a trim no one asked for in
/// this history.
#[tokio::test]
async fn a_requested_watermark_of_an_earlier_incarnation_is_ignored() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    // A floor of generation 0 is published (a reanchor needs one to move on).
    f.sidecar().await.tick().await;
    let op = operator(&f);
    let (run, v) = op.json(&[
        "retention",
        "trim",
        "-stream",
        "tracker",
        "--entry",
        "1000000",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["requested"], 21, "{v}");
    let row = f
        .get("crewlet_floors", &format!("_requested.{STREAM}"))
        .await
        .expect("the requested watermark");
    assert_eq!(
        row["stream_created"],
        Value::from(f.created().await),
        "{row}"
    );
    assert_eq!(row["generation"], 0, "{row}");

    // The log is recreated, reanchored, and written again: every record is
    // young (min_age is an hour), every other term would let 20 go.
    f.recreate_stream().await;
    f.publish(30).await;
    let created = f.created().await;
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "{run:?}");
    f.position_at("node-1", 30, 1, &created, "ok").await;
    let artefact = crewlet::rows::Artefact {
        position: 30,
        generation: 1,
        taken_at: crewlet::rows::Timestamp(chrono::Utc::now()),
        verified: true,
    };
    f.node("node-1")
        .await
        .register_snapshots(
            [(STREAM.to_string(), artefact)].into(),
            crewlet::rows::SkipReason::None,
        )
        .await
        .expect("snapshot register");
    tokio::time::sleep(Duration::from_millis(50)).await;
    f.backup("node-1", "b2", 30, 0, true, true).await;

    let mut config = f.config.clone();
    config.retention.min_age = crewlet::config::Dur::hours(1);
    let mut s = crewlet::tick::Sidecar::new(config, f.broker().await);
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(a.trim_to, 0, "only the age policy binds: {:?}", a.terms);
    assert_eq!(f.first_seq().await, 1, "no young record went");
    let requested = a.requested.as_ref().expect("the request is shown");
    assert!(
        requested
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("stale (of an earlier incarnation)")),
        "shown as stale: {requested:?}"
    );
    assert!(requested.stale);
}

/// Leak 7: a floors row that was lost silently restarted the domain at
/// generation 0, so manifests from before a restore counted again. With
/// positions of a later generation it is NOT READY (`generation_unknown`),
/// publishes nothing, and the printed reanchor opens the next generation.
#[tokio::test]
async fn a_lost_floors_row_is_not_a_silent_generation_0() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    // Generation 1 on a recreated log, with the nodes reporting in it.
    f.recreate_stream().await;
    f.publish(10).await;
    let created = f.created().await;
    let op = operator(&f);
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "{run:?}");
    f.position_at("node-1", 10, 1, &created, "ok").await;
    s.tick().await;
    assert_eq!(f.floors_row().await.expect("row")["generation"], 1);

    // The floors row is lost.
    f.delete("crewlet_floors", STREAM).await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(
        a.not_ready,
        Some(crewlet::floor::NotReady::GenerationUnknown { highest: 1 }),
        "{a:?}"
    );
    assert_eq!(a.trim_to, 0);
    assert!(f.floors_row().await.is_none(), "no row is published");
    assert_eq!(f.first_seq().await, 1, "nothing purged");

    let run = op.status();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("generation_unknown"), "{run:?}");
    let remedy = format!("crewlet retention reanchor -stream {STREAM} -confirm {created}");
    assert!(run.stderr.contains(&remedy), "{run:?}");
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "the printed remedy works: {run:?}");
    assert_eq!(
        f.floors_row().await.expect("row")["generation"],
        2,
        "the generation after the highest one seen"
    );
}

/// Publishes an eviction of `node` on the log as the gesture would, by
/// hand (so that no absorption follows it); returns its sequence.
async fn raw_eviction(f: &Fleet, node: &str) -> u64 {
    f.raw_gate(node, crewlet::rows::GateSign::Evict).await.1
}

/// Leak 1: the gate-record reader was not proven current. Served by a
/// replica behind the leader (here: a reader offered nothing, as such a
/// replica would, `CREWLET_FAILPOINT=gate_reader_behind`), it returned the
/// leader's `last_seq` as the new cursor, past an eviction it had not
/// shown, and the purge took that record unabsorbed. Now the leader is
/// asked for the next gate record after what the reader showed.
#[tokio::test]
async fn the_gate_reader_is_proven_against_the_leader() {
    let f = Fleet::new(10).await;
    let gate_seq = raw_eviction(&f, "node-9").await;
    f.publish(5).await;
    f.healthy(&[("node-1", 16)], 16).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = operator(&f);
    let log = held_at_the_unabsorbed_eviction(&f, &op, gate_seq).await;
    assert!(
        log.contains("first_unabsorbed=1"),
        "the log line names where absorbing stopped: {log}"
    );
    // Leak 12: the alarm names the log, the first unabsorbed sequence,
    // since when, and the error.
    let run = op.status();
    let alarm = run
        .stderr
        .lines()
        .find(|l| l.starts_with("ALARM gates_unabsorbed"))
        .unwrap_or_else(|| panic!("the alarm: {run:?}"))
        .to_string();
    for want in [
        &format!("the gates view of {STREAM} cannot absorb gate records from 1 since "),
        &format!("the leader holds gate record {gate_seq}"),
    ] {
        assert!(alarm.contains(want.as_str()), "{want}: {alarm}");
    }
    // With the reader current again the eviction is absorbed, then trimmed.
    let log = wait_child(once_with(&op, "none")).await;
    assert_eq!(
        f.get("crewlet_gates", &format!("{STREAM}.node-9"))
            .await
            .expect("the eviction is in the view")["seq"],
        gate_seq,
        "{log}"
    );
}

/// Leak 1 on the three-server fixture, with a follower of the log made to
/// lag: stopped (SIGSTOP) while the eviction and the records after it are
/// committed by the other two, then resumed. No test can place the gate
/// reader on that follower while it is still behind, so the failpoint
/// plays it (a reader shown nothing past what it saw): the check against
/// the leader refuses to move the cursor, and nothing is purged past the
/// unabsorbed eviction.
#[tokio::test]
async fn on_a_cluster_a_lagging_follower_cannot_move_the_cursor() {
    let f = Fleet::cluster(10).await;
    let leader =
        f.js.get_stream(STREAM)
            .await
            .expect("log")
            .info()
            .await
            .expect("info")
            .cluster
            .clone()
            .and_then(|c| c.leader)
            .unwrap_or_default();
    // A peer (s1 or s2) that is not the log's leader.
    let lagging = (0..f.peers.len())
        .find(|i| leader != format!("s{}", i + 1))
        .expect("a follower among the peers");
    f.peers[lagging].signal(libc::SIGSTOP);
    let gate_seq = raw_eviction(&f, "node-9").await;
    f.publish(5).await;
    f.peers[lagging].signal(libc::SIGCONT);
    f.healthy(&[("node-1", 16)], 16).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\nbuckets: {{replicas: 3}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.url()
    ));
    held_at_the_unabsorbed_eviction(&f, &op, gate_seq).await;
}

/// One `run --once` whose gate reader is shown nothing past what it saw
/// (`gate_reader_behind`): the eviction at `gate_seq` stays on the log,
/// the cursor stays below it, and the log says a replica is behind.
/// Returns the run's log.
async fn held_at_the_unabsorbed_eviction(f: &Fleet, op: &Operator, gate_seq: u64) -> String {
    let log = wait_child(once_with(op, "gate_reader_behind")).await;
    assert!(
        f.first_seq().await <= gate_seq,
        "the unabsorbed eviction at {gate_seq} is still on the log: {log}"
    );
    assert!(
        f.get("crewlet_gates", &format!("_absorbed.{STREAM}"))
            .await
            .is_none_or(|c| c["seq"].as_u64() < Some(gate_seq)),
        "the cursor did not pass what the reader was shown: {log}"
    );
    assert!(log.contains("a replica behind"), "{log}");
    log
}

fn hold_args<'a>(seq: &'a str, id: &'a str) -> Vec<&'a str> {
    vec![
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
        "-id",
        id,
    ]
}

/// Leak 4 (and the first run): with no duty lease held no tick is in
/// flight, so a hold confirms at once, also when the duty bucket does not
/// exist yet. It waited two ticks and exited 1.
#[tokio::test]
async fn with_no_lease_held_a_hold_confirms_at_once() {
    let f = Fleet::new(20).await;
    f.js.delete_key_value("crewlet_duty")
        .await
        .expect("delete the duty bucket");
    let op = operator(&f);
    let started = std::time::Instant::now();
    let run = op.run(&hold_args("5", "first"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("no sidecar holds the trim duty"),
        "{run:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "at once: {:?}",
        started.elapsed()
    );
}

/// Leak 4, on a three-server cluster: a hold is `held` only against an
/// answer published after it was written, read from the leaders (the
/// floors row and the lease by `MSG.GET`, which a replica behind never
/// answers), whichever server the command is connected to. A holder that
/// does not publish leaves it unconfirmed (exit 1); the next answer
/// confirms it.
#[tokio::test]
async fn on_a_cluster_a_hold_is_held_only_against_a_later_answer() {
    let f = Fleet::cluster(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let mut s = f.sidecar().await;
    assert_eq!(s.tick().await.duty, crewlet::tick::duty::DutyStatus::Held);
    for first in 0..3 {
        let op = Operator::with_yaml(&format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nbuckets: {{replicas: 3}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
            f.url_from(first)
        ));
        // The holder keeps its lease but publishes nothing new.
        let cfg = op.cfg.clone();
        let id = format!("stalled-{first}");
        let stalled = tokio::task::spawn_blocking(move || {
            let mut args = hold_args("21", &id);
            args.extend(["--config", &cfg]);
            crate::support::crewlet(&args)
        });
        while !stalled.is_finished() {
            s.duty.claim_or_renew(&s.broker, chrono::Utc::now()).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let run = stalled.await.expect("join");
        assert_eq!(
            run.code, 1,
            "not confirmed while no answer is published: {run:?}"
        );
        assert!(run.stderr.contains("not confirmed"), "{run:?}");
        // A hold placed while the holder ticks is confirmed by its answer.
        let cfg = op.cfg.clone();
        let id = format!("ticked-{first}");
        let placing = tokio::task::spawn_blocking(move || {
            let mut args = hold_args("21", &id);
            args.extend(["--config", &cfg]);
            crate::support::crewlet(&args)
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        s.tick().await;
        let run = placing.await.expect("join");
        assert_eq!(run.code, 0, "{run:?}");
        assert!(
            run.stderr
                .contains("confirmed by an answer published after it"),
            "{run:?}"
        );
    }
}

/// Leak 5: a readmission's join hold lived a fixed ten ticks; while its
/// record stayed unabsorbed (here: a malformed gates cursor makes every
/// absorption fail) it lapsed, and the purge could then pass the node.
/// The duty holder extends it every tick until the record is absorbed.
#[tokio::test]
async fn a_join_hold_is_extended_while_its_readmission_is_unabsorbed() {
    let (f, mut s, _) = with_node_4_evicted(operator).await;

    // Absorbing now fails, and node-4's readmission lands on the log with
    // its join hold, as the gesture writes them.
    f.put(
        "crewlet_gates",
        &format!("_absorbed.{STREAM}"),
        json!({"bogus": true}),
    )
    .await;
    f.position("node-4", 101).await;
    let (op_id, _) = f.raw_gate("node-4", crewlet::rows::GateSign::Readmit).await;
    let key = format!("{STREAM}.join-{op_id}");
    f.put(
        "crewlet_holds",
        &key,
        json!({"seq": 102, "owner": "alice", "kind": "join", "reason": "readmission of node-4", "expires_at": ts(10)}),
    )
    .await;
    let placed = f.get("crewlet_holds", &key).await.expect("the join hold");
    let expiry = |h: &Value| {
        crewlet::rows::Timestamp::parse(h["expires_at"].as_str().expect("expires_at"))
            .expect("an instant")
    };
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = s.tick().await;
    assert!(
        r.alarms.iter().any(|a| a.alarm == "gates_unabsorbed"),
        "absorbing fails: {:?}",
        r.alarms
    );
    let extended = f.get("crewlet_holds", &key).await.expect("the join hold");
    assert!(
        expiry(&extended) > expiry(&placed),
        "extended while unabsorbed: {placed} then {extended}"
    );
    assert!(f.first_seq().await <= 102, "the purge never passes node-4");

    // Once absorbed, the node counts again and the hold is lifted.
    f.delete("crewlet_gates", &format!("_absorbed.{STREAM}"))
        .await;
    s.tick().await;
    s.tick().await;
    assert!(f.get("crewlet_holds", &key).await.is_none(), "lifted");
}

mod archive {
    use super::*;
    use crewlet::archive::fold::Store;
    use crewlet::config::{size::Size, ArchiveConfig};
    use crewlet::floor::TermName;

    fn archived_config(f: &mut Fleet, store: &Store) {
        f.config.domains[0].archive = Some(ArchiveConfig {
            segment_records: 20,
            segment_bytes: Size(8 << 20),
            fold_per_tick: 2,
            ..ArchiveConfig::of(store)
        });
    }

    /// Leak 8: an archive directory that is gone below the published
    /// frontier read as an empty listing, and the seventh term was not
    /// `unreadable`. Missing segments at or below the published frontier
    /// make it unreadable, and nothing is purged.
    #[tokio::test]
    async fn a_directory_gone_below_the_frontier_is_unreadable() {
        let scratch = tempfile::tempdir().expect("dir");
        let root = scratch.path().join("archive");
        let store = Store::Dir(root.clone());
        let mut f = Fleet::new(100).await;
        f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
        archived_config(&mut f, &store);
        let mut s = f.sidecar().await;
        s.tick().await;
        s.tick().await;
        assert_eq!(f.first_seq().await, 81);
        for gone in [root.join(STREAM).join("0"), root.clone()] {
            std::fs::remove_dir_all(&gone).expect("remove");
            f.publish(20).await;
            f.healthy(&[("node-1", 110), ("node-2", 110)], 110).await;
            let r = s.tick().await;
            let state = term_state(&r, TermName::ArchiveFloor);
            let row = f.floors_row().await.expect("row");
            assert!(
                state.contains("unreadable"),
                "{}: {state} {}",
                gone.display(),
                row["archive"]
            );
            assert_eq!(f.first_seq().await, 81, "nothing purged");
            assert_eq!(
                row["archive"]["frontier"], 80,
                "the published frontier is kept"
            );
            assert_eq!(row["archive"]["first_archived"], 1, "and where it starts");
        }
    }

    /// Leak 8: `verify-archive` on an Object Store archive with a segment
    /// missing in the middle exited 3 (as for a lost broker) instead of 1
    /// naming the gap.
    #[tokio::test]
    async fn verify_archive_names_a_missing_object_segment() {
        let store = Store::ObjectStore("crewlet_archive".into());
        let mut f = Fleet::new(100).await;
        f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
        archived_config(&mut f, &store);
        let broker = f.broker().await;
        broker
            .ensure_object_store("crewlet_archive", 1)
            .await
            .expect("bucket");
        let mut s = f.sidecar().await;
        s.tick().await;
        s.tick().await;
        // The object's body is gone while its entry stays listed (its
        // chunks purged from the bucket's stream): a segment missing in the
        // middle, not a lost broker.
        let os =
            f.js.get_object_store("crewlet_archive")
                .await
                .expect("store");
        let info = os
            .info(crewlet::archive::segment::name(STREAM, 0, 21, 40))
            .await
            .expect("info");
        f.js.get_stream("OBJ_crewlet_archive")
            .await
            .expect("the bucket's stream")
            .purge()
            .filter(format!("$O.crewlet_archive.C.{}", info.nuid))
            .await
            .expect("purge the chunks");
        let op = Operator::with_yaml(&format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - name: tracker\n    stream: {STREAM}\n    archive: {{object_store: crewlet_archive, segment_records: 20}}\n",
            f.url()
        ));
        let (run, v) = op.json(&["retention", "verify-archive", "-stream", "tracker"]);
        assert_eq!(run.code, 1, "{run:?}");
        assert_eq!(v["sound"], false, "{v}");
        assert!(
            v["problems"].as_array().is_some_and(|p| p.iter().any(|p| p
                .as_str()
                .is_some_and(|p| p.contains("00000000000000000021-00000000000000000040.seg")))),
            "the problem names the segment: {v}"
        );
    }

    /// Leak 13: the fold never finished a slice whose last record was
    /// deleted (erased): it waited for a record at the slice's end that
    /// would never come, and the archive's frontier stayed below it. The
    /// reader now asks the log's leader whether anything is left there.
    #[tokio::test]
    async fn a_fold_finishes_a_slice_whose_last_record_was_deleted() {
        let scratch = tempfile::tempdir().expect("dir");
        let store = Store::Dir(scratch.path().join("archive"));
        let mut f = Fleet::new(100).await;
        f.js.publish(format!("{STREAM}.secret"), "x".into())
            .await
            .expect("send")
            .await
            .expect("ack");
        f.publish(20).await;
        f.js.get_stream(STREAM)
            .await
            .expect("log")
            .purge()
            .filter(format!("{STREAM}.secret"))
            .await
            .expect("erase record 101");
        f.healthy(&[("node-1", 121), ("node-2", 121)], 121).await;
        // A hold keeps 102 on: the slice ends at the erased record.
        f.hold("keep", 102, 600).await;
        archived_config(&mut f, &store);
        let mut s = f.sidecar().await;
        for _ in 0..3 {
            s.tick().await;
        }
        let row = f.floors_row().await.expect("row");
        assert_eq!(row["archive"]["frontier"], 101, "{}", row["archive"]);
        assert_eq!(row["trim_to"], 101, "{row}");
    }
}

/// Leak 10: `--at T` trusted the broker's start-time lookup, which assumes
/// stamps in order, and the age proof skips what was asked for: with
/// records 1..5 young and 6..10 stamped older, `--at` between the two
/// found no record at or after `T` and asked to trim all ten. It resolves
/// conservatively now: the first record stamped at or after `T` with none
/// before it.
#[tokio::test]
async fn at_resolves_conservatively_over_out_of_order_stamps() {
    let (f, old, young) = Fleet::with_out_of_order_stamps().await;
    f.healthy(&[("node-1", 10)], 10).await;
    let mid = old + (young - old) / 2;
    let mut config = f.config.clone();
    config.domains[0].gate_subject = None;
    config.retention.min_age = crewlet::config::Dur::hours(1);
    let broker = f.broker().await;
    let raised = crewlet::gesture::trim::raise(
        &broker,
        &config,
        &config.domains[0],
        &crewlet::gesture::trim::check(crewlet::gesture::trim::Ask::At(mid), "alice", "")
            .expect("checked"),
    )
    .await
    .expect("taken");
    assert_eq!(
        raised.requested, 1,
        "record 1 is stamped after T: {raised:?}"
    );
    let mut s = crewlet::tick::Sidecar::new(config, broker);
    s.tick().await;
    assert_eq!(f.first_seq().await, 1, "no record younger than T went");
}

/// The stream's configuration exactly as the broker returns it.
async fn raw_config(f: &Fleet) -> Value {
    let nc = async_nats::connect(f.server.url()).await.expect("connect");
    let r = nc
        .request(format!("$JS.API.STREAM.INFO.{STREAM}"), "".into())
        .await
        .expect("stream info");
    let v: Value = serde_json::from_slice(&r.payload).expect("json");
    v["config"].clone()
}

/// Leak 11: `set-capacity` re-encoded the stream's configuration through
/// the client's typed struct (what it does not know, or keeps only as a
/// default, was not sent back as read) and had no guard against a change
/// made meanwhile. The update it sends is the configuration as read, one
/// field changed; a configuration edited between the judgement and the
/// update is not overwritten (`changed_meanwhile`, nothing written).
#[tokio::test]
async fn set_capacity_sends_the_configuration_as_read() {
    let f = Fleet::new(10).await;
    let op = operator(&f);
    // What the command sends to the broker, seen on the wire.
    let nc = async_nats::connect(f.server.url()).await.expect("connect");
    let mut updates = nc
        .subscribe(format!("$JS.API.STREAM.UPDATE.{STREAM}"))
        .await
        .expect("subscribe");
    nc.flush().await.expect("flush");
    let before = raw_config(&f).await;
    let run = op.run(&[
        "retention",
        "set-capacity",
        STREAM,
        "2GiB",
        "-confirm",
        "2GiB",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let sent = tokio::time::timeout(
        Duration::from_secs(5),
        futures::StreamExt::next(&mut updates),
    )
    .await
    .expect("an update was sent")
    .expect("a message");
    let sent: Value = serde_json::from_slice(&sent.payload).expect("json");
    let mut want = before.clone();
    want["max_bytes"] = json!(2u64 << 30);
    assert_eq!(sent, want, "every other setting as read");

    // Someone edits the stream while the command is between its
    // judgement and its update: the edit stands, nothing is written.
    let child = op.spawn(
        &[
            "retention",
            "set-capacity",
            STREAM,
            "3GiB",
            "-confirm",
            "3GiB",
        ],
        &[("CREWLET_FAILPOINT", "before_capacity_update:sleep=1500")],
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut edited = f.log_info().await.config;
    edited.description = Some("edited meanwhile".into());
    f.js.update_stream(&edited).await.expect("edit");
    let run = crate::support::finished(child).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("changed_meanwhile"), "{run:?}");
    let now = f.log_info().await.config;
    assert_eq!(now.description.as_deref(), Some("edited meanwhile"));
    assert_eq!(now.max_bytes, 2 << 30, "nothing written");
}

/// Leak 13: whether the gates and archive clamps apply was decided by the
/// holder's own configuration, so sidecars whose configurations drifted
/// disagreed silently. The floors row carries a digest of what decides a
/// purge; another sidecar whose digest differs raises `config_drift`.
#[tokio::test]
async fn sidecars_whose_configurations_drift_say_so() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let mut holder = f.sidecar().await;
    holder.tick().await;
    let row = f.floors_row().await.expect("row");
    assert!(row["config_digest"].is_string(), "{row}");
    // A second sidecar configured alike: quiet.
    let mut same = f.sidecar_as("node-2").await;
    let r = same.tick().await;
    assert!(
        !r.alarms.iter().any(|a| a.alarm == "config_drift"),
        "{:?}",
        r.alarms
    );
    // One without the gate subject would not clamp to the gates view.
    let mut config = f.config.clone();
    config.node.id = "node-3".into();
    config.domains[0].gate_subject = None;
    let mut drifted = crewlet::tick::Sidecar::new(config, f.broker().await);
    let r = drifted.tick().await;
    let alarm = r
        .alarms
        .iter()
        .find(|a| a.alarm == "config_drift")
        .unwrap_or_else(|| panic!("config_drift: {:?}", r.alarms));
    assert!(
        alarm.measurement.contains("published by node-1"),
        "{}",
        alarm.measurement
    );
    // The holder itself, publishing its own row, is quiet.
    let r = holder.tick().await;
    assert!(
        !r.alarms.iter().any(|a| a.alarm == "config_drift"),
        "{:?}",
        r.alarms
    );
}

/// Leak 13: a raise of the requested watermark that lost five
/// compare-and-set races in a row (here another writer, played by the
/// process, moves the key between each read and write) reported the
/// watermark taken without having written it.
#[tokio::test]
async fn a_raise_that_never_wrote_is_not_reported_as_taken() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let op = operator(&f);
    let run = crate::support::crewlet_env(
        &[
            "retention",
            "trim",
            "-stream",
            "tracker",
            "--entry",
            "10",
            "--config",
            &op.cfg,
        ],
        &[("CREWLET_FAILPOINT", "requested_race")],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("changed five times"), "{run:?}");
    let row = f
        .get("crewlet_floors", &format!("_requested.{STREAM}"))
        .await
        .expect("the racer's row");
    assert_eq!(row["by"], "racer", "not ours: {row}");
}

/// A floors row lost right after a reanchor, before any node reported in
/// the new generation: no position names generation 1, and the tick used
/// to start over at generation 0, counting the old generation's
/// positions and backups again. The reanchor now records the generation
/// it opened beside the floors row, and the lost row is
/// `generation_unknown`.
#[tokio::test]
async fn a_floors_row_lost_right_after_a_reanchor_is_not_generation_0() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    f.recreate_stream().await;
    f.publish(30).await;
    let created = f.created().await;
    let op = operator(&f);
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(f.floors_row().await.expect("row")["generation"], 1);

    // The floors row is lost before node-1 reports in generation 1: its
    // row still says generation 0, position 20.
    f.delete("crewlet_floors", STREAM).await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(
        a.not_ready,
        Some(crewlet::floor::NotReady::GenerationUnknown { highest: 1 }),
        "{a:?}"
    );
    assert!(f.floors_row().await.is_none(), "no row is published");
    assert_eq!(f.first_seq().await, 1, "nothing purged");
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "the remedy works: {run:?}");
    assert_eq!(
        f.floors_row().await.expect("row")["generation"],
        2,
        "the generation after the highest one seen"
    );
}

/// The pins are read again immediately before each log's fence, not once
/// for every log: a hold placed on the second log while the first is
/// being fenced and purged (`CREWLET_FAILPOINT=after_pins` pauses there)
/// bounds the second log's purge. Read once, it did not, and the hold's
/// records went.
#[tokio::test]
async fn a_hold_placed_while_an_earlier_log_is_purged_bounds_the_next() {
    const PAGES: &str = "CREWLET_PAGES_LOG";
    let f = Fleet::new(20).await;
    create_stream(&f.js, log_stream(PAGES, &["pages.>"], GIB)).await;
    for i in 0..20 {
        f.js.publish("pages.r", format!("p{i}").into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    let pages_created = crewlet::broker::read::instant_of(
        f.js.get_stream(PAGES)
            .await
            .expect("pages")
            .cached_info()
            .created,
    );
    f.presence("node-1", &["data"]).await;
    f.position("node-1", 20).await;
    f.put(
        "crewlet_positions",
        &format!("{PAGES}.node-1"),
        json!({"node": "node-1", "stream": PAGES, "seq": 20, "generation": 0, "stream_created": pages_created.to_rfc3339(), "updated_at": ts(0), "status": "ok"}),
    )
    .await;
    f.put(
        "crewlet_backups",
        "node-1.both",
        json!({"id": "both", "node": "node-1", "taken_at": ts(-5), "completed_at": ts(0), "verified": true, "owner": "oncall", "positions": {STREAM: 20, PAGES: 20}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}}}, {{name: pages, stream: {PAGES}}}]\n",
        f.server.url()
    ));
    let child = once_with(&op, "after_pins:sleep=1500");
    let paused = crate::support::Paused::at(child).await;
    // While tracker is being fenced and purged, a hold lands on pages.
    f.put(
        "crewlet_holds",
        &format!("{PAGES}.restore"),
        json!({"seq": 6, "owner": "tester", "kind": "operator", "expires_at": ts(600)}),
    )
    .await;
    let log = paused.finish().await;
    assert_eq!(f.first_seq().await, 21, "tracker is trimmed: {log}");
    let pages_first =
        f.js.get_stream(PAGES)
            .await
            .expect("pages")
            .cached_info()
            .state
            .first_sequence;
    assert!(
        pages_first <= 6,
        "the hold placed meanwhile keeps pages from 6: first_seq {pages_first}\n{log}"
    );
}

/// An acknowledgement was judged against the one in force and then
/// written whatever the key held by then: one raised meanwhile (here to
/// 15, while the command paused between its judgement and its write) was
/// silently lowered to 12, without `-lower`. The write is now a
/// compare-and-set on the revision judged; a lost race is judged again on
/// what the key holds, and refused `would_lower`.
#[tokio::test]
async fn an_ack_raised_meanwhile_is_not_lowered_by_a_stale_judgement() {
    let f = Fleet::new(20).await;
    let op = acking_operator(&f);
    let ack = |pos| ack_args(pos, &[]);
    let run = op.run(&ack("10"));
    assert_eq!(run.code, 0, "{run:?}");
    let child = op.spawn(
        &ack("12"),
        &[("CREWLET_FAILPOINT", "ack_before_write:sleep=3000")],
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let run = op.run(&ack("15"));
    assert_eq!(run.code, 0, "the raise meanwhile: {run:?}");
    // Judged again on the raise: refused, and the raise stands.
    assert_not_lowered(&f, &crate::support::finished(child).await, 15).await;
}
