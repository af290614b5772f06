//! Evictions and readmissions as gate records on a real log: judgement,
//! records, operation ids and retries, the gates view, the fence window,
//! and the gate reserve.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use futures::StreamExt;
use serde_json::Value;

use crate::support::fleet::*;
use crate::support::{crewlet, Operator, Run};

const GATE: &str = "crewlet.tracker.gate";

/// An operator whose gestures are signed `-by alice`.
struct Op(Operator);

impl Op {
    fn new(f: &Fleet) -> Op {
        Op(Operator::with_yaml(&format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: {GATE}}}]\n",
            f.server.url()
        )))
    }

    fn signed<'a>(args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        if matches!(args.get(1), Some(&"evict") | Some(&"readmit")) {
            all.extend(["-by", "alice"]);
        }
        all
    }

    fn run(&self, args: &[&str]) -> Run {
        self.0.run(&Self::signed(args))
    }

    fn json(&self, args: &[&str]) -> (Run, Value) {
        self.0.json(&Self::signed(args))
    }

    /// As [`Op::run`], with `env` set (a failpoint).
    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut all = Self::signed(args);
        all.extend(["--config", &self.0.cfg]);
        crate::support::crewlet_env(&all, env)
    }
}

/// The duty lease held by a sidecar that has stopped publishing: a
/// gesture waiting for an answer that shows its hold waits in vain.
async fn a_stopped_holder(f: &Fleet) {
    f.delete("crewlet_duty", "retention").await;
    f.put(
        "crewlet_duty",
        "retention",
        serde_json::json!({"holder": "node-9", "session": crewlet::rows::OpId::mint(chrono::Utc::now()).as_str(), "claimed_at": ts(0)}),
    )
    .await;
}

/// Every gate record on the log: (seq, headers, body).
async fn gate_records(f: &Fleet) -> Vec<(u64, async_nats::HeaderMap, Value)> {
    let s = f.js.get_stream(STREAM).await.expect("stream");
    let c = s
        .create_consumer(OrderedConfig {
            filter_subject: GATE.into(),
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .expect("consumer");
    if c.cached_info().num_pending == 0 {
        return Vec::new();
    }
    let mut msgs = c.messages().await.expect("messages");
    let mut out = Vec::new();
    while let Some(m) = msgs.next().await {
        let m = m.expect("message");
        let info = m.info().expect("info");
        let (seq, pending) = (info.stream_sequence, info.pending);
        out.push((
            seq,
            m.headers.clone().unwrap_or_default(),
            serde_json::from_slice(&m.payload).unwrap_or(Value::Null),
        ));
        if pending == 0 {
            break;
        }
    }
    out
}

#[tokio::test]
async fn evicting_a_live_node_is_refused_then_forced() {
    let f = Fleet::new(10).await;
    f.presence("node-4", &["data"]).await;
    let op = Op::new(&f);
    let run = op.run(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("refused evict node-4 (op "), "{run:?}");
    assert!(
        run.stderr
            .contains("node_live: node-4 holds a live presence lease; stop it first"),
        "{run:?}"
    );
    assert!(
        gate_records(&f).await.is_empty(),
        "a refusal writes nothing"
    );

    let (run, v) = op.json(&[
        "retention",
        "evict",
        "node-4",
        "-confirm",
        "node-4",
        "-force",
        "-reason",
        "wedged",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["logs"][0]["outcome"], "applied", "{v}");
    let op_id = v["op_id"].as_str().expect("op id").to_string();

    // The record on the log: contract headers and body.
    let records = gate_records(&f).await;
    assert_eq!(records.len(), 1);
    let (seq, h, body) = &records[0];
    assert_eq!(*seq, 11);
    assert_eq!(
        h.get("Nats-Msg-Id").map(|v| v.as_str()),
        Some(format!("{op_id}.evict.{STREAM}.node-4").as_str())
    );
    assert_eq!(h.get("Crewlet-Gate").map(|v| v.as_str()), Some("evict"));
    assert_eq!(h.get("Crewlet-Node").map(|v| v.as_str()), Some("node-4"));
    assert_eq!(
        h.get("Crewlet-Op-Id").map(|v| v.as_str()),
        Some(op_id.as_str())
    );
    assert_eq!(body["kind"], "evict");
    assert_eq!(body["node"], "node-4");
    assert_eq!(body["op_id"], op_id.as_str());
    assert_eq!(body["by"], "alice");
    assert_eq!(body["force"], true);
    assert_eq!(body["reason"], "wedged");

    // The gates view.
    let g = f
        .get("crewlet_gates", &format!("{STREAM}.node-4"))
        .await
        .expect("gate row");
    assert_eq!(g["state"], "evicted");
    assert_eq!(g["seq"], 11);
    let o = f
        .get("crewlet_gates", &format!("_op.{op_id}"))
        .await
        .expect("op row");
    assert_eq!(o["logs"][STREAM], 11);
}

#[tokio::test]
async fn bad_input_writes_nothing_and_exits_2() {
    let f = Fleet::new(10).await;
    let op = Op::new(&f);
    let cases: &[(&[&str], &str)] = &[
        (
            &["retention", "evict", "node-4", "-confirm", "node-5"],
            "confirm_mismatch",
        ),
        (&["retention", "evict", "node-4"], "confirm_missing"),
        (
            &["retention", "evict", "node 4", "-confirm", "node 4"],
            "node_id_invalid",
        ),
        (
            &[
                "retention",
                "evict",
                "node-4",
                "-confirm",
                "node-4",
                "-op-id",
                "my-own-id",
            ],
            "op_id_invalid",
        ),
        (
            &[
                "retention",
                "readmit",
                "node-4",
                "-confirm",
                "node-4",
                "-op-id",
                "01ARZ3NDEKTSV4RRFFQ69G5FA",
            ],
            "op_id_invalid",
        ),
    ];
    for (args, code) in cases {
        let run = op.run(args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(code), "{args:?}: {run:?}");
    }
    assert!(gate_records(&f).await.is_empty());
}

#[tokio::test]
async fn retries_never_write_a_second_record() {
    let f = Fleet::new(10).await;
    // A one-second duplicate window, to test past it.
    let mut cfg =
        f.js.get_stream(STREAM)
            .await
            .expect("stream")
            .cached_info()
            .config
            .clone();
    cfg.duplicate_window = Duration::from_secs(1);
    f.js.update_stream(cfg).await.expect("update");
    f.position("node-4", 5).await;
    f.position("node-5", 5).await;
    let op = Op::new(&f);
    let (run, v) = op.json(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    let id = v["op_id"].as_str().expect("op id").to_string();

    // Within the window and after it: the same position, one record.
    let (run, v) = op.json(&[
        "retention",
        "evict",
        "node-4",
        "-confirm",
        "node-4",
        "-op-id",
        &id,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        v["logs"][0],
        serde_json::json!({"outcome": "applied", "seq": 11, "stream": STREAM, "finish": null})
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (run, v) = op.json(&[
        "retention",
        "evict",
        "node-4",
        "-confirm",
        "node-4",
        "-op-id",
        &id,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["logs"][0]["seq"], 11);
    assert_eq!(gate_records(&f).await.len(), 1);

    // A record that landed while its ack was lost (published here by hand,
    // exactly as the client would have), found by the retry after the
    // duplicate window: answered at its position, not written again.
    let lost = crewlet::rows::OpId::mint(chrono::Utc::now());
    let g = crewlet::gate::Gesture {
        op: &lost,
        sign: crewlet::rows::GateSign::Evict,
        node: "node-5",
        by: "bob",
        force: false,
        reason: "",
    };
    let (headers, body) = crewlet::gate::record(&g, STREAM, chrono::Utc::now());
    let broker = f.broker().await;
    let seq = broker
        .publish_gate(GATE, &headers, body)
        .await
        .expect("publish");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (run, v) = op.json(&[
        "retention",
        "evict",
        "node-5",
        "-confirm",
        "node-5",
        "-op-id",
        lost.as_str(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["logs"][0]["seq"], seq);
    assert_eq!(gate_records(&f).await.len(), 2);

    // The id of the eviction cannot finish another gesture.
    let (run, v) = op.json(&[
        "retention",
        "readmit",
        "node-4",
        "-confirm",
        "node-4",
        "-op-id",
        &id,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(v["logs"][0]["reason"], "op_reused");
    assert!(
        v["logs"][0]["finish"]
            .as_str()
            .is_some_and(|c| !c.contains("-op-id")),
        "a new gesture: {v}"
    );
}

#[tokio::test]
async fn after_the_fence_window_the_trim_passes_the_evicted_node() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100)], 100).await;
    f.position("node-4", 20).await;
    f.snapshot("node-4", 20).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 21, "node-4 pins the log at 20");
    let op = Op::new(&f);
    let run = op.run(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    let r = s.tick().await;
    assert_eq!(
        node_state(&r, "node-4"),
        crewlet::floor::NodeState::Evicting
    );
    assert_eq!(
        f.first_seq().await,
        21,
        "still counted inside the fence window"
    );
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = s.tick().await;
    assert_eq!(node_state(&r, "node-4"), crewlet::floor::NodeState::Evicted);
    assert_eq!(
        f.first_seq().await,
        101,
        "the trim passes its stale position (and absorbed the gate record)"
    );
    let run = op.run(&["retention", "status"]);
    assert!(
        run.stdout.contains("  node-4  no    20   0    evicted"),
        "{run:?}"
    );

    // Readmission: refused below the floor, accepted once caught up.
    let run = op.run(&["retention", "readmit", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains(&format!("below_floor: node-4 has position 20 on {STREAM} but needs 100 (floor 101, first_seq 101, generation 0)")), "{run:?}");
    let before = gate_records(&f).await.len();
    let state = f.state().await;
    f.position("node-4", state.1).await;
    // The join hold is confirmed by an answer published after it: the
    // sidecar ticks while the readmission waits.
    let run = while_ticking(
        &mut s,
        op.0.spawn(
            &Op::signed(&["retention", "readmit", "node-4", "-confirm", "node-4"]),
            &[],
        ),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(gate_records(&f).await.len(), before + 1);
    let r = s.tick().await;
    assert_eq!(
        node_state(&r, "node-4"),
        crewlet::floor::NodeState::Counted,
        "readmitted: counted again"
    );
}

#[tokio::test]
async fn two_operators_evicting_at_once_leave_one_eviction() {
    let f = Fleet::new(10).await;
    f.position("node-4", 5).await;
    let op = Op::new(&f);
    // Two operators at once, each with a fresh operation id.
    let evict = || {
        let cfg = op.0.cfg.clone();
        tokio::task::spawn_blocking(move || {
            crewlet(&[
                "retention",
                "evict",
                "node-4",
                "-confirm",
                "node-4",
                "--config",
                &cfg,
            ])
        })
    };
    let (a, b) = tokio::join!(evict(), evict());
    let (a, b) = (a.expect("join"), b.expect("join"));
    assert_eq!((a.code, b.code), (0, 0), "{a:?}\n{b:?}");
    // One that saw the other's eviction in force answers at its record
    // and writes nothing; two that judged at once both land.
    let records = gate_records(&f).await;
    assert!(matches!(records.len(), 1 | 2), "{} records", records.len());
    let last = records.last().map(|r| r.0).expect("a record");
    let g = f
        .get("crewlet_gates", &format!("{STREAM}.node-4"))
        .await
        .expect("row");
    assert_eq!(g["seq"], last, "the later record is the gate in force");
    let run = op.run(&["retention", "status", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).expect("json");
    let rows: Vec<&Value> = v["domains"][0]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["node"] == "node-4")
        .collect();
    assert_eq!(rows.len(), 1, "one row for node-4: {rows:?}");
    assert_eq!(
        rows[0]["state"], "evicting",
        "one eviction, inside its fence window"
    );
}

#[tokio::test]
async fn a_malformed_gate_record_is_skipped_and_reported() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 52)], 52).await;
    let broker = f.broker().await;
    broker
        .publish_gate(
            GATE,
            &[("Crewlet-Gate", "evict".to_string())],
            b"{oops".to_vec(),
        )
        .await
        .expect("publish");
    f.publish(1).await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let view = r.domains[0].answer.gate_view.clone().expect("gate view");
    assert_eq!(view.absorbed_to, Some(52));
    assert_eq!(view.skipped.len(), 1);
    assert!(
        view.skipped[0]
            .reason
            .starts_with("body is not a gate record"),
        "{:?}",
        view.skipped
    );
    assert_eq!(f.first_seq().await, 53, "the other terms still trim");
    let op = Op::new(&f);
    let run = op.run(&["retention", "status"]);
    assert!(
        run.stdout
            .contains("gate record 51 skipped: body is not a gate record"),
        "{run:?}"
    );
}

#[tokio::test]
async fn the_gate_reserve_takes_evictions_until_max_bytes() {
    // 16 KiB ceiling: the soft ceiling is 15 KiB.
    let f = Fleet::with_max_bytes(0, 16 * 1024).await;
    // Fill just past the soft ceiling (15 KiB) with ordinary records.
    let mut bytes = 0;
    while bytes <= 15 * 1024 {
        f.js.publish(format!("{STREAM}.records"), vec![b'x'; 100].into())
            .await
            .expect("send")
            .await
            .expect("ack");
        bytes =
            f.js.get_stream(STREAM)
                .await
                .expect("s")
                .cached_info()
                .state
                .bytes;
    }
    assert!(
        bytes > 15 * 1024 && bytes < 16 * 1024,
        "past the soft ceiling, below max_bytes: {bytes}"
    );
    let soft = 16 * 1024 - 1024;
    assert!(matches!(
        crewlet::gate::admission(
            crewlet::gate::RecordKind::Ordinary,
            bytes,
            500,
            soft,
            16 * 1024
        ),
        crewlet::gate::Admission::Refuse { .. }
    ));
    // The published soft ceiling refuses ordinary writes and admits gates.
    let mut s = f.sidecar().await;
    s.tick().await;
    let broker = f.broker().await;
    let ordinary = broker
        .admission(
            "crewlet_floors",
            STREAM,
            crewlet::gate::RecordKind::Ordinary,
            200,
        )
        .await
        .expect("judged");
    assert!(
        matches!(ordinary, crewlet::gate::Admission::Refuse { .. }),
        "{ordinary:?}"
    );
    let gate = broker
        .admission(
            "crewlet_floors",
            STREAM,
            crewlet::gate::RecordKind::Gate,
            200,
        )
        .await
        .expect("judged");
    assert_eq!(gate, crewlet::gate::Admission::Admit);
    let op = Op::new(&f);
    let run = op.run(&[
        "retention",
        "evict",
        "node-4",
        "-confirm",
        "node-4",
        "-force",
    ]);
    assert_eq!(run.code, 0, "the reserve takes the eviction: {run:?}");

    // Fill to max_bytes: even the reserve cannot take it.
    while f
        .js
        .publish(format!("{STREAM}.records"), vec![b'x'; 100].into())
        .await
        .expect("send")
        .await
        .is_ok()
    {}
    let (run, v) = op.json(&[
        "retention",
        "evict",
        "node-6",
        "-confirm",
        "node-6",
        "-force",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(v["logs"][0]["reason"], "log_full", "{v}");
    let finish = v["logs"][0]["finish"].as_str().expect("finish");
    assert!(
        finish.contains(&format!("-op-id {}", v["op_id"].as_str().expect("id"))),
        "{finish}"
    );
    // The detail names the exact command that raises the ceiling; it
    // works, and then the finishing command does.
    let detail = v["logs"][0]["detail"].as_str().expect("detail");
    let raise = detail
        .split("raise its ceiling: ")
        .nth(1)
        .and_then(|r| r.split(", then").next())
        .unwrap_or_else(|| panic!("no command in {detail}"));
    assert_eq!(
        raise,
        format!("crewlet retention set-capacity {STREAM} 1MiB -confirm 1MiB")
    );
    let run = op.run(&raise.split(' ').skip(1).collect::<Vec<_>>());
    assert_eq!(run.code, 0, "{run:?}");
    let run = op.run(&finish.split(' ').skip(1).collect::<Vec<_>>());
    assert_eq!(run.code, 0, "finished once the ceiling is raised: {run:?}");
}

/// Records that land between the tick's stream info and its absorbing of
/// gate records are not a restored log. The absorber used to read the
/// log's `last_seq` again and move the cursor there, past the `last_seq`
/// the answer compared it with: with a publisher appending steadily, some
/// ticks raised `gates_unabsorbed` ("the cursor is past the log's last
/// sequence … reanchor") on a healthy log. The cursor and the answer now
/// belong to one cut.
#[tokio::test]
async fn records_landing_while_a_tick_absorbs_are_not_a_restored_log() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let op = Op::new(&f);
    let child = op.0.spawn(
        &["retention", "run", "--once"],
        &[
            ("RUST_LOG", "info"),
            ("CREWLET_FAILPOINT", "after_stream_info:sleep=1500"),
        ],
    );
    // Wait until the tick has read stream info and paused, then append.
    let paused = crate::support::Paused::at(child).await;
    f.publish(5).await;
    let log = paused.finish().await;
    let row = f.floors_row().await.expect("published");
    assert_eq!(row["last_seq"], 10, "the tick's cut: {row}");
    assert!(
        row["gate_view"]["error"].is_null(),
        "no cursor past the log: {row}\n{log}"
    );
    let cursor = f
        .get("crewlet_gates", &format!("_absorbed.{STREAM}"))
        .await
        .expect("cursor");
    assert!(
        cursor["seq"].as_u64().is_some_and(|s| s <= 10),
        "the cursor stops at the tick's cut: {cursor}"
    );
    assert!(!log.contains("gates_unabsorbed"), "{log}");
}

/// A readmission's join hold is confirmed by an answer published after it
/// that shows it in force, or the readmission stops. Here a duty lease is
/// held but no sidecar publishes: the confirmation got no answer, and the
/// readmission used to write its record anyway, while a tick that had read
/// its pins before the hold could still purge what the node needs. Now it
/// is `join_hold_unconfirmed` (exit 1): no record, the join hold released.
#[tokio::test]
async fn a_readmission_whose_join_hold_is_not_confirmed_writes_nothing() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100)], 100).await;
    f.position("node-4", 20).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let op = Op::new(&f);
    let run = op.run(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    s.tick().await;
    let state = f.state().await;
    f.position("node-4", state.1).await;
    // A lease is held (by a sidecar that has stopped publishing): the
    // gesture waits for an answer that never comes.
    a_stopped_holder(&f).await;
    let before = gate_records(&f).await.len();
    let run = op.run(&["retention", "readmit", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("join_hold_unconfirmed") && run.stderr.contains(STREAM),
        "{run:?}"
    );
    assert_eq!(gate_records(&f).await.len(), before, "no record written");
    let holds = f.js.get_key_value("crewlet_holds").await.expect("holds");
    let mut keys = holds.keys().await.expect("keys");
    let mut left = Vec::new();
    while let Some(k) = futures::StreamExt::next(&mut keys).await {
        left.push(k.expect("key"));
    }
    assert!(
        !left.iter().any(|k| k.contains(".join-")),
        "the join hold is released: {left:?}"
    );
}

/// A readmission that stops releases its join holds, retrying a delete the
/// broker did not take; one it cannot release is named in the refusal with
/// the command that releases it (a hold left behind is extended by the
/// duty holder while its readmission is unabsorbed, which is for ever when
/// it never lands). The broker's refusal is stood in for by
/// `CREWLET_FAILPOINT=join_hold_release_fails:N`.
#[tokio::test]
async fn a_stopped_readmission_retries_its_release_and_names_a_hold_it_could_not_release() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100)], 100).await;
    f.position("node-4", 20).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let op = Op::new(&f);
    let run = op.run(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    s.tick().await;
    let state = f.state().await;
    f.position("node-4", state.1).await;
    a_stopped_holder(&f).await;
    let join_holds = || async {
        let holds = f.js.get_key_value("crewlet_holds").await.expect("holds");
        let mut keys = holds.keys().await.expect("keys");
        let mut left = Vec::new();
        while let Some(k) = futures::StreamExt::next(&mut keys).await {
            let k = k.expect("key");
            if k.contains(".join-") {
                left.push(k);
            }
        }
        left
    };
    // The first delete is not taken: the retry releases it.
    let run = op.run_env(
        &["retention", "readmit", "node-4", "-confirm", "node-4"],
        &[("CREWLET_FAILPOINT", "join_hold_release_fails:1")],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(join_holds().await.is_empty(), "released on the retry");
    // None is taken: the refusal names the hold and its release. (The
    // stopped holder's lease again: the first one has lapsed, and with no
    // lease held a hold confirms at once.)
    a_stopped_holder(&f).await;
    let run = op.run_env(
        &["retention", "readmit", "node-4", "-confirm", "node-4"],
        &[("CREWLET_FAILPOINT", "join_hold_release_fails:3")],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let left = join_holds().await;
    assert_eq!(left.len(), 1, "{left:?}");
    let id = left[0]
        .split_once('.')
        .map(|(_, id)| id.to_string())
        .expect("a hold id");
    let release = format!("crewlet retention release -stream {STREAM} {id}");
    assert!(run.stderr.contains(&release), "{run:?}");
    // The printed command works.
    let run = op.run(&["retention", "release", "-stream", STREAM, &id]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(join_holds().await.is_empty());
}
