//! `crewlet retention set-capacity` and `POST /v1/streams/{s}/capacity`:
//! the input checked, one reading judged (`crate::capacity`), then the
//! update of `max_bytes` alone and the re-read that verifies it. The CLI
//! and the route both call [`check`] and [`apply`] and render the
//! [`Outcome`] with [`json`] or [`text`].

use serde_json::json;

use crate::broker::Broker;
use crate::capacity::{self, command, least_above, soft_ceiling, Account, GIB};
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
    Refused { stream: String, refusal: Refusal },
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

/// The one reading the judgement is made from.
#[derive(Debug, Clone)]
pub struct Facts {
    pub stream: String,
    /// Bytes the log holds now.
    pub usage: u64,
    /// Its ceiling now (-1 when unset).
    pub max_bytes: i64,
    pub replicas: u64,
    pub gate_reserve: bool,
    /// `discard: new`: on `discard: old` a lower ceiling deletes records.
    pub discard_new: bool,
    pub account: Account,
}

/// Why a target is refused (docs/runbook.md); nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("below_minimum: {target} is under the least ceiling a log may have, {minimum}")]
    BelowMinimum { target: String, minimum: String },
    #[error("below_usage: a ceiling of {target} holds ordinary appends to {soft}, at or below the {usage} the log holds now, so it would refuse every append the moment it applied; the least target that would do is {least} ({command})")]
    BelowUsage {
        target: String,
        soft: String,
        usage: String,
        least: String,
        command: String,
    },
    #[error("account_limit: {0}")]
    AccountLimit(String),
    #[error("discard_old: {stream} has discard: old, on which a lower ceiling makes the broker delete its oldest records at once, whatever the trim still needs; set discard: new first (nats stream edit {stream} --discard new)")]
    DiscardOld { stream: String },
}

impl Refusal {
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::BelowMinimum { .. } => "below_minimum",
            Refusal::BelowUsage { .. } => "below_usage",
            Refusal::AccountLimit(_) => "account_limit",
            Refusal::DiscardOld { .. } => "discard_old",
        }
    }
}

/// What the judgement let through, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub soft_ceiling: u64,
    /// Bytes the raise adds to the account's reservations (0 for a
    /// lowering).
    pub reserves: u64,
    /// Said when the account's limit could not be read.
    pub note: Option<String>,
}

/// Judges `target` against `facts`, in the order docs/runbook.md gives.
pub fn judge(target: u64, facts: &Facts, minimum: u64) -> Result<Judged, Refusal> {
    let b = |n: u64| format!("{} ({n} bytes)", human::bytes(n));
    if target < minimum {
        return Err(Refusal::BelowMinimum {
            target: b(target),
            minimum: b(minimum),
        });
    }
    let soft = soft_ceiling(target, facts.gate_reserve);
    if soft <= facts.usage {
        let least = least_above(facts.usage, facts.gate_reserve).max(minimum);
        return Err(Refusal::BelowUsage {
            target: b(target),
            soft: b(soft),
            usage: b(facts.usage),
            least: b(least),
            command: command(&facts.stream, least),
        });
    }
    let now = u64::try_from(facts.max_bytes).unwrap_or(0);
    // On discard: old a lower ceiling is an implicit purge of the oldest
    // records, whatever the trim still needs; a raise deletes nothing.
    if !facts.discard_new && (facts.max_bytes <= 0 || target < now) {
        return Err(Refusal::DiscardOld {
            stream: facts.stream.clone(),
        });
    }
    // The broker reserves the difference, on every replica.
    let reserves = target
        .saturating_sub(now)
        .saturating_mul(facts.replicas.max(1));
    let per_stream = |max: &Option<u64>| -> Result<(), Refusal> {
        match max {
            Some(m) if target > *m => Err(Refusal::AccountLimit(format!(
                "the account lets one stream have at most {}, under the {} asked for",
                b(*m),
                b(target)
            ))),
            _ => Ok(()),
        }
    };
    let note = match &facts.account {
        Account::Limited {
            max_storage,
            reserved,
            max_stream_bytes,
        } => {
            per_stream(max_stream_bytes)?;
            let left = max_storage.saturating_sub(*reserved);
            if reserves > left {
                return Err(Refusal::AccountLimit(format!(
                    "the raise reserves {} ({} more than now, on {} replica(s)) and the account's JetStream storage limit of {} has {} left ({} reserved by every stream's ceiling); free a reservation or raise the account's limit",
                    b(reserves),
                    human::bytes(target.saturating_sub(now)),
                    facts.replicas.max(1),
                    b(*max_storage),
                    b(left),
                    b(*reserved)
                )));
            }
            None
        }
        Account::Unlimited { max_stream_bytes } => {
            per_stream(max_stream_bytes)?;
            None
        }
        Account::Unreadable { error } => Some(format!(
            "the account's JetStream limits cannot be read ({error}); the broker decides whether it can grant the raise"
        )),
    };
    // Taken below 1 GiB only because allow_unsafe_limits lowered the
    // minimum: say so, as validate does.
    let unsafe_note = (target < GIB).then(|| {
        format!(
            "{} is below the safe minimum of 1 GiB (allowed only because retention.allow_unsafe_limits is true)",
            b(target)
        )
    });
    let note = match (unsafe_note, note) {
        (Some(u), Some(n)) => Some(format!("{u}; {n}")),
        (u, n) => u.or(n),
    };
    Ok(Judged {
        soft_ceiling: soft,
        reserves,
        note,
    })
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

/// FACTS (IO): one reading of the stream (its usage, ceiling, replicas,
/// discard policy) and of the account's JetStream limits; the read is kept
/// for the update, which checks nothing changed since.
pub async fn facts(
    broker: &Broker,
    domain: &Domain,
) -> Result<(Facts, crate::broker::capacity::Read), Outcome> {
    let stream = domain.stream.clone();
    let read = match broker.capacity_read(&stream).await {
        Ok(Some(r)) => r,
        Ok(None) => return Err(Outcome::Missing { stream }),
        Err(fault) => {
            return Err(Outcome::Unreadable {
                message: fault.to_string(),
            })
        }
    };
    let account = broker.account_limits(&read).await;
    let facts = Facts {
        stream,
        usage: read.bytes,
        max_bytes: read.max_bytes,
        replicas: read.replicas,
        // The rule the answer's reserve_bytes follows.
        gate_reserve: domain.gate_reserve,
        discard_new: read.discard_new,
        account,
    };
    Ok((facts, read))
}

/// What [`apply`] does: the ceiling to set (nothing when it is already
/// the target), and what the answer reports.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: u64,
    /// What the answer reports once it is applied.
    pub done: Done,
}

/// JUDGE (pure), then the plan: [`judge`] in the order docs/runbook.md
/// gives, and what the answer will report.
pub fn plan(target: u64, facts: &Facts, minimum: u64) -> Result<Plan, Refusal> {
    let judged = judge(target, facts, minimum)?;
    Ok(Plan {
        target,
        done: Done {
            stream: facts.stream.clone(),
            changed: i64::try_from(target).ok() != Some(facts.max_bytes),
            from: facts.max_bytes,
            to: target,
            soft_ceiling: judged.soft_ceiling,
            reserve_bytes: target - judged.soft_ceiling,
            usage: facts.usage,
            reserves: judged.reserves,
            note: judged.note,
        },
    })
}

/// APPLY (IO): the update of `max_bytes` alone, on the configuration read
/// (refused if it changed meanwhile), and the re-read that verifies it.
pub async fn apply(broker: &Broker, read: &crate::broker::capacity::Read, plan: Plan) -> Outcome {
    if !plan.done.changed {
        return Outcome::Done(plan.done);
    }
    let stream = plan.done.stream.clone();
    let target = plan.target;
    let target_i = i64::try_from(target).unwrap_or(i64::MAX);
    match broker.set_max_bytes(read, target_i).await {
        Ok(Ok(reported)) if reported == target_i => Outcome::Done(plan.done),
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

/// The gesture past its [`check`]: [`facts`], [`plan`] (the judge),
/// [`apply`]. The CLI and `POST …/capacity` call this.
pub async fn perform(config: &Config, broker: &Broker, domain: &Domain, target: u64) -> Outcome {
    let (facts, read) = match facts(broker, domain).await {
        Ok(f) => f,
        Err(o) => return o,
    };
    let minimum = capacity::minimum(config.retention.allow_unsafe_limits);
    match plan(target, &facts, minimum) {
        Ok(p) => apply(broker, &read, p).await,
        Err(refusal) => Outcome::Refused {
            stream: facts.stream,
            refusal,
        },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{Account, MIB};

    fn facts(usage: u64, max_bytes: i64, account: Account) -> Facts {
        Facts {
            stream: "LOG".into(),
            usage,
            max_bytes,
            replicas: 1,
            gate_reserve: true,
            discard_new: true,
            account,
        }
    }

    const OPEN: Account = Account::Unlimited {
        max_stream_bytes: None,
    };

    #[test]
    fn each_refusal_in_order() {
        let f = facts(100 * MIB, GIB as i64, OPEN);
        assert_eq!(judge(GIB - 1, &f, GIB).unwrap_err().code(), "below_minimum");
        let f = facts(2 * GIB, 3 * GIB as i64, OPEN);
        // 2 GiB's soft ceiling is 1.875 GiB, under the usage.
        let r = judge(2 * GIB, &f, GIB).unwrap_err();
        assert_eq!(r.code(), "below_usage");
        let least = least_above(2 * GIB, true);
        assert!(r.to_string().contains(&command("LOG", least)), "{r}");
        // A lowering that keeps above the usage is fair.
        let ok = judge(least, &f, GIB).expect("fair");
        assert_eq!(ok.reserves, 0);
        // On discard: old, a lowering deletes; a raise does not.
        let mut old = f.clone();
        old.discard_new = false;
        assert_eq!(judge(least, &old, GIB).unwrap_err().code(), "discard_old");
        assert!(judge(4 * GIB, &old, GIB).is_ok());
    }

    #[test]
    fn a_raise_is_judged_against_what_the_account_has_left() {
        let account = Account::Limited {
            max_storage: 10 * GIB,
            reserved: 6 * GIB,
            max_stream_bytes: None,
        };
        let f = facts(MIB, 2 * GIB as i64, account);
        // 2 GiB → 6 GiB reserves 4 GiB: exactly what is left.
        assert_eq!(judge(6 * GIB, &f, GIB).expect("fits").reserves, 4 * GIB);
        let r = judge(6 * GIB + MIB, &f, GIB).unwrap_err();
        assert_eq!(r.code(), "account_limit");
        assert!(
            r.to_string().contains("4.0 GiB (4294967296 bytes) left"),
            "{r}"
        );
        // Replicas multiply the reservation.
        let mut r3 = f.clone();
        r3.replicas = 3;
        assert_eq!(
            judge(4 * GIB, &r3, GIB).unwrap_err().code(),
            "account_limit"
        );
        // A stream limit of its own.
        let capped = facts(
            MIB,
            2 * GIB as i64,
            Account::Unlimited {
                max_stream_bytes: Some(3 * GIB),
            },
        );
        assert_eq!(
            judge(4 * GIB, &capped, GIB).unwrap_err().code(),
            "account_limit"
        );
        // Unreadable: said, and the broker decides.
        let blind = facts(
            MIB,
            2 * GIB as i64,
            Account::Unreadable {
                error: "timed out".into(),
            },
        );
        let ok = judge(400 * GIB, &blind, GIB).expect("the broker decides");
        assert!(ok.note.is_some_and(|n| n.contains("timed out")));
    }

    /// An operator's trial: a ceiling under 1 GiB taken only because of
    /// `allow_unsafe_limits` says so.
    #[test]
    fn an_unsafe_ceiling_is_taken_with_a_warning() {
        let f = facts(
            MIB,
            2 * GIB as i64,
            Account::Unlimited {
                max_stream_bytes: None,
            },
        );
        let ok = judge(100 * MIB, &f, MIB).expect("allowed with unsafe limits");
        assert!(
            ok.note
                .as_deref()
                .is_some_and(|n| n.contains("below the safe minimum of 1 GiB")
                    && n.contains("allow_unsafe_limits")),
            "{:?}",
            ok.note
        );
        assert!(judge(2 * GIB, &f, MIB).expect("safe").note.is_none());
    }

    /// The plan: the judge's refusal as the outcome, or what the answer
    /// reports, and nothing to write when the ceiling is the target.
    #[test]
    fn the_plan_reports_the_judgement_and_skips_a_ceiling_already_set() {
        let f = facts(100 * MIB, 2 << 30, OPEN);
        let p = plan(3 << 30, &f, MIB).expect("plan");
        assert!(p.done.changed);
        assert_eq!(
            (p.done.from, p.done.to, p.done.usage),
            (2 << 30, 3 << 30, 100 * MIB)
        );
        assert_eq!(p.done.reserve_bytes, (3 << 30) / 16);
        let same = plan(2 << 30, &f, MIB).expect("plan");
        assert!(!same.done.changed);
        assert_eq!(
            plan(MIB, &f, MIB).map(|_| ()).map_err(|r| r.code()),
            Err("below_usage")
        );
    }
}
