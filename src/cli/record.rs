//! The operator's recording commands: `ack`, `hold`, `release` and
//! `backup announce`. Each validates everything before writing anything;
//! bad input is exit 2 with the flag named and nothing written.
//!
//! Each command returns `Result<Exit, Exit>` so that every early refusal is
//! a `?`; both sides are exit codes.

use std::collections::BTreeMap;

use chrono::Utc;

use super::{AckArgs, AnnounceArgs, Cli, HoldArgs, HoldsArgs, KindArg, ReleaseArgs};
use crate::broker::Broker;
use crate::config::{Config, Domain};
use crate::exit::Exit;
use crate::rows::{check_node_id, BackupManifest, HoldKind, HoldRow, Timestamp};

type Outcome = Result<Exit, Exit>;

fn bad(msg: impl std::fmt::Display) -> Exit {
    crate::cli::say::error(format_args!("{msg}; nothing written"));
    Exit::Usage
}

fn unreachable(msg: impl std::fmt::Display) -> Exit {
    crate::cli::say::error(format_args!("{msg}"));
    Exit::Unreachable
}

/// The configuration and the configured domain `stream` names.
fn config_and_domain(cli: &Cli, stream: &str) -> Result<(Config, Domain), Exit> {
    let config = super::load_config(cli)?.config;
    let d = super::domain_named(&config, stream).map_err(bad)?;
    Ok((config, d))
}

/// A sequence number from the command line: digits only.
/// A sequence given for `-flag`, or the error that names it and what is
/// `allowed` there.
fn seq_arg(flag: &str, text: &str, allowed: &str) -> Result<u64, Exit> {
    text.trim().parse::<u64>().map_err(|_| {
        bad(format!(
            "-{flag} {text:?} is not a sequence number; allowed: {allowed}"
        ))
    })
}

const POSITION: &str = "a whole number, 0 or more";

async fn put<T: serde::Serialize>(
    broker: &Broker,
    bucket: &str,
    key: &str,
    row: &T,
) -> Result<(), Exit> {
    let body = serde_json::to_vec(row).map_err(unreachable)?;
    broker
        .kv_put(bucket, key, body)
        .await
        .map(|_| ())
        .map_err(unreachable)
}

pub async fn ack(cli: &Cli, args: &AckArgs) -> Outcome {
    use crate::exit::Outcome as _;
    use crate::gesture::ack::{self, AckError, Facts};
    let (config, d) = config_and_domain(cli, &args.stream)?;
    let position = seq_arg("position", &args.position, POSITION)?;
    let by = super::by_name(args.by.as_deref());
    let ask = ack::check(&d, position, &by, args.lower);
    // Under engine it is refused before connecting: nothing is read.
    let done = match Facts::without_broker(&config) {
        Some(facts) => ack::judge(&ask, &facts),
        None => {
            let broker = super::connect(&config).await?;
            ack::acknowledge(&broker, &config, &ask).await
        }
    };
    match done {
        Ok(done) => {
            if cli.json {
                println!("{}", ack::json(&done));
            } else {
                println!("{}", ack::text(&done));
            }
            Ok(Exit::Ok)
        }
        Err(AckError::PastTail {
            position,
            last_seq,
            stream,
        }) => Err(bad(format!(
            "-position {position} is past the log's last sequence {last_seq} on {stream}; acknowledge only what a copy holds"
        ))),
        Err(e @ AckError::Unreachable(_)) => Err(unreachable(e.to_string())),
        Err(e) => {
            crate::cli::say::refused(e.code(), &e);
            Ok(e.exit())
        }
    }
}

pub async fn hold(cli: &Cli, args: &HoldArgs) -> Outcome {
    use crate::gesture::hold;
    let (config, d) = config_and_domain(cli, &args.stream)?;
    let asked = hold::Asked {
        seq: seq_arg("seq", &args.seq, "a whole number, 1 or more")?,
        ttl: &args.ttl,
        owner: &args.owner,
        kind: match args.kind {
            Some(KindArg::Backup) => HoldKind::Backup,
            Some(KindArg::Join) => HoldKind::Join,
            Some(KindArg::Operator) | None => HoldKind::Operator,
        },
        reason: args.reason.as_deref(),
        id: args.id.as_deref(),
        replace: args.replace,
    };
    let ask = hold::check(&d.stream, &asked, Utc::now()).map_err(bad)?;
    let broker = super::connect(&config).await?;
    super::require_stream(&broker, &config, &d).await?;
    super::require_bucket(&broker, &config.buckets.holds).await?;
    let (state, clock) = broker
        .stream_state_at(&d.stream)
        .await
        .map_err(|e| unreachable(format!("{e}; nothing written")))?;
    let row = hold::judge(&ask, state.last_seq, clock.broker).map_err(bad)?;
    let placed = hold::Placement {
        stream: &d.stream,
        id: &ask.id,
        row: &row,
        replace: ask.replace,
    };
    let outcome = hold::place(&broker, &config, &placed, !args.no_wait).await;
    print_hold(cli, &d.stream, &ask.id, &row, &outcome);
    Ok(outcome.exit())
}

fn print_hold(
    cli: &Cli,
    stream: &str,
    id: &str,
    row: &HoldRow,
    outcome: &crate::gesture::hold::Placed,
) {
    use crate::gesture::hold::Placed;
    if cli.json {
        let mut v = serde_json::json!({"hold_id": id, "stream": stream, "seq": row.seq, "expires_at": row.expires_at, "outcome": outcome.code()});
        if let Placed::Held { floor, .. } = outcome {
            v["floor"] = serde_json::json!(floor);
        }
        v["message"] = serde_json::json!(outcome.words(stream, id, row));
        println!("{v}");
        return;
    }
    match outcome {
        Placed::Held { .. } | Placed::Unconfirmed { .. } => {
            println!("{id}");
            eprintln!(
                "{} (release: crewlet retention release -stream {stream} {id})",
                outcome.words(stream, id, row)
            );
        }
        _ => eprintln!("{}", outcome.words(stream, id, row)),
    }
}

pub async fn holds(cli: &Cli, args: &HoldsArgs) -> Outcome {
    let config = super::load_config(cli)?.config;
    let only = match &args.stream {
        Some(s) => Some(config.domain(s).map(|d| d.stream.clone()).ok_or_else(|| {
            bad(format!(
                "-stream {s:?} is not configured; configured: {}",
                super::configured(&config)
            ))
        })?),
        None => None,
    };
    let broker = super::connect(&config).await?;
    super::require_bucket(&broker, &config.buckets.holds).await?;
    let entries = broker
        .read_bucket(&config.buckets.holds)
        .await
        .map_err(unreachable)?;
    // Live or expired on the broker's clock, which decides it.
    let mut now = Utc::now();
    if let Some(d) = config.domains.first() {
        if let Ok((_, clock)) = broker.stream_state_at(&d.stream).await {
            now = clock.broker;
        }
    }
    let mut rows = Vec::new();
    for e in &entries {
        let stream = e.key.split_once('.').map_or(e.key.as_str(), |(s, _)| s);
        if only.as_deref().is_some_and(|o| o != stream) {
            continue;
        }
        let id = e.key.split_once('.').map_or("", |(_, i)| i);
        match HoldRow::parse(&e.key, &e.value) {
            Ok((_, h)) => rows.push(serde_json::json!({
                "stream": stream, "id": id, "seq": h.seq, "owner": h.owner,
                "kind": h.kind, "reason": h.reason, "expires_at": h.expires_at,
                "state": if h.expires_at.0 > now { "live" } else { "expired" },
            })),
            Err(err) => rows.push(serde_json::json!({
                "stream": stream, "id": id, "state": "malformed", "error": err.to_string(),
            })),
        }
    }
    // Holds the sidecar's memory carries (their rows lost with a
    // recreated holds bucket): listed, so that the release a remedy names
    // can be found here.
    if let Ok(floor_entries) = broker.read_bucket(&config.buckets.floors).await {
        let floors = crate::floor::parsed::Floors::of(&floor_entries);
        for d in &config.domains {
            if only.as_deref().is_some_and(|o| o != d.stream) {
                continue;
            }
            let Some(Ok(memory)) = floors.remembered(&d.stream) else {
                continue;
            };
            let seq = memory.min_hold.map_or(1, |m| m.saturating_add(1));
            for (id, h) in &memory.membership.holds {
                let key = format!("{}.{id}", d.stream);
                if entries.iter().any(|e| e.key == key) || !h.kept_at(now) {
                    continue;
                }
                rows.push(serde_json::json!({
                    "stream": d.stream, "id": id, "seq": seq, "owner": null,
                    "kind": null, "reason": "carried by the sidecar's memory (its row was lost with the holds bucket)",
                    "expires_at": h.expires_at, "state": "carried",
                }));
            }
        }
    }
    if cli.json {
        println!("{}", serde_json::json!({ "holds": rows }));
        return Ok(Exit::Ok);
    }
    if rows.is_empty() {
        println!("no holds");
        return Ok(Exit::Ok);
    }
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".into(),
        other => other.to_string(),
    };
    let mut table = vec![[
        "STREAM", "ID", "SEQ", "OWNER", "KIND", "EXPIRES", "STATE", "REASON",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect::<Vec<_>>()];
    for r in &rows {
        table.push(
            [
                "stream",
                "id",
                "seq",
                "owner",
                "kind",
                "expires_at",
                "state",
                "reason",
            ]
            .iter()
            .map(|k| match (k, r.get(*k)) {
                (&"reason", None) => r.get("error").map(text).unwrap_or_default(),
                (_, Some(v)) => text(v),
                (_, None) => "-".into(),
            })
            .collect(),
        );
    }
    print!("{}", super::columns(&table));
    Ok(Exit::Ok)
}

pub async fn release(cli: &Cli, args: &ReleaseArgs) -> Outcome {
    let (config, d) = config_and_domain(cli, &args.stream)?;
    check_node_id(&args.hold_id).map_err(|e| bad(format!("HOLD_ID {e}")))?;
    let broker = super::connect(&config).await?;
    let released = crate::gesture::hold::lift(&broker, &config, &d.stream, &args.hold_id).await;
    let words = released.words(&d.stream, &args.hold_id);
    match &released {
        crate::gesture::hold::Released::Released if cli.json => println!(
            "{}",
            serde_json::json!({"released": true, "stream": d.stream, "hold_id": args.hold_id})
        ),
        crate::gesture::hold::Released::ReleasedCarried if cli.json => println!(
            "{}",
            serde_json::json!({"released": true, "carried": true, "stream": d.stream, "hold_id": args.hold_id})
        ),
        crate::gesture::hold::Released::Released
        | crate::gesture::hold::Released::ReleasedCarried => println!("{words}"),
        crate::gesture::hold::Released::Failed(_) => return Err(unreachable(words)),
        refused => {
            crate::cli::say::refused(refused.code().unwrap_or_default(), format_args!("{words}"))
        }
    }
    Ok(released.class().exit())
}

pub async fn announce(cli: &Cli, args: &AnnounceArgs) -> Outcome {
    let config = super::load_config(cli)?.config;
    check_node_id(&args.node).map_err(|e| bad(format!("-node {e}")))?;
    check_node_id(&args.id).map_err(|e| bad(format!("-id {e}")))?;
    if args.position.is_empty() {
        return Err(bad(
            "-position is required: one STREAM=SEQ per log the backup holds",
        ));
    }
    let mut positions = BTreeMap::new();
    for p in &args.position {
        let (stream, seq) = p
            .split_once('=')
            .ok_or_else(|| bad(format!("-position {p:?}: write it as STREAM=SEQ")))?;
        let d = config.domain(stream.trim()).ok_or_else(|| {
            bad(format!(
                "-position {p:?}: {stream:?} is not configured; configured: {}",
                super::configured(&config)
            ))
        })?;
        if positions
            .insert(d.stream.clone(), seq_arg("position", seq, POSITION)?)
            .is_some()
        {
            return Err(bad(format!(
                "-position names {} twice; give one STREAM=SEQ per log",
                d.stream
            )));
        }
    }
    let now = Timestamp(Utc::now());
    let parse_time = |flag: &str, t: &Option<String>| -> Result<Timestamp, Exit> {
        match t {
            None => Ok(now),
            Some(t) => Timestamp::parse(t).map_err(|e| bad(format!("-{flag}: {e}"))),
        }
    };
    let taken_at = parse_time("taken-at", &args.taken_at)?;
    let completed_at = parse_time("completed-at", &args.completed_at)?;
    if completed_at < taken_at {
        return Err(bad("-completed-at is before -taken-at"));
    }
    let owner = args
        .owner
        .clone()
        .or_else(|| config.retention.backup_owner.clone())
        .unwrap_or_else(|| super::by_name(args.by.as_deref()));
    let manifest = BackupManifest {
        id: args.id.clone(),
        node: args.node.clone(),
        taken_at,
        completed_at: Some(completed_at),
        verified: args.verified,
        owner,
        positions,
    };
    let broker = super::connect(&config).await?;
    // A missing stream is exit 1 naming the command that creates it, not
    // the broker gone (exit 3).
    for stream in manifest.positions.keys() {
        if let Some(d) = config.domains.iter().find(|d| &d.stream == stream) {
            super::require_stream(&broker, &config, d).await?;
        }
    }
    super::require_bucket(&broker, &config.buckets.backups).await?;
    // A backup cannot hold what the log never had (as ack refuses it).
    for (stream, seq) in &manifest.positions {
        let state = broker
            .stream_state(stream)
            .await
            .map_err(|e| unreachable(format!("{e}; nothing written")))?;
        if *seq > state.last_seq {
            return Err(bad(format!(
                "-position {stream}={seq} is past the log's last sequence {}; a backup holds only what the log had",
                state.last_seq
            )));
        }
    }
    let known = broker
        .read_bucket(&config.buckets.positions)
        .await
        .map(|rows| {
            rows.iter()
                .any(|e| e.key.split_once('.').is_some_and(|(_, n)| n == args.node))
        })
        .unwrap_or(true);
    if !known {
        eprintln!(
            "warning: no log has a position from node {}; announced anyway (check the name)",
            args.node
        );
    }
    put(
        &broker,
        &config.buckets.backups,
        &BackupManifest::key(&args.node, &args.id),
        &manifest,
    )
    .await?;
    let note = if args.verified {
        ""
    } else {
        " (not verified: it does not count until a verified one is announced)"
    };
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"announced": true, "key": BackupManifest::key(&args.node, &args.id), "manifest": manifest})
        );
    } else {
        println!("announced backup {} of {}{note}", args.id, args.node);
    }
    Ok(Exit::Ok)
}
