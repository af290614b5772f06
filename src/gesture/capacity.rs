//! `crewlet retention set-capacity` and `POST /v1/streams/{s}/capacity`:
//! the input checked, one reading judged (`crate::capacity`), then the
//! update of `max_bytes` alone and the re-read that verifies it. The CLI
//! and the route both call [`check`] and [`apply`] and render the
//! [`Outcome`] with [`json`] or [`text`].

use serde_json::json;

use crate::broker::Broker;
use crate::capacity::{self, Facts};
use crate::config::{size, Config, Domain};
use crate::exit::{Class, Exit, InputFault};
use crate::human;

/// What an operator asked for, as typed.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The stream or domain name.
    pub stream: String,
    pub bytes: String,
    pub confirm: String,
    /// Where it was asked: refusals name its options as that surface
    /// takes them.
    pub surface: crate::human::Surface,
}

/// Input refused before anything is read.
#[derive(Debug, Clone)]
pub struct BadInput {
    pub code: InputFault,
    pub message: String,
}

/// What a change of ceiling came to.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Bad input: nothing read, nothing written (`code`: `bad_request`,
    /// `confirm_mismatch`, `unknown_stream`).
    BadInput(BadInput),
    /// The configured stream does not exist on the broker.
    Missing { stream: String },
    /// The broker could not be read.
    Unreadable { message: String },
    /// Refused by judgement; nothing written.
    Refused {
        stream: String,
        refusal: capacity::Refusal,
    },
    /// The broker refused the update (its own error); nothing changed.
    BrokerRefused { stream: String, message: String },
    /// The stream's configuration changed between the judgement and the
    /// update; nothing written (run it again).
    ChangedMeanwhile { stream: String },
    /// The update was taken but the broker reports another ceiling, or
    /// reading it back failed (`why`).
    NotVerified {
        stream: String,
        target: u64,
        reported: Option<i64>,
        why: Option<String>,
    },
    /// Applied and read back (or already the target: `changed` false).
    Done(Done),
}

#[derive(Debug, Clone)]
pub struct Done {
    pub stream: String,
    pub changed: bool,
    pub from: i64,
    pub to: u64,
    pub soft_ceiling: u64,
    pub reserve_bytes: u64,
    pub usage: u64,
    pub reserves: u64,
    pub note: Option<String>,
}

impl Outcome {
    pub fn class(&self) -> Class {
        match self {
            Outcome::BadInput(_) => Class::BadInput,
            Outcome::Unreadable { .. } => Class::Unreachable,
            Outcome::Done(_) => Class::Done,
            Outcome::Missing { .. } => Class::Missing,
            Outcome::Refused { .. }
            | Outcome::BrokerRefused { .. }
            | Outcome::ChangedMeanwhile { .. }
            | Outcome::NotVerified { .. } => Class::Refused,
        }
    }

    pub fn exit(&self) -> Exit {
        self.class().exit()
    }

    /// The code an error answer carries, none for success.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Outcome::BadInput(b) => Some(b.code.code()),
            Outcome::Missing { .. } => Some("stream_missing"),
            Outcome::Unreadable { .. } => Some("unreachable"),
            Outcome::Refused { refusal, .. } => Some(refusal.code()),
            Outcome::BrokerRefused { .. } => Some("broker_refused"),
            Outcome::ChangedMeanwhile { .. } => Some("changed_meanwhile"),
            Outcome::NotVerified { .. } => Some("not_verified"),
            Outcome::Done(_) => None,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Outcome::BadInput(BadInput { message, .. }) | Outcome::Unreadable { message } => {
                message.clone()
            }
            Outcome::Missing { stream } => format!(
                "stream {stream} does not exist on the broker; nothing written"
            ),
            Outcome::ChangedMeanwhile { stream } => format!(
                "refused: changed_meanwhile: the configuration of {stream} changed while this command judged it (someone else edited the stream); nothing written: run the same command again"
            ),
            Outcome::Refused { stream, refusal } => {
                format!("refused set-capacity {stream}: {refusal}; nothing written")
            }
            Outcome::BrokerRefused { stream, message } => {
                format!("the broker refused the new ceiling of {stream}: {message}")
            }
            Outcome::NotVerified {
                stream,
                target,
                reported,
                why,
            } => match (reported, why) {
                (Some(r), _) => format!(
                    "the update of {stream} was taken, but the broker reports max_bytes {r}, not {target}; read it with crewlet retention status -stream {stream} and set it again"
                ),
                (None, w) => format!(
                    "the broker took the update of {stream} to {target}, but reading it back failed ({}); read it with crewlet retention status -stream {stream}",
                    w.clone().unwrap_or_default()
                ),
            },
            Outcome::Done(d) => done_text(d),
        }
    }
}

/// Checks the input alone, before anything is read: the domain and the
/// target in bytes.
pub fn check(config: &Config, ask: &Ask) -> Result<(Domain, u64), BadInput> {
    let domain = config
        .domain(&ask.stream)
        .cloned()
        .ok_or_else(|| BadInput {
            code: InputFault::UnknownStream,
            message: format!(
                "{:?} is not configured; configured: {}",
                ask.stream,
                config.configured()
            ),
        })?;
    let target = size::parse(&ask.bytes).map_err(|e| BadInput {
        code: InputFault::BadRequest,
        message: format!("BYTES: {e}"),
    })?;
    if ask.confirm != ask.bytes {
        return Err(BadInput {
            code: InputFault::ConfirmMismatch,
            message: format!(
                "confirm_mismatch: {} {:?} does not repeat the target {:?} exactly as given; nothing written",
                ask.surface.option("confirm"),
                ask.confirm,
                ask.bytes
            ),
        });
    }
    if i64::try_from(target).is_err() {
        return Err(BadInput {
            code: InputFault::BadRequest,
            message: format!("BYTES: {target} is more than a stream's max_bytes can hold"),
        });
    }
    Ok((domain, target))
}

/// Reads, judges, and only then updates `max_bytes` and reads it back.
pub async fn apply(config: &Config, broker: &Broker, domain: &Domain, target: u64) -> Outcome {
    let stream = domain.stream.clone();
    let read = match broker.capacity_read(&stream).await {
        Ok(Some(r)) => r,
        Ok(None) => return Outcome::Missing { stream },
        Err(fault) => {
            return Outcome::Unreadable {
                message: fault.to_string(),
            }
        }
    };
    let account = broker.account_limits(&read).await;
    // The rule the answer's reserve_bytes follows.
    let gate_reserve = domain.gate_reserve;
    let facts = Facts {
        stream: stream.clone(),
        usage: read.bytes,
        max_bytes: read.max_bytes,
        replicas: read.replicas,
        gate_reserve,
        discard_new: read.discard_new,
        account,
    };
    let minimum = capacity::minimum(config.retention.allow_unsafe_limits);
    let judged = match capacity::judge(target, &facts, minimum) {
        Ok(j) => j,
        Err(refusal) => return Outcome::Refused { stream, refusal },
    };
    let target_i = i64::try_from(target).unwrap_or(i64::MAX);
    let done = |changed: bool| Done {
        stream: stream.clone(),
        changed,
        from: read.max_bytes,
        to: target,
        soft_ceiling: judged.soft_ceiling,
        reserve_bytes: target - judged.soft_ceiling,
        usage: read.bytes,
        reserves: judged.reserves,
        note: judged.note.clone(),
    };
    if read.max_bytes == target_i {
        return Outcome::Done(done(false));
    }
    match broker.set_max_bytes(&read, target_i).await {
        Ok(Ok(reported)) if reported == target_i => Outcome::Done(done(true)),
        Ok(Ok(reported)) => Outcome::NotVerified {
            stream,
            target,
            reported: Some(reported),
            why: None,
        },
        Ok(Err(why)) => Outcome::NotVerified {
            stream,
            target,
            reported: None,
            why: Some(why.to_string()),
        },
        Err(crate::broker::capacity::UpdateError::Refused(fault)) => Outcome::BrokerRefused {
            stream,
            message: fault.to_string(),
        },
        Err(crate::broker::capacity::UpdateError::ChangedMeanwhile) => {
            Outcome::ChangedMeanwhile { stream }
        }
    }
}

fn ceiling(max_bytes: i64) -> String {
    u64::try_from(max_bytes)
        .ok()
        .filter(|n| *n > 0)
        .map_or_else(|| "unset".into(), human::bytes)
}

fn done_text(d: &Done) -> String {
    let mut out = if d.changed {
        format!(
            "{}: max_bytes {} -> {} ({} bytes); the broker reports {}\n",
            d.stream,
            ceiling(d.from),
            human::bytes(d.to),
            d.to,
            d.to
        )
    } else {
        format!(
            "{}: max_bytes is already {} ({} bytes); nothing written\n",
            d.stream,
            human::bytes(d.to),
            d.to
        )
    };
    if d.reserve_bytes > 0 {
        out.push_str(&format!(
            "  ordinary appends are held to {} (the gate reserve of {} above takes eviction records only); the log holds {}\n",
            human::bytes(d.soft_ceiling),
            human::bytes(d.reserve_bytes),
            human::bytes(d.usage)
        ));
    } else {
        out.push_str(&format!(
            "  ordinary appends are held to {}; the log holds {}\n",
            human::bytes(d.soft_ceiling),
            human::bytes(d.usage)
        ));
    }
    if d.changed && d.reserves > 0 {
        out.push_str(&format!(
            "  the raise reserves {} more of the account's JetStream storage\n",
            human::bytes(d.reserves)
        ));
    }
    if let Some(n) = &d.note {
        out.push_str(&format!("  {n}\n"));
    }
    out
}

/// The outcome as `--json` prints it (and the route answers).
pub fn json(o: &Outcome) -> serde_json::Value {
    match o {
        Outcome::Done(d) => json!({
            "stream": d.stream, "changed": d.changed, "from": d.from, "to": d.to,
            "soft_ceiling_bytes": d.soft_ceiling, "reserve_bytes": d.reserve_bytes,
            "bytes": d.usage, "reserves": d.reserves, "note": d.note, "verified": true,
        }),
        other => json!({"error": other.code(), "message": other.message()}),
    }
}

/// The outcome as text: (stdout, stderr).
pub fn text(o: &Outcome) -> (String, String) {
    match o {
        Outcome::Done(_) => (o.message(), String::new()),
        other => (String::new(), format!("{}\n", other.message())),
    }
}
