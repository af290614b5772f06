//! The one door to JetStream's API (docs/trim-floor.md, Proven current).
//!
//! Every JetStream API request the sidecar sends (stream and consumer
//! info, listings, message gets, updates, purges) and every handle whose
//! lookup is itself a stream-info request (streams, KV buckets, object
//! stores) is asked here, and nowhere else: a test (`tidy`) keeps every
//! other file of this module off the client's request calls. So a new
//! read cannot skip the proof by asking the client directly.
//!
//! On a cluster any member may answer a stream-info or consumer-info
//! request from its own, possibly stale, state. What decides a purge or a
//! gesture therefore comes through the `*_led` doors, which hand it out
//! only when the answer is the leader's word; the unproven doors
//! (`stream_handle`, `kv_handle`, `object_store_handle`) serve writes
//! (the broker forwards them to the leader) and reads whose answer is
//! itself proven afterwards (a reader whose delivery must reach the
//! leader's last sequence).

use std::time::Duration;

use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::{kv, object_store, stream::Stream, ErrorCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::{Broker, Fault};
use crate::floor::FeedState;

impl Broker {
    /// JetStream API request `$JS.API.<subject>` with `body`, answered
    /// within the read timeout. The answer is parsed as `T` (an error
    /// answer included: callers that expect one parse it). `what` leads a
    /// failure's sentence.
    pub(super) async fn ask<T: DeserializeOwned>(
        &self,
        what: &str,
        subject: String,
        body: &serde_json::Value,
    ) -> Result<T, Fault> {
        self.ask_within(what, subject, body, self.read_timeout)
            .await
    }

    /// As [`Broker::ask`], within `within`.
    pub(super) async fn ask_within<T: DeserializeOwned>(
        &self,
        what: &str,
        subject: String,
        body: &serde_json::Value,
        within: Duration,
    ) -> Result<T, Fault> {
        match tokio::time::timeout(within, self.js.request::<_, _, T>(subject, body)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Fault::failed(format!("{what}: {e}"))),
            Err(_) => Err(Fault::Unanswered(format!(
                "{what}: no answer within {}",
                crate::config::Dur(within)
            ))),
        }
    }

    /// `STREAM.INFO` of `stream` as its leader answers it, within the
    /// read timeout (raw: the typed client keeps neither the broker's clock
    /// nor every count). A stream that does not exist is `Fault::Missing`;
    /// another error answer is `Fault::Refused`; a member's answer that
    /// names no leader is `Fault::Failed` ([`led_raw`]).
    pub(super) async fn stream_info_led(&self, stream: &str) -> Result<serde_json::Value, Fault> {
        let reply: serde_json::Value = self
            .ask(
                &format!("stream {stream}"),
                format!("STREAM.INFO.{stream}"),
                &serde_json::json!({}),
            )
            .await?;
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

    /// The handle of `stream`, its info (kept in the handle) the leader's
    /// word ([`led`]).
    pub(super) async fn stream_led(&self, stream: &str) -> Result<Stream, Fault> {
        self.stream_led_within(stream, self.read_timeout).await
    }

    /// As [`Broker::stream_led`], within `within`.
    pub(super) async fn stream_led_within(
        &self,
        stream: &str,
        within: Duration,
    ) -> Result<Stream, Fault> {
        let s = self.stream_handle_within(stream, within).await?;
        led(stream, s.cached_info())?;
        Ok(s)
    }

    /// The handle of `stream` as whichever member answered: for writes and
    /// for readers whose delivery is proven against the leader afterwards.
    /// A stream that does not exist is `Fault::Missing`.
    pub(super) async fn stream_handle(&self, stream: &str) -> Result<Stream, Fault> {
        self.stream_handle_within(stream, self.read_timeout).await
    }

    async fn stream_handle_within(&self, stream: &str, within: Duration) -> Result<Stream, Fault> {
        match tokio::time::timeout(within, self.js.get_stream(stream)).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(match e.kind() {
                GetStreamErrorKind::JetStream(je)
                    if je.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                {
                    Fault::Missing(format!("stream {stream} does not exist"))
                }
                _ => Fault::failed(format!("stream {stream}: {e}")),
            }),
            Err(_) => Err(Fault::Unanswered(format!(
                "stream {stream}: no answer within {}",
                crate::config::Dur(within)
            ))),
        }
    }

    /// `CONSUMER.INFO` of `consumer` on `stream`: one request, straight to
    /// the consumer. Unproven: [`Broker::consumer_led`] is what decides.
    pub(super) async fn consumer_info(
        &self,
        stream: &str,
        consumer: &str,
    ) -> Result<async_nats::jetstream::consumer::Info, Fault> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Reply {
            Err { error: async_nats::jetstream::Error },
            Ok(Box<async_nats::jetstream::consumer::Info>),
        }
        let reply: Reply = self
            .ask(
                &format!("consumer {consumer} on {stream}"),
                format!("CONSUMER.INFO.{stream}.{consumer}"),
                &serde_json::json!({}),
            )
            .await
            .map_err(|f| match f {
                Fault::Unanswered(_) => Fault::Unanswered(format!(
                    "consumer {consumer}: no answer within {}",
                    crate::config::Dur(self.read_timeout)
                )),
                other => other,
            })?;
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
    }

    /// The floors of `consumer` on `stream` (the feed's, a replica's),
    /// proven by its leader's answer where the log is `clustered`
    /// ([`consumer_led`]).
    pub(super) async fn consumer_led(
        &self,
        stream: &str,
        consumer: &str,
        clustered: bool,
    ) -> Result<FeedState, Fault> {
        let info = self.consumer_info(stream, consumer).await?;
        feed_of(stream, consumer, &info, clustered)
    }

    /// Whether the leader of `stream` holds no message matching `filter`
    /// in `from..=to`: `STREAM.MSG.GET` with `next_by_subj`, which only a
    /// stream's leader answers (a leaderless group answers an error, which
    /// proves nothing). What proves a read whose newest message was removed
    /// (docs/trim-floor.md, Proven current).
    pub(super) async fn leader_holds_none_of(
        &self,
        stream: &str,
        filter: &str,
        from: u64,
        to: u64,
    ) -> Result<bool, Fault> {
        let reply: serde_json::Value = self
            .ask(
                &format!("stream {stream}"),
                format!("STREAM.MSG.GET.{stream}"),
                &serde_json::json!({"seq": from, "next_by_subj": filter}),
            )
            .await?;
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

    /// As [`Broker::leader_holds_none_of`], any subject.
    pub(super) async fn leader_holds_none(
        &self,
        stream: &str,
        from: u64,
        to: u64,
    ) -> Result<bool, Fault> {
        self.leader_holds_none_of(stream, ">", from, to).await
    }

    /// The account's JetStream usage and limits (`$JS.API.INFO`).
    pub(super) async fn account_info(
        &self,
    ) -> Result<async_nats::jetstream::account::Account, Fault> {
        self.bounded("account info ($JS.API.INFO)", self.js.query_account())
            .await
    }

    /// The KV handle of `bucket` (its lookup is a stream-info request;
    /// unproven: writes go to the leader, and reads through it are proven
    /// where they decide).
    pub(super) async fn kv_handle(&self, bucket: &str) -> Result<kv::Store, Fault> {
        self.bounded(&format!("bucket {bucket}"), self.js.get_key_value(bucket))
            .await
    }

    /// The Object Store handle of `bucket` (unproven, as [`Broker::kv_handle`]).
    pub(super) async fn object_store_handle(
        &self,
        bucket: &str,
    ) -> Result<object_store::ObjectStore, Fault> {
        self.js
            .get_object_store(bucket)
            .await
            .map_err(|e| Fault::failed(format!("object store {bucket}: {e}")))
    }
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

/// PURE: whether a raw `STREAM.INFO` answer is the leader's word
/// ([`no_leader`]).
pub(super) fn led_raw(stream: &str, reply: &serde_json::Value) -> Result<(), Fault> {
    match reply.get("cluster") {
        None | Some(serde_json::Value::Null) => Ok(()),
        Some(c) => match c.get("leader").and_then(serde_json::Value::as_str) {
            Some(l) if !l.is_empty() => Ok(()),
            _ => Err(no_leader(stream)),
        },
    }
}

/// PURE: as [`led_raw`], for the typed answer (a handle's cached info).
pub(super) fn led(stream: &str, info: &async_nats::jetstream::stream::Info) -> Result<(), Fault> {
    if led_cluster(info.cluster.as_ref()) {
        Ok(())
    } else {
        Err(no_leader(stream))
    }
}

/// PURE: whether a typed answer's `cluster` is the leader's word (none: a
/// single server's answer).
pub(super) fn led_cluster(cluster: Option<&async_nats::jetstream::stream::ClusterInfo>) -> bool {
    cluster.is_none_or(|c| c.leader.as_deref().is_some_and(|l| !l.is_empty()))
}

/// PURE: whether a consumer-info answer (the feed's, or an item of a
/// consumer listing) is its leader's word. On a cluster (`clustered`: the
/// log's own stream info came from a raft group) every consumer answer
/// names its leader in `cluster`, and a member that has not yet joined the
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
pub(super) fn feed_of(
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
}
