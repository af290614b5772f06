//! A lost bucket lifts no pin (docs/trim-floor.md, A lost bucket lifts no
//! pin): a positions or holds bucket deleted and recreated empty (by
//! `crewlet retention init`, the remedy the tool itself prints) does not
//! end the pins its rows held. The floors row carries them until their
//! owner writes again, the hold expires, or an eviction lands; and a node
//! that comes back below what the log still holds is an alarm.

use std::time::Duration;

use serde_json::Value;

use crate::support::fleet::*;
use crate::support::Operator;
use crewlet::floor::NodeState;

const GATE: &str = "crewlet.tracker.gate";

fn operator(f: &Fleet) -> Operator {
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.server.url()
    ))
}

/// node-1 and node-2 live at 212, node-3 gone (no lease) and stalled at
/// 182, a fresh backup at 212: the trim holds at node-3's 182.
async fn node_3_stalled_at_182() -> (Fleet, crewlet::tick::Sidecar) {
    let f = Fleet::new(212).await;
    f.healthy(&[("node-1", 212), ("node-2", 212)], 212).await;
    f.position("node-3", 182).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 183, "node-3 pins the log at 182");
    (f, s)
}

/// The bucket deleted by accident, and a tick that finds it missing.
async fn lose(f: &Fleet, s: &mut crewlet::tick::Sidecar, bucket: &str) {
    f.js.delete_key_value(bucket)
        .await
        .expect("delete the bucket");
    s.tick().await;
}

fn node_entry(status: &Value, node: &str) -> Value {
    status["domains"][0]["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["node"] == node))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The operator's trial, exactly: the positions bucket deleted by
/// accident, `status` names `crewlet retention init` as the remedy, init
/// recreates it empty, the live nodes report again. Before, the next tick
/// purged 183.. which node-3 had not applied, and node-3 vanished from the
/// node table. Now node-3 stays counted at 182 (`carried`) until it
/// reports again.
#[tokio::test]
async fn a_recreated_positions_bucket_keeps_an_absent_nodes_pin_until_it_reports() {
    let (f, mut s) = node_3_stalled_at_182().await;
    let op = operator(&f);
    lose(&f, &mut s, "crewlet_positions").await;
    assert_eq!(f.first_seq().await, 183, "a missing bucket is unreadable");
    let run = op.status();
    assert!(
        run.stderr.contains("crewlet retention init")
            || run.stdout.contains("crewlet retention init"),
        "the remedy printed: {run:?}"
    );

    // The printed remedy: before it writes, init says which pins carry
    // over and how each ends.
    let run = op.run(&["retention", "init"]);
    assert_eq!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    for want in [
        "node-3",
        "182",
        "crewlet retention evict node-3 -confirm node-3",
    ] {
        assert!(
            said.contains(want),
            "init names the carried pin ({want}): {run:?}"
        );
    }
    // The live nodes report again, as they do every few seconds; the log
    // grows.
    f.position("node-1", 222).await;
    f.position("node-2", 222).await;
    f.publish(10).await;
    for _ in 0..3 {
        let r = s.tick().await;
        assert_eq!(node_state(&r, "node-3"), NodeState::Carried, "{r:?}");
        assert_eq!(
            r.domains[0].answer.trim_to, 182,
            "{:?}",
            r.domains[0].answer
        );
    }
    assert_eq!(f.first_seq().await, 183, "nothing node-3 needs is purged");

    // Status and JSON show the pin as carried, with the bucket it was
    // read from.
    let (run, v) = op.json(&["retention", "status"]);
    let n = node_entry(&v, "node-3");
    assert_eq!(n["state"], "carried", "{run:?}");
    assert_eq!(n["seq"], 182, "{n}");
    assert!(
        n["carried_from"].is_string(),
        "the old bucket's created: {n}"
    );
    let run = op.status();
    assert!(run.stdout.contains("carried"), "{run:?}");

    // node-3 reports again: its own row ends the carried pin.
    f.position("node-3", 200).await;
    let r = s.tick().await;
    assert_eq!(node_state(&r, "node-3"), NodeState::Counted, "{r:?}");
    assert_eq!(f.first_seq().await, 201);
}

/// A node known only from a carried pin can be evicted like any other,
/// and the eviction ends its pin.
#[tokio::test]
async fn an_eviction_ends_a_carried_pin() {
    let (f, mut s) = node_3_stalled_at_182().await;
    let op = operator(&f);
    lose(&f, &mut s, "crewlet_positions").await;
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    f.position("node-1", 212).await;
    f.position("node-2", 212).await;
    let r = s.tick().await;
    assert_eq!(node_state(&r, "node-3"), NodeState::Carried);
    assert_eq!(f.first_seq().await, 183);

    let run = op.run(&["retention", "evict", "node-3", "-confirm", "node-3"]);
    assert_eq!(run.code, 0, "a carried node is a known node: {run:?}");
    // Past the fence window the eviction lands and the pin is gone.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    s.tick().await;
    let r = s.tick().await;
    let counted = r.domains[0]
        .answer
        .nodes
        .iter()
        .find(|n| &*n.node == "node-3")
        .is_some_and(|n| n.state != NodeState::Evicted);
    assert!(!counted, "node-3 is no longer counted: {r:?}");
    assert!(
        f.first_seq().await > 200,
        "the trim moves on: {}",
        f.first_seq().await
    );
    assert!(
        f.floors_row().await.expect("row")["pins"]["nodes"]
            .get("node-3")
            .is_none(),
        "the row carries the pin no more"
    );
}

/// A hold missing from a recreated holds bucket pins until its
/// `expires_at`.
#[tokio::test]
async fn a_recreated_holds_bucket_keeps_a_live_hold_until_it_expires() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.hold("restore", 40, 8).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 40, "the hold keeps 40..");
    lose(&f, &mut s, "crewlet_holds").await;
    let op = operator(&f);
    let run = op.run(&["retention", "init"]);
    assert_eq!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("restore"),
        "init names the carried hold: {run:?}"
    );
    let r = s.tick().await;
    assert_eq!(
        term_state(&r, crewlet::floor::TermName::MinHold),
        "value 39",
        "{:?}",
        r.domains[0].answer
    );
    assert_eq!(f.first_seq().await, 40, "the carried hold pins");
    // Past its expiry it pins no more.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while f.first_seq().await != 101 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        s.tick().await;
    }
    assert_eq!(
        f.first_seq().await,
        101,
        "the hold expired and the trim moved"
    );
}

/// A counted node whose position is below what the log still holds can no
/// longer catch up by replay: `node_behind_log`, with the remedy.
#[tokio::test]
async fn a_counted_node_below_the_logs_first_record_raises_node_behind_log() {
    let f = Fleet::new(212).await;
    f.healthy(&[("node-1", 212), ("node-2", 212)], 212).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 213);
    let op = operator(&f);
    assert!(
        !op.alarms().iter().any(|a| a.contains("node_behind_log")),
        "no alarm while every node can catch up"
    );
    // node-3 comes back reporting 182, with the log starting at 213.
    f.position("node-3", 182).await;
    let run = op.status();
    let alarm = run
        .stderr
        .lines()
        .find(|l| l.starts_with("ALARM node_behind_log"))
        .unwrap_or_else(|| panic!("the alarm: {run:?}"))
        .to_string();
    assert_eq!(run.code, 1, "{run:?}");
    for want in [
        "node-3",
        "182",
        "213",
        "snapshot",
        "crewlet retention evict node-3 -confirm node-3",
    ] {
        assert!(alarm.contains(want), "{want}: {alarm}");
    }
    // At first_seq - 1 it can still catch up: no alarm.
    f.position("node-3", 212).await;
    assert!(
        !op.alarms().iter().any(|a| a.contains("node_behind_log")),
        "{:?}",
        op.status()
    );
}
