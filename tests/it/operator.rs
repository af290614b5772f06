//! The operator's surface (issue 11): cron without false alarms,
//! connecting like the `nats` CLI, exit codes that tell configuration from
//! the network. Each test failed on the code before its fix.

use std::time::Duration;

use crate::support::fleet::*;
use crate::support::{crewlet_env, free_port, Operator, Scratch, Server};

fn cron_yaml(url: &str) -> String {
    format!(
        "node: {{id: node-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 1s, min_age: 1s, snapshot_interval: 100ms, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    )
}

/// `run --once` from cron every tick, `status` in between: a healthy fleet
/// pages nobody (the lease is released between runs, which is not an
/// alarm), and the alarm comes once the runs stop.
#[tokio::test]
async fn cron_runs_page_only_when_they_stop() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let op = Operator::with_yaml(&cron_yaml(&f.server.url()));
    for i in 0..5 {
        let run = op.run(&["retention", "run", "--once"]);
        assert_eq!(run.code, 0, "run {i}: {run:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let status = op.status();
        assert_eq!(status.code, 0, "status after run {i}: {status:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The cron job stops: three ticks later, someone is paged.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let status = op.status();
    assert_eq!(status.code, 1, "{status:?}");
    let alarms = op.alarms();
    assert!(
        alarms.iter().any(|a| a == "ALARM duty_unheld *"),
        "{alarms:?}"
    );
    assert!(
        status
            .stderr
            .contains("set retention.tick to the cron interval"),
        "{status:?}"
    );
}

/// A comma-separated server list works (file, flag and `NATS_URL`), and
/// `NATS_URL` is taken before the file, as the `nats` CLI does.
#[tokio::test]
async fn server_lists_and_nats_url_work_as_in_the_nats_cli() {
    let f = Fleet::new(5).await;
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let live = f.server.url();
    let list = format!("{dead},{live}");
    let op = Operator::with_yaml(&cron_yaml(&list));
    let run = op.run(&["retention", "status", "--json"]);
    assert!(
        run.code == 0 || run.code == 1,
        "the list reaches {live}: {run:?}"
    );
    assert!(run.stdout.contains("\"domains\""), "{run:?}");

    let op = Operator::with_yaml(&cron_yaml(&dead));
    let run = crewlet_env(
        &["retention", "status", "--json", "--config", &op.cfg],
        &[("NATS_URL", &list)],
    );
    assert!(
        run.code == 0 || run.code == 1,
        "NATS_URL before the file: {run:?}"
    );
    let run = op.run(&["retention", "status", "--nats-url", &list]);
    assert!(run.code == 0 || run.code == 1, "the flag: {run:?}");
}

/// A refused credential, an unreadable creds file or a URL that is not a
/// NATS URL is configuration (exit 2), not the network (exit 3).
#[tokio::test]
async fn configuration_is_exit_2_and_the_network_exit_3() {
    let token = "right-token";
    let server = Server::start_with(&format!("authorization {{ token: \"{token}\" }}\n"), "nats");
    let s = Scratch::new();
    let cfg = |nats: &str| {
        s.write(
            "c.yaml",
            &format!("node: {{id: node-1}}\nnats: {{{nats}}}\nretention: {{backup_owner: x}}\ndomains: [{{name: t, stream: T}}]\n"),
        )
        .to_str()
        .expect("utf-8")
        .to_string()
    };
    let status = |path: &str, extra: &[&str]| {
        let mut args = vec!["retention", "status", "--config", path];
        args.extend_from_slice(extra);
        crewlet_env(&args, &[])
    };
    let wrong = cfg(&format!("url: \"{}\", token: \"wrong\"", server.url()));
    let run = status(&wrong, &[]);
    assert_eq!(run.code, 2, "a refused token: {run:?}");
    assert!(run.stderr.contains("refused the connection"), "{run:?}");
    let run = crewlet_env(&["validate", "--config", &wrong], &[]);
    assert_eq!(run.code, 2, "validate too: {run:?}");

    let creds = cfg(&format!(
        "url: \"{}\", creds: /nonexistent/x.creds",
        server.url()
    ));
    let run = status(&creds, &[]);
    assert_eq!(run.code, 2, "a creds file that is not there: {run:?}");

    let right = cfg(&format!("url: \"{}\", token: \"{token}\"", server.url()));
    let run = status(&right, &["--nats-url", "http://127.0.0.1:8222"]);
    assert_eq!(run.code, 2, "an http:// URL: {run:?}");

    let dead = cfg(&format!("url: \"nats://127.0.0.1:{}\"", free_port()));
    let run = status(&dead, &[]);
    assert_eq!(run.code, 3, "nobody listening is the network: {run:?}");
}
