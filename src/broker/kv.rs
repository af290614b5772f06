//! Creating and inspecting the contract's KV buckets.

use async_nats::jetstream::{self, kv};

use super::streams::ReadError;
use super::{Broker, Fault};
use crate::buckets::{BucketSettings, BucketSpec};

/// What `ensure_bucket` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ensured {
    Created,
    /// It was there; these are its settings (the caller compares).
    Existed(BucketSettings),
}

impl Broker {
    /// The settings of bucket `name`, or `None` when it does not exist.
    pub async fn bucket_settings(&self, name: &str) -> Result<Option<BucketSettings>, ReadError> {
        let stream = format!("KV_{name}");
        match self.stream_config(&stream).await? {
            None => Ok(None),
            Some(c) => Ok(Some(BucketSettings {
                history: c.max_messages_per_subject,
                max_age: c.max_age,
                replicas: c.num_replicas.max(1),
            })),
        }
    }

    /// Creates the bucket if it is missing; an existing one is left as it is.
    pub async fn ensure_bucket(&self, spec: &BucketSpec) -> Result<Ensured, ReadError> {
        if let Some(have) = self.bucket_settings(&spec.name).await? {
            return Ok(Ensured::Existed(have));
        }
        self.js
            .create_key_value(kv::Config {
                bucket: spec.name.clone(),
                history: spec.history,
                max_age: spec.max_age,
                storage: jetstream::stream::StorageType::File,
                num_replicas: spec.replicas,
                ..Default::default()
            })
            .await
            .map_err(|e| ReadError {
                stream: format!("KV_{}", spec.name),
                reason: format!("creating bucket {}: {e}", spec.name),
            })?;
        Ok(Ensured::Created)
    }
}

impl Broker {
    /// Creates the buckets the sidecar writes itself (floors, duty, gates,
    /// erasures) when they are missing, as `run` and every gesture that
    /// writes do (docs/contract.md): a fleet where the sidecar never ran
    /// is one where nothing was published yet. Returns the ones created.
    pub async fn ensure_sidecar_buckets(
        &self,
        config: &crate::config::Config,
    ) -> Result<Vec<String>, ReadError> {
        let mut created = Vec::new();
        for spec in crate::buckets::contract_buckets(config)
            .into_iter()
            .filter(|s| s.sidecar_owned)
        {
            if self.ensure_bucket(&spec).await? == Ensured::Created {
                created.push(spec.name.clone());
            }
        }
        Ok(created)
    }
}

impl Broker {
    /// Creates the domain's stream if it is missing, with settings
    /// `validate` accepts (`discard: new`, a 1 GiB ceiling, no limits of its
    /// own, deletes denied) and `replicas` copies: for the embedded broker
    /// and for the simulated node of the examples. Returns whether it
    /// created one.
    pub async fn ensure_log_stream(
        &self,
        domain: &crate::config::Domain,
        replicas: usize,
    ) -> Result<bool, ReadError> {
        if self.stream_config(&domain.stream).await?.is_some() {
            return Ok(false);
        }
        let mut subjects = vec![format!("{}.>", domain.stream)];
        subjects.extend(domain.gate_subject.clone());
        self.js
            .create_stream(jetstream::stream::Config {
                name: domain.stream.clone(),
                subjects,
                max_bytes: crate::stream_check::MIN_MAX_BYTES,
                discard: jetstream::stream::DiscardPolicy::New,
                storage: jetstream::stream::StorageType::File,
                allow_direct: true,
                deny_delete: true,
                num_replicas: replicas,
                ..Default::default()
            })
            .await
            .map_err(|e| ReadError {
                stream: domain.stream.clone(),
                reason: format!("creating the stream: {e}"),
            })?;
        Ok(true)
    }
}

/// One live KV entry: its value and revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEntry {
    pub value: Vec<u8>,
    pub revision: u64,
}

/// Why a compare-and-set write wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CasError {
    /// Create refused: the key is live.
    #[error("the key {key} already exists")]
    Exists { key: String },
    /// Update or delete refused: the key is not at the revision read.
    #[error("the key {key} changed since it was read (compare-and-set refused)")]
    Conflict { key: String },
    /// No answer, or another error: the write may or may not have landed.
    #[error("writing {key}: {reason}")]
    Failed { key: String, reason: String },
}

impl Broker {
    /// The live entry at `key` (`None` when absent, deleted or expired).
    pub async fn kv_entry(&self, bucket: &str, key: &str) -> Result<Option<KvEntry>, super::Fault> {
        let store = self.kv(bucket).await?;
        match store.entry(key).await {
            Ok(Some(e)) if e.operation == kv::Operation::Put => Ok(Some(KvEntry {
                value: e.value.to_vec(),
                revision: e.revision,
            })),
            Ok(_) => Ok(None),
            Err(e) => {
                self.forget_kv(bucket);
                Err(Fault::failed(format!("reading {key} from {bucket}: {e}")))
            }
        }
    }

    /// Creates `key` only if it is not live; returns the new revision.
    pub async fn kv_create(
        &self,
        bucket: &str,
        key: &str,
        value: Vec<u8>,
    ) -> Result<u64, CasError> {
        let failed = |reason: String| CasError::Failed {
            key: key.to_string(),
            reason,
        };
        let store = self.kv(bucket).await.map_err(|e| failed(e.to_string()))?;
        store.create(key, value.into()).await.map_err(|e| {
            if e.kind() == kv::CreateErrorKind::AlreadyExists {
                CasError::Exists {
                    key: key.to_string(),
                }
            } else {
                self.forget_kv(bucket);
                failed(e.to_string())
            }
        })
    }

    /// Writes `key` only if it is still at `revision`; returns the new one.
    pub async fn kv_update(
        &self,
        bucket: &str,
        key: &str,
        value: Vec<u8>,
        revision: u64,
    ) -> Result<u64, CasError> {
        let failed = |reason: String| CasError::Failed {
            key: key.to_string(),
            reason,
        };
        let store = self.kv(bucket).await.map_err(|e| failed(e.to_string()))?;
        store
            .update(key, value.into(), revision)
            .await
            .map_err(|e| {
                if e.kind() == kv::UpdateErrorKind::WrongLastRevision {
                    CasError::Conflict {
                        key: key.to_string(),
                    }
                } else {
                    self.forget_kv(bucket);
                    failed(e.to_string())
                }
            })
    }

    /// Deletes `key` only if it is still at `revision`.
    pub async fn kv_delete_at(
        &self,
        bucket: &str,
        key: &str,
        revision: u64,
    ) -> Result<(), CasError> {
        let failed = |reason: String| CasError::Failed {
            key: key.to_string(),
            reason,
        };
        let store = self.kv(bucket).await.map_err(|e| failed(e.to_string()))?;
        store
            .delete_expect_revision(key, Some(revision))
            .await
            .map_err(|e| {
                if e.kind() == kv::DeleteErrorKind::WrongLastRevision {
                    CasError::Conflict {
                        key: key.to_string(),
                    }
                } else {
                    self.forget_kv(bucket);
                    failed(e.to_string())
                }
            })
    }

    /// Writes `key` whatever it holds (for rows only their writer owns).
    pub async fn kv_put(
        &self,
        bucket: &str,
        key: &str,
        value: Vec<u8>,
    ) -> Result<u64, super::Fault> {
        let store = self.kv(bucket).await?;
        store.put(key, value.into()).await.map_err(|e| {
            self.forget_kv(bucket);
            Fault::failed(format!("writing {key} to {bucket}: {e}"))
        })
    }

    /// Deletes `key` whatever it holds.
    pub async fn kv_delete(&self, bucket: &str, key: &str) -> Result<(), super::Fault> {
        let store = self.kv(bucket).await?;
        store.delete(key).await.map_err(|e| {
            self.forget_kv(bucket);
            Fault::failed(format!("deleting {key} from {bucket}: {e}"))
        })
    }
}

/// Why a leader-answered read of a key found nothing to say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderReadError {
    /// The bucket does not exist.
    #[error("bucket {bucket} does not exist")]
    BucketMissing { bucket: String },
    #[error("reading {key} from {bucket}: {reason}")]
    Failed {
        bucket: String,
        key: String,
        reason: String,
    },
}

impl Broker {
    /// The live entry at `key` as the bucket's stream leader has it: a
    /// message get by last subject (`MSG.GET` with `last_by_subj`), which
    /// on a cluster only the stream's leader answers, so a key written
    /// before the request is seen (a direct get, which any replica may
    /// answer, can miss it). `None` when the key is absent or deleted.
    /// Bounded by the read timeout.
    pub async fn kv_entry_proven(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<crate::proven::Proven<Option<KvEntry>>, LeaderReadError> {
        use async_nats::jetstream::stream::RawMessageErrorKind;
        let failed = |reason: String| LeaderReadError::Failed {
            bucket: bucket.to_string(),
            key: key.to_string(),
            reason,
        };
        let read = async {
            // The handle is any member's; the message get below is the
            // leader's alone.
            let stream =
                self.stream_handle(&format!("KV_{bucket}"))
                    .await
                    .map_err(|f| match f {
                        Fault::Missing(_) => LeaderReadError::BucketMissing {
                            bucket: bucket.to_string(),
                        },
                        f => failed(f.to_string()),
                    })?;
            match stream
                .raw_message_builder()
                .last_by_subject(format!("$KV.{bucket}.{key}"))
                .send()
                .await
            {
                Ok(m) => {
                    let deleted = super::read::is_deletion(&m.headers);
                    Ok(crate::proven::Proven::vouched((!deleted).then(|| {
                        KvEntry {
                            value: m.payload.to_vec(),
                            revision: m.sequence,
                        }
                    })))
                }
                Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => {
                    Ok(crate::proven::Proven::vouched(None))
                }
                Err(e) => Err(failed(e.to_string())),
            }
        };
        tokio::time::timeout(self.read_timeout, read)
            .await
            .map_err(|_| {
                failed(format!(
                    "no answer within {}",
                    crate::config::Dur(self.read_timeout)
                ))
            })?
    }
}
