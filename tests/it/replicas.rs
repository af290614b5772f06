//! Replicas pin the log (docs/trim-floor.md, Replicas): a mirror or source
//! that copies the log through a durable consumer of its own on the log
//! keeps every record it has not confirmed stored, and so does a consumer
//! a domain names. Against a real nats-server (2.14 and later: durable
//! sourcing).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fleet::*;
use crewlet::floor::TermName;

/// A JetStream API request through `js`, its answer as JSON (an error
/// answer as it is: the caller decides).
pub(crate) async fn raw_api(
    js: &async_nats::jetstream::Context,
    subject: &str,
    body: Value,
) -> Value {
    let reply = js
        .client()
        .request(format!("$JS.API.{subject}"), body.to_string().into())
        .await
        .unwrap_or_else(|e| panic!("{subject}: {e}"));
    serde_json::from_slice(&reply.payload).expect("JSON")
}

/// A JetStream API request on the fleet's server, its answer as JSON; an
/// error answer fails the test with the broker's words.
async fn api(f: &Fleet, subject: &str, body: Value) -> Value {
    let v = raw_api(&f.js, subject, body).await;
    assert!(v.get("error").is_none(), "{subject}: {v}");
    v
}

/// The request that creates durable consumer `name` on the log, as a
/// mirror or source copies through it (`flow_control`: its ack floor is
/// what the copy has stored), delivering to `<name>.deliver`.
pub(crate) fn copy_consumer(name: &str) -> (String, Value) {
    (
        format!("CONSUMER.CREATE.{STREAM}.{name}"),
        json!({"stream_name": STREAM, "config": {
            "durable_name": name, "ack_policy": "flow_control", "flow_control": true,
            "idle_heartbeat": 1_000_000_000u64, "max_deliver": -1,
            "deliver_subject": format!("{name}.deliver"), "deliver_policy": "all"}}),
    )
}

/// The durable consumer a mirror copies through (`flow_control`), and the
/// mirror `DR` of the log that uses it: the server's durable sourcing.
async fn durable_mirror(f: &Fleet) {
    let (subject, body) = copy_consumer("dr");
    api(f, &subject, body).await;
    api(
        f,
        "STREAM.CREATE.DR",
        json!({"name": "DR", "storage": "file", "num_replicas": 1,
               "mirror": {"name": STREAM, "consumer": {"name": "dr", "deliver_subject": "dr.deliver"}}}),
    )
    .await;
}

/// A healthy node at 50, the durable mirror `DR` holding all 50, and a
/// sidecar whose replica term has read it confirm them.
async fn mirror_confirmed(f: &Fleet) -> crewlet::tick::Sidecar {
    f.healthy(&[("node-1", 50)], 50).await;
    durable_mirror(f).await;
    assert!(mirror_holds(f, 50).await, "the mirror copies the log");
    let mut s = f.sidecar().await;
    tick_until(&mut s, "value 50").await;
    s
}

/// The mirror's record count and first sequence.
async fn mirrored(f: &Fleet) -> (u64, u64) {
    let v = api(f, "STREAM.INFO.DR", json!({})).await;
    (
        v["state"]["messages"].as_u64().unwrap_or(0),
        v["state"]["first_seq"].as_u64().unwrap_or(0),
    )
}

async fn mirror_holds(f: &Fleet, n: u64) -> bool {
    eventually(20, || async { mirrored(f).await.0 == n }).await
}

/// The log moves on 20 records to 70, and every node with it: only a
/// copy that is behind can hold the trim at 50.
async fn log_moves_on(f: &Fleet) {
    f.publish(20).await;
    f.position("node-1", 70).await;
    f.backup("node-1", "b2", 70, 0, true, true).await;
}

/// Pauses (or, `None`, resumes) consumer `name` on the log: the copy's
/// link down, as a leaf node that is gone would leave it.
async fn pause(f: &Fleet, name: &str, until: Option<&str>) {
    let body = match until {
        Some(t) => json!({"pause_until": t}),
        None => json!({}),
    };
    api(f, &format!("CONSUMER.PAUSE.{STREAM}.{name}"), body).await;
}

/// `crewlet retention status` as an operator runs it beside the fleet,
/// with `replicas` as the domain's block.
fn status(f: &Fleet, replicas: &str) -> crate::support::Run {
    operator(f, replicas).status()
}

/// An operator beside the fleet, with `replicas` as the domain's block.
fn operator(f: &Fleet, replicas: &str) -> crate::support::Operator {
    crate::support::Operator::with_yaml(&format!(
        "node: {{id: op-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, backup_owner: oncall, snapshot_quorum: 2, allow_unsafe_limits: true, min_age: 3s, snapshot_interval: 1s, fence_window: 2s, held_alarm_after: 0s}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate, replicas: {replicas}}}]\n",
        f.url()
    ))
}

/// Ticks until `replica_floor` reads `want` (a durable sourcing consumer
/// confirms what its copy stored with the next flow-control answer, some
/// moments after the copy has it), at most 20 s.
async fn tick_until(s: &mut crewlet::tick::Sidecar, want: &str) -> crewlet::tick::TickReport {
    let mut r = s.tick().await;
    for _ in 0..80 {
        if term_state(&r, TermName::ReplicaFloor) == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        r = s.tick().await;
    }
    r
}

/// The whole story of a mirror: it pins nothing it has stored; while its
/// link is down the trim stops at what it confirmed; once it is back it
/// catches up, the trim moves on, and the mirror holds every record the
/// log ever had.
#[tokio::test]
async fn a_durable_mirror_pins_the_log_while_its_link_is_down() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    durable_mirror(&f).await;
    assert!(mirror_holds(&f, 50).await, "the mirror copies the log");
    let mut s = f.sidecar().await;
    // Until the copy confirms, it pins everything (value 0, never more).
    let r = tick_until(&mut s, "value 50").await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 50");
    let t = r.domains[0]
        .answer
        .terms
        .iter()
        .find(|t| t.term == TermName::ReplicaFloor)
        .expect("term");
    assert_eq!(t.detail.as_deref(), Some("dr"));
    assert_eq!(f.first_seq().await, 51, "what the mirror stored may go");

    // The link goes down; the log moves on, and every node with it.
    pause(&f, "dr", Some("2099-01-01T00:00:00Z")).await;
    log_moves_on(&f).await;
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 50");
    assert_eq!(
        f.first_seq().await,
        51,
        "nothing the mirror lacks is purged"
    );
    assert_eq!(mirrored(&f).await.0, 50);
    // The operator reads which copy pins, and the alarm says how far short
    // (once the records are older than the status's min_age of 3 s, the
    // copy is what binds).
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let run = status(&f, "{}");
    assert!(
        run.stdout
            .contains("  replica dr (feeds DR): confirmed up to 50, last confirmed "),
        "{run:?}"
    );
    let behind = run
        .stderr
        .lines()
        .find(|l| l.starts_with("ALARM replica_behind tracker: consumer dr (the durable consumer stream DR copies the log through) has confirmed up to 50, 20 record(s) short of the log's last sequence 70"))
        .unwrap_or_else(|| panic!("{run:?}"));
    // Paused, and said so, with the command that resumes it.
    assert!(
        behind.contains("it is paused on the broker until 2099-01-01"),
        "{behind}"
    );
    assert!(
        behind.contains("resume it (nats consumer resume CREWLET_TRACKER_LOG dr)"),
        "{behind}"
    );
    assert!(run.stdout.contains(", paused until 2099-01-01"), "{run:?}");
    // What no sidecar can see is named as a limit.
    assert!(
        run.stdout
            .contains("  note: a copy in another JetStream domain"),
        "{run:?}"
    );
    // The preview says what leaving the copy out would free, exactly; a
    // name on no log is bad input.
    let op = operator(&f, "{}");
    let run = op.run(&["retention", "status", "--if-ignored", "dr"]);
    assert!(
        run.stdout.contains(
            "leaving out replica dr would move tracker's trim from 50 to 70 (20 records, about "
        ),
        "{run:?}"
    );
    let run = op.run(&["retention", "status", "--if-ignored", "nope", "--json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("unknown_replica") || run.stderr.contains("unknown_replica"),
        "{run:?}"
    );
    assert_eq!(
        term_state(&s.tick().await, TermName::ReplicaFloor),
        "value 50",
        "nothing written"
    );

    // Back: it catches up, and the trim follows it.
    pause(&f, "dr", None).await;
    assert!(mirror_holds(&f, 70).await, "the mirror catches up");
    let r = tick_until(&mut s, "value 70").await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 70");
    assert_eq!(f.first_seq().await, 71);
    assert_eq!(mirrored(&f).await, (70, 1), "every record the log ever had");
}

/// A consumer the domain names pins as a replica does, by what it
/// acknowledged; one that does not exist makes the term unreadable, and
/// nothing is purged.
#[tokio::test]
async fn a_named_consumer_pins_by_its_acks_and_a_missing_one_blocks() {
    let mut f = Fleet::new(50).await;
    f.config.domains[0].replicas.consumers = vec!["cdc".into()];
    f.healthy(&[("node-1", 50)], 50).await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert!(
        term_state(&r, TermName::ReplicaFloor).starts_with(
            "unreadable: consumers of CREWLET_TRACKER_LOG: consumer cdc (named in replicas.consumers) does not exist"
        ) || term_state(&r, TermName::ReplicaFloor)
            .starts_with("unreadable: consumer cdc (named in replicas.consumers) does not exist"),
        "{}",
        term_state(&r, TermName::ReplicaFloor)
    );
    assert_eq!(f.first_seq().await, 1, "nothing purged");
    // Said with the consumer's name, and a remedy that fits a named
    // consumer (never an empty name, never a copy's link).
    let run = status(&f, "{consumers: [cdc]}");
    assert!(!run.stderr.contains("consumer  "), "{run:?}");
    assert!(
        run.stderr.contains("consumer cdc is named in domains[].replicas.consumers but does not exist on CREWLET_TRACKER_LOG"),
        "{run:?}"
    );
    // validate refuses it, naming the field.
    let run = operator(&f, "{consumers: [cdc]}").run(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("domains[0].replicas.consumers[0]")
            && run
                .stdout
                .contains("consumer \"cdc\" does not exist on stream CREWLET_TRACKER_LOG"),
        "{run:?}"
    );

    // Delivered 20, acknowledged the first 12.
    f.durable_acked("cdc", 20, 12).await;
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 12");
    assert_eq!(f.first_seq().await, 13);
    // Behind, it is named as a named consumer: the remedy takes it out of
    // replicas.consumers (validate refuses ignoring a named consumer),
    // and its printed preview works.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let run = status(&f, "{consumers: [cdc]}");
    let behind = run
        .stderr
        .lines()
        .find(|l| {
            l.starts_with(
                "ALARM replica_behind tracker: consumer cdc (named in replicas.consumers)",
            )
        })
        .unwrap_or_else(|| panic!("{run:?}"));
    assert!(!behind.contains("replicas.ignore"), "{behind}");
    assert!(behind.contains("take it out of domains[].replicas.consumers (crewlet retention status --if-ignored cdc previews it)"), "{behind}");
    let run =
        operator(&f, "{consumers: [cdc]}").run(&["retention", "status", "--if-ignored", "cdc"]);
    assert!(
        run.stdout
            .contains("leaving out replica cdc would move tracker's trim"),
        "{run:?}"
    );
}

/// Fifty copies must not hide the one that matters: status lists the
/// laggard first, at most ten lines, then a count; a copy delivered past
/// what it confirmed is "confirming", not behind; a preview of several
/// names reads as one list.
#[tokio::test]
async fn many_copies_are_listed_laggard_first_and_a_confirming_copy_is_not_behind() {
    let mut f = Fleet::new(50).await;
    let names: Vec<String> = (0..12).map(|i| format!("c{i:02}")).collect();
    f.config.domains[0].replicas.consumers = names.clone();
    f.healthy(&[("node-1", 50)], 50).await;
    for (i, n) in names.iter().enumerate() {
        // c07 lags most: 10 acknowledged of 30 delivered.
        let acked = if n == "c07" { 10 } else { 38 + i };
        f.durable_acked(n, 30.max(acked), acked).await;
    }
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let list = format!("{{consumers: [{}]}}", names.join(", "));
    let run = status(&f, &list);
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("  named consumer ") || l.starts_with("  … and "))
        .collect();
    assert_eq!(lines.len(), 11, "{run:?}");
    assert!(
        lines[0].starts_with(
            "  named consumer c07: confirmed up to 10, delivered up to 30 (confirming)"
        ),
        "{lines:?}"
    );
    assert_eq!(
        lines[10],
        "  … and 2 more copies, each confirmed up to 48 or further (status --json lists every one)"
    );
    let op = operator(&f, &list);
    let run = op.run(&["retention", "status", "--if-ignored", "c07,c00,c01"]);
    assert!(
        run.stdout
            .contains("leaving out replicas c07, c00 and c01 would move"),
        "{run:?}"
    );
}

/// A replica the operator leaves out (`replicas.ignore`) pins nothing: the
/// trim goes past what it has not stored.
#[tokio::test]
async fn an_ignored_replica_pins_nothing() {
    let mut f = Fleet::new(50).await;
    f.config.domains[0].replicas.ignore = vec!["dr".into()];
    f.healthy(&[("node-1", 50)], 50).await;
    durable_mirror(&f).await;
    assert!(mirror_holds(&f, 50).await);
    pause(&f, "dr", Some("2099-01-01T00:00:00Z")).await;
    log_moves_on(&f).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "unbounded");
    assert_eq!(f.first_seq().await, 71, "left out on purpose");
    // Said on every run: status, and run --once.
    let run = status(&f, "{ignore: [dr]}");
    assert!(
        run.stdout
            .contains("  warning: replicas left out by replicas.ignore (they pin nothing): dr"),
        "{run:?}"
    );
    let run = operator(&f, "{ignore: [dr]}").run(&["retention", "run", "--once"]);
    assert!(
        run.stdout.contains(
            "tracker: warning: replicas left out by replicas.ignore (they pin nothing): dr"
        ),
        "{run:?}"
    );
}

/// A mirror made the older way (an ephemeral consumer the server creates
/// for it) cannot be protected: every tick and `status` say so as
/// `replica_unprotected`, naming it, and it pins nothing.
#[tokio::test]
async fn a_mirror_through_an_ephemeral_consumer_is_said_unprotected() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    ephemeral_mirror(&f).await;
    let r = f.sidecar().await.tick().await;
    let said: Vec<String> = r.alarms.iter().map(|a| a.line()).collect();
    assert!(
        said.iter().any(|l| l.starts_with("ALARM replica_unprotected tracker: OLDDR copies CREWLET_TRACKER_LOG through an ephemeral consumer")),
        "{said:?}"
    );
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "unbounded");
    let run = status(&f, "{}");
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("  warning: OLDDR copies this log through an ephemeral consumer"),
        "{run:?}"
    );
    // validate warns of it, and passes: the trim is as safe as it was;
    // what no sidecar can see is named as a limit.
    let run = operator(&f, "{}").run(&["validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("note: a copy in another JetStream domain through an ephemeral consumer is invisible here"),
        "{run:?}"
    );
    let json = operator(&f, "{}").run(&["validate", "--json"]);
    assert!(
        json.stdout
            .contains("\"limits\":[\"a copy in another JetStream domain"),
        "{json:?}"
    );
    assert!(
        run.stdout.contains(
            "stream OLDDR mirrors or sources CREWLET_TRACKER_LOG through an ephemeral consumer"
        ),
        "{run:?}"
    );
}

/// The copy that matters most: a mirror in another JetStream domain, on a
/// nats-server joined as a leaf node that is not always connected. The
/// leaf stopped, the trim stops at what its mirror confirmed; the leaf
/// back, the mirror catches up, the trim moves on, and the mirror holds
/// every record the log ever had.
#[tokio::test]
async fn a_mirror_across_a_leaf_node_pins_the_log_while_the_leaf_is_gone() {
    let leaf_port = crate::support::free_port();
    let hub = crate::support::Server::start_with(
        &format!(
            "jetstream {{ domain: hub }}\nleafnodes {{ listen: \"127.0.0.1:{leaf_port}\" }}\n"
        ),
        "nats",
    );
    let f = Fleet::on(hub, 50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    // The consumer the copy uses lives on the hub, beside the log.
    let (subject, body) = copy_consumer("leafdr");
    api(&f, &subject, body).await;
    let mut leaf = crate::support::Server::start_with(
        &format!("jetstream {{ domain: leaf }}\nleafnodes {{ remotes: [ {{ url: \"nats-leaf://127.0.0.1:{leaf_port}\" }} ] }}\n"),
        "nats",
    );
    let leaf_js = leaf.js().await;
    let leaf_api = |subject: String, body: Value| {
        let js = leaf_js.clone();
        async move { raw_api(&js, &subject, body).await }
    };
    let created = leaf_api(
        "STREAM.CREATE.LEAFDR".into(),
        json!({"name": "LEAFDR", "storage": "file", "num_replicas": 1,
               "mirror": {"name": STREAM, "external": {"api": "$JS.hub.API"},
                          "consumer": {"name": "leafdr", "deliver_subject": "leafdr.deliver"}}}),
    )
    .await;
    assert!(created.get("error").is_none(), "{created}");
    let held = |want: u64| async move {
        eventually(30, || async move {
            leaf_api("STREAM.INFO.LEAFDR".into(), json!({})).await["state"]["messages"].as_u64()
                == Some(want)
        })
        .await
    };
    assert!(held(50).await, "the leaf's mirror copies the log");
    let mut s = f.sidecar().await;
    let r = tick_until(&mut s, "value 50").await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 50");
    assert_eq!(f.first_seq().await, 51);

    // The leaf goes away; the log moves on without it.
    leaf.kill();
    log_moves_on(&f).await;
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 50");
    assert_eq!(
        f.first_seq().await,
        51,
        "nothing the leaf's mirror lacks is purged"
    );

    // Back on its store: the mirror catches up, and the trim follows.
    leaf.restart();
    let leaf_js = leaf.js().await;
    let caught_up = eventually(30, || {
        let js = leaf_js.clone();
        async move {
            let reply = js
                .client()
                .request("$JS.API.STREAM.INFO.LEAFDR".to_string(), "{}".into())
                .await;
            reply
                .ok()
                .and_then(|r| serde_json::from_slice::<Value>(&r.payload).ok())
                .and_then(|v| v["state"]["messages"].as_u64())
                == Some(70)
        }
    })
    .await;
    assert!(caught_up, "the mirror catches up once the leaf is back");
    let r = tick_until(&mut s, "value 70").await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 70");
    assert_eq!(f.first_seq().await, 71);
}

/// A listing asked by offset can skip a consumer (another deleted between
/// its pages): a replica the last listing named that this one does not is
/// unreadable until its leader says it is gone, never silently left out;
/// one deleted for real is confirmed gone, and the trim goes on.
#[tokio::test]
async fn a_replica_a_listing_skips_is_unreadable_until_its_deletion_is_confirmed() {
    let f = Fleet::new(50).await;
    let mut s = mirror_confirmed(&f).await;
    pause(&f, "dr", Some("2099-01-01T00:00:00Z")).await;
    log_moves_on(&f).await;
    // The next listing skips `dr`, which still exists and pins 50.
    s.broker.skip_in_listings("dr");
    let r = s.tick().await;
    let state = term_state(&r, TermName::ReplicaFloor);
    assert!(
        state.starts_with("unreadable") && state.contains("replica dr"),
        "{state}"
    );
    assert_eq!(
        f.first_seq().await,
        51,
        "nothing the mirror lacks is purged"
    );
    // Deleted for real (the copy gone for good): its leader says so, and
    // the trim moves on.
    api(&f, "STREAM.DELETE.DR", json!({})).await;
    api(&f, &format!("CONSUMER.DELETE.{STREAM}.dr"), json!({})).await;
    let r = s.tick().await;
    assert!(
        !term_state(&r, TermName::ReplicaFloor).starts_with("unreadable"),
        "{:?}",
        r.domains[0].answer.terms
    );
    assert!(f.first_seq().await > 51);
}

/// OLDDR, a mirror of the log made the older way: through an ephemeral
/// consumer the server creates for it.
async fn ephemeral_mirror(f: &Fleet) {
    api(
        f,
        "STREAM.CREATE.OLDDR",
        json!({"name": "OLDDR", "storage": "file", "num_replicas": 1,
               "mirror": {"name": STREAM}}),
    )
    .await;
}

/// A plain stream in memory named `name`, on `<name>.>`.
async fn memory_stream(f: &Fleet, name: &str) {
    api(
        f,
        &format!("STREAM.CREATE.{name}"),
        json!({"name": name, "storage": "memory", "num_replicas": 1, "subjects": [format!("{name}.>")]}),
    )
    .await;
}

/// A running sidecar lists the whole account only now and then, and between
/// those reads only the pages that hold its logs: streams made since, even
/// ones that move the logs' place in the listing, never leave a log's state
/// unproven or old, and a mirror through an ephemeral consumer made after
/// the first tick is said within a few ticks (the whole listing is read
/// again in the background once a page shows the account changed).
#[tokio::test]
async fn a_running_tick_keeps_its_logs_state_and_sees_a_copy_made_after_it_started() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 50)], 50).await;
    // Thirty logs side by side: their page is read, not each log alone.
    let mut config = f.config.clone();
    for i in 0..29 {
        let name = format!("M{i:02}");
        memory_stream(&f, &name).await;
        let mut d = config.domains[0].clone();
        d.name = format!("m{i:02}");
        d.stream = name;
        config.domains.push(d);
    }
    let mut s = crewlet::tick::Sidecar::new(config, f.broker().await);
    let said = |r: &crewlet::tick::TickReport| {
        r.alarms.iter().any(|a| {
            a.line()
                .starts_with("ALARM replica_unprotected tracker: OLDDR copies CREWLET_TRACKER_LOG")
        })
    };
    let r = s.tick().await;
    assert!(!said(&r), "{:?}", r.alarms);
    // Streams whose names sort before every log's: the logs' place in the
    // listing moves by 300.
    for i in 0..300 {
        memory_stream(&f, &format!("A{i:03}")).await;
    }
    ephemeral_mirror(&f).await;
    let mut seen = false;
    for round in 0..6u64 {
        f.publish(1).await;
        let (_, last, _) = f.state().await;
        let r = s.tick().await;
        for d in &r.domains {
            let a = &d.answer;
            assert!(
                a.stream_error.is_none(),
                "round {round}, {}: {:?}",
                a.stream,
                a.stream_error
            );
        }
        let a = &r.domains[0].answer;
        assert_eq!(
            a.last_seq, last,
            "round {round}: the log's state as it is now"
        );
        assert!(
            matches!(r.domains[0].published, Some(Ok(_))),
            "round {round}"
        );
        seen = said(&r);
        if seen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(seen, "the copy made after the first tick was never said");
}

/// The hole a trial found: a durable mirror whose consumer on the log is
/// deleted (the mirror's configuration still names it) used to pin
/// nothing, so the trim passed records the mirror never stored and it
/// resumed with a gap. Now the trim holds at what the copy confirmed,
/// `replica_unprotected` names the copy and prints the request that
/// recreates its consumer, and that request, run as printed, brings the
/// mirror back with every record.
#[tokio::test]
async fn a_copy_whose_durable_consumer_is_deleted_holds_the_trim_until_it_is_back() {
    let f = Fleet::new(50).await;
    let mut s = mirror_confirmed(&f).await;
    assert_eq!(f.first_seq().await, 51);
    api(&f, &format!("CONSUMER.DELETE.{STREAM}.dr"), json!({})).await;
    log_moves_on(&f).await;
    let r = s.tick().await;
    let state = term_state(&r, TermName::ReplicaFloor);
    assert!(
        state.starts_with(
            "unreadable: DR copies the log through durable consumer dr, which does not exist"
        ),
        "{state}"
    );
    assert_eq!(
        f.first_seq().await,
        51,
        "nothing the mirror lacks is purged"
    );
    // status pages for it, with the request that recreates the consumer.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let run = status(&f, "{}");
    assert_eq!(run.code, 1, "{run:?}");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("ALARM replica_unprotected tracker: DR mirrors CREWLET_TRACKER_LOG through durable consumer dr, which does not exist on the log"))
        .unwrap_or_else(|| panic!("{run:?}"));
    // The printed preview works in this state, and says what leaving the
    // copy out would free.
    let preview = operator(&f, "{}").run(&["retention", "status", "--if-ignored", "dr"]);
    assert!(
        preview
            .stdout
            .contains("leaving out replica dr would move tracker's trim"),
        "{preview:?}"
    );
    // validate warns of it with the same request (exit 0: the trim is
    // safe, the copy is what is at risk).
    let run = operator(&f, "{}").run(&["validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("stream DR copies CREWLET_TRACKER_LOG through durable consumer dr, which does not exist")
            && run.stdout.contains("nats req '$JS.API.CONSUMER.CREATE.CREWLET_TRACKER_LOG.dr'"),
        "{run:?}"
    );
    // The printed request, sent as `nats req` sends it: the subject and
    // the body as the shell would pass them.
    let (subject, body) = printed_request(line);
    let reply =
        f.js.client()
            .request(subject, body.into())
            .await
            .expect("the printed request is answered");
    let reply: Value = serde_json::from_slice(&reply.payload).expect("JSON");
    assert!(reply.get("error").is_none(), "{reply}");
    assert!(mirror_holds(&f, 70).await, "the mirror catches up");
    let r = tick_until(&mut s, "value 70").await;
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 70");
    assert!(
        !r.alarms.iter().any(|a| a.alarm == "replica_unprotected"),
        "{:?}",
        r.alarms
    );
    assert_eq!(f.first_seq().await, 71);
    assert_eq!(mirrored(&f).await, (70, 1), "every record the log ever had");
}

/// The `nats req SUBJECT BODY` a remedy prints: its two words, unquoted
/// as a POSIX shell would.
fn printed_request(line: &str) -> (String, String) {
    let at = line.find("nats req ").expect("a nats req command") + "nats req ".len();
    let words = shell_words(&line[at..]);
    (words[0].clone(), words[1].clone())
}

/// Splits `text` into words as a POSIX shell does for plain and single-
/// quoted words (what `human::shell_word` prints), up to the first
/// unquoted word that ends the command.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in text.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            ' ' if !quoted => {
                if started {
                    words.push(std::mem::take(&mut cur));
                    started = false;
                    if words.len() == 2 {
                        break;
                    }
                }
            }
            c => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(cur);
    }
    words
}

/// Every JetStream request docs/contract.md's "Protecting a mirror or
/// source" prints, in order: the subject line, then its JSON body.
fn contract_requests() -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/contract.md"),
    )
    .expect("docs/contract.md");
    let section = text
        .split("### Protecting a mirror or source")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the section");
    let mut out = Vec::new();
    // The bare code blocks (the `sh` block repeats the first two).
    for block in section.split("```").skip(1).step_by(2) {
        let Some(body) = block.strip_prefix('\n') else {
            continue;
        };
        for request in body.split("\n\n") {
            let (subject, json) = request.trim().split_once('\n').expect("subject, body");
            let body: Value = serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("{subject}: the body is not JSON: {e}"));
            out.push((subject.trim().to_string(), body));
        }
    }
    out
}

/// docs/contract.md's requests, sent as printed, are accepted by the
/// server: a durable mirror, a source filtered on its consumer, and a
/// mirror from a start sequence. Each copies what it should, each is a
/// replica that pins the log, and the filtered one never holds the trim
/// for records outside its filter.
#[tokio::test]
async fn the_contracts_copies_are_accepted_and_each_pins_the_log() {
    let f = Fleet::new(50).await;
    f.healthy(&[("node-1", 60)], 60).await;
    let requests = contract_requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    for (subject, body) in requests {
        let reply =
            f.js.client()
                .request(subject.clone(), body.to_string().into())
                .await
                .unwrap_or_else(|e| panic!("{subject}: {e}"));
        let v: Value = serde_json::from_slice(&reply.payload).expect("JSON");
        assert!(v.get("error").is_none(), "{subject}: {v}");
    }
    // Ten audit records after the fifty ordinary ones.
    for i in 0..10 {
        f.js.publish(format!("{STREAM}.audit.e{i}"), "a".into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    let count = |name: &'static str| {
        let f = &f;
        async move {
            let v = api(f, &format!("STREAM.INFO.{name}"), json!({})).await;
            (
                v["state"]["messages"].as_u64().unwrap_or(0),
                v["state"]["first_seq"].as_u64().unwrap_or(0),
            )
        }
    };
    assert!(
        eventually(20, || async { count("DR").await == (60, 1) }).await,
        "DR: {:?}",
        count("DR").await
    );
    assert!(
        eventually(20, || async { count("AUDIT").await.0 == 10 }).await,
        "AUDIT: {:?}",
        count("AUDIT").await
    );
    assert!(
        eventually(20, || async { count("RECENT").await == (21, 40) }).await,
        "RECENT: {:?}",
        count("RECENT").await
    );
    let mut s = f.sidecar().await;
    let r = tick_until(&mut s, "value 60").await;
    let t = r.domains[0]
        .answer
        .terms
        .iter()
        .find(|t| t.term == TermName::ReplicaFloor)
        .expect("term")
        .clone();
    let names: Vec<&str> = t
        .replicas
        .as_ref()
        .expect("copies")
        .consumers
        .iter()
        .map(|c| c.consumer.as_str())
        .collect();
    assert_eq!(names, ["audit", "dr", "recent"], "each is a replica");
    assert_eq!(term_state(&r, TermName::ReplicaFloor), "value 60");
    assert_eq!(
        f.first_seq().await,
        61,
        "every copy has every record it takes"
    );
}
