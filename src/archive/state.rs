//! PURE: what the archive of one domain is, from its listing, the
//! published archive state and the segments read back this tick
//! (docs/archive-format.md, The seventh term): the frontier (`archive_floor`), or why
//! it cannot be known, and the state the floors row carries.
//!
//! The published frontier `P` is a promise: every segment at or below it
//! was durable when it was published. A listing that does not reach `P`
//! with a segment ending exactly there breaks the promise and the term is
//! `unreadable`. Segments past `P` were written by a tick that did not
//! publish; they count only once read back and verified here.

use serde::{Deserialize, Serialize};

use crate::rows::{Timestamp, Unreadable};

/// Where segments go (the reads and writes are in `archive::fold`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// A JetStream Object Store bucket.
    ObjectStore(String),
    /// A local directory.
    Dir(std::path::PathBuf),
    /// Cloud object storage (S3 and its compatibles, GCS, Azure).
    Cloud(super::remote::Remote),
}

impl Store {
    /// How the published archive state names the store.
    pub fn id(&self) -> String {
        match self {
            Store::ObjectStore(b) => format!("object_store:{b}"),
            Store::Dir(d) => format!("dir:{}", d.display()),
            Store::Cloud(r) => r.id(),
        }
    }

    /// A store's published id ([`Store::id`]) in words, for `status`,
    /// which has the id and not the configuration.
    pub fn words_of(id: &str) -> String {
        if let Some(b) = id.strip_prefix("object_store:") {
            return format!("JetStream Object Store {b}");
        }
        if let Some(d) = id.strip_prefix("dir:") {
            return format!("directory {d}");
        }
        match super::remote::parse_url(id) {
            Ok((cloud, bucket, prefix)) => {
                let what = match cloud {
                    super::remote::Cloud::S3 => "S3 bucket",
                    super::remote::Cloud::Gcs => "Google Cloud Storage bucket",
                    super::remote::Cloud::Azure => "Azure Blob Storage container",
                };
                if prefix.is_empty() {
                    format!("{what} {bucket}")
                } else {
                    format!("{what} {bucket}, under {prefix}/")
                }
            }
            Err(_) => id.to_string(),
        }
    }
}

/// Which log, at which incarnation and generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub stream: String,
    pub generation: u64,
    /// The log's `created`, RFC 3339 with nanoseconds.
    pub stream_created: String,
}

/// What putting a segment into a store did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Written,
    /// It was there with exactly these bytes (a re-fold after a crash).
    AlreadyThere,
}

/// One segment as the store lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub first_seq: u64,
    pub last_seq: u64,
    /// Its size in the store (compressed).
    pub bytes: u64,
}

/// Why the listing could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListError {
    /// The object store bucket does not exist (`crewlet retention init`).
    pub missing: bool,
    pub message: String,
}

/// This tick's fold, as the holder ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldOutcome {
    pub at: Timestamp,
    /// Segments written (or found already there) this tick.
    pub segments: usize,
    /// Why it stopped: the segment it was on (when one), and the reason.
    pub error: Option<(Option<String>, String)>,
}

/// What was read of one domain's archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveRead {
    /// The store, as `object_store:NAME` or `dir:PATH`: a published state
    /// belongs to the store it was published for.
    pub store: String,
    /// The current generation's segments, in sequence order.
    pub listing: Result<Vec<Listed>, ListError>,
    /// Segments past the published frontier, read back and checked (the
    /// reason when one does not verify).
    pub verified: Vec<(String, Result<(), Unreadable>)>,
    /// `None` when this reader did not fold (status, a sidecar without the
    /// duty, a tick that concluded nothing).
    pub fold: Option<FoldOutcome>,
    /// The listing is one this process took on an earlier tick (a cloud
    /// store's, kept while it ends at the published frontier): it may not
    /// decide a purge of records the archive holds, so the tick lists
    /// again before one (`Sidecar::fold_all`).
    pub reused: bool,
}

/// The archive state the answer, the floors row and status carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveState {
    pub store: String,
    /// The highest sequence durably folded, in this generation: the
    /// seventh term. Kept as published while the archive is unreadable.
    pub frontier: Option<u64>,
    /// The first sequence the archive covers; null while it holds no
    /// segment.
    pub first_archived: Option<u64>,
    pub segments: u64,
    pub bytes: u64,
    pub last_fold_at: Option<Timestamp>,
    /// Why the fold cannot go on (the `archive_failing` alarm), or why
    /// the archive is unreadable; null when sound.
    pub error: Option<String>,
    #[serde(default)]
    pub failing_segment: Option<String>,
    #[serde(default)]
    pub failing_since: Option<Timestamp>,
    /// The archive cannot be read: `archive_floor` is `unreadable`.
    #[serde(default)]
    pub unreadable: bool,
    /// The bucket is missing (the remedy is `init`).
    #[serde(skip)]
    pub missing_bucket: bool,
    /// Whether a fold may run from `frontier` (nothing found that a fold
    /// would overlap or leave behind). Not published: each tick decides.
    #[serde(skip)]
    pub may_fold: bool,
}

/// The segments past the published frontier that must be read back before
/// they count, in order (at most `max`; the rest wait for a later tick).
pub fn to_verify(
    read_listing: &[Listed],
    published: Option<&ArchiveState>,
    max: usize,
) -> Vec<String> {
    let chain = chain(read_listing);
    let from = published_frontier(published);
    chain
        .iter()
        .filter(|s| from.is_none_or(|p| s.first_seq > p))
        .take(max)
        .map(|s| s.name.clone())
        .collect()
}

/// The published frontier that binds: only one with segments behind it.
fn published_frontier(published: Option<&ArchiveState>) -> Option<u64> {
    published.and_then(|p| p.first_archived.and(p.frontier))
}

/// The contiguous run of segments from the first one listed.
fn chain(listing: &[Listed]) -> Vec<&Listed> {
    let mut out: Vec<&Listed> = Vec::new();
    for s in listing {
        match out.last() {
            None => out.push(s),
            Some(l) if l.last_seq.checked_add(1) == Some(s.first_seq) => out.push(s),
            Some(_) => break,
        }
    }
    out
}

/// The archive of one domain from what was read. `published` is the state
/// of the floors row this tick read (already filtered to this store and
/// generation by the caller); `log_first_seq` is the live log's first
/// sequence.
pub fn assess(
    read: &ArchiveRead,
    published: Option<&ArchiveState>,
    log_first_seq: u64,
    now: Timestamp,
) -> ArchiveState {
    let mut state = assess_listing(read, published, log_first_seq, now);
    // An archive that cannot be read keeps what was published of it, the
    // first archived sequence with the frontier: the next tick must still
    // see a published archive whose segments are missing, never an
    // unpublished one to start afresh at the log's first sequence.
    if state.unreadable {
        if let Some(p) = published.filter(|p| p.store == read.store) {
            state.frontier = state.frontier.or(p.frontier);
            state.first_archived = p.first_archived.or(state.first_archived);
        }
    }
    state
}

fn assess_listing(
    read: &ArchiveRead,
    published: Option<&ArchiveState>,
    log_first_seq: u64,
    now: Timestamp,
) -> ArchiveState {
    let published = published.filter(|p| p.store == read.store);
    let mut state = ArchiveState {
        store: read.store.clone(),
        frontier: published.and_then(|p| p.frontier),
        first_archived: published.and_then(|p| p.first_archived),
        segments: published.map_or(0, |p| p.segments),
        bytes: published.map_or(0, |p| p.bytes),
        last_fold_at: read
            .fold
            .as_ref()
            .filter(|f| f.segments > 0)
            .map(|f| f.at)
            .or(published.and_then(|p| p.last_fold_at)),
        error: None,
        failing_segment: None,
        failing_since: None,
        unreadable: false,
        missing_bucket: false,
        may_fold: false,
    };
    let since = |s: &ArchiveState| {
        published
            .filter(|p| p.error.is_some())
            .and_then(|p| p.failing_since)
            .or(Some(now))
            .filter(|_| s.error.is_some())
    };
    let listing = match &read.listing {
        Ok(l) => l,
        Err(e) => {
            state.unreadable = true;
            state.missing_bucket = e.missing;
            state.error = Some(e.message.clone());
            state.failing_since = since(&state);
            return state;
        }
    };
    state.segments = listing.len() as u64;
    state.bytes = listing.iter().map(|s| s.bytes).sum();
    let chain = chain(listing);
    state.first_archived = chain.first().map(|s| s.first_seq);
    let fail = |state: &mut ArchiveState, segment: Option<&str>, why: String, unreadable: bool| {
        if state.error.is_none() {
            state.error = Some(why);
            state.failing_segment = segment.map(str::to_string);
            state.unreadable = unreadable;
        }
    };

    // Where the trusted part of the chain ends.
    let (mut frontier, mut next) = match (published_frontier(published), chain.first()) {
        (Some(p), None) => {
            state.frontier = Some(p);
            fail(&mut state, None, format!("the archive holds no segment of this generation, but its published frontier is {p}: the segments up to it are missing"), true);
            state.failing_since = since(&state);
            return state;
        }
        (Some(p), Some(first)) => {
            let a = published
                .and_then(|p| p.first_archived)
                .unwrap_or(first.first_seq);
            if first.first_seq > a {
                state.frontier = Some(p);
                fail(&mut state, Some(&first.name), format!("the archive was published from {a} but its first segment starts at {}: segments are missing", first.first_seq), true);
                state.failing_since = since(&state);
                return state;
            }
            match chain.iter().position(|s| s.last_seq == p) {
                Some(i) => (p, i + 1),
                None => {
                    let end = chain.last().map_or(0, |s| s.last_seq);
                    let why = if end < p {
                        format!("the archive's segments end at {end} but its published frontier is {p}: the segments after {end} are missing")
                    } else {
                        let over = chain
                            .iter()
                            .find(|s| s.last_seq > p)
                            .map_or(String::new(), |s| s.name.clone());
                        format!("no segment ends at the published frontier {p} ({over} covers it)")
                    };
                    state.frontier = Some(p);
                    fail(&mut state, None, why, true);
                    state.failing_since = since(&state);
                    return state;
                }
            }
        }
        // Nothing published: the chain is adopted from its start, segment
        // by segment as each verifies, if it meets the log: a chain that
        // starts past the log's first record leaves records in neither.
        (None, Some(first)) if first.first_seq > log_first_seq.max(1) => {
            state.frontier = Some(log_first_seq.saturating_sub(1));
            fail(&mut state, Some(&first.name), format!("the archive's first segment starts at {} but the log starts at {log_first_seq}: records {log_first_seq}..{} are in neither, and a fold from the log would overlap it: move the archive's segments aside (verify-archive lists them)", first.first_seq, first.first_seq - 1), false);
            state.failing_since = since(&state);
            return state;
        }
        (None, Some(first)) => (first.first_seq.saturating_sub(1), 0),
        (None, None) => (log_first_seq.saturating_sub(1), 0),
    };
    // Adopt verified segments past the trusted part, in order.
    let mut unverified = false;
    while let Some(s) = chain.get(next) {
        match read.verified.iter().find(|(n, _)| *n == s.name) {
            Some((_, Ok(()))) => {
                frontier = s.last_seq;
                next += 1;
            }
            Some((_, Err(why))) => {
                fail(&mut state, Some(&s.name), format!("{} past the frontier does not verify: {why}; it is never overwritten: move it aside (verify-archive names it)", s.name), false);
                break;
            }
            None => {
                unverified = true;
                break;
            }
        }
    }
    state.frontier = Some(frontier);
    if let Some(stray) = listing.get(chain.len()) {
        let after = chain.last().map_or(0, |s| s.last_seq);
        fail(&mut state, Some(&stray.name), format!("{} does not follow the segment ending at {after} (a gap or an overlap); a fold from the frontier would not meet it: move it aside (verify-archive names it)", stray.name), false);
    }
    if !chain.is_empty() && frontier < log_first_seq.saturating_sub(1) {
        fail(&mut state, None, format!("records {}..{} left the log without being archived (the archive ends at {frontier}, the log starts at {log_first_seq}); they cannot be folded: see what removed them (broker_retention_bypass), and to archive from here on point the domain at a new store", frontier + 1, log_first_seq - 1), false);
    }
    state.may_fold = state.error.is_none() && !unverified;
    match &read.fold {
        Some(f) => {
            if let Some((segment, why)) = &f.error {
                fail(&mut state, segment.as_deref(), why.clone(), false);
            }
        }
        // A reader that does not fold keeps the holder's finding while the
        // frontier has not moved.
        None => {
            if let Some(p) = published.filter(|p| p.frontier == state.frontier && !p.unreadable) {
                if state.error.is_none() && p.error.is_some() {
                    state.error = p.error.clone();
                    state.failing_segment = p.failing_segment.clone();
                }
            }
        }
    }
    state.failing_since = since(&state);
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_each_store_in_words() {
        assert_eq!(
            Store::words_of("object_store:arch"),
            "JetStream Object Store arch"
        );
        assert_eq!(Store::words_of("dir:/var/lib/a"), "directory /var/lib/a");
        assert_eq!(
            Store::words_of("s3://acme/crewlet/prod"),
            "S3 bucket acme, under crewlet/prod/"
        );
        assert_eq!(
            Store::words_of("gs://acme"),
            "Google Cloud Storage bucket acme"
        );
        assert_eq!(
            Store::words_of("az://logs/x"),
            "Azure Blob Storage container logs, under x/"
        );
    }

    fn seg(first: u64, last: u64) -> Listed {
        Listed {
            name: crate::archive::segment::name("S", 0, first, last),
            first_seq: first,
            last_seq: last,
            bytes: 100,
        }
    }

    fn now() -> Timestamp {
        Timestamp::parse("2026-12-01T00:00:00Z").expect("instant")
    }

    fn read(listing: Vec<Listed>, verified: &[(u64, u64, bool)]) -> ArchiveRead {
        ArchiveRead {
            store: "dir:/a".into(),
            reused: false,
            listing: Ok(listing),
            verified: verified
                .iter()
                .map(|(f, l, ok)| {
                    let name = crate::archive::segment::name("S", 0, *f, *l);
                    (name, if *ok { Ok(()) } else { Err("checksum".into()) })
                })
                .collect(),
            fold: None,
        }
    }

    fn published(first: Option<u64>, frontier: u64) -> ArchiveState {
        ArchiveState {
            store: "dir:/a".into(),
            frontier: Some(frontier),
            first_archived: first,
            segments: 0,
            bytes: 0,
            last_fold_at: None,
            error: None,
            failing_segment: None,
            failing_since: None,
            unreadable: false,
            missing_bucket: false,
            may_fold: true,
        }
    }

    #[test]
    fn an_empty_archive_starts_below_the_log() {
        let s = assess(&read(vec![], &[]), None, 40, now());
        assert_eq!(s.frontier, Some(39));
        assert!(s.may_fold && s.error.is_none() && !s.unreadable);
        assert_eq!(s.first_archived, None);
    }

    #[test]
    fn the_published_frontier_counts_without_reading_segments_again() {
        let p = published(Some(1), 20);
        let r = read(vec![seg(1, 10), seg(11, 20)], &[]);
        assert!(to_verify(r.listing.as_ref().expect("ok"), Some(&p), 64).is_empty());
        let s = assess(&r, Some(&p), 5, now());
        assert_eq!(s.frontier, Some(20));
        assert_eq!((s.segments, s.bytes, s.first_archived), (2, 200, Some(1)));
        assert!(s.may_fold);
    }

    #[test]
    fn segments_past_the_frontier_count_only_once_verified() {
        let p = published(Some(1), 10);
        let listing = vec![seg(1, 10), seg(11, 20), seg(21, 30)];
        assert_eq!(
            to_verify(&listing, Some(&p), 64),
            [
                crate::archive::segment::name("S", 0, 11, 20),
                crate::archive::segment::name("S", 0, 21, 30)
            ]
        );
        // Not yet verified: the frontier stays, and no fold runs into them.
        let s = assess(&read(listing.clone(), &[]), Some(&p), 1, now());
        assert_eq!(s.frontier, Some(10));
        assert!(!s.may_fold && s.error.is_none());
        let s = assess(
            &read(listing.clone(), &[(11, 20, true), (21, 30, true)]),
            Some(&p),
            1,
            now(),
        );
        assert_eq!(s.frontier, Some(30));
        assert!(s.may_fold);
        // One that fails stops adoption there and is an error, not unreadable.
        let s = assess(
            &read(listing, &[(11, 20, true), (21, 30, false)]),
            Some(&p),
            1,
            now(),
        );
        assert_eq!(s.frontier, Some(20));
        assert!(!s.may_fold && !s.unreadable);
        assert!(s
            .error
            .as_deref()
            .is_some_and(|e| e.contains("does not verify")));
        assert_eq!(
            s.failing_segment,
            Some(crate::archive::segment::name("S", 0, 21, 30))
        );
    }

    #[test]
    fn missing_segments_at_or_below_the_published_frontier_are_unreadable() {
        let p = published(Some(1), 30);
        for listing in [
            vec![],
            vec![seg(1, 10), seg(11, 20)],
            vec![seg(11, 30)],
            vec![seg(1, 10), seg(11, 40)],
        ] {
            let s = assess(&read(listing.clone(), &[]), Some(&p), 1, now());
            assert!(s.unreadable, "{listing:?}");
            assert_eq!(s.frontier, Some(30), "the published frontier is kept");
            assert!(!s.may_fold);
            assert_eq!(s.failing_since, Some(now()));
        }
        // A published frontier with no segment behind it promises nothing.
        let s = assess(&read(vec![], &[]), Some(&published(None, 30)), 31, now());
        assert_eq!(s.frontier, Some(30));
        assert!(!s.unreadable && s.may_fold);
    }

    #[test]
    fn a_listing_that_fails_is_unreadable_and_a_missing_bucket_says_so() {
        let mut r = read(vec![], &[]);
        r.listing = Err(ListError {
            missing: true,
            message: "bucket gone".into(),
        });
        let s = assess(&r, None, 1, now());
        assert!(s.unreadable && s.missing_bucket && !s.may_fold);
    }

    #[test]
    fn a_stray_segment_or_a_gap_before_the_log_stops_the_fold_but_not_the_term() {
        let p = published(Some(1), 10);
        let s = assess(
            &read(vec![seg(1, 10), seg(15, 20)], &[]),
            Some(&p),
            1,
            now(),
        );
        assert_eq!(s.frontier, Some(10));
        assert!(!s.unreadable && !s.may_fold);
        assert!(s
            .error
            .as_deref()
            .is_some_and(|e| e.contains("does not follow")));
        // The log starts past the archive's end: records left unarchived.
        let s = assess(&read(vec![seg(1, 10)], &[]), Some(&p), 20, now());
        assert!(
            s.error.as_deref().is_some_and(|e| e.contains("11..19")),
            "{s:?}"
        );
        assert!(!s.may_fold && !s.unreadable);
    }

    #[test]
    fn another_store_or_no_row_adopts_what_verifies() {
        let mut p = published(Some(1), 99);
        p.store = "object_store:old".into();
        let listing = vec![seg(1, 10), seg(11, 20)];
        assert_eq!(to_verify(&listing, None, 64).len(), 2);
        let s = assess(&read(listing, &[(1, 10, true)]), Some(&p), 1, now());
        assert_eq!(s.frontier, Some(10));
        assert!(!s.may_fold, "11-20 waits to be verified");
    }

    #[test]
    fn an_unpublished_archive_that_does_not_meet_the_log_is_never_adopted() {
        // Records 1..=99 are on the log and in no segment: adopting 100-200
        // would license purging them.
        let s = assess(
            &read(vec![seg(100, 200)], &[(100, 200, true)]),
            None,
            1,
            now(),
        );
        assert_eq!(s.frontier, Some(0));
        assert!(!s.may_fold && s.error.is_some());
    }

    #[test]
    fn a_fold_error_is_kept_by_readers_that_do_not_fold_until_the_frontier_moves() {
        let mut p = published(Some(1), 10);
        p.error = Some("store full".into());
        p.failing_since = Some(Timestamp::parse("2026-11-30T00:00:00Z").expect("i"));
        let s = assess(&read(vec![seg(1, 10)], &[]), Some(&p), 1, now());
        assert_eq!(s.error.as_deref(), Some("store full"));
        assert_eq!(
            s.failing_since, p.failing_since,
            "since when, not since now"
        );
        assert!(s.may_fold, "the holder retries");
        // The holder's fold this tick decides.
        let mut r = read(vec![seg(1, 10), seg(11, 20)], &[(11, 20, true)]);
        r.fold = Some(FoldOutcome {
            at: now(),
            segments: 1,
            error: None,
        });
        let s = assess(&r, Some(&p), 1, now());
        assert_eq!(
            (s.error, s.frontier, s.last_fold_at),
            (None, Some(20), Some(now()))
        );
        let mut r = read(vec![seg(1, 10)], &[]);
        r.fold = Some(FoldOutcome {
            at: now(),
            segments: 0,
            error: Some((Some("S/0/x.seg".into()), "refused".into())),
        });
        let s = assess(&r, Some(&p), 1, now());
        assert_eq!(s.error.as_deref(), Some("refused"));
        assert_eq!(s.failing_since, p.failing_since);
    }
}
