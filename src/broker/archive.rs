//! The archive in a JetStream Object Store bucket: segments put whole,
//! never replaced (an object of that name with other bytes is an error),
//! listed by name, read back whole.

use async_nats::jetstream::object_store;
use futures::StreamExt;
use tokio::io::AsyncReadExt;

use super::Broker;
use crate::archive::{segment, Put};

impl Broker {
    async fn object_store(&self, bucket: &str) -> Result<object_store::ObjectStore, String> {
        self.js
            .get_object_store(bucket)
            .await
            .map_err(|e| format!("object store {bucket}: {e}"))
    }

    /// Creates Object Store bucket `bucket` with `replicas` if it is
    /// missing; returns whether it created it.
    pub async fn ensure_object_store(&self, bucket: &str, replicas: usize) -> Result<bool, String> {
        if self.js.get_object_store(bucket).await.is_ok() {
            return Ok(false);
        }
        self.js
            .create_object_store(object_store::Config {
                bucket: bucket.to_string(),
                num_replicas: replicas,
                storage: async_nats::jetstream::stream::StorageType::File,
                ..Default::default()
            })
            .await
            .map(|_| true)
            .map_err(|e| format!("creating object store {bucket}: {e}"))
    }

    /// The bytes of object `name`, or `None` when there is none.
    pub async fn get_segment(&self, bucket: &str, name: &str) -> Result<Option<Vec<u8>>, String> {
        let store = self.object_store(bucket).await?;
        let mut object = match store.get(name).await {
            Ok(o) => o,
            Err(e) if e.kind() == object_store::GetErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("reading {name} from {bucket}: {e}")),
        };
        let mut bytes = Vec::new();
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| format!("reading {name} from {bucket}: {e}"))?;
        Ok(Some(bytes))
    }

    /// Puts segment `name` whole, unless it is there already: the same
    /// bytes are a re-fold, other bytes an error (never overwritten). The
    /// put is complete (every chunk and the info stored) when it returns.
    pub async fn put_segment(&self, bucket: &str, name: &str, bytes: &[u8]) -> Result<Put, String> {
        if let Some(existing) = self.get_segment(bucket, name).await? {
            return if existing == bytes {
                Ok(Put::AlreadyThere)
            } else {
                Err(format!(
                    "{bucket}/{name} exists with other content than this fold wrote; it is never overwritten (check what wrote it, and verify-archive)"
                ))
            };
        }
        let store = self.object_store(bucket).await?;
        let mut reader = bytes;
        store
            .put(name, &mut reader)
            .await
            .map(|_| Put::Written)
            .map_err(|e| format!("writing {name} to {bucket}: {e}"))
    }

    /// Every segment name of `stream` at `generation` in the bucket, in
    /// sequence order (deleted objects and other names are not listed).
    pub async fn list_segments(
        &self,
        bucket: &str,
        stream: &str,
        generation: u64,
    ) -> Result<Vec<String>, String> {
        let store = self.object_store(bucket).await?;
        let mut list = store
            .list()
            .await
            .map_err(|e| format!("listing {bucket}: {e}"))?;
        let prefix = format!("{stream}/{generation}/");
        let mut names = Vec::new();
        while let Some(info) = list.next().await {
            let info = info.map_err(|e| format!("listing {bucket}: {e}"))?;
            if !info.deleted
                && info.name.starts_with(&prefix)
                && segment::parse_name(&info.name).is_some()
            {
                names.push(info.name);
            }
        }
        names.sort();
        Ok(names)
    }
}
