//! The tick against a real broker: each term binding the purge, each term
//! state, the floor's rules, dry run, duty, generations.

use serde_json::json;

use crate::support::fleet::*;
use crewlet::floor::{FloorState, TermName};
use crewlet::tick::TickReport;

fn purged(r: &TickReport) -> u64 {
    match &r.domains[0].purged {
        Some(Ok(n)) => *n,
        _ => 0,
    }
}

#[tokio::test]
async fn each_term_binds_the_purge() {
    // applied: the lowest counted node.
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 40)], 95).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(
        r.domains[0].answer.trim_to, 40,
        "{:?}",
        r.domains[0].answer.terms
    );
    assert_eq!(f.first_seq().await, 41, "purged up to and including 40");
    assert_eq!(purged(&r), 40);

    // min_hold: a live hold at 31 permits up to 30.
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
    f.hold("join-node-5", 31, 600).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::MinHold), "value 30");
    assert_eq!(f.first_seq().await, 31);

    // backup_floor.
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90)], 25).await;
    f.sidecar().await.tick().await;
    assert_eq!(f.first_seq().await, 26);

    // snapshot_floor: the 2nd highest verified snapshot.
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90), ("node-3", 90)], 95)
        .await;
    f.snapshot("node-1", 80).await;
    f.snapshot("node-2", 20).await;
    f.snapshot("node-3", 10).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::SnapshotFloor), "value 20");
    assert_eq!(f.first_seq().await, 21);
}

#[tokio::test]
async fn the_feed_consumer_binds_with_real_acks() {
    let mut f = Fleet::new(50).await;
    f.config.domains[0].feed_consumer = Some("tracker-feed".into());
    f.healthy(&[("node-1", 50)], 50).await;

    // A missing consumer is unreadable: nothing is purged.
    let mut sidecar = f.sidecar().await;
    let r = sidecar.tick().await;
    assert!(
        term_state(&r, TermName::FeedAckFloor)
            .starts_with("unreadable: consumer tracker-feed not found"),
        "{}",
        term_state(&r, TermName::FeedAckFloor)
    );
    assert_eq!(f.first_seq().await, 1);

    // Acknowledge the first 12 of 20 delivered.
    f.durable_acked("tracker-feed", 20, 12).await;
    let r = sidecar.tick().await;
    assert_eq!(
        term_state(&r, TermName::FeedAckFloor),
        "value 12",
        "acknowledged, never merely delivered"
    );
    assert_eq!(f.first_seq().await, 13);
}

#[tokio::test]
async fn term_states_and_missing_buckets() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90)], 95).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::MinHold), "unbounded");
    assert_eq!(term_state(&r, TermName::FeedAckFloor), "n/a");
    assert_eq!(
        term_state(&r, TermName::SnapshotFloor),
        "unbounded",
        "a sole node takes no snapshots"
    );
    assert_eq!(term_state(&r, TermName::AgeFloor), "value 100");
    assert_eq!(f.first_seq().await, 91);

    // Delete the holds bucket: min_hold is unreadable, naming init; nothing more goes.
    f.publish(10).await;
    f.healthy(&[("node-1", 110)], 110).await;
    f.js.delete_key_value("crewlet_holds")
        .await
        .expect("delete bucket");
    let r = f.sidecar().await.tick().await;
    assert_eq!(
        term_state(&r, TermName::MinHold),
        "unreadable: bucket crewlet_holds does not exist; run `crewlet retention init`"
    );
    assert_eq!(r.domains[0].answer.trim_to, 0);
    assert_eq!(f.first_seq().await, 91);
    assert!(
        r.alarms.iter().any(|a| a.alarm == "term_unreadable"),
        "{:?}",
        r.alarms
    );
}

#[tokio::test]
async fn a_live_data_node_without_a_row_blocks() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
    f.presence("node-9", &["data"]).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::Applied), "value 0");
    assert_eq!(
        f.first_seq().await,
        1,
        "a booting node is about to replay everything"
    );
}

#[tokio::test]
async fn expired_holds_and_backups_that_do_not_count() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90)], 95).await;
    f.hold("old", 5, -60).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(
        term_state(&r, TermName::MinHold),
        "unbounded",
        "an expired hold is ignored"
    );
    assert_eq!(f.first_seq().await, 91);

    for (what, verified, complete, stale) in [
        ("stale", true, true, true),
        ("unverified", false, true, false),
        ("incomplete", true, false, false),
    ] {
        let mut f = Fleet::new(100).await;
        if stale {
            f.config.retention.backup_max_age = crewlet::config::Dur::secs(1);
        }
        f.healthy(&[("node-1", 90)], 95).await;
        f.backup("node-1", "b1", 95, 0, verified, complete).await;
        if stale {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        }
        let r = f.sidecar().await.tick().await;
        assert_eq!(term_state(&r, TermName::BackupFloor), "value 0", "{what}");
        assert_eq!(
            f.first_seq().await,
            1,
            "{what}: nothing goes without a counted backup"
        );
        assert!(
            r.alarms.iter().any(|a| a.alarm == "backup_age"),
            "{what}: {:?}",
            r.alarms
        );
    }
}

#[tokio::test]
async fn operator_acknowledgements() {
    let mut f = Fleet::new(100).await;
    f.config.retention.backup_floor = crewlet::config::BackupPolicy::Operator;
    f.healthy(&[("node-1", 90)], 95).await;
    let mut sidecar = f.sidecar().await;
    let r = sidecar.tick().await;
    assert_eq!(term_state(&r, TermName::BackupFloor), "value 0");
    assert_eq!(f.first_seq().await, 1);
    f.put(
        "crewlet_backups",
        &format!("_ack.{STREAM}"),
        json!({"stream": STREAM, "position": 60, "by": "alice", "at": ts(0)}),
    )
    .await;
    sidecar.tick().await;
    assert_eq!(f.first_seq().await, 61);
}

#[tokio::test]
async fn snapshot_quorum_needs_k_nodes() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
    f.delete("crewlet_snapshots", "node-2").await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::SnapshotFloor), "value 0");
    assert_eq!(f.first_seq().await, 1);
}

#[tokio::test]
async fn age_floor_keeps_young_records() {
    let mut f = Fleet::new(40).await;
    f.config.retention.min_age = crewlet::config::Dur::secs(2);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    f.publish(10).await;
    f.healthy(&[("node-1", 50)], 50).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(
        term_state(&r, TermName::AgeFloor),
        "value 40",
        "the 10 young records stay"
    );
    assert_eq!(f.first_seq().await, 41);
}

#[tokio::test]
async fn the_floor_never_moves_down_and_the_purge_follows_trim_to() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 80)], 95).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 81);
    // The node is restored from an old backup: its row moves back to 30.
    f.position("node-1", 30).await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(a.trim_to, 30);
    assert_eq!(a.floor, Some(81), "the floor does not move down");
    assert_eq!(f.first_seq().await, 81, "nothing more is purged");
    assert_eq!(f.floors_row().await.expect("row")["floor"], 81);
}

#[tokio::test]
async fn dry_run_publishes_and_purges_nothing() {
    let mut f = Fleet::new(100).await;
    f.config.trim.enabled = false;
    f.healthy(&[("node-1", 70)], 95).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(f.first_seq().await, 1);
    let row = f.floors_row().await.expect("published");
    assert_eq!(row["dry_run"], true);
    assert_eq!(row["floor"], serde_json::Value::Null);
    assert_eq!(row["trim_floor_state"], "none");
    assert_eq!(
        row["would_purge"],
        json!({"records": 70, "first_seq": 1, "last_seq": 70})
    );
    assert!(r.domains[0].purged.is_none());
}

#[tokio::test]
async fn two_sidecars_one_purges() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 50)], 95).await;
    let mut a = f.sidecar_as("node-1").await;
    let mut b = f.sidecar_as("node-2").await;
    let ra = a.tick().await;
    let rb = b.tick().await;
    assert!(matches!(ra.duty, crewlet::tick::duty::DutyStatus::Held));
    assert!(
        matches!(rb.duty, crewlet::tick::duty::DutyStatus::Other { ref holder, .. } if holder == "node-1"),
        "{:?}",
        rb.duty
    );
    assert!(
        ra.domains[0].published.is_some() && rb.domains[0].published.is_none(),
        "only the holder publishes"
    );
    assert_eq!(purged(&ra), 50);
    assert_eq!(purged(&rb), 0);
    // The holder releases: the other takes over at once.
    a.duty.release(&a.broker).await;
    f.position("node-1", 60).await;
    let rb = b.tick().await;
    assert!(matches!(rb.duty, crewlet::tick::duty::DutyStatus::Held));
    assert_eq!(purged(&rb), 10);
    assert_eq!(f.floors_row().await.expect("row")["by"], "node-2");
}

#[tokio::test]
async fn a_recreated_stream_is_not_ready_until_reanchored() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 50)], 95).await;
    let mut sidecar = f.sidecar().await;
    sidecar.tick().await;
    assert_eq!(f.first_seq().await, 51);
    let old_created = f.created().await;

    // Delete and recreate the stream; the nodes keep their old rows.
    f.recreate_stream().await;
    f.publish(100).await;
    let new_created = f.created().await;
    assert_ne!(old_created, new_created);
    let r = sidecar.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(a.not_ready, Some(crewlet::floor::NotReady::Recreated));
    assert_eq!(
        f.first_seq().await,
        1,
        "nothing purged on the recreated stream"
    );
    assert!(
        r.alarms
            .iter()
            .any(|al| al.alarm == "not_ready"
                && al.remedy.contains(&format!("-confirm {new_created}"))),
        "{:?}",
        r.alarms
    );

    // reanchor without -confirm prints the live created and refuses.
    let s = crate::support::Scratch::new();
    let cfg = s.write(
        "c.yaml",
        &crate::support::basic_config(
            &f.server.url(),
            STREAM,
            "    gate_subject: crewlet.tracker.gate\n",
        ),
    );
    let cfg = cfg.to_str().expect("utf-8");
    let run =
        crate::support::crewlet(&["retention", "reanchor", "-stream", STREAM, "--config", cfg]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains(&format!("live created {new_created}")),
        "{run:?}"
    );
    assert!(
        run.stdout.contains(&format!(
            "case: recreated: the floor (generation 0) belongs to {old_created}"
        )),
        "{run:?}"
    );
    // A wrong confirmation writes nothing.
    let run = crate::support::crewlet(&[
        "retention",
        "reanchor",
        "-stream",
        STREAM,
        "-confirm",
        &old_created,
        "--config",
        cfg,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(f.floors_row().await.expect("row")["generation"], 0);
    // The right one opens generation 1.
    let run = crate::support::crewlet(&[
        "retention",
        "reanchor",
        "-stream",
        STREAM,
        "-confirm",
        &new_created,
        "--config",
        cfg,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["generation"], 1);
    assert_eq!(row["trim_floor_state"], "none_at_generation");
    assert_eq!(row["floor"], serde_json::Value::Null);
    assert_eq!(row["terms"], json!([]));

    // Old-generation positions count at 0 until the node reports anew.
    let r = sidecar.tick().await;
    assert_eq!(r.domains[0].answer.not_ready, None);
    assert_eq!(term_state(&r, TermName::Applied), "value 0");
    assert_eq!(r.domains[0].answer.nodes[0].left_gen, Some(0));
    assert_eq!(f.first_seq().await, 1);
    f.position_at("node-1", 40, 1, &new_created, "ok").await;
    // The old backup predates this stream; a new one covers it.
    f.backup("node-1", "b2", 95, 0, true, true).await;
    let r = sidecar.tick().await;
    assert_eq!(r.domains[0].answer.trim_floor_state, FloorState::Published);
    assert_eq!(f.first_seq().await, 41);
}

#[tokio::test]
async fn positions_past_the_log_end_are_not_ready() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 150)], 95).await;
    let r = f.sidecar().await.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(a.not_ready, Some(crewlet::floor::NotReady::AheadOfLog));
    assert!(term_state(&r, TermName::Applied).contains("node-2 reports position 150"));
    assert_eq!(f.first_seq().await, 1);
    assert!(r.alarms.iter().any(|al| al.alarm == "not_ready"));
}

#[tokio::test]
async fn evicted_nodes_stop_counting_after_the_fence_window() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90)], 95).await;
    f.position("node-4", 10).await;
    f.snapshot("node-4", 10).await;
    let op = crewlet::rows::OpId::mint(chrono::Utc::now());
    f.put("crewlet_gates", &format!("{STREAM}.node-4"), json!({"node": "node-4", "stream": STREAM, "state": "evicted", "op_id": op.as_str(), "seq": 3, "landed_at": ts(-1), "by": "alice", "stream_created": f.created().await, "generation": 0})).await;
    let mut sidecar = f.sidecar().await;
    let r = sidecar.tick().await;
    assert_eq!(
        r.domains[0].answer.trim_to, 10,
        "inside the 2s fence window it still counts"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let r = sidecar.tick().await;
    assert_eq!(r.domains[0].answer.trim_to, 90);
    assert_eq!(f.first_seq().await, 91);
}

#[tokio::test]
async fn a_malformed_row_blocks_and_names_its_key() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90)], 95).await;
    f.put(
        "crewlet_positions",
        &format!("{STREAM}.node-2"),
        json!({"node": "node-3", "stream": STREAM, "seq": 5}),
    )
    .await;
    let r = f.sidecar().await.tick().await;
    let state = term_state(&r, TermName::Applied);
    assert!(
        state.starts_with("unreadable") && state.contains(&format!("{STREAM}.node-2")),
        "{state}"
    );
    assert_eq!(f.first_seq().await, 1);
}

/// The answer a tick keeps (what `/v1/retention` serves) and `status
/// --json` agree on `published_at`: when the floors row was last written,
/// which is this tick's own publish. The tick's answer used to say the
/// row before it, a tick behind.
#[tokio::test]
async fn the_tick_s_answer_says_its_own_publish() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let r = s.tick().await;
    let row = f.floors_row().await.expect("published");
    let at = crewlet::rows::Timestamp::parse(row["at"].as_str().expect("at")).expect("instant");
    assert_eq!(r.domains[0].answer.published_at, Some(at));
}

/// The floors row is written when its answer changes, never to say it is
/// still there: a fleet of many quiet logs is not rewritten, and the
/// holder's `_tick` keeps `floor_stale` quiet.
#[tokio::test]
async fn an_unchanged_answer_stands_and_a_change_is_written_at_once() {
    let mut f = Fleet::new(100).await;
    // Two seconds: a row stands only after a tick shorter than a quarter
    // of one, which a debug build's tick is by far.
    // (The duty bucket keeps the 3 s lease the fleet made it with, which
    // `config_drift` says; the lease is renewed every tick all the same.)
    f.config.retention.tick = crewlet::config::Dur::secs(2);
    let stale = |r: &TickReport| {
        r.alarms.iter().any(|a| {
            matches!(
                a.alarm,
                crewlet::alarms::AlarmName::FloorStale | crewlet::alarms::AlarmName::DutyUnheld
            )
        })
    };
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    let mut s = f.sidecar().await;
    let revision = |r: &TickReport| match &r.domains[0].published {
        Some(Ok(rev)) => *rev,
        other => panic!("not published: {other:?}"),
    };
    // The first tick writes and purges the whole log; the second writes
    // what bounded nothing. From then on the answer is the same.
    let r = s.tick().await;
    assert_eq!(purged(&r), 100);
    let r = s.tick().await;
    let written = revision(&r);
    let row = f.floors_row().await.expect("row");
    let r = s.tick().await;
    assert_eq!(
        revision(&r),
        written,
        "an unchanged answer is not written again"
    );
    assert!(r.domains[0].stood.is_some());
    assert_eq!(
        f.floors_row().await.expect("row"),
        row,
        "the row stands as it was"
    );
    assert_eq!(
        r.domains[0].answer.published_at.map(|t| t.to_string()),
        row["at"].as_str().map(str::to_string),
        "the answer says when the row it stands on was written"
    );
    assert!(!stale(&r), "{:?}", r.alarms);

    // A new hold changes the answer (the row lists every live hold): it is
    // written by the next tick, as `hold` waits for.
    f.hold("join-node-5", 101, 600).await;
    let r = s.tick().await;
    assert!(revision(&r) > written, "a new hold is written at once");
    let row = f.floors_row().await.expect("row");
    assert_eq!(
        row["memory"]["holds"], 1,
        "the memory names the hold: {row}"
    );
    let written = revision(&r);

    // Unchanged, it is never written again to say it is still there: the
    // holder's `_tick` says so, and floor_stale (three ticks) stays quiet
    // however old the row is.
    let r = s.tick().await;
    assert_eq!(revision(&r), written);
    for _ in 0..3 {
        tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
        let r = s.tick().await;
        assert_eq!(revision(&r), written, "an unchanged row stands");
        assert!(r.domains[0].stood.is_some());
        assert!(!stale(&r), "{:?}", r.alarms);
    }
    let tick = f
        .get("crewlet_floors", "_tick")
        .await
        .expect("the tick's row");
    assert_eq!(tick["by"], "node-1", "{tick}");
    assert_eq!(tick["unpublished"], json!([]), "{tick}");

    // A row another writer put there is never taken for the one written.
    let mut other = f.floors_row().await.expect("row");
    other["by"] = json!("someone-else");
    f.put("crewlet_floors", STREAM, other).await;
    let r = s.tick().await;
    assert!(
        r.domains[0].stood.is_none(),
        "written over another writer's row"
    );
    assert_eq!(f.floors_row().await.expect("row")["by"], json!("node-1"));
}

/// A fleet of many logs is read from the account's stream listing, a few
/// pages for every log: each log's state there is what its own stream
/// info says, with the broker's clock, and a log the listing does not
/// show is left to be read alone (docs/decisions.md, A fleet of many logs).
#[tokio::test]
async fn a_listed_logs_state_is_what_its_own_stream_info_says() {
    let f = Fleet::new(5).await;
    // More streams than a page holds (256), some with records.
    let names: Vec<String> = (0..300).map(|i| format!("L{i:03}")).collect();
    for (i, name) in names.iter().enumerate() {
        f.js.create_stream(async_nats::jetstream::stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.>")],
            max_bytes: 1 << 20,
            ..Default::default()
        })
        .await
        .expect("stream");
        for r in 0..(i % 4) {
            f.js.publish(format!("{name}.r"), format!("r{r}").into())
                .await
                .expect("publish")
                .await
                .expect("ack");
        }
    }
    let b = f.broker().await;
    let mut logs: Vec<&str> = names.iter().map(String::as_str).collect();
    logs.extend([STREAM, "NOT_A_STREAM"]);
    let listing = b
        .listing(&logs, std::time::Duration::from_secs(5))
        .await
        .expect("the listing");
    assert_eq!(listing.states.len(), 301, "every log but the missing one");
    assert!(!listing.states.contains_key("NOT_A_STREAM"));
    for name in [STREAM, "L000", "L003", "L255", "L256", "L299"] {
        let (listed, at) = listing.states[name].get();
        let (alone, now) = b.stream_state_at(name).await.expect("stream info");
        assert_eq!(listed, &alone, "{name}");
        assert!(
            (now.broker - at.broker).num_seconds().abs() < 5 && at.broker <= now.broker,
            "{name}: the broker's clock as it answered the listing ({at:?}, then {now:?})"
        );
    }
    assert_eq!(listing.states["L003"].get().0.last_seq, 3);
}

/// A quiet fleet costs the broker one write a tick: the holder's `_tick`
/// (its row stands unchanged), and `floor_stale` rises three ticks after
/// the holder stops ticking, though the row itself never changed.
#[tokio::test]
async fn a_quiet_fleet_writes_one_key_a_tick_and_goes_stale_when_its_holder_stops() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    let mut s = f.sidecar().await;
    // The first ticks purge the log and settle the answer.
    for _ in 0..3 {
        s.tick().await;
    }
    let writes = || async {
        f.js.get_stream("KV_crewlet_floors")
            .await
            .expect("floors")
            .cached_info()
            .state
            .last_sequence
    };
    let row = f.floors_row().await.expect("row");
    for _ in 0..3 {
        let before = writes().await;
        let r = s.tick().await;
        assert!(r.domains[0].stood.is_some(), "the row stands");
        assert_eq!(writes().await - before, 1, "one write a tick: _tick");
    }
    assert_eq!(f.floors_row().await.expect("row"), row, "the row as it was");
    let tick = f
        .get("crewlet_floors", "_tick")
        .await
        .expect("the tick's row");
    assert!(tick["at"].as_str() > row["at"].as_str(), "{tick} {row}");

    // The holder stops: three ticks later (3 s here) the row is stale.
    let op = crate::carried::operator(&f);
    let quiet = op.status();
    assert!(!quiet.stderr.contains("floor_stale"), "{quiet:?}");
    tokio::time::sleep(std::time::Duration::from_millis(3300)).await;
    let run = op.status();
    assert!(
        run.stderr
            .contains("ALARM floor_stale tracker: the floors row was last confirmed"),
        "{run:?}"
    );
}
