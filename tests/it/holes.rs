//! One test per hole in the invariant found by the review of issue 10
//! (docs/testing.md lists them). Each one failed on the code before its fix:
//! a purge took a record something still needed, or a gesture reported
//! success that was not true.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fleet::*;
use crate::support::{create_stream, log_stream, Operator, Run};

const GATE: &str = "crewlet.tracker.gate";

/// The operator's configuration for a [`Fleet`].
fn operator(f: &Fleet) -> Operator {
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, min_age: 3s, snapshot_interval: 1s, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.server.url()
    ))
}

/// Publishes an eviction of `node` on the log as the gesture would, by
/// hand (so that no absorption follows it); returns its sequence.
async fn raw_eviction(f: &Fleet, node: &str) -> u64 {
    let op = crewlet::rows::OpId::mint(chrono::Utc::now());
    let g = crewlet::gate::Gesture {
        op: &op,
        sign: crewlet::rows::GateSign::Evict,
        node,
        by: "alice",
        force: false,
        reason: "",
    };
    let (headers, body) = crewlet::gate::record(&g, STREAM, chrono::Utc::now());
    f.broker()
        .await
        .publish_gate(GATE, &headers, body)
        .await
        .expect("publish gate record")
}

fn alarm_names(r: &crewlet::trim::TickReport) -> Vec<&'static str> {
    r.alarms.iter().map(|a| a.alarm).collect()
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
async fn hole_1_the_purge_never_passes_an_unabsorbed_gate_record() {
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
async fn hole_2_a_recreated_stream_starts_a_fresh_gates_view() {
    let f = Fleet::new(30).await;
    f.healthy(&[("node-1", 30)], 30).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let cursor = f
        .get("crewlet_gates", &format!("_absorbed.{STREAM}"))
        .await
        .expect("cursor");
    assert_eq!(cursor["seq"], 30);

    f.js.delete_stream(STREAM).await.expect("delete");
    create_stream(
        &f.js,
        log_stream(STREAM, &[&format!("{STREAM}.>"), GATE], GIB),
    )
    .await;
    f.publish(5).await;
    let created = f.created().await;
    let op = operator(&f);
    let run = op.run(&[
        "retention",
        "reanchor",
        "-stream",
        STREAM,
        "-confirm",
        &created,
    ]);
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
    let node4 = r.domains[0]
        .answer
        .nodes
        .iter()
        .find(|n| &*n.node == "node-4")
        .expect("listed");
    assert_eq!(node4.state, crewlet::floor::NodeState::Evicted);
}
