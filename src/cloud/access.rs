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
        let mut out = Access {
            refused: Vec::new(),
            warnings: Vec::new(),
        };
        let cloud = self.remote.cloud;
        let id = self.remote.id();
        let denied = |op: Op, e: &object_store::Error| -> String {
            match super::kind(e) {
                super::Kind::Missing => format!(
                    "{id}: the {} {} does not exist (crewlet creates no cloud bucket; create it, with only the lifecycle rules docs/archive-format.md, Lifecycle rules allows): {e}",
                    cloud.bucket_word(),
                    self.remote.bucket,
                ),
                _ => format!("{id}: {}", self.said(op, e)),
            }
        };
        let limit = self.limit;
        let late = || format!("{id}: no answer within {}", crate::human::duration(limit));
        let prefix = match (!self.remote.prefix.is_empty())
            .then(|| object_store::path::Path::parse(&self.remote.prefix))
            .transpose()
        {
            Ok(p) => p,
            Err(e) => {
                out.refused
                    .push(format!("{id}: the prefix is not an object key: {e}"));
                return out;
            }
        };
        // List: the first page is enough to prove the permission.
        let listed = tokio::time::timeout(limit, async {
            self.store.list(prefix.as_ref()).next().await.transpose()
        })
        .await;
        match listed {
            Err(_) => {
                out.refused.push(late());
                return out;
            }
            Ok(Err(e)) => {
                out.refused.push(denied(Op::List, &e));
                return out;
            }
            Ok(Ok(_)) => {}
        }
        let key = match self.key(PROBE) {
            Ok(k) => k,
            Err(e) => {
                out.refused.push(e);
                return out;
            }
        };
        let body = format!(
            "crewlet validate probe; safe to delete\n{}\n",
            chrono::Utc::now().to_rfc3339()
        );
        let wrote = tokio::time::timeout(
            limit,
            self.store
                .put(&key, PutPayload::from(body.clone().into_bytes())),
        )
        .await;
        match wrote {
            Err(_) => {
                out.refused.push(late());
                return out;
            }
            Ok(Err(e)) => {
                out.refused.push(denied(Op::Write, &e));
                return out;
            }
            Ok(Ok(_)) => {}
        }
        let read = tokio::time::timeout(limit, async {
            match self.store.get(&key).await {
                Ok(r) => r.bytes().await,
                Err(e) => Err(e),
            }
        })
        .await;
        match read {
            Err(_) => {
                out.refused.push(late());
                return out;
            }
            Ok(Err(e)) => {
                out.refused.push(denied(Op::Read, &e));
                return out;
            }
            Ok(Ok(b)) if b.as_ref() != body.as_bytes() => {
                out.refused.push(format!(
                    "{id}: the probe {PROBE} read back other than it was written"
                ));
                return out;
            }
            Ok(Ok(_)) => {}
        }
        let create = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let again = tokio::time::timeout(
            limit,
            self.store
                .put_opts(&key, PutPayload::from(body.into_bytes()), create),
        )
        .await;
        match again {
            Ok(Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. })) => {}
            Ok(Ok(_)) => out.warnings.push(format!(
                "{id}: the store overwrote an object a conditional create (If-None-Match: *) should have refused; a segment written by two sidecars at once could be overwritten: use a store that honours conditional writes"
            )),
            Ok(Err(e)) => out.refused.push(format!(
                "{id}: the store does not offer the conditional create crewlet writes segments with: {}",
                self.said(Op::Write, &e)
            )),
            Err(_) => out.refused.push(late()),
        }
        // Best effort: crewlet needs no delete permission.
        let _ = tokio::time::timeout(limit, self.store.delete(&key)).await;
        out
    }
}
