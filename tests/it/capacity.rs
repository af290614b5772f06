//! `crewlet retention set-capacity` (and its HTTP route) against a real
//! nats-server: every refusal decided before anything is written, the
//! update of `max_bytes` alone read back, the account's JetStream storage
//! limit, the broker's own refusal, and the remedies that print the
//! command.

use std::time::Duration;

use async_nats::jetstream::stream::DiscardPolicy;

use crate::support::fleet::*;
use crate::support::{create_stream, log_stream, Operator, Server};

const MIB: u64 = 1 << 20;

/// An operator's configuration; `nats` the fields of its `nats:` section.
fn operator_with(nats: &str, unsafe_limits: bool) -> Operator {
    let retention = if unsafe_limits {
        "{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall, held_alarm_after: 0s}"
    } else {
        "{backup_owner: oncall}"
    };
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{{nats}}}\nretention: {retention}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    ))
}

fn operator(url: &str, unsafe_limits: bool) -> Operator {
    operator_with(&format!("url: \"{url}\""), unsafe_limits)
}

/// The stream's configuration as JSON, `max_bytes` apart.
async fn settings(js: &async_nats::jetstream::Context) -> (i64, serde_json::Value) {
    let info = js
        .get_stream(STREAM)
        .await
        .expect("stream")
        .cached_info()
        .clone();
    let mut v = serde_json::to_value(&info.config).expect("config");
    if let Some(o) = v.as_object_mut() {
        o.remove("max_bytes");
    }
    (info.config.max_bytes, v)
}

#[tokio::test]
async fn every_refusal_is_decided_before_anything_is_written() {
    let f = Fleet::with_max_bytes(0, 3 * MIB as i64).await;
    // About 1.2 MiB the trim may not take (no node has reported).
    f.fill(1200, 1000).await;
    let usage = f.log_info().await.state.bytes;
    assert!(usage > MIB, "{usage}");
    let op = operator(&f.server.url(), true);
    let before = settings(&f.js).await;
    let sc = |args: &[&str]| {
        let mut all = vec!["retention", "set-capacity"];
        all.extend(args);
        op.run(&all)
    };
    // Bad input: exit 2, the argument named.
    for (args, said) in [
        (
            vec![STREAM, "8MB", "-confirm", "8MB"],
            "BYTES: \"8MB\" is not a size: decimal and bare units are refused",
        ),
        (
            vec![STREAM, "1.5GiB", "-confirm", "1.5GiB"],
            "fractions are not taken",
        ),
        (vec![STREAM, "-5", "-confirm", "-5"], "\"-5\" is not a size"),
        (
            vec![STREAM, "4MiB", "-confirm", "4194304"],
            "confirm_mismatch: -confirm \"4194304\" does not repeat the target \"4MiB\"",
        ),
        (
            vec![STREAM, "4MiB"],
            "confirm_mismatch: -confirm is required",
        ),
        (
            vec!["NOPE", "4MiB", "-confirm", "4MiB"],
            "\"NOPE\" is not configured; configured: tracker (CREWLET_TRACKER_LOG)",
        ),
    ] {
        let run = sc(&args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(said), "{args:?}: {run:?}");
    }
    // Judgements: exit 1, the numbers named.
    let run = sc(&[STREAM, "512KiB", "-confirm", "512KiB"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("below_minimum: 512.0 KiB (524288 bytes) is under the least ceiling a log may have, 1.0 MiB (1048576 bytes)"),
        "{run:?}"
    );
    let strict = operator(&f.server.url(), false);
    let run = strict.run(&[
        "retention",
        "set-capacity",
        STREAM,
        "1023MiB",
        "-confirm",
        "1023MiB",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("the least ceiling a log may have, 1.0 GiB"),
        "{run:?}"
    );
    // 1 MiB holds appends to 960 KiB, under the usage: the least target is
    // the smallest whole MiB whose soft ceiling (15/16) is above it.
    let least = (usage * 16 / (15 * MIB) + 1) * MIB;
    let run = sc(&[STREAM, "1MiB", "-confirm", "1MiB"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "below_usage: a ceiling of 1.0 MiB (1048576 bytes) holds ordinary appends to 960.0 KiB (983040 bytes), at or below the {} ({usage} bytes) the log holds now",
            crewlet::human::bytes(usage)
        )),
        "{run:?}"
    );
    let command = format!(
        "crewlet retention set-capacity {STREAM} {}MiB -confirm {}MiB",
        least / MIB,
        least / MIB
    );
    assert!(run.stderr.contains(&command), "{run:?}");
    let (run, v) = op.json(&[
        "retention",
        "set-capacity",
        STREAM,
        "1MiB",
        "-confirm",
        "1MiB",
    ]);
    assert_eq!(run.code, 1);
    assert_eq!(v["error"], "below_usage", "{v}");
    assert_eq!(settings(&f.js).await, before, "no refusal wrote anything");

    // The command the refusal printed works (here it gives back a MiB).
    let run = op.run(&command.split(' ').skip(1).collect::<Vec<_>>());
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(&format!("the broker reports {least}")),
        "{run:?}"
    );
    let after = settings(&f.js).await;
    assert_eq!(after.0, least as i64);
    assert_eq!(after.1, before.1, "only max_bytes changed");
    // A raise, in bytes; the same again is no change; a lowering that
    // keeps above the usage is fair (a log gives a reservation back).
    let (run, v) = op.json(&[
        "retention",
        "set-capacity",
        "tracker",
        "8388608",
        "-confirm",
        "8388608",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        (
            v["changed"].as_bool(),
            v["to"].as_u64(),
            v["from"].as_i64(),
            v["verified"].as_bool()
        ),
        (Some(true), Some(8 * MIB), Some(least as i64), Some(true)),
        "{v}"
    );
    assert_eq!(v["reserve_bytes"], 8 * MIB / 16);
    let run = sc(&[STREAM, "8MiB", "-confirm", "8MiB"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("max_bytes is already 8.0 MiB"),
        "{run:?}"
    );
    let run = sc(&[STREAM, "3MiB", "-confirm", "3MiB"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(settings(&f.js).await.0, 3 * MIB as i64);

    // discard: old turns a lower ceiling into a purge of the oldest
    // records: refused, unchanged.
    let mut cfg = f.log_info().await.config;
    cfg.discard = DiscardPolicy::Old;
    f.js.update_stream(&cfg).await.expect("update");
    let run = sc(&[STREAM, "2MiB", "-confirm", "2MiB"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("discard_old: CREWLET_TRACKER_LOG has discard: old"),
        "{run:?}"
    );
    assert_eq!(settings(&f.js).await.0, 3 * MIB as i64);
    // A raise deletes nothing, and is taken.
    let run = sc(&[STREAM, "5MiB", "-confirm", "5MiB"]);
    assert_eq!(run.code, 0, "{run:?}");
    // A configured stream that does not exist.
    f.js.delete_stream(STREAM).await.expect("delete");
    let run = sc(&[STREAM, "6MiB", "-confirm", "6MiB"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("stream CREWLET_TRACKER_LOG does not exist on the broker; nothing written"),
        "{run:?}"
    );
    // The broker gone: exit 3.
    drop(f);
    let run = sc(&[STREAM, "6MiB", "-confirm", "6MiB"]);
    assert_eq!(run.code, 3, "{run:?}");
}

#[tokio::test]
async fn a_raise_past_the_accounts_storage_limit_is_refused_with_what_is_left() {
    // An account with 16 MiB of JetStream file storage.
    let server = Server::start_with(
        "accounts { A: { jetstream: { max_file: 16777216, max_mem: 0 }, users: [ {user: a, password: p} ] } }\n",
        "nats",
    );
    let client = async_nats::ConnectOptions::with_user_and_password("a".into(), "p".into())
        .connect(server.url())
        .await
        .expect("connect");
    let js = async_nats::jetstream::new(client);
    let subjects = [format!("{STREAM}.>"), "crewlet.tracker.gate".to_string()];
    let subjects: Vec<&str> = subjects.iter().map(String::as_str).collect();
    create_stream(&js, log_stream(STREAM, &subjects, 4 * MIB as i64)).await;
    let op = operator_with(
        &format!("url: \"{}\", user: a, password: p", server.url()),
        true,
    );
    // 4 MiB reserved: a raise to 17 MiB would reserve 13 MiB of the 12 left.
    let run = op.run(&[
        "retention",
        "set-capacity",
        STREAM,
        "17MiB",
        "-confirm",
        "17MiB",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("account_limit: the raise reserves 13.0 MiB (13631488 bytes)")
            && run.stderr.contains("the account's JetStream storage limit of 16.0 MiB (16777216 bytes) has 12.0 MiB (12582912 bytes) left"),
        "{run:?}"
    );
    let max = |js: async_nats::jetstream::Context| async move {
        js.get_stream(STREAM)
            .await
            .expect("s")
            .cached_info()
            .config
            .max_bytes
    };
    assert_eq!(max(js.clone()).await, 4 * MIB as i64, "nothing written");
    // The broker agrees: it would have refused that raise itself.
    let mut cfg = js
        .get_stream(STREAM)
        .await
        .expect("s")
        .cached_info()
        .config
        .clone();
    cfg.max_bytes = 17 * MIB as i64;
    let refused = js.update_stream(&cfg).await;
    assert!(
        refused.is_err(),
        "the broker took what the account cannot hold"
    );
    // Exactly what is left is granted.
    let run = op.run(&[
        "retention",
        "set-capacity",
        STREAM,
        "16MiB",
        "-confirm",
        "16MiB",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("the raise reserves 12.0 MiB more"),
        "{run:?}"
    );
    assert_eq!(max(js.clone()).await, 16 * MIB as i64);
}

#[tokio::test]
async fn a_raise_the_broker_refuses_is_reported_with_its_own_error() {
    // No account limit, but the server's file store holds 32 MiB: the
    // account's limits cannot refuse it, the broker does.
    let server = Server::start_with("jetstream { max_file_store: 33554432 }\n", "nats");
    let js = server.js().await;
    let subjects = [format!("{STREAM}.>"), "crewlet.tracker.gate".to_string()];
    let subjects: Vec<&str> = subjects.iter().map(String::as_str).collect();
    create_stream(&js, log_stream(STREAM, &subjects, 4 * MIB as i64)).await;
    let op = operator(&server.url(), true);
    let run = op.run(&[
        "retention",
        "set-capacity",
        STREAM,
        "64MiB",
        "-confirm",
        "64MiB",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("the broker refused the new ceiling of CREWLET_TRACKER_LOG")
            && run.stderr.contains("insufficient storage resources"),
        "{run:?}"
    );
    let max = js
        .get_stream(STREAM)
        .await
        .expect("s")
        .cached_info()
        .config
        .max_bytes;
    assert_eq!(max, 4 * MIB as i64);
}

#[tokio::test]
async fn the_log_headroom_remedy_prints_a_command_that_clears_it() {
    let f = Fleet::with_max_bytes(0, 2 * MIB as i64).await;
    // Past nine tenths of the soft ceiling (1.875 MiB), nothing trimmable.
    f.fill(1800, 1000).await;
    f.healthy(&[("node-1", 0)], 1800).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let op = operator(&f.server.url(), true);
    let run = op.status();
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("ALARM log_headroom"))
        .unwrap_or_else(|| panic!("no log_headroom: {run:?}"));
    let command = line
        .split("(the least that leaves a tenth of headroom): ")
        .nth(1)
        .unwrap_or_else(|| panic!("no command in {line}"));
    assert!(
        command.starts_with(&format!("crewlet retention set-capacity {STREAM} ")),
        "{line}"
    );
    let run = op.run(&command.split(' ').skip(1).collect::<Vec<_>>());
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !op.status().stderr.contains("log_headroom"),
        "the least target the remedy names clears the alarm"
    );
    // And no smaller whole MiB would have: one MiB less leaves it.
    let target: u64 = command
        .split(' ')
        .nth(4)
        .and_then(|t| t.strip_suffix("MiB"))
        .and_then(|n| n.parse().ok())
        .expect("a whole MiB");
    let smaller = format!("{}MiB", target - 1);
    let run = op.run(&[
        "retention",
        "set-capacity",
        STREAM,
        &smaller,
        "-confirm",
        &smaller,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        op.status().stderr.contains("ALARM log_headroom"),
        "one MiB less does not clear it"
    );
}
