//! `crewlet node check [NODE…]` and `crewlet row check --kind KIND
//! [FILE|-]`: for node implementers, a node's rows judged by the sidecar's
//! own parser, and what the fleet still needs from the node before
//! anything can be trimmed (docs/contract.md, Checking a node).

use std::io::Read;

use chrono::Utc;
use serde_json::json;

use super::tree::{NodeCheckArgs, RowCheckArgs};
use super::Cli;
use crate::conformance::{self, Kind, RowSeen};
use crate::exit::Exit;

/// `crewlet node check`: exit 0 when every row reads and nothing is
/// needed of any node checked, 1 otherwise.
pub async fn node(cli: &Cli, args: &NodeCheckArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let config = loaded.config;
    let broker = exit_on_err!(super::connect(&config).await);
    let b = &config.buckets;
    let mut rows = Vec::new();
    for (bucket, kind) in [
        (&b.presence, Kind::Presence),
        (&b.positions, Kind::Position),
        (&b.holds, Kind::Hold),
        (&b.backups, Kind::BackupManifest),
        (&b.snapshots, Kind::Snapshot),
    ] {
        if let Err(exit) = super::require_bucket(&broker, bucket).await {
            return exit;
        }
        let entries = match broker.read_bucket(bucket).await {
            Ok(e) => e,
            Err(e) => {
                crate::cli::say::error(format_args!("{e}"));
                return Exit::Unreachable;
            }
        };
        for e in entries {
            let kind = if kind == Kind::BackupManifest && e.key.starts_with(crate::rows::ACK_PREFIX)
            {
                Kind::BackupAck
            } else {
                kind
            };
            rows.push(RowSeen {
                kind,
                bucket: bucket.clone(),
                key: e.key,
                value: e.value,
            });
        }
    }
    let fresh = crate::tick::answers(&broker, &config, "", Utc::now()).await;
    let owned = conformance::by_node(rows);
    let nodes = if args.nodes.is_empty() {
        owned.keys().cloned().collect()
    } else {
        args.nodes.clone()
    };
    let checks: Vec<conformance::NodeCheck> = nodes
        .iter()
        .map(|n| {
            let own = owned.get(n).map_or(&[][..], Vec::as_slice);
            conformance::check(n, own, &fresh.answers)
        })
        .collect();
    let passes = checks.iter().all(|c| c.passes());
    if cli.json {
        println!("{}", json!({"nodes": checks, "passes": passes}));
    } else if checks.is_empty() {
        println!("no node has written a row yet");
    } else {
        for c in &checks {
            println!("{}", c.node);
            for r in &c.rows {
                match &r.refused {
                    None => println!("  {} {}: reads", r.bucket, r.key),
                    Some(why) => println!("  {} {}: refused: {why}", r.bucket, r.key),
                }
            }
            if c.needs.is_empty() {
                println!("  the fleet needs nothing more from it");
            } else {
                println!("  what the fleet still needs from it before anything can be trimmed:");
                for n in &c.needs {
                    println!("    - {n}");
                }
            }
        }
    }
    if passes && !checks.is_empty() {
        Exit::Ok
    } else {
        Exit::Attention
    }
}

/// `crewlet row check`: exit 0 when the sidecar reads the row, 1 when it
/// refuses it (naming the field and the rule), 2 for bad usage.
pub fn row(cli: &Cli, args: &RowCheckArgs) -> Exit {
    let Some(kind) = Kind::named(&args.kind) else {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        crate::cli::say::error(format_args!(
            "--kind {:?} is not a row kind; allowed: {}",
            args.kind,
            names.join(", ")
        ));
        return Exit::Usage;
    };
    let mut text = Vec::new();
    let read = match args.file.as_deref() {
        None | Some("-") => std::io::stdin().read_to_end(&mut text).map(drop),
        Some(path) => std::fs::read(path).map(|t| text = t),
    };
    if let Err(e) = read {
        crate::cli::say::error(format_args!(
            "{}: {e}",
            args.file.as_deref().unwrap_or("stdin")
        ));
        return Exit::Usage;
    }
    let key = match (
        &args.key,
        serde_json::from_slice::<serde_json::Value>(&text),
    ) {
        (Some(k), _) => k.clone(),
        (None, Ok(v)) => match kind.key_of(&v) {
            Some(k) => k,
            None if kind == Kind::Hold => {
                crate::cli::say::error("--key STREAM.HOLD_ID is required for a hold: its body names neither its stream nor its id");
                return Exit::Usage;
            }
            // The fields the key is made of are missing: the parser says
            // which, under a key that names the kind.
            None => format!("{}-row", kind.name()),
        },
        (None, Err(_)) => format!("{}-row", kind.name()),
    };
    let verdict = kind.judge(&key, &text);
    if cli.json {
        println!(
            "{}",
            json!({"kind": kind.name(), "key": key, "valid": verdict.is_ok(),
                   "refused": verdict.as_ref().err().map(|e| e.to_string())})
        );
    } else {
        match &verdict {
            Ok(()) => println!("valid: a {} row under key {key}", kind.name()),
            Err(e) => println!("refused: {e}"),
        }
    }
    if verdict.is_ok() {
        Exit::Ok
    } else {
        Exit::Attention
    }
}
