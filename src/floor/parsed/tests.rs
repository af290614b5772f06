//! The parsed rows against fresh parses and their patches.

use super::*;
use crate::floor::tests::{World, S};

/// Each log's manifests are found by the streams they name, and a
/// manifest added or forgotten, through a view's patch, is seen at the
/// next look; one that does not parse leaves every log unreadable.
#[test]
fn manifests_are_found_by_stream_as_the_bucket_changes() {
    let manifest = |id: &str, streams: &[&str], verified: bool| {
        let positions: serde_json::Map<String, serde_json::Value> =
            streams.iter().map(|s| (s.to_string(), 7.into())).collect();
        serde_json::json!({"id": id, "node": "n1", "taken_at": "2026-12-05T01:00:00Z",
            "completed_at": "2026-12-05T01:01:00Z", "verified": verified, "positions": positions})
        .to_string()
    };
    let ids = |b: &Backups, stream: &str| -> Vec<String> {
        b.naming(stream)
            .map(|ms| ms.iter().map(|m| m.id.clone()).collect())
            .unwrap_or_else(|e| vec![format!("error: {e}")])
    };
    let mut b = Backups::default();
    add_backup(
        &mut b,
        "n1.a",
        manifest("a", &["S1", "S2"], true).as_bytes(),
        1,
    );
    add_backup(&mut b, "n1.b", manifest("b", &["S2"], true).as_bytes(), 2);
    add_backup(&mut b, "n1.c", manifest("c", &["S1"], false).as_bytes(), 3);
    assert_eq!(
        ids(&b, "S1"),
        ["a"],
        "an unverified manifest does not count"
    );
    assert_eq!(ids(&b, "S2"), ["a", "b"]);
    assert!(ids(&b, "S3").is_empty());
    b.forget(&HashSet::from(["n1.a".to_string()]));
    assert_eq!(ids(&b, "S2"), ["b"]);
    assert!(ids(&b, "S1").is_empty());
    add_backup(&mut b, "n1.d", manifest("d", &["S1"], true).as_bytes(), 4);
    assert_eq!(ids(&b, "S1"), ["d"]);
    add_backup(&mut b, "n1.e", b"not json", 5);
    assert!(
        ids(&b, "S1")[0].starts_with("error: "),
        "{:?}",
        ids(&b, "S1")
    );
    assert!(ids(&b, "S3")[0].starts_with("error: "));
    b.forget(&HashSet::from(["n1.e".to_string()]));
    assert_eq!(ids(&b, "S1"), ["d"]);
}

/// A parsed form patched by the keys that changed equals the same
/// entries parsed afresh, over random writes and deletes of valid,
/// malformed and misplaced rows, on two streams.
fn patched_equals_fresh<T: Patch + std::fmt::Debug>(pool: &[(String, String)], add: Sink<T>) {
    let mut pool: Vec<(String, String)> = pool
        .iter()
        .flat_map(|(k, v)| {
            [
                (k.clone(), v.clone()),
                (k.replace(S, "OTHER"), v.replace(S, "OTHER")),
                (k.clone(), "not json".to_string()),
            ]
        })
        .collect();
    pool.push(("nodot".into(), "{}".into()));
    let mut seed: u64 = 0x2026_1202;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    // key → (value, revision): what the bucket holds live.
    let mut live: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let mut revision = 0;
    let mut patched = T::default();
    for round in 0..300 {
        let mut touched = HashSet::new();
        for _ in 0..=next(4) {
            revision += 1;
            if next(4) == 0 && !live.is_empty() {
                let key = live
                    .keys()
                    .nth(next(live.len()))
                    .cloned()
                    .unwrap_or_default();
                live.remove(&key);
                touched.insert(key);
            } else {
                let (key, _) = &pool[next(pool.len())];
                // Another row's value under this key: a misplaced row.
                let value = pool[next(pool.len())].1.clone();
                let value = if next(2) == 0 {
                    pool.iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, v)| v.clone())
                        .unwrap_or(value)
                } else {
                    value
                };
                live.insert(key.clone(), (value, revision));
                touched.insert(key.clone());
            }
        }
        let mut in_order: Vec<(&String, &(String, u64))> = live.iter().collect();
        in_order.sort_by_key(|(_, (_, r))| *r);
        let mut fresh = T::default();
        for (k, (v, r)) in &in_order {
            add(&mut fresh, k, v.as_bytes(), *r);
        }
        patched.forget(&touched);
        for (k, (v, r)) in in_order.iter().filter(|(k, _)| touched.contains(*k)) {
            add(&mut patched, k, v.as_bytes(), *r);
        }
        assert_eq!(
            format!("{patched:?}"),
            format!("{fresh:?}"),
            "round {round}"
        );
    }
}

fn pool(rows: &Option<Vec<(String, String)>>) -> Vec<(String, String)> {
    rows.clone().unwrap_or_default()
}

#[test]
fn every_buckets_parsed_form_patches_to_what_a_fresh_parse_gives() {
    let mut w = World::new();
    for i in 0..6 {
        let node = format!("node-{i}");
        w.node(&node, i % 2 == 0, Some(100 + i));
        w.hold(&format!("h{i}"), 10 + i, 600);
        w.backup(&node, &format!("b{i}"), 50 + i, -30, i % 3 != 0, i % 4 != 0);
        w.snapshot(&node, 70 + i, 0, i % 2 == 1);
        w.gate(&node, if i % 2 == 0 { "evicted" } else { "admitted" }, 60);
    }
    w.gated(Some(serde_json::json!({"stream": S, "stream_created": crate::floor::tests::CREATED, "generation": 0, "last_absorbed": 4, "absorbed_at": crate::floor::tests::ts(-3)})));
    w.floor_row(serde_json::json!({"stream": S, "trim_floor": 40}));
    let mut floors = pool(&w.floors);
    floors.push((
        format!("{}{S}", crate::rows::REQUESTED_PREFIX),
        serde_json::json!({"seq": 30, "by": "alice", "at": crate::floor::tests::ts(-3), "reason": ""}).to_string(),
    ));
    let mut backups = pool(&w.backups);
    backups.push((
        format!("{ACK_PREFIX}{S}"),
        serde_json::json!({"stream": S, "position": 60, "by": "alice", "at": crate::floor::tests::ts(-3)}).to_string(),
    ));
    patched_equals_fresh(&pool(&w.presence), add_presence);
    patched_equals_fresh(&pool(&w.positions), add_position);
    patched_equals_fresh(&pool(&w.holds), add_hold);
    patched_equals_fresh(&backups, add_backup);
    patched_equals_fresh(&pool(&w.snapshots), add_snapshot);
    patched_equals_fresh(&pool(&w.gates), add_gate);
    patched_equals_fresh(&floors, add_floor);
}
