//! One fold (archive.md, The fold): the slice `(frontier, to]` of a log
//! read in one ordered read, cut into segments, each written whole and
//! durably, in order, before the next; the frontier is the last sequence of
//! the last segment written. Any error stops the fold where it is: the
//! frontier stays at the last durable segment (over-retention, never loss).

use std::path::PathBuf;

use super::cut::{cut, Limits};
use super::segment::{self, Compression, Range};
use super::{dir, Put};
use crate::broker::Broker;

/// Where segments go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// A JetStream Object Store bucket.
    ObjectStore(String),
    /// A local directory.
    Dir(PathBuf),
}

/// Which log, at which incarnation and generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub stream: String,
    pub generation: u64,
    /// The log's `created`, RFC 3339 with nanoseconds.
    pub stream_created: String,
}

/// What a fold did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The last sequence durably archived (the seventh term).
    pub frontier: u64,
    pub segments: usize,
    /// Segments that were already there with the same bytes.
    pub already_there: usize,
}

/// A fold that stopped, and where the frontier stayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("folding {stream} after {frontier}: {reason}")]
pub struct FoldError {
    pub stream: String,
    /// The last durable sequence: nothing past it may be purged.
    pub frontier: u64,
    pub reason: String,
}

impl Store {
    async fn put(&self, broker: &Broker, name: &str, bytes: &[u8]) -> Result<Put, String> {
        match self {
            Store::ObjectStore(bucket) => broker.put_segment(bucket, name, bytes).await,
            Store::Dir(root) => dir::put(root, name, bytes).map_err(|e| e.to_string()),
        }
    }

    async fn get(&self, broker: &Broker, name: &str) -> Result<Vec<u8>, String> {
        match self {
            Store::ObjectStore(bucket) => broker
                .get_segment(bucket, name)
                .await?
                .ok_or_else(|| format!("{bucket}/{name} is gone right after it was written")),
            Store::Dir(root) => dir::get(root, name).map_err(|e| e.to_string()),
        }
    }
}

/// Folds `(frontier, to]` into `store`, at most `limits.fold_per_tick`
/// segments. Each segment is read back and verified after it is written:
/// a segment that does not decode to what was written stops the fold.
pub async fn fold(
    broker: &Broker,
    store: &Store,
    target: &Target,
    frontier: u64,
    to: u64,
    limits: Limits,
) -> Result<Folded, FoldError> {
    let stop = |frontier: u64, reason: String| FoldError {
        stream: target.stream.clone(),
        frontier,
        reason,
    };
    let mut done = Folded {
        frontier,
        segments: 0,
        already_there: 0,
    };
    if to <= frontier {
        return Ok(done);
    }
    let want = limits.segment_records.saturating_mul(limits.fold_per_tick);
    let records = broker
        .read_slice(&target.stream, frontier + 1, to, want)
        .await
        .map_err(|e| stop(frontier, e))?;
    // The read covered the slice when it returned fewer records than it
    // could and its last record is the slice's end; a shorter read leaves
    // the tail for a later tick.
    let whole = records.last().map(|r| r.seq) == Some(to);
    for c in cut(records, frontier, to, whole, limits) {
        let range = Range {
            stream: target.stream.clone(),
            generation: target.generation,
            stream_created: target.stream_created.clone(),
            first_seq: c.first_seq,
            last_seq: c.last_seq,
        };
        let count = c.records.len();
        let bytes = segment::encode(&range, &c.records, Compression::Zstd)
            .map_err(|e| stop(done.frontier, e.to_string()))?;
        let name = segment::name(&target.stream, target.generation, c.first_seq, c.last_seq);
        let put = store
            .put(broker, &name, &bytes)
            .await
            .map_err(|e| stop(done.frontier, e))?;
        // Read back before the frontier moves past it.
        let back = store
            .get(broker, &name)
            .await
            .map_err(|e| stop(done.frontier, e))?;
        let verified =
            segment::decode(&back).map_err(|e| stop(done.frontier, format!("{name}: {e}")))?;
        if verified.records.len() != count || back != bytes {
            return Err(stop(
                done.frontier,
                format!("{name} reads back other than it was written"),
            ));
        }
        done.frontier = c.last_seq;
        done.segments += 1;
        if put == Put::AlreadyThere {
            done.already_there += 1;
        }
    }
    Ok(done)
}
