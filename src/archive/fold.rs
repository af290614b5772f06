//! One fold (docs/archive-format.md, The fold): the slice `(frontier, to]` of a log
//! read in one ordered read, cut into segments, each written whole and
//! durably, in order, before the next; the frontier is the last sequence of
//! the last segment written. Any error stops the fold where it is: the
//! frontier stays at the last durable segment (over-retention, never loss).

use super::cut::{Cut, Cutter, Limits};
use super::segment::{self, Compression, Range};
use super::state::{ListError, Listed};
use super::{dir, Put};
use crate::broker::archive::Take;
use crate::broker::Broker;
use crate::within::within;

pub use super::state::{Store, Target};

/// What a fold did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The last sequence durably archived (the seventh term).
    pub frontier: u64,
    /// The segments written (or found already there with the same bytes),
    /// each read back and verified, in order.
    pub written: Vec<Listed>,
    /// How many of them were already there.
    pub already_there: usize,
}

/// A fold that stopped, and where the frontier stayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("folding {stream} after {frontier}: {reason}")]
pub struct FoldError {
    pub stream: String,
    /// The last durable sequence: nothing past it may be purged.
    pub frontier: u64,
    /// The segment it was writing, when it was on one.
    pub segment: Option<String>,
    pub reason: String,
    /// The segments durably written before it stopped.
    pub written: Vec<Listed>,
}

impl Store {
    async fn put(&self, broker: &Broker, name: &str, bytes: &[u8]) -> Result<Put, String> {
        match self {
            Store::ObjectStore(bucket) => broker
                .put_segment(bucket, name, bytes)
                .await
                .map_err(String::from),
            Store::Dir(root) => {
                let (name, bytes) = (name.to_string(), bytes.to_vec());
                off_thread(broker, root, move |root| dir::put(root, &name, &bytes)).await
            }
            Store::Cloud(remote) => cloud(broker, remote).await?.put_segment(name, bytes).await,
        }
    }

    /// Replaces segment `name` with `bytes` (an erasure's rewrite of the
    /// same range), the old one whole until the new one is.
    pub async fn replace(
        &self,
        broker: &Broker,
        name: &str,
        bytes: &[u8],
        op: &str,
    ) -> Result<(), String> {
        match self {
            Store::ObjectStore(bucket) => broker
                .replace_segment(bucket, name, bytes, op)
                .await
                .map_err(String::from),
            Store::Dir(root) => {
                let (name, bytes) = (name.to_string(), bytes.to_vec());
                off_thread(broker, root, move |root| dir::replace(root, &name, &bytes)).await
            }
            Store::Cloud(remote) => {
                cloud(broker, remote)
                    .await?
                    .replace_segment(name, bytes, op)
                    .await
            }
        }
    }

    /// The bytes of segment `name`.
    pub async fn get(&self, broker: &Broker, name: &str) -> Result<Vec<u8>, String> {
        match self {
            Store::ObjectStore(bucket) => broker
                .get_segment(bucket, name)
                .await?
                .ok_or_else(|| format!("{bucket}/{name} is not in the store")),
            Store::Dir(root) => {
                let name = name.to_string();
                off_thread(broker, root, move |root| dir::get(root, &name)).await
            }
            Store::Cloud(remote) => cloud(broker, remote)
                .await?
                .get_segment(name)
                .await?
                .ok_or_else(|| format!("{}/{name} is not in the store", remote.id())),
        }
    }

    /// An Object Store's whole listing, asked for before the log's
    /// incarnation is known (a tick reads it beside its buckets); a
    /// directory is listed when it is read (`None`).
    pub async fn prefetch(&self, broker: &Broker) -> Option<Result<Vec<Listed>, ListError>> {
        match self {
            Store::ObjectStore(bucket) => Some(broker.object_listing(bucket).await),
            // Listed when read: whether a kept listing will do depends on
            // the log's first sequence ([`Store::list_for_tick`]).
            Store::Cloud(_) | Store::Dir(_) => None,
        }
    }

    /// As [`Store::list`], from a listing [`Store::prefetch`] took when
    /// there is one.
    pub async fn list_from(
        &self,
        broker: &Broker,
        stream: &str,
        generation: u64,
        prefetched: Option<Result<Vec<Listed>, ListError>>,
    ) -> Result<Vec<Listed>, ListError> {
        match prefetched {
            Some(all) => {
                all.map(|all| crate::broker::archive::segments_of(&all, stream, generation))
            }
            None => self.list(broker, stream, generation).await,
        }
    }

    /// As [`Store::list_from`], for a tick or a read that shares the
    /// sidecar's clients, and whether the listing is a kept one. A cloud
    /// store's listing is the one this process took last of this log's
    /// generation while it ends at the `published` frontier (`live_from`,
    /// the log's first sequence, `None` asks for a fresh listing), for at
    /// most `REUSE_AT_MOST` ticks; a write through this process forgets it.
    /// A kept listing must not decide a purge of records the archive holds:
    /// the tick lists again before one (`Sidecar::fold_all`).
    pub async fn list_for_tick(
        &self,
        broker: &Broker,
        target: (&str, u64),
        prefetched: Option<Result<Vec<Listed>, ListError>>,
        published: Option<u64>,
        live_from: Option<u64>,
    ) -> (Result<Vec<Listed>, ListError>, bool) {
        let (stream, generation) = target;
        let Store::Cloud(remote) = self else {
            return (
                self.list_from(broker, stream, generation, prefetched).await,
                false,
            );
        };
        let settled = |all: &[Listed]| match (published, live_from) {
            (Some(p), Some(_)) => {
                crate::broker::archive::segments_of(all, stream, generation)
                    .last()
                    .map(|l| l.last_seq)
                    == Some(p)
            }
            _ => false,
        };
        match cloud(broker, remote).await {
            Ok(c) => c.listing_unless_settled(stream, generation, settled).await,
            Err(message) => (
                Err(ListError {
                    missing: false,
                    message,
                }),
                false,
            ),
        }
    }

    /// Every segment of `stream` at `generation`, in sequence order.
    pub async fn list(
        &self,
        broker: &Broker,
        stream: &str,
        generation: u64,
    ) -> Result<Vec<Listed>, ListError> {
        match self {
            Store::ObjectStore(bucket) => broker.list_segments(bucket, stream, generation).await,
            Store::Cloud(remote) => match cloud(broker, remote).await {
                Ok(c) => c.listing(stream, generation).await,
                Err(message) => Err(ListError {
                    missing: false,
                    message,
                }),
            },
            Store::Dir(root) => {
                let stream = stream.to_string();
                off_thread(broker, root, move |root| {
                    dir::list(root, &stream, generation)
                })
                .await
                .map_err(|message| ListError {
                    missing: false,
                    message,
                })
            }
        }
    }
}

/// The client of a cloud store, made off the tick's threads and within
/// the sidecar's read timeout, which also bounds each of its calls.
async fn cloud(
    broker: &Broker,
    remote: &super::remote::Remote,
) -> Result<std::sync::Arc<crate::cloud::Client>, String> {
    crate::cloud::client_within(remote, broker.read_timeout()).await
}

/// A directory call, on a blocking thread and given up after a read
/// timeout: a mount that stops answering (an open or an fsync that never
/// returns) fails the call, it does not stop the tick, whose timeouts and
/// lease renewal run on the same threads as its reads. A call given up
/// still finishes, or stays stuck, on its own thread: what it writes is
/// whole or absent ([`dir::put`]), and a later call on the same file is
/// refused while it is in flight (the bullet "A directory that stops
/// answering" in docs/decisions.md, Incremental views).
async fn off_thread<T: Send + 'static>(
    broker: &Broker,
    root: &std::path::Path,
    call: impl FnOnce(&std::path::Path) -> Result<T, dir::DirError> + Send + 'static,
) -> Result<T, String> {
    let limit = broker.read_timeout();
    let at = root.to_path_buf();
    let blocking = tokio::task::spawn_blocking(move || call(&at));
    match tokio::time::timeout(limit, blocking).await {
        Ok(Ok(r)) => r.map_err(|e| e.to_string()),
        Ok(Err(e)) => Err(format!("{}: {e}", root.display())),
        Err(_) => Err(format!(
            "{}: no answer within {} (the directory stopped answering)",
            root.display(),
            crate::human::duration(limit)
        )),
    }
}

/// Reads segment `name` back and checks it: it decodes (checksum
/// included), and its header is the log, generation, incarnation and range
/// its name says.
pub async fn verify(
    broker: &Broker,
    store: &Store,
    target: &Target,
    name: &str,
) -> Result<segment::Segment, String> {
    let bytes = store.get(broker, name).await?;
    check(&bytes, target, name)
}

/// The pure half of [`verify`].
pub fn check(bytes: &[u8], target: &Target, name: &str) -> Result<segment::Segment, String> {
    let seg = segment::decode(bytes).map_err(|e| e.to_string())?;
    check_header(&seg.header, target, name)?;
    Ok(seg)
}

/// The header is the log, generation, incarnation and range the name says.
fn check_header(h: &segment::Header, target: &Target, name: &str) -> Result<(), String> {
    let named = segment::parse_name(name);
    if named.as_ref().map(|(s, g, f, l)| (s.as_str(), *g, *f, *l))
        != Some((h.stream.as_str(), h.generation, h.first_seq, h.last_seq))
    {
        return Err(format!(
            "its header says {}/{} {}..={}, its name says otherwise",
            h.stream, h.generation, h.first_seq, h.last_seq
        ));
    }
    if h.stream != target.stream || h.generation != target.generation {
        return Err(format!("it belongs to {}/{}", h.stream, h.generation));
    }
    if h.stream_created != target.stream_created {
        return Err(format!(
            "it was folded from the incarnation created {}, not {}",
            h.stream_created, target.stream_created
        ));
    }
    Ok(())
}

/// Folds `(frontier, to]` into `store`, at most `limits.fold_per_tick`
/// segments, reading until `deadline` at the latest. Each segment is read
/// back and verified after it is written: a segment that does not decode
/// to what was written stops the fold.
///
/// Reading, cutting and writing overlap: the slice streams from the
/// broker while the segment before is compressed, written and read back
/// (compression and checking on a blocking thread), in order, one segment
/// at a time, so the frontier only ever moves over durable segments.
pub async fn fold(
    broker: &Broker,
    store: &Store,
    target: &Target,
    span: (u64, u64),
    limits: Limits,
    deadline: tokio::time::Instant,
) -> Result<Folded, FoldError> {
    let (frontier, to) = span;
    let done = Folded {
        frontier,
        written: Vec::new(),
        already_there: 0,
    };
    if to <= frontier {
        return Ok(done);
    }
    let budget = (
        limits.segment_records.saturating_mul(limits.fold_per_tick),
        limits.segment_bytes.saturating_mul(limits.fold_per_tick),
    );
    // Two cuts may wait for the writer (about what a segment's worth of
    // records in flight between reader and cutter once held) while the
    // reader fills the next.
    let (seg_tx, mut seg_rx) = tokio::sync::mpsc::channel::<Cut>(2);
    let reading = async {
        let mut sink = ToCutter {
            cutter: Cutter::new(frontier, to, limits),
            out: seg_tx,
            refused: None,
        };
        let read = broker
            .read_slice_to(
                &target.stream,
                frontier + 1,
                to,
                budget,
                deadline,
                &mut sink,
            )
            .await;
        let ToCutter {
            cutter,
            out,
            refused,
        } = sink;
        if let Some(refused) = refused {
            return Err(refused);
        }
        // The read covered the slice when it was handed the slice's last
        // record, or proved the records up to it deleted (a record at the
        // end erased); a shorter read leaves the tail for a later tick.
        let whole = matches!(read, Ok(true));
        if let Some(c) = cutter.finish(whole) {
            let _ = out.send(c).await;
        }
        read.map(|_| ()).map_err(|f| f.to_string())
    };
    // A segment's read back overlaps the next one's write: the frontier
    // still moves over each segment only once it is read back and checked,
    // in order. A segment written after one that then fails its check is
    // past the frontier, and is verified and adopted, or re-folded, as any
    // segment a tick wrote and did not publish.
    let writing = async move {
        let mut done = done;
        let mut pending: Option<Written> = None;
        while let Some(c) = seg_rx.recv().await {
            let (checked, put) = match pending.take() {
                Some(p) => {
                    let (checked, put) = tokio::join!(
                        check_one(broker, store, target, p),
                        put_one(broker, store, target, c)
                    );
                    (Some(checked), put)
                }
                None => (None, put_one(broker, store, target, c).await),
            };
            if let Some(checked) = checked {
                if let Err(e) = advance(checked, &mut done).await {
                    return (done, Some(e));
                }
            }
            match put {
                Ok(p) => pending = Some(p),
                Err(e) => return (done, Some(e)),
            }
        }
        if let Some(p) = pending {
            let checked = check_one(broker, store, target, p).await;
            if let Err(e) = advance(checked, &mut done).await {
                return (done, Some(e));
            }
        }
        (done, None)
    };
    let (read, (done, failed)) = tokio::join!(reading, writing);
    let stop = |segment: Option<String>, reason: String| FoldError {
        stream: target.stream.clone(),
        frontier: done.frontier,
        segment,
        reason,
        written: done.written.clone(),
    };
    match (failed, read) {
        (Some((segment, reason)), _) => Err(stop(Some(segment), reason)),
        (None, Err(reason)) => Err(stop(None, reason)),
        (None, Ok(_)) => Ok(done),
    }
}

/// The fold's end of the read: each record goes into the cutter as it
/// arrives, and each segment the cutter closes goes to the writer, the
/// read waiting while two are already waiting for it.
struct ToCutter {
    cutter: Cutter,
    out: tokio::sync::mpsc::Sender<Cut>,
    /// Why the cutter refused a record: the fold stops there.
    refused: Option<String>,
}

impl Take for ToCutter {
    async fn take(&mut self, r: segment::RecordRef<'_>) -> bool {
        match self.cutter.push(r) {
            Err(e) => {
                self.refused = Some(e.to_string());
                false
            }
            Ok((cuts, finished)) => {
                for c in cuts {
                    if self.out.send(c).await.is_err() {
                        // The writer stopped on an error it reports.
                        return false;
                    }
                }
                !finished
            }
        }
    }
}

/// A segment written, not yet read back.
struct Written {
    name: String,
    bytes: Vec<u8>,
    records: u64,
    first_seq: u64,
    last_seq: u64,
    put: Put,
}

/// Encodes and writes one segment. The error names the segment.
async fn put_one(
    broker: &Broker,
    store: &Store,
    target: &Target,
    c: Cut,
) -> Result<Written, (String, String)> {
    let name = segment::name(&target.stream, target.generation, c.first_seq, c.last_seq);
    let fail = |why: String| (name.clone(), why);
    let range = Range {
        stream: target.stream.clone(),
        generation: target.generation,
        stream_created: target.stream_created.clone(),
        first_seq: c.first_seq,
        last_seq: c.last_seq,
    };
    let records = c.records;
    let (first_seq, last_seq) = (c.first_seq, c.last_seq);
    let bytes = tokio::task::spawn_blocking(move || {
        segment::encode_body(&range, c.records, &c.body, Compression::Zstd)
    })
    .await
    .map_err(|e| fail(e.to_string()))?
    .map_err(|e| fail(e.to_string()))?;
    // Each store call is bounded like a read: a store that hangs stops the
    // fold, it does not stall the tick past its lease.
    let put = within(
        broker.read_timeout(),
        || format!("writing {name}"),
        store.put(broker, &name, &bytes),
    )
    .await
    .map_err(fail)?;
    Ok(Written {
        name,
        bytes,
        records,
        first_seq,
        last_seq,
        put,
    })
}

/// Reads a written segment back and checks it: the bytes read back are
/// the bytes encoded from the records read, and their checksum verifies,
/// so the store holds this segment whole. (A segment adopted from the
/// store, not written here, is decoded in full by `verify`.)
async fn check_one(
    broker: &Broker,
    store: &Store,
    target: &Target,
    w: Written,
) -> Result<(Listed, Put), (String, String)> {
    let name = w.name.clone();
    let fail = |why: String| (name.clone(), why);
    let back = within(
        broker.read_timeout(),
        || format!("reading back {name}"),
        store.get(broker, &name),
    )
    .await
    .map_err(fail)?;
    let (t, n) = (target.clone(), name.clone());
    let (back, verified) = tokio::task::spawn_blocking(move || {
        let v = segment::verify_checksum(&back)
            .map_err(|e| e.to_string())
            .and_then(|h| check_header(&h, &t, &n).map(|()| h.records));
        (back, v)
    })
    .await
    .map_err(|e| fail(e.to_string()))?;
    let verified = verified.map_err(|e| fail(format!("{name} read back: {e}")))?;
    if verified != w.records || back != w.bytes {
        return Err(fail(format!("{name} reads back other than it was written")));
    }
    Ok((
        Listed {
            name: w.name,
            first_seq: w.first_seq,
            last_seq: w.last_seq,
            bytes: w.bytes.len() as u64,
        },
        w.put,
    ))
}

/// On a segment checked, the frontier moves to its end.
async fn advance(
    checked: Result<(Listed, Put), (String, String)>,
    done: &mut Folded,
) -> Result<(), (String, String)> {
    let (listed, put) = checked?;
    done.frontier = listed.last_seq;
    done.written.push(listed);
    if put == Put::AlreadyThere {
        done.already_there += 1;
    }
    crate::failpoint::failpoint("after_segment").await;
    Ok(())
}
