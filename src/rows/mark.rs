//! The mark a log carries in its own stream configuration's `metadata`
//! (docs/contract.md, The mark on the log's own configuration): when the
//! sidecar adopted it, and which floors bucket holds its memory. The floors
//! bucket can be lost with the buckets it guards, and its absence looks
//! like a log that was never trimmed; the log itself cannot be lost without
//! its records, so the mark lives there. Pure: metadata in, a mark out.

use std::collections::HashMap;

use super::Timestamp;

/// `crewlet.adopted_at`: the broker time of the adoption.
pub const MARK_ADOPTED_AT: &str = "crewlet.adopted_at";
/// `crewlet.floors_created`: the floors bucket stream's `created` at the
/// adoption.
pub const MARK_FLOORS_CREATED: &str = "crewlet.floors_created";

/// A log's mark as its metadata carries it. Present when either key is:
/// a key that does not parse is `None`, never a reason to forget that the
/// log was adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub adopted_at: Option<Timestamp>,
    pub floors_created: Option<Timestamp>,
}

impl Mark {
    /// The mark in a stream's `metadata`, if it carries one.
    pub fn from_metadata(metadata: &HashMap<String, String>) -> Option<Mark> {
        let adopted = metadata.get(MARK_ADOPTED_AT);
        let floors = metadata.get(MARK_FLOORS_CREATED);
        if adopted.is_none() && floors.is_none() {
            return None;
        }
        Some(Mark {
            adopted_at: adopted.and_then(|t| Timestamp::parse(t).ok()),
            floors_created: floors.and_then(|t| Timestamp::parse(t).ok()),
        })
    }

    /// The two keys as the metadata carries them.
    pub fn keys(adopted_at: Timestamp, floors_created: Timestamp) -> [(&'static str, String); 2] {
        [
            (MARK_ADOPTED_AT, adopted_at.to_rfc3339()),
            (MARK_FLOORS_CREATED, floors_created.to_rfc3339()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_read_from_either_key_and_a_bad_value_is_unknown_not_absent() {
        let at = Timestamp::parse("2026-12-06T01:02:03.5Z").expect("instant");
        let mut m: HashMap<String, String> = Mark::keys(at, at)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        m.insert("owner".into(), "team-a".into());
        assert_eq!(
            Mark::from_metadata(&m),
            Some(Mark {
                adopted_at: Some(at),
                floors_created: Some(at)
            })
        );
        m.insert(MARK_FLOORS_CREATED.into(), "yesterday".into());
        assert_eq!(
            Mark::from_metadata(&m),
            Some(Mark {
                adopted_at: Some(at),
                floors_created: None
            }),
            "a mangled key still says the log was adopted"
        );
        m.remove(MARK_ADOPTED_AT);
        m.remove(MARK_FLOORS_CREATED);
        assert_eq!(Mark::from_metadata(&m), None);
    }
}
