//! `crewlet retention reanchor -stream S [-confirm CREATED]`: adopt a
//! recreated or restored stream by opening the next generation of its
//! floor (docs/decisions.md, "Generations and reanchor"). The five parts:
//! [`check`] the stream and `-confirm`; read the [`facts`] (the live
//! stream, the floors row, the positions, the gates view); [`case`] and
//! [`judge`] them (pure, table-tested) into a [`Plan`]; [`apply`] a plan
//! that opens a generation (the anchor, then the floors row by
//! compare-and-set); render the [`Outcome`] with [`json`] or [`text`].

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::exit::Class;
use crate::floor::{FloorState, GateFault, NotReady};
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
        super::check_confirmed(config, stream, confirm, "reanchor").map_err(BadInput)?;
    Ok(Checked { domain, confirm })
}

/// The live stream, as the read saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    pub created: Timestamp,
    pub last_seq: u64,
    pub max_bytes: i64,
}

/// What [`facts`] read: the judge's [`Facts`], the live stream, the floors
/// row's revision (for the compare-and-set) and the broker's instant (the
/// generation opens at it).
#[derive(Debug, Clone)]
pub struct Found {
    pub facts: Facts,
    pub live: Live,
    pub revision: Option<u64>,
    /// The floors bucket's `created`, for the log's mark.
    pub floors_created: Option<Timestamp>,
    pub now: DateTime<Utc>,
    /// The memory the new generation's row opens with: the membership of
    /// the answer read now.
    pub opened: super::Opened,
}

/// Why the gesture could not go on (exit 3): the broker's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

/// FACTS (IO): the same fresh read `status` makes (the live stream, every
/// bucket, each domain's answer), reduced to what the judge needs.
pub async fn facts(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
) -> Result<Found, Unreachable> {
    let super::LiveRead {
        fresh,
        answer,
        live_created,
        // The generation opens at the broker's instant.
        now,
    } = super::live_read(broker, config, domain)
        .await
        .map_err(Unreachable)?;
    let crate::tick::Fresh {
        raw: rows, parsed, ..
    } = fresh;
    let live = Live {
        created: live_created,
        last_seq: answer.last_seq,
        max_bytes: answer.max_bytes,
    };
    let raw_row = match rows.floors() {
        Some(Ok(entries)) => entries.iter().find(|e| e.key == domain.stream),
        Some(Err(e)) => return Err(Unreachable(e.to_string())),
        None => return Err(Unreachable("the floors rows were not read whole".into())),
    };
    let revision = raw_row.map(|e| e.revision);
    let row = match parsed.published(&domain.stream) {
        Ok(p) => Ok(p.map(|(p, _)| (p.generation, p.stream_created))),
        // What the unreadable row still shows of its generation, if anything.
        Err(error) => Err(UnreadableRow {
            error: error.to_string(),
            generation: raw_row
                .and_then(|e| serde_json::from_slice::<Value>(&e.value).ok())
                .and_then(|v| v.get("generation").and_then(Value::as_u64)),
        }),
    };
    // Every generation seen of this incarnation: the positions, and the
    // anchor and cursor the sidecar keeps beside the floors row.
    let highest_position_generation = parsed
        .positions
        .as_ref()
        .ok()
        .and_then(|p| {
            p.get(&domain.stream)?
                .values()
                .filter_map(|r| r.as_ref().ok().map(|r| r.generation))
                .max()
        })
        .max(crate::floor::recorded_generation(
            &parsed,
            &domain.stream,
            Some(live.created),
        ));
    let facts = Facts {
        live_created: live.created,
        last_seq: live.last_seq,
        row,
        ahead: answer.not_ready == Some(NotReady::AheadOfLog),
        // The gates view's cursor past the log's end is the other mark of
        // a restored log: its gate rows name records it no longer holds.
        cursor_past: answer.gate_view.as_ref().and_then(|v| match &v.error {
            Some(GateFault::CursorPastLog { cursor, .. }) => Some(*cursor),
            _ => None,
        }),
        highest_position_generation,
    };
    Ok(Found {
        facts,
        live,
        revision,
        floors_created: parsed.created.floors,
        now,
        opened: super::Opened::of(&answer, true),
    })
}

/// What a reanchor came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No `-confirm`: the case, and the command that opens the next
    /// generation when it opens one. Nothing written.
    Shown {
        stream: String,
        live_created: Timestamp,
        case: String,
        opens: Option<u64>,
    },
    /// `-confirm` names another instant than the live stream's created.
    ConfirmMismatch {
        confirm: Timestamp,
        live_created: Timestamp,
    },
    /// Confirmed, but the case opens no generation.
    NothingToOpen { case: String },
    /// Generation `generation` opened, keyed to `stream_created`.
    Opened {
        stream: String,
        generation: u64,
        stream_created: Timestamp,
    },
    /// A write the broker did not take (`lost`: a compare-and-set lost,
    /// exit 1), or no answer (exit 3); nothing written.
    NotWritten { message: String, lost: bool },
}

impl crate::exit::Outcome for Outcome {
    fn class(&self) -> Class {
        match self {
            Outcome::Shown { .. } => Plan::Show.class(),
            Outcome::ConfirmMismatch { .. } => Plan::ConfirmMismatch.class(),
            Outcome::NothingToOpen { .. } => Plan::NothingToOpen.class(),
            Outcome::Opened { .. } => Class::Done,
            Outcome::NotWritten { lost: true, .. } => Class::Refused,
            Outcome::NotWritten { lost: false, .. } => Class::Unreachable,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Outcome::Shown { .. } => "shown",
            Outcome::ConfirmMismatch { .. } => "confirm_mismatch",
            Outcome::NothingToOpen { .. } => "nothing_to_open",
            Outcome::Opened { .. } => "reanchored",
            Outcome::NotWritten { lost: true, .. } => "not_taken",
            Outcome::NotWritten { lost: false, .. } => "unreachable",
        }
    }
}

/// The command that opens the next generation on the live stream.
fn command(stream: &str, live_created: Timestamp) -> String {
    format!("crewlet retention reanchor -stream {stream} -confirm {live_created}")
}

/// The judgement carried to its outcome, or the generation to open: the
/// case ([`case`]) and the plan ([`judge`]) of what was found.
pub fn decide(checked: &Checked, found: &Found) -> Result<u64, Outcome> {
    let decided = case(&found.facts);
    let words = decided.words(found.live.last_seq);
    match judge(&decided, found.live.created, checked.confirm) {
        Plan::Open { next } => Ok(next),
        Plan::Show => Err(Outcome::Shown {
            stream: checked.domain.stream.clone(),
            live_created: found.live.created,
            case: words,
            opens: decided.opens(),
        }),
        Plan::ConfirmMismatch => Err(Outcome::ConfirmMismatch {
            confirm: checked.confirm.unwrap_or(found.live.created),
            live_created: found.live.created,
        }),
        Plan::NothingToOpen => Err(Outcome::NothingToOpen { case: words }),
    }
}

/// APPLY (IO): generation `next` opened. The anchor first, beside the
/// floors bucket: if the row is lost later, before any node reports in
/// this generation, the anchor still says the log is past generation 0.
/// Written before the row, so a failure between the two can only make a
/// lost row read as a later generation than it was (the safe direction).
/// Then the floors row, by compare-and-set on the revision read.
pub async fn apply(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    found: &Found,
    next: u64,
    by: &str,
) -> Outcome {
    let live = found.live;
    let now = Timestamp(found.now);
    let cap = u64::try_from(live.max_bytes).unwrap_or(0);
    let reserve = if domain.gate_reserve { cap / 16 } else { 0 };
    let row = json!({
        "domain": domain.name, "stream": domain.stream, "generation": next,
        "stream_created": live.created, "generation_opened_at": now, "floor": null, "trim_to": 0,
        "trim_floor_state": FloorState::NoneAtGeneration, "dry_run": !config.trim.enabled,
        "would_purge": null, "terms": [], "blocked_by": [], "held_since": null,
        "soft_ceiling_bytes": cap - reserve, "max_bytes": live.max_bytes,
        "by": by, "session": "", "at": now,
        "memory": found.opened.record, "format": crate::floor::members::FORMAT,
    });
    let body = serde_json::to_vec(&row).unwrap_or_default();
    let anchor = crate::gate::Anchor {
        stream: domain.stream.clone(),
        generation: next,
        stream_created: live.created,
        generation_opened_at: now,
        by: by.to_string(),
        format: crate::rows::FORMAT,
    };
    // The membership before the row naming it: the nodes and holds seen
    // now stay remembered across the new generation's first ticks.
    if let Err(e) = found
        .opened
        .write(broker, &config.buckets.floors, &domain.stream)
        .await
    {
        return Outcome::NotWritten {
            message: format!("{e}; nothing written, run it again"),
            lost: false,
        };
    }
    if let Err(e) = broker
        .kv_put(
            &config.buckets.gates,
            &crate::gate::Anchor::key(&domain.stream),
            serde_json::to_vec(&anchor).unwrap_or_default(),
        )
        .await
    {
        return Outcome::NotWritten {
            message: format!(
                "recording the generation in {}: {e}; nothing written, run it again",
                config.buckets.gates
            ),
            lost: false,
        };
    }
    match broker
        .put_if(&config.buckets.floors, &domain.stream, body, found.revision)
        .await
    {
        // A reanchor is an adoption: the log's mark names the generation's
        // floors bucket (docs/trim-floor.md, The log remembers that it was
        // adopted). A mark not written is logged: the mark already there
        // still names this floors bucket unless that was recreated, and
        // then the log reads memory_lost, and `adopt` finishes it.
        Ok(_) => {
            match found.floors_created {
                Some(floors) => {
                    if let Err(e) = broker.write_mark(&domain.stream, now, floors).await {
                        tracing::warn!(event = "mark_failed", stream = %domain.stream, error = %e, "the reanchored log's mark was not written");
                    }
                }
                None => {
                    tracing::warn!(event = "mark_failed", stream = %domain.stream, "the floors bucket's created was not read: the reanchored log's mark was not written");
                }
            }
            Outcome::Opened {
                stream: domain.stream.clone(),
                generation: next,
                stream_created: live.created,
            }
        }
        // A compare-and-set that lost, or no answer: refused as it stands.
        Err(e) => Outcome::NotWritten {
            message: format!("{e}; nothing written, run it again"),
            lost: true,
        },
    }
}

/// RENDER: the outcome as `--json` prints it (`None`: said on stderr as a
/// refusal or an error, in the format asked for).
pub fn json(o: &Outcome) -> Option<Value> {
    match o {
        Outcome::Shown {
            stream,
            live_created,
            case,
            opens,
        } => Some(
            json!({"stream": stream, "live_created": live_created, "case": case,
                   "opens_generation": opens, "confirm_command": opens.map(|_| command(stream, *live_created)), "reanchored": false}),
        ),
        Outcome::Opened {
            stream,
            generation,
            stream_created,
        } => Some(
            json!({"stream": stream, "reanchored": true, "generation": generation, "stream_created": stream_created}),
        ),
        _ => None,
    }
}

/// RENDER: the outcome in words: (stdout, the message for stderr).
pub fn text(o: &Outcome) -> (String, Option<String>) {
    match o {
        Outcome::Shown {
            stream,
            live_created,
            case,
            opens,
        } => {
            let mut out = format!("stream {stream}: live created {live_created}\ncase: {case}\n");
            if let Some(next) = opens {
                out.push_str(&format!(
                    "to open generation {next} on it: {}\n",
                    command(stream, *live_created)
                ));
            }
            (out, None)
        }
        Outcome::Opened {
            stream,
            generation,
            stream_created,
        } => (
            format!("reanchored {stream}: generation {generation} keyed to created {stream_created}; no floor until the first tick on it\n"),
            None,
        ),
        Outcome::NothingToOpen { case } => (format!("refused: {case}; nothing written\n"), None),
        Outcome::ConfirmMismatch {
            confirm,
            live_created,
        } => (
            String::new(),
            Some(format!(
                "-confirm {confirm} is not the live stream's created {live_created}; nothing written"
            )),
        ),
        Outcome::NotWritten { message, .. } => (String::new(), Some(message.clone())),
    }
}

/// What `reanchor` does with a case and its `-confirm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No `-confirm`: show the case and, if it opens one, the command that
    /// opens the next generation. Nothing written.
    Show,
    /// `-confirm` names another instant than the live stream's created.
    ConfirmMismatch,
    /// Confirmed, but the case opens no generation.
    NothingToOpen,
    /// Open generation `next`, keyed to the live stream.
    Open { next: u64 },
}

impl Plan {
    /// Showing is done as far as it goes and says how to finish (exit 1);
    /// a refusal is exit 1; opening is done (exit 0).
    pub fn class(&self) -> Class {
        match self {
            Plan::Show => Class::Pending,
            Plan::ConfirmMismatch | Plan::NothingToOpen => Class::Refused,
            Plan::Open { .. } => Class::Done,
        }
    }
}

/// The plan for `case` given `-confirm` (`None` when not passed).
pub fn judge(case: &Case, live_created: Timestamp, confirm: Option<Timestamp>) -> Plan {
    match (confirm, case.opens()) {
        (None, _) => Plan::Show,
        (Some(c), _) if c != live_created => Plan::ConfirmMismatch,
        (Some(_), None) => Plan::NothingToOpen,
        (Some(_), Some(next)) => Plan::Open { next },
    }
}

/// What the command found about the stream and its floors row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The live stream's `created`.
    pub live_created: Timestamp,
    pub last_seq: u64,
    /// The floors row: `Ok(None)` when there is none, `Err` when it does
    /// not parse (with the generation it still shows, if any).
    pub row: Result<Option<(u64, Option<Timestamp>)>, UnreadableRow>,
    /// A counted node reports a position past the log's end.
    pub ahead: bool,
    /// The gates view's cursor is past the log's end.
    pub cursor_past: Option<u64>,
    /// The highest generation any positions row of the stream names.
    pub highest_position_generation: Option<u64>,
}

/// A floors row that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableRow {
    pub error: String,
    /// The `generation` it carries, when that much can be read.
    pub generation: Option<u64>,
}

/// The case, each with the generation a confirmed reanchor opens (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Case {
    /// No floor yet: the first tick adopts the stream.
    NoFloor,
    /// Nothing to adopt: the floor belongs to this stream.
    Current { generation: u64 },
    /// The stream was deleted and remade.
    Recreated {
        generation: u64,
        floor_created: Timestamp,
    },
    /// Same `created`, positions past the log's end: restored from a copy.
    RestoredAhead { generation: u64 },
    /// Same `created`, the gates view's cursor past the log's end.
    RestoredCursor { generation: u64, cursor: u64 },
    /// There is no floors row, but positions name generation `highest`:
    /// the row was lost, and the next generation is opened above it.
    Lost { highest: u64 },
    /// The floors row cannot be read: only a confirmed reanchor replaces it
    /// (a tick never overwrites it), with a generation above any it or the
    /// positions rows name, so that every old position counts at 0.
    Unreadable { error: String, next: u64 },
}

impl Case {
    /// The generation a confirmed reanchor opens; `None`: it refuses.
    pub fn opens(&self) -> Option<u64> {
        match self {
            Case::NoFloor | Case::Current { .. } => None,
            Case::Recreated { generation, .. }
            | Case::RestoredAhead { generation }
            | Case::RestoredCursor { generation, .. } => Some(generation + 1),
            Case::Unreadable { next, .. } => Some(*next),
            Case::Lost { highest } => Some(highest + 1),
        }
    }

    pub fn words(&self, last_seq: u64) -> String {
        match self {
            Case::NoFloor => {
                "no floor has been published for this stream yet: the first tick adopts it".into()
            }
            Case::Current { .. } => {
                "current: the floor already belongs to this stream; nothing to reanchor".into()
            }
            Case::Recreated {
                generation,
                floor_created,
            } => format!("recreated: the floor (generation {generation}) belongs to {floor_created}"),
            Case::RestoredAhead { generation } => format!(
                "restored: positions of generation {generation} are past the log's end ({last_seq})"
            ),
            Case::RestoredCursor { cursor, .. } => format!(
                "restored: the gates view's cursor ({cursor}) is past the log's end ({last_seq})"
            ),
            Case::Lost { highest } => format!(
                "lost: there is no floors row, but positions name generation {highest}; a confirmed reanchor opens generation {}",
                highest + 1
            ),
            Case::Unreadable { error, .. } => format!(
                "unreadable: the floors row cannot be read ({error}); a confirmed reanchor replaces it"
            ),
        }
    }
}

pub fn case(f: &Facts) -> Case {
    match &f.row {
        Err(u) => {
            let seen = u
                .generation
                .into_iter()
                .chain(f.highest_position_generation)
                .max()
                .unwrap_or(0);
            Case::Unreadable {
                error: u.error.clone(),
                next: seen + 1,
            }
        }
        // Without a floor the first tick adopts the stream, unless it is
        // restored (positions or the gates cursor past its end): then it
        // never would, and generation 1 is opened on it.
        Ok(None) if f.highest_position_generation.is_some_and(|g| g > 0) => Case::Lost {
            highest: f.highest_position_generation.unwrap_or(0),
        },
        Ok(None) if f.ahead => Case::RestoredAhead { generation: 0 },
        Ok(None) => match f.cursor_past {
            Some(cursor) => Case::RestoredCursor {
                generation: 0,
                cursor,
            },
            None => Case::NoFloor,
        },
        Ok(Some((generation, created))) => {
            let generation = *generation;
            match created {
                Some(c) if *c != f.live_created => Case::Recreated {
                    generation,
                    floor_created: *c,
                },
                _ if f.ahead => Case::RestoredAhead { generation },
                _ => match f.cursor_past {
                    Some(cursor) => Case::RestoredCursor { generation, cursor },
                    None => Case::Current { generation },
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap_or(Timestamp(chrono::DateTime::<chrono::Utc>::MIN_UTC))
    }

    #[test]
    fn each_case() {
        let live = at("2026-11-30T01:02:03.418226517Z");
        let base = Facts {
            live_created: live,
            last_seq: 50,
            row: Ok(Some((0, Some(live)))),
            ahead: false,
            cursor_past: None,
            highest_position_generation: Some(0),
        };
        let check = |f: Facts, want: Case, opens: Option<u64>| {
            let c = case(&f);
            assert_eq!(c, want);
            assert_eq!(c.opens(), opens, "{c:?}");
        };
        check(base.clone(), Case::Current { generation: 0 }, None);
        check(
            Facts {
                row: Ok(None),
                ..base.clone()
            },
            Case::NoFloor,
            None,
        );
        // A lost row: positions of a later generation than 0.
        check(
            Facts {
                row: Ok(None),
                highest_position_generation: Some(2),
                ..base.clone()
            },
            Case::Lost { highest: 2 },
            Some(3),
        );
        let old = at("2026-11-02T10:00:00Z");
        check(
            Facts {
                row: Ok(Some((3, Some(old)))),
                ..base.clone()
            },
            Case::Recreated {
                generation: 3,
                floor_created: old,
            },
            Some(4),
        );
        check(
            Facts {
                ahead: true,
                ..base.clone()
            },
            Case::RestoredAhead { generation: 0 },
            Some(1),
        );
        check(
            Facts {
                cursor_past: Some(80),
                ..base.clone()
            },
            Case::RestoredCursor {
                generation: 0,
                cursor: 80,
            },
            Some(1),
        );
        // Unreadable: above what the row still shows and what positions name.
        let unreadable = |generation| Facts {
            row: Err(UnreadableRow {
                error: "floors key S: expected value".into(),
                generation,
            }),
            highest_position_generation: Some(2),
            ..base.clone()
        };
        assert_eq!(case(&unreadable(None)).opens(), Some(3));
        assert_eq!(
            judge(&case(&unreadable(None)), base.live_created, None),
            Plan::Show
        );
        assert_eq!(case(&unreadable(Some(5))).opens(), Some(6));
        assert!(case(&unreadable(None))
            .words(50)
            .contains("a confirmed reanchor replaces it"));
    }

    #[test]
    fn judge_table() {
        let live = Timestamp::parse("2026-12-02T05:00:00Z").expect("an instant");
        let other = Timestamp::parse("2026-12-01T05:00:00Z").expect("an instant");
        let opens = Case::Lost { highest: 4 };
        let none = Case::Current { generation: 2 };
        let rows = [
            (&opens, None, Plan::Show, Class::Pending),
            (&none, None, Plan::Show, Class::Pending),
            (&opens, Some(other), Plan::ConfirmMismatch, Class::Refused),
            (&none, Some(other), Plan::ConfirmMismatch, Class::Refused),
            (&none, Some(live), Plan::NothingToOpen, Class::Refused),
            (&opens, Some(live), Plan::Open { next: 5 }, Class::Done),
        ];
        for (case, confirm, plan, class) in rows {
            let got = judge(case, live, confirm);
            assert_eq!(got, plan, "{case:?} confirm {confirm:?}");
            assert_eq!(got.class(), class, "{case:?} confirm {confirm:?}");
        }
    }
}
