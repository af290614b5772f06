//! PURE: the remedies the alarms print, each a sentence an on-call
//! engineer acts on, with the exact commands (docs/runbook.md, Alarms).

use chrono::{DateTime, Utc};

use super::types::{since, AlarmPolicy, REANCHOR_COST};
use crate::config::BackupPolicy;
use crate::floor::{Answer, Cause, GateFault, NodeState, NotReady, TermName, TermState};
use crate::human;

/// The command that announces a verified backup of `stream` (placeholders
/// for what only the backup job knows).
pub fn announce_command(stream: &str) -> String {
    format!("crewlet retention backup announce -node NODE -id ID -position {stream}=SEQ -verified")
}

pub(super) fn unreadable_remedy(a: &Answer, term: TermName, cause: Cause) -> String {
    match (cause, term) {
        (Cause::MissingBucket, _) => "create the missing bucket: crewlet retention init".into(),
        (Cause::AheadOfLog, _) => {
            "see the not_ready alarm: a node reports a position past the log's end".into()
        }
        (Cause::Unreachable, _) => "see broker_unreachable: nothing to do to the fleet's rows".into(),
        // A read that failed says nothing about the rows: never a reason to
        // evict or delete one.
        (Cause::Read, TermName::Applied | TermName::SnapshotFloor | TermName::MinHold | TermName::BackupFloor) => "the read is tried again every tick; if it keeps failing, check the broker (nats server check jetstream) and the bucket named above (nats kv ls lists those that answer)".into(),
        (_, TermName::Applied | TermName::SnapshotFloor) => "fix or remove the row named above (nats kv get/put), or evict its node; check the presence and positions buckets".into(),
        (_, TermName::MinHold) => "fix or release the hold named above (crewlet retention release)".into(),
        (_, TermName::BackupFloor) => "fix or delete the backup row named above".into(),
        (_, TermName::FeedAckFloor) => format!("check that the feed consumer exists on the stream (nats consumer ls {}) and the broker answers", a.stream),
        (_, TermName::AgeFloor) => format!("check that the stream exists and the broker answers (nats stream info {})", a.stream),
        (Cause::Archive, TermName::ArchiveFloor) => format!("segments the archive had published are gone from its store: restore them from a copy of the store (crewlet retention verify-archive -stream {} lists what is there); nothing is purged until they are back", a.stream),
        (_, TermName::ArchiveFloor) => format!("check the archive's store ({}) and the broker; crewlet retention verify-archive -stream {} reads every segment", a.archive.as_ref().map_or("", |s| s.store.as_str()), a.stream),
        (Cause::Orphaned, TermName::ReplicaFloor) => "see replica_unprotected: recreate the copy's consumer, or leave the copy out".into(),
        (_, TermName::ReplicaFloor) => replica_read_remedy(a),
    }
}

/// `replica_floor` unreadable: a named consumer missing (take it out of
/// the list, or create it), else the listing itself (what to check).
fn replica_read_remedy(a: &Answer) -> String {
    let missing = a.terms.iter().find_map(|t| match &t.state {
        TermState::Unreadable {
            cause: Cause::MissingNamed,
            ..
        } if t.term == TermName::ReplicaFloor => t.detail.as_deref(),
        _ => None,
    });
    match missing {
        Some(name) => format!(
            "consumer {name} is named in domains[].replicas.consumers but does not exist on {s}: create it (the system that reads through it makes it), or, if it is gone for good, take it out of replicas.consumers; nats consumer ls {s} lists what there is",
            s = a.stream
        ),
        None => format!(
            "the log's consumer listing is asked again every tick; if it keeps failing, check the broker (nats server check jetstream) and the log's consumers (nats consumer ls {})",
            a.stream
        ),
    }
}

/// The request that recreates the durable consumer a copy names, as the
/// NATS CLI sends it (`nats req`), with the settings docs/contract.md
/// gives a copy's consumer; delivering from the log's first record, of
/// which the copy stores only what it lacks. Or, for a copy gone for
/// good, leaving it out, with the preview.
pub fn recreate_consumer(log: &str, o: &crate::floor::OrphanedCopy) -> String {
    let subject = format!("$JS.API.CONSUMER.CREATE.{log}.{}", o.consumer);
    let body = serde_json::json!({
        "stream_name": log,
        "config": {
            "durable_name": o.consumer,
            "ack_policy": "flow_control",
            "flow_control": true,
            "idle_heartbeat": 1_000_000_000u64,
            "max_deliver": -1,
            "max_ack_pending": crate::floor::COPY_MAX_ACK_PENDING,
            "deliver_subject": o.deliver_subject,
            "deliver_policy": "all",
        }
    });
    format!(
        "recreate the consumer {} names: nats req {} {} (add the filter_subject it had, if it had one); if {} is gone for good, leave it out (domains[].replicas.ignore: [{}]; crewlet retention status --if-ignored {} previews it)",
        o.stream,
        human::shell_word(&subject),
        human::shell_word(&body.to_string()),
        o.stream,
        o.consumer,
        human::shell_word(&o.consumer),
    )
}

/// The configuration fields that differ, each with both values:
/// `min_age: 7d here, 3d in the row`.
pub(super) fn differing_fields(
    ours: &std::collections::BTreeMap<String, Option<String>>,
    theirs: &std::collections::BTreeMap<String, Option<String>>,
) -> String {
    let shown = |v: Option<&Option<String>>| match v {
        Some(Some(v)) => v.clone(),
        Some(None) => "not set".into(),
        None => "unknown".into(),
    };
    ours.keys()
        .chain(theirs.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| ours.get(*k) != theirs.get(*k) && theirs.contains_key(*k))
        .map(|k| {
            format!(
                "{k}: {} here, {} in the row",
                shown(ours.get(k)),
                shown(theirs.get(k))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What an operator can do about a node that pins a log, past starting it:
/// evict it (with the command) where an eviction can land, and not while
/// its eviction is already under way or where the log takes no gate
/// records.
pub fn evict_advice(a: &Answer, node: &crate::floor::NodeRow) -> String {
    if node.state == NodeState::Evicting {
        return "wait: its eviction has landed, and it stops being counted once the fence window passes"
            .into();
    }
    if a.gate_view.is_none() {
        return format!(
            "this log takes no gate records (domain {} has no gate_subject), so {} cannot be evicted from it; set a gate_subject to make eviction possible",
            a.domain, node.node
        );
    }
    format!(
        "if it is not coming back, evict it: crewlet retention evict {} -confirm {}",
        node.node, node.node
    )
}

pub(super) fn held_remedy(
    a: &Answer,
    p: &AlarmPolicy,
    binding: TermName,
    now: DateTime<Utc>,
) -> String {
    match binding {
        TermName::Applied => {
            let node = a.terms.iter().find(|t| t.term == TermName::Applied).and_then(|t| t.detail.clone());
            match node.and_then(|n| a.nodes.iter().find(|r| *r.node == *n)) {
                Some(row) if !row.live => {
                    let since_txt = row
                        .updated_at
                        .map(|u| format!(" and has not reported since {} ({} ago)", u, human::age(since(now, u))))
                        .unwrap_or_default();
                    format!(
                        "{} is not live{since_txt}; it pins applied at {}: start it, or {}",
                        row.node,
                        row.seq.unwrap_or(0),
                        evict_advice(a, row)
                    )
                }
                Some(row) if row.state == NodeState::LogDiverged => format!("{} reports log_diverged: rebuild it from a snapshot, or {}", row.node, evict_advice(a, row)),
                Some(row) if row.seq.is_none() => format!("{} is live but has not reported a position on {}: check that it applies this log", row.node, a.stream),
                Some(row) => format!("{} is live but its position is not advancing past {}: check its applier", row.node, row.seq.unwrap_or(0)),
                None => "a counted node pins applied: see the node table".into(),
            }
        }
        // The holds bucket cannot be read: no hold can be listed or
        // released until it can (term_unreadable says why).
        TermName::MinHold
            if a
                .terms
                .iter()
                .any(|t| t.term == TermName::MinHold && t.state_is_unreadable()) =>
        {
            "the holds bucket cannot be read (term_unreadable says why): a missing one is recreated by crewlet retention init, and the holds the floors row carries stay in force until they expire; nothing can be listed or released until then".into()
        }
        TermName::MinHold => {
            let detail = a.terms.iter().find(|t| t.term == TermName::MinHold).and_then(|t| t.detail.clone());
            // The term's detail is "<id> (<owner>)": the id is its first word.
            match detail.as_deref().and_then(|d| d.split_whitespace().next().map(|id| (d, id))) {
                Some((detail, id)) => format!(
                    "the hold {detail} pins the log: release it when its holder is done (crewlet retention release -stream {} {})",
                    a.stream,
                    human::shell_word(id)
                ),
                None => format!(
                    "a hold pins the log: see which (crewlet retention holds -stream {}) and release it when its holder is done",
                    a.stream
                ),
            }
        }
        // Under the operator policy the trim waits for an acknowledgement:
        // the one that would move it is up to what the other terms allow.
        TermName::BackupFloor if p.backup_floor == BackupPolicy::Operator => {
            let next = a
                .terms
                .iter()
                .filter(|t| t.term != TermName::BackupFloor)
                .filter_map(|t| t.seq())
                .min()
                .unwrap_or(a.last_seq)
                .min(a.last_seq);
            let who = p.backup_owner.as_deref().map(|o| format!("{o} acknowledges")).unwrap_or_else(|| "acknowledge".into());
            format!(
                "the acknowledged backup point holds the trim: once a copy of {} up to {next} is safe, {who} it (crewlet retention ack -stream {} -position {next})",
                a.stream, a.stream
            )
        }
        TermName::BackupFloor => match &p.backup_owner {
            Some(o) => format!("the backup point holds the trim: {o} takes and verifies a backup and announces it ({})", announce_command(&a.stream)),
            None => format!("the backup point holds the trim: take and verify a backup and announce it ({}); set retention.backup_owner to name who does", announce_command(&a.stream)),
        },
        TermName::SnapshotFloor => "too few counted nodes hold a verified snapshot: check the nodes' snapshot skip reasons (crewlet retention snapshots)".into(),
        TermName::FeedAckFloor => format!("the feed consumer on {} is not acknowledging: fix the feed", a.stream),
        TermName::AgeFloor => "nothing to do: min_age holds the trim".into(),
        TermName::ArchiveFloor => format!("the archive's fold is behind: see archive_failing if it fires; otherwise raise archive.fold_per_tick so that each tick folds more (crewlet retention verify-archive -stream {} shows what is archived)", a.stream),
        // Unreadable: the reason's own remedy (a named consumer missing,
        // a copy's consumer gone, the listing), never a copy's link.
        TermName::ReplicaFloor
            if a
                .terms
                .iter()
                .any(|t| t.term == TermName::ReplicaFloor && t.state_is_unreadable()) =>
        {
            match a.orphaned_copies.first() {
                Some(o) => recreate_consumer(&a.stream, o),
                None => replica_read_remedy(a),
            }
        }
        TermName::ReplicaFloor => {
            let who = a.terms.iter().find(|t| t.term == TermName::ReplicaFloor).and_then(|t| t.detail.clone()).unwrap_or_default();
            let named = a
                .terms
                .iter()
                .filter_map(|t| t.replicas.as_ref())
                .flat_map(|c| c.consumers.iter())
                .any(|c| c.consumer == who && c.named);
            if named {
                format!("consumer {who} (named in replicas.consumers) has not acknowledged the records: check the system that reads through it (nats consumer info {} {who}); if it is gone for good, take it out of replicas.consumers", a.stream)
            } else {
                format!("the copy through consumer {who} has not stored the records: check its link (nats consumer info {} {who}); if the copy is gone for good, leave it out (domains[].replicas.ignore: [{who}]) or delete its consumer", a.stream)
            }
        }
    }
}

pub(super) fn archive_remedy(a: &Answer, store: &str) -> String {
    let check = match store.split_once(':') {
        Some(("object_store", b)) => format!("check the object store {b} (nats object info {b}: does it exist, is its stream full or at a limit?)"),
        Some(("dir", d)) => format!("check the directory {d} (free space, permissions, the mount)"),
        _ => "check the archive's store".into(),
    };
    format!(
        "{check}; the next tick retries from the frontier; crewlet retention verify-archive -stream {} reads every segment and names the bad one",
        a.stream
    )
}

pub(super) fn gates_remedy(a: &Answer, fault: &GateFault, bucket: &str) -> String {
    match fault {
        GateFault::BucketUnreadable { .. } => {
            format!("check that the gates bucket {bucket} exists and the broker answers (crewlet retention init creates it)")
        }
        GateFault::CursorMalformed { key, .. } => format!(
            "delete the malformed row so that the view is rebuilt from the log: nats kv del {bucket} {key}"
        ),
        GateFault::CursorPastLog { .. } => format!(
            "the log ends before the view's cursor, so it was restored: open a new generation (crewlet retention reanchor -stream {}), which starts a fresh view",
            a.stream
        ),
        GateFault::AbsorbFailed { .. } => format!(
            "the error names what failed; check the gates bucket {bucket} and the gate records on {} (the duty holder logs gates_unabsorbed each tick)",
            a.stream
        ),
    }
}

/// The way out of `memory_lost` (docs/runbook.md, not_ready): the nodes
/// and live holds the buckets hold now, the preview of adopting exactly
/// these, and the confirmed `adopt` (after `init` where the floors bucket
/// itself is gone: `adopt` writes the log's first row into it).
pub fn memory_lost_remedy(a: &Answer, lost: &crate::floor::memory::Lost) -> String {
    let nodes: Vec<String> = a
        .nodes
        .iter()
        .map(|n| match n.seq {
            Some(seq) => format!("{} at {seq}", n.node),
            None => n.node.to_string(),
        })
        .collect();
    let holds: Vec<String> = a
        .live_holds
        .iter()
        .map(|(id, seq)| format!("{id} at {seq}"))
        .collect();
    let seen = format!(
        "nodes seen now: {}; live holds seen now: {}",
        if nodes.is_empty() {
            "none".to_string()
        } else {
            nodes.join(", ")
        },
        if holds.is_empty() {
            "none".to_string()
        } else {
            holds.join(", ")
        }
    );
    let init = if matches!(lost, crate::floor::memory::Lost::FloorsMissing) {
        "recreate the floors bucket (crewlet retention init), then "
    } else {
        ""
    };
    let adopt = match a.stream_created {
        Some(c) => format!("crewlet retention adopt -stream {} -confirm {c}", a.stream),
        None => format!(
            "crewlet retention adopt -stream {} (it prints the -confirm to give)",
            a.stream
        ),
    };
    format!(
        "a node or hold the lost memory kept but no bucket shows now is no longer protected once adopted ({seen}); if every pin still needed is among them (or restored into its bucket), preview: crewlet retention status --if-adopted {}; then {init}adopt: {adopt}",
        a.stream
    )
}

pub(super) fn not_ready_remedy(a: &Answer) -> String {
    match &a.not_ready {
        Some(NotReady::Recreated) => match a.live_stream_created {
            Some(c) => format!("if the new stream is the one to keep: crewlet retention reanchor -stream {} -confirm {c} ({REANCHOR_COST})", a.stream),
            None => format!("run crewlet retention reanchor -stream {} to see the live stream's created", a.stream),
        },
        Some(NotReady::AheadOfLog) => {
            let ahead: Vec<String> = a.nodes.iter().filter(|r| r.state == NodeState::AheadOfLog).map(|r| format!("{} at {}", r.node, r.seq.unwrap_or(0))).collect();
            format!(
                "the log ends at {} but {} report(s) past it: the log was restored or rebuilt; decide which history to keep before anything is trimmed (reanchor, or rebuild the nodes)",
                a.last_seq,
                ahead.join(", ")
            )
        }
        Some(NotReady::FloorUnreadable { row: false, .. }) => "the read is tried again every tick; if it keeps failing, check the broker (nats server check jetstream) and the floors bucket (nats kv ls lists the buckets that answer); nothing to do to the rows".into(),
        Some(NotReady::FloorUnreadable { .. }) => format!(
            "a tick never overwrites an unreadable floors row; replace it with a new generation: crewlet retention reanchor -stream {} (prints the -confirm to give)",
            a.stream
        ),
        Some(NotReady::GenerationUnknown { highest }) => match a.stream_created {
            Some(c) => format!(
                "the floors row was lost; open the generation after {highest}: crewlet retention reanchor -stream {} -confirm {c} ({REANCHOR_COST})",
                a.stream
            ),
            None => format!(
                "the floors row was lost; run crewlet retention reanchor -stream {} to see the -confirm that opens the generation after {highest}",
                a.stream
            ),
        },
        Some(NotReady::MemoryLost { lost, .. }) => memory_lost_remedy(a, lost),
        None => "see the status of this domain".into(),
    }
}
