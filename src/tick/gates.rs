//! The tick's second step: the gates view brought up to date with every
//! log that takes gate records (docs/trim-floor.md, The tick, step by step).

use crate::rows::Stamped;

use crate::broker::gates::GatedLog;
use crate::broker::read::Raw;
use crate::floor::{self, DomainRead, ParsedRows};

use super::Sidecar;

impl Sidecar {
    /// Brings the gates view up to date with every log that takes gate
    /// records (the purge is clamped to what it has absorbed), working on
    /// the gates bucket as this tick read it, and records in each domain's
    /// read whether that worked. Returns whether the gates bucket may have
    /// changed.
    pub(super) async fn absorb_gates(
        &self,
        raw: &mut Raw,
        parsed: &ParsedRows,
        reads: &mut [DomainRead],
    ) -> bool {
        let mut touched = false;
        for (d, read) in self.config.domains.iter().zip(reads.iter_mut()) {
            let Some(subject) = &d.gate_subject else {
                continue;
            };
            if let Err(e) = raw.gates() {
                read.absorbed = Some(Err(crate::rows::Unreadable(e.to_string())));
                continue;
            }
            let Some(incarnation) = floor::incarnation(parsed, &d.stream, read) else {
                // Stream info or the floors row is unreadable: the answer
                // says so, and nothing is purged on this log.
                continue;
            };
            let log = GatedLog {
                stream: &d.stream,
                subject,
                incarnation,
                // The answer compares the cursor with this tick's last_seq.
                upto: read.stream.as_ref().ok().map(|s| s.last_seq),
            };
            touched = true;
            match self
                .broker
                .absorb_raw(&self.config.buckets.gates, &log, raw)
                .await
            {
                Ok(r) => {
                    if r.absorbed > 0 {
                        tracing::info!(event = "gates_absorbed", domain = %d.name, records = r.absorbed, cursor = r.cursor, "absorbed gate records into the gates view");
                    }
                    read.absorbed = Some(Ok(()));
                }
                Err(e) => {
                    // Where absorbing stopped: the first sequence past the
                    // cursor this incarnation proved (the log's first without
                    // one); the purge goes no further.
                    let first_unabsorbed = parsed
                        .gates
                        .as_ref()
                        .ok()
                        .and_then(|g| g.cursors.get(&d.stream))
                        .and_then(|c| c.as_ref().ok())
                        .filter(|c| c.belongs_to(&incarnation))
                        .map_or_else(
                            || read.stream.as_ref().map_or(1, |s| s.first_seq.max(1)),
                            |c| c.seq + 1,
                        );
                    tracing::warn!(event = "gates_unabsorbed", domain = %d.name, first_unabsorbed, error = %e, "the gates view could not be brought up to date; the purge stops at what it has absorbed");
                    read.absorbed = Some(Err(crate::rows::Unreadable(e.to_string())));
                }
            }
        }
        touched
    }
}
