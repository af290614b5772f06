//! An operator's acknowledgement that a copy of a log up to a position is
//! safe (`backup_floor: operator`): `crewlet retention ack` and `POST
//! /v1/streams/{s}/ack` both come here. Judged before anything is written.

use crate::broker::Broker;
use crate::config::{BackupPolicy, Config, Domain};
use crate::rows::{AckRow, Instant};

/// Why an acknowledgement was not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Under `backup_floor: engine` the trim never reads one (exit 1, HTTP 409).
    #[error("policy_engine: retention.backup_floor is engine, so the trim counts verified backup manifests and never reads an acknowledgement; announce the backup ({announce}) or set backup_floor: operator; nothing written")]
    PolicyEngine { announce: String },
    /// Past what the log holds (exit 2, HTTP 400).
    #[error("position {position} is past the log's last sequence {last_seq} on {stream}; acknowledge only what a copy holds")]
    PastTail {
        position: u64,
        last_seq: u64,
        stream: String,
    },
    /// The broker did not answer (exit 3, HTTP 503); nothing written.
    #[error("{0}; nothing written")]
    Unreachable(String),
}

/// Records that a copy of `domain`'s log up to `position` is safe.
pub async fn acknowledge(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    position: u64,
    by: &str,
) -> Result<AckRow, AckError> {
    // Under engine the trim never reads an acknowledgement: saying
    // "acknowledged" would be a lie.
    if config.retention.backup_floor == BackupPolicy::Engine {
        return Err(AckError::PolicyEngine {
            announce: crate::alarms::announce_command(&domain.stream),
        });
    }
    let (state, clock) = broker
        .stream_state_at(&domain.stream)
        .await
        .map_err(AckError::Unreachable)?;
    if position > state.last_seq {
        return Err(AckError::PastTail {
            position,
            last_seq: state.last_seq,
            stream: domain.stream.clone(),
        });
    }
    let row = AckRow {
        stream: domain.stream.clone(),
        position,
        by: by.to_string(),
        // On the broker's clock: it is compared with the stream's created.
        at: Instant(clock.broker),
    };
    let body = serde_json::to_vec(&row).map_err(|e| AckError::Unreachable(e.to_string()))?;
    broker
        .kv_put(&config.buckets.backups, &AckRow::key(&domain.stream), body)
        .await
        .map_err(AckError::Unreachable)?;
    Ok(row)
}
