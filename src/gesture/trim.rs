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
use crate::rows::{Requested, Timestamp};

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

/// The incarnation a new watermark belongs to: the live stream's `created`
/// and the generation of the domain's floors row (0 before the first one).
fn incarnation_of(
    floors_row: Option<&[u8]>,
    stream: &str,
    created: Timestamp,
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
    if span > crate::tick::AGE_PROOF_MAX_RECORDS {
        return Err(AskError::Unresolved(format!(
            "unresolved: --at {} would trim {span} records of {stream} whose stamps the broker's lookup assumes in order; at most {} are scanned to prove it; nothing written (trim in steps, or use --entry)",
            Timestamp(t),
            crate::tick::AGE_PROOF_MAX_RECORDS
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

/// CHECK (pure): the ask and its reason, before anything is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub ask: Ask,
    pub by: String,
    pub reason: String,
}

/// CHECK (pure): sequences start at 1; a reason is at most 1024
/// characters, without control characters.
pub fn check(ask: Ask, by: &str, reason: &str) -> Result<Checked, AskError> {
    if ask == Ask::Entry(0) {
        return Err(AskError::Input(
            "--entry 0 is not a sequence: sequences start at 1 (--entry N keeps N and later)"
                .into(),
        ));
    }
    if reason.chars().count() > 1024 || reason.chars().any(char::is_control) {
        return Err(AskError::Input(
            "reason: at most 1024 characters, without control characters".into(),
        ));
    }
    Ok(Checked {
        ask,
        by: by.to_string(),
        reason: reason.to_string(),
    })
}

/// What the judge needs: the log and the broker's clock, what `--at`
/// resolves to, and the domain's floors row (the generation the watermark
/// belongs to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub stream: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub created: Timestamp,
    /// The broker's clock when the log was read.
    pub now: DateTime<Utc>,
    /// What `--at` resolves to (read only for an instant not in the future).
    pub at: Option<Result<u64, AskError>>,
    /// The floors row's body, if there is one.
    pub floors_row: Option<Vec<u8>>,
}

/// FACTS (IO): the log's state on the broker's clock; for `--at`, the
/// first record stamped at or after it, conservatively; the floors row.
/// The floors bucket is the sidecar's own: a trim asked for before the
/// sidecar ever ran creates it, as every gesture that writes does.
pub async fn facts(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    checked: &Checked,
) -> Result<Facts, AskError> {
    use crate::broker::Fault;
    let (state, clock) = broker
        .stream_state_at(&domain.stream)
        .await
        .map_err(|e| match e {
            Fault::Missing(_) => AskError::NoStream(e.to_string()),
            other => AskError::Unreachable(other),
        })?;
    let tail = state.last_seq.saturating_add(1);
    let at = match checked.ask {
        // An instant in the future is the judge's to refuse: nothing to scan.
        Ask::At(t) if t <= clock.broker => {
            Some(at_or_after(broker, &domain.stream, state.first_seq, tail, t).await)
        }
        _ => None,
    };
    broker
        .ensure_sidecar_buckets(config)
        .await
        .map_err(|e| AskError::Unreachable(Fault::failed(e.to_string())))?;
    let floors_row = broker
        .kv_entry(&config.buckets.floors, &domain.stream)
        .await
        .map_err(AskError::Unreachable)?
        .map(|e| e.value);
    Ok(Facts {
        stream: domain.stream.clone(),
        first_seq: state.first_seq,
        last_seq: state.last_seq,
        created: state.created,
        now: clock.broker,
        at,
        floors_row,
    })
}

/// What [`apply`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub stream: String,
    /// The incarnation the watermark belongs to.
    pub incarnation: crate::rows::Incarnation,
    /// The watermark row.
    pub row: Requested,
    /// What `--entry` asked for when it was past the tail.
    pub clamped_from: Option<u64>,
}

/// JUDGE (pure): the watermark to write: `--entry N` clamped to the tail
/// now (records appended later are never trimmed by it); `--at T` refused
/// in the future on the broker's clock, else what it resolved to; in the
/// incarnation of the live stream at the floors row's generation (a row
/// that does not parse leaves it unknown: nothing is written).
pub fn judge(checked: &Checked, facts: &Facts) -> Result<Plan, AskError> {
    let tail = facts.last_seq.saturating_add(1);
    let (seq, clamped_from) = match checked.ask {
        Ask::Entry(n) => (n.min(tail), (n > tail).then_some(n)),
        Ask::At(t) if t > facts.now => {
            return Err(AskError::Input(format!(
                "{} is in the future on the broker's clock ({}); a trim keeps what was stamped at or after the instant given",
                Timestamp(t),
                Timestamp(facts.now)
            )))
        }
        Ask::At(_) => match &facts.at {
            Some(resolved) => (resolved.clone()?, None),
            None => {
                return Err(AskError::Unresolved(format!(
                    "unresolved: the stamps of {} were not read; nothing written",
                    facts.stream
                )))
            }
        },
    };
    let incarnation = incarnation_of(facts.floors_row.as_deref(), &facts.stream, facts.created)?;
    Ok(Plan {
        stream: facts.stream.clone(),
        incarnation,
        row: Requested {
            seq,
            by: checked.by.clone(),
            at: Timestamp(facts.now),
            reason: checked.reason.clone(),
            stream_created: Some(incarnation.stream_created),
            generation: Some(incarnation.generation),
            format: crate::rows::FORMAT,
        },
        clamped_from,
    })
}

/// JUDGE (pure), against the watermark in force as each attempt of the
/// compare-and-set reads it: one of this incarnation at or above the plan's
/// stands (nothing written); anything else (none, lower, another
/// incarnation's, one that does not parse) is replaced.
pub fn stands(plan: &Plan, current: Option<&[u8]>) -> Option<u64> {
    let key = Requested::key(&plan.stream);
    let cur = Requested::parse(&key, &plan.stream, current?).ok()?;
    (cur.belongs_to(&plan.incarnation) && cur.seq >= plan.row.seq).then_some(cur.seq)
}

/// APPLY (IO): the compare-and-set on the revision read, re-read and
/// judged again ([`stands`]) when a concurrent request won, at most five
/// times; then what the next tick would make of it, computed now.
pub async fn apply(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    plan: Plan,
) -> Result<Raised, AskError> {
    let bucket = &config.buckets.floors;
    let key = Requested::key(&domain.stream);
    let body = serde_json::to_vec(&plan.row).map_err(|e| AskError::Input(e.to_string()))?;
    let mut taken: Option<(u64, bool)> = None;
    for _ in 0..5 {
        let current = broker
            .kv_entry(bucket, &key)
            .await
            .map_err(AskError::Unreachable)?;
        // A concurrent writer between the read and the write, played by
        // the process itself for the test that shows the races counted.
        if crate::failpoint::is_set("requested_race") {
            let _ = broker.kv_put(bucket, &key, race_row(&plan.row)).await;
        }
        // A watermark a newer release wrote is never replaced by this one
        // (docs/upgrading.md): what it means is that release's to say.
        if let Some(newer) = current
            .as_ref()
            .and_then(|e| serde_json::from_slice::<serde_json::Value>(&e.value).ok())
            .and_then(|v| v.get("format").and_then(serde_json::Value::as_u64))
            .filter(|f| *f > u64::from(crate::rows::FORMAT))
        {
            return Err(AskError::NotTaken(format!(
                "the requested watermark on {} was written by a newer release (format {newer}; this one writes {}): nothing written; run the request with that release",
                domain.stream,
                crate::rows::FORMAT
            )));
        }
        if let Some(seq) = stands(&plan, current.as_ref().map(|e| e.value.as_slice())) {
            taken = Some((seq, true));
            break;
        }
        let written = match &current {
            Some(e) => {
                broker
                    .kv_update(bucket, &key, body.clone(), e.revision)
                    .await
            }
            None => broker.kv_create(bucket, &key, body.clone()).await,
        };
        match written {
            Ok(_) => {
                taken = Some((plan.row.seq, false));
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
    let mut one = config.clone();
    one.domains = vec![domain.clone()];
    let fresh = crate::tick::answers(broker, &one, "", Utc::now()).await;
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
    Ok(Raised {
        requested: in_force,
        unchanged,
        clamped_from: plan.clamped_from,
        applied_at_next_tick: applied,
        bounded_by,
    })
}

/// The gesture past its [`check`]: [`facts`], [`judge`], [`apply`]. The
/// CLI and `POST …/trim` call this.
pub async fn raise(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    checked: &Checked,
) -> Result<Raised, AskError> {
    let facts = facts(broker, config, domain, checked).await?;
    let plan = judge(checked, &facts)?;
    apply(broker, config, domain, plan).await
}

impl crate::exit::Outcome for Raised {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Done
    }

    fn code(&self) -> &'static str {
        "requested"
    }
}

impl crate::exit::Outcome for AskError {
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            AskError::Input(_) => Class::BadInput,
            AskError::NoStream(_) => Class::Missing,
            AskError::Unreachable(_) => Class::Unreachable,
            AskError::NotTaken(_) | AskError::Unresolved(_) => Class::Refused,
        }
    }

    /// The code of the error answer.
    fn code(&self) -> &'static str {
        match self {
            AskError::Input(_) => "bad_request",
            AskError::NoStream(_) => "unknown_stream",
            AskError::Unreachable(_) => "unreachable",
            AskError::NotTaken(_) => "not_taken",
            AskError::Unresolved(_) => "unresolved",
        }
    }
}

/// RENDER: the request as `--json` prints it and the route answers.
pub fn json(r: &Raised) -> serde_json::Value {
    serde_json::to_value(r).unwrap_or_default()
}

/// RENDER: the request in words; `stream` as the operator named it, for
/// the status command printed when the domain concludes nothing.
pub fn text(r: &Raised, stream: &str, named: &str) -> String {
    let was = if r.unchanged {
        " (already requested; unchanged)"
    } else {
        ""
    };
    let mut out = format!(
        "requested: records below {} may be trimmed on {stream}{was}, younger than min_age too, never past a node, a hold, the backup, the snapshot quorum, the feed or the archive\n",
        r.requested
    );
    if let Some(asked) = r.clamped_from {
        out.push_str(&format!(
            "--entry {asked} was clamped to {} (the log's tail): records appended later are never trimmed by this request\n",
            r.requested
        ));
    }
    match &r.bounded_by {
        Some(b) => out.push_str(&format!(
            "the next tick trims up to {} (bounded by {b})\n",
            r.applied_at_next_tick
        )),
        None => out.push_str(&format!(
            "the next tick trims nothing: the domain concludes nothing now (crewlet retention status -stream {named} says why)\n"
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Outcome;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).expect("instant")
    }

    fn facts(floors_row: Option<&str>, resolved: Option<Result<u64, AskError>>) -> Facts {
        Facts {
            stream: "S".into(),
            first_seq: 11,
            last_seq: 100,
            created: at("2026-11-01T00:00:00Z"),
            now: at("2026-11-30T12:00:00Z").0,
            at: resolved,
            floors_row: floors_row.map(|r| r.as_bytes().to_vec()),
        }
    }

    fn checked(ask: Ask) -> Checked {
        check(ask, "alice", "disk").expect("checked")
    }

    /// The judge's table: `--entry` clamped to the tail, `--at` in the
    /// future refused, unresolved passed on, a floors row that does not
    /// parse leaving the generation unknown; and the check's refusals.
    #[test]
    fn the_judge_clamps_refuses_the_future_and_keeps_the_incarnation() {
        let past = at("2026-11-30T11:00:00Z").0;
        let future = at("2026-11-30T13:00:00Z").0;
        let row = r#"{"stream":"S","generation":2,"stream_created":"2026-11-01T00:00:00Z","floor":null,"trim_floor_state":"none","at":"2026-11-30T11:59:00Z"}"#;
        type Verdict = Result<(u64, Option<u64>, u64), &'static str>;
        let cases: Vec<(&str, Checked, Facts, Verdict)> = vec![
            (
                "an entry",
                checked(Ask::Entry(50)),
                facts(None, None),
                Ok((50, None, 0)),
            ),
            (
                "the tail",
                checked(Ask::Entry(101)),
                facts(None, None),
                Ok((101, None, 0)),
            ),
            (
                "past the tail",
                checked(Ask::Entry(500)),
                facts(None, None),
                Ok((101, Some(500), 0)),
            ),
            (
                "the row's generation",
                checked(Ask::Entry(50)),
                facts(Some(row), None),
                Ok((50, None, 2)),
            ),
            (
                "a row that does not parse",
                checked(Ask::Entry(50)),
                facts(Some("{"), None),
                Err("not_taken"),
            ),
            (
                "--at resolved",
                checked(Ask::At(past)),
                facts(None, Some(Ok(42))),
                Ok((42, None, 0)),
            ),
            (
                "--at in the future",
                checked(Ask::At(future)),
                facts(None, None),
                Err("bad_request"),
            ),
            (
                "--at unresolved",
                checked(Ask::At(past)),
                facts(
                    None,
                    Some(Err(AskError::Unresolved("unresolved: x".into()))),
                ),
                Err("unresolved"),
            ),
        ];
        for (what, c, f, want) in cases {
            let got = judge(&c, &f)
                .map(|p| (p.row.seq, p.clamped_from, p.incarnation.generation))
                .map_err(|e| e.code());
            assert_eq!(got, want, "{what}");
        }
        let p = judge(&checked(Ask::Entry(50)), &facts(None, None)).expect("plan");
        assert_eq!(
            (p.row.by.as_str(), p.row.reason.as_str(), p.row.at),
            ("alice", "disk", at("2026-11-30T12:00:00Z"))
        );
        assert_eq!(p.row.stream_created, Some(at("2026-11-01T00:00:00Z")));
        // The check, before anything is read.
        assert_eq!(
            check(Ask::Entry(0), "a", "").map_err(|e| e.code()),
            Err("bad_request")
        );
        assert_eq!(
            check(Ask::Entry(1), "a", "a\u{7}").map_err(|e| e.code()),
            Err("bad_request")
        );
        assert_eq!(
            check(Ask::Entry(1), "a", &"x".repeat(1025)).map_err(|e| e.code()),
            Err("bad_request")
        );
        assert!(check(Ask::Entry(1), "a", &"x".repeat(1024)).is_ok());
    }

    /// The watermark in force stands when it is of this incarnation and at
    /// or above the plan's; otherwise the plan replaces it.
    #[test]
    fn a_watermark_in_force_stands_only_in_its_incarnation_and_above() {
        let p = judge(&checked(Ask::Entry(50)), &facts(None, None)).expect("plan");
        let row = |seq: u64, created: &str, generation: u64| {
            format!(
                r#"{{"seq":{seq},"by":"bob","at":"2026-11-30T11:00:00Z","stream_created":"{created}","generation":{generation}}}"#
            )
        };
        let this = "2026-11-01T00:00:00Z";
        let cases: Vec<(&str, Option<String>, Option<u64>)> = vec![
            ("none", None, None),
            ("higher", Some(row(60, this, 0)), Some(60)),
            ("the same", Some(row(50, this, 0)), Some(50)),
            ("lower", Some(row(40, this, 0)), None),
            (
                "another stream",
                Some(row(60, "2026-10-01T00:00:00Z", 0)),
                None,
            ),
            ("another generation", Some(row(60, this, 1)), None),
            (
                "without its incarnation",
                Some(r#"{"seq":60,"by":"bob","at":"2026-11-30T11:00:00Z"}"#.into()),
                None,
            ),
            ("does not parse", Some("{".into()), None),
        ];
        for (what, current, want) in cases {
            assert_eq!(
                stands(&p, current.as_deref().map(str::as_bytes)),
                want,
                "{what}"
            );
        }
        // Rendered once for both surfaces.
        let r = Raised {
            requested: 101,
            unchanged: false,
            clamped_from: Some(500),
            applied_at_next_tick: 90,
            bounded_by: Some("min_position".into()),
        };
        assert_eq!(json(&r)["clamped_from"], 500);
        assert_eq!(
            text(&r, "S", "tracker"),
            "requested: records below 101 may be trimmed on S, younger than min_age too, never past a node, a hold, the backup, the snapshot quorum, the feed or the archive\n--entry 500 was clamped to 101 (the log's tail): records appended later are never trimmed by this request\nthe next tick trims up to 90 (bounded by min_position)\n"
        );
    }
}
