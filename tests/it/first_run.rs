//! The first five minutes and the 3 a.m. page: what a new user
//! and an on-call operator meet first. Each test failed on the code before
//! its fix.

use std::time::Duration;

use crate::support::fleet::*;
use crate::support::Operator;

fn operator(f: &Fleet, node: &str) -> Operator {
    Operator::with_yaml(&format!(
        "node: {{id: {node}}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n",
        f.server.url()
    ))
}

/// Item 13: `run --once` beside a running fleet, where another sidecar
/// holds the duty, is the normal state of a cron run: exit 0, and one line
/// saying who holds it (it exited 1, saying why only with `-v`).
#[tokio::test]
async fn run_once_beside_a_holder_exits_0_and_says_who_holds_the_duty() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    // The holder: a running sidecar configured alike.
    let holder = operator(&f, "node-1");
    let mut child = holder.spawn(&["retention", "run"], &[("RUST_LOG", "warn")]);
    assert!(
        eventually(10, || async { f.floors_row().await.is_some() }).await,
        "the holder publishes"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let op = operator(&f, "node-2");
    let run = op.run(&["retention", "run", "--once"]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("node-1 holds the trim duty"),
        "one line says who holds it: {run:?}"
    );
}

/// Item 5: `init` exited 0 without saying that a domain's stream was
/// missing, and nothing said how to create one. Both `init` and `validate`
/// print the `nats stream add` command, which creates a log `validate`
/// accepts.
#[tokio::test]
async fn init_names_a_missing_stream_and_the_command_that_creates_it() {
    let f = Fleet::new(0).await;
    f.js.delete_stream(STREAM).await.expect("delete the log");
    let op = operator(&f, "node-1");
    let run = op.run(&["retention", "init"]);
    assert_eq!(run.code, 0, "{run:?}");
    let want = format!(
        "stream {STREAM} does not exist; the trim reads nothing on it until it does: nats stream add {STREAM} --subjects '{STREAM}.>' --subjects crewlet.tracker.gate --storage file --retention limits --discard new --max-bytes 1073741824 --deny-delete --replicas 1 --defaults"
    );
    assert!(run.stderr.contains(&want), "{run:?}");
    let run = op.run(&["validate"]);
    assert!(
        run.stdout.contains("nats stream add CREWLET_TRACKER_LOG"),
        "{run:?}"
    );
}

/// Item 5, over the files: the docs show how to create a domain's log, with
/// the settings `validate` wants.
#[test]
fn the_docs_show_how_to_create_a_log() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/configuration.md")).expect("doc");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("nats stream add "))
        .expect("a nats stream add command in docs/configuration.md");
    for want in [
        "--discard new",
        "--max-bytes 1073741824",
        "--deny-delete",
        "--subjects crewlet.tracker.gate",
    ] {
        assert!(line.contains(want), "{want}: {line}");
    }
}

/// Item 15: `ack -position 0` after `ack -position 130` went backwards
/// silently. A lowering is refused (`would_lower`, exit 1, naming the
/// acknowledgement in force, nothing written) unless `-lower` is given; a
/// raise says what it replaced.
#[tokio::test]
async fn an_ack_never_goes_backwards_unless_asked() {
    let f = Fleet::new(20).await;
    let op = acking_operator(&f);
    let ack = |pos: &str, extra: &[&str]| op.run(&ack_args(pos, extra));
    let run = ack("13", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = ack("15", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("(was 13)"),
        "a raise says what it replaced: {run:?}"
    );
    assert_not_lowered(&f, &ack("0", &[]), 15).await;
    let run = ack("10", &["-lower"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("lowered from 15"), "{run:?}");
    let row = f
        .get("crewlet_backups", &format!("_ack.{STREAM}"))
        .await
        .expect("ack row");
    assert_eq!(row["position"], 10);
}

/// Item 14: `trim --entry` past the tail was clamped silently, the status
/// line said "keep" although the request permits trimming young records,
/// and `--entry abc` said "allowed: 1 to 10000" while 99999 was taken.
#[tokio::test]
async fn trim_says_what_it_clamped_and_what_may_be_trimmed() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let op = operator(&f, "node-1");
    let run = op.run(&[
        "retention",
        "trim",
        "-stream",
        "tracker",
        "--entry",
        "99999",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "requested: records below 21 may be trimmed on {STREAM}"
        )),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("--entry 99999 was clamped to 21"),
        "{run:?}"
    );
    assert!(run.stdout.contains("younger than min_age"), "{run:?}");
    let status = op.status();
    assert!(
        status.stdout.contains("REQUESTED trim below 21"),
        "{status:?}"
    );
    let run = op.run(&["retention", "trim", "-stream", "tracker", "--entry", "abc"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("allowed: a sequence, 1 or more"),
        "{run:?}"
    );
}

/// Item 4: a gesture did not say that a log without `gate_subject` takes
/// no gate record; it now answers for that log too, in text and JSON.
#[tokio::test]
async fn a_gesture_names_the_logs_that_take_no_gate_record() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    f.position("node-4", 5).await;
    let other = crate::support::log_stream("OTHER_LOG", &["other.>"], GIB);
    crate::support::create_stream(&f.js, other).await;
    let op = Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - {{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}\n  - {{name: other, stream: OTHER_LOG}}\n",
        f.server.url()
    ));
    let run = op.run(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("OTHER_LOG") && run.stdout.contains("takes no gate record (domain other has no gate_subject): nothing written, this log keeps counting node-4"),
        "{run:?}"
    );
    let (run, v) = op.json(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["ungated"][0]["stream"], "OTHER_LOG", "{v}");
}

/// Item 18: `hold -seq abc` said "0 or more" while 0 is refused; each flag
/// now says what it allows.
#[tokio::test]
async fn each_sequence_flag_says_what_it_allows() {
    let f = Fleet::new(10).await;
    let op = operator(&f, "node-1");
    let run = op.run(&[
        "retention",
        "hold",
        "-stream",
        STREAM,
        "-seq",
        "abc",
        "-ttl",
        "1h",
        "-owner",
        "me",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("allowed: a whole number, 1 or more"),
        "{run:?}"
    );
    let run = op.run(&[
        "retention",
        "hold",
        "-stream",
        STREAM,
        "-seq",
        "0",
        "-ttl",
        "1h",
        "-owner",
        "me",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
}

/// Item 18: `archive_floor` was listed in `blocked_by` on every archived
/// tick, although the fold only follows the other terms; it is listed only
/// when it binds below them.
#[tokio::test]
async fn archive_floor_blocks_only_when_it_binds_below_the_others() {
    let scratch = tempfile::tempdir().expect("dir");
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 80), ("node-2", 80)], 95).await;
    f.config.domains[0].archive = Some(crewlet::config::ArchiveConfig {
        segment_records: 20,
        segment_bytes: crewlet::config::size::Size(8 << 20),
        fold_per_tick: 4,
        ..crewlet::config::ArchiveConfig::of(&crewlet::archive::fold::Store::Dir(
            scratch.path().join("archive"),
        ))
    });
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(
        a.archive.as_ref().and_then(|x| x.frontier),
        Some(80),
        "folded up to the nodes"
    );
    assert_eq!(
        a.blocked_names(","),
        "applied,snapshot_floor,backup_floor",
        "the archive only follows: {:?}",
        a.terms
    );
    // A fold that cannot keep up binds below the others, and is listed.
    f.publish(100).await;
    f.healthy(&[("node-1", 200), ("node-2", 200)], 200).await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert!(
        a.blocked_names(",").contains("archive_floor"),
        "{:?}",
        a.blocked_by
    );
}

/// Item 1: gestures before the sidecar has ever run failed: with no floors
/// or gates bucket yet, `evict` answered `unknown` and minted an op id
/// whose finish command then failed. The gesture creates the sidecar's own
/// buckets (floors, duty, gates) when they are missing and judges as on a
/// fleet where nothing was published yet.
#[tokio::test]
async fn a_gesture_before_the_first_run_creates_the_sidecars_buckets() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    f.position("node-4", 5).await;
    for bucket in ["crewlet_floors", "crewlet_gates", "crewlet_duty"] {
        f.js.delete_key_value(bucket).await.expect("delete");
    }
    let op = operator(&f, "node-1");
    let (run, v) = op.json(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        matches!(
            v["logs"][0]["outcome"].as_str(),
            Some("applied" | "pending")
        ),
        "{v}"
    );
    for bucket in ["crewlet_floors", "crewlet_gates", "crewlet_duty"] {
        assert!(f.js.get_key_value(bucket).await.is_ok(), "{bucket} created");
    }
}

/// Item 1, the explicit trim: asked before the sidecar ever ran, it creates
/// the floors bucket and is taken (it answered exit 3, as if the broker
/// were gone).
#[tokio::test]
async fn a_trim_before_the_first_run_is_taken() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    f.js.delete_key_value("crewlet_floors")
        .await
        .expect("delete");
    let op = operator(&f, "node-1");
    let run = op.run(&["retention", "trim", "-stream", "tracker", "--entry", "5"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(f
        .get("crewlet_floors", &format!("_requested.{STREAM}"))
        .await
        .is_some());
}

/// Item 3: `status` before the first tick reported the gates view
/// unreadable (`evictions_unreadable: true`) because the gates bucket did
/// not exist yet. Nothing has been absorbed and nothing published: the
/// answer is computed as usual, and nothing is said to be wrong.
#[tokio::test]
async fn status_before_the_first_tick_computes_as_usual() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    for bucket in ["crewlet_floors", "crewlet_gates", "crewlet_duty"] {
        f.js.delete_key_value(bucket).await.expect("delete");
    }
    let op = operator(&f, "node-1");
    let (run, v) = op.json(&["retention", "status"]);
    let d = &v["domains"][0];
    assert_eq!(d["evictions_unreadable"], false, "{run:?}");
    assert!(d["gate_view"]["error"].is_null(), "{}", d["gate_view"]);
    assert!(!run.stderr.contains("gates_unabsorbed"), "{run:?}");
}

/// Item 11: a missing stream or bucket on a broker that answers is exit 1
/// naming `init` or the stream command, never exit 3 (the code cron pages
/// on as "the broker is gone").
#[tokio::test]
async fn a_missing_stream_or_bucket_is_exit_1_not_3() {
    let f = Fleet::new(10).await;
    f.js.delete_stream(STREAM).await.expect("delete the log");
    f.js.delete_key_value("crewlet_holds")
        .await
        .expect("delete holds");
    f.js.delete_key_value("crewlet_snapshots")
        .await
        .expect("delete snapshots");
    let op = operator(&f, "node-1");
    for args in [
        vec![
            "retention",
            "hold",
            "-stream",
            STREAM,
            "-seq",
            "1",
            "-ttl",
            "1h",
            "-owner",
            "me",
        ],
        vec!["retention", "read", "-stream", STREAM, "--from", "1"],
        vec!["retention", "reanchor", "-stream", STREAM],
        vec!["retention", "holds"],
        vec!["retention", "snapshots"],
    ] {
        let run = op.run(&args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert!(
            run.stderr.contains("crewlet retention init") || run.stderr.contains("nats stream add"),
            "{args:?} names what creates it: {run:?}"
        );
    }
}

/// Item 6, before `init`: on a fresh broker (the log there, no bucket yet)
/// `status` said `not_ready … floor_unreadable` and told the operator to
/// reanchor. Nothing was ever published: the answer says what is missing
/// and names `init`, and no row remedy (reanchor, evict, delete) appears.
#[tokio::test]
async fn status_before_init_names_init_and_no_row_remedy() {
    let f = Fleet::new(10).await;
    for bucket in [
        "crewlet_presence",
        "crewlet_positions",
        "crewlet_holds",
        "crewlet_backups",
        "crewlet_snapshots",
        "crewlet_floors",
        "crewlet_gates",
        "crewlet_duty",
    ] {
        f.js.delete_key_value(bucket).await.expect("delete");
    }
    let op = operator(&f, "node-1");
    let (run, v) = op.json(&["retention", "status"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(v["domains"][0]["not_ready"].is_null(), "{v}");
    assert!(run.stderr.contains("crewlet retention init"), "{run:?}");
    for dangerous in ["reanchor", "evict", "delete"] {
        assert!(
            !run.stderr.contains(dangerous),
            "no {dangerous} before init: {run:?}"
        );
    }
}

/// Items 6, 7 and 8: the broker stopped under a running sidecar. The
/// outage is one `broker_unreachable` condition naming the servers and
/// since when, with no row remedy (it raised nine alarms telling the
/// operator to reanchor, evict and delete rows); `/v1/retention` and the
/// read routes answer 503 `unreachable` with `last_answer_at` (it served
/// the last answer as current); `/metrics` says `crewlet_broker_connected
/// 0` and how old its values are. The logs carry no client-library noise,
/// the first connection is not a reconnection, and the first tick of a run
/// over an older floors row raises no `floor_stale`.
#[tokio::test]
async fn an_outage_is_told_as_an_outage() {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 60), ("node-2", 60)], 100).await;
    // A floors row from an earlier run, older than three ticks.
    let run = operator(&f, "node-1").run(&["retention", "run", "--once"]);
    assert!(f.floors_row().await.is_some(), "{run:?}");
    tokio::time::sleep(Duration::from_millis(3500)).await;

    let s = crate::http::Served::start_logging(&f, "", "", None);
    let reader = s.token("grafana", "read");
    assert!(
        eventually(20, || async {
            s.get("/v1/retention", Some(&reader)).0 == 200
        })
        .await,
        "the first tick"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calm = s.logs();
    assert!(!calm.contains("floor_stale"), "{calm}");
    assert!(!calm.contains("broker_reconnected"), "{calm}");
    let (_, metrics) = s.get("/metrics", None);
    assert!(
        metrics.lines().any(|l| l == "crewlet_broker_connected 1"),
        "{metrics}"
    );

    f.server.kill();
    assert!(
        eventually(10, || async {
            s.get("/v1/retention", Some(&reader)).0 == 503
        })
        .await,
        "the last answer is not served as current"
    );
    let (_, body) = s.get("/v1/retention", Some(&reader));
    let v = crate::http::json(&body);
    assert_eq!(v["error"], "unreachable", "{v}");
    let last = v["last_answer_at"].as_str().unwrap_or_default();
    assert!(crewlet::rows::Timestamp::parse(last).is_ok(), "{v}");
    for path in [
        "/v1/streams/tracker/tail".to_string(),
        "/v1/streams/tracker/records?from=1&limit=5".to_string(),
    ] {
        let (code, body) = s.get(&path, Some(&reader));
        let v = crate::http::json(&body);
        assert_eq!(
            (code, v["error"].as_str()),
            (503, Some("unreachable")),
            "{path}: {v}"
        );
    }
    let age = |text: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix("crewlet_answer_age_seconds "))
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0)
    };
    // The 503 above comes from the connection as soon as it is gone; a
    // tick already in flight may still record its answer after it. The
    // age is watched from the tick that told the outage on.
    assert!(
        eventually(20, || async {
            s.logs().contains("ALARM broker_unreachable *")
        })
        .await,
        "a tick told the outage: {}",
        s.logs()
    );
    let (code, first) = s.get("/metrics", None);
    assert_eq!(code, 200, "a scrape still answers");
    assert!(
        first.lines().any(|l| l == "crewlet_broker_connected 0"),
        "{first}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, second) = s.get("/metrics", None);
    assert!(
        age(&second) > age(&first) && age(&first) >= 0.0,
        "the answer's age grows: {} then {}",
        age(&first),
        age(&second)
    );

    // The outage alarm was told above; whatever else is raised meanwhile
    // is what follows.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = s.logs()[calm.len()..].to_string();
    let raised: Vec<&str> = during
        .lines()
        .filter(|l| l.contains("alarm_raised"))
        .collect();
    assert_eq!(raised.len(), 1, "one alarm, not one per term: {raised:#?}");
    assert!(
        raised[0].contains(&f.server.url()) && raised[0].contains("since"),
        "the servers tried and since when: {}",
        raised[0]
    );
    for dangerous in ["reanchor", "evict", "delete"] {
        assert!(
            !during.contains(dangerous),
            "no {dangerous} during an outage: {during}"
        );
    }
    assert!(!during.contains("client error"), "{during}");

    f.server.restart();
    assert!(
        eventually(30, || async {
            s.get("/v1/retention", Some(&reader)).0 == 200
        })
        .await,
        "answers again once the broker is back"
    );
    let logs = s.stop();
    assert!(logs.contains("broker_reconnected"), "{logs}");
    assert!(
        logs.lines()
            .any(|l| l.contains("alarm_cleared") && l.contains("broker_unreachable")),
        "{logs}"
    );
}

/// Item 12: with `--json`, a refusal or an error is one JSON object on
/// stdout (`error`, `message`, `exit`), as `evict --json` already printed;
/// `release`, `ack`, `hold` and the rest printed text on stderr and
/// nothing on stdout. With `--log-format json` it is one JSON line on
/// stderr. Item 11's last case rides along: `backup announce` on a missing
/// stream is exit 1 naming the command that creates it (it was exit 3).
#[tokio::test]
async fn every_refusal_and_error_speaks_json_when_asked() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let op = operator(&f, "node-1");
    let hold = |stream: &'static str| {
        vec![
            "retention",
            "hold",
            "-stream",
            stream,
            "-seq",
            "1",
            "-ttl",
            "1h",
            "-owner",
            "me",
        ]
    };
    let mut cases: Vec<(Vec<&str>, &str, i32)> = vec![
        (
            vec!["retention", "release", "-stream", STREAM, "nope"],
            "no_such_hold",
            1,
        ),
        (
            vec!["retention", "ack", "-stream", STREAM, "-position", "3"],
            "policy_engine",
            1,
        ),
        (hold("NOPE"), "usage", 2),
        (
            vec![
                "retention",
                "reanchor",
                "-stream",
                STREAM,
                "-confirm",
                "2020-01-01T00:00:00Z",
            ],
            "confirm_mismatch",
            1,
        ),
    ];
    for (args, code, exit) in cases.drain(..) {
        let (run, v) = op.json(&args);
        assert_eq!(run.code, exit, "{args:?}: {run:?}");
        assert_eq!(v["error"], code, "{args:?}: {run:?}");
        assert_eq!(v["exit"], exit, "{args:?}: {run:?}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(
            !run.stderr.contains("refused:") && !run.stderr.contains("error:"),
            "said once, as JSON: {run:?}"
        );
        // The same as one JSON line on stderr with --log-format json.
        let mut with_log = args.clone();
        with_log.extend(["--log-format", "json"]);
        let run = op.run(&with_log);
        let line = run.stderr.lines().last().unwrap_or_default();
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: {e}: {run:?}"));
        assert_eq!(v["error"], code, "{run:?}");
        assert_eq!(v["level"], "ERROR", "{run:?}");
    }
    // The missing stream: hold and backup announce alike, exit 1.
    f.js.delete_stream(STREAM).await.expect("delete the log");
    for args in [
        hold(STREAM),
        vec![
            "retention",
            "backup",
            "announce",
            "-node",
            "node-1",
            "-id",
            "b9",
            "-position",
            "CREWLET_TRACKER_LOG=1",
        ],
    ] {
        let (run, v) = op.json(&args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert_eq!(v["error"], "stream_missing", "{args:?}: {run:?}");
        assert!(
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("nats stream add")),
            "{v}"
        );
    }
}

/// Item 18: an HTTP refusal named the CLI's flags (`-confirm`, `-force`),
/// which a client of the routes does not have: it names the body fields.
#[tokio::test]
async fn http_refusals_name_body_fields_not_flags() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10)], 10).await;
    let s = crate::http::Served::start(&f);
    let all = s.token("all", "read,gate,erase,capacity");
    assert!(
        eventually(20, || async { s.get("/v1/retention", Some(&all)).0 == 200 }).await,
        "the first tick"
    );
    let person = format!("{STREAM}.user.1");
    for (path, body, says) in [
        (
            "/v1/nodes/node-9/evict",
            r#"{"confirm": "node-9"}"#.to_string(),
            r#"send "force": true"#,
        ),
        (
            "/v1/nodes/node-9/evict",
            r#"{"confirm": "node-8"}"#.to_string(),
            r#""confirm" "node-8""#,
        ),
        (
            "/v1/streams/tracker/erase",
            format!(r#"{{"subject": "{person}", "confirm": "x", "reason": "r"}}"#),
            r#""confirm" "x""#,
        ),
        (
            "/v1/streams/tracker/capacity",
            r#"{"bytes": "2GiB", "confirm": "3GiB"}"#.to_string(),
            r#""confirm" "3GiB""#,
        ),
    ] {
        let (code, answer) = crate::http::request(s.port, "POST", path, Some(&all), Some(&body));
        let v = crate::http::json(&answer);
        let message = v["message"].as_str().unwrap_or_default();
        assert!(
            (400..500).contains(&code) && message.contains(says),
            "{path} {body}: {code} {v}"
        );
        assert!(
            !message.contains("-confirm") && !message.contains("-force"),
            "{path}: {message}"
        );
    }
    s.stop();
}
