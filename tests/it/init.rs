//! `crewlet retention init`: every bucket of the contract, idempotently.

use std::time::Duration;

use crate::support::*;

#[tokio::test]
async fn creates_every_bucket_then_reports_differences() {
    let server = Server::start();
    let js = server.js().await;
    // An operator made the presence bucket by hand with another TTL.
    create_bucket(&js, "crewlet_presence", Duration::from_secs(90)).await;

    let s = Scratch::new();
    let path = s.write("c.yaml", &basic_config(&server.url(), "T", ""));
    let p = path.to_str().expect("utf-8");
    let run = crewlet(&["retention", "init", "--config", p]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("exists   presence   crewlet_presence"),
        "{run:?}"
    );
    for role in [
        "positions",
        "holds",
        "backups",
        "snapshots",
        "floors",
        "duty",
        "gates",
        "erasures",
    ] {
        assert!(
            run.stdout
                .contains(&format!("created  {role:<10} crewlet_{role}")),
            "{role}: {run:?}"
        );
    }
    assert!(run.stderr.contains("warning: bucket crewlet_presence (presence) has max_age 90s but the configuration wants 30s"), "{run:?}");

    // The broker has them with the contract's settings.
    let duty = js.get_stream("KV_crewlet_duty").await.expect("duty bucket");
    assert_eq!(
        duty.cached_info().config.max_age,
        Duration::from_secs(30),
        "three ticks of 10s"
    );
    let floors = js
        .get_stream("KV_crewlet_floors")
        .await
        .expect("floors bucket");
    assert_eq!(floors.cached_info().config.max_age, Duration::ZERO);

    // Again: nothing created, nothing changed.
    let run = crewlet(&["retention", "init", "--config", p, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let outcomes: Vec<&str> = v["buckets"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|b| b["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["exists"; 9]);
}

#[test]
fn an_invalid_config_writes_nothing_and_exits_2() {
    let s = Scratch::new();
    // The broker URL is unreachable: exit 2 proves the config was judged first.
    let path = s.write("c.yaml", "node: {id: node-1}\nnats: {url: \"nats://127.0.0.1:1\"}\nretention: {tick: 0s}\ndomains: [{name: t, stream: T}]\n");
    let run = crewlet(&[
        "retention",
        "init",
        "--config",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("retention.tick: \"0s\" is out of range"),
        "{run:?}"
    );
}
