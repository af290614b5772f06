//! The randomized model of replicas (docs/trim-floor.md, Replicas): random
//! fleets of copies (mirrors and sources on the log's own server, and a
//! mirror in another JetStream domain across a leaf node) whose links drop
//! and come back at random while the log grows and the sidecar ticks.
//!
//! The rule checked after every tick: no record the log no longer has is
//! missing from a copy whose link is up (each copy's stored records are
//! read from its own stream, not from the consumer the sidecar reads). At
//! the end every link comes back: each copy catches up, the trim moves on
//! to the log's end, and each copy holds every record the log ever had,
//! byte for byte (0 records lost in any copy).
//!
//! `CREWLET_MODEL_REPLICAS_N` sets the number of scenarios (default 4);
//! `CREWLET_MODEL_SEED` replays a run. A failure prints the seed and the
//! scenario.

use std::time::Duration;

use serde_json::{json, Value};

use crate::replicas::{copy_consumer, raw_api as api};
use crate::support::fleet::*;
use crate::support::{free_port, seed_from, Rng, Server};
use crewlet::floor::TermName;

/// How a copy reaches the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A mirror on the log's server; its link drops as a paused consumer.
    Mirror,
    /// A source on the log's server (its own sequence numbers, the log's
    /// records in order); its link drops as a paused consumer.
    Source,
    /// A mirror in JetStream domain `leaf`, on a second nats-server joined
    /// as a leaf node; its link drops as the leaf server killed.
    LeafMirror,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The log grows by this many records, and every node and the backup
    /// move with it: only a copy can hold the trim back.
    Publish(u64),
    /// Copy i's link goes down.
    Drop(usize),
    /// Copy i's link comes back.
    Restore(usize),
    Tick,
}

#[derive(Debug, Clone)]
struct Scenario {
    /// Printed with the scenario on failure.
    #[allow(dead_code)]
    seed: u64,
    first: u64,
    copies: Vec<Kind>,
    steps: Vec<Step>,
}

fn scenario(seed: u64) -> Scenario {
    let mut r = Rng(seed);
    let mut copies: Vec<Kind> = (0..r.range(1, 3))
        .map(|_| {
            if r.chance(50) {
                Kind::Mirror
            } else {
                Kind::Source
            }
        })
        .collect();
    if r.chance(50) {
        copies.push(Kind::LeafMirror);
    }
    let steps = (0..r.range(8, 16))
        .map(|_| match r.range(0, 99) {
            0..=29 => Step::Publish(r.range(1, 15)),
            30..=49 => Step::Drop(r.range(0, copies.len() as u64 - 1) as usize),
            50..=64 => Step::Restore(r.range(0, copies.len() as u64 - 1) as usize),
            _ => Step::Tick,
        })
        .collect();
    Scenario {
        seed,
        first: r.range(1, 20),
        copies,
        steps,
    }
}

/// The copy's stream and the durable consumer it copies the log through.
fn names(i: usize) -> (String, String) {
    (format!("COPY{i}"), format!("copy{i}"))
}

/// The durable consumer copy `i` copies through, on the log (`flow_control`:
/// its ack floor is what the copy has stored), and the copy itself.
async fn create_copy(
    hub: &async_nats::jetstream::Context,
    leaf: Option<&async_nats::jetstream::Context>,
    i: usize,
    kind: Kind,
) {
    let (stream, consumer) = names(i);
    let deliver = format!("{consumer}.deliver");
    let (subject, body) = copy_consumer(&consumer);
    let made = api(hub, &subject, body).await;
    assert!(made.get("error").is_none(), "{made}");
    let origin =
        json!({"name": STREAM, "consumer": {"name": consumer, "deliver_subject": deliver}});
    let (js, config) = match kind {
        Kind::Mirror => (
            hub,
            json!({"name": stream, "storage": "file", "mirror": origin}),
        ),
        Kind::Source => (
            hub,
            json!({"name": stream, "storage": "file", "sources": [origin]}),
        ),
        Kind::LeafMirror => {
            let mut origin = origin;
            origin["external"] = json!({"api": "$JS.hub.API"});
            (
                leaf.expect("a leaf server"),
                json!({"name": stream, "storage": "file", "mirror": origin}),
            )
        }
    };
    let made = api(js, &format!("STREAM.CREATE.{stream}"), config).await;
    assert!(made.get("error").is_none(), "{made}");
}

/// How many of the log's records copy `i` holds (a mirror keeps the log's
/// sequence numbers; a source numbers its own, in the log's order), or
/// `None` when it cannot be asked.
async fn held(js: &async_nats::jetstream::Context, i: usize, kind: Kind) -> Option<u64> {
    let (stream, _) = names(i);
    let reply = tokio::time::timeout(
        Duration::from_secs(3),
        js.client().request(
            format!("$JS.API.STREAM.INFO.{stream}"),
            "{}".to_string().into(),
        ),
    )
    .await
    .ok()?
    .ok()?;
    let v: Value = serde_json::from_slice(&reply.payload).ok()?;
    match kind {
        Kind::Mirror | Kind::LeafMirror => v["state"]["last_seq"].as_u64(),
        Kind::Source => v["state"]["messages"].as_u64(),
    }
}

/// The record the log took at `seq`, as the model publishes it.
fn payload(seq: u64) -> String {
    format!("record {seq}")
}

/// The log grows to `last + n`; the node and the backup follow it.
async fn grow(f: &Fleet, last: &mut u64, n: u64, backups: &mut u64) {
    let mut acks = Vec::new();
    for _ in 0..n {
        *last += 1;
        acks.push(
            f.js.publish(format!("{STREAM}.records"), payload(*last).into())
                .await
                .expect("publish"),
        );
    }
    for a in acks {
        a.await.expect("ack");
    }
    f.position("node-1", *last).await;
    *backups += 1;
    f.backup("node-1", &format!("b{backups}"), *last, 0, true, true)
        .await;
}

/// Every record copy `i` holds is the log's, in order, and it holds
/// `1..=last`.
async fn holds_every_record(
    js: &async_nats::jetstream::Context,
    i: usize,
    last: u64,
) -> Result<(), String> {
    let (stream, _) = names(i);
    let st = js
        .get_stream(&stream)
        .await
        .map_err(|e| format!("{stream}: {e}"))?;
    for seq in 1..=last {
        let m = st
            .get_raw_message(seq)
            .await
            .map_err(|e| format!("{stream} has no record at {seq}: {e}"))?;
        if m.payload != payload(seq).as_bytes() {
            return Err(format!(
                "{stream} at {seq} holds {:?}, not {:?}",
                String::from_utf8_lossy(&m.payload),
                payload(seq)
            ));
        }
    }
    Ok(())
}

/// Randomized fleets of copies whose links drop: after every tick nothing
/// the log dropped is missing from a copy that is up; in the end every
/// copy holds every record the log ever had, and the trim reached the
/// log's end.
#[tokio::test]
async fn random_copies_whose_links_drop_lose_nothing() {
    let count: u64 = std::env::var("CREWLET_MODEL_REPLICAS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let base = seed_from("CREWLET_MODEL_SEED");
    let (mut ticks, mut dropped_ticks, mut purged) = (0, 0, 0u64);
    let mut kinds = std::collections::BTreeMap::new();
    for n in 0..count {
        let seed = base.wrapping_add(n);
        let s = scenario(seed);
        for k in &s.copies {
            *kinds.entry(format!("{k:?}")).or_insert(0) += 1;
        }
        let ctx = |what: String| {
            format!(
                "{what}\nseed {seed} (replay: CREWLET_MODEL_SEED={seed} CREWLET_MODEL_REPLICAS_N=1)\nscenario {s:#?}"
            )
        };
        let leaf_port = free_port();
        let hub = Server::start_with(
            &format!(
                "jetstream {{ domain: hub }}\nleafnodes {{ listen: \"127.0.0.1:{leaf_port}\" }}\n"
            ),
            "nats",
        );
        let f = Fleet::on(hub, 0).await;
        let (mut last, mut backups) = (0, 0);
        grow(&f, &mut last, s.first, &mut backups).await;
        f.presence("node-1", &["data"]).await;
        let mut leaf = s.copies.contains(&Kind::LeafMirror).then(|| {
            Server::start_with(
                &format!("jetstream {{ domain: leaf }}\nleafnodes {{ remotes: [ {{ url: \"nats-leaf://127.0.0.1:{leaf_port}\" }} ] }}\n"),
                "nats",
            )
        });
        let mut leaf_js = match &leaf {
            Some(l) => Some(l.js().await),
            None => None,
        };
        for (i, kind) in s.copies.iter().enumerate() {
            create_copy(&f.js, leaf_js.as_ref(), i, *kind).await;
        }
        let mut up = vec![true; s.copies.len()];
        let mut sidecar = f.sidecar().await;
        for step in &s.steps {
            match *step {
                Step::Publish(k) => grow(&f, &mut last, k, &mut backups).await,
                Step::Drop(i) | Step::Restore(i) => {
                    let to = matches!(step, Step::Restore(_));
                    if up[i] == to {
                        continue;
                    }
                    up[i] = to;
                    let (_, consumer) = names(i);
                    match (s.copies[i], to) {
                        (Kind::LeafMirror, false) => {
                            leaf.as_mut().expect("leaf").kill();
                            leaf_js = None;
                        }
                        (Kind::LeafMirror, true) => {
                            let l = leaf.as_mut().expect("leaf");
                            l.restart();
                            leaf_js = Some(l.js().await);
                        }
                        (_, false) => {
                            let v = api(
                                &f.js,
                                &format!("CONSUMER.PAUSE.{STREAM}.{consumer}"),
                                json!({"pause_until": "2099-01-01T00:00:00Z"}),
                            )
                            .await;
                            assert!(v.get("error").is_none(), "{v}");
                        }
                        (_, true) => {
                            let v = api(
                                &f.js,
                                &format!("CONSUMER.PAUSE.{STREAM}.{consumer}"),
                                json!({}),
                            )
                            .await;
                            assert!(v.get("error").is_none(), "{v}");
                        }
                    }
                }
                Step::Tick => {
                    let r = sidecar.tick().await;
                    ticks += 1;
                    dropped_ticks += usize::from(up.iter().any(|u| !u));
                    let gone = f.first_seq().await - 1;
                    // What a copy holds only grows: read after the tick, it
                    // bounds what it held when the purge ran.
                    for (i, kind) in s.copies.iter().enumerate() {
                        let js = match kind {
                            Kind::LeafMirror => match &leaf_js {
                                Some(js) => js,
                                // Asked once it is back (below).
                                None => continue,
                            },
                            _ => &f.js,
                        };
                        let Some(h) = held(js, i, *kind).await else {
                            continue;
                        };
                        assert!(
                            gone <= h,
                            "{}",
                            ctx(format!(
                                "records 1..={gone} are gone from the log, but copy {i} holds only 1..={h}\nterm {}",
                                term_state(&r, TermName::ReplicaFloor)
                            ))
                        );
                    }
                }
            }
        }
        // Every link back: each copy catches up, and the trim follows.
        for (i, kind) in s.copies.iter().enumerate() {
            if up[i] {
                continue;
            }
            match kind {
                Kind::LeafMirror => {
                    let l = leaf.as_mut().expect("leaf");
                    l.restart();
                    leaf_js = Some(l.js().await);
                }
                _ => {
                    let (_, consumer) = names(i);
                    api(
                        &f.js,
                        &format!("CONSUMER.PAUSE.{STREAM}.{consumer}"),
                        json!({}),
                    )
                    .await;
                }
            }
        }
        let mut moved_on = false;
        for _ in 0..120 {
            sidecar.tick().await;
            if f.first_seq().await == last + 1 {
                moved_on = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let r = sidecar.tick().await;
        assert!(
            moved_on,
            "{}",
            ctx(format!(
                "the trim did not reach the log's end {last} once every copy was back: first_seq {}, term {}",
                f.first_seq().await,
                term_state(&r, TermName::ReplicaFloor)
            ))
        );
        purged += last;
        for (i, kind) in s.copies.iter().enumerate() {
            let js = match kind {
                Kind::LeafMirror => leaf_js.as_ref().expect("leaf back"),
                _ => &f.js,
            };
            if let Err(e) = holds_every_record(js, i, last).await {
                panic!("{}", ctx(e));
            }
        }
        sidecar.duty.release(&sidecar.broker).await;
    }
    println!("replica model: {count} scenarios from seed {base}, copies {kinds:?}: {ticks} ticks ({dropped_ticks} with a link down), {purged} records purged, 0 lost in any copy");
    assert!(
        count < 4 || (dropped_ticks > 0 && kinds.len() == 3),
        "the generator must tick with a link down, and draw every kind of copy: {kinds:?}"
    );
}
