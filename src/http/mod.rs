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

pub use auth::{authorise, domain_of, error, ApiError, Token};
pub use server::{serve, serve_apart, serve_waiting, MAX_CONNECTIONS};

/// The most a request may take before it is answered 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request body taken.
pub const MAX_BODY: usize = 64 * 1024;

/// What the last tick left for the HTTP surface, encoded and compressed
/// once per tick so that a request only copies bytes out (a status of
/// 10,000 nodes is megabytes).
#[derive(Debug)]
pub struct Last {
    /// The `status --json` object of that tick, serialized.
    pub status: axum::body::Bytes,
    /// The exposition text.
    pub metrics: axum::body::Bytes,
    /// When it was recorded: what `crewlet_answer_age_seconds` and an
    /// unreachable answer's `last_answer_at` count from.
    pub at: chrono::DateTime<chrono::Utc>,
    /// `status` gzip-compressed (none if compression failed: then the
    /// plain answer goes to every client).
    status_gzip: Option<axum::body::Bytes>,
    /// Whether that tick held the trim duty (`/metrics` says so only
    /// while the lease it renewed can still be ours).
    pub duty_held: bool,
    /// That tick's answers: during an outage `/metrics` serves their
    /// values beside the outage's alarm.
    answers: Vec<crate::floor::Answer>,
}

/// A tick's answer as the loop hands it over ([`Shared::record`]).
pub struct Recorded {
    /// What `status --json` shows for that tick.
    pub status: crate::report::Status,
    /// Each domain's answer, for the exposition.
    pub answers: Vec<crate::floor::Answer>,
    /// The tick's alarms, for the exposition.
    pub alarms: Vec<crate::alarms::Alarm>,
    /// Whether this sidecar held the trim duty in that tick.
    pub duty_held: bool,
}

impl Recorded {
    /// What a tick of `sidecar` leaves for the routes, as `retention run`
    /// records it after each tick (`server`: the server status names).
    pub fn of(
        sidecar: &crate::tick::Sidecar,
        report: &crate::tick::TickReport,
        server: Option<(String, String)>,
    ) -> Recorded {
        Recorded {
            status: report.status(sidecar, server),
            answers: report.domains.iter().map(|d| (*d.answer).clone()).collect(),
            alarms: report.raised.clone(),
            duty_held: matches!(report.duty, crate::tick::duty::DutyStatus::Held),
        }
    }
}

impl Last {
    /// Encodes and compresses a recorded answer.
    fn encode(r: &Recorded, lasting: &metrics::Lasting, at: chrono::DateTime<chrono::Utc>) -> Last {
        let status = axum::body::Bytes::from(crate::report::status_json_text(&r.status));
        let metrics = metrics::encode(&r.answers, &r.alarms, lasting);
        Last {
            status_gzip: gzip(&status),
            status,
            metrics: axum::body::Bytes::from(metrics),
            at,
            duty_held: r.duty_held,
            answers: r.answers.clone(),
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
    /// The alarms the last tick raised during an outage
    /// (`broker_unreachable`, `broker_refused`), which `/metrics` carries
    /// while it lasts.
    outage_alarms: RwLock<Vec<crate::alarms::Alarm>>,
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
            outage_alarms: RwLock::new(Vec::new()),
        }
    }

    /// A tick that met an outage: the last answer stays the last one read
    /// while the broker answered, and is no longer served as current.
    pub fn met_outage(&self, outage: crate::floor::Outage, alarms: Vec<crate::alarms::Alarm>) {
        *self.outage.write().unwrap_or_else(|p| p.into_inner()) = Some(outage);
        *self
            .outage_alarms
            .write()
            .unwrap_or_else(|p| p.into_inner()) = alarms;
    }

    /// The alarms an outage raised, while the broker is out of reach
    /// (empty otherwise).
    pub fn outage_alarms(&self) -> Vec<crate::alarms::Alarm> {
        if self.outage().is_none() {
            return Vec::new();
        }
        self.outage_alarms
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The broker cannot be reached now: the connection is down, or the
    /// last tick read nothing on it.
    pub fn outage(&self) -> Option<crate::floor::Outage> {
        if let Some(down) = self.broker.outage() {
            return Some(down);
        }
        self.outage
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records a tick's answer for the routes that answer from it:
    /// encoded and compressed here, on the caller's thread, then served
    /// whole (a client that takes gzip always gets the compressed copy).
    /// Compressing on a thread spawned per tick made the scrapes' tail
    /// worse, not better (docs/performance.md, The HTTP
    /// answer).
    pub fn record(&self, recorded: Recorded) {
        let last = Arc::new(Last::encode(&recorded, &self.lasting, chrono::Utc::now()));
        *self.outage.write().unwrap_or_else(|p| p.into_inner()) = None;
        self.outage_alarms
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        *self.last.write().unwrap_or_else(|p| p.into_inner()) = Some(last);
    }

    /// The sizes of the last `/v1/retention` and `/metrics` answers.
    pub fn last_sizes(&self) -> Option<(u64, u64)> {
        self.last()
            .map(|l| (l.status.len() as u64, l.metrics.len() as u64))
    }

    fn last(&self) -> Option<Arc<Last>> {
        self.last.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone who can reach the port: the page, `/metrics`, the probes.
    Public,
    /// A bearer token carrying this scope, checked by the router before
    /// the handler runs (the handler reads the checked token as [`Token`]).
    Needs(Scope),
}

/// How long a route may take before it is answered 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// [`REQUEST_TIMEOUT`].
    Quick,
    /// The erase route waits for the duty holder's next publish on an
    /// archived domain: that wait and a margin.
    EraseWait,
}

/// One row of the route table: the only way a route reaches the router,
/// so a route cannot be added without saying who may call it.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
    pub bound: Bound,
    handler: axum::routing::MethodRouter<Arc<Shared>>,
}

impl Route {
    fn get<H, T>(path: &'static str, access: Access, handler: H) -> Route
    where
        H: axum::handler::Handler<T, Arc<Shared>>,
        T: 'static,
    {
        Route::on("GET", path, access, get(handler))
    }

    fn post<H, T>(path: &'static str, access: Access, handler: H) -> Route
    where
        H: axum::handler::Handler<T, Arc<Shared>>,
        T: 'static,
    {
        Route::on("POST", path, access, post(handler))
    }

    fn on(
        method: &'static str,
        path: &'static str,
        access: Access,
        handler: axum::routing::MethodRouter<Arc<Shared>>,
    ) -> Route {
        Route {
            method,
            path,
            access,
            bound: Bound::Quick,
            handler,
        }
    }

    fn bound(self, bound: Bound) -> Route {
        Route { bound, ..self }
    }
}

/// The routes (docs/http.md, Routes), each with who may call it and how long it
/// may take. This table is where a route's scope is checked: the router
/// puts [`authorise`] in front of every `Needs` row, and a test holds the
/// table to docs/http.md's.
pub fn routes() -> Vec<Route> {
    use Access::{Needs, Public};
    vec![
        Route::get("/", Public, dashboard_route),
        Route::get("/metrics", Public, metrics_route),
        Route::get("/healthz", Public, || async { "ok\n" }),
        Route::get("/readyz", Public, readyz),
        Route::get("/v1/retention", Needs(Scope::Read), retention),
        Route::get("/v1/streams/{stream}/tail", Needs(Scope::Read), tail),
        Route::post("/v1/streams/{stream}/trim", Needs(Scope::Trim), trim),
        Route::get("/v1/streams/{stream}/records", Needs(Scope::Read), records),
        Route::post("/v1/streams/{stream}/ack", Needs(Scope::Ack), ack),
        Route::post(
            "/v1/streams/{stream}/capacity",
            Needs(Scope::Capacity),
            capacity,
        ),
        Route::post("/v1/streams/{stream}/erase", Needs(Scope::Erase), erase)
            .bound(Bound::EraseWait),
        Route::post("/v1/nodes/{node}/evict", Needs(Scope::Gate), evict),
        Route::post("/v1/nodes/{node}/readmit", Needs(Scope::Gate), readmit),
    ]
}

/// The router of [`routes`]: each route's scope checked before its
/// handler runs, and each bounded in time.
pub fn router(shared: Arc<Shared>) -> Router {
    use axum::middleware::from_fn_with_state;
    let erase_limit = erase_wait(&shared.config) + Duration::from_secs(5);
    let mut router = Router::new();
    for route in routes() {
        let mut handler = route.handler;
        if let Access::Needs(scope) = route.access {
            handler = handler.route_layer(from_fn_with_state((shared.clone(), scope), require));
        }
        let limit = match route.bound {
            Bound::Quick => REQUEST_TIMEOUT,
            Bound::EraseWait => erase_limit,
        };
        router = router.route(
            route.path,
            handler.layer(from_fn_with_state(limit, bounded)),
        );
    }
    router
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The router's table and docs/http.md's say the same: every route,
    /// its method, and the scope it needs ("none" for a public one).
    #[test]
    fn the_route_table_is_docs_http_md_table() {
        let doc = include_str!("../../docs/http.md");
        let mut documented: Vec<(String, String, String)> = Vec::new();
        for line in doc
            .lines()
            .filter(|l| l.starts_with("| `GET ") || l.starts_with("| `POST "))
        {
            let cells: Vec<&str> = line.split(" | ").collect();
            let scope = cells[1].trim().trim_matches('`').to_string();
            for route in cells[0].trim_start_matches("| ").split(", ") {
                let route = route.trim_matches('`');
                let Some((method, path)) = route.split_once(' ') else {
                    panic!("{route:?} is not METHOD path");
                };
                let path = path.split('?').next().unwrap_or(path);
                documented.push((method.into(), path.into(), scope.clone()));
            }
        }
        let mut served: Vec<(String, String, String)> = routes()
            .iter()
            .map(|r| {
                let scope = match r.access {
                    Access::Public => "none".to_string(),
                    Access::Needs(s) => s.as_str().to_string(),
                };
                (r.method.to_string(), r.path.to_string(), scope)
            })
            .collect();
        documented.sort();
        served.sort();
        assert_eq!(served, documented);
    }
}
