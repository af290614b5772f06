//! The example configurations in config/ stay valid: each is validated by
//! the real binary, the reference one against a broker holding its streams.

use std::path::Path;

use crate::support::*;

const GIB: i64 = 1 << 30;

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config")
        .join(name)
        .display()
        .to_string()
}

#[tokio::test]
async fn the_reference_config_validates_against_its_fleet() {
    let server = Server::start();
    let js = server.js().await;
    // The fleet a new user has: one log, no feed consumer yet.
    create_stream(
        &js,
        log_stream("CREWLET_TRACKER_LOG", &["crewlet.tracker.>"], GIB),
    )
    .await;
    // The buckets nodes write come from init; validate checks they exist.
    let args = |cmd: &[&'static str]| {
        let mut a: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        a.extend([
            "--config".into(),
            example("crewlet.reference.yaml"),
            "--nats-url".into(),
            server.url(),
        ]);
        a
    };
    let init = args(&["retention", "init"]);
    let init: Vec<&str> = init.iter().map(String::as_str).collect();
    let run = crewlet(&init);
    assert_eq!(run.code, 0, "{run:?}");
    let validate = args(&["validate"]);
    let validate: Vec<&str> = validate.iter().map(String::as_str).collect();
    let run = crewlet(&validate);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stdout.lines().any(|l| l.starts_with("warning:")),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("valid (1 domain(s), 0 warning(s))"),
        "{run:?}"
    );
}

#[test]
fn every_example_is_valid_offline() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("config/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).expect("read example");
        let checked = crewlet::config::check(&text);
        let errors: Vec<_> = checked
            .problems
            .iter()
            .filter(|p| p.is_error())
            .map(|p| p.render(&path.display().to_string()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }
    assert!(seen >= 2, "config/ holds the reference and the demo config");
    // The demo runs on the embedded broker: validate skips the broker checks.
    let run = crewlet(&["validate", "--config", &example("demo.yaml")]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("broker checks skipped: nats.url is `embedded`"),
        "{run:?}"
    );
}

/// An operator's trial: the reference configuration claims every field with
/// its default; it had no `http:` section and no `nats.embedded_*`, and its
/// sample domains named feed consumers a new fleet does not have.
#[test]
fn the_reference_config_names_every_section_a_new_fleet_needs() {
    let text = crewlet::cli::REFERENCE_CONFIG;
    for field in [
        "\nhttp:",
        "listen:",
        "tokens_file:",
        "embedded_dir:",
        "embedded_port:",
    ] {
        assert!(
            text.contains(field),
            "{field} is missing from the reference configuration"
        );
    }
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("feed_consumer:")),
        "no feed consumer a new fleet lacks"
    );
}

/// The example nodes (docs/examples.md), Python with nats-py and SQLite
/// and JavaScript with the official client, run against this sidecar and
/// a real nats-server while they are killed and restarted, a joiner joins
/// and a node is evicted: a counted node can always fetch what follows
/// its checkpoint, every node ends with the same records, and the trim
/// advanced. A fixed seed: the kill schedule is the same on every run.
#[test]
fn the_example_nodes_keep_the_invariant_under_kills() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(root.join("scripts/check-examples"))
        .args(["--seconds", "40", "--seed", "1"])
        .env("CREWLET_BIN", env!("CARGO_BIN_EXE_crewlet"))
        .output()
        .expect("scripts/check-examples");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the example nodes' check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the summary is not JSON ({e}):\n{stdout}"));
    assert_eq!(summary["ok"], true, "{summary}");
    assert_eq!(summary["violations"], 0, "{summary}");
    assert_eq!(summary["trim_advanced"], true, "{summary}");
    // The nodes read what they need from the sidecar's `_contract`, never
    // from a row the check wrote for them.
    assert_eq!(summary["contract_fallback"], false, "{summary}");
    eprintln!("examples: {summary}");
}
