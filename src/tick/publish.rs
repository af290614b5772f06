//! Publish, then purge: the answer written by compare-and-set, then, behind
//! the fence, the purge of what it licenses, lowered by the age proof and
//! the pins re-read (docs/trim-floor.md, The tick, step by step).

use chrono::{DateTime, Utc};

use crate::failpoint::failpoint;
use crate::floor::{self, Answer, ParsedRows};

use super::{DomainTick, Sidecar, AGE_PROOF_MAX_RECORDS};

/// The parts of `_contract` the configuration fixes, written as the
/// configuration writes them (made once: a tick compares against them).
pub(super) struct ContractConsts {
    presence_ttl: String,
    snapshots: crate::rows::ContractSnapshots,
    backups: crate::rows::ContractBackups,
    min_age: String,
}

impl ContractConsts {
    pub(super) fn of(r: &crate::config::Retention) -> ContractConsts {
        ContractConsts {
            presence_ttl: r.presence_ttl.to_string(),
            snapshots: crate::rows::ContractSnapshots {
                interval: r.snapshot_interval.to_string(),
                quorum: r.snapshot_quorum,
            },
            backups: crate::rows::ContractBackups {
                policy: match r.backup_floor {
                    crate::config::BackupPolicy::Engine => "engine".into(),
                    crate::config::BackupPolicy::Operator => "operator".into(),
                },
                max_age: r.backup_max_age.to_string(),
            },
            min_age: r.min_age.to_string(),
        }
    }
}

impl Sidecar {
    /// Whether the answer is to be written, and on which revision: not
    /// when its row already says it ([`floor::row_stands`], the row left
    /// standing and confirmed here), nor when it may not be written.
    /// Decided without a request, so that a quiet fleet's thousand rows
    /// cost no task each.
    pub(super) fn row_due(&self, rows: &ParsedRows, d: &mut DomainTick) -> Option<Option<u64>> {
        let a = &d.answer;
        // The row read this tick: its time and revision, and whether this
        // duty session wrote it.
        let (published, same_session) = match rows.published(&a.stream) {
            Ok(p) => (
                p.map(|(p, rev)| (p.at, rev)),
                p.is_some_and(|(p, _)| p.session == self.duty.session()),
            ),
            // An unreadable floors row is never overwritten: the floor it
            // holds may be above anything this tick could conclude.
            Err(_) => return None,
        };
        if a.stream_error.is_some() {
            return None;
        }
        // A row of a newer release is never overwritten by this one
        // (version_skew says so).
        if a.published_format > Some(floor::members::FORMAT) {
            return None;
        }
        // A lost floors row is not replaced by a guess: there is no floor
        // this tick could stand behind until a confirmed reanchor.
        if matches!(
            a.not_ready,
            Some(floor::NotReady::GenerationUnknown { .. } | floor::NotReady::MemoryLost { .. })
        ) {
            return None;
        }
        let digest = d.digest;
        let written = self
            .written
            .lock()
            .ok()
            .and_then(|w| w.get(&a.stream).copied());
        // A row stands only in the duty session that wrote it: `_tick`
        // vouches for the rows of its own session, so a new session (the
        // duty lost and claimed again) writes each row once.
        if same_session
            && floor::row_stands(
                written.as_ref(),
                published,
                digest,
                floor::purge_target(a).is_some(),
            )
        {
            if let Some((at, revision)) = published {
                d.published = Some(Ok(revision));
                d.stood = Some(at);
                d.answer.set_published_at(at);
            }
            return None;
        }
        Some(published.map(|(_, rev)| rev))
    }

    /// Publishes the answer with compare-and-set on `revision`, the one
    /// read this tick ([`Sidecar::row_due`] said it is due).
    pub(super) async fn publish(&self, d: &mut DomainTick, revision: Option<u64>) {
        let a = &d.answer;
        let row = floor::FloorsRow::from(a);
        d.published = Some(self.put_row(a, &row, d.digest, revision).await);
        match &d.published {
            // The row now written is this answer: what it says of the last
            // publish (the kept answer, its alarms) is this one, as status
            // reading the row afresh says.
            Some(Ok(_)) => {
                let at = d.answer.at;
                d.answer.set_published_at(at);
            }
            Some(Err(e)) => {
                tracing::warn!(event = "publish_failed", domain = %d.answer.domain, error = %e, "the answer was not published; nothing is purged this tick");
            }
            None => {}
        }
    }

    /// The log's adoption mark, once its answer is published (the row it
    /// names exists): written at the first publish, and again where the
    /// memory is intact but the mark is gone (docs/trim-floor.md, The log
    /// remembers that it was adopted). Until it is in place nothing is
    /// purged: a floors bucket lost after a purge the mark did not cover
    /// would read as a log never trimmed.
    pub(super) async fn mark(&self, rows: &ParsedRows, d: &mut DomainTick) {
        let Some(due) = d.answer.mark_due else {
            return;
        };
        if !matches!(d.published, Some(Ok(_))) {
            return;
        }
        let a = &d.answer;
        let Some(floors_created) = rows.created.floors else {
            d.mark = Some(Err(
                "the floors bucket's created instant was not read".into()
            ));
            return;
        };
        let (adopted_at, event) = match due {
            floor::memory::MarkDue::First => (a.at, "log_adopted"),
            floor::memory::MarkDue::Restore { adopted_at } => {
                (adopted_at.unwrap_or(a.at), "marker_restored")
            }
        };
        match self
            .broker
            .write_mark(&a.stream, adopted_at, floors_created)
            .await
        {
            Ok(()) => {
                tracing::info!(event, domain = %a.domain, stream = %a.stream, adopted_at = %adopted_at, floors_created = %floors_created, "the log's configuration carries the sidecar's adoption mark");
                d.mark = Some(Ok(()));
            }
            Err(e) => {
                tracing::warn!(event = "mark_failed", domain = %a.domain, error = %e, "the log's adoption mark could not be written; nothing is purged until it is");
                d.mark = Some(Err(e.to_string()));
            }
        }
    }

    /// Notes since when each log has lost the sidecar's memory (the gates
    /// bucket's `_lost.<stream>`, by create: the first tick's instant
    /// stays), and drops the note of a log whose memory is intact again, so
    /// that a later loss is dated afresh.
    pub(super) async fn note_memory(&self, rows: &ParsedRows, domains: &[DomainTick]) {
        let Ok(gates) = &rows.gates else {
            return;
        };
        let bucket = &self.config.buckets.gates;
        for d in domains {
            let a = &d.answer;
            let key = crate::gate::LostNote::key(&a.stream);
            match &a.not_ready {
                Some(floor::NotReady::MemoryLost {
                    lost,
                    since,
                    noted: false,
                }) => {
                    let note = crate::gate::LostNote {
                        stream: a.stream.clone(),
                        since: *since,
                        lost: lost.to_string(),
                        format: crate::rows::FORMAT,
                    };
                    let body = serde_json::to_vec(&note).unwrap_or_default();
                    match self.broker.kv_create(bucket, &key, body).await {
                        Ok(_) => {
                            tracing::warn!(event = "memory_lost", domain = %a.domain, stream = %a.stream, since = %since, lost = %lost, "the log lost the sidecar's memory; nothing is published or purged until adopt")
                        }
                        Err(e) => {
                            tracing::debug!(event = "memory_lost_note_kept", key = %key, error = %e, "the note of a lost memory was not written (another tick's may be there)")
                        }
                    }
                }
                Some(floor::NotReady::MemoryLost { .. }) => {}
                _ if gates.lost.contains_key(&a.stream) && a.not_ready.is_none() => {
                    if let Err(e) = self.broker.kv_delete(bucket, &key).await {
                        tracing::debug!(event = "memory_lost_note_kept", key = %key, error = %e, "the note of a memory lost earlier was not deleted; the next tick tries again");
                    }
                }
                _ => {}
            }
        }
    }

    /// The tick's last write: `_tick`, which keeps every row it does not
    /// name current (docs/contract.md, `crewlet_floors` — the published answer). The logs whose
    /// answer this tick did not publish are named (a row not written, held
    /// back, or not READY to be written), so their rows go stale.
    pub(super) async fn write_tick(&self, domains: &[DomainTick], revision: Option<u64>) {
        let row = crate::rows::TickRow {
            at: crate::rows::Timestamp(crate::clock::broker_now(self.offset, Utc::now())),
            by: self.config.node.id.clone(),
            session: self.duty.session().to_string(),
            format: crate::rows::FORMAT,
            unpublished: domains
                .iter()
                .filter(|d| !matches!(d.published, Some(Ok(_))))
                .map(|d| d.answer.stream.clone())
                .collect(),
        };
        let body = serde_json::to_vec(&row).unwrap_or_default();
        // On the revision this tick read: a holder that lost the duty
        // mid-tick never overwrites its successor's `_tick`.
        if let Err(e) = self
            .broker
            .put_if(
                &self.config.buckets.floors,
                crate::rows::TICK_KEY,
                body,
                revision,
            )
            .await
        {
            tracing::warn!(event = "tick_row_failed", error = %e, "the tick's row was not written; the floors rows go stale unless the next tick writes it");
        }
    }

    /// `_contract`: what nodes need to know of this configuration
    /// (docs/contract.md), written when it differs from what the floors bucket
    /// holds, on the revision this tick read. One written by a newer
    /// release is left as it is.
    pub(super) async fn write_contract(&self, parsed: &ParsedRows, domains: &[DomainTick]) {
        let Ok(floors) = parsed.floors.as_ref() else {
            return;
        };
        let k = &self.contract;
        // Compared in place, every tick, without building the row: at a
        // thousand logs the row's strings cost more than the rest of a
        // quiet tick's work on it.
        let stands = |c: &crate::rows::ContractRow| {
            c.presence_ttl == k.presence_ttl
                && c.domains.len() == domains.len()
                && c.domains
                    .iter()
                    .zip(self.config.domains.iter().zip(domains))
                    .all(|(cd, (d, t))| {
                        cd.stream == d.stream
                            && cd.gate_subject == d.gate_subject
                            && cd.generation == t.answer.generation
                            && cd.snapshots.as_ref() == Some(&k.snapshots)
                            && cd.backups.as_ref() == Some(&k.backups)
                            && cd.min_age == k.min_age
                    })
        };
        let revision = match &floors.contract {
            Some(c) if c.newer || c.row.as_ref().is_ok_and(stands) => return,
            Some(c) => Some(c.revision),
            None => None,
        };
        let row = crate::rows::ContractRow {
            format: crate::rows::FORMAT,
            presence_ttl: k.presence_ttl.clone(),
            domains: self
                .config
                .domains
                .iter()
                .zip(domains)
                .map(|(d, t)| crate::rows::ContractDomain {
                    stream: d.stream.clone(),
                    gate_subject: d.gate_subject.clone(),
                    generation: t.answer.generation,
                    snapshots: Some(k.snapshots.clone()),
                    backups: Some(k.backups.clone()),
                    min_age: k.min_age.clone(),
                })
                .collect(),
            at: crate::rows::Timestamp(crate::clock::broker_now(self.offset, Utc::now())),
            by: self.config.node.id.clone(),
        };
        let body = serde_json::to_vec(&row).unwrap_or_default();
        match self
            .broker
            .put_if(
                &self.config.buckets.floors,
                crate::rows::CONTRACT_KEY,
                body,
                revision,
            )
            .await
        {
            Ok(_) => tracing::info!(
                event = "contract_written",
                "wrote _contract: what nodes are told of this configuration changed"
            ),
            Err(e) => {
                tracing::warn!(event = "contract_failed", error = %e, "_contract was not written; the next tick tries again")
            }
        }
    }

    /// Writes the answer's row on `revision`, and remembers what it wrote.
    pub(super) async fn write_row(&self, a: &Answer, revision: Option<u64>) -> Result<u64, String> {
        let row = floor::FloorsRow::from(a);
        let digest = row.digest();
        self.put_row(a, &row, digest, revision).await
    }

    /// Writes `row`, the answer's, whose digest is `digest` (computed once:
    /// at ten thousand nodes it is a pass over a megabyte of JSON).
    async fn put_row(
        &self,
        a: &Answer,
        row: &floor::FloorsRow<'_>,
        digest: Option<floor::RowDigest>,
        revision: Option<u64>,
    ) -> Result<u64, String> {
        let body = row.to_bytes()?;
        // The membership first, when it changed: the row that names it is
        // written only once every key it names is there (docs/trim-floor.md,
        // The sidecar's memory). A row that fails after them leaves keys the
        // last row does not name: its digest tells them apart, and the
        // next tick writes them again.
        if let Some(w) = &a.members_write {
            write_members(&self.broker, &self.config.buckets.floors, &a.stream, w).await?;
        }
        let written = self
            .broker
            .put_if(&self.config.buckets.floors, &a.stream, body, revision)
            .await
            .map_err(|e| e.to_string());
        // The last membership's keys past the new one, once the row no
        // longer names them; one left behind is harmless (no row names it).
        if let (Ok(_), Some(w)) = (&written, &a.members_write) {
            for n in w.stale.clone() {
                let key = floor::members::members_key(&a.stream, n);
                if let Err(e) = self
                    .broker
                    .kv_delete(&self.config.buckets.floors, &key)
                    .await
                {
                    tracing::debug!(event = "members_key_kept", key = %key, error = %e, "an unused memory key was not deleted");
                }
            }
        }
        if let Ok(mut w) = self.written.lock() {
            match (&written, digest) {
                (Ok(revision), Some(digest)) => {
                    w.insert(
                        a.stream.clone(),
                        floor::WrittenRow {
                            revision: *revision,
                            at: a.at,
                            digest,
                        },
                    );
                }
                _ => {
                    w.remove(&a.stream);
                }
            }
        }
        written
    }

    /// The purges the published answers license, each lowered by the pins
    /// re-read just before it and fenced by a compare-and-set on the duty
    /// lease.
    pub(super) async fn purge_all(&mut self, parsed: &ParsedRows, domains: &mut [DomainTick]) {
        let licensed = |d: &DomainTick| {
            matches!(d.published, Some(Ok(_)))
                && !matches!(d.mark, Some(Err(_)))
                && floor::purge_target(&d.answer).is_some()
        };
        for d in domains.iter_mut() {
            if let (Some(Err(e)), Some(_)) = (&d.mark, floor::purge_target(&d.answer)) {
                d.purged = Some(Err(format!(
                    "the log's adoption mark could not be written ({e}); nothing purged"
                )));
            }
        }
        if !domains.iter().any(licensed) {
            return;
        }
        failpoint("after_publish").await;
        // The age proof first (it may scan many headers), so that the pins
        // re-read stays the last read before each purge.
        let mut targets: Vec<(usize, Option<u64>, Option<floor::PurgeClamp>)> = Vec::new();
        for (i, d) in domains.iter().enumerate().filter(|(_, d)| licensed(d)) {
            let Some(target) = floor::purge_target(&d.answer) else {
                continue;
            };
            let (target, by) = self.prove_old(&d.answer, target).await;
            targets.push((i, target, by));
        }
        // Right after publishing and right before each purge: a hold or a
        // live data node that landed after this tick's read still bounds
        // it. Read again for each log, immediately before its fence: a pin
        // placed while an earlier log was fenced and purged (a
        // readmission's join hold on the next log) is seen.
        for (i, target, by) in targets {
            let pins = self.broker.read_pins_viewed(&self.config.buckets).await;
            let now = crate::clock::broker_now(self.offset, Utc::now());
            if let Some(d) = domains.get_mut(i) {
                self.purge_one(d, target, by, &pins, &parsed.presence, now)
                    .await;
            }
        }
    }

    /// The age proof (docs/decisions.md, "Pins, clocks, fences, reads"): the slice about to be purged holds
    /// no record younger than `now - min_age`, whatever order the log's
    /// timestamps are in. A bounded, headers-only scan from the log's first
    /// sequence; a slice it cannot prove is clamped below the first young
    /// (or unscanned) record, or not purged.
    pub(super) async fn prove_old(
        &self,
        a: &Answer,
        target: u64,
    ) -> (Option<u64>, Option<floor::PurgeClamp>) {
        let min_age = self.config.retention.min_age.0;
        if min_age.is_zero() {
            return (Some(target), None);
        }
        let now = crate::clock::broker_now(self.offset, Utc::now());
        let cutoff = now - chrono::Duration::from_std(min_age).unwrap_or(chrono::Duration::MAX);
        // Records below an explicit trim's watermark may be young: the
        // operator asked for them to go (docs/http.md); the proof covers the
        // rest of the slice.
        let from = match a.requested.as_ref().filter(|r| r.error.is_none()) {
            Some(r) => a.first_seq.max(r.seq),
            None => a.first_seq,
        };
        if from > target - 1 {
            return (Some(target), None);
        }
        match self
            .broker
            .first_unproven(&a.stream, from, target - 1, cutoff, AGE_PROOF_MAX_RECORDS)
            .await
        {
            Ok(None) => (Some(target), None),
            Ok(Some(keep)) if keep >= target => (Some(target), None),
            Ok(Some(keep)) => {
                tracing::info!(event = "purge_clamped", domain = %a.domain, by = "age", keep_from = keep, "the age proof keeps a record the age lookup did not");
                (
                    (keep > a.first_seq).then_some(keep),
                    Some(floor::PurgeClamp::Age),
                )
            }
            Err(e) => {
                tracing::warn!(event = "age_proof_failed", domain = %a.domain, error = %e, "the slice could not be proved old; nothing purged");
                (None, Some(floor::PurgeClamp::Age))
            }
        }
    }

    pub(super) async fn purge_one(
        &mut self,
        d: &mut DomainTick,
        target: Option<u64>,
        proof_by: Option<floor::PurgeClamp>,
        pins: &crate::proven::Proven<floor::Pins>,
        before: &floor::ReadPresence,
        now: DateTime<Utc>,
    ) {
        let (Some(created), Some(Ok(revision))) = (d.answer.stream_created, d.published.clone())
        else {
            return;
        };
        let (target, pinned_by) = match target {
            Some(t) => floor::clamp_to_pins(&d.answer, t, pins, before, now),
            None => (None, None),
        };
        if let Some(by) = pinned_by.or(proof_by) {
            // The row says what bounded the purge; the answer and its `at`
            // are the same, so a hold waiting for a later tick is not
            // misled by this write.
            d.answer.set_purge_clamped_by(by);
            match self.write_row(&d.answer, Some(revision)).await {
                Ok(rev) => d.published = Some(Ok(rev)),
                Err(e) => {
                    tracing::warn!(event = "publish_failed", domain = %d.answer.domain, error = %e, "the clamped answer was not published; nothing purged");
                    d.purged = Some(Err(e));
                    return;
                }
            }
            tracing::info!(event = "purge_clamped", domain = %d.answer.domain, by = ?by, target = ?target, "the purge is bounded below trim_to");
        }
        let Some(target) = target else {
            return;
        };
        failpoint("after_pins").await;
        // Fencing: a compare-and-set renewal of the lease, immediately
        // before the purge; its permit bounds everything up to the purge.
        let Some(permit) = self.duty.fence(&self.broker, now).await else {
            d.purged = Some(Err(
                "the duty lease could not be renewed before the purge".into()
            ));
            return;
        };
        failpoint("after_fence").await;
        let a = &d.answer;
        // The purge takes the answer's own license, lowered to what the
        // age proof and the pins allowed: never a number above it.
        let Some(licensed) = floor::licensed_target(a).and_then(|l| l.lowered_to(target)) else {
            d.purged = Some(Err(format!(
                "the purge target {target} is not within what the answer licenses; nothing purged"
            )));
            return;
        };
        match self
            .broker
            .purge_to(&a.stream, licensed, created, permit)
            .await
        {
            Ok(n) => d.purged = Some(Ok(n)),
            Err(e @ crate::broker::write::PurgeError::FenceExpired { .. }) => {
                tracing::warn!(event = "fence_expired", domain = %a.domain, error = %e, "the fence's deadline passed before the purge could be sent; nothing purged, the next tick starts over");
                d.purged = Some(Err(e.to_string()));
            }
            Err(e) => {
                // The floor is now ahead of the log: the safe direction.
                tracing::warn!(event = "purge_failed", domain = %a.domain, error = %e, "the floor is ahead of the log until a later tick purges");
                d.purged = Some(Err(e.to_string()));
            }
        }
    }
}

/// Writes the `_members` values of `stream`'s membership `w` into the
/// floors bucket, in order; the first that fails ends it (the row that
/// would name them is then not written).
pub async fn write_members(
    broker: &crate::broker::Broker,
    bucket: &str,
    stream: &str,
    w: &floor::remember::MembersWrite,
) -> Result<(), String> {
    for (n, chunk) in w.chunks.iter().enumerate() {
        let key = floor::members::members_key(stream, u32::try_from(n).unwrap_or(u32::MAX));
        broker
            .kv_put(bucket, &key, chunk.clone())
            .await
            .map_err(|e| format!("the memory's key {key}: {e}"))?;
    }
    Ok(())
}
