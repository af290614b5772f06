//! `crewlet retention read` (the merge read of archive and live log) and
//! `crewlet retention verify-archive` (every segment read back and
//! checked; writes nothing).

use serde_json::json;

use super::{Cli, ReadArgs, VerifyArchiveArgs};
use crate::archive::merge::{self, MergeError};
use crate::archive::state::ArchiveState;
use crate::config::{Config, Domain};
use crate::exit::Exit;
use crate::human;

fn domain_of(config: &Config, stream: &str) -> Result<Domain, Exit> {
    super::domain_named(config, stream).map_err(|e| {
        crate::cli::say::error(format_args!("{e}"));
        Exit::Usage
    })
}

/// Data as a person reads it: the text when it is printable, else its size.
fn printable(data: &[u8]) -> String {
    match std::str::from_utf8(data) {
        Ok(t) if !t.chars().any(|c| c.is_control() && c != '\t') => t.to_string(),
        _ => format!("({} bytes)", data.len()),
    }
}

/// A whole number given for `flag`, or the error that names it and what
/// is `allowed`.
fn whole(flag: &str, text: &str, allowed: &str) -> Result<u64, Exit> {
    text.parse().map_err(|_| {
        crate::cli::say::error(format_args!(
            "{flag} {text:?} is not a whole number; allowed: {allowed}"
        ));
        Exit::Usage
    })
}

const A_SEQUENCE: &str = "a sequence, 1 or more";

pub async fn read(cli: &Cli, args: &ReadArgs) -> Exit {
    let from = match &args.from {
        Some(f) => Some(exit_on_err!(whole("--from", f, A_SEQUENCE))),
        None => None,
    };
    let limit = usize::try_from(exit_on_err!(whole("--limit", &args.limit, "1 to 10000")))
        .unwrap_or(usize::MAX);
    if let Err(MergeError::Input(e)) = merge::check_input(from, limit) {
        crate::cli::say::error(format_args!("{e}"));
        return Exit::Usage;
    }
    let loaded = exit_on_err!(super::load_config(cli));
    let domain = exit_on_err!(domain_of(&loaded.config, &args.stream));
    let broker = exit_on_err!(super::connect(&loaded.config).await);
    if let Err(exit) = super::require_stream(&broker, &loaded.config, &domain).await {
        return exit;
    }
    let merged = match merge::read(&broker, &loaded.config, &domain, from, limit, args.clamp).await
    {
        Ok(m) => m,
        Err(MergeError::Trimmed { first_readable }) => {
            if cli.json {
                println!(
                    "{}",
                    json!({"error": "trimmed", "first_readable": first_readable})
                );
            } else {
                eprintln!("trimmed: the first readable sequence is {first_readable}");
                eprintln!(
                    "to start there: crewlet retention read -stream {} --from {first_readable} (or add --clamp)",
                    args.stream
                );
            }
            return Exit::Attention;
        }
        Err(MergeError::Input(e)) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Usage;
        }
        Err(MergeError::Archive(e)) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Attention;
        }
        Err(MergeError::Unreachable(e)) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Unreachable;
        }
    };
    if cli.json {
        let records: Vec<serde_json::Value> = merged
            .records
            .iter()
            .map(|(r, archived)| merge::record_json(r, *archived))
            .collect();
        println!(
            "{}",
            json!({
                "stream": domain.stream,
                "first_readable": merged.first_readable,
                "first_seq": merged.first_seq,
                "last_seq": merged.last_seq,
                "records": records,
                "next": merged.next,
            })
        );
    } else {
        let rows: Vec<Vec<String>> = merged
            .records
            .iter()
            .map(|(r, archived)| {
                let headers: Vec<String> = merge::header_pairs(&r.headers)
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                vec![
                    r.seq.to_string(),
                    // Nine digits of nanoseconds, so the column stays aligned.
                    chrono::DateTime::from_timestamp_nanos(r.time_ns)
                        .format("%Y-%m-%dT%H:%M:%S%.9fZ")
                        .to_string(),
                    if *archived { "archive" } else { "log" }.into(),
                    r.subject.clone(),
                    if headers.is_empty() {
                        "-".into()
                    } else {
                        headers.join(",")
                    },
                    printable(&r.data),
                ]
            })
            .collect();
        let mut all = vec![["SEQ", "TIME", "FROM", "SUBJECT", "HEADERS", "DATA"]
            .map(String::from)
            .to_vec()];
        all.extend(rows);
        print!("{}", crate::report::table(&all, ""));
        if merged.records.len() == limit && merged.next <= merged.last_seq {
            eprintln!(
                "more: crewlet retention read -stream {} --from {} --limit {}",
                args.stream, merged.next, args.limit
            );
        }
    }
    Exit::Ok
}

pub async fn verify_archive(cli: &Cli, args: &VerifyArchiveArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let domain = exit_on_err!(domain_of(&loaded.config, &args.stream));
    let Some(archive) = &domain.archive else {
        crate::cli::say::error(format_args!(
            "domain {} has no archive; configure domains[].archive (object_store or dir) to fold it before it is trimmed",
            domain.name
        ));
        return Exit::Usage;
    };
    let broker = exit_on_err!(super::connect(&loaded.config).await);
    let live = match broker.stream_state(&domain.stream).await {
        Ok(s) => s,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Unreachable;
        }
    };
    let store = archive.store();
    let target = match merge::target_of(&broker, &loaded.config, &domain, live.created).await {
        Ok(t) => t,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return if matches!(e, MergeError::Unreachable(_)) {
                Exit::Unreachable
            } else {
                Exit::Attention
            };
        }
    };
    // The frontier the floors row promised, for this store, with segments
    // behind it.
    let published = match broker
        .kv_entry(&loaded.config.buckets.floors, &domain.stream)
        .await
    {
        Ok(Some(e)) => crate::floor::PublishedFloor::parse(&domain.stream, &e.value)
            .ok()
            .and_then(|p| p.archive)
            .and_then(|v| serde_json::from_value::<ArchiveState>(v).ok())
            .filter(|a| a.store == store.id() && a.first_archived.is_some())
            .and_then(|a| a.frontier),
        Ok(None) => None,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Unreachable;
        }
    };
    let report = match crate::archive::verify::verify(
        &broker,
        &store,
        &target,
        live.first_seq,
        live.last_seq,
        published,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Unreachable;
        }
    };
    if cli.json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("sound".into(), json!(report.sound()));
        }
        println!("{v}");
    } else {
        println!(
            "archive of {} ({}), generation {}, in {}",
            domain.name, report.stream, report.generation, report.store
        );
        let range = match (report.first_archived, report.last_archived) {
            (Some(a), Some(b)) => format!("covering {a}..{b}"),
            _ => "no segment yet".into(),
        };
        println!(
            "  {} segment(s), {} record(s), {}, {range}",
            report.segments,
            report.records,
            human::bytes(report.bytes)
        );
        let frontier = report
            .published_frontier
            .map_or_else(|| "none".to_string(), |p| p.to_string());
        println!(
            "  live log {}..{}; published frontier {frontier}",
            report.first_seq, report.last_seq
        );
        for p in &report.problems {
            println!("problem: {p}");
        }
        if report.sound() {
            println!("sound: every segment verifies, the segments are contiguous, and the archive meets the live log");
        } else {
            println!("{} problem(s)", report.problems.len());
        }
    }
    if report.sound() {
        Exit::Ok
    } else {
        Exit::Attention
    }
}

pub async fn tail(cli: &Cli, args: &super::TailArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let domain = exit_on_err!(domain_of(&loaded.config, &args.stream));
    let broker = exit_on_err!(super::connect(&loaded.config).await);
    match broker.tail(&domain.stream).await {
        Ok(Some(t)) => {
            if cli.json {
                println!(
                    "{}",
                    json!({"next_seq": t.next_seq, "timestamp_ms": t.timestamp_ms})
                );
            } else {
                println!("next_seq {}   timestamp_ms {}", t.next_seq, t.timestamp_ms);
            }
            Exit::Ok
        }
        Ok(None) => {
            crate::cli::say::error(format_args!(
                "stream {} does not exist on the broker at {}",
                domain.stream, broker.url
            ));
            Exit::Attention
        }
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            Exit::Unreachable
        }
    }
}

pub async fn trim(cli: &Cli, args: &super::TrimArgs) -> Exit {
    use crate::exit::Outcome;
    use crate::gesture::trim::Ask;
    let ask = match (&args.entry, &args.at) {
        (Some(n), None) => Ask::Entry(exit_on_err!(whole(
            "--entry",
            n,
            "a sequence, 1 or more (past the log's tail it is clamped to the tail)"
        ))),
        (None, Some(t)) => match crate::rows::Timestamp::parse(t) {
            Ok(i) => Ask::At(i.0),
            Err(e) => {
                crate::cli::say::error(format_args!("--at: {e}"));
                return Exit::Usage;
            }
        },
        _ => {
            crate::cli::say::error(format_args!("give exactly one of --entry N and --at TIME"));
            return Exit::Usage;
        }
    };
    let by = super::by_name(args.by.as_deref());
    // Bad input is refused before connecting.
    let checked = match crate::gesture::trim::check(ask, &by, &args.reason) {
        Ok(c) => c,
        Err(e) => {
            crate::cli::say::error_coded(e.code(), &e);
            return e.exit();
        }
    };
    let loaded = exit_on_err!(super::load_config(cli));
    let domain = exit_on_err!(domain_of(&loaded.config, &args.stream));
    let broker = exit_on_err!(super::connect(&loaded.config).await);
    match crate::gesture::trim::raise(&broker, &loaded.config, &domain, &checked).await {
        Ok(r) => {
            if cli.json {
                println!("{}", crate::gesture::trim::json(&r));
            } else {
                print!(
                    "{}",
                    crate::gesture::trim::text(&r, &domain.stream, &args.stream)
                );
            }
            r.exit()
        }
        Err(e) => {
            crate::cli::say::error_coded(e.code(), &e);
            e.exit()
        }
    }
}
