//! A readmission's join holds, as the duty holder keeps them: lifted once
//! a published answer counts the node again, extended while its record is
//! not absorbed (docs/trim-floor.md, Evictions and readmissions).

use chrono::Utc;

use crate::floor::{self, ParsedRows};

use super::{DomainTick, Sidecar};

impl Sidecar {
    /// Lifts the join holds of readmissions a published answer now counts
    /// (docs/decisions.md, "Pins, clocks, fences, reads").
    pub(super) async fn retire_join_holds(&self, rows: &ParsedRows, domains: &[DomainTick]) {
        let bucket = &self.config.buckets.holds;
        for d in domains
            .iter()
            .filter(|d| matches!(d.published, Some(Ok(_))))
        {
            for id in floor::retired_join_holds(&d.answer, rows) {
                let key = format!("{}.{id}", d.answer.stream);
                if let Ok(Some(e)) = self.broker.kv_entry(bucket, &key).await {
                    match self.broker.kv_delete_at(bucket, &key, e.revision).await {
                        Ok(()) => {
                            tracing::info!(event = "join_hold_lifted", domain = %d.answer.domain, hold = %id, "a readmitted node is counted again; its join hold is lifted")
                        }
                        Err(e) => {
                            tracing::warn!(event = "join_hold_kept", domain = %d.answer.domain, hold = %id, error = %e, "could not lift a join hold; it expires by itself")
                        }
                    }
                }
            }
        }
    }

    /// Extends (by another ten ticks from now, on the broker's clock, with
    /// compare-and-set) every join hold whose readmission record is not
    /// absorbed yet, so that the trim cannot pass the readmitted node
    /// however long absorbing fails (docs/trim-floor.md, Pins that arrive during a
    /// tick).
    pub(super) async fn extend_join_holds(&self, rows: &ParsedRows, domains: &[DomainTick]) {
        let bucket = &self.config.buckets.holds;
        let ttl = chrono::Duration::from_std(self.config.retention.tick.0 * 10)
            .unwrap_or(chrono::Duration::zero());
        let until = crate::rows::Timestamp(crate::clock::broker_now(self.offset, Utc::now()) + ttl);
        for d in domains {
            for id in floor::unabsorbed_join_holds(&d.answer, rows) {
                let key = format!("{}.{id}", d.answer.stream);
                let Ok(Some(e)) = self.broker.kv_entry(bucket, &key).await else {
                    continue;
                };
                let Ok((_, mut hold)) = crate::rows::HoldRow::parse(&key, &e.value) else {
                    continue;
                };
                if hold.expires_at >= until {
                    continue;
                }
                hold.expires_at = until;
                let Ok(body) = serde_json::to_vec(&hold) else {
                    continue;
                };
                match self.broker.kv_update(bucket, &key, body, e.revision).await {
                    Ok(_) => {
                        tracing::info!(event = "join_hold_extended", domain = %d.answer.domain, hold = %id, until = %until, "the readmission is not absorbed yet; its join hold is extended")
                    }
                    Err(e) => {
                        tracing::warn!(event = "join_hold_not_extended", domain = %d.answer.domain, hold = %id, error = %e, "could not extend a join hold; the next tick tries again")
                    }
                }
            }
        }
    }
}
