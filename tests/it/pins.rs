//! What each pin holds (docs/status-json.md, What a pin holds) against a
//! real nats-server: `held_records`, `held_bytes` and `pinned_since` in the
//! tick's answer, the floors row, `status`, `status --json` and `/metrics`,
//! as a pin moves and across a restart of the sidecar.

use serde_json::Value;

use crate::support::fleet::*;
use crate::support::Operator;
use crewlet::floor::{Held, TermName};
use crewlet::tick::TickReport;

fn held(r: &TickReport, t: TermName) -> Option<Held> {
    r.domains[0]
        .answer
        .terms
        .iter()
        .find(|x| x.term == t)
        .and_then(|x| x.held)
}

fn row_term(row: &Value, t: &str) -> Value {
    row["terms"]
        .as_array()
        .and_then(|ts| ts.iter().find(|x| x["term"] == t))
        .cloned()
        .unwrap_or(Value::Null)
}

/// A fleet where node-3 (absent, still counted) pins applied at `at`: two
/// nodes and the backup are at 100 of 100 records.
async fn pinned(at: u64) -> Fleet {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", at).await;
    f.snapshot("node-3", at).await;
    // A configuration status accepts as it is (min_age above the snapshot
    // cadence), with every record past it.
    f.config.retention.min_age = crewlet::config::Dur::secs(3);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    f
}

#[tokio::test]
async fn a_pin_says_what_it_holds_and_since_when_as_it_moves_and_across_a_restart() {
    let f = pinned(40).await;
    // The log as the tick will read it (it purges after).
    let info = f.log_info().await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(a.trim_to, 40);
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!(h.records, 60, "41..=100 would go without node-3");
    // The estimate is the log's own mean record size times the records.
    let per = info.state.bytes as f64 / info.state.messages as f64;
    assert_eq!(h.bytes, (60.0 * per).round() as u64);
    assert_eq!(h.since, a.at, "pinned from the first tick that saw it");
    let first = h.since;
    let row = f.floors_row().await.expect("published");
    let t = row_term(&row, "applied");
    assert_eq!(t["held_records"], 60, "{t}");
    assert_eq!(t["held_bytes"], h.bytes, "{t}");
    assert_eq!(t["pinned_since"], first.to_rfc3339(), "{t}");
    assert_eq!(row_term(&row, "min_hold")["held_records"], Value::Null);

    // node-3 advances to 60: it has held the trim at or below 60 since the
    // first tick, so pinned_since stays; it holds 40 records now.
    f.position("node-3", 60).await;
    f.snapshot("node-3", 60).await;
    let r = s.tick().await;
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!((h.records, h.since), (40, first));

    // A restarted sidecar reads pinned_since back from the floors row.
    s.duty.release(&s.broker).await;
    drop(s);
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!(h.since, first, "kept across the restart");

    // Status says it in the sentence, --json and /metrics carry it.
    let yaml = serde_yaml::to_string(&f.config).expect("yaml");
    let op = Operator::with_yaml(&yaml);
    let run = op.status();
    let sentence = run.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        sentence.contains(&format!("since {} (", first.0.format("%H:%M")))
            && sentence.contains("holding back 40 records, about "),
        "{run:?}"
    );
    let json = op.run(&["retention", "status", "--json"]);
    let v: Value = serde_json::from_str(&json.stdout).expect("json");
    let t = row_term(&v["domains"][0], "applied");
    assert_eq!(t["held_records"], 40, "{t}");
    assert_eq!(t["pinned_since"], first.to_rfc3339(), "{t}");
    let metrics =
        crewlet::http::metrics::encode(&[(*r.domains[0].answer).clone()], &[], &Default::default());
    let d = format!("domain=\"tracker\",stream=\"{STREAM}\"");
    assert!(
        metrics
            .lines()
            .any(|l| l == format!("crewlet_term_held_records{{{d},term=\"applied\"}} 40")),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(|l| l
            == format!(
                "crewlet_term_held_bytes{{{d},term=\"applied\"}} {}",
                h.bytes
            )),
        "{metrics}"
    );

    // node-3 is restored to an earlier copy, at 50: it has held the trim
    // at or below 50 only since now.
    f.position("node-3", 50).await;
    f.snapshot("node-3", 50).await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!(a.trim_to, 50);
    assert_eq!(h.since, a.at, "moved lower: pinned afresh");
    assert!(h.since > first);
    s.duty.release(&s.broker).await;
}

/// Every stream on the server (the buckets and the logs) with its last
/// sequence and message count: any write to any of them moves one. A
/// stream whose values expire by themselves (the duty and presence
/// leases, `max_age`) is compared by its last sequence alone: a lease
/// lapsing meanwhile is no write, and it once failed this test by chance.
async fn everything(f: &Fleet) -> Vec<(String, u64, Option<u64>)> {
    use futures::StreamExt;
    let mut names: Vec<String> =
        f.js.stream_names()
            .filter_map(|n| async move { n.ok() })
            .collect()
            .await;
    names.sort();
    let mut out = Vec::new();
    for n in names {
        let mut s = f.js.get_stream(&n).await.expect("stream");
        let info = s.info().await.expect("info");
        let expires = !info.config.max_age.is_zero();
        let st = &info.state;
        out.push((n, st.last_sequence, (!expires).then_some(st.messages)));
    }
    out
}

fn preview_of(run: &crate::support::Run) -> Value {
    let v: Value = serde_json::from_str(&run.stdout).expect("json");
    v["preview"]["domains"][0].clone()
}

/// `status --json` with the preview flags `args`: the first domain's
/// preview, checked to go from `trim` (as it is, as it would be) and to
/// have written nothing to any stream.
async fn previewed(f: &Fleet, op: &Operator, args: &[&str], trim: (u64, u64)) -> Value {
    let before = everything(f).await;
    let mut all = vec!["retention", "status", "--json"];
    all.extend_from_slice(args);
    let json = op.run(&all);
    let p = preview_of(&json);
    assert!(p.is_object(), "{json:?}");
    assert_eq!(
        (p["trim_to"].as_u64(), p["would_trim_to"].as_u64()),
        (Some(trim.0), Some(trim.1)),
        "{p}"
    );
    assert_eq!(everything(f).await, before, "a preview writes nothing");
    p
}

/// The preview of an eviction against the tick after the real gesture and
/// its fence window, on `f` (one server or a cluster).
async fn eviction_preview_is_exact(f: &Fleet) {
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert_eq!(r.domains[0].answer.trim_to, 40);
    let yaml = serde_yaml::to_string(&f.config).expect("yaml");
    let op = Operator::with_yaml(&yaml);

    let before = everything(f).await;
    let run = op.run(&["retention", "status", "--if-evicted", "node-3"]);
    let sentence = run
        .stdout
        .lines()
        .nth(1)
        .unwrap_or_default()
        .trim()
        .to_string();
    assert!(
        sentence.starts_with(
            "evicting node-3 would move tracker's trim from 40 to 100 (60 records, about "
        ) && sentence.contains("; the next binding term would be applied (node-"),
        "{run:?}"
    );
    let json = op.run(&["retention", "status", "--json", "--if-evicted", "node-3"]);
    let p = preview_of(&json);
    assert_eq!(
        (p["trim_to"].as_u64(), p["would_trim_to"].as_u64()),
        (Some(40), Some(100)),
        "{p}"
    );
    assert_eq!(p["records"], 60, "{p}");
    assert_eq!(p["would_bind"]["term"], "applied", "{p}");
    // The answers themselves are as they are, not as they would be.
    let v: Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(v["domains"][0]["trim_to"], 40);
    assert_eq!(everything(f).await, before, "a preview writes nothing");

    // The real gesture, its record absorbed, its fence window passed: the
    // next tick trims to what the preview printed.
    let run = op.run(&["retention", "evict", "node-3", "-confirm", "node-3"]);
    assert_eq!(run.code, 0, "{run:?}");
    s.tick().await;
    tokio::time::sleep(f.config.retention.fence_window.0 + std::time::Duration::from_millis(100))
        .await;
    let r = s.tick().await;
    assert_eq!(
        r.domains[0].answer.trim_to,
        p["would_trim_to"].as_u64().unwrap_or_default()
    );
    s.duty.release(&s.broker).await;
}

#[tokio::test]
async fn a_preview_of_an_eviction_writes_nothing_and_is_exact() {
    let f = pinned(40).await;
    eviction_preview_is_exact(&f).await;
}

#[tokio::test]
async fn a_preview_on_a_cluster_is_exact() {
    let mut f = Fleet::cluster(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", 40).await;
    f.snapshot("node-3", 40).await;
    f.config.retention.min_age = crewlet::config::Dur::secs(3);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    eviction_preview_is_exact(&f).await;
}

#[tokio::test]
async fn a_preview_takes_the_real_gestures_refusals_and_bad_input_names_its_flag() {
    let f = pinned(40).await;
    f.hold("h1", 30, 600).await;
    let mut s = f.sidecar().await;
    assert_eq!(s.tick().await.domains[0].answer.trim_to, 29);
    let yaml = serde_yaml::to_string(&f.config).expect("yaml");
    let op = Operator::with_yaml(&yaml);
    let before = everything(&f).await;
    let status = |args: &[&str]| {
        let mut all = vec!["retention", "status"];
        all.extend_from_slice(args);
        op.run(&all)
    };

    // A live node: node_live, unless forced.
    let run = status(&["--if-evicted", "node-1"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("--if-evicted node-1: node_live"),
        "{run:?}"
    );
    let run = status(&["--if-evicted", "node-1", "--force"]);
    assert!(
        run.stdout
            .contains("evicting node-1 would leave tracker's trim at 29"),
        "{run:?}"
    );
    // A node the fleet has never seen.
    let run = status(&["--if-evicted", "node-9"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("unknown_node"), "{run:?}");
    // Readmitting a node that is not evicted.
    let run = status(&["--if-readmitted", "node-3"]);
    assert!(run.stderr.contains("not_evicted"), "{run:?}");
    // Under backup_floor: engine an acknowledgement is never read.
    let run = status(&["--if-acked", &format!("{STREAM}=100")]);
    assert!(run.stderr.contains("policy_engine"), "{run:?}");
    // Bad input: exit 2 naming the flag, nothing read or written.
    let run = status(&["--if-released", "nope"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--if-released nope"), "{run:?}");
    for bad in [STREAM, "CREWLET_TRACKER_LOG=ten", "=5"] {
        let run = status(&["--if-acked", bad]);
        assert_eq!(run.code, 2, "{bad}: {run:?}");
        assert!(run.stderr.contains("--if-acked"), "{bad}: {run:?}");
    }
    let run = status(&["--if-evicted", "bad id!"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--if-evicted"), "{run:?}");

    // Releasing the hold, then evicting node-3 too, in one preview.
    let run = status(&["--if-released", "h1"]);
    assert!(
        run.stdout.contains(
            "releasing hold h1 would move tracker's trim from 29 to 40 (11 records, about "
        ),
        "{run:?}"
    );
    let run = status(&["--if-released", "h1", "--if-evicted", "node-3"]);
    assert!(
        run.stdout.contains(
            "evicting node-3 and releasing hold h1 would move tracker's trim from 29 to 100"
        ),
        "{run:?}"
    );
    assert_eq!(everything(&f).await, before, "no preview wrote anything");

    // The real release: the next tick trims where the preview said.
    let run = op.run(&["retention", "release", "-stream", STREAM, "h1"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(s.tick().await.domains[0].answer.trim_to, 40);
    s.duty.release(&s.broker).await;
}

#[tokio::test]
async fn a_preview_of_an_acknowledgement_is_exact_and_refuses_what_ack_refuses() {
    let mut f = pinned(40).await;
    f.config.retention.backup_floor = crewlet::config::BackupPolicy::Operator;
    let mut s = f.sidecar().await;
    // Nothing acknowledged: the backup term permits nothing.
    assert_eq!(s.tick().await.domains[0].answer.trim_to, 0);
    let op = Operator::with_yaml(&serde_yaml::to_string(&f.config).expect("yaml"));
    let acked = format!("{STREAM}=100");
    let p = previewed(&f, &op, &["--if-acked", &acked], (0, 40)).await;
    assert_eq!(p["would_bind"]["term"], "applied", "{p}");
    // Past the log's end: refused as ack refuses it, naming the flag.
    let run = op.run(&[
        "retention",
        "status",
        "--if-acked",
        &format!("{STREAM}=500"),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("--if-acked {STREAM}=500: position 500 is past")),
        "{run:?}"
    );
    let run = op.run(&["retention", "status", "--if-acked", "NOPE=5"]);
    assert_eq!(run.code, 2, "{run:?}");

    let run = op.run(&["retention", "ack", "-stream", STREAM, "-position", "100"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(s.tick().await.domains[0].answer.trim_to, 40);
    // Below the acknowledgement in force: would_lower, as ack without -lower.
    let run = op.run(&["retention", "status", "--if-acked", &format!("{STREAM}=50")]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("would_lower"), "{run:?}");
    s.duty.release(&s.broker).await;
}

#[tokio::test]
async fn a_preview_of_a_readmission_is_exact() {
    let f = pinned(40).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let op = Operator::with_yaml(&serde_yaml::to_string(&f.config).expect("yaml"));
    let run = op.run(&["retention", "evict", "node-3", "-confirm", "node-3"]);
    assert_eq!(run.code, 0, "{run:?}");
    s.tick().await;
    tokio::time::sleep(f.config.retention.fence_window.0 + std::time::Duration::from_millis(100))
        .await;
    assert_eq!(s.tick().await.domains[0].answer.trim_to, 100);
    // node-3 comes back caught up to 100; the others move on to 121 (the
    // gate record is 101). Before the next tick purges past node-3 (then
    // a readmission is refused below_floor), status would trim to 121.
    f.publish(20).await;
    f.healthy(&[("node-1", 121), ("node-2", 121)], 121).await;
    f.position("node-3", 100).await;
    f.snapshot("node-3", 100).await;
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;

    let p = previewed(&f, &op, &["--if-readmitted", "node-3"], (121, 100)).await;
    assert_eq!(p["would_bind"]["detail"], "node-3", "{p}");

    // No tick in flight (the lease released): the readmission's join hold
    // is confirmed at once, and the next tick reads it.
    s.duty.release(&s.broker).await;
    let run = op.run(&["retention", "readmit", "node-3", "-confirm", "node-3"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(s.tick().await.domains[0].answer.trim_to, 100);
    s.duty.release(&s.broker).await;
}
