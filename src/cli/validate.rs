//! `crewlet validate`: every offline problem, then (when the file is valid
//! and the broker answers) every stream-side problem, one line each.

use serde_json::json;

use super::Cli;
use crate::broker::{self, streams::StreamRead};
use crate::config::{self, Config, Problem, Severity, SourceMap};
use crate::exit::Exit;
use crate::stream_check;

/// Whether the broker checks ran, and if not why.
enum BrokerChecks {
    Ran,
    Skipped(String),
}

pub async fn run(cli: &Cli) -> Exit {
    let (path, text) = exit_on_err!(super::read_config_text(cli));
    let file = path.display().to_string();
    let checked = config::check(&text);
    let mut problems = checked.problems.clone();
    let mut server = None;
    let (broker_checks, unreachable) = match &checked.config {
        None => (
            BrokerChecks::Skipped("fix the errors above first".into()),
            false,
        ),
        Some(config) => {
            let mut config = config.clone();
            server = Some(exit_on_err!(super::apply_connection(
                cli,
                checked.has_nats_section,
                &mut config
            )));
            broker_problems(&config, &checked.source, &mut problems).await
        }
    };

    let errors = problems.iter().filter(|p| p.is_error()).count();
    let warnings = problems.len() - errors;
    if cli.json {
        let rows: Vec<_> = problems
            .iter()
            .map(|p| {
                json!({
                    "severity": if p.severity == Severity::Error { "error" } else { "warning" },
                    "file": file, "line": p.line, "field": p.field,
                    "code": p.code, "message": p.message,
                })
            })
            .collect();
        let (ran, skipped) = match &broker_checks {
            BrokerChecks::Ran => (true, None),
            BrokerChecks::Skipped(why) => (false, Some(why.clone())),
        };
        let server = server
            .as_ref()
            .map(|s| json!({"url": s.url, "source": s.source.to_string()}));
        let limits: Vec<&str> = if ran {
            vec![crate::report::INVISIBLE_COPIES
                .trim()
                .trim_start_matches("note: ")]
        } else {
            vec![]
        };
        let out = json!({"file": file, "errors": errors, "warnings": warnings, "server": server,
                         "broker_checked": ran, "broker_skipped": skipped, "problems": rows,
                         "limits": limits});
        println!("{out}");
    } else {
        for p in &problems {
            println!("{}", p.render(&file));
        }
        if let Some(server) = &server {
            println!("server: {server}");
        }
        match &broker_checks {
            BrokerChecks::Skipped(why) => println!("note: broker checks skipped: {why}"),
            // What no check here can see, said every time.
            BrokerChecks::Ran => print!("{}", crate::report::INVISIBLE_COPIES.trim_start()),
        }
        let domains = checked.config.as_ref().map_or(0, |c| c.domains.len());
        if errors == 0 {
            println!("{file}: valid ({domains} domain(s), {warnings} warning(s))");
        } else {
            println!("{file}: {errors} error(s), {warnings} warning(s)");
        }
    }
    if errors > 0 {
        Exit::Usage
    } else if unreachable {
        Exit::Unreachable
    } else {
        Exit::Ok
    }
}

/// Runs the stream checks; returns what happened and whether the broker was
/// unreachable.
async fn broker_problems(
    config: &Config,
    source: &SourceMap,
    problems: &mut Vec<Problem>,
) -> (BrokerChecks, bool) {
    let Some(url) = super::target_url(config) else {
        return (
            BrokerChecks::Skipped(
                "nats.url is `embedded`: the sidecar creates its own streams on its own broker"
                    .into(),
            ),
            false,
        );
    };
    let b = match broker::connect(
        &url,
        &config.nats,
        &format!("crewlet-validate/{}", config.node.id),
    )
    .await
    {
        Ok(b) => b,
        // Refused credentials, unreadable key material or a bad URL are the
        // file's problem (exit 2), not the network's (exit 3).
        Err(e) if e.is_configuration() => {
            let mut p = Problem::error("nats", e.to_string());
            p.line = source.line_of("nats");
            problems.push(p);
            // The error above says why; said once.
            return (
                BrokerChecks::Skipped("no connection (the nats error above)".into()),
                false,
            );
        }
        Err(e) => return (BrokerChecks::Skipped(e.to_string()), true),
    };
    let unsafe_ok = config.retention.allow_unsafe_limits;
    let mut found = Vec::new();
    // The buckets nodes write must exist before any node can report: a
    // sidecar's own buckets (floors, duty, gates) are created by `run` and
    // the gestures, so their absence is not a problem.
    let servers = b.cluster_servers();
    for spec in crate::buckets::contract_buckets(config) {
        let (field, name) = (spec.role, spec.name.as_str());
        let node_written = !spec.sidecar_owned;
        match b.bucket_settings(name).await {
            Ok(Some(have)) => {
                // The duty bucket expires the lease by its own max_age: one
                // shorter than three of this configuration's ticks would
                // leave this sidecar's fences too little time (or none) to
                // purge (docs/runbook.md, config_drift).
                // A presence bucket without a TTL keeps a crashed node's
                // lease for ever (a node's client created it with its usual
                // create-or-open): that node pins as live, and `evict`
                // refuses it.
                if name == config.buckets.presence && have.max_age.is_zero() {
                    found.push(Problem::error(
                        "buckets.presence",
                        format!(
                            "bucket {name} has no TTL (max_age 0): a node that stops stays live for ever; set it to retention.presence_ttl ({}): nats stream edit KV_{name} --max-age {}",
                            config.retention.presence_ttl,
                            config.retention.presence_ttl
                        ),
                    ));
                }
                let ttl = config.retention.duty_ttl();
                if name == config.buckets.duty && !have.max_age.is_zero() && have.max_age < ttl {
                    found.push(Problem::error(
                        "retention.tick",
                        format!(
                            "the duty bucket {name} keeps the lease for {} (max_age), less than three of this configuration's ticks ({}): this sidecar's fences would grant {} to purge; give every sidecar the same tick, or set the bucket's max_age: nats stream edit KV_{name} --max-age {}",
                            crate::config::Dur(have.max_age),
                            crate::config::Dur(ttl),
                            crate::config::Dur(crate::config::fence_window(ttl, have.max_age, config.retention.fence_margin())),
                            crate::config::Dur(ttl)
                        ),
                    ));
                }
                found.extend(stream_check::replica_warning(
                    &format!("buckets.{field}"),
                    &format!("bucket {name}"),
                    &format!("KV_{name}"),
                    have.replicas,
                    servers,
                ))
            }
            Ok(None) if !node_written => {}
            Ok(None) => found.push(Problem::error(
                format!("buckets.{field}"),
                format!("bucket {name} does not exist on the broker at {}; nodes cannot write their rows until it does: run crewlet retention init", b.url),
            )),
            Err(e) => found.push(Problem::error(format!("buckets.{field}"), e.to_string())),
        }
    }
    for (i, d) in config.domains.iter().enumerate() {
        match b.stream_facts(&d.stream).await {
            Ok(StreamRead::Found(facts)) => {
                found.extend(stream_check::check_domain_stream(i, d, &facts, unsafe_ok));
                found.extend(stream_check::replica_warning(
                    &format!("domains[{i}].stream"),
                    &format!("stream {}", d.stream),
                    &d.stream,
                    facts.replicas,
                    servers,
                ));
                if let Some(consumer) = &d.feed_consumer {
                    match b.consumer_exists(&d.stream, consumer).await {
                        Ok(true) => {}
                        Ok(false) => found.push(Problem::error(
                            format!("domains[{i}].feed_consumer"),
                            format!("consumer {consumer:?} does not exist on stream {}; the feed_ack_floor term would be unreadable and block the trim", d.stream),
                        )),
                        Err(e) => found.push(Problem::error(format!("domains[{i}].feed_consumer"), e.to_string())),
                    }
                }
                // A named consumer that does not exist makes replica_floor
                // unreadable: the log would never be trimmed.
                for (j, consumer) in d.replicas.consumers.iter().enumerate() {
                    match b.consumer_exists(&d.stream, consumer).await {
                        Ok(true) => {}
                        Ok(false) => found.push(Problem::error(
                            format!("domains[{i}].replicas.consumers[{j}]"),
                            format!("consumer {consumer:?} does not exist on stream {}; the replica_floor term would be unreadable and block the trim: create it (the system that reads through it makes it) or take it out of the list", d.stream),
                        )),
                        Err(e) => found.push(Problem::error(format!("domains[{i}].replicas.consumers[{j}]"), e.to_string())),
                    }
                }
            }
            Ok(StreamRead::Missing) => found.push(Problem::error(
                format!("domains[{i}].stream"),
                format!(
                    "stream {} does not exist on the broker at {}; create it ({}) or fix the name",
                    d.stream,
                    b.url,
                    crate::stream_check::create_command(d, config.buckets.replicas)
                ),
            )),
            Err(e) => found.push(Problem::error(
                format!("domains[{i}].stream"),
                e.to_string(),
            )),
        }
    }
    // Copies of the logs (docs/trim-floor.md, Replicas): one made the older
    // way, through an ephemeral consumer, cannot be protected; before 2.14
    // no consumer can be a replica at all. Warnings: the trim is as safe
    // as it was, and the copies are what is at risk.
    let streams: Vec<&str> = config.domains.iter().map(|d| d.stream.as_str()).collect();
    if let Ok(copies) = b.unprotected_copies(&streams).await {
        for (i, d) in config.domains.iter().enumerate() {
            // A copy naming a durable consumer the log does not have: the
            // trim waits for it until the consumer is back.
            let feeds = copies
                .feeds
                .iter()
                .filter(|((log, c), _)| *log == d.stream && !d.replicas.ignore.contains(c));
            for ((_, consumer), feed) in feeds {
                if let Ok(false) = b.consumer_exists(&d.stream, consumer).await {
                    let orphan = crate::floor::OrphanedCopy {
                        stream: feed.stream.clone(),
                        consumer: consumer.clone(),
                        deliver_subject: feed.deliver_subject.clone(),
                        mirror: feed.mirror,
                    };
                    found.push(Problem::warning(
                        format!("domains[{i}].stream"),
                        format!("stream {} copies {} through durable consumer {consumer}, which does not exist: nothing is purged until it is back (replica_unprotected); {}", feed.stream, d.stream, crate::alarms::recreate_consumer(&d.stream, &orphan)),
                    ));
                }
            }
            for c in copies.unprotected.get(&d.stream).into_iter().flatten() {
                found.push(Problem::warning(
                    format!("domains[{i}].stream"),
                    format!("stream {c} mirrors or sources {} through an ephemeral consumer: the trim cannot wait for it (replica_unprotected); recreate its mirror or source with a durable consumer of its own on the log (docs/contract.md, Protecting a mirror or source)", d.stream),
                ));
            }
        }
    }
    if !b.durable_sourcing() {
        found.push(Problem::warning(
            "domains",
            format!("the broker at {} has no durable sourcing (nats-server 2.14 and later): a mirror or source it makes copies through an ephemeral consumer, which cannot pin a log; the copies a newer server makes are still found in each log's own consumer listing", b.url),
        ));
    }
    for (i, d) in config.domains.iter().enumerate() {
        let Some(archive) = &d.archive else { continue };
        if let Some(bucket) = &archive.object_store {
            match b.stream_config(&format!("OBJ_{bucket}")).await {
                Ok(Some(_)) => {}
                Ok(None) => found.push(Problem::error(
                    format!("domains[{i}].archive.object_store"),
                    format!("object store {bucket} does not exist on the broker at {}; the archive would be unreadable and nothing trimmed: run crewlet retention init", b.url),
                )),
                Err(e) => found.push(Problem::error(format!("domains[{i}].archive.object_store"), e.to_string())),
            }
        }
        if let Some(remote) = archive.remote() {
            let field = format!("domains[{i}].archive.url");
            match crate::cloud::client(&remote, b.read_timeout()) {
                Err(e) => found.push(Problem::error(
                    field,
                    format!("{e}; the archive would be unreadable and nothing trimmed"),
                )),
                Ok(c) => {
                    let access = c.check_access().await;
                    for e in access.refused {
                        found.push(Problem::error(
                            field.clone(),
                            format!("{e}; the archive would be unreadable and nothing trimmed"),
                        ));
                    }
                    for w in access.warnings {
                        found.push(Problem::warning(field.clone(), w));
                    }
                }
            }
        }
        if let Some(dir) = &archive.dir {
            if let Err(e) = crate::archive::dir::check_writable(dir) {
                found.push(Problem::error(
                    format!("domains[{i}].archive.dir"),
                    format!("{e}; the fold could not write a segment there and nothing would be trimmed"),
                ));
            }
        }
    }
    for mut p in found {
        p.line = source.line_of(&p.field);
        problems.push(p);
    }
    (BrokerChecks::Ran, false)
}
