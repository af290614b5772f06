//! What `crewlet-bench` needs of the broker beyond the
//! sidecar's own reads and writes: state built with pipelined raw
//! publishes, plain streams and consumers, the bare bucket read a tick is
//! measured against, and a pipelined publisher's rate. Here because only
//! this module speaks async-nats.

use std::time::Instant;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use async_nats::jetstream::{self};
use futures::StreamExt;

use super::read::instant_of;
use super::Broker;
use crate::config::Config;
use crate::rows::Timestamp;

impl Broker {
    /// Writes `rows` (key, JSON) into `bucket` with pipelined publishes.
    pub async fn fill(&self, bucket: &str, rows: Vec<(String, String)>) -> Result<(), String> {
        for chunk in rows.chunks(2000) {
            let mut acks = Vec::with_capacity(chunk.len());
            for (k, v) in chunk {
                acks.push(
                    self.js
                        .publish(format!("$KV.{bucket}.{k}"), v.clone().into())
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            for a in acks {
                a.await.map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// Creates a plain stream on `<name>.>` (`discard: new` and the ceiling
    /// when `max_bytes` is given); returns its `created`.
    pub async fn create_plain_stream(
        &self,
        name: &str,
        max_bytes: Option<i64>,
        replicas: usize,
    ) -> Result<Timestamp, String> {
        let mut config = jetstream::stream::Config {
            name: name.to_string(),
            subjects: vec![format!("{name}.>")],
            deny_delete: true,
            num_replicas: replicas,
            ..Default::default()
        };
        if let Some(m) = max_bytes {
            config.max_bytes = m;
            config.discard = jetstream::stream::DiscardPolicy::New;
        }
        let s = self
            .js
            .create_stream(config)
            .await
            .map_err(|e| format!("creating stream {name}: {e}"))?;
        Ok(instant_of(s.cached_info().created))
    }

    /// A durable pull consumer with explicit acks on `stream`.
    pub async fn create_durable(&self, stream: &str, name: &str) -> Result<(), String> {
        let s = self
            .js
            .get_stream(stream)
            .await
            .map_err(|e| e.to_string())?;
        s.create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some(name.to_string()),
            ..Default::default()
        })
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
    }

    pub async fn delete_stream(&self, name: &str) -> Result<(), String> {
        self.js
            .delete_stream(name)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    pub async fn delete_bucket(&self, name: &str) -> Result<(), String> {
        self.forget_kv(name);
        self.js
            .delete_key_value(name)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Purges every record on `subject` of `stream` (the bench's own
    /// publisher stream, between windows; never a domain's log).
    pub async fn purge_subject(&self, stream: &str, subject: &str) -> Result<(), String> {
        let s = self
            .js
            .get_stream(stream)
            .await
            .map_err(|e| e.to_string())?;
        s.purge()
            .filter(subject)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// The baseline of a tick: the fastest bare read of the same buckets,
    /// one ordered consumer each delivering the last message per subject,
    /// concurrently, with no checks, no parsing and no clean-up. Returns
    /// how many messages came.
    pub async fn bare_read(&self, config: &Config) -> Result<usize, String> {
        let reads = config.buckets.all().map(|(_, b)| {
            let js = self.js.clone();
            let b = b.to_string();
            async move {
                let c = js
                    .create_consumer_on_stream(
                        OrderedConfig {
                            filter_subject: format!("$KV.{b}.>"),
                            deliver_policy: DeliverPolicy::LastPerSubject,
                            ..Default::default()
                        },
                        format!("KV_{b}"),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                if c.cached_info().num_pending == 0 {
                    return Ok(0);
                }
                let mut m = c.messages().await.map_err(|e| e.to_string())?;
                let mut n = 0;
                while let Some(msg) = m.next().await {
                    let msg = msg.map_err(|e| e.to_string())?;
                    n += 1;
                    if msg.info().map_err(|e| e.to_string())?.pending == 0 {
                        break;
                    }
                }
                Ok::<usize, String>(n)
            }
        });
        let counts = futures::future::join_all(reads).await;
        counts.into_iter().try_fold(0, |acc, c| c.map(|c| acc + c))
    }

    /// Messages per second of a pipelined publisher of `n` 200-byte
    /// records on `subject`.
    pub async fn publish_rate(&self, subject: &str, n: usize) -> Result<f64, String> {
        let payload = bytes::Bytes::from(vec![b'x'; 200]);
        let t = Instant::now();
        for chunk in 0..n / 1000 {
            let mut acks = Vec::with_capacity(1000);
            for _ in 0..1000 {
                acks.push(
                    self.js
                        .publish(subject.to_string(), payload.clone())
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            for a in acks {
                a.await.map_err(|e| format!("chunk {chunk}: {e}"))?;
            }
        }
        Ok(n as f64 / t.elapsed().as_secs_f64())
    }
}

impl Broker {
    /// Publishes `n` records of `size` bytes on `subject` (pipelined).
    pub async fn publish_sized(&self, subject: &str, n: usize, size: usize) -> Result<u64, String> {
        let body = bytes::Bytes::from(vec![b'x'; size]);
        self.publish_each(subject, n, |_| body.clone()).await
    }

    /// Publishes `n` records of `size` bytes of text that compresses as
    /// identifiers and hashes do (a 64-letter alphabet drawn by a fixed
    /// generator, about 6 bits a byte): what a segment of real records
    /// weighs in a store, where `publish_sized`'s compresses to nothing.
    pub async fn publish_text(&self, subject: &str, n: usize, size: usize) -> Result<u64, String> {
        const LETTERS: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        self.publish_each(subject, n, |_| {
            let body: Vec<u8> = (0..size)
                .map(|_| {
                    // xorshift64: fixed, so every run publishes the same.
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    LETTERS[(state & 63) as usize]
                })
                .collect();
            bytes::Bytes::from(body)
        })
        .await
    }

    async fn publish_each(
        &self,
        subject: &str,
        n: usize,
        mut body: impl FnMut(usize) -> bytes::Bytes,
    ) -> Result<u64, String> {
        let mut last = 0;
        for chunk in 0..n.div_ceil(1000) {
            let mut acks = Vec::with_capacity(1000);
            for i in chunk * 1000..n.min((chunk + 1) * 1000) {
                acks.push(
                    self.js
                        .publish(subject.to_string(), body(i))
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            for a in acks {
                last = a.await.map_err(|e| e.to_string())?.sequence;
            }
        }
        Ok(last)
    }

    /// The raw read a fold and a merge read are measured against: one
    /// ordered consumer from `from`, every message of `from..=to` received
    /// and counted, nothing kept, parsed or copied.
    pub async fn bare_slice(&self, stream: &str, from: u64, to: u64) -> Result<usize, String> {
        let (s, consumer) = self.reader_from(stream, from, false).await?;
        let name = consumer.cached_info().name.clone();
        let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
        let mut n = 0;
        while let Some(m) = messages.next().await {
            let m = m.map_err(|e| e.to_string())?;
            n += 1;
            let info = m.info().map_err(|e| e.to_string())?;
            if info.stream_sequence >= to || info.pending == 0 {
                break;
            }
        }
        let _ = s.delete_consumer(&name).await;
        Ok(n)
    }

    /// `n` replicas on `stream`: durable consumers with ack policy
    /// `flow_control`, as a mirror's durable sourcing makes them (nobody
    /// copies through them here; the listing is what is measured).
    pub async fn replica_consumers(&self, stream: &str, n: usize) -> Result<(), String> {
        for i in 0..n {
            let name = format!("dr{i}");
            let body = serde_json::json!({"stream_name": stream, "config": {
                "durable_name": name, "ack_policy": "flow_control", "flow_control": true,
                "idle_heartbeat": 1_000_000_000u64, "max_deliver": -1,
                "deliver_subject": format!("bench.{name}.deliver"), "deliver_policy": "all"}});
            let reply = self
                .js
                .client()
                .request(
                    format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
                    body.to_string().into(),
                )
                .await
                .map_err(|e| e.to_string())?;
            let v: serde_json::Value =
                serde_json::from_slice(&reply.payload).map_err(|e| e.to_string())?;
            if let Some(e) = v.get("error") {
                return Err(format!("consumer {name} on {stream}: {e}"));
            }
        }
        Ok(())
    }

    /// Every stream's info through the paged `$JS.API.STREAM.LIST` (up to
    /// 256 streams a page), parsed as JSON and nothing judged: the bare
    /// read of a fleet's stream state. Returns how many streams.
    pub async fn list_streams(&self) -> Result<usize, String> {
        let mut offset = 0usize;
        loop {
            let page: serde_json::Value = self
                .js
                .request(
                    "STREAM.LIST".to_string(),
                    &serde_json::json!({"offset": offset}),
                )
                .await
                .map_err(|e| e.to_string())?;
            let n = page["streams"].as_array().map_or(0, Vec::len);
            offset += n;
            if n == 0 || offset as u64 >= page["total"].as_u64().unwrap_or(0) {
                return Ok(offset);
            }
        }
    }

    /// The bare consumer listing of `stream`: the client library's own
    /// paged listing, every consumer's info, nothing judged. Returns how
    /// many.
    pub async fn bare_consumer_listing(&self, stream: &str) -> Result<usize, String> {
        let s = self
            .js
            .get_stream_no_info(stream)
            .await
            .map_err(|e| e.to_string())?;
        let mut consumers = s.consumers();
        let mut n = 0;
        while let Some(info) = consumers.next().await {
            info.map_err(|e| e.to_string())?;
            n += 1;
        }
        Ok(n)
    }
}
