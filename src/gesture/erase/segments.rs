//! The archive's side of an erasure: waiting until no fold is in flight,
//! and rewriting each segment without the subject, counted in the
//! erasure's row as it goes.

use super::*;

/// Waits, on an archived domain, until a fold that read the live log
/// before the purge has written its segments: a floors row published after
/// the purge, or the duty holder's `_tick` written after it (a tick folds
/// before it publishes, and writes `_tick` last; a quiet log's row is not
/// rewritten). No duty holder: no fold in flight.
/// A key as its bucket's leader has it (docs/trim-floor.md, Proven
/// current): a replica behind could show no lease, or an old row, and let
/// the erasure rewrite the archive while a fold is still writing it. A
/// missing bucket is no key.
pub(super) async fn leader_entry(
    broker: &Broker,
    bucket: &str,
    key: &str,
) -> Result<Option<crate::broker::kv::KvEntry>, String> {
    match broker.kv_entry_proven(bucket, key).await {
        Ok(e) => Ok(e.into_inner()),
        Err(crate::broker::kv::LeaderReadError::BucketMissing { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

pub(super) async fn settle(config: &Config, broker: &Broker, stream: &str) -> Result<(), String> {
    let held = leader_entry(broker, &config.buckets.duty, crate::rows::DUTY_KEY)
        .await
        .map_err(|e| format!("reading the duty lease: {e}"))?;
    if held.is_none() {
        return Ok(());
    }
    let revision = |e: Option<crate::broker::kv::KvEntry>| e.map_or(0, |e| e.revision);
    let before = revision(
        leader_entry(broker, &config.buckets.floors, stream)
            .await
            .map_err(|e| format!("reading the floors row: {e}"))?,
    );
    let tick_before = revision(
        leader_entry(broker, &config.buckets.floors, crate::rows::TICK_KEY)
            .await
            .map_err(|e| format!("reading the duty holder's tick: {e}"))?,
    );
    let wait = config.retention.tick.0 * 3 + std::time::Duration::from_secs(5);
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if let Ok(e) = leader_entry(broker, &config.buckets.floors, stream).await {
            if revision(e) > before {
                return Ok(());
            }
        }
        if let Ok(e) = leader_entry(broker, &config.buckets.floors, crate::rows::TICK_KEY).await {
            if revision(e) > tick_before {
                return Ok(());
            }
        }
    }
    Err(format!(
        "the duty holder published nothing within {} after the live purge, so a fold in flight could still write the erased records into the archive; the archive was not rewritten yet",
        crate::config::Dur(wait)
    ))
}

/// Rewrites one segment without `subject`, if it holds any: the row marks
/// it pending (with the count) first, the new segment is put in its place
/// and read back, then the row counts it.
pub(super) async fn rewrite(
    broker: &Broker,
    store: &crate::archive::fold::Store,
    name: &str,
    subject: &str,
    op: &OpId,
    row: &mut ErasureRow,
    saver: &Saver<'_>,
) -> Result<(), String> {
    let bytes = store.get(broker, name).await?;
    let seg = segment::decode(&bytes).map_err(|e| format!("segment {name}: {e}"))?;
    let kept: Vec<segment::Record> = seg
        .records
        .iter()
        .filter(|r| r.subject != subject)
        .cloned()
        .collect();
    let removed = (seg.records.len() - kept.len()) as u64;
    if removed == 0 {
        // Rewritten by an earlier attempt that stopped before counting it.
        if row.pending.as_ref().is_some_and(|p| p.segment == name) {
            let p = row.pending.take().unwrap_or(Pending {
                segment: name.to_string(),
                records: 0,
            });
            row.archived_records += p.records;
            row.segments_rewritten += 1;
            saver.save(row).await?;
        }
        return Ok(());
    }
    row.pending = Some(Pending {
        segment: name.to_string(),
        records: removed,
    });
    saver.save(row).await?;
    let h = &seg.header;
    let range = segment::Range {
        stream: h.stream.clone(),
        generation: h.generation,
        stream_created: h.stream_created.clone(),
        first_seq: h.first_seq,
        last_seq: h.last_seq,
    };
    let new = segment::encode(&range, &kept, h.compression)
        .map_err(|e| format!("segment {name}: {e}"))?;
    store.replace(broker, name, &new, op.as_str()).await?;
    // Between a rewrite and its count (the crash test stops here).
    crate::failpoint::failpoint("erase_after_rewrite").await;
    let back = segment::decode(&store.get(broker, name).await?)
        .map_err(|e| format!("segment {name} after its rewrite: {e}"))?;
    if back.records != kept
        || (back.header.first_seq, back.header.last_seq) != (h.first_seq, h.last_seq)
    {
        return Err(format!("segment {name} did not read back as rewritten"));
    }
    row.pending = None;
    row.archived_records += removed;
    row.segments_rewritten += 1;
    saver.save(row).await
}
