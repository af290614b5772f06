//! PURE: a node's rows judged as the sidecar reads them, and what the
//! fleet still needs from the node before anything can be trimmed
//! (`crewlet node check`, `crewlet row check`; docs/contract.md, Checking
//! a node). The rows are judged by the sidecar's own parser, so a node's
//! tests and the sidecar never disagree about a row.

use serde::Serialize;

use crate::floor::{Answer, NodeState, TermName, TermState};
use crate::rows::{
    AckRow, BackupManifest, HoldRow, PositionRow, PresenceRow, RowError, SnapshotRow,
};

/// The rows a node or tool writes, by the name their schema has
/// (docs/schemas/).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Presence,
    Position,
    Hold,
    BackupManifest,
    BackupAck,
    Snapshot,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Presence,
        Kind::Position,
        Kind::Hold,
        Kind::BackupManifest,
        Kind::BackupAck,
        Kind::Snapshot,
    ];

    /// Its name, as `--kind` and the schema's file name say it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Presence => "presence",
            Kind::Position => "position",
            Kind::Hold => "hold",
            Kind::BackupManifest => "backup-manifest",
            Kind::BackupAck => "backup-ack",
            Kind::Snapshot => "snapshot",
        }
    }

    pub fn named(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The row's key as the bucket would hold it, from the row itself
    /// where the row names it; a hold's body names neither its stream nor
    /// its id, so its key must be given.
    pub fn key_of(self, body: &serde_json::Value) -> Option<String> {
        let s = |f: &str| body.get(f).and_then(|v| v.as_str());
        match self {
            Kind::Presence | Kind::Snapshot => s("node").map(str::to_string),
            Kind::Position => Some(PositionRow::key(s("stream")?, s("node")?)),
            Kind::BackupManifest => Some(BackupManifest::key(s("node")?, s("id")?)),
            Kind::BackupAck => Some(format!("{}{}", crate::rows::ACK_PREFIX, s("stream")?)),
            Kind::Hold => None,
        }
    }

    /// The sidecar's verdict on `body` under `key`.
    pub fn judge(self, key: &str, body: &[u8]) -> Result<(), RowError> {
        match self {
            Kind::Presence => PresenceRow::parse(key, body).map(drop),
            Kind::Position => PositionRow::parse(key, body).map(drop),
            Kind::Hold => HoldRow::parse(key, body).map(drop),
            Kind::BackupManifest => BackupManifest::parse(key, body).map(drop),
            Kind::BackupAck => AckRow::parse(key, body).map(drop),
            Kind::Snapshot => SnapshotRow::parse(key, body).map(drop),
        }
    }
}

/// One row of a node's, as it stands in the broker.
#[derive(Debug, Clone)]
pub struct RowSeen {
    pub kind: Kind,
    pub bucket: String,
    pub key: String,
    pub value: Vec<u8>,
}

/// One row judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowJudged {
    pub bucket: String,
    pub key: String,
    pub kind: &'static str,
    /// Null when the sidecar reads it; else why it does not.
    pub refused: Option<String>,
}

/// A node's rows and what the fleet still needs from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeCheck {
    pub node: String,
    pub rows: Vec<RowJudged>,
    /// What keeps the fleet from trimming on this node's account, one
    /// sentence each, with what to write.
    pub needs: Vec<String>,
}

impl NodeCheck {
    /// Every row reads and nothing is needed.
    pub fn passes(&self) -> bool {
        self.needs.is_empty() && self.rows.iter().all(|r| r.refused.is_none())
    }
}

/// Judges `node`'s rows (`rows`: every row the broker holds of it) and
/// says, from each log's answer, what the fleet still needs from it.
pub fn check(node: &str, rows: &[RowSeen], answers: &[Answer]) -> NodeCheck {
    let judged: Vec<RowJudged> = rows
        .iter()
        .map(|r| RowJudged {
            bucket: r.bucket.clone(),
            key: r.key.clone(),
            kind: r.kind.name(),
            refused: r.kind.judge(&r.key, &r.value).err().map(|e| e.to_string()),
        })
        .collect();
    let snapshot = rows
        .iter()
        .find(|r| r.kind == Kind::Snapshot)
        .and_then(|r| SnapshotRow::parse(&r.key, &r.value).ok());
    let mut needs = Vec::new();
    let leased = judged
        .iter()
        .any(|r| r.kind == Kind::Presence.name() && r.refused.is_none());
    if !leased {
        needs.push(format!(
            "a presence lease: put crewlet_presence key {node} with roles [\"data\"], renewed every third of the presence TTL (_contract's presence_ttl)"
        ));
    }
    for a in answers {
        needs.extend(log_needs(node, a, snapshot.as_ref()));
    }
    NodeCheck {
        node: node.to_string(),
        rows: judged,
        needs,
    }
}

/// What one log still needs from `node`.
fn log_needs(node: &str, a: &Answer, snapshot: Option<&SnapshotRow>) -> Vec<String> {
    let s = &a.stream;
    let mut out = Vec::new();
    let row = a.nodes.iter().find(|r| r.node.as_str() == node);
    match row {
        None => out.push(format!(
            "a position on {s}: it is not among the nodes counted on this log; report crewlet_positions key {s}.{node} after each commit (a node with role data and no position pins the log at 0)"
        )),
        Some(r) => {
            if r.seq.is_none() {
                out.push(format!(
                    "a position on {s}: it is counted but has not reported one, so it pins the log at 0; report crewlet_positions key {s}.{node} after each commit"
                ));
            }
            if let Some(g) = r.left_gen {
                out.push(format!(
                    "a position in generation {} of {s}: its row is of generation {g}, which the log has left, so it counts at 0 (_contract names the generation)",
                    a.generation
                ));
            }
            match r.state {
                NodeState::AheadOfLog => out.push(format!(
                    "a position no further than the log's end on {s}: it reports {}, the log ends at {} (it applies another log, or the log was restored from an older copy)",
                    r.seq.unwrap_or(0),
                    a.last_seq
                )),
                NodeState::LogDiverged => out.push(format!(
                    "a rebuild on {s}: it reports log_diverged, and pins nothing it could use; rebuild it from a snapshot or a backup"
                )),
                _ => {}
            }
            if let Some(seq) = r.seq {
                if seq + 1 < a.first_seq {
                    out.push(format!(
                        "a restore on {s}: its position {seq} is behind the log's first record {}, which it can no longer fetch (node_behind_log)",
                        a.first_seq
                    ));
                }
            }
        }
    }
    if let Some(t) = a.terms.iter().find(|t| t.term == TermName::SnapshotFloor) {
        let holds = snapshot.is_some_and(|r| {
            r.artefacts
                .get(s)
                .is_some_and(|x| x.verified && x.generation == a.generation)
        });
        let short = matches!(t.state, TermState::Value { seq: 0, .. }) || t.binding;
        if short && !holds {
            out.push(format!(
                "a snapshot of {s}: no verified artefact of generation {} in crewlet_snapshots key {node}, and snapshot_floor holds the trim ({}); register one every snapshot interval (_contract's snapshots)",
                a.generation,
                t.detail.as_deref().unwrap_or("too few counted nodes hold one")
            ));
        }
    }
    if let Some(t) = a.terms.iter().find(|t| t.term == TermName::BackupFloor) {
        if matches!(t.state, TermState::Value { seq: 0, .. }) {
            out.push(format!(
                "a backup of {s}: {}; until one is announced (a verified, completed manifest in crewlet_backups naming {s}) the trim waits for it",
                t.detail.as_deref().unwrap_or("no verified backup names it")
            ));
        }
    }
    out
}

/// The rows grouped by the node each belongs to (each row's node found
/// once), nodes in order: presence and snapshot keys, positions keys after
/// their stream, a backup manifest's `node`, a hold's `owner`.
pub fn by_node(rows: Vec<RowSeen>) -> std::collections::BTreeMap<String, Vec<RowSeen>> {
    let mut out: std::collections::BTreeMap<String, Vec<RowSeen>> = Default::default();
    for r in rows {
        if let Some(n) = node_of(&r) {
            out.entry(n).or_default().push(r);
        }
    }
    out
}

/// The node a row belongs to.
fn node_of(r: &RowSeen) -> Option<String> {
    match r.kind {
        Kind::Presence | Kind::Snapshot => Some(r.key.clone()),
        Kind::Position => r.key.split_once('.').map(|(_, n)| n.to_string()),
        Kind::BackupManifest | Kind::Hold => serde_json::from_slice::<serde_json::Value>(&r.value)
            .ok()
            .and_then(|v| {
                v.get(if r.kind == Kind::Hold {
                    "owner"
                } else {
                    "node"
                })
                .and_then(|n| n.as_str())
                .map(str::to_string)
            }),
        Kind::BackupAck => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_named_as_its_schema_and_judged_by_the_parser() {
        for k in Kind::ALL {
            assert_eq!(Kind::named(k.name()), Some(k));
        }
        assert_eq!(Kind::named("positions"), None);
        let row = serde_json::json!({"node": "p2", "stream": "LOG", "seq": 10.0, "generation": 0,
            "stream_created": "2026-11-02T10:00:00.418226517Z", "updated_at": "2026-12-06T10:00:00Z", "status": "ok"});
        let key = Kind::Position.key_of(&row).expect("a key");
        assert_eq!(key, "LOG.p2");
        assert_eq!(
            Kind::Position.judge(&key, row.to_string().as_bytes()),
            Ok(())
        );
        let mut bad = row.clone();
        bad["node"] = "p2\n".into();
        let e = Kind::Position
            .judge(&key, bad.to_string().as_bytes())
            .expect_err("refused");
        assert!(e.to_string().contains("node"), "{e}");
        assert_eq!(Kind::Hold.key_of(&serde_json::json!({"seq": 1})), None);
    }
}
