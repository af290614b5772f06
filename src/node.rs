//! The node side of the contract (docs/contract.md), for services written
//! in Rust: the presence lease, the position report, the snapshot register
//! and the backup manifest, written exactly as the sidecar reads them.
//!
//! Every row is checked by the same parser the sidecar uses before it is
//! written, so a row this API writes is never one the sidecar calls
//! malformed (which would block the trim); a row that would be is refused
//! and nothing is written.
//!
//! ```no_run
//! # async fn example() -> Result<(), crewlet::node::NodeError> {
//! use crewlet::config::{Buckets, NatsConfig};
//! use crewlet::node::Node;
//!
//! let node = Node::connect("nats://127.0.0.1:4222", &NatsConfig::default(), Buckets::default(), "tracker-1").await?;
//! node.lease(&["data"], "1.4.2").await?;                  // every presence_ttl / 3
//! let created = node.stream_created("CREWLET_TRACKER_LOG").await?;
//! node.report("CREWLET_TRACKER_LOG", 1_204_311, 0, created).await?; // after each commit
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;

use chrono::Utc;

use crate::broker::{Broker, ConnectError};
use crate::config::{Buckets, NatsConfig};
use crate::rows::{
    check_node_id, Artefact, BackupManifest, PositionRow, PositionStatus, PresenceRow, SkipReason,
    SnapshotRow, Timestamp,
};

/// Why a row was not written.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("node id {id:?} {reason}")]
    BadId { id: String, reason: String },
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The row would not pass the sidecar's own check: nothing was written.
    #[error("refused to write {bucket}/{key}: {reason}")]
    Malformed {
        bucket: String,
        key: String,
        reason: String,
    },
    #[error("{0}")]
    Broker(crate::broker::Fault),
}

/// One node's writer of its rows.
#[derive(Clone)]
pub struct Node {
    broker: Broker,
    buckets: Buckets,
    id: String,
    started_at: Timestamp,
}

impl Node {
    /// Connects (as `crewlet` does: a server list, creds, TLS in `nats`)
    /// and checks the node id.
    pub async fn connect(
        url: &str,
        nats: &NatsConfig,
        buckets: Buckets,
        id: &str,
    ) -> Result<Node, NodeError> {
        check(id)?;
        let broker = crate::broker::connect(url, nats, &format!("crewlet-node/{id}")).await?;
        Node::with_broker(broker, buckets, id)
    }

    /// On a connection the caller already has.
    pub fn with_broker(broker: Broker, buckets: Buckets, id: &str) -> Result<Node, NodeError> {
        check(id)?;
        Ok(Node {
            broker,
            buckets,
            id: id.to_string(),
            started_at: Timestamp(Utc::now()),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Writes the presence lease. Renew it well inside the presence
    /// bucket's TTL (`retention.presence_ttl`, every third of it): a lapsed
    /// lease makes the node "not live", and a live data node without a
    /// position pins its logs at 0. `roles` with `"data"` marks a node that
    /// applies logs.
    pub async fn lease(&self, roles: &[&str], version: &str) -> Result<(), NodeError> {
        let row = PresenceRow {
            node: self.id.clone(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            version: version.to_string(),
            started_at: self.started_at,
        };
        self.write(&self.buckets.presence, &self.id, &row, |k, b| {
            PresenceRow::parse(k, b).map(|_| ())
        })
        .await
    }

    /// Gives the lease up at once (a clean shutdown), rather than letting it
    /// lapse. The node's positions stay, and keep pinning its logs.
    pub async fn leave(&self) -> Result<(), NodeError> {
        self.broker
            .kv_delete(&self.buckets.presence, &self.id)
            .await
            .map_err(NodeError::Broker)
    }

    /// What the sidecar tells nodes of its configuration (`_contract` in
    /// the floors bucket, docs/contract.md): the presence TTL, and per log
    /// its gate subject, the generation to report in (also before any
    /// floors row exists), the snapshot and backup policy and `min_age`.
    /// `None` until a duty holder has written it.
    pub async fn contract(&self) -> Result<Option<crate::rows::ContractRow>, NodeError> {
        let key = crate::rows::CONTRACT_KEY;
        let Some(entry) = self
            .broker
            .kv_entry(&self.buckets.floors, key)
            .await
            .map_err(NodeError::Broker)?
        else {
            return Ok(None);
        };
        crate::rows::ContractRow::parse(key, &entry.value)
            .map(Some)
            .map_err(|e| NodeError::Malformed {
                bucket: self.buckets.floors.clone(),
                key: key.to_string(),
                reason: e.0,
            })
    }

    /// The generation to report positions of `stream` in, from
    /// `_contract`: 0 while nothing says otherwise (a log never
    /// reanchored, or no duty holder yet).
    pub async fn generation(&self, stream: &str) -> Result<u64, NodeError> {
        Ok(self
            .contract()
            .await?
            .and_then(|c| c.domains.into_iter().find(|d| d.stream == stream))
            .map_or(0, |d| d.generation))
    }

    /// The `created` instant of the log's current incarnation, which a
    /// position report carries: read it when the node starts consuming the
    /// log (and again after the log is recreated), not per report.
    pub async fn stream_created(&self, stream: &str) -> Result<Timestamp, NodeError> {
        self.broker
            .stream_state(stream)
            .await
            .map(|s| s.created)
            .map_err(NodeError::Broker)
    }

    /// Reports that everything up to `seq` (inclusive) of `stream` is
    /// durably applied, at the floor's `generation` (0 until the log is
    /// re-anchored) of the incarnation `stream_created`. Write it after the
    /// node's own commit, never before.
    pub async fn report(
        &self,
        stream: &str,
        seq: u64,
        generation: u64,
        stream_created: Timestamp,
    ) -> Result<(), NodeError> {
        self.position(stream, seq, generation, stream_created, PositionStatus::Ok)
            .await
    }

    /// Reports that the node's copy no longer matches the log (it saw a
    /// sequence it did not expect): it counts as holding nothing until it
    /// is rebuilt and reports again.
    pub async fn report_diverged(
        &self,
        stream: &str,
        seq: u64,
        generation: u64,
        stream_created: Timestamp,
    ) -> Result<(), NodeError> {
        self.position(
            stream,
            seq,
            generation,
            stream_created,
            PositionStatus::LogDiverged,
        )
        .await
    }

    async fn position(
        &self,
        stream: &str,
        seq: u64,
        generation: u64,
        stream_created: Timestamp,
        status: PositionStatus,
    ) -> Result<(), NodeError> {
        let row = PositionRow {
            node: self.id.clone(),
            stream: stream.to_string(),
            seq,
            generation,
            stream_created,
            updated_at: Timestamp(Utc::now()),
            status,
        };
        let key = PositionRow::key(stream, &self.id);
        self.write(&self.buckets.positions, &key, &row, |k, b| {
            PositionRow::parse(k, b).map(|_| ())
        })
        .await
    }

    /// Replaces the node's snapshot register: per log, the verified
    /// snapshot it could donate to a joining node. `skip` says why there is
    /// none when `artefacts` is empty.
    pub async fn register_snapshots(
        &self,
        artefacts: BTreeMap<String, Artefact>,
        skip: SkipReason,
    ) -> Result<(), NodeError> {
        let row = SnapshotRow {
            node: self.id.clone(),
            updated_at: Timestamp(Utc::now()),
            skip_reason: skip,
            artefacts,
        };
        self.write(&self.buckets.snapshots, &self.id, &row, |k, b| {
            SnapshotRow::parse(k, b).map(|_| ())
        })
        .await
    }

    /// Announces a backup this node took: `positions` per log, the last
    /// sequence the backup contains. It counts for the trim once
    /// `completed_at` is set and `verified` is true.
    pub async fn announce_backup(&self, manifest: &BackupManifest) -> Result<(), NodeError> {
        if manifest.node != self.id {
            return Err(NodeError::Malformed {
                bucket: self.buckets.backups.clone(),
                key: BackupManifest::key(&manifest.node, &manifest.id),
                reason: format!(
                    "the manifest names node {:?}, not this node {:?}",
                    manifest.node, self.id
                ),
            });
        }
        let key = BackupManifest::key(&self.id, &manifest.id);
        self.write(&self.buckets.backups, &key, manifest, |k, b| {
            BackupManifest::parse(k, b).map(|_| ())
        })
        .await
    }

    /// Serializes, checks with the sidecar's parser, then writes.
    async fn write<T: serde::Serialize>(
        &self,
        bucket: &str,
        key: &str,
        row: &T,
        parse: impl Fn(&str, &[u8]) -> Result<(), crate::rows::RowError>,
    ) -> Result<(), NodeError> {
        let malformed = |reason: String| NodeError::Malformed {
            bucket: bucket.to_string(),
            key: key.to_string(),
            reason,
        };
        let body = serde_json::to_vec(row).map_err(|e| malformed(e.to_string()))?;
        parse(key, &body).map_err(|e| malformed(e.to_string()))?;
        self.broker
            .kv_put(bucket, key, body)
            .await
            .map(|_| ())
            .map_err(NodeError::Broker)
    }
}

fn check(id: &str) -> Result<(), NodeError> {
    check_node_id(id).map_err(|reason| NodeError::BadId {
        id: id.to_string(),
        reason: reason.0,
    })
}
