//! A domain on a real broker with the contract's buckets, and helpers that
//! write rows the way nodes and tools do (raw JSON into KV), for tests of
//! the tick.

#![allow(dead_code)]

use std::time::Duration;

use async_nats::jetstream;
use chrono::Utc;
use serde_json::{json, Value};

use super::{create_stream, log_stream, Server};
use crewlet::broker::Broker;
use crewlet::config::{self, Config, Dur};
use crewlet::rows::Timestamp;
use crewlet::tick::Sidecar;

pub const STREAM: &str = "CREWLET_TRACKER_LOG";

/// A node's write, retried while the broker does not answer (a cluster
/// electing a leader after a server is lost), as a real node would.
macro_rules! retried {
    ($what:expr, $write:expr) => {{
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            match $write {
                Ok(v) => break v,
                Err(crewlet::node::NodeError::Broker(_))
                    if std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(e) => panic!("{}: {e}", $what),
            }
        }
    }};
}
pub const GIB: i64 = 1 << 30;

pub fn ts(offset_secs: i64) -> String {
    Timestamp(Utc::now() + chrono::Duration::seconds(offset_secs)).to_rfc3339()
}

/// A configuration for tests: one domain on [`STREAM`], trim enabled,
/// `min_age` zero so that age binds only where a test wants it. Built in
/// code, not YAML: `min_age: 0` is below what validation allows even with
/// unsafe limits (the cross-field rule), and the tick does not depend on
/// validation.
pub fn test_config(url: &str) -> Config {
    let mut c = config::check(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, backup_owner: oncall, snapshot_quorum: 2, allow_unsafe_limits: true, min_age: 3s, snapshot_interval: 1s, fence_window: 2s}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n"
    ))
    .config
    .expect("valid test config");
    c.retention.min_age = Dur::secs(0);
    c
}

/// The domain's log as the fleet creates it: its records and its gate
/// subject, `discard: new`, `max_bytes`, `replicas`.
fn log_config(max_bytes: i64, replicas: usize) -> jetstream::stream::Config {
    let subjects = [format!("{STREAM}.>"), "crewlet.tracker.gate".to_string()];
    let subjects: Vec<&str> = subjects.iter().map(String::as_str).collect();
    let mut log = log_stream(STREAM, &subjects, max_bytes);
    log.num_replicas = replicas;
    log
}

pub struct Fleet {
    pub server: Server,
    /// The other servers of a cluster ([`Fleet::cluster`]); empty for one.
    pub peers: Vec<Server>,
    pub js: jetstream::Context,
    pub config: Config,
}

impl Fleet {
    /// A server, the domain's stream with `records` records, and every
    /// bucket of the contract.
    pub async fn new(records: u64) -> Fleet {
        Self::with_max_bytes(records, GIB).await
    }

    /// As [`Fleet::new`], with the stream's `max_bytes` set.
    pub async fn with_max_bytes(records: u64, max_bytes: i64) -> Fleet {
        Self::set_up(Server::start(), Vec::new(), max_bytes, records).await
    }

    /// As [`Fleet::new`], on the oldest nats-server release crewlet
    /// supports.
    pub async fn on_oldest(records: u64) -> Fleet {
        Self::set_up(Server::start_oldest(), Vec::new(), GIB, records).await
    }

    /// As [`Fleet::new`], on `server` (started with a configuration of the
    /// test's own: a JetStream domain, a leaf node listener).
    pub async fn on(server: Server, records: u64) -> Fleet {
        Self::set_up(server, Vec::new(), GIB, records).await
    }

    /// A three-server cluster with the domain's stream and every bucket
    /// at three replicas, `records` records in the log.
    pub async fn cluster(records: u64) -> Fleet {
        let mut cluster = super::cluster::Cluster::start(3).await;
        let server = cluster.servers.remove(0);
        Self::set_up(server, cluster.servers, GIB, records).await
    }

    /// The domain's log (R3 with peers), the buckets, `records` records.
    async fn set_up(server: Server, peers: Vec<Server>, max_bytes: i64, records: u64) -> Fleet {
        let js = server.js().await;
        let replicas = if peers.is_empty() { 1 } else { 3 };
        create_stream(&js, log_config(max_bytes, replicas)).await;
        let url = std::iter::once(&server)
            .chain(peers.iter())
            .map(Server::url)
            .collect::<Vec<_>>()
            .join(",");
        let mut config = test_config(&url);
        config.buckets.replicas = replicas;
        let fleet = Fleet {
            server,
            peers,
            js,
            config,
        };
        let broker = fleet.broker().await;
        for spec in crewlet::buckets::contract_buckets(&fleet.config) {
            broker.ensure_bucket(&spec).await.expect("create bucket");
        }
        fleet.publish(records).await;
        fleet
    }

    /// The URL clients use: every server of a cluster, comma-separated.
    pub fn url(&self) -> String {
        self.url_from(0)
    }

    /// Every server's URL, server `first` first (a sidecar beside a server
    /// lists its own first); 0 is [`Fleet::server`], then the peers.
    pub fn url_from(&self, first: usize) -> String {
        let all: Vec<String> = std::iter::once(&self.server)
            .chain(self.peers.iter())
            .map(Server::url)
            .collect();
        let mut urls = vec![all[first].clone()];
        urls.extend(
            all.iter()
                .enumerate()
                .filter(|(i, _)| *i != first)
                .map(|(_, u)| u.clone()),
        );
        urls.join(",")
    }

    pub async fn broker(&self) -> Broker {
        crewlet::broker::connect(&self.url(), &self.config.nats, "test")
            .await
            .expect("connect")
    }

    pub async fn sidecar(&self) -> Sidecar {
        Sidecar::new(self.config.clone(), self.broker().await)
    }

    pub async fn sidecar_as(&self, node: &str) -> Sidecar {
        let mut c = self.config.clone();
        c.node.id = node.to_string();
        Sidecar::new(c, self.broker().await)
    }

    pub async fn publish(&self, n: u64) {
        let mut acks = Vec::new();
        for i in 0..n {
            acks.push(
                self.js
                    .publish(format!("{STREAM}.records"), format!("r{i}").into())
                    .await
                    .expect("publish"),
            );
        }
        for a in acks {
            a.await.expect("ack");
        }
    }

    pub async fn state(&self) -> (u64, u64, String) {
        let i = self.log_info().await;
        (
            i.state.first_sequence,
            i.state.last_sequence,
            crewlet::broker::read::instant_of(i.created).to_rfc3339(),
        )
    }

    /// The log's stream info, fresh (retried while a cluster elects the
    /// stream's leader).
    pub async fn log_info(&self) -> jetstream::stream::Info {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            match self.js.get_stream(STREAM).await {
                Ok(s) => return s.cached_info().clone(),
                Err(e) if std::time::Instant::now() > deadline => panic!("stream: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }

    /// Appends `records` records of `size` bytes that no node has applied
    /// (on `<log>.records`), all acknowledged on return.
    pub async fn fill(&self, records: usize, size: usize) {
        let mut acks = Vec::new();
        for _ in 0..records {
            acks.push(
                self.js
                    .publish(format!("{STREAM}.records"), vec![b'x'; size].into())
                    .await
                    .expect("publish"),
            );
        }
        for a in acks {
            a.await.expect("ack");
        }
    }

    pub async fn first_seq(&self) -> u64 {
        self.state().await.0
    }

    pub async fn created(&self) -> String {
        self.state().await.2
    }

    pub async fn put(&self, bucket: &str, key: &str, value: Value) {
        let kv = self.js.get_key_value(bucket).await.expect("bucket");
        kv.put(key, value.to_string().into()).await.expect("put");
    }

    pub async fn delete(&self, bucket: &str, key: &str) {
        let kv = self.js.get_key_value(bucket).await.expect("bucket");
        kv.delete(key).await.expect("delete");
    }

    pub async fn get(&self, bucket: &str, key: &str) -> Option<Value> {
        let kv = self.js.get_key_value(bucket).await.expect("bucket");
        kv.get(key)
            .await
            .expect("get")
            .map(|b| serde_json::from_slice(&b).expect("json"))
    }

    /// A node's writer of its rows: `crewlet::node`, as a service would
    /// write them.
    pub async fn node(&self, id: &str) -> crewlet::node::Node {
        crewlet::node::Node::with_broker(self.broker().await, self.config.buckets.clone(), id)
            .expect("node id")
    }

    pub async fn presence(&self, node: &str, roles: &[&str]) {
        let n = self.node(node).await;
        retried!("presence lease", n.lease(roles, "t").await);
    }

    pub async fn position(&self, node: &str, seq: u64) {
        let created = self.created().await;
        self.position_at(node, seq, 0, &created, "ok").await;
    }

    pub async fn position_at(
        &self,
        node: &str,
        seq: u64,
        generation: u64,
        created: &str,
        status: &str,
    ) {
        let created = Timestamp::parse(created).expect("an instant");
        let n = self.node(node).await;
        retried!(
            "position report",
            match status {
                "ok" => n.report(STREAM, seq, generation, created).await,
                "log_diverged" => n.report_diverged(STREAM, seq, generation, created).await,
                other => panic!("no position status {other:?}"),
            }
        );
    }

    pub async fn hold(&self, id: &str, seq: u64, expires_in_secs: i64) {
        self.put("crewlet_holds", &format!("{STREAM}.{id}"), json!({"seq": seq, "owner": "tester", "kind": "operator", "expires_at": ts(expires_in_secs)})).await;
    }

    /// A backup manifest; `complete`/`verified` false make it not count.
    pub async fn backup(
        &self,
        node: &str,
        id: &str,
        pos: u64,
        completed_ago_secs: i64,
        verified: bool,
        complete: bool,
    ) {
        let at = |secs: i64| Timestamp(Utc::now() + chrono::Duration::seconds(secs));
        let manifest = crewlet::rows::BackupManifest {
            id: id.to_string(),
            node: node.to_string(),
            taken_at: at(-completed_ago_secs - 10),
            completed_at: complete.then(|| at(-completed_ago_secs)),
            verified,
            owner: "oncall".into(),
            positions: [(STREAM.to_string(), pos)].into(),
        };
        let n = self.node(node).await;
        retried!("backup manifest", n.announce_backup(&manifest).await);
    }

    pub async fn snapshot(&self, node: &str, pos: u64) {
        let artefact = crewlet::rows::Artefact {
            position: pos,
            generation: 0,
            taken_at: Timestamp(Utc::now()),
            verified: true,
        };
        let n = self.node(node).await;
        retried!(
            "snapshot register",
            n.register_snapshots(
                [(STREAM.to_string(), artefact.clone())].into(),
                crewlet::rows::SkipReason::None,
            )
            .await
        );
    }

    /// A durable pull consumer `name` on the log with explicit acks, that
    /// was delivered `delivered` records and acknowledged the first `acked`
    /// (a feed, or a downstream system's own consumer).
    pub async fn durable_acked(&self, name: &str, delivered: usize, acked: usize) {
        use async_nats::jetstream::consumer::{pull, AckPolicy};
        use futures::StreamExt;
        let stream = self.js.get_stream(STREAM).await.expect("stream");
        let consumer = stream
            .create_consumer(pull::Config {
                durable_name: Some(name.into()),
                ack_policy: AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .expect("consumer");
        // A fetch answers with what is ready, which on a busy cluster may be
        // fewer than asked: ask again until all `delivered` have come.
        let mut n = 0;
        while n < delivered {
            let mut batch = consumer
                .batch()
                .max_messages(delivered - n)
                .expires(Duration::from_secs(5))
                .messages()
                .await
                .expect("fetch");
            let before = n;
            while let Some(m) = batch.next().await {
                let m = m.expect("message");
                n += 1;
                // Acknowledged and confirmed: a plain ack is a publish the
                // server may not have applied when the next read asks, which
                // on a cluster (an ack is a replicated proposal there) let a
                // tick read an ack floor short of `acked`.
                if n <= acked {
                    m.double_ack().await.expect("ack");
                }
            }
            assert!(n > before, "the consumer {name} delivered nothing");
        }
    }

    /// Nodes that have applied `seq`, a fresh backup at `backup`: the usual
    /// healthy world the tests then perturb.
    pub async fn healthy(&self, nodes: &[(&str, u64)], backup: u64) {
        for (n, seq) in nodes {
            self.presence(n, &["data"]).await;
            self.position(n, *seq).await;
            self.snapshot(n, *seq).await;
        }
        // Completed now: a manifest older than the stream would not count.
        self.backup("node-1", "b1", backup, 0, true, true).await;
    }

    /// Deletes the domain's stream and creates it again, empty, with the
    /// settings [`Fleet::new`] gives it: another incarnation (a new
    /// `created`).
    pub async fn recreate_stream(&self) {
        self.js.delete_stream(STREAM).await.expect("delete");
        create_stream(&self.js, log_config(GIB, 1)).await;
    }

    /// The log's files in the server's store.
    fn log_dir(&self) -> std::path::PathBuf {
        self.server
            .store()
            .join("jetstream")
            .join("$G")
            .join("streams")
            .join(STREAM)
    }

    /// Copies the log's files aside while the broker is down (a backup of
    /// the log as it is now); the broker is up again on return.
    pub async fn copy_log(&mut self) -> std::path::PathBuf {
        let copy = self.server.dir.path().join("copy");
        self.server.kill();
        copy_dir(&self.log_dir(), &copy);
        self.server.restart();
        self.js = self.server.js().await;
        copy
    }

    /// Restores the log from `copy` (same `created`, an older history).
    pub async fn restore_log(&mut self, copy: &std::path::Path) {
        self.server.kill();
        std::fs::remove_dir_all(self.log_dir()).expect("remove");
        copy_dir(copy, &self.log_dir());
        self.server.restart();
        self.js = self.server.js().await;
    }

    pub async fn floors_row(&self) -> Option<Value> {
        self.get("crewlet_floors", STREAM).await
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// How `node` stands in a tick's (first) node table.
pub fn node_state(r: &crewlet::tick::TickReport, node: &str) -> crewlet::floor::NodeState {
    r.domains[0]
        .answer
        .nodes
        .iter()
        .find(|n| &*n.node == node)
        .expect("listed")
        .state
}

/// Waits until `f` is true or `secs` pass.
pub async fn eventually<F, Fut>(secs: u64, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A sidecar loop running in the background until the returned handle is
/// dropped or stopped.
pub struct Loop {
    stop: std::sync::Arc<tokio::sync::Notify>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Loop {
    pub async fn start(f: &Fleet) -> Loop {
        let mut sidecar = f.sidecar().await;
        let stop = std::sync::Arc::new(tokio::sync::Notify::new());
        let s = stop.clone();
        let task = tokio::spawn(async move { sidecar.run(s, None).await });
        Loop {
            stop,
            task: Some(task),
        }
    }

    pub async fn stop(mut self) {
        self.stop.notify_one();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// A term of the first domain's answer in words: `value N`, `unbounded`,
/// `n/a` or `unreadable: …`.
pub fn term_state(r: &crewlet::tick::TickReport, name: crewlet::floor::TermName) -> String {
    use crewlet::floor::TermState;
    let t = r.domains[0]
        .answer
        .terms
        .iter()
        .find(|t| t.term == name)
        .expect("term");
    match &t.state {
        TermState::Value { seq, .. } => format!("value {seq}"),
        TermState::Unbounded => "unbounded".into(),
        TermState::NotApplicable => "n/a".into(),
        TermState::Unreadable { error, .. } => format!("unreadable: {error}"),
    }
}

impl Fleet {
    /// The domain's log as a mirror whose origin was replaced by a mirror
    /// of an older stream: records 1..=5 are stamped `young`, 6..=10 carry
    /// the older stamps `old` (< `young`). Returns the fleet and both.
    pub async fn with_out_of_order_stamps() -> (Fleet, chrono::DateTime<Utc>, chrono::DateTime<Utc>)
    {
        use async_nats::jetstream::stream::{Config, Source};
        let f = Fleet::new(0).await;
        f.js.delete_stream(STREAM).await.expect("delete");
        let js = &f.js;
        let plain = |name: &str, subject: &str| Config {
            name: name.into(),
            subjects: vec![subject.into()],
            ..Default::default()
        };
        let mirror = |name: &str, of: &str| Config {
            name: name.into(),
            mirror: Some(Source {
                name: of.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        create_stream(js, plain("OLDER", "older.>")).await;
        for _ in 0..10 {
            js.publish("older.x", "old".into())
                .await
                .expect("send")
                .await
                .expect("ack");
        }
        tokio::time::sleep(Duration::from_millis(3000)).await;
        create_stream(js, plain("ORIGIN", "origin.>")).await;
        for _ in 0..5 {
            js.publish("origin.x", "young".into())
                .await
                .expect("send")
                .await
                .expect("ack");
        }
        create_stream(js, mirror(STREAM, "ORIGIN")).await;
        let last = || async {
            f.js.get_stream(STREAM)
                .await
                .expect("log")
                .cached_info()
                .state
                .last_sequence
        };
        assert!(eventually(10, || async { last().await == 5 }).await);
        js.delete_stream("ORIGIN").await.expect("delete origin");
        create_stream(js, mirror("ORIGIN", "OLDER")).await;
        assert!(
            eventually(30, || async { last().await == 10 }).await,
            "the mirror resumes at 6"
        );

        let log = f.js.get_stream(STREAM).await.expect("log");
        let stamp = |m: async_nats::jetstream::message::StreamMessage| {
            crewlet::broker::read::instant_of(m.time).0
        };
        let young = stamp(log.get_raw_message(1).await.expect("msg"));
        let old = stamp(log.get_raw_message(6).await.expect("msg"));
        assert!(old < young, "stamps out of order: {old} then {young}");
        (f, old, young)
    }
}

impl Fleet {
    /// Publishes a gate record (`sign`) for `node` on the log's gate
    /// subject as the gesture would, by hand, so that no absorption follows
    /// it: its operation id and sequence.
    pub async fn raw_gate(
        &self,
        node: &str,
        sign: crewlet::rows::GateSign,
    ) -> (crewlet::rows::OpId, u64) {
        let op = crewlet::rows::OpId::mint(Utc::now());
        let seq = self.raw_gate_as(node, sign, &op).await;
        (op, seq)
    }

    /// As [`Fleet::raw_gate`], for the operation `op`: its sequence.
    pub async fn raw_gate_as(
        &self,
        node: &str,
        sign: crewlet::rows::GateSign,
        op: &crewlet::rows::OpId,
    ) -> u64 {
        let g = crewlet::gate::Gesture {
            op,
            sign,
            node,
            by: "alice",
            force: false,
            reason: "",
        };
        let (headers, body) = crewlet::gate::record(&g, STREAM, Utc::now());
        self.broker()
            .await
            .publish_gate("crewlet.tracker.gate", &headers, body)
            .await
            .expect("publish gate record")
    }
}

/// Waits for a gesture started in the background while `s` ticks, as a
/// running sidecar would, so that what the gesture waits for (an answer
/// published after its join hold) gets published.
pub async fn while_ticking(s: &mut Sidecar, mut child: std::process::Child) -> crate::support::Run {
    while matches!(child.try_wait(), Ok(None)) {
        s.tick().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    crate::support::finished(child).await
}

/// An operator whose configuration trims the fleet's gated log by
/// operator acknowledgements (`backup_floor: operator`).
pub fn acking_operator(f: &Fleet) -> super::Operator {
    super::Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_floor: operator, backup_owner: oncall}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate}}]\n",
        f.server.url()
    ))
}

/// `crewlet retention ack` of the fleet's log up to `position`, by alice,
/// with `extra` flags.
pub fn ack_args<'a>(position: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "retention",
        "ack",
        "-stream",
        STREAM,
        "-position",
        position,
        "-by",
        "alice",
    ];
    args.extend_from_slice(extra);
    args
}

/// An acknowledgement refused for going below alice's `in_force`
/// (`would_lower`, exit 1, naming it), and the row still at `in_force`.
pub async fn assert_not_lowered(f: &Fleet, run: &super::Run, in_force: u64) {
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("would_lower"), "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("acknowledged up to {in_force} by alice")),
        "{run:?}"
    );
    let row = f
        .get("crewlet_backups", &format!("_ack.{STREAM}"))
        .await
        .expect("ack row");
    assert_eq!(row["position"], in_force, "nothing written: {row}");
}

/// node-1 live at 100 and node-4 stalled at 20, then node-4 evicted by
/// `operator(f)` (whose fence window has passed 2.2 s later) and the trim
/// moved past it: the start of every readmission test. The fleet, its
/// sidecar (holding the duty) and the operator.
pub async fn with_node_4_evicted(
    operator: impl Fn(&Fleet) -> super::Operator,
) -> (Fleet, Sidecar, super::Operator) {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100)], 100).await;
    f.position("node-4", 20).await;
    f.snapshot("node-4", 20).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    let op = operator(&f);
    let run = op.run(&["retention", "evict", "node-4", "-confirm", "node-4"]);
    assert_eq!(run.code, 0, "{run:?}");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 101, "node-4 no longer pins the log");
    (f, s, op)
}
