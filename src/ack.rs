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
    /// Below the acknowledgement in force, without `-lower` (exit 1, HTTP
    /// 409): an acknowledgement only goes back on purpose.
    #[error("would_lower: {stream} is acknowledged up to {current} by {by} at {at}; {position} would lower it, letting the trim believe less is safe; pass -lower (body \"lower\": true) if the copy up to {current} is not safe after all; nothing written")]
    WouldLower {
        stream: String,
        position: u64,
        current: u64,
        by: String,
        at: Instant,
    },
    /// The broker did not answer (exit 3, HTTP 503); nothing written.
    #[error("{0}; nothing written")]
    Unreachable(crate::broker::Fault),
}

impl AckError {
    /// The refusal's code (`--json`'s `error`, the HTTP answer's).
    pub fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            AckError::PolicyEngine { .. } | AckError::WouldLower { .. } => Class::Refused,
            AckError::PastTail { .. } => Class::BadInput,
            AckError::Unreachable(_) => Class::Unreachable,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AckError::PolicyEngine { .. } => "policy_engine",
            AckError::PastTail { .. } => "past_tail",
            AckError::WouldLower { .. } => "would_lower",
            AckError::Unreachable(_) => "unreachable",
        }
    }
}

/// An acknowledgement written, and the one it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub row: AckRow,
    /// The position acknowledged before (none the first time).
    pub previous: Option<u64>,
}

/// Records that a copy of `domain`'s log up to `position` is safe.
pub async fn acknowledge(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    position: u64,
    by: &str,
    lower: bool,
) -> Result<Acknowledged, AckError> {
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
    // The acknowledgement in force: a lower one only on purpose.
    let key = AckRow::key(&domain.stream);
    let previous = broker
        .kv_entry(&config.buckets.backups, &key)
        .await
        .map_err(AckError::Unreachable)?
        .and_then(|e| AckRow::parse(&key, &e.value).ok());
    if let Some(p) = previous
        .as_ref()
        .filter(|p| position < p.position && !lower)
    {
        return Err(AckError::WouldLower {
            stream: domain.stream.clone(),
            position,
            current: p.position,
            by: p.by.clone(),
            at: p.at,
        });
    }
    let row = AckRow {
        stream: domain.stream.clone(),
        position,
        by: by.to_string(),
        // On the broker's clock: it is compared with the stream's created.
        at: Instant(clock.broker),
    };
    let body = serde_json::to_vec(&row)
        .map_err(|e| AckError::Unreachable(crate::broker::Fault::failed(e.to_string())))?;
    broker
        .kv_put(&config.buckets.backups, &key, body)
        .await
        .map_err(AckError::Unreachable)?;
    Ok(Acknowledged {
        row,
        previous: previous.map(|p| p.position),
    })
}
