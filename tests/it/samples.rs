//! The output samples in README.md, docs/runbook.md and docs/samples/ are
//! real: this test produces them from a real fleet and fails when the
//! committed text no longer matches what the binary prints (times and ages
//! masked). `CREWLET_WRITE_SAMPLES=1 scripts/test samples` rewrites
//! docs/samples/ after a deliberate change to the output.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support::fleet::*;
use crate::support::{create_stream, crewlet, log_stream, Scratch};

fn mask(text: &str) -> String {
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").expect("regex");
    let age = regex::Regex::new(r"\d+ (second|minute)s?").expect("regex");
    // Each run's broker listens on a port of its own.
    let port = regex::Regex::new(r"nats://127\.0\.0\.1:\d+").expect("regex");
    // Compressed sizes move with the records' timestamps inside them.
    let size = regex::Regex::new(r"\d+(\.\d+)? (B|KiB|MiB)\b").expect("regex");
    // The clock time a pin started ("since 02:14").
    let clock = regex::Regex::new(r"since \d\d:\d\d\b").expect("regex");
    let text = time.replace_all(text, "<time>");
    let text = clock.replace_all(&text, "since <clock>");
    let text = size.replace_all(&text, "<size>");
    let text = port.replace_all(&text, "nats://127.0.0.1:<port>");
    age.replace_all(&text, "<age>").into_owned()
}

fn docs(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name)
}

/// Compares (or, when asked, writes) a sample file, and checks that each
/// document quoting it quotes it exactly.
fn check_sample(name: &str, actual: &str, quoted_in: &[&str]) {
    let path = docs(&format!("samples/{name}"));
    if std::env::var_os("CREWLET_WRITE_SAMPLES").is_some() {
        std::fs::write(&path, actual).expect("write sample");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        mask(&committed),
        mask(actual),
        "docs/samples/{name} is stale: rerun with CREWLET_WRITE_SAMPLES=1"
    );
    for doc in quoted_in {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).expect("doc");
        assert!(
            mask(&text).contains(&mask(committed.trim_end())),
            "{doc} does not quote docs/samples/{name} exactly"
        );
    }
}

#[tokio::test]
async fn status_samples_are_what_the_binary_prints() {
    let f = Fleet::new(100).await;
    let pages_subjects = [
        "CREWLET_PAGES_LOG.>".to_string(),
        "crewlet.pages.gate".to_string(),
    ];
    let pages_subjects: Vec<&str> = pages_subjects.iter().map(String::as_str).collect();
    create_stream(
        &f.js,
        log_stream("CREWLET_PAGES_LOG", &pages_subjects, 2 * GIB),
    )
    .await;
    let mut acks = Vec::new();
    for i in 0..40 {
        acks.push(
            f.js.publish("CREWLET_PAGES_LOG.records", format!("p{i}").into())
                .await
                .expect("publish"),
        );
    }
    for a in acks {
        a.await.expect("ack");
    }
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", 40).await;
    f.snapshot("node-3", 40).await;
    f.put(
        "crewlet_positions",
        "CREWLET_PAGES_LOG.node-1",
        json!({"node": "node-1", "stream": "CREWLET_PAGES_LOG", "seq": 40, "generation": 0,
               "stream_created": crewlet::broker::read::instant_of(f.js.get_stream("CREWLET_PAGES_LOG").await.expect("s").cached_info().created),
               "updated_at": ts(0), "status": "ok"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let mut config = f.config.clone();
    config.domains.push(crewlet::config::Domain {
        name: "pages".into(),
        stream: "CREWLET_PAGES_LOG".into(),
        gate_subject: Some("crewlet.pages.gate".into()),
        gate_reserve: true,
        feed_consumer: None,
        archive: None,
        replicas: Default::default(),
    });
    let mut sidecar = crewlet::tick::Sidecar::new(config, f.broker().await);
    sidecar.tick().await;

    let s = Scratch::new();
    let cfg = s.write(
        "crewlet.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, backup_owner: platform-oncall, held_alarm_after: 0s, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true}}\ntrim: {{enabled: true}}\ndomains:\n  - {{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}\n  - {{name: pages, stream: CREWLET_PAGES_LOG, gate_subject: crewlet.pages.gate}}\n",
            f.server.url()
        ),
    );
    let run = crewlet(&[
        "retention",
        "status",
        "--config",
        cfg.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    let sample = format!("$ crewlet retention status\n{}{}", run.stdout, run.stderr);
    check_sample("status.txt", &sample, &["README.md", "docs/runbook.md"]);
}

#[tokio::test]
async fn archive_samples_are_what_the_binary_prints() {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90)], 100).await;
    f.broker()
        .await
        .ensure_object_store("crewlet_archive", 1)
        .await
        .expect("bucket");
    f.config.domains[0].archive = Some(crewlet::config::ArchiveConfig {
        segment_records: 40,
        segment_bytes: crewlet::config::size::Size(8 << 20),
        fold_per_tick: 2,
        ..crewlet::config::ArchiveConfig::of(&crewlet::archive::fold::Store::ObjectStore(
            "crewlet_archive".into(),
        ))
    });
    f.sidecar().await.tick().await;
    assert_eq!(f.first_seq().await, 81);
    let s = Scratch::new();
    let cfg = s.write(
        "crewlet.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: platform-oncall}}\ndomains:\n  - name: tracker\n    stream: {STREAM}\n    gate_subject: crewlet.tracker.gate\n    archive: {{object_store: crewlet_archive, segment_records: 40, fold_per_tick: 2}}\n",
            f.server.url()
        ),
    );
    let cfg = cfg.to_str().expect("utf-8");
    let read = crewlet(&[
        "retention",
        "read",
        "-stream",
        "tracker",
        "--from",
        "78",
        "--limit",
        "5",
        "--config",
        cfg,
    ]);
    assert_eq!(read.code, 0, "{read:?}");
    let verify = crewlet(&[
        "retention",
        "verify-archive",
        "-stream",
        "tracker",
        "--config",
        cfg,
    ]);
    assert_eq!(verify.code, 0, "{verify:?}");
    let sample = format!(
        "$ crewlet retention read -stream tracker --from 78 --limit 5\n{}{}\n$ crewlet retention verify-archive -stream tracker\n{}",
        read.stdout, read.stderr, verify.stdout
    );
    check_sample("archive.txt", &sample, &["README.md"]);
}

#[tokio::test]
async fn the_scrape_sample_is_what_the_sidecar_serves() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 60), ("node-2", 60)], 100).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = crate::http::Served::start(&f);
    let d = format!("domain=\"tracker\",stream=\"{STREAM}\"");
    let after_purge = format!("crewlet_first_seq{{{d}}} 61");
    assert!(
        crate::support::fleet::eventually(20, || async {
            s.get("/metrics", None).1.lines().any(|l| l == after_purge)
        })
        .await,
        "the tick after the purge"
    );
    let (_, text) = s.get("/metrics", None);
    let families = regex::Regex::new(
        r"^crewlet_(trim_to|trim_floor|first_seq|last_seq|term_seq|blocked|duty_held|purged_records_total|headroom_fraction)[{ ]",
    )
    .expect("regex");
    // A family's series come in no set order: sorted, as the sample's
    // command sorts them.
    let mut picked: Vec<&str> = text.lines().filter(|l| families.is_match(l)).collect();
    picked.sort_unstable();
    s.stop();
    let sample = format!(
        "$ curl -s http://127.0.0.1:9464/metrics | grep -E '^crewlet_(trim_to|trim_floor|first_seq|last_seq|term_seq|blocked|duty_held|purged_records_total|headroom_fraction)[{{ ]' | sort\n{}\n",
        picked.join("\n")
    );
    check_sample("metrics.txt", &sample, &["README.md"]);
}
