//! `crewlet::node`, the Rust API for the rows nodes write: what it writes
//! is what the sidecar counts, and what the sidecar would call malformed
//! is refused before anything is written.

use std::time::Duration;

use crewlet::node::{Node, NodeError};
use crewlet::rows::{Artefact, BackupManifest, SkipReason, Timestamp};

use crate::support::fleet::*;

#[tokio::test]
async fn rows_written_by_the_node_api_count_and_bad_ones_are_refused() {
    let f = Fleet::new(50).await;
    let node = f.node("node-1").await;
    let created = node.stream_created(STREAM).await.expect("stream created");
    assert_eq!(created.to_rfc3339(), f.created().await);
    node.lease(&["data"], "1.0").await.expect("lease");
    node.report(STREAM, 30, 0, created).await.expect("report");
    let artefact = Artefact {
        position: 30,
        generation: 0,
        taken_at: Timestamp(chrono::Utc::now()),
        verified: true,
    };
    node.register_snapshots([(STREAM.to_string(), artefact)].into(), SkipReason::None)
        .await
        .expect("snapshots");
    f.snapshot("node-2", 30).await;
    let now = Timestamp(chrono::Utc::now());
    let manifest = BackupManifest {
        id: "b1".into(),
        node: "node-1".into(),
        taken_at: now,
        completed_at: Some(now),
        verified: true,
        owner: "oncall".into(),
        positions: [(STREAM.to_string(), 40)].into(),
    };
    node.announce_backup(&manifest).await.expect("manifest");

    // The sidecar counts what the API wrote: applied binds at 30.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let report = f.sidecar().await.tick().await;
    let answer = &report.domains[0].answer;
    assert_eq!(answer.trim_to, 30, "{answer:?}");
    assert_eq!(f.first_seq().await, 31);

    // A stream name the contract forbids in a key: refused, nothing written.
    let err = node
        .report("BAD.NAME", 5, 0, created)
        .await
        .expect_err("a dotted stream name");
    assert!(matches!(err, NodeError::Malformed { .. }), "{err}");
    assert!(f
        .get("crewlet_positions", "BAD.NAME.node-1")
        .await
        .is_none());
    // A manifest for another node, and a node id that is not one.
    let mut other = manifest.clone();
    other.node = "node-2".into();
    assert!(matches!(
        node.announce_backup(&other).await,
        Err(NodeError::Malformed { .. })
    ));
    assert!(matches!(
        Node::with_broker(f.broker().await, f.config.buckets.clone(), "node 1"),
        Err(NodeError::BadId { .. })
    ));
    // Leaving deletes the lease at once.
    node.leave().await.expect("leave");
    assert!(f.get("crewlet_presence", "node-1").await.is_none());
}

/// The contract published in the broker: the duty holder writes
/// `_contract` (the presence TTL, and per log its gate subject,
/// generation, snapshot and backup policy and `min_age`) before any node
/// needs to copy the sidecar's YAML, writes it again only when it changes,
/// and `crewlet::node` reads it, the generation included.
#[tokio::test]
async fn the_contract_is_published_when_it_changes_and_nodes_read_it() {
    let f = Fleet::new(10).await;
    let node = f.node("node-1").await;
    assert!(node.contract().await.expect("read").is_none(), "none yet");
    assert_eq!(node.generation(STREAM).await.expect("generation"), 0);
    let mut s = f.sidecar().await;
    s.tick().await;
    let c = node.contract().await.expect("read").expect("written");
    assert_eq!(c.by, "node-1");
    assert_eq!(c.presence_ttl, f.config.retention.presence_ttl.to_string());
    let d = &c.domains[0];
    assert_eq!(d.stream, STREAM);
    assert_eq!(d.gate_subject.as_deref(), Some("crewlet.tracker.gate"));
    assert_eq!(d.generation, 0);
    let snapshots = d.snapshots.as_ref().expect("snapshots");
    assert_eq!(
        (snapshots.interval.clone(), snapshots.quorum),
        (
            f.config.retention.snapshot_interval.to_string(),
            f.config.retention.snapshot_quorum
        )
    );
    assert_eq!(d.backups.as_ref().expect("backups").policy, "engine");
    assert_eq!(d.min_age, f.config.retention.min_age.to_string());
    // Unchanged: not written again.
    let revision = |f: &Fleet| {
        let js = f.js.clone();
        async move {
            js.get_key_value("crewlet_floors")
                .await
                .expect("bucket")
                .entry("_contract")
                .await
                .expect("entry")
                .expect("there")
                .revision
        }
    };
    let before = revision(&f).await;
    s.tick().await;
    s.tick().await;
    assert_eq!(revision(&f).await, before, "an unchanged contract stands");
    // Changed (another quorum): written on the next holder's tick.
    s.duty.release(&s.broker).await;
    let mut config = f.config.clone();
    config.retention.snapshot_quorum = 3;
    let mut s = crewlet::tick::Sidecar::new(config, f.broker().await);
    s.tick().await;
    let c = node.contract().await.expect("read").expect("written");
    assert_eq!(
        c.domains[0].snapshots.as_ref().expect("snapshots").quorum,
        3
    );
    assert!(revision(&f).await > before);
}

/// An operator beside the fleet (snapshot_quorum 2, the fleet's stream).
fn operator(f: &Fleet) -> crate::support::Operator {
    crate::support::Operator::with_yaml(&format!(
        "node: {{id: op-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, backup_owner: oncall, snapshot_quorum: 2, allow_unsafe_limits: true, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n",
        f.url()
    ))
}

/// `crewlet node check` judges each node's rows with the sidecar's parser
/// and names what the fleet still needs from it: a node that never
/// registers a snapshot is what keeps the fleet from trimming, and says
/// so; a node with nothing missing passes; a row the sidecar refuses is
/// named with its rule.
#[tokio::test]
async fn node_check_names_a_node_that_never_registers_a_snapshot() {
    let f = Fleet::new(50).await;
    f.presence("node-1", &["data"]).await;
    f.position("node-1", 50).await;
    f.snapshot("node-1", 50).await;
    f.presence("node-2", &["data"]).await;
    f.position("node-2", 50).await;
    f.backup("node-1", "b1", 50, 0, true, true).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let op = operator(&f);
    let run = op.run(&["node", "check", "node-2"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("what the fleet still needs from it before anything can be trimmed:")
            && run
                .stdout
                .contains(&format!("- a snapshot of {STREAM}: no verified artefact")),
        "{run:?}"
    );
    let run = op.run(&["node", "check", "node-1", "--json"]);
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(v["nodes"][0]["needs"], serde_json::json!([]), "{run:?}");
    assert_eq!(run.code, 0, "{run:?}");
    // Registered, node-2 passes too: the fleet can trim.
    f.snapshot("node-2", 50).await;
    let run = op.run(&["node", "check"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("node-2\n"), "every node: {run:?}");
    // A row the sidecar refuses is named, with its rule.
    f.put(
        "crewlet_positions",
        &format!("{STREAM}.node-2"),
        serde_json::json!({"node": "node-2", "stream": STREAM, "seq": 1.5, "generation": 0,
            "stream_created": f.created().await, "updated_at": ts(0), "status": "ok"}),
    )
    .await;
    let run = op.run(&["node", "check", "node-2"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains(&format!("crewlet_positions {STREAM}.node-2: refused:"))
            && run.stdout.contains("not a whole number"),
        "{run:?}"
    );
}

/// `crewlet row check --kind KIND FILE`, with `extra` flags.
fn row_check(kind: &str, file: &std::path::Path, extra: &[&str]) -> crate::support::Run {
    let mut args = vec![
        "row",
        "check",
        "--kind",
        kind,
        file.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    crate::support::crewlet(&args)
}

/// `crewlet row check`, as a node's own tests run it: 0 for a row the
/// sidecar reads (10.0 is 10), 1 for one it refuses (the field and the
/// rule named: a trailing newline), 2 for bad usage.
#[test]
fn row_check_judges_one_row_as_the_sidecar_reads_it() {
    let s = crate::support::Scratch::new();
    let good = s.write(
        "p.json",
        r#"{"node": "p2", "stream": "LOG", "seq": 10.0, "generation": 0, "stream_created": "2026-11-02T10:00:00.418226517Z", "updated_at": "2026-12-06T10:00:00Z", "status": "ok"}"#,
    );
    let run = row_check("position", &good, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("valid: a position row under key LOG.p2"),
        "{run:?}"
    );
    let bad = s.write(
        "s.json",
        "{\"node\": \"p2\\n\", \"started_at\": \"2026-12-06T10:00:00Z\"}",
    );
    let run = row_check("presence", &bad, &["--json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(v["valid"], false);
    assert!(
        v["refused"]
            .as_str()
            .unwrap_or_default()
            .contains("contains '\\n'"),
        "{v}"
    );
    let run = row_check("hold", &good, &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("--key STREAM.HOLD_ID is required"),
        "{run:?}"
    );
    let run = row_check("positions", &good, &[]);
    assert_eq!(run.code, 2, "{run:?}");
}
