//! `crewlet retention init`: create every bucket of the contract.

use super::Cli;
use crate::broker::kv::Ensured;
use crate::buckets::{contract_buckets, differences};
use crate::config::Config;
use crate::exit::Exit;

/// Before a missing positions or holds bucket is created empty: the pins
/// the published floors rows carry over it (docs/trim-floor.md, A lost
/// bucket lifts no pin), each a sentence saying how it ends. Nothing when
/// neither bucket is missing or the floors cannot be read (then nothing
/// is carried either: the trim waits on the unreadable floors row).
async fn carried_over(broker: &crate::broker::Broker, config: &Config) -> Vec<String> {
    let positions = matches!(
        broker.bucket_settings(&config.buckets.positions).await,
        Ok(None)
    );
    let holds = matches!(
        broker.bucket_settings(&config.buckets.holds).await,
        Ok(None)
    );
    if !positions && !holds {
        return Vec::new();
    }
    let Ok(entries) = broker.read_bucket(&config.buckets.floors).await else {
        return Vec::new();
    };
    let floors = crate::floor::parsed::Floors::of(&entries);
    let rows: Vec<(String, crate::floor::members::Remembered)> = floors
        .rows
        .keys()
        .filter_map(|stream| Some((stream.clone(), floors.remembered(stream)?.ok()?)))
        .collect();
    crate::floor::carried::carried_over(&rows, positions, holds, chrono::Utc::now())
        .iter()
        .map(crate::floor::carried::CarriedOver::words)
        .collect()
}

pub async fn run(cli: &Cli) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let broker = exit_on_err!(super::connect(&loaded.config).await);
    let carried = carried_over(&broker, &loaded.config).await;
    for c in &carried {
        if !cli.json {
            println!("carried  {c}");
        }
    }
    let mut failed = false;
    let mut rows = Vec::new();
    for spec in contract_buckets(&loaded.config) {
        match broker.ensure_bucket(&spec).await {
            Ok(Ensured::Created) => {
                rows.push(serde_json::json!({"role": spec.role, "bucket": spec.name, "outcome": "created", "warnings": []}));
                if !cli.json {
                    println!("created  {:<10} {}", spec.role, spec.name);
                }
            }
            Ok(Ensured::Existed(have)) => {
                let diffs = differences(&spec, &have);
                if !cli.json {
                    println!("exists   {:<10} {}", spec.role, spec.name);
                    for d in &diffs {
                        eprintln!("warning: {d}; init leaves existing buckets as they are (edit the bucket's stream KV_{} to change it)", spec.name);
                    }
                }
                rows.push(serde_json::json!({"role": spec.role, "bucket": spec.name, "outcome": "exists", "warnings": diffs}));
            }
            Err(e) => {
                failed = true;
                crate::cli::say::error(format_args!("{e}"));
                rows.push(serde_json::json!({"role": spec.role, "bucket": spec.name, "outcome": "failed", "error": e.to_string()}));
            }
        }
    }
    // The archives' object stores, each once, with the buckets' replicas.
    let mut stores: Vec<&str> = loaded
        .config
        .domains
        .iter()
        .filter_map(|d| d.archive.as_ref()?.object_store.as_deref())
        .collect();
    stores.sort_unstable();
    stores.dedup();
    for bucket in stores {
        let replicas = loaded.config.buckets.replicas;
        match broker.ensure_object_store(bucket, replicas).await {
            Ok(created) => {
                let outcome = if created { "created" } else { "exists" };
                if !cli.json {
                    println!("{outcome:<8} {:<10} {bucket}", "archive");
                }
                rows.push(serde_json::json!({"role": "archive", "bucket": bucket, "outcome": outcome, "warnings": []}));
            }
            Err(e) => {
                failed = true;
                crate::cli::say::error(format_args!("{e}"));
                rows.push(serde_json::json!({"role": "archive", "bucket": bucket, "outcome": "failed", "error": e.to_string()}));
            }
        }
    }
    // The domains' logs are the fleet's own; init creates none, but says
    // which are missing and how to create them.
    let mut missing = Vec::new();
    for d in &loaded.config.domains {
        if let Ok(None) = broker.stream_config(&d.stream).await {
            let command = crate::stream_check::create_command(d, loaded.config.buckets.replicas);
            eprintln!(
                "warning: domain {}: stream {} does not exist; the trim reads nothing on it until it does: {command}",
                d.name, d.stream
            );
            missing
                .push(serde_json::json!({"domain": d.name, "stream": d.stream, "create": command}));
        }
    }
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"buckets": rows, "missing_streams": missing, "carried": carried})
        );
    }
    if failed {
        Exit::Unreachable
    } else {
        Exit::Ok
    }
}
