//! What runs apart from the one server: a three-server cluster, and a
//! publisher beside the sidecar.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::Broker;
use crate::config::Config;
use crate::embedded::EmbeddedServer;

use super::measure::*;
use super::ticks::tick_vs_bare;
use super::world::*;

/// Starts three routed nats-servers, builds the tick's state with three
/// replicas, and measures the tick against the bare read there.
pub(super) async fn on_a_cluster(dir: &Path, samples: usize) -> Result<(Stats, Stats), String> {
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

/// Messages per second of a publisher beside a sidecar (ticking every
/// second on `config`) against the same publisher with it paused.
/// Messages per throughput window: long enough (about a second) that
/// each window sees a tick or so.
pub(super) const WINDOW: usize = 150_000;

/// With `same`, the sidecar stays paused in both halves of every pair: an
/// A/A run that shows the measurement's own noise.
#[allow(clippy::too_many_arguments)]
pub(super) async fn publisher(
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
