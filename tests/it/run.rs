//! `crewlet retention run` and `crewlet demo` as processes: exit codes,
//! alarms on stderr, SIGTERM releasing the duty.

use std::process::{Command, Stdio};

use crate::support::fleet::*;
use crate::support::{crewlet, crewlet_env, Scratch};

fn yaml(url: &str) -> String {
    format!(
        "node: {{id: node-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 1s, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
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
    assert!(matches!(r.duty, crewlet::duty::DutyStatus::Held));
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
                .and_then(|a| crewlet::rows::Instant::parse(a).ok())
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
