//! Rows parsed once per tick, for every domain: each bucket's entries
//! become typed rows grouped the way the terms look them up (positions and
//! holds by stream, everything else by node), each keeping its own parse
//! error so a malformed row blocks only what it feeds.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::answer::PublishedFloor;
use super::{Bucket, BucketError, Rows};
use crate::gate::{Cursor, CURSOR_PREFIX};
use crate::rows::{
    AckRow, BackupManifest, GateRow, HoldKey, HoldRow, OpRow, PositionRow, PresenceRow, RowError,
    SnapshotRow, ACK_PREFIX, OP_PREFIX,
};

/// A row as parsed, or why it was refused.
pub type Parsed<T> = Result<T, RowError>;

/// By node. Names are shared (`Arc<str>`) with the node table built from
/// them, which then costs no allocation per node.
pub type ByNode<T> = BTreeMap<Arc<str>, Parsed<T>>;

/// The backups bucket: manifests, and operator acknowledgements by stream.
#[derive(Debug, Clone, Default)]
pub struct Backups {
    pub manifests: Vec<Parsed<BackupManifest>>,
    pub acks: BTreeMap<String, Parsed<AckRow>>,
}

/// The gates bucket: the gate in force per stream and node (rows that do
/// not parse evict nobody, so they are dropped), and each log's cursor (a
/// cursor that does not parse is kept as its error: it proves nothing, and
/// the purge stops).
#[derive(Debug, Clone, Default)]
pub struct Gates {
    pub rows: BTreeMap<String, BTreeMap<String, GateRow>>,
    pub cursors: BTreeMap<String, Result<Cursor, String>>,
    /// Operation rows by op id (a readmission's join hold is named by its
    /// operation, whose row names the node).
    pub ops: BTreeMap<String, OpRow>,
}

/// Stream → the holds on it.
pub type HoldsByStream = BTreeMap<String, Vec<Parsed<(HoldKey, HoldRow)>>>;

/// A published floors row with its revision (for the compare-and-set), or
/// why it cannot be used.
pub type Floor = (Result<PublishedFloor, String>, u64);

/// The floors bucket: each stream's published row, and each stream's
/// requested watermark (`_requested.<stream>`, docs/http.md).
#[derive(Debug, Clone, Default)]
pub struct Floors {
    pub rows: BTreeMap<String, Floor>,
    pub requested: BTreeMap<String, (Result<crate::rows::Requested, String>, u64)>,
}

impl Floors {
    pub fn get(&self, stream: &str) -> Option<&Floor> {
        self.rows.get(stream)
    }
}

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
    pub floors: Result<Floors, BucketError>,
}

/// Stream names hold no `.`: the first dot separates a key's stream.
fn split_stream(key: &str) -> Option<(&str, &str)> {
    key.split_once('.')
}

fn each<T: Default>(bucket: &Bucket, add: Sink<T>) -> Result<T, BucketError> {
    let entries = bucket.as_ref().map_err(Clone::clone)?;
    let mut out = T::default();
    for e in entries {
        add(&mut out, &e.key, &e.value, e.revision);
    }
    Ok(out)
}

/// Adds one entry of a bucket to its parsed form. The reader calls these as
/// entries arrive, so parsing overlaps the wait for the next ones.
pub type Sink<T> = fn(&mut T, &str, &[u8], u64);

pub fn add_presence(m: &mut ByNode<PresenceRow>, k: &str, v: &[u8], _: u64) {
    m.insert(Arc::from(k), PresenceRow::parse(k, v));
}

/// A key without the contract's `<stream>.<id>` shape is malformed, not
/// skipped: one that names a stream (all of it) is filed under that
/// stream, so that its term is unreadable and names the key.
fn shapeless(k: &str) -> RowError {
    RowError::Malformed {
        key: k.to_string(),
        message: "expected a key <stream>.<id>".into(),
    }
}

pub fn add_position(m: &mut BTreeMap<String, ByNode<PositionRow>>, k: &str, v: &[u8], _: u64) {
    match split_stream(k) {
        Some((stream, node)) => {
            m.entry(stream.to_string())
                .or_default()
                .insert(Arc::from(node), PositionRow::parse(k, v));
        }
        None => {
            m.entry(k.to_string())
                .or_default()
                .insert(Arc::from(""), Err(shapeless(k)));
        }
    }
}

pub fn add_hold(m: &mut HoldsByStream, k: &str, v: &[u8], _: u64) {
    match split_stream(k) {
        Some((stream, _)) => m
            .entry(stream.to_string())
            .or_default()
            .push(HoldRow::parse(k, v)),
        None => m.entry(k.to_string()).or_default().push(Err(shapeless(k))),
    }
}

pub fn add_backup(b: &mut Backups, k: &str, v: &[u8], _: u64) {
    if let Some(stream) = k.strip_prefix(ACK_PREFIX) {
        b.acks.insert(stream.to_string(), AckRow::parse(k, v));
    } else {
        b.manifests.push(BackupManifest::parse(k, v));
    }
}

pub fn add_snapshot(m: &mut ByNode<SnapshotRow>, k: &str, v: &[u8], _: u64) {
    m.insert(Arc::from(k), SnapshotRow::parse(k, v));
}

pub fn add_gate(g: &mut Gates, k: &str, v: &[u8], _: u64) {
    if let Some(stream) = k.strip_prefix(CURSOR_PREFIX) {
        g.cursors.insert(stream.to_string(), Cursor::parse(k, v));
    } else if let Some(op) = k.strip_prefix(OP_PREFIX) {
        if let Ok(row) = OpRow::parse(k, v) {
            g.ops.insert(op.to_string(), row);
        }
    } else {
        // A gate row that does not parse evicts nobody: the safe way.
        if let Ok(row) = GateRow::parse(k, v) {
            g.rows
                .entry(row.stream.clone())
                .or_default()
                .insert(row.node.clone(), row);
        }
    }
}

pub fn add_floor(m: &mut Floors, k: &str, v: &[u8], rev: u64) {
    match k.strip_prefix(crate::rows::REQUESTED_PREFIX) {
        Some(stream) => {
            m.requested.insert(
                stream.to_string(),
                (crate::rows::Requested::parse(k, stream, v), rev),
            );
        }
        None => {
            m.rows
                .insert(k.to_string(), (PublishedFloor::parse(k, v), rev));
        }
    }
}

impl ParsedRows {
    pub fn from_rows(rows: &Rows) -> ParsedRows {
        ParsedRows {
            presence: each(&rows.presence, add_presence),
            positions: each(&rows.positions, add_position),
            holds: each(&rows.holds, add_hold),
            backups: each(&rows.backups, add_backup),
            snapshots: each(&rows.snapshots, add_snapshot),
            gates: each(&rows.gates, add_gate),
            floors: each(&rows.floors, add_floor),
        }
    }

    /// Parses the gates bucket again (after absorption wrote to it).
    pub fn reparse_gates(&mut self, gates: &Bucket) {
        self.gates = each(gates, add_gate);
    }

    /// Every bucket failed to answer (not merely missing): the broker is
    /// gone.
    pub fn all_failed(&self) -> bool {
        let failed = |e: Option<&BucketError>| matches!(e, Some(BucketError::Failed { .. }));
        failed(self.presence.as_ref().err())
            && failed(self.positions.as_ref().err())
            && failed(self.holds.as_ref().err())
            && failed(self.backups.as_ref().err())
            && failed(self.snapshots.as_ref().err())
            && failed(self.gates.as_ref().err())
            && failed(self.floors.as_ref().err())
    }

    /// The floors bucket as read; `None` when it does not exist yet (no
    /// sidecar has run: nothing was published, nothing requested).
    fn floors_read(&self) -> Result<Option<&Floors>, String> {
        match &self.floors {
            Ok(f) => Ok(Some(f)),
            Err(BucketError::Missing { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The requested watermark of `stream` (none: `Ok(None)`), or why it
    /// cannot be read (the floors bucket, or a row that does not parse).
    pub fn requested(&self, stream: &str) -> Result<Option<crate::rows::Requested>, String> {
        let Some(floors) = self.floors_read()? else {
            return Ok(None);
        };
        match floors.requested.get(stream) {
            None => Ok(None),
            Some((Ok(r), _)) => Ok(Some(r.clone())),
            Some((Err(e), _)) => Err(e.clone()),
        }
    }

    /// The floors row for `stream` as published, with its revision, or why
    /// it cannot be used.
    pub fn published(&self, stream: &str) -> Result<Option<(PublishedFloor, u64)>, String> {
        let Some(floors) = self.floors_read()? else {
            return Ok(None);
        };
        match floors.get(stream) {
            None => Ok(None),
            Some((Ok(p), rev)) => Ok(Some((p.clone(), *rev))),
            Some((Err(e), _)) => Err(e.clone()),
        }
    }
}
