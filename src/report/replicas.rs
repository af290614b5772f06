//! PURE: the log's copies in status's words: each replica and named
//! consumer (the laggard first, at most ten lines), what is left out, and
//! what no sidecar can see.

use chrono::{DateTime, Utc};

use crate::floor::{Answer, ReplicaCopy, TermName};
use crate::human;

/// The limit status and validate name: copies they cannot see.
pub const INVISIBLE_COPIES: &str = "  note: a copy in another JetStream domain through an ephemeral consumer is invisible here and pins nothing (docs/contract.md, Protecting a mirror or source)\n";

/// How many copies status lists one per line before it counts the rest.
const REPLICA_LINES: usize = 10;

/// One copy as status lists it: what it confirmed, what it was delivered
/// beyond that (a copy whose answer is on its way is confirming, not
/// behind), when it last confirmed, and whether it is paused.
fn replica_line(r: &ReplicaCopy, now: DateTime<Utc>) -> String {
    let kind = if r.named { "named consumer" } else { "replica" };
    let ago = |t: crate::rows::Timestamp| {
        format!(
            "{} ({} ago)",
            human::clock(t.0, now),
            human::age(now.signed_duration_since(t.0).to_std().unwrap_or_default())
        )
    };
    let delivered = if r.delivered > r.confirmed {
        format!(", delivered up to {} (confirming)", r.delivered)
    } else {
        String::new()
    };
    let active = r
        .last_active
        .map_or(String::new(), |t| format!(", last confirmed {}", ago(t)));
    let paused = match (r.paused, r.paused_until) {
        (false, _) => String::new(),
        (true, Some(t)) => format!(", paused until {}", human::clock(t.0, now)),
        (true, None) => ", paused".into(),
    };
    let feeds = r
        .feeds
        .as_ref()
        .map_or(String::new(), |s| format!(" (feeds {s})"));
    format!(
        "  {kind} {}{feeds}: confirmed up to {}{delivered}{active}{paused}\n",
        r.consumer, r.confirmed
    )
}

/// The copies behind `replica_floor`, and what `replicas.ignore` leaves
/// out, said on every run (docs/trim-floor.md, Replicas); nothing where
/// the log has no replica term.
pub(super) fn replicas_text(a: &Answer, now: DateTime<Utc>) -> String {
    let Some(c) = a
        .terms
        .iter()
        .find(|t| t.term == TermName::ReplicaFloor)
        .and_then(|t| t.replicas.as_ref())
    else {
        return String::new();
    };
    let mut out = String::new();
    // The laggard first (what binds the trim), then the rest by how far
    // they have confirmed; at most ten lines, then a count: fifty copies
    // must not push the one that matters off the screen.
    let mut copies: Vec<&ReplicaCopy> = c.consumers.iter().collect();
    copies.sort_by(|a, b| {
        a.confirmed
            .cmp(&b.confirmed)
            .then_with(|| a.consumer.cmp(&b.consumer))
    });
    for r in copies.iter().take(REPLICA_LINES) {
        out.push_str(&replica_line(r, now));
    }
    if let Some(rest) = copies.get(REPLICA_LINES..).filter(|r| !r.is_empty()) {
        let least = rest.iter().map(|r| r.confirmed).min().unwrap_or_default();
        out.push_str(&format!(
            "  … and {} more cop{}, each confirmed up to {least} or further (status --json lists every one)\n",
            rest.len(),
            if rest.len() == 1 { "y" } else { "ies" }
        ));
    }
    // What no sidecar can check, said where copies are listed: a copy in
    // another JetStream domain through an ephemeral consumer.
    out.push_str(INVISIBLE_COPIES);
    if let Some(line) = ignored_line(a) {
        out.push_str(&line);
    }
    out
}

/// The replicas `replicas.ignore` leaves out, as one warning line; `None`
/// where it leaves none out.
pub fn ignored_line(a: &Answer) -> Option<String> {
    let c = a
        .terms
        .iter()
        .find(|t| t.term == TermName::ReplicaFloor)
        .and_then(|t| t.replicas.as_ref())?;
    (!c.ignored.is_empty()).then(|| {
        format!(
            "  warning: replicas left out by replicas.ignore (they pin nothing): {}\n",
            c.ignored.join(", ")
        )
    })
}
