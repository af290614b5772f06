//! `evict` and `readmit` (docs/contract.md, `crewlet_gates` — the gates view): judged once before anything
//! is written, then one gate record per counted log, each log answering on
//! its own, with the exact command that finishes any log that did not. The
//! CLI (`crewlet retention evict`) and the HTTP routes (`POST
//! /v1/nodes/{node}/evict`) both call [`perform`] and render what it
//! returns with [`json`] or [`text`], so the two say the same.

use crate::rows::Stamped;
use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::json;

use crate::broker::gates::{GatedLog, PublishFailure};
use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::exit::{Class, Exit};
use crate::floor::{self, Entry};
use crate::gate::{self, LogOutcome, NotWritten, Presence, Prior, ReadmitFacts, Refusal};
use crate::gesture::hold;
use crate::rows::{
    GateRow, GateSign, GateState, HoldKind, HoldRow, Incarnation, Instant, OpId, OpRow,
    PositionRow, OP_PREFIX,
};

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

/// Performs the gesture `op` (from [`check`]) on every counted log.
pub async fn perform(
    config: &Config,
    broker: &Broker,
    sign: GateSign,
    args: &Ask,
    op: OpId,
) -> Performed {
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
    let by = args.by.clone();
    let reason = args.reason.clone().unwrap_or_default();
    let mut outcomes: Vec<(String, LogOutcome)> = Vec::new();
    // Bring every log's view up to date first, so that a retry finds a
    // record an earlier attempt landed, even past the duplicate window, and
    // the judgement sees the gates in force. The gates bucket is read once;
    // absorption keeps these entries current. Each log's view belongs to its
    // incarnation (the live stream at the domain's generation), read here.
    let (raw, parsed) = broker.read_all(&config.buckets).await;
    let parsed = parsed.into_inner();
    let mut incarnations: BTreeMap<String, Result<GatedAt, String>> = BTreeMap::new();
    for d in &logs {
        incarnations.insert(d.stream.clone(), gated_at(broker, &parsed, d).await);
    }
    let view = match raw.into_gates() {
        Ok(mut entries) => {
            let mut view_errors: BTreeMap<String, String> = BTreeMap::new();
            for d in &logs {
                let subject = d.gate_subject.as_deref().unwrap_or_default();
                let result = match &incarnations[&d.stream] {
                    Ok(at) => broker
                        .absorb_into(gates_bucket(config), &at.log(d, subject), &mut entries)
                        .await
                        .map(|_| ())
                        .map_err(String::from),
                    Err(e) => Err(e.clone()),
                };
                if let Err(e) = result {
                    view_errors.insert(d.stream.clone(), e);
                }
            }
            view_of(&entries, config, &incarnations, &op, &args.node)
                .map(|v| (v, entries, view_errors))
        }
        Err(e) => Err(e.to_string()),
    };
    let ((op_row, gate_rows), mut entries, view_errors) = match view {
        Ok(v) => v,
        Err(e) => {
            for d in &logs {
                outcomes.push((
                    d.stream.clone(),
                    LogOutcome::Unknown {
                        error: format!("the gates view cannot be read: {e}"),
                    },
                ));
            }
            return Performed::Done {
                op,
                logs: outcomes,
                ungated,
            };
        }
    };
    // A retry of this very operation is judged already.
    let retry = op_row.is_some();
    let judged = match sign {
        GateSign::Evict if retry => Ok(()),
        GateSign::Evict => {
            let seen = seen_anywhere(&parsed, config, &args.node);
            match gate::judge_known(&args.node, seen, args.force) {
                Ok(()) => judge_eviction(broker, config, args).await,
                Err(r) => Err(r),
            }
        }
        GateSign::Readmit => {
            let evicted = gate_rows.values().any(|g| g.state == GateState::Evicted);
            match gate::judge_evicted(&args.node, evicted || retry) {
                Err(r) => Err(r),
                Ok(()) => match judge_readmission(&parsed, &incarnations, &logs, &args.node) {
                    Ok(facts) => {
                        place_join_holds(broker, config, &op, &args.node, &by, &facts).await
                    }
                    Err(r) => Err(r),
                },
            }
        }
    };
    if let Err(refusal) = judged {
        return Performed::Refused {
            op: Some(op),
            refusal,
        };
    }
    match gate::prior(&op, sign, &args.node, op_row.as_ref(), &gate_rows) {
        Prior::Reused { sign: other, node } => {
            for d in &logs {
                outcomes.push((
                    d.stream.clone(),
                    LogOutcome::NotWritten {
                        reason: NotWritten::OpReused,
                        detail: format!(
                            "{op} names {} {node}; start a new gesture without -op-id",
                            other.as_str()
                        ),
                    },
                ));
            }
        }
        Prior::Superseded {
            logs: landed,
            stream,
            by_op,
        } => {
            for d in &logs {
                let outcome = match landed.get(&d.stream) {
                    Some(&seq) => LogOutcome::Applied { seq },
                    None => LogOutcome::NotWritten { reason: NotWritten::Superseded, detail: format!("a later gate ({by_op}) on {} undid it on {stream}; start a new gesture", args.node) },
                };
                outcomes.push((d.stream.clone(), outcome));
            }
        }
        Prior::New | Prior::Same { .. } => {
            let landed = op_row.map(|r| r.logs).unwrap_or_default();
            for d in &logs {
                if let Some(&seq) = landed.get(&d.stream) {
                    outcomes.push((d.stream.clone(), LogOutcome::Applied { seq }));
                    continue;
                }
                // Evicting a node already evicted on this log: the record in
                // force answers, and no second one hides its reason.
                if let Some(g) = gate_rows
                    .get(&d.stream)
                    .filter(|g| sign == GateSign::Evict && g.state == GateState::Evicted)
                {
                    outcomes.push((d.stream.clone(), LogOutcome::Applied { seq: g.seq }));
                    continue;
                }
                if let Some(e) = view_errors.get(&d.stream) {
                    outcomes.push((d.stream.clone(), LogOutcome::Unknown { error: format!("the gates view of this log cannot be brought up to date ({e}); nothing written") }));
                    continue;
                }
                let g = gate::Gesture {
                    op: &op,
                    sign,
                    node: &args.node,
                    by: &by,
                    force: args.force,
                    reason: &reason,
                };
                let outcome = match &incarnations[&d.stream] {
                    Ok(at) => {
                        write_one(broker, config, d, at, &incarnations, &g, &mut entries).await
                    }
                    Err(e) => LogOutcome::Unknown { error: e.clone() },
                };
                outcomes.push((d.stream.clone(), outcome));
            }
        }
    }
    Performed::Done {
        op,
        logs: outcomes,
        ungated,
    }
}

async fn judge_eviction(broker: &Broker, config: &Config, args: &Ask) -> Result<(), Refusal> {
    let presence = match broker.read_bucket(&config.buckets.presence).await {
        Ok(entries) if entries.iter().any(|e| e.key == args.node) => Presence::Live,
        Ok(_) => Presence::Absent,
        Err(e) => Presence::Unreadable(e.to_string()),
    };
    match gate::judge_evict(&args.node, &presence, args.force)? {
        gate::EvictJudged::ForcedUnjudged => {
            tracing::warn!(event = "evict_forced_unjudged", node = %args.node, "eviction forced unjudged: presence could not be read");
        }
        gate::EvictJudged::ForcedLive => {
            tracing::warn!(event = "evict_forced_live", node = %args.node, "eviction forced past a live presence lease");
        }
        gate::EvictJudged::Clear => {}
    }
    Ok(())
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
    // A node known only from a pin carried over a recreated positions
    // bucket is known: evicting it is how that pin ends.
    let carried = config.domains.iter().any(|d| {
        rows.published_pins(&d.stream)
            .is_some_and(|p| p.nodes.contains_key(node))
    });
    // An unreadable bucket may hold it: not "never seen".
    positions || presence || gates || carried
}

fn judge_readmission(
    rows: &floor::ParsedRows,
    logs_at: &BTreeMap<String, Result<GatedAt, String>>,
    logs: &[Domain],
    node: &str,
) -> Result<Vec<ReadmitFacts>, Refusal> {
    let facts: Vec<Result<ReadmitFacts, String>> = logs
        .iter()
        .map(|d| match logs_at.get(&d.stream) {
            Some(Ok(at)) => readmit_facts(rows, &at.state, d, node),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!("{} was not read", d.stream)),
        })
        .collect();
    gate::judge_readmit(node, &facts)?;
    Ok(facts.into_iter().flatten().collect())
}

/// The readmission's `join` holds (docs/trim-floor.md, Pins that arrive during a
/// tick): one per log at the node's position + 1, placed and confirmed
/// before any record is written, so that no purge passes the node between
/// its judgement and its record being absorbed. The duty holder lifts each
/// once a published answer counts the node again; they expire after ten
/// ticks in any case. A log whose records the node needs are already gone
/// refuses the readmission (every join hold is lifted).
async fn place_join_holds(
    broker: &Broker,
    config: &Config,
    op: &OpId,
    node: &str,
    by: &str,
    facts: &[ReadmitFacts],
) -> Result<(), Refusal> {
    let id = join_hold_id(op);
    // Ten of the holder's ticks (its lease is three), whatever this
    // configuration's tick; the holder extends it while the readmission is
    // not absorbed, and an expired one still pins until it is.
    let tick = hold::holder_tick(broker, config).await;
    let ttl = tick * 10;
    // On the broker's clock, which decides whether the hold is live.
    let now = match facts.first() {
        Some(f) => broker
            .stream_state_at(&f.stream)
            .await
            .map(|(_, c)| c.broker)
            .map_err(|e| Refusal::ReadmissionUnjudged(e.to_string()))?,
        None => Utc::now(),
    };
    let expires = now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::zero());
    let rows: Vec<HoldRow> = facts
        .iter()
        .map(|f| HoldRow {
            seq: f.position.unwrap_or(0) + 1,
            owner: by.to_string(),
            kind: HoldKind::Join,
            reason: format!("readmission of {node} (op {op})"),
            expires_at: Instant(expires),
        })
        .collect();
    let placements: Vec<hold::Placement> = facts
        .iter()
        .zip(&rows)
        .map(|(f, row)| hold::Placement {
            stream: &f.stream,
            id: &id,
            row,
            // A retry of the same operation refreshes its own hold.
            replace: true,
        })
        .collect();
    let mut written = Vec::new();
    let mut refusal = None;
    for p in &placements {
        match hold::write(broker, config, p).await {
            Ok(w) => written.push((p, w)),
            Err(placed) => {
                refusal = Some(join_refusal(p, &placed));
                break;
            }
        }
    }
    if refusal.is_none() {
        for (p, w) in &written {
            // Shown in force by an answer published after it (min_hold at
            // or below the node's position), or the readmission stops: a
            // tick that read its pins before the hold could still purge
            // what the node needs.
            let in_force = p.row.seq.saturating_sub(1);
            match hold::confirm(broker, config, p, w, Some(in_force), tick).await {
                hold::Placed::Held { .. } => {}
                hold::Placed::Unconfirmed(u) => {
                    refusal = Some(Refusal::JoinHoldUnconfirmed {
                        stream: p.stream.to_string(),
                        detail: match u {
                            hold::Unconfirmed::NoAnswer { waited } => format!(
                                "no answer showing min_hold at or below {in_force} within {}",
                                crate::config::Dur(waited)
                            ),
                            hold::Unconfirmed::NotWaited => "not waited for".into(),
                            hold::Unconfirmed::Unproven { why } => why,
                        },
                    });
                    break;
                }
                placed => {
                    refusal = Some(join_refusal(p, &placed));
                    break;
                }
            }
        }
    }
    match refusal {
        None => Ok(()),
        Some(r) => {
            for (p, w) in &written {
                hold::release(broker, config, p, w).await;
            }
            Err(r)
        }
    }
}

fn join_refusal(p: &hold::Placement, placed: &hold::Placed) -> Refusal {
    match placed {
        hold::Placed::TooLate { first_seq } => Refusal::BelowFloor(format!(
            "records from {} on, which the node needs, are gone from {} (first_seq {first_seq}); nothing written",
            p.row.seq, p.stream
        )),
        other => Refusal::ReadmissionUnjudged(format!(
            "the join hold on {} could not be placed: {}",
            p.stream,
            other.words(p.stream, p.id, p.row)
        )),
    }
}

/// The id of a readmission's join hold: its operation names it, and the
/// `_op` row names the node.
pub fn join_hold_id(op: &OpId) -> String {
    format!("{}{op}", crate::rows::JOIN_HOLD_PREFIX)
}

pub fn readmit_facts(
    rows: &floor::ParsedRows,
    state: &floor::StreamState,
    d: &Domain,
    node: &str,
) -> Result<ReadmitFacts, String> {
    let published = rows.published(&d.stream)?;
    let (floor, generation, created) = match &published {
        Some((p, _)) => (
            p.floor,
            p.generation,
            p.stream_created.unwrap_or(state.created),
        ),
        None => (None, 0, state.created),
    };
    let positions = rows.positions.as_ref().map_err(|e| e.to_string())?;
    let (position, left_gen) = match positions.get(&d.stream).and_then(|m| m.get(node)) {
        None => (None, None),
        Some(row) => {
            let row = row.as_ref().map_err(|e| e.to_string())?;
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

fn gates_bucket(config: &Config) -> &str {
    &config.buckets.gates
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

/// The command that runs (or, with `op`, finishes) this gesture.
fn command(sign: GateSign, args: &Ask, op: Option<&OpId>) -> String {
    let mut c = format!(
        "crewlet retention {} {} -confirm {}",
        sign.as_str(),
        args.node,
        args.node
    );
    if let Some(op) = op {
        c.push_str(&format!(" -op-id {op}"));
    }
    if args.force {
        c.push_str(" -force");
    }
    if let Some(r) = &args.reason {
        c.push_str(&format!(" -reason {}", crate::human::shell_word(r)));
    }
    c
}

/// The command that finishes a log that did not finish, if any.
fn finish_cmd(sign: GateSign, args: &Ask, op: &OpId, o: &LogOutcome) -> Option<String> {
    match o {
        LogOutcome::Applied { .. } | LogOutcome::Pending { .. } => None,
        LogOutcome::NotWritten { reason, .. } if reason.needs_new_gesture() => {
            Some(command(sign, args, None))
        }
        _ => Some(command(sign, args, Some(op))),
    }
}

/// What a gesture means for a log without a `gate_subject`.
fn ungated_words(sign: GateSign, domain: &str, node: &str) -> String {
    let effect = match sign {
        GateSign::Evict => format!("this log keeps counting {node}"),
        GateSign::Readmit => format!("this log never stopped counting {node}"),
    };
    format!("takes no gate record (domain {domain} has no gate_subject): nothing written, {effect}")
}

/// The gesture's answer as `--json` prints it (and the HTTP route answers).
pub fn json(
    sign: GateSign,
    args: &Ask,
    p: &Performed,
    surface: crate::human::Surface,
) -> serde_json::Value {
    match p {
        Performed::NoGatedLog => {
            json!({"sign": sign.as_str(), "node": args.node, "op_id": null, "refused": "no_gated_log", "message": NO_GATED_LOG, "logs": []})
        }
        Performed::Refused { op, refusal } => {
            json!({"sign": sign.as_str(), "node": args.node, "op_id": op.as_ref().map(|o| o.to_string()), "refused": refusal.code(), "message": refusal.words(surface), "logs": []})
        }
        Performed::Done { op, logs, ungated } => {
            let rows: Vec<_> = logs
                .iter()
                .map(|(stream, o)| {
                    let mut v = serde_json::to_value(o).unwrap_or_default();
                    if let Some(obj) = v.as_object_mut() {
                        obj.insert("stream".into(), json!(stream));
                        obj.insert("finish".into(), json!(finish_cmd(sign, args, op, o)));
                    }
                    v
                })
                .collect();
            let ungated: Vec<_> = ungated
                .iter()
                .map(|(domain, stream)| json!({"domain": domain, "stream": stream, "message": ungated_words(sign, domain, &args.node)}))
                .collect();
            json!({"sign": sign.as_str(), "node": args.node, "op_id": op.to_string(), "finished": p.finished(), "logs": rows, "ungated": ungated})
        }
    }
}

/// The gesture's answer as text: (stdout, stderr).
pub fn text(sign: GateSign, args: &Ask, p: &Performed) -> (String, String) {
    match p {
        Performed::NoGatedLog => (String::new(), format!("error: {NO_GATED_LOG}\n")),
        Performed::Refused { op, refusal } => {
            let op_txt = op
                .as_ref()
                .map(|o| format!(" (op {o})"))
                .unwrap_or_default();
            (
                String::new(),
                format!(
                    "refused {} {}{op_txt}: {refusal}\n",
                    sign.as_str(),
                    args.node
                ),
            )
        }
        Performed::Done { op, logs, ungated } => {
            let mut out = format!("{} {} (op {op}):\n", sign.as_str(), args.node);
            let width = logs
                .iter()
                .map(|(s, _)| s.len())
                .chain(ungated.iter().map(|(_, s)| s.len()))
                .max()
                .unwrap_or(0);
            for (stream, o) in logs {
                out.push_str(&format!("  {stream:<width$}  {}\n", o.text()));
                if let Some(cmd) = finish_cmd(sign, args, op, o) {
                    out.push_str(&format!("    finish: {cmd}\n"));
                }
            }
            for (domain, stream) in ungated {
                out.push_str(&format!(
                    "  {stream:<width$}  {}\n",
                    ungated_words(sign, domain, &args.node)
                ));
            }
            if sign == GateSign::Evict && p.finished() {
                out.push_str(
                    "the node stops being counted once the fence window passes after each record lands\n",
                );
            }
            (out, String::new())
        }
    }
}
