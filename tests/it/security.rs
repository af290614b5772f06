//! Security basics: secrets never reach a log line or the output, even at
//! trace level; the embedded broker's files are the owner's alone.

use std::os::unix::fs::PermissionsExt;

use crate::support::{crewlet_env, Scratch, Server};

#[tokio::test]
async fn tokens_and_seeds_never_reach_the_logs() {
    let token = "t0k3n-s3cr3t-value";
    let server = Server::start_with(&format!("authorization {{ token: \"{token}\" }}\n"), "nats");
    let s = Scratch::new();
    let good = s.write(
        "good.yaml",
        &format!("node: {{id: node-1}}\nnats: {{url: \"{}\", token: \"{token}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n", server.url()),
    );
    let bad = s.write(
        "bad.yaml",
        &format!("node: {{id: node-1}}\nnats: {{url: \"{}\", token: \"{token}-wrong\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n", server.url()),
    );
    for (cfg, authorised) in [(&good, true), (&bad, false)] {
        for args in [
            vec!["retention", "run", "--once"],
            vec!["retention", "status", "--json"],
            vec!["validate"],
        ] {
            let mut all = args.clone();
            let path = cfg.to_str().expect("utf-8");
            all.extend(["--config", path]);
            let run = crewlet_env(&all, &[("RUST_LOG", "trace")]);
            assert!(
                !run.stdout.contains(token) && !run.stderr.contains(token),
                "{args:?} leaked the token:\n{run:?}"
            );
            if args.get(1) == Some(&"run") {
                // Authorised, it claims the duty (stream T is missing: exit 3,
                // for nothing about the log could be read); refused, the
                // token is configuration: exit 2.
                assert_eq!(run.stderr.contains("duty_claimed"), authorised, "{run:?}");
                assert_eq!(run.code, if authorised { 3 } else { 2 }, "{run:?}");
            }
        }
    }

    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().expect("seed");
    let server = Server::start_with(
        &format!(
            "authorization {{ users = [ {{ nkey: \"{}\" }} ] }}\n",
            user.public_key()
        ),
        "nats",
    );
    let seed_file = s.write("u.nk", &seed);
    let cfg = s.write(
        "nkey.yaml",
        &format!("node: {{id: node-1}}\nnats: {{url: \"{}\", nkey: \"{}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n", server.url(), seed_file.display()),
    );
    let run = crewlet_env(
        &[
            "retention",
            "run",
            "--once",
            "--config",
            cfg.to_str().expect("utf-8"),
        ],
        &[("RUST_LOG", "trace")],
    );
    assert!(
        !run.stdout.contains(&seed) && !run.stderr.contains(&seed),
        "the seed leaked:\n{run:?}"
    );
    assert!(
        run.stderr.contains("duty_claimed"),
        "it did connect and run: {run:?}"
    );
}

#[test]
fn the_embedded_store_is_owner_only() {
    let s = Scratch::new();
    let dir = s.dir.path().join("embedded");
    let cfg = s.write(
        "c.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: embedded, embedded_dir: \"{}\"}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T, gate_subject: t.gate}}]\n",
            dir.display()
        ),
    );
    let run = crewlet_env(
        &[
            "retention",
            "run",
            "--once",
            "--config",
            cfg.to_str().expect("utf-8"),
        ],
        &[("RUST_LOG", "info")],
    );
    // No nodes and no backup: the answer alarms (exit 1), but it ran on its
    // own broker, created the stream and buckets, and stopped the broker.
    assert_eq!(run.code, 1, "{run:?}");
    for d in [dir.clone(), dir.join("store")] {
        let mode = std::fs::metadata(&d).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", d.display());
    }
    assert!(
        run.stderr.contains("embedded_started") && run.stderr.contains("embedded_stopped"),
        "{run:?}"
    );
}
