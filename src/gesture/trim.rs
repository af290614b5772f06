//! Raising a domain's requested watermark (docs/http.md, Explicit trim):
//! `crewlet retention trim` and `POST /v1/streams/{s}/trim` both come here.
//! The watermark lives in the floors bucket under `_requested.<stream>`,
//! only moves forward (compare-and-set on the revision read), and is
//! clamped when made to `last_seq + 1`, so it never reaches records
//! appended later. The next tick applies `max(trim_to, min(R - 1, safety,
//! last_seq))`: never past a node, a hold, a backup, a snapshot, the feed
//! or the archive. The watermark belongs to the incarnation it was made in
//! (the stream's `created` and the domain's generation, stored with it): a
//! recreated or re-anchored log ignores it, and a new request replaces it.

use crate::rows::Stamped;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::broker::kv::CasError;
use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::rows::{Instant, Requested};

/// What is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Keep `N` and later: `R = N`.
    Entry(u64),
    /// Trim everything stamped before this instant: `R` is the first
    /// record stamped at or after it.
    At(DateTime<Utc>),
}

/// What a request did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Raised {
    /// The watermark now in force.
    pub requested: u64,
    /// This request was at or below it: nothing was written.
    pub unchanged: bool,
    /// What `--entry` asked for when it was past the log's tail (and was
    /// clamped to `last_seq + 1`); null otherwise.
    pub clamped_from: Option<u64>,
    /// `trim_to` as the next tick would compute it now (the last sequence
    /// that may go).
    pub applied_at_next_tick: u64,
    /// What bounds it: a term, `requested` or `last_seq`; null when the
    /// domain concludes nothing (a term unreadable, NOT READY).
    pub bounded_by: Option<String>,
}

/// Why a request was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// Bad input (exit 2; HTTP 400): nothing written.
    #[error("{0}")]
    Input(String),
    /// The stream does not exist (HTTP 404).
    #[error("{0}")]
    NoStream(String),
    /// The broker did not answer (exit 3; HTTP 503).
    #[error("{0}")]
    Unreachable(crate::broker::Fault),
    /// The watermark kept changing under this request, or the floors row
    /// it belongs to cannot be read: nothing was written (exit 1; HTTP 409).
    #[error("{0}")]
    NotTaken(String),
    /// `--at` could not be resolved conservatively (the scan of the
    /// records' stamps could not finish): nothing written (exit 1; HTTP 409
    /// `unresolved`).
    #[error("{0}")]
    Unresolved(String),
}

impl AskError {
    pub fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            AskError::Input(_) => Class::BadInput,
            AskError::NoStream(_) => Class::Missing,
            AskError::Unreachable(_) => Class::Unreachable,
            AskError::NotTaken(_) | AskError::Unresolved(_) => Class::Refused,
        }
    }

    /// The code of the error answer.
    pub fn code(&self) -> &'static str {
        match self {
            AskError::Input(_) => "bad_request",
            AskError::NoStream(_) => "unknown_stream",
            AskError::Unreachable(_) => "unreachable",
            AskError::NotTaken(_) => "not_taken",
            AskError::Unresolved(_) => "unresolved",
        }
    }
}

/// The incarnation a new watermark belongs to: the live stream's `created`
/// and the generation of the domain's floors row (0 before the first one).
fn incarnation_of(
    floors_row: Option<&[u8]>,
    stream: &str,
    created: Instant,
) -> Result<crate::rows::Incarnation, AskError> {
    let generation = match floors_row {
        None => 0,
        Some(body) => crate::floor::PublishedFloor::parse(stream, body)
            .map_err(|e| {
                AskError::NotTaken(format!(
                    "the floors row of {stream} cannot be read ({e}), so the generation the request belongs to is unknown; nothing written (crewlet retention status says how to mend it)"
                ))
            })?
            .generation,
    };
    Ok(crate::rows::Incarnation {
        stream_created: created,
        generation,
    })
}

/// The sequence `--at t` resolves to, conservatively (docs/http.md): the first
/// record stamped at or after `t` with none stamped at or after it before
/// it. The broker's own lookup by start time assumes stamps in order; the
/// records before its answer are scanned (headers only, the age proof's
/// bound), and the first young one among them wins. A range past the bound,
/// or a scan that fails, is `unresolved`: nothing is written.
async fn at_or_after(
    broker: &Broker,
    stream: &str,
    first_seq: u64,
    tail: u64,
    t: DateTime<Utc>,
) -> Result<u64, AskError> {
    let looked_up = broker
        .first_seq_at_or_after(stream, t)
        .await
        .map_err(AskError::Unreachable)?
        .unwrap_or(tail)
        .min(tail);
    let from = first_seq.max(1);
    if looked_up <= from {
        return Ok(looked_up);
    }
    let span = looked_up - from;
    if span > crate::trim::AGE_PROOF_MAX_RECORDS {
        return Err(AskError::Unresolved(format!(
            "unresolved: --at {} would trim {span} records of {stream} whose stamps the broker's lookup assumes in order; at most {} are scanned to prove it; nothing written (trim in steps, or use --entry)",
            Instant(t),
            crate::trim::AGE_PROOF_MAX_RECORDS
        )));
    }
    match broker
        .first_unproven(stream, from, looked_up - 1, t, span)
        .await
    {
        Ok(None) => Ok(looked_up),
        Ok(Some(young)) => Ok(young.min(looked_up)),
        Err(e) => Err(AskError::Unresolved(format!(
            "unresolved: the stamps of {stream} before {looked_up} could not be scanned ({e}); nothing written"
        ))),
    }
}

/// The row `CREWLET_FAILPOINT=requested_race` writes between a read and
/// its compare-and-set: another request's, lower than this one.
fn race_row(row: &Requested) -> Vec<u8> {
    let racer = Requested {
        seq: 1,
        by: "racer".into(),
        ..row.clone()
    };
    serde_json::to_vec(&racer).unwrap_or_default()
}

/// Raises `domain`'s requested watermark to what `ask` resolves to.
pub async fn raise(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    ask: Ask,
    by: &str,
    reason: &str,
) -> Result<Raised, AskError> {
    use crate::broker::Fault;
    let (state, clock) = broker
        .stream_state_at(&domain.stream)
        .await
        .map_err(|e| match e {
            Fault::Missing(_) => AskError::NoStream(e.to_string()),
            other => AskError::Unreachable(other),
        })?;
    let tail = state.last_seq.saturating_add(1);
    let r = match ask {
        Ask::Entry(0) => {
            return Err(AskError::Input(
                "--entry 0 is not a sequence: sequences start at 1 (--entry N keeps N and later)".into(),
            ))
        }
        // Past the tail: clamped now, so later records are never trimmed.
        Ask::Entry(n) => n.min(tail),
        Ask::At(t) if t > clock.broker => {
            return Err(AskError::Input(format!(
                "{} is in the future on the broker's clock ({}); a trim keeps what was stamped at or after the instant given",
                Instant(t),
                Instant(clock.broker)
            )))
        }
        Ask::At(t) => at_or_after(broker, &domain.stream, state.first_seq, tail, t).await?,
    };
    let bucket = &config.buckets.floors;
    let key = Requested::key(&domain.stream);
    // The floors bucket is the sidecar's own: a trim asked for before the
    // sidecar ever ran creates it, as every gesture that writes does.
    broker
        .ensure_sidecar_buckets(config)
        .await
        .map_err(|e| AskError::Unreachable(crate::broker::Fault::failed(e.to_string())))?;
    let floors_row = broker
        .kv_entry(bucket, &domain.stream)
        .await
        .map_err(AskError::Unreachable)?;
    let incarnation = incarnation_of(
        floors_row.as_ref().map(|e| e.value.as_slice()),
        &domain.stream,
        state.created,
    )?;
    let row = Requested {
        seq: r,
        by: by.to_string(),
        at: Instant(clock.broker),
        reason: reason.to_string(),
        stream_created: Some(incarnation.stream_created),
        generation: Some(incarnation.generation),
    };
    let body = serde_json::to_vec(&row).map_err(|e| AskError::Input(e.to_string()))?;
    // Compare-and-set on the revision read: a concurrent request that won
    // is re-read, and this one is a no-op if it is not higher. A watermark
    // of another incarnation is replaced, never compared with.
    let mut taken: Option<(u64, bool)> = None;
    for _ in 0..5 {
        let current = broker
            .kv_entry(bucket, &key)
            .await
            .map_err(AskError::Unreachable)?;
        // A concurrent writer between the read and the write, played by
        // the process itself for the test that shows the races counted.
        if crate::failpoint::is_set("requested_race") {
            let _ = broker.kv_put(bucket, &key, race_row(&row)).await;
        }
        let written = match &current {
            Some(e) => {
                if let Ok(cur) = Requested::parse(&key, &domain.stream, &e.value) {
                    if cur.belongs_to(&incarnation) && cur.seq >= r {
                        taken = Some((cur.seq, true));
                        break;
                    }
                }
                broker
                    .kv_update(bucket, &key, body.clone(), e.revision)
                    .await
            }
            None => broker.kv_create(bucket, &key, body.clone()).await,
        };
        match written {
            Ok(_) => {
                taken = Some((r, false));
                break;
            }
            Err(CasError::Exists { .. } | CasError::Conflict { .. }) => continue,
            Err(e) => {
                return Err(AskError::Unreachable(crate::broker::Fault::failed(
                    e.to_string(),
                )))
            }
        }
    }
    // Five races lost in a row: nothing is written, and saying otherwise
    // would tell the operator a trim was asked for that was not.
    let Some((in_force, unchanged)) = taken else {
        return Err(AskError::NotTaken(format!(
            "the requested watermark of {} changed five times while this request was being written; nothing written: run it again",
            domain.stream
        )));
    };
    // What the next tick would make of it, computed now.
    let mut one = config.clone();
    one.domains = vec![domain.clone()];
    let fresh = crate::trim::answers(broker, &one, "", Utc::now()).await;
    let (applied, bounded_by) = fresh
        .answers
        .first()
        .map(|a| {
            (
                a.trim_to,
                a.requested.as_ref().and_then(|r| r.bounded_by.clone()),
            )
        })
        .unwrap_or((0, None));
    let clamped_from = match ask {
        Ask::Entry(n) if n > tail => Some(n),
        _ => None,
    };
    Ok(Raised {
        requested: in_force,
        unchanged,
        clamped_from,
        applied_at_next_tick: applied,
        bounded_by,
    })
}
