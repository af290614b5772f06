//! Fuzz tests (proptest) for every parser of outside input: the YAML
//! configuration, every contract row and key, operation ids, instants, the
//! floors row and gate records on the log. Each must never panic, and every
//! refusal must be a clean error that says what was wrong (rows: naming the
//! key). `CREWLET_FUZZ_CASES` sets the cases per target (default 2,000 in
//! the normal run; docs/testing.md gives the long run's figures). Every run
//! draws from a fixed seed ([`crate::seeded`]), and what fails is kept in
//! `proptest-regressions/`.

use proptest::prelude::*;

use crate::config;
use crate::floor::PublishedFloor;
use crate::gate::{self, LogRecord, View};
use crate::rows::*;

fn cases() -> u32 {
    std::env::var("CREWLET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

const SEEDS: &[&str] = &[
    r#"{"node": "node-1", "roles": ["data"], "version": "1.4.2", "started_at": "2026-11-30T01:00:00Z"}"#,
    r#"{"node": "node-3", "stream": "S", "seq": 918100123, "generation": 0, "stream_created": "2026-11-02T10:00:00.418226517Z", "updated_at": "2026-11-30T01:00:00Z", "status": "ok"}"#,
    r#"{"seq": 918000000, "owner": "backup-nightly", "kind": "backup", "reason": "r", "expires_at": "2026-11-30T03:00:00Z"}"#,
    r#"{"id": "b1", "node": "node-1", "taken_at": "2026-11-30T00:00:00Z", "completed_at": "2026-11-30T00:10:00Z", "verified": true, "owner": "o", "positions": {"S": 918100000}}"#,
    r#"{"stream": "S", "position": 918100000, "by": "alice", "at": "2026-11-30T00:00:00Z"}"#,
    r#"{"node": "node-2", "updated_at": "2026-11-30T00:00:00Z", "skip_reason": "lagging", "artefacts": {"S": {"position": 9, "generation": 0, "taken_at": "2026-11-30T00:00:00Z", "verified": true}}}"#,
    r#"{"holder": "node-1", "session": "01JD", "claimed_at": "2026-11-30T00:00:00Z"}"#,
    r#"{"stream": "S", "generation": 0, "stream_created": "2026-11-30T00:00:00Z", "floor": 5, "trim_floor_state": "published", "at": "2026-11-30T00:00:00Z"}"#,
];

/// A valid row with one random edit: a byte replaced, a range deleted, or
/// a range repeated. Close enough to valid to reach deep into the parser.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        0..SEEDS.len(),
        any::<usize>(),
        any::<usize>(),
        any::<u8>(),
        0..3u8,
    )
        .prop_map(|(i, a, b, byte, how)| {
            let mut v = SEEDS[i].as_bytes().to_vec();
            let len = v.len();
            let (x, y) = (a % len, b % len);
            let (lo, hi) = (x.min(y), x.max(y));
            match how {
                0 => v[x] = byte,
                1 => {
                    v.drain(lo..hi);
                }
                _ => {
                    let piece = v[lo..hi].to_vec();
                    v.splice(hi..hi, piece);
                }
            }
            v
        })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![mutated(), prop::collection::vec(any::<u8>(), 0..200)]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("S.node-3".to_string()),
        Just("node-1".to_string()),
        Just("_ack.S".to_string()),
        Just("node-1.b1".to_string()),
        "[a-zA-Z0-9._ -]{0,20}",
        any::<String>(),
    ]
}

fn clean<T, E: std::fmt::Display>(r: Result<T, E>, key: &str) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        let msg = e.to_string();
        prop_assert!(!msg.trim().is_empty(), "an empty error for key {key:?}");
        prop_assert!(
            msg.contains(key),
            "the error does not name the key {key:?}: {msg}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::seeded::config(cases()))]

    #[test]
    fn fuzz_rows(k in key(), b in body()) {
        clean(PresenceRow::parse(&k, &b), &k)?;
        clean(PositionRow::parse(&k, &b), &k)?;
        clean(HoldRow::parse(&k, &b), &k)?;
        clean(BackupManifest::parse(&k, &b), &k)?;
        clean(AckRow::parse(&k, &b), &k)?;
        clean(SnapshotRow::parse(&k, &b), &k)?;
        clean(DutyRow::parse(&k, &b), &k)?;
        clean(GateRow::parse(&k, &b), &k)?;
        clean(OpRow::parse(&k, &b), &k)?;
        clean(PublishedFloor::parse(&k, &b), &k)?;
    }

    #[test]
    fn fuzz_keys_ids_and_instants(s in any::<String>()) {
        let _ = HoldKey::parse(&s);
        let _ = check_node_id(&s);
        let _ = check_stream_name(&s);
        let _ = check_bucket_name(&s);
        let _ = check_literal_subject(&s);
        if let Err(e) = OpId::parse(&s, chrono::Utc::now()) {
            prop_assert!(!e.0.is_empty());
        }
        if let Err(e) = Timestamp::parse(&s) {
            prop_assert!(!e.0.is_empty());
        }
    }

    #[test]
    fn fuzz_gate_records(b in body(), node in "[a-z0-9-]{0,8}", gate_h in "(evict|readmit|x)?") {
        let op = OpId::mint(chrono::Utc::now());
        let headers = [
            ("Crewlet-Gate".to_string(), gate_h),
            ("Crewlet-Node".to_string(), node),
            ("Crewlet-Op-Id".to_string(), op.to_string()),
        ].into();
        let rec = LogRecord { seq: 7, landed_at: Timestamp(chrono::Utc::now()), headers, body: b };
        let out = gate::absorb(
            "S",
            crate::rows::Incarnation { stream_created: Timestamp(chrono::Utc::now()), generation: 0 },
            &View::default(),
            None,
            &[rec],
            7,
        );
        // Absorbed or skipped with a reason, never anything else.
        prop_assert!(out.gates.len() + out.skipped.len() == 1);
        prop_assert!(out.skipped.iter().all(|s| !s.reason.is_empty()));
    }

    #[test]
    fn fuzz_config_text(text in any::<String>()) {
        let c = config::check(&text);
        prop_assert!(c.config.is_some() || c.problems.iter().any(|p| p.is_error()));
        prop_assert!(c.problems.iter().all(|p| !p.message.is_empty() && !p.field.is_empty()));
    }

    #[test]
    fn fuzz_config_mutations(line in 0usize..40, edit in "[ -~]{0,12}", how in 0..3u8) {
        let base = include_str!("../config/crewlet.reference.yaml");
        let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
        let i = line % lines.len();
        match how {
            0 => lines[i] = edit,
            1 => { lines.remove(i); }
            _ => lines[i].push_str(&edit),
        }
        let text = lines.join("\n");
        let c = config::check(&text);
        prop_assert!(c.config.is_some() || c.problems.iter().any(|p| p.is_error()));
        let line_count = text.lines().count() + 1;
        for p in &c.problems {
            prop_assert!(!p.message.is_empty());
            // A line, when given, is one of the file's.
            prop_assert!(p.line.is_none_or(|l| l >= 1 && l <= line_count), "{p:?} in a {line_count}-line file");
        }
    }
}
