//! Rows parsed once per tick, for every domain: each bucket's entries
//! become typed rows grouped the way the terms look them up (positions and
//! holds by stream, everything else by node), each keeping its own parse
//! error so a malformed row blocks only what it feeds.

use std::collections::BTreeMap;

use super::answer::PublishedFloor;
use super::{Bucket, BucketError, Rows};
use crate::gate::{Cursor, CURSOR_PREFIX};
use crate::rows::{
    AckRow, BackupManifest, GateRow, HoldKey, HoldRow, PositionRow, PresenceRow, RowError,
    SnapshotRow, ACK_PREFIX, OP_PREFIX,
};

/// A row as parsed, or why it was refused.
pub type Parsed<T> = Result<T, RowError>;

/// By node.
pub type ByNode<T> = BTreeMap<String, Parsed<T>>;

/// The backups bucket: manifests, and operator acknowledgements by stream.
#[derive(Debug, Clone, Default)]
pub struct Backups {
    pub manifests: Vec<Parsed<BackupManifest>>,
    pub acks: BTreeMap<String, Parsed<AckRow>>,
}

/// The gates bucket: the gate in force per stream and node (rows that do
/// not parse evict nobody, so they are dropped), and each log's cursor.
#[derive(Debug, Clone, Default)]
pub struct Gates {
    pub rows: BTreeMap<String, BTreeMap<String, GateRow>>,
    pub cursors: BTreeMap<String, Cursor>,
}

/// Stream → the holds on it.
pub type HoldsByStream = BTreeMap<String, Vec<Parsed<(HoldKey, HoldRow)>>>;

/// A published floors row with its revision (for the compare-and-set), or
/// why it cannot be used.
pub type Floor = (Result<PublishedFloor, String>, u64);

/// Every bucket the answer reads, parsed.
#[derive(Debug, Clone)]
pub struct ParsedRows {
    pub presence: Result<ByNode<PresenceRow>, BucketError>,
    /// Stream → node → row.
    pub positions: Result<BTreeMap<String, ByNode<PositionRow>>, BucketError>,
    /// Stream → holds on it.
    pub holds: Result<HoldsByStream, BucketError>,
    pub backups: Result<Backups, BucketError>,
    pub snapshots: Result<ByNode<SnapshotRow>, BucketError>,
    pub gates: Result<Gates, BucketError>,
    /// Stream → its floors row.
    pub floors: Result<BTreeMap<String, Floor>, BucketError>,
}

/// Stream names hold no `.`: the first dot separates a key's stream.
fn split_stream(key: &str) -> Option<(&str, &str)> {
    key.split_once('.')
}

fn each<T>(
    bucket: &Bucket,
    mut f: impl FnMut(&str, &[u8], u64, &mut T),
    init: T,
) -> Result<T, BucketError> {
    let entries = bucket.as_ref().map_err(Clone::clone)?;
    let mut out = init;
    for e in entries {
        f(&e.key, &e.value, e.revision, &mut out);
    }
    Ok(out)
}

impl ParsedRows {
    pub fn from_rows(rows: &Rows) -> ParsedRows {
        ParsedRows {
            presence: each(
                &rows.presence,
                |k, v, _, m: &mut ByNode<PresenceRow>| {
                    m.insert(k.to_string(), PresenceRow::parse(k, v));
                },
                BTreeMap::new(),
            ),
            positions: each(
                &rows.positions,
                |k, v, _, m: &mut BTreeMap<String, ByNode<PositionRow>>| {
                    if let Some((stream, node)) = split_stream(k) {
                        m.entry(stream.to_string())
                            .or_default()
                            .insert(node.to_string(), PositionRow::parse(k, v));
                    }
                },
                BTreeMap::new(),
            ),
            holds: each(
                &rows.holds,
                |k, v, _, m: &mut BTreeMap<String, Vec<Parsed<(HoldKey, HoldRow)>>>| {
                    if let Some((stream, _)) = split_stream(k) {
                        m.entry(stream.to_string())
                            .or_default()
                            .push(HoldRow::parse(k, v));
                    }
                },
                BTreeMap::new(),
            ),
            backups: each(
                &rows.backups,
                |k, v, _, b: &mut Backups| {
                    if let Some(stream) = k.strip_prefix(ACK_PREFIX) {
                        b.acks.insert(stream.to_string(), AckRow::parse(k, v));
                    } else {
                        b.manifests.push(BackupManifest::parse(k, v));
                    }
                },
                Backups::default(),
            ),
            snapshots: each(
                &rows.snapshots,
                |k, v, _, m: &mut ByNode<SnapshotRow>| {
                    m.insert(k.to_string(), SnapshotRow::parse(k, v));
                },
                BTreeMap::new(),
            ),
            gates: each(
                &rows.gates,
                |k, v, _, g: &mut Gates| {
                    if let Some(stream) = k.strip_prefix(CURSOR_PREFIX) {
                        if let Ok(c) = serde_json::from_slice::<Cursor>(v) {
                            g.cursors.insert(stream.to_string(), c);
                        }
                    } else if !k.starts_with(OP_PREFIX) {
                        // A gate row that does not parse evicts nobody: the safe way.
                        if let Ok(row) = GateRow::parse(k, v) {
                            g.rows
                                .entry(row.stream.clone())
                                .or_default()
                                .insert(row.node.clone(), row);
                        }
                    }
                },
                Gates::default(),
            ),
            floors: each(
                &rows.floors,
                |k, v, rev, m: &mut BTreeMap<String, Floor>| {
                    m.insert(k.to_string(), (PublishedFloor::parse(k, v), rev));
                },
                BTreeMap::new(),
            ),
        }
    }

    /// The floors row for `stream` as published, with its revision, or why
    /// it cannot be used.
    pub fn published(&self, stream: &str) -> Result<Option<(PublishedFloor, u64)>, String> {
        let floors = self.floors.as_ref().map_err(|e| e.to_string())?;
        match floors.get(stream) {
            None => Ok(None),
            Some((Ok(p), rev)) => Ok(Some((p.clone(), *rev))),
            Some((Err(e), _)) => Err(e.clone()),
        }
    }
}
