//! PURE: whether a log still has the sidecar's memory (docs/trim-floor.md,
//! The log remembers that it was adopted). The floors bucket can be lost
//! with the positions and holds buckets it guards, and a log whose floors
//! row is gone looks like a log never trimmed: the pins that row carried
//! would be lifted without a word. The log's own configuration carries a
//! mark (when it was adopted, and the `created` of the floors bucket that
//! holds its memory); a marked log whose floors bucket is missing, was
//! recreated, or holds no row for it has lost its memory, and nothing is
//! published or purged for it until an operator adopts it again.

use crate::rows::{Mark, Timestamp};

/// The floors bucket as this tick read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorsBucket {
    Missing,
    /// A read that failed: the floors row is unreadable (its own NOT
    /// READY), and the mark is not judged.
    Unreadable,
    /// Read, with its `created` (`None` where the reader did not say).
    Read(Option<Timestamp>),
}

/// What was lost, in the words status prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The floors bucket does not exist.
    FloorsMissing,
    /// The floors bucket was created again after the adoption.
    FloorsRecreated {
        adopted_with: Timestamp,
        now: Timestamp,
    },
    /// The floors bucket is the adoption's, and holds no row for the log.
    NoRow,
    /// The membership the row names cannot be read back whole (a
    /// `_members` key missing, or its digest differs) while a bucket it
    /// was written from was recreated, or while it carries members.
    MembershipUnreadable,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::FloorsMissing => f.write_str("the floors bucket is missing"),
            Lost::FloorsRecreated { adopted_with, now } => write!(
                f,
                "the floors bucket was recreated (created {now}; the log was adopted with the one created {adopted_with})"
            ),
            Lost::NoRow => f.write_str("the floors bucket holds no row for it"),
            Lost::MembershipUnreadable => f.write_str(
                "the membership the floors row names cannot be read back whole, and a bucket it was kept for was recreated",
            ),
        }
    }
}

/// Why the mark is written after this tick's publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkDue {
    /// The first publish for a log never adopted.
    First,
    /// The memory is intact but the log carries no mark, or one that does
    /// not name this floors bucket: removed by a declarative tool, written
    /// by a release before marks, or a mark the tick could not parse
    /// (`marker_restored` in the log).
    Restore { adopted_at: Option<Timestamp> },
}

/// The judgement of a log's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// The mark names this floors bucket and it holds the log's row.
    Intact,
    /// Intact, and the mark is to be written (before any purge).
    Due(MarkDue),
    /// The log has lost the sidecar's memory: NOT READY `memory_lost`.
    Lost(Lost),
    /// Not judged: the floors bucket or the stream could not be read (each
    /// blocks on its own), or the floors bucket's `created` is unknown.
    Unknown,
}

/// PURE: the log's memory from its mark, the floors bucket and whether that
/// bucket holds the log's row.
pub fn judge(mark: Option<&Mark>, floors: FloorsBucket, row: bool) -> Memory {
    match (mark, floors) {
        (_, FloorsBucket::Unreadable) => Memory::Unknown,
        // Never adopted, and nothing to write the row into: the publish
        // fails and says so; the mark waits for the first publish.
        (None, FloorsBucket::Missing) => Memory::Unknown,
        (Some(_), FloorsBucket::Missing) => Memory::Lost(Lost::FloorsMissing),
        (None, FloorsBucket::Read(_)) if row => Memory::Due(MarkDue::Restore { adopted_at: None }),
        (None, FloorsBucket::Read(_)) => Memory::Due(MarkDue::First),
        (Some(m), FloorsBucket::Read(now)) => match (m.floors_created, now) {
            (Some(adopted_with), Some(now)) if adopted_with != now => {
                Memory::Lost(Lost::FloorsRecreated { adopted_with, now })
            }
            _ if !row => Memory::Lost(Lost::NoRow),
            (Some(_), Some(_)) => Memory::Intact,
            // A mark whose bucket key does not parse, over a row that is
            // there: the memory is intact, and the mark is written whole.
            (None, Some(_)) => Memory::Due(MarkDue::Restore {
                adopted_at: m.adopted_at,
            }),
            (_, None) => Memory::Unknown,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).expect("instant")
    }

    #[test]
    fn each_case_of_a_logs_memory() {
        let (old, new) = (at("2026-12-01T00:00:00Z"), at("2026-12-06T00:00:00Z"));
        let marked = Mark {
            adopted_at: Some(old),
            floors_created: Some(old),
        };
        let mangled = Mark {
            adopted_at: Some(old),
            floors_created: None,
        };
        use FloorsBucket::*;
        let cases: Vec<(&str, Option<&Mark>, FloorsBucket, bool, Memory)> = vec![
            (
                "first adoption",
                None,
                Read(Some(old)),
                false,
                Memory::Due(MarkDue::First),
            ),
            (
                "a row without a mark: restored",
                None,
                Read(Some(old)),
                true,
                Memory::Due(MarkDue::Restore { adopted_at: None }),
            ),
            (
                "never adopted, no floors bucket",
                None,
                Missing,
                false,
                Memory::Unknown,
            ),
            (
                "intact",
                Some(&marked),
                Read(Some(old)),
                true,
                Memory::Intact,
            ),
            (
                "floors bucket lost",
                Some(&marked),
                Missing,
                false,
                Memory::Lost(Lost::FloorsMissing),
            ),
            (
                "floors bucket recreated, empty",
                Some(&marked),
                Read(Some(new)),
                false,
                Memory::Lost(Lost::FloorsRecreated {
                    adopted_with: old,
                    now: new,
                }),
            ),
            (
                "floors bucket recreated, a row written by a release before marks",
                Some(&marked),
                Read(Some(new)),
                true,
                Memory::Lost(Lost::FloorsRecreated {
                    adopted_with: old,
                    now: new,
                }),
            ),
            (
                "the row deleted",
                Some(&marked),
                Read(Some(old)),
                false,
                Memory::Lost(Lost::NoRow),
            ),
            (
                "a mangled mark over an intact row",
                Some(&mangled),
                Read(Some(old)),
                true,
                Memory::Due(MarkDue::Restore {
                    adopted_at: Some(old),
                }),
            ),
            (
                "a mangled mark without a row",
                Some(&mangled),
                Read(Some(old)),
                false,
                Memory::Lost(Lost::NoRow),
            ),
            (
                "floors unreadable",
                Some(&marked),
                Unreadable,
                false,
                Memory::Unknown,
            ),
        ];
        for (name, mark, floors, row, want) in cases {
            assert_eq!(judge(mark, floors, row), want, "{name}");
        }
    }
}
