//! On a three-server cluster (cluster.md): R3 buckets from `init`,
//! replica warnings from `validate`, the duty handed over when its holder
//! dies, leader changes and a lost server during ticks, never a purge past
//! what the rows allow.

use std::time::{Duration, Instant};

use crate::support::cluster::Cluster;
use crate::support::fleet::*;
use crate::support::{create_stream, crewlet_env, log_stream, Scratch};

/// Waits (at most `secs`) until the log's first sequence is `first`: the
/// trim went that far; `what` says which trim, should it not.
async fn trims_to(f: &Fleet, first: u64, secs: u64, what: &str) {
    let until = Instant::now() + Duration::from_secs(secs);
    while f.first_seq().await != first {
        assert!(Instant::now() < until, "{what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Three `crewlet retention run` processes, one beside each server of the
/// fleet's cluster (its own server first in its list), with `retention`
/// added to the settings `yaml` gives; each one's stderr goes where
/// `stderr(i)` says.
fn sidecar_per_server(
    f: &Fleet,
    s: &Scratch,
    retention: &str,
    stderr: impl Fn(usize) -> std::process::Stdio,
) -> Vec<std::process::Child> {
    (0..3)
        .map(|i| {
            let text = yaml(&f.url_from(i), &format!("sidecar-{i}"), 3).replace(
                "retention: {tick: 1s,",
                &format!("retention: {{tick: 1s,{retention}"),
            );
            let cfg = s.write(&format!("s{i}.yaml"), &text);
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_crewlet"));
            cmd.args([
                "--log-format",
                "json",
                "retention",
                "run",
                "--config",
                cfg.to_str().expect("utf-8"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(stderr(i));
            crate::support::hermetic(&mut cmd);
            cmd.spawn().expect("start a sidecar")
        })
        .collect()
}

fn yaml(url: &str, node: &str, replicas: usize) -> String {
    format!(
        "node: {{id: {node}}}\nnats: {{url: \"{url}\"}}\nbuckets: {{replicas: {replicas}}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 1s, snapshot_interval: 100ms, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    )
}

/// `init` with `buckets.replicas: 3` creates R3 buckets; `validate` on the
/// cluster warns about a single-replica stream, and `init` names an
/// existing bucket whose replicas differ.
#[tokio::test]
async fn init_makes_r3_buckets_and_validate_warns_about_single_replicas() {
    let cluster = Cluster::start(3).await;
    let js = cluster.servers[0].js().await;
    let subjects = [format!("{STREAM}.>"), "crewlet.tracker.gate".to_string()];
    let subjects: Vec<&str> = subjects.iter().map(String::as_str).collect();
    create_stream(&js, log_stream(STREAM, &subjects, GIB)).await; // R1
    let s = Scratch::new();
    let r3 = s.write("r3.yaml", &yaml(&cluster.urls(), "node-1", 3));
    let r3 = r3.to_str().expect("utf-8");
    let run = crewlet_env(&["retention", "init", "--config", r3], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for bucket in ["crewlet_presence", "crewlet_floors", "crewlet_duty"] {
        let info = js
            .get_stream(format!("KV_{bucket}"))
            .await
            .expect("bucket stream");
        assert_eq!(info.cached_info().config.num_replicas, 3, "{bucket}");
    }
    let run = crewlet_env(&["validate", "--config", r3], &[]);
    assert_eq!(run.code, 0, "warnings only: {run:?}");
    assert!(
        run.stdout.lines().any(|l| l.starts_with("warning:")
            && l.contains(&format!(
                "stream {STREAM} has 1 replica(s) on a cluster of 3 servers"
            ))
            && l.contains(&format!("nats stream edit {STREAM} --replicas 3"))),
        "{run:?}"
    );
    assert!(
        !run.stdout.contains("bucket crewlet_presence has"),
        "R3 buckets are fine: {run:?}"
    );
    let r1 = s.write("r1.yaml", &yaml(&cluster.urls(), "node-1", 1));
    let run = crewlet_env(
        &["retention", "init", "--config", r1.to_str().expect("utf-8")],
        &[],
    );
    assert!(
        run.stderr.contains(
            "bucket crewlet_presence (presence) has 3 replica(s) but buckets.replicas is 1"
        ),
        "{run:?}"
    );
}

/// Three sidecars, one beside each server: SIGKILL the holder and another
/// takes the duty within one lease TTL (3 ticks) plus a tick, and the trim
/// goes on. The handover time is printed for the closing figures.
#[tokio::test]
async fn the_duty_fails_over_when_its_holder_is_killed() {
    let f = Fleet::cluster(40).await;
    f.healthy(&[("node-1", 30), ("node-2", 30)], 40).await;
    let s = Scratch::new();
    let mut sidecars = sidecar_per_server(&f, &s, "", |_| std::process::Stdio::null());
    // Who holds it: the floors row names the publisher.
    let until = Instant::now() + Duration::from_secs(15);
    let first = loop {
        if let Some(by) = f
            .floors_row()
            .await
            .and_then(|row| row["by"].as_str().map(str::to_string))
        {
            break by;
        }
        assert!(Instant::now() < until, "no sidecar published");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(f.first_seq().await, 31, "the holder trims to the nodes' 30");
    let index: usize = first
        .strip_prefix("sidecar-")
        .and_then(|i| i.parse().ok())
        .expect("a sidecar name");
    let killed = Instant::now();
    let _ = sidecars[index].kill();
    let _ = sidecars[index].wait();
    // The nodes move on: only a new holder can trim past 30.
    f.position("node-1", 40).await;
    f.position("node-2", 40).await;
    f.snapshot("node-1", 40).await;
    f.snapshot("node-2", 40).await;
    let until = Instant::now() + Duration::from_secs(12);
    let next = loop {
        if let Some(row) = f.floors_row().await {
            let by = row["by"].as_str().unwrap_or_default().to_string();
            if by != first {
                break by;
            }
        }
        assert!(Instant::now() < until, "no other sidecar took the duty");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let handover = killed.elapsed();
    eprintln!("failover: {first} killed, {next} published after {handover:?}");
    // Lease TTL is 3 ticks (3 s); one more tick to publish.
    assert!(handover < Duration::from_secs(5), "{handover:?}");
    trims_to(&f, 41, 10, "the new holder trims to 40").await;
    for mut c in sidecars {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Leader stepdowns of the log and of every bucket while a sidecar ticks:
/// each tick fails cleanly or succeeds, and nothing past a pinned node is
/// ever purged.
#[tokio::test]
async fn leader_stepdowns_during_ticks_never_purge_past_a_pin() {
    let f = Fleet::cluster(60).await;
    f.healthy(&[("node-1", 60), ("node-2", 60)], 60).await;
    f.position("node-3", 20).await; // absent, still counted: pins at 20
    f.snapshot("node-3", 20).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let l = Loop::start(&f).await;
    let client = async_nats::connect(f.server.url()).await.expect("connect");
    let mut streams = vec![STREAM.to_string()];
    streams.extend(
        f.config
            .buckets
            .all()
            .iter()
            .map(|(_, b)| format!("KV_{b}")),
    );
    for round in 0..6 {
        for s in &streams {
            let _ = client
                .request(format!("$JS.API.STREAM.LEADER.STEPDOWN.{s}"), "".into())
                .await;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            f.first_seq().await <= 21,
            "round {round}: purged past node-3's 20 (first {})",
            f.first_seq().await
        );
    }
    // Once the pin goes (node-3 catches up), the trim goes on.
    f.position("node-3", 60).await;
    f.snapshot("node-3", 60).await;
    trims_to(&f, 61, 15, "the trim went on after the stepdowns").await;
    l.stop().await;
}

/// One server killed while the trim goes on: the duty holder keeps
/// trimming through the others, and status through a list that starts with
/// the dead server still answers; the server comes back and catches up.
#[tokio::test]
async fn a_lost_server_stops_neither_the_trim_nor_status() {
    let mut f = Fleet::cluster(30).await;
    f.healthy(&[("node-1", 20), ("node-2", 20)], 30).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let l = Loop::start(&f).await;
    trims_to(&f, 21, 10, "trims before the loss").await;
    let dead = f.peers[0].url();
    f.peers[0].kill();
    f.position("node-1", 30).await;
    f.position("node-2", 30).await;
    f.snapshot("node-1", 30).await;
    f.snapshot("node-2", 30).await;
    trims_to(&f, 31, 15, "trims with one server down").await;
    let s = Scratch::new();
    let list = format!("{dead},{}", f.url());
    let cfg = s.write("beside-dead.yaml", &yaml(&list, "sidecar-dead", 3));
    let run = tokio::task::spawn_blocking(move || {
        crewlet_env(
            &[
                "retention",
                "status",
                "--json",
                "--config",
                cfg.to_str().expect("utf-8"),
            ],
            &[],
        )
    })
    .await
    .expect("status");
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    assert!(run.stdout.contains("\"domains\""), "{run:?}");
    // The duty is held by the loop's sidecar: a read through a list that
    // starts with the dead server says so, never that nobody holds it.
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(v["duty_holder"], "node-1", "{run:?}");
    assert!(!run.stderr.contains("duty_unheld"), "{run:?}");
    l.stop().await;
}

/// A sidecar whose lease was taken over (it expired while the sidecar was
/// stalled, and another claimed it) takes a new session: its later release
/// leaves the new holder's lease alone, and a later claim is a new lease.
#[tokio::test]
async fn a_lost_lease_means_a_new_session() {
    let f = Fleet::new(10).await;
    let mut a = f.sidecar().await;
    a.tick().await;
    assert!(a.duty.holds());
    let first = a.duty.session().to_string();
    // The lease lapses (as after a stall longer than its TTL) and node-2
    // claims it.
    f.delete("crewlet_duty", crewlet::rows::DUTY_KEY).await;
    let mut b = f.sidecar_as("node-2").await;
    b.tick().await;
    assert!(b.duty.holds());
    let r = a.tick().await;
    assert!(!a.duty.holds(), "{:?}", r.duty);
    assert_ne!(a.duty.session(), first, "a new session after the loss");
    a.duty.release(&a.broker).await;
    let lease = f
        .get("crewlet_duty", crewlet::rows::DUTY_KEY)
        .await
        .expect("node-2's lease is still there");
    assert_eq!(lease["holder"], "node-2", "{lease}");
    assert_eq!(lease["session"], b.duty.session(), "{lease}");
    b.duty.release(&b.broker).await;
}

/// The age proof proves only what it scanned: a reader whose server has
/// less of the log than the leader said (a replica behind) ends short of
/// the slice, and the records it never saw are not proven old.
#[tokio::test]
async fn the_age_proof_proves_only_what_its_reader_saw() {
    let f = Fleet::new(10).await;
    let broker = f.broker().await;
    let cutoff = chrono::Utc::now() + chrono::Duration::seconds(60); // all old
                                                                     // The leader said the log runs to 15; this server has 10.
    let first = broker
        .first_unproven(STREAM, 1, 15, cutoff, 100_000)
        .await
        .expect("scan");
    assert_eq!(first, Some(11), "records 11..=15 were never seen");
    // Nothing at all from 11 on.
    let first = broker
        .first_unproven(STREAM, 11, 15, cutoff, 100_000)
        .await
        .expect("scan");
    assert_eq!(first, Some(11));
    // A slice the reader saw to its end is proven.
    let first = broker
        .first_unproven(STREAM, 1, 10, cutoff, 100_000)
        .await
        .expect("scan");
    assert_eq!(first, None);
}

/// `set-capacity` on an R3 log: a raise the peers can place is applied and
/// read back; one they cannot (each server's store holds 256 MiB) is the
/// broker's refusal, reported with its own error, the ceiling unchanged.
#[tokio::test]
async fn set_capacity_on_a_cluster_is_applied_or_refused_by_the_peers() {
    const MIB: i64 = 1 << 20;
    let cluster = Cluster::start_with(3, "jetstream { max_file_store: 268435456 }\n").await;
    let js = cluster.servers[0].js().await;
    let subjects = [format!("{STREAM}.>"), "crewlet.tracker.gate".to_string()];
    let subjects: Vec<&str> = subjects.iter().map(String::as_str).collect();
    let mut log = log_stream(STREAM, &subjects, 64 * MIB);
    log.num_replicas = 3;
    create_stream(&js, log).await;
    crate::support::wait_for_leader(&js, STREAM).await;
    let url = cluster
        .servers
        .iter()
        .map(|s| s.url())
        .collect::<Vec<_>>()
        .join(",");
    let s = Scratch::new();
    let cfg = s.write("c.yaml", &yaml(&url, "node-1", 3));
    let cfg = cfg.to_str().expect("utf-8").to_string();
    let sc = |target: &str| {
        crewlet_env(
            &[
                "retention",
                "set-capacity",
                STREAM,
                target,
                "-confirm",
                target,
                "--config",
                &cfg,
            ],
            &[],
        )
    };
    let max = || async {
        js.get_stream(STREAM)
            .await
            .expect("stream")
            .cached_info()
            .config
            .max_bytes
    };
    let run = sc("128MiB");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("the broker reports 134217728"),
        "{run:?}"
    );
    assert_eq!(max().await, 128 * MIB);
    let run = sc("512MiB");
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("the broker refused the new ceiling of CREWLET_TRACKER_LOG"),
        "{run:?}"
    );
    assert_eq!(max().await, 128 * MIB, "unchanged");
}

/// The leader's word only: with two of three servers stopped, the stream
/// has no leader, and the member left answers stream info from its own
/// state (nats-server lets every member of a leaderless group answer). That
/// answer names no leader and used to be taken as the log's state, the cut
/// every bucket read and pin is proven against. Now it is `no leader`.
#[tokio::test]
async fn stream_info_without_a_leader_proves_nothing() {
    let f = Fleet::cluster(10).await;
    let broker = crewlet::broker::connect(&f.server.url(), &f.config.nats, "test")
        .await
        .expect("connect");
    assert!(broker.stream_state(STREAM).await.is_ok(), "led at first");
    // A member answers leaderless only once the group is older than its
    // startup grace (10 s).
    tokio::time::sleep(Duration::from_secs(11)).await;
    for p in &f.peers {
        p.signal(libc::SIGSTOP);
    }
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut said = Vec::new();
    let mut no_leader = false;
    while Instant::now() < deadline && !no_leader {
        match broker.stream_state(STREAM).await {
            Ok(s) => said.push(format!("ok last_seq {}", s.last_seq)),
            Err(e) => {
                no_leader = e.to_string().contains("no leader for");
                said.push(e.to_string());
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Nor does the account's stream listing prove the log now: the tick
    // reads it alone, and is told the same.
    let listed = broker
        .listing(&[STREAM], Duration::from_secs(2))
        .await
        .map(|l| l.states.contains_key(STREAM));
    for p in &f.peers {
        p.signal(libc::SIGCONT);
    }
    assert!(no_leader, "a leaderless answer is refused: {said:#?}");
    assert!(
        !matches!(listed, Ok(true)),
        "a leaderless listing proves nothing: {listed:?}"
    );
}

/// On a cluster the feed consumer's answer counts only as its leader's
/// (docs/trim-floor.md, Proven current): it binds as on one server, and
/// its leader stepping down between and during ticks never lets a tick
/// read it as caught up.
#[tokio::test]
async fn the_feed_binds_on_a_cluster_and_its_leaders_stepdowns_never_purge_past_it() {
    use crewlet::floor::TermName;
    let mut f = Fleet::cluster(60).await;
    f.config.domains[0].feed_consumer = Some("tracker-feed".into());
    f.healthy(&[("node-1", 60), ("node-2", 60)], 60).await;
    f.durable_acked("tracker-feed", 30, 25).await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::FeedAckFloor), "value 25");
    assert_eq!(f.first_seq().await, 26);
    let client = async_nats::connect(f.server.url()).await.expect("connect");
    f.publish(10).await;
    for round in 0..5 {
        let _ = client
            .request(
                format!("$JS.API.CONSUMER.LEADER.STEPDOWN.{STREAM}.tracker-feed"),
                "".into(),
            )
            .await;
        let r = s.tick().await;
        let feed = term_state(&r, TermName::FeedAckFloor);
        // A new leader may answer from an ack floor it has not yet caught up
        // to, which only keeps more; past 25 is what must never be read.
        let behind = feed
            .strip_prefix("value ")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v <= 25);
        assert!(
            behind || feed.starts_with("unreadable"),
            "round {round}: {feed}"
        );
        assert_eq!(f.first_seq().await, 26, "round {round}");
    }
}

/// Elections are not pages: three sidecars, one beside each server, run
/// while one server is killed and brought back. Each read the lost server
/// answered is tried elsewhere, the leaders move, and what that costs
/// ends within `retention.alarm_grace`: every sidecar logs it as
/// `alarm_suppressed` and raises nothing.
#[tokio::test]
async fn a_server_restart_within_the_grace_raises_no_alarm_on_any_sidecar() {
    let mut f = Fleet::cluster(30).await;
    f.healthy(&[("node-1", 20), ("node-2", 20)], 30).await;
    let s = Scratch::new();
    let logs: Vec<std::path::PathBuf> = (0..3)
        .map(|i| s.dir.path().join(format!("s{i}.log")))
        .collect();
    let mut sidecars = sidecar_per_server(&f, &s, " alarm_grace: 20s,", |i| {
        std::fs::File::create(&logs[i]).expect("log file").into()
    });
    trims_to(&f, 21, 20, "trims before the loss").await;
    // Settled: from here on, every alarm would be the restart's.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before: Vec<usize> = logs.iter().map(|l| count(l, "alarm_raised")).collect();
    f.peers[0].kill();
    tokio::time::sleep(Duration::from_secs(6)).await;
    f.peers[0].restart();
    // The fleet moves on meanwhile, and the trim with it.
    f.position("node-1", 30).await;
    f.position("node-2", 30).await;
    f.snapshot("node-1", 30).await;
    f.snapshot("node-2", 30).await;
    trims_to(&f, 31, 20, "trims after the restart").await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    for c in &mut sidecars {
        let _ = c.kill();
        let _ = c.wait();
    }
    let raised: Vec<usize> = logs
        .iter()
        .zip(&before)
        .map(|(l, b)| count(l, "alarm_raised") - b)
        .collect();
    let suppressed: Vec<usize> = logs.iter().map(|l| count(l, "alarm_suppressed")).collect();
    eprintln!("after the restart: raised {raised:?}, suppressed {suppressed:?}");
    for (i, l) in logs.iter().enumerate() {
        assert_eq!(
            raised[i],
            0,
            "sidecar-{i} raised alarms:\n{}",
            lines_with(l, "alarm_raised")
        );
    }
}

/// How many JSON log lines of `path` carry `"event":"<event>"`.
fn count(path: &std::path::Path, event: &str) -> usize {
    lines_with(path, event).lines().count()
}

/// The JSON log lines of `path` that carry `"event":"<event>"`.
fn lines_with(path: &std::path::Path, event: &str) -> String {
    let want = format!("\"event\":\"{event}\"");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&want))
        .map(|l| format!("{l}\n"))
        .collect()
}
