//! `crewlet retention erase` against a real nats-server: one subject gone
//! from the live log (filtered, nothing else moved) and from the archive
//! (segments rewritten in place, still contiguous, `verify-archive`
//! sound), one row in the erasures bucket, bad input writing nothing, and
//! a broker lost between the live purge and the archive finished by the
//! retry without counting twice.

use std::time::Duration;

use crate::support::fleet::*;
use crate::support::{Operator, Scratch};
use crewlet::archive::fold::Store;
use crewlet::config::{size::Size, ArchiveConfig};

const PERSON: &str = "CREWLET_TRACKER_LOG.user.42";
const BUCKET: &str = "crewlet_archive";

/// 60 records, every third on the person's subject; the nodes have
/// applied 40. With an archive, one tick folds 1..=40 into four segments
/// and trims them. Returns the fleet and the sequences on the subject.
async fn fleet(store: Option<&Store>) -> (Fleet, Vec<u64>) {
    let mut f = Fleet::new(0).await;
    let mut person = Vec::new();
    for i in 0..60u64 {
        let (subject, data) = if i % 3 == 0 {
            (PERSON.to_string(), format!("u{i}"))
        } else {
            (format!("{STREAM}.records"), format!("r{i}"))
        };
        let ack = f.js.publish(subject, data.into()).await.expect("publish");
        let seq = ack.await.expect("ack").sequence;
        if i % 3 == 0 {
            person.push(seq);
        }
    }
    if let Some(store) = store {
        f.healthy(&[("node-1", 40), ("node-2", 40)], 40).await;
        f.config.domains[0].archive = Some(ArchiveConfig {
            segment_records: 10,
            segment_bytes: Size(8 << 20),
            fold_per_tick: 8,
            ..ArchiveConfig::of(store)
        });
        if let Store::ObjectStore(b) = store {
            f.broker()
                .await
                .ensure_object_store(b, 1)
                .await
                .expect("bucket");
        }
        tokio::time::sleep(Duration::from_millis(3100)).await;
        let mut s = f.sidecar().await;
        s.tick().await;
        // No tick is running while the erasure runs.
        s.duty.release(&s.broker).await;
        assert_eq!(f.first_seq().await, 41, "folded and trimmed to 40");
    }
    (f, person)
}

fn operator(f: &Fleet, store: Option<&Store>) -> Operator {
    let archive = store.map_or_else(String::new, |s| {
        format!(
            ", archive: {}",
            crate::support::s3::archive_yaml(s, 10, None)
        )
    });
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate{archive}}}]\n",
        f.url()
    ))
}

/// Every record the archive holds: (range of each segment, (seq, subject)).
async fn archived(f: &Fleet, store: &Store) -> (Vec<(u64, u64)>, Vec<(u64, String)>) {
    let broker = f.broker().await;
    let listed = store.list(&broker, STREAM, 0).await.expect("list");
    let mut records = Vec::new();
    for l in &listed {
        let bytes = store.get(&broker, &l.name).await.expect("get");
        let seg = crewlet::archive::segment::decode(&bytes).expect("a segment that verifies");
        records.extend(seg.records.into_iter().map(|r| (r.seq, r.subject)));
    }
    (
        listed.iter().map(|l| (l.first_seq, l.last_seq)).collect(),
        records,
    )
}

/// The live records: (seq, subject).
async fn live(f: &Fleet) -> Vec<(u64, String)> {
    let (first, last, _) = f.state().await;
    let log = f.js.get_stream(STREAM).await.expect("stream");
    let mut out = Vec::new();
    for seq in first..=last {
        if let Ok(m) = log.get_raw_message(seq).await {
            out.push((seq, m.subject.to_string()));
        }
    }
    out
}

fn erase<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["retention", "erase", "-stream", "tracker"];
    all.extend(extra);
    all
}

#[tokio::test]
async fn bad_input_and_refusals_write_nothing() {
    let (f, person) = fleet(None).await;
    let op = operator(&f, None);
    let before = live(&f).await;
    for (args, code, said) in [
        (
            vec![
                "-subject",
                "CREWLET_TRACKER_LOG.user.*",
                "-reason",
                "gdpr",
                "-confirm",
                "CREWLET_TRACKER_LOG.user.*",
            ],
            2,
            "subject_invalid: -subject \"CREWLET_TRACKER_LOG.user.*\" is a wildcard",
        ),
        (
            vec![
                "-subject",
                "CREWLET_TRACKER_LOG.>",
                "-reason",
                "gdpr",
                "-confirm",
                "CREWLET_TRACKER_LOG.>",
            ],
            2,
            "subject_invalid",
        ),
        (
            vec!["-subject", "", "-reason", "gdpr", "-confirm", ""],
            2,
            "subject_invalid: -subject is empty",
        ),
        (
            vec![
                "-subject",
                PERSON,
                "-reason",
                "gdpr",
                "-confirm",
                "CREWLET_TRACKER_LOG.user.43",
            ],
            2,
            "confirm_mismatch",
        ),
        (
            vec!["-subject", PERSON, "-reason", "gdpr"],
            2,
            "confirm_mismatch: -confirm is missing",
        ),
        (
            vec!["-subject", PERSON, "-confirm", PERSON],
            2,
            "reason_missing: -reason is required",
        ),
        (
            vec!["-subject", PERSON, "-reason", "  ", "-confirm", PERSON],
            2,
            "reason_missing",
        ),
        (
            vec![
                "-subject", PERSON, "-reason", "gdpr", "-confirm", PERSON, "-op-id", "nope",
            ],
            2,
            "op_id_invalid",
        ),
        (
            vec![
                "-subject",
                "crewlet.tracker.gate",
                "-reason",
                "gdpr",
                "-confirm",
                "crewlet.tracker.gate",
            ],
            1,
            "gate_subject: crewlet.tracker.gate is the gate subject",
        ),
        (
            vec![
                "-subject",
                "elsewhere.user.42",
                "-reason",
                "gdpr",
                "-confirm",
                "elsewhere.user.42",
            ],
            1,
            "subject_not_in_stream",
        ),
    ] {
        let run = op.run(&erase(&args));
        assert_eq!(run.code, code, "{args:?}: {run:?}");
        assert!(run.stderr.contains(said), "{args:?}: {run:?}");
        // A refusal prints no finishing command: there is nothing to finish.
        assert!(!run.stderr.contains("finish it with"), "{args:?}: {run:?}");
    }
    let run = op.run(&[
        "retention",
        "erase",
        "-stream",
        "NOPE",
        "-subject",
        PERSON,
        "-reason",
        "gdpr",
        "-confirm",
        PERSON,
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(live(&f).await, before, "nothing purged");
    assert_eq!(
        before.iter().filter(|(_, s)| s == PERSON).count(),
        person.len()
    );
    // No row: the bucket holds none (it is created by init and erase).
    let broker = f.broker().await;
    assert!(
        broker
            .read_bucket("crewlet_erasures")
            .await
            .map(|e| e.is_empty())
            .unwrap_or(true),
        "a refusal wrote a row"
    );
}

#[tokio::test]
async fn a_subject_goes_from_the_log_and_the_archive_and_nothing_else_moves() {
    let scratch = Scratch::new();
    erased_from(Store::Dir(scratch.dir.path().join("archive"))).await;
    let s3 = crate::support::s3::S3::start("crewlet-archive");
    erased_from(s3.store("crewlet-archive", "erase")).await;
}

async fn erased_from(store: Store) {
    let (f, person) = fleet(Some(&store)).await;
    let op = operator(&f, Some(&store));
    let live_before = live(&f).await;
    let (ranges_before, archived_before) = archived(&f, &store).await;
    let in_archive = person.iter().filter(|s| **s <= 40).count() as u64;
    let in_log = person.iter().filter(|s| **s > 40).count() as u64;
    assert!(in_archive > 0 && in_log > 0);

    let (run, v) = op.json(&erase(&[
        "-subject",
        PERSON,
        "-reason",
        "GDPR request 7",
        "-confirm",
        PERSON,
        "-by",
        "dpo",
    ]));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["live_records"], in_log, "{v}");
    assert_eq!(v["archived_records"], in_archive, "{v}");
    assert_eq!(v["segments_rewritten"], 4, "every segment held one: {v}");
    assert!(
        v["not_reached"]
            .as_str()
            .is_some_and(|t| t.contains("backups")),
        "{v}"
    );
    let id = v["op_id"].as_str().expect("op id").to_string();

    // The live log: the subject gone, every other record where it was.
    let want: Vec<(u64, String)> = live_before
        .into_iter()
        .filter(|(_, s)| s != PERSON)
        .collect();
    assert_eq!(live(&f).await, want);
    // The archive: the same ranges, the subject gone, the rest kept.
    let (ranges, records) = archived(&f, &store).await;
    assert_eq!(ranges, ranges_before, "the ranges keep their places");
    let want: Vec<(u64, String)> = archived_before
        .into_iter()
        .filter(|(_, s)| s != PERSON)
        .collect();
    assert_eq!(records, want);
    let run = op.run(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 0, "still sound and contiguous: {run:?}");
    // The one account that survives.
    let row = f
        .get("crewlet_erasures", &format!("{STREAM}.{id}"))
        .await
        .expect("the row");
    for (k, want) in [
        ("op_id", serde_json::json!(id)),
        ("stream", serde_json::json!(STREAM)),
        ("subject", serde_json::json!(PERSON)),
        ("reason", serde_json::json!("GDPR request 7")),
        ("by", serde_json::json!("dpo")),
        ("live_records", serde_json::json!(in_log)),
        ("archived_records", serde_json::json!(in_archive)),
        ("segments_rewritten", serde_json::json!(4)),
    ] {
        assert_eq!(row[k], want, "{k}: {row}");
    }
    assert!(row["at"].as_str().is_some(), "{row}");
    // The same op id again: done before, nothing counted twice.
    let (run, v) = op.json(&erase(&[
        "-subject",
        PERSON,
        "-reason",
        "GDPR request 7",
        "-confirm",
        PERSON,
        "-op-id",
        &id,
    ]));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        (v["again"].as_bool(), &v["live_records"]),
        (Some(true), &serde_json::json!(in_log))
    );
    assert_eq!(
        f.get("crewlet_erasures", &format!("{STREAM}.{id}"))
            .await
            .expect("row"),
        row
    );
    // The trim goes on over the rewritten archive.
    let r = f.sidecar().await.tick().await;
    assert!(
        r.alarms.iter().all(|a| a.alarm != "archive_failing"),
        "{:?}",
        r.alarms
    );
    assert_eq!(
        term_state(&r, crewlet::floor::TermName::ArchiveFloor),
        "value 40"
    );
}

#[tokio::test]
async fn a_broker_lost_between_the_live_purge_and_the_archive_is_finished_by_the_retry() {
    let store = Store::ObjectStore(BUCKET.into());
    let (mut f, person) = fleet(Some(&store)).await;
    let op = operator(&f, Some(&store));
    let in_archive = person.iter().filter(|s| **s <= 40).count() as u64;
    let in_log = person.iter().filter(|s| **s > 40).count() as u64;
    // A reason a shell would mangle unquoted: the printed command must
    // survive being pasted into one.
    let reason = "it's $HOME: GDPR `7`";
    let mut args = erase(&["-subject", PERSON, "-reason", reason, "-confirm", PERSON]);
    args.extend(["--config", &op.cfg]);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_crewlet"))
        .args(&args)
        .env_remove("NATS_URL")
        .env("CREWLET_FAILPOINT", "erase_after_live:sleep=2500")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("crewlet");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    f.server.kill();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "stopped part-way: {stderr}");
    let finish = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("finish: "))
        .unwrap_or_else(|| panic!("no finish command: {stderr}"))
        .to_string();
    assert!(finish.contains("-op-id "), "{finish}");
    f.server.restart();
    // The live log was purged before the broker went; the archive not yet.
    let (_, records) = archived(&f, &store).await;
    assert_eq!(
        records.iter().filter(|(_, s)| s == PERSON).count() as u64,
        in_archive
    );
    // The printed command, run by a shell, finishes it; each record
    // counted once.
    let run = run_printed(&finish, &op);
    assert_eq!(run["finished"], true, "{run}");
    assert_eq!(run["live_records"], in_log, "{run}");
    assert_eq!(run["archived_records"], in_archive, "{run}");
    let (_, records) = archived(&f, &store).await;
    assert!(
        records.iter().all(|(_, s)| s != PERSON),
        "the archive forgot it"
    );
    assert!(live(&f).await.iter().all(|(_, s)| s != PERSON));
    let id = run["op_id"].as_str().expect("op id");
    let row = f
        .get("crewlet_erasures", &format!("{STREAM}.{id}"))
        .await
        .expect("row");
    assert_eq!(
        row["reason"], reason,
        "the reason as given, through the shell"
    );
}

/// Runs a command the product printed, through `sh` as a person pasting
/// it would, with `--json --config CFG` after it: its JSON answer.
fn run_printed(command: &str, op: &Operator) -> serde_json::Value {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_crewlet"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{command} --json --config {}", op.cfg))
        .env("PATH", path)
        .env_remove("NATS_URL")
        .output()
        .expect("sh");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))
}

#[tokio::test]
async fn a_crash_after_a_segment_is_rewritten_is_counted_once_by_the_retry() {
    let scratch = Scratch::new();
    let store = Store::Dir(scratch.dir.path().join("archive"));
    let (f, person) = fleet(Some(&store)).await;
    let op = operator(&f, Some(&store));
    let in_archive = person.iter().filter(|s| **s <= 40).count() as u64;
    let in_log = person.iter().filter(|s| **s > 40).count() as u64;
    let mut args = erase(&["-subject", PERSON, "-reason", "gdpr 11", "-confirm", PERSON]);
    args.extend(["--config", &op.cfg]);
    // Aborted right after the first segment's rewrite, before its count.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crewlet"))
        .args(&args)
        .env_remove("NATS_URL")
        .env("CREWLET_FAILPOINT", "erase_after_rewrite")
        .output()
        .expect("crewlet");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "aborted: {stderr}");
    let finish = stderr
        .lines()
        .find_map(|l| l.split_once("finish it with: ").map(|(_, c)| c.to_string()))
        .unwrap_or_else(|| panic!("the command was said before it began: {stderr}"));
    let (_, records) = archived(&f, &store).await;
    let left = records.iter().filter(|(_, s)| s == PERSON).count() as u64;
    assert!(
        left < in_archive && left > 0,
        "one segment rewritten: {left} of {in_archive}"
    );
    let run = run_printed(&finish, &op);
    assert_eq!(run["finished"], true, "{run}");
    assert_eq!(run["live_records"], in_log, "{run}");
    assert_eq!(run["archived_records"], in_archive, "counted once: {run}");
    assert_eq!(run["segments_rewritten"], 4, "{run}");
    let (_, records) = archived(&f, &store).await;
    assert!(records.iter().all(|(_, s)| s != PERSON));
}

#[tokio::test]
async fn an_erasure_reaches_the_archive_of_an_older_generation() {
    let scratch = Scratch::new();
    let store = Store::Dir(scratch.dir.path().join("archive"));
    let (f, person) = fleet(Some(&store)).await;
    let in_archive = person.iter().filter(|s| **s <= 40).count() as u64;
    // The log recreated and reanchored: generation 1, another incarnation,
    // with the person's records on it too; generation 0's segments stay.
    f.recreate_stream().await;
    for i in 0..9 {
        let subject = if i % 3 == 0 {
            PERSON.to_string()
        } else {
            format!("{STREAM}.records")
        };
        f.js.publish(subject, format!("g1-{i}").into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    let created = f.created().await;
    let op = operator(&f, Some(&store));
    let run = op.reanchor(STREAM, &created);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(f.floors_row().await.expect("row")["generation"], 1);
    let (run, v) = op.json(&erase(&[
        "-subject", PERSON, "-reason", "gdpr 13", "-confirm", PERSON,
    ]));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["live_records"], 3, "{v}");
    assert_eq!(
        v["archived_records"], in_archive,
        "generation 0's segments too: {v}"
    );
    let (_, records) = archived(&f, &store).await;
    assert!(!records.is_empty());
    assert!(
        records.iter().all(|(_, s)| s != PERSON),
        "generation 0 forgot it"
    );
}

/// On a log without an archive, the erasure says there is none, not
/// "archive: 0 record(s) removed" (which reads as a search that found
/// nothing).
#[tokio::test]
async fn an_erasure_on_a_log_without_an_archive_says_there_is_none() {
    let (f, _) = fleet(None).await;
    let op = operator(&f, None);
    let run = op.run(&erase(&[
        "-subject", PERSON, "-reason", "gdpr", "-confirm", PERSON,
    ]));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("archive: none configured for this log"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("record(s) removed"), "{run:?}");
}

/// With a duty holder running on a quiet archived log, the erasure waits
/// for a tick after its live purge (a fold in flight may still write the
/// erased records) and then rewrites the archive. A quiet log's row is no
/// longer rewritten every other tick: the holder's `_tick` is what says a
/// tick ran. Before, the erasure waited for the row to move and stopped
/// with "published nothing".
#[tokio::test]
async fn with_a_holder_running_on_a_quiet_log_the_erasure_finishes() {
    let scratch = Scratch::new();
    let store = Store::Dir(scratch.dir.path().join("archive"));
    let (f, _) = fleet(Some(&store)).await;
    let l = Loop::start(&f).await;
    // The loop's first ticks settle the answer; then the row stands.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let op = operator(&f, Some(&store));
    // Off the test's runtime, so that the loop keeps ticking meanwhile.
    let (run, v) = tokio::task::spawn_blocking(move || {
        op.json(&erase(&[
            "-subject",
            PERSON,
            "-reason",
            "GDPR request 9",
            "-confirm",
            PERSON,
            "-by",
            "dpo",
        ]))
    })
    .await
    .expect("join");
    l.stop().await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["segments_rewritten"], 4, "{v}");
    let (_, records) = archived(&f, &store).await;
    assert!(records.iter().all(|(_, s)| s != PERSON), "{records:?}");
}
