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

pub(crate) fn operator(f: &Fleet) -> Operator {
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
        f.server.url()
    ))
}

/// node-1 and node-2 live at 212, node-3 gone (no lease) and stalled at
/// 182, a fresh backup at 212: the trim holds at node-3's 182.
pub(crate) async fn node_3_stalled_at_182() -> (Fleet, crewlet::tick::Sidecar) {
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
    let row = f.floors_row().await.expect("row");
    assert_eq!(
        row["memory"]["carried"], 0,
        "the row carries the pin no more: {row}"
    );
    let members = f
        .get("crewlet_floors", &format!("_members.{STREAM}.0"))
        .await
        .expect("the membership");
    for list in ["nodes", "carried"] {
        assert!(
            !members[list]
                .as_array()
                .is_some_and(|l| l.iter().any(|n| n == "node-3")),
            "the memory forgets node-3: {members}"
        );
    }
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

/// A live data node is a member of the memory too (docs/trim-floor.md,
/// The sidecar's memory). node-5 is live with a stalled position at 120;
/// the positions bucket is lost, node-5's lease lapses before it reports
/// into the recreated bucket. Before, a live data node's position was
/// never remembered, and its records went. Now it counts at the
/// remembered `applied` (120) until it reports.
#[tokio::test]
async fn a_live_data_node_that_goes_down_during_the_loss_keeps_its_records() {
    let f = Fleet::new(200).await;
    f.healthy(&[("node-1", 200), ("node-2", 200)], 200).await;
    f.presence("node-5", &["data"]).await;
    f.position("node-5", 120).await;
    f.snapshot("node-5", 120).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 121, "node-5 pins the log at 120");
    let op = operator(&f);
    lose(&f, &mut s, "crewlet_positions").await;
    // node-5 goes down: its lease is gone before it reports again.
    f.delete("crewlet_presence", "node-5").await;
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    f.position("node-1", 210).await;
    f.position("node-2", 210).await;
    f.publish(10).await;
    for _ in 0..3 {
        let r = s.tick().await;
        assert_eq!(node_state(&r, "node-5"), NodeState::Carried, "{r:?}");
    }
    assert_eq!(f.first_seq().await, 121, "nothing node-5 needs is purged");
    // It reports again: its own row ends the carried pin.
    f.position("node-5", 205).await;
    f.snapshot("node-5", 205).await;
    let r = s.tick().await;
    assert_eq!(node_state(&r, "node-5"), NodeState::Counted, "{r:?}");
    assert!(f.first_seq().await > 121);
}

/// A log with 100,000 counted nodes, none of them live, publishes and
/// purges like one with ten: the floors row stays under 64 KiB (the
/// membership lives in `_members` keys, each under 256 KiB), and after the
/// positions bucket is lost every one of them is carried from those keys.
/// Before, the row carried every node's pin, passed the broker's 1 MiB
/// `max_payload` past about 11,000 nodes, and the log was never trimmed
/// again.
#[tokio::test]
async fn a_hundred_thousand_non_live_nodes_publish_purge_and_are_remembered() {
    const N: usize = 100_000;
    let mut f = Fleet::new(200).await;
    // A whole read of 100,000 keys in a debug build takes seconds: the
    // tick (and the read timeout it bounds) is long enough for it.
    f.config.retention.tick = crewlet::config::Dur::secs(30);
    // The duty lease as `init` makes it for that tick (three ticks), so
    // that the fence lasts as long as the tick allows.
    f.js.delete_key_value("crewlet_duty").await.expect("delete");
    let broker = f.broker().await;
    for spec in crewlet::buckets::contract_buckets(&f.config) {
        broker.ensure_bucket(&spec).await.expect("recreate");
    }
    f.healthy(&[("node-1", 200), ("node-2", 200)], 200).await;
    let created = f.created().await;
    let kv =
        f.js.get_key_value("crewlet_positions")
            .await
            .expect("bucket");
    let row = |i: usize| {
        serde_json::json!({"node": format!("gone-{i:06}"), "stream": STREAM, "seq": 150,
            "generation": 0, "stream_created": created, "updated_at": ts(-60), "status": "ok"})
        .to_string()
    };
    for batch in (0..N).collect::<Vec<_>>().chunks(2000) {
        let acks: Vec<_> = batch
            .iter()
            .map(|i| kv.put(format!("{STREAM}.gone-{i:06}"), row(*i).into()))
            .collect();
        for a in futures::future::join_all(acks).await {
            a.expect("put");
        }
    }
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert!(
        matches!(r.domains[0].published, Some(Ok(_))),
        "{:?}",
        r.domains[0].published
    );
    assert_eq!(
        f.first_seq().await,
        151,
        "published, then purged to 150: trim_to {}, purged {:?}, mark {:?}, blocked {:?}",
        r.domains[0].answer.trim_to,
        r.domains[0].purged,
        r.domains[0].mark,
        r.domains[0].answer.terms
    );
    let floors = f.js.get_key_value("crewlet_floors").await.expect("floors");
    let written = floors.get(STREAM).await.expect("get").expect("the row");
    assert!(
        written.len() < 64 * 1024,
        "the row is {} bytes",
        written.len()
    );
    let row: Value = serde_json::from_slice(&written).expect("row");
    assert_eq!(row["memory"]["members"], N as u64 + 2, "{}", row["memory"]);
    let keys = row["memory"]["keys"].as_u64().expect("keys");
    assert!(keys > 1, "{}", row["memory"]);
    for n in 0..keys {
        let v = floors
            .get(format!("_members.{STREAM}.{n}"))
            .await
            .expect("get")
            .expect("a members key");
        assert!(v.len() < 256 * 1024, "key {n} is {} bytes", v.len());
    }
    // The positions bucket lost, recreated, the live nodes report again:
    // every remembered node is carried at 150.
    lose(&f, &mut s, "crewlet_positions").await;
    assert_eq!(operator(&f).run(&["retention", "init"]).code, 0);
    f.position("node-1", 210).await;
    f.position("node-2", 210).await;
    f.publish(10).await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    let carried = a
        .nodes
        .iter()
        .filter(|n| n.state == NodeState::Carried)
        .count();
    let others: Vec<_> = a
        .nodes
        .iter()
        .filter(|n| !n.node.starts_with("gone-"))
        .collect();
    assert_eq!(carried, N, "{:?} {others:?}", a.not_ready);
    assert_eq!(a.trim_to, 150);
    assert_eq!(f.first_seq().await, 151);
}

/// The remedies printed for a carried hold work (the operator's trial:
/// `release` answered "there is no hold", `holds` said "no holds",
/// `status --if-released` exited 2): `holds` lists it as carried, the
/// preview shows the trim moving, and `release` ends it.
#[tokio::test]
async fn a_carried_holds_printed_remedies_work() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.hold("nightly-1", 40, 600).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 40);
    lose(&f, &mut s, "crewlet_holds").await;
    let op = operator(&f);
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    s.tick().await;
    assert_eq!(f.first_seq().await, 40, "the carried hold pins");

    let (run, v) = op.json(&["retention", "holds"]);
    let listed = v["holds"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["id"] == "nightly-1"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed["state"], "carried", "{run:?}");
    let run = op.run(&["retention", "holds"]);
    assert!(
        run.stdout.contains("nightly-1") && run.stdout.contains("carried"),
        "{run:?}"
    );

    // Past the operator's min_age (1s): only the pins bound the trim.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let run = op.run(&["retention", "status", "--if-released", "nightly-1"]);
    assert_ne!(run.code, 2, "{run:?}");
    assert!(run.stdout.contains("PREVIEW"), "{run:?}");
    assert!(
        run.stdout.contains("to 100"),
        "the trim would move: {run:?}"
    );

    let run = op.run(&["retention", "release", "-stream", STREAM, "nightly-1"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("released nightly-1"), "{run:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    s.tick().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 101, "released: the trim moves");
}

/// A readmission's join hold is remembered as one: lost with its holds
/// bucket while the readmission is unabsorbed (its gate record not on the
/// log yet), it pins past its own `expires_at` (the duty holder can no
/// longer extend a hold the bucket lost) until the readmission is
/// absorbed. Before, the carried hold ended at its remembered expiry and
/// the purge passed the readmitted node's records.
#[tokio::test]
async fn a_lost_join_hold_pins_until_its_readmission_is_absorbed() {
    let (f, mut s, op) = with_node_4_evicted(operator).await;

    // node-4's readmission has placed its join hold; its gate record is
    // not on the log yet.
    f.position("node-4", 101).await;
    let op_id = crewlet::rows::OpId::mint(chrono::Utc::now());
    let key = format!("{STREAM}.join-{op_id}");
    f.put(
        "crewlet_holds",
        &key,
        serde_json::json!({"seq": 102, "owner": "alice", "kind": "join", "reason": "readmission of node-4", "expires_at": ts(3)}),
    )
    .await;
    s.tick().await;
    f.publish(60).await;
    f.healthy(&[("node-1", 160)], 160).await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 102, "the join hold pins 102..");

    lose(&f, &mut s, "crewlet_holds").await;
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    f.healthy(&[("node-1", 160)], 160).await;
    s.tick().await;
    // Past the expiry the memory remembers (the duty holder's last
    // extension), and still unabsorbed.
    let chunk = f
        .get("crewlet_floors", &format!("_members.{STREAM}.0"))
        .await
        .expect("the membership");
    let hold = chunk["holds"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["id"] == format!("join-{op_id}")))
        .cloned()
        .expect("the join hold is remembered");
    let expiry = crewlet::rows::Timestamp::parse(hold["expires_at"].as_str().expect("expiry"))
        .expect("an instant");
    let wait = (expiry.0 - chrono::Utc::now()).num_milliseconds().max(0) as u64 + 1200;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    for _ in 0..2 {
        s.tick().await;
    }
    assert_eq!(
        f.first_seq().await,
        102,
        "the lost join hold pins until its readmission is absorbed"
    );

    // The readmission's record lands and is absorbed: node-4 counts again
    // at its own position and the carried hold ends.
    f.raw_gate_as("node-4", crewlet::rows::GateSign::Readmit, &op_id)
        .await;
    for _ in 0..3 {
        s.tick().await;
    }
    let row = f.floors_row().await.expect("row");
    assert_eq!(
        row["memory"]["carried"].as_u64(),
        Some(0),
        "nothing carried: {}",
        row["memory"]
    );
}

/// A reanchor's row opens the new generation's memory with the nodes and
/// holds it sees now. Before, its row carried no memory: a positions
/// bucket lost before a node reported in the new generation took that
/// node's pin with it, and the next tick purged what it had not applied.
#[tokio::test]
async fn a_reanchor_remembers_the_nodes_and_holds_it_saw() {
    let (f, mut s) = node_3_stalled_at_182().await;
    // The log rebuilt from elsewhere: another incarnation, 212 records.
    f.recreate_stream().await;
    f.publish(212).await;
    s.tick().await;
    let op = operator(&f);
    let created = f.created().await;
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "{run:?}");
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["memory"]["members"], 3, "{}", row["memory"]);
    assert_eq!(row["format"], 2);

    // The live nodes report in the new generation; node-3 has not when
    // the positions bucket is lost.
    for n in ["node-1", "node-2"] {
        f.position_at(n, 212, 1, &created, "ok").await;
    }
    lose(&f, &mut s, "crewlet_positions").await;
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    for n in ["node-1", "node-2"] {
        f.position_at(n, 212, 1, &created, "ok").await;
    }
    for _ in 0..2 {
        s.tick().await;
    }
    let (_, status) = op.json(&["retention", "status"]);
    assert_eq!(
        node_entry(&status, "node-3")["state"],
        "carried",
        "{status:#}"
    );
    assert_eq!(f.first_seq().await, 1, "node-3, remembered, pins the log");
}
