//! A simulated node, for the compose setup in docker/ and as an example of
//! `crewlet::node`: it publishes a few records to its log, "applies" them
//! by following the log's end, and writes its rows as a real node must
//! (presence lease, position, snapshot register, and now and then a
//! verified backup manifest).
//!
//! ```sh
//! cargo run --example simulated_node -- --server nats://127.0.0.1:4222 --node node-1 \
//!     --stream CREWLET_TRACKER_LOG --gate-subject crewlet.tracker.gate --replicas 1 --every 2s
//! ```

use std::time::Duration;

use crewlet::config::{Buckets, Domain, NatsConfig};
use crewlet::node::Node;
use crewlet::rows::{Artefact, BackupManifest, SkipReason, Timestamp};

/// `--flag value`, or the default.
fn arg(args: &[String], flag: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--server", "nats://127.0.0.1:4222");
    let id = arg(&args, "--node", "node-1");
    let stream = arg(&args, "--stream", "CREWLET_TRACKER_LOG");
    let gate = arg(&args, "--gate-subject", "crewlet.tracker.gate");
    let replicas: usize = arg(&args, "--replicas", "1").parse()?;
    let every = crewlet::config::duration::parse(&arg(&args, "--every", "2s"))
        .map_err(anyhow::Error::msg)?;

    // Started beside the brokers in any order: wait for them.
    let broker = loop {
        match crewlet::broker::connect(&url, &NatsConfig::default(), &format!("simulated/{id}"))
            .await
        {
            Ok(b) => break b,
            Err(e) => {
                eprintln!("waiting for the broker: {e}");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    let domain = Domain {
        name: "tracker".into(),
        stream: stream.clone(),
        gate_subject: Some(gate),
        gate_reserve: true,
        feed_consumer: None,
        archive: None,
        replicas: Default::default(),
    };
    while let Err(e) = broker.ensure_log_stream(&domain, replicas).await {
        eprintln!("waiting to create {stream}: {e}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let node = Node::with_broker(broker.clone(), Buckets::default(), &id)?;
    let mut round: u64 = 0;
    loop {
        round += 1;
        // Each step is retried on the next round if the broker does not
        // answer (a leader election after a server is lost).
        let step = async {
            broker
                .publish_many(&format!("{stream}.records"), 10)
                .await
                .map_err(anyhow::Error::msg)?;
            let log = broker
                .stream_state(&stream)
                .await
                .map_err(anyhow::Error::msg)?;
            let now = Timestamp(chrono::Utc::now());
            node.lease(&["data"], "simulated").await?;
            node.report(&stream, log.last_seq, 0, log.created).await?;
            let artefact = Artefact {
                position: log.last_seq,
                generation: 0,
                taken_at: now,
                verified: true,
            };
            node.register_snapshots([(stream.clone(), artefact)].into(), SkipReason::None)
                .await?;
            if round % 10 == 1 {
                node.announce_backup(&BackupManifest {
                    id: format!("b{round}"),
                    node: id.clone(),
                    taken_at: now,
                    completed_at: Some(now),
                    verified: true,
                    owner: "simulated".into(),
                    positions: [(stream.clone(), log.last_seq)].into(),
                })
                .await?;
            }
            anyhow::Ok(log.last_seq)
        };
        match step.await {
            Ok(seq) => println!("{id}: applied {stream} up to {seq}"),
            Err(e) => eprintln!("{id}: {e}; trying again"),
        }
        tokio::time::sleep(every).await;
    }
}
