//! The broker's side of `set-capacity`: one reading of the stream and of
//! the account's JetStream limits, the update of `max_bytes` alone, and
//! the re-read that verifies it.

use async_nats::jetstream::stream::{Config, StorageType};

use super::Broker;
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
    /// Every setting as read, for an update that changes `max_bytes` only.
    config: Config,
}

impl Broker {
    /// The stream's configuration and usage; `None` when it does not
    /// exist.
    pub async fn capacity_read(&self, stream: &str) -> Result<Option<Read>, String> {
        Ok(self.stream_info_of(stream).await?.map(|info| Read {
            bytes: info.state.bytes,
            max_bytes: info.config.max_bytes,
            replicas: u64::try_from(info.config.num_replicas.max(1)).unwrap_or(1),
            discard_new: super::streams::facts_of(&info.config).discard_new,
            config: info.config,
        }))
    }

    /// The account's limits for the storage `read`'s stream uses, as
    /// `$JS.API.INFO` answers them; unreadable is an answer (the broker
    /// then decides).
    pub async fn account_limits(&self, read: &Read) -> Account {
        let storage = read.config.storage;
        let a = match self
            .bounded("account info ($JS.API.INFO)", self.js.query_account())
            .await
        {
            Ok(a) => a,
            Err(error) => return Account::Unreadable { error },
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

    /// Updates the stream with `config` as read and `max_bytes` = `target`
    /// (nothing else changed), then reads it back: the `max_bytes` the
    /// broker reports (`Ok(Err(why))` when the update was taken but the
    /// re-read failed). A refusal is the broker's own error.
    pub async fn set_max_bytes(
        &self,
        read: &Read,
        target: i64,
    ) -> Result<Result<i64, String>, String> {
        let config = &read.config;
        let mut wanted = config.clone();
        wanted.max_bytes = target;
        self.bounded(
            &format!("the broker refused the update of {}", config.name),
            self.js.update_stream(&wanted),
        )
        .await?;
        // A fresh stream info, not the update's answer: what the broker
        // holds now.
        Ok(self
            .bounded(
                &format!("stream {}", config.name),
                self.js.get_stream(&config.name),
            )
            .await
            .map(|s| s.cached_info().config.max_bytes))
    }
}
