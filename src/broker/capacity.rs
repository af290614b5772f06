//! The broker's side of `set-capacity`: one reading of the stream and of
//! the account's JetStream limits, the update of `max_bytes` alone, and
//! the re-read that verifies it.

use async_nats::jetstream::stream::{Config, StorageType};

use super::{Broker, Fault};
use crate::capacity::Account;

/// A stream as `set-capacity` reads it.
#[derive(Debug, Clone)]
pub struct Read {
    /// Bytes the stream holds.
    pub bytes: u64,
    /// Its ceiling (-1 when unset).
    pub max_bytes: i64,
    pub replicas: u64,
    pub discard_new: bool,
    /// Every setting as read, typed, for the account's limits.
    config: Config,
    /// The configuration exactly as the broker returned it, fields this
    /// program does not know included: the update changes `max_bytes` in
    /// it and sends the rest back as it came.
    raw: serde_json::Value,
}

/// Why an update of `max_bytes` wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateError {
    /// The broker's own refusal (or no answer).
    Refused(super::Fault),
    /// The configuration changed since it was judged.
    ChangedMeanwhile,
}

impl Broker {
    /// The stream's configuration and usage; `None` when it does not
    /// exist.
    pub async fn capacity_read(&self, stream: &str) -> Result<Option<Read>, Fault> {
        // One answer, its leader's: the configuration sent back and the
        // usage judged are the same moment's (docs/trim-floor.md, Proven
        // current).
        let reply = match self.stream_info_led(stream).await {
            Ok(r) => r,
            Err(Fault::Missing(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let raw = reply.get("config").cloned().ok_or_else(|| {
            Fault::failed(format!("stream {stream}: stream info carries no config"))
        })?;
        let info: async_nats::jetstream::stream::Info =
            serde_json::from_value(reply).map_err(|e| {
                Fault::failed(format!("stream {stream}: stream info does not parse ({e})"))
            })?;
        Ok(Some(Read {
            bytes: info.state.bytes,
            max_bytes: info.config.max_bytes,
            replicas: u64::try_from(info.config.num_replicas.max(1)).unwrap_or(1),
            discard_new: super::streams::facts_of(&info.config).discard_new,
            config: info.config,
            raw,
        }))
    }

    /// The stream's configuration as the broker returns it (the `config`
    /// of a raw `STREAM.INFO`); `None` when the stream does not exist.
    pub(super) async fn raw_config(
        &self,
        stream: &str,
    ) -> Result<Option<serde_json::Value>, Fault> {
        let reply = match self.stream_info_led(stream).await {
            Ok(r) => r,
            Err(Fault::Missing(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        reply
            .get("config")
            .cloned()
            .map(Some)
            .ok_or_else(|| Fault::failed(format!("stream {stream}: stream info carries no config")))
    }

    /// The account's limits for the storage `read`'s stream uses, as
    /// `$JS.API.INFO` answers them; unreadable is an answer (the broker
    /// then decides).
    pub async fn account_limits(&self, read: &Read) -> Account {
        let storage = read.config.storage;
        let a = match self.account_info().await {
            Ok(a) => a,
            Err(error) => {
                return Account::Unreadable {
                    error: error.to_string(),
                }
            }
        };
        // An account with tiered limits (per replica count: `R1`, `R3`)
        // has none at the top: the stream's tier is the one that applies.
        let tier = a.tiers.get(&format!("R{}", read.replicas));
        let tiered = a.limits.max_storage.is_none() && a.limits.max_memory.is_none();
        let (limits, reserved_storage, reserved_memory) = match tier {
            Some(t) if tiered => (&t.limits, t.reserved_storage, t.reserved_memory),
            _ => (&a.limits, a.reserved_storage, a.reserved_memory),
        };
        if tiered && tier.is_none() && !a.tiers.is_empty() {
            return Account::Unreadable {
                error: format!(
                    "the account's limits are per replica tier ({}) and none is R{}",
                    a.tiers.keys().cloned().collect::<Vec<_>>().join(", "),
                    read.replicas
                ),
            };
        }
        let (max, reserved, per_stream) = match storage {
            StorageType::File => (
                limits.max_storage,
                reserved_storage,
                limits.storage_max_stream_bytes,
            ),
            StorageType::Memory => (
                limits.max_memory,
                reserved_memory,
                limits.memory_max_stream_bytes,
            ),
        };
        let max_stream_bytes = per_stream
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| *n > 0);
        match max.and_then(|m| u64::try_from(m).ok()) {
            Some(max_storage) => Account::Limited {
                max_storage,
                reserved,
                max_stream_bytes,
            },
            None => Account::Unlimited { max_stream_bytes },
        }
    }

    /// Updates the stream with its configuration as read and `max_bytes` =
    /// `target` (nothing else changed, every field sent back as it came),
    /// then reads it back: the `max_bytes` the broker reports
    /// (`Ok(Err(why))` when the update was taken but the re-read failed).
    /// The broker offers no expected revision for a stream update, so the
    /// configuration is read again just before it, and the update is not
    /// sent if it changed since the judgement. A refusal is the broker's
    /// own error.
    pub async fn set_max_bytes(
        &self,
        read: &Read,
        target: i64,
    ) -> Result<Result<i64, Fault>, UpdateError> {
        let name = read.config.name.clone();
        crate::failpoint::failpoint("before_capacity_update").await;
        match self.raw_config(&name).await {
            Ok(Some(now)) if now == read.raw => {}
            Ok(_) => return Err(UpdateError::ChangedMeanwhile),
            Err(e) => return Err(UpdateError::Refused(e)),
        }
        let mut wanted = read.raw.clone();
        if let Some(o) = wanted.as_object_mut() {
            o.insert("max_bytes".into(), serde_json::json!(target));
        }
        let reply: serde_json::Value = self
            .ask(
                &format!("the update of {name}"),
                format!("STREAM.UPDATE.{name}"),
                &wanted,
            )
            .await
            .map_err(UpdateError::Refused)?;
        if let Some(err) = reply.get("error") {
            let why = match serde_json::from_value::<async_nats::jetstream::Error>(err.clone()) {
                Ok(e) => Fault::refused(&e, e.to_string()),
                Err(_) => Fault::failed(err.to_string()),
            };
            return Err(UpdateError::Refused(why));
        }
        // A fresh stream info from its leader, not the update's answer:
        // what the broker holds now.
        Ok(self
            .stream_led(&name)
            .await
            .map(|s| s.cached_info().config.max_bytes))
    }
}
