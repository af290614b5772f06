//! The oldest nats-server release line crewlet supports (2.10, as
//! `scripts/install-test-deps` installs it into `.tools/nats-oldest`): the
//! tick's core works there as on the newest; an older server is refused at
//! connection, naming its version.

use std::time::Duration;

use crate::support::fleet::*;
use crewlet::floor::TermName;

/// nats-server 2.10 does not answer a message get by `start_time` (400,
/// 10003): the age lookup used to be unreadable on every tick, silently
/// never trimming. It is found from sequences and their timestamps there.
#[tokio::test]
async fn on_the_oldest_supported_server_the_age_floor_reads_and_the_trim_runs() {
    let mut f = Fleet::on_oldest(30).await;
    f.config.retention.min_age = crewlet::config::Dur(Duration::from_secs(2));
    f.healthy(&[("node-1", 30)], 30).await;
    tokio::time::sleep(Duration::from_millis(2300)).await;
    // Young records after the old ones.
    f.publish(10).await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert_eq!(
        term_state(&r, TermName::AgeFloor),
        "value 30",
        "{:?}",
        r.domains[0].answer.terms
    );
    assert_eq!(f.first_seq().await, 31, "the old records are trimmed");
}

/// nats-server 2.9 (Debian 12's) lacks what the reads are proven with:
/// `init` used to fail nine times over with "data did not match any
/// variant of untagged enum Response" (exit 3). Every command now refuses
/// it at connection, naming its version and what it needs (exit 2, a
/// configuration to change, not an outage to wait out).
#[tokio::test]
async fn an_unsupported_server_is_refused_at_once_naming_its_version() {
    let server = crate::support::Server::start_unsupported();
    let version = std::process::Command::new(crate::support::unsupported_nats_server_bin())
        .arg("--version")
        .output()
        .expect("nats-server --version");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    assert!(
        version.contains("v2.9."),
        "the test needs a server older than 2.10: {version}"
    );
    let s = crate::support::Scratch::new();
    let cfg = s.write(
        "c.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n",
            server.url()
        ),
    );
    let cfg = cfg.to_str().expect("utf-8");
    for args in [
        vec!["retention", "init", "--config", cfg],
        vec!["retention", "status", "--config", cfg],
        vec!["retention", "run", "--once", "--config", cfg],
        vec!["validate", "--config", cfg],
    ] {
        let run = crate::support::crewlet(&args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains("runs nats-server 2.9.") && said.contains("needs 2.10 or later"),
            "{args:?}: {said}"
        );
        assert!(!said.contains("untagged enum"), "{args:?}: {said}");
        assert_eq!(
            said.matches("does not support").count(),
            1,
            "said once: {said}"
        );
    }
}

/// The previous release (0.1.0, built from its pinned commit by
/// `scripts/install-previous-release`), as a path: built here when missing.
fn previous_release() -> std::path::PathBuf {
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(top.join("scripts/install-previous-release"))
        .output()
        .expect("run scripts/install-previous-release");
    assert!(
        out.status.success(),
        "the previous release could not be built: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    top.join(".tools/previous/bin/crewlet")
}

/// `binary` with `args` and the configuration at `cfg`.
fn run_with(binary: &std::path::Path, cfg: &str, args: &[&str]) -> crate::support::Run {
    let mut cmd = std::process::Command::new(binary);
    cmd.args(args)
        .args(["--config", cfg])
        .env_remove("CREWLET_CONFIG")
        .env("RUST_LOG", "warn");
    crate::support::hermetic(&mut cmd);
    let out = cmd.output().expect("run crewlet");
    crate::support::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A rolling upgrade and a rollback, on the same buckets (docs/upgrading.md):
/// the previous release and this one take the duty in turn, and every pin
/// is kept both ways (node-3, stalled at 182, keeps 183..; after the
/// positions bucket is lost, the previous release's `pins` carry it), with
/// nothing raised but `version_skew` (never `config_drift`: the two
/// configurations differ only in the node id).
#[tokio::test]
async fn the_previous_release_beside_this_one_keeps_every_pin() {
    let previous = previous_release();
    let f = Fleet::new(212).await;
    f.healthy(&[("node-1", 212), ("node-2", 212)], 212).await;
    f.position("node-3", 182).await;
    let yaml = |node: &str| {
        format!(
            "node: {{id: {node}}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, fence_window: 2s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n",
            f.server.url()
        )
    };
    let old = crate::support::Operator::with_yaml(&yaml("node-2"));
    let new = crate::support::Operator::with_yaml(&yaml("node-1"));
    let version = run_with(&previous, &old.cfg, &["--version"]);
    assert!(version.stdout.contains("0.1.0"), "{version:?}");
    let alarms = |run: &crate::support::Run| -> Vec<String> {
        run.stderr
            .lines()
            .filter(|l| l.starts_with("ALARM "))
            .map(str::to_string)
            .collect()
    };

    // Past min_age (1s): only the pins bound the trim.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // The previous release holds the duty: a format-1 row, with pins.
    let run = run_with(&previous, &old.cfg, &["retention", "run", "--once"]);
    assert!(run.code <= 1, "{run:?}");
    assert_eq!(
        f.first_seq().await,
        183,
        "node-3 pins the log at 182: {run:?}"
    );
    let row = f.floors_row().await.expect("row");
    assert!(
        row.get("format").is_none() && row["pins"].is_object(),
        "{row}"
    );
    // This release beside it: version_skew names the older sidecar, and
    // nothing else is raised.
    let run = new.status();
    let raised = alarms(&run);
    assert!(
        raised
            .iter()
            .any(|a| a.starts_with("ALARM version_skew") && a.contains("node-2")),
        "{run:?}"
    );
    assert!(
        raised
            .iter()
            .all(|a| a.starts_with("ALARM version_skew") || a.starts_with("ALARM trim_held")),
        "nothing but version_skew (and the pin itself): {run:?}"
    );

    // This release takes the duty: a format-2 row, the pin kept.
    let run = new.run(&["retention", "run", "--once"]);
    assert!(run.code <= 1, "{run:?}");
    assert_eq!(f.first_seq().await, 183);
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["format"], 2, "{row}");
    // Back to the previous release (a rollback while nothing is carried):
    // it takes the duty, and the pin is kept.
    let run = run_with(&previous, &old.cfg, &["retention", "run", "--once"]);
    assert!(run.code <= 1, "{run:?}");
    assert!(
        !alarms(&run).iter().any(|a| a.contains("config_drift")),
        "{run:?}"
    );
    assert_eq!(f.first_seq().await, 183);

    // The positions bucket is lost while the previous release's row (its
    // pins) is the last word: this release's init names the carried pin,
    // and its tick keeps node-3's records.
    f.js.delete_key_value("crewlet_positions")
        .await
        .expect("delete");
    let run = new.run(&["retention", "init"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("node-3"),
        "init names the carried pin: {run:?}"
    );
    f.position("node-1", 222).await;
    f.position("node-2", 222).await;
    f.publish(10).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for _ in 0..2 {
        let run = new.run(&["retention", "run", "--once"]);
        assert!(run.code <= 1, "{run:?}");
    }
    assert_eq!(
        f.first_seq().await,
        183,
        "the previous release's pins keep their force"
    );
    let (_, status) = new.json(&["retention", "status"]);
    let node3 = status["domains"][0]["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["node"] == "node-3"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(node3["state"], "carried", "{status}");
}
