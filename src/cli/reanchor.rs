//! `crewlet retention reanchor -stream S [-confirm CREATED]`: adopt a
//! recreated or restored stream by opening the next generation of its floor.

use chrono::Utc;
use serde_json::json;

use super::{Cli, ReanchorArgs};
use crate::exit::{Class, Exit};
use crate::floor::{reanchor, FloorState, GateFault, NotReady};
use crate::rows::Instant;

pub async fn run(cli: &Cli, args: &ReanchorArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let config = loaded.config;
    let Some(domain) = config.domain(&args.stream).cloned() else {
        let known: Vec<String> = config
            .domains
            .iter()
            .map(|d| format!("{} ({})", d.stream, d.name))
            .collect();
        crate::cli::say::error(format_args!(
            "-stream {:?} is not a configured stream; configured: {}",
            args.stream,
            known.join(", ")
        ));
        return Class::BadInput.exit();
    };
    let confirm = match args.confirm.as_deref().map(Instant::parse).transpose() {
        Ok(c) => c,
        Err(e) => {
            crate::cli::say::error(format_args!("-confirm: {e}; pass the live stream's created exactly as `crewlet retention reanchor -stream {}` prints it", domain.stream));
            return Class::BadInput.exit();
        }
    };
    let broker = exit_on_err!(super::connect(&config).await);
    if let Err(exit) = super::require_stream(&broker, &config, &domain).await {
        return exit;
    }
    let now = Utc::now();
    let crate::trim::Fresh {
        raw: rows,
        parsed,
        answers,
        offset,
        ..
    } = crate::trim::answers(&broker, &config, "", now).await;
    // The generation opens at the broker's instant.
    let now = crate::clock::broker_now(offset, now);
    let Some(answer) = answers.into_iter().find(|a| a.stream == domain.stream) else {
        return Class::Unreachable.exit();
    };
    // The read above already holds the live stream's state: no second read.
    if let Some(e) = &answer.stream_error {
        crate::cli::say::error(format_args!("{e}"));
        return Class::Unreachable.exit();
    }
    let Some(live_created) = answer.live_stream_created.or(answer.stream_created) else {
        crate::cli::say::error(format_args!(
            "stream {} reported no created instant",
            domain.stream
        ));
        return Class::Unreachable.exit();
    };
    let live = Live {
        created: live_created,
        last_seq: answer.last_seq,
        max_bytes: answer.max_bytes,
    };
    let raw_row = match rows.floors() {
        Ok(entries) => entries.iter().find(|e| e.key == domain.stream),
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Class::Unreachable.exit();
        }
    };
    let revision = raw_row.map(|e| e.revision);
    let row = match parsed.published(&domain.stream) {
        Ok(p) => Ok(p.map(|(p, _)| (p.generation, p.stream_created))),
        // What the unreadable row still shows of its generation, if anything.
        Err(error) => Err(reanchor::Unreadable {
            error,
            generation: raw_row
                .and_then(|e| serde_json::from_slice::<serde_json::Value>(&e.value).ok())
                .and_then(|v| v.get("generation").and_then(serde_json::Value::as_u64)),
        }),
    };
    // Every generation seen of this incarnation: the positions, and the
    // anchor and cursor the sidecar keeps beside the floors row.
    let highest_position_generation = parsed
        .positions
        .as_ref()
        .ok()
        .and_then(|p| {
            p.get(&domain.stream)?
                .values()
                .filter_map(|r| r.as_ref().ok().map(|r| r.generation))
                .max()
        })
        .max(crate::floor::recorded_generation(
            &parsed,
            &domain.stream,
            Some(live.created),
        ));
    let facts = reanchor::Facts {
        live_created: live.created,
        last_seq: live.last_seq,
        row,
        ahead: answer.not_ready == Some(NotReady::AheadOfLog),
        // The gates view's cursor past the log's end is the other mark of
        // a restored log: its gate rows name records it no longer holds.
        cursor_past: answer.gate_view.as_ref().and_then(|v| match &v.error {
            Some(GateFault::CursorPastLog { cursor, .. }) => Some(*cursor),
            _ => None,
        }),
        highest_position_generation,
    };
    let decided = reanchor::case(&facts);
    let case = decided.words(live.last_seq);

    let plan = reanchor::judge(&decided, live.created, confirm);
    let next = match plan {
        reanchor::Plan::Open { next } => next,
        reanchor::Plan::Show if cli.json => {
            let command = decided.opens().map(|_| {
                format!(
                    "crewlet retention reanchor -stream {} -confirm {}",
                    domain.stream, live.created
                )
            });
            println!(
                "{}",
                json!({"stream": domain.stream, "live_created": live.created, "case": case,
                       "opens_generation": decided.opens(), "confirm_command": command, "reanchored": false})
            );
            return plan.class().exit();
        }
        reanchor::Plan::Show => {
            println!("stream {}: live created {}", domain.stream, live.created);
            println!("case: {case}");
            if let Some(next) = decided.opens() {
                println!(
                    "to open generation {next} on it: crewlet retention reanchor -stream {} -confirm {}",
                    domain.stream, live.created
                );
            }
            return plan.class().exit();
        }
        reanchor::Plan::ConfirmMismatch => {
            crate::cli::say::refused(
                "confirm_mismatch",
                format_args!(
                    "-confirm {} is not the live stream's created {}; nothing written",
                    confirm.map(|c| c.to_string()).unwrap_or_default(),
                    live.created
                ),
            );
            return plan.class().exit();
        }
        reanchor::Plan::NothingToOpen => {
            println!("refused: {case}; nothing written");
            return plan.class().exit();
        }
    };
    let cap = u64::try_from(live.max_bytes).unwrap_or(0);
    let reserve = if domain.gate_reserve { cap / 16 } else { 0 };
    let row = json!({
        "domain": domain.name, "stream": domain.stream, "generation": next,
        "stream_created": live.created, "generation_opened_at": Instant(now), "floor": null, "trim_to": 0,
        "trim_floor_state": FloorState::NoneAtGeneration, "dry_run": !config.trim.enabled,
        "would_purge": null, "terms": [], "blocked_by": [], "held_since": null,
        "soft_ceiling_bytes": cap - reserve, "max_bytes": live.max_bytes,
        "by": super::by_name(args.by.as_deref()), "session": "", "at": Instant(now),
    });
    let body = serde_json::to_vec(&row).unwrap_or_default();
    // The anchor first, beside the floors bucket: if the row is lost later,
    // before any node reports in this generation, the anchor still says
    // the log is past generation 0. Written before the row, so a failure
    // between the two can only make a lost row read as a later generation
    // than it was (the safe direction).
    let anchor = crate::gate::Anchor {
        stream: domain.stream.clone(),
        generation: next,
        stream_created: live.created,
        generation_opened_at: Instant(now),
        by: super::by_name(args.by.as_deref()),
    };
    if let Err(e) = broker
        .kv_put(
            &config.buckets.gates,
            &crate::gate::Anchor::key(&domain.stream),
            serde_json::to_vec(&anchor).unwrap_or_default(),
        )
        .await
    {
        crate::cli::say::error(format_args!(
            "recording the generation in {}: {e}; nothing written, run it again",
            config.buckets.gates
        ));
        return Class::Unreachable.exit();
    }
    match broker
        .put_if(&config.buckets.floors, &domain.stream, body, revision)
        .await
    {
        Ok(_) => {
            if cli.json {
                println!(
                    "{}",
                    json!({"stream": domain.stream, "reanchored": true, "generation": next, "stream_created": live.created})
                );
            } else {
                println!("reanchored {}: generation {next} keyed to created {}; no floor until the first tick on it", domain.stream, live.created);
            }
            plan.class().exit()
        }
        // A compare-and-set that lost, or no answer: refused as it stands.
        Err(e) => {
            crate::cli::say::error(format_args!("{e}; nothing written, run it again"));
            Class::Refused.exit()
        }
    }
}

/// The live stream, as this command's read saw it.
struct Live {
    created: Instant,
    last_seq: u64,
    max_bytes: i64,
}
