//! The tick's writers: publishing the answer with compare-and-set, and the
//! one purge the sidecar ever sends, re-checked against fresh stream info.

use async_nats::jetstream::kv;

use super::lease::FencePermit;
use super::read::instant_of;
use super::{Broker, Fault};
use crate::floor::check_purge;
use crate::rows::Timestamp;

/// Why a publish wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Someone else wrote the row since it was read.
    #[error("the row {key} changed since it was read (compare-and-set refused)")]
    Conflict { key: String },
    #[error("writing the row {key}: {reason}")]
    Failed { key: String, reason: String },
}

/// Why a purge was not sent or failed.
#[derive(Debug, thiserror::Error)]
pub enum PurgeError {
    /// The fence's deadline passed before the purge could be sent: another
    /// sidecar may hold the duty by now.
    #[error("purge of {stream} to {target} not sent: fence_expired ({step})")]
    FenceExpired {
        stream: String,
        target: u64,
        step: &'static str,
    },
    /// Fresh stream info no longer licenses the purge.
    #[error("purge of {stream} to {target} not sent: {reason}")]
    Refused {
        stream: String,
        target: u64,
        reason: String,
    },
    #[error("purge of {stream} to {target} failed: {reason}")]
    Failed {
        stream: String,
        target: u64,
        reason: String,
    },
}

impl Broker {
    /// The KV handle of `bucket`.
    pub(super) async fn kv(&self, bucket: &str) -> Result<kv::Store, super::Fault> {
        if let Some(s) = self.stores.lock().ok().and_then(|m| m.get(bucket).cloned()) {
            return Ok(s);
        }
        let store = self.kv_handle(bucket).await?;
        if let Ok(mut m) = self.stores.lock() {
            m.insert(bucket.to_string(), store.clone());
        }
        Ok(store)
    }

    /// Forgets the handle of `bucket` after an error, so that the next use
    /// looks the bucket up again (it may have been deleted or recreated).
    pub fn forget_kv(&self, bucket: &str) {
        if let Ok(mut m) = self.stores.lock() {
            m.remove(bucket);
        }
    }

    /// Writes `value` at `key` only if the key is still at `revision`
    /// (`None`: only if it does not exist). Returns the new revision.
    pub async fn put_if(
        &self,
        bucket: &str,
        key: &str,
        value: Vec<u8>,
        revision: Option<u64>,
    ) -> Result<u64, PublishError> {
        let failed = |reason: String| PublishError::Failed {
            key: key.to_string(),
            reason,
        };
        let store = self.kv(bucket).await.map_err(|e| failed(e.to_string()))?;
        let result = match revision {
            Some(rev) => store
                .update(key, value.into(), rev)
                .await
                .map_err(|e| match e.kind() {
                    kv::UpdateErrorKind::WrongLastRevision => PublishError::Conflict {
                        key: key.to_string(),
                    },
                    _ => failed(e.to_string()),
                }),
            None => store
                .create(key, value.into())
                .await
                .map_err(|e| match e.kind() {
                    kv::CreateErrorKind::AlreadyExists => PublishError::Conflict {
                        key: key.to_string(),
                    },
                    _ => failed(e.to_string()),
                }),
        };
        if matches!(result, Err(PublishError::Failed { .. })) {
            self.forget_kv(bucket);
        }
        result
    }

    /// Purges `stream` keeping sequences `>= trim_to + 1`, after re-reading
    /// stream info: the stream must still be the incarnation `created`, hold
    /// `trim_to` (`last_seq >= trim_to`), and start below the target.
    /// Returns how many records went.
    ///
    /// The permit is the fence (a renewal of the duty lease the broker took)
    /// and is spent here: every call after it is bounded by what is left of
    /// its deadline, and a purge that cannot be sent before the deadline is
    /// not sent (`fence_expired`).
    pub async fn purge_to(
        &self,
        stream: &str,
        licensed: crate::floor::PurgeTarget,
        created: Timestamp,
        permit: FencePermit,
    ) -> Result<u64, PurgeError> {
        let target = licensed.seq();
        let trim_to = target - 1;
        let refused = |reason: String| PurgeError::Refused {
            stream: stream.to_string(),
            target,
            reason,
        };
        let expired = |step: &'static str| PurgeError::FenceExpired {
            stream: stream.to_string(),
            target,
            step,
        };
        let left = permit
            .remaining()
            .ok_or_else(|| expired("before stream info"))?;
        let s = self
            .stream_led_within(stream, left)
            .await
            .map_err(|f| match f {
                Fault::Unanswered(_) => expired("stream info outlived the fence"),
                f => refused(format!("stream info: {f}")),
            })?;
        let info = s.cached_info();
        let live_created = instant_of(info.created);
        if live_created != created {
            return Err(refused(format!(
                "the stream was recreated (created {live_created}, expected {created})"
            )));
        }
        let (first, last) = (info.state.first_sequence, info.state.last_sequence);
        let Some(seq) = check_purge(trim_to, first, last) else {
            return Err(refused(format!(
                "first_seq {first}, last_seq {last} do not license it"
            )));
        };
        // check_purge never yields 0 (a full purge) nor past last_seq + 1.
        debug_assert!(seq > 0 && seq <= last + 1);
        let left = permit
            .remaining()
            .ok_or_else(|| expired("before the purge"))?;
        let response = tokio::time::timeout(left, std::future::IntoFuture::into_future(s.purge().sequence(seq)))
            .await
            .map_err(|_| PurgeError::Failed {
                stream: stream.to_string(),
                target,
                reason: "no answer before the fence's deadline (the purge may have applied; the next tick reads the log as it is)".into(),
            })?
            .map_err(|e| PurgeError::Failed {
                stream: stream.to_string(),
                target,
                reason: e.to_string(),
            })?;
        Ok(response.purged)
    }
}

impl Broker {
    /// The demo's simulated application: `n` records on `subject`
    /// (pipelined); returns the last sequence.
    pub async fn publish_many(&self, subject: &str, n: usize) -> Result<u64, super::Fault> {
        let mut last = 0;
        for chunk in 0..n.div_ceil(1000) {
            let mut acks = Vec::with_capacity(1000);
            for i in chunk * 1000..n.min((chunk + 1) * 1000) {
                acks.push(
                    self.js
                        .publish(subject.to_string(), format!("record {i}").into())
                        .await
                        .map_err(|e| Fault::failed(e.to_string()))?,
                );
            }
            for a in acks {
                last = a.await.map_err(|e| Fault::failed(e.to_string()))?.sequence;
            }
        }
        Ok(last)
    }
}
