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
        let (took, writes) = quiet_tick(broker, &mut sidecar, &floors_stream).await?;
        standing.push(took);
        quiet_writes.push(writes);
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

/// A quiet tick of a fleet whose last tick may have written rows, timed,
/// and the floors-bucket writes it cost. The tick after a writing tick
/// takes the rows it wrote into its views: not yet quiet. The one after
/// that, from views kept (not a whole read, which comes every
/// `full_read_every` ticks), is what a quiet fleet runs every tick. Every
/// row must stand, confirmed.
pub(super) async fn quiet_tick(
    broker: &Broker,
    sidecar: &mut Sidecar,
    floors_stream: &str,
) -> Result<(f64, u64), String> {
    let floors_written = || async {
        broker
            .stream_state(floors_stream)
            .await
            .map(|s| s.last_seq)
            .map_err(|e| format!("the floors bucket's stream: {e}"))
    };
    for settled in 1..=5 {
        let before = floors_written().await?;
        let t = Instant::now();
        let r = sidecar.tick().await;
        let took = ms(t.elapsed());
        let writes = floors_written().await?.saturating_sub(before);
        published(&r, "quiet")?;
        if r.domains.iter().any(|d| d.stood.is_none()) {
            return Err("a quiet fleet's rows were written again the tick after".into());
        }
        if settled >= 2 && r.views.rebuilt == 0 {
            return Ok((took, writes));
        }
    }
    Err("no quiet tick read its views kept in five".into())
}

/// The quiet tick of the fleet `c` (already built and published), on a
/// sidecar of its own, `samples` times.
async fn quiet_ticks(broker: &Broker, c: &Config, samples: usize) -> Result<Stats, String> {
    let mut sidecar = Sidecar::new(c.clone(), broker.clone());
    holding(&mut sidecar).await?;
    let floors_stream = format!("KV_{}", c.buckets.floors);
    let mut took = Vec::new();
    for _ in 0..samples {
        took.push(quiet_tick(broker, &mut sidecar, &floors_stream).await?.0);
    }
    sidecar.duty.release(&sidecar.broker).await;
    Ok(stats(took))
}

/// How many of the fleet's answers change each tick in [`changing`].
const CHANGING: usize = 100;

/// The fleet's tick when [`CHANGING`] of its answers change (a hold moved
/// on each of those logs: their `min_hold` term changes), against the bare
/// reads of the same changes followed by bare writes of that many rows.
/// Each takes in one change of the same hundred holds: the holds are moved
/// before each (docs/performance.md, The scenarios).
async fn changing(broker: &Broker, c: &Config, samples: usize) -> Result<Line, String> {
    use crate::broker::view::Mode;
    let mut sidecar = Sidecar::new(c.clone(), broker.clone());
    holding(&mut sidecar).await?;
    let scratch = scratch_floors(c).ok_or("no floors bucket in the contract")?;
    broker
        .ensure_bucket(&scratch)
        .await
        .map_err(|e| format!("bucket {}: {e}", scratch.name))?;
    let expires = crate::rows::Timestamp(chrono::Utc::now() + chrono::Duration::hours(1));
    let move_holds = |seq: u64| {
        let rows: Vec<(String, String)> = c
            .domains
            .iter()
            .take(CHANGING)
            .map(|d| {
                (
                    format!("{}.h0", d.stream),
                    serde_json::json!({"seq": seq, "owner": "bench", "expires_at": expires.to_rfc3339()})
                        .to_string(),
                )
            })
            .collect();
        broker.fill(&c.buckets.holds, rows)
    };
    let floors_stream = format!("KV_{}", c.buckets.floors);
    let mut revisions: Vec<Option<u64>> = vec![None; CHANGING];
    let (mut ticks, mut bares) = (Vec::new(), Vec::new());
    for i in 0..=samples {
        move_holds(4 + (i as u64 % 2) * 2).await?;
        let before = broker
            .stream_state(&floors_stream)
            .await
            .map_err(|e| e.to_string())?
            .last_seq;
        let t = Instant::now();
        let r = sidecar.tick().await;
        let took = ms(t.elapsed());
        let writes = broker
            .stream_state(&floors_stream)
            .await
            .map_err(|e| e.to_string())?
            .last_seq
            .saturating_sub(before);
        let rows: Vec<(String, Vec<u8>)> = r
            .domains
            .iter()
            .filter(|d| d.stood.is_none() && matches!(d.published, Some(Ok(_))))
            .filter_map(|d| {
                let body = floor::FloorsRow::from(&d.answer).to_bytes().ok()?;
                Some((d.answer.stream.clone(), body))
            })
            .collect();
        // The first moves the holds' expiry too (their membership, so
        // their `_members` keys): from the second on, only the rows and
        // `_tick`.
        if rows.len() != CHANGING || (i > 0 && writes != CHANGING as u64 + 1) {
            return Err(format!(
                "a tick with {CHANGING} answers changed wrote {} rows ({writes} floors-bucket writes)",
                rows.len()
            ));
        }
        // The bare reads take in the same kind of change: the holds moved
        // back.
        move_holds(5).await?;
        let t = Instant::now();
        std::hint::black_box(broker.read_all_viewed(&c.buckets, Mode::Kept).await);
        broker.list_streams().await?;
        bare_writes(broker, &scratch.name, rows, &mut revisions).await?;
        let bare = ms(t.elapsed());
        // The first of each is a warm-up (the scratch rows are new).
        if i > 0 {
            ticks.push(took);
            bares.push(bare);
        }
    }
    sidecar.duty.release(&sidecar.broker).await;
    let _ = broker.delete_bucket(&scratch.name).await;
    Ok(line(
        &format!("fleet: tick, {CHANGING} answers changing (1000 logs)"),
        &stats(ticks),
        Some(&stats(bares)),
        Some(1.25),
        None,
    ))
}

/// How many streams the sidecar does not manage share the account with
/// the fleet in [`unmanaged`].
const UNMANAGED: usize = 10_000;

/// The fleet's quiet tick with [`UNMANAGED`] streams on the account that
/// the sidecar does not manage, against the same fleet's quiet tick just
/// before they were made (docs/decisions.md, Streams the sidecar does
/// not manage). They are deleted again after.
async fn unmanaged(js: &Broker, c: &Config, samples: usize) -> Result<Line, String> {
    use futures::StreamExt;
    let without = quiet_ticks(js, c, samples).await?;
    eprintln!("adding {UNMANAGED} streams the sidecar does not manage …");
    let names: Vec<String> = (0..UNMANAGED).map(|i| format!("A_{i:05}")).collect();
    let made: Vec<Result<_, String>> = futures::stream::iter(&names)
        .map(|n| js.create_plain_stream(n, None, 1))
        .buffer_unordered(64)
        .collect()
        .await;
    let with = match made.into_iter().collect::<Result<Vec<_>, String>>() {
        Ok(_) => quiet_ticks(js, c, samples).await,
        Err(e) => Err(e),
    };
    let _: Vec<Result<(), String>> = futures::stream::iter(&names)
        .map(|n| js.delete_stream(n))
        .buffer_unordered(64)
        .collect()
        .await;
    Ok(line(
        &format!("fleet: quiet tick, {UNMANAGED} other streams (1000 logs)"),
        &with?,
        Some(&without),
        Some(1.1),
        None,
    ))
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
        // sidecar's own (docs/performance.md, A fleet of many logs).
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
    lines.push(changing(js, &c, samples.min(5)).await?);
    lines.push(unmanaged(js, &c, samples.min(5)).await?);
    lines.push(rss_line(
        "fleet: peak RSS, run × 50 ticks (1,000 logs)",
        rss_kib,
        took,
        64.0,
    ));
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
