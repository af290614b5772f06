//! Safety by construction (issue 21): one test per leak found by the second
//! review of the purge path. Each one failed on the code before its fix: a
//! purge could go out past what something still needed, or a guard was
//! skipped on a path that forgot it.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fleet::*;
use crate::support::{create_stream, log_stream, Operator};

const GATE: &str = "crewlet.tracker.gate";

/// Leak 9: `allow_rollup_hdrs: true` lets one publish delete every earlier
/// record (or a subject's), and a `max_age` under a second was read as 0:
/// neither was a `broker_retention_bypass`.
#[tokio::test]
async fn leak_9_rollups_and_a_sub_second_max_age_are_bypasses() {
    let f = Fleet::new(0).await;
    let mut rollup = log_stream("ROLLUP_LOG", &["rollup.>"], GIB);
    rollup.allow_rollup = true;
    let mut quick = log_stream("QUICK_LOG", &["quick.>"], GIB);
    quick.max_age = Duration::from_millis(500);
    for c in [rollup, quick] {
        create_stream(&f.js, c).await;
    }
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - {{name: rollup, stream: ROLLUP_LOG}}\n  - {{name: quick, stream: QUICK_LOG}}\n",
        f.server.url()
    ));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    for want in [
        "domains[0].stream: broker_retention_bypass: stream ROLLUP_LOG's own limits can delete records the floor protects (allow_rollup_hdrs = true)",
        "--no-allow-rollup",
        "domains[1].stream: broker_retention_bypass: stream QUICK_LOG's own limits can delete records the floor protects (max_age = 500ms)",
    ] {
        assert!(run.stdout.contains(want), "{want}: {run:?}");
    }
    let run = op.status();
    let bypass: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("ALARM broker_retention_bypass"))
        .collect();
    assert_eq!(bypass.len(), 2, "{run:?}");
}
