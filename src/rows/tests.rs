//! The rows' parsers against valid and broken rows, and the timestamps
//! against chrono's own printing.

use chrono::{DateTime, Utc};

use super::*;

use super::time::by_chrono;

proptest::proptest! {
    #![proptest_config(crate::seeded::config(256))]
    #[test]
    fn an_instant_prints_as_chrono_printed_it(
        secs in -70_000_000_000i64..300_000_000_000,
        nanos in proptest::prop_oneof![
            proptest::strategy::Just(0u32),
            proptest::strategy::Just(500_000_000u32),
            0u32..1_000_000_000,
        ],
    ) {
        let t = chrono::DateTime::from_timestamp(secs, nanos).expect("in range");
        proptest::prop_assert_eq!(super::Timestamp(t).to_rfc3339(), by_chrono(&t));
    }
}

#[test]
fn edge_instants_print_as_chrono_printed_them() {
    use chrono::{NaiveDate, TimeZone, Utc};
    let leap = NaiveDate::from_ymd_opt(2016, 12, 31)
        .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_250_000_000))
        .expect("a leap second");
    let year = |y: i32| {
        Utc.with_ymd_and_hms(y, 1, 2, 3, 4, 5)
            .single()
            .expect("a date")
    };
    for t in [
        Utc.from_utc_datetime(&leap),
        year(0),
        year(9999),
        year(10_000),
        year(-1),
        Utc.with_ymd_and_hms(2026, 12, 3, 0, 0, 0)
            .single()
            .expect("a date"),
    ] {
        assert_eq!(super::Timestamp(t).to_rfc3339(), by_chrono(&t), "{t:?}");
    }
}

/// An operator's trial: a malformed row said the JSON parser's text
/// (`invalid type: string "lots", expected u64 at line 1 column 52`).
#[test]
fn a_malformed_row_names_the_field_and_what_is_allowed() {
    let body = br#"{"node":"n1","stream":"S","seq":"lots","generation":0,"stream_created":"2026-11-01T00:00:00Z","updated_at":"2026-11-01T00:00:00Z"}"#;
    let e = super::PositionRow::parse("S.n1", body)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(
        e,
        r#"key S.n1: field seq: string "lots" is not a whole number, 0 or more"#
    );
    let e = super::PositionRow::parse("S.n1", b"{\"node\": ")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("is not a JSON object"), "{e}");
    assert!(!e.contains("line 1"), "{e}");
}

fn now() -> DateTime<Utc> {
    Timestamp::parse("2026-11-30T01:00:00Z")
        .map(|i| i.0)
        .expect("fixed instant")
}

#[test]
fn node_id_rule() {
    let cases: &[(&str, bool)] = &[
        ("node-1", true),
        ("n", true),
        ("9", true),
        ("a.b_c-d", true),
        ("", false),
        ("-node", false),
        (".node", false),
        ("node 1", false),
        ("node-1 ", false),
        (" node-1", false),
        ("nöde", false),
        ("node/1", false),
        ("node*", false),
    ];
    for (id, ok) in cases {
        assert_eq!(check_node_id(id).is_ok(), *ok, "{id:?}");
    }
    assert!(check_node_id(&"a".repeat(64)).is_ok());
    let err = check_node_id(&"a".repeat(65)).unwrap_err().0;
    assert!(err.contains("65 characters"), "{err}");
}

#[test]
fn stream_bucket_and_subject_names() {
    assert!(check_stream_name("CREWLET_TRACKER_LOG").is_ok());
    assert!(
        check_stream_name("tracker-é").is_ok(),
        "printable non-ASCII"
    );
    for bad in [
        "", "A.B", "A B", "A*", "A>", "a/b", "a\\b", "a\tb", "a\u{7f}", "a\u{a0}b", "a\u{85}",
    ] {
        assert!(check_stream_name(bad).is_err(), "{bad:?}");
    }
    assert!(check_bucket_name("crewlet_floors-1").is_ok());
    for bad in ["", "a.b", "a b", "a$"] {
        assert!(check_bucket_name(bad).is_err(), "{bad:?}");
    }
    assert!(check_literal_subject("crewlet.tracker.gate").is_ok());
    for bad in ["", "a..b", "a.*", "a.>", ".a", "a.", "a b"] {
        assert!(check_literal_subject(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn subject_filters() {
    let cases = [
        ("crewlet.tracker.>", "crewlet.tracker.gate", true),
        ("crewlet.*.gate", "crewlet.tracker.gate", true),
        ("crewlet.tracker", "crewlet.tracker.gate", false),
        ("crewlet.tracker.gate", "crewlet.tracker.gate", true),
        ("crewlet.>", "crewlet", false),
        ("*", "a.b", false),
        (">", "a.b", true),
    ];
    for (f, s, want) in cases {
        assert_eq!(subject_matches(f, s), want, "{f} ~ {s}");
    }
}

#[test]
fn instants_round_trip_nanoseconds() {
    let i = Timestamp::parse("2026-11-30T01:02:03.418226517Z").expect("valid");
    assert_eq!(i.to_rfc3339(), "2026-11-30T01:02:03.418226517Z");
    let trimmed = Timestamp::parse("2026-11-30T01:02:03.3271603Z").expect("valid");
    assert_eq!(trimmed.to_rfc3339(), "2026-11-30T01:02:03.3271603Z");
    let whole = Timestamp::parse("2026-11-30T01:02:03Z").expect("valid");
    assert_eq!(whole.to_rfc3339(), "2026-11-30T01:02:03Z");
    assert!(Timestamp::parse("2026-11-30T01:02:03+02:00").is_err());
    assert!(Timestamp::parse("yesterday").is_err());
    assert!(Timestamp::parse("2026-11-30T01:02:03+00:00").is_ok());
}

const POS: &str = r#"{"node": "node-3", "stream": "CREWLET_TRACKER_LOG", "seq": 918100123,
    "generation": 0, "stream_created": "2026-11-02T10:00:00.418226517Z",
    "updated_at": "2026-11-30T01:00:00Z", "status": "ok"}"#;

#[test]
fn position_rows() {
    let row = PositionRow::parse("CREWLET_TRACKER_LOG.node-3", POS.as_bytes()).expect("valid");
    assert_eq!(row.seq, 918100123);
    assert_eq!(row.status, PositionStatus::Ok);

    // The key names another node than the body.
    let err = PositionRow::parse("CREWLET_TRACKER_LOG.node-4", POS.as_bytes()).unwrap_err();
    assert!(matches!(err, RowError::KeyMismatch { .. }), "{err}");
    // The key names another stream than the body.
    let err = PositionRow::parse("CREWLET_PAGES_LOG.node-3", POS.as_bytes()).unwrap_err();
    assert!(
        err.to_string().contains("CREWLET_PAGES_LOG.node-3"),
        "{err}"
    );

    let bad_bodies = [
        ("negative seq", POS.replace("918100123", "-1")),
        ("string seq", POS.replace("918100123", "\"918100123\"")),
        ("unknown status", POS.replace("\"ok\"", "\"fine\"")),
        (
            "node with trailing space",
            POS.replace("\"node-3\"", "\"node-3 \""),
        ),
        ("empty node", POS.replace("\"node-3\"", "\"\"")),
        ("missing generation", POS.replace("\"generation\": 0,", "")),
        (
            "bad timestamp",
            POS.replace("2026-11-30T01:00:00Z", "last tuesday"),
        ),
        ("not json", "seq=5".to_string()),
        ("empty", String::new()),
    ];
    for (what, body) in bad_bodies {
        let r = PositionRow::parse("CREWLET_TRACKER_LOG.node-3", body.as_bytes());
        assert!(r.is_err(), "{what} should be refused");
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains("CREWLET_TRACKER_LOG.node-3"), "{what}: {msg}");
    }
    let diverged = POS.replace("\"ok\"", "\"log_diverged\"");
    let row = PositionRow::parse("CREWLET_TRACKER_LOG.node-3", diverged.as_bytes()).expect("valid");
    assert_eq!(row.status, PositionStatus::LogDiverged);
}

/// The floor's parse of a positions row (values only, strings borrowed)
/// accepts and refuses exactly what the whole row's parse does, with
/// the same words: over valid rows, every refusal above, escaped
/// strings (which cannot be borrowed), keys that name another node or
/// stream, or a prefix of either, and wrong types of every field.
#[test]
fn the_floors_parse_of_a_position_is_the_rows_parse() {
    let key = "CREWLET_TRACKER_LOG.node-3";
    let mut cases: Vec<(String, String)> = Vec::new();
    let bodies = [
        POS.to_string(),
        POS.replace("\"ok\"", "\"log_diverged\""),
        POS.replace("918100123", "-1"),
        POS.replace("918100123", "\"918100123\""),
        POS.replace("\"ok\"", "\"fine\""),
        POS.replace("\"node-3\"", "\"node-3 \""),
        POS.replace("\"node-3\"", "\"\""),
        POS.replace("\"node-3\"", "\"node\\u002d3\""),
        POS.replace("\"CREWLET_TRACKER_LOG\"", "\"CREWLET\\u005fTRACKER_LOG\""),
        POS.replace("\"CREWLET_TRACKER_LOG\"", "\"CREWLET.TRACKER\""),
        POS.replace("\"node-3\"", "7"),
        POS.replace("\"generation\": 0,", ""),
        POS.replace("\"generation\": 0,", "\"generation\": 0.5,"),
        POS.replace("2026-11-30T01:00:00Z", "last tuesday"),
        POS.replace("\"2026-11-30T01:00:00Z\"", "12"),
        POS.replace("\"2026-11-30T01:00:00Z\"", "null"),
        POS.replace(
            "\"2026-11-02T10:00:00.418226517Z\"",
            "\"2026-11-02T10:00:00+02:00\"",
        ),
        POS.replace("\"status\": \"ok\"", "\"status\": \"ok\", \"extra\": [1]"),
        "seq=5".to_string(),
        String::new(),
        "[]".to_string(),
        "{}".to_string(),
    ];
    for body in bodies {
        for k in [
            key,
            "CREWLET_TRACKER_LOG.node-4",
            "CREWLET_TRACKER_LOG.node-",
            "CREWLET_TRACKER_LOG.node-33",
            "CREWLET_PAGES_LOG.node-3",
            "CREWLET_TRACKER_LO.node-3",
            "CREWLET_TRACKER_LOGnode-3",
            "CREWLET.TRACKER.node-3",
        ] {
            cases.push((k.to_string(), body.clone()));
        }
    }
    let mut accepted = 0;
    for (k, body) in &cases {
        let whole = PositionRow::parse(k, body.as_bytes()).map(Position::from);
        let values = PositionRow::parse_values(k, body.as_bytes());
        assert_eq!(
            values.as_ref().map_err(ToString::to_string),
            whole.as_ref().map_err(ToString::to_string),
            "key {k}, body {body}"
        );
        assert_eq!(values, whole, "key {k}, body {body}");
        accepted += usize::from(values.is_ok());
    }
    // Under their own key: valid, diverged, the two escaped spellings,
    // and the one with a field the contract does not name.
    assert_eq!(accepted, 5, "rows accepted");
}

#[test]
fn hold_rows() {
    let body = br#"{"seq": 918000000, "owner": "backup-nightly", "kind": "backup",
        "reason": "nightly", "expires_at": "2026-11-30T03:00:00Z"}"#;
    let (key, row) = HoldRow::parse("CREWLET_TRACKER_LOG.h-1", body).expect("valid");
    assert_eq!(key.stream, "CREWLET_TRACKER_LOG");
    assert_eq!(key.hold_id, "h-1");
    assert_eq!(row.kind, HoldKind::Backup);

    let defaulted = br#"{"seq": 5, "owner": "alice", "expires_at": "2026-11-30T03:00:00Z"}"#;
    let (_, row) = HoldRow::parse("S.h.2", defaulted).expect("valid");
    assert_eq!(row.kind, HoldKind::Operator);

    for (key, body) in [
        ("S", &defaulted[..]),
        ("S.-bad", &defaulted[..]),
        ("S.h", br#"{"seq": 5, "owner": "alice"}"#),
        (
            "S.h",
            br#"{"seq": 5, "owner": " ", "expires_at": "2026-11-30T03:00:00Z"}"#,
        ),
        (
            "S.h",
            br#"{"seq": 5, "owner": "a", "kind": "pin", "expires_at": "2026-11-30T03:00:00Z"}"#,
        ),
    ] {
        assert!(
            HoldRow::parse(key, body).is_err(),
            "{key} {}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn backup_rows() {
    let body =
        br#"{"id": "2026-11-30T00-00Z", "node": "node-1", "taken_at": "2026-11-30T00:00:00Z",
        "completed_at": "2026-11-30T00:10:00Z", "verified": true, "owner": "platform-oncall",
        "positions": {"CREWLET_TRACKER_LOG": 918100000}}"#;
    let m = BackupManifest::parse("node-1.2026-11-30T00-00Z", body).expect("valid");
    assert!(m.counts());
    assert!(BackupManifest::parse("node-2.2026-11-30T00-00Z", body).is_err());

    let debris = br#"{"id": "b1", "node": "n.1", "taken_at": "2026-11-30T00:00:00Z",
        "verified": true, "positions": {}}"#;
    let m = BackupManifest::parse("n.1.b1", debris).expect("valid");
    assert!(!m.counts(), "no completed_at: debris");

    let ack = br#"{"stream": "S", "position": 10, "by": "alice", "at": "2026-11-30T00:00:00Z"}"#;
    assert_eq!(AckRow::parse("_ack.S", ack).expect("valid").position, 10);
    assert!(AckRow::parse("_ack.T", ack).is_err());
}

#[test]
fn snapshot_rows() {
    let body = br#"{"node": "node-2", "updated_at": "2026-11-30T00:00:00Z", "skip_reason": "",
        "artefacts": {"S": {"position": 9, "generation": 0, "taken_at": "2026-11-30T00:00:00Z", "verified": true}}}"#;
    let row = SnapshotRow::parse("node-2", body).expect("valid");
    assert_eq!(row.skip_reason, SkipReason::None);
    assert_eq!(row.artefacts["S"].position, 9);
    let lagging = String::from_utf8_lossy(body)
        .replace("\"skip_reason\": \"\"", "\"skip_reason\": \"lagging\"");
    assert_eq!(
        SnapshotRow::parse("node-2", lagging.as_bytes())
            .expect("valid")
            .skip_reason,
        SkipReason::Lagging
    );
    let unknown = String::from_utf8_lossy(body)
        .replace("\"skip_reason\": \"\"", "\"skip_reason\": \"tired\"");
    assert!(SnapshotRow::parse("node-2", unknown.as_bytes()).is_err());
    assert!(SnapshotRow::parse("node-3", body).is_err());
}

#[test]
fn a_null_skip_reason_is_named_with_what_is_allowed() {
    // The row is one JSON object: its problem is the field's value.
    let body = br#"{"node": "node-2", "updated_at": "2026-11-30T00:00:00Z", "skip_reason": null}"#;
    let e = SnapshotRow::parse("node-2", body)
        .expect_err("null")
        .to_string();
    assert!(!e.contains("not a JSON object"), "{e}");
    assert!(e.contains("skip_reason") && e.contains("null"), "{e}");
    let tired =
        br#"{"node": "node-2", "updated_at": "2026-11-30T00:00:00Z", "skip_reason": "tired"}"#;
    let e = SnapshotRow::parse("node-2", tired)
        .expect_err("tired")
        .to_string();
    assert!(
        e.contains("skip_reason") && e.contains("\"tired\"") && e.contains("\"sole_node\""),
        "{e}"
    );
    let status = br#"{"node":"n1","stream":"S","seq":1,"generation":0,"stream_created":"2026-11-01T00:00:00Z","updated_at":"2026-11-01T00:00:00Z","status":7}"#;
    let e = PositionRow::parse("S.n1", status)
        .expect_err("7")
        .to_string();
    assert!(e.contains("field status") && e.contains('7'), "{e}");
    let kind =
        br#"{"seq": 5, "owner": "alice", "kind": null, "expires_at": "2026-11-30T00:00:00Z"}"#;
    let e = HoldRow::parse("S.h1", kind)
        .expect_err("null kind")
        .to_string();
    assert!(
        e.contains("field kind") && e.contains("\"operator\""),
        "{e}"
    );
    // A body that is not one JSON object is still said so.
    let e = SnapshotRow::parse("node-2", b"{\"node\": ")
        .expect_err("cut")
        .to_string();
    assert!(e.contains("not a JSON object"), "{e}");
}

#[test]
fn op_ids() {
    let id = OpId::mint(now());
    assert_eq!(id.as_str().len(), 26);
    assert!(OpId::parse(id.as_str(), now()).is_ok());
    assert_ne!(OpId::mint(now()), OpId::mint(now()), "two mints differ");
    assert_eq!(id.minted_ms(), now().timestamp_millis() as u64);

    let future = OpId::mint(now() + chrono::Duration::minutes(6));
    assert!(OpId::parse(future.as_str(), now()).is_err());
    let near = OpId::mint(now() + chrono::Duration::minutes(4));
    assert!(OpId::parse(near.as_str(), now()).is_ok());

    let valid = id.as_str().to_string();
    for bad in [
        String::new(),
        format!(" {valid}"),
        format!("{valid} "),
        valid[..25].to_string(),
        valid.to_lowercase(),
        "my-operation-0000000000000".to_string(),
        "8ZZZZZZZZZZZZZZZZZZZZZZZZZ".to_string(),
        "A".repeat(200),
    ] {
        assert!(OpId::parse(&bad, now()).is_err(), "{bad:?}");
    }
}

#[test]
fn gate_rows() {
    let op = OpId::mint(now());
    let body = format!(
        r#"{{"node": "node-4", "stream": "S", "state": "evicted", "op_id": "{op}",
        "seq": 12, "landed_at": "2026-11-30T00:00:00Z", "by": "alice"}}"#
    );
    let row = GateRow::parse("S.node-4", body.as_bytes()).expect("valid");
    assert_eq!(row.state, GateState::Evicted);
    assert!(GateRow::parse("S.node-5", body.as_bytes()).is_err());
    let op_body =
        format!(r#"{{"op_id": "{op}", "sign": "evict", "node": "node-4", "logs": {{"S": 12}}}}"#);
    assert!(OpRow::parse(&format!("_op.{op}"), op_body.as_bytes()).is_ok());
    assert!(OpRow::parse("_op.X", op_body.as_bytes()).is_err());
}

/// The sidecar's own rows carry `format`; one a newer release wrote (a
/// higher format) is unreadable, never read as if it meant what this
/// release's rows mean, and an older one (no `format`) reads as before.
#[test]
fn a_sidecar_row_of_a_newer_format_is_unreadable() {
    let key = "_requested.S";
    let older = r#"{"seq": 5, "by": "alice", "at": "2026-12-06T00:00:00Z"}"#;
    let r = Requested::parse(key, "S", older.as_bytes()).expect("an older row reads");
    assert_eq!(r.format, 0);
    let newer = r#"{"seq": 5, "by": "alice", "at": "2026-12-06T00:00:00Z", "format": 99}"#;
    let said = Requested::parse(key, "S", newer.as_bytes())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(said.contains("newer release (format 99)"), "{said}");
    // The gates view's rows: gate::tests::a_gates_row_of_a_newer_format_is_unreadable.
    // What this release writes, it reads.
    let ours = Requested {
        seq: 5,
        by: "alice".into(),
        at: Timestamp::parse("2026-12-06T00:00:00Z").expect("instant"),
        reason: String::new(),
        stream_created: None,
        generation: None,
        format: FORMAT,
    };
    let body = serde_json::to_vec(&ours).expect("json");
    assert_eq!(Requested::parse(key, "S", &body).expect("reads"), ours);
}

#[test]
fn a_row_of_a_newer_format_is_told_apart_leniently() {
    assert!(super::written_by_newer(
        br#"{"format": 99, "anything": [1]}"#
    ));
    assert!(!super::written_by_newer(br#"{"format": 2}"#));
    assert!(!super::written_by_newer(br#"{"presence_ttl": "30s"}"#));
    assert!(!super::written_by_newer(b"not json"));
}
