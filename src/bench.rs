//! `crewlet bench`: the performance figures (docs/performance.md), each
//! against a baseline measured in the same run (these machines are shared
//! and noisy, so only ratios travel). Starts its own nats-server, builds the
//! state, and prints median, spread and ratio per scenario.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;

use crate::broker::Broker;
use crate::config::{self, Config, Dur};
use crate::embedded::EmbeddedServer;
use crate::exit::Exit;
use crate::floor::{self, DomainRead, ParsedRows, Policy, StreamState};
use crate::rows::Timestamp;
use crate::tick::Sidecar;

/// Median and spread of some samples, in milliseconds.
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    n: usize,
}

fn stats(mut ms: Vec<f64>) -> Stats {
    ms.sort_by(|a, b| a.total_cmp(b));
    let n = ms.len();
    Stats {
        median: if n == 0 { 0.0 } else { ms[n / 2] },
        min: ms.first().copied().unwrap_or(0.0),
        max: ms.last().copied().unwrap_or(0.0),
        n,
    }
}

/// A fence permit for a purge the bench times: a real lease in a bucket of
/// the bench's own, renewed as the duty holder renews it (the purge takes
/// nothing less).
async fn bench_permit(broker: &Broker) -> Result<crate::broker::lease::FencePermit, String> {
    const BUCKET: &str = "crewlet_bench_duty";
    broker
        .ensure_bucket(&crate::buckets::BucketSpec {
            role: "duty",
            name: BUCKET.into(),
            history: 1,
            max_age: Duration::from_secs(60),
            sidecar_owned: true,
            replicas: 1,
        })
        .await
        .map_err(|e| e.to_string())?;
    let session = crate::rows::OpId::mint(Utc::now()).to_string();
    let lease = crate::broker::lease::Lease {
        bucket: BUCKET,
        holder: "bench",
        session: &session,
        claimed_at: Timestamp(Utc::now()),
        window: Duration::from_secs(30),
    };
    let revision = broker
        .kv_put(
            BUCKET,
            crate::rows::DUTY_KEY,
            lease.row(&session, Utc::now()),
        )
        .await?;
    match broker.renew_lease(&lease, revision, &[], Utc::now()).await {
        crate::broker::lease::Renewal::Held { permit, .. } => Ok(permit),
        other => Err(format!("the bench's lease was not renewed: {other:?}")),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One printed line of the report.
struct Line {
    name: String,
    value: String,
    baseline: String,
    ratio: Option<f64>,
    target: String,
    ok: bool,
}

fn line(
    name: &str,
    s: &Stats,
    base: Option<&Stats>,
    ratio_max: Option<f64>,
    abs_max_ms: Option<f64>,
) -> Line {
    let ratio = base.map(|b| s.median / b.median);
    let ok = ratio.zip(ratio_max).is_none_or(|(r, m)| r <= m)
        && abs_max_ms.is_none_or(|m| s.median <= m);
    let mut target = Vec::new();
    if let Some(m) = ratio_max {
        target.push(format!("≤ {m:.2}×"));
    }
    if let Some(m) = abs_max_ms {
        target.push(format!("≤ {m:.0} ms"));
    }
    Line {
        name: name.to_string(),
        value: format!(
            "{:.2} ms (min {:.2}, max {:.2}, n={})",
            s.median, s.min, s.max, s.n
        ),
        baseline: base
            .map(|b| format!("{:.2} ms (min {:.2}, max {:.2})", b.median, b.min, b.max))
            .unwrap_or_else(|| "-".into()),
        ratio,
        target: target.join(", "),
        ok,
    }
}

const STREAM: &str = "BENCH_LOG";

fn bench_config(url: &str, suffix: &str, domains: usize) -> Result<Config, String> {
    let mut text = format!(
        "node: {{id: bench-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 10s, backup_owner: bench, presence_ttl: 10m}}\ntrim: {{enabled: true}}\nbuckets: {{presence: p{suffix}, positions: o{suffix}, holds: h{suffix}, backups: b{suffix}, snapshots: s{suffix}, floors: f{suffix}, duty: d{suffix}, gates: g{suffix}}}\ndomains:\n"
    );
    for i in 0..domains {
        text.push_str(&format!(
            "  - {{name: d{i}, stream: {STREAM}{suffix}_{i}, feed_consumer: feed}}\n"
        ));
    }
    config::check(&text)
        .config
        .ok_or_else(|| "the bench configuration is invalid".to_string())
}

/// The state of the tick scenario: `positions` position rows over
/// `domains` streams, 1,000 holds (half expired), 100 presence leases,
/// 100 snapshot rows, 50 backup manifests, a feed consumer per stream.
async fn build(broker: &Broker, config: &Config, positions: usize) -> Result<(), String> {
    let b = &config.buckets;
    for spec in crate::buckets::contract_buckets(config) {
        broker
            .ensure_bucket(&spec)
            .await
            .map_err(|e| format!("bucket {}: {e}", spec.name))?;
    }
    let now = Utc::now();
    let ts = |secs: i64| Timestamp(now + chrono::Duration::seconds(secs)).to_rfc3339();
    let per_domain = positions.div_ceil(config.domains.len().max(1));
    let mut pos = Vec::new();
    let mut holds = Vec::new();
    for d in &config.domains {
        let created = broker
            .create_plain_stream(&d.stream, Some(1 << 30), config.buckets.replicas)
            .await?
            .to_rfc3339();
        broker.publish_many(&format!("{}.r", d.stream), 200).await?;
        broker.create_durable(&d.stream, "feed").await?;
        for i in 0..per_domain {
            // node-0 stays at 0 so that the tick licenses no purge: the purge is measured on its own.
            let seq = if i == 0 { 0 } else { 150 };
            let node = format!("node-{i}");
            pos.push((
                format!("{}.{node}", d.stream),
                json!({"node": node, "stream": d.stream, "seq": seq, "generation": 0, "stream_created": created, "updated_at": ts(0), "status": "ok"}).to_string(),
            ));
        }
        for i in 0..1000 / config.domains.len().max(1) {
            let expires = if i % 2 == 0 { ts(3600) } else { ts(-3600) };
            holds.push((
                format!("{}.h{i}", d.stream),
                json!({"seq": 100 + i, "owner": "bench", "expires_at": expires}).to_string(),
            ));
        }
    }
    broker.fill(&b.positions, pos).await?;
    broker.fill(&b.holds, holds).await?;
    nodes_with_snapshots(broker, config, 100, 150).await?;
    let streams: Vec<&str> = config.domains.iter().map(|d| d.stream.as_str()).collect();
    // Completed after the streams were created, so that they count.
    let done = Timestamp(Utc::now()).to_rfc3339();
    let positions_map: serde_json::Map<String, serde_json::Value> = streams
        .iter()
        .map(|s| (s.to_string(), json!(150)))
        .collect();
    broker.fill(
        &b.backups,
        (0..50)
            .map(|i| (format!("node-{i}.b{i}"), json!({"id": format!("b{i}"), "node": format!("node-{i}"), "taken_at": ts(-120), "completed_at": done, "verified": true, "positions": positions_map}).to_string()))
            .collect(),
    )
    .await?;
    Ok(())
}

/// A fleet of `domains` logs (docs/performance.md, The scenarios: fleet):
/// no feed, no gate subject; the buckets of their own. Each log's ceiling
/// is 4 MiB (`allow_unsafe_limits`): the broker reserves every ceiling
/// against its store, and a thousand of 1 GiB would not fit this machine.
fn fleet_config(url: &str, suffix: &str, domains: usize) -> Result<Config, String> {
    let mut text = format!(
        "node: {{id: bench-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 10s, backup_owner: bench, presence_ttl: 10m, snapshot_quorum: 1, allow_unsafe_limits: true}}\ntrim: {{enabled: true}}\nbuckets: {{presence: p{suffix}, positions: o{suffix}, holds: h{suffix}, backups: b{suffix}, snapshots: s{suffix}, floors: f{suffix}, duty: d{suffix}, gates: g{suffix}}}\ndomains:\n"
    );
    for i in 0..domains {
        text.push_str(&format!("  - {{name: d{i}, stream: F{suffix}_{i}}}\n"));
    }
    config::check(&text)
        .config
        .ok_or_else(|| "the fleet's configuration is invalid".to_string())
}

/// The fleet's state: per log 20 records, 10 nodes' positions (node-0 at
/// 0, so that no tick purges: the purge is not what is measured), 10
/// holds (half expired) and a backup manifest; 10 presence leases and 10
/// snapshot registers naming every log.
async fn build_fleet(broker: &Broker, config: &Config) -> Result<(), String> {
    let b = &config.buckets;
    for spec in crate::buckets::contract_buckets(config) {
        broker
            .ensure_bucket(&spec)
            .await
            .map_err(|e| format!("bucket {}: {e}", spec.name))?;
    }
    let now = Utc::now();
    let ts = |secs: i64| Timestamp(now + chrono::Duration::seconds(secs)).to_rfc3339();
    let (mut pos, mut holds, mut backups) = (Vec::new(), Vec::new(), Vec::new());
    for d in &config.domains {
        let created = broker
            .create_plain_stream(&d.stream, Some(4 << 20), config.buckets.replicas)
            .await?
            .to_rfc3339();
        broker.publish_many(&format!("{}.r", d.stream), 20).await?;
        for i in 0..10 {
            let node = format!("node-{i}");
            let seq = if i == 0 { 0 } else { 15 };
            pos.push((
                format!("{}.{node}", d.stream),
                json!({"node": node, "stream": d.stream, "seq": seq, "generation": 0, "stream_created": created, "updated_at": ts(0), "status": "ok"}).to_string(),
            ));
            let expires = if i % 2 == 0 { ts(3600) } else { ts(-3600) };
            holds.push((
                format!("{}.h{i}", d.stream),
                json!({"seq": 5 + i, "owner": "bench", "expires_at": expires}).to_string(),
            ));
        }
        let done = Timestamp(Utc::now()).to_rfc3339();
        backups.push((
            format!("node-1.{}", d.name),
            json!({"id": d.name, "node": "node-1", "taken_at": ts(-120), "completed_at": done, "verified": true, "positions": {&d.stream: 15}}).to_string(),
        ));
    }
    broker.fill(&b.positions, pos).await?;
    broker.fill(&b.holds, holds).await?;
    broker.fill(&b.backups, backups).await?;
    nodes_with_snapshots(broker, config, 10, 15).await?;
    Ok(())
}

/// The fleet's timings: the two kinds of tick, the bare reads, and the
/// bare reads followed by the bare writes of the same rows.
struct FleetTimes {
    writing: Stats,
    standing: Stats,
    bare: Stats,
    bare_and_writes: Stats,
    /// The floors bucket's writes each quiet tick cost (its stream's
    /// `last_seq` before and after): `_tick` alone.
    quiet_writes: Vec<u64>,
}

/// The scratch bucket the bare writes go to: the floors bucket's settings
/// under another name, so that the sidecar's own rows are not touched.
fn scratch_floors(config: &Config) -> Option<crate::buckets::BucketSpec> {
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
async fn bare_writes(
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
async fn fleet_tick_vs_bare(
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

/// Least squares of `points`: the slope and r².
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let slope = sxy / sxx;
    let resid: f64 = points
        .iter()
        .map(|(x, y)| (y - (my + slope * (x - mx))).powi(2))
        .sum();
    let total: f64 = points.iter().map(|(_, y)| (y - my).powi(2)).sum();
    (slope, 1.0 - resid / total)
}

/// A fleet of many logs: the tick at 10, 100 and 1,000 logs against its
/// bare reads, the cost per added log, `status --json` at 1,000 logs
/// against its bare probe, and the peak RSS of 50 ticks.
async fn fleet(
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

/// `nodes` data nodes with a live presence lease each, and a snapshot
/// register each naming every configured log at `position`.
async fn nodes_with_snapshots(
    broker: &Broker,
    config: &Config,
    nodes: usize,
    position: u64,
) -> Result<(), String> {
    let b = &config.buckets;
    let now = Utc::now();
    let ts = |secs: i64| Timestamp(now + chrono::Duration::seconds(secs)).to_rfc3339();
    let nodes: Vec<String> = (0..nodes).map(|i| format!("node-{i}")).collect();
    broker
        .fill(
            &b.presence,
            nodes
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        json!({"node": n, "roles": ["data"], "started_at": ts(-60)}).to_string(),
                    )
                })
                .collect(),
        )
        .await?;
    let artefacts: serde_json::Map<String, serde_json::Value> = config
        .domains
        .iter()
        .map(|d| {
            (
                d.stream.clone(),
                json!({"position": position, "generation": 0, "taken_at": ts(-5), "verified": true}),
            )
        })
        .collect();
    broker.fill(&b.snapshots, nodes.iter().map(|n| (n.clone(), json!({"node": n, "updated_at": ts(0), "skip_reason": "", "artefacts": artefacts}).to_string())).collect()).await
}

/// Rows changed before each measured read at 100,000 rows.
const CHURN: [usize; 6] = [0, 1_000, 5_000, 10_000, 30_000, 100_000];

/// The views at 100,000 position rows: for each count of [`CHURN`], that
/// many rows written again, then the views read (`Mode::Kept`), against
/// the full bare read of the same buckets interleaved with them; and the
/// plot of the one against the other (docs/views-churn.svg).
async fn churn(
    js: &Broker,
    broker: &Broker,
    url: &str,
    samples: usize,
) -> Result<Vec<Line>, String> {
    use crate::broker::view::Mode;
    eprintln!("building 100,000 position rows …");
    let c = bench_config(url, "ch", 1)?;
    build(js, &c, 100_000).await?;
    let rows = broker
        .read_rows(&c.buckets)
        .await
        .positions
        .map_err(|e| e.to_string())?;
    let rows: Vec<(String, String)> = rows
        .into_iter()
        .map(|e| (e.key, String::from_utf8_lossy(&e.value).into_owned()))
        .collect();
    broker.read_all_viewed(&c.buckets, Mode::Fresh).await;
    let mut full = Vec::new();
    let mut by_churn: Vec<Vec<f64>> = vec![Vec::new(); CHURN.len()];
    for _ in 0..samples {
        for (i, n) in CHURN.iter().enumerate() {
            let t = Instant::now();
            std::hint::black_box(broker.read_rows(&c.buckets).await);
            full.push(ms(t.elapsed()));
            js.fill(
                &c.buckets.positions,
                rows.iter().take(*n).cloned().collect(),
            )
            .await?;
            let t = Instant::now();
            let (_, _, took) = broker.read_all_viewed(&c.buckets, Mode::Kept).await;
            by_churn[i].push(ms(t.elapsed()));
            if took.kept != 7 {
                return Err(format!(
                    "a view was rebuilt after {n} rows changed: {took:?}"
                ));
            }
        }
    }
    for (_, bucket) in c.buckets.all() {
        let _ = js.delete_bucket(bucket).await;
    }
    let full = stats(full);
    let medians: Vec<(usize, f64)> = CHURN
        .iter()
        .zip(&by_churn)
        .map(|(n, t)| (*n, stats(t.clone()).median))
        .collect();
    let points: Vec<(f64, f64)> = medians.iter().map(|(n, t)| (*n as f64, *t)).collect();
    write_plot(
        "views-churn.svg",
        &plot_svg(&Plot {
            title: "Reading 7 buckets at 100,000 position rows (crewlet-bench --only churn)",
            x_label: "rows changed since the last read",
            points: &points,
            beside: None,
            level: Some((
                format!("full read of every row: {:.0} ms", full.median),
                full.median,
            )),
        }),
    );
    let mut lines = Vec::new();
    for (n, t) in CHURN.iter().zip(by_churn) {
        let target = match n {
            0 => None,
            1_000 => Some(0.25),
            _ => None,
        };
        lines.push(line(
            &format!("views, {n} of 100,000 rows changed"),
            &stats(t),
            Some(&full),
            target,
            None,
        ));
    }
    Ok(lines)
}

/// One chart of the bench: a title, the x axis's words, a series of
/// medians, and a second series (a baseline measured beside it) or a
/// horizontal line (one measured once), each labelled.
struct Plot<'a> {
    title: &'a str,
    x_label: &'a str,
    points: &'a [(f64, f64)],
    /// A second series, drawn dashed, with its label.
    beside: Option<(&'a str, &'a [(f64, f64)])>,
    /// A horizontal line, with its label.
    level: Option<(String, f64)>,
}

/// A chart as a small SVG written by hand (a plotting crate for two charts
/// would outweigh it).
fn plot_svg(p: &Plot) -> String {
    let (w, h, left, bottom, top, right) = (640.0, 400.0, 70.0, 50.0, 30.0, 40.0);
    let all = p
        .points
        .iter()
        .chain(p.beside.iter().flat_map(|b| b.1.iter()));
    let max_x = all.clone().map(|q| q.0).fold(1.0, f64::max);
    let max_y = all
        .map(|q| q.1)
        .chain(p.level.iter().map(|l| l.1))
        .fold(1.0, f64::max)
        * 1.1;
    let x = |v: f64| left + v / max_x * (w - left - right);
    let y = |v: f64| h - bottom - v / max_y * (h - bottom - top);
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{cx}" y="18" text-anchor="middle" font-size="14">{title}</text>
<line x1="{left}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/>
<line x1="{left}" y1="{top}" x2="{left}" y2="{b}" stroke="black"/>
<text x="{cx}" y="{xl}" text-anchor="middle">{x_label}</text>
<text x="16" y="{cy}" text-anchor="middle" transform="rotate(-90 16 {cy})">milliseconds (median)</text>
"##,
        title = p.title,
        x_label = p.x_label,
        cx = (left + w - right) / 2.0,
        cy = (top + h - bottom) / 2.0,
        b = h - bottom,
        r = w - right,
        xl = h - 12.0,
    );
    for i in 0..=5 {
        let v = max_x * f64::from(i) / 5.0;
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            x(v),
            h - bottom + 16.0,
            v.round()
        ));
        let t = max_y * f64::from(i) / 5.0;
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}</text>\n",
            left - 6.0,
            y(t) + 4.0,
            t
        ));
    }
    if let Some((label, level)) = &p.level {
        svg.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{fy:.1}\" x2=\"{r}\" y2=\"{fy:.1}\" stroke=\"#b33\" stroke-dasharray=\"6 4\"/>\n<text x=\"{r}\" y=\"{ty:.1}\" text-anchor=\"end\" fill=\"#b33\">{label}</text>\n",
            fy = y(*level),
            ty = y(*level) - 6.0,
            r = w - right,
        ));
    }
    let polyline = |points: &[(f64, f64)], colour: &str, dash: &str| {
        let path: Vec<String> = points
            .iter()
            .map(|(n, t)| format!("{:.1},{:.1}", x(*n), y(*t)))
            .collect();
        format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>\n",
            path.join(" ")
        )
    };
    if let Some((label, beside)) = &p.beside {
        svg.push_str(&polyline(beside, "#b33", " stroke-dasharray=\"6 4\""));
        if let Some((n, t)) = beside.last() {
            svg.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#b33\">{label}</text>\n",
                x(*n) - 6.0,
                y(*t) - 8.0
            ));
        }
    }
    svg.push_str(&polyline(p.points, "#246", ""));
    // A label only where it clears the last one; each on the left of its
    // point, but the first.
    let mut labelled = f64::NEG_INFINITY;
    for (i, (n, t)) in p.points.iter().enumerate() {
        let (px, py) = (x(*n), y(*t));
        svg.push_str(&format!(
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"#246\"/>\n"
        ));
        if px - labelled >= 45.0 {
            labelled = px;
            let (lx, anchor) = if i == 0 {
                (px + 6.0, "start")
            } else {
                (px - 6.0, "end")
            };
            svg.push_str(&format!(
                "<text x=\"{lx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"#246\">{t:.0} ms</text>\n",
                py - 8.0
            ));
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Writes `svg` to `docs/<name>` in the source tree, and says so.
fn write_plot(name: &str, svg: &str) {
    let plot = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    match std::fs::write(&plot, svg) {
        Ok(()) => eprintln!("plot written: {}", plot.display()),
        Err(e) => eprintln!("plot not written ({}): {e}", plot.display()),
    }
}

/// A tick that writes every floors row, the tick the scenarios' table
/// times (an unchanged row is otherwise left standing on alternate ticks,
/// and one side of a pair would be timed writing and the other not; the
/// fleet times a tick that leaves them standing beside it).
async fn writing_tick(s: &mut Sidecar) -> crate::tick::TickReport {
    s.forget_written();
    s.tick().await
}

/// Ticks `s` until it holds the duty, and returns that tick. A lease an
/// earlier scenario's process left lapses within its TTL; until then a
/// tick publishes nothing, and timing it would time the wrong tick.
async fn holding(s: &mut Sidecar) -> Result<crate::tick::TickReport, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = s.tick().await;
        if s.duty.holds() {
            return Ok(r);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} never took the duty of {}: another holder keeps it",
                s.config.node.id, s.config.buckets.duty
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Median of the tick and of its baseline, interleaved so that noise hits both.
async fn tick_vs_bare(
    broker: &Broker,
    config: &Config,
    samples: usize,
) -> Result<(Stats, Stats), String> {
    let mut sidecar = Sidecar::new(config.clone(), broker.clone());
    let mut ticks = Vec::new();
    let mut bares = Vec::new();
    holding(&mut sidecar).await?;
    broker.bare_read(config).await?;
    for _ in 0..samples {
        let t = Instant::now();
        let r = writing_tick(&mut sidecar).await;
        ticks.push(ms(t.elapsed()));
        // A figure over failed work is not a figure: every log's row must
        // have been written (at 100,000 rows the row once passed the
        // broker's max_payload, and the line timed a failing publish).
        if let Some(d) = r
            .domains
            .iter()
            .find(|d| !matches!(d.published, Some(Ok(_))))
        {
            return Err(format!(
                "the tick did not publish {}: {:?}",
                d.answer.stream, d.published
            ));
        }
        let t = Instant::now();
        broker.bare_read(config).await?;
        bares.push(ms(t.elapsed()));
    }
    sidecar.duty.release(&sidecar.broker).await;
    Ok((stats(ticks), stats(bares)))
}

/// The pure computation for `nodes` nodes on one log, in memory.
fn pure_floor(nodes: usize, samples: usize) -> Stats {
    let now = Utc::now();
    let created = Timestamp(now - chrono::Duration::days(1));
    let stream = "PURE";
    let entry = |key: String, value: serde_json::Value, revision| floor::Entry {
        key,
        value: value.to_string().into_bytes(),
        revision,
    };
    let ts = Timestamp(now).to_rfc3339();
    let rows = floor::Rows {
        presence: Ok((0..nodes / 10).map(|i| entry(format!("node-{i}"), json!({"node": format!("node-{i}"), "roles": ["data"], "started_at": ts}), 1)).collect()),
        positions: Ok((0..nodes)
            .map(|i| {
                entry(
                    format!("{stream}.node-{i}"),
                    json!({"node": format!("node-{i}"), "stream": stream, "seq": 1000 + i, "generation": 0, "stream_created": created, "updated_at": ts, "status": "ok"}),
                    1,
                )
            })
            .collect()),
        holds: Ok(vec![]),
        backups: Ok(vec![entry("node-0.b".into(), json!({"id": "b", "node": "node-0", "taken_at": ts, "completed_at": ts, "verified": true, "positions": {stream: 5000}}), 1)]),
        snapshots: Ok((0..nodes / 10)
            .map(|i| entry(format!("node-{i}"), json!({"node": format!("node-{i}"), "updated_at": ts, "skip_reason": "", "artefacts": {stream: {"position": 2000, "generation": 0, "taken_at": ts, "verified": true}}}), 1))
            .collect()),
        gates: Ok(vec![]),
        floors: Ok(vec![]),
    };
    // Parsing happens once per tick when the rows are read; the figure is
    // the computation over parsed rows.
    let parsed = ParsedRows::from_rows(&rows);
    let domain = crate::config::Domain {
        name: "pure".into(),
        stream: stream.into(),
        gate_subject: None,
        gate_reserve: true,
        feed_consumer: None,
        archive: None,
        replicas: Default::default(),
    };
    let policy = Policy {
        min_age: Duration::ZERO,
        backup_floor: crate::config::BackupPolicy::Engine,
        backup_max_age: Duration::from_secs(86400),
        snapshot_quorum: 2,
        fence_window: Duration::from_secs(60),
        tick: Duration::from_secs(10),
        trim_enabled: true,
        by: "bench".into(),
        session: String::new(),
    };
    let read = DomainRead {
        stream: Ok(StreamState {
            first_seq: 1,
            last_seq: 200_000,
            bytes: 1,
            messages: 200_000,
            consumers: 0,
            max_bytes: 1 << 30,
            created,
            first_ts: created,
            last_ts: created,
            facts: Default::default(),
            clustered: false,
            mark: None,
        }),
        feed: None,
        replicas: None,
        unprotected: Vec::new(),
        young_seq: Ok(None),
        absorbed: None,
        clock: None,
        archive: None,
    };
    let mut out = Vec::new();
    let _ = floor::compute(&domain, &policy, &parsed, &read, now);
    for _ in 0..samples {
        let t = Instant::now();
        let a = floor::compute(&domain, &policy, &parsed, &read, now);
        out.push(ms(t.elapsed()));
        std::hint::black_box(a);
    }
    stats(out)
}

fn time_process(bin: &Path, args: &[&str], samples: usize) -> Result<Stats, String> {
    let mut out = Vec::new();
    for i in 0..=samples {
        let t = Instant::now();
        let status = Command::new(bin)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        if !matches!(status.code(), Some(0) | Some(1)) {
            return Err(format!("{} {args:?} exited {status}", bin.display()));
        }
        if i > 0 {
            out.push(ms(t.elapsed()));
        }
    }
    Ok(stats(out))
}

/// Peak RSS (KiB) of `run` over `ticks` ticks: its own VmHWM, sampled from
/// /proc while it runs. (wait4's ru_maxrss would do, but Linux carries the
/// parent's high-water mark into a child across a vfork+exec, so it reports
/// this bench's own size.)
fn peak_rss(bin: &Path, cfg: &Path, ticks: u32) -> Result<(u64, Duration), String> {
    let t = Instant::now();
    let log = cfg.with_extension("log");
    let stderr = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let mut child = Command::new(bin)
        .args(["retention", "run", "--config"])
        .arg(cfg)
        .args(["--ticks", &ticks.to_string()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| e.to_string())?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_path) {
            if let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = peak.max(kib);
            }
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            // A run that did not tick measured nothing: say why, rather
            // than report its few kilobytes as a pass.
            if !status.success() || peak == 0 {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: String = said.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
                return Err(format!(
                    "crewlet retention run --ticks {ticks} ended {status}: {tail}"
                ));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((peak, t.elapsed()))
}

/// `crewlet-bench` options.
#[derive(Debug, clap::Parser)]
#[command(
    name = "crewlet-bench",
    version,
    about = "Performance figures of crewlet against baselines measured in the same run (docs/performance.md). Starts its own nats-servers; about four minutes in all (2026-12-03, 2 cores), --only for one scenario. Build and run it with scripts/bench."
)]
pub struct BenchArgs {
    /// Samples per scenario.
    #[arg(long, default_value_t = 15)]
    pub samples: usize,
    /// Run only these scenarios (comma-separated): tick, churn, scaling,
    /// pure, status, fleet, memory, publisher, http, archive, cluster.
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
        lines.push(Line {
            name: "peak RSS, run × 50 ticks".into(),
            value: format!(
                "{:.1} MB ({:.1} s)",
                rss_kib as f64 / 1024.0,
                took.as_secs_f64()
            ),
            baseline: "-".into(),
            ratio: None,
            target: "≤ 25 MB".into(),
            ok: (rss_kib as f64 / 1024.0) <= 25.0,
        });
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

/// One client request's latency, with which path it was (0 `/metrics`,
/// 1 `/v1/retention`).
type Timed = Result<(usize, f64), String>;

/// One GET over a fresh loopback connection: how long until the whole
/// answer was read. (A measuring tool, not a client: it sends one fixed
/// request and reads to the close, blocking, so that the load it makes
/// is the requests and not a runtime of its own.)
fn timed_get(port: u16, path: &str, token: &str) -> Result<f64, String> {
    use std::io::{Read, Write};
    let t = Instant::now();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    // As Prometheus and browsers ask: compressed.
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n");
    c.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(1 << 18);
    c.read_to_end(&mut out).map_err(|e| e.to_string())?;
    if !out.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "{path}: {}",
            String::from_utf8_lossy(&out[..out.len().min(80)])
        ));
    }
    Ok(ms(t.elapsed()))
}

/// The HTTP surface's figures (docs/http.md): `/metrics` and `/v1/retention`
/// under a bounded load of concurrent requests on loopback (p99), and the
/// tick with that load against the tick without it, interleaved.
async fn http_lines(broker: &Broker, config: &Config, samples: usize) -> Result<Vec<Line>, String> {
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let dir = std::env::temp_dir().join(format!("crewlet-bench-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let token = crate::http::tokens::mint()?;
    let file = crate::http::tokens::TokenFile {
        tokens: vec![crate::http::tokens::Entry {
            name: "bench".into(),
            sha256: crate::http::tokens::hash(&token),
            scopes: vec!["read".into()],
        }],
    };
    let tokens_file = dir.join("tokens.yaml");
    crate::http::tokens::store(&tokens_file, &file)?;
    let mut config = config.clone();
    config.http.tokens_file = Some(tokens_file);
    let shared = Arc::new(crate::http::Shared::new(config.clone(), broker.clone()));
    let stop = Arc::new(tokio::sync::Notify::new());
    // Served as `retention run` serves it: on a thread of its own.
    let server = crate::http::serve_apart(listener, shared.clone(), stop.clone())
        .map_err(|e| e.to_string())?;
    let mut sidecar = Sidecar::new(config.clone(), broker.clone());
    sidecar.log_alarms = false;
    // As `retention run` records each tick's answer.
    let record = |s: &Sidecar, r: &crate::tick::TickReport| {
        shared.record(crate::http::Recorded::of(s, r, None));
    };
    let r = holding(&mut sidecar).await?;
    record(&sidecar, &r);
    // Four clients, each a request every 10 ms (400 a second, far above
    // any scrape), while the window is open. Each is a thread of its own,
    // started once, blocking on its socket, as scrapers are processes of
    // their own: on the loop's runtime they would measure its scheduling,
    // not the answers, and a thread or runtime started per sample would
    // measure its own start. Independent scrapers do not keep step: each
    // window gives each client a fresh phase in the 10 ms period, drawn at
    // random, so they sometimes ask at once and sometimes apart.
    const CLIENTS: usize = 4;
    // The clients' window: how many have opened, whether the last is still
    // open, whether the scenario is over. Each client answers every window
    // once (with nothing, if it woke after the window closed), so the loop
    // never waits on a client that missed one.
    #[derive(Clone, Copy, Default)]
    struct Window {
        opened: u64,
        open: bool,
        over: bool,
    }
    let window = Arc::new((
        std::sync::Mutex::new(Window::default()),
        std::sync::Condvar::new(),
    ));
    let set_window = |open: bool, over: bool| {
        let (lock, changed) = &*window;
        let mut w = lock.lock().unwrap_or_else(|p| p.into_inner());
        w.opened += u64::from(open);
        (w.open, w.over) = (open, over);
        changed.notify_all();
    };
    let (gave, mut windows) = tokio::sync::mpsc::unbounded_channel::<Vec<Timed>>();
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let (window, gave, token) = (window.clone(), gave.clone(), token.clone());
        let path = if i % 2 == 0 {
            "/metrics"
        } else {
            "/v1/retention"
        };
        clients.push(std::thread::spawn(move || {
            let (lock, changed) = &*window;
            let now = || *lock.lock().unwrap_or_else(|p| p.into_inner());
            let mut served = 0;
            loop {
                served = {
                    let mut w = lock.lock().unwrap_or_else(|p| p.into_inner());
                    while w.opened == served && !w.over {
                        w = changed.wait(w).unwrap_or_else(|p| p.into_inner());
                    }
                    if w.over {
                        return;
                    }
                    w.opened
                };
                let phase = getrandom::u64().unwrap_or(0) % 10_000;
                std::thread::sleep(Duration::from_micros(phase));
                let mut got = Vec::new();
                while matches!(now(), w if w.open && w.opened == served) {
                    got.push(timed_get(port, path, &token).map(|l| (i % 2, l)));
                    std::thread::sleep(Duration::from_millis(10));
                }
                if gave.send(got).is_err() {
                    return;
                }
            }
        }));
    }
    drop(gave);
    let (mut quiet, mut loaded, mut latencies) = (Vec::new(), Vec::new(), Vec::new());
    let mut by_path: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    // Quiet then loaded in even samples, loaded then quiet in odd ones:
    // whatever follows from a tick's place (the full read every
    // `retention.full_read_every` ticks lands on one parity; what the tick
    // before left warm) falls on both halves alike.
    for k in 0..samples {
        for loaded_now in [k % 2 == 1, k % 2 == 0] {
            if !loaded_now {
                let t = Instant::now();
                let r = writing_tick(&mut sidecar).await;
                quiet.push(ms(t.elapsed()));
                record(&sidecar, &r);
                continue;
            }
            // The clients' window: from 20 ms before the tick until its
            // answer is recorded.
            set_window(true, false);
            tokio::time::sleep(Duration::from_millis(20)).await;
            let t = Instant::now();
            let r = writing_tick(&mut sidecar).await;
            loaded.push(ms(t.elapsed()));
            record(&sidecar, &r);
            set_window(false, false);
            for _ in 0..CLIENTS {
                let got = windows
                    .recv()
                    .await
                    .ok_or("the bench's HTTP clients stopped")?;
                for l in got {
                    let (which, l) = l?;
                    latencies.push(l);
                    by_path[which].push(l);
                }
            }
        }
    }
    set_window(false, true);
    for c in clients {
        c.join()
            .map_err(|_| "the bench's HTTP clients panicked".to_string())?;
    }
    let sizes = shared.last_sizes().unwrap_or_default();
    // The answer the surface keeps after each tick, written straight
    // (`status_json_text`) against the same bytes made through a value
    // first, as they were before (docs/performance.md), interleaved.
    let last = sidecar.tick().await;
    let kept = crate::http::Recorded::of(&sidecar, &last, None).status;
    let (mut straight, mut through) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let t = Instant::now();
        let a = crate::report::status_json_text(&kept);
        straight.push(ms(t.elapsed()));
        let t = Instant::now();
        let b = crate::report::status_json(&kept).to_string();
        through.push(ms(t.elapsed()));
        if a != b {
            return Err("the kept answer written straight differs from the value's".into());
        }
    }
    sidecar.duty.release(&sidecar.broker).await;
    stop.notify_one();
    let _ = server.await;
    let _ = std::fs::remove_dir_all(&dir);
    latencies.sort_by(|a, b| a.total_cmp(b));
    let p99 = latencies
        .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0);
    let p50 = latencies.get(latencies.len() / 2).copied().unwrap_or(0.0);
    let requests = Stats {
        median: p99,
        min: p50,
        max: latencies.last().copied().unwrap_or(0.0),
        n: latencies.len(),
    };
    let mut p99_line = line(
        "http: p99 of /metrics and /v1/retention (4 clients, 10 ms apart, gzip)",
        &requests,
        None,
        None,
        Some(5.0),
    );
    let p99_of = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get((v.len() * 99 / 100).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let (metrics_p99, status_p99) = (p99_of(&mut by_path[0]), p99_of(&mut by_path[1]));
    p99_line.value = format!(
        "{:.2} ms p99 (p50 {:.2}, max {:.2}, n={}; /metrics {:.2}, /v1/retention {:.2}; answers of {} and {})",
        p99,
        p50,
        requests.max,
        requests.n,
        metrics_p99,
        status_p99,
        crate::human::bytes(sizes.1),
        crate::human::bytes(sizes.0)
    );
    Ok(vec![
        p99_line,
        line(
            "http: tick under that load (10k rows)",
            &stats(loaded),
            Some(&stats(quiet)),
            Some(1.1),
            None,
        ),
        line(
            "http: the kept answer, written straight (10k rows)",
            &stats(straight),
            Some(&stats(through)),
            None,
            None,
        ),
    ])
}

/// The archive's figures (docs/performance.md): the fold of 100,000
/// records of 200 bytes and the merge read across the seam, each against
/// a raw ordered-consumer read of the same records; and the tick of an
/// archived domain with nothing to fold against the same tick without an
/// archive (`tick_config` is the tick scenario's). A time ratio of 1.25 is
/// a throughput of 0.8×.
async fn archive_lines(
    js: &Broker,
    url: &str,
    dir: &Path,
    tick_config: &Config,
    samples: usize,
) -> Result<Vec<Line>, String> {
    use crate::archive::cut::Limits;
    use crate::archive::fold::{fold, Store, Target};
    const N: u64 = 100_000;
    const ARCH: &str = "BENCH_ARCHIVE_LOG";
    eprintln!("publishing 100,000 records of 200 bytes …");
    let created = js.create_plain_stream(ARCH, Some(1 << 30), 1).await?;
    js.publish_sized(&format!("{ARCH}.r"), N as usize, 200)
        .await?;
    let broker = crate::broker::connect(url, &Default::default(), "bench-archive")
        .await
        .map_err(|e| e.to_string())?;
    let target = Target {
        stream: ARCH.into(),
        generation: 0,
        stream_created: created.to_rfc3339(),
    };
    let limits = Limits {
        segment_records: 10_000,
        segment_bytes: 8 << 20,
        fold_per_tick: 16,
    };
    let deadline = || tokio::time::Instant::now() + Duration::from_secs(120);
    let bucket = |i: usize| format!("bench_fold_{i}");
    // A fold of 100,000 records is a few hundred milliseconds here: as
    // many samples as the other scenarios (with 7, the object store's
    // median moved 1.17-1.31x from one run to the next).
    let runs = samples.max(3);
    let (mut raw, mut to_dir, mut to_bucket) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let t = Instant::now();
        let n = js.bare_slice(ARCH, 1, N).await?;
        raw.push(ms(t.elapsed()));
        if n as u64 != N {
            return Err(format!("the raw read saw {n} records, not {N}"));
        }
        let store = Store::Dir(dir.join(format!("fold-{i}")));
        let t = Instant::now();
        let f = fold(&broker, &store, &target, (0, N), limits, deadline())
            .await
            .map_err(|e| e.to_string())?;
        to_dir.push(ms(t.elapsed()));
        js.ensure_object_store(&bucket(i), 1).await?;
        let store = Store::ObjectStore(bucket(i));
        let t = Instant::now();
        let g = fold(&broker, &store, &target, (0, N), limits, deadline())
            .await
            .map_err(|e| e.to_string())?;
        to_bucket.push(ms(t.elapsed()));
        if f.frontier != N || g.frontier != N {
            return Err(format!("a fold stopped at {} / {}", f.frontier, g.frontier));
        }
    }
    let raw = stats(raw);
    let mut lines = vec![
        line(
            "archive: fold 100,000 × 200 B into a directory",
            &stats(to_dir),
            Some(&raw),
            Some(1.25),
            None,
        ),
        line(
            "archive: fold 100,000 × 200 B into an object store",
            &stats(to_bucket),
            Some(&raw),
            Some(1.25),
            None,
        ),
    ];
    // The merge read: 1..=50,000 archived and purged, 45,001..=55,000 read
    // across the seam against the raw read of 10,000 live records.
    let mut config = tick_config.clone();
    config.domains = vec![crate::config::Domain {
        name: "archived".into(),
        stream: ARCH.into(),
        gate_subject: None,
        gate_reserve: true,
        feed_consumer: None,
        archive: Some(crate::config::ArchiveConfig {
            object_store: Some(bucket(0)),
            dir: None,
            segment_records: 10_000,
            segment_bytes: crate::config::size::Size(8 << 20),
            fold_per_tick: 16,
        }),
        replicas: Default::default(),
    }];
    broker
        .purge_to(
            ARCH,
            crate::floor::PurgeTarget::for_bench(50_001),
            created,
            bench_permit(&broker).await?,
        )
        .await
        .map_err(|e| e.to_string())?;
    let domain = config.domains[0].clone();
    let (mut merged, mut live) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let t = Instant::now();
        let m = crate::archive::merge::read(&broker, &config, &domain, Some(45_001), 10_000, false)
            .await
            .map_err(|e| e.to_string())?;
        merged.push(ms(t.elapsed()));
        if m.records.len() != 10_000 || m.records.first().map(|r| r.0.seq) != Some(45_001) {
            return Err("the merge read did not return 45,001..=55,000".into());
        }
        let t = Instant::now();
        js.bare_slice(ARCH, 50_001, 60_000).await?;
        live.push(ms(t.elapsed()));
    }
    lines.push(line(
        "archive: merge read 10,000 across the seam",
        &stats(merged),
        Some(&stats(live)),
        Some(1.25),
        None,
    ));
    // The tick of an archived domain with nothing to fold (an archive of
    // 15 segments behind a frontier the trim does not reach) against the
    // same tick without one: the same rows, their own floors and duty.
    let mut archived = tick_config.clone();
    archived.buckets.floors = format!("{}_arch", tick_config.buckets.floors);
    archived.buckets.duty = format!("{}_arch", tick_config.buckets.duty);
    for spec in crate::buckets::contract_buckets(&archived) {
        js.ensure_bucket(&spec).await.map_err(|e| e.to_string())?;
    }
    js.ensure_object_store("bench_tick_archive", 1).await?;
    let d = &mut archived.domains[0];
    d.archive = Some(crate::config::ArchiveConfig {
        object_store: Some("bench_tick_archive".into()),
        dir: None,
        segment_records: 10,
        segment_bytes: crate::config::size::Size(8 << 20),
        fold_per_tick: 16,
    });
    let state = broker.stream_state(&d.stream).await?;
    let t = Target {
        stream: d.stream.clone(),
        generation: 0,
        stream_created: state.created.to_rfc3339(),
    };
    let seg = Limits {
        segment_records: 10,
        segment_bytes: 8 << 20,
        fold_per_tick: 1024,
    };
    fold(
        &broker,
        &Store::ObjectStore("bench_tick_archive".into()),
        &t,
        (0, 150),
        seg,
        deadline(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut with = Sidecar::new(archived, broker.clone());
    let mut without = Sidecar::new(tick_config.clone(), broker.clone());
    // The figures are the report; alarms about the bench's own rows are not.
    with.log_alarms = false;
    without.log_alarms = false;
    // The first archived tick adopts the 15 segments and publishes them.
    holding(&mut with).await?;
    holding(&mut without).await?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..samples {
        // The two share the broker connection, and with it the views of
        // the shared buckets: whichever ticks first after a change (a
        // lease or hold aging out) patches them for both. Alternating
        // which goes first cancels that, and the cache's favour to the
        // second.
        let order = if i % 2 == 1 {
            [false, true]
        } else {
            [true, false]
        };
        for archived in order {
            let t = Instant::now();
            if !archived {
                writing_tick(&mut without).await;
                b.push(ms(t.elapsed()));
                continue;
            }
            let r = writing_tick(&mut with).await;
            a.push(ms(t.elapsed()));
            let folded = r.domains[0]
                .answer
                .archive
                .as_ref()
                .and_then(|s| s.frontier);
            if folded != Some(150) {
                return Err(format!(
                    "the archived tick's frontier is {folded:?}, not 150"
                ));
            }
        }
    }
    with.duty.release(&with.broker).await;
    without.duty.release(&without.broker).await;
    lines.push(line(
        "archive: tick, archived, nothing to fold (10k rows)",
        &stats(a),
        Some(&stats(b)),
        Some(1.25),
        None,
    ));
    Ok(lines)
}

/// Starts three routed nats-servers, builds the tick's state with three
/// replicas, and measures the tick against the bare read there.
async fn on_a_cluster(dir: &Path, samples: usize) -> Result<(Stats, Stats), String> {
    let routes = (0..3)
        .map(|_| crate::embedded::free_port().map_err(|e| e.to_string()))
        .collect::<Result<Vec<u16>, String>>()?;
    let mut members = Vec::new();
    for (i, port) in routes.iter().enumerate() {
        let member = EmbeddedServer::start_member(
            &dir.join(format!("cluster-{i}")),
            &format!("bench-{i}"),
            *port,
            &routes,
        )
        .await;
        match member {
            Ok(m) => members.push(m),
            Err(e) => {
                for m in members {
                    m.stop().await;
                }
                return Err(e.to_string());
            }
        }
    }
    let urls = members
        .iter()
        .map(|m| m.url.clone())
        .collect::<Vec<_>>()
        .join(",");
    let measured = async {
        let mut config = bench_config(&urls, "c", 1)?;
        config.buckets.replicas = 3;
        let broker = crate::broker::connect(&urls, &config.nats, "bench-cluster")
            .await
            .map_err(|e| e.to_string())?;
        // The cluster elects its meta leader within a few seconds: until
        // an R3 stream can be placed, nothing else can be built.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match broker.create_plain_stream("BENCH_PROBE", None, 3).await {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        let _ = broker.delete_stream("BENCH_PROBE").await;
        build(&broker, &config, 10_000).await?;
        tick_vs_bare(&broker, &config, samples).await
    }
    .await;
    for m in members {
        m.stop().await;
    }
    measured
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

/// Messages per second of a publisher beside a sidecar (ticking every
/// second on `config`) against the same publisher with it paused.
/// Messages per throughput window: long enough (about a second) that
/// each window sees a tick or so.
const WINDOW: usize = 150_000;

/// With `same`, the sidecar stays paused in both halves of every pair: an
/// A/A run that shows the measurement's own noise.
#[allow(clippy::too_many_arguments)]
async fn publisher(
    js: &Broker,
    bin: &Path,
    dir: &Path,
    config: &Config,
    name: &str,
    samples: usize,
    min_ratio: Option<f64>,
    same: bool,
) -> Result<Line, String> {
    let pub_stream = &config.domains[0].stream;
    let subject = format!("{pub_stream}.pub");
    let mut cfg1 = config.clone();
    cfg1.trim.enabled = false;
    let pub_path = dir.join("pub.yaml");
    std::fs::write(
        &pub_path,
        serde_yaml::to_string(&cfg1).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let mut without = Vec::new();
    let mut with = Vec::new();
    let mut ratios = Vec::new();
    // One sidecar for the whole scenario, paused (SIGSTOP) for the runs
    // without it, so that neither side pays its start-up; pairs
    // alternate which goes first, and each pair gives one ratio.
    let mut side = Command::new(bin)
        .args(["retention", "run", "--config"])
        .arg(&pub_path)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = i32::try_from(side.id()).map_err(|e| e.to_string())?;
    let pause = |on: bool| {
        // SAFETY: signalling a child we spawned and have not reaped.
        unsafe {
            libc::kill(pid, if on { libc::SIGSTOP } else { libc::SIGCONT });
        }
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    js.publish_rate(&subject, 10_000).await?;
    for pair in 0..samples.max(9) {
        let measure = |running: bool| {
            pause(same || !running);
            let js = js.clone();
            let subject = subject.clone();
            async move { js.publish_rate(&subject, WINDOW).await }
        };
        let (w, wo) = if pair % 2 == 0 {
            let w = measure(true).await?;
            (w, measure(false).await?)
        } else {
            let wo = measure(false).await?;
            (measure(true).await?, wo)
        };
        with.push(w);
        without.push(wo);
        ratios.push(w / wo);
        // Keep the log well below its ceiling: drop what this pair wrote.
        let _ = js.purge_subject(pub_stream, &subject).await;
    }
    pause(false);
    // SIGTERM, as an operator stops it: the tick in flight finishes and the
    // duty is released, so the next scenario on these buckets is not kept
    // from it for a lease's TTL. Killed if it does not end in time.
    // SAFETY: signalling a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let stopped = Instant::now();
    while side.try_wait().map_err(|e| e.to_string())?.is_none() {
        if stopped.elapsed() > Duration::from_secs(30) {
            let _ = side.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = side.wait();
    let ratio = stats(ratios).median;
    let (w, wo) = (stats(with), stats(without));
    Ok(Line {
        name: name.into(),
        value: format!("{:.0} msg/s (min {:.0}, max {:.0})", w.median, w.min, w.max),
        baseline: format!("{:.0} msg/s without (paused)", wo.median),
        ratio: Some(ratio),
        target: min_ratio
            .map(|m| format!("≥ {m:.2}×"))
            .unwrap_or_else(|| "(reported)".into()),
        ok: min_ratio.is_none_or(|m| ratio >= m),
    })
}
