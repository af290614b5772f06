//! What `validate` proves of a cloud archive: the bucket is there, and
//! these credentials may list, read and write under the prefix; when one
//! is refused, the permission that is missing, in the cloud's own name
//! (docs/archive-format.md, The least permissions).
//!
//! The probe is one small object, `PREFIX/_crewlet_validate`, which never
//! parses as a segment: written, read back, written again with a
//! conditional create (which a store that honours one refuses), then
//! deleted where the credentials allow it (crewlet itself never deletes).

use futures::StreamExt;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::Client;
use crate::archive::remote::Cloud;
use crate::within::within;

/// The probe's segment-less name.
pub const PROBE: &str = "_crewlet_validate";

/// One operation the archive needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    List,
    Read,
    Write,
}

impl Op {
    pub fn verb(self) -> &'static str {
        match self {
            Op::List => "list",
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

/// The permission an operation needs, as `cloud` names it.
pub fn permission(cloud: Cloud, op: Op) -> &'static str {
    match (cloud, op) {
        (Cloud::S3, Op::List) => "s3:ListBucket",
        (Cloud::S3, Op::Read) => "s3:GetObject",
        (Cloud::S3, Op::Write) => "s3:PutObject",
        (Cloud::Gcs, Op::List) => "storage.objects.list",
        (Cloud::Gcs, Op::Read) => "storage.objects.get",
        (Cloud::Gcs, Op::Write) => "storage.objects.create",
        (Cloud::Azure, Op::List | Op::Read) => "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read (Storage Blob Data Reader)",
        (Cloud::Azure, Op::Write) => "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write (Storage Blob Data Contributor)",
    }
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Errors: the archive cannot work as configured.
    pub refused: Vec<String>,
    /// Warnings: it works, with a weaker guarantee.
    pub warnings: Vec<String>,
}

impl Client {
    /// Proves the bucket is there and these credentials may list, read
    /// and write under the prefix. Stops at the first refusal (a write
    /// refused says nothing about a read of what was never written).
    pub async fn check_access(&self) -> Access {
        let mut warnings = Vec::new();
        let refused = match self.probe(&mut warnings).await {
            Ok(()) => Vec::new(),
            Err(e) => vec![e],
        };
        Access { refused, warnings }
    }

    /// An object_store error of `op` in the probe's words: a missing
    /// bucket names what to do, a refusal the permission to grant.
    fn denied(&self, op: Op, e: &object_store::Error) -> String {
        let id = self.remote.id();
        match super::kind(e) {
            super::Kind::Missing => format!(
                "{id}: the {} {} does not exist (crewlet creates no cloud bucket; create it, with only the lifecycle rules docs/archive-format.md, Lifecycle rules allows): {e}",
                self.remote.cloud.bucket_word(),
                self.remote.bucket,
            ),
            _ => format!("{id}: {}", self.said(op, e)),
        }
    }

    /// One step of the probe: `call`, within the client's limit, its
    /// error in the probe's words.
    async fn step<T>(
        &self,
        op: Op,
        call: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T, String> {
        let id = self.remote.id();
        within(self.limit, || id, async {
            call.await.map_err(|e| self.denied(op, &e))
        })
        .await
    }

    /// The probe: list, write, read back, a conditional create that must
    /// be refused (else a warning), then a best-effort delete.
    async fn probe(&self, warnings: &mut Vec<String>) -> Result<(), String> {
        let id = self.remote.id();
        let prefix = (!self.remote.prefix.is_empty())
            .then(|| object_store::path::Path::parse(&self.remote.prefix))
            .transpose()
            .map_err(|e| format!("{id}: the prefix is not an object key: {e}"))?;
        // List: the first page is enough to prove the permission.
        self.step(Op::List, async {
            self.store.list(prefix.as_ref()).next().await.transpose()
        })
        .await?;
        let key = self.key(PROBE)?;
        let body = format!(
            "crewlet validate probe; safe to delete\n{}\n",
            chrono::Utc::now().to_rfc3339()
        );
        self.step(
            Op::Write,
            self.store
                .put(&key, PutPayload::from(body.clone().into_bytes())),
        )
        .await?;
        let back = self
            .step(Op::Read, async {
                self.store.get(&key).await?.bytes().await
            })
            .await?;
        if back.as_ref() != body.as_bytes() {
            return Err(format!(
                "{id}: the probe {PROBE} read back other than it was written"
            ));
        }
        let create = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let again = within(self.limit, || id.clone(), async {
            Ok(self
                .store
                .put_opts(&key, PutPayload::from(body.into_bytes()), create)
                .await)
        })
        .await?;
        match again {
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
            Ok(_) => warnings.push(format!(
                "{id}: the store overwrote an object a conditional create (If-None-Match: *) should have refused; a segment written by two sidecars at once could be overwritten: use a store that honours conditional writes"
            )),
            Err(e) => {
                return Err(format!(
                    "{id}: the store does not offer the conditional create crewlet writes segments with: {}",
                    self.said(Op::Write, &e)
                ))
            }
        }
        // Best effort: crewlet needs no delete permission.
        let _ = tokio::time::timeout(self.limit, self.store.delete(&key)).await;
        Ok(())
    }
}
