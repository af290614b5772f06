//! The merge read (docs/archive-format.md, Reading: archive ∪ live): one
//! sequence-ordered stream of records from `from` on, those below the live
//! log's `first_seq` from the archive's segments, the rest from the log,
//! with no gap and no overlap at the seam. `crewlet retention read` and the
//! HTTP records route both read through here.

use super::fold::{self, Store, Target};
use super::segment::Record;
use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::rows::Timestamp;

/// The most records one read returns.
pub const MAX_LIMIT: usize = 10_000;

/// What a merge read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// In sequence order; `from_archive` says where each came from.
    pub records: Vec<(Record, bool)>,
    /// Where the next read starts.
    pub next: u64,
    /// The first sequence anything can be read from.
    pub first_readable: u64,
    /// The live log's `first_seq` and `last_seq` as read.
    pub first_seq: u64,
    pub last_seq: u64,
}

/// Why a merge read did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// The start is below everything readable (exit 1; HTTP 410).
    #[error("trimmed: the first readable sequence is {first_readable}")]
    Trimmed { first_readable: u64 },
    /// Bad input (exit 2; HTTP 400).
    #[error("{0}")]
    Input(String),
    /// A segment that does not verify (exit 1).
    #[error("{0}")]
    Archive(String),
    /// The broker or the store did not answer (exit 3).
    #[error("{0}")]
    Unreachable(String),
}

/// Checks the input before anything is read.
pub fn check_input(from: Option<u64>, limit: usize) -> Result<(), MergeError> {
    if from == Some(0) {
        return Err(MergeError::Input(
            "--from 0 is not a sequence: sequences start at 1".into(),
        ));
    }
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(MergeError::Input(format!(
            "--limit {limit} is out of range; allowed: 1 to {MAX_LIMIT}"
        )));
    }
    Ok(())
}

/// The target an archived domain's segments belong to now: the live
/// stream's generation (from its floors row) and incarnation.
pub async fn target_of(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    live_created: Timestamp,
) -> Result<Target, MergeError> {
    let row = broker
        .kv_entry(&config.buckets.floors, &domain.stream)
        .await
        .map_err(|e| MergeError::Unreachable(e.to_string()))?;
    let generation = match row {
        None => 0,
        Some(e) => {
            crate::floor::PublishedFloor::parse(&domain.stream, &e.value)
                .map_err(|e| MergeError::Archive(format!("the floors row cannot be read: {e}")))?
                .generation
        }
    };
    Ok(Target {
        stream: domain.stream.clone(),
        generation,
        stream_created: live_created.to_rfc3339(),
    })
}

/// Reads up to `limit` records from `from` (default: the first readable),
/// archive first, then the live log. `clamp` starts a read below
/// everything readable at the first readable record instead of refusing.
pub async fn read(
    broker: &Broker,
    config: &Config,
    domain: &Domain,
    from: Option<u64>,
    limit: usize,
    clamp: bool,
) -> Result<Merged, MergeError> {
    check_input(from, limit)?;
    let live = broker
        .stream_state(&domain.stream)
        .await
        .map_err(|e| MergeError::Unreachable(e.to_string()))?;
    let archive = match &domain.archive {
        None => None,
        Some(a) => {
            let store = a.store();
            let target = target_of(broker, config, domain, live.created).await?;
            let listing = store
                .list(broker, &target.stream, target.generation)
                .await
                .map_err(|e| MergeError::Unreachable(e.message))?;
            Some((store, target, listing))
        }
    };
    let archived_from = archive
        .as_ref()
        .and_then(|(_, _, l)| l.first().map(|s| s.first_seq));
    let first_readable = archived_from.map_or(live.first_seq, |a| a.min(live.first_seq));
    let start = match from {
        None => first_readable,
        Some(n) if n >= first_readable => n,
        Some(_) if clamp => first_readable,
        Some(_) => return Err(MergeError::Trimmed { first_readable }),
    };
    let mut out: Vec<(Record, bool)> = Vec::new();
    if let Some((store, target, listing)) = &archive {
        if start < live.first_seq {
            let got = from_archive(
                broker,
                store,
                target,
                listing,
                start,
                live.first_seq - 1,
                limit,
            )
            .await?;
            out.extend(got.into_iter().map(|r| (r, true)));
        }
    }
    if out.len() < limit && live.last_seq >= start.max(live.first_seq) {
        let from_live = start.max(live.first_seq);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        let got = broker
            .read_slice(
                &domain.stream,
                from_live,
                live.last_seq,
                (limit - out.len(), usize::MAX),
                deadline,
            )
            .await
            .map_err(|e| MergeError::Unreachable(e.to_string()))?;
        // A purge between the stream info and this read moved the seam
        // up: the records it took are in the archive (the purge never
        // passes the frontier), so the seam is filled from there.
        if let (Some((store, target, _)), Some(first_live)) = (&archive, got.first().map(|r| r.seq))
        {
            if first_live > from_live {
                let listing = store
                    .list(broker, &target.stream, target.generation)
                    .await
                    .map_err(|e| MergeError::Unreachable(e.message))?;
                let fill = from_archive(
                    broker,
                    store,
                    target,
                    &listing,
                    from_live,
                    first_live - 1,
                    limit - out.len(),
                )
                .await?;
                out.extend(fill.into_iter().map(|r| (r, true)));
            }
        }
        let room = limit.saturating_sub(out.len());
        out.extend(got.into_iter().take(room).map(|r| (r, false)));
    }
    let next = out.last().map_or(start, |(r, _)| r.seq + 1);
    Ok(Merged {
        records: out,
        next,
        first_readable,
        first_seq: live.first_seq,
        last_seq: live.last_seq,
    })
}

/// The archived records in `lo..=hi`, at most `limit`, each segment
/// verified as it is read.
async fn from_archive(
    broker: &Broker,
    store: &Store,
    target: &Target,
    listing: &[super::state::Listed],
    lo: u64,
    hi: u64,
    limit: usize,
) -> Result<Vec<Record>, MergeError> {
    let mut out = Vec::new();
    for s in listing
        .iter()
        .filter(|s| s.last_seq >= lo && s.first_seq <= hi)
    {
        let seg = fold::verify(broker, store, target, &s.name).await.map_err(|e| {
            MergeError::Archive(format!(
                "segment {} does not verify: {e} (crewlet retention verify-archive -stream {} checks every segment)",
                s.name, target.stream
            ))
        })?;
        for r in seg
            .records
            .into_iter()
            .filter(|r| (lo..=hi).contains(&r.seq))
        {
            out.push(r);
            if out.len() >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// A NATS header block as (name, value) pairs in block order.
pub fn header_pairs(block: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(block);
    text.split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// A record as `read --json` and the records route print it: `seq`,
/// `time`, `subject`, `headers` (name → values), `data` (base64) and
/// `source` (`archive` or `log`).
pub fn record_json(r: &Record, archived: bool) -> serde_json::Value {
    use base64::Engine;
    let mut headers = serde_json::Map::new();
    for (k, v) in header_pairs(&r.headers) {
        if let Some(list) = headers
            .entry(k)
            .or_insert_with(|| serde_json::json!([]))
            .as_array_mut()
        {
            list.push(serde_json::json!(v));
        }
    }
    serde_json::json!({
        "seq": r.seq,
        "time": time_of(r),
        "subject": r.subject,
        "headers": headers,
        "data": base64::engine::general_purpose::STANDARD.encode(&r.data),
        "source": if archived { "archive" } else { "log" },
    })
}

/// A record's broker time, RFC 3339 with nanoseconds.
pub fn time_of(r: &Record) -> String {
    Timestamp(chrono::DateTime::from_timestamp_nanos(r.time_ns)).to_rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_named() {
        assert!(
            matches!(check_input(Some(0), 10), Err(MergeError::Input(m)) if m.contains("start at 1"))
        );
        assert!(
            matches!(check_input(None, 0), Err(MergeError::Input(m)) if m.contains("1 to 10000"))
        );
        assert!(check_input(None, MAX_LIMIT + 1).is_err());
        assert!(check_input(Some(1), 1).is_ok());
    }

    #[test]
    fn header_blocks_read_back_as_pairs() {
        let block = b"NATS/1.0\r\nA: 1\r\nA: 2\r\nNats-Msg-Id: m1\r\n\r\n";
        assert_eq!(
            header_pairs(block),
            [
                ("A".into(), "1".into()),
                ("A".into(), "2".into()),
                ("Nats-Msg-Id".into(), "m1".into())
            ]
        );
        assert!(header_pairs(b"").is_empty());
    }
}
