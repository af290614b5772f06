//! The tick's readers: every bucket in one pass each, stream info, the feed
//! consumer, and the age lookup. Each returns a value or an error naming
//! what failed; nothing is cached between calls.

use std::collections::HashSet;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::ErrorCode;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Deserialize;

use super::{Broker, Fault};
use crate::clock::Reading;
use crate::config::Buckets;
use crate::floor::parsed::{self, Sink};
use crate::floor::{Bucket, BucketError, Entry, FeedState, ParsedRows, Rows, StreamState};
use crate::proven::Proven;
use crate::rows::Timestamp;

/// The raw entries of the buckets the tick writes back to, as this
/// module read them (and, for the gates bucket, as its absorber wrote
/// them): no code outside it can put entries of its own in one, so the
/// rows re-vouched from it ([`Broker::with_gates_absorbed`]) are the
/// broker's read.
#[derive(Debug, Clone)]
pub struct Raw {
    gates: Bucket,
    /// `None` from the tick's views: the tick reads the floors rows parsed
    /// only, and a copy of every row's bytes each tick (a row carries every
    /// counted node's pin) is what the memory figure paid for.
    floors: Option<Bucket>,
}

impl Raw {
    pub fn gates(&self) -> &Bucket {
        &self.gates
    }

    /// The floors rows as read whole (`None` from the views).
    pub fn floors(&self) -> Option<&Bucket> {
        self.floors.as_ref()
    }

    pub fn into_gates(self) -> Bucket {
        self.gates
    }

    /// The gates entries, for this module's absorber to bring up to date.
    pub(super) fn gates_mut(&mut self) -> &mut Bucket {
        &mut self.gates
    }
}

/// How long one read may take before it counts as unreadable, unless the
/// sidecar sets a shorter one from its tick ([`Broker::with_read_timeout`]).
pub const READ_TIMEOUT: Duration = crate::config::MAX_READ_TIMEOUT;

/// A reader of bucket `name` from the last message of each key on: what
/// a full read delivers, and where an incremental view starts.
pub(super) fn last_per_key(name: &str) -> OrderedConfig {
    OrderedConfig {
        filter_subject: format!("$KV.{name}.>"),
        deliver_policy: DeliverPolicy::LastPerSubject,
        // Pulls of at most this long, so that a lost pull is noticed (by
        // its missed heartbeats) within a read timeout rather than after
        // the client's default 30 s.
        max_expires: Duration::from_secs(4),
        ..Default::default()
    }
}

/// Whether a bucket message ends its key: a delete or purge (the KV
/// operation header), or a marker the server writes when a key's last
/// message goes.
pub(super) fn is_deletion(headers: &async_nats::HeaderMap) -> bool {
    headers
        .get("KV-Operation")
        .is_some_and(|op| op.as_str() == "DEL" || op.as_str() == "PURGE")
        || headers.get("Nats-Marker-Reason").is_some()
}

/// While a clustered stream elects a leader, every member answers stream
/// info from its own state, which may miss what the last leader committed
/// (a member that restarted empty reports an empty stream). Such an
/// answer names no leader in its `cluster`, and proves nothing
/// (docs/trim-floor.md, Proven current). A single server's answer, and an
/// R1 stream's, name the server that holds it.
fn no_leader(stream: &str) -> Fault {
    Fault::failed(format!(
        "no leader for {stream}: a member answered stream info from its own state, which proves nothing while the stream elects a leader"
    ))
}

/// Whether a raw `STREAM.INFO` answer is the leader's word ([`no_leader`]).
pub(super) fn led_raw(stream: &str, reply: &serde_json::Value) -> Result<(), Fault> {
    match reply.get("cluster") {
        None | Some(serde_json::Value::Null) => Ok(()),
        Some(c) => match c.get("leader").and_then(serde_json::Value::as_str) {
            Some(l) if !l.is_empty() => Ok(()),
            _ => Err(no_leader(stream)),
        },
    }
}

/// As [`led_raw`], for the typed answer (`get_stream`'s cached info).
pub(super) fn led(stream: &str, info: &async_nats::jetstream::stream::Info) -> Result<(), Fault> {
    if led_cluster(info.cluster.as_ref()) {
        Ok(())
    } else {
        Err(no_leader(stream))
    }
}

/// Whether a typed answer's `cluster` is the leader's word (none: a
/// single server's answer).
fn led_cluster(cluster: Option<&async_nats::jetstream::stream::ClusterInfo>) -> bool {
    cluster.is_none_or(|c| c.leader.as_deref().is_some_and(|l| !l.is_empty()))
}

/// Whether a consumer-info answer (the feed's, or an item of a consumer
/// listing) is its leader's word. On a cluster (`clustered`: the log's own
/// stream info came from a raft group) every consumer answer names its
/// leader in `cluster`, and a member that has not yet joined the
/// consumer's group answers at once with its configuration, zeroed state
/// and no `cluster` at all, which would read as a feed caught up
/// (docs/trim-floor.md, Proven current). A single server's consumer
/// answers carry no `cluster`.
fn consumer_led(
    cluster: Option<&async_nats::jetstream::stream::ClusterInfo>,
    clustered: bool,
) -> bool {
    match cluster {
        None => !clustered,
        Some(c) => c.leader.as_deref().is_some_and(|l| !l.is_empty()),
    }
}

/// PURE: the feed state of a consumer-info answer, or why it proves
/// nothing ([`consumer_led`]).
fn feed_of(
    stream: &str,
    consumer: &str,
    info: &async_nats::jetstream::consumer::Info,
    clustered: bool,
) -> Result<FeedState, Fault> {
    if !consumer_led(info.cluster.as_ref(), clustered) {
        return Err(Fault::failed(format!(
            "consumer {consumer} on {stream}: the answer names no leader (a member that has not joined the consumer's group, or an election), so it proves nothing"
        )));
    }
    Ok(FeedState {
        ack_floor_seq: info.ack_floor.stream_sequence,
        delivered_seq: info.delivered.stream_sequence,
        num_ack_pending: info.num_ack_pending as u64,
        num_pending: info.num_pending,
    })
}

/// Converts the broker's `created` (nanoseconds preserved).
pub fn instant_of(t: time::OffsetDateTime) -> Timestamp {
    // Seconds and nanoseconds apart, not one i128 of nanoseconds divided:
    // a watcher converts every message's time, and the 128-bit division
    // showed in a full read's profile.
    Timestamp(
        DateTime::<Utc>::from_timestamp(t.unix_timestamp(), t.nanosecond()).unwrap_or_default(),
    )
}

/// What the account's stream listing says of the logs' copies.
#[derive(Debug, Default)]
pub struct Copies {
    /// Per log, the streams copying it through an ephemeral consumer.
    pub unprotected: std::collections::BTreeMap<String, Vec<String>>,
    /// (log, consumer) → the stream copying the log through that durable
    /// consumer.
    pub feeds: std::collections::BTreeMap<(String, String), String>,
}

/// What one paged listing of the account's streams said ([`Broker::listing`]).
#[derive(Debug, Default)]
pub struct Listing {
    pub copies: Copies,
    /// Each listed log's state and the broker's clock as its leader
    /// answered, where the listing proves it.
    pub states: std::collections::HashMap<String, Proven<(StreamState, Reading)>>,
}

impl Listing {
    fn take(&mut self, page: Page) {
        for (log, copy) in page.unprotected {
            self.copies.unprotected.entry(log).or_default().push(copy);
        }
        self.copies.feeds.extend(page.feeds);
        self.states.extend(page.states);
    }
}

/// One page of the listing, judged.
#[derive(Debug, Default)]
struct Page {
    /// How many streams the account has, and how many this page listed.
    total: usize,
    streams: usize,
    /// (log, copy) for each ephemeral copy of one of the logs.
    unprotected: Vec<(String, String)>,
    feeds: Vec<((String, String), String)>,
    states: Vec<(String, Proven<(StreamState, Reading)>)>,
}

impl Page {
    /// Stream `copy` mirrors or sources `log`: through `consumer`, a
    /// durable consumer of the log's (durable sourcing), or through an
    /// ephemeral one, whose progress the log cannot see (docs/trim-floor.md,
    /// Replicas). A copy from another domain (`external`) is not visible
    /// from here, and is left to that domain.
    fn copy(
        &mut self,
        logs: &HashSet<&str>,
        copy: &str,
        log: &str,
        external: bool,
        consumer: Option<&str>,
    ) {
        if external || !logs.contains(log) {
            return;
        }
        match consumer {
            Some(c) => self
                .feeds
                .push(((log.to_string(), c.to_string()), copy.to_string())),
            None => self.unprotected.push((log.to_string(), copy.to_string())),
        }
    }
}

/// A log's state from its stream info's parts.
fn state_of(
    config: &async_nats::jetstream::stream::Config,
    state: &async_nats::jetstream::stream::State,
    created: time::OffsetDateTime,
    cluster: Option<&async_nats::jetstream::stream::ClusterInfo>,
) -> StreamState {
    StreamState {
        first_seq: state.first_sequence,
        last_seq: state.last_sequence,
        bytes: state.bytes,
        messages: state.messages,
        consumers: state.consumer_count,
        max_bytes: config.max_bytes,
        created: instant_of(created),
        first_ts: instant_of(state.first_timestamp),
        last_ts: instant_of(state.last_timestamp),
        facts: super::streams::facts_of(config),
        clustered: cluster.is_some_and(|c| c.raft_group.as_deref().is_some_and(|g| !g.is_empty())),
        mark: crate::rows::Mark::from_metadata(&config.metadata),
    }
}

/// PURE: one `STREAM.LIST` page as the broker answered it at `local`:
/// the copies of `logs` it names, and the state of each of `logs` it
/// proves (the leader's word, with the broker's clock). A stream whose
/// item does not parse as stream info is still read for its copies.
fn judge_page(payload: &[u8], logs: &HashSet<&str>, local: DateTime<Utc>) -> Result<Page, String> {
    #[derive(Deserialize)]
    struct Raw<'a> {
        #[serde(default)]
        total: usize,
        #[serde(default, borrow)]
        streams: Vec<&'a serde_json::value::RawValue>,
        error: Option<async_nats::jetstream::Error>,
    }
    /// A listed stream's info, and the broker's clock as it answered.
    #[derive(Deserialize)]
    struct Item {
        config: async_nats::jetstream::stream::Config,
        #[serde(with = "time::serde::rfc3339")]
        created: time::OffsetDateTime,
        state: async_nats::jetstream::stream::State,
        cluster: Option<async_nats::jetstream::stream::ClusterInfo>,
        ts: Option<String>,
    }
    let raw: Raw = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
    if let Some(e) = raw.error {
        return Err(e.to_string());
    }
    let mut page = Page {
        total: raw.total,
        streams: raw.streams.len(),
        ..Page::default()
    };
    for item in raw.streams {
        match serde_json::from_str::<Item>(item.get()) {
            Ok(item) => {
                let name = item.config.name.as_str();
                let origins = item
                    .config
                    .mirror
                    .iter()
                    .chain(item.config.sources.iter().flatten());
                for origin in origins {
                    page.copy(
                        logs,
                        name,
                        &origin.name,
                        origin.external.is_some(),
                        origin.consumer.as_ref().map(|c| c.name.as_str()),
                    );
                }
                if !logs.contains(&name) || !led_cluster(item.cluster.as_ref()) {
                    continue;
                }
                let Some(broker) = item
                    .ts
                    .as_deref()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                else {
                    continue;
                };
                page.states.push((
                    name.to_string(),
                    Proven::vouched((
                        state_of(
                            &item.config,
                            &item.state,
                            item.created,
                            item.cluster.as_ref(),
                        ),
                        Reading {
                            broker: broker.with_timezone(&Utc),
                            local,
                        },
                    )),
                ));
            }
            // A stream whose info this client cannot parse may still copy
            // a log: its origins are read leniently.
            Err(_) => {
                let v: serde_json::Value =
                    serde_json::from_str(item.get()).map_err(|e| e.to_string())?;
                lenient_origins(&v, logs, &mut page);
            }
        }
    }
    Ok(page)
}

/// The copies a listed stream's raw config names.
fn lenient_origins(item: &serde_json::Value, logs: &HashSet<&str>, page: &mut Page) {
    let config = &item["config"];
    let Some(name) = config["name"].as_str() else {
        return;
    };
    let origins = std::iter::once(&config["mirror"])
        .chain(config["sources"].as_array().into_iter().flatten());
    for origin in origins {
        let Some(log) = origin["name"].as_str() else {
            continue;
        };
        page.copy(
            logs,
            name,
            log,
            origin.get("external").is_some_and(|e| !e.is_null()),
            origin["consumer"]["name"].as_str(),
        );
    }
}

impl Broker {
    /// Every live key of bucket `name` with its value and revision: one
    /// ordered consumer delivering the last message per subject, read until
    /// nothing is pending (never `keys()` plus a `get` per key).
    pub async fn read_bucket(&self, name: &str) -> Bucket {
        self.read_bucket_parsing(name, |_: &mut (), _, _, _| {}, true)
            .await
            .0
    }

    /// As [`Broker::read_bucket`], also handing each entry to `add` as it
    /// arrives, so that parsing overlaps the wait for the rest.
    /// With `keep_raw` false the entries themselves are not kept (the
    /// bucket answers an empty list): only their parsed form.
    ///
    /// A read is complete or it is unreadable (docs/trim-floor.md, Reads that must be
    /// complete): it must reach the end the broker announced, and deliver
    /// at least as many keys as the bucket's stream said it held just
    /// before. A short read is tried once more (a key may have expired in
    /// between), then refused; it is never taken as a smaller bucket.
    pub async fn read_bucket_parsing<T: Default>(
        &self,
        name: &str,
        add: Sink<T>,
        keep_raw: bool,
    ) -> (Bucket, Result<T, BucketError>, Option<Timestamp>) {
        let mut last_short = String::new();
        for _ in 0..2 {
            let mut parsed = T::default();
            let read = tokio::time::timeout(
                self.read_timeout,
                self.read_bucket_inner(name, &mut parsed, add, keep_raw),
            )
            .await;
            let bucket = match read {
                Ok(Ok(Ok((entries, created)))) => Ok((entries, created)),
                Ok(Ok(Err(short))) => {
                    last_short = short;
                    continue;
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(BucketError::Failed {
                    bucket: name.to_string(),
                    reason: format!("no answer within {}", crate::config::Dur(self.read_timeout)),
                }),
            };
            return match bucket {
                Ok((entries, created)) => (Ok(entries), Ok(parsed), Some(created)),
                Err(e) => (Err(e.clone()), Err(e), None),
            };
        }
        let e = BucketError::Failed {
            bucket: name.to_string(),
            reason: format!("the read was incomplete twice: {last_short}"),
        };
        (Err(e.clone()), Err(e), None)
    }

    /// One read of bucket `name`: `Ok(Err(why))` when it came out short.
    async fn read_bucket_inner<T>(
        &self,
        name: &str,
        parsed: &mut T,
        add: Sink<T>,
        keep_raw: bool,
    ) -> Result<Result<(Vec<Entry>, Timestamp), String>, BucketError> {
        let failed = |reason: String| BucketError::Failed {
            bucket: name.to_string(),
            reason,
        };
        let prefix = format!("$KV.{name}.");
        // The bucket's stream state (what a complete read must reach), then
        // the reader: a key added in between is delivered too (the reader
        // runs until nothing is pending), and one that expired in between
        // costs a second read. A missing bucket answers "stream not found".
        let stream_name = format!("KV_{name}");
        let config = last_per_key(name);
        // Stream info first (the leader answers it), then the reader: what
        // the reader delivers must reach what the leader had committed.
        let stream = self.js.get_stream(&stream_name).await;
        if let Ok(s) = &stream {
            // A leaderless member's state proves nothing: no reader is made.
            led(&stream_name, s.cached_info()).map_err(|f| failed(f.to_string()))?;
        }
        let consumer = match &stream {
            Ok(_) => Some(
                self.js
                    .create_consumer_on_stream(config, &stream_name)
                    .await,
            ),
            Err(_) => None,
        };
        let missing = || BucketError::Missing {
            bucket: name.to_string(),
        };
        let stream = stream.map_err(|e| match e.kind() {
            GetStreamErrorKind::JetStream(je) if je.error_code() == ErrorCode::STREAM_NOT_FOUND => {
                missing()
            }
            _ => failed(e.to_string()),
        })?;
        let (messages, subjects, last_seq) = {
            let state = &stream.cached_info().state;
            (state.messages, state.subjects_count, state.last_sequence)
        };
        let created = instant_of(stream.cached_info().created);
        let consumer = consumer
            .ok_or_else(|| failed("no stream info".into()))?
            .map_err(|e| failed(e.to_string()))?;
        let consumer_name = consumer.cached_info().name.clone();
        let announced = consumer.cached_info().num_pending;
        let read = async {
            // An empty bucket delivers nothing and would block: ask first.
            if announced == 0 {
                return Ok(if messages > 0 {
                    Err(format!(
                        "the reader was offered no key, but the bucket's stream holds {messages} messages"
                    ))
                } else {
                    Ok((Vec::new(), created))
                });
            }
            let mut stream_of = consumer
                .messages()
                .await
                .map_err(|e| failed(e.to_string()))?;
            let mut out = Vec::new();
            let mut seen: u64 = 0;
            let mut newest: u64 = 0;
            let mut complete = false;
            while let Some(msg) = stream_of.next().await {
                let msg = msg.map_err(|e| failed(e.to_string()))?;
                let info = msg.info().map_err(|e| failed(e.to_string()))?;
                let pending = info.pending;
                let revision = info.stream_sequence;
                seen += 1;
                // The client recreates an ordered consumer after a gap or a
                // lost server, from the next stream sequence and without
                // "last per subject": what it delivers then is not one
                // snapshot of the bucket. Start over instead.
                if info.consumer_sequence != seen {
                    return Ok(Err(format!(
                        "the reader was restarted after {} of {announced} keys",
                        seen - 1
                    )));
                }
                newest = newest.max(revision);
                if !msg.headers.as_ref().is_some_and(is_deletion) {
                    if let Some(key) = msg.subject.as_str().strip_prefix(&prefix) {
                        add(parsed, key, &msg.payload, revision);
                        if keep_raw {
                            out.push(Entry {
                                key: key.to_string(),
                                value: msg.payload.to_vec(),
                                revision,
                            });
                        }
                    }
                }
                if pending == 0 {
                    complete = true;
                    break;
                }
            }
            if !complete {
                return Ok(Err(format!(
                    "the reader stopped after {seen} of {announced} keys"
                )));
            }
            if seen < subjects {
                return Ok(Err(format!(
                    "{seen} keys were delivered, but the bucket's stream holds {subjects} subjects"
                )));
            }
            // On a cluster the reader may live on a replica that is behind
            // the leader that answered stream info: the newest revision it
            // delivered must reach the leader's last sequence (the last
            // message of a bucket is the last of its key, so a current
            // reader delivers it). Otherwise a changed hold or lease could
            // be read as it was.
            // `last_seq` is a high-water mark: when the newest message was
            // removed (a compacted delete marker, a per-message TTL, a
            // subject purge) no reader can deliver it. The leader then
            // says whether anything exists past what was delivered.
            if messages > 0 && newest < last_seq {
                match self.leader_holds_none(&stream_name, newest + 1, last_seq).await {
                    Ok(true) => {}
                    Ok(false) => {
                        return Ok(Err(format!(
                            "the reader's server had the bucket up to revision {newest}, its leader up to {last_seq} (a replica behind)"
                        )))
                    }
                    Err(e) => {
                        return Ok(Err(format!(
                            "the reader delivered the bucket up to revision {newest}, its leader's last is {last_seq}, and the leader could not say what lies between: {e}"
                        )))
                    }
                }
            }
            Ok(Ok((out, created)))
        }
        .await;
        // The reader is ours: delete it rather than leave it to expire, off
        // the read's own path (the broker answers the delete while the tick
        // goes on; an ordered reader the broker still holds goes by itself
        // after 30 s idle).
        tokio::spawn(async move {
            let _ = stream.delete_consumer(&consumer_name).await;
        });
        read
    }

    /// Every bucket the answer reads, concurrently, once, as raw entries.
    pub async fn read_rows(&self, b: &Buckets) -> Rows {
        let (presence, positions, holds, backups, snapshots, gates, floors) = tokio::join!(
            self.read_bucket(&b.presence),
            self.read_bucket(&b.positions),
            self.read_bucket(&b.holds),
            self.read_bucket(&b.backups),
            self.read_bucket(&b.snapshots),
            self.read_bucket(&b.gates),
            self.read_bucket(&b.floors),
        );
        Rows {
            presence,
            positions,
            holds,
            backups,
            snapshots,
            gates,
            floors,
        }
    }

    /// Every bucket the answer reads, concurrently, once, parsed as it
    /// arrives. Raw entries are kept only for the two buckets the tick
    /// writes back to (gates, floors). Each bucket is proven current
    /// against its leader or is its error ([`Broker::read_bucket_parsing`]),
    /// so the rows come vouched for: an answer that licenses a purge is
    /// computed only from a [`Proven`](crate::proven::Proven) read
    /// (`tick::compute_all` takes nothing else).
    pub async fn read_all(&self, b: &Buckets) -> (Raw, crate::proven::Proven<ParsedRows>) {
        let (raw, parsed, _) = self.read_all_by(b, None).await;
        (raw, parsed)
    }

    /// As [`Broker::read_all`], each bucket from its incremental view
    /// (`view.rs`) when `mode` allows and the view is proven current at
    /// this cut, else read whole; says how many came from kept views.
    pub async fn read_all_viewed(
        &self,
        b: &Buckets,
        mode: super::view::Mode,
    ) -> (Raw, crate::proven::Proven<ParsedRows>, super::view::Took) {
        self.read_all_by(b, Some(mode)).await
    }

    async fn read_all_by(
        &self,
        b: &Buckets,
        mode: Option<super::view::Mode>,
    ) -> (Raw, crate::proven::Proven<ParsedRows>, super::view::Took) {
        let (presence, positions, holds, backups, snapshots, gates, floors) = tokio::join!(
            self.read_one(&b.presence, parsed::add_presence, false, mode),
            self.read_one(&b.positions, parsed::add_position, false, mode),
            self.read_one(&b.holds, parsed::add_hold, false, mode),
            self.read_one(&b.backups, parsed::add_backup, false, mode),
            self.read_one(&b.snapshots, parsed::add_snapshot, false, mode),
            self.read_one(&b.gates, parsed::add_gate, true, mode),
            self.read_one(&b.floors, parsed::add_floor, mode.is_none(), mode),
        );
        let from_views = [
            presence.2,
            positions.2,
            holds.2,
            backups.2,
            snapshots.2,
            gates.2,
            floors.2,
        ];
        let kept = from_views.iter().filter(|k| **k).count();
        let took = super::view::Took {
            kept,
            rebuilt: if mode.is_some() {
                from_views.len() - kept
            } else {
                0
            },
        };
        let raw = Raw {
            gates: gates.0,
            floors: mode.is_none().then_some(floors.0),
        };
        let created = crate::floor::carried::BucketsCreated {
            presence: presence.3,
            positions: positions.3,
            holds: holds.3,
            backups: backups.3,
            snapshots: snapshots.3,
            floors: floors.3,
        };
        let parsed = ParsedRows {
            presence: presence.1,
            positions: positions.1,
            holds: holds.1,
            backups: backups.1,
            snapshots: snapshots.1,
            gates: gates.1,
            floors: floors.1,
            created,
        };
        (raw, crate::proven::Proven::vouched(parsed), took)
    }

    /// One bucket, whole (`mode` `None`) or by its view.
    async fn read_one<T: crate::floor::parsed::Patch>(
        &self,
        name: &str,
        add: Sink<T>,
        keep_raw: bool,
        mode: Option<super::view::Mode>,
    ) -> (
        Bucket,
        Result<std::sync::Arc<T>, BucketError>,
        bool,
        Option<Timestamp>,
    ) {
        // Boxed: seven of these run in one join, and each read is a large
        // future; on the heap they keep a tick's future small enough for a
        // thread's stack.
        match mode {
            None => {
                let (raw, parsed, created) =
                    Box::pin(self.read_bucket_parsing(name, add, keep_raw)).await;
                (raw, parsed.map(std::sync::Arc::new), false, created)
            }
            Some(mode) => Box::pin(self.read_bucket_viewed(name, add, keep_raw, mode)).await,
        }
    }

    /// The rows with the gates bucket parsed again from `gates`: this
    /// tick's proven read of it, with the records the tick absorbed into it
    /// by compare-and-set writes the broker took. Still current.
    pub fn with_gates_absorbed(
        &self,
        parsed: crate::proven::Proven<ParsedRows>,
        raw: &Raw,
    ) -> crate::proven::Proven<ParsedRows> {
        let mut rows = parsed.into_inner();
        rows.reparse_gates(&raw.gates);
        crate::proven::Proven::vouched(rows)
    }

    /// The holds and presence buckets, read again just before a purge.
    /// Each is proven current or an error ([`Broker::read_bucket_parsing`]
    /// checks what its reader delivered against the leader's last
    /// revision), so the pins come vouched for.
    pub async fn read_pins(&self, b: &Buckets) -> crate::proven::Proven<crate::floor::Pins> {
        self.read_pins_by(b, None).await
    }

    /// As [`Broker::read_pins`], from the views the tick keeps, each proven
    /// current again at this later cut (or read whole).
    pub async fn read_pins_viewed(&self, b: &Buckets) -> crate::proven::Proven<crate::floor::Pins> {
        self.read_pins_by(b, Some(super::view::Mode::Kept)).await
    }

    async fn read_pins_by(
        &self,
        b: &Buckets,
        mode: Option<super::view::Mode>,
    ) -> crate::proven::Proven<crate::floor::Pins> {
        let (holds, presence) = tokio::join!(
            self.read_one(&b.holds, parsed::add_hold, false, mode),
            self.read_one(&b.presence, parsed::add_presence, false, mode),
        );
        crate::proven::Proven::vouched(crate::floor::Pins {
            holds: holds.1,
            presence: presence.1,
        })
    }

    /// Whether the leader of `stream` holds no message in `from..=to`:
    /// `STREAM.MSG.GET` with `next_by_subj`, which only a stream's leader
    /// answers (a leaderless group answers an error, which proves
    /// nothing). What proves a read whose newest message was removed
    /// (docs/trim-floor.md, Proven current).
    pub(super) async fn leader_holds_none(
        &self,
        stream: &str,
        from: u64,
        to: u64,
    ) -> Result<bool, Fault> {
        let subject = format!("STREAM.MSG.GET.{stream}");
        let body = serde_json::json!({"seq": from, "next_by_subj": ">"});
        let request = self
            .js
            .request::<_, _, serde_json::Value>(subject.clone(), &body);
        let reply = self.bounded(&format!("stream {stream}"), request).await?;
        if let Some(err) = reply.get("error") {
            // 10037: no message at or after `from`.
            if err.get("err_code").and_then(serde_json::Value::as_u64) == Some(10037) {
                return Ok(true);
            }
            return Err(Fault::failed(format!("stream {stream}: {err}")));
        }
        let seq = reply["message"]["seq"].as_u64().ok_or_else(|| {
            Fault::failed(format!(
                "stream {stream}: a message get answer without a sequence"
            ))
        })?;
        Ok(seq > to)
    }

    /// Leaves consumer `name` out of the next consumer listings (tests: a
    /// listing asked by offset that skipped it).
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    pub fn skip_in_listings(&self, name: &str) {
        if let Ok(mut s) = self.listing_skips.lock() {
            s.insert(name.to_string());
        }
    }

    fn skipped_in_listing(&self, name: &str) -> bool {
        self.listing_skips
            .lock()
            .is_ok_and(|s| !s.is_empty() && s.contains(name))
    }

    /// Fresh stream info.
    pub async fn stream_state(&self, stream: &str) -> Result<StreamState, super::Fault> {
        self.stream_state_at(stream).await.map(|(s, _)| s)
    }

    /// Fresh stream info, and the broker's clock in the answer (`ts`,
    /// which the typed client does not keep: the request is made raw). A
    /// stream that does not exist is `Fault::Missing`, not a broker that
    /// did not answer.
    pub async fn stream_state_at(&self, stream: &str) -> Result<(StreamState, Reading), Fault> {
        let reply = self.stream_info_raw(stream).await?;
        let local = Utc::now();
        let broker = reply
            .get("ts")
            .and_then(|t| t.as_str())
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
            .ok_or_else(|| {
                Fault::failed(format!(
                    "stream {stream}: the answer carries no broker time (ts)"
                ))
            })?;
        let info: async_nats::jetstream::stream::Info =
            serde_json::from_value(reply).map_err(|e| {
                Fault::failed(format!("stream {stream}: stream info does not parse ({e})"))
            })?;
        Ok((
            state_of(
                &info.config,
                &info.state,
                info.created,
                info.cluster.as_ref(),
            ),
            Reading { broker, local },
        ))
    }

    /// `STREAM.INFO` of `stream` as the broker answers it, within the read
    /// timeout (raw: the typed client keeps neither the broker's clock nor
    /// every count). A stream that does not exist is `Fault::Missing`;
    /// another error answer is `Fault::Refused`.
    pub(super) async fn stream_info_raw(&self, stream: &str) -> Result<serde_json::Value, Fault> {
        let body = serde_json::json!({});
        let request = self
            .js
            .request::<_, _, serde_json::Value>(format!("STREAM.INFO.{stream}"), &body);
        let reply = self.bounded(&format!("stream {stream}"), request).await?;
        let Some(err) = reply.get("error") else {
            led_raw(stream, &reply)?;
            return Ok(reply);
        };
        let error: async_nats::jetstream::Error =
            serde_json::from_value(err.clone()).map_err(|e| {
                Fault::failed(format!(
                    "stream {stream}: an error answer that does not parse ({e})"
                ))
            })?;
        Err(if error.error_code() == ErrorCode::STREAM_NOT_FOUND {
            Fault::Missing(format!("stream {stream} does not exist"))
        } else {
            Fault::refused(&error, format!("stream {stream}: {error}"))
        })
    }

    /// The feed consumer's floors.
    /// The feed consumer's floors, proven by its leader's answer where
    /// the log is `clustered` ([`consumer_led`]).
    pub async fn feed_state(
        &self,
        stream: &str,
        consumer: &str,
        clustered: bool,
    ) -> Result<FeedState, super::Fault> {
        // One request, straight to the consumer (no stream lookup first).
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Reply {
            Err { error: async_nats::jetstream::Error },
            Ok(Box<async_nats::jetstream::consumer::Info>),
        }
        let read = async {
            let reply: Reply = self
                .js
                .request(
                    format!("CONSUMER.INFO.{stream}.{consumer}"),
                    &serde_json::json!({}),
                )
                .await
                .map_err(|e| Fault::failed(format!("consumer {consumer} on {stream}: {e}")))?;
            match reply {
                Reply::Ok(info) => Ok(*info),
                Reply::Err { error } if error.error_code() == ErrorCode::CONSUMER_NOT_FOUND => Err(
                    Fault::Missing(format!("consumer {consumer} not found on {stream}")),
                ),
                Reply::Err { error } if error.error_code() == ErrorCode::STREAM_NOT_FOUND => {
                    Err(Fault::Missing(format!("stream {stream} does not exist")))
                }
                Reply::Err { error } => Err(Fault::refused(
                    &error,
                    format!("consumer {consumer} on {stream}: {error}"),
                )),
            }
        };
        let info = tokio::time::timeout(self.read_timeout, read)
            .await
            .map_err(|_| {
                Fault::Unanswered(format!(
                    "consumer {consumer}: no answer within {}",
                    crate::config::Dur(self.read_timeout)
                ))
            })??;
        feed_of(stream, consumer, &info, clustered)
    }

    /// The log's replicas and the consumers the domain names
    /// (docs/trim-floor.md, Replicas): every consumer on the log, by the
    /// paged consumer listing; one whose ack policy is `flow_control` (a
    /// mirror or source copying through a durable consumer of its own) is a
    /// replica, unless `ignore` leaves it out; a named one counts whatever
    /// its policy, and one missing makes the term unreadable. `None` where
    /// the server has no durable sourcing (`sourcing: false`, before 2.14)
    /// and nothing is named.
    pub async fn replicas(
        &self,
        stream: &str,
        named: &[String],
        ignore: &[String],
        sourcing: bool,
        clustered: bool,
    ) -> Option<Result<crate::floor::ReplicasRead, super::Fault>> {
        use async_nats::jetstream::consumer::AckPolicy;
        if !sourcing && named.is_empty() {
            return None;
        }
        let err = |e: String| Fault::failed(format!("consumers of {stream}: {e}"));
        // The listing asked page by page, raw: on a cluster an answer may
        // leave out consumers whose leader did not answer in time
        // (`missing`), which the client library's own listing drops. A
        // replica left out would pin nothing, so such an answer proves
        // nothing.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Page {
            Err {
                error: async_nats::jetstream::Error,
            },
            Ok {
                total: usize,
                #[serde(default)]
                consumers: Vec<async_nats::jetstream::consumer::Info>,
                #[serde(default)]
                missing: Vec<String>,
            },
        }
        let list = async {
            let mut out = crate::floor::ReplicasRead::default();
            let mut seen = Vec::new();
            // How far the listing went (the next page's offset): a consumer
            // a test's listing skips still counts here.
            let mut listed = 0usize;
            let mut first_total = None;
            loop {
                let page: Page = self
                    .js
                    .request(
                        format!("CONSUMER.LIST.{stream}"),
                        &serde_json::json!({"offset": listed}),
                    )
                    .await
                    .map_err(|e| err(e.to_string()))?;
                let (total, consumers) = match page {
                    Page::Err { error } if error.error_code() == ErrorCode::STREAM_NOT_FOUND => {
                        return Err(Fault::Missing(format!("stream {stream} does not exist")))
                    }
                    Page::Err { error } => {
                        return Err(Fault::refused(
                            &error,
                            format!("consumers of {stream}: {error}"),
                        ))
                    }
                    Page::Ok { missing, .. } if !missing.is_empty() => {
                        return Err(err(format!(
                            "the listing left out {} (their leaders did not answer)",
                            missing.join(", ")
                        )))
                    }
                    Page::Ok {
                        total, consumers, ..
                    } => (total, consumers),
                };
                // Pages asked by offset while the listing changes can skip
                // a consumer: every page must report the same total, or the
                // listing proves nothing (docs/trim-floor.md, Proven current).
                if *first_total.get_or_insert(total) != total {
                    return Err(err(format!(
                        "the listing changed while it was read ({} consumers, then {total})",
                        first_total.unwrap_or_default()
                    )));
                }
                if consumers.is_empty() && listed < total {
                    return Err(err(format!(
                        "the listing ended at {} of {total} consumers",
                        listed
                    )));
                }
                for info in consumers {
                    let name = info.name.clone();
                    listed += 1;
                    if self.skipped_in_listing(&name) {
                        continue;
                    }
                    let is_named = named.contains(&name);
                    let replica = sourcing && info.config.ack_policy == AckPolicy::FlowControl;
                    seen.push(name.clone());
                    if replica && !is_named && ignore.contains(&name) {
                        out.ignored.push(name);
                        continue;
                    }
                    if !(replica || is_named) {
                        continue;
                    }
                    let state = feed_of(stream, &name, &info, clustered)?;
                    out.replicas.push(crate::floor::ReplicaState {
                        consumer: name,
                        named: is_named,
                        state,
                        last_active: info.ack_floor.last_active.map(instant_of),
                        feeds: None,
                    });
                }
                if listed >= total {
                    break;
                }
            }
            if let Some(missing) = named.iter().find(|n| !seen.contains(n)) {
                return Err(Fault::Missing(format!(
                    "consumer {missing} (named in replicas.consumers) does not exist on {stream}"
                )));
            }
            // A replica the last listing named that this one does not is
            // left out only once its leader says it is gone.
            let before: Vec<String> = self
                .replicas_seen
                .lock()
                .ok()
                .and_then(|m| m.get(stream).cloned())
                .unwrap_or_default()
                .into_iter()
                .filter(|n| !seen.contains(n))
                .collect();
            for gone in before {
                match self.feed_state(stream, &gone, clustered).await {
                    Err(Fault::Missing(_)) => {}
                    Ok(_) => {
                        return Err(err(format!(
                            "replica {gone} is missing from the listing but still answers: the listing skipped it"
                        )))
                    }
                    Err(e) => {
                        return Err(err(format!(
                            "replica {gone} is missing from the listing and its deletion is not confirmed ({e})"
                        )))
                    }
                }
            }
            out.replicas.sort_by(|a, b| a.consumer.cmp(&b.consumer));
            out.ignored.sort();
            if let Ok(mut m) = self.replicas_seen.lock() {
                m.insert(
                    stream.to_string(),
                    out.replicas
                        .iter()
                        .filter(|r| !r.named)
                        .map(|r| r.consumer.clone())
                        .chain(out.ignored.iter().cloned())
                        .collect(),
                );
            }
            Ok(out)
        };
        Some(
            tokio::time::timeout(self.read_timeout, list)
                .await
                .unwrap_or_else(|_| {
                    Err(Fault::Unanswered(format!(
                        "consumers of {stream}: no answer within {}",
                        crate::config::Dur(self.read_timeout)
                    )))
                }),
        )
    }

    /// For each of `logs`, the streams on this account that mirror or
    /// source it through an ephemeral consumer (no `consumer` of their own
    /// in the mirror or source, and not from another domain): copies whose
    /// progress the log cannot see (docs/trim-floor.md, Replicas), from
    /// one paged stream listing ([`Broker::listing`]); a copy in another
    /// domain is not visible here.
    pub async fn unprotected_copies(&self, logs: &[&str]) -> Result<Copies, super::Fault> {
        self.listing(logs, self.read_timeout)
            .await
            .map(|l| l.copies)
    }

    /// One paged listing of the account's streams (`STREAM.LIST`, up to
    /// 256 streams a page: the first page, then the rest together), for
    /// `logs`: what copies each ([`Copies`]), and each log's state as its
    /// leader answered it in the listing, with the broker's clock. The
    /// listing is bounded by `within`.
    ///
    /// Each log's state is proven as a per-log stream-info read is: a
    /// listed stream answered by a member that names no leader, or without
    /// the broker's clock, is left out, and so is a stream the listing
    /// leaves out (`missing` on a cluster) or one that does not parse;
    /// the caller reads those one by one (docs/trim-floor.md, Proven
    /// current).
    pub async fn listing(&self, logs: &[&str], within: Duration) -> Result<Listing, super::Fault> {
        let err = |e: String| Fault::failed(format!("the stream listing: {e}"));
        // Looked up once per listed stream: a list would be a thousand
        // comparisons each on a fleet of a thousand logs.
        let logs: &HashSet<&str> = &logs.iter().copied().collect();
        let page = |offset: usize| async move {
            let reply: Box<serde_json::value::RawValue> = self
                .js
                .request(
                    "STREAM.LIST".to_string(),
                    &serde_json::json!({"offset": offset}),
                )
                .await
                .map_err(|e| err(e.to_string()))?;
            let local = Utc::now();
            judge_page(reply.get().as_bytes(), logs, local).map_err(err)
        };
        let list = async {
            let first = page(0).await?;
            let (total, limit) = (first.total, first.streams.max(1));
            let rest = futures::future::join_all(
                (first.streams..total)
                    .step_by(limit)
                    .filter(|_| first.streams > 0)
                    .map(page),
            )
            .await;
            let mut out = Listing::default();
            for p in std::iter::once(Ok(first)).chain(rest) {
                out.take(p?);
            }
            for copies in out.copies.unprotected.values_mut() {
                copies.sort();
                copies.dedup();
            }
            Ok(out)
        };
        tokio::time::timeout(within, list)
            .await
            .unwrap_or_else(|_| {
                Err(Fault::Unanswered(format!(
                    "the stream listing: no answer within {}",
                    crate::config::Dur(within)
                )))
            })
    }

    /// The age proof's scan: the first sequence in `from..=to` that is not
    /// proved older than `cutoff` (stamped at or after it), or the first one
    /// past the budget of `max_records`; `None` when all of it is older.
    /// Headers only, never the bodies; one ordered consumer, deleted after.
    /// A scan that ends before `to` (and before the log's end) is an error.
    pub async fn first_unproven(
        &self,
        stream: &str,
        from: u64,
        to: u64,
        cutoff: DateTime<Utc>,
        max_records: u64,
    ) -> Result<Option<u64>, super::Fault> {
        if to < from {
            return Ok(None);
        }
        let err = |e: String| Fault::failed(format!("age proof on {stream}: {e}"));
        let scan = async {
            let (s, consumer) = self.reader_from(stream, from, true).await.map_err(err)?;
            let name = consumer.cached_info().name.clone();
            let announced = consumer.cached_info().num_pending;
            let walk = async {
                // Nothing offered from `from` although the log's leader has
                // records up to `to`: this server is behind (a replica the
                // reader was placed on). Nothing is proven.
                if announced == 0 {
                    return Ok(Some(from));
                }
                let mut messages = consumer.messages().await.map_err(|e| err(e.to_string()))?;
                let mut scanned: u64 = 0;
                while let Some(m) = messages.next().await {
                    let m = m.map_err(|e| err(e.to_string()))?;
                    let info = m.info().map_err(|e| err(e.to_string()))?;
                    let seq = info.stream_sequence;
                    if seq > to {
                        return Ok(None);
                    }
                    if scanned >= max_records {
                        return Ok(Some(seq));
                    }
                    if crate::floor::is_young(instant_of(info.published), cutoff) {
                        return Ok(Some(seq));
                    }
                    scanned += 1;
                    if seq == to {
                        return Ok(None);
                    }
                    // The reader's server has nothing after `seq`, short of
                    // `to`: a replica behind, or records deleted in between.
                    // Only what was scanned is proven.
                    if info.pending == 0 {
                        return Ok(Some(seq + 1));
                    }
                }
                Err(err(format!("the scan stopped after {scanned} records")))
            }
            .await;
            let _ = s.delete_consumer(&name).await;
            walk
        };
        tokio::time::timeout(READ_TIMEOUT * 3, scan)
            .await
            .map_err(|_| err(format!("no end within {}s", READ_TIMEOUT.as_secs() * 3)))?
    }

    /// An ordered reader of `stream` from sequence `from` (only the
    /// headers, or whole records), with the stream handle its delete needs.
    /// Pulls expire after 4 s, so a lost pull is noticed inside the read's
    /// bound.
    pub(super) async fn reader_from(
        &self,
        stream: &str,
        from: u64,
        headers_only: bool,
    ) -> Result<
        (
            async_nats::jetstream::stream::Stream,
            async_nats::jetstream::consumer::Consumer<OrderedConfig>,
        ),
        String,
    > {
        let s = self
            .js
            .get_stream(stream)
            .await
            .map_err(|e| e.to_string())?;
        let consumer = s
            .create_consumer(OrderedConfig {
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: from.max(1),
                },
                headers_only,
                max_expires: Duration::from_secs(4),
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        Ok((s, consumer))
    }

    /// The first retained sequence stamped at or after `at`, or `None` when
    /// every retained record is older. One request: the broker's own
    /// lookup by start time (`MSG.GET` with `start_time`).
    pub async fn first_seq_at_or_after(
        &self,
        stream: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<u64>, super::Fault> {
        #[derive(Deserialize)]
        struct Msg {
            seq: u64,
        }
        #[derive(Deserialize)]
        struct ApiError {
            code: u64,
            err_code: u64,
            description: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Reply {
            Err { error: ApiError },
            Ok { message: Msg },
        }
        let body = serde_json::json!({ "start_time": Timestamp(at).to_rfc3339() });
        let request = self
            .js
            .request::<_, _, Reply>(format!("STREAM.MSG.GET.{stream}"), &body);
        let reply = self
            .bounded(&format!("age lookup on {stream}"), request)
            .await?;
        match reply {
            Reply::Ok { message } => Ok(Some(message.seq)),
            // 10037: no message at or after that time.
            Reply::Err { error } if error.err_code == 10037 => Ok(None),
            // 10003: a bad request. nats-server 2.10 does not know
            // `start_time`: the first record at or after the instant is
            // found from sequences and their timestamps instead.
            Reply::Err { error } if error.err_code == 10003 => {
                self.first_seq_at_or_after_by_seq(stream, at).await
            }
            Reply::Err { error } => Err(Fault::failed(format!(
                "age lookup on {stream}: {} ({}/{})",
                error.description, error.code, error.err_code
            ))),
        }
    }

    /// The age lookup without `start_time` (nats-server 2.10): a binary
    /// search over the retained sequences, each probe the leader's next
    /// message at or after a sequence (`STREAM.MSG.GET` with
    /// `next_by_subj`) and its timestamp; some 20 requests for a million
    /// records. It assumes timestamps in log order, as the broker's own
    /// lookup does: out of order, the age proof before every purge still
    /// keeps each young record (docs/trim-floor.md, Clocks and the age
    /// proof).
    async fn first_seq_at_or_after_by_seq(
        &self,
        stream: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<u64>, Fault> {
        let state = self.stream_state(stream).await?;
        if state.messages == 0 || state.last_seq < state.first_seq {
            return Ok(None);
        }
        // The first record at or after `seq`: its sequence and time.
        let probe = |seq: u64| async move {
            let subject = format!("STREAM.MSG.GET.{stream}");
            let body = serde_json::json!({"seq": seq, "next_by_subj": ">"});
            let request = self.js.request::<_, _, serde_json::Value>(subject, &body);
            let reply = self
                .bounded(&format!("age lookup on {stream}"), request)
                .await?;
            if let Some(err) = reply.get("error") {
                if err.get("err_code").and_then(serde_json::Value::as_u64) == Some(10037) {
                    return Ok(None);
                }
                return Err(Fault::failed(format!("age lookup on {stream}: {err}")));
            }
            let m = &reply["message"];
            let found = m["seq"].as_u64().zip(
                m["time"]
                    .as_str()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc)),
            );
            found.map(Some).ok_or_else(|| {
                Fault::failed(format!(
                    "age lookup on {stream}: a message without its sequence or time"
                ))
            })
        };
        // Invariant: every record below `lo` is older than `at`; `found`
        // is the lowest record seen at or after it.
        let (mut lo, mut hi) = (state.first_seq, state.last_seq);
        let mut found = None;
        while lo <= hi {
            let mid = lo + (hi - lo) / 2;
            match probe(mid).await? {
                None => break,
                Some((seq, time)) if time >= at => {
                    found = Some(seq);
                    if mid == 0 {
                        break;
                    }
                    hi = mid - 1;
                }
                Some((seq, _)) => lo = seq + 1,
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    /// A clustered stream's answer without a leader proves nothing; a
    /// single server's and an R1 stream's name the server that holds it.
    #[test]
    fn only_an_answer_that_names_a_leader_is_the_leaders_word() {
        let ok = |v: serde_json::Value| super::led_raw("S", &v).is_ok();
        assert!(ok(serde_json::json!({"cluster": {"leader": "n1"}})));
        assert!(ok(
            serde_json::json!({"cluster": {"name": "c", "leader": "n2"}})
        ));
        assert!(
            ok(serde_json::json!({"state": {}})),
            "no cluster: a plain server"
        );
        let leaderless = serde_json::json!({"cluster": {"name": "c", "raft_group": "S-R3F-x",
            "replicas": [{"name": "n1", "current": true}]}});
        assert!(!ok(leaderless.clone()));
        assert!(!ok(
            serde_json::json!({"cluster": {"name": "c", "leader": ""}})
        ));
        let said = super::led_raw("S", &leaderless)
            .err()
            .map(|f| f.to_string());
        assert!(said.is_some_and(|s| s.contains("no leader for S")));
    }

    /// A listed stream as `STREAM.LIST` gives it: `cluster` and `ts` as
    /// asked, `mirror` or `sources` as given.
    fn listed(name: &str, cluster: serde_json::Value, ts: Option<&str>) -> serde_json::Value {
        let mut v = serde_json::json!({
            "config": {"name": name, "subjects": [format!("{name}.>")], "retention": "limits",
                "max_consumers": -1, "max_msgs": -1, "max_bytes": 4194304, "max_age": 0,
                "max_msgs_per_subject": -1, "max_msg_size": -1, "discard": "old",
                "storage": "file", "num_replicas": 1, "duplicate_window": 120000000000u64},
            "created": "2026-12-05T01:00:00.123456789Z",
            "state": {"messages": 20, "bytes": 1000, "first_seq": 3, "first_ts": "2026-12-05T01:00:01Z",
                "last_seq": 22, "last_ts": "2026-12-05T01:00:02Z", "consumer_count": 0},
        });
        if !cluster.is_null() {
            v["cluster"] = cluster;
        }
        if let Some(ts) = ts {
            v["ts"] = ts.into();
        }
        v
    }

    /// A consumer-info answer proves a floor only when it names the
    /// consumer's leader: the answer of a member that has not joined the
    /// group (exactly as nats-server sends it: configuration, zeroed state,
    /// no `cluster`) read as a feed with nothing pending.
    #[test]
    fn a_consumer_info_answer_without_its_leader_proves_nothing() {
        let member = serde_json::json!({
            "stream_name": "L", "name": "feed", "created": "2026-12-05T01:00:00Z",
            "config": {"durable_name": "feed", "ack_policy": "explicit", "deliver_policy": "all",
                       "replay_policy": "instant"},
            "delivered": {"consumer_seq": 0, "stream_seq": 0},
            "ack_floor": {"consumer_seq": 0, "stream_seq": 0},
            "num_ack_pending": 0, "num_redelivered": 0, "num_waiting": 0, "num_pending": 0,
            "ts": "2026-12-05T01:00:01Z"
        });
        let parse = |v: &serde_json::Value| {
            serde_json::from_value::<async_nats::jetstream::consumer::Info>(v.clone())
                .expect("consumer info")
        };
        assert!(super::feed_of("L", "feed", &parse(&member), true).is_err());
        let mut electing = member.clone();
        electing["cluster"] = serde_json::json!({"name": "c", "leader": ""});
        assert!(super::feed_of("L", "feed", &parse(&electing), true).is_err());
        assert!(super::feed_of("L", "feed", &parse(&electing), false).is_err());
        let mut led = member.clone();
        led["cluster"] = serde_json::json!({"name": "c", "leader": "n2"});
        led["ack_floor"] = serde_json::json!({"consumer_seq": 4, "stream_seq": 40});
        let got = super::feed_of("L", "feed", &parse(&led), true).expect("the leader's word");
        assert_eq!(got.ack_floor_seq, 40);
        // A single server's answer carries no cluster: its own word.
        let single = super::feed_of("L", "feed", &parse(&member), false).expect("one server");
        assert_eq!(single.ack_floor_seq, 0);
    }

    /// A listing proves a log's state as the per-log read does: the
    /// leader's word (or a single server's), with the broker's clock. Any
    /// other item is left to be read alone; its copies are still said.
    #[test]
    fn a_listed_log_is_proven_only_by_its_leaders_answer_with_the_brokers_clock() {
        let ts = Some("2026-12-05T01:00:05.5Z");
        let mut mirror = listed("M", serde_json::Value::Null, ts);
        mirror["config"]["mirror"] = serde_json::json!({"name": "A"});
        let mut durable = listed("D", serde_json::Value::Null, ts);
        durable["config"]["sources"] = serde_json::json!([{"name": "B", "consumer": {"name": "feed", "deliver_subject": "d.x"}}]);
        let mut external = listed("X", serde_json::Value::Null, ts);
        external["config"]["sources"] =
            serde_json::json!([{"name": "A", "external": {"api": "$JS.hub.API"}}]);
        // A stream this client cannot parse as stream info still copies.
        let mut odd = listed("O", serde_json::Value::Null, ts);
        odd["config"]["retention"] = "someday".into();
        odd["config"]["mirror"] = serde_json::json!({"name": "B"});
        let page = serde_json::json!({"total": 9, "offset": 0, "limit": 256, "streams": [
            listed("A", serde_json::Value::Null, ts),
            listed("B", serde_json::json!({"name": "c", "leader": "n1"}), ts),
            listed("C", serde_json::json!({"name": "c", "raft_group": "S-R3F-x"}), ts),
            listed("E", serde_json::json!({"name": "c", "leader": ""}), ts),
            listed("F", serde_json::Value::Null, None),
            mirror, durable, external, odd,
        ]});
        let local = "2026-12-05T01:00:04Z".parse().expect("a time");
        let logs = ["A", "B", "C", "E", "F"].into_iter().collect();
        let got = super::judge_page(page.to_string().as_bytes(), &logs, local).expect("a page");
        assert_eq!((got.total, got.streams), (9, 9));
        let proven: Vec<&str> = got.states.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            proven,
            ["A", "B"],
            "no leader, an empty leader, no clock: read alone"
        );
        let (state, reading) = got.states[0].1.get();
        assert_eq!(
            (state.first_seq, state.last_seq, state.messages),
            (3, 22, 20)
        );
        assert_eq!(state.created.to_rfc3339(), "2026-12-05T01:00:00.123456789Z");
        assert_eq!(state.max_bytes, 4194304);
        assert_eq!(reading.broker.to_rfc3339(), "2026-12-05T01:00:05.500+00:00");
        assert_eq!(reading.local, local);
        assert_eq!(
            got.unprotected,
            [
                ("A".to_string(), "M".to_string()),
                ("B".to_string(), "O".to_string())
            ],
            "an ephemeral mirror copies; one in another domain is not seen here"
        );
        assert_eq!(
            got.feeds,
            [(("B".to_string(), "feed".to_string()), "D".to_string())]
        );
        let refused = serde_json::json!({"error": {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}});
        assert!(super::judge_page(refused.to_string().as_bytes(), &logs, local).is_err());
    }

    use super::instant_of;

    /// The broker's times convert to the nanosecond, before the epoch too
    /// (where the whole seconds round down and the fraction counts up).
    #[test]
    fn broker_times_convert_to_the_nanosecond() {
        for nanos in [
            0i128,
            1,
            999_999_999,
            1_764_745_200_123_456_789,
            -1,
            -1_500_000_000,
        ] {
            let t = time::OffsetDateTime::from_unix_timestamp_nanos(nanos).expect("in range");
            let got = instant_of(t).0;
            let back = i128::from(got.timestamp()) * 1_000_000_000
                + i128::from(chrono::Timelike::nanosecond(&got));
            assert_eq!(back, nanos, "{t}");
        }
    }
}
