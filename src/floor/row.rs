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
    pub pins: &'a super::carried::PinsRecord,
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
            pins: &a.pins,
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
                "gate_view",
                "generation",
                "generation_opened_at",
                "headroom_fraction",
                "held_since",
                "last_seq",
                "live_stream_created",
                "max_bytes",
                "not_ready",
                "pins",
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
