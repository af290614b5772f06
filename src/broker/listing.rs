//! The paged listings: the account's streams (which streams copy a log,
//! and each log's state where the listing proves it) and a log's
//! consumers (its durable copies). A listing read while its members
//! change is proven by its `total` on every page and by its names
//! (docs/trim-floor.md, Proven current).

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::door::{feed_of, led_cluster};
use super::read::{instant_of, state_of};
use super::{Broker, Fault};
use crate::clock::Reading;
use crate::floor::StreamState;
use crate::proven::Proven;
use async_nats::jetstream::ErrorCode;

/// What the account's stream listing says of the logs' copies.
#[derive(Debug, Default)]
pub struct Copies {
    /// Per log, the streams copying it through an ephemeral consumer.
    pub unprotected: std::collections::BTreeMap<String, Vec<String>>,
    /// (log, consumer) → the stream copying the log through that durable
    /// consumer.
    pub feeds: std::collections::BTreeMap<(String, String), Feed>,
}

/// A stream that copies a log through a durable consumer, as its
/// configuration names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feed {
    pub stream: String,
    pub deliver_subject: String,
    /// A mirror, not a source.
    pub mirror: bool,
}

/// What one paged listing of the account's streams said ([`Broker::listing`]).
#[derive(Debug, Default)]
pub struct Listing {
    pub copies: Copies,
    /// Each listed log's state and the broker's clock as its leader
    /// answered, where the listing proves it.
    pub states: std::collections::HashMap<String, Proven<(StreamState, Reading)>>,
    /// Every stream listed, in the listing's (name) order: where each log
    /// stands in it ([`super::pages::Index`]).
    pub names: Vec<String>,
    /// How many streams the account had.
    pub total: usize,
}

impl Listing {
    pub(super) fn take(&mut self, page: Page) {
        self.names.extend(page.names);
        for (log, copy) in page.unprotected {
            self.copies.unprotected.entry(log).or_default().push(copy);
        }
        self.copies.feeds.extend(page.feeds);
        self.states.extend(page.states);
    }
}

/// One page of the listing, judged.
#[derive(Debug, Default)]
pub(super) struct Page {
    /// How many streams the account has, and how many this page listed.
    pub(super) total: usize,
    pub(super) streams: usize,
    /// The names listed, in order ("" for one that does not parse).
    pub(super) names: Vec<String>,
    /// (log, copy) for each ephemeral copy of one of the logs.
    unprotected: Vec<(String, String)>,
    feeds: Vec<((String, String), Feed)>,
    pub(super) states: Vec<(String, Proven<(StreamState, Reading)>)>,
}

impl Page {
    /// Stream `copy` mirrors or sources `log`: through `consumer`, a
    /// durable consumer of the log's (durable sourcing), or through an
    /// ephemeral one, whose progress the log cannot see (docs/trim-floor.md,
    /// Replicas). A copy from another domain (`external`) is not visible
    /// from here, and is left to that domain.
    fn copy(&mut self, logs: &HashSet<&str>, copy: &str, origin: Origin<'_>) {
        if origin.external || !logs.contains(origin.log) {
            return;
        }
        let log = origin.log.to_string();
        match origin.consumer {
            Some((c, deliver)) => self.feeds.push((
                (log, c.to_string()),
                Feed {
                    stream: copy.to_string(),
                    deliver_subject: deliver.to_string(),
                    mirror: origin.mirror,
                },
            )),
            None => self.unprotected.push((log, copy.to_string())),
        }
    }
}

/// One mirror or source of a listed stream.
struct Origin<'a> {
    log: &'a str,
    /// From another JetStream domain.
    external: bool,
    /// The durable consumer it copies through, and its deliver subject.
    consumer: Option<(&'a str, &'a str)>,
    mirror: bool,
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
                page.names.push(name.to_string());
                let origins = (item.config.mirror.iter().map(|o| (o, true)))
                    .chain(item.config.sources.iter().flatten().map(|o| (o, false)));
                for (origin, mirror) in origins {
                    page.copy(
                        logs,
                        name,
                        Origin {
                            log: &origin.name,
                            external: origin.external.is_some(),
                            consumer: origin
                                .consumer
                                .as_ref()
                                .map(|c| (c.name.as_str(), c.deliver_subject.as_str())),
                            mirror,
                        },
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
                page.names
                    .push(v["config"]["name"].as_str().unwrap_or_default().to_string());
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
    let origins = std::iter::once((&config["mirror"], true)).chain(
        config["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| (o, false)),
    );
    for (origin, mirror) in origins {
        let Some(log) = origin["name"].as_str() else {
            continue;
        };
        let consumer = &origin["consumer"];
        page.copy(
            logs,
            name,
            Origin {
                log,
                external: origin.get("external").is_some_and(|e| !e.is_null()),
                consumer: consumer["name"]
                    .as_str()
                    .map(|c| (c, consumer["deliver_subject"].as_str().unwrap_or_default())),
                mirror,
            },
        );
    }
}

/// How many times a listing whose pages disagree is read before it is
/// unreadable.
const LISTING_READS: usize = 3;

impl Broker {
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
            // A listing whose pages disagree is read again from the start,
            // a few times, before it is unreadable.
            let mut reads = 1;
            loop {
                let page: Page = self
                    .ask_within(
                        &format!("consumers of {stream}"),
                        format!("CONSUMER.LIST.{stream}"),
                        &serde_json::json!({"offset": listed}),
                        self.read_timeout * 2,
                    )
                    .await?;
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
                    if reads < LISTING_READS {
                        reads += 1;
                        (out, seen, listed, first_total) = Default::default();
                        continue;
                    }
                    return Err(err(format!(
                        "the listing changed while it was read, {reads} times ({} consumers, then {total})",
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
                        delivered_active: info.delivered.last_active.map(instant_of),
                        paused: info.paused,
                        paused_until: info
                            .paused
                            .then_some(info.config.pause_until)
                            .flatten()
                            .map(instant_of),
                        feeds: None,
                    });
                }
                if listed >= total {
                    break;
                }
            }
            out.missing_named = named
                .iter()
                .filter(|n| !seen.contains(n))
                .cloned()
                .collect();
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
                match self.consumer_led(stream, &gone, clustered).await {
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
            seen.sort();
            out.present = seen;
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
        let page = |offset: usize| self.stream_page(offset, logs, within);
        let list = async {
            let mut reads = 0;
            'again: loop {
                reads += 1;
                let first = page(0).await?;
                let (total, limit) = (first.total, first.streams.max(1));
                let rest = futures::future::join_all(
                    (first.streams..total)
                        .step_by(limit)
                        .filter(|_| first.streams > 0)
                        .map(page),
                )
                .await;
                let mut out = Listing {
                    total,
                    ..Listing::default()
                };
                let mut listed = 0;
                for p in std::iter::once(Ok(first)).chain(rest) {
                    let p = p?;
                    // Pages asked by offset while streams come and go can
                    // skip one: every page must report the same total
                    // (docs/trim-floor.md, Proven current).
                    if p.total != total {
                        if reads < LISTING_READS {
                            continue 'again;
                        }
                        return Err(err(format!(
                            "the listing changed while it was read, {reads} times ({total} streams, then {})",
                            p.total
                        )));
                    }
                    listed += p.streams;
                    out.take(p);
                }
                if listed < total {
                    if reads < LISTING_READS {
                        continue 'again;
                    }
                    return Err(err(format!(
                        "the listing ended at {listed} of {total} streams"
                    )));
                }
                for copies in out.copies.unprotected.values_mut() {
                    copies.sort();
                    copies.dedup();
                }
                return Ok(out);
            }
        };
        tokio::time::timeout(within, list)
            .await
            .unwrap_or_else(|_| Err(unanswered(within)))
    }

    /// One page of the account's stream listing from `offset`, judged for
    /// `logs` ([`judge_page`]): what the whole listing and the pages that
    /// hold the logs ([`super::pages`]) both ask.
    pub(super) async fn stream_page(
        &self,
        offset: usize,
        logs: &HashSet<&str>,
        within: Duration,
    ) -> Result<Page, Fault> {
        let reply: Box<serde_json::value::RawValue> = self
            .ask_within(
                "the stream listing",
                "STREAM.LIST".to_string(),
                &serde_json::json!({"offset": offset}),
                within,
            )
            .await?;
        judge_page(reply.get().as_bytes(), logs, Utc::now())
            .map_err(|e| Fault::failed(format!("the stream listing: {e}")))
    }
}

/// A listing of the account's streams that did not end within `within`.
pub(super) fn unanswered(within: Duration) -> Fault {
    Fault::Unanswered(format!(
        "the stream listing: no answer within {}",
        crate::config::Dur(within)
    ))
}

impl Broker {}

#[cfg(test)]
mod tests {
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
            [(
                ("B".to_string(), "feed".to_string()),
                super::Feed {
                    stream: "D".into(),
                    deliver_subject: "d.x".into(),
                    mirror: false
                }
            )]
        );
        let refused = serde_json::json!({"error": {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}});
        assert!(super::judge_page(refused.to_string().as_bytes(), &logs, local).is_err());
    }
}
