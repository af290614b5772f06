//! Gate records on the logs: publishing one, reading them back after the
//! view's cursor, and absorbing them into the gates bucket (the logic is
//! `gate::absorb`; this is the IO around it).

use crate::rows::Stamped;
use std::collections::BTreeMap;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::RawMessageErrorKind;
use async_nats::jetstream::ErrorCode;
use futures::StreamExt;

use super::read::instant_of;
use super::{Broker, Fault};
use crate::floor::Entry;
use crate::gate::{self, Cursor, LogRecord, Skipped, View};
use crate::rows::{GateRow, Incarnation, OpRow, OP_PREFIX};

/// How a publish of a gate record ended without an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishFailure {
    /// The broker refused it: past even the reserve (`max_bytes`).
    LogFull(String),
    /// The broker answered with another error: it is not on the log.
    Refused(String),
    /// No answer: it may or may not be on the log.
    NoAnswer(String),
}

/// Why an absorption pass stopped.
enum Absorb {
    /// Another absorber wrote first: read again.
    Conflict(String),
    Failed(Fault),
}

impl From<Fault> for Absorb {
    fn from(e: Fault) -> Self {
        Absorb::Failed(e)
    }
}

impl From<crate::rows::Unreadable> for Absorb {
    fn from(e: crate::rows::Unreadable) -> Self {
        Absorb::from(String::from(e))
    }
}

impl From<String> for Absorb {
    fn from(e: String) -> Self {
        Absorb::Failed(Fault::Failed(e))
    }
}

impl From<super::write::PublishError> for Absorb {
    fn from(e: super::write::PublishError) -> Self {
        match e {
            super::write::PublishError::Conflict { .. } => Absorb::Conflict(e.to_string()),
            other => Absorb::Failed(Fault::failed(other.to_string())),
        }
    }
}

/// One log the gates view absorbs: its stream, gate subject, and the
/// incarnation the view belongs to.
#[derive(Debug, Clone, Copy)]
pub struct GatedLog<'a> {
    pub stream: &'a str,
    pub subject: &'a str,
    pub incarnation: Incarnation,
    /// The `last_seq` of the stream info the caller's answer is computed
    /// from (the tick's): the cursor moves no further in this pass, so that
    /// the cursor and the `last_seq` it is compared with belong to one cut.
    /// `None`: as far as the leader's `last_seq`, read here (a gesture).
    pub upto: Option<u64>,
}

/// What one absorption pass did.
#[derive(Debug, Clone, Default)]
pub struct AbsorbReport {
    pub absorbed: usize,
    pub skipped: Vec<Skipped>,
    pub cursor: u64,
}

impl Broker {
    /// Publishes one gate record; returns its sequence (the original one
    /// when the broker collapsed a resend inside its duplicate window).
    pub async fn publish_gate(
        &self,
        subject: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<u64, PublishFailure> {
        let mut msg = PublishMessage::build().payload(body.into());
        for (k, v) in headers {
            msg = msg.header(*k, v.as_str());
        }
        let ack = match self.js.send_publish(subject.to_string(), msg).await {
            Ok(f) => f.await,
            Err(e) => Err(e),
        };
        match ack {
            Ok(a) => Ok(a.sequence),
            Err(e) => {
                let text = e.to_string();
                // The broker's error answer, when there is one: its code
                // decides, never the message text.
                let code = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<async_nats::jetstream::Error>())
                    .map(|je| je.error_code());
                match e.kind() {
                    PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe => {
                        Err(PublishFailure::NoAnswer(text))
                    }
                    // 10077: maximum bytes (or messages) exceeded under
                    // discard: new.
                    _ if code == Some(ErrorCode::STREAM_STORE_FAILED) => {
                        Err(PublishFailure::LogFull(text))
                    }
                    PublishErrorKind::StreamNotFound => Err(PublishFailure::Refused(format!(
                        "no stream takes {subject} ({text})"
                    ))),
                    _ => Err(PublishFailure::Refused(text)),
                }
            }
        }
    }

    /// Gate records on `subject` after sequence `after`, in log order, and
    /// the last sequence the scan covered.
    ///
    /// Proven current (docs/trim-floor.md, Proven current): the leader's
    /// `last_seq` is read first; an ordered reader (which JetStream may
    /// place on a replica that is behind) delivers the records; then the
    /// stream's leader itself is asked for the next record on the subject
    /// after the last one delivered (`MSG.GET` with `next_by_subj`, which
    /// only the leader answers). The scan covers `last_seq` only if the
    /// leader has none at or below it; a record the reader was not shown is
    /// an error, and the cursor never moves past what the reader saw.
    pub async fn gate_records(
        &self,
        stream: &str,
        subject: &str,
        after: u64,
        upto: Option<u64>,
    ) -> Result<(Vec<LogRecord>, u64), super::Fault> {
        let read = async {
            // Read after the cursor: a cursor past it is an error (the log
            // was restored), never "nothing new to read".
            let s = self.stream_led(stream).await?;
            let leader_last = s.cached_info().state.last_sequence;
            if leader_last < after {
                return Err(Fault::failed(format!(
                    "the cursor {} is at {after}, past the log's last sequence {leader_last}",
                    Cursor::key(stream)
                )));
            }
            // The scan, and so the cursor, ends at the caller's cut: records
            // that landed after the answer's stream info wait for the next
            // tick (a cursor past that info's last_seq would read as a
            // restored log). A cut below the cursor (another absorber went
            // further meanwhile) leaves the cursor where it is.
            let last = upto.map_or(leader_last, |u| u.min(leader_last));
            if last <= after {
                return Ok((Vec::new(), after));
            }
            let consumer = s
                .create_consumer(OrderedConfig {
                    filter_subject: subject.to_string(),
                    deliver_policy: DeliverPolicy::ByStartSequence {
                        start_sequence: after + 1,
                    },
                    ..Default::default()
                })
                .await
                .map_err(|e| Fault::failed(format!("reading gate records on {stream}: {e}")))?;
            let consumer_name = consumer.cached_info().name.clone();
            // A replica that has none of the records offers nothing (the
            // failpoint plays one, for the test that shows the proof).
            let announced = if crate::failpoint::is_set("gate_reader_behind") {
                0
            } else {
                consumer.cached_info().num_pending
            };
            let scan = async {
                if announced == 0 {
                    return Ok(Vec::new());
                }
                let mut messages = consumer
                    .messages()
                    .await
                    .map_err(|e| Fault::failed(format!("reading gate records on {stream}: {e}")))?;
                let mut out = Vec::new();
                while let Some(m) = messages.next().await {
                    let m = m.map_err(|e| {
                        Fault::failed(format!("reading gate records on {stream}: {e}"))
                    })?;
                    let info = m.info().map_err(|e| {
                        Fault::failed(format!("reading gate records on {stream}: {e}"))
                    })?;
                    let (seq, pending, landed_at) = (
                        info.stream_sequence,
                        info.pending,
                        instant_of(info.published),
                    );
                    let headers: BTreeMap<String, String> = m
                        .headers
                        .as_ref()
                        .map(|h| {
                            h.iter()
                                .filter_map(|(k, v)| {
                                    v.first().map(|v| (k.to_string(), v.as_str().to_string()))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    out.push(LogRecord {
                        seq,
                        landed_at,
                        headers,
                        body: m.payload.to_vec(),
                    });
                    if pending == 0 {
                        return Ok(out);
                    }
                }
                // Ended before the end it announced: the cursor must not
                // move past records it has not read.
                Err(Fault::failed(format!(
                    "reading gate records on {stream}: the reader stopped after {} of {announced}",
                    out.len()
                )))
            }
            .await;
            let _ = s.delete_consumer(&consumer_name).await;
            let mut records = scan?;
            records.retain(|r| r.seq <= last);
            let seen = records.last().map_or(after, |r| r.seq);
            // The proof: the leader has no record on the subject between
            // what the reader showed and the last_seq it answered first.
            match s
                .raw_message_builder()
                .sequence(seen + 1)
                .next_by_subject(subject.to_string())
                .send()
                .await
            {
                Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => {}
                Ok(m) if m.sequence > last => {}
                Ok(m) => {
                    return Err(Fault::failed(format!(
                        "reading gate records on {stream}: the reader's server showed them up to {seen}, but the leader holds gate record {} (a replica behind); nothing absorbed past {after}",
                        m.sequence
                    )))
                }
                Err(e) => {
                    return Err(Fault::failed(format!(
                        "reading gate records on {stream}: asking the leader for the next gate record after {seen}: {e}"
                    )))
                }
            }
            Ok((records, last))
        };
        tokio::time::timeout(self.read_timeout, read)
            .await
            .map_err(|_| {
                Fault::Unanswered(format!(
                    "reading gate records on {stream}: no answer within {}",
                    crate::config::Dur(self.read_timeout)
                ))
            })?
    }

    /// Brings the gates view of one log up to date with its log, working on
    /// the gates bucket's `entries` as already read (they are kept current
    /// with what is written, so the bucket is not read twice). Safe to run
    /// from several places at once: every write is compare-and-set, a row
    /// only ever moves forward in log order, and a pass that loses a race
    /// starts again from a fresh read.
    /// As [`Broker::absorb_into`], on the gates entries of a tick's read
    /// (`Err` with the bucket's error when that read failed).
    pub async fn absorb_raw(
        &self,
        bucket: &str,
        log: &GatedLog<'_>,
        raw: &mut super::read::Raw,
    ) -> Result<AbsorbReport, super::Fault> {
        match raw.gates_mut() {
            Ok(entries) => self.absorb_into(bucket, log, entries).await,
            Err(e) => Err(Fault::failed(e.to_string())),
        }
    }

    pub async fn absorb_into(
        &self,
        bucket: &str,
        log: &GatedLog<'_>,
        entries: &mut Vec<Entry>,
    ) -> Result<AbsorbReport, super::Fault> {
        let mut attempt = 0;
        loop {
            match self.absorb_once(bucket, log, entries).await {
                Err(Absorb::Conflict(_)) if attempt < 5 => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20 * attempt)).await;
                    *entries = self
                        .read_bucket(bucket)
                        .await
                        .map_err(|e| Fault::failed(e.to_string()))?;
                }
                Err(Absorb::Conflict(e)) => return Err(Fault::Failed(e)),
                Err(Absorb::Failed(e)) => return Err(e),
                Ok(r) => return Ok(r),
            }
        }
    }

    async fn absorb_once(
        &self,
        bucket: &str,
        log: &GatedLog<'_>,
        entries: &mut Vec<Entry>,
    ) -> Result<AbsorbReport, Absorb> {
        let (stream, subject, incarnation) = (log.stream, log.subject, log.incarnation);
        let cursor_key = Cursor::key(stream);
        // A malformed cursor stops absorption (and with it the purge): a view
        // that started over would be rewritten from records it never read.
        let previous: Option<Cursor> = match entries.iter().find(|e| e.key == cursor_key) {
            Some(e) => Some(Cursor::parse(&e.key, &e.value).map_err(Absorb::from)?),
            None => None,
        };
        // A cursor of another incarnation proves nothing: the view of this
        // one starts from its first sequence.
        let previous = previous.filter(|c| c.belongs_to(&incarnation));
        let mut view = View::default();
        let prefix = format!("{stream}.");
        for e in entries.iter() {
            if e.key.starts_with(&prefix) {
                if let Ok(g) = GateRow::parse(&e.key, &e.value) {
                    view.gates.insert(g.node.clone(), g);
                }
            } else if e.key.starts_with(OP_PREFIX) {
                if let Ok(o) = OpRow::parse(&e.key, &e.value) {
                    view.ops.insert(o.op_id.clone(), o);
                }
            }
        }
        let after = previous.as_ref().map_or(0, |c| c.seq);
        let (records, scanned) = self.gate_records(stream, subject, after, log.upto).await?;
        let out = gate::absorb(
            stream,
            incarnation,
            &view,
            previous.as_ref(),
            &records,
            scanned,
        );
        let mut writes: Vec<(String, Vec<u8>)> = Vec::new();
        for g in &out.gates {
            writes.push((
                format!("{stream}.{}", g.node),
                serde_json::to_vec(g).map_err(|e| Absorb::from(e.to_string()))?,
            ));
        }
        for o in &out.ops {
            writes.push((
                format!("{OP_PREFIX}{}", o.op_id),
                serde_json::to_vec(o).map_err(|e| Absorb::from(e.to_string()))?,
            ));
        }
        // The cursor last: it only moves once everything below it is written.
        if let Some(c) = &out.cursor {
            writes.push((
                cursor_key.clone(),
                serde_json::to_vec(c).map_err(|e| Absorb::from(e.to_string()))?,
            ));
        }
        for (key, body) in writes {
            let revision = entries.iter().find(|e| e.key == key).map(|e| e.revision);
            let new_rev = self.put_if(bucket, &key, body.clone(), revision).await?;
            match entries.iter_mut().find(|e| e.key == key) {
                Some(e) => {
                    e.value = body;
                    e.revision = new_rev;
                }
                None => entries.push(Entry {
                    key,
                    value: body,
                    revision: new_rev,
                }),
            }
        }
        for s in &out.skipped {
            tracing::warn!(event = "gate_record_skipped", stream, seq = s.seq, reason = %s.reason, "a gate record on the log was not absorbed");
        }
        Ok(AbsorbReport {
            absorbed: out.gates.len().max(out.ops.len()),
            skipped: out.skipped,
            cursor: out.cursor.as_ref().map_or(after, |c| c.seq),
        })
    }
}

impl Broker {
    /// The gate reserve's admission rule against the *published* soft
    /// ceiling: reads the floors row (`soft_ceiling_bytes`, `max_bytes`) and
    /// the stream's bytes, then [`gate::admission`]. For publishers that
    /// honour the reserve; an unreadable row refuses nothing it cannot judge
    /// and says so.
    pub async fn admission(
        &self,
        floors_bucket: &str,
        stream: &str,
        kind: gate::RecordKind,
        record_bytes: u64,
    ) -> Result<gate::Admission, super::Fault> {
        let store = self.kv(floors_bucket).await?;
        let row = store
            .get(stream)
            .await
            .map_err(|e| Fault::failed(format!("floors row {stream}: {e}")))?
            .ok_or_else(|| {
                Fault::failed(format!("no floors row for {stream} has been published yet"))
            })?;
        let v: serde_json::Value = serde_json::from_slice(&row)
            .map_err(|e| Fault::failed(format!("floors row {stream}: {e}")))?;
        let soft = v["soft_ceiling_bytes"].as_u64().ok_or_else(|| {
            Fault::failed(format!("floors row {stream} has no soft_ceiling_bytes"))
        })?;
        let max = v["max_bytes"]
            .as_u64()
            .ok_or_else(|| Fault::failed(format!("floors row {stream} has no max_bytes")))?;
        let state = self.stream_state(stream).await?;
        Ok(gate::admission(kind, state.bytes, record_bytes, soft, max))
    }
}
