//! `crewlet bench`: the performance figures (docs/performance.md), each
//! against a baseline measured in the same run (these machines are shared
//! and noisy, so only ratios travel). Starts its own nats-server, builds the
//! state, and prints median, spread and ratio per scenario.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;

use crate::config::{self, Dur};
use crate::embedded::EmbeddedServer;
use crate::exit::Exit;
use crate::floor::ParsedRows;
use crate::tick::Sidecar;

mod apart;
mod archive;
mod cloud;
mod fleet;
mod http;
mod measure;
mod ticks;
mod world;

use apart::*;
use archive::*;
use cloud::*;
use fleet::*;
use http::*;
use measure::*;
use ticks::*;
use world::*;

/// `crewlet-bench` options.
#[derive(Debug, clap::Parser)]
#[command(
    name = "crewlet-bench",
    version,
    about = "Performance figures of crewlet against baselines measured in the same run (docs/performance.md). Starts its own nats-servers; about four and a half minutes in all (258 s on 2026-12-06, 2 cores, before the cloud scenario, which adds some 15 s), --only for some scenarios. Build and run it with scripts/bench."
)]
pub struct BenchArgs {
    /// Samples per scenario.
    #[arg(long, default_value_t = 15)]
    pub samples: usize,
    /// Run only these scenarios (comma-separated): tick, churn, scaling,
    /// pure, status, fleet, memory, publisher, http, archive, cloud,
    /// cluster.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub only: Vec<String>,
    /// The status baseline process (connect and bare reads only, on the
    /// configuration at PATH); the bench runs itself with it.
    #[arg(long, value_name = "PATH")]
    pub probe: Option<PathBuf>,
}

/// The `crewlet` binary the bench measures: beside this one (both are
/// built into the same target directory).
fn crewlet_bin() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let bin = me.with_file_name(format!("crewlet{}", std::env::consts::EXE_SUFFIX));
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!(
            "{} is missing: build both binaries (scripts/bench does: cargo build --release --features bench --bins)",
            bin.display()
        ))
    }
}

pub async fn run(args: &BenchArgs) -> Exit {
    if let Some(path) = &args.probe {
        return probe(path).await;
    }
    match bench(args).await {
        Ok(true) => Exit::Ok,
        Ok(false) => Exit::Attention,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Unreachable
        }
    }
}

async fn bench(args: &BenchArgs) -> Result<bool, String> {
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("crewlet-bench-{}", std::process::id()));
    let server = EmbeddedServer::start(&dir, 0)
        .await
        .map_err(|e| e.to_string())?;
    let result = scenarios(args, &server.url, &dir).await;
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    let lines = result?;
    println!();
    println!(
        "{:<34} {:<42} {:<34} {:>7}  {:<22} ok",
        "scenario", "median (spread)", "baseline", "ratio", "target"
    );
    let mut all_ok = true;
    for l in &lines {
        all_ok &= l.ok;
        println!(
            "{:<34} {:<42} {:<34} {:>7}  {:<22} {}",
            l.name,
            l.value,
            l.baseline,
            l.ratio
                .map(|r| format!("{r:.2}×"))
                .unwrap_or_else(|| "-".into()),
            l.target,
            if l.ok { "yes" } else { "NO" }
        );
    }
    println!("\nwhole bench: {:.1} s", started.elapsed().as_secs_f64());
    Ok(all_ok)
}

async fn scenarios(args: &BenchArgs, url: &str, dir: &Path) -> Result<Vec<Line>, String> {
    // The fixtures' own connection, apart from the one the sidecar uses.
    let js = crate::broker::connect(url, &Default::default(), "bench-fixtures")
        .await
        .map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    let samples = args.samples.max(3);
    let want = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    // The pure floor first, in a process that has not yet built the other
    // scenarios' state (their heap would only add noise to it).
    if want("pure") {
        let pure = pure_floor(100_000, samples);
        lines.push(line(
            "pure floor (100,000 nodes)",
            &pure,
            None,
            None,
            Some(10.0),
        ));
    }
    if args.only.iter().all(|o| o == "pure") && !args.only.is_empty() {
        return Ok(lines);
    }

    // 1. The tick at 10,000 rows against the bare read of the same buckets.
    eprintln!("building 10,000 position rows …");
    let config = bench_config(url, "a", 1)?;
    build(&js, &config, 10_000).await?;
    let broker = crate::broker::connect(url, &config.nats, "bench")
        .await
        .map_err(|e| e.to_string())?;
    if want("tick") {
        let (tick, bare) = tick_vs_bare(&broker, &config, samples).await?;
        lines.push(line(
            "tick (10,000 rows)",
            &tick,
            Some(&bare),
            Some(1.25),
            Some(75.0),
        ));
        // The incremental views (docs/trim-floor.md, Incremental views),
        // each against the bare full read of the same 7 buckets, measured
        // interleaved in this run: nothing changed, 1 % of the rows changed
        // since the last read, and a view rebuilt (a full read into a view).
        {
            use crate::broker::view::Mode;
            let (mut t_idle, mut t_churn, mut t_rebuild, mut t_full, mut t_parsed) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            broker.read_all_viewed(&config.buckets, Mode::Fresh).await;
            let positions = broker
                .read_rows(&config.buckets)
                .await
                .positions
                .map_err(|e| e.to_string())?;
            let churn: Vec<_> = positions.iter().take(positions.len() / 100).collect();
            for _ in 0..samples {
                let t = Instant::now();
                std::hint::black_box(broker.read_rows(&config.buckets).await);
                t_full.push(ms(t.elapsed()));
                let t = Instant::now();
                std::hint::black_box(broker.read_all_viewed(&config.buckets, Mode::Kept).await);
                t_idle.push(ms(t.elapsed()));
                for e in &churn {
                    broker
                        .kv_put(&config.buckets.positions, &e.key, e.value.clone())
                        .await
                        .map_err(|e| e.to_string())?;
                }
                let t = Instant::now();
                std::hint::black_box(broker.read_all_viewed(&config.buckets, Mode::Kept).await);
                t_churn.push(ms(t.elapsed()));
                let t = Instant::now();
                std::hint::black_box(broker.read_all_viewed(&config.buckets, Mode::Fresh).await);
                t_rebuild.push(ms(t.elapsed()));
                // The full read the tick made before the views: read and
                // parsed, as a rebuilt view is.
                let t = Instant::now();
                std::hint::black_box(broker.read_all(&config.buckets).await);
                t_parsed.push(ms(t.elapsed()));
            }
            let full = stats(t_full);
            lines.push(line(
                "views, nothing changed (10,000 rows)",
                &stats(t_idle),
                Some(&full),
                Some(0.2),
                None,
            ));
            lines.push(line(
                &format!("views, {} rows (1 %) changed", churn.len()),
                &stats(t_churn),
                Some(&full),
                Some(0.25),
                None,
            ));
            // A rebuild stands in for the tick's full read of the buckets
            // (read and parsed, no view kept), which is what its target is
            // against (docs/decisions.md, Incremental views, "The rebuild's baseline"); against
            // the bare read, which parses nothing, it is reported.
            let rebuilt = stats(t_rebuild);
            lines.push(line(
                "views rebuilt, against the tick's full read",
                &rebuilt,
                Some(&stats(t_parsed)),
                Some(1.3),
                None,
            ));
            lines.push(line(
                "  rebuilt, against the bare read",
                &rebuilt,
                Some(&full),
                None,
                None,
            ));
        }
        // Where the tick's time goes.
        let (mut t_read, mut t_parse, mut t_answer) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..samples {
            let t = Instant::now();
            let rows = broker.read_rows(&config.buckets).await;
            let parsed = ParsedRows::from_rows(&rows);
            t_parse.push(ms(t.elapsed()));
            let t = Instant::now();
            let (raw, parsed2) = broker.read_all(&config.buckets).await;
            t_read.push(ms(t.elapsed()));
            std::hint::black_box(parsed);
            let t = Instant::now();
            let now = Utc::now();
            let policy = crate::floor::Policy::from_config(&config, "");
            let reads = crate::tick::read_domains(&broker, &config, &policy, now).await;
            let fresh = (
                raw,
                crate::tick::compute_all(&config, &policy, &parsed2, &reads, now),
            );
            t_answer.push(ms(t.elapsed()));
            std::hint::black_box(fresh);
        }
        lines.push(line(
            "  read and parse 7 buckets",
            &stats(t_read),
            None,
            None,
            None,
        ));
        lines.push(line(
            "  read, then parse (not overlapped)",
            &stats(t_parse),
            None,
            None,
            None,
        ));
        lines.push(line(
            "  stream reads + compute",
            &stats(t_answer),
            None,
            None,
            None,
        ));

        // What a tick that purges adds on top: the pins re-read (holds and
        // presence of this state) and the age proof over a 10,000-record
        // slice (every record old, so all of it is scanned).
        js.create_plain_stream("PROOF_LOG", None, 1).await?;
        js.publish_many("PROOF_LOG.r", 10_000).await?;
        let (mut t_pins, mut t_proof, mut t_whole, mut t_bare) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut sidecar = Sidecar::new(config.clone(), broker.clone());
        holding(&mut sidecar).await?;
        for _ in 0..samples {
            let t = Instant::now();
            writing_tick(&mut sidecar).await;
            let tick_ms = ms(t.elapsed());
            let t = Instant::now();
            std::hint::black_box(broker.read_pins(&config.buckets).await);
            let pins_ms = ms(t.elapsed());
            let t = Instant::now();
            let proved = broker
                .first_unproven(
                    "PROOF_LOG",
                    1,
                    10_000,
                    Utc::now(),
                    crate::tick::AGE_PROOF_MAX_RECORDS,
                )
                .await?;
            if proved.is_some() {
                return Err(format!(
                    "the age proof kept {proved:?} of records all older than now"
                ));
            }
            let proof_ms = ms(t.elapsed());
            let t = Instant::now();
            broker.bare_read(&config).await?;
            t_bare.push(ms(t.elapsed()));
            t_pins.push(pins_ms);
            t_proof.push(proof_ms);
            t_whole.push(tick_ms + pins_ms + proof_ms);
        }
        sidecar.duty.release(&sidecar.broker).await;
        let _ = js.delete_stream("PROOF_LOG").await;
        lines.push(line(
            "  pins re-read (1,000 holds, 100 leases)",
            &stats(t_pins),
            None,
            None,
            None,
        ));
        lines.push(line(
            "  age proof (10,000 records)",
            &stats(t_proof),
            None,
            None,
            None,
        ));
        lines.push(line(
            "purging tick (tick + re-read + proof)",
            &stats(t_whole),
            Some(&stats(t_bare)),
            None,
            None,
        ));

        // The cost of the proofs (reads tied to the leader): the gate-record reader's
        // leader check (a gated log of 10,000 records, none of them gate
        // records, read from the start) against the same reader without it
        // (an ordered consumer on the subject); a leader-answered read of a
        // key against a direct get; a fence (a renewal granting a permit).
        js.create_plain_stream("GATED_LOG", None, 1).await?;
        js.publish_many("GATED_LOG.r", 10_000).await?;
        let (mut t_gates, mut t_leader, mut t_direct, mut t_fence) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let floors = config.buckets.floors.clone();
        let stream = config.domains[0].stream.clone();
        for _ in 0..samples {
            let t = Instant::now();
            std::hint::black_box(
                broker
                    .gate_records("GATED_LOG", "GATED_LOG.gate", 0, None)
                    .await?,
            );
            t_gates.push(ms(t.elapsed()));
            let t = Instant::now();
            std::hint::black_box(
                broker
                    .kv_entry_proven(&floors, &stream)
                    .await
                    .map_err(|e| e.to_string())?,
            );
            t_leader.push(ms(t.elapsed()));
            let t = Instant::now();
            std::hint::black_box(broker.kv_entry(&floors, &stream).await?);
            t_direct.push(ms(t.elapsed()));
            let t = Instant::now();
            std::hint::black_box(bench_permit(&broker).await?);
            t_fence.push(ms(t.elapsed()));
        }
        let _ = js.delete_stream("GATED_LOG").await;
        lines.push(line(
            "  proofs: gate reader + leader check (10,000 records)",
            &stats(t_gates),
            None,
            None,
            None,
        ));
        lines.push(line(
            "  proofs: a key from its leader (MSG.GET)",
            &stats(t_leader),
            Some(&stats(t_direct)),
            None,
            None,
        ));
        lines.push(line(
            "  proofs: a fence (lease written, renewed)",
            &stats(t_fence),
            None,
            None,
            None,
        ));

        // The replicas' term (docs/trim-floor.md, Replicas): what the tick
        // reads for it on a log with 100 replica consumers, against the bare
        // consumer listing of the same log, interleaved.
        js.create_plain_stream("REPL_LOG", None, 1).await?;
        js.publish_many("REPL_LOG.r", 1_000).await?;
        js.replica_consumers("REPL_LOG", 100).await?;
        let (mut t_replicas, mut t_listing) = (Vec::new(), Vec::new());
        for _ in 0..samples {
            let t = Instant::now();
            let read = broker
                .replicas("REPL_LOG", &[], &[], true, false)
                .await
                .ok_or("no replicas read")?
                .map_err(|e| e.to_string())?;
            if read.replicas.len() != 100 {
                return Err(format!("{} replicas found of 100", read.replicas.len()));
            }
            t_replicas.push(ms(t.elapsed()));
            let t = Instant::now();
            std::hint::black_box(js.bare_consumer_listing("REPL_LOG").await?);
            t_listing.push(ms(t.elapsed()));
        }
        let _ = js.delete_stream("REPL_LOG").await;
        lines.push(line(
            "replicas: the term's read (100 replica consumers)",
            &stats(t_replicas),
            Some(&stats(t_listing)),
            Some(1.25),
            None,
        ));

        // The purge, on its own: keep the newest 100 of 200 records.
        let mut purge_ms = Vec::new();
        for i in 0..samples {
            let name = format!("PURGE_{i}");
            let created = js.create_plain_stream(&name, None, 1).await?;
            js.publish_many(&format!("{name}.r"), 200).await?;
            let permit = bench_permit(&broker).await?;
            let t = Instant::now();
            broker
                .purge_to(
                    &name,
                    crate::floor::PurgeTarget::for_bench(101),
                    created,
                    permit,
                )
                .await
                .map_err(|e| e.to_string())?;
            purge_ms.push(ms(t.elapsed()));
            let _ = js.delete_stream(&name).await;
        }
        lines.push(line(
            "purge (re-check + purge)",
            &stats(purge_ms),
            None,
            None,
            None,
        ));
    }

    // 1b. The views at 100,000 rows: the tick's read against the full bare
    // read of the same buckets, by how many rows changed since the last.
    if want("churn") {
        lines.extend(churn(&js, &broker, url, samples.min(3)).await?);
    }

    // 2. Scaling.
    if want("scaling") {
        let mut per_size = Vec::new();
        for (size, suffix) in [(1_000usize, "s1"), (10_000, "s2"), (100_000, "s3")] {
            eprintln!("building {size} position rows …");
            let c = bench_config(url, suffix, 1)?;
            build(&js, &c, size).await?;
            let (t, b) = tick_vs_bare(&broker, &c, samples.min(7)).await?;
            lines.push(line(
                &format!("tick ({size} rows)"),
                &t,
                Some(&b),
                None,
                None,
            ));
            per_size.push((size as f64, t.median));
            for (_, bucket) in c.buckets.all() {
                let _ = js.delete_bucket(bucket).await;
            }
        }
        lines.push(purging_at_scale(&js, &broker, url, samples.min(7) + 1).await?);
        // Least squares over the three sizes: time per row, and how straight.
        let (slope, r2) = fit(&per_size);
        lines.push(Line {
            name: "scaling slope".into(),
            value: format!("{:.2} µs per row, r² {r2:.4}", slope * 1000.0),
            baseline: "-".into(),
            ratio: None,
            target: "linear (r² ≥ 0.98)".into(),
            ok: r2 >= 0.98,
        });
    }

    let bin = crewlet_bin()?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    // 4. status as a whole process, 4 domains × 100 nodes.
    if want("status") {
        eprintln!("building 4 domains × 100 nodes …");
        let sc = bench_config(url, "st", 4)?;
        build(&js, &sc, 400).await?;
        let cfg_path: PathBuf = dir.join("status.yaml");
        std::fs::write(
            &cfg_path,
            serde_yaml::to_string(&sc).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        let cfg = cfg_path.to_str().ok_or("non-UTF-8 temp path")?;
        let mut st = Vec::new();
        let mut base = Vec::new();
        for _ in 0..samples {
            st.push(
                time_process(&bin, &["retention", "status", "--json", "--config", cfg], 1)?.median,
            );
            base.push(time_process(&me, &["--probe", cfg], 1)?.median);
        }
        lines.push(line(
            "status --json (4 × 100)",
            &stats(st),
            Some(&stats(base)),
            Some(1.5),
            None,
        ));
        // The same status with a preview (a hold released on every log),
        // against status without, interleaved.
        let (mut with, mut without) = (Vec::new(), Vec::new());
        let plain = ["retention", "status", "--json", "--config", cfg];
        let previewed = [
            "retention",
            "status",
            "--json",
            "--if-released",
            "h0",
            "--config",
            cfg,
        ];
        for _ in 0..samples {
            with.push(time_process(&bin, &previewed, 1)?.median);
            without.push(time_process(&bin, &plain, 1)?.median);
        }
        lines.push(line(
            "status --json with a preview (4 × 100)",
            &stats(with),
            Some(&stats(without)),
            Some(1.1),
            None,
        ));
    }

    // 5. Peak RSS of `run` over 50 ticks at 10,000 rows. The tick is as
    // short as a fence still fits in (3 ticks less the skew and a read
    // timeout must leave 500 ms): 600 ms with 100 ms of skew.
    if want("fleet") {
        lines.extend(fleet(&js, url, dir, samples, &bin, &me).await?);
    }
    if want("memory") {
        let mut mem_cfg = config.clone();
        mem_cfg.retention.tick = Dur(Duration::from_millis(600));
        mem_cfg.retention.max_clock_skew = Dur(Duration::from_millis(100));
        mem_cfg.retention.allow_unsafe_limits = true;
        mem_cfg.retention.min_age = Dur::secs(3);
        mem_cfg.retention.snapshot_interval = Dur::secs(1);
        let mem_path = dir.join("mem.yaml");
        std::fs::write(
            &mem_path,
            serde_yaml::to_string(&mem_cfg).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        let (rss_kib, took) = peak_rss(&bin, &mem_path, 50)?;
        lines.push(rss_line("peak RSS, run × 50 ticks", rss_kib, took, 25.0));
    }

    // 6. A publisher with and without the sidecar ticking every second:
    // on a fleet of 100 nodes (the expected size), and at 10,000 rows.
    if want("publisher") {
        eprintln!("building a fleet of 100 nodes …");
        let small = bench_config(url, "pb", 1)?;
        build(&js, &small, 100).await?;
        for (cfg, name, min, same) in [
            (&small, "publisher A/A (noise floor)", None, true),
            (
                &small,
                "publisher beside sidecar (100 nodes)",
                Some(0.97),
                false,
            ),
            (&config, "publisher beside sidecar (10k rows)", None, false),
        ] {
            lines.push(publisher(&js, &bin, dir, cfg, name, samples, min, same).await?);
        }
    }

    // 7. The tick on a three-server cluster with R3 log and buckets,
    // against the bare read of the same buckets on the same cluster.
    if want("http") {
        // Six times the samples: the tick from its views is a few
        // milliseconds, and a 10 % target on it is within the spread of
        // 30 pairs (the ratio moved 1.05-1.21x run to run on the same
        // code); the p99 of some 330 requests was the fourth slowest. A
        // pair is some 50 ms, so 90 cost a few seconds.
        lines.extend(http_lines(&broker, &config, samples * 6).await?);
    }
    if want("archive") {
        lines.extend(archive_lines(&js, url, dir, &config, samples).await?);
    }
    if want("cloud") {
        lines.extend(cloud_lines(&js, url, dir, &config, samples).await?);
    }
    if want("cluster") {
        eprintln!("starting a three-server cluster and building 10,000 rows on it …");
        let (tick, bare) = on_a_cluster(dir, samples).await?;
        lines.push(line(
            "tick, 3-server R3 cluster (10k rows)",
            &tick,
            Some(&bare),
            None,
            None,
        ));
    }
    Ok(lines)
}

/// `crewlet-bench --probe PATH`: the status baseline: connect, then the
/// bare reads status needs (every bucket once, stream info and consumer
/// info per domain), and nothing else.
async fn probe(path: &Path) -> Exit {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Exit::Usage;
    };
    let Some(c) = config::check(&text).config else {
        return Exit::Usage;
    };
    let url = c.nats.url.clone().unwrap_or_default();
    let Ok(broker) = crate::broker::connect(&url, &c.nats, "bench-probe").await else {
        return Exit::Unreachable;
    };
    if broker.bare_read(&c).await.is_err() {
        return Exit::Unreachable;
    }
    for d in &c.domains {
        if broker.stream_state(&d.stream).await.is_err() {
            return Exit::Unreachable;
        }
        if let Some(feed) = &d.feed_consumer {
            if !matches!(broker.consumer_exists(&d.stream, feed).await, Ok(true)) {
                return Exit::Unreachable;
            }
        }
    }
    Exit::Ok
}
