//! `crewlet retention run` and `crewlet demo` as processes: exit codes,
//! alarms on stderr, SIGTERM releasing the duty.

use std::process::{Command, Stdio};

use crate::support::fleet::*;
use crate::support::{crewlet, crewlet_env, Scratch};

fn yaml(url: &str) -> String {
    format!(
        "node: {{id: node-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    )
}

#[tokio::test]
async fn once_exits_0_when_calm_1_with_alarms_3_when_unreachable() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100)], 100).await;
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&f.server.url()));
    let cfg = cfg.to_str().expect("utf-8");
    let run = crewlet(&["retention", "run", "--once", "--config", cfg]);
    assert_eq!(run.code, 0, "{run:?}");
    let row = f.floors_row().await.expect("published");
    assert_eq!(row["by"], "node-1");
    assert_eq!(
        f.get("crewlet_duty", "retention").await,
        None,
        "--once releases the duty"
    );

    // A missing bucket: the term is unreadable, the alarm is printed, exit 1.
    f.js.delete_key_value("crewlet_holds")
        .await
        .expect("delete");
    let run = crewlet(&["retention", "run", "--once", "--config", cfg]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("ALARM term_unreadable tracker: min_hold is unreadable: bucket crewlet_holds does not exist; run `crewlet retention init` — create the missing bucket: crewlet retention init"), "{run:?}");
    // Printed once: the tick's own alarm_raised log line is not added.
    assert_eq!(
        run.stderr.matches("ALARM term_unreadable").count(),
        1,
        "{run:?}"
    );
    assert!(!run.stderr.contains("alarm_raised"), "{run:?}");

    let dead = s.write(
        "dead.yaml",
        &yaml(&format!("nats://127.0.0.1:{}", crate::support::free_port())),
    );
    let run = crewlet(&[
        "retention",
        "run",
        "--once",
        "--config",
        dead.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot reach the broker at nats://127.0.0.1:"),
        "{run:?}"
    );
}

#[tokio::test]
async fn sigterm_finishes_the_tick_and_releases_the_duty() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&f.server.url()));
    let child = Command::new(env!("CARGO_BIN_EXE_crewlet"))
        .args([
            "retention",
            "run",
            "--config",
            cfg.to_str().expect("utf-8"),
            "--log-format",
            "json",
        ])
        .env_remove("NATS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start run");
    assert!(
        eventually(10, || async {
            f.get("crewlet_duty", "retention").await.is_some()
        })
        .await,
        "the duty was claimed"
    );
    assert!(
        eventually(10, || async { f.floors_row().await.is_some() }).await,
        "a floor was published"
    );
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: signalling a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let status = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    assert_eq!(
        status.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert_eq!(
        f.get("crewlet_duty", "retention").await,
        None,
        "the lease is released for the next holder"
    );
    let log = String::from_utf8_lossy(&status.stderr);
    for event in [
        "\"started\"",
        "\"duty_claimed\"",
        "\"stopping\"",
        "\"duty_released\"",
        "\"stopped\"",
    ] {
        assert!(log.contains(event), "missing {event} in:\n{log}");
    }
    // Another sidecar can claim at once.
    let r = f.sidecar_as("node-2").await.tick().await;
    assert!(matches!(r.duty, crewlet::tick::duty::DutyStatus::Held));
}

#[test]
fn the_demo_tells_its_story() {
    let run = crewlet_env(&["demo", "--ticks", "14"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(
            "status: tracker is trimmed up to 75 and held there: node-3 is not live and pins applied at 75"
        ),
        "{run:?}"
    );
    assert!(run.stdout.contains("moved on to"), "{run:?}");
}

#[tokio::test]
async fn the_loop_survives_the_broker_going_away() {
    let mut f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&f.server.url()));
    let child = Command::new(env!("CARGO_BIN_EXE_crewlet"))
        .args(["retention", "run", "--config", cfg.to_str().expect("utf-8")])
        .env_remove("NATS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start run");
    assert!(eventually(10, || async { f.floors_row().await.is_some() }).await);
    // SIGKILL the broker mid-loop, leave it down for a few ticks, restart it
    // on the same store.
    f.server.kill();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    f.server.restart();
    let js = f.server.js().await;
    let before = std::time::Instant::now();
    let fresh = eventually(30, || {
        let js = js.clone();
        async move {
            let Ok(kv) = js.get_key_value("crewlet_floors").await else {
                return false;
            };
            let Ok(Some(row)) = kv.get(STREAM).await else {
                return false;
            };
            let row: serde_json::Value = serde_json::from_slice(&row).unwrap_or_default();
            row["at"]
                .as_str()
                .and_then(|a| crewlet::rows::Timestamp::parse(a).ok())
                .is_some_and(|at| {
                    chrono::Utc::now().signed_duration_since(at.0) < chrono::Duration::seconds(2)
                })
        }
    })
    .await;
    assert!(
        fresh,
        "the sidecar publishes again after the broker returns ({:?})",
        before.elapsed()
    );
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: signalling a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// `crewlet demo --json`: one JSON object, the tour tick by tick and
/// whether the story happened; the next step it names works from any
/// directory.
#[test]
fn the_demo_speaks_json_and_its_next_step_works_anywhere() {
    let run = crewlet_env(&["demo", "--json"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON object ({e}): {run:?}"));
    assert_eq!(v["ok"], true, "{v}");
    let ticks = v["ticks"].as_array().expect("ticks");
    assert!(ticks.len() >= 14, "{v}");
    assert!(
        ticks.iter().any(|t| t["status"]
            .as_str()
            .is_some_and(|s| s.contains("node-3 is not live"))),
        "{v}"
    );
    let next = v["next"].as_str().expect("a next step");
    for cmd in [
        "crewlet example-config",
        "crewlet validate --config crewlet.yaml",
    ] {
        assert!(next.contains(cmd), "{next}");
        let argv = cmd.split_whitespace().map(str::to_string);
        crewlet::cli::try_parse(argv).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
    // Done as it says, in a directory of its own.
    let s = Scratch::new();
    let example = crate::support::crewlet_at(Some(s.dir.path()), &["example-config"], &[]);
    assert_eq!(example.code, 0, "{example:?}");
    s.write("crewlet.yaml", &example.stdout);
    let validate = crate::support::crewlet_at(
        Some(s.dir.path()),
        &[
            "validate",
            "--config",
            "crewlet.yaml",
            "--server",
            &format!("nats://127.0.0.1:{}", crate::support::free_port()),
        ],
        &[],
    );
    assert_eq!(
        validate.code, 3,
        "a valid file, no broker there: {validate:?}"
    );
    assert!(
        validate.stdout.contains("crewlet.yaml: valid"),
        "{validate:?}"
    );
}

/// The demo's own process hygiene: `| head` ends it quietly, Ctrl-C stops
/// its broker and removes its store at once (exit 130), flags it would
/// ignore are refused, and no banner is printed without a nats-server.
#[test]
fn the_demo_cleans_up_after_a_closed_pipe_and_ctrl_c() {
    use std::io::BufRead;
    let store_of = |pid: u32| std::env::temp_dir().join(format!("crewlet-demo-{pid}"));
    let spawn = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_crewlet"));
        cmd.arg("demo")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG");
        crate::support::hermetic(&mut cmd);
        // Its own process group: a Ctrl-C reaches the demo and its
        // nats-server child alike, as in a terminal.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.spawn().expect("start the demo")
    };
    let wait = |child: &mut std::process::Child| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "the demo did not end");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };

    // `crewlet demo | head -2`
    let mut child = spawn();
    let pid = child.id();
    {
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = std::io::BufReader::new(stdout).lines();
        for _ in 0..2 {
            lines.next().expect("a line").expect("utf-8");
        }
    }
    let status = wait(&mut child);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert_eq!(status.code(), Some(0), "quietly: {status:?} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!store_of(pid).exists(), "the temporary store is removed");

    // Ctrl-C after the first ticks.
    let mut child = spawn();
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    while let Some(Ok(line)) = lines.next() {
        if line.starts_with("tick  2") {
            break;
        }
    }
    let asked = std::time::Instant::now();
    // SAFETY: signalling the process group we just created.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGINT);
    }
    let status = wait(&mut child);
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(3),
        "no hang: {:?}",
        asked.elapsed()
    );
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(!store_of(pid).exists(), "the temporary store is removed");

    let run = crewlet_env(&["demo", "--server", "nats://127.0.0.1:4222"], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--server has no effect"), "{run:?}");

    // A copy of the binary away from the checkout, with no nats-server to
    // find: an error, and not a word of the tour first.
    let s = Scratch::new();
    let lonely = s.dir.path().join("crewlet");
    std::fs::copy(env!("CARGO_BIN_EXE_crewlet"), &lonely).expect("copy the binary");
    let mut cmd = Command::new(&lonely);
    cmd.arg("demo")
        .current_dir(s.dir.path())
        .env("PATH", "/nonexistent")
        .env_remove("CREWLET_NATS_SERVER")
        .env_remove("NATS_SERVER_BIN");
    let out = cmd.output().expect("run the copy");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(out.stdout.is_empty(), "no banner: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no nats-server binary found"),
        "{out:?}"
    );
}

/// Quiet logs: the published answer is logged at INFO when it changes,
/// not on every tick (an hour of a calm fleet was mostly that one line).
#[tokio::test]
async fn an_unchanged_answer_is_not_logged_every_tick() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&f.server.url()));
    let child = crate::support::spawn_run(&cfg, &[]);
    // Some eight ticks: the first answers, the purge once min_age passes,
    // then nothing changes.
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    crate::support::signal(&child, libc::SIGTERM);
    let out = crate::support::finished(child).await;
    let log = &out.stderr;
    assert_eq!(f.first_seq().await, 51, "the fleet was trimmed: {log}");
    let published = log.matches("\"trim_published\"").count();
    assert!(
        (1..=3).contains(&published),
        "{published} trim_published lines in some eight ticks:\n{log}"
    );
}

/// The consumers on the buckets' streams, by stream, that still exist.
async fn consumers_left(f: &Fleet) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (_, bucket) in f.config.buckets.all() {
        let name = format!("KV_{bucket}");
        if let Ok(mut s) = f.js.get_stream(&name).await {
            if let Ok(info) = s.info().await {
                if info.state.consumer_count > 0 {
                    out.push((name, info.state.consumer_count));
                }
            }
        }
    }
    out
}

/// `status` and `run --once` delete every consumer they create before
/// they exit, the views' watchers included: each used to leave an ordered
/// consumer on every bucket, for the broker to drop half a minute later.
#[tokio::test]
async fn status_and_run_once_leave_no_consumer_behind() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&f.server.url()));
    let cfg = cfg.to_str().expect("utf-8");
    assert!(consumers_left(&f).await.is_empty());
    for args in [
        vec!["retention", "status", "--config", cfg],
        vec!["retention", "run", "--once", "--config", cfg],
    ] {
        let run = crewlet(&args);
        assert!(run.code == 0 || run.code == 1, "{args:?}: {run:?}");
        assert_eq!(consumers_left(&f).await, [], "after {args:?}");
    }
}
