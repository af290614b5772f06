//! PURE: the sidecar's memory of a log (docs/trim-floor.md, The sidecar's
//! memory): membership, not positions. Every published answer remembers
//! the name of each node in its counted set (live or not, with a row or
//! without one) and each live hold's id and expiry, plus the `applied`
//! and `min_hold` values it stood on. A member missing from a bucket found
//! recreated keeps its pin: a node counts at the remembered `applied`, a
//! hold pins at the remembered `min_hold` + 1 until its expiry.
//!
//! The membership lives in keys `_members.<stream>.<n>` of the floors
//! bucket, written only when it changes; the floors row carries only its
//! [`MemoryRecord`] (counts, the number of keys, a digest), so the row
//! stays small whatever the fleet.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

use crate::rows::{Timestamp, Unreadable};

/// The format of the rows this release writes (the floors row, `_members`
/// keys). A row without `format` is the previous release's (1: it carried
/// `pins`).
pub const FORMAT: u32 = crate::rows::FORMAT;

/// `_members.<stream>.<n>`: the keys that hold a log's membership.
pub const MEMBERS_PREFIX: &str = "_members.";

/// The most bytes a `_members` value is filled to before the next key is
/// started: well under the 256 KiB the contract allows each, and under any
/// broker's `max_payload`.
pub const CHUNK_BYTES: usize = 192 * 1024;

/// The key of chunk `n` of `stream`'s membership.
pub fn members_key(stream: &str, n: u32) -> String {
    format!("{MEMBERS_PREFIX}{stream}.{n}")
}

/// A `_members` key's stream and chunk number.
pub fn parse_members_key(key: &str) -> Option<(&str, u32)> {
    let rest = key.strip_prefix(MEMBERS_PREFIX)?;
    let (stream, n) = rest.rsplit_once('.')?;
    Some((stream, n.parse().ok()?))
}

/// What the floors row carries under `memory`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Nodes remembered (carried ones included).
    pub members: u64,
    /// Holds remembered (carried ones included).
    pub holds: u64,
    /// Members and holds kept only by the memory (carried).
    pub carried: u64,
    /// How many `_members` keys hold the membership.
    pub keys: u32,
    /// A digest of the whole membership (32 hex digits of SHA-256 over its
    /// canonical lines), to tell the keys read back are the ones meant.
    pub digest: String,
    /// The `created` time of each node-written bucket read, by role.
    pub buckets: BTreeMap<String, Timestamp>,
    /// The last `applied` value read (kept through unreadable ticks).
    pub applied: Option<u64>,
    /// The last `min_hold` value read (kept through unreadable ticks).
    pub min_hold: Option<u64>,
}

/// A remembered hold: its expiry, and whether only the memory keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldMember {
    pub expires_at: Timestamp,
    pub carried: bool,
    /// A readmission's join hold: carried, it pins until its readmission
    /// is absorbed, past its `expires_at` too (the duty holder can no
    /// longer extend a hold the bucket lost; docs/trim-floor.md, The
    /// sidecar's memory).
    pub until_absorbed: bool,
}

impl HoldMember {
    /// Whether the memory may still keep this hold at `now`: before its
    /// expiry, or a readmission's join hold (which, carried, pins until its
    /// readmission is absorbed: the tick decides that, and drops it from
    /// the membership once it is). What `holds` lists, what `release` may
    /// end and what `init` says carries over all ask this.
    pub fn kept_at(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        self.expires_at.0 > now || self.until_absorbed
    }
}

/// The membership: node → carried, hold id → its expiry and whether
/// carried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    pub nodes: BTreeMap<SmolStr, bool>,
    pub holds: BTreeMap<String, HoldMember>,
}

/// One `_members.<stream>.<n>` value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersChunk {
    pub format: u32,
    #[serde(default)]
    pub nodes: Vec<SmolStr>,
    /// Nodes kept only by the memory, until they report or are evicted.
    #[serde(default)]
    pub carried: Vec<SmolStr>,
    #[serde(default)]
    pub holds: Vec<ChunkHold>,
}

/// A hold as a `_members` value lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkHold {
    pub id: String,
    pub expires_at: Timestamp,
    #[serde(default)]
    pub carried: bool,
    /// Written only when set: a join hold, held until its readmission is
    /// absorbed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub until_absorbed: bool,
}

impl MembersChunk {
    pub fn parse(key: &str, value: &[u8]) -> Result<Self, Unreadable> {
        crate::rows::parse_json(key, value).map_err(|e| Unreadable(format!("floors {e}")))
    }
}

/// The digest and counts of a membership, fed in order: nodes by name,
/// then holds by id (as [`Membership`] iterates them).
pub struct Digester {
    hasher: sha2::Sha256,
    members: u64,
    holds: u64,
    carried: u64,
}

impl Default for Digester {
    fn default() -> Self {
        use sha2::Digest;
        Digester {
            hasher: sha2::Sha256::new(),
            members: 0,
            holds: 0,
            carried: 0,
        }
    }
}

impl Digester {
    pub fn node(&mut self, name: &str, carried: bool) {
        use sha2::Digest;
        self.hasher
            .update(if carried { b"c " as &[u8] } else { b"n " });
        self.hasher.update(name.as_bytes());
        self.hasher.update(b"\n");
        self.members += 1;
        self.carried += u64::from(carried);
    }

    pub fn hold(&mut self, id: &str, h: HoldMember) {
        use sha2::Digest;
        // A lapsed join hold's line differs (`j`, `J` carried); every other
        // hold's is as before, so a membership without one keeps its digest.
        let lead: &[u8] = match (h.carried, h.until_absorbed) {
            (false, false) => b"h ",
            (true, false) => b"C ",
            (false, true) => b"j ",
            (true, true) => b"J ",
        };
        self.hasher.update(lead);
        self.hasher.update(id.as_bytes());
        self.hasher.update(b" ");
        h.expires_at.with_text(|t| self.hasher.update(t.as_bytes()));
        self.hasher.update(b"\n");
        self.holds += 1;
        self.carried += u64::from(h.carried);
    }

    /// The record, less what the caller knows (keys, buckets, values).
    pub fn finish(self) -> MemoryRecord {
        use sha2::Digest;
        let d = self.hasher.finalize();
        MemoryRecord {
            members: self.members,
            holds: self.holds,
            carried: self.carried,
            digest: crate::human::hex(&d[..16]),
            ..Default::default()
        }
    }
}

impl Membership {
    /// Its digest and counts ([`Digester`]).
    pub fn record(&self) -> MemoryRecord {
        let mut d = Digester::default();
        for (n, c) in &self.nodes {
            d.node(n, *c);
        }
        for (id, h) in &self.holds {
            d.hold(id, *h);
        }
        d.finish()
    }

    /// The `_members` values, each under [`CHUNK_BYTES`] (one, empty, for an
    /// empty membership).
    pub fn chunks(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut chunk = MembersChunk {
            format: FORMAT,
            ..Default::default()
        };
        let mut size = 64;
        let mut flush = |chunk: &mut MembersChunk, size: &mut usize| {
            let done = std::mem::replace(
                chunk,
                MembersChunk {
                    format: FORMAT,
                    ..Default::default()
                },
            );
            out.push(serde_json::to_vec(&done).unwrap_or_default());
            *size = 64;
        };
        for (n, carried) in &self.nodes {
            let cost = n.len() + 4;
            if size + cost > CHUNK_BYTES {
                flush(&mut chunk, &mut size);
            }
            size += cost;
            if *carried {
                chunk.carried.push(n.clone());
            } else {
                chunk.nodes.push(n.clone());
            }
        }
        for (id, h) in &self.holds {
            let cost = id.len() + 96;
            if size + cost > CHUNK_BYTES {
                flush(&mut chunk, &mut size);
            }
            size += cost;
            chunk.holds.push(ChunkHold {
                id: id.clone(),
                expires_at: h.expires_at,
                carried: h.carried,
                until_absorbed: h.until_absorbed,
            });
        }
        flush(&mut chunk, &mut size);
        out
    }

    /// The membership the chunks of `record` hold, read back whole: every
    /// key `0..record.keys` present and parsed, and the digest the record
    /// names. Anything else is unreadable (docs/trim-floor.md, Where it
    /// lives, and what it costs).
    pub fn read_back(
        record: &MemoryRecord,
        chunk: impl Fn(u32) -> Option<Result<MembersChunk, Unreadable>>,
    ) -> Result<Membership, Unreadable> {
        let mut m = Membership::default();
        for n in 0..record.keys {
            let c = chunk(n)
                .ok_or_else(|| Unreadable(format!("the memory's key {n} is missing")))??;
            if c.format > FORMAT {
                return Err(Unreadable(format!(
                    "the memory's key {n} is of format {}, newer than {FORMAT}",
                    c.format
                )));
            }
            m.nodes.extend(c.nodes.into_iter().map(|n| (n, false)));
            m.nodes.extend(c.carried.into_iter().map(|n| (n, true)));
            m.holds.extend(c.holds.into_iter().map(|h| {
                (
                    h.id,
                    HoldMember {
                        expires_at: h.expires_at,
                        carried: h.carried,
                        until_absorbed: h.until_absorbed,
                    },
                )
            }));
        }
        let back = m.record();
        if back.digest != record.digest {
            return Err(Unreadable(format!(
                "the memory's keys read back to digest {}, the row names {}",
                back.digest, record.digest
            )));
        }
        Ok(m)
    }
}

/// The memory as the next answer reads it back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remembered {
    pub buckets: BTreeMap<String, Timestamp>,
    pub membership: Membership,
    pub applied: Option<u64>,
    pub min_hold: Option<u64>,
}

impl Remembered {
    /// The memory of a row of the previous release, which carried `pins`
    /// (each counted node's position, each live hold's): its members and
    /// holds, carried where a pin was read from an earlier bucket than the
    /// one its row recorded, at the lowest position and the lowest hold it
    /// names (at or below each pin: never above what a pin needed).
    pub fn from_pins(p: &super::carried::PinsRecord) -> Remembered {
        let carried = |role: &str, from: Timestamp| p.buckets.get(role) != Some(&from);
        Remembered {
            buckets: p.buckets.clone(),
            membership: Membership {
                nodes: p
                    .nodes
                    .iter()
                    .map(|(n, pin)| (n.clone(), carried("positions", pin.bucket_created)))
                    .collect(),
                holds: p
                    .holds
                    .iter()
                    .map(|(id, h)| {
                        (
                            id.clone(),
                            HoldMember {
                                expires_at: h.expires_at,
                                carried: carried("holds", h.bucket_created),
                                until_absorbed: false,
                            },
                        )
                    })
                    .collect(),
            },
            applied: p.nodes.values().map(|n| n.seq).min(),
            min_hold: p.holds.values().map(|h| h.seq.saturating_sub(1)).min(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remembered hold is kept until its expiry, and a readmission's
    /// join hold past it too (the tick drops it once its readmission is
    /// absorbed): what `holds`, `release` and `init` all ask.
    #[test]
    fn a_join_hold_is_kept_past_its_expiry_and_any_other_until_it() {
        let now = at("2026-12-06T01:00:00Z");
        let h = |expires: &str, until_absorbed| HoldMember {
            expires_at: at(expires),
            carried: true,
            until_absorbed,
        };
        assert!(h("2026-12-06T02:00:00Z", false).kept_at(now.0));
        assert!(!h("2026-12-06T00:00:00Z", false).kept_at(now.0));
        assert!(h("2026-12-06T00:00:00Z", true).kept_at(now.0));
    }

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).expect("instant")
    }

    fn fleet(nodes: usize) -> Membership {
        let mut m = Membership::default();
        for i in 0..nodes {
            m.nodes.insert(format!("node-{i:06}").into(), i % 7 == 0);
        }
        m.holds.insert(
            "nightly".into(),
            HoldMember {
                expires_at: at("2026-12-06T02:00:00Z"),
                carried: false,
                until_absorbed: false,
            },
        );
        m
    }

    /// A membership of any size reads back whole from its chunks, each
    /// under the contract's 256 KiB; a chunk missing or changed is
    /// unreadable, never a smaller membership.
    #[test]
    fn a_membership_of_any_size_reads_back_whole_or_not_at_all() {
        for size in [0, 3, 100_000] {
            let m = fleet(size);
            let chunks = m.chunks();
            assert!(chunks.iter().all(|c| c.len() < 256 * 1024), "{size}");
            let mut record = m.record();
            record.keys = u32::try_from(chunks.len()).expect("keys");
            let parsed: Vec<MembersChunk> = chunks
                .iter()
                .map(|c| MembersChunk::parse("k", c).expect("chunk"))
                .collect();
            let back = Membership::read_back(&record, |n| parsed.get(n as usize).cloned().map(Ok))
                .expect("whole");
            assert_eq!(back, m, "{size}");
            if chunks.len() > 1 {
                let missing = Membership::read_back(&record, |n| {
                    (n != 1)
                        .then(|| parsed.get(n as usize).cloned().map(Ok))
                        .flatten()
                });
                assert!(missing.is_err(), "a key missing");
            }
            let mut other = m.clone();
            other.nodes.insert("intruder".into(), false);
            let stale = other.chunks();
            let stale: Vec<MembersChunk> = stale
                .iter()
                .map(|c| MembersChunk::parse("k", c).expect("chunk"))
                .collect();
            let mut r2 = record.clone();
            r2.keys = u32::try_from(stale.len()).expect("keys");
            assert!(
                Membership::read_back(&r2, |n| stale.get(n as usize).cloned().map(Ok)).is_err(),
                "the digest differs"
            );
        }
    }

    #[test]
    fn the_digest_changes_with_membership_and_carried_and_nothing_else() {
        let m = fleet(10);
        let mut carried = m.clone();
        carried.nodes.insert("node-000001".into(), true);
        assert_ne!(m.record().digest, carried.record().digest);
        let mut later = m.clone();
        if let Some(h) = later.holds.get_mut("nightly") {
            h.expires_at = at("2026-12-06T03:00:00Z");
        }
        assert_ne!(m.record().digest, later.record().digest);
        assert_eq!(m.record(), m.clone().record());
    }

    #[test]
    fn members_keys_name_their_stream_and_chunk() {
        assert_eq!(members_key("LOG_A", 3), "_members.LOG_A.3");
        assert_eq!(parse_members_key("_members.LOG_A.3"), Some(("LOG_A", 3)));
        assert_eq!(parse_members_key("_members.LOG_A.x"), None);
        assert_eq!(parse_members_key("LOG_A"), None);
    }
}
