//! `evict` and `readmit` (docs/contract.md, `crewlet_gates` — the gates view): judged once before anything
//! is written, then one gate record per counted log, each log answering on
//! its own, with the exact command that finishes any log that did not. The
//! CLI (`crewlet retention evict`) and the HTTP routes (`POST
//! /v1/nodes/{node}/evict`) both call [`perform`] and render what it
//! returns with [`json`] or [`text`], so the two say the same.

use crate::rows::Stamped;
use crate::rows::Unreadable;
use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::json;

use crate::broker::gates::{GatedLog, PublishFailure};
use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::exit::{Class, Exit};
use crate::floor::{self, Entry};
use crate::gate::{
    self, EvictJudged, LogOutcome, NotWritten, Presence, Prior, ReadmitFacts, Refusal,
};
use crate::gesture::hold;
use crate::rows::{
    GateRow, GateSign, GateState, HoldKind, HoldRow, Incarnation, OpId, OpRow, PositionRow,
    Timestamp, OP_PREFIX,
};

mod join;
mod render;
pub use join::join_hold_id;
use join::place_join_holds;
pub use render::{json, text};

/// What an operator asked for.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub node: String,
    /// The node id repeated.
    pub confirm: Option<String>,
    pub force: bool,
    /// An earlier gesture's operation id, to finish it.
    pub op_id: Option<String>,
    pub reason: Option<String>,
    /// Who: the OS account from the CLI, `token:NAME` over HTTP.
    pub by: String,
}

/// What a gesture came to.
#[derive(Debug, Clone)]
pub enum Performed {
    /// No domain has a `gate_subject`: nothing takes gate records.
    NoGatedLog,
    /// Refused before anything was written.
    Refused { op: Option<OpId>, refusal: Refusal },
    /// Each counted log's outcome, in configuration order.
    Done {
        op: OpId,
        logs: Vec<(String, LogOutcome)>,
        /// The configured domains without a `gate_subject` (domain,
        /// stream): those logs take no gate record, and the answer says so.
        ungated: Vec<(String, String)>,
    },
}

impl Performed {
    /// Every log has its record (or it was never needed).
    pub fn finished(&self) -> bool {
        match self {
            Performed::Done { logs, .. } => logs.iter().all(|(_, o)| o.finished()),
            _ => false,
        }
    }

    pub fn class(&self) -> Class {
        match self {
            Performed::NoGatedLog => Class::Unconfigured,
            Performed::Refused { refusal, .. } if refusal.is_bad_input() => Class::BadInput,
            Performed::Refused { .. } => Class::Refused,
            Performed::Done { .. } if self.finished() => Class::Done,
            Performed::Done { .. } => Class::Pending,
        }
    }

    pub fn exit(&self) -> Exit {
        self.class().exit()
    }
}

const NO_GATED_LOG: &str =
    "no domain has a gate_subject, so no log takes gate records; nothing written";

/// Judges the input alone (no broker): the operation id the gesture runs
/// under, or the refusal.
pub fn check(config: &Config, ask: &Ask) -> Result<OpId, Performed> {
    if !config.domains.iter().any(|d| d.gate_subject.is_some()) {
        return Err(Performed::NoGatedLog);
    }
    gate::check_input(
        &ask.node,
        ask.confirm.as_deref(),
        ask.op_id.as_deref(),
        Utc::now(),
    )
    .map_err(|refusal| Performed::Refused { op: None, refusal })
}

/// The whole gesture `op` (from [`check`]) on every counted log: its
/// [`facts`], [`judge`]d, then [`apply`]. The CLI and the HTTP routes call
/// this.
pub async fn perform(
    config: &Config,
    broker: &Broker,
    sign: GateSign,
    ask: &Ask,
    op: OpId,
) -> Performed {
    let facts = facts(config, broker, sign, ask, &op).await;
    match judge(sign, ask, &op, &facts) {
        Ok(plan) => apply(config, broker, ask, plan, facts).await,
        Err(refusal) => Performed::Refused {
            op: Some(op),
            refusal,
        },
    }
}

/// What an eviction or readmission of a node is judged on, beside the
/// gates view: the part of the judgement the previews share
/// ([`judge_node`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// The fleet has seen the node (a position, a lease, a gate row, a pin
    /// carried); an unreadable bucket counts as seen.
    pub seen: bool,
    /// The node's presence lease (judged for an eviction only).
    pub presence: Presence,
    /// A gate row in force says the node is evicted on some log.
    pub evicted: bool,
    /// Per log that takes gate records, what its readmission compares, or
    /// why it cannot be read (judged for a readmission only).
    pub readmit: Vec<Result<ReadmitFacts, Unreadable>>,
}

/// The gates bucket as the gesture found it, each log's view brought up
/// to date.
#[derive(Debug, Clone)]
pub struct GatesView {
    /// The `_op` row of this very operation: a retry.
    op_row: Option<OpRow>,
    /// Per log, the node's gate row in force in that log's incarnation.
    gate_rows: BTreeMap<String, GateRow>,
    /// The bucket's entries, kept current by absorption.
    entries: Vec<Entry>,
    /// Per log, why its view could not be brought up to date.
    errors: BTreeMap<String, String>,
}

/// FACTS: everything the judgement needs, read once for the whole gesture.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The logs that take gate records, in configuration order.
    logs: Vec<Domain>,
    /// The configured domains without a `gate_subject` (domain, stream).
    ungated: Vec<(String, String)>,
    /// Per gated log, its state and incarnation, or why it was not read.
    at: BTreeMap<String, Result<GatedAt, String>>,
    /// The gates view, or why it cannot be read.
    view: Result<GatesView, String>,
    pub node: NodeFacts,
}

/// FACTS (IO): the sidecar's buckets (created if the sidecar never ran),
/// every bucket the judgement reads, each gated log's state and
/// incarnation, each log's gates view brought up to date (so that a retry
/// finds a record an earlier attempt landed, even past the duplicate
/// window, and the judgement sees the gates in force), and for an eviction
/// the node's presence lease.
pub async fn facts(
    config: &Config,
    broker: &Broker,
    sign: GateSign,
    ask: &Ask,
    op: &OpId,
) -> Facts {
    let logs: Vec<Domain> = config
        .domains
        .iter()
        .filter(|d| d.gate_subject.is_some())
        .cloned()
        .collect();
    // Before the sidecar has ever run its own buckets may not exist yet:
    // created here, the gesture judges as on a fleet where nothing was
    // published.
    match broker.ensure_sidecar_buckets(config).await {
        Ok(created) => {
            for bucket in created {
                tracing::info!(event = "bucket_created", bucket = %bucket, "created the sidecar's bucket for this gesture");
            }
        }
        // The logs' outcomes say what could not be read or written.
        Err(e) => {
            tracing::warn!(event = "bucket_not_created", error = %e, "the sidecar's buckets could not be ensured")
        }
    }
    let ungated: Vec<(String, String)> = config
        .domains
        .iter()
        .filter(|d| d.gate_subject.is_none())
        .map(|d| (d.name.clone(), d.stream.clone()))
        .collect();
    // The gates bucket is read once; absorption keeps these entries
    // current. Each log's view belongs to its incarnation (the live stream
    // at the domain's generation), read here.
    let (raw, parsed) = broker.read_all(&config.buckets).await;
    let parsed = parsed.into_inner();
    let mut at: BTreeMap<String, Result<GatedAt, String>> = BTreeMap::new();
    for d in &logs {
        at.insert(d.stream.clone(), gated_at(broker, &parsed, d).await);
    }
    let view = match raw.into_gates() {
        Ok(mut entries) => {
            let mut errors: BTreeMap<String, String> = BTreeMap::new();
            for d in &logs {
                let subject = d.gate_subject.as_deref().unwrap_or_default();
                let result = match &at[&d.stream] {
                    Ok(a) => broker
                        .absorb_into(&config.buckets.gates, &a.log(d, subject), &mut entries)
                        .await
                        .map(|_| ())
                        .map_err(String::from),
                    Err(e) => Err(e.clone()),
                };
                if let Err(e) = result {
                    errors.insert(d.stream.clone(), e);
                }
            }
            view_of(&entries, config, &at, op, &ask.node).map(|(op_row, gate_rows)| GatesView {
                op_row,
                gate_rows,
                entries,
                errors,
            })
        }
        Err(e) => Err(e.to_string()),
    };
    let presence = match sign {
        GateSign::Evict => match broker.read_bucket(&config.buckets.presence).await {
            Ok(entries) if entries.iter().any(|e| e.key == ask.node) => Presence::Live,
            Ok(_) => Presence::Absent,
            Err(e) => Presence::Unreadable(e.to_string()),
        },
        GateSign::Readmit => Presence::Absent,
    };
    let readmit = match sign {
        GateSign::Readmit => logs
            .iter()
            .map(|d| match at.get(&d.stream) {
                Some(Ok(a)) => readmit_facts(&parsed, &a.state, d, &ask.node),
                Some(Err(e)) => Err(Unreadable(e.clone())),
                None => Err(Unreadable(format!("{} was not read", d.stream))),
            })
            .collect(),
        GateSign::Evict => Vec::new(),
    };
    let evicted = view
        .as_ref()
        .is_ok_and(|v| v.gate_rows.values().any(|g| g.state == GateState::Evicted));
    Facts {
        node: NodeFacts {
            seen: seen_anywhere(&parsed, config, &ask.node),
            presence,
            evicted,
            readmit,
        },
        logs,
        ungated,
        at,
        view,
    }
}

/// What one log's part of the gesture comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Already known without writing: landed by an earlier attempt, in
    /// force already, undone or reused, or unreadable.
    Known(LogOutcome),
    /// A gate record to publish on this log.
    Write,
}

/// What [`judge`] decides and [`apply`] carries out.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub op: OpId,
    pub sign: GateSign,
    /// How an eviction passed its judgement (logged when applied); `None`
    /// for a readmission and for a retry.
    pub forced: Option<EvictJudged>,
    /// A readmission's logs: each gets a join hold at the node's position
    /// + 1, placed and confirmed before any record is written.
    pub join: Vec<ReadmitFacts>,
    /// Per counted log, in configuration order.
    pub logs: Vec<(String, Step)>,
    pub ungated: Vec<(String, String)>,
}

/// JUDGE (pure): the node's judgement ([`judge_node`]), then per log what
/// the operation id already says (a retry, a reused id, a gate a later
/// gesture undid), what is in force, what could not be read, and what is
/// left to write.
pub fn judge(sign: GateSign, ask: &Ask, op: &OpId, facts: &Facts) -> Result<Plan, Refusal> {
    let mut plan = Plan {
        op: op.clone(),
        sign,
        forced: None,
        join: Vec::new(),
        logs: Vec::new(),
        ungated: facts.ungated.clone(),
    };
    let view = match &facts.view {
        Ok(v) => v,
        Err(e) => {
            // Nothing can be judged, nor written: every log says why.
            plan.logs = facts
                .logs
                .iter()
                .map(|d| {
                    let error = format!("the gates view cannot be read: {e}");
                    (d.stream.clone(), Step::Known(LogOutcome::Unknown { error }))
                })
                .collect();
            return Ok(plan);
        }
    };
    // A retry of this very operation is judged already.
    let retry = view.op_row.is_some();
    plan.forced = judge_node(sign, &ask.node, ask.force, retry, &facts.node)?;
    if sign == GateSign::Readmit {
        plan.join = facts.node.readmit.iter().flatten().cloned().collect();
    }
    let each = |f: &dyn Fn(&Domain) -> Step| -> Vec<(String, Step)> {
        facts
            .logs
            .iter()
            .map(|d| (d.stream.clone(), f(d)))
            .collect()
    };
    plan.logs = match gate::prior(op, sign, &ask.node, view.op_row.as_ref(), &view.gate_rows) {
        Prior::Reused { sign: other, node } => each(&|_| {
            Step::Known(LogOutcome::NotWritten {
                reason: NotWritten::OpReused,
                detail: format!(
                    "{op} names {} {node}; start a new gesture without -op-id",
                    other.as_str()
                ),
            })
        }),
        Prior::Superseded {
            logs: landed,
            stream,
            by_op,
        } => each(&|d| match landed.get(&d.stream) {
            Some(&seq) => Step::Known(LogOutcome::Applied { seq }),
            None => Step::Known(LogOutcome::NotWritten {
                reason: NotWritten::Superseded,
                detail: format!(
                    "a later gate ({by_op}) on {} undid it on {stream}; start a new gesture",
                    ask.node
                ),
            }),
        }),
        Prior::New | Prior::Same { .. } => {
            let landed = view
                .op_row
                .as_ref()
                .map(|r| r.logs.clone())
                .unwrap_or_default();
            each(&|d| {
                if let Some(&seq) = landed.get(&d.stream) {
                    return Step::Known(LogOutcome::Applied { seq });
                }
                // Evicting a node already evicted on this log: the record
                // in force answers, and no second one hides its reason.
                if let Some(g) = view
                    .gate_rows
                    .get(&d.stream)
                    .filter(|g| sign == GateSign::Evict && g.state == GateState::Evicted)
                {
                    return Step::Known(LogOutcome::Applied { seq: g.seq });
                }
                if let Some(e) = view.errors.get(&d.stream) {
                    return Step::Known(LogOutcome::Unknown { error: format!("the gates view of this log cannot be brought up to date ({e}); nothing written") });
                }
                match &facts.at.get(&d.stream) {
                    Some(Ok(_)) => Step::Write,
                    Some(Err(e)) => Step::Known(LogOutcome::Unknown { error: e.clone() }),
                    None => Step::Known(LogOutcome::Unknown {
                        error: format!("{} was not read", d.stream),
                    }),
                }
            })
        }
    };
    Ok(plan)
}

/// The judgement of the node itself, shared with the previews
/// (`status --if-evicted`, `--if-readmitted`): an eviction names a node the
/// fleet has seen and that holds no live presence lease (`-force` past
/// either); a readmission names a node evicted somewhere whose position
/// reaches what every log still holds. A retry of an eviction is judged
/// already.
pub fn judge_node(
    sign: GateSign,
    node: &str,
    force: bool,
    retry: bool,
    facts: &NodeFacts,
) -> Result<Option<EvictJudged>, Refusal> {
    match sign {
        GateSign::Evict if retry => Ok(None),
        GateSign::Evict => {
            gate::judge_known(node, facts.seen, force)?;
            gate::judge_evict(node, &facts.presence, force).map(Some)
        }
        GateSign::Readmit => {
            gate::judge_evicted(node, facts.evicted || retry)?;
            gate::judge_readmit(node, &facts.readmit)?;
            Ok(None)
        }
    }
}

/// APPLY (IO): the plan carried out: a forced eviction logged as such, a
/// readmission's join holds placed and confirmed (or the gesture stops,
/// every hold lifted), then one gate record per log left to write, each
/// absorbed at once so that the answer can say `applied`.
pub async fn apply(
    config: &Config,
    broker: &Broker,
    ask: &Ask,
    plan: Plan,
    facts: Facts,
) -> Performed {
    match plan.forced {
        Some(EvictJudged::ForcedUnjudged) => {
            tracing::warn!(event = "evict_forced_unjudged", node = %ask.node, "eviction forced unjudged: presence could not be read");
        }
        Some(EvictJudged::ForcedLive) => {
            tracing::warn!(event = "evict_forced_live", node = %ask.node, "eviction forced past a live presence lease");
        }
        Some(EvictJudged::Clear) | None => {}
    }
    if plan.sign == GateSign::Readmit {
        if let Err(refusal) =
            place_join_holds(broker, config, &plan.op, &ask.node, &ask.by, &plan.join).await
        {
            return Performed::Refused {
                op: Some(plan.op),
                refusal,
            };
        }
    }
    let mut entries = facts.view.map(|v| v.entries).unwrap_or_default();
    let reason = ask.reason.clone().unwrap_or_default();
    let g = gate::Gesture {
        op: &plan.op,
        sign: plan.sign,
        node: &ask.node,
        by: &ask.by,
        force: ask.force,
        reason: &reason,
    };
    let mut logs = Vec::new();
    for (stream, step) in plan.logs {
        let outcome = match step {
            Step::Known(o) => o,
            Step::Write => match (
                facts.logs.iter().find(|d| d.stream == stream),
                facts.at.get(&stream),
            ) {
                (Some(d), Some(Ok(at))) => {
                    write_one(broker, config, d, at, &facts.at, &g, &mut entries).await
                }
                _ => LogOutcome::Unknown {
                    error: format!("{stream} was not read"),
                },
            },
        };
        logs.push((stream, outcome));
    }
    Performed::Done {
        op: plan.op,
        logs,
        ungated: plan.ungated,
    }
}

/// Whether the fleet has ever seen `node`: a positions row on a configured
/// log, a presence lease, a gate row of any incarnation, or a pin a
/// published floors row carries.
pub fn seen_anywhere(rows: &floor::ParsedRows, config: &Config, node: &str) -> bool {
    let positions = rows.positions.as_ref().map_or(true, |p| {
        config
            .domains
            .iter()
            .any(|d| p.get(&d.stream).is_some_and(|m| m.contains_key(node)))
    });
    let presence = rows
        .presence
        .as_ref()
        .map_or(true, |p| p.contains_key(node));
    let gates = rows
        .gates
        .as_ref()
        .map_or(true, |g| g.rows.values().any(|m| m.contains_key(node)));
    // A node known only from the memory (carried over a recreated
    // positions bucket) is known: evicting it is how that pin ends. A
    // memory that cannot be read back may name it.
    let carried = config
        .domains
        .iter()
        .any(|d| match rows.remembered(&d.stream) {
            Some(Ok(r)) => r.membership.nodes.contains_key(node),
            Some(Err(_)) => true,
            None => false,
        });
    // An unreadable bucket may hold it: not "never seen".
    positions || presence || gates || carried
}

pub fn readmit_facts(
    rows: &floor::ParsedRows,
    state: &floor::StreamState,
    d: &Domain,
    node: &str,
) -> Result<ReadmitFacts, Unreadable> {
    let published = rows.published(&d.stream)?;
    let (floor, generation, created) = match &published {
        Some((p, _)) => (
            p.floor,
            p.generation,
            p.stream_created.unwrap_or(state.created),
        ),
        None => (None, 0, state.created),
    };
    let positions = rows
        .positions
        .as_ref()
        .map_err(|e| Unreadable(e.to_string()))?;
    let (position, left_gen) = match positions.get(&d.stream).and_then(|m| m.get(node)) {
        None => (None, None),
        Some(row) => {
            let row = row.as_ref().map_err(|e| Unreadable(e.to_string()))?;
            if row.generation == generation && row.stream_created == created {
                (Some(row.seq), None)
            } else {
                (None, Some(row.generation))
            }
        }
    };
    Ok(ReadmitFacts {
        stream: d.stream.clone(),
        position,
        left_gen,
        floor,
        first_seq: state.first_seq,
        generation,
    })
}

/// Where a log stands for this gesture: its state and the incarnation its
/// gates view belongs to.
#[derive(Debug, Clone)]
struct GatedAt {
    incarnation: Incarnation,
    state: floor::StreamState,
}

impl GatedAt {
    fn log<'a>(&self, d: &'a Domain, subject: &'a str) -> GatedLog<'a> {
        GatedLog {
            stream: &d.stream,
            subject,
            incarnation: self.incarnation,
            upto: None,
        }
    }
}

/// Reads the log once for the whole gesture: its state (readmission judges
/// against `first_seq`) and the incarnation its gates view belongs to.
async fn gated_at(
    broker: &Broker,
    rows: &floor::ParsedRows,
    d: &Domain,
) -> Result<GatedAt, String> {
    let state = broker.stream_state(&d.stream).await?;
    let incarnation = floor::incarnation_at(rows, &d.stream, state.created)?;
    Ok(GatedAt { incarnation, state })
}

/// The `_op` row of this operation and, per log, the node's gate row in
/// force in that log's incarnation, from the gates bucket's entries.
fn view_of(
    entries: &[Entry],
    config: &Config,
    incarnations: &BTreeMap<String, Result<GatedAt, String>>,
    op: &OpId,
    node: &str,
) -> Result<(Option<OpRow>, BTreeMap<String, GateRow>), String> {
    let op_key = format!("{OP_PREFIX}{op}");
    let op_row = match entries.iter().find(|e| e.key == op_key) {
        Some(e) => Some(OpRow::parse(&e.key, &e.value).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut gates = BTreeMap::new();
    for d in &config.domains {
        let Some(Ok(at)) = incarnations.get(&d.stream) else {
            continue;
        };
        let key = PositionRow::key(&d.stream, node);
        if let Some(e) = entries.iter().find(|e| e.key == key) {
            if let Ok(g) = GateRow::parse(&e.key, &e.value) {
                if g.belongs_to(&at.incarnation) {
                    gates.insert(d.stream.clone(), g);
                }
            }
        }
    }
    Ok((op_row, gates))
}

async fn write_one(
    broker: &Broker,
    config: &Config,
    d: &Domain,
    at: &GatedAt,
    incarnations: &BTreeMap<String, Result<GatedAt, String>>,
    g: &gate::Gesture<'_>,
    entries: &mut Vec<Entry>,
) -> LogOutcome {
    let subject = d.gate_subject.clone().unwrap_or_default();
    let (headers, body) = gate::record(g, &d.stream, Utc::now());
    let seq = match broker.publish_gate(&subject, &headers, body).await {
        Ok(seq) => seq,
        Err(PublishFailure::LogFull(e)) => {
            // The exact command, with the least ceiling that also clears
            // log_headroom, from the log's size now.
            let raise = match broker.stream_state(&d.stream).await {
                Ok(s) => {
                    let least = crate::capacity::least_clearing_headroom(
                        s.bytes,
                        d.gate_reserve,
                        crate::capacity::minimum(config.retention.allow_unsafe_limits),
                    );
                    format!(
                        "raise its ceiling: {}",
                        crate::capacity::command(&d.stream, least)
                    )
                }
                Err(r) => format!(
                    "raise its ceiling with crewlet retention set-capacity once its size can be read ({r})"
                ),
            };
            return LogOutcome::NotWritten {
                reason: NotWritten::LogFull,
                detail: format!(
                    "past even the gate reserve ({e}); {raise}, then finish with the same -op-id"
                ),
            };
        }
        Err(PublishFailure::Refused(e)) => {
            return LogOutcome::NotWritten {
                reason: NotWritten::Refused,
                detail: e,
            }
        }
        Err(PublishFailure::NoAnswer(e)) => return LogOutcome::Unknown { error: e },
    };
    // Absorb at once, so the answer can say `applied`; a later tick does it
    // otherwise.
    let log = at.log(d, &subject);
    let absorbed = broker
        .absorb_into(&config.buckets.gates, &log, entries)
        .await;
    if absorbed.is_err() {
        return LogOutcome::Pending { seq };
    }
    match view_of(entries, config, incarnations, g.op, g.node) {
        Ok((Some(row), _)) if row.logs.get(&d.stream) == Some(&seq) => LogOutcome::Applied { seq },
        _ => LogOutcome::Pending { seq },
    }
}

#[cfg(test)]
mod tests;
