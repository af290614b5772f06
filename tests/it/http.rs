//! The HTTP surface (http.md) of a real `crewlet retention run` against a
//! real nats-server: metrics, health, the JSON API, tokens and scopes.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::fleet::*;
use crate::support::{crewlet, free_port, Scratch};

/// One request over a fresh connection: (status, body).
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes()).expect("write");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}

/// A running sidecar serving HTTP, with its configuration and tokens file.
pub struct Served {
    pub child: Child,
    /// Everything it logs, drained as it comes (a full pipe would stop it).
    logs: std::sync::Arc<std::sync::Mutex<String>>,
    pub port: u16,
    pub cfg: String,
    pub tokens: std::path::PathBuf,
    _scratch: Scratch,
}

impl Served {
    pub fn start(f: &Fleet) -> Served {
        Self::start_with(f, "")
    }

    /// As [`Served::start`], with more `retention:` fields (`, k: v`).
    pub fn start_with(f: &Fleet, retention: &str) -> Served {
        Self::start_full(f, retention, "")
    }

    /// As [`Served::start_with`], with more fields for the domain.
    pub fn start_full(f: &Fleet, retention: &str, domain: &str) -> Served {
        Self::start_logging(f, retention, domain, Some("debug"))
    }

    /// As [`Served::start_full`], logging at `rust_log` (`None`: the
    /// binary's own default, what an operator sees).
    pub fn start_logging(
        f: &Fleet,
        retention: &str,
        domain: &str,
        rust_log: Option<&str>,
    ) -> Served {
        let scratch = Scratch::new();
        let port = free_port();
        let tokens = scratch.dir.path().join("tokens.yaml");
        let cfg = scratch.write(
            "crewlet.yaml",
            &format!(
                "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall, alarm_grace: 0s{retention}}}\ntrim: {{enabled: true}}\nhttp: {{listen: \"127.0.0.1:{port}\", tokens_file: {}}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate{domain}}}]\n",
                f.url(),
                tokens.display()
            ),
        );
        let cfg = cfg.to_str().expect("utf-8").to_string();
        let mut command = Command::new(env!("CARGO_BIN_EXE_crewlet"));
        command
            .args(["retention", "run", "--config", &cfg])
            .env_remove("NATS_URL")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(level) = rust_log {
            command.env("RUST_LOG", level);
        }
        let mut child = command.spawn().expect("crewlet");
        let logs = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        if let Some(mut err) = child.stderr.take() {
            let sink = logs.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut l) = sink.lock() {
                        l.push_str(&String::from_utf8_lossy(&buf[..n]));
                    }
                }
            });
        }
        let mut served = Served {
            child,
            logs,
            port,
            cfg,
            tokens,
            _scratch: scratch,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            // A sidecar that exited (its port taken, a broker it gave up
            // on) is said with what it logged, not as a refused request
            // later.
            if let Ok(Some(status)) = served.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "the sidecar exited ({status}) before it listened on {port}: {}",
                    served.logs()
                );
            }
            if crate::support::listening(port) {
                return served;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the sidecar never listened on {port}: {}", served.logs());
    }

    /// `crewlet token add NAME --scopes SCOPES`: the token it printed.
    pub fn token(&self, name: &str, scopes: &str) -> String {
        let run = crewlet(&[
            "token", "add", name, "--scopes", scopes, "--config", &self.cfg,
        ]);
        assert_eq!(run.code, 0, "{run:?}");
        run.stdout.trim().to_string()
    }

    pub fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        request(self.port, "GET", path, token, None)
    }

    /// Everything it logged so far.
    pub fn logs(&self) -> String {
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// SIGTERM, then everything it logged.
    pub fn stop(mut self) -> String {
        let pid = i32::try_from(self.child.id()).expect("pid");
        // SAFETY: signalling a child we spawned and have not reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(100));
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

#[tokio::test]
async fn metrics_health_the_answer_and_tail_with_tokens_and_scopes() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 60), ("node-2", 60)], 100).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Served::start(&f);
    let reader = s.token("grafana", "read");
    let trimmer = s.token("ops", "trim");
    // Without a token: health, readiness and metrics only.
    assert_eq!(s.get("/healthz", None), (200, "ok\n".to_string()));
    assert!(
        eventually(20, || async { s.get("/readyz", None).0 == 200 }).await,
        "ready once connected"
    );
    assert!(
        eventually(20, || async {
            s.get("/metrics", None).1.contains("crewlet_trim_to{")
        })
        .await,
        "metrics after the first tick: {}",
        s.get("/metrics", None).1
    );
    let d = format!("domain=\"tracker\",stream=\"{STREAM}\"");
    // The values of the last tick: the one after the purge reads the log
    // from 61.
    let after_purge = format!("crewlet_first_seq{{{d}}} 61");
    assert!(
        eventually(20, || async {
            s.get("/metrics", None).1.lines().any(|l| l == after_purge)
        })
        .await,
        "the tick after the purge"
    );
    let (code, text) = s.get("/metrics", None);
    assert_eq!(code, 200);
    for want in [
        format!("crewlet_trim_to{{{d}}} 60"),
        format!("crewlet_first_seq{{{d}}} 61"),
        format!("crewlet_last_seq{{{d}}} 100"),
        format!("crewlet_term_seq{{{d},term=\"applied\"}} 60"),
        format!("crewlet_term_state{{{d},term=\"archive_floor\",state=\"n/a\"}} 1"),
        "crewlet_duty_held 1".to_string(),
        "crewlet_purged_records_total 60".to_string(),
    ] {
        assert!(text.lines().any(|l| l == want), "{want} not in\n{text}");
    }
    assert!(
        text.contains("crewlet_tick_duration_seconds_bucket"),
        "{text}"
    );
    // The answer needs a token with the read scope.
    let (code, body) = s.get("/v1/retention", None);
    assert_eq!(code, 401, "{body}");
    assert_eq!(json(&body)["error"], "unauthorized");
    let (code, body) = s.get("/v1/retention", Some("not-a-token"));
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (401, Some("unauthorized"))
    );
    let (code, body) = s.get("/v1/retention", Some(&trimmer));
    assert_eq!(code, 403, "trim does not imply read: {body}");
    assert_eq!(json(&body)["error"], "forbidden");
    assert!(!body.contains(&trimmer), "never echoed");
    let (code, body) = s.get("/v1/retention", Some(&reader));
    assert_eq!(code, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["domains"][0]["stream"], STREAM);
    assert_eq!(v["domains"][0]["trim_to"], 60);
    assert_eq!(v["duty_holder"], "node-1");
    // The tail, by stream or domain name; an unknown one is 404.
    for name in ["tracker", STREAM] {
        let (code, body) = s.get(&format!("/v1/streams/{name}/tail"), Some(&reader));
        assert_eq!(code, 200, "{body}");
        let v = json(&body);
        assert_eq!(v["next_seq"], 101);
        let ms = v["timestamp_ms"].as_i64().expect("ms");
        let now = chrono::Utc::now().timestamp_millis();
        assert!(ms > now - 120_000 && ms <= now + 5_000, "{ms} vs {now}");
    }
    let (code, body) = s.get("/v1/streams/NOPE/tail", Some(&reader));
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (404, Some("unknown_stream")),
        "{body}"
    );
    assert!(body.contains("tracker"), "names the configured: {body}");
    // The CLI says the same.
    let run = crewlet(&[
        "retention",
        "tail",
        "-stream",
        "tracker",
        "--json",
        "--config",
        &s.cfg,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(json(&run.stdout)["next_seq"], 101);
    // token list shows names and scopes, never a token.
    let run = crewlet(&["token", "list", "--config", &s.cfg]);
    assert!(
        run.stdout.contains("grafana") && run.stdout.contains("read") && run.stdout.contains("ops"),
        "{run:?}"
    );
    assert!(!run.stdout.contains(&reader) && !run.stdout.contains(&trimmer));
    let file = std::fs::read_to_string(&s.tokens).expect("tokens file");
    assert!(!file.contains(&reader), "only the hash is stored");
    // Revoked: refused from the next request on, without a restart.
    let run = crewlet(&["token", "revoke", "grafana", "--config", &s.cfg]);
    assert_eq!(run.code, 0, "{run:?}");
    let (code, _) = s.get("/v1/retention", Some(&reader));
    assert_eq!(code, 401);
    // Everything trimmed away: the tail's time is 0.
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    let reader = s.token("grafana2", "read");
    assert!(
        eventually(20, || async {
            json(&s.get("/v1/streams/tracker/tail", Some(&reader)).1)["timestamp_ms"] == 0
        })
        .await,
        "the whole history trimmed: timestamp_ms 0"
    );
    let logs = s.stop();
    for t in [&reader, &trimmer] {
        assert!(!logs.contains(t.as_str()), "a token in the logs");
    }
}

#[tokio::test]
async fn token_commands_refuse_bad_input_and_write_nothing() {
    let s = Scratch::new();
    let file = s.dir.path().join("tokens.yaml");
    let file = file.to_str().expect("utf-8");
    for (args, says) in [
        (
            vec!["token", "add", "a b", "--scopes", "read"],
            "token name",
        ),
        (vec!["token", "add", "ops", "--scopes", "read,root"], "root"),
        (vec!["token", "revoke", "nobody"], "no token named"),
    ] {
        let mut all = args.clone();
        all.extend(["--file", file]);
        let run = crewlet(&all);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(says), "{args:?}: {run:?}");
    }
    assert!(!std::path::Path::new(file).exists(), "nothing written");
    let run = crewlet(&["token", "add", "ops", "--scopes", "read", "--file", file]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = crewlet(&["token", "add", "ops", "--scopes", "trim", "--file", file]);
    assert_eq!(run.code, 2, "a second ops: {run:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(file).expect("meta").permissions(),
    );
    assert_eq!(mode & 0o077, 0, "owner only: {mode:o}");
}

/// The explicit trim (http.md): a requested watermark that only moves
/// forward, applied by the next tick younger than `min_age` but never past
/// a node, a hold or the tail as it was when asked; from the CLI and from
/// `POST …/trim`, with every bad input refused and nothing written.
#[tokio::test]
async fn an_explicit_trim_passes_min_age_and_nothing_else() {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
    // Every record is younger than min_age: nothing goes on its own.
    f.config.retention.min_age = crewlet::config::Dur::hours(1);
    let mut sidecar = f.sidecar().await;
    let r = sidecar.tick().await;
    assert_eq!(r.domains[0].answer.trim_to, 0, "min_age holds everything");
    let op = crate::support::Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall, min_age: 1h, snapshot_interval: 10m, allow_unsafe_limits: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n",
        f.url()
    ));
    let (run, v) = op.json(&[
        "retention",
        "trim",
        "-stream",
        "tracker",
        "--entry",
        "31",
        "--reason",
        "incident 42",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(v["requested"], 31);
    assert_eq!(v["applied_at_next_tick"], 30);
    assert_eq!(v["bounded_by"], "requested");
    let r = sidecar.tick().await;
    assert_eq!(
        r.domains[0].answer.trim_to, 30,
        "{:?}",
        r.domains[0].answer.terms
    );
    assert_eq!(f.first_seq().await, 31, "younger than min_age, as asked");
    let status = op.status();
    assert!(
        // After the purge nothing more is asked for: what binds now is
        // the age of the records that are left.
        status.stdout.contains("REQUESTED trim below 31")
            && status.stdout.contains("trim_to 30 is bounded by age_floor"),
        "{status:?}"
    );
    let row = f
        .get("crewlet_floors", &format!("_requested.{STREAM}"))
        .await
        .expect("row");
    assert_eq!(row["seq"], 31);
    assert_eq!(row["reason"], "incident 42");
    assert!(row["by"].is_string() && row["at"].is_string(), "{row}");
    // Never past a node: asking for everything stops at applied (90).
    let (_, v) = op.json(&["retention", "trim", "-stream", "tracker", "--entry", "99"]);
    assert_eq!(
        (v["applied_at_next_tick"].as_u64(), v["bounded_by"].as_str()),
        (Some(90), Some("applied")),
        "{v}"
    );
    // A hold placed since bounds it too.
    f.hold("investigation", 61, 600).await;
    sidecar.tick().await;
    assert_eq!(f.first_seq().await, 61, "the hold at 61 keeps 61 on");
    f.delete("crewlet_holds", &format!("{STREAM}.investigation"))
        .await;
    sidecar.tick().await;
    assert_eq!(f.first_seq().await, 91);
    // Only forward: a lower request is a no-op success.
    let (run, v) = op.json(&["retention", "trim", "-stream", "tracker", "--entry", "10"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        (v["requested"].as_u64(), v["unchanged"].as_bool()),
        (Some(99), Some(true))
    );
    // Past the tail: clamped to last_seq + 1 now; records appended later stay.
    let (_, v) = op.json(&[
        "retention",
        "trim",
        "-stream",
        "tracker",
        "--entry",
        "100000",
    ]);
    assert_eq!(v["requested"], 101, "{v}");
    f.publish(20).await;
    f.healthy(&[("node-1", 120), ("node-2", 120)], 120).await;
    sidecar.tick().await;
    assert_eq!(
        f.first_seq().await,
        101,
        "the 20 appended after the request are kept"
    );
    // --at: everything stamped before the instant.
    let at = crewlet::rows::Timestamp(chrono::Utc::now()).to_rfc3339();
    tokio::time::sleep(Duration::from_millis(50)).await;
    f.publish(5).await;
    let (run, v) = op.json(&["retention", "trim", "-stream", "tracker", "--at", &at]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        v["requested"], 121,
        "the first record stamped at or after it: {v}"
    );
    // Bad input: nothing written.
    let before = f
        .get("crewlet_floors", &format!("_requested.{STREAM}"))
        .await;
    let future =
        crewlet::rows::Timestamp(chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    for (args, says) in [
        (vec!["--entry", "0"], "start at 1"),
        (vec!["--entry", "-5"], "-5"),
        (vec!["--entry", "x"], "whole number"),
        (vec!["--at", "yesterday"], "RFC 3339"),
        (vec!["--at", &future], "future"),
        (vec![], "--entry"),
        (vec!["--entry", "5", "--at", &at], "cannot be used"),
    ] {
        let mut all = vec!["retention", "trim", "-stream", "tracker"];
        all.extend(args.iter());
        let run = op.run(&all);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(says), "{args:?}: {run:?}");
    }
    assert_eq!(
        f.get("crewlet_floors", &format!("_requested.{STREAM}"))
            .await,
        before
    );
}

#[tokio::test]
async fn the_trim_route_needs_the_trim_scope_and_refuses_bad_bodies() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 40), ("node-2", 40)], 50).await;
    // Older than the sidecar's min_age (3 s): the nodes bind, not age.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Served::start(&f);
    let reader = s.token("grafana", "read,gate,ack,capacity,erase");
    let trimmer = s.token("ops", "trim");
    let post = |token: Option<&str>, path: &str, body: &str| {
        request(s.port, "POST", path, token, Some(body))
    };
    let path = "/v1/streams/tracker/trim";
    assert_eq!(post(None, path, r#"{"seq_num": 10}"#).0, 401);
    let (code, body) = post(Some(&reader), path, r#"{"seq_num": 10}"#);
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (403, Some("forbidden")),
        "trim is never implied: {body}"
    );
    let future = chrono::Utc::now().timestamp_millis() + 3_600_000;
    for bad in [
        "not json".to_string(),
        r#"{"seq_num": -1}"#.to_string(),
        r#"{"seq_num": 0}"#.to_string(),
        r#"{"seq_num": 1.5}"#.to_string(),
        r#"{"seq_num": 99999999999999999999999}"#.to_string(),
        r#"{"seq_num": 10, "timestamp_ms": 5}"#.to_string(),
        r#"{}"#.to_string(),
        r#"{"seq_num": 10, "force": true}"#.to_string(),
        format!(r#"{{"timestamp_ms": {future}}}"#),
    ] {
        let (code, body) = post(Some(&trimmer), path, &bad);
        assert_eq!(
            (code, json(&body)["error"].as_str()),
            (400, Some("bad_request")),
            "{bad}: {body}"
        );
    }
    assert!(
        f.get("crewlet_floors", &format!("_requested.{STREAM}"))
            .await
            .is_none(),
        "nothing written"
    );
    let (code, body) = post(
        Some(&trimmer),
        "/v1/streams/NOPE/trim",
        r#"{"seq_num": 10}"#,
    );
    assert_eq!(code, 404, "{body}");
    let big = format!(r#"{{"seq_num": 10, "reason": "{}"}}"#, "x".repeat(100_000));
    assert_eq!(post(Some(&trimmer), path, &big).0, 413, "an oversized body");
    let (code, body) = post(Some(&trimmer), path, r#"{"seq_num": 21, "reason": "tidy"}"#);
    assert_eq!(code, 200, "{body}");
    let v = json(&body);
    assert_eq!(
        (
            v["requested"].as_u64(),
            v["applied_at_next_tick"].as_u64(),
            v["bounded_by"].as_str()
        ),
        (Some(21), Some(40), Some("applied")),
        "trim_to was already 40: {v}"
    );
    let row = f
        .get("crewlet_floors", &format!("_requested.{STREAM}"))
        .await
        .expect("row");
    assert_eq!(row["by"], "token:ops");
    s.stop();
}

#[tokio::test]
async fn the_records_route_reads_what_is_readable_and_says_trimmed_below_it() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 40), ("node-2", 40)], 100).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Served::start(&f);
    let reader = s.token("grafana", "read");
    assert!(
        eventually(20, || async { f.first_seq().await == 41 }).await,
        "the sidecar trims to 40"
    );
    let get = |q: &str| s.get(&format!("/v1/streams/tracker/records{q}"), Some(&reader));
    let (code, body) = get("?from=50&limit=3");
    assert_eq!(code, 200, "{body}");
    let v = json(&body);
    let seqs: Vec<u64> = v["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter_map(|r| r["seq"].as_u64())
        .collect();
    assert_eq!(seqs, [50, 51, 52]);
    assert_eq!(v["next"], 53);
    assert_eq!(v["records"][0]["source"], "log");
    let (code, body) = get("?from=5");
    assert_eq!(code, 410, "{body}");
    assert_eq!(
        (
            json(&body)["error"].as_str(),
            json(&body)["first_readable"].as_u64()
        ),
        (Some("trimmed"), Some(41))
    );
    let (code, body) = get("?from=5&clamp=true&limit=2");
    assert_eq!(code, 200, "{body}");
    assert_eq!(json(&body)["records"][0]["seq"], 41);
    for bad in [
        "?from=x",
        "?from=0",
        "?limit=0",
        "?limit=20000",
        "?clamp=maybe",
        "?foo=1",
        "?from=-1",
    ] {
        let (code, body) = get(bad);
        assert_eq!(
            (code, json(&body)["error"].as_str()),
            (400, Some("bad_request")),
            "{bad}: {body}"
        );
    }
    assert_eq!(s.get("/v1/streams/tracker/records", None).0, 401);
    assert_eq!(s.get("/v1/streams/NOPE/records", Some(&reader)).0, 404);
    s.stop();
}

/// Clients that connect and never finish a request hold connections, not
/// the loop: the sidecar keeps ticking, and once they go it answers again.
#[tokio::test]
async fn stuck_clients_never_stall_the_loop() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10), ("node-2", 10)], 10).await;
    let s = Served::start(&f);
    assert!(eventually(20, || async { f.floors_row().await.is_some() }).await);
    let mut stuck = Vec::new();
    for _ in 0..(crewlet::http::MAX_CONNECTIONS + 44) {
        if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", s.port)) {
            let _ = c.write_all(b"GET /metr");
            stuck.push(c);
        }
    }
    let at = |v: Option<serde_json::Value>| v.map(|r| r["at"].clone());
    let before = at(f.floors_row().await);
    assert!(
        eventually(10, || async { at(f.floors_row().await) != before }).await,
        "the loop published again with {} stuck connections",
        stuck.len()
    );
    drop(stuck);
    assert!(
        eventually(20, || async { s.get("/healthz", None).0 == 200 }).await,
        "answers again once they are gone"
    );
    s.stop();
}

#[tokio::test]
async fn the_ack_route_is_judged_before_anything_is_written() {
    let f = Fleet::new(30).await;
    let key = format!("_ack.{STREAM}");
    // Under engine an acknowledgement is never read: refused, 409.
    let s = Served::start(&f);
    let acker = s.token("ops", "ack");
    let (code, body) = request(
        s.port,
        "POST",
        "/v1/streams/tracker/ack",
        Some(&acker),
        Some(r#"{"position": 10}"#),
    );
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (409, Some("policy_engine")),
        "{body}"
    );
    assert!(
        f.get("crewlet_backups", &key).await.is_none(),
        "nothing written"
    );
    s.stop();
    let s = Served::start_with(&f, ", backup_floor: operator");
    let acker = s.token("ops", "ack");
    let reader = s.token("grafana", "read");
    let post =
        |t: &str, b: &str| request(s.port, "POST", "/v1/streams/tracker/ack", Some(t), Some(b));
    assert_eq!(post(&reader, r#"{"position": 10}"#).0, 403);
    for bad in [
        r#"{"position": 31}"#,
        r#"{"position": -1}"#,
        r#"{"pos": 3}"#,
        "[]",
    ] {
        let (code, body) = post(&acker, bad);
        assert_eq!(
            (code, json(&body)["error"].as_str()),
            (400, Some("bad_request")),
            "{bad}: {body}"
        );
    }
    assert!(
        f.get("crewlet_backups", &key).await.is_none(),
        "nothing written"
    );
    let (code, body) = post(&acker, r#"{"position": 25}"#);
    assert_eq!(code, 200, "{body}");
    let row = f.get("crewlet_backups", &key).await.expect("row");
    assert_eq!(
        (row["position"].as_u64(), row["by"].as_str()),
        (Some(25), Some("token:ops")),
        "{row}"
    );
    s.stop();
}

#[tokio::test]
async fn the_gesture_routes_evict_and_readmit_as_the_cli_does() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", 40).await;
    f.snapshot("node-3", 40).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Served::start_with(&f, ", fence_window: 2s");
    let oncall = s.token("oncall", "gate");
    let others = s.token("others", "read,trim,ack,capacity,erase");
    let post = |path: &str, token: Option<&str>, body: &str| {
        let (code, body) = request(s.port, "POST", path, token, Some(body));
        (code, json(&body))
    };
    let last_before = f.state().await.1;
    let ok = r#"{"confirm": "node-3"}"#;
    // The gate scope, and no other.
    assert_eq!(post("/v1/nodes/node-3/evict", None, ok).0, 401);
    let (code, v) = post("/v1/nodes/node-3/evict", Some(&others), ok);
    assert_eq!((code, v["error"].as_str()), (403, Some("forbidden")), "{v}");
    // Bad input: 400 with the reason's code; judgement: 409 with its code.
    for (path, body, code, error) in [
        ("/v1/nodes/node-3/evict", "not json", 400, "bad_request"),
        (
            "/v1/nodes/node-3/evict",
            r#"{"confirm": "node-3", "forse": true}"#,
            400,
            "bad_request",
        ),
        (
            "/v1/nodes/node-3/evict",
            r#"{"confirm": "node-3", "force": "yes"}"#,
            400,
            "bad_request",
        ),
        (
            "/v1/nodes/node-3/evict",
            r#"{"confirm": 3}"#,
            400,
            "bad_request",
        ),
        ("/v1/nodes/node-3/evict", "{}", 400, "confirm_missing"),
        (
            "/v1/nodes/node-3/evict",
            r#"{"confirm": "node-4"}"#,
            400,
            "confirm_mismatch",
        ),
        (
            "/v1/nodes/node-3/evict",
            r#"{"confirm": "node-3", "op_id": "nope"}"#,
            400,
            "op_id_invalid",
        ),
        (
            "/v1/nodes/node%203/evict",
            r#"{"confirm": "node 3"}"#,
            400,
            "node_id_invalid",
        ),
        (
            "/v1/nodes/node-9/evict",
            r#"{"confirm": "node-9"}"#,
            409,
            "unknown_node",
        ),
        (
            "/v1/nodes/node-1/evict",
            r#"{"confirm": "node-1"}"#,
            409,
            "node_live",
        ),
        ("/v1/nodes/node-3/readmit", ok, 409, "not_evicted"),
    ] {
        let (got, v) = post(path, Some(&oncall), body);
        assert_eq!(
            (got, v["error"].as_str()),
            (code, Some(error)),
            "{path} {body}: {v}"
        );
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
    assert_eq!(
        f.state().await.1,
        last_before,
        "no refusal wrote a gate record"
    );

    // The eviction: each log's outcome as `--json` prints it.
    let (code, v) = post(
        "/v1/nodes/node-3/evict",
        Some(&oncall),
        r#"{"confirm": "node-3", "reason": "disk lost"}"#,
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["sign"], "evict");
    assert_eq!(v["finished"], true, "{v}");
    let seq = last_before + 1;
    assert_eq!(
        v["logs"][0],
        serde_json::json!({"outcome": "applied", "seq": seq, "stream": STREAM, "finish": null})
    );
    let op = v["op_id"].as_str().expect("op id").to_string();
    let log = f.js.get_stream(STREAM).await.expect("stream");
    let record = log.get_raw_message(seq).await.expect("the gate record");
    let body: serde_json::Value = serde_json::from_slice(&record.payload).expect("body");
    assert_eq!(body["by"], "token:oncall");
    assert_eq!(body["reason"], "disk lost");
    // A retry under the same op id answers the same record, writes none.
    let (code, v) = post(
        "/v1/nodes/node-3/evict",
        Some(&oncall),
        &format!(r#"{{"confirm": "node-3", "op_id": "{op}"}}"#),
    );
    assert_eq!(
        (code, &v["logs"][0]["seq"]),
        (200, &serde_json::json!(seq)),
        "{v}"
    );
    assert_eq!(f.state().await.1, seq);
    // Past the fence window the trim passes node-3; its readmission is
    // judged against the floor, then taken once it has caught up.
    assert!(
        eventually(20, || async { f.first_seq().await == 101 }).await,
        "the trim passes the evicted node"
    );
    let (code, v) = post("/v1/nodes/node-3/readmit", Some(&oncall), ok);
    assert_eq!(
        (code, v["error"].as_str()),
        (409, Some("below_floor")),
        "{v}"
    );
    assert_eq!(f.state().await.1, seq, "nothing written");
    f.position("node-3", seq).await;
    let (code, v) = post("/v1/nodes/node-3/readmit", Some(&oncall), ok);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["sign"], "readmit");
    assert_eq!(v["logs"][0]["outcome"], "applied", "{v}");
    let logs = s.stop();
    assert!(!logs.contains(&oncall), "a token in the logs");
}

#[tokio::test]
async fn the_capacity_route_judges_like_set_capacity() {
    let f = Fleet::new(100).await;
    let s = Served::start(&f);
    let sizer = s.token("sizer", "capacity");
    let others = s.token("others", "read,trim,gate,ack,erase");
    let post = |path: &str, token: Option<&str>, body: &str| {
        let (code, body) = request(s.port, "POST", path, token, Some(body));
        (code, json(&body))
    };
    let max = || async { f.log_info().await.config.max_bytes };
    let before = max().await;
    let ok = r#"{"bytes": 2147483648, "confirm": 2147483648}"#;
    assert_eq!(post("/v1/streams/tracker/capacity", None, ok).0, 401);
    let (code, v) = post("/v1/streams/tracker/capacity", Some(&others), ok);
    assert_eq!((code, v["error"].as_str()), (403, Some("forbidden")), "{v}");
    let (code, v) = post("/v1/streams/NOPE/capacity", Some(&sizer), ok);
    assert_eq!(
        (code, v["error"].as_str()),
        (404, Some("unknown_stream")),
        "{v}"
    );
    for (body, code, error) in [
        ("not json", 400, "bad_request"),
        (r#"{"bytes": "2GiB"}"#, 400, "confirm_mismatch"),
        (
            r#"{"bytes": "2GiB", "confirm": "2GiB", "force": true}"#,
            400,
            "bad_request",
        ),
        (r#"{"bytes": -1, "confirm": -1}"#, 400, "bad_request"),
        (r#"{"bytes": 1.5, "confirm": 1.5}"#, 400, "bad_request"),
        (r#"{"bytes": "8MB", "confirm": "8MB"}"#, 400, "bad_request"),
        (
            r#"{"bytes": "2GiB", "confirm": "2048MiB"}"#,
            400,
            "confirm_mismatch",
        ),
        (
            r#"{"bytes": "512KiB", "confirm": "512KiB"}"#,
            409,
            "below_minimum",
        ),
    ] {
        let (got, v) = post("/v1/streams/tracker/capacity", Some(&sizer), body);
        assert_eq!(
            (got, v["error"].as_str()),
            (code, Some(error)),
            "{body}: {v}"
        );
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
    assert_eq!(max().await, before, "nothing written");
    // About 1 MiB the trim may not take: 1 MiB would refuse every append.
    f.fill(1000, 1000).await;
    let (code, v) = post(
        "/v1/streams/tracker/capacity",
        Some(&sizer),
        r#"{"bytes": "1MiB", "confirm": "1MiB"}"#,
    );
    assert_eq!(
        (code, v["error"].as_str()),
        (409, Some("below_usage")),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("crewlet retention set-capacity {STREAM} "))),
        "the least target as a command: {v}"
    );
    assert_eq!(max().await, before, "nothing written");
    let (code, v) = post(&format!("/v1/streams/{STREAM}/capacity"), Some(&sizer), ok);
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (
            v["changed"].as_bool(),
            v["to"].as_u64(),
            v["verified"].as_bool()
        ),
        (Some(true), Some(2 << 30), Some(true)),
        "{v}"
    );
    assert_eq!(max().await, 2 << 30);
    let (code, v) = post(
        "/v1/streams/tracker/capacity",
        Some(&sizer),
        r#"{"bytes": "2GiB", "confirm": "2GiB"}"#,
    );
    assert_eq!((code, v["changed"].as_bool()), (200, Some(false)), "{v}");
    s.stop();
}

#[tokio::test]
async fn every_metric_family_carries_the_last_ticks_values() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 60), ("node-2", 60)], 100).await;
    // node-3, not live, pins applied at 40: trim_held, blocked.
    f.position("node-3", 40).await;
    f.snapshot("node-3", 40).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let archive = Scratch::new();
    let s = Served::start_full(
        &f,
        ", held_alarm_after: 0s",
        &format!(
            ", archive: {{dir: {}, segment_records: 20}}",
            archive.dir.path().display()
        ),
    );
    let d = format!("domain=\"tracker\",stream=\"{STREAM}\"");
    let after_purge = format!("crewlet_first_seq{{{d}}} 41");
    assert!(
        eventually(20, || async {
            s.get("/metrics", None).1.lines().any(|l| l == after_purge)
        })
        .await,
        "the tick after the purge: {}",
        s.get("/metrics", None).1
    );
    let (_, text) = s.get("/metrics", None);
    let value = |family: &str| -> f64 {
        let prefix = format!("{family}{{{d}}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{family} not in\n{text}"))
    };
    let bytes = f.log_info().await.state.bytes;
    assert!(value("crewlet_bytes") > 0.0);
    assert!(value("crewlet_bytes") <= bytes as f64 + 1.0);
    assert_eq!(value("crewlet_max_bytes"), (1u64 << 30) as f64);
    assert_eq!(value("crewlet_reserve_bytes"), (1u64 << 26) as f64);
    let headroom = value("crewlet_headroom_fraction");
    assert!(headroom > 0.99 && headroom <= 1.0, "{headroom}");
    assert_eq!(value("crewlet_last_seq"), 100.0);
    assert_eq!(value("crewlet_trim_floor"), 41.0);
    assert_eq!(value("crewlet_trim_to"), 40.0);
    assert_eq!(value("crewlet_blocked"), 1.0);
    assert!(value("crewlet_blocked_seconds") >= 0.0);
    // The archive folded what the trim passed: its frontier is 40.
    assert_eq!(value("crewlet_archive_frontier"), 40.0);
    for want in [
        format!("crewlet_term_seq{{{d},term=\"applied\"}} 40"),
        format!("crewlet_term_seq{{{d},term=\"archive_floor\"}} 40"),
        format!("crewlet_term_state{{{d},term=\"applied\",state=\"value\"}} 1"),
        format!("crewlet_term_state{{{d},term=\"min_hold\",state=\"unbounded\"}} 1"),
        format!("crewlet_term_state{{{d},term=\"feed_ack_floor\",state=\"n/a\"}} 1"),
        format!("crewlet_alarm{{{d},alarm=\"trim_held\"}} 1"),
        "crewlet_duty_held 1".to_string(),
        "crewlet_purged_records_total 40".to_string(),
    ] {
        assert!(text.lines().any(|l| l == want), "{want} not in\n{text}");
    }
    // Only terms with a value have a seq.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("crewlet_term_seq{") && l.contains("term=\"min_hold\"")),
        "{text}"
    );
    let count: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("crewlet_tick_duration_seconds_count "))
        .and_then(|v| v.parse().ok())
        .expect("the histogram's count");
    assert!(count >= 2.0, "a tick each second: {count}");
    assert!(
        text.contains("crewlet_tick_duration_seconds_bucket{le="),
        "{text}"
    );
    s.stop();
}

#[tokio::test]
async fn answers_are_gzipped_for_clients_that_ask_and_say_the_same() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 60), ("node-2", 60)], 100).await;
    let s = Served::start(&f);
    let reader = s.token("grafana", "read");
    assert!(
        eventually(20, || async {
            s.get("/v1/retention", Some(&reader)).0 == 200
        })
        .await,
        "the first tick"
    );
    // One raw request asking for gzip: (headers, body bytes).
    let gzipped = |path: &str| {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {reader}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n");
        c.write_all(req.as_bytes()).expect("write");
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        let at = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response");
        let head = String::from_utf8_lossy(&raw[..at]).to_ascii_lowercase();
        (head, raw[at + 4..].to_vec())
    };
    for path in ["/metrics", "/v1/retention"] {
        // The same tick's answer both ways (the loop ticks every second).
        for _ in 0..5 {
            let plain = s.get(path, Some(&reader)).1;
            let (head, body) = gzipped(path);
            assert!(head.contains("content-encoding: gzip"), "{path}: {head}");
            assert!(head.contains("vary: accept-encoding"), "{path}: {head}");
            let mut out = String::new();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_string(&mut out)
                .expect("gzip that decompresses");
            if out == plain {
                break;
            }
        }
        let plain = s.get(path, Some(&reader)).1;
        let (_, body) = gzipped(path);
        let mut out = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut out)
            .expect("gzip");
        // Both parse, and carry the same figures.
        if path == "/v1/retention" {
            assert_eq!(
                json(&out)["domains"][0]["trim_to"],
                json(&plain)["domains"][0]["trim_to"]
            );
        } else {
            assert!(out.contains("crewlet_trim_to{"), "{out}");
        }
    }
    // Without Accept-Encoding: not compressed.
    let (code, body) = s.get("/metrics", None);
    assert_eq!(code, 200);
    assert!(body.contains("crewlet_trim_to{"));
    s.stop();
}

#[tokio::test]
async fn the_erase_route_needs_the_erase_scope_and_answers_like_the_cli() {
    let f = Fleet::new(0).await;
    let person = format!("{STREAM}.user.7");
    for i in 0..10 {
        let subject = if i % 2 == 0 {
            person.clone()
        } else {
            format!("{STREAM}.records")
        };
        f.js.publish(subject, format!("x{i}").into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    let s = Served::start(&f);
    let dpo = s.token("dpo", "erase");
    let others = s.token("others", "read,trim,gate,ack,capacity");
    let post = |token: Option<&str>, body: &str| {
        let (code, body) = request(
            s.port,
            "POST",
            "/v1/streams/tracker/erase",
            token,
            Some(body),
        );
        (code, json(&body))
    };
    let ok = format!(r#"{{"subject": "{person}", "confirm": "{person}", "reason": "GDPR 9"}}"#);
    assert_eq!(post(None, &ok).0, 401);
    let (code, v) = post(Some(&others), &ok);
    assert_eq!(
        (code, v["error"].as_str()),
        (403, Some("forbidden")),
        "erase is never implied: {v}"
    );
    for (body, code, error) in [
        ("not json".to_string(), 400, "bad_request"),
        (format!(r#"{{"subject": "{person}", "confirm": "{person}", "reason": "r", "force": true}}"#), 400, "bad_request"),
        (format!(r#"{{"subject": "{STREAM}.user.*", "confirm": "{STREAM}.user.*", "reason": "r"}}"#), 400, "subject_invalid"),
        (format!(r#"{{"subject": "{person}", "confirm": "x", "reason": "r"}}"#), 400, "confirm_mismatch"),
        (format!(r#"{{"subject": "{person}", "confirm": "{person}"}}"#), 400, "reason_missing"),
        (r#"{"subject": "crewlet.tracker.gate", "confirm": "crewlet.tracker.gate", "reason": "r"}"#.to_string(), 409, "gate_subject"),
    ] {
        let (got, v) = post(Some(&dpo), &body);
        assert_eq!((got, v["error"].as_str()), (code, Some(error)), "{body}: {v}");
    }
    assert_eq!(f.state().await.0, 1, "nothing purged");
    let (code, v) = post(Some(&dpo), &ok);
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (v["live_records"].as_u64(), v["finished"].as_bool()),
        (Some(5), Some(true)),
        "{v}"
    );
    let id = v["op_id"].as_str().expect("op id");
    let row = f
        .get("crewlet_erasures", &format!("{STREAM}.{id}"))
        .await
        .expect("row");
    assert_eq!(row["by"], "token:dpo");
    assert_eq!(row["reason"], "GDPR 9");
    s.stop();
}

#[tokio::test]
async fn an_erasure_over_http_on_an_archived_domain_waits_for_the_holders_fold() {
    let f = Fleet::new(0).await;
    let person = format!("{STREAM}.user.9");
    let mut on_person = Vec::new();
    for i in 0..60u64 {
        let subject = if i % 3 == 0 {
            person.clone()
        } else {
            format!("{STREAM}.records")
        };
        let seq =
            f.js.publish(subject, format!("x{i}").into())
                .await
                .expect("publish")
                .await
                .expect("ack")
                .sequence;
        if i % 3 == 0 {
            on_person.push(seq);
        }
    }
    f.healthy(&[("node-1", 40), ("node-2", 40)], 40).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let archive = Scratch::new();
    let dir = archive.dir.path().join("a");
    let s = Served::start_full(
        &f,
        "",
        &format!(", archive: {{dir: {}, segment_records: 10}}", dir.display()),
    );
    // The holder (this sidecar, ticking every second) folds and trims to 40.
    assert!(
        eventually(20, || async { f.first_seq().await == 41 }).await,
        "folded and trimmed"
    );
    let dpo = s.token("dpo", "erase");
    let body = format!(r#"{{"subject": "{person}", "confirm": "{person}", "reason": "GDPR 12"}}"#);
    let (code, v) = request(
        s.port,
        "POST",
        "/v1/streams/tracker/erase",
        Some(&dpo),
        Some(&body),
    );
    let v = json(&v);
    assert_eq!(code, 200, "{v}");
    let in_archive = on_person.iter().filter(|q| **q <= 40).count() as u64;
    let in_log = on_person.iter().filter(|q| **q > 40).count() as u64;
    assert_eq!(
        (v["live_records"].as_u64(), v["archived_records"].as_u64()),
        (Some(in_log), Some(in_archive)),
        "{v}"
    );
    // verify-archive, beside the running sidecar, finds it sound.
    let run = crewlet(&[
        "retention",
        "verify-archive",
        "-stream",
        "tracker",
        "--config",
        &s.cfg,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    s.stop();
}

#[tokio::test]
async fn with_the_broker_gone_every_writing_route_is_503() {
    let mut f = Fleet::new(10).await;
    let s = Served::start(&f);
    let all = s.token("all", "read,trim,gate,ack,capacity,erase");
    assert!(
        eventually(20, || async { s.get("/readyz", None).0 == 200 }).await,
        "ready"
    );
    f.server.kill();
    assert!(
        eventually(20, || async { s.get("/readyz", None).0 == 503 }).await,
        "not ready once the broker is gone"
    );
    let person = format!("{STREAM}.user.1");
    for (path, body) in [
        (
            "/v1/nodes/node-3/evict",
            r#"{"confirm": "node-3"}"#.to_string(),
        ),
        (
            "/v1/nodes/node-3/readmit",
            r#"{"confirm": "node-3"}"#.to_string(),
        ),
        ("/v1/streams/tracker/ack", r#"{"position": 5}"#.to_string()),
        ("/v1/streams/tracker/trim", r#"{"seq_num": 5}"#.to_string()),
        (
            "/v1/streams/tracker/capacity",
            r#"{"bytes": "2GiB", "confirm": "2GiB"}"#.to_string(),
        ),
        (
            "/v1/streams/tracker/erase",
            format!(r#"{{"subject": "{person}", "confirm": "{person}", "reason": "r"}}"#),
        ),
    ] {
        let (code, body) = request(s.port, "POST", path, Some(&all), Some(&body));
        let v = json(&body);
        assert_eq!(
            (code, v["error"].as_str()),
            (503, Some("unreachable")),
            "{path}: {v}"
        );
    }
    // Token and scope are still judged first.
    let (code, _) = request(s.port, "POST", "/v1/streams/tracker/trim", None, Some("{}"));
    assert_eq!(code, 401);
    s.stop();
}

/// Every route checks exactly the scope the router's table gives it (a
/// typed `Scope` per route; a unit test holds that table to docs/http.md's): no token is 401, a
/// token with every scope but that one is 403, and a route the table
/// calls public answers 200 without one.
#[tokio::test]
async fn every_route_checks_the_scope_its_table_row_names() {
    let f = Fleet::new(10).await;
    let s = Served::start(&f);
    // The router's own table (a unit test holds it to docs/http.md's).
    let routes: Vec<(String, String, String)> = crewlet::http::routes()
        .iter()
        .map(|r| {
            let scope = match r.access {
                crewlet::http::Access::Public => "none".to_string(),
                crewlet::http::Access::Needs(s) => s.as_str().to_string(),
            };
            let path = r
                .path
                .replace("{stream}", "tracker")
                .replace("{node}", "node-3");
            (r.method.to_string(), path, scope)
        })
        .collect();
    assert!(routes.len() >= 13, "{routes:?}");
    let all = ["read", "trim", "gate", "ack", "capacity", "erase"];
    for (i, (method, path, scope)) in routes.iter().enumerate() {
        if scope == "none" {
            let (code, answer) = request(s.port, method, path, None, None);
            assert_eq!(code, 200, "{method} {path} is public: {answer}");
            continue;
        }
        let body = (method == "POST").then_some("{}");
        let (code, _) = request(s.port, method, path, None, body);
        assert_eq!(code, 401, "{method} {path} without a token");
        let others: Vec<&str> = all.iter().copied().filter(|a| a != scope).collect();
        let token = s.token(&format!("not-{scope}-{i}"), &others.join(","));
        let (code, answer) = request(s.port, method, path, Some(&token), body);
        assert_eq!(
            code, 403,
            "{method} {path} with every scope but {scope}: {answer}"
        );
        assert!(
            answer.contains(&format!("lacks the {scope} scope")),
            "{answer}"
        );
    }
    s.stop();
}

/// `GET /v1/retention?if_evicted=…` (docs/http.md, Previews): scope read,
/// the real gesture's refusals, bad parameters 400 naming them.
#[tokio::test]
async fn a_preview_over_http_is_a_read_with_the_gestures_refusals() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", 40).await;
    f.snapshot("node-3", 40).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Served::start(&f);
    let reader = s.token("grafana", "read");
    assert!(
        eventually(20, || async {
            s.get("/v1/retention", Some(&reader))
                .1
                .contains("\"trim_to\":40")
        })
        .await,
        "the first tick"
    );
    assert_eq!(s.get("/v1/retention?if_evicted=node-3", None).0, 401);
    let (code, body) = s.get("/v1/retention?if_evicted=node-3", Some(&reader));
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let p = &v["preview"]["domains"][0];
    assert_eq!(
        (p["trim_to"].as_u64(), p["would_trim_to"].as_u64()),
        (Some(40), Some(100)),
        "{p}"
    );
    assert!(
        p["sentence"].as_str().is_some_and(
            |t| t.starts_with("evicting node-3 would move tracker's trim from 40 to 100")
        ),
        "{p}"
    );
    assert_eq!(
        v["preview"]["asked"]["if_evicted"],
        serde_json::json!(["node-3"])
    );
    let (code, body) = s.get("/v1/retention?if_evicted=node-1", Some(&reader));
    assert_eq!(code, 409, "{body}");
    assert!(
        body.contains("\"node_live\"") && body.contains("if_evicted node-1"),
        "{body}"
    );
    let (code, body) = s.get("/v1/retention?if_acked=CREWLET_TRACKER_LOG", Some(&reader));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("if_acked"), "{body}");
    let (code, body) = s.get("/v1/retention?if_released=nope", Some(&reader));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("if_released nope"), "{body}");
    let (code, body) = s.get("/v1/retention?evict=node-3", Some(&reader));
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"\"evict\" is not a parameter of /v1/retention"#),
        "{body}"
    );
}

/// `published_at` is one thing in every surface: the floors row's `at`,
/// as `/v1/retention` and `status --json` both say it, including while
/// the row stands unchanged tick after tick (it is not written again);
/// `run --once` names the replicas it leaves out, as `status` does.
#[tokio::test]
async fn published_at_is_the_rows_at_in_every_surface() {
    let f = Fleet::new(60).await;
    f.healthy(&[("node-1", 60)], 60).await;
    let s = Served::start(&f);
    let reader = s.token("reader", "read");
    // A few ticks on a quiet fleet: the row stands, it is not rewritten.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let row_at = f.floors_row().await.expect("a row")["at"].clone();
    let (code, body) = s.get("/v1/retention", Some(&reader));
    assert_eq!(code, 200, "{body}");
    let served = json(&body)["domains"][0]["published_at"].clone();
    let run = crewlet(&["retention", "status", "--json", "--config", &s.cfg]);
    let read = json(&run.stdout)["domains"][0]["published_at"].clone();
    let row_after = f.floors_row().await.expect("a row")["at"].clone();
    assert_eq!(row_at, row_after, "the row stood meanwhile");
    assert_eq!(served, row_at, "/v1/retention");
    assert_eq!(read, row_at, "status --json");
    s.stop();
}
