//! Reading stream and consumer settings for the checks in
//! [`crate::stream_check`].

use async_nats::jetstream::stream::{Config, DiscardPolicy, RetentionPolicy};

use super::Broker;
use crate::stream_check::{RetentionKind, StreamFacts};

/// The settings the checks judge, from a stream's configuration.
pub fn facts_of(c: &Config) -> StreamFacts {
    StreamFacts {
        subjects: c.subjects.clone(),
        max_bytes: c.max_bytes,
        discard_new: matches!(c.discard, DiscardPolicy::New),
        max_age: c.max_age,
        max_msgs: c.max_messages,
        max_msgs_per_subject: c.max_messages_per_subject,
        discard_new_per_subject: c.discard_new_per_subject,
        retention: match c.retention {
            RetentionPolicy::Limits => RetentionKind::Limits,
            RetentionPolicy::Interest => RetentionKind::Interest,
            RetentionPolicy::WorkQueue => RetentionKind::WorkQueue,
        },
        allow_msg_ttl: c.allow_message_ttl,
        subject_delete_marker_ttl: c.subject_delete_marker_ttl.filter(|d| !d.is_zero()),
        allow_rollup: c.allow_rollup,
        deny_delete: c.deny_delete,
        replicas: c.num_replicas.max(1),
    }
}

/// What reading a stream's settings found.
#[derive(Debug)]
pub enum StreamRead {
    Found(StreamFacts),
    Missing,
}

/// Why a read failed (not a missing stream: that is an answer).
#[derive(Debug, thiserror::Error)]
#[error("reading stream {stream}: {reason}")]
pub struct ReadError {
    pub stream: String,
    pub reason: String,
}

impl ReadError {
    /// The read of `stream` that failed with `fault` (its sentence without
    /// the stream's name, which the error says first).
    fn of(stream: &str, fault: &super::Fault) -> ReadError {
        let said = fault.to_string();
        let reason = said
            .strip_prefix(&format!("stream {stream}: "))
            .unwrap_or(&said)
            .to_string();
        ReadError {
            stream: stream.to_string(),
            reason,
        }
    }
}

impl Broker {
    /// How many servers the connected broker's cluster has (its INFO's
    /// client URLs, which name every server that advertises one), or
    /// `None` when it is not part of a cluster.
    pub fn cluster_servers(&self) -> Option<usize> {
        let info = self.js.client().server_info();
        info.cluster.as_ref().filter(|c| !c.is_empty())?;
        let mut urls = info.connect_urls.clone();
        urls.sort();
        urls.dedup();
        // A cluster that advertises nothing is still one: assume the usual 3.
        Some(if urls.is_empty() { 3 } else { urls.len() })
    }

    /// The configuration of `stream`, or `None` when it does not exist.
    pub async fn stream_config(&self, stream: &str) -> Result<Option<Config>, ReadError> {
        // Any member's answer: a configuration is the same on all of them
        // once created, and nothing here decides how far a purge goes.
        match self.stream_handle(stream).await {
            Ok(s) => Ok(Some(s.cached_info().config.clone())),
            Err(super::Fault::Missing(_)) => Ok(None),
            Err(f) => Err(ReadError::of(stream, &f)),
        }
    }

    /// Whether stream `copy` still mirrors or sources `log` through the
    /// durable consumer `consumer`, as its configuration says now: a copy
    /// the account's last listing named may have been deleted or given
    /// another consumer since.
    pub async fn still_copies(
        &self,
        copy: &str,
        log: &str,
        consumer: &str,
    ) -> Result<bool, ReadError> {
        let Some(c) = self.stream_config(copy).await? else {
            return Ok(false);
        };
        Ok(c.mirror.iter().chain(c.sources.iter().flatten()).any(|o| {
            o.name == log
                && o.external.is_none()
                && o.consumer.as_ref().is_some_and(|k| k.name == consumer)
        }))
    }

    /// The settings of `stream`, or `Missing`.
    pub async fn stream_facts(&self, stream: &str) -> Result<StreamRead, ReadError> {
        match self.stream_config(stream).await? {
            None => Ok(StreamRead::Missing),
            Some(c) => Ok(StreamRead::Found(facts_of(&c))),
        }
    }

    /// Whether the durable consumer `name` exists on `stream`.
    pub async fn consumer_exists(&self, stream: &str, name: &str) -> Result<bool, ReadError> {
        self.stream_handle(stream)
            .await
            .map_err(|f| ReadError::of(stream, &f))?;
        match self.consumer_info(stream, name).await {
            Ok(_) => Ok(true),
            Err(super::Fault::Missing(_)) => Ok(false),
            Err(f) => Err(ReadError::of(stream, &f)),
        }
    }
}
