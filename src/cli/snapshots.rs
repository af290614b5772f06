//! `crewlet retention snapshots [--json]`: per node, per stream, what each
//! node can donate: artefact position, age, generation, verified, and why
//! it cannot take a new one.

use chrono::Utc;
use serde_json::json;

use super::Cli;
use crate::exit::Exit;
use crate::human;
use crate::rows::SnapshotRow;

pub async fn run(cli: &Cli) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let config = loaded.config;
    let broker = exit_on_err!(super::connect(&config).await);
    if let Err(exit) = super::require_bucket(&broker, &config.buckets.snapshots).await {
        return exit;
    }
    let entries = match broker.read_bucket(&config.buckets.snapshots).await {
        Ok(e) => e,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Unreachable;
        }
    };
    let now = Utc::now();
    let mut rows = Vec::new();
    let mut text = vec![vec![
        "NODE".to_string(),
        "STREAM".into(),
        "POSITION".into(),
        "AGE".into(),
        "GEN".into(),
        "VERIFIED".into(),
        "SKIP".into(),
    ]];
    let mut malformed = false;
    for e in &entries {
        match SnapshotRow::parse(&e.key, &e.value) {
            Err(err) => {
                malformed = true;
                rows.push(json!({"node": e.key, "error": err.to_string()}));
                text.push(vec![e.key.clone(), format!("unreadable: {err}")]);
            }
            Ok(row) => {
                let skip = serde_json::to_value(row.skip_reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let skip_text = if skip.is_empty() {
                    "-".to_string()
                } else {
                    skip.clone()
                };
                let artefacts: Vec<_> = row
                    .artefacts
                    .iter()
                    .map(|(stream, a)| {
                        let age = now.signed_duration_since(a.taken_at.0).to_std().unwrap_or_default();
                        text.push(vec![
                            row.node.clone(),
                            stream.clone(),
                            a.position.to_string(),
                            human::age(age),
                            a.generation.to_string(),
                            if a.verified { "yes".into() } else { "no".into() },
                            skip_text.clone(),
                        ]);
                        json!({"stream": stream, "position": a.position, "age_secs": age.as_secs(), "generation": a.generation,
                               "verified": a.verified, "taken_at": a.taken_at})
                    })
                    .collect();
                if row.artefacts.is_empty() {
                    text.push(vec![
                        row.node.clone(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        skip_text.clone(),
                    ]);
                }
                rows.push(json!({"node": row.node, "updated_at": row.updated_at, "skip_reason": skip, "artefacts": artefacts}));
            }
        }
    }
    if cli.json {
        println!("{}", json!({"nodes": rows}));
    } else if entries.is_empty() {
        println!("no node has published a snapshot row");
    } else {
        print!("{}", super::columns(&text));
    }
    if malformed {
        Exit::Attention
    } else {
        Exit::Ok
    }
}
