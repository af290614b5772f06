//! Creating and inspecting the contract's KV buckets.

use async_nats::jetstream::{self, kv};

use super::streams::ReadError;
use super::Broker;
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
    /// On the embedded broker only: creates the domain's stream if it is
    /// missing, with settings `validate` accepts (`discard: new`, a 1 GiB
    /// ceiling, no limits of its own). Returns whether it created one.
    pub async fn ensure_log_stream(
        &self,
        domain: &crate::config::Domain,
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
