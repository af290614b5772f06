//! A readmission's join holds: placed and confirmed on every counted log
//! before any gate record is written.

use super::*;

/// The readmission's `join` holds (docs/trim-floor.md, Pins that arrive during a
/// tick): one per log at the node's position + 1, placed and confirmed
/// before any record is written, so that no purge passes the node between
/// its judgement and its record being absorbed. The duty holder lifts each
/// once a published answer counts the node again; they expire after ten
/// ticks in any case. A log whose records the node needs are already gone
/// refuses the readmission (every join hold is lifted).
pub(super) async fn place_join_holds(
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
            expires_at: Timestamp(expires),
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
        Some(mut r) => {
            let mut left = Vec::new();
            for (p, w) in &written {
                if let Err(e) = hold::release(broker, config, p, w).await {
                    left.push(format!(
                        "the join hold {} on {} could not be released ({e}); release it: crewlet retention release -stream {} {}",
                        p.id, p.stream, p.stream, p.id
                    ));
                }
            }
            // A hold left behind pins its log until it is released: the
            // refusal names it, and the command that releases it.
            if !left.is_empty() {
                match &mut r {
                    Refusal::JoinHoldUnconfirmed { detail, .. } => {
                        detail.push_str("; ");
                        detail.push_str(&left.join("; "));
                    }
                    other => {
                        tracing::warn!(event = "join_hold_left", refusal = %other.code(), holds = %left.join("; "), "join holds were left behind");
                    }
                }
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
