//! `crewlet retention ack` and `POST /v1/streams/{s}/ack`: an operator's
//! acknowledgement that a copy of a log up to a position is safe, which is
//! what `backup_floor: operator` trims by (docs/contract.md, `crewlet_backups` — manifests and acknowledgements).
//! The five parts of every gesture (docs/architecture.md,
//! Gestures): [`check`] the ask, read the [`facts`], [`judge`] them into a
//! [`Plan`] or a refusal, [`apply`] the plan, [`text`]/[`json`] the outcome.
//! The CLI, the HTTP route and the preview `--if-acked` call the same
//! `judge`.

use serde_json::{json, Value};

use crate::broker::kv::CasError;
use crate::broker::{Broker, Fault};
use crate::config::{BackupPolicy, Config, Domain};
use crate::exit::{Class, Outcome};
use crate::rows::{AckRow, Timestamp};

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
        at: Timestamp,
    },
    /// The acknowledgement changed between each read and write, five
    /// times (exit 1, HTTP 409): nothing written, and saying otherwise
    /// would report an acknowledgement that is not in force.
    #[error("not_taken: the acknowledgement of {stream} changed five times while this one was being written; nothing written: run it again")]
    NotTaken { stream: String },
    /// The broker did not answer (exit 3, HTTP 503); nothing written.
    #[error("{0}; nothing written")]
    Unreachable(Fault),
}

impl Outcome for AckError {
    fn class(&self) -> Class {
        match self {
            AckError::PolicyEngine { .. }
            | AckError::WouldLower { .. }
            | AckError::NotTaken { .. } => Class::Refused,
            AckError::PastTail { .. } => Class::BadInput,
            AckError::Unreachable(_) => Class::Unreachable,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            AckError::PolicyEngine { .. } => "policy_engine",
            AckError::PastTail { .. } => "past_tail",
            AckError::WouldLower { .. } => "would_lower",
            AckError::NotTaken { .. } => "not_taken",
            AckError::Unreachable(_) => "unreachable",
        }
    }
}

/// What is asked, checked: the surfaces parse their own syntax (a flag, a
/// JSON body) into this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub stream: String,
    pub position: u64,
    pub by: String,
    /// Allow a position below the acknowledgement in force.
    pub lower: bool,
}

/// CHECK (pure): the ask for `domain`. Every position is a well-formed
/// ask; what the log holds is the judge's to say.
pub fn check(domain: &Domain, position: u64, by: &str, lower: bool) -> Ask {
    Ask {
        stream: domain.stream.clone(),
        position,
        by: by.to_string(),
        lower,
    }
}

/// What the judge needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Facts {
    /// `backup_floor: engine`: the trim never reads an acknowledgement, so
    /// nothing need be read to refuse one.
    Engine,
    Operator {
        /// The log's last sequence.
        last_seq: u64,
        /// The broker's clock, when the log was read: the row's `at`.
        now: Timestamp,
        /// The acknowledgement in force, if any (one that does not parse is
        /// none: it would be replaced).
        current: Option<AckRow>,
        /// The revision of the key as read (`None`: no value): the write is
        /// a compare-and-set on it, so that what was judged is what is
        /// replaced.
        revision: Option<u64>,
    },
}

impl Facts {
    /// The facts, when the configuration alone decides (no connection is
    /// made to refuse under `engine`).
    pub fn without_broker(config: &Config) -> Option<Facts> {
        (config.retention.backup_floor == BackupPolicy::Engine).then_some(Facts::Engine)
    }
}

/// FACTS (IO): the log's last sequence and the broker's clock, and the
/// acknowledgement in force.
pub async fn facts(broker: &Broker, config: &Config, ask: &Ask) -> Result<Facts, AckError> {
    if let Some(f) = Facts::without_broker(config) {
        return Ok(f);
    }
    let (state, clock) = broker
        .stream_state_at(&ask.stream)
        .await
        .map_err(AckError::Unreachable)?;
    let key = AckRow::key(&ask.stream);
    let entry = broker
        .kv_entry(&config.buckets.backups, &key)
        .await
        .map_err(AckError::Unreachable)?;
    Ok(Facts::Operator {
        last_seq: state.last_seq,
        now: Timestamp(clock.broker),
        current: entry
            .as_ref()
            .and_then(|e| AckRow::parse(&key, &e.value).ok()),
        revision: entry.map(|e| e.revision),
    })
}

/// What [`apply`] writes: the row, the position it replaces, and the
/// revision of the key that was judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub row: AckRow,
    pub previous: Option<u64>,
    pub revision: Option<u64>,
}

/// JUDGE (pure): the acknowledgement to write, or why not.
pub fn judge(ask: &Ask, facts: &Facts) -> Result<Plan, AckError> {
    let Facts::Operator {
        last_seq,
        now,
        current,
        revision,
    } = facts
    else {
        // Saying "acknowledged" under engine would be a lie.
        return Err(AckError::PolicyEngine {
            announce: crate::alarms::announce_command(&ask.stream),
        });
    };
    if ask.position > *last_seq {
        return Err(AckError::PastTail {
            position: ask.position,
            last_seq: *last_seq,
            stream: ask.stream.clone(),
        });
    }
    if let Some(c) = current
        .as_ref()
        .filter(|c| ask.position < c.position && !ask.lower)
    {
        return Err(AckError::WouldLower {
            stream: ask.stream.clone(),
            position: ask.position,
            current: c.position,
            by: c.by.clone(),
            at: c.at,
        });
    }
    Ok(Plan {
        row: AckRow {
            stream: ask.stream.clone(),
            position: ask.position,
            by: ask.by.clone(),
            // On the broker's clock: it is compared with the stream's
            // created.
            at: *now,
        },
        previous: current.as_ref().map(|c| c.position),
        revision: *revision,
    })
}

/// The whole gesture on a broker: [`facts`], [`judge`], [`apply`], judged
/// again on what the key holds when another acknowledgement landed
/// between the read and the write (at most five times).
pub async fn acknowledge(broker: &Broker, config: &Config, ask: &Ask) -> Result<Plan, AckError> {
    for _ in 0..5 {
        let plan = judge(ask, &facts(broker, config, ask).await?)?;
        if let Some(done) = apply(broker, config, plan).await? {
            return Ok(done);
        }
    }
    Err(AckError::NotTaken {
        stream: ask.stream.clone(),
    })
}

/// APPLY (IO): writes the plan's row by compare-and-set on the revision
/// judged; nothing is decided here. `None`: the key changed since it was
/// read, nothing was written, and the plan must be judged again.
async fn apply(broker: &Broker, config: &Config, plan: Plan) -> Result<Option<Plan>, AckError> {
    crate::failpoint::failpoint("ack_before_write").await;
    let body = serde_json::to_vec(&plan.row)
        .map_err(|e| AckError::Unreachable(Fault::failed(e.to_string())))?;
    let (bucket, key) = (&config.buckets.backups, AckRow::key(&plan.row.stream));
    let written = match plan.revision {
        Some(revision) => broker.kv_update(bucket, &key, body, revision).await,
        None => broker.kv_create(bucket, &key, body).await,
    };
    match written {
        Ok(_) => Ok(Some(plan)),
        Err(CasError::Exists { .. } | CasError::Conflict { .. }) => Ok(None),
        Err(e @ CasError::Failed { .. }) => {
            Err(AckError::Unreachable(Fault::failed(e.to_string())))
        }
    }
}

impl Outcome for Plan {
    fn class(&self) -> Class {
        Class::Done
    }

    fn code(&self) -> &'static str {
        "acknowledged"
    }
}

/// RENDER: the written acknowledgement as `--json` and the route print it.
pub fn json(done: &Plan) -> Value {
    json!({"acknowledged": true, "stream": done.row.stream, "position": done.row.position,
           "by": done.row.by, "at": done.row.at, "previous": done.previous})
}

/// RENDER: the written acknowledgement in words.
pub fn text(done: &Plan) -> String {
    let position = done.row.position;
    let was = match done.previous {
        Some(p) if p > position => format!(" (lowered from {p})"),
        Some(p) => format!(" (was {p})"),
        None => String::new(),
    };
    format!(
        "acknowledged {} up to {position}{was} (by {})",
        done.row.stream, done.row.by
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).expect("instant")
    }

    fn ask(position: u64, lower: bool) -> Ask {
        Ask {
            stream: "S".into(),
            position,
            by: "alice".into(),
            lower,
        }
    }

    fn operator(last_seq: u64, current: Option<u64>) -> Facts {
        Facts::Operator {
            last_seq,
            now: at("2026-11-30T12:00:00Z"),
            current: current.map(|position| AckRow {
                stream: "S".into(),
                position,
                by: "bob".into(),
                at: at("2026-11-29T12:00:00Z"),
            }),
            revision: current.map(|_| 7),
        }
    }

    /// What the judge gave: the position written and the one it replaces,
    /// or the refusal's code and class.
    type Verdict = Result<(u64, Option<u64>), (&'static str, Class)>;

    /// The judge's table: each refusal with its code and class, and what
    /// is written otherwise.
    #[test]
    fn the_judge_refuses_engine_past_the_tail_and_a_lowering() {
        let cases: Vec<(&str, Ask, Facts, Verdict)> = vec![
            (
                "engine",
                ask(5, false),
                Facts::Engine,
                Err(("policy_engine", Class::Refused)),
            ),
            (
                "past the tail",
                ask(11, false),
                operator(10, None),
                Err(("past_tail", Class::BadInput)),
            ),
            (
                "at the tail",
                ask(10, false),
                operator(10, None),
                Ok((10, None)),
            ),
            ("first", ask(0, false), operator(10, None), Ok((0, None))),
            (
                "raised",
                ask(8, false),
                operator(10, Some(5)),
                Ok((8, Some(5))),
            ),
            (
                "the same",
                ask(5, false),
                operator(10, Some(5)),
                Ok((5, Some(5))),
            ),
            (
                "lowered unasked",
                ask(4, false),
                operator(10, Some(5)),
                Err(("would_lower", Class::Refused)),
            ),
            (
                "lowered on purpose",
                ask(4, true),
                operator(10, Some(5)),
                Ok((4, Some(5))),
            ),
        ];
        for (what, a, f, want) in cases {
            let got = judge(&a, &f)
                .map(|p| (p.row.position, p.previous))
                .map_err(|e| (e.code(), e.class()));
            assert_eq!(got, want, "{what}");
        }
        // The row is the broker's time and the asker's name.
        let p = judge(&ask(8, false), &operator(10, Some(5))).expect("plan");
        assert_eq!(
            (p.row.by.as_str(), p.row.at),
            ("alice", at("2026-11-30T12:00:00Z"))
        );
        assert_eq!(text(&p), "acknowledged S up to 8 (was 5) (by alice)");
        // The write replaces exactly the key judged, or creates it.
        assert_eq!(p.revision, Some(7));
        let first = judge(&ask(8, false), &operator(10, None)).expect("plan");
        assert_eq!(first.revision, None);
        let lowered = judge(&ask(4, true), &operator(10, Some(5))).expect("plan");
        assert_eq!(
            text(&lowered),
            "acknowledged S up to 4 (lowered from 5) (by alice)"
        );
        assert_eq!(json(&lowered)["previous"], 5);
    }
}
