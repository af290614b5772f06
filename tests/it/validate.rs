//! `crewlet validate` as an operator runs it.

use crate::support::*;

const GIB: i64 = 1 << 30;

#[test]
fn three_mistakes_three_errors_with_lines_and_exit_2() {
    let s = Scratch::new();
    let path = s.write(
        "crewlet.yaml",
        "node:\n  id: node 1\nretention:\n  min_age: 91d\n  backup_owner: oncall\ndomains:\n  - name: tracker\n    stream: CREWLET_TRACKER_LOG\n  - name: tracker\n    stream: CREWLET_PAGES_LOG\n",
    );
    let p = path.to_str().expect("utf-8 path");
    let run = crewlet(&["validate", "--config", p]);
    assert_eq!(run.code, 2, "{run:?}");
    let errors: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 3, "{run:?}");
    assert!(
        errors[0].starts_with(&format!(
            "error: {p}:2: node.id: node id \"node 1\" contains ' '"
        )),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with(&format!(
            "error: {p}:4: retention.min_age: \"91d\" is out of range; allowed: 24h ..= 90d"
        )),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].starts_with(&format!(
            "error: {p}:9: domains[1].name: \"tracker\" is also the name of domains[0]"
        )),
        "{}",
        errors[2]
    );
    assert!(
        run.stdout
            .contains("broker checks skipped: fix the errors above first"),
        "{run:?}"
    );
}

#[test]
fn single_dash_flags_from_runbooks_work() {
    let s = Scratch::new();
    let path = s.write("c.yaml", "node: {id: n1}\nnats: {url: embedded}\nretention: {backup_owner: x}\ndomains: [{name: t, stream: T}]\n");
    let run = crewlet(&["validate", "-config", path.to_str().expect("utf-8")]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("valid (1 domain(s), 0 warning(s))"),
        "{run:?}"
    );
}

#[test]
fn a_missing_file_names_every_path_tried() {
    let s = Scratch::new();
    let run = crewlet_at(Some(s.dir.path()), &["validate"], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "no configuration file found; tried ./crewlet.yaml, /etc/crewlet/crewlet.yaml"
        ),
        "{run:?}"
    );
    let run = crewlet_env(&["validate"], &[("CREWLET_CONFIG", "/nonexistent/c.yaml")]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("no such file: /nonexistent/c.yaml (from $CREWLET_CONFIG)"),
        "{run:?}"
    );
    // ./crewlet.yaml is found in the working directory.
    s.write("crewlet.yaml", "node: {id: n1}\nnats: {url: embedded}\nretention: {backup_owner: x}\ndomains: [{name: t, stream: T}]\n");
    let run = crewlet_at(Some(s.dir.path()), &["validate"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("crewlet.yaml: valid"), "{run:?}");
}

#[test]
fn an_unreachable_broker_exits_3_after_the_offline_checks() {
    let port = free_port();
    let s = Scratch::new();
    let url = format!("nats://127.0.0.1:{port}");
    let path = s.write("c.yaml", &basic_config(&url, "T", ""));
    let run = crewlet(&["validate", "--config", path.to_str().expect("utf-8")]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "broker checks skipped: cannot reach the broker at {url}"
        )),
        "{run:?}"
    );

    // An offline error still exits 2 whatever the broker.
    let bad = s.write("bad.yaml", &basic_config(&url, "T.X", ""));
    let run = crewlet(&["validate", "--config", bad.to_str().expect("utf-8")]);
    assert_eq!(run.code, 2, "{run:?}");
}

#[tokio::test]
async fn stream_settings_are_checked_against_the_broker() {
    let server = Server::start();
    let js = server.js().await;
    // A good log, a log that sheds (discard: old, max_age), and none at all.
    create_stream(&js, log_stream("GOOD", &["good.>"], GIB)).await;
    let mut shedding = log_stream("SHEDS", &["sheds.>"], GIB);
    shedding.discard = async_nats::jetstream::stream::DiscardPolicy::Old;
    shedding.max_age = std::time::Duration::from_secs(3600);
    create_stream(&js, shedding).await;
    create_stream(&js, log_stream("SMALL", &["small.>"], 1 << 20)).await;
    create_consumer(&js, "GOOD", "good-feed").await;

    let s = Scratch::new();
    let text = format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - name: good\n    stream: GOOD\n    gate_subject: good.gate\n    feed_consumer: good-feed\n  - name: sheds\n    stream: SHEDS\n    gate_subject: elsewhere.gate\n  - name: small\n    stream: SMALL\n    feed_consumer: nobody\n  - name: gone\n    stream: GONE\n",
        server.url()
    );
    let path = s.write("c.yaml", &text);
    let p = path.to_str().expect("utf-8");
    let run = crewlet(&["validate", "--config", p]);
    assert_eq!(run.code, 2, "{run:?}");
    let out = &run.stdout;
    assert!(
        !out.contains("domains[0]"),
        "the good domain is clean: {run:?}"
    );
    assert!(out.contains(&format!("error: {p}:11: domains[1].gate_subject: \"elsewhere.gate\" is not matched by any subject of stream SHEDS")), "{run:?}");
    assert!(
        out.contains(&format!(
            "error: {p}:10: domains[1].stream: stream SHEDS has discard: old"
        )),
        "{run:?}"
    );
    assert!(out.contains(&format!("error: {p}:10: domains[1].stream: broker_retention_bypass: stream SHEDS's own limits can delete records the floor protects (max_age = 3600s, max_bytes with discard: old = 1073741824)")), "{run:?}");
    assert!(out.contains(&format!("error: {p}:13: domains[2].stream: stream SMALL has max_bytes 1048576; allowed: at least 1073741824 (1 GiB)")), "{run:?}");
    assert!(out.contains(&format!("error: {p}:14: domains[2].feed_consumer: consumer \"nobody\" does not exist on stream SMALL")), "{run:?}");
    assert!(
        out.contains(&format!(
            "error: {p}:16: domains[3].stream: stream GONE does not exist on the broker at {}",
            server.url()
        )),
        "{run:?}"
    );

    // The same as JSON, for scripts.
    let run = crewlet(&["validate", "--config", p, "--json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    assert_eq!(v["broker_checked"], true);
    let codes: Vec<&str> = v["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(|p| p["code"].as_str())
        .collect();
    assert_eq!(codes, ["broker_retention_bypass"]);
}

#[tokio::test]
async fn a_good_fleet_validates_clean_and_warnings_alone_exit_0() {
    let server = Server::start();
    let js = server.js().await;
    create_stream(&js, log_stream("GOOD", &["good.>"], GIB)).await;
    let s = Scratch::new();
    let path = s.write(
        "c.yaml",
        &format!("node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_floor: operator}}\ndomains: [{{name: good, stream: GOOD, gate_subject: good.gate}}]\n", server.url()),
    );
    let init = crewlet(&[
        "retention",
        "init",
        "--config",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(init.code, 0, "{init:?}");
    let run = crewlet(&["validate", "--config", path.to_str().expect("utf-8")]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("warning: "))
            .count(),
        2,
        "backup_owner unset, operator policy: {run:?}"
    );
}

/// `validate` reports every problem in one pass, a type error in one field
/// not hiding one in the next field of the same section; durations refuse
/// months and years and take weeks; errors quote what the file says and
/// speak of kinds, not Rust types; a `--config` that is not there says so.
#[test]
fn one_pass_honest_durations_and_plain_words() {
    let s = Scratch::new();
    let path = s.write(
        "c.yaml",
        "node: {id: node-1, duty: maybe}\nnats: {url: embedded}\nretention:\n  tick: 1M\n  min_age: 2400h\n  snapshots_kept: -3\n  snapshot_quorum: lots\n  backup_max_age: 1y\n  fence_window: 1w\n  backup_owner: x\ndomains: [{name: t, stream: T}]\n",
    );
    let run = crewlet(&["validate", "--config", path.to_str().expect("utf-8")]);
    assert_eq!(run.code, 2, "{run:?}");
    let line = |field: &str| -> String {
        run.stdout
            .lines()
            .find(|l| l.contains(&format!(" {field}: ")))
            .unwrap_or_else(|| panic!("no line for {field}: {run:?}"))
            .to_string()
    };
    assert!(
        line("node.duty").contains("is not true or false"),
        "{run:?}"
    );
    assert!(
        line("retention.tick").contains("\"1M\" is not a duration: months and years are refused"),
        "{run:?}"
    );
    assert!(
        line("retention.backup_max_age").contains("\"1y\""),
        "{run:?}"
    );
    assert!(
        line("retention.min_age").contains("\"2400h\" is out of range"),
        "{run:?}"
    );
    assert!(
        line("retention.snapshots_kept").contains("is not a whole number"),
        "{run:?}"
    );
    assert!(
        line("retention.snapshot_quorum").contains("\"lots\" is not a whole number"),
        "{run:?}"
    );
    // 1w is a week: taken, and out of fence_window's range (10s ..= 1h).
    assert!(
        line("retention.fence_window").contains("\"1w\" is out of range"),
        "{run:?}"
    );
    for rust in ["u32", "u64", "usize", "bool", "struct"] {
        assert!(
            !run.stdout
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w == rust),
            "a Rust type ({rust}) in: {run:?}"
        );
    }

    let run = crewlet(&["validate", "--config", "/nonexistent/crewlet.yaml"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("no such file: /nonexistent/crewlet.yaml"),
        "{run:?}"
    );
}

/// A tick that does not fit the duty bucket's lease is found by
/// `validate` when the broker answers: a 10 s tick beside a bucket whose
/// `max_age` is 6 s would never purge (its fences grant nothing).
#[tokio::test]
async fn a_tick_longer_than_the_duty_buckets_lease_allows_is_an_error() {
    let f = crate::support::fleet::Fleet::new(1).await;
    // The fleet's buckets were made for a 1 s tick: the lease lives 3 s.
    let s = crate::support::Scratch::new();
    let cfg = s.write(
        "c.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 10s, backup_owner: x}}\ndomains: [{{name: tracker, stream: {}}}]\n",
            f.server.url(),
            crate::support::fleet::STREAM
        ),
    );
    let run = crate::support::crewlet(&["validate", "--config", cfg.to_str().expect("utf-8")]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("retention.tick: the duty bucket crewlet_duty keeps the lease for 3s (max_age), less than three of this configuration's ticks (30s)")
            && run.stdout.contains("nats stream edit KV_crewlet_duty --max-age 30s"),
        "{run:?}"
    );
}

/// A presence bucket a node's client created without a TTL (its usual
/// create-or-open) keeps a crashed node live for ever: `validate` says so,
/// and `status` raises `config_drift` with the command that mends it.
#[tokio::test]
async fn a_presence_bucket_without_a_ttl_is_an_error_and_an_alarm_in_status() {
    let server = Server::start();
    let js = server.js().await;
    create_bucket(&js, "crewlet_presence", std::time::Duration::ZERO).await;
    let s = Scratch::new();
    let cfg = s.write(
        "c.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n",
            server.url()
        ),
    );
    let run = crewlet(&["validate", "--config", cfg.to_str().expect("utf-8")]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout
            .contains("buckets.presence: bucket crewlet_presence has no TTL"),
        "{run:?}"
    );
    let status = crewlet(&[
        "retention",
        "status",
        "--config",
        cfg.to_str().expect("utf-8"),
    ]);
    assert_eq!(status.code, 1, "{status:?}");
    assert!(
        status
            .stderr
            .lines()
            .any(|l| l.starts_with("ALARM config_drift")
                && l.contains("crewlet_presence has no TTL")
                && l.contains("nats stream edit KV_crewlet_presence --max-age 30s")),
        "{status:?}"
    );
}
