//! The archive: folding to a store against bare writes of the same
//! segments, and the archived idle tick.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::archive::cut::Limits;
use crate::archive::fold::{fold, Store, Target};
use crate::broker::Broker;
use crate::config::Config;
use crate::tick::Sidecar;

use super::measure::*;
use super::world::*;

/// The archive's figures (docs/performance.md): the fold of 100,000
/// records of 200 bytes and the merge read across the seam, each against
/// a raw ordered-consumer read of the same records; and the tick of an
/// archived domain with nothing to fold against the same tick without an
/// archive (`tick_config` is the tick scenario's). A time ratio of 1.25 is
/// a throughput of 0.8×.
pub(super) async fn archive_lines(
    js: &Broker,
    url: &str,
    dir: &Path,
    tick_config: &Config,
    samples: usize,
) -> Result<Vec<Line>, String> {
    const N: u64 = 100_000;
    const ARCH: &str = "BENCH_ARCHIVE_LOG";
    eprintln!("publishing 100,000 records of 200 bytes …");
    let FoldLog {
        broker,
        target,
        created,
        limits,
    } = fold_log(js, url, ARCH, N, false).await?;
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
            segment_records: 10_000,
            segment_bytes: crate::config::size::Size(8 << 20),
            fold_per_tick: 16,
            ..crate::config::ArchiveConfig::of(&Store::ObjectStore(bucket(0)))
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
    // tick scenario's tick without one: the same rows, built again for a
    // log of its own and buckets of their own. (Not the tick scenario's
    // log under another floors bucket: that log carries the adoption mark
    // of the floors bucket that published it first, and the other's
    // answer would be NOT READY `memory_lost`, its tick publishing
    // nothing.)
    lines.push(
        idle_tick_against(
            (js, &broker, url),
            ("ar", &Store::ObjectStore("bench_tick_archive".into())),
            tick_config,
            samples,
            "archive: tick, archived, nothing to fold (10k rows)",
        )
        .await?,
    );
    Ok(lines)
}

/// The tick of an archived domain with nothing to fold (the tick
/// scenario's rows, built again for a log of its own, `suffix` naming its
/// buckets; 15 segments of 10 records folded into `store`, a frontier the
/// trim does not reach) against the tick scenario's tick without an
/// archive (`tick_config`), alternated; each must publish. (Not the tick
/// scenario's log under another floors bucket: that log carries the
/// adoption mark of the floors bucket that published it first, and the
/// other's answer would be NOT READY `memory_lost`, its tick publishing
/// nothing.) The archived log and its buckets are deleted after.
pub(super) async fn idle_tick_against(
    (js, broker, url): (&Broker, &Broker, &str),
    (suffix, store): (&str, &Store),
    tick_config: &Config,
    samples: usize,
    name: &str,
) -> Result<Line, String> {
    const FRONTIER: u64 = 150;
    eprintln!(
        "building 10,000 position rows for an archived log ({}) …",
        store.id()
    );
    let mut archived = bench_config(url, suffix, 1)?;
    build(js, &archived, 10_000).await?;
    if let Store::ObjectStore(bucket) = store {
        js.ensure_object_store(bucket, 1).await?;
    }
    let d = &mut archived.domains[0];
    d.archive = Some(crate::config::ArchiveConfig {
        segment_records: 10,
        fold_per_tick: 16,
        ..crate::config::ArchiveConfig::of(store)
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    fold(broker, store, &t, (0, FRONTIER), seg, deadline)
        .await
        .map_err(|e| e.to_string())?;
    let configs = (archived, tick_config);
    let mut with = Sidecar::new(configs.0, broker.clone());
    let mut without = Sidecar::new(configs.1.clone(), broker.clone());
    // The figures are the report; alarms about the bench's own rows are not.
    with.log_alarms = false;
    without.log_alarms = false;
    // The first archived tick adopts the segments and publishes them.
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
            let r = if archived {
                writing_tick(&mut with).await
            } else {
                writing_tick(&mut without).await
            };
            let took = ms(t.elapsed());
            published(&r, if archived { "archived" } else { "unarchived" })?;
            if !archived {
                b.push(took);
                continue;
            }
            a.push(took);
            let folded = r.domains[0]
                .answer
                .archive
                .as_ref()
                .and_then(|s| s.frontier);
            if folded != Some(FRONTIER) {
                return Err(format!(
                    "the archived tick's frontier is {folded:?}, not {FRONTIER}"
                ));
            }
        }
    }
    with.duty.release(&with.broker).await;
    without.duty.release(&without.broker).await;
    let _ = js.delete_stream(&with.config.domains[0].stream).await;
    for (_, bucket) in with.config.buckets.all() {
        let _ = js.delete_bucket(bucket).await;
    }
    Ok(line(name, &stats(a), Some(&stats(b)), Some(1.25), None))
}

/// A log of its own for a fold scenario, its records published, with a
/// connection for the fold, the fold's target and its limits.
pub(super) struct FoldLog {
    pub broker: Broker,
    pub target: Target,
    pub created: crate::rows::Timestamp,
    pub limits: Limits,
}

/// Makes `log` with `n` records of 200 bytes: one repeated byte, or
/// `text` (which compresses as real records do).
pub(super) async fn fold_log(
    js: &Broker,
    url: &str,
    log: &str,
    n: u64,
    text: bool,
) -> Result<FoldLog, String> {
    let created = js.create_plain_stream(log, Some(1 << 30), 1).await?;
    let subject = format!("{log}.r");
    if text {
        js.publish_text(&subject, n as usize, 200).await?;
    } else {
        js.publish_sized(&subject, n as usize, 200).await?;
    }
    let broker = crate::broker::connect(url, &Default::default(), "bench-fold")
        .await
        .map_err(|e| e.to_string())?;
    Ok(FoldLog {
        broker,
        target: Target {
            stream: log.into(),
            generation: 0,
            stream_created: created.to_rfc3339(),
        },
        created,
        limits: Limits {
            segment_records: 10_000,
            segment_bytes: 8 << 20,
            fold_per_tick: 16,
        },
    })
}
