//! A NATS cluster on loopback: three (or five) `nats-server`s with
//! JetStream, routed to each other, each with its own store under a
//! temporary directory and free ports. Killed and removed on drop.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use async_nats::jetstream;

use super::{free_port, Server};

pub struct Cluster {
    pub servers: Vec<Server>,
}

impl Cluster {
    /// `n` servers routed to each other; returns once JetStream answers
    /// on every one (a meta leader is elected).
    pub async fn start(n: usize) -> Cluster {
        Self::start_with(n, "").await
    }

    /// As [`Cluster::start`], with more server configuration (`jetstream
    /// { max_file_store: … }`, say) on every server.
    pub async fn start_with(n: usize, extra: &str) -> Cluster {
        let routes: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let all = routes
            .iter()
            .map(|p| format!("nats-route://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(", ");
        let servers = (0..n)
            .map(|i| {
                Server::start_with(
                    &format!(
                        "server_name: s{i}\ncluster {{\n  name: crewlet-test\n  listen: 127.0.0.1:{}\n  routes: [{all}]\n}}\n{extra}",
                        routes[i]
                    ),
                    "nats",
                )
            })
            .collect();
        let cluster = Cluster { servers };
        for s in &cluster.servers {
            cluster.ready(s).await;
        }
        cluster
    }

    /// Waits until JetStream on `s` answers with the whole cluster behind
    /// it (an R3 stream can be placed).
    async fn ready(&self, s: &Server) {
        let js = s.js().await;
        let deadline = Instant::now() + Duration::from_secs(20);
        let probe = format!("PROBE_{}", s.port);
        loop {
            let made = js
                .create_stream(jetstream::stream::Config {
                    name: probe.clone(),
                    subjects: vec![format!("probe.{}", s.port)],
                    num_replicas: self.servers.len().min(3),
                    storage: jetstream::stream::StorageType::Memory,
                    ..Default::default()
                })
                .await;
            if made.is_ok() {
                let _ = js.delete_stream(&probe).await;
                return;
            }
            assert!(Instant::now() < deadline, "cluster not ready: {made:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every server's URL, comma-separated, server `first` first (a
    /// sidecar beside a server lists its own first).
    pub fn urls_from(&self, first: usize) -> String {
        let mut urls = vec![self.servers[first].url()];
        urls.extend(
            self.servers
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != first)
                .map(|(_, s)| s.url()),
        );
        urls.join(",")
    }

    pub fn urls(&self) -> String {
        self.urls_from(0)
    }
}
