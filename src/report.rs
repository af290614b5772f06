//! PURE: the retention answer in words. The one-sentence-per-domain prose
//! that `status` prints first, and the demo reuses.

use chrono::{DateTime, Utc};

use crate::floor::{Answer, NodeState, TermName, TermState};
use crate::human;

/// Is this domain trimming? (cli.md, `status`): not when NOT READY, in dry
/// run with something it would purge, or when this tick licenses no purge
/// while something holds it back.
pub fn is_trimming(a: &Answer) -> bool {
    if a.not_ready.is_some() || a.stream_error.is_some() {
        return false;
    }
    if a.dry_run && a.would_purge.is_some() {
        return false;
    }
    a.trim_to >= a.first_seq || a.blocked_by.is_empty()
}

/// The sentence for a domain that is not trimming, naming why and the
/// command that fixes it where there is one. `None` when it is trimming.
pub fn not_trimming(a: &Answer, now: DateTime<Utc>) -> Option<String> {
    if is_trimming(a) {
        return None;
    }
    if let Some(e) = &a.stream_error {
        return Some(format!(
            "Nothing is being trimmed on {}: the stream cannot be read ({e}).",
            a.domain
        ));
    }
    if let Some(why) = &a.not_ready {
        return Some(not_ready_sentence(a, why));
    }
    if a.dry_run {
        if let Some(w) = a.would_purge {
            return Some(format!(
                "DRY RUN {}: would purge {} records ({} to {}); set trim.enabled: true to act.",
                a.domain,
                human::count(w.records),
                w.first_seq,
                w.last_seq
            ));
        }
    }
    let first = a.blocked_by.first()?;
    Some(format!(
        "Nothing is being trimmed on {}: {}.",
        a.domain,
        blocked_reason(a, *first, now)
    ))
}

fn not_ready_sentence(a: &Answer, why: &str) -> String {
    if why.contains("recreated") {
        let live = a
            .live_stream_created
            .map(|c| c.to_string())
            .unwrap_or_else(|| "?".into());
        let old = a
            .stream_created
            .map(|c| c.to_string())
            .unwrap_or_else(|| "?".into());
        return format!(
            "NOT READY {}: {why} — the stream was created at {live}, the floor belongs to {old}; run: crewlet retention reanchor -stream {} -confirm {live}",
            a.domain, a.stream
        );
    }
    if why.contains("ahead_of_log") {
        let ahead: Vec<String> = a
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::AheadOfLog)
            .map(|n| format!("{} reports {}", n.node, n.seq.unwrap_or(0)))
            .collect();
        return format!(
            "NOT READY {}: {why} — {} but the log ends at {}; the log was restored or rebuilt, so nothing is trimmed until you decide which history to keep (see docs/runbook.md, ahead_of_log).",
            a.domain,
            ahead.join(", "),
            a.last_seq
        );
    }
    format!("NOT READY {}: {why}.", a.domain)
}

/// Why `term` holds the trim back, in words an on-call engineer acts on.
pub fn blocked_reason(a: &Answer, term: TermName, now: DateTime<Utc>) -> String {
    let Some(t) = a.terms.iter().find(|t| t.term == term) else {
        return term.as_str().to_string();
    };
    match &t.state {
        TermState::Unreadable { error } => format!("{} is unreadable: {error}", term.as_str()),
        TermState::Value { seq, reason } => {
            if term == TermName::Applied {
                if let Some(node) = t
                    .detail
                    .as_deref()
                    .and_then(|n| a.nodes.iter().find(|r| r.node == n))
                {
                    if !node.live {
                        let since = node
                            .updated_at
                            .map(|u| {
                                format!(
                                    ", last reported {} ago",
                                    human::age(
                                        now.signed_duration_since(u.0).to_std().unwrap_or_default()
                                    )
                                )
                            })
                            .unwrap_or_default();
                        return format!(
                            "{} is not live and pins applied at {seq}{since}; start it, or evict it: crewlet retention evict {} -confirm {}",
                            node.node, node.node, node.node
                        );
                    }
                    if let Some(r) = reason {
                        return r.clone();
                    }
                    return format!(
                        "{} has applied up to {seq} and pins applied there",
                        node.node
                    );
                }
            }
            match reason {
                Some(r) => r.clone(),
                None => match &t.detail {
                    Some(d) => format!("{} ({d}) permits deleting only up to {seq}", term.as_str()),
                    None => format!("{} permits deleting only up to {seq}", term.as_str()),
                },
            }
        }
        TermState::Unbounded | TermState::NotApplicable => term.as_str().to_string(),
    }
}
