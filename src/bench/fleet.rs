//! A fleet of many logs: its quiet tick and its writing tick against the
//! bare reads (and writes) of the same state, the cost per log, status and
//! peak RSS at 1,000 logs.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::broker::Broker;
use crate::config::{Config, Dur};
use crate::floor;
use crate::tick::Sidecar;

use super::measure::*;
use super::world::*;

/// The fleet's timings: the two kinds of tick, the bare reads, and the
/// bare reads followed by the bare writes of the same rows.
pub(super) struct FleetTimes {
    pub(super) writing: Stats,
    pub(super) standing: Stats,
    pub(super) bare: Stats,
    pub(super) bare_and_writes: Stats,
    /// The floors bucket's writes each quiet tick cost (its stream's
    /// `last_seq` before and after): `_tick` alone.
    pub(super) quiet_writes: Vec<u64>,
}

/// The scratch bucket the bare writes go to: the floors bucket's settings
/// under another name, so that the sidecar's own rows are not touched.
pub(super) fn scratch_floors(config: &Config) -> Option<crate::buckets::BucketSpec> {
    crate::buckets::contract_buckets(config)
        .into_iter()
        .find(|s| s.role == "floors")
        .map(|s| crate::buckets::BucketSpec {
            name: format!("x{}", s.name),
            ..s
        })
}

/// Writes every row in `rows` to `bucket` by compare-and-set on the
/// revision it last wrote there, as many at once as a tick writes: the
/// broker's share of a writing tick, with nothing of the sidecar's (the
/// bodies are moved to the client as the tick's are, not copied).
pub(super) async fn bare_writes(
    broker: &Broker,
    bucket: &str,
    rows: Vec<(String, Vec<u8>)>,
    revisions: &mut [Option<u64>],
) -> Result<(), String> {
    use futures::StreamExt;
    let results: Vec<Result<u64, String>> =
        futures::stream::iter(rows.into_iter().zip(revisions.iter().copied()))
            .map(|((key, body), rev)| async move {
                broker
                    .put_if(bucket, &key, body, rev)
                    .await
                    .map_err(|e| e.to_string())
            })
            .buffered(crate::tick::PUBLISH_CONCURRENCY)
            .collect()
            .await;
    for (slot, r) in revisions.iter_mut().zip(results) {
        *slot = Some(r?);
    }
    Ok(())
}

/// The fleet's tick against its bare reads (the views, nothing changed,
/// and one paged listing of every stream's state), interleaved; and the
/// writing tick against those reads followed by bare writes of the rows
/// it wrote.
pub(super) async fn fleet_tick_vs_bare(
    broker: &Broker,
    config: &Config,
    samples: usize,
) -> Result<FleetTimes, String> {
    use crate::broker::view::Mode;
    let mut sidecar = Sidecar::new(config.clone(), broker.clone());
    let (mut written, mut standing, mut bares, mut both) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    holding(&mut sidecar).await?;
    broker.read_all_viewed(&config.buckets, Mode::Fresh).await;
    let scratch = scratch_floors(config).ok_or("no floors bucket in the contract")?;
    broker
        .ensure_bucket(&scratch)
        .await
        .map_err(|e| format!("bucket {}: {e}", scratch.name))?;
    let mut revisions: Vec<Option<u64>> = vec![None; config.domains.len()];
    let floors_stream = format!("KV_{}", config.buckets.floors);
    let floors_written = || async {
        broker
            .stream_state(&floors_stream)
            .await
            .map(|s| s.last_seq)
            .map_err(|e| format!("the floors bucket's stream: {e}"))
    };
    let mut quiet_writes = Vec::new();
    // Two kinds of tick: one that writes every floors row (as a new holder
    // does, or a tick where every answer changed), and the quiet one that
    // leaves them standing and writes `_tick` alone.
    for _ in 0..samples {
        let t = Instant::now();
        let r = writing_tick(&mut sidecar).await;
        written.push(ms(t.elapsed()));
        let rows: Vec<(String, Vec<u8>)> = r
            .domains
            .iter()
            .filter(|d| matches!(d.published, Some(Ok(_))))
            .filter_map(|d| {
                let body = floor::FloorsRow::from(&d.answer).to_bytes().ok()?;
                Some((d.answer.stream.clone(), body))
            })
            .collect();
        if rows.len() != config.domains.len() {
            return Err(format!(
                "the writing tick wrote {} of {} rows",
                rows.len(),
                config.domains.len()
            ));
        }
        let before = floors_written().await?;
        let t = Instant::now();
        let r = sidecar.tick().await;
        standing.push(ms(t.elapsed()));
        if r.domains.iter().any(|d| d.stood.is_none()) {
            return Err("a quiet fleet's rows were written again the tick after".into());
        }
        quiet_writes.push(floors_written().await?.saturating_sub(before));
        let t = Instant::now();
        std::hint::black_box(broker.read_all_viewed(&config.buckets, Mode::Kept).await);
        broker.list_streams().await?;
        bares.push(ms(t.elapsed()));
        bare_writes(broker, &scratch.name, rows, &mut revisions).await?;
        both.push(ms(t.elapsed()));
    }
    sidecar.duty.release(&sidecar.broker).await;
    let _ = broker.delete_bucket(&scratch.name).await;
    Ok(FleetTimes {
        writing: stats(written),
        standing: stats(standing),
        bare: stats(bares),
        bare_and_writes: stats(both),
        quiet_writes,
    })
}

/// A fleet of many logs: the tick at 10, 100 and 1,000 logs against its
/// bare reads, the cost per added log, `status --json` at 1,000 logs
/// against its bare probe, and the peak RSS of 50 ticks.
pub(super) async fn fleet(
    js: &Broker,
    url: &str,
    dir: &Path,
    samples: usize,
    bin: &Path,
    me: &Path,
) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    let (mut points, mut bare_points) = (Vec::new(), Vec::new());
    let mut largest = None;
    for (n, suffix) in [(10usize, "fa"), (100, "fb"), (1000, "fc")] {
        eprintln!("building a fleet of {n} logs …");
        let c = fleet_config(url, suffix, n)?;
        build_fleet(js, &c).await?;
        let broker = crate::broker::connect(url, &c.nats, "bench-fleet")
            .await
            .map_err(|e| e.to_string())?;
        let times = fleet_tick_vs_bare(&broker, &c, samples.min(5)).await?;
        let (t, b) = (&times.writing, &times.bare);
        // The quiet tick: every row stands, `_tick` is its one write.
        lines.push(line(
            &format!("fleet: quiet tick ({n} logs)"),
            &times.standing,
            Some(b),
            (n == 1000).then_some(1.25),
            None,
        ));
        let one_write = times.quiet_writes.iter().all(|w| *w == 1);
        lines.push(Line {
            name: format!("  floors-bucket writes a quiet tick ({n} logs)"),
            value: format!("{:?}", times.quiet_writes),
            baseline: "-".into(),
            ratio: None,
            target: "exactly 1 each".into(),
            ok: one_write,
        });
        lines.push(line(
            &format!("  a tick writing every row ({n} logs)"),
            t,
            Some(b),
            None,
            None,
        ));
        // The broker's share of a writing tick: its reads, then the same
        // rows written bare. What the tick spends beyond it is the
        // sidecar's own (docs/performance.md, A fleet: the broker's share).
        lines.push(line(
            &format!("  against bare reads and writes ({n} logs)"),
            t,
            Some(&times.bare_and_writes),
            None,
            None,
        ));
        points.push((n as f64, t.median));
        bare_points.push((n as f64, b.median));
        if n == 1000 {
            lines.push(Line {
                name: "fleet: tick at 1,000 logs, against the default tick".into(),
                value: format!("{:.0} ms", t.median),
                baseline: "10 s".into(),
                ratio: Some(t.median / 10_000.0),
                target: "well under the tick".into(),
                ok: t.median < 2_500.0,
            });
            largest = Some(c);
        } else {
            for d in &c.domains {
                let _ = js.delete_stream(&d.stream).await;
            }
            for (_, bucket) in c.buckets.all() {
                let _ = js.delete_bucket(bucket).await;
            }
        }
    }
    write_plot(
        "fleet-logs.svg",
        &plot_svg(&Plot {
            title: "The tick against the number of logs (crewlet-bench --only fleet)",
            x_label: "logs on one nats-server",
            points: &points,
            beside: Some(("bare reads", &bare_points)),
            level: None,
        }),
    );
    let (slope, r2) = fit(&points);
    lines.push(Line {
        name: "fleet: cost per added log".into(),
        value: format!("{slope:.2} ms per log, r² {r2:.4}"),
        baseline: "-".into(),
        ratio: None,
        target: "reported".into(),
        ok: true,
    });
    let c = largest.ok_or("no fleet of 1,000 logs")?;
    let cfg_path = dir.join("fleet.yaml");
    std::fs::write(
        &cfg_path,
        serde_yaml::to_string(&c).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let cfg = cfg_path.to_str().ok_or("non-UTF-8 temp path")?;
    let (mut st, mut base) = (Vec::new(), Vec::new());
    for _ in 0..samples.min(5) {
        st.push(time_process(bin, &["retention", "status", "--json", "--config", cfg], 1)?.median);
        base.push(time_process(me, &["--probe", cfg], 1)?.median);
    }
    lines.push(line(
        "fleet: status --json (1,000 logs)",
        &stats(st),
        Some(&stats(base)),
        Some(1.5),
        None,
    ));
    let mut mem = c.clone();
    mem.retention.tick = Dur(Duration::from_millis(1000));
    mem.retention.max_clock_skew = Dur(Duration::from_millis(100));
    let mem_path = dir.join("fleet-mem.yaml");
    std::fs::write(
        &mem_path,
        serde_yaml::to_string(&mem).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let (rss_kib, took) = peak_rss(bin, &mem_path, 50)?;
    lines.push(Line {
        name: "fleet: peak RSS, run × 50 ticks (1,000 logs)".into(),
        value: format!(
            "{:.1} MB ({:.1} s)",
            rss_kib as f64 / 1024.0,
            took.as_secs_f64()
        ),
        baseline: "-".into(),
        ratio: None,
        target: "≤ 64 MB".into(),
        ok: (rss_kib as f64 / 1024.0) <= 64.0,
    });
    // The fleet gone again: a thousand streams left on the server would be
    // in every later scenario's stream listing (its memory above all).
    for d in &c.domains {
        let _ = js.delete_stream(&d.stream).await;
    }
    for (_, bucket) in c.buckets.all() {
        let _ = js.delete_bucket(bucket).await;
    }
    Ok(lines)
}
