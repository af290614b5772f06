//! The archive in cloud object storage against a real S3-compatible server
//! (moto, tests/it/support/s3.rs) and a real broker: every fault of the
//! store leaves the frontier at the last durable segment with nothing past
//! it purged, and says so; `validate` names the permission that is
//! missing; no client asks a metadata service it was not allowed to.
//! (Fold, trim, merge read, verify-archive and erasure over the cloud
//! store run beside the other two stores in archive.rs, archive_format.rs
//! and erase.rs.)

use std::io::Read;
use std::time::{Duration, Instant};

use crate::archive::{alarms, nothing_purged_unarchived};
use crate::support::fleet::*;
use crate::support::s3::{archive_yaml, S3};
use crewlet::archive::fold::Store;
use crewlet::config::{size::Size, ArchiveConfig};
use crewlet::floor::TermName;
use crewlet::tick::TickReport;

const BUCKET: &str = "crewlet-archive";

/// 100 records, nodes at 90, folded into `store` 20 records a segment,
/// two segments a tick.
async fn archived_fleet(store: &Store) -> Fleet {
    archived_fleet_at(store, 90).await
}

async fn archived_fleet_at(store: &Store, nodes_at: u64) -> Fleet {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", nodes_at), ("node-2", nodes_at)], 95)
        .await;
    f.config.domains[0].archive = Some(ArchiveConfig {
        segment_records: 20,
        segment_bytes: Size(8 << 20),
        fold_per_tick: 2,
        ..ArchiveConfig::of(store)
    });
    f
}

fn failing(r: &TickReport) -> Vec<String> {
    alarms(r)
        .into_iter()
        .filter(|a| a.contains("archive_failing"))
        .collect()
}

fn operator(f: &Fleet, store: &Store) -> crate::support::Operator {
    crate::support::Operator::with_yaml(&format!(
        "node: {{id: node-1}}\nnats: {{url: \"{}\"}}\nretention: {{backup_owner: oncall, tick: 1s, max_clock_skew: 500ms}}\ndomains:\n  - name: tracker\n    stream: {STREAM}\n    gate_subject: crewlet.tracker.gate\n    archive: {}\n",
        f.url(),
        archive_yaml(store, 20, Some(2))
    ))
}

/// The store stops as the second segment of a tick's fold is written (the
/// first is then being read back, and that read is cut too): the frontier
/// stays where the last segment checked ends, nothing past it is purged,
/// `archive_failing` names the segment it was on; once the store answers,
/// the next tick adopts what was written and folds on from there.
#[tokio::test]
async fn a_store_stopped_mid_fold_holds_the_trim_at_the_last_durable_segment() {
    let s3 = S3::start(BUCKET);
    let store = s3.store(BUCKET, "crewlet");
    let f = archived_fleet(&store).await;
    let mut s = f.sidecar().await;
    s3.cut_at_put(2);
    let r = s.tick().await;
    // The first segment's read back raced the cut: it counts only if it
    // came back before it.
    let frontier = r.domains[0]
        .answer
        .archive
        .as_ref()
        .and_then(|a| a.frontier);
    assert!(matches!(frontier, Some(0) | Some(20)), "{frontier:?}");
    let frontier = frontier.unwrap_or_default();
    assert_eq!(r.domains[0].answer.trim_to, frontier);
    assert_eq!(
        f.first_seq().await,
        frontier + 1,
        "nothing past the last segment checked"
    );
    assert!(
        failing(&r).iter().any(|a| a.contains(".seg")),
        "{:?}",
        alarms(&r)
    );
    // Still stopped: the archive cannot even be listed; nothing moves.
    let r = s.tick().await;
    assert!(
        term_state(&r, TermName::ArchiveFloor).starts_with("unreadable"),
        "{}",
        term_state(&r, TermName::ArchiveFloor)
    );
    assert_eq!(f.first_seq().await, frontier + 1);
    s3.pass();
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 60");
    assert_eq!(f.first_seq().await, 61);
    assert!(failing(&r).is_empty(), "{:?}", alarms(&r));
    nothing_purged_unarchived(&f, &store).await;
}

/// A store that accepts connections and never answers: the tick gives it
/// up within its read timeouts (it never waits on the store past its
/// deadline), holds the trim where it was, and folds on once the store
/// answers.
#[tokio::test]
async fn a_store_that_stops_answering_never_holds_the_tick_past_its_deadline() {
    let s3 = S3::start(BUCKET);
    let store = s3.store(BUCKET, "crewlet");
    let f = archived_fleet(&store).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 41);
    s3.stall();
    let started = Instant::now();
    let r = s.tick().await;
    let took = started.elapsed();
    // The fleet's read timeout is 1 s; the listing is given up after one.
    assert!(took < Duration::from_secs(5), "the tick took {took:?}");
    let state = term_state(&r, TermName::ArchiveFloor);
    assert!(
        state.starts_with("unreadable") && state.contains("no answer within"),
        "{state}"
    );
    assert_eq!(f.first_seq().await, 41, "nothing past the frontier");
    s3.pass();
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 80");
    assert_eq!(f.first_seq().await, 81);
    nothing_purged_unarchived(&f, &store).await;
    // status names the store in words.
    let run = operator(&f, &store).status();
    assert!(
        run.stdout
            .contains("ARCHIVE S3 bucket crewlet-archive, under crewlet/: frontier 80"),
        "{run:?}"
    );
}

/// A segment removed under the published frontier (a lifecycle rule, a
/// hand) while its records are still in the log: the tick that would purge
/// them lists the store again rather than trust the listing it kept (a
/// kept listing never decides a purge of records the archive holds), the
/// archive is unreadable, nothing is purged, and verify-archive names the
/// gap.
#[tokio::test]
async fn a_segment_deleted_while_its_records_are_live_stops_the_purge_at_once() {
    let s3 = S3::start(BUCKET);
    let store = s3.store(BUCKET, "crewlet");
    let mut f = archived_fleet(&store).await;
    // Folded, not purged: a dry run proves the archive first. The fourth
    // tick has nothing to fold and lists the store; that listing is kept.
    f.config.trim.enabled = false;
    let mut s = f.sidecar().await;
    for _ in 0..4 {
        s.tick().await;
    }
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 90");
    assert_eq!(f.first_seq().await, 1);
    s.duty.release(&s.broker).await;
    let name = crewlet::archive::segment::name(STREAM, 0, 21, 40);
    s3.admin(&["delete", BUCKET, &format!("crewlet/{name}")]);
    f.config.trim.enabled = true;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let state = term_state(&r, TermName::ArchiveFloor);
    assert!(
        state.starts_with("unreadable") && state.contains("missing"),
        "{state}"
    );
    assert_eq!(f.first_seq().await, 1, "nothing purged over the gap");
    let op = operator(&f, &store);
    let (run, v) = op.json(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 1, "{run:?}");
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("gap:") && problems.contains("21..40"),
        "{v}"
    );
}

/// A quiet archived tick (nothing to fold, every archived record purged)
/// asks the store nothing: its listing is the one kept from the last
/// tick that listed. A segment removed from under it then (records already
/// gone from the log, so no purge relies on it) is still found within
/// `REUSE_AT_MOST` ticks, and at once by verify-archive; a tick that folds
/// lists again.
#[tokio::test]
async fn a_quiet_tick_reuses_its_listing_and_still_finds_a_removed_segment() {
    let s3 = S3::start(BUCKET);
    let store = s3.store(BUCKET, "crewlet");
    let f = archived_fleet_at(&store, 80).await;
    let mut s = f.sidecar().await;
    s.tick().await;
    s.tick().await;
    assert_eq!(f.first_seq().await, 81);
    // The first quiet tick lists (the fold before it wrote); the next
    // ones keep that listing. The store stops answering: a quiet tick
    // does not notice.
    s.tick().await;
    s3.cut();
    let r = s.tick().await;
    assert_eq!(term_state(&r, TermName::ArchiveFloor), "value 80");
    assert!(failing(&r).is_empty(), "{:?}", alarms(&r));
    s3.pass();
    let name = crewlet::archive::segment::name(STREAM, 0, 21, 40);
    s3.admin(&["delete", BUCKET, &format!("crewlet/{name}")]);
    let op = operator(&f, &store);
    let (run, _) = op.json(&["retention", "verify-archive", "-stream", "tracker"]);
    assert_eq!(run.code, 1, "verify-archive lists the store: {run:?}");
    let mut found = None;
    for n in 0..=crewlet::cloud::REUSE_AT_MOST {
        let r = s.tick().await;
        if term_state(&r, TermName::ArchiveFloor).contains("missing") {
            found = Some(n);
            break;
        }
    }
    assert!(
        found.is_some(),
        "not found within {} ticks",
        crewlet::cloud::REUSE_AT_MOST + 1
    );
    assert_eq!(f.first_seq().await, 81);
    // Records to fold: the tick lists, folds and purges on the nodes'
    // word once the archive is whole again (the gap's records are gone
    // from everywhere; here the test puts nothing back, so it stays
    // unreadable and nothing more is purged).
    f.healthy(&[("node-1", 90), ("node-2", 90)], 95).await;
    let r = s.tick().await;
    assert!(
        term_state(&r, TermName::ArchiveFloor).contains("missing"),
        "{}",
        term_state(&r, TermName::ArchiveFloor)
    );
    assert_eq!(f.first_seq().await, 81);
}

/// Credentials that may list and read but not write: `validate` names
/// `s3:PutObject`, and the tick's fold fails naming it too, with nothing
/// purged. Credentials the store does not know: `validate` says so, and
/// the archive is unreadable.
#[tokio::test]
async fn credentials_short_of_a_permission_are_named_by_validate_and_the_fold() {
    let s3 = S3::start(BUCKET);
    let keys = s3.admin(&[
        "user",
        "reader",
        "s3:ListBucket",
        "s3:ListObjectsV2",
        "s3:GetObject",
    ]);
    let (id, secret) = keys.trim().split_once(' ').expect("key and secret");
    let reader = s3.dir.path().join("reader");
    std::fs::write(
        &reader,
        format!("[archive]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\n"),
    )
    .expect("write");
    s3.admin(&["enforce-auth"]);
    let mut remote = s3.remote(BUCKET, "crewlet");
    remote.credentials_file = Some(reader);
    remote.profile = Some("archive".into());
    let store = Store::Cloud(remote);
    let f = archived_fleet(&store).await;

    let op = operator(&f, &store);
    let run = op.run(&["validate"]);
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("domains[0].archive.url") && said.contains("grant s3:PutObject"),
        "{said}"
    );
    let r = f.sidecar().await.tick().await;
    assert!(
        failing(&r).iter().any(|a| a.contains("s3:PutObject")),
        "{:?}",
        alarms(&r)
    );
    assert_eq!(f.first_seq().await, 1, "nothing folded, nothing purged");

    // The keys every other test uses are not this store's any more.
    let unknown = s3.store(BUCKET, "crewlet");
    let op = operator(&f, &unknown);
    let run = op.run(&["validate"]);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        said.contains("grant s3:ListBucket") || said.contains("does not accept these credentials"),
        "{said}"
    );
}

/// `validate` on a sound store: the bucket is there, the credentials may
/// list, read and write, and the store refuses to overwrite with a
/// conditional create. A bucket that is not there is named.
#[tokio::test]
async fn validate_proves_the_bucket_and_the_credentials() {
    let s3 = S3::start(BUCKET);
    let f = Fleet::new(10).await;
    let op = operator(&f, &s3.store(BUCKET, "crewlet"));
    let run = op.run(&["validate"]);
    assert!(
        !format!("{}{}", run.stdout, run.stderr).contains("archive.url"),
        "{run:?}"
    );
    let op = operator(&f, &s3.store("no-such-bucket", "crewlet"));
    let run = op.run(&["validate"]);
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("domains[0].archive.url") && said.contains("no-such-bucket"),
        "{said}"
    );
}

/// No cloud client reaches an address the test did not give it. With
/// `instance_metadata: false` and no keys, no client is made at all (the
/// error says why, and a listener standing where the metadata service
/// would be hears nothing); allowed, the lookup goes to the metadata
/// address the environment names, here a listener on loopback, which is
/// how the test environment keeps every lookup off the network.
#[tokio::test]
async fn no_client_asks_a_metadata_service_it_was_not_allowed_to() {
    let s3 = S3::start(BUCKET);
    let f = Fleet::new(10).await;
    let metadata = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    metadata.set_nonblocking(true).expect("nonblocking");
    let at = format!("http://{}", metadata.local_addr().expect("addr"));
    let env = [
        ("AWS_METADATA_ENDPOINT", at.as_str()),
        ("AWS_EC2_METADATA_DISABLED", "false"),
    ];
    let mut remote = s3.remote(BUCKET, "crewlet");
    remote.credentials_file = None;
    let denied = operator(&f, &Store::Cloud(remote.clone()));
    let run = denied.run_env(&["validate"], &env);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("no credentials") && said.contains("instance_metadata is false"),
        "{said}"
    );
    assert!(heard(&metadata).is_empty(), "a metadata lookup was made");

    remote.instance_metadata = true;
    let allowed = operator(&f, &Store::Cloud(remote));
    let run = allowed.run_env(&["validate"], &env);
    assert_ne!(run.code, 0, "no credentials came: {run:?}");
    let asked = heard(&metadata);
    assert!(
        asked.contains("/latest/api/token") || asked.contains("/latest/meta-data"),
        "the metadata lookup went to the address given: {asked:?}"
    );
}

/// What was sent to `listener` so far (each connection's first bytes).
fn heard(listener: &std::net::TcpListener) -> String {
    let mut out = String::new();
    while let Ok((mut c, _)) = listener.accept() {
        let _ = c.set_nonblocking(false);
        let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
        let mut buf = [0u8; 2048];
        if let Ok(n) = c.read(&mut buf) {
            out.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    out
}
