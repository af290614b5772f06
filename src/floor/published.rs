//! The floors row as the next tick and the gestures read it back: the
//! fields an answer builds on (the floor, the generation, `held_since`,
//! each term's `pinned_since`, the gates view, the memory), parsed
//! strictly where a wrong value would move a purge and leniently where a
//! field only informs. What the row is written as is `row.rs`.

use serde::Deserialize;

use super::answer::{FloorState, GateFault, TermName};
use crate::rows::{Timestamp, Unreadable};

/// Who published the floors row an answer read, and under what.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedBy {
    pub by: String,
    pub session: String,
    pub at: Timestamp,
    /// Its `config` fields (empty in a row of an older version).
    pub config: crate::floor::ConfigFields,
}

/// The fields of a published floors row that the next tick needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PublishedFloor {
    pub stream: String,
    pub generation: u64,
    pub stream_created: Option<Timestamp>,
    #[serde(default)]
    pub generation_opened_at: Option<Timestamp>,
    pub floor: Option<u64>,
    pub trim_floor_state: FloorState,
    #[serde(default)]
    pub blocked_by: Vec<TermName>,
    #[serde(default)]
    pub held_since: Option<Timestamp>,
    #[serde(default)]
    pub dry_run: bool,
    pub at: Timestamp,
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub by: String,
    /// The digest of the configuration it was published under (absent in
    /// rows of older versions).
    #[serde(default)]
    pub config_digest: Option<String>,
    /// The configuration fields it was published under (read leniently:
    /// a row of an older version has none).
    #[serde(default, deserialize_with = "lenient")]
    pub config: Option<crate::floor::ConfigFields>,
    /// The holder's gates view as published: its fault carries over to
    /// readers that do not absorb (status, other sidecars). Read leniently:
    /// a field that only informs must never make the row unreadable.
    #[serde(default, deserialize_with = "lenient")]
    pub gate_view: Option<PublishedGateView>,
    /// The archive state as published, parsed where it is used: a shape
    /// that does not parse makes `archive_floor` unreadable, not the row.
    #[serde(default)]
    pub archive: Option<serde_json::Value>,
    /// The terms as published, for their `pinned_since` (read leniently:
    /// a row of an older version has none, and starts the pins afresh).
    #[serde(default, deserialize_with = "lenient")]
    pub terms: Option<Vec<PublishedTerm>>,
    /// The pins the answer was computed from (docs/trim-floor.md, A lost
    /// bucket lifts no pin). Read strictly: pins that do not parse are not
    /// "no pins" (a row of an older version has none).
    #[serde(default)]
    pub pins: Option<super::carried::PinsRecord>,
    /// The memory this row's answer kept (this release's rows; the
    /// previous release's carry `pins` instead). Read strictly: a memory
    /// that does not parse is not "no memory".
    #[serde(default)]
    pub memory: Option<super::members::MemoryRecord>,
    /// The row's format (none: the previous release's, format 1).
    #[serde(default)]
    pub format: Option<u32>,
}

/// The part of a published term the next answer needs: where it stood and
/// since when it pinned.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PublishedTerm {
    pub term: TermName,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub seq: Option<u64>,
    #[serde(default)]
    pub pinned_since: Option<Timestamp>,
}

/// The part of a published gates view the next reader needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PublishedGateView {
    #[serde(default)]
    pub absorbed_to: Option<u64>,
    #[serde(default)]
    pub error: Option<GateFault>,
    #[serde(default)]
    pub since: Option<Timestamp>,
}

/// `None` for a value that does not have `T`'s shape, instead of failing
/// the whole row. The value is taken as its text and parsed into `T`
/// from there: built as a tree first, every published term's detail and
/// reason were maps and strings allocated only to be dropped, most of
/// the cost of taking in a fleet's rows (docs/performance.md, A fleet
/// of many logs).
fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    let text = Box::<serde_json::value::RawValue>::deserialize(d)?;
    Ok(serde_json::from_str(text.get()).ok())
}

impl PublishedFloor {
    pub fn parse(key: &str, body: &[u8]) -> Result<Self, Unreadable> {
        let row: Self = crate::rows::parse_json(key, body).map_err(|e| format!("floors {e}"))?;
        if row.stream != key {
            return Err(Unreadable(format!(
                "floors key {key}: the row names stream {}",
                row.stream
            )));
        }
        Ok(row)
    }
}
