//! Connecting as an operator's config says: TLS with a private CA, an nkey
//! user, and the failures an operator must be able to read.

use crate::support::*;

/// A CA and a server certificate for 127.0.0.1, made now.
fn certificates(s: &Scratch) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca cert");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("server cert");
    (
        s.write("ca.pem", &ca.pem()),
        s.write("server.pem", &cert.pem()),
        s.write("server-key.pem", &key.serialize_pem()),
    )
}

#[tokio::test]
async fn tls_with_a_private_ca() {
    let s = Scratch::new();
    let (ca, cert, key) = certificates(&s);
    let server = Server::start_with(
        &format!(
            "tls {{ cert_file: \"{}\", key_file: \"{}\" }}\n",
            cert.display(),
            key.display()
        ),
        "tls",
    );
    let with_ca = format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\", tls: {{ca: \"{}\"}}}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n",
        server.url(),
        ca.display()
    );
    let path = s.write("tls.yaml", &with_ca);
    let run = crewlet(&["validate", "--config", path.to_str().expect("utf-8")]);
    // The broker was reached over TLS: the stream check ran and found no stream.
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("stream T does not exist on the broker"),
        "{run:?}"
    );

    // Without the CA the server's certificate is not trusted: that is the
    // configuration's TLS settings (exit 2), not the network.
    let without = s.write(
        "notls.yaml",
        &with_ca.replace(&format!(", tls: {{ca: \"{}\"}}", ca.display()), ""),
    );
    let run = crewlet(&["validate", "--config", without.to_str().expect("utf-8")]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "the broker at {} refused the connection",
            server.url()
        )),
        "{run:?}"
    );
}

#[tokio::test]
async fn nkey_user_and_bad_credentials() {
    let s = Scratch::new();
    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().expect("seed");
    let server = Server::start_with(
        &format!(
            "authorization {{ users = [ {{ nkey: \"{}\" }} ] }}\n",
            user.public_key()
        ),
        "nats",
    );
    let seed_file = s.write("user.nk", &format!("{seed}\n"));
    let good = s.write(
        "nkey.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\", nkey: \"{}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n",
            server.url(),
            seed_file.display()
        ),
    );
    let run = crewlet(&[
        "retention",
        "init",
        "--config",
        good.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("created  presence"), "{run:?}");
    assert!(
        !run.stdout.contains(&seed) && !run.stderr.contains(&seed),
        "the seed is never printed"
    );

    // Another user's seed is refused: exit 3, the URL named, no secret shown.
    let stranger = nkeys::KeyPair::new_user().seed().expect("seed");
    let bad_seed = s.write("stranger.nk", &stranger);
    let bad = s.write(
        "bad.yaml",
        &std::fs::read_to_string(&good).expect("read").replace(
            seed_file.to_str().expect("utf-8"),
            bad_seed.to_str().expect("utf-8"),
        ),
    );
    let run = crewlet(&[
        "retention",
        "init",
        "--config",
        bad.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 2, "a refused seed is configuration: {run:?}");
    assert!(
        run.stderr.contains(&format!(
            "the broker at {} refused the connection",
            server.url()
        )),
        "{run:?}"
    );
    assert!(!run.stderr.contains(&stranger), "the seed is never printed");

    // A seed file that is not there is named.
    let missing = s.write(
        "missing.yaml",
        &std::fs::read_to_string(&good)
            .expect("read")
            .replace(seed_file.to_str().expect("utf-8"), "/nonexistent/user.nk"),
    );
    let run = crewlet(&[
        "retention",
        "init",
        "--config",
        missing.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot read nats.nkey seed file /nonexistent/user.nk"),
        "{run:?}"
    );
}

#[tokio::test]
async fn user_password_in_the_url_is_never_printed() {
    let server = Server::start_with(
        "authorization { user: alice, password: s3cretpw }\n",
        "nats",
    );
    let s = Scratch::new();
    let url = format!("nats://alice:wrongpw@127.0.0.1:{}", server.port);
    let path = s.write("c.yaml", &basic_config(&url, "T", ""));
    let run = crewlet(&[
        "retention",
        "init",
        "--config",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 2, "a refused password is configuration: {run:?}");
    assert!(
        run.stderr
            .contains(&format!("nats://***@127.0.0.1:{}", server.port)),
        "{run:?}"
    );
    assert!(!run.stderr.contains("wrongpw"), "{run:?}");

    let good = s.write("good.yaml", &format!("node: {{id: node-1}}\nnats: {{url: \"{}\", user: alice, password: s3cretpw}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n", server.url()));
    let run = crewlet(&[
        "retention",
        "init",
        "--config",
        good.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("s3cretpw") && !run.stderr.contains("s3cretpw"));
}

/// `-s 127.0.0.1:4222` connects as the `nats` CLI's does: a server
/// without a scheme is a `nats://` one (it was refused as "not a URL").
#[tokio::test]
async fn a_server_without_a_scheme_is_a_nats_url() {
    let f = crate::support::fleet::Fleet::new(5).await;
    let hostport = f.server.url().trim_start_matches("nats://").to_string();
    let s = crate::support::Scratch::new();
    let cfg = s.write(
        "c.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{hostport}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: tracker, stream: {}}}]\n",
            crate::support::fleet::STREAM
        ),
    );
    let cfg = cfg.to_str().expect("utf-8");
    let run = crate::support::crewlet(&["validate", "--config", cfg]);
    assert!(!run.stdout.contains("is not a URL"), "{run:?}");
    for args in [
        vec!["retention", "status", "--config", cfg],
        vec!["retention", "status", "--config", cfg, "-s", &hostport],
    ] {
        let run = crate::support::crewlet(&args);
        assert!(run.code == 0 || run.code == 1, "connected: {run:?}");
        assert!(run.stdout.contains(&hostport), "{run:?}");
    }
}

/// A refusal at start (a resolver not yet synced, credentials mounted
/// late) does not end `run`: it keeps retrying and raises
/// `broker_refused`, naming the credentials. It used to exit 2, which the
/// shipped systemd unit does not restart.
#[tokio::test]
async fn run_keeps_retrying_a_refusal_and_raises_broker_refused() {
    let server = Server::start_with(
        "authorization { user: alice, password: s3cretpw }\n",
        "nats",
    );
    let s = Scratch::new();
    let port = crate::support::free_port();
    let path = s.write(
        "c.yaml",
        &format!("node: {{id: node-1}}\nnats: {{url: \"{}\", user: alice, password: wrongpw}}\nretention: {{backup_owner: x}}\nhttp: {{listen: \"127.0.0.1:{port}\"}}\ndomains: [{{name: t, stream: T}}]\n", server.url()),
    );
    let mut child = spawn_run(&path, &[]);
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(
        matches!(child.try_wait(), Ok(None)),
        "run keeps retrying a refusal"
    );
    // A scrape says so while it waits, and the sidecar is not ready.
    let (code, metrics) = crate::http::request(port, "GET", "/metrics", None, None);
    assert_eq!(code, 200, "{metrics}");
    assert!(
        metrics.contains("crewlet_alarm{alarm=\"broker_refused\"} 1")
            && metrics.contains("crewlet_broker_connected 0"),
        "{metrics}"
    );
    let (code, body) = crate::http::request(port, "GET", "/readyz", None, None);
    assert_eq!(code, 503, "{body}");
    // status says it as the error it is, with its own code.
    let run = crate::support::crewlet(&[
        "retention",
        "status",
        "--json",
        "--config",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(v["error"], "broker_refused", "{run:?}");
    signal(&child, libc::SIGTERM);
    let out = finished(child).await;
    let log = &out.stderr;
    assert_eq!(out.code, 0, "{log}");
    assert!(log.contains("broker_refused"), "{log}");
    assert!(log.contains("credentials"), "{log}");
    assert!(!log.contains("wrongpw"), "{log}");
    assert!(!log.contains("check that nats-server runs"), "{log}");
    // The alarm line has the one shape every alarm line has (status
    // --log-format json prints the same keys).
    let raised = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "alarm_raised")
        .unwrap_or_else(|| panic!("an alarm_raised line: {log}"));
    assert_eq!(log_keys(&raised), ALARM_KEYS, "{raised}");
    assert_eq!(raised["alarm"], "broker_refused");
    // Not a line per refused reconnection: the client library's own
    // lines stay off, even at RUST_LOG=info.
    let client: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("async_nats") || l.contains("\"level\":\"ERROR\""))
        .collect();
    assert!(client.is_empty(), "{client:?}");
}

/// A refusal that comes later, in a running sidecar (the password rotated
/// on the server, a user revoked): the sidecar keeps running, raises
/// `broker_refused` naming the credentials instead of calling the broker
/// unreachable, and clears it once the server takes them again.
#[tokio::test]
async fn a_refusal_in_a_running_sidecar_raises_broker_refused_and_clears() {
    let allowed = "authorization { user: alice, password: s3cretpw }\n";
    let mut server = Server::start_with(allowed, "nats");
    let s = Scratch::new();
    let port = crate::support::free_port();
    let path = s.write(
        "c.yaml",
        &format!("node: {{id: node-1}}\nnats: {{url: \"{}\", user: alice, password: s3cretpw}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: x}}\nhttp: {{listen: \"127.0.0.1:{port}\"}}\ndomains: [{{name: t, stream: T}}]\n", server.url()),
    );
    let mut child = spawn_run(&path, &[]);
    // The log as it is written, read beside the running sidecar.
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let log = log.clone();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let mut l = log.lock().expect("log");
                l.push_str(&line);
                l.push('\n');
            }
        })
    };
    // Whether one line of the log holds every one of `all`.
    let seen = |all: &'static [&'static str]| {
        let log = log.clone();
        move || {
            let log = log.clone();
            async move {
                log.lock()
                    .expect("log")
                    .lines()
                    .any(|l| all.iter().all(|w| l.contains(w)))
            }
        }
    };
    assert!(
        crate::support::fleet::eventually(20, seen(&["\"event\":\"started\""])).await,
        "the sidecar runs: {}",
        log.lock().expect("log")
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    server.rewrite_config("authorization { user: alice, password: rotated }\n");
    server.restart();
    assert!(
        crate::support::fleet::eventually(
            30,
            seen(&["alarm_raised", "\"alarm\":\"broker_refused\""])
        )
        .await,
        "broker_refused raised: {}",
        log.lock().expect("log")
    );
    assert!(matches!(child.try_wait(), Ok(None)), "run keeps going");
    // A scrape carries it too.
    let scraped = || async move {
        let (_, text) = crate::http::request(port, "GET", "/metrics", None, None);
        text.contains("crewlet_alarm{alarm=\"broker_refused\"} 1")
    };
    assert!(
        crate::support::fleet::eventually(10, scraped).await,
        "{}",
        crate::http::request(port, "GET", "/metrics", None, None).1
    );
    server.rewrite_config(allowed);
    server.restart();
    assert!(
        crate::support::fleet::eventually(
            30,
            seen(&["alarm_cleared", "\"alarm\":\"broker_refused\""])
        )
        .await,
        "cleared once the server takes the credentials: {}",
        log.lock().expect("log")
    );
    signal(&child, libc::SIGTERM);
    let out = finished(child).await;
    reader.join().expect("reader");
    let log = log.lock().expect("log").clone();
    assert_eq!(out.code, 0, "{log}");
    let alarms: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "alarm_raised" || v["event"] == "alarm_cleared")
        .collect();
    let refused = alarms
        .iter()
        .find(|v| v["event"] == "alarm_raised" && v["alarm"] == "broker_refused")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(log_keys(refused), ALARM_KEYS, "{refused}");
    let m = refused["measurement"].as_str().unwrap_or_default();
    assert!(m.contains("authorization violation"), "{refused}");
    assert!(
        refused["remedy"]
            .as_str()
            .unwrap_or_default()
            .contains("nats.user alice and its password"),
        "{refused}"
    );
    assert!(
        !alarms
            .iter()
            .any(|v| v["event"] == "alarm_raised" && v["alarm"] == "broker_unreachable"),
        "a refusal is not an unreachable broker: {log}"
    );
    assert!(
        alarms
            .iter()
            .any(|v| v["event"] == "alarm_cleared" && v["alarm"] == "broker_refused"),
        "{log}"
    );
    assert!(
        !log.contains("s3cretpw") && !log.contains("rotated"),
        "{log}"
    );
}
