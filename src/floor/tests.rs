//! Table-driven tests through a small world builder: one case per rule of
//! docs/trim-floor.md.

use crate::rows::Unreadable;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::*;
use crate::config::{BackupPolicy, Domain};

pub(crate) const S: &str = "CREWLET_TRACKER_LOG";
pub(crate) const CREATED: &str = "2026-11-02T10:00:00.418226517Z";

pub(crate) fn now() -> DateTime<Utc> {
    Timestamp::parse("2026-11-30T12:00:00Z")
        .map(|i| i.0)
        .expect("fixed")
}

pub(crate) fn ts(offset_secs: i64) -> String {
    Timestamp(now() + chrono::Duration::seconds(offset_secs)).to_rfc3339()
}

/// A world: buckets as key → JSON, the stream, the feed, the age lookup.
#[derive(Clone)]
pub(crate) struct World {
    pub presence: Option<Vec<(String, String)>>,
    pub positions: Option<Vec<(String, String)>>,
    pub holds: Option<Vec<(String, String)>>,
    pub backups: Option<Vec<(String, String)>>,
    pub snapshots: Option<Vec<(String, String)>>,
    pub gates: Option<Vec<(String, String)>>,
    pub floors: Option<Vec<(String, String)>>,
    pub stream: Result<StreamState, Unreadable>,
    pub feed: Option<Result<FeedState, Unreadable>>,
    pub replicas: Option<Result<super::ReplicasRead, Unreadable>>,
    pub unprotected: Vec<String>,
    pub orphaned: Vec<crate::floor::OrphanedCopy>,
    pub young: Result<Option<u64>, Unreadable>,
    pub absorbed: Option<Result<(), Unreadable>>,
    pub policy: Policy,
    pub domain: Domain,
    /// On an archived domain: what was read of its archive.
    pub archive: Option<crate::archive::state::ArchiveRead>,
    /// When each node-written bucket was created, as the tick read it.
    pub created: super::carried::BucketsCreated,
}

impl World {
    /// One live data node at 900 of 1..=1000, a fresh verified backup at
    /// 800, nothing else binding; every record is old.
    pub fn new() -> World {
        let mut w = World {
            presence: Some(vec![]),
            positions: Some(vec![]),
            holds: Some(vec![]),
            backups: Some(vec![]),
            snapshots: Some(vec![]),
            gates: Some(vec![]),
            floors: Some(vec![]),
            stream: Ok(StreamState {
                first_seq: 1,
                last_seq: 1000,
                bytes: 1 << 20,
                messages: 1000,
                consumers: 0,
                max_bytes: 1 << 30,
                created: Timestamp::parse(CREATED).expect("valid"),
                first_ts: Timestamp::parse(CREATED).expect("valid"),
                last_ts: Timestamp::parse(CREATED).expect("valid"),
                facts: Default::default(),
                clustered: false,
                mark: None,
            }),
            feed: None,
            replicas: None,
            unprotected: Vec::new(),
            orphaned: Vec::new(),
            young: Ok(None),
            absorbed: None,
            created: super::carried::BucketsCreated::default(),
            policy: Policy {
                min_age: Duration::from_secs(7 * 86400),
                backup_floor: BackupPolicy::Engine,
                backup_max_age: Duration::from_secs(86400),
                // One covering snapshot suffices unless a test says otherwise,
                // so that adding a node tests what it means to add a node.
                snapshot_quorum: 1,
                fence_window: Duration::from_secs(60),
                tick: Duration::from_secs(10),
                trim_enabled: true,
                by: "node-1".into(),
                session: "sess".into(),
                settings: Default::default(),
            },
            domain: Domain {
                name: "tracker".into(),
                stream: S.into(),
                gate_subject: None,
                gate_reserve: true,
                feed_consumer: None,
                archive: None,
                replicas: Default::default(),
            },
            archive: None,
        };
        w.node("node-1", true, Some(900));
        w.backup("node-1", "b1", 800, -3600, true, true);
        w.snapshot("node-1", 1000, 0, true);
        w
    }

    pub fn node(&mut self, node: &str, live_data: bool, seq: Option<u64>) -> &mut Self {
        if live_data {
            self.presence.get_or_insert_with(Vec::new).push((
                node.into(),
                json!({"node": node, "roles": ["data"], "version": "1", "started_at": ts(-100)})
                    .to_string(),
            ));
        }
        if let Some(seq) = seq {
            self.position(node, seq, 0, CREATED, "ok");
        }
        self
    }

    pub fn position(
        &mut self,
        node: &str,
        seq: u64,
        gen: u64,
        created: &str,
        status: &str,
    ) -> &mut Self {
        let rows = self.positions.get_or_insert_with(Vec::new);
        rows.retain(|(k, _)| k != &format!("{S}.{node}"));
        rows.push((
            format!("{S}.{node}"),
            json!({"node": node, "stream": S, "seq": seq, "generation": gen, "stream_created": created, "updated_at": ts(-1), "status": status}).to_string(),
        ));
        self
    }

    pub fn hold(&mut self, id: &str, seq: u64, expires_in: i64) -> &mut Self {
        self.holds.get_or_insert_with(Vec::new).push((
            format!("{S}.{id}"),
            json!({"seq": seq, "owner": "backup-nightly", "kind": "backup", "expires_at": ts(expires_in)}).to_string(),
        ));
        self
    }

    pub fn backup(
        &mut self,
        node: &str,
        id: &str,
        pos: u64,
        completed_ago_neg: i64,
        verified: bool,
        complete: bool,
    ) -> &mut Self {
        let mut m = json!({"id": id, "node": node, "taken_at": ts(completed_ago_neg - 60), "verified": verified, "owner": "oncall", "positions": {S: pos}});
        if complete {
            m["completed_at"] = json!(ts(completed_ago_neg));
        }
        let rows = self.backups.get_or_insert_with(Vec::new);
        rows.retain(|(k, _)| k != &format!("{node}.{id}"));
        rows.push((format!("{node}.{id}"), m.to_string()));
        self
    }

    pub fn snapshot(&mut self, node: &str, pos: u64, gen: u64, verified: bool) -> &mut Self {
        let rows = self.snapshots.get_or_insert_with(Vec::new);
        rows.retain(|(k, _)| k != node);
        rows.push((
            node.into(),
            json!({"node": node, "updated_at": ts(-5), "skip_reason": "", "artefacts": {S: {"position": pos, "generation": gen, "taken_at": ts(-5), "verified": verified}}}).to_string(),
        ));
        self
    }

    pub fn gate(&mut self, node: &str, state: &str, landed_ago: i64) -> &mut Self {
        let op = crate::rows::OpId::mint(now());
        self.gates.get_or_insert_with(Vec::new).push((
            format!("{S}.{node}"),
            json!({"node": node, "stream": S, "state": state, "op_id": op.as_str(), "seq": 5, "landed_at": ts(-landed_ago), "by": "alice", "stream_created": CREATED, "generation": 0}).to_string(),
        ));
        self
    }

    /// The domain takes gate records, and its gates view's cursor is
    /// `cursor` (a JSON row; `None`: no cursor yet).
    pub fn gated(&mut self, cursor: Option<serde_json::Value>) -> &mut Self {
        self.domain.gate_subject = Some("crewlet.tracker.gate".into());
        let rows = self.gates.get_or_insert_with(Vec::new);
        rows.retain(|(k, _)| !k.starts_with("_absorbed."));
        if let Some(c) = cursor {
            rows.push((format!("_absorbed.{S}"), c.to_string()));
        }
        self
    }

    pub fn floor_row(&mut self, value: serde_json::Value) -> &mut Self {
        self.floors = Some(vec![(S.into(), value.to_string())]);
        self
    }

    pub fn rows(&self) -> Rows {
        fn bucket(name: &str, rows: &Option<Vec<(String, String)>>) -> Bucket {
            match rows {
                None => Err(BucketError::Missing {
                    bucket: name.into(),
                }),
                Some(r) => Ok(r
                    .iter()
                    .enumerate()
                    .map(|(i, (k, v))| Entry {
                        key: k.clone(),
                        value: v.clone().into_bytes(),
                        revision: i as u64 + 1,
                    })
                    .collect()),
            }
        }
        Rows {
            presence: bucket("crewlet_presence", &self.presence),
            positions: bucket("crewlet_positions", &self.positions),
            holds: bucket("crewlet_holds", &self.holds),
            backups: bucket("crewlet_backups", &self.backups),
            snapshots: bucket("crewlet_snapshots", &self.snapshots),
            gates: bucket("crewlet_gates", &self.gates),
            floors: bucket("crewlet_floors", &self.floors),
        }
    }

    pub fn answer(&self) -> Answer {
        let mut rows = ParsedRows::from_rows(&self.rows());
        rows.created = self.created;
        compute(&self.domain, &self.policy, &rows, &self.read(), now())
    }

    /// What a tick read of the domain's stream, feed and archive.
    pub fn read(&self) -> DomainRead {
        DomainRead {
            stream: self.stream.clone(),
            feed: self.feed.clone(),
            replicas: self.replicas.clone(),
            unprotected: self.unprotected.clone(),
            orphaned: self.orphaned.clone(),
            young_seq: self.young.clone(),
            absorbed: self.absorbed.clone(),
            clock: None,
            archive: self.archive.clone(),
        }
    }
}

/// A change to a world, for tables of cases.
type Setup = fn(&mut World);

fn term(a: &Answer, name: TermName) -> &Term {
    a.terms
        .iter()
        .find(|t| t.term == name)
        .expect("every term is present")
}

/// Asserts a term's state in words: `value 800`, `unbounded`, `n/a`, `unreadable`.
fn check(a: &Answer, name: TermName, want: &str) {
    let t = term(a, name);
    let got = match &t.state {
        TermState::Value { seq, .. } => format!("value {seq}"),
        TermState::Unbounded => "unbounded".into(),
        TermState::NotApplicable => "n/a".into(),
        TermState::Unreadable { .. } => "unreadable".into(),
    };
    assert_eq!(got, want, "{}: {:?}", name.as_str(), t);
}

fn reason(a: &Answer, name: TermName) -> String {
    match &term(a, name).state {
        TermState::Value { reason, .. } => reason.clone().unwrap_or_default(),
        TermState::Unreadable { error, .. } => error.clone(),
        _ => String::new(),
    }
}

#[test]
fn the_minimum_of_the_terms_binds() {
    let a = World::new().answer();
    check(&a, TermName::Applied, "value 900");
    check(&a, TermName::MinHold, "unbounded");
    check(&a, TermName::BackupFloor, "value 800");
    check(&a, TermName::SnapshotFloor, "unbounded");
    check(&a, TermName::FeedAckFloor, "n/a");
    check(&a, TermName::AgeFloor, "value 1000");
    assert_eq!(a.trim_to, 800);
    assert!(term(&a, TermName::BackupFloor).binding);
    assert_eq!(a.floor, Some(801));
    assert_eq!(a.trim_floor_state, FloorState::Published);
    assert_eq!(a.blocked_by, [TermName::BackupFloor, TermName::Applied]);
    assert_eq!(purge_target(&a), Some(801));
}

#[test]
fn each_term_can_bind() {
    let cases: Vec<(&str, Setup, TermName, u64)> = vec![
        (
            "applied: a lagging node",
            |w| {
                w.node("node-2", true, Some(300));
            },
            TermName::Applied,
            300,
        ),
        (
            "min_hold: a live hold",
            |w| {
                w.hold("h1", 501, 3600);
            },
            TermName::MinHold,
            500,
        ),
        (
            "backup_floor: an older backup",
            |w| {
                w.backup("node-1", "b1", 200, -60, true, true);
            },
            TermName::BackupFloor,
            200,
        ),
        (
            "snapshot_floor: the 2nd highest",
            |w| {
                w.policy.snapshot_quorum = 2;
                w.node("node-2", true, Some(950));
                w.snapshot("node-1", 700, 0, true);
                w.snapshot("node-2", 600, 0, true);
            },
            TermName::SnapshotFloor,
            600,
        ),
        (
            "feed_ack_floor",
            |w| {
                w.domain.feed_consumer = Some("feed".into());
                w.feed = Some(Ok(FeedState {
                    ack_floor_seq: 100,
                    delivered_seq: 150,
                    num_ack_pending: 3,
                    num_pending: 10,
                }));
            },
            TermName::FeedAckFloor,
            100,
        ),
        (
            "age_floor: young records",
            |w| {
                w.young = Ok(Some(51));
            },
            TermName::AgeFloor,
            50,
        ),
    ];
    for (what, setup, name, seq) in cases {
        let mut w = World::new();
        setup(&mut w);
        let a = w.answer();
        assert_eq!(a.trim_to, seq, "{what}");
        assert!(term(&a, name).binding, "{what}: {:?}", a.terms);
        assert_eq!(a.floor, Some(seq + 1), "{what}");
    }
}

#[test]
fn a_live_data_node_without_a_row_counts_at_zero() {
    let mut w = World::new();
    w.node("node-9", true, None);
    let a = w.answer();
    check(&a, TermName::Applied, "value 0");
    assert_eq!(
        term(&a, TermName::Applied).detail.as_deref(),
        Some("node-9")
    );
    assert!(reason(&a, TermName::Applied).contains("node-9 has not reported a position"));
    assert_eq!(a.trim_to, 0);
    assert_eq!(purge_target(&a), None);
    assert_eq!(a.blocked_by, [TermName::Applied, TermName::BackupFloor]);
}

#[test]
fn a_non_data_node_without_a_row_is_not_counted() {
    let mut w = World::new();
    w.presence.get_or_insert_with(Vec::new).push((
        "tool-1".into(),
        json!({"node": "tool-1", "roles": ["api"], "started_at": ts(-5)}).to_string(),
    ));
    assert_eq!(w.answer().trim_to, 800);
}

#[test]
fn an_absent_node_keeps_its_row_and_pins() {
    let mut w = World::new();
    w.node("node-4", false, Some(120));
    let a = w.answer();
    assert_eq!(a.trim_to, 120);
    let row = a
        .nodes
        .iter()
        .find(|n| &*n.node == "node-4")
        .expect("listed");
    assert!(!row.live);
    assert_eq!(row.state, NodeState::Counted);
}

#[test]
fn empty_counted_set_is_unbounded() {
    let mut w = World::new();
    w.presence = Some(vec![]);
    w.positions = Some(vec![]);
    let a = w.answer();
    check(&a, TermName::Applied, "unbounded");
    assert_eq!(a.trim_to, 800);
}

#[test]
fn holds() {
    let mut w = World::new();
    w.hold("expired", 10, -1)
        .hold("live", 600, 60)
        .hold("other", 300, 60);
    let a = w.answer();
    check(&a, TermName::MinHold, "value 299");
    assert_eq!(
        term(&a, TermName::MinHold).detail.as_deref(),
        Some("other (backup-nightly)")
    );
    // A hold on another stream does not count.
    let mut w = World::new();
    w.holds = Some(vec![(
        "OTHER.h1".into(),
        json!({"seq": 5, "owner": "x", "expires_at": ts(60)}).to_string(),
    )]);
    check(&w.answer(), TermName::MinHold, "unbounded");
    // A hold at 1 permits nothing, and says so.
    let mut w = World::new();
    w.hold("join-1", 1, 60);
    let a = w.answer();
    check(&a, TermName::MinHold, "value 0");
    assert_eq!(
        reason(&a, TermName::MinHold),
        "hold join-1 (backup-nightly) needs every record from 1"
    );
}

#[test]
fn backups_that_do_not_count() {
    let cases: Vec<(&str, Setup, &str)> = vec![
        (
            "stale",
            |w| {
                w.backup("node-1", "b1", 800, -3 * 86400 - 100, true, true);
            },
            "the newest complete backup is 3 days old (backup_max_age is 24h)",
        ),
        (
            "unverified",
            |w| {
                w.backup("node-1", "b1", 800, -60, false, true);
            },
            "no verified backup names CREWLET_TRACKER_LOG",
        ),
        (
            "incomplete",
            |w| {
                w.backup("node-1", "b1", 800, -60, true, false);
            },
            "no verified backup names CREWLET_TRACKER_LOG",
        ),
        (
            "none",
            |w| {
                w.backups = Some(vec![]);
            },
            "no verified backup names CREWLET_TRACKER_LOG",
        ),
    ];
    for (what, setup, want) in cases {
        let mut w = World::new();
        setup(&mut w);
        let a = w.answer();
        check(&a, TermName::BackupFloor, "value 0");
        assert_eq!(reason(&a, TermName::BackupFloor), want, "{what}");
        assert_eq!(a.trim_to, 0, "{what}");
    }
    // A backup completed before the stream was created covers none of it.
    let mut w = World::new();
    w.backup(
        "node-1",
        "b1",
        800,
        -(now()
            .signed_duration_since(Timestamp::parse(CREATED).expect("valid").0)
            .num_seconds()
            + 60),
        true,
        true,
    );
    w.policy.backup_max_age = Duration::from_secs(90 * 86400);
    check(&w.answer(), TermName::BackupFloor, "value 0");
    // The newest complete one counts, even when an older one reaches further.
    let mut w = World::new();
    w.backup("node-1", "old", 950, -7200, true, true)
        .backup("node-1", "new", 700, -60, true, true);
    check(&w.answer(), TermName::BackupFloor, "value 700");
}

#[test]
fn operator_acknowledgements() {
    let mut w = World::new();
    w.policy.backup_floor = BackupPolicy::Operator;
    let a = w.answer();
    check(&a, TermName::BackupFloor, "value 0");
    assert_eq!(
        reason(&a, TermName::BackupFloor),
        "no acknowledgement has been given"
    );
    // An old acknowledgement still counts for the trim (the alarm ages it).
    w.backups.get_or_insert_with(Vec::new).push((
        format!("_ack.{S}"),
        json!({"stream": S, "position": 650, "by": "alice", "at": ts(-20 * 86400)}).to_string(),
    ));
    let a = w.answer();
    check(&a, TermName::BackupFloor, "value 650");
    assert_eq!(a.backup_age_secs, Some(20 * 86400));
}

/// Three counted nodes (node-1 at 900, node-2 at 950, node-3 at 990) and
/// a snapshot quorum of 2; no snapshot of node-2 or node-3 yet.
fn quorum_of_two() -> World {
    let mut w = World::new();
    w.policy.snapshot_quorum = 2;
    w.node("node-2", true, Some(950))
        .node("node-3", true, Some(990));
    w
}

#[test]
fn snapshot_quorum() {
    let mut w = quorum_of_two();
    w.snapshot("node-1", 700, 0, true)
        .snapshot("node-2", 600, 0, false)
        .snapshot("node-3", 650, 1, true);
    let a = w.answer();
    check(&a, TermName::SnapshotFloor, "value 0");
    assert_eq!(reason(&a, TermName::SnapshotFloor), "1 of 3 counted nodes hold a verified snapshot of CREWLET_TRACKER_LOG at this generation (snapshot_quorum is 2)");
    // A sole node needs no snapshot quorum, even with no snapshots bucket.
    let mut w = World::new();
    w.snapshots = None;
    check(&w.answer(), TermName::SnapshotFloor, "unbounded");
    // Two nodes without the bucket: unreadable.
    w.node("node-2", true, Some(950));
    check(&w.answer(), TermName::SnapshotFloor, "unreadable");
}

/// Without a floors row, a position of a later generation than 0 means the
/// row was lost: NOT READY naming the highest generation, ahead of any
/// other case (a node past the log's end is judged at generation 0).
#[test]
fn a_lost_floors_row_is_judged_from_the_highest_generation() {
    let mut w = World::new();
    assert_eq!(w.answer().not_ready, None);
    w.node("node-2", true, None)
        .position("node-2", 400, 2, CREATED, "ok");
    w.node("node-3", true, None)
        .position("node-3", 300, 1, CREATED, "ok");
    w.node("node-4", true, Some(5000));
    let a = w.answer();
    assert_eq!(
        a.not_ready,
        Some(NotReady::GenerationUnknown { highest: 2 })
    );
    // With the row, the same positions are a node ahead of the log.
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 1, "trim_floor_state": "published", "at": ts(-10)}));
    assert_eq!(w.answer().not_ready, Some(NotReady::AheadOfLog));
}

/// Nodes whose snapshots tie: the term names the k-th by name, whatever
/// order the rows were written in (status and the alarm name the same node
/// from tick to tick).
#[test]
fn a_snapshot_tie_names_the_kth_node_by_name() {
    for order in [
        ["node-3", "node-1", "node-2"],
        ["node-2", "node-3", "node-1"],
    ] {
        let mut w = quorum_of_two();
        for node in order {
            w.snapshot(node, 700, 0, true);
        }
        let a = w.answer();
        check(&a, TermName::SnapshotFloor, "value 700");
        assert_eq!(
            term(&a, TermName::SnapshotFloor).detail.as_deref(),
            Some("node-2"),
            "{order:?}"
        );
    }
    // A higher snapshot ranks first whatever its name.
    let mut w = quorum_of_two();
    w.snapshot("node-1", 700, 0, true)
        .snapshot("node-2", 700, 0, true)
        .snapshot("node-3", 900, 0, true);
    let a = w.answer();
    check(&a, TermName::SnapshotFloor, "value 700");
    assert_eq!(
        term(&a, TermName::SnapshotFloor).detail.as_deref(),
        Some("node-1")
    );
}

#[test]
fn feed_rules() {
    let with = |f: FeedState| {
        let mut w = World::new();
        w.domain.feed_consumer = Some("feed".into());
        w.feed = Some(Ok(f));
        w.answer()
    };
    let a = with(FeedState {
        ack_floor_seq: 40,
        delivered_seq: 90,
        num_ack_pending: 2,
        num_pending: 0,
    });
    check(&a, TermName::FeedAckFloor, "value 40");
    let a = with(FeedState {
        ack_floor_seq: 40,
        delivered_seq: 90,
        num_ack_pending: 0,
        num_pending: 5,
    });
    check(&a, TermName::FeedAckFloor, "value 90");
    let a = with(FeedState {
        ack_floor_seq: 1,
        delivered_seq: 1,
        num_ack_pending: 0,
        num_pending: 0,
    });
    check(&a, TermName::FeedAckFloor, "value 1000");
    let mut w = World::new();
    w.domain.feed_consumer = Some("feed".into());
    w.feed = Some(Err("consumer feed not found on CREWLET_TRACKER_LOG".into()));
    let a = w.answer();
    check(&a, TermName::FeedAckFloor, "unreadable");
    assert_eq!(a.trim_to, 0);
    assert_eq!(a.blocked_by[0], TermName::FeedAckFloor);
}

/// `replica_floor` (docs/trim-floor.md, Replicas): `n/a` where nothing
/// was read, `unbounded` with no replica, the least any replica confirmed
/// by the feed's rules otherwise, naming it, and `unreadable` blocks.
#[test]
fn replica_rules() {
    let term_state_of = |a: &crate::floor::Answer| {
        let t = a
            .terms
            .iter()
            .find(|t| t.term == TermName::ReplicaFloor)
            .expect("the term");
        match &t.state {
            TermState::Unreadable { error, .. } => format!("unreadable: {error}"),
            other => format!("{other:?}"),
        }
    };
    let replica =
        |name: &str, ack: u64, delivered: u64, ack_pending: u64, pending: u64| ReplicaState {
            consumer: name.into(),
            named: false,
            state: FeedState {
                ack_floor_seq: ack,
                delivered_seq: delivered,
                num_ack_pending: ack_pending,
                num_pending: pending,
            },
            last_active: None,
            delivered_active: None,
            paused: false,
            paused_until: None,
            feeds: None,
        };
    let with = |r: Option<Result<ReplicasRead, Unreadable>>| {
        let mut w = World::new();
        w.replicas = r;
        w.answer()
    };
    check(&with(None), TermName::ReplicaFloor, "n/a");
    check(
        &with(Some(Ok(ReplicasRead::default()))),
        TermName::ReplicaFloor,
        "unbounded",
    );
    // A copy whose durable consumer is gone: unreadable, named, whatever
    // the other copies confirmed; two are said as one list.
    let orphan = |stream: &str, consumer: &str| crate::floor::OrphanedCopy {
        stream: stream.into(),
        consumer: consumer.into(),
        deliver_subject: format!("{consumer}.deliver"),
        mirror: true,
    };
    let mut w = World::new();
    w.replicas = Some(Ok(ReplicasRead {
        replicas: vec![replica("dr-west", 1, 1, 0, 0)],
        ..Default::default()
    }));
    w.orphaned = vec![orphan("DR", "dr")];
    let a = w.answer();
    assert!(
        term_state_of(&a).starts_with(
            "unreadable: DR copies the log through durable consumer dr, which does not exist"
        ),
        "{}",
        term_state_of(&a)
    );
    assert_eq!(a.trim_to, 0, "nothing is licensed");
    w.orphaned = vec![orphan("DR", "dr"), orphan("AUDIT", "audit")];
    assert!(
        term_state_of(&w.answer())
            .starts_with("unreadable: DR (through dr) and AUDIT (through audit) copy the log"),
        "{}",
        term_state_of(&w.answer())
    );
    // A mirror behind (acked 300 of what it was sent), another caught up:
    // the one behind binds, named.
    let a = with(Some(Ok(ReplicasRead {
        replicas: vec![
            replica("dr-east", 300, 420, 120, 580),
            replica("dr-west", 1, 1, 0, 0),
        ],
        ignored: vec![],
        ..Default::default()
    })));
    check(&a, TermName::ReplicaFloor, "value 300");
    assert_eq!(
        term(&a, TermName::ReplicaFloor).detail.as_deref(),
        Some("dr-east")
    );
    // Nothing outstanding: what it was delivered; nothing pending either:
    // the log's last sequence read before it.
    let a = with(Some(Ok(ReplicasRead {
        replicas: vec![replica("dr", 40, 90, 0, 5)],
        ignored: vec![],
        ..Default::default()
    })));
    check(&a, TermName::ReplicaFloor, "value 90");
    let a = with(Some(Ok(ReplicasRead {
        replicas: vec![replica("dr", 0, 0, 0, 0), replica("cdc", 0, 0, 0, 3)],
        ignored: vec![],
        ..Default::default()
    })));
    check(&a, TermName::ReplicaFloor, "value 0");
    assert!(reason(&a, TermName::ReplicaFloor).contains("cdc has confirmed nothing yet"));
    // Unreadable (a named consumer missing) blocks the tick.
    let a = with(Some(Ok(ReplicasRead {
        missing_named: vec!["cdc".into()],
        ..Default::default()
    })));
    check(&a, TermName::ReplicaFloor, "unreadable");
    assert_eq!(a.trim_to, 0);
    assert!(a.blocked_by.contains(&TermName::ReplicaFloor));
}

#[test]
fn age_rules() {
    let mut w = World::new();
    w.young = Ok(Some(1));
    let a = w.answer();
    check(&a, TermName::AgeFloor, "value 0");
    assert!(reason(&a, TermName::AgeFloor).contains("younger than min_age (7d)"));
    assert!(a.blocked_by.is_empty(), "nothing is below the age floor");
    // Empty stream: last_seq.
    let mut w = World::new();
    w.stream = Ok(StreamState {
        first_seq: 1001,
        last_seq: 1000,
        ..w.stream.clone().expect("ok")
    });
    check(&w.answer(), TermName::AgeFloor, "value 1000");
    let mut w = World::new();
    w.young = Err("timeout".into());
    check(&w.answer(), TermName::AgeFloor, "unreadable");
}

#[test]
fn missing_buckets_are_unreadable_never_empty() {
    let cases: Vec<(&str, Setup, &[TermName])> = vec![
        (
            "presence",
            |w| w.presence = None,
            &[TermName::Applied, TermName::SnapshotFloor],
        ),
        (
            "positions",
            |w| w.positions = None,
            &[TermName::Applied, TermName::SnapshotFloor],
        ),
        ("holds", |w| w.holds = None, &[TermName::MinHold]),
        ("backups", |w| w.backups = None, &[TermName::BackupFloor]),
    ];
    for (bucket, setup, blocked) in cases {
        let mut w = World::new();
        w.node("node-2", true, Some(950));
        setup(&mut w);
        let a = w.answer();
        for t in blocked.iter() {
            check(&a, *t, "unreadable");
        }
        assert_eq!(&a.blocked_by[..blocked.len()], blocked, "{bucket}");
        assert_eq!(a.trim_to, 0, "{bucket}");
        assert_eq!(a.floor, None, "{bucket}: nothing was ever published");
        assert_eq!(purge_target(&a), None);
        let err = reason(&a, blocked[0]);
        assert!(
            err.contains("crewlet_") && err.contains("crewlet retention init"),
            "{bucket}: {err}"
        );
    }
}

#[test]
fn malformed_rows_name_their_key() {
    let mut w = World::new();
    w.positions
        .get_or_insert_with(Vec::new)
        .push((format!("{S}.node-5"), "{\"seq\": \"lots\"}".into()));
    let a = w.answer();
    check(&a, TermName::Applied, "unreadable");
    check(&a, TermName::SnapshotFloor, "unreadable");
    assert!(reason(&a, TermName::Applied).contains("CREWLET_TRACKER_LOG.node-5"));
    // A row whose body names another node than its key.
    let mut w = World::new();
    w.positions = Some(vec![(format!("{S}.node-6"), json!({"node": "node-7", "stream": S, "seq": 5, "generation": 0, "stream_created": CREATED, "updated_at": ts(0), "status": "ok"}).to_string())]);
    let a = w.answer();
    check(&a, TermName::Applied, "unreadable");
    assert!(
        reason(&a, TermName::Applied).contains("key CREWLET_TRACKER_LOG.node-6"),
        "{}",
        reason(&a, TermName::Applied)
    );
    // A malformed hold blocks min_hold; a malformed manifest blocks backup_floor.
    let mut w = World::new();
    w.holds = Some(vec![(format!("{S}.h1"), "{}".into())]);
    check(&w.answer(), TermName::MinHold, "unreadable");
    let mut w = World::new();
    w.backups
        .get_or_insert_with(Vec::new)
        .push(("node-2.b9".into(), "[]".into()));
    check(&w.answer(), TermName::BackupFloor, "unreadable");
}

#[test]
fn evictions_and_the_fence_window() {
    let mut w = World::new();
    w.node("node-4", false, Some(100));
    w.gate("node-4", "evicted", 30);
    let a = w.answer();
    assert_eq!(
        a.trim_to, 100,
        "inside the fence window the node still counts"
    );
    assert_eq!(
        a.nodes
            .iter()
            .find(|n| &*n.node == "node-4")
            .map(|n| n.state),
        Some(NodeState::Evicting)
    );

    let mut w = World::new();
    w.node("node-4", false, Some(100));
    w.gate("node-4", "evicted", 61);
    let a = w.answer();
    assert_eq!(a.trim_to, 800, "past the window the node is not counted");
    assert_eq!(
        a.nodes
            .iter()
            .find(|n| &*n.node == "node-4")
            .map(|n| n.state),
        Some(NodeState::Evicted)
    );

    // An evicted node's malformed row changes nothing.
    w.positions
        .get_or_insert_with(Vec::new)
        .retain(|(k, _)| !k.ends_with("node-4"));
    w.positions
        .get_or_insert_with(Vec::new)
        .push((format!("{S}.node-4"), "garbage".into()));
    assert_eq!(w.answer().trim_to, 800);

    // Readmitted: counted again.
    let mut w = World::new();
    w.node("node-4", false, Some(100));
    w.gate("node-4", "admitted", 600);
    assert_eq!(w.answer().trim_to, 100);

    // No gates bucket yet (the sidecar never ran): nothing was absorbed,
    // nobody is evicted, and nothing is wrong to say (a bucket that cannot
    // be read is another matter: below).
    let mut w = World::new();
    w.node("node-4", false, Some(100));
    w.gates = None;
    let a = w.answer();
    assert_eq!(a.trim_to, 100);
    assert!(!a.evictions_unreadable);
    // Gates unreadable: nobody is evicted, and the answer says so.
    let mut rows = crate::floor::ParsedRows::from_rows(&w.rows());
    rows.gates = Err(crate::floor::BucketError::Failed {
        bucket: "crewlet_gates".into(),
        reason: "no answer within 1s".into(),
    });
    let a = crate::floor::compute(&w.domain, &w.policy, &rows, &w.read(), now());
    assert_eq!(a.trim_to, 100);
    assert!(a.evictions_unreadable);
}

#[test]
fn a_position_naming_the_logs_creation_in_milliseconds_says_so() {
    // A node that passed `created` through a millisecond date type names
    // generation 0 of this very log: the status says the time was cut
    // short, not that the log left a generation.
    let mut w = World::new();
    w.position("node-1", 900, 0, "2026-11-02T10:00:00.418Z", "ok");
    let a = w.answer();
    check(&a, TermName::Applied, "value 0");
    let why = reason(&a, TermName::Applied);
    assert!(!why.contains("left gen"), "{why}");
    assert!(
        why.contains("2026-11-02T10:00:00.418Z")
            && why.contains("cut short")
            && why.contains("to the nanosecond"),
        "{why}"
    );

    // Another log of the same name (created at another time) is said so.
    let mut w = World::new();
    w.position("node-1", 900, 0, "2026-10-01T00:00:00Z", "ok");
    let why = reason(&w.answer(), TermName::Applied);
    assert!(
        why.contains("another log of this name") && why.contains(CREATED),
        "{why}"
    );
}

#[test]
fn generations() {
    // A row of another generation counts at 0 and shows left gen N.
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 1, "stream_created": CREATED, "floor": 50, "trim_floor_state": "published", "at": ts(-10)}));
    w.position("node-1", 900, 0, CREATED, "ok");
    let a = w.answer();
    check(&a, TermName::Applied, "value 0");
    assert!(reason(&a, TermName::Applied).contains("left gen 0"));
    assert_eq!(a.nodes[0].left_gen, Some(0));
    assert_eq!(a.floor, Some(50), "the floor never moves down");

    // The live stream was recreated: NOT READY, nothing concluded.
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": "2026-11-01T00:00:00Z", "floor": 500, "trim_floor_state": "published", "at": ts(-10)}));
    let a = w.answer();
    assert_eq!(a.not_ready, Some(crate::floor::NotReady::Recreated));
    assert_eq!(a.trim_to, 0);
    assert_eq!(a.floor, Some(500));
    assert_eq!(
        a.live_stream_created.map(|c| c.to_rfc3339()).as_deref(),
        Some(CREATED)
    );
    assert_eq!(purge_target(&a), None);
}

#[test]
fn ahead_of_log_and_log_diverged() {
    let mut w = World::new();
    w.node("node-2", true, Some(1001));
    let a = w.answer();
    assert_eq!(a.not_ready, Some(crate::floor::NotReady::AheadOfLog));
    check(&a, TermName::Applied, "unreadable");
    assert!(reason(&a, TermName::Applied).contains("node-2 reports position 1001"));
    assert_eq!(
        a.nodes
            .iter()
            .find(|n| &*n.node == "node-2")
            .map(|n| n.state),
        Some(NodeState::AheadOfLog)
    );
    assert_eq!(purge_target(&a), None);

    // log_diverged takes precedence over ahead_of_log and counts at 0.
    let mut w = World::new();
    w.policy.snapshot_quorum = 2;
    w.node("node-2", true, None);
    w.position("node-2", 5000, 0, CREATED, "log_diverged");
    w.node("node-3", true, Some(950));
    w.snapshot("node-2", 990, 0, true)
        .snapshot("node-3", 900, 0, true)
        .snapshot("node-1", 850, 0, true);
    let a = w.answer();
    assert_eq!(a.not_ready, None);
    check(&a, TermName::Applied, "value 0");
    assert_eq!(
        a.nodes
            .iter()
            .find(|n| &*n.node == "node-2")
            .map(|n| n.state),
        Some(NodeState::LogDiverged)
    );
    check(&a, TermName::SnapshotFloor, "value 850");
}

#[test]
fn the_floor_never_moves_down() {
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 701, "trim_floor_state": "published", "at": ts(-10)}));
    w.node("node-2", true, Some(300));
    let a = w.answer();
    assert_eq!(a.trim_to, 300);
    assert_eq!(a.floor, Some(701));
    assert_eq!(
        purge_target(&a),
        Some(301),
        "the purge follows this tick's trim_to, never the floor"
    );
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 701, "trim_floor_state": "published", "at": ts(-10)}));
    w.presence = None;
    let a = w.answer();
    assert_eq!(
        (a.trim_to, a.floor),
        (0, Some(701)),
        "a blocked tick leaves the floor where it was"
    );
}

#[test]
fn dry_run() {
    let mut w = World::new();
    w.policy.trim_enabled = false;
    let a = w.answer();
    assert!(a.dry_run);
    assert_eq!(a.trim_to, 800);
    assert_eq!(a.floor, None);
    assert_eq!(a.trim_floor_state, FloorState::None);
    assert_eq!(
        a.would_purge,
        Some(WouldPurge {
            records: 800,
            first_seq: 1,
            last_seq: 800
        })
    );
    assert_eq!(purge_target(&a), None, "dry run purges nothing");
    // Nothing to purge: null.
    w.stream = Ok(StreamState {
        first_seq: 801,
        ..w.stream.clone().expect("ok")
    });
    assert_eq!(w.answer().would_purge, None);
}

#[test]
fn held_since_starts_when_blocked_and_is_kept() {
    let mut w = World::new();
    w.node("node-2", false, Some(10));
    let a = w.answer();
    assert_eq!(a.held_since, Some(Timestamp(now())));
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 11, "trim_floor_state": "published",
        "blocked_by": ["applied"], "held_since": ts(-3600), "at": ts(-10)}));
    assert_eq!(
        w.answer().held_since.map(|h| h.to_rfc3339()),
        Some(ts(-3600))
    );
    let mut clear = World::new();
    clear.young = Ok(Some(100));
    assert_eq!(clear.answer().blocked_by, Vec::<TermName>::new());
    assert_eq!(clear.answer().held_since, None);
}

/// A cursor row of this incarnation at `seq`.
fn cursor(seq: u64) -> serde_json::Value {
    json!({"stream": S, "seq": seq, "skipped": [], "stream_created": CREATED, "generation": 0})
}

#[test]
fn the_purge_never_passes_the_gates_cursor() {
    // Every term permits 800 (the backup); the view has absorbed up to 500.
    let mut w = World::new();
    w.gated(Some(cursor(500)));
    let a = w.answer();
    assert_eq!(a.trim_to, 800);
    assert_eq!(licensed_purge(&a), Some(801));
    assert_eq!(purge_target(&a), Some(501));
    assert_eq!(a.purge_clamped_by, Some(PurgeClamp::Gates));
    assert_eq!(a.gate_view.as_ref().and_then(|v| v.error.clone()), None);

    // A cursor past trim_to clamps nothing.
    w.gated(Some(cursor(1000)));
    let a = w.answer();
    assert_eq!(purge_target(&a), Some(801));
    assert_eq!(a.purge_clamped_by, None);

    // No cursor yet: nothing is purged, and it is not a fault.
    w.gated(None);
    let a = w.answer();
    assert_eq!(purge_target(&a), None);
    assert_eq!(a.purge_clamped_by, Some(PurgeClamp::Gates));
    assert_eq!(a.gate_view.as_ref().and_then(|v| v.error.clone()), None);
}

#[test]
fn a_cursor_it_cannot_prove_purges_nothing_and_says_why() {
    let fault = |w: &World| {
        let a = w.answer();
        assert_eq!(purge_target(&a), None, "nothing purged");
        a.gate_view.and_then(|v| v.error)
    };
    let mut w = World::new();
    w.gated(Some(json!({"bogus": true})));
    assert!(
        matches!(fault(&w), Some(GateFault::CursorMalformed { key, .. }) if key == format!("_absorbed.{S}"))
    );
    // Another incarnation's cursor (the stream was recreated, or a
    // reanchor opened generation 1) proves nothing about this one.
    let mut other = cursor(900);
    other["generation"] = json!(1);
    w.gated(Some(other));
    assert_eq!(fault(&w), None);
    let mut old = cursor(900);
    old["stream_created"] = json!("2026-10-01T00:00:00Z");
    w.gated(Some(old));
    assert_eq!(fault(&w), None);
    let mut legacy = cursor(900);
    legacy.as_object_mut().map(|o| o.remove("stream_created"));
    w.gated(Some(legacy));
    assert_eq!(
        fault(&w),
        None,
        "a cursor without its incarnation proves nothing"
    );
    // Past the log's end: the log was restored.
    w.gated(Some(cursor(1001)));
    assert!(matches!(
        fault(&w),
        Some(GateFault::CursorPastLog {
            cursor: 1001,
            last_seq: 1000,
            ..
        })
    ));
    // The same cursor, just proven by this reader's own absorbing against
    // the leader's later last_seq: records landed after this answer's
    // stream info, which is no restore; the view stands at the cut.
    let mut absorbed = w.clone();
    absorbed.absorbed = Some(Ok(()));
    let a = absorbed.answer();
    assert_eq!(a.gate_view.as_ref().and_then(|v| v.error.clone()), None);
    assert_eq!(a.gate_view.as_ref().and_then(|v| v.absorbed_to), Some(1000));
    // The holder's absorption failed: a fault, and the cursor it last
    // proved still bounds the purge.
    w.gated(Some(cursor(500)));
    let mut read_failed = w.clone();
    read_failed.absorbed = Some(Err("gates bucket: timed out".into()));
    let a = read_failed.answer();
    assert_eq!(purge_target(&a), Some(501));
    assert!(matches!(
        a.gate_view.and_then(|v| v.error),
        Some(GateFault::AbsorbFailed { .. })
    ));
}

#[test]
fn gate_rows_of_another_incarnation_evict_nobody() {
    let mut w = World::new();
    w.node("node-4", false, Some(10));
    w.gates = Some(vec![(
        format!("{S}.node-4"),
        json!({"node": "node-4", "stream": S, "state": "evicted", "op_id": crate::rows::OpId::mint(now()).as_str(), "seq": 5, "landed_at": ts(-600), "by": "alice", "stream_created": "2026-10-01T00:00:00Z", "generation": 0}).to_string(),
    )]);
    let a = w.answer();
    assert_eq!(a.trim_to, 10, "node-4 is still counted");
}

#[test]
fn an_unreadable_floors_row_blocks() {
    let mut w = World::new();
    w.floors = Some(vec![(S.into(), "not json".into())]);
    let a = w.answer();
    assert!(
        matches!(
            a.not_ready,
            Some(crate::floor::NotReady::FloorUnreadable { .. })
        ),
        "{:?}",
        a.not_ready
    );
    assert_eq!(purge_target(&a), None);
}

#[test]
fn capacity_figures() {
    let a = World::new().answer();
    assert_eq!(a.max_bytes, 1 << 30);
    assert_eq!(a.reserve_bytes, (1 << 30) / 16);
    assert_eq!(a.soft_ceiling_bytes, (1 << 30) - (1 << 30) / 16);
    assert!(
        (a.headroom_fraction - (1.0 - (1u64 << 20) as f64 / a.soft_ceiling_bytes as f64)).abs()
            < 1e-12
    );
    let mut w = World::new();
    w.domain.gate_reserve = false;
    assert_eq!(w.answer().reserve_bytes, 0);
}

#[test]
fn purge_bounds() {
    assert_eq!(check_purge(0, 1, 10), None, "0 is never sent");
    assert_eq!(check_purge(5, 6, 10), None, "nothing below first_seq");
    assert_eq!(check_purge(5, 1, 10), Some(6));
    assert_eq!(check_purge(10, 1, 10), Some(11), "up to the tail");
    assert_eq!(check_purge(11, 1, 10), None, "never past the tail");
    assert_eq!(check_purge(u64::MAX, 1, u64::MAX), None);
}

#[test]
fn a_binding_term_holds_the_records_up_to_the_trim_without_it() {
    // The backup binds at 800; without it, applied binds at 900.
    let a = World::new().answer();
    assert_eq!(a.trim_to, 800);
    let held = term(&a, TermName::BackupFloor).held.expect("binds");
    assert_eq!(held.records, 100);
    // 1 MiB over 1 000 records: 1 048.576 bytes a record.
    assert_eq!(held.bytes, 104_858);
    assert_eq!(held.since, Timestamp(now()));
    // applied (900) blocks too, below the age policy's 1000, but without
    // it the backup still binds: it holds nothing on its own.
    assert!(a.blocked_by.contains(&TermName::Applied));
    assert_eq!(term(&a, TermName::Applied).held.map(|h| h.records), Some(0));
    // Terms that neither bind nor block carry nothing.
    assert_eq!(term(&a, TermName::MinHold).held, None);
    assert_eq!(term(&a, TermName::AgeFloor).held, None);

    // Only records still on the log are counted: from 851 on, 50.
    let mut w = World::new();
    w.stream = Ok(StreamState {
        first_seq: 851,
        ..w.stream.clone().expect("ok")
    });
    let held = term(&w.answer(), TermName::BackupFloor)
        .held
        .expect("binds");
    assert_eq!(held.records, 50);
}

#[test]
fn two_terms_at_the_same_value_each_hold_nothing_alone() {
    let mut w = World::new();
    w.node("node-2", true, Some(800));
    let a = w.answer();
    assert_eq!(a.trim_to, 800);
    assert_eq!(term(&a, TermName::Applied).held.map(|h| h.records), Some(0));
    assert_eq!(
        term(&a, TermName::BackupFloor).held.map(|h| h.records),
        Some(0)
    );
}

#[test]
fn an_unreadable_term_holds_what_the_others_would_license() {
    let mut w = World::new();
    w.holds = None;
    let a = w.answer();
    assert_eq!(a.trim_to, 0);
    assert_eq!(
        term(&a, TermName::MinHold).held.map(|h| h.records),
        Some(800)
    );
}

#[test]
fn pinned_since_is_kept_while_the_pin_holds_at_or_above_where_it_was() {
    let row = |seq: u64, since: &str| {
        json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 701, "trim_floor_state": "published",
            "blocked_by": ["backup_floor"], "held_since": since, "at": ts(-10),
            "terms": [{"term": "backup_floor", "state": "value", "seq": seq, "pinned_since": since}]})
    };
    // It held at 700 an hour ago and holds at 800 now: pinned at or below
    // 800 for that hour.
    let mut w = World::new();
    w.floor_row(row(700, &ts(-3600)));
    let since = term(&w.answer(), TermName::BackupFloor)
        .held
        .map(|h| h.since.to_rfc3339());
    assert_eq!(since, Some(ts(-3600)));
    // It held at 850 and moved down to 800: at or below 800 only from now.
    let mut w = World::new();
    w.floor_row(row(850, &ts(-3600)));
    let since = term(&w.answer(), TermName::BackupFloor)
        .held
        .map(|h| h.since);
    assert_eq!(since, Some(Timestamp(now())));
    // A row of an older version, without pinned_since: from now.
    let mut w = World::new();
    w.floor_row(json!({"stream": S, "generation": 0, "stream_created": CREATED, "floor": 701, "trim_floor_state": "published",
        "blocked_by": ["backup_floor"], "held_since": ts(-3600), "at": ts(-10), "terms": "not a list"}));
    let a = w.answer();
    assert_eq!(
        a.not_ready, None,
        "an unreadable terms field never makes the row unreadable"
    );
    assert_eq!(
        term(&a, TermName::BackupFloor).held.map(|h| h.since),
        Some(Timestamp(now()))
    );
}

/// A join hold that expired while its readmission was not absorbed (every
/// sidecar down longer than the holder could extend it) still pins, until
/// the gates view absorbs the readmission; one whose gesture never wrote a
/// record is extended by the holder instead, and an absorbed one pins no
/// more.
#[test]
fn a_lapsed_join_hold_pins_until_its_readmission_is_absorbed() {
    let op = crate::rows::OpId::mint(now());
    let mut w = World::new();
    w.gated(Some(cursor(500)));
    w.holds.get_or_insert_with(Vec::new).push((
        format!("{S}.join-{op}"),
        json!({"seq": 301, "owner": "alice", "kind": "join", "expires_at": ts(-30)}).to_string(),
    ));
    w.gates.get_or_insert_with(Vec::new).push((
        format!("_op.{op}"),
        json!({"op_id": op.as_str(), "sign": "readmit", "node": "node-4", "logs": {S: 600}})
            .to_string(),
    ));
    let a = w.answer();
    let hold = term(&a, TermName::MinHold);
    assert_eq!(hold.seq(), Some(300), "{hold:?}");
    assert!(
        hold.detail
            .as_deref()
            .is_some_and(|d| d.contains("expired, its readmission not yet absorbed")),
        "{hold:?}"
    );
    assert_eq!(a.trim_to, 300);
    // Absorbed: the gate in force on node-4 is this readmission's record.
    w.gates.get_or_insert_with(Vec::new).push((
        format!("{S}.node-4"),
        json!({"node": "node-4", "stream": S, "state": "admitted", "op_id": op.as_str(), "seq": 600,
               "landed_at": ts(-20), "by": "alice", "stream_created": CREATED, "generation": 0})
        .to_string(),
    ));
    let a = w.answer();
    let hold = term(&a, TermName::MinHold);
    assert_eq!(hold.state, TermState::Unbounded, "{hold:?}");
}

/// A lost positions bucket carries each remembered node that no bucket
/// shows now at the remembered `applied` (the lowest position any counted
/// node stood at: never above what one of them needed), and the next
/// memory keeps them as carried; a live data node without a row is a
/// member too.
#[test]
fn a_carried_node_counts_at_the_remembered_applied() {
    let old = Timestamp::parse("2026-11-03T00:00:00Z").expect("instant");
    let new = Timestamp::parse("2026-11-30T11:00:00Z").expect("instant");
    let mut w = World::new();
    w.created.positions = Some(old);
    w.created.holds = Some(old);
    w.position("node-2", 950, 0, CREATED, "log_diverged");
    w.position("node-3", 960, 0, "2020-01-01T00:00:00Z", "ok");
    w.position("node-4", 970, 0, CREATED, "ok");
    let first = w.answer();
    assert_eq!(first.memory.members, 4, "{:?}", first.memory);
    assert_eq!(first.memory.applied, Some(0), "{:?}", first.memory);
    let write = first
        .members_write
        .clone()
        .expect("a new membership is written");
    // The positions bucket is recreated empty; node-1 reports again.
    let row = serde_json::to_value(crate::floor::FloorsRow::from(&first)).expect("row");
    w.floor_row(row);
    for (n, chunk) in write.chunks.iter().enumerate() {
        w.floors.get_or_insert_with(Vec::new).push((
            crate::floor::members::members_key(S, u32::try_from(n).expect("n")),
            String::from_utf8(chunk.clone()).expect("utf-8"),
        ));
    }
    w.positions = Some(vec![]);
    w.position("node-1", 900, 0, CREATED, "ok");
    w.created.positions = Some(new);
    let a = w.answer();
    check(&a, TermName::Applied, "value 0");
    for node in ["node-2", "node-3", "node-4"] {
        let n = a.nodes.iter().find(|n| n.node == node).expect("listed");
        assert_eq!(n.state, NodeState::Carried, "{n:?}");
        assert_eq!(n.seq, Some(0), "{n:?}");
        assert_eq!(n.carried_from, Some(old), "{n:?}");
    }
    // The next memory keeps them, as carried.
    assert_eq!(a.memory.carried, 3, "{:?}", a.memory);
    assert_eq!(a.memory.members, 4, "{:?}", a.memory);
    // A memory whose keys are gone, with the bucket recreated, is lost.
    let mut lost = w.clone();
    lost.floors
        .get_or_insert_with(Vec::new)
        .retain(|(k, _)| !k.starts_with("_members."));
    let said = lost
        .answer()
        .not_ready
        .map(|n| n.to_string())
        .unwrap_or_default();
    assert!(
        said.starts_with("memory_lost (the membership the floors row names cannot be read back whole, and a bucket it was kept for was recreated, since ")
            && said.ends_with(": the pins it kept are unknown)"),
        "{said}"
    );
}

/// The age lookup is spared where the stream info's own stamps settle it,
/// and only there: as the lookup would answer on stamps in sequence order.
#[test]
fn the_stamps_settle_the_age_lookup_only_at_either_end() {
    let t = |s: &str| Timestamp::parse(s).expect("instant");
    let mut s = World::new().stream.expect("ok");
    s.first_seq = 10;
    s.last_seq = 20;
    s.messages = 11;
    s.first_ts = t("2026-12-01T00:00:00Z");
    s.last_ts = t("2026-12-02T00:00:00Z");
    // Every record older than the cutoff: none is young.
    assert_eq!(young_by_stamps(&s, t("2026-12-03T00:00:00Z")), Some(None));
    // The first already as young: the first is.
    assert_eq!(
        young_by_stamps(&s, t("2026-12-01T00:00:00Z")),
        Some(Some(10))
    );
    assert_eq!(
        young_by_stamps(&s, t("2026-11-30T00:00:00Z")),
        Some(Some(10))
    );
    // The last exactly at the cutoff is young: the lookup is sent.
    assert_eq!(young_by_stamps(&s, t("2026-12-02T00:00:00Z")), None);
    // Between the two: the lookup is sent.
    assert_eq!(young_by_stamps(&s, t("2026-12-01T12:00:00Z")), None);
    // An empty log has nothing young.
    s.first_seq = 21;
    s.messages = 0;
    assert_eq!(young_by_stamps(&s, t("2026-11-30T00:00:00Z")), Some(None));
}

/// A row as the holder writes it parses back with the fields read
/// leniently (the terms' `pinned_since`, the configuration, the gates
/// view) as written; any of them of another shape is left out, and the
/// rest of the row still parses.
#[test]
fn a_written_row_parses_back_with_its_leniently_read_fields() {
    let mut w = World::new();
    w.gated(Some(cursor(500)));
    let a = w.answer();
    let body = FloorsRow::from(&a).to_bytes().expect("the row serializes");
    let p = PublishedFloor::parse(S, &body).expect("the row parses");
    let terms = p.terms.as_ref().expect("the terms parse");
    assert_eq!(terms.len(), a.terms.len());
    for (read, t) in terms.iter().zip(&a.terms) {
        assert_eq!(read.term, t.term);
        assert_eq!(read.seq, t.seq());
        assert_eq!(read.pinned_since, t.held.map(|h| h.since));
    }
    assert_eq!(p.config.as_ref(), Some(&a.config));
    let gate = p.gate_view.as_ref().expect("the gates view parses");
    assert_eq!(
        gate.absorbed_to,
        a.gate_view.as_ref().and_then(|g| g.absorbed_to)
    );
    let row: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    for (field, odd) in [
        ("terms", json!({"term": "applied"})),
        ("config", json!([1, 2])),
        ("gate_view", json!("absorbed")),
    ] {
        let mut r = row.clone();
        r[field] = odd;
        let p = PublishedFloor::parse(S, r.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{field} of another shape failed the row: {e}"));
        let left_out = match field {
            "terms" => p.terms.is_none(),
            "config" => p.config.is_none(),
            _ => p.gate_view.is_none(),
        };
        assert!(left_out, "{field} of another shape is left out");
        assert_eq!(p.floor, a.floor, "{field}: the rest of the row is read");
    }
}

/// The configuration digest is compared across sidecars, of this version
/// and of others (`config_drift`): the same settings digest to the same
/// value in every version. These values are what the version that first
/// published the digest computed.
#[test]
fn the_configuration_digest_of_given_settings_never_changes() {
    let w = World::new();
    let plain = super::answer::config_digest(&w.domain, &w.policy);
    let mut d = w.domain.clone();
    d.gate_subject = Some("tracker.gate".into());
    d.feed_consumer = Some("feed \"one\" é".into());
    d.archive =
        Some(serde_yaml::from_str("{dir: /var/lib/crewlet/archive}").expect("an archive section"));
    let mut p = w.policy.clone();
    p.backup_floor = BackupPolicy::Operator;
    p.min_age = Duration::from_millis(1500);
    p.tick = Duration::from_secs(30);
    let set = super::answer::config_digest(&d, &p);
    assert_eq!(
        (plain.as_str(), set.as_str()),
        ("32d851fd2a866d93", "d1a766132c8db61b")
    );
}
