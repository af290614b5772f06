//! Judgements, records, absorption in log order, outcomes, admission.

use super::*;
use crate::rows::Stamped;
use crate::rows::Timestamp;
use crate::rows::Unreadable;

fn now() -> DateTime<Utc> {
    Timestamp::parse("2026-11-30T12:00:00Z")
        .map(|i| i.0)
        .expect("fixed")
}

#[test]
fn input_is_checked_op_id_first() {
    let op = OpId::mint(now());
    assert!(check_input("node-4", Some("node-4"), None, now()).is_ok());
    assert_eq!(
        check_input("node-4", Some("node-4"), Some(op.as_str()), now()),
        Ok(op.clone())
    );
    // A bad op id is refused before the (also bad) node id is looked at.
    let e = check_input("bad node", Some("x"), Some("hand-made"), now()).unwrap_err();
    assert_eq!(e.code(), "op_id_invalid");
    assert!(e.is_bad_input());
    assert_eq!(
        check_input("bad node", Some("bad node"), None, now())
            .unwrap_err()
            .code(),
        "node_id_invalid"
    );
    assert_eq!(
        check_input("node-4", Some("node-5"), None, now())
            .unwrap_err()
            .code(),
        "confirm_mismatch"
    );
    assert_eq!(
        check_input("node-4", None, None, now()).unwrap_err().code(),
        "confirm_missing"
    );
    let future = OpId::mint(now() + chrono::Duration::minutes(10));
    assert_eq!(
        check_input("node-4", Some("node-4"), Some(future.as_str()), now())
            .unwrap_err()
            .code(),
        "op_id_invalid"
    );
}

#[test]
fn eviction_judgement() {
    assert_eq!(
        judge_evict("n", &Presence::Absent, false),
        Ok(EvictJudged::Clear)
    );
    assert_eq!(
        judge_evict("n", &Presence::Live, false).unwrap_err().code(),
        "node_live"
    );
    assert_eq!(
        judge_evict("n", &Presence::Live, true),
        Ok(EvictJudged::ForcedLive)
    );
    let unreadable = Presence::Unreadable("bucket gone".into());
    let e = judge_evict("n", &unreadable, false).unwrap_err();
    assert_eq!(e.code(), "unjudged");
    assert!(!e.is_bad_input());
    assert_eq!(
        judge_evict("n", &unreadable, true),
        Ok(EvictJudged::ForcedUnjudged)
    );
}

fn facts(
    position: Option<u64>,
    floor: Option<u64>,
    first_seq: u64,
) -> Result<ReadmitFacts, Unreadable> {
    Ok(ReadmitFacts {
        stream: "S".into(),
        position,
        left_gen: None,
        floor,
        first_seq,
        generation: 0,
    })
}

#[test]
fn readmission_judgement() {
    // Must reach max(floor, first_seq) - 1.
    assert!(judge_readmit("n", &[facts(Some(99), Some(100), 50)]).is_ok());
    let e = judge_readmit("n", &[facts(Some(98), Some(100), 50)]).unwrap_err();
    assert_eq!(e.code(), "below_floor");
    assert_eq!(e.to_string(), "below_floor: n has position 98 on S but needs 99 (floor 100, first_seq 50, generation 0); let it catch up (or adopt a snapshot) and run this again");
    // No floor yet: first_seq - 1. A node that never reported holds nothing.
    assert!(judge_readmit("n", &[facts(None, None, 1)]).is_ok());
    assert!(judge_readmit("n", &[facts(None, None, 2)]).is_err());
    assert!(
        judge_readmit("n", &[facts(Some(200), Some(100), 300)]).is_err(),
        "first_seq above the floor binds"
    );
    // A left generation is refused whatever it reads.
    let left = Ok(ReadmitFacts {
        stream: "S".into(),
        position: Some(10_000),
        left_gen: Some(0),
        floor: Some(5),
        first_seq: 5,
        generation: 1,
    });
    assert!(judge_readmit("n", &[left])
        .unwrap_err()
        .to_string()
        .contains("generation 0, which the log has left"));
    // Every log is judged; one unreadable input refuses it all.
    let e = judge_readmit(
        "n",
        &[
            facts(Some(99), Some(100), 50),
            Err("stream T: timeout".into()),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), "readmission_unjudged");
}

#[test]
fn records_carry_the_contract_headers_and_body() {
    let op = OpId::mint(now());
    let g = Gesture {
        op: &op,
        sign: GateSign::Evict,
        node: "node-4",
        by: "alice",
        force: true,
        reason: "disk died",
    };
    let (headers, body) = record(&g, "S", now());
    let h: BTreeMap<&str, String> = headers.into_iter().collect();
    assert_eq!(h["Nats-Msg-Id"], format!("{op}.evict.S.node-4"));
    assert_eq!(h["Crewlet-Gate"], "evict");
    assert_eq!(h["Crewlet-Node"], "node-4");
    assert_eq!(h["Crewlet-Op-Id"], op.as_str());
    let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(
        v,
        serde_json::json!({"kind": "evict", "node": "node-4", "op_id": op.as_str(), "by": "alice", "at": "2026-11-30T12:00:00Z", "force": true, "reason": "disk died"})
    );
}

fn log_record(seq: u64, op: &OpId, sign: GateSign, node: &str) -> LogRecord {
    let g = Gesture {
        op,
        sign,
        node,
        by: "alice",
        force: false,
        reason: "",
    };
    let (headers, body) = record(&g, "S", now());
    LogRecord {
        seq,
        landed_at: Timestamp(now() + chrono::Duration::seconds(seq as i64)),
        headers: headers
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        body,
    }
}

#[test]
fn absorption_follows_log_order() {
    let a = OpId::mint(now());
    let b = OpId::mint(now() + chrono::Duration::seconds(1));
    // Two operators evict node-4 with different ids.
    let records = vec![
        log_record(10, &a, GateSign::Evict, "node-4"),
        log_record(12, &b, GateSign::Evict, "node-4"),
        log_record(20, &a.clone(), GateSign::Evict, "node-4"), // a resend after the duplicate window
    ];
    let out = absorb("S", inc(0), &View::default(), None, &records, 25);
    assert_eq!(out.gates.len(), 1, "one row per node: {:?}", out.gates);
    assert_eq!(out.gates[0].op_id, b.as_str(), "the later record wins");
    assert_eq!(out.gates[0].seq, 12);
    assert_eq!(out.ops.len(), 2);
    assert_eq!(out.skipped.len(), 1);
    assert!(
        out.skipped[0].reason.starts_with("duplicate of operation"),
        "{:?}",
        out.skipped
    );
    assert_eq!(out.cursor.as_ref().map(|c| c.seq), Some(25));

    // Absorbing the same records again changes nothing.
    let mut view = View::default();
    for g in &out.gates {
        view.gates.insert(g.node.clone(), g.clone());
    }
    for o in &out.ops {
        view.ops.insert(o.op_id.clone(), o.clone());
    }
    let again = absorb("S", inc(0), &view, None, &records[..2], 25);
    assert!(again.gates.is_empty() && again.ops.is_empty(), "{again:?}");
}

/// Incarnation `generation` of the test log "S".
fn inc(generation: u64) -> crate::rows::Incarnation {
    crate::rows::Incarnation {
        stream_created: Timestamp(now() - chrono::Duration::days(1)),
        generation,
    }
}

#[test]
fn a_view_belongs_to_one_incarnation() {
    let a = OpId::mint(now());
    let b = OpId::mint(now() + chrono::Duration::seconds(1));
    let old = absorb(
        "S",
        inc(0),
        &View::default(),
        None,
        &[log_record(30, &a, GateSign::Evict, "node-4")],
        30,
    );
    let cursor = old.cursor.clone().expect("cursor");
    assert!(cursor.belongs_to(&inc(0)) && !cursor.belongs_to(&inc(1)));
    let mut view = View::default();
    for g in &old.gates {
        view.gates.insert(g.node.clone(), g.clone());
    }
    for o in &old.ops {
        view.ops.insert(o.op_id.clone(), o.clone());
    }
    // The next generation: the old cursor (at 30) does not hide record 6,
    // and the old row (at 30) does not outrank it.
    let new = absorb(
        "S",
        inc(1),
        &view,
        Some(&cursor),
        &[log_record(6, &b, GateSign::Readmit, "node-4")],
        6,
    );
    assert_eq!(new.gates.len(), 1, "{new:?}");
    assert_eq!(new.gates[0].seq, 6);
    assert_eq!(new.gates[0].state, GateState::Admitted);
    assert_eq!(new.gates[0].generation, Some(1));
    assert_eq!(new.cursor.expect("cursor").seq, 6);
    // A restored log re-anchored with its records intact: the record an
    // earlier generation absorbed makes this generation's row too.
    let again = absorb(
        "S",
        inc(1),
        &view,
        Some(&cursor),
        &[log_record(30, &a, GateSign::Evict, "node-4")],
        30,
    );
    assert_eq!(again.gates.len(), 1, "{again:?}");
    assert!(again.ops.is_empty(), "the operation row already says 30");
}

#[test]
fn malformed_records_are_skipped_with_a_reason() {
    let a = OpId::mint(now());
    let mut bad = log_record(3, &a, GateSign::Evict, "node-4");
    bad.body = b"{not json".to_vec();
    let mut lying = log_record(4, &a, GateSign::Evict, "node-4");
    lying.headers.insert(H_NODE.into(), "node-9".into());
    let good = log_record(5, &a, GateSign::Evict, "node-4");
    let out = absorb("S", inc(0), &View::default(), None, &[bad, lying, good], 5);
    assert_eq!(
        out.skipped.iter().map(|s| s.seq).collect::<Vec<_>>(),
        [3, 4]
    );
    assert!(out.skipped[1].reason.contains("headers and body disagree"));
    assert_eq!(out.gates[0].seq, 5);
    assert_eq!(
        out.cursor.expect("cursor").skipped.len(),
        2,
        "the cursor keeps what was skipped for status"
    );
}

#[test]
fn op_reuse_and_superseded() {
    let a = OpId::mint(now());
    let b = OpId::mint(now());
    let row = OpRow {
        op_id: a.to_string(),
        sign: GateSign::Evict,
        node: "node-4".into(),
        logs: [("S".to_string(), 10)].into(),
        format: crate::rows::FORMAT,
    };
    let gate = |op: &OpId, seq| GateRow {
        node: "node-4".into(),
        stream: "S".into(),
        state: GateState::Evicted,
        op_id: op.to_string(),
        seq,
        landed_at: Timestamp(now()),
        by: "x".into(),
        force: false,
        reason: String::new(),
        stream_created: Some(inc(0).stream_created),
        generation: Some(0),
        format: crate::rows::FORMAT,
    };
    assert_eq!(
        prior(&a, GateSign::Evict, "node-4", None, &BTreeMap::new()),
        Prior::New
    );
    let gates: BTreeMap<String, GateRow> = [("S".to_string(), gate(&a, 10))].into();
    assert!(matches!(
        prior(&a, GateSign::Evict, "node-4", Some(&row), &gates),
        Prior::Same { .. }
    ));
    assert!(matches!(
        prior(&a, GateSign::Readmit, "node-4", Some(&row), &gates),
        Prior::Reused { .. }
    ));
    assert!(matches!(
        prior(&a, GateSign::Evict, "node-5", Some(&row), &gates),
        Prior::Reused { .. }
    ));
    let later: BTreeMap<String, GateRow> = [("S".to_string(), gate(&b, 30))].into();
    assert!(matches!(
        prior(&a, GateSign::Evict, "node-4", Some(&row), &later),
        Prior::Superseded { .. }
    ));
}

#[test]
fn admission_honours_the_reserve() {
    let max = 16 * 1024;
    let soft = max - max / 16;
    assert_eq!(
        admission(RecordKind::Ordinary, soft - 100, 100, soft, max),
        Admission::Admit
    );
    assert!(matches!(
        admission(RecordKind::Ordinary, soft - 100, 101, soft, max),
        Admission::Refuse { .. }
    ));
    assert_eq!(
        admission(RecordKind::Gate, soft + 500, 100, soft, max),
        Admission::Admit,
        "a gate record may use the reserve"
    );
    assert_eq!(
        admission(RecordKind::Gate, max - 10, 11, soft, max),
        Admission::Refuse {
            limit_bytes: max,
            would_hold: max + 1
        }
    );
}

#[test]
fn outcomes() {
    assert!(LogOutcome::Applied { seq: 1 }.finished());
    assert!(LogOutcome::Pending { seq: 1 }.finished());
    assert!(!LogOutcome::Unknown {
        error: "timeout".into()
    }
    .finished());
    let full = LogOutcome::NotWritten {
        reason: NotWritten::LogFull,
        detail: "x".into(),
    };
    assert_eq!(full.text(), "not written: log_full (x)");
    assert_eq!(
        serde_json::to_value(&full).expect("json")["outcome"],
        "not_written"
    );
}

/// The gates view's cursor and a reanchor's anchor, written by a newer
/// release (a higher `format`), are unreadable: the purge they guard waits
/// (rows::tests::a_sidecar_row_of_a_newer_format_is_unreadable for the
/// rule).
#[test]
fn a_gates_row_of_a_newer_format_is_unreadable() {
    let cursor = r#"{"stream": "S", "seq": 3, "format": 99}"#;
    assert!(Cursor::parse("_absorbed.S", cursor.as_bytes()).is_err());
    let cursor = r#"{"stream": "S", "seq": 3, "format": 2}"#;
    assert!(Cursor::parse("_absorbed.S", cursor.as_bytes()).is_ok());
    let cursor = r#"{"stream": "S", "seq": 3}"#;
    assert!(Cursor::parse("_absorbed.S", cursor.as_bytes()).is_ok());
    let anchor = r#"{"stream": "S", "generation": 1, "stream_created": "2026-12-06T00:00:00Z", "generation_opened_at": "2026-12-06T00:00:00Z", "format": 3}"#;
    assert!(Anchor::parse("_anchor.S", anchor.as_bytes()).is_err());
}
