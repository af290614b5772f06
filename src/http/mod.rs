//! The HTTP surface of `crewlet retention run` (docs/http.md): metrics, health,
//! the JSON API. Served on the tokio runtime the loop runs on, beside it:
//! answers come from the last tick's answer (`/metrics`, `/v1/retention`)
//! or from one bounded broker read (tail), so a slow or stuck client never
//! holds the loop. Every request is bounded in time and body size.

mod answer;
mod auth;
mod compress;
pub mod dashboard;
pub mod metrics;
mod nodes;
mod server;
mod streams;
pub mod tokens;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;

use crate::broker::Broker;
use crate::config::Config;
use tokens::Scope;

use answer::*;
use auth::*;
use compress::*;
use nodes::*;
use server::*;
use streams::*;

pub use auth::{authorise, domain_of, error, ApiError};
pub use server::{serve, serve_apart, MAX_CONNECTIONS};

/// The most a request may take before it is answered 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request body taken.
pub const MAX_BODY: usize = 64 * 1024;

/// What the last tick left for the HTTP surface, encoded once per tick so
/// that a request only copies bytes out (a status of 10,000 nodes is
/// megabytes), and compressed once per tick beside the loop: a request
/// that asks for gzip before that is done gets the plain answer, never a
/// wait.
#[derive(Debug)]
pub struct Last {
    /// The `status --json` object of that tick, serialized.
    pub status: axum::body::Bytes,
    /// The exposition text.
    pub metrics: axum::body::Bytes,
    /// When it was recorded: what `crewlet_answer_age_seconds` and an
    /// unreachable answer's `last_answer_at` count from.
    pub at: chrono::DateTime<chrono::Utc>,
    status_gzip: std::sync::OnceLock<axum::body::Bytes>,
}

impl Last {
    pub fn new(status: &serde_json::Value, metrics: String) -> Last {
        Last {
            status: axum::body::Bytes::from(status.to_string()),
            metrics: axum::body::Bytes::from(metrics),
            at: chrono::Utc::now(),
            status_gzip: std::sync::OnceLock::new(),
        }
    }
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The state every request reads.
pub struct Shared {
    pub config: Config,
    pub broker: Broker,
    pub tokens: tokens::Watched,
    pub lasting: metrics::Lasting,
    last: RwLock<Option<Arc<Last>>>,
    /// The outage the last tick met on a connection that is up (a broker
    /// that takes connections and answers nothing); a connection that is
    /// down is read from the client itself, at once.
    outage: RwLock<Option<crate::floor::Outage>>,
}

impl Shared {
    pub fn new(config: Config, broker: Broker) -> Shared {
        let tokens = tokens::Watched::new(config.http.tokens_file.clone());
        Shared {
            config,
            broker,
            tokens,
            lasting: metrics::Lasting::default(),
            last: RwLock::new(None),
            outage: RwLock::new(None),
        }
    }

    /// A tick that met an outage: the last answer stays the last one read
    /// while the broker answered, and is no longer served as current.
    pub fn met_outage(&self, outage: crate::floor::Outage) {
        match self.outage.write() {
            Ok(mut g) => *g = Some(outage),
            Err(p) => *p.into_inner() = Some(outage),
        }
    }

    /// The broker cannot be reached now: the connection is down, or the
    /// last tick read nothing on it.
    pub fn outage(&self) -> Option<crate::floor::Outage> {
        if let Some(down) = self.broker.outage() {
            return Some(down);
        }
        match self.outage.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Records a tick's answer for the routes that answer from it, and
    /// compresses it on a thread of its own.
    pub fn record(&self, last: Last) {
        match self.outage.write() {
            Ok(mut g) => *g = None,
            Err(p) => *p.into_inner() = None,
        }
        let last = Arc::new(last);
        {
            let mut guard = match self.last.write() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            *guard = Some(last.clone());
        }
        let spawned = std::thread::Builder::new()
            .name("crewlet-gzip".into())
            .spawn(move || {
                if let Some(gz) = gzip(&last.status) {
                    let _ = last.status_gzip.set(gz);
                }
            });
        if let Err(e) = spawned {
            // Only compression is lost: answers go out plain.
            tracing::warn!(event = "gzip_unavailable", error = %e, "answers are sent uncompressed this tick");
        }
    }

    /// The sizes of the last `/v1/retention` and `/metrics` answers.
    pub fn last_sizes(&self) -> Option<(u64, u64)> {
        self.last()
            .map(|l| (l.status.len() as u64, l.metrics.len() as u64))
    }

    fn last(&self) -> Option<Arc<Last>> {
        match self.last.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// The routes of docs/http.md, each bounded in time: every route by
/// [`REQUEST_TIMEOUT`], but the erase route, which waits for the duty
/// holder's next publish on an archived domain, by that wait and a margin.
/// Each route's scope is the typed [`Scope`] its handler asks
/// [`authorise`] for.
pub fn router(shared: Arc<Shared>) -> Router {
    use axum::middleware::from_fn_with_state;
    let quick = Router::new()
        .route("/", get(dashboard_route))
        .route("/metrics", get(metrics_route))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/v1/retention", get(retention))
        .route("/v1/streams/{stream}/tail", get(tail))
        .route("/v1/streams/{stream}/trim", post(trim))
        .route("/v1/streams/{stream}/records", get(records))
        .route("/v1/streams/{stream}/ack", post(ack))
        .route("/v1/streams/{stream}/capacity", post(capacity))
        .route("/v1/nodes/{node}/evict", post(evict))
        .route("/v1/nodes/{node}/readmit", post(readmit))
        .layer(from_fn_with_state(REQUEST_TIMEOUT, bounded));
    let erase_limit = erase_wait(&shared.config) + Duration::from_secs(5);
    let slow = Router::new()
        .route("/v1/streams/{stream}/erase", post(erase))
        .layer(from_fn_with_state(erase_limit, bounded));
    quick
        .merge(slow)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(shared)
}
