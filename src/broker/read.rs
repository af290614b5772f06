//! The tick's readers: every bucket in one pass each, stream info, the feed
//! consumer, and the age lookup. Each returns a value or an error naming
//! what failed; nothing is cached between calls.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Deserialize;

use super::{Broker, Fault};
use crate::clock::Reading;
use crate::config::Buckets;
use crate::floor::parsed::{self, Sink};
use crate::floor::{Bucket, BucketError, Entry, FeedState, ParsedRows, Rows, StreamState};
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

/// Converts the broker's `created` (nanoseconds preserved).
pub fn instant_of(t: time::OffsetDateTime) -> Timestamp {
    // Seconds and nanoseconds apart, not one i128 of nanoseconds divided:
    // a watcher converts every message's time, and the 128-bit division
    // showed in a full read's profile.
    Timestamp(
        DateTime::<Utc>::from_timestamp(t.unix_timestamp(), t.nanosecond()).unwrap_or_default(),
    )
}

/// A log's state from its stream info's parts.
pub(super) fn state_of(
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
        // A leaderless member's state proves nothing: no reader is made.
        let stream = self.stream_led(&stream_name).await.map_err(|f| match f {
            Fault::Missing(_) => BucketError::Missing {
                bucket: name.to_string(),
            },
            f => failed(f.to_string()),
        })?;
        let consumer = Some(stream.create_consumer(config).await);
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

    /// The feed consumer's floors, proven by its leader's answer where
    /// the log is `clustered` (docs/trim-floor.md, Proven current).
    pub async fn feed_state(
        &self,
        stream: &str,
        consumer: &str,
        clustered: bool,
    ) -> Result<FeedState, super::Fault> {
        self.consumer_led(stream, consumer, clustered).await
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
        let reply = self.stream_info_led(stream).await?;
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
        // Unproven: what the reader delivers is proven against the
        // leader's last sequence by each caller.
        let s = self
            .stream_handle(stream)
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
        let reply: Reply = self
            .ask(
                &format!("age lookup on {stream}"),
                format!("STREAM.MSG.GET.{stream}"),
                &body,
            )
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
            let body = serde_json::json!({"seq": seq, "next_by_subj": ">"});
            let reply: serde_json::Value = self
                .ask(
                    &format!("age lookup on {stream}"),
                    format!("STREAM.MSG.GET.{stream}"),
                    &body,
                )
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
