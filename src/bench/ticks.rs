//! The tick at one log: against its bare full read, as the views churn,
//! and the pure computation alone.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;

use crate::broker::Broker;
use crate::config::Config;
use crate::floor::{self, DomainRead, ParsedRows, Policy, StreamState};
use crate::rows::Timestamp;
use crate::tick::Sidecar;

use super::measure::*;
use super::world::*;

/// Rows changed before each measured read at 100,000 rows.
pub(super) const CHURN: [usize; 6] = [0, 1_000, 5_000, 10_000, 30_000, 100_000];

/// The views at 100,000 position rows: for each count of [`CHURN`], that
/// many rows written again, then the views read (`Mode::Kept`), against
/// the full bare read of the same buckets interleaved with them; and the
/// plot of the one against the other (docs/views-churn.svg).
pub(super) async fn churn(
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

/// Median of the tick and of its baseline, interleaved so that noise hits both.
pub(super) async fn tick_vs_bare(
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
        // At 100,000 rows the row once passed the broker's max_payload,
        // and the line timed a failing publish.
        published(&r, "writing")?;
        let t = Instant::now();
        broker.bare_read(config).await?;
        bares.push(ms(t.elapsed()));
    }
    sidecar.duty.release(&sidecar.broker).await;
    Ok((stats(ticks), stats(bares)))
}

/// The pure computation for `nodes` nodes on one log, in memory.
pub(super) fn pure_floor(nodes: usize, samples: usize) -> Stats {
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
        settings: Default::default(),
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
        orphaned: Vec::new(),
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

/// Nodes on the log of [`purging_at_scale`], all but 100 of them not live.
const SCALE_NODES: usize = 100_000;

/// A tick that publishes and purges with [`SCALE_NODES`] nodes on one log,
/// all but 100 without a presence lease and every one at the log's end; a
/// hold moved ten records on before each tick, so that each tick writes
/// its row and purges exactly ten records (checked: a figure over failed
/// work is not a figure). Against the bare full read of the same buckets.
pub(super) async fn purging_at_scale(
    js: &Broker,
    broker: &Broker,
    url: &str,
    samples: usize,
) -> Result<Line, String> {
    let text = format!(
        "node: {{id: bench-1}}\nnats: {{url: \"{url}\"}}\nretention: {{tick: 10s, backup_owner: bench, presence_ttl: 10m, min_age: 1s, snapshot_interval: 100ms, snapshots_kept: 1, snapshot_quorum: 1, allow_unsafe_limits: true}}\ntrim: {{enabled: true}}\nbuckets: {{presence: pnl, positions: onl, holds: hnl, backups: bnl, snapshots: snl, floors: fnl, duty: dnl, gates: gnl}}\ndomains:\n  - {{name: d0, stream: {STREAM}nl_0}}\n"
    );
    let c = crate::config::check(&text)
        .config
        .ok_or("the scale configuration is invalid")?;
    let b = &c.buckets;
    let stream = c.domains[0].stream.clone();
    eprintln!("building {SCALE_NODES} nodes on one log …");
    ensure_buckets(js, &c).await?;
    let created = js
        .create_plain_stream(&stream, Some(1 << 30), b.replicas)
        .await?
        .to_rfc3339();
    let end = 200 + 10 * (samples as u64 + 1);
    js.publish_many(&format!("{stream}.r"), end as usize)
        .await
        .map_err(|e| e.to_string())?;
    let now = Utc::now();
    let ts = |secs: i64| Timestamp(now + chrono::Duration::seconds(secs)).to_rfc3339();
    js.fill(
        &b.positions,
        (0..SCALE_NODES)
            .map(|i| {
                let node = format!("node-{i}");
                (
                    format!("{stream}.{node}"),
                    json!({"node": node, "stream": stream, "seq": end, "generation": 0, "stream_created": created, "updated_at": ts(0), "status": "ok"}).to_string(),
                )
            })
            .collect(),
    )
    .await?;
    nodes_with_snapshots(js, &c, 100, end).await?;
    let done = Timestamp(Utc::now()).to_rfc3339();
    js.fill(
        &b.backups,
        vec![(
            "node-1.b1".into(),
            json!({"id": "b1", "node": "node-1", "taken_at": ts(-120), "completed_at": done, "verified": true, "positions": {&stream: end}}).to_string(),
        )],
    )
    .await?;
    let hold = |seq: u64| {
        js.fill(
            &b.holds,
            vec![(
                format!("{stream}.mover"),
                json!({"seq": seq, "owner": "bench", "expires_at": ts(3600)}).to_string(),
            )],
        )
    };
    let mut sidecar = Sidecar::new(c.clone(), broker.clone());
    hold(100).await?;
    holding(&mut sidecar).await?;
    broker.bare_read(&c).await?;
    let (mut ticks, mut bares) = (Vec::new(), Vec::new());
    for i in 1..=samples as u64 {
        hold(100 + 10 * i).await?;
        let t = Instant::now();
        let r = sidecar.tick().await;
        let took = ms(t.elapsed());
        let d = r.domains.first().ok_or("no domain")?;
        if !matches!(d.published, Some(Ok(_))) || d.stood.is_some() {
            return Err(format!(
                "the tick at {SCALE_NODES} nodes did not write its row: {:?}",
                d.published
            ));
        }
        // The first tick purges up to the hold; each after it, ten.
        if i > 1 && !matches!(d.purged, Some(Ok(10))) {
            return Err(format!(
                "the tick at {SCALE_NODES} nodes purged {:?}, not 10 ({:?})",
                d.purged, d.answer.blocked_by
            ));
        }
        let t = Instant::now();
        broker.bare_read(&c).await?;
        let bare = ms(t.elapsed());
        if i > 1 {
            ticks.push(took);
            bares.push(bare);
        }
    }
    sidecar.duty.release(&sidecar.broker).await;
    let _ = js.delete_stream(&stream).await;
    for (_, bucket) in b.all() {
        let _ = js.delete_bucket(bucket).await;
    }
    Ok(line(
        &format!("tick, {SCALE_NODES} nodes (100 live), publishing and purging"),
        &stats(ticks),
        Some(&stats(bares)),
        Some(0.5),
        None,
    ))
}
