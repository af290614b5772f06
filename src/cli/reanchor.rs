//! `crewlet retention reanchor -stream S [-confirm CREATED]`: adopt a
//! recreated or restored stream by opening the next generation of its floor.

use chrono::Utc;
use serde_json::json;

use super::{Cli, ReanchorArgs};
use crate::exit::Exit;
use crate::floor::{FloorState, GateFault, NotReady};
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
        eprintln!(
            "error: -stream {:?} is not a configured stream; configured: {}",
            args.stream,
            known.join(", ")
        );
        return Exit::Usage;
    };
    let confirm = match args.confirm.as_deref().map(Instant::parse).transpose() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: -confirm: {e}; pass the live stream's created exactly as `crewlet retention reanchor -stream {}` prints it", domain.stream);
            return Exit::Usage;
        }
    };
    let broker = exit_on_err!(super::connect(cli, &config).await);
    let now = Utc::now();
    let crate::trim::Fresh {
        raw: rows,
        parsed,
        answers,
        offset,
    } = crate::trim::answers(&broker, &config, "", now).await;
    // The generation opens at the broker's instant.
    let now = crate::clock::broker_now(offset, now);
    let Some(answer) = answers.into_iter().find(|a| a.stream == domain.stream) else {
        return Exit::Unreachable;
    };
    // The read above already holds the live stream's state: no second read.
    if let Some(e) = &answer.stream_error {
        eprintln!("error: {e}");
        return Exit::Unreachable;
    }
    let Some(live_created) = answer.live_stream_created.or(answer.stream_created) else {
        eprintln!(
            "error: stream {} reported no created instant",
            domain.stream
        );
        return Exit::Unreachable;
    };
    let live = Live {
        created: live_created,
        last_seq: answer.last_seq,
        max_bytes: answer.max_bytes,
    };
    let previous = match parsed.published(&domain.stream) {
        Ok(p) => p,
        // An unreadable row is replaced only by an explicit, confirmed reanchor.
        Err(e) => {
            eprintln!("warning: the current floors row cannot be read ({e}); a confirmed reanchor replaces it");
            None
        }
    };
    let revision = match &rows.floors {
        Ok(entries) => entries
            .iter()
            .find(|e| e.key == domain.stream)
            .map(|e| e.revision),
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Unreachable;
        }
    };

    let ahead = answer.not_ready == Some(NotReady::AheadOfLog);
    // The gates view's cursor past the log's end is the other mark of a
    // restored log: its gate rows name records the log no longer holds.
    let cursor_past = answer.gate_view.as_ref().and_then(|v| match &v.error {
        Some(GateFault::CursorPastLog { cursor, .. }) => Some(*cursor),
        _ => None,
    });
    let (generation, floor_created) = previous.as_ref().map_or((None, None), |(p, _)| {
        (Some(p.generation), p.stream_created)
    });
    let case = match floor_created {
        None => {
            "no floor has been published for this stream yet: the first tick adopts it".to_string()
        }
        Some(c) if c != live.created => format!(
            "recreated: the floor (generation {}) belongs to {c}",
            generation.unwrap_or(0)
        ),
        Some(_) if ahead => format!(
            "restored: positions of generation {} are past the log's end ({})",
            generation.unwrap_or(0),
            live.last_seq
        ),
        Some(_) if cursor_past.is_some() => format!(
            "restored: the gates view's cursor ({}) is past the log's end ({})",
            cursor_past.unwrap_or_default(),
            live.last_seq
        ),
        Some(_) => {
            "current: the floor already belongs to this stream; nothing to reanchor".to_string()
        }
    };
    let adoptable =
        floor_created.is_some_and(|c| c != live.created) || ahead || cursor_past.is_some();

    let Some(confirm) = confirm else {
        println!("stream {}: live created {}", domain.stream, live.created);
        println!("case: {case}");
        if adoptable {
            println!(
                "to open generation {} on it: crewlet retention reanchor -stream {} -confirm {}",
                generation.unwrap_or(0) + 1,
                domain.stream,
                live.created
            );
        }
        return Exit::Attention;
    };
    if confirm != live.created {
        eprintln!(
            "refused: -confirm {confirm} is not the live stream's created {}; nothing written",
            live.created
        );
        return Exit::Attention;
    }
    if !adoptable {
        println!("refused: {case}; nothing written");
        return Exit::Attention;
    }
    let next = generation.unwrap_or(0) + 1;
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
    match broker
        .put_if(&config.buckets.floors, &domain.stream, body, revision)
        .await
    {
        Ok(_) => {
            println!("reanchored {}: generation {next} keyed to created {}; no floor until the first tick on it", domain.stream, live.created);
            Exit::Ok
        }
        Err(e) => {
            eprintln!("error: {e}; nothing written, run it again");
            Exit::Attention
        }
    }
}

/// The live stream, as this command's read saw it.
struct Live {
    created: Instant,
    last_seq: u64,
    max_bytes: i64,
}
