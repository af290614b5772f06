//! Incremental views of the buckets (docs/trim-floor.md, "Incremental
//! views"): per bucket, a watcher kept across ticks delivers every change
//! from the bucket's last message per key on, and a tick answers from what
//! it delivered instead of reading the bucket whole, once the view is
//! proven current at the tick's cut.
//!
//! The proof, each tick, per bucket:
//!
//! 1. Stream info of the bucket's stream, from its leader, first: its last
//!    sequence, how many keys (subjects) it holds, when it was created, and
//!    the broker's clock.
//! 2. The watcher has delivered up to that last sequence (or the stream
//!    holds no message). On a cluster the watcher may live on a replica
//!    behind: then it never gets there in time, and the view is not proven.
//! 3. Nothing went missing unseen: the watcher was never restarted (its
//!    consumer sequence ran 1, 2, 3, … with no gap; a restarted ordered
//!    consumer starts again at 1), the stream is the one the view was built
//!    on (same created), and the keys the view holds at or below the cut
//!    that have not aged out are no more than the stream's own count (a
//!    purge or a raw delete removes messages without an event).
//!
//! A view that fails any of these is dropped and built again from the
//! bucket's last message per key: a full read, in the same tick.
//!
//! Expiry (the presence bucket's max age) is judged from each entry's own
//! time on the broker's clock (the message's timestamp and the stream
//! info's clock), never from the absence of an event: the view holds an
//! entry until its age passes the bucket's max age, and from then on it is
//! not answered, whether the broker has removed the message yet or not. A
//! view built afresh at the same cut answers the same.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::consumer::pull::OrderedConfig;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use smol_str::SmolStr;

use super::Broker;
use crate::floor::parsed::{Patch, Sink};
use crate::floor::{Bucket, BucketError, Entry};

mod state;
use state::*;

/// The views this connection keeps, by bucket.
#[derive(Default)]
pub struct Views {
    by_bucket: Mutex<HashMap<String, Arc<Watched>>>,
    /// Test switches: they can be set only in failpoint builds.
    knobs: Arc<Knobs>,
}

/// What the tests turn to show the proof is what stops a stale answer.
#[derive(Default)]
struct Knobs {
    /// Answer from a kept view without proving it current.
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    unproven: std::sync::atomic::AtomicBool,
    /// Each watcher waits this long before applying a message (a watcher
    /// on a server behind, or a slow one).
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    delay_ms: std::sync::atomic::AtomicU64,
}

impl Knobs {
    fn unproven(&self) -> bool {
        #[cfg(any(debug_assertions, feature = "failpoints"))]
        return self.unproven.load(std::sync::atomic::Ordering::SeqCst);
        #[cfg(not(any(debug_assertions, feature = "failpoints")))]
        false
    }

    fn delay(&self) -> Option<Duration> {
        #[cfg(any(debug_assertions, feature = "failpoints"))]
        return match self.delay_ms.load(std::sync::atomic::Ordering::SeqCst) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        };
        #[cfg(not(any(debug_assertions, feature = "failpoints")))]
        None
    }
}

impl std::fmt::Debug for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.by_bucket.lock().map(|m| m.len()).unwrap_or(0);
        write!(f, "Views({n} buckets)")
    }
}

/// One bucket's watcher and what it delivered.
struct Watched {
    seen: Arc<Mutex<Seen>>,
    moved: Arc<tokio::sync::Notify>,
    /// The bucket's stream as it was when the view was built.
    created: DateTime<Utc>,
    task: tokio::task::JoinHandle<()>,
    /// To delete the watcher's consumer when the view goes: a reader the
    /// sidecar created is its to delete (the broker would drop an idle
    /// one by itself, later).
    js: async_nats::jetstream::Context,
    stream: String,
    consumer: String,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.task.abort();
        // Deleted already ([`Broker::close_views`]).
        if self.consumer.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (js, stream, consumer) = (
                self.js.clone(),
                std::mem::take(&mut self.stream),
                std::mem::take(&mut self.consumer),
            );
            rt.spawn(async move {
                let _ = js.delete_consumer_from_stream(consumer, stream).await;
            });
        }
    }
}

/// A watcher's consumer: ordered, on the bucket's stream.
type WatcherConsumer = async_nats::jetstream::consumer::Consumer<OrderedConfig>;

/// How the tick reads a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// From the view kept across ticks when it is proven current (else
    /// rebuilt).
    Kept,
    /// Every view built again from the bucket's last message per key (a
    /// full read): on the first tick, every `retention.full_read_every`
    /// ticks, and on a sidecar that newly claims the duty.
    Fresh,
}

/// What a view answered, for the tick's report and the bench.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Took {
    /// Buckets answered from a view kept since an earlier tick.
    pub kept: usize,
    /// Buckets read whole (a view built, by choice or because the kept one
    /// could not be proven).
    pub rebuilt: usize,
}

impl Broker {
    /// Bucket `name` at this tick's cut, from its view ([`Mode`]), parsed
    /// by `add` as [`Broker::read_bucket_parsing`] does, with the same
    /// answer a full read at the same cut gives. The bool says whether a
    /// kept view answered (false: the bucket was read whole).
    pub(super) async fn read_bucket_viewed<T: Patch>(
        &self,
        name: &str,
        add: Sink<T>,
        keep_raw: bool,
        mode: Mode,
    ) -> (
        Bucket,
        Result<Arc<T>, BucketError>,
        bool,
        Option<crate::rows::Timestamp>,
    ) {
        let failed = |reason: String| BucketError::Failed {
            bucket: name.to_string(),
            reason,
        };
        // A full read by choice asks for the cut and the new watcher's
        // consumer together: the watcher delivers the bucket as of its
        // creation and everything after, so it reaches the cut whichever
        // of the two the broker answers first. (A kept view needs the cut
        // first, to be proven against it.)
        let (cut, made) = if mode == Mode::Fresh {
            let (cut, made) = tokio::join!(self.bucket_cut(name), self.watcher_consumer(name));
            (cut, Some(made))
        } else {
            (self.bucket_cut(name).await, None)
        };
        let cut = match cut {
            Ok(c) => c,
            Err(e) => {
                self.forget_view(name);
                if let Some(Ok(consumer)) = made {
                    self.delete_unused(name, consumer);
                }
                return (Err(e.clone()), Err(e), false, None);
            }
        };
        let created = Some(crate::rows::Timestamp(cut.created));
        if mode == Mode::Kept {
            if let Some(w) = self.kept_view(name) {
                let answer = match self.prove(&w, &cut, true).await {
                    Ok(()) => emit(&w, &cut, add, keep_raw),
                    Err(why) => Err(why),
                };
                match answer {
                    Ok((raw, parsed)) => return (Ok(raw), Ok(parsed), true, created),
                    Err(why) => {
                        tracing::info!(event = "view_dropped", bucket = name, reason = %why, "the bucket's view could not answer at this cut: reading it whole");
                    }
                }
            }
        }
        // A full read: a view built afresh on the bucket's last message per
        // key, proven like any other, and kept for the next tick.
        self.forget_view(name);
        let made = match made {
            Some(m) => m,
            None => self.watcher_consumer(name).await,
        };
        let w = match self.build_view(name, &cut, add, keep_raw, made) {
            Ok(w) => w,
            Err(e) => {
                let e = failed(e);
                return (Err(e.clone()), Err(e), false, None);
            }
        };
        match self
            .prove(&w, &cut, false)
            .await
            .and_then(|()| emit(&w, &cut, add, keep_raw))
        {
            Ok((raw, parsed)) => {
                self.keep_view(name, w);
                (Ok(raw), Ok(parsed), false, created)
            }
            Err(why) => {
                let e = failed(why);
                (Err(e.clone()), Err(e), false, None)
            }
        }
    }

    fn kept_view(&self, name: &str) -> Option<Arc<Watched>> {
        self.views.by_bucket.lock().ok()?.get(name).cloned()
    }

    fn keep_view(&self, name: &str, w: Arc<Watched>) {
        if let Ok(mut m) = self.views.by_bucket.lock() {
            m.insert(name.to_string(), w);
        }
    }

    /// Drops the view of `name` (its watcher stops). What it held is let
    /// go beside the read, not on its path: a view of 10,000 rows took
    /// 1.5 ms to free, inside the full read that replaces it.
    fn forget_view(&self, name: &str) {
        let gone = match self.views.by_bucket.lock() {
            Ok(mut m) => m.remove(name),
            Err(_) => None,
        };
        if let Some(w) = gone {
            if tokio::runtime::Handle::try_current().is_ok() {
                tokio::task::spawn_blocking(move || drop(w));
            }
        }
    }

    /// Drops every kept view and deletes its watcher's consumer, waiting
    /// (at most a read timeout) for the broker to take each delete: a
    /// process about to exit (`run --once`, a shutdown) leaves no consumer
    /// behind for the broker to drop half a minute later.
    pub async fn close_views(&self) {
        let all: Vec<Arc<Watched>> = match self.views.by_bucket.lock() {
            Ok(mut m) => m.drain().map(|(_, w)| w).collect(),
            Err(_) => Vec::new(),
        };
        let deletes = all.into_iter().map(|w| {
            w.task.abort();
            let (stream, consumer) = (w.stream.clone(), w.consumer.clone());
            // Deleted here, awaited: the Drop that would spawn it again
            // finds nothing to delete.
            if let Ok(mut owned) = Arc::try_unwrap(w) {
                owned.consumer.clear();
            }
            let js = self.js.clone();
            async move {
                let _ = js.delete_consumer_from_stream(consumer, stream).await;
            }
        });
        let _ = tokio::time::timeout(self.read_timeout, futures::future::join_all(deletes)).await;
    }

    /// The consumer a new watcher of bucket `name` reads from: the
    /// bucket's last message per key, then every message after.
    async fn watcher_consumer(&self, name: &str) -> Result<WatcherConsumer, String> {
        let config = super::read::last_per_key(name);
        self.bounded(
            "the watcher",
            self.js
                .create_consumer_on_stream(config, format!("KV_{name}")),
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// Deletes a watcher's consumer that no view took (the cut failed).
    fn delete_unused(&self, name: &str, consumer: WatcherConsumer) {
        let (js, stream, name) = (
            self.js.clone(),
            format!("KV_{name}"),
            consumer.cached_info().name.clone(),
        );
        tokio::spawn(async move {
            let _ = js.delete_consumer_from_stream(name, stream).await;
        });
    }

    /// Turns the kept views' proof off (tests: a stale answer must then
    /// follow).
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    pub fn unprove_views(&self, off: bool) {
        self.views
            .knobs
            .unproven
            .store(off, std::sync::atomic::Ordering::SeqCst);
    }

    /// Makes every watcher wait `ms` before applying each message (tests).
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    pub fn delay_views(&self, ms: u64) {
        self.views
            .knobs
            .delay_ms
            .store(ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stream info of the bucket's stream, from its leader.
    async fn bucket_cut(&self, name: &str) -> Result<Cut, BucketError> {
        let failed = |reason: String| BucketError::Failed {
            bucket: name.to_string(),
            reason,
        };
        let reply = match self.stream_info_led(&format!("KV_{name}")).await {
            Ok(r) => r,
            Err(super::Fault::Missing(_)) => {
                return Err(BucketError::Missing {
                    bucket: name.to_string(),
                })
            }
            Err(e) => return Err(failed(e.to_string())),
        };
        let time = |v: Option<&serde_json::Value>, what: &str| {
            v.and_then(serde_json::Value::as_str)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc))
                .ok_or_else(|| failed(format!("stream info carries no {what}")))
        };
        let state = &reply["state"];
        let count = |k: &str| state.get(k).and_then(serde_json::Value::as_u64);
        Ok(Cut {
            last_seq: count("last_seq")
                .ok_or_else(|| failed("stream info carries no last_seq".into()))?,
            messages: count("messages").unwrap_or(0),
            subjects: count("num_subjects").unwrap_or(0),
            created: time(reply.get("created"), "created")?,
            broker: time(reply.get("ts"), "broker time (ts)")?,
            max_age: Duration::from_nanos(reply["config"]["max_age"].as_u64().unwrap_or_default()),
        })
    }

    /// A new watcher on bucket `name` from its last message per key.
    /// Its first pass is parsed by `add` as it arrives (as a full read
    /// parses), so that the view's first answer only has to be patched.
    fn build_view<T: Patch>(
        &self,
        name: &str,
        cut: &Cut,
        add: Sink<T>,
        keeps_values: bool,
        consumer: Result<WatcherConsumer, String>,
    ) -> Result<Arc<Watched>, String> {
        let prefix = format!("$KV.{name}.");
        let consumer = consumer?;
        // A bucket with no key to deliver is whole at once.
        let announced = consumer.cached_info().num_pending;
        let empty = announced == 0;
        // Sized for the keys the first pass announces: growing to 10,000
        // keys one doubling at a time hashed every key again at each.
        let keys = HashMap::with_capacity(usize::try_from(announced).unwrap_or(0).min(1 << 20));
        let seen = Arc::new(Mutex::new(Seen {
            whole: empty,
            keys,
            keeps_values,
            ..Seen::default()
        }));
        let consumer_name = consumer.cached_info().name.clone();
        let moved = Arc::new(tokio::sync::Notify::new());
        let knobs = self.views.knobs.clone();
        let first = FirstPass {
            add,
            max_age: cut.max_age,
            empty,
        };
        let task = tokio::spawn(watch(
            consumer,
            prefix,
            seen.clone(),
            moved.clone(),
            knobs,
            first,
        ));
        Ok(Arc::new(Watched {
            seen,
            moved,
            created: cut.created,
            task,
            js: self.js.clone(),
            stream: format!("KV_{name}"),
            consumer: consumer_name,
        }))
    }

    /// Waits (at most a read timeout) until the view is proven current at
    /// `cut`. `kept`: a view kept from an earlier tick (the proof the test
    /// switch turns off; a view just built is always waited for, as a full
    /// read).
    async fn prove(&self, w: &Watched, cut: &Cut, kept: bool) -> Result<(), String> {
        if w.created != cut.created {
            return Err(format!(
                "the bucket was recreated (created {}, the view's {})",
                cut.created, w.created
            ));
        }
        if kept && self.views.knobs.unproven() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.read_timeout;
        // Asked at most once per proof: whether the leader holds anything
        // past what the watcher delivered.
        let mut asked = false;
        loop {
            let moved = w.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            let short_of = {
                let mut s = w
                    .seen
                    .lock()
                    .map_err(|_| "the view is poisoned".to_string())?;
                if let Some(b) = &s.broken {
                    return Err(b.clone());
                }
                if s.whole && (s.delivered >= cut.last_seq || cut.messages == 0) {
                    return counts_agree(&s, cut);
                }
                // The lowest revision a proof waits for (several may wait;
                // each woken one asks again for its own).
                s.wanted = Some(s.wanted.map_or(cut.last_seq, |w| w.min(cut.last_seq)));
                s.whole.then_some(s.delivered)
            };
            // `last_seq` is a high-water mark: a removed newest message (a
            // compacted delete marker, a per-message TTL, a subject purge)
            // is never delivered. The leader says whether anything exists
            // past what the watcher delivered; nothing means the view has
            // reached the cut.
            if let (Some(delivered), false) = (short_of, asked) {
                asked = true;
                if let Ok(true) = self
                    .leader_holds_none(&w.stream, delivered + 1, cut.last_seq)
                    .await
                {
                    let s = w
                        .seen
                        .lock()
                        .map_err(|_| "the view is poisoned".to_string())?;
                    if let Some(b) = &s.broken {
                        return Err(b.clone());
                    }
                    return counts_agree(&s, cut);
                }
            }
            if tokio::time::timeout_at(deadline, moved).await.is_err() {
                let s = w
                    .seen
                    .lock()
                    .map_err(|_| "the view is poisoned".to_string())?;
                return Err(format!(
                    "the watcher had the bucket up to revision {}, its leader up to {} (a replica behind, or a stalled watcher)",
                    s.delivered, cut.last_seq
                ));
            }
        }
    }
}

/// The view's live entries at the cut, as `add` parses them, and (with
/// `keep_raw`) as entries in revision order, the order a full read
/// delivers them in. The parsed form is the view's last answer patched
/// with the keys changed or aged out since ([`Patch`]), so an idle tick
/// parses nothing; it is parsed whole when there is no last answer yet.
///
/// An error: the view cannot answer at this cut, and is to be dropped and
/// the bucket read whole. That is so when its answer cannot be patched
/// (the broker's clock went back, so an entry aged out then could be live
/// now; or the bucket's max age changed) and it no longer holds the bytes
/// of what its answer holds; or when raw entries are asked of a view that
/// does not keep them.
fn emit<T: Patch>(
    w: &Watched,
    cut: &Cut,
    add: Sink<T>,
    keep_raw: bool,
) -> Result<(Vec<Entry>, Arc<T>), String> {
    let mut guard = w
        .seen
        .lock()
        .map_err(|_| "the view is poisoned".to_string())?;
    let s = &mut *guard;
    let raw = if keep_raw {
        raw_entries(s, cut)?
    } else {
        Vec::new()
    };
    let patchable = s
        .answered
        .as_ref()
        .is_some_and(|a| a.at <= cut.broker && a.max_age == cut.max_age && a.parsed.is::<Arc<T>>());
    if !patchable {
        s.answered = None;
    }
    let Some(answered) = &mut s.answered else {
        let parsed = parse_whole(s, cut, add)?;
        return Ok((raw, parsed));
    };
    let mut touched: HashSet<String> = std::mem::take(&mut s.changed).into_iter().collect();
    if !cut.max_age.is_zero() {
        while let Some(((published, revision), _)) = answered.by_age.first_key_value() {
            if !aged(*published, cut) {
                break;
            }
            let revision = *revision;
            if let Some((_, key)) = answered.by_age.pop_first() {
                if s.keys.get(&key).is_some_and(|k| k.revision == revision) {
                    touched.insert(key.to_string());
                }
            }
        }
    }
    let Some(shared) = answered.parsed.downcast_mut::<Arc<T>>() else {
        return Err("the view's answer is of another kind".into());
    };
    if !touched.is_empty() {
        // What goes in again: the touched keys still live at this cut,
        // each with the bytes the watcher kept for it (a key changes, and
        // so is touched, only by a message the watcher kept the bytes of).
        // A view that keeps no values lets each go as it goes in.
        let mut again = Vec::new();
        for key in &touched {
            let Some(k) = s.keys.get_mut(key.as_str()) else {
                continue;
            };
            if !k.live() || aged_out(k, cut) {
                continue;
            }
            let bytes = k.bytes(key)?.clone();
            if !s.keeps_values {
                k.value = Held::InAnswer;
            }
            again.push((key.as_str(), k.revision, k.published, bytes));
        }
        again.sort_unstable_by_key(|(_, revision, _, _)| *revision);
        let parsed = Arc::make_mut(shared);
        parsed.forget(&touched);
        for (key, revision, published, bytes) in again {
            add(parsed, key, &bytes, revision);
            if !cut.max_age.is_zero() {
                answered
                    .by_age
                    .insert((published, revision), SmolStr::new(key));
            }
        }
    }
    answered.at = cut.broker;
    Ok((raw, shared.clone()))
}

/// The watcher: applies every message it is given to `seen`, in order,
/// until it stops or is restarted (then the view is broken).
/// How the watcher parses its first pass: the bucket's parser, and the
/// max age its answer is kept for.
struct FirstPass<T> {
    add: Sink<T>,
    max_age: Duration,
    /// The bucket had no key to deliver: the view is whole at once, and
    /// its first answer is parsed (from nothing) when it is asked for.
    empty: bool,
}

async fn watch<T: Patch>(
    consumer: async_nats::jetstream::consumer::Consumer<OrderedConfig>,
    prefix: String,
    seen: Arc<Mutex<Seen>>,
    moved: Arc<tokio::sync::Notify>,
    knobs: Arc<Knobs>,
    first: FirstPass<T>,
) {
    // The first pass's parsed form, until the pass is whole: then it
    // becomes the view's answer, as of no cut yet (each entry's age is
    // judged at the first cut it is answered at).
    let mut building: Option<(T, ByAge)> = (!first.empty).then(Default::default);
    let why: Result<(), String> = async {
        let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
        while let Some(msg) = messages.next().await {
            let msg = msg.map_err(|e| e.to_string())?;
            if let Some(delay) = knobs.delay() {
                tokio::time::sleep(delay).await;
            }
            let info = msg.info().map_err(|e| e.to_string())?;
            let (consumer_seq, revision, pending) =
                (info.consumer_sequence, info.stream_sequence, info.pending);
            let published = super::read::instant_of(info.published).0;
            let deleted = msg.headers.as_ref().is_some_and(super::read::is_deletion);
            let Ok(mut s) = seen.lock() else {
                return Err("the view is poisoned".to_string());
            };
            // The client restarts an ordered consumer after a gap or a lost
            // server, from the next stream sequence: what was lost in
            // between (a purge, an expiry) is then unseen.
            if consumer_seq != s.consumer_seq + 1 {
                return Err(format!(
                    "the watcher was restarted (consumer sequence {consumer_seq} after {})",
                    s.consumer_seq
                ));
            }
            s.consumer_seq = consumer_seq;
            s.delivered = s.delivered.max(revision);
            if let Some(key) = msg.subject.as_str().strip_prefix(&prefix) {
                let value = if deleted {
                    Held::Gone
                } else if building.is_some() && !s.keeps_values {
                    // Parsed below into the first answer, which is then
                    // the view's only copy of it.
                    Held::InAnswer
                } else {
                    // A copy of its own: the payload is a slice of the
                    // connection's read buffer, and keeping the slice
                    // would keep the whole buffer it came in for as long
                    // as the key is unchanged.
                    Held::Bytes(bytes::Bytes::copy_from_slice(&msg.payload))
                };
                let mut kept = Kept {
                    value,
                    revision,
                    published,
                    prior: None,
                };
                // A key seen before is updated in place: no new string,
                // and one lookup says whether it was seen.
                let again = match s.keys.get_mut(key) {
                    Some(k) => {
                        kept.prior = Some(Prior {
                            revision: k.revision,
                            published: k.published,
                        });
                        *k = kept;
                        true
                    }
                    None => {
                        s.keys.insert(SmolStr::new(key), kept);
                        false
                    }
                };
                if let Some((parsed, by_age)) = &mut building {
                    if again {
                        // A key written again during the first pass.
                        parsed.forget(&HashSet::from([key.to_string()]));
                    }
                    if !deleted {
                        (first.add)(parsed, key, &msg.payload, revision);
                        if !first.max_age.is_zero() {
                            by_age.insert((published, revision), SmolStr::new(key));
                        }
                    }
                } else if s.answered.is_some() {
                    s.changed.push(key.to_string());
                }
            }
            let became_whole = pending == 0 && !s.whole;
            if pending == 0 {
                s.whole = true;
                if let Some((parsed, by_age)) = building.take() {
                    s.changed.clear();
                    s.answered = Some(Answered {
                        parsed: Box::new(Arc::new(parsed)),
                        at: DateTime::<Utc>::MIN_UTC,
                        max_age: first.max_age,
                        by_age,
                    });
                }
            }
            // A proof waits for one revision: it is woken when the view
            // reaches it, not at every message (thousands of wake-ups on a
            // full read, on two cores, cost more than the read).
            // A proof is also woken when the first pass ends short of the
            // revision it waits for: the newest message may have been
            // removed, which only the leader can tell it.
            let reached = s.whole && s.wanted.is_some_and(|w| s.delivered >= w);
            if reached {
                s.wanted = None;
            }
            let reached = reached || (became_whole && s.wanted.is_some());
            drop(s);
            if reached {
                moved.notify_waiters();
            }
        }
        Err("the watcher's feed ended".to_string())
    }
    .await;
    if let Err(why) = why {
        if let Ok(mut s) = seen.lock() {
            s.broken = Some(why);
        }
        moved.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(revision: u64, live: bool, prior: Option<u64>) -> Kept {
        let published = Utc::now();
        Kept {
            value: if live { Held::InAnswer } else { Held::Gone },
            revision,
            published,
            prior: prior.map(|revision| Prior {
                revision,
                published,
            }),
        }
    }

    fn cut(last_seq: u64, subjects: u64) -> Cut {
        Cut {
            last_seq,
            messages: subjects,
            subjects,
            created: Utc::now(),
            broker: Utc::now(),
            max_age: Duration::ZERO,
        }
    }

    /// Key `x` was removed without an event (a raw subject purge) before
    /// the cut, so the bucket's stream counts one key, `y`; `y` was
    /// written again after the cut. The check used to leave `y` out and
    /// let the view answer `x`, which no longer exists. `y` existed at
    /// the cut: two keys held, one in the stream, the view is not proven.
    #[test]
    fn a_key_rewritten_after_the_cut_counts_where_it_existed() {
        let mut s = Seen::default();
        s.keys.insert("x".into(), kept(3, true, None));
        s.keys.insert("y".into(), kept(12, true, Some(5)));
        assert!(counts_agree(&s, &cut(10, 1)).is_err());
        // Without the removal the stream counts both: proven.
        assert!(counts_agree(&s, &cut(10, 2)).is_ok());
        // A key first written after the cut did not exist at it.
        s.keys.insert("z".into(), kept(13, true, None));
        assert!(counts_agree(&s, &cut(10, 2)).is_ok());
        // One deleted before the cut and written again after it: its
        // marker kept the subject in the stream's count at the cut.
        s.keys.insert("w".into(), kept(14, true, Some(7)));
        assert!(counts_agree(&s, &cut(10, 2)).is_err());
        assert!(counts_agree(&s, &cut(10, 3)).is_ok());
        // Written twice after the cut: unknown, counted (a full read).
        s.keys.insert("v".into(), kept(15, true, Some(11)));
        assert!(counts_agree(&s, &cut(10, 3)).is_err());
    }

    /// A delete marker keeps its key's subject in the stream's
    /// `num_subjects`: the check counts it, so that it cannot hide a key
    /// removed without an event (docs/trim-floor.md, Proven current).
    #[test]
    fn a_delete_marker_counts_as_the_broker_counts_it() {
        let mut s = Seen::default();
        s.keys.insert("live".into(), kept(3, true, None));
        s.keys.insert("deleted".into(), kept(4, false, None));
        assert!(counts_agree(&s, &cut(10, 2)).is_ok());
        // A key removed raw: the stream counts one subject, the marker's.
        assert!(counts_agree(&s, &cut(10, 1)).is_err());
    }
}
