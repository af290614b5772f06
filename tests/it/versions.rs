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
