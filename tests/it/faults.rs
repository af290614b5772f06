//! Fault injection against a real broker, the invariant checked after each:
//! no purge ever takes a record something still needs.

use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::fleet::*;
use crate::support::{signal, spawn_run, Scratch};

fn yaml(url: &str, node: &str) -> String {
    format!(
        "node: {{id: {node}}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    )
}

async fn finish(child: Child) -> (Option<i32>, String) {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_broker_killed_during_ticks_never_licenses_more() {
    let mut f = Fleet::new(100).await;
    // node-2 needs everything from 41 on: nothing past 40 may ever go.
    f.healthy(&[("node-1", 100), ("node-2", 40)], 100).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&f.server.url(), "node-1"));
    let child = spawn_run(&cfg, &[]);
    for pause_ms in [350u64, 1100, 700] {
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        f.server.kill();
        tokio::time::sleep(Duration::from_millis(400)).await;
        f.server.restart();
    }
    let js = f.server.js().await;
    f.js = js;
    // The loop recovers: it ticks again after the last restart (its
    // `_tick`, or a row, written since; an unchanged row stands).
    let restarted = chrono::Utc::now();
    let fresh = eventually(30, || async {
        let at = |v: Option<serde_json::Value>| {
            v.and_then(|r| r["at"].as_str().map(str::to_string))
                .and_then(|a| crewlet::rows::Timestamp::parse(&a).ok())
                .is_some_and(|at| at.0 > restarted)
        };
        at(f.floors_row().await) || at(f.get("crewlet_floors", "_tick").await)
    })
    .await;
    assert!(
        fresh,
        "the sidecar publishes again after the broker returns"
    );
    assert_eq!(
        f.first_seq().await,
        41,
        "purged exactly what was licensed, no more"
    );
    signal(&child, libc::SIGTERM);
    let (code, log) = finish(child).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[tokio::test]
async fn killed_between_publish_and_purge_the_next_tick_purges_only_what_it_licenses() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 60)], 100).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&f.server.url(), "node-1"));
    let child = spawn_run(&cfg, &[("CREWLET_FAILPOINT", "after_publish")]);
    let (code, log) = finish(child).await;
    assert_eq!(code, None, "aborted by the failpoint: {log}");
    assert!(log.contains("\"failpoint\""), "{log}");
    let row = f.floors_row().await.expect("published before the crash");
    assert_eq!(row["floor"], 61);
    assert_eq!(
        f.first_seq().await,
        1,
        "the floor is ahead of the log: the safe direction"
    );

    // The node is restored from an old backup; another sidecar takes over
    // once the dead one's lease expires, and purges only what it licenses.
    f.position("node-1", 30).await;
    let mut other = f.sidecar_as("node-2").await;
    let start = Instant::now();
    let mut took = false;
    while start.elapsed() < Duration::from_secs(10) {
        if matches!(
            other.tick().await.duty,
            crewlet::tick::duty::DutyStatus::Held
        ) {
            took = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(took, "the duty passes within one lease TTL");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        f.first_seq().await,
        31,
        "this tick's trim_to, never the published floor"
    );
    assert_eq!(
        f.floors_row().await.expect("row")["floor"],
        61,
        "the floor does not move down"
    );
}

#[tokio::test]
async fn a_deleted_bucket_or_stream_is_unreadable_and_alarms() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 50)], 100).await;
    let mut s = f.sidecar().await;
    f.js.delete_key_value("crewlet_positions")
        .await
        .expect("delete");
    let r = s.tick().await;
    assert_eq!(r.domains[0].answer.trim_to, 0);
    assert!(
        r.alarms.iter().any(|a| a.alarm == "term_unreadable"
            && a.measurement
                .starts_with("applied is unreadable: bucket crewlet_positions does not exist")),
        "{:?}",
        r.alarms
    );
    assert_eq!(f.first_seq().await, 1);

    f.js.delete_stream(STREAM).await.expect("delete stream");
    let r = s.tick().await;
    assert!(
        r.domains[0]
            .answer
            .stream_error
            .as_deref()
            .is_some_and(|e| e.contains("does not exist")),
        "{:?}",
        r.domains[0].answer.stream_error
    );
    assert!(r.domains[0].purged.is_none() && r.domains[0].published.is_none());
    assert!(
        r.alarms.iter().any(|a| a.alarm == "term_unreadable"
            && a.measurement.starts_with("age_floor is unreadable")),
        "{:?}",
        r.alarms
    );
}

#[tokio::test]
async fn three_sidecars_one_purger_and_a_handover_within_a_ttl() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let s = Scratch::new();
    let mut children = Vec::new();
    for node in ["side-1", "side-2", "side-3"] {
        let cfg = s.write(&format!("{node}.yaml"), &yaml(&f.server.url(), node));
        children.push((node, spawn_run(&cfg, &[])));
    }
    // Records keep arriving and the node keeps up, so every tick has work.
    let created = f.created().await;
    let feeder = {
        let js = f.js.clone();
        tokio::spawn(async move {
            let Ok(kv) = js.get_key_value("crewlet_positions").await else {
                return;
            };
            for i in 1..=60u64 {
                if let Ok(ack) = js.publish(format!("{STREAM}.records"), "x".into()).await {
                    let _ = ack.await;
                }
                let row = serde_json::json!({"node": "node-1", "stream": STREAM, "seq": 10 + i, "generation": 0,
                    "stream_created": created, "updated_at": ts(0), "status": "ok"});
                let _ = kv
                    .put(format!("{STREAM}.node-1"), row.to_string().into())
                    .await;
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(4000)).await;
    let holder = f
        .get("crewlet_duty", "retention")
        .await
        .expect("someone holds the duty")["holder"]
        .as_str()
        .expect("holder")
        .to_string();
    let idx = children
        .iter()
        .position(|(n, _)| *n == holder)
        .expect("holder is one of ours");
    let (_, dead) = children.remove(idx);
    let killed_at = chrono::Utc::now();
    signal(&dead, libc::SIGKILL);
    let _ = finish(dead).await;
    let start = Instant::now();
    let handed = eventually(10, || async {
        f.get("crewlet_duty", "retention")
            .await
            .and_then(|d| d["holder"].as_str().map(str::to_string))
            .is_some_and(|h| h != holder)
    })
    .await;
    let handover = start.elapsed();
    assert!(handed, "another sidecar takes the duty");
    assert!(
        handover < Duration::from_secs(3) + Duration::from_millis(1500),
        "within one lease TTL (3 ticks) and a tick: {handover:?}"
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    feeder.abort();
    let mut publishers: Vec<(chrono::DateTime<chrono::Utc>, &str)> = Vec::new();
    let mut logs = Vec::new();
    for (node, child) in children {
        signal(&child, libc::SIGTERM);
        let (code, log) = finish(child).await;
        assert_eq!(code, Some(0), "{node}: {log}");
        logs.push((node, log));
    }
    for (node, log) in &logs {
        for line in log.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let event = v["event"].as_str().unwrap_or_default();
            if event == "trim_published" || event == "trim_purged" {
                let t = v["timestamp"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .expect("timestamp");
                publishers.push((t.with_timezone(&chrono::Utc), node));
            }
        }
    }
    publishers.sort();
    // Only the survivors' logs are here: every publish before the kill came
    // from the dead holder, so the survivors published only after it, and
    // one at a time.
    assert!(!publishers.is_empty(), "the new holder published");
    assert!(
        publishers.iter().all(|(t, _)| *t > killed_at),
        "a survivor published while the holder was alive: {publishers:?}"
    );
    let first = publishers[0].1;
    assert!(
        publishers.iter().all(|(_, n)| *n == first),
        "two survivors published: {publishers:?}"
    );
}

#[tokio::test]
async fn a_log_restored_from_an_older_copy_is_not_ready() {
    let mut f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 40).await;
    let created = f.created().await;
    let copy = f.copy_log().await;
    f.publish(50).await;
    f.healthy(&[("node-1", 100)], 40).await;
    // Restore the old copy of the log; the nodes' rows stay at 100.
    f.restore_log(&copy).await;
    let (first, last, now_created) = f.state().await;
    assert_eq!((first, last), (1, 50), "the restored log");
    assert_eq!(now_created, created, "a restore keeps the stream's created");
    let r = f.sidecar().await.tick().await;
    assert_eq!(
        r.domains[0].answer.not_ready,
        Some(crewlet::floor::NotReady::AheadOfLog)
    );
    assert_eq!(
        f.first_seq().await,
        1,
        "nothing purged on the strength of positions it does not hold"
    );
}
