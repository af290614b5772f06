//! The published floors row (docs/contract.md, `crewlet_floors` — the published answer): a contract other
//! programs read, kept apart from the status view built on the same answer.
//! A field added to what `status` shows never enters this row unless it is
//! added here, and a test pins the row's fields: they are added, never
//! renamed or removed.

use serde::Serialize;

use super::answer::{
    Answer, FloorState, GateView, NotReady, PurgeClamp, Term, TermName, WouldPurge,
};
use crate::archive::state::ArchiveState;
use crate::rows::{Timestamp, Unreadable};
use crate::stream_check::Bypass;

/// What the duty holder writes to the floors bucket under the stream's key.
#[derive(Debug, Clone, Serialize)]
pub struct FloorsRow<'a> {
    pub domain: &'a str,
    pub stream: &'a str,
    pub generation: u64,
    pub stream_created: Option<Timestamp>,
    pub generation_opened_at: Option<Timestamp>,
    pub floor: Option<u64>,
    pub trim_to: u64,
    pub trim_floor_state: FloorState,
    pub dry_run: bool,
    pub would_purge: Option<WouldPurge>,
    pub terms: &'a [Term],
    pub blocked_by: &'a [TermName],
    pub held_since: Option<Timestamp>,
    pub soft_ceiling_bytes: u64,
    pub max_bytes: i64,
    pub reserve_bytes: u64,
    pub bytes: u64,
    pub headroom_fraction: f64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub not_ready: Option<&'a NotReady>,
    pub evictions_unreadable: bool,
    pub stream_error: Option<&'a str>,
    pub backup_age_secs: Option<u64>,
    pub backup_stale: bool,
    pub live_stream_created: Option<Timestamp>,
    pub broker_retention_bypass: &'a [Bypass],
    pub published_at: Option<Timestamp>,
    pub gate_view: Option<&'a GateView>,
    pub purge_clamped_by: Option<PurgeClamp>,
    pub archive: Option<&'a ArchiveState>,
    pub requested: Option<&'a super::answer::RequestedView>,
    pub config_digest: &'a str,
    pub config: &'a std::collections::BTreeMap<String, Option<String>>,
    /// What the answer remembers (docs/trim-floor.md, The sidecar's
    /// memory); the previous release wrote `pins` instead.
    pub memory: &'a super::members::MemoryRecord,
    /// The row's format ([`super::members::FORMAT`]).
    pub format: u32,
    pub by: &'a str,
    pub session: &'a str,
    pub at: Timestamp,
}

impl<'a> From<&'a Answer> for FloorsRow<'a> {
    fn from(a: &'a Answer) -> Self {
        FloorsRow {
            domain: &a.domain,
            stream: &a.stream,
            generation: a.generation,
            stream_created: a.stream_created,
            generation_opened_at: a.generation_opened_at,
            floor: a.floor,
            trim_to: a.trim_to,
            trim_floor_state: a.trim_floor_state,
            dry_run: a.dry_run,
            would_purge: a.would_purge,
            terms: &a.terms,
            blocked_by: &a.blocked_by,
            held_since: a.held_since,
            soft_ceiling_bytes: a.soft_ceiling_bytes,
            max_bytes: a.max_bytes,
            reserve_bytes: a.reserve_bytes,
            bytes: a.bytes,
            headroom_fraction: a.headroom_fraction,
            first_seq: a.first_seq,
            last_seq: a.last_seq,
            not_ready: a.not_ready.as_ref(),
            evictions_unreadable: a.evictions_unreadable,
            stream_error: a.stream_error.as_deref(),
            backup_age_secs: a.backup_age_secs,
            backup_stale: a.backup_stale,
            live_stream_created: a.live_stream_created,
            broker_retention_bypass: &a.broker_retention_bypass,
            published_at: a.published_at,
            gate_view: a.gate_view.as_ref(),
            purge_clamped_by: a.purge_clamped_by,
            archive: a.archive.as_ref(),
            requested: a.requested.as_ref(),
            config_digest: &a.config_digest,
            config: &a.config,
            memory: &a.memory,
            format: super::members::FORMAT,
            by: &a.by,
            session: &a.session,
            at: a.at,
        }
    }
}

impl FloorsRow<'_> {
    /// The row as written to the bucket.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Unreadable> {
        serde_json::to_vec(self).map_err(|e| Unreadable(e.to_string()))
    }

    /// What the row says, less what moves on its own between two ticks of
    /// the same answer: its `at` and `published_at`, and the log's size
    /// and end as of `at` (`bytes`, `headroom_fraction`, `last_seq`,
    /// `backup_age_secs`). Two answers of one digest write rows that
    /// differ only in those (docs/contract.md, `crewlet_floors` — the published answer). `None`
    /// when the row cannot be serialized: it is then always written.
    ///
    /// The fields a quiet fleet's rows are made of (the terms, the pins,
    /// the configuration, the scalars) are fed as they are in memory; the
    /// rare ones (`would_purge`, NOT READY, the retention bypasses, a
    /// gates view, an archive, a requested watermark) as their JSON.
    /// Written out as JSON whole, the digest was most of a fleet's
    /// standing tick (docs/performance.md, A fleet of many
    /// logs). The digest is only ever compared within this
    /// process, with the digest of the row it last wrote.
    pub fn digest(&self) -> Option<RowDigest> {
        use std::hash::Hash;
        // Every field named, none elided: a field added to the row does
        // not compile until it is either digested or said to move on its
        // own here.
        let FloorsRow {
            domain,
            stream,
            generation,
            stream_created,
            generation_opened_at,
            floor,
            trim_to,
            trim_floor_state,
            dry_run,
            would_purge,
            terms,
            blocked_by,
            held_since,
            soft_ceiling_bytes,
            max_bytes,
            reserve_bytes,
            bytes: _,
            headroom_fraction: _,
            first_seq,
            last_seq: _,
            not_ready,
            evictions_unreadable,
            stream_error,
            backup_age_secs: _,
            backup_stale,
            live_stream_created,
            broker_retention_bypass,
            published_at: _,
            gate_view,
            purge_clamped_by,
            archive,
            requested,
            config_digest,
            config,
            memory,
            format,
            by,
            session,
            at: _,
        } = self;
        // Two SipHash keys of this process's own: a row whose digest
        // collided with the last one written would not be rewritten, so
        // the digest is 128 bits and its keys unknown to whoever writes the
        // rows it is computed from.
        static KEYS: std::sync::OnceLock<[std::hash::RandomState; 2]> = std::sync::OnceLock::new();
        let keys =
            KEYS.get_or_init(|| [std::hash::RandomState::new(), std::hash::RandomState::new()]);
        let mut w = Digesting {
            hashers: keys.each_ref().map(std::hash::BuildHasher::build_hasher),
            pending: Vec::with_capacity(Digesting::CHUNK),
        };
        (domain, stream, generation, stream_created).hash(&mut w);
        (
            generation_opened_at,
            floor,
            trim_to,
            trim_floor_state,
            dry_run,
        )
            .hash(&mut w);
        (terms, blocked_by, held_since, soft_ceiling_bytes).hash(&mut w);
        (max_bytes, reserve_bytes, first_seq, evictions_unreadable).hash(&mut w);
        (
            stream_error,
            backup_stale,
            live_stream_created,
            purge_clamped_by,
        )
            .hash(&mut w);
        (config_digest, config, memory, format, by, session).hash(&mut w);
        // Each JSON value delimits itself, so one cannot run into the next.
        let rare = (
            would_purge,
            not_ready,
            broker_retention_bypass,
            gate_view,
            archive,
            requested,
        );
        serde_json::to_writer(&mut w, &rare).ok()?;
        w.feed();
        Some(RowDigest(w.hashers.map(|h| std::hash::Hasher::finish(&h))))
    }
}

/// A digest of what a floors row says ([`FloorsRow::digest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowDigest([u64; 2]);

/// Feeds what the digest is made of to both hashers, a chunk at a time:
/// fed token by token, the hashers' per-call cost was most of a fleet's
/// standing tick (docs/performance.md, A fleet of many logs),
/// and a buffer of the whole row would be a megabyte at ten thousand
/// nodes. The hashers stream bytes, so the chunking does not change the
/// digest.
struct Digesting {
    hashers: [std::hash::DefaultHasher; 2],
    pending: Vec<u8>,
}

impl Digesting {
    const CHUNK: usize = 8 * 1024;

    fn feed(&mut self) {
        for h in &mut self.hashers {
            std::hash::Hasher::write(h, &self.pending);
        }
        self.pending.clear();
    }
}

/// As a `Hasher`, it takes the in-memory fields a small write at a time
/// into the same buffer. Its own `finish` is not the digest (that is
/// both hashers' words, once the buffer is fed) and is never asked for.
impl std::hash::Hasher for Digesting {
    fn write(&mut self, bytes: &[u8]) {
        if self.pending.len() + bytes.len() > Self::CHUNK {
            self.feed();
        }
        self.pending.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        0
    }
}

/// As a writer, it takes the rare fields' JSON into the same buffer.
impl std::io::Write for Digesting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::hash::Hasher::write(self, buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The floors row this process last wrote for a log: its revision, its
/// `at` and its digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenRow {
    pub revision: u64,
    pub at: Timestamp,
    pub digest: RowDigest,
}

/// PURE: whether a tick may leave the published floors row as it stands
/// rather than write its answer again (docs/contract.md, `crewlet_floors` — the published answer).
/// Only when all hold:
///
/// - the row is the one this process wrote last (the same revision and
///   `at`: no other writer, no recreated bucket);
/// - the answer says what that row says (the same digest);
/// - the answer licenses no purge (a purge follows a row written by its
///   own tick, as the hold handshake relies on).
///
/// Its age does not matter: the holder's `_tick`, written every tick,
/// says the row still stands, so a quiet fleet of any size costs one
/// write a tick.
pub fn row_stands(
    written: Option<&WrittenRow>,
    published: Option<(Timestamp, u64)>,
    digest: Option<RowDigest>,
    purges: bool,
) -> bool {
    let (Some(w), Some((at, revision)), Some(digest)) = (written, published, digest) else {
        return false;
    };
    w.revision == revision && w.at == at && w.digest == digest && !purges
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same answer computed a tick later digests the same; a changed
    /// answer does not.
    #[test]
    fn the_digest_ignores_the_time_and_the_log_end_and_nothing_else() {
        let w = crate::floor::tests::World::new();
        let a = w.answer();
        let mut later = a.clone();
        later.at = Timestamp(a.at.0 + chrono::Duration::seconds(10));
        later.published_at = Some(a.at);
        later.bytes += 4096;
        later.last_seq += 7;
        later.headroom_fraction /= 2.0;
        later.backup_age_secs = Some(later.backup_age_secs.unwrap_or(0) + 10);
        let d = FloorsRow::from(&a).digest();
        assert!(d.is_some());
        assert_eq!(d, FloorsRow::from(&later).digest());
        let mut moved = a.clone();
        moved.trim_to += 1;
        assert_ne!(d, FloorsRow::from(&moved).digest(), "trim_to");
        let mut pinned = a.clone();
        pinned.memory.holds += 1;
        pinned.memory.digest.push('0');
        assert_ne!(d, FloorsRow::from(&pinned).digest(), "a new hold");
        let mut clamped = a.clone();
        clamped.purge_clamped_by = Some(crate::floor::PurgeClamp::Age);
        assert_ne!(d, FloorsRow::from(&clamped).digest(), "purge_clamped_by");
        // Every other field the row says, each changed alone: the ones fed
        // as they are in memory and the ones fed as JSON.
        type Change = (&'static str, fn(&mut Answer));
        let changes: Vec<Change> = vec![
            ("floor", |a| a.floor = Some(a.floor.unwrap_or(0) + 1)),
            ("generation", |a| a.generation += 1),
            ("dry_run", |a| a.dry_run = !a.dry_run),
            ("first_seq", |a| a.first_seq += 1),
            ("max_bytes", |a| a.max_bytes += 1),
            ("a term's detail", |a| {
                a.terms[0].detail = Some("node-9".into())
            }),
            ("held_since", |a| {
                a.held_since = Some(Timestamp(a.at.0 - chrono::Duration::hours(1)))
            }),
            ("stream_error", |a| a.stream_error = Some("gone".into())),
            ("by", |a| a.by.push('x')),
            ("session", |a| a.session.push('x')),
            ("config", |a| {
                std::sync::Arc::make_mut(&mut a.config).insert("tick".into(), Some("11s".into()));
            }),
            ("would_purge", |a| {
                a.would_purge = Some(WouldPurge {
                    records: 1,
                    first_seq: 1,
                    last_seq: 1,
                })
            }),
            ("not_ready", |a| a.not_ready = Some(NotReady::AheadOfLog)),
            ("gate_view", |a| {
                let mut g = a.gate_view.clone().unwrap_or_else(|| GateView {
                    absorbed_to: None,
                    skipped: Vec::new(),
                    error: None,
                    since: None,
                });
                g.absorbed_to = Some(g.absorbed_to.unwrap_or(0) + 1);
                a.gate_view = Some(g);
            }),
        ];
        for (what, change) in changes {
            let mut changed = a.clone();
            change(&mut changed);
            assert_ne!(d, FloorsRow::from(&changed).digest(), "{what}");
        }
    }

    /// A row many chunks long (the digest is fed 8 KiB at a time) digests
    /// alike a tick later, and a change anywhere in it, the last byte's
    /// chunk included, changes the digest.
    #[test]
    fn a_row_longer_than_a_chunk_digests_every_byte() {
        let w = crate::floor::tests::World::new();
        let mut a = w.answer();
        for i in 0..600 {
            std::sync::Arc::make_mut(&mut a.config).insert(
                format!("hold-{i:04}"),
                Some(
                    "a value long enough to fill a chunk of the digest's buffer, eight KiB".into(),
                ),
            );
        }
        let len = FloorsRow::from(&a).to_bytes().map(|b| b.len()).unwrap_or(0);
        assert!(len > 4 * Digesting::CHUNK, "{len} bytes");
        let d = FloorsRow::from(&a).digest();
        let mut later = a.clone();
        later.at = Timestamp(a.at.0 + chrono::Duration::seconds(10));
        assert_eq!(d, FloorsRow::from(&later).digest());
        for (i, hold) in [(0, "hold-0000"), (1, "hold-0300"), (2, "hold-0599")] {
            let mut moved = a.clone();
            if let Some(h) = std::sync::Arc::make_mut(&mut moved.config).get_mut(hold) {
                *h = Some("another value".into());
            }
            assert_ne!(d, FloorsRow::from(&moved).digest(), "change {i}: {hold}");
        }
    }

    /// A row stands as written while its answer is unchanged and licenses
    /// nothing, however old: its currency is `_tick`'s to say.
    #[test]
    fn a_row_stands_only_as_written_unchanged_and_licensing_nothing() {
        let at = Timestamp::parse("2026-12-04T12:00:00Z").expect("instant");
        let w = crate::floor::tests::World::new();
        let digest = FloorsRow::from(&w.answer()).digest();
        let written = WrittenRow {
            revision: 7,
            at,
            digest: digest.expect("digest"),
        };
        let secs = |s: i64| Timestamp(at.0 + chrono::Duration::seconds(s));
        assert!(row_stands(Some(&written), Some((at, 7)), digest, false));
        assert!(
            !row_stands(None, Some((at, 7)), digest, false),
            "not written by this process (a new holder first answers the log)"
        );
        assert!(
            !row_stands(Some(&written), Some((at, 8)), digest, false),
            "another writer"
        );
        assert!(
            !row_stands(Some(&written), Some((secs(1), 7)), digest, false),
            "a recreated bucket"
        );
        assert!(
            !row_stands(Some(&written), None, digest, false),
            "the row is gone"
        );
        assert!(
            !row_stands(Some(&written), Some((at, 7)), None, false),
            "no digest"
        );
        assert!(
            !row_stands(Some(&written), Some((at, 7)), digest, true),
            "a purge"
        );
        let mut other = w.answer();
        other.floor = Some(other.floor.unwrap_or(0) + 1);
        assert!(
            !row_stands(
                Some(&written),
                Some((at, 7)),
                FloorsRow::from(&other).digest(),
                false
            ),
            "a changed answer"
        );
    }

    /// The contract: these fields, no others. Adding one here is a
    /// deliberate change to what other programs read (docs/status-json.md).
    #[test]
    fn the_row_has_exactly_the_contract_fields() {
        let a = crate::floor::tests::World::new().answer();
        let v = serde_json::to_value(FloorsRow::from(&a)).expect("json");
        let mut keys: Vec<&str> = v
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "archive",
                "at",
                "backup_age_secs",
                "backup_stale",
                "blocked_by",
                "broker_retention_bypass",
                "by",
                "bytes",
                "config",
                "config_digest",
                "domain",
                "dry_run",
                "evictions_unreadable",
                "first_seq",
                "floor",
                "format",
                "gate_view",
                "generation",
                "generation_opened_at",
                "headroom_fraction",
                "held_since",
                "last_seq",
                "live_stream_created",
                "max_bytes",
                "memory",
                "not_ready",
                "published_at",
                "purge_clamped_by",
                "requested",
                "reserve_bytes",
                "session",
                "soft_ceiling_bytes",
                "stream",
                "stream_created",
                "stream_error",
                "terms",
                "trim_floor_state",
                "trim_to",
                "would_purge",
            ]
        );
    }
}
