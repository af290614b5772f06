//! `crewlet retention status`, the alarms and the recording commands, as an
//! operator (or cron) runs them.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fleet::*;
use crate::support::{crewlet, Operator, Scratch};

fn yaml(url: &str, extra_retention: &str) -> String {
    format!(
        "node: {{id: node-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: platform-oncall{extra_retention}}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    )
}

/// An operator with a config file pointing at the fleet.
struct Op;

impl Op {
    #[allow(clippy::new_ret_no_self)]
    fn new(f: &Fleet, extra: &str) -> Operator {
        Operator::with_yaml(&yaml(&f.server.url(), extra))
    }
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

#[tokio::test]
async fn a_pinned_fleet_reads_in_one_sentence() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", 40).await; // an absent node, still counted
    f.snapshot("node-3", 40).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let l = Loop::start(&f).await;
    settle().await;
    let op = Op::new(&f, ", held_alarm_after: 0s");
    let run = op.status();
    assert_eq!(run.code, 1, "{run:?}");
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("tracker is trimmed up to 40 and held there: node-3 is not live and pins applied at 40 since "), "{first}");
    assert!(
        first.contains("), holding back 60 records, about ") && first.contains(", last reported"),
        "{first}"
    );
    assert!(
        first.ends_with("start it, or if it is not coming back, evict it: crewlet retention evict node-3 -confirm node-3."),
        "{first}"
    );
    assert!(
        run.stdout
            .contains("  FIRST 41   LAST 100   TRIM FLOOR 41   TRIM_TO 40   BLOCKED_BY applied"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("  node-3  no    40   0    counted"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("ALARM trim_held tracker: blocked_by applied: the trim has been held for"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("node-3 is not live and has not reported since"),
        "{run:?}"
    );

    // node-3 catches up: the floor moves and the alarm clears, exit 0.
    f.position("node-3", 100).await;
    f.snapshot("node-3", 100).await;
    settle().await;
    let run = op.status();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    assert!(
        run.stdout.starts_with("trim duty: node-1"),
        "no prose when every domain trims: {run:?}"
    );
    l.stop().await;
}

#[tokio::test]
async fn each_alarm_fires_and_clears() {
    let f = Fleet::new(100).await;
    let op = Op::new(&f, "");
    // Nothing runs: duty_unheld (fleet-level, domain *), and no backup.
    let run = op.status();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("ALARM duty_unheld *: no sidecar holds the trim duty and no floors row was published within 3 ticks (3s); nothing is being trimmed — start a sidecar with node.duty: true"), "{run:?}");
    assert!(run.stderr.contains("ALARM backup_age tracker: no verified backup names CREWLET_TRACKER_LOG — run and verify a backup, then announce it (crewlet retention backup announce -node NODE -id ID -position CREWLET_TRACKER_LOG=SEQ -verified) (owner: platform-oncall)"), "{run:?}");

    // A sidecar runs and a verified backup is announced with the CLI: calm.
    f.healthy(&[("node-1", 100)], 100).await;
    let run = op.run(&[
        "retention",
        "backup",
        "announce",
        "-node",
        "node-1",
        "-id",
        "nightly-1",
        "-position",
        &format!("{STREAM}=100"),
        "-verified",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let l = Loop::start(&f).await;
    settle().await;
    assert_eq!(op.alarms(), Vec::<String>::new());

    // term_unreadable: a bucket disappears; init brings it back.
    f.js.delete_key_value("crewlet_snapshots")
        .await
        .expect("delete");
    f.presence("node-2", &["data"]).await;
    settle().await;
    assert!(
        op.alarms()
            .contains(&"ALARM term_unreadable tracker".to_string()),
        "{:?}",
        op.status()
    );
    let run = op.run(&["retention", "init"]);
    assert_eq!(run.code, 0, "{run:?}");
    f.position("node-2", 100).await;
    f.snapshot("node-1", 100).await;
    f.snapshot("node-2", 100).await;
    settle().await;
    assert_eq!(op.alarms(), Vec::<String>::new(), "{:?}", op.status());

    // not_ready: a node ahead of the log.
    f.position("node-2", 500).await;
    settle().await;
    let run = op.status();
    assert!(run.stdout.starts_with("NOT READY tracker: wrong_stream (ahead_of_log) — node-2 reports 500 but the log ends at 100"), "{run:?}");
    assert!(
        run.stderr
            .contains("ALARM not_ready tracker: NOT READY: wrong_stream (ahead_of_log)"),
        "{run:?}"
    );
    f.position("node-2", 100).await;
    settle().await;
    assert_eq!(op.alarms(), Vec::<String>::new());

    // broker_retention_bypass: someone sets max_age on the stream.
    let mut cfg =
        f.js.get_stream(STREAM)
            .await
            .expect("stream")
            .cached_info()
            .config
            .clone();
    cfg.max_age = Duration::from_secs(86400);
    f.js.update_stream(cfg.clone()).await.expect("update");
    let run = op.status();
    assert!(run.stderr.contains("ALARM broker_retention_bypass tracker: stream CREWLET_TRACKER_LOG's own limits can delete records the floor protects: max_age = 86400s"), "{run:?}");
    cfg.max_age = Duration::ZERO;
    f.js.update_stream(cfg).await.expect("update");
    assert_eq!(op.alarms(), Vec::<String>::new());

    // floor_stale: the holder keeps its lease but stops publishing.
    l.stop().await;
    let mut holder = f.sidecar().await;
    holder
        .duty
        .claim_or_renew(&holder.broker, chrono::Utc::now())
        .await;
    tokio::time::sleep(Duration::from_millis(3200)).await;
    holder
        .duty
        .claim_or_renew(&holder.broker, chrono::Utc::now())
        .await;
    let run = op.status();
    assert!(
        run.stderr
            .contains("ALARM floor_stale tracker: the floors row was last confirmed"),
        "{run:?}"
    );
    holder.tick().await;
    assert_eq!(op.alarms(), Vec::<String>::new(), "{:?}", op.status());
    holder.duty.release(&holder.broker).await;
}

#[tokio::test]
async fn log_headroom_names_what_holds_the_trim() {
    let f = Fleet::with_max_bytes(0, 64 * 1024).await;
    // Fill past 90% of the soft ceiling (60 KiB) with records nothing may trim.
    f.fill(56, 1000).await;
    f.healthy(&[("node-1", 0)], 56).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let op = Op::new(&f, "");
    let run = op.status();
    assert!(
        run.stderr
            .contains("ALARM log_headroom tracker: headroom_fraction 0.0"),
        "{run:?}"
    );
    assert!(run.stderr.contains("the trim is held by applied; clear that first, or raise the ceiling to at least 1.0 MiB (the least that leaves a tenth of headroom): crewlet retention set-capacity CREWLET_TRACKER_LOG 1MiB -confirm 1MiB"), "{run:?}");
    // The node catches up; the trim frees the log; the alarm clears.
    f.position("node-1", 56).await;
    f.sidecar().await.tick().await;
    assert!(!op.status().stderr.contains("log_headroom"));
}

#[tokio::test]
async fn json_schema_is_stable_and_stream_filters() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let l = Loop::start(&f).await;
    settle().await;
    let op = Op::new(&f, "");
    let run = op.run(&["retention", "status", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&v),
        [
            "alarms",
            "at",
            "domains",
            "duty_holder",
            "node",
            "prose",
            "server"
        ]
    );
    assert_eq!(v["server"]["url"], f.server.url());
    assert_eq!(v["duty_holder"], "node-1");
    let d = &v["domains"][0];
    let want = [
        "archive",
        "at",
        "backup_age_secs",
        "backup_stale",
        "blocked_by",
        "broker_retention_bypass",
        "by",
        "bytes",
        "config",
        "config_digest",
        "domain",
        "dry_run",
        "evictions_unreadable",
        "first_seq",
        "floor",
        "gate_view",
        "generation",
        "generation_opened_at",
        "headroom_fraction",
        "held_since",
        "last_seq",
        "live_stream_created",
        "max_bytes",
        "memory",
        "nodes",
        "not_ready",
        "orphaned_copies",
        "published",
        "published_at",
        "purge_clamped_by",
        "requested",
        "reserve_bytes",
        "session",
        "soft_ceiling_bytes",
        "stream",
        "stream_created",
        "stream_error",
        "stream_warnings",
        "terms",
        "trim_floor_state",
        "trim_to",
        "unprotected_copies",
        "would_purge",
    ];
    assert_eq!(keys(d), want);
    assert_eq!(
        keys(&d["terms"][0]),
        [
            "binding",
            "detail",
            "held_bytes",
            "held_records",
            "pinned_since",
            "reason",
            "seq",
            "state",
            "term"
        ]
    );
    assert_eq!(
        d["terms"][1],
        json!({"term": "min_hold", "state": "unbounded", "detail": null, "binding": false,
            "held_records": null, "held_bytes": null, "pinned_since": null})
    );
    assert_eq!(
        keys(&d["nodes"][0]),
        [
            "carried_from",
            "generation",
            "left_gen",
            "live",
            "node",
            "seq",
            "state",
            "updated_at"
        ]
    );
    assert_eq!(
        d["published"]["stream"], STREAM,
        "the floors row as last written"
    );
    assert!(
        d["max_bytes"].is_i64() && d["bytes"].is_u64(),
        "exact integers in JSON"
    );

    // -stream: a configured one filters, an unknown one names the configured.
    let run = op.run(&["retention", "status", "-stream", "tracker", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(v["domains"].as_array().map(Vec::len), Some(1));
    let run = op.run(&["retention", "status", "-stream", "PAGES"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "-stream \"PAGES\" is not configured; configured: tracker (CREWLET_TRACKER_LOG)"
        ),
        "{run:?}"
    );
    l.stop().await;
}

#[tokio::test]
async fn exit_codes_2_and_3() {
    let s = Scratch::new();
    let bad = s.write(
        "bad.yaml",
        "node: {id: n1}\nretention: {tick: forever}\ndomains: [{name: t, stream: T}]\n",
    );
    let run = crewlet(&[
        "retention",
        "status",
        "--config",
        bad.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    let dead = s.write(
        "dead.yaml",
        &yaml(
            &format!("nats://127.0.0.1:{}", crate::support::free_port()),
            "",
        ),
    );
    let run = crewlet(&[
        "retention",
        "status",
        "--config",
        dead.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 3, "{run:?}");
}

#[tokio::test]
async fn hold_release_and_ack_round_trip_through_the_trim() {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100)], 100).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let op = Op::new(&f, "");

    // backup announce: the only backup covers 20, so the trim stops there.
    f.delete("crewlet_backups", "node-1.b1").await;
    let run = op.run(&[
        "retention",
        "backup",
        "announce",
        "-node",
        "node-1",
        "-id",
        "b2",
        "-position",
        &format!("{STREAM}=20"),
        "-verified",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let mut first = f.sidecar().await;
    first.tick().await;
    assert_eq!(f.first_seq().await, 21, "the announced backup binds");
    first.duty.release(&first.broker).await;
    let run = op.run(&[
        "retention",
        "backup",
        "announce",
        "-node",
        "node-1",
        "-id",
        "b3",
        "-position",
        &format!("{STREAM}=100"),
        "-verified",
    ]);
    assert_eq!(run.code, 0, "{run:?}");

    // A hold from 31 keeps 31 and above.
    let run = op.run(&[
        "retention",
        "hold",
        "-stream",
        STREAM,
        "-seq",
        "31",
        "-ttl",
        "2h",
        "-owner",
        "joiner-7",
        "-kind",
        "join",
        "-reason",
        "node-7 copying",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let id = run.stdout.trim().to_string();
    assert!(id.starts_with("hold-"), "{run:?}");
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 31);
    let row = f
        .get("crewlet_holds", &format!("{STREAM}.{id}"))
        .await
        .expect("hold row");
    assert_eq!(row["kind"], "join");
    assert_eq!(row["owner"], "joiner-7");

    // Released: the trim passes it.
    let run = op.run(&["retention", "release", "-stream", STREAM, &id]);
    assert_eq!(run.code, 0, "{run:?}");
    s.tick().await;
    assert_eq!(f.first_seq().await, 101);
    let run = op.run(&["retention", "release", "-stream", STREAM, &id]);
    assert_eq!(run.code, 1, "releasing twice is refused: {run:?}");

    // Under operator policy the trim follows the acknowledgement.
    f.publish(50).await;
    f.healthy(&[("node-1", 150)], 150).await;
    f.config.retention.backup_floor = crewlet::config::BackupPolicy::Operator;
    let op = Op::new(&f, ", backup_floor: operator");
    let run = op.run(&[
        "retention",
        "ack",
        "-stream",
        STREAM,
        "-position",
        "120",
        "-by",
        "alice",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        f.get("crewlet_backups", &format!("_ack.{STREAM}"))
            .await
            .expect("ack")["by"],
        "alice"
    );
    tokio::time::sleep(Duration::from_millis(3100)).await;
    s.duty.release(&s.broker).await;
    f.sidecar().await.tick().await;
    assert_eq!(f.first_seq().await, 121);
}

#[tokio::test]
async fn recording_commands_refuse_bad_input_and_write_nothing() {
    let f = Fleet::new(100).await;
    // Under operator policy, where an acknowledgement is read at all.
    let op = Op::new(&f, ", backup_floor: operator");
    let cases: &[(&[&str], &str)] = &[
        (
            &["retention", "ack", "-stream", "NOPE", "-position", "5"],
            "-stream \"NOPE\" is not configured; configured: tracker (CREWLET_TRACKER_LOG)",
        ),
        (
            &["retention", "ack", "-stream", STREAM, "-position", "-5"],
            "-position \"-5\" is not a sequence number",
        ),
        (
            &["retention", "ack", "-stream", STREAM, "-position", "ten"],
            "-position \"ten\" is not a sequence number",
        ),
        (
            &["retention", "ack", "-stream", STREAM, "-position", "101"],
            "-position 101 is past the log's last sequence 100",
        ),
        (
            &[
                "retention",
                "hold",
                "-stream",
                STREAM,
                "-seq",
                "5",
                "-ttl",
                "0s",
                "-owner",
                "x",
            ],
            "-ttl 0s: a hold must live",
        ),
        (
            &[
                "retention",
                "hold",
                "-stream",
                STREAM,
                "-seq",
                "5",
                "-ttl",
                "31d",
                "-owner",
                "x",
            ],
            "-ttl 31d: too long; allowed: 1s ..= 30d",
        ),
        (
            &[
                "retention",
                "hold",
                "-stream",
                STREAM,
                "-seq",
                "5",
                "-ttl",
                "2h",
                "-owner",
                "x",
                "-id",
                "bad id",
            ],
            "-id \"bad id\" contains ' '",
        ),
        (
            &["retention", "release", "-stream", STREAM, "hold!"],
            "HOLD_ID \"hold!\" contains '!'",
        ),
        (
            &[
                "retention",
                "backup",
                "announce",
                "-node",
                "n 1",
                "-id",
                "b",
                "-position",
                "CREWLET_TRACKER_LOG=5",
            ],
            "-node \"n 1\" contains ' '",
        ),
        (
            &[
                "retention",
                "backup",
                "announce",
                "-node",
                "n1",
                "-id",
                "b",
                "-position",
                "CREWLET_TRACKER_LOG:5",
            ],
            "write it as STREAM=SEQ",
        ),
    ];
    for (args, want) in cases {
        let run = op.run(args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(
            run.stderr.contains(want),
            "{args:?}: want {want:?} in {run:?}"
        );
        assert!(
            run.stderr.contains("nothing written") || run.stderr.contains("error:"),
            "{run:?}"
        );
    }
    for bucket in ["crewlet_holds", "crewlet_backups"] {
        let kv = f.js.get_key_value(bucket).await.expect("bucket");
        let keys: Vec<String> =
            futures::StreamExt::collect::<Vec<_>>(kv.keys().await.expect("keys"))
                .await
                .into_iter()
                .flatten()
                .collect();
        assert!(keys.is_empty(), "{bucket}: {keys:?}");
    }
}

#[tokio::test]
async fn snapshots_lists_artefacts_and_skip_reasons() {
    let f = Fleet::new(10).await;
    f.snapshot("node-1", 9).await;
    f.put(
        "crewlet_snapshots",
        "node-2",
        json!({"node": "node-2", "updated_at": ts(0), "skip_reason": "lagging", "artefacts": {STREAM: {"position": 4, "generation": 0, "taken_at": ts(-7200), "verified": true}}}),
    )
    .await;
    let op = Op::new(&f, "");
    let run = op.run(&["retention", "snapshots"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("node-1  CREWLET_TRACKER_LOG  9         0 seconds"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("node-2  CREWLET_TRACKER_LOG  4         2 hours    0    yes       lagging"),
        "{run:?}"
    );
    let run = op.run(&["retention", "snapshots", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(v["nodes"][1]["skip_reason"], "lagging");
    assert_eq!(v["nodes"][1]["artefacts"][0]["position"], 4);
}

/// Right after a purge to what the terms permit, status says the log is
/// trimmed up to there and held, not that nothing is being trimmed.
#[tokio::test]
async fn caught_up_reads_as_trimmed_and_held_not_as_nothing() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 87), ("node-2", 100)], 100).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let mut sidecar = f.sidecar().await;
    sidecar.tick().await;
    sidecar.duty.release(&sidecar.broker).await;
    let info = f.js.get_stream(STREAM).await.expect("stream");
    assert_eq!(info.cached_info().state.first_sequence, 88, "purged to 87");
    let op = Op::new(&f, "");
    let run = op.status();
    let first = run.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        first
            .starts_with("tracker is trimmed up to 87 and held there: node-1 has applied up to 87"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("Nothing is being trimmed"), "{run:?}");
}

/// A backup that names the log but was completed before this incarnation
/// of it does not count, and status says that, not "no backup names it".
#[tokio::test]
async fn a_backup_older_than_the_stream_is_named_as_such() {
    let f = Fleet::new(10).await;
    f.presence("node-1", &["data"]).await;
    f.position("node-1", 10).await;
    f.backup("node-1", "old", 10, 3600, true, true).await;
    let op = Op::new(&f, "");
    let run = op.run(&["retention", "status", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).expect("status JSON");
    let backup = v["domains"][0]["terms"]
        .as_array()
        .expect("terms")
        .iter()
        .find(|t| t["term"] == "backup_floor")
        .expect("backup_floor")
        .clone();
    let reason = backup["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        reason.contains("was completed since this generation opened")
            && reason.contains("1 older one(s)"),
        "{backup}"
    );
    assert!(!reason.contains("no verified backup names"), "{backup}");
}
