//! The archive in a JetStream Object Store bucket: segments put whole,
//! never replaced (an object of that name with other bytes is an error),
//! listed by name, read back whole.

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use async_nats::jetstream::object_store;
use futures::StreamExt;
use serde::Deserialize;
use tokio::io::AsyncReadExt;

use super::{Broker, Fault};
use crate::archive::segment;
use crate::archive::segment::{Record, RecordRef};
use crate::archive::state::Put;
use crate::archive::state::{ListError, Listed};

impl Broker {
    pub(super) async fn object_store(
        &self,
        bucket: &str,
    ) -> Result<object_store::ObjectStore, super::Fault> {
        self.object_store_handle(bucket).await
    }

    /// Creates Object Store bucket `bucket` with `replicas` if it is
    /// missing; returns whether it created it.
    pub async fn ensure_object_store(
        &self,
        bucket: &str,
        replicas: usize,
    ) -> Result<bool, super::Fault> {
        if self.object_store_handle(bucket).await.is_ok() {
            return Ok(false);
        }
        self.js
            .create_object_store(object_store::Config {
                bucket: bucket.to_string(),
                num_replicas: replicas,
                storage: async_nats::jetstream::stream::StorageType::File,
                ..Default::default()
            })
            .await
            .map(|_| true)
            .map_err(|e| Fault::failed(format!("creating object store {bucket}: {e}")))
    }

    /// The bytes of object `name`, or `None` when there is none.
    pub async fn get_segment(
        &self,
        bucket: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, super::Fault> {
        let store = self.object_store(bucket).await?;
        let mut object = match store.get(name).await {
            Ok(o) => o,
            Err(e) if e.kind() == object_store::GetErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Fault::failed(format!("reading {name} from {bucket}: {e}"))),
        };
        // An object whose body is gone (its chunks purged while its entry
        // stays) is never answered: the reader waits for chunks that will
        // not come. Bounded, it is a damaged segment named as such.
        let (size, chunks) = (object.info.size, object.info.chunks);
        let mut bytes = Vec::new();
        match tokio::time::timeout(self.read_timeout, object.read_to_end(&mut bytes)).await {
            Ok(Ok(_)) => Ok(Some(bytes)),
            Ok(Err(e)) => Err(Fault::failed(format!("reading {name} from {bucket}: {e}"))),
            Err(_) => Err(Fault::failed(format!(
                "{bucket}/{name} is listed ({size} bytes in {chunks} chunk(s)) but its body could not be read within {} ({} bytes came): its chunks are missing or the broker is slow",
                crate::config::Dur(self.read_timeout),
                bytes.len()
            ))),
        }
    }

    /// Puts segment `name` whole, unless it is there already: the same
    /// bytes are a re-fold, other bytes an error (never overwritten). The
    /// put is complete (every chunk and the info stored) when it returns.
    pub async fn put_segment(
        &self,
        bucket: &str,
        name: &str,
        bytes: &[u8],
    ) -> Result<Put, super::Fault> {
        if let Some(existing) = self.get_segment(bucket, name).await? {
            return if existing == bytes {
                Ok(Put::AlreadyThere)
            } else {
                Err(Fault::failed(format!(
                    "{bucket}/{name} exists with other content than this fold wrote; it is never overwritten (check what wrote it, and verify-archive)"
                )))
            };
        }
        let store = self.object_store(bucket).await?;
        let mut reader = bytes;
        store
            .put(name, &mut reader)
            .await
            .map(|_| Put::Written)
            .map_err(|e| Fault::failed(format!("writing {name} to {bucket}: {e}")))
    }

    /// Every segment of `stream` at `generation` in the bucket, in
    /// sequence order, with its stored size (deleted objects and other
    /// names are not listed). A bucket that does not exist says so.
    pub async fn list_segments(
        &self,
        bucket: &str,
        stream: &str,
        generation: u64,
    ) -> Result<Vec<Listed>, ListError> {
        self.object_listing(bucket)
            .await
            .map(|all| segments_of(&all, stream, generation))
    }

    /// Every segment in the bucket (deleted objects and other names are
    /// not listed), in name order: what [`Broker::list_segments`] takes
    /// one log's generation from. A tick asks for it beside its bucket
    /// reads, before it knows the log's incarnation.
    pub async fn object_listing(&self, bucket: &str) -> Result<Vec<Listed>, ListError> {
        let failed = |message: String| ListError {
            missing: false,
            message,
        };
        // The bucket's stream as it is now, from its leader: when it is as
        // it was at the last listing, the listing is the same (proof at
        // `Stamp`). A listing is proven only against the leader's answer
        // (docs/trim-floor.md, Proven current): no leader, no listing.
        let stream_name = format!("OBJ_{bucket}");
        let stream = match self.stream_led(&stream_name).await {
            Ok(s) => s,
            Err(Fault::Missing(_)) => {
                return Err(ListError {
                    missing: true,
                    message: format!(
                        "object store {bucket} does not exist; run crewlet retention init"
                    ),
                })
            }
            Err(e) => return Err(failed(format!("object store {bucket}: {e}"))),
        };
        let stamp = Stamp::of(stream.cached_info());
        if let Some(all) = self.listings.hit(bucket, &stamp) {
            return Ok(all);
        }
        // The objects' entries are read here rather than through the
        // store's `list`: that deserializes each whole entry, and one
        // written by another client (a deletion marker whose `mtime` is
        // not an RFC 3339 time, say) failed the whole listing, so a
        // deleted segment read as a broken store instead of a gap. Only
        // the name, the size and the deletion mark decide anything here.
        let list = async {
            let consumer = stream
                .create_consumer(OrderedConfig {
                    filter_subject: format!("$O.{bucket}.M.>"),
                    deliver_policy: DeliverPolicy::All,
                    ..Default::default()
                })
                .await
                .map_err(|e| failed(format!("listing {bucket}: {e}")))?;
            let name = consumer.cached_info().name.clone();
            let read = read_entries(bucket, consumer).await;
            // Not left for the server to expire (a `status` deletes
            // every consumer it made before it exits).
            let _ = stream.delete_consumer(&name).await;
            let (all, newest) = read?;
            // The reader may live on a member behind the leader whose
            // stamp was taken: every entry up to the stamp's last
            // sequence must have been delivered, or the leader must say
            // there is none past the newest one seen (a deleted or
            // replaced segment's entry read as it was would move the
            // archive's frontier over records it does not hold).
            if newest < stamp.last_seq {
                let filter = format!("$O.{bucket}.M.>");
                match self
                    .leader_holds_none_of(&stream_name, &filter, newest + 1, stamp.last_seq)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(failed(format!(
                            "listing {bucket}: the reader's server had entries up to {newest}, its leader up to {} (a member behind)",
                            stamp.last_seq
                        )))
                    }
                    Err(e) => return Err(failed(format!("listing {bucket}: {e}"))),
                }
            }
            Ok(all)
        };
        let all = tokio::time::timeout(self.read_timeout, list)
            .await
            .map_err(|_| {
                failed(format!(
                    "listing {bucket}: no answer within {}",
                    crate::config::Dur(self.read_timeout)
                ))
            })??;
        self.listings.keep(bucket, stamp, all.clone());
        Ok(all)
    }
}

/// What a listing was taken at: the bucket's stream incarnation, its last
/// sequence and its message count. Every change to an Object Store bucket
/// moves one of them: a put or a delete appends (last sequence), a purge
/// or an expiry removes (message count; putting the count back would
/// append), and a bucket deleted and created again has another creation
/// time. So the same stamp means the same stream, and the same listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    created: time::OffsetDateTime,
    last_seq: u64,
    messages: u64,
}

impl Stamp {
    fn of(info: &async_nats::jetstream::stream::Info) -> Stamp {
        Stamp {
            created: info.created,
            last_seq: info.state.last_sequence,
            messages: info.state.messages,
        }
    }
}

/// The last listing of each Object Store bucket: every segment in it (not
/// deleted), with the stamp taken before the listing was asked for. A
/// write between the stamp and the listing leaves a stamp that the next
/// tick's does not match, so it lists again: the cache can be stale only
/// towards listing more often.
#[derive(Debug, Default)]
pub(super) struct Listings {
    by_bucket: std::sync::Mutex<std::collections::HashMap<String, (Stamp, Vec<Listed>)>>,
}

impl Listings {
    fn hit(&self, bucket: &str, stamp: &Stamp) -> Option<Vec<Listed>> {
        let kept = self.by_bucket.lock().ok()?;
        kept.get(bucket)
            .filter(|(s, _)| s == stamp)
            .map(|(_, all)| all.clone())
    }

    fn keep(&self, bucket: &str, stamp: Stamp, all: Vec<Listed>) {
        if let Ok(mut kept) = self.by_bucket.lock() {
            kept.insert(bucket.to_string(), (stamp, all));
        }
    }
}

/// The segments of `stream` at `generation` in a store's whole listing,
/// in sequence order.
pub fn segments_of(all: &[Listed], stream: &str, generation: u64) -> Vec<Listed> {
    let prefix = format!("{stream}/{generation}/");
    all.iter()
        .filter(|l| l.name.starts_with(&prefix))
        .cloned()
        .collect()
}

/// A record's headers as a NATS header block, names in sorted order and
/// each name's values in the order they were given. The client hands
/// headers over as a map, so their order on the wire is not kept; sorting
/// makes the block the same every time the record is read, so that
/// re-folding a range writes the same segment.
pub fn header_block(headers: Option<&async_nats::HeaderMap>) -> Vec<u8> {
    let Some(h) = headers else {
        return Vec::new();
    };
    let mut names: Vec<(&async_nats::HeaderName, &Vec<async_nats::HeaderValue>)> =
        h.iter().collect();
    if names.is_empty() {
        return Vec::new();
    }
    names.sort_by(|a, b| AsRef::<str>::as_ref(a.0).cmp(AsRef::<str>::as_ref(b.0)));
    let mut out = b"NATS/1.0\r\n".to_vec();
    for (name, values) in names {
        for v in values {
            out.extend_from_slice(AsRef::<str>::as_ref(name).as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v.as_str().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Where a slice's records go as they are read ([`Broker::read_slice_to`]):
/// the fold's cutter, or a list.
pub trait Take {
    /// Takes one record, borrowed from the message it arrived in; false
    /// when it wants no more.
    fn take(&mut self, r: RecordRef<'_>) -> impl std::future::Future<Output = bool> + Send;
}

impl Take for Vec<Record> {
    async fn take(&mut self, r: RecordRef<'_>) -> bool {
        self.push(r.to_owned());
        true
    }
}

impl Broker {
    /// Records `from..=to` of `stream`, at most `max_records` and about
    /// `max_bytes` (as the cutter counts them), in sequence order, read by
    /// one ordered consumer (never a request per record). The read ends at
    /// `to`, at either budget, at `deadline` (what was read by then is
    /// returned), or where the reader's server has nothing more (a replica
    /// behind, or the log's end): the caller archives only up to the last
    /// record returned.
    pub async fn read_slice(
        &self,
        stream: &str,
        from: u64,
        to: u64,
        budget: (usize, usize),
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Record>, super::Fault> {
        let mut out = Vec::new();
        self.read_slice_to(stream, from, to, budget, deadline, &mut out)
            .await
            .map(|_| out)
    }

    /// Whether the stream's leader holds no record in `from..=to` (a
    /// message get of the next record from `from` on any subject, which
    /// only the leader answers): the slice's tail was deleted, not unread.
    async fn leader_has_none(
        &self,
        s: &async_nats::jetstream::stream::Stream,
        from: u64,
        to: u64,
    ) -> bool {
        use async_nats::jetstream::stream::RawMessageErrorKind;
        match s
            .raw_message_builder()
            .sequence(from)
            .next_by_subject(">".to_string())
            .send()
            .await
        {
            Ok(m) => m.sequence > to,
            Err(e) => e.kind() == RawMessageErrorKind::NoMessageFound,
        }
    }

    /// As [`Broker::read_slice`], handing each record to `sink` as it
    /// arrives, borrowed from its message, so that what is done with the
    /// slice overlaps reading it and nothing is copied on the way. A sink
    /// that wants no more ends the read. Returns whether the read covered
    /// the slice to its end `to`: the sink was handed the record at `to`,
    /// or the log's leader holds no record between the last one handed
    /// over and `to` (records at the slice's end were deleted, so none
    /// will come).
    #[allow(clippy::too_many_arguments)]
    pub async fn read_slice_to(
        &self,
        stream: &str,
        from: u64,
        to: u64,
        budget: (usize, usize),
        deadline: tokio::time::Instant,
        sink: &mut impl Take,
    ) -> Result<bool, super::Fault> {
        let (max_records, max_bytes) = budget;
        if to < from || max_records == 0 {
            return Ok(false);
        }
        let err = |e: String| Fault::failed(format!("reading {stream} {from}..={to}: {e}"));
        let (s, consumer) =
            tokio::time::timeout_at(deadline, self.reader_from(stream, from, false))
                .await
                .map_err(|_| err("no reader before the tick's deadline".into()))?
                .map_err(err)?;
        let name = consumer.cached_info().name.clone();
        let announced = consumer.cached_info().num_pending;
        let walk = async {
            let mut count = 0usize;
            let mut reached = from.saturating_sub(1);
            let mut short = false;
            if announced == 0 {
                return Ok(self.leader_has_none(&s, from, to).await);
            }
            let mut messages = consumer.messages().await.map_err(|e| err(e.to_string()))?;
            let mut bytes = 0usize;
            // One timer for the whole walk, checked before each message
            // (a timeout per message set and cleared a timer 100,000 times
            // a fold).
            let expiry = tokio::time::sleep_until(deadline);
            tokio::pin!(expiry);
            loop {
                let m = tokio::select! {
                    biased;
                    () = &mut expiry => break,
                    m = messages.next() => match m {
                        None => break,
                        Some(m) => m.map_err(|e| err(e.to_string()))?,
                    },
                };
                let info = m.info().map_err(|e| err(e.to_string()))?;
                let seq = info.stream_sequence;
                if seq > to {
                    reached = to;
                    break;
                }
                let pending = info.pending;
                let time_ns = i64::try_from(info.published.unix_timestamp_nanos())
                    .map_err(|_| err(format!("record {seq}: a timestamp past 2262")))?;
                let headers = header_block(m.headers.as_ref());
                let record = RecordRef {
                    seq,
                    time_ns,
                    subject: m.subject.as_str(),
                    headers: &headers,
                    data: &m.payload,
                };
                bytes += record.size();
                let more = sink.take(record).await;
                count += 1;
                reached = seq;
                if !more || count >= max_records || bytes >= max_bytes {
                    short = seq < to;
                    break;
                }
                if seq == to || pending == 0 {
                    break;
                }
            }
            // Nothing more was offered short of `to`: the rest of the slice
            // is either deleted (the leader says so) or not read yet.
            Ok(reached >= to || (!short && self.leader_has_none(&s, reached + 1, to).await))
        }
        .await;
        let _ = s.delete_consumer(&name).await;
        walk
    }
}

/// The listing's entries, read to the last one the consumer announced,
/// and the newest stream sequence delivered (0: none).
async fn read_entries(
    bucket: &str,
    consumer: async_nats::jetstream::consumer::Consumer<OrderedConfig>,
) -> Result<(Vec<Listed>, u64), ListError> {
    let failed = |message: String| ListError {
        missing: false,
        message,
    };
    let mut all = Vec::new();
    let mut newest = 0;
    if consumer.cached_info().num_pending == 0 {
        return Ok((all, newest));
    }

    let mut entries = consumer
        .messages()
        .await
        .map_err(|e| failed(format!("listing {bucket}: {e}")))?;
    while let Some(m) = entries.next().await {
        let m = m.map_err(|e| failed(format!("listing {bucket}: {e}")))?;
        let info = m
            .info()
            .map_err(|e| failed(format!("listing {bucket}: {e}")))?;
        let pending = info.pending;
        newest = newest.max(info.stream_sequence);
        match serde_json::from_slice::<Entry>(&m.payload) {
            Ok(e) if !e.deleted => {
                if let Some((_, _, first_seq, last_seq)) = segment::parse_name(&e.name) {
                    all.push(Listed {
                        name: e.name,
                        first_seq,
                        last_seq,
                        bytes: e.size,
                    });
                }
            }
            Ok(_) => {}
            Err(e) => {
                return Err(failed(format!(
                    "listing {bucket}: the entry on {} does not parse ({e})",
                    m.subject
                )))
            }
        }
        if pending == 0 {
            break;
        }
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((all, newest))
}

/// What a listing needs of an object's entry (`$O.<bucket>.M.<name>`);
/// every other field, whatever its client wrote there, is ignored.
#[derive(Deserialize)]
struct Entry {
    name: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    deleted: bool,
}
