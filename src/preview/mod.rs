//! What a gesture would change before it is made (docs/runbook.md,
//! Previews). No IO: it sits with the gestures (docs/architecture.md,
//! Layers) because it takes their own judgements and refusals, and
//! works on rows and reads the caller made. `crewlet retention status --if-evicted NODE --if-released
//! HOLD_ID --if-acked STREAM=SEQ --if-readmitted NODE` and `GET
//! /v1/retention?if_evicted=…` apply the gestures to the rows status read,
//! in memory only, compute the answer again (`tick::compute_each`, as the
//! tick does), and say per domain the trim as it is and as it would be.
//!
//! Each gesture is applied as its effect stands once it has landed and
//! its fence window has passed: an eviction is a gate row past the window
//! (the node no longer counted), a readmission the node counted again, a
//! release the hold gone, an acknowledgement the backup point moved. The
//! refusals are the real gestures' own, judged on the same rows.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::Config;
use crate::exit::{Class, Outcome};
use crate::floor::{self, Answer, DomainRead, ParsedRows, TermName};
use crate::gate::{Presence, Refusal};
use crate::gesture::evict;
use crate::rows::{AckRow, GateRow, GateSign, GateState, Timestamp};

/// The gestures to preview, any combination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ask {
    pub evict: Vec<String>,
    pub release: Vec<String>,
    /// (stream, position) pairs.
    pub ack: Vec<(String, u64)>,
    pub readmit: Vec<String>,
    /// Replicas or named consumers left out (`replicas.ignore`, or their
    /// consumer deleted).
    pub ignore: Vec<String>,
    /// Logs (streams) adopted afresh after a lost memory
    /// (`crewlet retention adopt`).
    pub adopt: Vec<String>,
    /// As `evict -force`: past a live lease, or a node never seen.
    pub force: bool,
}

impl Ask {
    pub fn is_empty(&self) -> bool {
        self.evict.is_empty()
            && self.release.is_empty()
            && self.ack.is_empty()
            && self.readmit.is_empty()
            && self.ignore.is_empty()
            && self.adopt.is_empty()
    }

    /// The gestures in words: "evicting node-3 and releasing hold h1".
    pub fn words(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.evict.is_empty() {
            parts.push(format!("evicting {}", self.evict.join(", ")));
        }
        if !self.readmit.is_empty() {
            parts.push(format!("readmitting {}", self.readmit.join(", ")));
        }
        for id in &self.release {
            parts.push(format!("releasing hold {id}"));
        }
        for (stream, seq) in &self.ack {
            parts.push(format!("acknowledging {stream} up to {seq}"));
        }
        // One phrase for every replica left out: "leaving out replicas a,
        // b and c", not a phrase per name.
        match self.ignore.as_slice() {
            [] => {}
            [one] => parts.push(format!("leaving out replica {one}")),
            many => parts.push(format!("leaving out replicas {}", crate::human::list(many))),
        }
        for stream in &self.adopt {
            parts.push(format!("adopting {stream} afresh"));
        }
        crate::human::list(&parts)
    }
}

/// `STREAM=SEQ`, as `--if-acked` and `if_acked` take it.
pub fn parse_ack(text: &str) -> Result<(String, u64), String> {
    let (stream, seq) = text.split_once('=').ok_or_else(|| {
        format!("{text:?} is not STREAM=SEQ (for example CREWLET_TRACKER_LOG=1200)")
    })?;
    crate::rows::check_stream_name(stream).map_err(|e| format!("{text:?}: the stream {e}"))?;
    let seq = seq
        .parse::<u64>()
        .map_err(|_| format!("{text:?}: SEQ must be a whole number, not {seq:?}"))?;
    Ok((stream.to_string(), seq))
}

/// Why a preview was refused: the refusal the real gesture would give, or
/// input that names nothing (the flag it came in).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("--if-evicted {node}: {}", .refusal.words(crate::human::Surface::Preview))]
    Evict { node: String, refusal: Refusal },
    #[error("--if-readmitted {node}: {}", .refusal.words(crate::human::Surface::Preview))]
    Readmit { node: String, refusal: Refusal },
    #[error("--if-evicted, --if-readmitted: no domain has a gate_subject, so no log takes gate records; there is nothing to preview")]
    NoGatedLog,
    #[error("--if-released {0}: no hold of that id on any configured log (crewlet retention holds lists them)")]
    UnknownHold(String),
    #[error("--if-acked {0}: not the stream of any configured domain")]
    UnknownStream(String),
    #[error("--if-ignored {0}: no replica or named consumer of that name on any configured log (status lists them under each log's terms)")]
    UnknownReplica(String),
    #[error("--if-adopted {0}: not the stream of any configured domain")]
    UnknownAdopt(String),
    #[error("--if-adopted {0}: the log has not lost the sidecar's memory, so adopt would refuse (memory_intact)")]
    MemoryIntact(String),
    #[error("--if-acked {stream}={seq}: {error}")]
    Ack {
        stream: String,
        seq: u64,
        error: crate::gesture::ack::AckError,
    },
    #[error("--if-acked {stream}={seq}: the stream cannot be read ({error}), so the acknowledgement cannot be judged")]
    AckUnjudged {
        stream: String,
        seq: u64,
        error: String,
    },
}

impl Refused {
    /// The code of the refusal, as the real gesture's.
    pub fn code(&self) -> &'static str {
        match self {
            Refused::Evict { refusal, .. } | Refused::Readmit { refusal, .. } => refusal.code(),
            Refused::NoGatedLog => "no_gated_log",
            Refused::UnknownHold(_) => "unknown_hold",
            Refused::UnknownStream(_) => "unknown_stream",
            Refused::UnknownReplica(_) => "unknown_replica",
            Refused::UnknownAdopt(_) => "unknown_stream",
            Refused::MemoryIntact(_) => "memory_intact",
            Refused::Ack { error, .. } => error.code(),
            Refused::AckUnjudged { .. } => "unjudged",
        }
    }

    /// Input that names nothing is bad input (exit 2); the rest is what
    /// the real gesture refuses.
    pub fn class(&self) -> Class {
        match self {
            Refused::Evict { refusal, .. } | Refused::Readmit { refusal, .. } => {
                if refusal.is_bad_input() {
                    Class::BadInput
                } else {
                    Class::Refused
                }
            }
            Refused::NoGatedLog => Class::Unconfigured,
            Refused::UnknownHold(_)
            | Refused::UnknownStream(_)
            | Refused::UnknownReplica(_)
            | Refused::UnknownAdopt(_) => Class::BadInput,
            Refused::MemoryIntact(_) => Class::Refused,
            Refused::Ack { error, .. } => error.class(),
            Refused::AckUnjudged { .. } => Class::Refused,
        }
    }
}

/// The reads as they would be with the replicas `ask.ignore` names left
/// out (as `replicas.ignore` or deleting the consumer would leave them):
/// each is taken out of every log's replicas it is among. A name that is
/// on no log is refused.
fn ignore_replicas(reads: &[DomainRead], ask: &Ask) -> Result<Vec<DomainRead>, Refused> {
    let mut out = reads.to_vec();
    for name in &ask.ignore {
        let mut found = false;
        for read in &mut out {
            if let Some(Ok(r)) = &mut read.replicas {
                let before = r.replicas.len();
                r.replicas.retain(|c| c.consumer != *name);
                if r.replicas.len() < before {
                    found = true;
                    r.ignored.push(name.clone());
                }
            }
            // A copy whose consumer is gone, left out the same way.
            let before = read.orphaned.len();
            read.orphaned.retain(|o| o.consumer != *name);
            found |= read.orphaned.len() < before;
        }
        if !found {
            return Err(Refused::UnknownReplica(name.clone()));
        }
    }
    Ok(out)
}

/// What a preview computes the answer again from: the rows and the
/// domains' reads as they would be after the gestures.
#[derive(Debug, Clone)]
pub struct Applied {
    pub rows: ParsedRows,
    pub reads: Vec<DomainRead>,
}

/// The rows and reads as they would be after the gestures `ask`, judged
/// as the real gestures judge them; `reads` are the domains' (in
/// configuration order), `now` the broker's instant of the read.
pub fn apply(
    config: &Config,
    rows: &ParsedRows,
    reads: &[DomainRead],
    ask: &Ask,
    fence_window: std::time::Duration,
    now: DateTime<Utc>,
) -> Result<Applied, Refused> {
    let mut out = rows.clone();
    let gated = config.domains.iter().any(|d| d.gate_subject.is_some());
    if (!ask.evict.is_empty() || !ask.readmit.is_empty()) && !gated {
        return Err(Refused::NoGatedLog);
    }
    for node in &ask.evict {
        evict(
            config,
            rows,
            reads,
            &mut out,
            node,
            ask.force,
            fence_window,
            now,
        )?;
    }
    for node in &ask.readmit {
        readmit(config, rows, reads, &mut out, node)?;
    }
    for id in &ask.release {
        release(config, rows, &mut out, id)?;
    }
    for (stream, seq) in &ask.ack {
        acknowledge(config, rows, reads, &mut out, stream, *seq, now)?;
    }
    let mut reads = ignore_replicas(reads, ask)?;
    for stream in &ask.adopt {
        adopt(config, &mut out, &mut reads, stream)?;
    }
    Ok(Applied { rows: out, reads })
}

/// `adopt` as it stands once done: the memory opened afresh from what the
/// buckets hold now. The log's row in the floors bucket is the adoption's
/// own (no floor yet, no pins carried), and its mark names the floors
/// bucket: as a log never adopted, which the answer takes the same way.
/// Refused where the real gesture refuses (`memory_intact`).
fn adopt(
    config: &Config,
    out: &mut ParsedRows,
    reads: &mut [DomainRead],
    stream: &str,
) -> Result<(), Refused> {
    let Some(i) = config.domains.iter().position(|d| d.stream == stream) else {
        return Err(Refused::UnknownAdopt(stream.to_string()));
    };
    let Some(read) = reads.get_mut(i) else {
        return Err(Refused::UnknownAdopt(stream.to_string()));
    };
    let Ok(state) = &mut read.stream else {
        // The stream cannot be read: the answer says so either way.
        return Ok(());
    };
    if !matches!(
        floor::memory_of(out, stream, state),
        floor::memory::Memory::Lost(_)
    ) {
        return Err(Refused::MemoryIntact(stream.to_string()));
    }
    state.mark = None;
    if let Ok(floors) = &mut out.floors {
        Arc::make_mut(floors).rows.remove(stream);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn evict(
    config: &Config,
    rows: &ParsedRows,
    reads: &[DomainRead],
    out: &mut ParsedRows,
    node: &str,
    force: bool,
    fence_window: std::time::Duration,
    now: DateTime<Utc>,
) -> Result<(), Refused> {
    let refused = |refusal| Refused::Evict {
        node: node.to_string(),
        refusal,
    };
    crate::rows::check_node_id(node).map_err(|e| refused(Refusal::NodeIdInvalid(e.0)))?;
    // The gesture's own judgement, on the rows status read.
    let facts = evict::NodeFacts {
        seen: evict::seen_anywhere(rows, config, node),
        presence: match &rows.presence {
            Ok(p) if p.contains_key(node) => Presence::Live,
            Ok(_) => Presence::Absent,
            Err(e) => Presence::Unreadable(e.to_string()),
        },
        evicted: false,
        readmit: Vec::new(),
    };
    evict::judge_node(GateSign::Evict, node, force, false, &facts).map_err(refused)?;
    // Landed just past the fence window: the node is no longer counted.
    let landed = now
        - chrono::Duration::from_std(fence_window).unwrap_or(chrono::Duration::zero())
        - chrono::Duration::milliseconds(1);
    let Ok(gates) = &mut out.gates else {
        // The gates bucket cannot be read: the answer says nobody is
        // evicted, with or without this gesture.
        return Ok(());
    };
    let gates = Arc::make_mut(gates);
    for (d, read) in config.domains.iter().zip(reads) {
        if d.gate_subject.is_none() {
            continue;
        }
        let Some(inc) = floor::incarnation(rows, &d.stream, read) else {
            continue;
        };
        let seq = read.stream.as_ref().map_or(0, |s| s.last_seq + 1);
        gates.rows.entry(d.stream.clone()).or_default().insert(
            node.to_string(),
            GateRow {
                node: node.to_string(),
                stream: d.stream.clone(),
                state: GateState::Evicted,
                op_id: "preview".into(),
                seq,
                landed_at: Timestamp(landed),
                by: "preview".into(),
                force,
                reason: String::new(),
                stream_created: Some(inc.stream_created),
                generation: Some(inc.generation),
                format: crate::rows::FORMAT,
            },
        );
    }
    Ok(())
}

fn readmit(
    config: &Config,
    rows: &ParsedRows,
    reads: &[DomainRead],
    out: &mut ParsedRows,
    node: &str,
) -> Result<(), Refused> {
    let refused = |refusal| Refused::Readmit {
        node: node.to_string(),
        refusal,
    };
    crate::rows::check_node_id(node).map_err(|e| refused(Refusal::NodeIdInvalid(e.0)))?;
    let evicted = rows.gates.as_ref().is_ok_and(|g| {
        g.rows
            .values()
            .any(|m| m.get(node).is_some_and(|r| r.state == GateState::Evicted))
    });
    let readmit = config
        .domains
        .iter()
        .zip(reads)
        .filter(|(d, _)| d.gate_subject.is_some())
        .map(|(d, read)| match &read.stream {
            Ok(state) => evict::readmit_facts(rows, state, d, node),
            Err(e) => Err(e.clone()),
        })
        .collect();
    // The gesture's own judgement, on the rows status read.
    let facts = evict::NodeFacts {
        seen: true,
        presence: Presence::Absent,
        evicted,
        readmit,
    };
    evict::judge_node(GateSign::Readmit, node, false, false, &facts).map_err(refused)?;
    if let Ok(gates) = &mut out.gates {
        let gates = Arc::make_mut(gates);
        for m in gates.rows.values_mut() {
            if let Some(r) = m.get_mut(node) {
                r.state = GateState::Admitted;
            }
        }
    }
    Ok(())
}

fn release(
    config: &Config,
    rows_before: &ParsedRows,
    out: &mut ParsedRows,
    id: &str,
) -> Result<(), Refused> {
    let streams: Vec<&str> = config.domains.iter().map(|d| d.stream.as_str()).collect();
    let Ok(holds) = &mut out.holds else {
        // Unreadable holds: min_hold stays unreadable whatever is released.
        return Ok(());
    };
    let found = holds.iter().any(|(stream, hs)| {
        streams.contains(&stream.as_str())
            && hs
                .iter()
                .any(|h| h.as_ref().is_ok_and(|(k, _)| k.hold_id == id))
    });
    // A hold the memory carries is released as the gesture releases it:
    // an expired row under its id (`gesture::hold::lift`).
    let carried: Vec<String> = if found {
        Vec::new()
    } else {
        streams
            .iter()
            .filter(|s| {
                rows_before
                    .remembered(s)
                    .and_then(Result::ok)
                    .is_some_and(|m| m.membership.holds.contains_key(id))
            })
            .map(|s| (*s).to_string())
            .collect()
    };
    if !found && carried.is_empty() {
        return Err(Refused::UnknownHold(id.to_string()));
    }
    let holds = Arc::make_mut(holds);
    for hs in holds.values_mut() {
        hs.retain(|h| !h.as_ref().is_ok_and(|(k, _)| k.hold_id == id));
    }
    for stream in carried {
        let key = format!("{stream}.{id}");
        let row = serde_json::json!({"seq": 1, "owner": "preview", "kind": "operator",
            "expires_at": Timestamp(chrono::DateTime::<Utc>::UNIX_EPOCH)});
        if let Ok(parsed) = crate::rows::HoldRow::parse(&key, row.to_string().as_bytes()) {
            holds.entry(stream).or_default().push(Ok(parsed));
        }
    }
    Ok(())
}

fn acknowledge(
    config: &Config,
    rows: &ParsedRows,
    reads: &[DomainRead],
    out: &mut ParsedRows,
    stream: &str,
    seq: u64,
    now: DateTime<Utc>,
) -> Result<(), Refused> {
    let Some((d, read)) = config
        .domains
        .iter()
        .zip(reads)
        .find(|(d, _)| d.stream == stream)
    else {
        return Err(Refused::UnknownStream(stream.to_string()));
    };
    let refused = |error| Refused::Ack {
        stream: stream.to_string(),
        seq,
        error,
    };
    // The real gesture's judge, on the facts this read holds.
    let ask = crate::gesture::ack::check(d, seq, "preview", false);
    let facts = match crate::gesture::ack::Facts::without_broker(config) {
        Some(f) => f,
        None => {
            let state = read.stream.as_ref().map_err(|e| Refused::AckUnjudged {
                stream: stream.to_string(),
                seq,
                error: e.to_string(),
            })?;
            crate::gesture::ack::Facts::Operator {
                last_seq: state.last_seq,
                now: Timestamp(now),
                current: rows
                    .backups
                    .as_ref()
                    .ok()
                    .and_then(|b| b.acks.get(stream))
                    .and_then(|a| a.as_ref().ok())
                    .cloned(),
                // A preview writes nothing.
                revision: None,
            }
        }
    };
    crate::gesture::ack::judge(&ask, &facts).map_err(refused)?;
    if let Ok(b) = &mut out.backups {
        Arc::make_mut(b).acks.insert(
            stream.to_string(),
            Ok(AckRow {
                stream: stream.to_string(),
                position: seq,
                by: "preview".into(),
                at: Timestamp(now),
            }),
        );
    }
    Ok(())
}

/// The term that would bind, with its value and what binds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    pub term: TermName,
    pub seq: u64,
    pub detail: Option<String>,
}

/// One domain's preview: the trim as it is and as it would be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainPreview {
    pub domain: String,
    pub stream: String,
    pub trim_to: u64,
    pub would_trim_to: u64,
    /// Records on the log the trim would also delete.
    pub records: u64,
    /// An estimate of their bytes (the log's mean record size).
    pub bytes: u64,
    /// The term that would bind next (null when the answer would not
    /// conclude, or nothing would bind below the log's end).
    pub would_bind: Option<Binding>,
    /// What would still hold the trim back.
    pub would_block: Vec<TermName>,
    /// The sentence status prints.
    pub sentence: String,
}

/// The preview of each domain, from the answers before and after.
pub fn compare(
    ask: &Ask,
    before: &[Answer],
    after: &[Answer],
    reads: &[DomainRead],
) -> Vec<DomainPreview> {
    before
        .iter()
        .zip(after)
        .zip(reads)
        .map(|((b, a), read)| {
            let state = read.stream.as_ref().ok();
            let (first_seq, last_seq) = state.map_or((0, 0), |s| (s.first_seq, s.last_seq));
            let per_record = state
                .filter(|s| s.messages > 0)
                .map_or(0.0, |s| s.bytes as f64 / s.messages as f64);
            let lower = b.trim_to.max(first_seq.saturating_sub(1));
            let records = a.trim_to.min(last_seq).saturating_sub(lower);
            let bytes = (records as f64 * per_record).round() as u64;
            let would_bind = a.terms.iter().find(|t| t.binding).and_then(|t| {
                Some(Binding {
                    term: t.term,
                    seq: t.seq()?,
                    detail: t.detail.clone(),
                })
            });
            let gestures = ask.words();
            let next = match &would_bind {
                Some(w) => format!(
                    "; the next binding term would be {}{} at {}",
                    w.term.as_str(),
                    w.detail
                        .as_ref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default(),
                    w.seq
                ),
                None if a.blocked_by.iter().any(|t| {
                    a.terms
                        .iter()
                        .any(|x| x.term == *t && x.state_is_unreadable())
                }) || a.not_ready.is_some() =>
                {
                    "; the answer would still conclude nothing (see status)".to_string()
                }
                None => format!("; nothing would bind below the log's end ({last_seq})"),
            };
            let sentence = if a.trim_to == b.trim_to {
                format!(
                    "{gestures} would leave {}'s trim at {}{next}.",
                    a.domain, a.trim_to
                )
            } else {
                let cost = if records > 0 {
                    format!(
                        " ({} records, about {})",
                        crate::human::count(records),
                        crate::human::bytes(bytes)
                    )
                } else {
                    String::new()
                };
                format!(
                    "{gestures} would move {}'s trim from {} to {}{cost}{next}.",
                    a.domain, b.trim_to, a.trim_to
                )
            };
            DomainPreview {
                domain: a.domain.clone(),
                stream: a.stream.clone(),
                trim_to: b.trim_to,
                would_trim_to: a.trim_to,
                records,
                bytes,
                would_bind,
                would_block: a.blocked_by.clone(),
                sentence,
            }
        })
        .collect()
}

/// What was asked, for `--json` and the HTTP answer.
pub fn asked_json(ask: &Ask) -> serde_json::Value {
    serde_json::json!({
        "if_evicted": ask.evict,
        "if_released": ask.release,
        "if_acked": ask.ack.iter().map(|(s, q)| format!("{s}={q}")).collect::<Vec<_>>(),
        "if_readmitted": ask.readmit,
        "if_ignored": ask.ignore,
        "if_adopted": ask.adopt,
        "force": ask.force,
    })
}

/// The preview block `status` prints before the status itself.
pub fn text(previews: &[DomainPreview]) -> String {
    let mut out = String::from("PREVIEW (nothing written):\n");
    for p in previews {
        out.push_str(&format!("  {}\n", p.sentence));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod model_tests;

#[cfg(test)]
mod tests {
    use super::Refused;
    use crate::gate::Refusal;

    /// A refused preview names the flag `status` takes (`--force`), not
    /// the gesture's single-dash one it used to print.
    #[test]
    fn a_refused_preview_names_statuss_own_flags() {
        let r = Refused::Evict {
            node: "node-1".into(),
            refusal: Refusal::NodeLive("node-1".into()),
        };
        let said = r.to_string();
        assert!(said.contains("pass --force"), "{said}");
        assert!(!said.contains(" -force"), "{said}");
    }
}
