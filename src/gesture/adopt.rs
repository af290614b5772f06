//! `crewlet retention adopt -stream S [-confirm CREATED]`: a log that lost
//! the sidecar's memory (`memory_lost`: its floors bucket missing,
//! recreated, or without its row, while the log carries the adoption mark)
//! is opened afresh from what the buckets hold now (docs/trim-floor.md,
//! The log remembers that it was adopted). The five parts: [`check`] the
//! stream and `-confirm`; read the [`facts`] (the fresh read `status`
//! makes, and the answer with the adoption applied in memory); [`judge`]
//! them (pure, table-tested) into a [`Plan`]; [`apply`] it (the log's row
//! by compare-and-set, then the mark); render the [`Outcome`].

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::exit::Class;
use crate::floor::memory::Lost;
use crate::floor::{FloorState, NotReady};
use crate::rows::Timestamp;

/// Input refused before anything is read (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// The ask, checked.
#[derive(Debug, Clone)]
pub struct Checked {
    pub domain: Domain,
    /// `-confirm`: the live stream's `created`, repeated.
    pub confirm: Option<Timestamp>,
}

/// CHECK (pure): a configured stream, and `-confirm` an instant.
pub fn check(config: &Config, stream: &str, confirm: Option<&str>) -> Result<Checked, BadInput> {
    let (domain, confirm) =
        super::check_confirmed(config, stream, confirm, "adopt").map_err(BadInput)?;
    Ok(Checked { domain, confirm })
}

/// What the judge needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The live stream's `created`.
    pub live_created: Timestamp,
    /// What was lost (`None`: the memory is intact, or the log is NOT
    /// READY for another reason, named in `other`).
    pub lost: Option<Lost>,
    /// Another NOT READY reason that takes precedence (generation_unknown:
    /// its reanchor opens the memory afresh too).
    pub other: Option<String>,
    /// The trim now and once adopted (the answer with the adoption applied
    /// in memory, as `status --if-adopted` computes it).
    pub trim_to_now: u64,
    pub trim_to_adopted: u64,
    /// What would bind once adopted (empty: nothing).
    pub blocked_adopted: String,
    /// What the log sees now, in words (the nodes and live holds).
    pub seen: String,
}

/// What [`facts`] read beside the judge's facts: the floors row's
/// revision (`None`: no row), the floors bucket's `created`, the generation
/// and when it opened, and the broker's instant.
#[derive(Debug, Clone)]
pub struct Found {
    pub facts: Facts,
    pub revision: Option<u64>,
    pub floors_created: Option<Timestamp>,
    pub generation: u64,
    pub generation_opened_at: Option<Timestamp>,
    pub max_bytes: i64,
    pub now: DateTime<Utc>,
    /// The memory the fresh row opens with: the adopted answer's (`None`:
    /// that answer could not be computed; nothing is written then).
    pub opened: Option<super::Opened>,
}

/// Why the gesture could not go on (exit 3): the broker's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

/// FACTS (IO): the fresh read `status` makes, and the same answer computed
/// again with the adoption applied in memory.
pub async fn facts(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
) -> Result<Found, Unreachable> {
    let super::LiveRead {
        fresh,
        answer,
        live_created,
        now,
    } = super::live_read(broker, config, domain)
        .await
        .map_err(Unreachable)?;
    let crate::tick::Fresh {
        raw, parsed, reads, ..
    } = fresh;
    let answer = &answer;
    let (lost, other) = match &answer.not_ready {
        Some(NotReady::MemoryLost { lost, .. }) => (Some(*lost), None),
        Some(n @ NotReady::GenerationUnknown { .. }) => (None, Some(n.to_string())),
        _ => (None, None),
    };
    let revision = match raw.floors() {
        Some(Ok(entries)) => entries
            .iter()
            .find(|e| e.key == domain.stream)
            .map(|e| e.revision),
        _ => None,
    };
    let ask = crate::preview::Ask {
        adopt: vec![domain.stream.clone()],
        ..Default::default()
    };
    let policy = crate::floor::Policy::from_config(config, "");
    let adopted =
        match crate::preview::apply(config, &parsed, &reads, &ask, policy.fence_window, now) {
            Ok(changed) => {
                crate::tick::compute_each(config, &policy, &changed.rows, &changed.reads, now)
                    .into_iter()
                    .find(|a| a.stream == domain.stream)
            }
            Err(_) => None,
        };
    let seen = match &answer.not_ready {
        Some(NotReady::MemoryLost { lost, .. }) => crate::alarms::memory_lost_remedy(answer, lost),
        _ => String::new(),
    };
    let facts = Facts {
        live_created,
        lost,
        other,
        trim_to_now: answer.trim_to,
        trim_to_adopted: adopted.as_ref().map_or(0, |a| a.trim_to),
        blocked_adopted: adopted
            .as_ref()
            .map(|a| a.blocked_names(", "))
            .unwrap_or_default(),
        seen,
    };
    Ok(Found {
        facts,
        revision,
        floors_created: parsed.created.floors,
        generation: adopted.as_ref().map_or(0, |a| a.generation),
        generation_opened_at: adopted.as_ref().and_then(|a| a.generation_opened_at),
        max_bytes: answer.max_bytes,
        now,
        opened: adopted.as_ref().map(|a| super::Opened::of(a, false)),
    })
}

/// What `adopt` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No `-confirm`: say what was lost and what the trim would be, and
    /// refuse (exit 1). Nothing written.
    Show,
    /// `-confirm` names another instant than the live stream's created.
    ConfirmMismatch,
    /// The memory is intact: nothing to adopt.
    Intact,
    /// Another NOT READY case comes first (generation_unknown: reanchor).
    Other,
    /// The floors bucket is missing: `init` recreates it first.
    FloorsMissing,
    /// Adopt: the log's row, then its mark.
    Adopt,
}

impl Plan {
    pub fn class(&self) -> Class {
        match self {
            Plan::Show => Class::Pending,
            Plan::ConfirmMismatch | Plan::Intact | Plan::Other | Plan::FloorsMissing => {
                Class::Refused
            }
            Plan::Adopt => Class::Done,
        }
    }
}

/// JUDGE (pure): the plan for `facts` given `-confirm`.
pub fn judge(facts: &Facts, confirm: Option<Timestamp>) -> Plan {
    if facts.other.is_some() {
        return Plan::Other;
    }
    let Some(lost) = facts.lost else {
        return Plan::Intact;
    };
    match confirm {
        None => Plan::Show,
        Some(c) if c != facts.live_created => Plan::ConfirmMismatch,
        Some(_) if lost == Lost::FloorsMissing => Plan::FloorsMissing,
        Some(_) => Plan::Adopt,
    }
}

/// What an adoption came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The plan's refusal or showing, with what was found. Nothing written.
    Judged {
        plan: Plan,
        stream: String,
        facts: Facts,
    },
    /// Adopted: the row and the mark are written.
    Adopted {
        stream: String,
        generation: u64,
        floors_created: Timestamp,
    },
    /// A write the broker did not take (`lost`: a compare-and-set lost);
    /// what was written before it, if anything, is said.
    NotWritten { message: String, lost: bool },
}

impl crate::exit::Outcome for Outcome {
    fn class(&self) -> Class {
        match self {
            Outcome::Judged { plan, .. } => plan.class(),
            Outcome::Adopted { .. } => Class::Done,
            Outcome::NotWritten { lost: true, .. } => Class::Refused,
            Outcome::NotWritten { lost: false, .. } => Class::Unreachable,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Outcome::Judged { plan, .. } => match plan {
                Plan::Show => "shown",
                Plan::ConfirmMismatch => "confirm_mismatch",
                Plan::Intact => "memory_intact",
                Plan::Other => "not_memory_lost",
                Plan::FloorsMissing => "floors_missing",
                Plan::Adopt => "adopted",
            },
            Outcome::Adopted { .. } => "adopted",
            Outcome::NotWritten { lost: true, .. } => "not_taken",
            Outcome::NotWritten { lost: false, .. } => "unreachable",
        }
    }
}

/// The confirmed command.
pub fn command(stream: &str, live_created: Timestamp) -> String {
    format!("crewlet retention adopt -stream {stream} -confirm {live_created}")
}

/// APPLY (IO): the log's row first (no floor yet, no pins: the memory
/// opened afresh), by compare-and-set on the revision read, then the mark
/// naming this floors bucket. A failure between the two leaves the mark
/// naming the old bucket: the log stays `memory_lost`, and `adopt` run
/// again finishes it (the row's revision is read afresh).
pub async fn apply(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    found: &Found,
    by: &str,
) -> Outcome {
    let Some(floors_created) = found.floors_created else {
        return Outcome::NotWritten {
            message:
                "the floors bucket's created instant was not read; nothing written, run it again"
                    .into(),
            lost: false,
        };
    };
    let Some(opened) = &found.opened else {
        return Outcome::NotWritten {
            message: "the answer with the adoption applied could not be computed; nothing written, run it again".into(),
            lost: true,
        };
    };
    let live = found.facts.live_created;
    let now = Timestamp(found.now);
    let cap = u64::try_from(found.max_bytes).unwrap_or(0);
    let reserve = if domain.gate_reserve { cap / 16 } else { 0 };
    let row = json!({
        "domain": domain.name, "stream": domain.stream, "generation": found.generation,
        "stream_created": live, "generation_opened_at": found.generation_opened_at.unwrap_or(live),
        "floor": null, "trim_to": 0, "trim_floor_state": FloorState::None, "dry_run": !config.trim.enabled,
        "would_purge": null, "terms": [], "blocked_by": [], "held_since": null,
        "soft_ceiling_bytes": cap - reserve, "max_bytes": found.max_bytes,
        "by": by, "session": "", "at": now,
        "memory": opened.record, "format": crate::floor::members::FORMAT,
    });
    let body = serde_json::to_vec(&row).unwrap_or_default();
    // The memory opened afresh: its membership before the row naming it.
    if let Err(e) = opened
        .write(broker, &config.buckets.floors, &domain.stream)
        .await
    {
        return Outcome::NotWritten {
            message: format!("{e}; nothing written, run it again"),
            lost: true,
        };
    }
    if let Err(e) = broker
        .put_if(&config.buckets.floors, &domain.stream, body, found.revision)
        .await
    {
        return Outcome::NotWritten {
            message: format!("{e}; nothing written, run it again"),
            lost: true,
        };
    }
    match broker.write_mark(&domain.stream, now, floors_created).await {
        Ok(()) => Outcome::Adopted {
            stream: domain.stream.clone(),
            generation: found.generation,
            floors_created,
        },
        Err(e) => Outcome::NotWritten {
            message: format!(
                "the log's row was written but its mark was not ({e}); it stays memory_lost: run {} again",
                command(&domain.stream, live)
            ),
            lost: false,
        },
    }
}

/// RENDER: the outcome as `--json` prints it.
pub fn json(o: &Outcome) -> Option<Value> {
    match o {
        Outcome::Judged {
            plan,
            stream,
            facts,
        } => Some(json!({
            "stream": stream, "adopted": false, "live_created": facts.live_created,
            "lost": facts.lost.map(|l| l.to_string()), "not_ready": facts.other,
            "trim_to": facts.trim_to_now, "trim_to_adopted": facts.trim_to_adopted,
            "blocked_by_adopted": facts.blocked_adopted,
            "confirm_command": (*plan == Plan::Show).then(|| command(stream, facts.live_created)),
        })),
        Outcome::Adopted {
            stream,
            generation,
            floors_created,
        } => Some(
            json!({"stream": stream, "adopted": true, "generation": generation, "floors_created": floors_created}),
        ),
        Outcome::NotWritten { .. } => None,
    }
}

/// RENDER: the outcome in words: (stdout, the message for stderr).
pub fn text(o: &Outcome) -> (String, Option<String>) {
    match o {
        Outcome::Judged { plan, stream, facts } => {
            let head = format!("stream {stream}: live created {}\n", facts.live_created);
            match plan {
                Plan::Show | Plan::Adopt => {
                    let lost = facts.lost.map(|l| l.to_string()).unwrap_or_default();
                    let binds = if facts.blocked_adopted.is_empty() {
                        String::new()
                    } else {
                        format!(" (bound by {})", facts.blocked_adopted)
                    };
                    let init = if facts.lost == Some(Lost::FloorsMissing) {
                        "crewlet retention init, then "
                    } else {
                        ""
                    };
                    (
                        format!(
                            "{head}lost: {lost}\n{}\nonce adopted the trim would be up to {}{binds}; now nothing is trimmed\nto adopt it: {init}{}\n",
                            facts.seen,
                            facts.trim_to_adopted,
                            command(stream, facts.live_created)
                        ),
                        None,
                    )
                }
                Plan::ConfirmMismatch => (
                    head,
                    Some(format!(
                        "-confirm is not the live stream's created {}; nothing written",
                        facts.live_created
                    )),
                ),
                Plan::Intact => (
                    head,
                    Some(format!(
                        "{stream} has not lost the sidecar's memory; there is nothing to adopt, nothing written"
                    )),
                ),
                Plan::Other => (
                    head,
                    Some(format!(
                        "{stream} is NOT READY {}; that comes first (crewlet retention reanchor -stream {stream} prints its -confirm), nothing written",
                        facts.other.as_deref().unwrap_or("")
                    )),
                ),
                Plan::FloorsMissing => (
                    head,
                    Some(format!(
                        "the floors bucket is missing: create it first with crewlet retention init, then run {}; nothing written",
                        command(stream, facts.live_created)
                    )),
                ),
            }
        }
        Outcome::Adopted {
            stream,
            generation,
            floors_created,
        } => (
            format!("adopted {stream}: generation {generation}, its memory opened afresh in the floors bucket created {floors_created}; the next tick publishes its floor\n"),
            None,
        ),
        Outcome::NotWritten { message, .. } => (String::new(), Some(message.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_refuses_an_intact_memory_a_wrong_confirm_and_a_missing_bucket() {
        let c = Timestamp::parse("2026-12-06T00:00:00Z").expect("instant");
        let other = Timestamp::parse("2026-12-05T00:00:00Z").expect("instant");
        let facts = |lost: Option<Lost>, other: Option<&str>| Facts {
            live_created: c,
            lost,
            other: other.map(str::to_string),
            trim_to_now: 0,
            trim_to_adopted: 9,
            blocked_adopted: String::new(),
            seen: String::new(),
        };
        let cases: Vec<(&str, Facts, Option<Timestamp>, Plan)> = vec![
            ("intact", facts(None, None), Some(c), Plan::Intact),
            (
                "lost, shown",
                facts(Some(Lost::NoRow), None),
                None,
                Plan::Show,
            ),
            (
                "lost, wrong confirm",
                facts(Some(Lost::NoRow), None),
                Some(other),
                Plan::ConfirmMismatch,
            ),
            (
                "lost, confirmed",
                facts(Some(Lost::NoRow), None),
                Some(c),
                Plan::Adopt,
            ),
            (
                "bucket missing",
                facts(Some(Lost::FloorsMissing), None),
                Some(c),
                Plan::FloorsMissing,
            ),
            (
                "bucket missing, shown",
                facts(Some(Lost::FloorsMissing), None),
                None,
                Plan::Show,
            ),
            (
                "generation unknown first",
                facts(None, Some("generation_unknown")),
                Some(c),
                Plan::Other,
            ),
        ];
        for (name, f, confirm, want) in cases {
            assert_eq!(judge(&f, confirm), want, "{name}");
        }
    }
}
