//! The state the bench measures on: its configurations, the buckets and
//! logs it builds, and a sidecar holding the duty.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;

use crate::broker::Broker;
use crate::config::{self, Config};
use crate::rows::Timestamp;
use crate::tick::Sidecar;

/// A fence permit for a purge the bench times: a real lease in a bucket of
/// the bench's own, renewed as the duty holder renews it (the purge takes
/// nothing less).
pub(super) async fn bench_permit(
    broker: &Broker,
) -> Result<crate::broker::lease::FencePermit, String> {
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

pub(super) const STREAM: &str = "BENCH_LOG";

pub(super) fn bench_config(url: &str, suffix: &str, domains: usize) -> Result<Config, String> {
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

/// Every bucket of the contract, created where missing.
pub(super) async fn ensure_buckets(broker: &Broker, config: &Config) -> Result<(), String> {
    for spec in crate::buckets::contract_buckets(config) {
        broker
            .ensure_bucket(&spec)
            .await
            .map_err(|e| format!("bucket {}: {e}", spec.name))?;
    }
    Ok(())
}

/// The state of the tick scenario: `positions` position rows over
/// `domains` streams, 1,000 holds (half expired), 100 presence leases,
/// 100 snapshot rows, 50 backup manifests, a feed consumer per stream.
pub(super) async fn build(
    broker: &Broker,
    config: &Config,
    positions: usize,
) -> Result<(), String> {
    let b = &config.buckets;
    ensure_buckets(broker, config).await?;
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
pub(super) fn fleet_config(url: &str, suffix: &str, domains: usize) -> Result<Config, String> {
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
pub(super) async fn build_fleet(broker: &Broker, config: &Config) -> Result<(), String> {
    let b = &config.buckets;
    ensure_buckets(broker, config).await?;
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

/// `nodes` data nodes with a live presence lease each, and a snapshot
/// register each naming every configured log at `position`.
pub(super) async fn nodes_with_snapshots(
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

/// A tick that writes every floors row, the tick the scenarios' table
/// times (an unchanged row is otherwise left standing on alternate ticks,
/// and one side of a pair would be timed writing and the other not; the
/// fleet times a tick that leaves them standing beside it).
pub(super) async fn writing_tick(s: &mut Sidecar) -> crate::tick::TickReport {
    s.forget_written();
    s.tick().await
}

/// Ticks `s` until it holds the duty, and returns that tick. A lease an
/// earlier scenario's process left lapses within its TTL; until then a
/// tick publishes nothing, and timing it would time the wrong tick.
pub(super) async fn holding(s: &mut Sidecar) -> Result<crate::tick::TickReport, String> {
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

/// A figure over failed work is not a figure: every log of the `what`
/// tick `r` must have its row written (or standing, confirmed), or the
/// scenario stops with the log, the failure and any NOT READY reason.
pub(super) fn published(r: &crate::tick::TickReport, what: &str) -> Result<(), String> {
    match r
        .domains
        .iter()
        .find(|d| !matches!(d.published, Some(Ok(_))))
    {
        Some(d) => Err(format!(
            "the {what} tick did not publish {}: {:?} ({:?})",
            d.answer.stream, d.published, d.answer.not_ready
        )),
        None => Ok(()),
    }
}
