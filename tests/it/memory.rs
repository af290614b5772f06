//! The log remembers that it was adopted (docs/trim-floor.md, The log
//! remembers that it was adopted): the floors bucket can be lost with the
//! buckets it guards, and its absence must not read as a log never
//! trimmed. These are the operator's trials: the floors bucket lost alone,
//! with the positions bucket, and after the holds bucket, each ending with
//! the log kept at or below the pinned position + 1 until `adopt`.

use serde_json::Value;

use crate::carried::{node_3_stalled_at_182, operator};
use crate::support::fleet::*;

const FLOORS: &str = "crewlet_floors";

/// The log's configuration as the broker returns it.
async fn log_config(f: &Fleet) -> Value {
    serde_json::to_value(f.log_info().await.config).expect("config as JSON")
}

fn mark_of(config: &Value) -> (Option<String>, Option<String>) {
    let key = |k: &str| config["metadata"][k].as_str().map(str::to_string);
    (key("crewlet.adopted_at"), key("crewlet.floors_created"))
}

async fn floors_created(f: &Fleet) -> String {
    crewlet::broker::read::instant_of(
        f.js.get_stream(format!("KV_{FLOORS}"))
            .await
            .expect("the floors bucket's stream")
            .cached_info()
            .created,
    )
    .to_rfc3339()
}

/// The first publish writes the mark, and nothing else in the log's
/// configuration changes (the configuration read back is the one before,
/// the two keys aside).
#[tokio::test]
async fn the_first_publish_marks_the_log_and_changes_nothing_else() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    let before = log_config(&f).await;
    assert_eq!(mark_of(&before), (None, None), "{before}");
    let mut s = f.sidecar().await;
    s.tick().await;
    let after = log_config(&f).await;
    let (adopted, floors) = mark_of(&after);
    assert!(adopted.is_some(), "crewlet.adopted_at: {after}");
    assert_eq!(floors, Some(floors_created(&f).await), "{after}");
    // The broker's own keys aside, and a metadata left empty is none (a
    // 2.10 server omits an empty one).
    let strip = |mut c: Value| {
        if let Some(m) = c.get_mut("metadata").and_then(Value::as_object_mut) {
            m.retain(|k, _| !k.starts_with("crewlet.") && !k.starts_with("_nats."));
        }
        if c["metadata"].as_object().is_some_and(|m| m.is_empty()) {
            if let Some(o) = c.as_object_mut() {
                o.remove("metadata");
            }
        }
        c
    };
    assert_eq!(strip(before), strip(after.clone()), "only the mark changed");
    assert_eq!(f.first_seq().await, 101, "the trim goes on");
    // A second tick writes no mark again.
    s.tick().await;
    assert_eq!(log_config(&f).await, after, "one update per adoption");
}

/// The operator's trial: node-3 stalled, the floors and the positions
/// buckets lost together. Before, `init` said nothing and the next ticks
/// published `floor=1` and then purged node-3's records. Now the log is
/// NOT READY `memory_lost`, whatever `init` and the nodes reporting again
/// do, until the confirmed `adopt`.
#[tokio::test]
async fn floors_and_positions_lost_together_keep_a_stalled_nodes_records_until_adopt() {
    let (f, mut s) = node_3_stalled_at_182().await;
    let op = operator(&f);
    let created = f.created().await;
    for bucket in [FLOORS, "crewlet_positions"] {
        f.js.delete_key_value(bucket).await.expect("delete");
    }
    let r = s.tick().await;
    assert_eq!(f.first_seq().await, 183);
    let run = op.status();
    assert_eq!(run.code, 1, "{run:?}");
    for want in [
        "memory_lost",
        "the floors bucket is missing",
        "crewlet retention init",
    ] {
        assert!(run.stdout.contains(want), "{want}: {run:?}");
    }
    assert!(
        run.stderr.contains("ALARM not_ready tracker"),
        "the alarm: {run:?}"
    );
    assert!(
        r.domains[0].answer.not_ready.is_some(),
        "{:?}",
        r.domains[0].answer
    );

    // The printed remedy, then the live nodes report again and the log
    // grows: nothing node-3 needs goes.
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    f.position("node-1", 222).await;
    f.position("node-2", 222).await;
    f.publish(10).await;
    for _ in 0..3 {
        let r = s.tick().await;
        let a = &r.domains[0].answer;
        assert!(
            a.not_ready
                .as_ref()
                .is_some_and(|n| n.to_string().starts_with("memory_lost")),
            "{a:?}"
        );
    }
    assert_eq!(f.first_seq().await, 183, "node-3's records are kept");
    assert!(f.floors_row().await.is_none(), "nothing is published");
    let run = op.status();
    let adopt = format!("crewlet retention adopt -stream {STREAM} -confirm {created}");
    for want in [
        "the floors bucket was recreated",
        "node-1 at 222",
        &adopt,
        "status --if-adopted",
    ] {
        assert!(run.stdout.contains(want), "{want}: {run:?}");
    }

    // Without -confirm, adopt says what it would do and refuses.
    let run = op.run(&["retention", "adopt", "-stream", STREAM]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains(&created), "{run:?}");
    assert_eq!(f.first_seq().await, 183);
    // The operator decides node-3 is not needed: adopted, the trim moves.
    let run = op.run(&[
        "retention",
        "adopt",
        "-stream",
        STREAM,
        "-confirm",
        &created,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    // The adopted row opens the memory with what the buckets hold now
    // (node-1 and node-2), and says its format.
    let row = f.floors_row().await.expect("the adopted row");
    assert_eq!(row["memory"]["members"], 2, "{}", row["memory"]);
    assert_eq!(row["format"], 2, "{row}");
    s.tick().await;
    s.tick().await;
    // node-3 is in no bucket now; the snapshots and the backup bind at 212.
    assert_eq!(f.first_seq().await, 213, "adopted: the trim moves on");
    let (_, floors) = mark_of(&log_config(&f).await);
    assert_eq!(
        floors,
        Some(floors_created(&f).await),
        "the mark names the new bucket"
    );
    // Adopting an intact log is refused, and writes nothing.
    let run = op.run(&[
        "retention",
        "adopt",
        "-stream",
        STREAM,
        "-confirm",
        &created,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
}

/// The operator's trial: a live hold, the holds bucket lost (its pin
/// carried), then the floors bucket lost too. Before, the next ticks
/// purged past the hold. Now the log waits for `adopt`.
#[tokio::test]
async fn a_hold_carried_then_the_floors_bucket_lost_keeps_the_hold() {
    let f = Fleet::new(400).await;
    f.healthy(&[("node-1", 400), ("node-2", 400)], 400).await;
    f.hold("nightly-2", 304, 120).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 304, "the hold keeps 304..");
    let op = operator(&f);
    f.js.delete_key_value("crewlet_holds")
        .await
        .expect("delete");
    s.tick().await;
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    s.tick().await;
    assert_eq!(f.first_seq().await, 304, "the carried hold pins");
    f.js.delete_key_value(FLOORS).await.expect("delete");
    s.tick().await;
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    f.publish(20).await;
    f.position("node-1", 420).await;
    f.position("node-2", 420).await;
    for _ in 0..3 {
        s.tick().await;
    }
    assert_eq!(f.first_seq().await, 304, "the hold's records are kept");
    let run = op.status();
    assert!(run.stdout.contains("memory_lost"), "{run:?}");
}

/// The floors bucket lost alone: one sentence that says so (not "its ticks
/// are failing to publish"), and nothing purged past node-3's 182.
#[tokio::test]
async fn the_floors_bucket_lost_alone_is_said_in_one_sentence() {
    let (f, mut s) = node_3_stalled_at_182().await;
    let op = operator(&f);
    f.js.delete_key_value(FLOORS).await.expect("delete");
    f.publish(10).await;
    for _ in 0..2 {
        s.tick().await;
    }
    let run = op.status();
    let sentence = run
        .stdout
        .lines()
        .find(|l| l.starts_with("NOT READY tracker"))
        .unwrap_or_else(|| panic!("the sentence: {run:?}"))
        .to_string();
    for want in [
        "memory_lost",
        "the floors bucket is missing",
        "node-3 at 182",
    ] {
        assert!(sentence.contains(want), "{want}: {sentence}");
    }
    assert_eq!(f.first_seq().await, 183);
    // Since when: the broker time of the first tick that found it lost,
    // the same whenever status is asked (noted in the gates bucket).
    let first = sentence
        .split("since ")
        .nth(1)
        .and_then(|t| t.split(": ").next())
        .unwrap_or_default()
        .to_string();
    let note = f
        .get("crewlet_gates", &format!("_lost.{STREAM}"))
        .await
        .expect("the note of the loss");
    assert_eq!(note["since"], first.as_str(), "{note} {sentence}");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    s.tick().await;
    let run = op.status();
    assert!(
        run.stdout.contains(&format!("since {first}")),
        "the same instant later: {run:?}"
    );
    // Adopted (the bucket recreated first), the memory is intact and the
    // note goes: a later loss is dated afresh.
    assert_eq!(op.run(&["retention", "init"]).code, 0);
    let created = f.created().await;
    let run = op.run(&[
        "retention",
        "adopt",
        "-stream",
        STREAM,
        "-confirm",
        &created,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    s.tick().await;
    assert!(
        f.get("crewlet_gates", &format!("_lost.{STREAM}"))
            .await
            .is_none(),
        "the note is gone once the memory is intact"
    );
}

/// A mark removed by a declarative tool while the memory is intact is
/// written again at the next tick (`marker_restored`), never read as a
/// lost memory.
#[tokio::test]
async fn a_mark_removed_by_a_tool_is_written_again() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let marked = mark_of(&log_config(&f).await);
    // The tool applies its own definition: no crewlet.* keys.
    let mut config = f.log_info().await.config;
    config.metadata.retain(|k, _| !k.starts_with("crewlet."));
    f.js.update_stream(config).await.expect("the tool's update");
    assert_eq!(mark_of(&log_config(&f).await), (None, None));
    let r = s.tick().await;
    assert!(
        r.domains[0].answer.not_ready.is_none(),
        "{:?}",
        r.domains[0].answer
    );
    let restored = mark_of(&log_config(&f).await);
    assert_eq!(restored.1, marked.1, "the same floors bucket");
    assert!(restored.0.is_some());
    assert_eq!(f.first_seq().await, 101, "the trim stands where it was");
}
