//! The fold before the trim, on archived domains (docs/archive-format.md):
//! each domain's records folded into segments, the frontier recorded in
//! its read, before anything is computed.

use chrono::{DateTime, Utc};

use crate::failpoint::failpoint;
use crate::floor::{self, DomainRead, ParsedRows, Policy};

use super::{archive_target, Sidecar};

impl Sidecar {
    /// Folds each archived domain whose answer concluded: the slice
    /// `(frontier, T]`, `T` the minimum of the other six terms, then
    /// computes its answer again with the new frontier (docs/archive-format.md, The
    /// fold). A fold error leaves the frontier at the last durable segment.
    pub(super) async fn fold_all(
        &self,
        policy: &Policy,
        parsed: &crate::proven::Proven<ParsedRows>,
        reads: &mut [DomainRead],
        answers: &mut [floor::Licensed],
        now: DateTime<Utc>,
    ) {
        let mut folded = false;
        for (i, d) in self.config.domains.iter().enumerate() {
            let (Some(archive), Some(answer), Some(read)) =
                (&d.archive, answers.get(i), reads.get_mut(i))
            else {
                continue;
            };
            // A listing kept from an earlier tick may not decide a purge of
            // records the archive holds (a segment removed since would go
            // unseen): where this answer would purge some, list again and
            // answer from that (docs/decisions.md, Cloud archives through
            // object_store).
            let first_seq = read.stream.as_ref().ok().map(|s| s.first_seq);
            let kept = read.archive.as_ref().is_some_and(|a| a.reused);
            if kept && first_seq.is_some_and(|f| answer.trim_to >= f) {
                if let Some(target) = archive_target(parsed.get(), d, read) {
                    let published = super::read::published_archive(parsed.get(), &d.stream);
                    let fresh = crate::archive::read(
                        &self.broker,
                        &archive.store(),
                        &target,
                        published.as_ref(),
                        None,
                        None,
                    )
                    .await;
                    read.archive = Some(fresh);
                    let at = read.clock.map_or(now, |c| c.broker);
                    if let Some(slot) = answers.get_mut(i) {
                        *slot = floor::Licensed::compute(d, policy, parsed, read, at);
                    }
                }
            }
            let Some(answer) = answers.get(i) else {
                continue;
            };
            let (Some(to), Some(from)) = (
                floor::fold_to(answer),
                answer.archive.as_ref().and_then(|a| a.frontier),
            ) else {
                continue;
            };
            // Nothing to fold (the other terms hold the trim at or below
            // the frontier): no fold runs, so none is reported, and the
            // answer stands as computed. A fold that failed earlier stays
            // failing (its finding is kept while the frontier has not
            // moved) instead of being cleared by a fold that never ran.
            if to <= from {
                continue;
            }
            let Some(target) = archive_target(parsed.get(), d, read) else {
                continue;
            };
            let Some(found) = read.archive.as_mut() else {
                continue;
            };
            // A fold may take at most a tick, so that the tick stays inside
            // its lease; what it did not reach waits for the next one.
            let deadline = tokio::time::Instant::now() + self.config.retention.tick.0;
            let store = archive.store();
            let result = crate::archive::fold::fold(
                &self.broker,
                &store,
                &target,
                (from, to),
                archive.limits(),
                deadline,
            )
            .await;
            let (written, error) = match result {
                Ok(f) => {
                    if !f.written.is_empty() {
                        tracing::info!(event = "archive_folded", domain = %d.name, segments = f.written.len(), already_there = f.already_there, frontier = f.frontier, "folded into the archive");
                    }
                    (f.written, None)
                }
                Err(e) => {
                    tracing::warn!(event = "archive_failing", domain = %d.name, segment = e.segment.as_deref().unwrap_or("-"), frontier = e.frontier, error = %e.reason, "the fold stopped; nothing past the frontier is purged");
                    (e.written, Some((e.segment, e.reason)))
                }
            };
            folded |= !written.is_empty();
            if let Ok(listing) = found.listing.as_mut() {
                for w in &written {
                    found.verified.push((w.name.clone(), Ok(())));
                    listing.retain(|l| l.name != w.name);
                    listing.push(w.clone());
                }
                listing.sort_by(|a, b| a.name.cmp(&b.name));
            }
            found.fold = Some(crate::archive::state::FoldOutcome {
                at: crate::rows::Timestamp(crate::clock::broker_now(self.offset, Utc::now())),
                segments: written.len(),
                error,
            });
            let at = read.clock.map_or(now, |c| c.broker);
            if let Some(slot) = answers.get_mut(i) {
                *slot = floor::Licensed::compute(d, policy, parsed, read, at);
            }
        }
        if folded {
            failpoint("after_fold").await;
        }
    }
}
