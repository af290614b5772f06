//! The archive in the tick (archive.md) against a real broker: fold before
//! trim into either store, the seventh term, the floors row's archive
//! state, adoption after a crash, and every fault leaving the frontier at
//! the last durable segment with nothing past it purged.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::fleet::*;
use crate::support::Scratch;
use crewlet::archive::fold::Store;
use crewlet::config::{size::Size, ArchiveConfig};
use crewlet::floor::{TermName, TermState};
use crewlet::tick::{Sidecar, TickReport};

const BUCKET: &str = "crewlet_archive";

fn archive(store: &Store, segment_records: u64, fold_per_tick: u64) -> ArchiveConfig {
    ArchiveConfig {
        segment_records,
        segment_bytes: Size(8 << 20),
        fold_per_tick,
        ..ArchiveConfig::of(store)
    }
}

/// A healthy fleet of 100 records whose nodes have applied 90, archived
/// into `store` 20 records a segment, two segments a tick.
async fn archived_fleet(store: &Store) -> Fleet {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
    f.config.domains[0].archive = Some(archive(store, 20, 2));
    if let Store::ObjectStore(b) = store {
        f.broker()
            .await
            .ensure_object_store(b, 1)
            .await
            .expect("bucket");
    }
    f
}

pub(crate) fn alarms(r: &TickReport) -> Vec<String> {
    r.alarms.iter().map(|a| a.line()).collect()
}

/// Every record the archive holds, decoded from its segments (checksums
/// verified), with the segments' ranges.
async fn archived(f: &Fleet, store: &Store) -> (Vec<(u64, u64)>, Vec<(u64, Vec<u8>)>) {
    let broker = f.broker().await;
    let listed = store.list(&broker, STREAM, 0).await.expect("list");
    let mut records = Vec::new();
    for l in &listed {
        let bytes = store.get(&broker, &l.name).await.expect("get");
        let seg = crewlet::archive::segment::decode(&bytes).expect("decode");
        records.extend(seg.records.into_iter().map(|r| (r.seq, r.data)));
    }
    (
        listed.iter().map(|l| (l.first_seq, l.last_seq)).collect(),
        records,
    )
}

/// The invariant with an archive: every record below the log's first
/// sequence is in a verified segment, with the data it was published with.
pub(crate) async fn nothing_purged_unarchived(f: &Fleet, store: &Store) {
    let first = f.first_seq().await;
    let (_, records) = archived(f, store).await;
    for seq in 1..first {
        let data = records.iter().find(|(s, _)| *s == seq).map(|(_, d)| d);
        assert_eq!(
            data.map(|d| String::from_utf8_lossy(d).into_owned()),
            // The fleet publishes r0, r1, … in batches of 100 and 20.
            Some(format!("r{}", (seq - 1) % 100)),
            "record {seq} was purged (first_seq {first}) but is not archived"
        );
    }
}

/// The three kinds of store (the cloud one on a moto server of its own,
/// which lives as long as the list).
fn stores(scratch: &Path) -> (crate::support::s3::S3, [Store; 3]) {
    let s3 = crate::support::s3::S3::start("crewlet-archive");
    let cloud = s3.store("crewlet-archive", "crewlet/test");
    (
        s3,
        [
            Store::ObjectStore(BUCKET.into()),
            Store::Dir(scratch.join("archive")),
            cloud,
        ],
    )
}

#[tokio::test]
async fn the_tick_folds_before_it_trims_into_either_store() {
    let scratch = tempfile::tempdir().expect("dir");
    let (_s3, stores) = stores(scratch.path());
    for store in stores {
        let f = archived_fleet(&store).await;
        let mut s = f.sidecar().await;
        // Two segments a tick: the archive binds the trim at 40, then 80,
        // then the nodes at 90 (a last, partial segment: the slice ends).
        for (frontier, first_seq) in [(40, 41), (80, 81), (90, 91)] {
            let r = s.tick().await;
            assert_eq!(
                term_state(&r, TermName::ArchiveFloor),
                format!("value {frontier}"),
                "{store:?}"
            );
            assert_eq!(r.domains[0].answer.trim_to, frontier, "{store:?}");
            assert_eq!(f.first_seq().await, first_seq, "{store:?}");
            nothing_purged_unarchived(&f, &store).await;
            assert!(
                !alarms(&r).iter().any(|a| a.contains("archive")),
                "{:?}",
                alarms(&r)
            );
        }
        let (ranges, records) = archived(&f, &store).await;
        assert_eq!(
            ranges,
            [(1, 20), (21, 40), (41, 60), (61, 80), (81, 90)],
            "{store:?}"
        );
        assert_eq!(
            records.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            (1..=90).collect::<Vec<_>>()
        );
        // The floors row carries the archive's state.
        let row = f.floors_row().await.expect("row");
        let a = &row["archive"];
        assert_eq!(a["frontier"], 90, "{a}");
        assert_eq!(a["first_archived"], 1);
        assert_eq!(a["segments"], 5);
        assert!(a["bytes"].as_u64().is_some_and(|b| b > 0), "{a}");
        assert!(a["last_fold_at"].is_string(), "{a}");
        assert!(a["error"].is_null(), "{a}");
        assert_eq!(a["store"], store.id());
        let terms: Vec<&str> = row["terms"]
            .as_array()
            .expect("terms")
            .iter()
            .filter_map(|t| t["term"].as_str())
            .collect();
        // The seventh, before the replicas' term (docs/trim-floor.md, The terms).
        assert_eq!(terms[6..], ["archive_floor", "replica_floor"]);
        // Nothing more to fold: the next tick writes nothing new.
        let r = s.tick().await;
        assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 90");
        assert_eq!(archived(&f, &store).await.0.len(), 5);
    }
}

#[tokio::test]
async fn without_an_archive_the_seventh_term_is_n_a() {
    let f = Fleet::new(10).await;
    f.healthy(&[("node-1", 10), ("node-2", 10)], 10).await;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "n/a");
    assert_eq!(r.domains[0].answer.trim_to, 10, "n/a binds nothing");
    let row = f.floors_row().await.expect("row");
    assert!(row["archive"].is_null());
    assert_eq!(
        row["terms"][6],
        serde_json::json!({"term": "archive_floor", "state": "n/a", "detail": null, "binding": false,
            "held_records": null, "held_bytes": null, "pinned_since": null})
    );
}

#[tokio::test]
async fn a_dry_run_folds_and_purges_nothing() {
    let scratch = tempfile::tempdir().expect("dir");
    let store = Store::Dir(scratch.path().join("archive"));
    let mut f = archived_fleet(&store).await;
    f.config.trim.enabled = false;
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 40");
    assert_eq!(f.first_seq().await, 1, "a dry run purges nothing");
    let would = r.domains[0].answer.would_purge.expect("would purge");
    assert_eq!(would.last_seq, 40, "bounded by the archive");
    assert_eq!(archived(&f, &store).await.0, [(1, 20), (21, 40)]);
}

#[tokio::test]
async fn a_tick_that_concludes_nothing_folds_nothing() {
    let scratch = tempfile::tempdir().expect("dir");
    let store = Store::Dir(scratch.path().join("archive"));
    let f = archived_fleet(&store).await;
    f.put(
        crewlet::config::Buckets::default().holds.as_str(),
        &format!("{STREAM}.bad"),
        serde_json::json!({"not": "a hold"}),
    )
    .await;
    let r = f.sidecar().await.tick().await;
    assert!(term_state(&r, TermName::MinHold).starts_with("unreadable"));
    assert!(archived(&f, &store).await.0.is_empty(), "nothing folded");
    assert_eq!(f.first_seq().await, 1);
}

/// A fleet archiving into a fresh directory (`root`), after a first tick
/// folded 1..=40 and purged them; the scratch directory lasts as long as
/// the first value.
async fn folded_into_a_directory() -> (tempfile::TempDir, PathBuf, Store, Fleet, Sidecar) {
    let scratch = tempfile::tempdir().expect("dir");
    let root = scratch.path().join("archive");
    let store = Store::Dir(root.clone());
    let f = archived_fleet(&store).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 41);
    (scratch, root, store, f, s)
}

/// A directory where the next segment's temporary file goes (root is
/// refused that too): the fold of 41..=60 fails. The segment's name, and
/// the blocker to remove.
fn block_the_next_segment(root: &Path) -> (&'static str, PathBuf) {
    let next = "00000000000000000041-00000000000000000060.seg";
    let gen = root.join(STREAM).join("0");
    let blocker = gen.join(format!(".{next}.tmp-{}", std::process::id()));
    std::fs::create_dir(&blocker).expect("blocker");
    (next, blocker)
}

/// Any fold error: the frontier stays at the last durable segment, nothing
/// past it is purged, `archive_failing` says where and why, and a later
/// tick retries.
#[tokio::test]
async fn a_directory_that_cannot_be_written_holds_the_trim_at_the_frontier() {
    let (scratch, root, store, f, mut s) = folded_into_a_directory().await;
    // The generation's directory becomes a file: no segment can be made.
    let gen = root.join(STREAM).join("0");
    let aside = scratch.path().join("aside");
    std::fs::rename(&gen, &aside).expect("move");
    std::fs::write(&gen, b"in the way").expect("block");
    let r = s.tick().await;
    // The published segments are gone from where the listing looks: the
    // archive cannot be read at all, so nothing is purged.
    assert!(
        term_state(&r, TermName::ArchiveFloor).starts_with("unreadable"),
        "{}",
        term_state(&r, TermName::ArchiveFloor)
    );
    assert_eq!(f.first_seq().await, 41);
    // Back in place, but the next segment cannot be written (a directory
    // stands where its temporary file goes; root is refused that too):
    // the fold fails and the term stays at 40.
    std::fs::remove_file(&gen).expect("unblock");
    std::fs::rename(&aside, &gen).expect("back");
    let (next, blocker) = block_the_next_segment(&root);
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 40");
    assert_eq!(f.first_seq().await, 41, "nothing past the frontier");
    let failing: Vec<String> = alarms(&r)
        .into_iter()
        .filter(|a| a.starts_with("ALARM archive_failing tracker"))
        .collect();
    assert_eq!(failing.len(), 1, "{:?}", alarms(&r));
    assert!(failing[0].contains(next), "{}", failing[0]);
    assert!(
        failing[0].contains(&root.display().to_string()),
        "the remedy names the directory: {}",
        failing[0]
    );
    let row = f.floors_row().await.expect("row");
    assert!(row["archive"]["error"].is_string(), "{}", row["archive"]);
    assert!(row["archive"]["failing_since"].is_string());
    // status, which does not fold, still shows the holder's finding.
    let fresh = crewlet::tick::answers(&f.broker().await, &f.config, "", chrono::Utc::now()).await;
    assert!(fresh.answers[0]
        .archive
        .as_ref()
        .and_then(|a| a.error.as_ref())
        .is_some());
    std::fs::remove_dir(&blocker).expect("unblock");
    // The next tick retries from the frontier.
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 80");
    assert_eq!(f.first_seq().await, 81);
    assert!(!alarms(&r).iter().any(|a| a.contains("archive_failing")));
    nothing_purged_unarchived(&f, &store).await;
}

/// A directory that stops answering (a hung mount; here a FIFO where the
/// next segment goes, whose open waits for a writer that never comes): the
/// tick gives the store up after a read timeout instead of waiting with it,
/// holds the trim at the frontier and says so; once the store answers
/// again, the next tick folds on. (The directory's calls used to run on
/// the tick's own thread, where no timeout could interrupt them: the tick,
/// and with it the duty lease's renewal, waited as long as the mount did.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_stops_answering_holds_the_trim_and_the_tick_goes_on() {
    let (_scratch, root, store, f, mut s) = folded_into_a_directory().await;
    let fifo = root
        .join(STREAM)
        .join("0")
        .join("00000000000000000041-00000000000000000060.seg");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let started = std::time::Instant::now();
    let mut tick = tokio::spawn(async move {
        let r = s.tick().await;
        (s, r)
    });
    let waited = tokio::time::timeout(Duration::from_secs(20), &mut tick).await;
    let took = started.elapsed();
    // Whatever happened, every call still blocked on the FIFO is let go
    // (it reads nothing), so that the test ends either way.
    let releasing = Arc::new(AtomicBool::new(true));
    let releaser = {
        let (fifo, releasing) = (fifo.clone(), releasing.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::OpenOptionsExt;
            while releasing.load(Ordering::SeqCst) {
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&fifo);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let done = match waited {
        Ok(done) => done,
        Err(_) => tick.await,
    };
    assert!(
        took < Duration::from_secs(20),
        "the tick waited on the directory for {took:?}"
    );
    let (mut s, r) = done.expect("tick");
    // A read timeout is 1 s here: one for the segment's read back, one
    // for the fold's, with room to spare.
    assert!(took < Duration::from_secs(8), "the tick took {took:?}");
    assert_eq!(f.first_seq().await, 41, "nothing past the frontier");
    let failing: Vec<String> = alarms(&r)
        .into_iter()
        .filter(|a| a.contains("archive_failing"))
        .collect();
    assert!(
        failing.iter().any(|a| a.contains("no answer within")),
        "{:?}",
        alarms(&r)
    );
    // The store answers again.
    releasing.store(false, Ordering::SeqCst);
    releaser.join().expect("releaser");
    std::fs::remove_file(&fifo).expect("unblock");
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 80");
    assert_eq!(f.first_seq().await, 81);
    nothing_purged_unarchived(&f, &store).await;
}

/// A fold that failed is not forgotten while the trim is pinned at or
/// below the frontier: with nothing to fold, the holder tried nothing, so
/// `archive_failing` stays (it was cleared by a fold that never ran).
#[tokio::test]
async fn a_failing_fold_stays_failing_while_nothing_reaches_past_the_frontier() {
    let (_scratch, root, store, f, mut s) = folded_into_a_directory().await;
    block_the_next_segment(&root);
    let failing = |r: &TickReport| {
        alarms(r)
            .into_iter()
            .filter(|a| a.starts_with("ALARM archive_failing tracker"))
            .count()
    };
    let r = s.tick().await;
    assert_eq!(failing(&r), 1, "{:?}", alarms(&r));
    // A hold at 30: the trim (and the fold) may not go past 29, below the
    // frontier (40). The next segment still cannot be written.
    f.hold("pin", 30, 600).await;
    for _ in 0..2 {
        let r = s.tick().await;
        assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 40");
        assert_eq!(failing(&r), 1, "still failing: {:?}", alarms(&r));
        let row = f.floors_row().await.expect("row");
        assert!(row["archive"]["error"].is_string(), "{}", row["archive"]);
    }
    assert_eq!(f.first_seq().await, 41);
    nothing_purged_unarchived(&f, &store).await;
}

#[tokio::test]
async fn an_object_store_that_fills_up_holds_the_trim_at_the_frontier() {
    let f = archived_fleet(&Store::Dir(PathBuf::from("/unused"))).await;
    // Room for about one segment of 20 records.
    f.js.create_object_store(async_nats::jetstream::object_store::Config {
        bucket: "small_archive".into(),
        max_bytes: 1200,
        ..Default::default()
    })
    .await
    .expect("bucket");
    let mut f = f;
    let store = Store::ObjectStore("small_archive".into());
    f.config.domains[0].archive = Some(archive(&store, 20, 2));
    let r = f.sidecar().await.tick().await;
    let frontier = match &r.domains[0]
        .answer
        .terms
        .iter()
        .find(|t| t.term == TermName::ArchiveFloor)
        .expect("term")
        .state
    {
        TermState::Value { seq, .. } => *seq,
        other => panic!("{other:?}"),
    };
    assert!(frontier < 40, "the second segment did not fit: {frontier}");
    assert_eq!(
        f.first_seq().await,
        frontier + 1,
        "nothing past the frontier"
    );
    assert!(
        alarms(&r)
            .iter()
            .any(|a| a.starts_with("ALARM archive_failing tracker") && a.contains("small_archive")),
        "{:?}",
        alarms(&r)
    );
    nothing_purged_unarchived(&f, &store).await;
}

#[tokio::test]
async fn a_missing_bucket_is_unreadable_and_names_init() {
    let f = archived_fleet(&Store::Dir(PathBuf::from("/unused"))).await;
    let mut f = f;
    f.config.domains[0].archive = Some(archive(&Store::ObjectStore("never_made".into()), 20, 2));
    let r = f.sidecar().await.tick().await;
    assert!(term_state(&r, TermName::ArchiveFloor).contains("does not exist"));
    assert_eq!(r.domains[0].answer.trim_to, 0);
    assert_eq!(f.first_seq().await, 1, "nothing purged");
    assert!(
        alarms(&r)
            .iter()
            .any(|a| a.starts_with("ALARM term_unreadable tracker")
                && a.contains("archive_floor")
                && a.contains("crewlet retention init")),
        "{:?}",
        alarms(&r)
    );
}

#[tokio::test]
async fn segments_missing_below_the_published_frontier_make_the_archive_unreadable() {
    let scratch = tempfile::tempdir().expect("dir");
    let root = scratch.path().join("archive");
    let store = Store::Dir(root.clone());
    let f = archived_fleet(&store).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 81);
    let gone = root.join(crewlet::archive::segment::name(STREAM, 0, 61, 80));
    std::fs::remove_file(&gone).expect("remove");
    let r = s.tick().await;
    assert!(
        term_state(&r, TermName::ArchiveFloor).contains("missing"),
        "{}",
        term_state(&r, TermName::ArchiveFloor)
    );
    assert_eq!(f.first_seq().await, 81, "nothing purged");
    assert!(alarms(&r)
        .iter()
        .any(|a| a.contains("term_unreadable") && a.contains("verify-archive")));
    // The published frontier is kept while the archive is unreadable.
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["archive"]["frontier"], 80, "{}", row["archive"]);
}

/// The tick keeps an Object Store bucket's listing while the bucket's
/// stream is unchanged. A purge of the objects' entries appends nothing
/// (the last sequence stays), yet the segments are gone: the next tick
/// must list again and see them missing, not answer from what it kept.
#[tokio::test]
async fn segments_purged_from_the_object_store_between_ticks_are_seen_missing() {
    let store = Store::ObjectStore(BUCKET.into());
    let f = archived_fleet(&store).await;
    let mut s = f.sidecar().await;
    for _ in 0..3 {
        s.tick().await;
    }
    let first = f.first_seq().await;
    let frontier = f.floors_row().await.expect("row")["archive"]["frontier"].clone();
    // A tick that folds nothing: its listing is the one the next keeps.
    s.tick().await;
    assert_eq!(f.first_seq().await, first);
    assert_eq!(
        f.floors_row().await.expect("row")["archive"]["frontier"],
        frontier
    );
    let stream = format!("OBJ_{BUCKET}");
    let mut obj = f.js.get_stream(&stream).await.expect("stream");
    let before = obj.info().await.expect("info").state.last_sequence;
    obj.purge()
        .filter(format!("$O.{BUCKET}.M.>"))
        .await
        .expect("purge the entries");
    assert_eq!(
        obj.info().await.expect("info").state.last_sequence,
        before,
        "the purge appended nothing"
    );
    let r = s.tick().await;
    assert!(
        term_state(&r, TermName::ArchiveFloor).contains("missing"),
        "{}",
        term_state(&r, TermName::ArchiveFloor)
    );
    assert_eq!(f.first_seq().await, first, "nothing purged");
    let row = f.floors_row().await.expect("row");
    assert_eq!(row["archive"]["frontier"], frontier, "{}", row["archive"]);
}

/// A crash between writing segments and publishing: the segments past the
/// published frontier are verified and adopted; one with other content is
/// never overwritten and holds the trim at the frontier.
#[tokio::test]
async fn segments_written_by_a_tick_that_did_not_publish_are_verified_and_adopted() {
    let scratch = Scratch::new();
    let root = scratch.dir.path().join("archive");
    let store = Store::Dir(root.clone());
    let f = archived_fleet(&store).await;
    let cfg = scratch.write(
        "crewlet.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate, archive: {{dir: {}, segment_records: 20, fold_per_tick: 2}}}}]\n",
            f.url(),
            root.display()
        ),
    );
    // min_age 3s: wait until the records are old enough to go.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let run = crate::support::crewlet_env(
        &[
            "retention",
            "run",
            "--once",
            "--config",
            cfg.to_str().expect("utf-8"),
        ],
        &[("CREWLET_FAILPOINT", "after_fold")],
    );
    assert_ne!(run.code, 0, "aborted at the failpoint: {}", run.stderr);
    assert_eq!(archived(&f, &store).await.0, [(1, 20), (21, 40)]);
    assert!(f.floors_row().await.is_none(), "nothing published");
    assert_eq!(f.first_seq().await, 1, "nothing purged");
    // Any reader adopts both once verified (nothing published: from the
    // log's first record)...
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 40");
    // ...and the next holder, once the dead one's lease has expired,
    // folds on from 40.
    let mut r = s.tick().await;
    for _ in 0..20 {
        if matches!(r.duty, crewlet::tick::duty::DutyStatus::Held) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        r = s.tick().await;
    }
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 80");
    assert_eq!(f.first_seq().await, 81);
    nothing_purged_unarchived(&f, &store).await;

    // A segment past the published frontier with other content: never
    // overwritten, and nothing past the frontier is purged.
    f.publish(20).await;
    f.healthy(&[("node-1", 120), ("node-2", 120)], 120).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let bad = root.join(crewlet::archive::segment::name(STREAM, 0, 81, 100));
    std::fs::write(&bad, b"CRWLSEG\x01 not a segment").expect("plant");
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 80");
    assert_eq!(f.first_seq().await, 81);
    let failing: Vec<String> = alarms(&r)
        .into_iter()
        .filter(|a| a.contains("archive_failing"))
        .collect();
    assert!(
        failing.iter().any(|a| a.contains("does not verify")
            && a.contains("00000000000000000081-00000000000000000100.seg")),
        "{failing:?}"
    );
    assert_eq!(
        std::fs::read(&bad).expect("still there"),
        b"CRWLSEG\x01 not a segment"
    );
    // Moved aside, the fold goes on.
    std::fs::remove_file(&bad).expect("aside");
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 120");
    assert_eq!(f.first_seq().await, 121);
    nothing_purged_unarchived(&f, &store).await;
}

/// The broker lost in the middle of a fold (after the first segment is
/// checked, the second written while the first was read back): the
/// segments written stay, nothing is published or purged, and once the
/// broker is back the next tick adopts them and goes on.
#[tokio::test]
async fn a_broker_lost_mid_fold_leaves_the_frontier_at_the_last_durable_segment() {
    let scratch = Scratch::new();
    let store = Store::ObjectStore(BUCKET.into());
    let mut f = archived_fleet(&store).await;
    let cfg = scratch.write(
        "crewlet.yaml",
        &format!(
            "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{tick: 1s, max_clock_skew: 500ms, min_age: 3s, snapshot_interval: 1s, allow_unsafe_limits: true, backup_owner: oncall}}\ntrim: {{enabled: true}}\ndomains: [{{name: tracker, stream: {STREAM}, gate_subject: crewlet.tracker.gate, archive: {{object_store: {BUCKET}, segment_records: 20, fold_per_tick: 2}}}}]\n",
            f.url()
        ),
    );
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_crewlet"));
    cmd.args([
        "retention",
        "run",
        "--once",
        "--config",
        cfg.to_str().expect("utf-8"),
    ])
    .env_remove("NATS_URL")
    .env("CREWLET_FAILPOINT", "after_segment:sleep=2000")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("crewlet");
    // The first segment is durable; the broker goes while the fold waits.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    f.server.kill();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    assert_ne!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    f.server.restart();
    let f = f;
    assert!(
        eventually(20, || async {
            f.broker().await.stream_state(STREAM).await.is_ok()
        })
        .await,
        "the broker is back"
    );
    assert_eq!(f.first_seq().await, 1, "nothing purged");
    assert!(f.floors_row().await.is_none(), "nothing published");
    assert_eq!(archived(&f, &store).await.0, [(1, 20), (21, 40)]);
    let r = f.sidecar().await.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 80");
    assert_eq!(f.first_seq().await, 81);
    nothing_purged_unarchived(&f, &store).await;
}

/// The configuration file an operator would write for `store`.
fn operator_yaml(f: &Fleet, store: &Store) -> String {
    let archive = crate::support::s3::archive_yaml(store, 20, Some(2));
    format!(
        // The fleet's tick (its duty bucket keeps the lease three of them).
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall, tick: 1s, max_clock_skew: 500ms}}\ndomains:\n  - name: tracker\n    stream: {STREAM}\n    gate_subject: crewlet.tracker.gate\n    archive: {archive}\n",
        f.url()
    )
}

fn seqs(v: &serde_json::Value) -> Vec<u64> {
    v["records"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["seq"].as_u64()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn read_merges_the_archive_and_the_log_with_no_gap_or_overlap_at_the_seam() {
    use base64::Engine;
    let scratch = tempfile::tempdir().expect("dir");
    let (_s3, stores) = stores(scratch.path());
    for store in stores {
        let f = archived_fleet(&store).await;
        let mut s = f.sidecar().await;
        s.tick().await;
        s.tick().await;
        assert_eq!(f.first_seq().await, 81, "1..80 archived and purged");
        let op = crate::support::Operator::with_yaml(&operator_yaml(&f, &store));
        // Across the seam: 75..80 from the archive, 81.. from the log.
        let (run, v) = op.json(&[
            "retention",
            "read",
            "-stream",
            "tracker",
            "--from",
            "75",
            "--limit",
            "10",
        ]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(seqs(&v), (75..=84).collect::<Vec<_>>(), "{store:?}");
        let sources: Vec<&str> = v["records"]
            .as_array()
            .expect("records")
            .iter()
            .filter_map(|r| r["source"].as_str())
            .collect();
        assert_eq!(
            sources,
            [["archive"; 6].as_slice(), ["log"; 4].as_slice()].concat()
        );
        let b64 = base64::engine::general_purpose::STANDARD;
        for r in v["records"].as_array().expect("records") {
            let seq = r["seq"].as_u64().expect("seq");
            let data = b64
                .decode(r["data"].as_str().expect("data"))
                .expect("base64");
            assert_eq!(data, format!("r{}", seq - 1).into_bytes(), "record {seq}");
            assert_eq!(r["subject"], format!("{STREAM}.records"));
            assert!(r["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
        }
        assert_eq!(v["next"], 85);
        assert_eq!(v["first_readable"], 1);
        // The whole history by default, in order, each record once.
        let (_, v) = op.json(&["retention", "read", "-stream", "tracker", "--limit", "1000"]);
        assert_eq!(seqs(&v), (1..=100).collect::<Vec<_>>(), "{store:?}");
        // Text: one line per record, where it came from, the data as text.
        let run = op.run(&[
            "retention",
            "read",
            "-stream",
            "tracker",
            "--from",
            "80",
            "--limit",
            "2",
        ]);
        assert_eq!(run.code, 0, "{run:?}");
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert!(lines[0].starts_with("SEQ"), "{}", run.stdout);
        assert!(
            lines[1].starts_with("80 ")
                && lines[1].contains("archive")
                && lines[1].ends_with("r79"),
            "{}",
            run.stdout
        );
        assert!(
            lines[2].starts_with("81 ") && lines[2].contains(" log ") && lines[2].ends_with("r80"),
            "{}",
            run.stdout
        );
        // The next page's command is printed, and works.
        let more = run
            .stderr
            .lines()
            .find(|l| l.starts_with("more: "))
            .expect("more");
        let next: Vec<&str> = more
            .trim_start_matches("more: crewlet ")
            .split(' ')
            .collect();
        let run = op.run(&next);
        assert_eq!(run.code, 0, "{run:?}");
        assert!(
            run.stdout
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("82 ")),
            "{}",
            run.stdout
        );
    }
}

#[tokio::test]
async fn a_read_below_everything_readable_is_trimmed_and_bad_input_is_refused() {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 40), ("node-2", 40)], 95).await;
    f.sidecar().await.tick().await;
    assert_eq!(f.first_seq().await, 41);
    let op =
        crate::support::Operator::with_yaml(&crate::support::basic_config(&f.url(), STREAM, ""));
    // No archive: the log alone, and below its first sequence is trimmed.
    let (run, v) = op.json(&["retention", "read", "-stream", "tracker", "--from", "5"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        v,
        serde_json::json!({"error": "trimmed", "first_readable": 41})
    );
    let run = op.run(&["retention", "read", "-stream", "tracker", "--from", "5"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("trimmed: the first readable sequence is 41"),
        "{run:?}"
    );
    assert!(run.stdout.is_empty(), "{run:?}");
    let (run, v) = op.json(&[
        "retention",
        "read",
        "-stream",
        "tracker",
        "--from",
        "5",
        "--clamp",
        "--limit",
        "3",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(seqs(&v), [41, 42, 43]);
    // Past the end: nothing, not an error.
    let (run, v) = op.json(&["retention", "read", "-stream", "tracker", "--from", "500"]);
    assert_eq!((run.code, seqs(&v).len()), (0, 0), "{run:?}");
    for (args, says) in [
        (vec!["--from", "0"], "start at 1"),
        (vec!["--limit", "0"], "1 to 10000"),
        (vec!["--limit", "10001"], "1 to 10000"),
        (vec!["--from", "-3"], "-3"),
        (vec!["--from", "x"], "x"),
    ] {
        let mut all = vec!["retention", "read", "-stream", "tracker"];
        all.extend(args.iter());
        let run = op.run(&all);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(says), "{args:?}: {run:?}");
    }
    let run = op.run(&["retention", "read", "-stream", "nope"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not configured"), "{run:?}");
}

#[tokio::test]
async fn verify_archive_proves_a_sound_archive_and_names_each_problem() {
    let scratch = tempfile::tempdir().expect("dir");
    let (_s3, stores) = stores(scratch.path());
    for store in stores {
        let f = archived_fleet(&store).await;
        let mut s = f.sidecar().await;
        s.tick().await;
        s.tick().await;
        let op = crate::support::Operator::with_yaml(&operator_yaml(&f, &store));
        let (run, v) = op.json(&["retention", "verify-archive", "-stream", "tracker"]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(v["sound"], true, "{v}");
        assert_eq!(
            (v["segments"].as_u64(), v["records"].as_u64()),
            (Some(4), Some(80)),
            "{v}"
        );
        assert_eq!(
            (v["first_archived"].as_u64(), v["last_archived"].as_u64()),
            (Some(1), Some(80))
        );
        assert_eq!(v["published_frontier"], 80);
        assert_eq!(v["first_seq"], 81);
        let run = op.run(&["retention", "verify-archive", "-stream", "tracker"]);
        assert!(
            run.stdout.contains("4 segment(s), 80 record(s)") && run.stdout.contains("sound:"),
            "{run:?}"
        );
    }
    // Faults, in the directory store where a test can reach the files.
    let store = Store::Dir(scratch.path().join("faults"));
    let f = archived_fleet(&store).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    s.tick().await;
    let op = crate::support::Operator::with_yaml(&operator_yaml(&f, &store));
    let root = scratch.path().join("faults");
    let name = |a, b| root.join(crewlet::archive::segment::name(STREAM, 0, a, b));
    // A flipped byte in a body: the checksum names the segment.
    let mut bytes = std::fs::read(name(41, 60)).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(name(41, 60), &bytes).expect("corrupt");
    // A segment gone: a gap, and the published frontier still reached.
    std::fs::remove_file(name(21, 40)).expect("remove");
    let before: Vec<_> = walk(&root);
    let row_before = f.floors_row().await;
    let (run, v) = op.json(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(v["sound"], false);
    let problems: Vec<String> = v["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(|p| p.as_str().map(String::from))
        .collect();
    assert!(
        problems.iter().any(
            |p| p.contains("00000000000000000041-00000000000000000060.seg")
                && p.contains("SHA-256")
        ),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("gap:") && p.contains("21..40")),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    let run = op.run(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("2 problem(s)"), "{run:?}");
    // It wrote nothing.
    assert_eq!(walk(&root), before);
    assert_eq!(f.floors_row().await, row_before);
    // A domain without an archive is bad input.
    let op =
        crate::support::Operator::with_yaml(&crate::support::basic_config(&f.url(), STREAM, ""));
    let run = op.run(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("has no archive"), "{run:?}");
}

/// A segment deleted from an Object Store archive with the store's own
/// delete (as an operator would, by hand): verify-archive names the gap
/// and exits 1, as for a directory, not 3 over the deletion marker.
#[tokio::test]
async fn verify_archive_names_a_segment_deleted_from_the_object_store() {
    let store = Store::ObjectStore(BUCKET.into());
    let f = archived_fleet(&store).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    s.tick().await;
    let objects =
        f.js.get_object_store(BUCKET)
            .await
            .expect("the archive's bucket");
    objects
        .delete(crewlet::archive::segment::name(STREAM, 0, 21, 40))
        .await
        .expect("delete the middle segment");
    let op = crate::support::Operator::with_yaml(&operator_yaml(&f, &store));
    let (run, v) = op.json(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(v["sound"], false, "{v}");
    let problems: Vec<String> = v["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(|p| p.as_str().map(String::from))
        .collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("gap:") && problems[0].contains("21..40"),
        "{problems:?}"
    );
    // A deletion marker as another client writes it (its mtime is not a
    // time async-nats can parse): the next segment is a gap too, not a
    // listing that fails.
    let next = crewlet::archive::segment::name(STREAM, 0, 41, 60);
    let info = objects.info(&next).await.expect("the next segment");
    let encoded = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE.encode(&next)
    };
    let marker = serde_json::json!({"name": next, "bucket": BUCKET, "nuid": info.nuid,
        "size": 0, "chunks": 0, "digest": "", "mtime": "", "deleted": true});
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Rollup", "sub");
    f.js.publish_with_headers(
        format!("$O.{BUCKET}.M.{encoded}"),
        headers,
        marker.to_string().into(),
    )
    .await
    .expect("publish")
    .await
    .expect("stored");
    let (run, v) = op.json(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 1, "{run:?}");
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("gap:") && problems.contains("21..60"),
        "{v}"
    );
    // The tick sees the same: the archive's term is unreadable, missing.
    let r = s.tick().await;
    assert!(
        term_state(&r, TermName::ArchiveFloor).contains("missing"),
        "{}",
        term_state(&r, TermName::ArchiveFloor)
    );
}

/// Every file under `root` with its bytes.
fn walk(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).expect("file")));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn init_creates_the_archive_bucket_and_validate_checks_the_store() {
    let f = Fleet::new(0).await;
    let store = Store::ObjectStore("fresh_archive".into());
    let op = crate::support::Operator::with_yaml(&operator_yaml(&f, &store));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("domains[0].archive.object_store")
            && run
                .stdout
                .contains("object store fresh_archive does not exist")
            && run.stdout.contains("crewlet retention init"),
        "{run:?}"
    );
    let run = op.run(&["retention", "init"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.lines().any(|l| l.starts_with("created")
            && l.contains("archive")
            && l.ends_with("fresh_archive")),
        "{run:?}"
    );
    let run = op.run(&["retention", "init"]);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("exists") && l.ends_with("fresh_archive")),
        "{run:?}"
    );
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    // A directory that cannot be written (a file stands in its way).
    let scratch = tempfile::tempdir().expect("dir");
    let file = scratch.path().join("a-file");
    std::fs::write(&file, b"x").expect("file");
    let op =
        crate::support::Operator::with_yaml(&operator_yaml(&f, &Store::Dir(file.join("archive"))));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("domains[0].archive.dir") && run.stdout.contains("not a directory"),
        "{run:?}"
    );
    // One that can: valid, and validate leaves nothing behind.
    let op = crate::support::Operator::with_yaml(&operator_yaml(
        &f,
        &Store::Dir(scratch.path().join("new/archive")),
    ));
    let run = op.run(&["validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        walk(scratch.path()).len(),
        1,
        "only the file that was there"
    );
    assert!(!scratch.path().join("new").exists());
}
