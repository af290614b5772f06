//! The operator's surface: cron without false alarms,
//! connecting like the `nats` CLI, exit codes that tell configuration from
//! the network. Each test failed on the code before its fix.

use std::time::Duration;

use crate::support::fleet::*;
use crate::support::{
    create_stream, crewlet_env, free_port, log_stream, Operator, Scratch, Server,
};

fn cron_yaml(url: &str) -> String {
    format!(
        "node: {{id: node-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    )
}

/// `run --once` from cron every tick, `status` in between: a healthy fleet
/// pages nobody (the lease is released between runs, which is not an
/// alarm), and the alarm comes once the runs stop.
#[tokio::test]
async fn cron_runs_page_only_when_they_stop() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let op = Operator::with_yaml(&cron_yaml(&f.server.url()));
    for i in 0..5 {
        let run = op.run(&["retention", "run", "--once"]);
        assert_eq!(run.code, 0, "run {i}: {run:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let status = op.status();
        assert_eq!(status.code, 0, "status after run {i}: {status:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The cron job stops: three ticks later, someone is paged.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let status = op.status();
    assert_eq!(status.code, 1, "{status:?}");
    let alarms = op.alarms();
    assert!(
        alarms.iter().any(|a| a == "ALARM duty_unheld *"),
        "{alarms:?}"
    );
    assert!(
        status
            .stderr
            .contains("set retention.tick to the cron interval"),
        "{status:?}"
    );
}

/// A comma-separated server list works (file, flag and `NATS_URL`), and
/// `NATS_URL` is taken before the file, as the `nats` CLI does.
#[tokio::test]
async fn server_lists_and_nats_url_work_as_in_the_nats_cli() {
    let f = Fleet::new(5).await;
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let live = f.server.url();
    let list = format!("{dead},{live}");
    let op = Operator::with_yaml(&cron_yaml(&list));
    let run = op.run(&["retention", "status", "--json"]);
    assert!(
        run.code == 0 || run.code == 1,
        "the list reaches {live}: {run:?}"
    );
    assert!(run.stdout.contains("\"domains\""), "{run:?}");

    let op = Operator::with_yaml(&cron_yaml(&dead));
    let run = crewlet_env(
        &["retention", "status", "--json", "--config", &op.cfg],
        &[("NATS_URL", &list)],
    );
    assert!(
        run.code == 0 || run.code == 1,
        "NATS_URL before the file: {run:?}"
    );
    let run = op.run(&["retention", "status", "--nats-url", &list]);
    assert!(run.code == 0 || run.code == 1, "the flag: {run:?}");
}

/// A refused credential, an unreadable creds file or a URL that is not a
/// NATS URL is configuration (exit 2), not the network (exit 3).
#[tokio::test]
async fn configuration_is_exit_2_and_the_network_exit_3() {
    let token = "right-token";
    let server = Server::start_with(&format!("authorization {{ token: \"{token}\" }}\n"), "nats");
    let s = Scratch::new();
    let cfg = |nats: &str| {
        s.write(
            "c.yaml",
            &format!("node: {{id: node-1}}\nnats: {{{nats}}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n"),
        )
        .to_str()
        .expect("utf-8")
        .to_string()
    };
    let status = |path: &str, extra: &[&str]| {
        let mut args = vec!["retention", "status", "--config", path];
        args.extend_from_slice(extra);
        crewlet_env(&args, &[])
    };
    let wrong = cfg(&format!("url: \"{}\", token: \"wrong\"", server.url()));
    let run = status(&wrong, &[]);
    assert_eq!(run.code, 2, "a refused token: {run:?}");
    assert!(run.stderr.contains("refused the connection"), "{run:?}");
    let run = crewlet_env(&["validate", "--config", &wrong], &[]);
    assert_eq!(run.code, 2, "validate too: {run:?}");

    let creds = cfg(&format!(
        "url: \"{}\", creds: /nonexistent/x.creds",
        server.url()
    ));
    let run = status(&creds, &[]);
    assert_eq!(run.code, 2, "a creds file that is not there: {run:?}");

    let right = cfg(&format!("url: \"{}\", token: \"{token}\"", server.url()));
    let run = status(&right, &["--nats-url", "http://127.0.0.1:8222"]);
    assert_eq!(run.code, 2, "an http:// URL: {run:?}");

    let dead = cfg(&format!("url: \"nats://127.0.0.1:{}\"", free_port()));
    let run = status(&dead, &[]);
    assert_eq!(run.code, 3, "nobody listening is the network: {run:?}");
}

/// The operator's configuration for a [`Fleet`] with a gated log.
fn gated(f: &Fleet, extra: &str) -> Operator {
    Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall{extra}}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n",
        f.server.url()
    ))
}

/// Gestures judge their input: an unknown node is not evicted, an evicted
/// one not evicted twice, a node not evicted not readmitted.
#[tokio::test]
async fn gestures_refuse_what_makes_no_sense() {
    let f = Fleet::new(10).await;
    f.position("node-4", 5).await;
    let op = gated(&f, "");
    let gate_records = || async {
        f.js.get_stream(STREAM)
            .await
            .expect("log")
            .cached_info()
            .state
            .last_sequence
            - 10
    };

    let run = op.run(&["retention", "evict", "node-44", "-confirm", "node-44"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("unknown_node"), "{run:?}");
    assert_eq!(gate_records().await, 0, "nothing written");

    let run = op.run(&["retention", "readmit", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("not_evicted"), "{run:?}");
    assert_eq!(gate_records().await, 0);

    let (run, first) = op.json(&[
        "retention",
        "evict",
        "node-4",
        "-confirm",
        "node-4",
        "-reason",
        "disk died",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let (run, again) = op.json(&[
        "retention",
        "evict",
        "node-4",
        "-confirm",
        "node-4",
        "-reason",
        "oops",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(again["logs"][0]["outcome"], "applied", "{again}");
    assert_eq!(
        again["logs"][0]["seq"], first["logs"][0]["seq"],
        "the record in force answers"
    );
    assert_eq!(gate_records().await, 1, "no second record");
    let g = f
        .get("crewlet_gates", &format!("{STREAM}.node-4"))
        .await
        .expect("row");
    assert_eq!(g["reason"], "disk died", "the first reason stays");

    // -force takes an unknown node past the judgement.
    let run = op.run(&[
        "retention",
        "evict",
        "node-44",
        "-confirm",
        "node-44",
        "-force",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// Recording commands refuse what would never be read or cannot be true,
/// and holds can be listed.
#[tokio::test]
async fn recording_commands_judge_their_input_and_holds_are_listed() {
    let f = Fleet::new(10).await;
    f.position("node-1", 5).await;
    let engine = gated(&f, "");
    let run = engine.run(&["retention", "ack", "-stream", STREAM, "-position", "5"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("policy_engine"), "{run:?}");
    assert!(f
        .get("crewlet_backups", &format!("_ack.{STREAM}"))
        .await
        .is_none());
    let operator = gated(&f, ", backup_floor: operator");
    let run = operator.run(&["retention", "ack", "-stream", STREAM, "-position", "5"]);
    assert_eq!(run.code, 0, "{run:?}");

    let announce = |extra: &[&str]| {
        let mut args = vec![
            "retention",
            "backup",
            "announce",
            "-node",
            "node-1",
            "-id",
            "b1",
            "-verified",
        ];
        args.extend_from_slice(extra);
        engine.run(&args)
    };
    let past = format!("{STREAM}=11");
    let run = announce(&["-position", &past]);
    assert_eq!(run.code, 2, "past the log's end: {run:?}");
    let twice = format!("{STREAM}=5");
    let run = announce(&["-position", &twice, "-position", &twice]);
    assert_eq!(run.code, 2, "a stream given twice: {run:?}");
    assert!(
        f.get("crewlet_backups", "node-1.b1").await.is_none(),
        "nothing written"
    );

    f.hold("live-one", 3, 600).await;
    f.hold("old-one", 4, -600).await;
    let (run, v) = engine.json(&["retention", "holds", "-stream", STREAM]);
    assert_eq!(run.code, 0, "{run:?}");
    let states: Vec<(String, String)> = v["holds"]
        .as_array()
        .expect("holds")
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap_or("").to_string(),
                h["state"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("live-one".to_string(), "live".to_string()),
            ("old-one".to_string(), "expired".to_string())
        ]
    );
    let run = engine.run(&["retention", "holds"]);
    assert!(
        run.stdout.contains("live-one") && run.stdout.contains("expired"),
        "{run:?}"
    );
}

/// stderr carries alarms and logs, quietly: a one-shot command logs nothing
/// below WARN (not the client library's connection lines), no colour into
/// a pipe, `--log-format json` makes every line JSON (alarms included),
/// `run --once` prints each alarm once, and a closed stdout is no panic.
#[tokio::test]
async fn stderr_is_quiet_and_machine_readable() {
    let f = Fleet::new(10).await;
    let op = gated(&f, "");
    let cfg = op.cfg.clone();
    let run = crate::support::crewlet_bare(&["retention", "status", "--config", &cfg]);
    assert_eq!(run.code, 1, "alarms expected (no backup, no duty): {run:?}");
    for line in run.stderr.lines() {
        assert!(line.starts_with("ALARM "), "only alarms: {line:?}\n{run:?}");
    }
    assert!(
        !run.stderr.contains('\u{1b}'),
        "no colour into a pipe: {run:?}"
    );

    let run = crate::support::crewlet_bare(&[
        "retention",
        "status",
        "--config",
        &cfg,
        "--log-format",
        "json",
    ]);
    assert!(!run.stderr.is_empty());
    let mut shape = None;
    for line in run.stderr.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert_eq!(v["event"], "alarm_raised", "{line}");
        shape = Some(crate::support::log_keys(&v));
    }
    // One shape for an alarm everywhere: `run`'s JSON log lines carry the
    // same keys as `status`'s.
    let shape = shape.expect("an alarm line");
    assert_eq!(shape, crate::support::ALARM_KEYS);
    let run = crate::support::crewlet_bare(&[
        "retention",
        "run",
        "--once",
        "--config",
        &cfg,
        "--log-format",
        "json",
    ]);
    let raised: Vec<serde_json::Value> = run
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "alarm_raised")
        .collect();
    assert!(!raised.is_empty(), "{run:?}");
    for v in &raised {
        assert_eq!(crate::support::log_keys(v), shape, "{v}");
    }

    let run = crate::support::crewlet_bare(&["retention", "run", "--once", "--config", &cfg]);
    let alarms: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("ALARM "))
        .collect();
    let mut unique = alarms.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(alarms.len(), unique.len(), "each alarm once: {run:?}");
    assert!(!alarms.is_empty(), "{run:?}");
    assert!(!run.stderr.contains("connected"), "{run:?}");

    // Enough holds that the listing outruns the pipe's buffer.
    let rows: Vec<(String, String)> = (0..3000)
        .map(|i| {
            (
                format!("{STREAM}.h{i}"),
                serde_json::json!({"seq": 3, "owner": "bulk", "reason": "fill the pipe", "expires_at": ts(600)}).to_string(),
            )
        })
        .collect();
    let mut acks = Vec::new();
    for (k, v) in rows {
        acks.push(
            f.js.publish(format!("$KV.crewlet_holds.{k}"), v.into())
                .await
                .expect("publish a hold"),
        );
    }
    for a in acks {
        a.await.expect("hold acked");
    }
    let piped = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' retention holds --config '{cfg}' | head -c 1 >/dev/null; echo \"${{PIPESTATUS[0]}}\"",
            env!("CARGO_BIN_EXE_crewlet")
        ))
        .env_remove("RUST_LOG")
        .output()
        .expect("bash");
    let text = String::from_utf8_lossy(&piped.stdout);
    assert!(!text.contains("panicked"), "{text}");
    assert_ne!(text.trim(), "101", "a panic's exit code: {text}");
}

/// `run` started before its broker waits for it, saying so, and trims once
/// it is there; SIGTERM still ends it cleanly.
#[tokio::test]
async fn run_waits_for_a_broker_that_is_not_up_yet() {
    let port = free_port();
    let op = Operator::with_yaml(&cron_yaml(&format!("nats://127.0.0.1:{port}")));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_crewlet"))
        .args(["retention", "run", "--config", &op.cfg])
        .env_remove("RUST_LOG")
        .env_remove("NATS_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start crewlet");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let server = Server::start_on(port);
    let js = server.js().await;
    let claimed = eventually(20, || async {
        match js.get_key_value("crewlet_duty").await {
            Ok(kv) => kv.get("retention").await.ok().flatten().is_some(),
            Err(_) => false,
        }
    })
    .await;
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: signalling a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        claimed,
        "the sidecar reached the broker and claimed the duty: {stderr}"
    );
    assert!(stderr.contains("waiting_for_broker"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// `--json` works on the recording commands and reanchor: one object on
/// stdout.
#[tokio::test]
async fn json_on_the_recording_commands() {
    let f = Fleet::new(10).await;
    f.position("node-1", 5).await;
    f.hold("h1", 3, 600).await;
    let op = gated(&f, ", backup_floor: operator");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["retention", "ack", "-stream", STREAM, "-position", "5"],
            "acknowledged",
        ),
        (
            vec!["retention", "release", "-stream", STREAM, "h1"],
            "released",
        ),
        (
            vec![
                "retention",
                "backup",
                "announce",
                "-node",
                "node-1",
                "-id",
                "b1",
                "-position",
                "CREWLET_TRACKER_LOG=5",
                "-verified",
            ],
            "announced",
        ),
        (
            vec!["retention", "reanchor", "-stream", STREAM],
            "reanchored",
        ),
    ];
    for (args, key) in cases {
        let (run, v) = op.json(&args);
        assert!(v.get(key).is_some(), "{args:?}: {run:?}");
    }
}

/// Every `crewlet …` command in a text, up to where the sentence goes on.
fn printed_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crewlet ") {
        let tail = &rest[i..];
        let end = tail
            .find([';', '(', ')', '\n', '—', ',', '`'])
            .unwrap_or(tail.len());
        let cmd = tail[..end].trim().trim_end_matches('.').to_string();
        // Only invocations (a subcommand follows), not the product's name.
        if cmd.starts_with("crewlet retention ") || cmd.starts_with("crewlet validate") {
            out.push(cmd);
        }
        rest = &tail[end.min(tail.len())..];
        if end == 0 {
            rest = &tail[8..];
        }
    }
    out
}

/// Every command that status, alarms and gestures print for a person to
/// run parses against the real CLI (placeholders such as N or HOLD_ID
/// stand for values).
#[tokio::test]
async fn every_printed_command_parses() {
    let f = Fleet::new(20).await;
    // A fleet that raises many alarms: an absent node, a hold, no backup,
    // a recreated stream to come.
    f.position("node-3", 5).await;
    f.hold("h1", 3, 600).await;
    let op = gated(&f, ", held_alarm_after: 0s, backup_floor: operator");
    let mut texts = Vec::new();
    let run = op.run(&["retention", "run", "--once"]);
    texts.push(run.stdout + &run.stderr);
    let run = op.status();
    texts.push(run.stdout + &run.stderr);
    let run = op.run(&["retention", "evict", "node-3", "-confirm", "node-4"]);
    texts.push(run.stdout + &run.stderr);
    let run = op.run(&[
        "retention",
        "hold",
        "-stream",
        STREAM,
        "-seq",
        "4",
        "-ttl",
        "1h",
        "-owner",
        "o",
    ]);
    texts.push(run.stdout + &run.stderr);
    // Every gesture's other outcomes, refusals included: each may print
    // what to run next.
    for args in [
        &[
            "retention",
            "hold",
            "-stream",
            STREAM,
            "-seq",
            "4",
            "-ttl",
            "1h",
            "-owner",
            "o",
            "-id",
            "h1",
        ][..],
        &[
            "retention",
            "hold",
            "-stream",
            STREAM,
            "-seq",
            "999",
            "-ttl",
            "1h",
            "-owner",
            "o",
        ][..],
        &["retention", "evict", "node-9", "-confirm", "node-9"][..],
        &["retention", "evict", "node-3", "-confirm", "node-3"][..],
        &["retention", "evict", "node-3", "-confirm", "node-3"][..],
        &["retention", "readmit", "node-1", "-confirm", "node-1"][..],
        &["retention", "readmit", "node-3", "-confirm", "node-3"][..],
        &["retention", "ack", "-stream", STREAM, "-position", "999"][..],
        &["retention", "ack", "-stream", STREAM, "-position", "3"][..],
        &[
            "retention",
            "backup",
            "announce",
            "-node",
            "node-8",
            "-id",
            "b9",
            "-position",
            &format!("{STREAM}=999"),
            "-verified",
        ][..],
        &["retention", "release", "-stream", STREAM, "nope"][..],
        &["retention", "holds"][..],
        &["retention", "snapshots"][..],
    ] {
        let run = op.run(args);
        texts.push(run.stdout + &run.stderr);
    }
    f.recreate_stream().await;
    let run = op.status();
    texts.push(run.stdout + &run.stderr);
    let run = op.run(&["retention", "reanchor", "-stream", STREAM]);
    texts.push(run.stdout + &run.stderr);
    let run = op.run(&[
        "retention",
        "reanchor",
        "-stream",
        STREAM,
        "-confirm",
        "2020-01-01T00:00:00Z",
    ]);
    texts.push(run.stdout + &run.stderr);
    let run = op.run(&["retention", "ack", "-stream", STREAM, "-position", "1"]);
    texts.push(run.stdout + &run.stderr);
    let commands: Vec<String> = texts.iter().flat_map(|t| printed_commands(t)).collect();
    assert!(
        commands.len() >= 7,
        "the scenario prints commands: {commands:#?}\n{}",
        texts.join("\n----\n")
    );
    for c in &commands {
        let argv = c.split_whitespace().map(str::to_string);
        if let Err(e) = crewlet::cli::try_parse(argv) {
            panic!("printed command does not parse: {c}\n{e}");
        }
    }
}

/// Where an eviction cannot land (no gate_subject), or is under way
/// (inside the fence window), status does not tell anyone to evict.
#[tokio::test]
async fn status_names_eviction_only_where_it_can_land() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    // node-3 is away and has applied nothing: the log is not trimmed.
    f.position("node-3", 0).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let ungated = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, allow_unsafe_limits: true, backup_owner: oncall, held_alarm_after: 0s, snapshot_quorum: 1}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}}}]\n",
        f.server.url()
    ));
    let run = ungated.status();
    assert!(
        !run.stdout.contains("retention evict") && !run.stderr.contains("retention evict"),
        "{run:?}"
    );
    assert!(run.stdout.contains("has no gate_subject"), "{run:?}");

    let gated_op = gated(&f, ", held_alarm_after: 0s, snapshot_quorum: 1");
    let run = gated_op.status();
    assert!(
        run.stdout
            .contains("crewlet retention evict node-3 -confirm node-3"),
        "{run:?}"
    );
    let run = gated_op.run(&["retention", "evict", "node-3", "-confirm", "node-3"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = gated_op.status();
    assert!(
        !run.stdout.contains("retention evict node-3"),
        "inside the fence window: {run:?}"
    );
    assert!(run.stdout.contains("its eviction has landed"), "{run:?}");
}

/// Status says when the holder claimed the duty, not when status ran.
#[tokio::test]
async fn status_says_when_the_duty_was_claimed() {
    let f = Fleet::new(5).await;
    let l = Loop::start(&f).await;
    assert!(
        eventually(5, || async {
            f.get("crewlet_duty", "retention").await.is_some()
        })
        .await
    );
    let claimed = f.get("crewlet_duty", "retention").await.expect("lease")["claimed_at"]
        .as_str()
        .expect("claimed_at")
        .to_string();
    let op = gated(&f, "");
    let cfg = op.cfg.clone();
    let run = tokio::task::spawn_blocking(move || {
        crate::support::crewlet(&["retention", "status", "--config", &cfg])
    })
    .await
    .expect("join");
    l.stop().await;
    assert!(
        run.stdout
            .contains(&format!("trim duty: node-1    claimed at {claimed}")),
        "{run:?}"
    );
}

/// A log that cannot be read shows no figures (a 0.00 headroom would read
/// as a full log).
#[tokio::test]
async fn status_shows_no_figures_of_a_log_it_cannot_read() {
    let f = Fleet::new(5).await;
    let op = gated(&f, "");
    f.js.delete_stream(STREAM).await.expect("delete");
    let run = op.status();
    assert!(run.stdout.contains("stream unreadable"), "{run:?}");
    assert!(!run.stdout.contains("headroom_fraction 0.00"), "{run:?}");
}

/// `run --once --json` prints the status JSON of its tick.
#[tokio::test]
async fn run_once_json_prints_its_ticks_status() {
    let f = Fleet::new(5).await;
    f.healthy(&[("node-1", 5)], 5).await;
    let op = gated(&f, "");
    let (run, v) = op.json(&["retention", "run", "--once"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    assert_eq!(v["node"], "node-1", "{run:?}");
    assert_eq!(v["duty_holder"], "node-1", "{v}");
    assert_eq!(v["domains"][0]["stream"], STREAM, "{v}");
    assert_eq!(
        v["domains"][0]["published"]["stream"], STREAM,
        "the row it wrote: {v}"
    );
    assert!(v["alarms"].is_array(), "{v}");
}

/// Connecting as the `nats` CLI does (cli.md, Connecting): the flags,
/// the `NATS_*` variables, a `nats` CLI context by `--context`,
/// `$NATS_CONTEXT` or the selected one, in that order before the file;
/// `status` says which server and which source it used.
#[tokio::test]
async fn connects_with_the_nats_clis_flags_variables_and_contexts() {
    let server = Server::start_with(
        "authorization { users: [ {user: ops, password: \"pw\"} ] }\n",
        "nats",
    );
    let url = server.url();
    let s = Scratch::new();
    // A file that says nothing of the connection, and one that does.
    let bare = s
        .write(
            "bare.yaml",
            "node: {id: node-1}\nretention: {backup_owner: x}\ndomains: [{name: t, stream: T}]\n",
        )
        .to_str()
        .expect("utf-8")
        .to_string();
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let with_nats = s
        .write(
            "nats.yaml",
            &format!("node: {{id: node-1}}\nnats: {{url: \"{dead}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n"),
        )
        .to_str()
        .expect("utf-8")
        .to_string();
    let xdg = s.dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("nats/context")).expect("context dir");
    std::fs::write(
        xdg.join("nats/context/prod.json"),
        format!("{{\"description\": \"production\", \"url\": \"{url}\", \"user\": \"ops\", \"password\": \"stale\", \"token\": \"\", \"jetstream_domain\": \"\"}}"),
    )
    .expect("context");
    let xdg = xdg.to_str().expect("utf-8").to_string();
    let status = |cfg: &str, extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["retention", "status", "--json", "--config", cfg];
        args.extend_from_slice(extra);
        let mut env = env.to_vec();
        env.push(("XDG_CONFIG_HOME", &xdg));
        crewlet_env(&args, &env)
    };
    let source = |run: &crate::support::Run| -> String {
        let v: serde_json::Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("status JSON ({e}): {run:?}"));
        v["server"]["source"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let connected = |run: &crate::support::Run| run.code == 0 || run.code == 1;

    let run = status(&bare, &["-s", &url], &[]);
    assert_eq!(
        run.code, 2,
        "no credentials: refused, configuration: {run:?}"
    );

    let run = status(
        &bare,
        &["-s", &url, "--user", "ops", "--password", "pw"],
        &[],
    );
    assert!(connected(&run), "the flags: {run:?}");
    assert_eq!(source(&run), "--server");

    let run = status(
        &bare,
        &[],
        &[
            ("NATS_URL", &url),
            ("NATS_USER", "ops"),
            ("NATS_PASSWORD", "pw"),
        ],
    );
    assert!(connected(&run), "the variables: {run:?}");
    assert_eq!(source(&run), "$NATS_URL");

    // The context's password is stale: the flag's replaces it, its user stays.
    let run = status(&with_nats, &["--context", "prod"], &[]);
    assert_eq!(
        run.code, 2,
        "the context's stale password is refused: {run:?}"
    );
    let run = status(&with_nats, &["--context", "prod", "--password", "pw"], &[]);
    assert!(connected(&run), "--context before the file's url: {run:?}");
    assert_eq!(source(&run), "nats context prod");
    let run = status(
        &with_nats,
        &["--password", "pw"],
        &[("NATS_CONTEXT", "prod")],
    );
    assert!(connected(&run), "$NATS_CONTEXT: {run:?}");

    // The selected context applies only to a file without a nats: section.
    std::fs::write(
        std::path::Path::new(&xdg).join("nats/context.txt"),
        "prod\n",
    )
    .expect("select");
    let run = status(&bare, &[], &[("NATS_PASSWORD", "pw")]);
    assert!(connected(&run), "the selected context: {run:?}");
    assert_eq!(source(&run), "nats context prod");
    let run = status(&with_nats, &[], &[("NATS_PASSWORD", "pw")]);
    assert_eq!(
        run.code, 3,
        "the file's nats: url, not the selection: {run:?}"
    );

    let run = status(&bare, &["--context", "nope"], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    // With --json the error is the JSON object on stdout.
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
    assert_eq!(v["error"], "usage", "{run:?}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("no such nats context nope")),
        "{run:?}"
    );

    // Text status and validate say it too.
    let run = crewlet_env(
        &[
            "retention",
            "status",
            "--config",
            &bare,
            "-s",
            &url,
            "--user",
            "ops",
            "--password",
            "pw",
        ],
        &[],
    );
    assert!(
        run.stdout
            .contains(&format!("server: {url} (from --server)")),
        "{run:?}"
    );
    let run = crewlet_env(
        &[
            "validate",
            "--config",
            &bare,
            "--user",
            "ops",
            "--password",
            "pw",
        ],
        &[("NATS_URL", &url)],
    );
    assert!(
        run.stdout
            .contains(&format!("server: {url} (from $NATS_URL)")),
        "{run:?}"
    );
}

/// Against a reachable broker, a bucket nodes write that does not exist is
/// a `validate` error naming `crewlet retention init`; the sidecar's own
/// buckets are not.
#[tokio::test]
async fn validate_names_init_for_missing_node_buckets() {
    let server = Server::start();
    let js = server.js().await;
    create_stream(&js, log_stream("T", &["T.>"], 1 << 30)).await;
    let s = Scratch::new();
    let cfg = s
        .write(
            "c.yaml",
            &format!("node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n", server.url()),
        )
        .to_str()
        .expect("utf-8")
        .to_string();
    let run = crewlet_env(&["validate", "--config", &cfg], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    for bucket in ["presence", "positions", "holds", "backups", "snapshots"] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains(&format!("buckets.{bucket}"))
                    && l.contains("crewlet retention init")),
            "{bucket}: {run:?}"
        );
    }
    for own in ["floors", "duty", "gates"] {
        assert!(!run.stdout.contains(&format!("buckets.{own}")), "{run:?}");
    }
    let init = crewlet_env(&["retention", "init", "--config", &cfg], &[]);
    assert_eq!(init.code, 0, "{init:?}");
    let run = crewlet_env(&["validate", "--config", &cfg], &[]);
    assert_eq!(run.code, 0, "after init: {run:?}");
}

/// Completions and the manual come from the clap definitions: the bash
/// script is valid bash and knows the gestures, the manual is roff with a
/// page per command.
#[test]
fn completions_and_manual_pages() {
    let run = crate::support::crewlet(&["completions", "bash"]);
    assert_eq!(run.code, 0, "{run:?}");
    for word in ["retention", "status", "evict", "--context", "--json"] {
        assert!(
            run.stdout.contains(word),
            "{word} missing from the bash completions"
        );
    }
    let s = Scratch::new();
    let script = s.write("crewlet.bash", &run.stdout);
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .expect("bash");
    assert!(syntax.status.success(), "bash -n: {syntax:?}");
    for shell in ["zsh", "fish"] {
        let run = crate::support::crewlet(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {run:?}");
        assert!(run.stdout.contains("retention"), "{shell}: {run:?}");
    }
    let run = crate::support::crewlet(&["completions", "tcsh"]);
    assert_eq!(run.code, 2, "an unknown shell is a usage error: {run:?}");

    let run = crate::support::crewlet(&["man"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(".TH crewlet 1"), "{run:?}");
    assert!(run.stdout.contains("retention"), "{run:?}");
    // An operator's trial: the page names the retention gestures and the exit
    // codes, and its NAME does not repeat the name.
    for want in [
        "crewlet retention evict",
        "crewlet retention hold",
        "crewlet retention set\\-capacity",
        ".SH \"EXIT STATUS\"",
        "unreachable",
    ] {
        assert!(run.stdout.contains(want), "{want}: {}", run.stdout);
    }
    assert!(
        !run.stdout.contains("crewlet \\- crewlet:"),
        "{}",
        run.stdout
    );
    let dir = s.dir.path().join("man1");
    let run = crate::support::crewlet(&["man", "--dir", dir.to_str().expect("utf-8")]);
    assert_eq!(run.code, 0, "{run:?}");
    let status = std::fs::read_to_string(dir.join("crewlet-retention-status.1")).expect("page");
    assert!(
        status.contains(".TH crewlet-retention-status 1"),
        "{status}"
    );
    // Every page another names exists.
    let named = regex::Regex::new(r"(crewlet(?:\\-[a-z]+)*)\(1\)").expect("regex");
    for page in std::fs::read_dir(&dir).expect("dir").flatten() {
        let text = std::fs::read_to_string(page.path()).expect("page");
        for m in named.captures_iter(&text) {
            let file = format!("{}.1", m[1].replace("\\-", "-"));
            assert!(
                dir.join(&file).is_file(),
                "{} names {file}, which is not generated",
                page.path().display()
            );
        }
    }
}

/// `-by` defaults to the OS account's login name, also where `$USER` and
/// `$LOGNAME` are not set (cron, systemd units).
#[tokio::test]
async fn by_defaults_to_the_accounts_login_name() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let yaml = cron_yaml(&f.server.url()).replace(
        "backup_owner: oncall",
        "backup_owner: oncall, backup_floor: operator",
    );
    let op = Operator::with_yaml(&yaml);
    let run = crewlet_env(
        &[
            "retention",
            "ack",
            "-stream",
            STREAM,
            "-position",
            "10",
            "--config",
            &op.cfg,
        ],
        &[("USER", ""), ("LOGNAME", "")],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let id = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id -un");
    let account = String::from_utf8_lossy(&id.stdout).trim().to_string();
    assert!(!account.is_empty());
    let ack = f
        .get("crewlet_backups", &format!("_ack.{STREAM}"))
        .await
        .expect("ack row");
    assert_eq!(ack["by"], account.as_str(), "{ack}");
}

/// The commands a document tells a person to run, as argv: inline code
/// spans and lines of code blocks that start with `crewlet`, and commands
/// inside quoted output. Placeholders are made concrete (`[-x y]` taken,
/// `<what>` a word, `a|b` the first).
fn documented_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            let t = t.strip_prefix("$ ").unwrap_or(t);
            if t.starts_with("crewlet ") {
                out.push(t.split(" #").next().unwrap_or(t).trim().to_string());
            } else {
                out.extend(printed_commands(t));
            }
            continue;
        }
        for span in t.split('`').skip(1).step_by(2) {
            if span.starts_with("crewlet ") {
                out.push(span.to_string());
            }
        }
    }
    out.into_iter()
        .map(|c| {
            let angle = regex::Regex::new(r"<[^>]*>").expect("regex");
            let alternatives = regex::Regex::new(r"(\w+)(\|\w+)+").expect("regex");
            let c = angle.replace_all(&c, "X");
            let c = alternatives.replace_all(&c, "$1");
            // What the shell does with the output is not crewlet's.
            let c = [" >", " |", " &&", " 2>"]
                .iter()
                .fold(c.to_string(), |c, cut| {
                    c.split(cut).next().unwrap_or_default().to_string()
                });
            c.replace(['[', ']'], "").replace('…', "")
        })
        .collect()
}

/// Splits a command line as a shell would for these simple cases (double
/// quotes group words).
fn shell_words(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for ch in cmd.chars() {
        match ch {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Every `crewlet` command the README and the docs tell a person to run
/// exists and parses against the real CLI (the runbook once named
/// `set-capacity`, which does not exist yet).
#[test]
fn every_documented_command_parses() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "md") {
            docs.push(p);
        }
    }
    let mut checked = 0;
    let mut failures = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("doc");
        for cmd in documented_commands(&text) {
            checked += 1;
            let words = shell_words(&cmd);
            // A command named in prose (`crewlet retention hold`) is a
            // reference: it must exist, its arguments are elsewhere.
            let reference = words.iter().all(|w| !w.starts_with('-'));
            if let Err(e) = crewlet::cli::try_parse(words) {
                use clap::error::ErrorKind as K;
                if reference
                    && matches!(
                        e.kind(),
                        K::MissingRequiredArgument | K::DisplayHelpOnMissingArgumentOrSubcommand
                    )
                {
                    continue;
                }
                // `crewlet --version` parses: clap answers it with the version.
                if e.kind() == K::DisplayVersion {
                    continue;
                }
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                failures.push(format!("{}: {cmd}\n    {first}", doc.display()));
            }
        }
    }
    assert!(checked >= 40, "the docs name commands: {checked}");
    assert!(
        failures.is_empty(),
        "documented commands that do not parse:\n{}",
        failures.join("\n")
    );
}
