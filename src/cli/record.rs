//! The operator's recording commands: `ack`, `hold`, `release` and
//! `backup announce`. Each validates everything before writing anything;
//! bad input is exit 2 with the flag named and nothing written.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;

use super::{AckArgs, AnnounceArgs, Cli, HoldArgs, ReleaseArgs};
use crate::config::{Config, Domain};
use crate::exit::Exit;
use crate::rows::{check_node_id, AckRow, BackupManifest, HoldKind, HoldRow, Instant, OpId};

/// The longest a hold may live: a pin nobody renews should not outlive a
/// month of retention decisions.
const HOLD_TTL_MAX: Duration = Duration::from_secs(30 * 86400);

fn bad(msg: impl std::fmt::Display) -> Exit {
    eprintln!("error: {msg}; nothing written");
    Exit::Usage
}

fn domain<'a>(config: &'a Config, stream: &str) -> Result<&'a Domain, Exit> {
    config.domain(stream).ok_or_else(|| {
        bad(format!(
            "-stream {stream:?} is not configured; configured: {}",
            super::configured(config)
        ))
    })
}

/// A sequence number from the command line: digits only.
fn seq_arg(flag: &str, text: &str) -> Result<u64, Exit> {
    text.trim().parse::<u64>().map_err(|_| {
        bad(format!(
            "-{flag} {text:?} is not a sequence number; allowed: a whole number, 0 or more"
        ))
    })
}

pub async fn ack(cli: &Cli, args: &AckArgs) -> Exit {
    let loaded = match super::load_config(cli) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let config = loaded.config;
    let d = match domain(&config, &args.stream) {
        Ok(d) => d.clone(),
        Err(e) => return e,
    };
    let position = match seq_arg("position", &args.position) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let broker = match super::connect(cli, &config).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    let state = match broker.stream_state(&d.stream).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}; nothing written");
            return Exit::Unreachable;
        }
    };
    if position > state.last_seq {
        return bad(format!(
            "-position {position} is past the log's last sequence {} on {}; acknowledge only what a copy holds",
            state.last_seq, d.stream
        ));
    }
    let row = AckRow {
        stream: d.stream.clone(),
        position,
        by: super::by_name(args.by.as_deref()),
        at: Instant(Utc::now()),
    };
    match put(
        &broker,
        &config.buckets.backups,
        &AckRow::key(&d.stream),
        &row,
    )
    .await
    {
        Ok(()) => {
            println!("acknowledged {} up to {position} (by {})", d.stream, row.by);
            Exit::Ok
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Unreachable
        }
    }
}

pub async fn hold(cli: &Cli, args: &HoldArgs) -> Exit {
    let loaded = match super::load_config(cli) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let config = loaded.config;
    let d = match domain(&config, &args.stream) {
        Ok(d) => d.clone(),
        Err(e) => return e,
    };
    let seq = match seq_arg("seq", &args.seq) {
        Ok(0) => return bad(
            "-seq 0: a hold names the first sequence its holder still needs; allowed: 1 or more",
        ),
        Ok(s) => s,
        Err(e) => return e,
    };
    let ttl = match humantime::parse_duration(args.ttl.trim()) {
        Ok(t) if t.is_zero() => return bad("-ttl 0s: a hold must live; allowed: 1s ..= 30d"),
        Ok(t) if t > HOLD_TTL_MAX => {
            return bad(format!("-ttl {}: too long; allowed: 1s ..= 30d", args.ttl))
        }
        Ok(t) => t,
        Err(_) => {
            return bad(format!(
                "-ttl {:?} is not a duration; write it like 90m, 2h or 7d (1s ..= 30d)",
                args.ttl
            ))
        }
    };
    if args.owner.trim().is_empty() {
        return bad("-owner is empty; name who holds the pin");
    }
    let id = match &args.id {
        Some(id) => match check_node_id(id) {
            Ok(()) => id.clone(),
            Err(e) => return bad(format!("-id {e}")),
        },
        None => format!("hold-{}", OpId::mint(Utc::now())),
    };
    let broker = match super::connect(cli, &config).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    let expires = Utc::now() + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::zero());
    let row = HoldRow {
        seq,
        owner: args.owner.clone(),
        kind: match args.kind {
            Some(super::KindArg::Backup) => HoldKind::Backup,
            Some(super::KindArg::Join) => HoldKind::Join,
            Some(super::KindArg::Operator) | None => HoldKind::Operator,
        },
        reason: args.reason.clone().unwrap_or_default(),
        expires_at: Instant(expires),
    };
    let key = format!("{}.{id}", d.stream);
    match put(&broker, &config.buckets.holds, &key, &row).await {
        Ok(()) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::json!({"hold_id": id, "stream": d.stream, "seq": seq, "expires_at": row.expires_at})
                );
            } else {
                println!("{id}");
                eprintln!(
                    "held {} from {seq} until {} (release: crewlet retention release -stream {} {id})",
                    d.stream, row.expires_at, d.stream
                );
            }
            Exit::Ok
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Unreachable
        }
    }
}

pub async fn release(cli: &Cli, args: &ReleaseArgs) -> Exit {
    let loaded = match super::load_config(cli) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let config = loaded.config;
    let d = match domain(&config, &args.stream) {
        Ok(d) => d.clone(),
        Err(e) => return e,
    };
    if let Err(e) = check_node_id(&args.hold_id) {
        return bad(format!("HOLD_ID {e}"));
    }
    let broker = match super::connect(cli, &config).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    let key = format!("{}.{}", d.stream, args.hold_id);
    let store = match broker.kv(&config.buckets.holds).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Unreachable;
        }
    };
    match store.get(&key).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            eprintln!(
                "refused: there is no hold {} on {}; nothing written",
                args.hold_id, d.stream
            );
            return Exit::Attention;
        }
        Err(e) => {
            eprintln!("error: reading hold {key}: {e}");
            return Exit::Unreachable;
        }
    }
    match store.delete(&key).await {
        Ok(()) => {
            println!("released {} on {}", args.hold_id, d.stream);
            Exit::Ok
        }
        Err(e) => {
            eprintln!("error: releasing {key}: {e}");
            Exit::Unreachable
        }
    }
}

pub async fn announce(cli: &Cli, args: &AnnounceArgs) -> Exit {
    let loaded = match super::load_config(cli) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let config = loaded.config;
    if let Err(e) = check_node_id(&args.node) {
        return bad(format!("-node {e}"));
    }
    if let Err(e) = check_node_id(&args.id) {
        return bad(format!("-id {e}"));
    }
    if args.position.is_empty() {
        return bad("-position is required: one STREAM=SEQ per log the backup holds");
    }
    let mut positions = BTreeMap::new();
    for p in &args.position {
        let Some((stream, seq)) = p.split_once('=') else {
            return bad(format!("-position {p:?}: write it as STREAM=SEQ"));
        };
        let d = match domain(&config, stream.trim()) {
            Ok(d) => d,
            Err(e) => return e,
        };
        let seq = match seq_arg("position", seq) {
            Ok(s) => s,
            Err(e) => return e,
        };
        positions.insert(d.stream.clone(), seq);
    }
    let now = Instant(Utc::now());
    let parse_time = |flag: &str, t: &Option<String>| -> Result<Instant, Exit> {
        match t {
            None => Ok(now),
            Some(t) => Instant::parse(t).map_err(|e| bad(format!("-{flag}: {e}"))),
        }
    };
    let taken_at = match parse_time("taken-at", &args.taken_at) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let completed_at = match parse_time("completed-at", &args.completed_at) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if completed_at < taken_at {
        return bad("-completed-at is before -taken-at");
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
    let broker = match super::connect(cli, &config).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    match put(
        &broker,
        &config.buckets.backups,
        &BackupManifest::key(&args.node, &args.id),
        &manifest,
    )
    .await
    {
        Ok(()) => {
            let note = if args.verified {
                ""
            } else {
                " (not verified: it does not count until a verified one is announced)"
            };
            println!("announced backup {} of {}{note}", args.id, args.node);
            Exit::Ok
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Unreachable
        }
    }
}

async fn put<T: serde::Serialize>(
    broker: &crate::broker::Broker,
    bucket: &str,
    key: &str,
    row: &T,
) -> Result<(), String> {
    let store = broker.kv(bucket).await?;
    let body = serde_json::to_vec(row).map_err(|e| e.to_string())?;
    store
        .put(key, body.into())
        .await
        .map(|_| ())
        .map_err(|e| format!("writing {key} to {bucket}: {e}"))
}
