//! PURE: which case a `reanchor` is in (docs/decisions.md, "Generations and reanchor"), and what a
//! confirmed one opens. The command reads the [`Facts`], calls [`case`]
//! and [`judge`], writes what the plan says, and prints.

use crate::exit::Class;
use crate::rows::Instant;

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
pub fn judge(case: &Case, live_created: Instant, confirm: Option<Instant>) -> Plan {
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
    pub live_created: Instant,
    pub last_seq: u64,
    /// The floors row: `Ok(None)` when there is none, `Err` when it does
    /// not parse (with the generation it still shows, if any).
    pub row: Result<Option<(u64, Option<Instant>)>, Unreadable>,
    /// A counted node reports a position past the log's end.
    pub ahead: bool,
    /// The gates view's cursor is past the log's end.
    pub cursor_past: Option<u64>,
    /// The highest generation any positions row of the stream names.
    pub highest_position_generation: Option<u64>,
}

/// A floors row that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
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
        floor_created: Instant,
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

    fn at(s: &str) -> Instant {
        Instant::parse(s).unwrap_or(Instant(chrono::DateTime::<chrono::Utc>::MIN_UTC))
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
            row: Err(Unreadable {
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
        let live = Instant::parse("2026-12-02T05:00:00Z").expect("an instant");
        let other = Instant::parse("2026-12-01T05:00:00Z").expect("an instant");
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
