//! The incremental views (docs/trim-floor.md, "Incremental views"): a
//! tick that answers from a view kept across ticks answers what a full
//! read at the same cut answers, and every fault that could leave a view
//! behind gives a rebuilt view or `unreadable`, never a stale answer.

use std::time::Duration;

use crewlet::broker::view::Mode;
use crewlet::floor::TermName;
use serde_json::json;

use crate::support::fleet::*;
use crate::support::{seed_from, Rng};

/// One random change to the rows: a position, a presence lease, a hold, a
/// snapshot register written, deleted or purged.
async fn mutate(f: &Fleet, r: &mut Rng) {
    let node = format!("node-{}", r.range(1, 6));
    let hold = format!("h{}", r.range(0, 3));
    let purge = |bucket: &'static str, key: String| {
        let js = f.js.clone();
        async move {
            let kv = js.get_key_value(bucket).await.expect("bucket");
            kv.purge(key).await.expect("purge");
        }
    };
    match r.range(0, 7) {
        0 | 1 => f.position(&node, r.range(1, 20)).await,
        2 => f.presence(&node, &["data"]).await,
        3 => f.delete("crewlet_presence", &node).await,
        4 => f.hold(&hold, r.range(1, 20), 600).await,
        5 => f.delete("crewlet_holds", &format!("{STREAM}.{hold}")).await,
        6 => purge("crewlet_positions", format!("{STREAM}.{node}")).await,
        _ => f.snapshot(&node, r.range(1, 20)).await,
    }
}

/// The rows as a view answers them and as a full read on another
/// connection answers them, at the same cut (nothing is written between).
async fn both(
    viewed: &crewlet::broker::Broker,
    fresh: &crewlet::broker::Broker,
    f: &Fleet,
) -> (String, String, crewlet::broker::view::Took) {
    let (_, v, took) = viewed.read_all_viewed(&f.config.buckets, Mode::Kept).await;
    let (_, full) = fresh.read_all(&f.config.buckets).await;
    (format!("{:?}", v.get()), format!("{:?}", full.get()), took)
}

async fn agree_at_random_cuts(f: &Fleet, rounds: usize) {
    let s = seed_from("CREWLET_VIEWS_SEED");
    let mut r = Rng(s);
    let viewed = f.broker().await;
    let fresh = f.broker().await;
    f.healthy(&[("node-1", 20), ("node-2", 18)], 20).await;
    viewed.read_all_viewed(&f.config.buckets, Mode::Fresh).await;
    let mut kept = 0;
    for round in 0..rounds {
        for _ in 0..=r.range(0, 4) {
            mutate(f, &mut r).await;
        }
        // No pause: the view must catch up by its proof, not by luck.
        let (v, full, took) = both(&viewed, &fresh, f).await;
        assert_eq!(
            v, full,
            "round {round}: the view and a full read disagree (replay: CREWLET_VIEWS_SEED={s})"
        );
        kept += took.kept;
    }
    // Most buckets were answered from kept views, not rebuilt each time
    // (else this test would prove nothing about them).
    assert!(
        kept * 2 > rounds * 7,
        "only {kept} of {} bucket reads came from kept views (seed {s})",
        rounds * 7
    );
}

#[tokio::test]
async fn a_view_and_a_full_read_agree_at_random_cuts() {
    let f = Fleet::new(20).await;
    agree_at_random_cuts(&f, 40).await;
}

#[tokio::test]
async fn on_a_cluster_a_view_and_a_full_read_agree_at_random_cuts() {
    let f = Fleet::cluster(20).await;
    agree_at_random_cuts(&f, 12).await;
}

/// A hold written once the broker takes writes again (after a restart or
/// a stepdown, the first tries may find no leader).
async fn hold_when_writable(f: &Fleet, id: &str, seq: u64) {
    let row = json!({"seq": seq, "owner": "tester", "kind": "operator", "expires_at": ts(600)});
    let written = eventually(20, || async {
        match f.js.get_key_value("crewlet_holds").await {
            Ok(kv) => kv
                .put(format!("{STREAM}.{id}"), row.to_string().into())
                .await
                .is_ok(),
            Err(_) => false,
        }
    })
    .await;
    assert!(written, "the hold {id} could not be written");
}

/// The hold term's value in a tick's answer; `None` when it has none
/// (unreadable, or no hold).
fn min_hold(r: &crewlet::tick::TickReport) -> Option<u64> {
    term_state(r, TermName::MinHold)
        .strip_prefix("value ")
        .and_then(|v| v.parse().ok())
}

fn unreadable(r: &crewlet::tick::TickReport) -> bool {
    term_state(r, TermName::MinHold).starts_with("unreadable")
}

/// Ticks (at most 10 times) until the hold term has a value, each answer
/// on the way `want` or unreadable, never stale; the value it ended on.
async fn tick_until_held(s: &mut crewlet::tick::Sidecar, want: u64) -> Option<u64> {
    let mut seen = None;
    for _ in 0..10 {
        let r = s.tick().await;
        assert!(
            unreadable(&r) || min_hold(&r) == Some(want),
            "stale: {:?}",
            term_state(&r, TermName::MinHold)
        );
        seen = min_hold(&r);
        if seen.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    seen
}

/// A healthy fleet with one hold at 6, and a sidecar (trim off) whose
/// first tick found it binding: the sidecar, and the hold term's value.
async fn held_at_6(f: &Fleet) -> (crewlet::tick::Sidecar, u64) {
    f.healthy(&[("node-1", 20)], 20).await;
    f.hold("keep", 6, 600).await;
    let mut s = f.sidecar().await;
    s.config.trim.enabled = false;
    let at_6 = min_hold(&s.tick().await).expect("the hold at 6 binds");
    (s, at_6)
}

#[tokio::test]
async fn a_bucket_deleted_and_recreated_between_ticks_is_read_whole() {
    let f = Fleet::new(20).await;
    let (mut s, at_6) = held_at_6(&f).await;
    // The holds bucket goes and comes back empty, then its owner places
    // the hold again, at 9 (which also ends the pin the floors row
    // carried over the lost bucket): a view that missed the deletion
    // would still answer 6.
    f.js.delete_key_value("crewlet_holds")
        .await
        .expect("delete");
    let broker = f.broker().await;
    for spec in crewlet::buckets::contract_buckets(&f.config) {
        broker.ensure_bucket(&spec).await.expect("recreate");
    }
    f.hold("keep", 9, 600).await;
    let r = s.tick().await;
    assert!(r.views.rebuilt >= 1, "{:?}", r.views);
    assert_eq!(
        min_hold(&r),
        Some(at_6 + 3),
        "the hold at 9, not the one at 6"
    );
}

#[tokio::test]
async fn a_server_restart_breaks_the_watchers_and_the_views_are_rebuilt() {
    let mut f = Fleet::new(20).await;
    let (mut s, at_6) = held_at_6(&f).await;
    let r = s.tick().await;
    assert_eq!(r.views.kept, 7, "a second tick answers from its views");
    // The connection is lost while a tick runs: that tick answers from a
    // proven view, a rebuilt one, or says unreadable; never stale.
    f.hold("during", 4, 600).await;
    let restart = async {
        tokio::time::sleep(Duration::from_millis(5)).await;
        f.server.restart();
    };
    let (r, ()) = tokio::join!(s.tick(), restart);
    assert!(
        unreadable(&r) || min_hold(&r) == Some(at_6 - 2),
        "the hold at 4 or unreadable: {:?}",
        term_state(&r, TermName::MinHold)
    );
    // The hold written while the watchers were gone is seen.
    hold_when_writable(&f, "after", 3).await;
    assert_eq!(tick_until_held(&mut s, at_6 - 3).await, Some(at_6 - 3));
    let r = s.tick().await;
    assert_eq!(min_hold(&r), Some(at_6 - 3));
    assert!(r.views.kept > 0, "views again: {:?}", r.views);
}

#[tokio::test]
async fn a_stepdown_of_a_buckets_leader_gives_a_proven_or_rebuilt_view() {
    let f = Fleet::cluster(20).await;
    let (mut s, at_6) = held_at_6(&f).await;
    s.tick().await;
    let reply: serde_json::Value =
        f.js.request(
            "STREAM.LEADER.STEPDOWN.KV_crewlet_holds".to_string(),
            &json!({}),
        )
        .await
        .expect("stepdown");
    assert_eq!(reply["success"], json!(true), "{reply}");
    hold_when_writable(&f, "after", 4).await;
    // Never the answer from before the stepdown.
    assert_eq!(tick_until_held(&mut s, at_6 - 2).await, Some(at_6 - 2));
}

#[tokio::test]
async fn a_sidecar_that_newly_claims_the_duty_reads_every_bucket_whole() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    let mut a = f.sidecar_as("side-a").await;
    let mut b = f.sidecar_as("side-b").await;
    a.tick().await;
    b.tick().await;
    let r = b.tick().await;
    assert!(!b.duty.holds(), "a holds the duty");
    assert_eq!(
        r.views.kept, 7,
        "a sidecar without the duty reads from views"
    );
    // a lets the duty go; b claims it on its next tick, and that tick
    // reads everything whole.
    a.duty.release(&a.broker).await;
    let r = b.tick().await;
    assert!(b.duty.holds(), "b claimed the duty");
    assert_eq!(r.views.kept, 0, "{:?}", r.views);
    assert_eq!(r.views.rebuilt, 7, "{:?}", r.views);
    let r = b.tick().await;
    assert_eq!(r.views.kept, 7, "then its views again");
}

/// The proof is what stops a stale answer: with watchers slowed (as on a
/// server behind), a hold written just before a tick is waited for; with
/// the kept views' proof turned off the same tick purges past it.
#[tokio::test]
async fn with_its_proof_off_a_slow_watcher_lets_a_purge_past_a_hold() {
    for proof in [true, false] {
        let f = Fleet::new(20).await;
        f.healthy(&[("node-1", 20)], 20).await;
        let broker = f.broker().await;
        let mut s = crewlet::tick::Sidecar::new(f.config.clone(), broker.clone());
        // A dry run builds the views and claims the duty.
        s.config.trim.enabled = false;
        s.tick().await;
        s.config.trim.enabled = true;
        // Every watcher caught up with that tick's own writes (a proven
        // read waits for them) before they are slowed.
        broker.read_all_viewed(&f.config.buckets, Mode::Kept).await;
        broker.delay_views(300);
        broker.unprove_views(!proof);
        f.hold("late", 5, 600).await;
        let r = s.tick().await;
        let first = f.first_seq().await;
        if proof {
            assert!(
                first <= 5,
                "purged to {first} past the hold at 5: {:?}",
                r.domains[0].answer.terms
            );
        } else {
            assert!(
                first > 5,
                "with the proof off the stale view let the purge go only to {first}: published {:?} purged {:?} trim_to {} terms {:?}",
                r.domains[0].published, r.domains[0].purged, r.domains[0].answer.trim_to, r.domains[0].answer.terms
            );
        }
    }
}

/// A fleet whose presence bucket keeps a lease for `max_age`.
async fn leases_lasting(max_age: Duration) -> Fleet {
    let f = Fleet::new(10).await;
    f.js.delete_key_value("crewlet_presence")
        .await
        .expect("delete");
    f.js.create_key_value(async_nats::jetstream::kv::Config {
        bucket: "crewlet_presence".into(),
        max_age,
        ..Default::default()
    })
    .await
    .expect("a presence bucket with a max age");
    f
}

/// Presence leases that age out between ticks leave a kept view, which
/// patches its parsed rows rather than parsing them again, exactly as a
/// view built afresh at that cut answers: aged leases gone, renewed and
/// new ones kept, though no event said any lease expired.
#[tokio::test]
async fn leases_that_age_out_leave_a_kept_view_as_a_fresh_one_answers() {
    let f = leases_lasting(Duration::from_secs(2)).await;
    for n in ["node-1", "node-2", "node-3"] {
        f.presence(n, &["data"]).await;
    }
    let viewed = f.broker().await;
    let fresh = f.broker().await;
    viewed.read_all_viewed(&f.config.buckets, Mode::Fresh).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    f.presence("node-1", &["data"]).await;
    f.presence("node-4", &["data"]).await;
    let (_, _, took) = viewed.read_all_viewed(&f.config.buckets, Mode::Kept).await;
    assert_eq!(took.kept, 7, "{took:?}");
    // node-2 and node-3 are 2.5 s old at the next cut, the others 1.3 s.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (_, v, took) = viewed.read_all_viewed(&f.config.buckets, Mode::Kept).await;
    let (_, full, _) = fresh.read_all_viewed(&f.config.buckets, Mode::Fresh).await;
    assert_eq!(took.kept, 7, "the presence view was kept: {took:?}");
    let live = |p: &crewlet::proven::Proven<crewlet::floor::parsed::ParsedRows>| {
        let presence = p.get().presence.as_ref().expect("presence read");
        presence.keys().map(|k| k.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(live(&v), ["node-1", "node-4"], "the kept view");
    assert_eq!(format!("{:?}", v.get()), format!("{:?}", full.get()));
}

/// A view keeps a key's bytes only until they are in its answer. When the
/// answer cannot be patched at a cut (here the presence bucket's max age
/// changed between ticks, so every lease's expiry moved), the view cannot
/// parse its rows again: it is read whole in the same tick, and answers as
/// a full read at that cut does, with the leases the new max age ends.
#[tokio::test]
async fn a_view_whose_bucket_max_age_changed_is_read_whole() {
    let f = leases_lasting(Duration::from_secs(60)).await;
    for n in ["node-1", "node-2"] {
        f.presence(n, &["data"]).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    f.presence("node-3", &["data"]).await;
    let viewed = f.broker().await;
    let fresh = f.broker().await;
    viewed.read_all_viewed(&f.config.buckets, Mode::Fresh).await;
    let mut stream =
        f.js.get_stream("KV_crewlet_presence")
            .await
            .expect("the presence stream");
    let mut config = stream.info().await.expect("its info").config.clone();
    config.max_age = Duration::from_secs(2);
    config.duplicate_window = Duration::from_secs(2);
    f.js.update_stream(config).await.expect("max age 2 s");
    let (_, v, took) = viewed.read_all_viewed(&f.config.buckets, Mode::Kept).await;
    let (_, full) = fresh.read_all(&f.config.buckets).await;
    assert_eq!(
        (took.kept, took.rebuilt),
        (6, 1),
        "the presence view is read whole"
    );
    let live = |p: &crewlet::proven::Proven<crewlet::floor::parsed::ParsedRows>| {
        let presence = p.get().presence.as_ref().expect("presence read");
        presence.keys().map(|k| k.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(live(&v), ["node-3"], "the leases older than 2 s are gone");
    assert_eq!(format!("{:?}", v.get()), format!("{:?}", full.get()));
    // And the rebuilt view is kept again.
    let (_, _, took) = viewed.read_all_viewed(&f.config.buckets, Mode::Kept).await;
    assert_eq!(took.kept, 7, "{took:?}");
}

/// A removed newest message does not make a bucket unprovable. Holds A
/// and B; B is released and its subject purged (as a KV compaction or a
/// per-message TTL would remove a delete marker): the bucket's `last_seq`
/// is now a sequence no read can deliver, and `min_hold` used to stay
/// unreadable ("a replica behind") until the next write to the bucket.
/// The leader is asked instead whether anything exists past the last
/// message delivered.
#[tokio::test]
async fn a_bucket_whose_newest_message_was_removed_stays_readable() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    f.hold("a", 6, 600).await;
    f.hold("b", 9, 600).await;
    f.delete("crewlet_holds", &format!("{STREAM}.b")).await;
    let holds = f.js.get_stream("KV_crewlet_holds").await.expect("bucket");
    holds
        .purge()
        .filter(format!("$KV.crewlet_holds.{STREAM}.b"))
        .await
        .expect("purge b's subject");
    let info = f.js.get_stream("KV_crewlet_holds").await.expect("bucket");
    assert!(
        info.cached_info().state.messages < info.cached_info().state.last_sequence,
        "the newest message is gone: {:?}",
        info.cached_info().state
    );
    // A sidecar reading the bucket whole, then from its kept view.
    let mut s = f.sidecar().await;
    s.config.trim.enabled = false;
    for _ in 0..2 {
        let r = s.tick().await;
        assert_eq!(
            term_state(&r, crewlet::floor::TermName::MinHold),
            "value 5",
            "{:?}",
            r.domains[0].answer.terms
        );
    }
    // And the bare reader status uses.
    let rows = f.broker().await.read_rows(&f.config.buckets).await;
    assert!(rows.holds.is_ok(), "{:?}", rows.holds);
}

/// The count check counts delete markers as the broker does: a manifest
/// deleted (its subject keeps the marker, which the stream's
/// `num_subjects` counts) must not hide another manifest removed without an
/// event (a raw subject purge). Before, the kept view went on answering
/// the purged manifest, and `backup_floor` stood on a backup that is gone.
#[tokio::test]
async fn a_delete_marker_does_not_hide_a_manifest_removed_without_an_event() {
    let f = Fleet::new(20).await;
    f.healthy(&[("node-1", 20)], 20).await;
    // b0 older than b1: b1 is the backup the trim reads.
    f.backup("node-1", "b0", 10, 5, true, true).await;
    let mut s = f.sidecar().await;
    s.config.trim.enabled = false;
    s.config.retention.full_read_every = 100;
    let backup = |r: &crewlet::tick::TickReport| term_state(r, TermName::BackupFloor);
    assert_eq!(backup(&s.tick().await), "value 20");
    // b0 deleted (a marker stays on its subject), then b1's subject purged
    // raw: the stream counts one subject, the marker.
    f.delete(
        "crewlet_backups",
        &crewlet::rows::BackupManifest::key("node-1", "b0"),
    )
    .await;
    let backups = f.js.get_stream("KV_crewlet_backups").await.expect("bucket");
    backups
        .purge()
        .filter(format!(
            "$KV.crewlet_backups.{}",
            crewlet::rows::BackupManifest::key("node-1", "b1")
        ))
        .await
        .expect("purge b1's subject");
    let r = s.tick().await;
    assert_ne!(
        backup(&r),
        "value 20",
        "the view answered a manifest that is gone: {:?}",
        r.views
    );
    assert!(r.views.rebuilt >= 1, "{:?}", r.views);
}
