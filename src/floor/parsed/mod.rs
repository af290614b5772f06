//! Rows parsed once per tick, for every domain: each bucket's entries
//! become typed rows grouped the way the terms look them up (positions and
//! holds by stream, everything else by node), each keeping its own parse
//! error so a malformed row blocks only what it feeds.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use smol_str::SmolStr;

use super::published::PublishedFloor;
use super::{Bucket, BucketError, Rows};
use crate::gate::{Anchor, Cursor, ANCHOR_PREFIX, CURSOR_PREFIX};
use crate::rows::{
    AckRow, BackupManifest, GateRow, HoldKey, HoldRow, OpRow, PositionRow, PresenceRow, RowError,
    SnapshotRow, Unreadable, ACK_PREFIX, OP_PREFIX,
};

/// A row as parsed, or why it was refused. The refusal is boxed: it is
/// rare, and unboxed it would set every row's size (72 bytes against 48
/// for a position).
pub type Parsed<T> = Result<T, Box<RowError>>;

/// By node. A name is held inline (up to 23 bytes; longer ones share one
/// allocation), so the sorted merges over 100,000 of them compare keys in
/// the map's own nodes, and the node table built from them copies them
/// without touching the heap.
pub type ByNode<T> = BTreeMap<SmolStr, Parsed<T>>;

/// The backups bucket: manifests, and operator acknowledgements by stream.
#[derive(Clone, Default)]
pub struct Backups {
    /// In the order read. Changed only through [`add_backup`] and
    /// [`Patch::forget`], which drop the index below.
    pub manifests: Vec<Parsed<BackupManifest>>,
    pub acks: BTreeMap<String, Parsed<AckRow>>,
    /// The manifests by the streams they name, built on first use: each
    /// log's backup term looked at every manifest, a thousand logs'
    /// terms at a thousand manifests each (docs/performance.md, A fleet
    /// of many logs).
    by_stream: std::sync::OnceLock<ManifestIndex>,
}

/// Where [`Backups::naming`] finds a stream's manifests.
#[derive(Debug, Clone, Default)]
struct ManifestIndex {
    /// The first manifest that does not parse (it names no stream one can
    /// read, so it leaves every backup term unreadable).
    unparsed: Option<usize>,
    /// Stream → the manifests that count and name it, in the order read.
    counting: std::collections::HashMap<String, Vec<usize>>,
}

/// What the bucket says; the index is how it is looked up, and two reads
/// of the same rows print alike whether or not one was looked up.
impl std::fmt::Debug for Backups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backups")
            .field("manifests", &self.manifests)
            .field("acks", &self.acks)
            .finish()
    }
}

impl Backups {
    /// The manifests that count ([`BackupManifest::counts`]) and name
    /// `stream`, in the order read; or the first manifest that does not
    /// parse.
    pub fn naming(&self, stream: &str) -> Result<Vec<&BackupManifest>, &RowError> {
        let index = self.by_stream.get_or_init(|| {
            let mut index = ManifestIndex::default();
            for (i, m) in self.manifests.iter().enumerate() {
                match m {
                    Err(_) => {
                        index.unparsed.get_or_insert(i);
                    }
                    Ok(m) if m.counts() => {
                        for s in m.positions.keys() {
                            index.counting.entry(s.clone()).or_default().push(i);
                        }
                    }
                    Ok(_) => {}
                }
            }
            index
        });
        if let Some(Err(e)) = index.unparsed.and_then(|i| self.manifests.get(i)) {
            return Err(e);
        }
        Ok(index
            .counting
            .get(stream)
            .into_iter()
            .flatten()
            .filter_map(|&i| self.manifests.get(i)?.as_ref().ok())
            .collect())
    }
}

/// The gates bucket: the gate in force per stream and node (rows that do
/// not parse evict nobody, so they are dropped), and each log's cursor (a
/// cursor that does not parse is kept as its error: it proves nothing, and
/// the purge stops).
#[derive(Debug, Clone, Default)]
pub struct Gates {
    pub rows: BTreeMap<String, BTreeMap<String, GateRow>>,
    pub cursors: BTreeMap<String, Result<Cursor, Unreadable>>,
    /// Operation rows by op id (a readmission's join hold is named by its
    /// operation, whose row names the node).
    pub ops: BTreeMap<String, OpRow>,
    /// The generation each log's last reanchor opened, by stream.
    pub anchors: BTreeMap<String, Anchor>,
    /// Since when each log has lost the sidecar's memory, by stream (a
    /// note that does not parse says nothing: the answer's own instant is
    /// then the earliest known).
    pub lost: BTreeMap<String, crate::gate::LostNote>,
}

/// Stream → the holds on it.
pub type HoldsByStream = BTreeMap<String, Vec<Parsed<(HoldKey, HoldRow)>>>;

/// A published floors row with its revision (for the compare-and-set), or
/// why it cannot be used.
pub type Floor = (Result<PublishedFloor, Unreadable>, u64);

/// The floors bucket: each stream's published row, and each stream's
/// requested watermark (`_requested.<stream>`, docs/http.md).
#[derive(Debug, Clone, Default)]
pub struct Floors {
    pub rows: BTreeMap<String, Floor>,
    pub requested: BTreeMap<String, (Result<crate::rows::Requested, Unreadable>, u64)>,
    /// Stream → chunk number → its `_members` value (docs/trim-floor.md,
    /// The sidecar's memory).
    pub members: BTreeMap<String, BTreeMap<u32, Result<super::members::MembersChunk, Unreadable>>>,
    /// The duty holder's last tick (`_tick`), or why it does not parse.
    pub tick: Option<Result<crate::rows::TickRow, Unreadable>>,
    /// Its revision: the next `_tick` is written on it.
    pub tick_revision: Option<u64>,
    /// What nodes are told of the configuration (`_contract`): written
    /// again only when it changes.
    pub contract: Option<Contract>,
}

/// The `_contract` key as read.
#[derive(Debug, Clone)]
pub struct Contract {
    pub row: Result<crate::rows::ContractRow, Unreadable>,
    pub revision: u64,
    /// Written by a newer release: left as it is.
    pub newer: bool,
}

impl Floors {
    pub fn get(&self, stream: &str) -> Option<&Floor> {
        self.rows.get(stream)
    }

    /// The memory `stream`'s row kept, read back whole (none without a
    /// usable row that kept one).
    pub fn remembered(
        &self,
        stream: &str,
    ) -> Option<Result<super::members::Remembered, Unreadable>> {
        let row = match self.get(stream)? {
            (Ok(p), _) => p,
            (Err(_), _) => return None,
        };
        let kept = match (&row.memory, &row.pins) {
            (Some(m), _) => Kept::Record(m),
            (None, Some(p)) => Kept::Pins(p),
            (None, None) => return None,
        };
        Some(kept.read_back(self.members.get(stream)))
    }

    /// The floors bucket's entries, parsed (a gesture's own read).
    pub fn of(entries: &[super::Entry]) -> Floors {
        let mut floors = Floors::default();
        for e in entries {
            add_floor(&mut floors, &e.key, &e.value, e.revision);
        }
        floors
    }
}

/// Every bucket the answer reads, parsed.
#[derive(Debug, Clone)]
pub struct ParsedRows {
    pub presence: Result<Arc<ByNode<PresenceRow>>, BucketError>,
    /// Stream → node → row.
    pub positions: Result<Arc<BTreeMap<String, ByNode<Position>>>, BucketError>,
    /// Stream → holds on it.
    pub holds: Result<Arc<HoldsByStream>, BucketError>,
    pub backups: Result<Arc<Backups>, BucketError>,
    pub snapshots: Result<Arc<ByNode<SnapshotRow>>, BucketError>,
    pub gates: Result<Arc<Gates>, BucketError>,
    /// Stream → its floors row.
    pub floors: Result<Arc<Floors>, BucketError>,
    /// When each node-written bucket read was created: a pin the last
    /// published row recorded from another creation is carried
    /// (`floor::carried`).
    pub created: super::carried::BucketsCreated,
}

/// Stream names hold no `.`: the first dot separates a key's stream.
fn split_stream(key: &str) -> Option<(&str, &str)> {
    key.split_once('.')
}

fn each<T: Patch>(bucket: &Bucket, add: Sink<T>) -> Result<Arc<T>, BucketError> {
    let entries = bucket.as_ref().map_err(Clone::clone)?;
    let mut out = T::default();
    for e in entries {
        add(&mut out, &e.key, &e.value, e.revision);
    }
    out.settle();
    Ok(Arc::new(out))
}

/// Adds one entry of a bucket to its parsed form. The reader calls these as
/// entries arrive, so parsing overlaps the wait for the next ones.
pub type Sink<T> = fn(&mut T, &str, &[u8], u64);

pub fn add_presence(m: &mut ByNode<PresenceRow>, k: &str, v: &[u8], _: u64) {
    m.insert(SmolStr::new(k), PresenceRow::parse(k, v).map_err(Box::new));
}

/// A key without the contract's `<stream>.<id>` shape is malformed, not
/// skipped: one that names a stream (all of it) is filed under that
/// stream, so that its term is unreadable and names the key.
fn shapeless(k: &str) -> Box<RowError> {
    Box::new(RowError::Malformed {
        key: k.to_string(),
        message: "expected a key <stream>.<id>".into(),
    })
}

/// A positions row as the floor keeps it (docs/performance.md, The pure
/// floor).
pub use crate::rows::Position;

/// Applies `f` to the rows of `stream`, made empty when there are none
/// yet. The map is looked up before a key is made: a String per row was an
/// allocation per row.
fn in_stream<V: Default>(m: &mut BTreeMap<String, V>, stream: &str, f: impl FnOnce(&mut V)) {
    if !m.contains_key(stream) {
        m.insert(stream.to_string(), V::default());
    }
    if let Some(rows) = m.get_mut(stream) {
        f(rows);
    }
}

pub fn add_position(m: &mut BTreeMap<String, ByNode<Position>>, k: &str, v: &[u8], _: u64) {
    match split_stream(k) {
        Some((stream, node)) => {
            in_stream(m, stream, |by_node| {
                by_node.insert(
                    SmolStr::new(node),
                    PositionRow::parse_values(k, v).map_err(Box::new),
                );
            });
        }
        None => {
            m.entry(k.to_string())
                .or_default()
                .insert(SmolStr::default(), Err(shapeless(k)));
        }
    }
}

pub fn add_hold(m: &mut HoldsByStream, k: &str, v: &[u8], _: u64) {
    match split_stream(k) {
        Some((stream, _)) => in_stream(m, stream, |on| {
            on.push(HoldRow::parse(k, v).map_err(Box::new));
        }),
        None => m.entry(k.to_string()).or_default().push(Err(shapeless(k))),
    }
}

pub fn add_backup(b: &mut Backups, k: &str, v: &[u8], _: u64) {
    if let Some(stream) = k.strip_prefix(ACK_PREFIX) {
        b.acks
            .insert(stream.to_string(), AckRow::parse(k, v).map_err(Box::new));
    } else {
        b.by_stream = Default::default();
        b.manifests
            .push(BackupManifest::parse(k, v).map_err(Box::new));
    }
}

pub fn add_snapshot(m: &mut ByNode<SnapshotRow>, k: &str, v: &[u8], _: u64) {
    m.insert(SmolStr::new(k), SnapshotRow::parse(k, v).map_err(Box::new));
}

pub fn add_gate(g: &mut Gates, k: &str, v: &[u8], _: u64) {
    if let Some(stream) = k.strip_prefix(CURSOR_PREFIX) {
        g.cursors.insert(stream.to_string(), Cursor::parse(k, v));
    } else if let Some(stream) = k.strip_prefix(ANCHOR_PREFIX) {
        // An anchor that does not parse says nothing of a generation: the
        // positions and the cursor still do.
        if let Ok(a) = Anchor::parse(k, v) {
            g.anchors.insert(stream.to_string(), a);
        }
    } else if let Some(op) = k.strip_prefix(OP_PREFIX) {
        if let Ok(row) = OpRow::parse(k, v) {
            g.ops.insert(op.to_string(), row);
        }
    } else if let Some(stream) = k.strip_prefix(crate::gate::LOST_PREFIX) {
        if let Ok(n) = crate::gate::LostNote::parse(k, v) {
            g.lost.insert(stream.to_string(), n);
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
    if k.starts_with(super::members::MEMBERS_PREFIX) {
        // A key of another shape under the prefix belongs to no log.
        if let Some((stream, n)) = super::members::parse_members_key(k) {
            m.members
                .entry(stream.to_string())
                .or_default()
                .insert(n, super::members::MembersChunk::parse(k, v));
        }
        return;
    }
    if k == crate::rows::TICK_KEY {
        m.tick = Some(crate::rows::TickRow::parse(k, v));
        m.tick_revision = Some(rev);
        return;
    }
    if k == crate::rows::CONTRACT_KEY {
        m.contract = Some(Contract {
            row: crate::rows::ContractRow::parse(k, v),
            revision: rev,
            newer: crate::rows::written_by_newer(v),
        });
        return;
    }
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

/// A bucket's parsed form that can let go of the rows some keys gave it,
/// so that a view kept across ticks re-parses only the keys that changed
/// (or aged out) instead of every row. `forget` followed by adding the
/// keys' current entries, in revision order, gives what parsing every
/// live entry afresh gives: each key feeds one place, and a changed key's
/// revision is newer than every unchanged one, so the lists kept in
/// revision order (holds, manifests) stay in it.
pub trait Patch: Default + Clone + Send + Sync + 'static {
    /// Removes what each of `keys` contributed.
    fn forget(&mut self, keys: &HashSet<String>);

    /// Once every row of a whole read is in: lays the per-node maps out in
    /// memory in node order. Rows arrive in revision order, so the maps'
    /// nodes were allocated in an order unrelated to the names, and the
    /// answer's walk over 100,000 of them missed the cache at each step
    /// (docs/performance.md, The pure floor).
    /// Changes nothing a reader sees.
    fn settle(&mut self) {}
}

/// A map rebuilt from its own entries, which come out sorted: the standard
/// library then builds it bottom-up, its nodes allocated in key order.
fn in_key_order<K: Ord, V>(m: &mut BTreeMap<K, V>) {
    *m = std::mem::take(m).into_iter().collect();
}

/// The keys' stream part, removing a stream left with nothing (a full
/// read would not have it).
fn forget_in<V>(
    m: &mut BTreeMap<String, V>,
    keys: &HashSet<String>,
    mut take: impl FnMut(&mut V, &str, &str),
    empty: impl Fn(&V) -> bool,
) {
    for key in keys {
        // A key without a stream part was filed under the whole key.
        let (stream, rest) = split_stream(key).unwrap_or((key.as_str(), ""));
        if let Some(v) = m.get_mut(stream) {
            take(v, key, rest);
            if empty(v) {
                m.remove(stream);
            }
        }
    }
}

impl<R: Clone + Send + Sync + 'static> Patch for ByNode<R> {
    fn forget(&mut self, keys: &HashSet<String>) {
        for key in keys {
            self.remove(key.as_str());
        }
    }

    fn settle(&mut self) {
        in_key_order(self);
    }
}

impl Patch for BTreeMap<String, ByNode<Position>> {
    fn forget(&mut self, keys: &HashSet<String>) {
        forget_in(
            self,
            keys,
            |nodes, _, node| {
                nodes.remove(node);
            },
            BTreeMap::is_empty,
        );
    }

    fn settle(&mut self) {
        self.values_mut().for_each(in_key_order);
    }
}

impl Patch for HoldsByStream {
    fn forget(&mut self, keys: &HashSet<String>) {
        let streams: std::collections::BTreeSet<&str> = keys
            .iter()
            .map(|k| split_stream(k).map_or(k.as_str(), |(s, _)| s))
            .collect();
        for stream in streams {
            if let Some(holds) = self.get_mut(stream) {
                holds.retain(|h| !keys.contains(&hold_key(h)));
                if holds.is_empty() {
                    self.remove(stream);
                }
            }
        }
    }
}

/// The key a parsed hold came from.
fn hold_key(h: &Parsed<(HoldKey, HoldRow)>) -> String {
    match h {
        Ok((k, _)) => format!("{}.{}", k.stream, k.hold_id),
        Err(e) => e.key().to_string(),
    }
}

impl Patch for Backups {
    fn forget(&mut self, keys: &HashSet<String>) {
        let mut manifests = false;
        for key in keys {
            match key.strip_prefix(ACK_PREFIX) {
                Some(stream) => {
                    self.acks.remove(stream);
                }
                None => manifests = true,
            }
        }
        if manifests {
            self.by_stream = Default::default();
            self.manifests.retain(|m| {
                let key = match m {
                    Ok(m) => BackupManifest::key(&m.node, &m.id),
                    Err(e) => e.key().to_string(),
                };
                !keys.contains(&key)
            });
        }
    }
}

impl Patch for Gates {
    fn forget(&mut self, keys: &HashSet<String>) {
        for key in keys {
            if let Some(stream) = key.strip_prefix(CURSOR_PREFIX) {
                self.cursors.remove(stream);
            } else if let Some(stream) = key.strip_prefix(ANCHOR_PREFIX) {
                self.anchors.remove(stream);
            } else if let Some(op) = key.strip_prefix(OP_PREFIX) {
                self.ops.remove(op);
            } else if let Some(stream) = key.strip_prefix(crate::gate::LOST_PREFIX) {
                self.lost.remove(stream);
            } else if let Some((stream, node)) = split_stream(key) {
                // A gate row is taken only under its own key,
                // `<stream>.<node>` (GateRow::parse checks it).
                if let Some(rows) = self.rows.get_mut(stream) {
                    rows.remove(node);
                    if rows.is_empty() {
                        self.rows.remove(stream);
                    }
                }
            }
        }
    }
}

impl Patch for Floors {
    fn forget(&mut self, keys: &HashSet<String>) {
        for key in keys {
            if let Some((stream, n)) = super::members::parse_members_key(key) {
                if let Some(chunks) = self.members.get_mut(stream) {
                    chunks.remove(&n);
                    if chunks.is_empty() {
                        self.members.remove(stream);
                    }
                }
                continue;
            }
            if key == crate::rows::TICK_KEY {
                self.tick = None;
                self.tick_revision = None;
                continue;
            }
            if key == crate::rows::CONTRACT_KEY {
                self.contract = None;
                continue;
            }
            match key.strip_prefix(crate::rows::REQUESTED_PREFIX) {
                Some(stream) => {
                    self.requested.remove(stream);
                }
                None => {
                    self.rows.remove(key.as_str());
                }
            }
        }
    }
}

/// The memory a published floors row kept: this release's record (its
/// membership in `_members` keys), or the previous release's `pins`.
#[derive(Debug, Clone, Copy)]
pub enum Kept<'r> {
    Record(&'r super::members::MemoryRecord),
    Pins(&'r super::carried::PinsRecord),
}

impl Kept<'_> {
    /// The `created` time of each node-written bucket it was read from.
    pub fn buckets(&self) -> &BTreeMap<String, crate::rows::Timestamp> {
        match self {
            Kept::Record(r) => &r.buckets,
            Kept::Pins(p) => &p.buckets,
        }
    }

    /// Whether it keeps any member only from an earlier bucket (carried).
    pub fn carries(&self) -> bool {
        match self {
            Kept::Record(r) => r.carried > 0,
            Kept::Pins(p) => {
                let from = |role: &str| p.buckets.get(role).copied();
                p.nodes
                    .values()
                    .any(|n| Some(n.bucket_created) != from("positions"))
                    || p.holds
                        .values()
                        .any(|h| Some(h.bucket_created) != from("holds"))
            }
        }
    }

    /// The memory whole: the record's membership from its keys (each
    /// present, the digest the record names), or the pins converted.
    pub fn read_back(
        &self,
        chunks: Option<&BTreeMap<u32, Result<super::members::MembersChunk, Unreadable>>>,
    ) -> Result<super::members::Remembered, Unreadable> {
        match self {
            Kept::Pins(p) => Ok(super::members::Remembered::from_pins(p)),
            Kept::Record(r) => {
                let membership = super::members::Membership::read_back(r, |n| {
                    chunks.and_then(|c| c.get(&n)).cloned()
                })?;
                Ok(super::members::Remembered {
                    buckets: r.buckets.clone(),
                    membership,
                    applied: r.applied,
                    min_hold: r.min_hold,
                })
            }
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
            created: super::carried::BucketsCreated::default(),
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
    fn floors_read(&self) -> Result<Option<&Floors>, Unreadable> {
        match &self.floors {
            Ok(f) => Ok(Some(f)),
            Err(BucketError::Missing { .. }) => Ok(None),
            Err(e) => Err(Unreadable(e.to_string())),
        }
    }

    /// The requested watermark of `stream` (none: `Ok(None)`), or why it
    /// cannot be read (the floors bucket, or a row that does not parse).
    pub fn requested(&self, stream: &str) -> Result<Option<crate::rows::Requested>, Unreadable> {
        let Some(floors) = self.floors_read()? else {
            return Ok(None);
        };
        match floors.requested.get(stream) {
            None => Ok(None),
            Some((Ok(r), _)) => Ok(Some(r.clone())),
            Some((Err(e), _)) => Err(e.clone()),
        }
    }

    /// The memory the published floors row of `stream` kept (none when
    /// there is no row, it cannot be used, or it predates both `memory`
    /// and `pins`).
    pub fn published_memory(&self, stream: &str) -> Option<Kept<'_>> {
        match self.floors_read() {
            Ok(Some(f)) => match f.get(stream) {
                Some((Ok(p), _)) => match (&p.memory, &p.pins) {
                    (Some(m), _) => Some(Kept::Record(m)),
                    (None, Some(pins)) => Some(Kept::Pins(pins)),
                    (None, None) => None,
                },
                _ => None,
            },
            _ => None,
        }
    }

    /// The memory of `stream` read back whole ([`Kept::read_back`]).
    pub fn remembered(
        &self,
        stream: &str,
    ) -> Option<Result<super::members::Remembered, Unreadable>> {
        match self.floors_read() {
            Ok(Some(f)) => f.remembered(stream),
            _ => None,
        }
    }

    /// The floors row for `stream` as published, with its revision, or why
    /// it cannot be used.
    /// Borrowed, not cloned: a row carries every counted node's pin, and a
    /// copy per log per tick is what the memory figure paid for
    /// (docs/performance.md).
    pub fn published(&self, stream: &str) -> Result<Option<(&PublishedFloor, u64)>, Unreadable> {
        let Some(floors) = self.floors_read()? else {
            return Ok(None);
        };
        match floors.get(stream) {
            None => Ok(None),
            Some((Ok(p), rev)) => Ok(Some((p, *rev))),
            Some((Err(e), _)) => Err(e.clone()),
        }
    }
}

#[cfg(test)]
mod tests;
