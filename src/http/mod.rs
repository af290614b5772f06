//! The HTTP surface of `crewlet retention run` (docs/http.md): metrics, health,
//! the JSON API. Served on the tokio runtime the loop runs on, beside it:
//! answers come from the last tick's answer (`/metrics`, `/v1/retention`)
//! or from one bounded broker read (tail), so a slow or stuck client never
//! holds the loop. Every request is bounded in time and body size.

pub mod dashboard;
pub mod metrics;
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

/// `bytes` gzip-compressed (fastest level: the answer is sent many times
/// a tick at most, and is mostly repeated keys), or none if that failed.
fn gzip(bytes: &[u8]) -> Option<axum::body::Bytes> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 8),
        flate2::Compression::fast(),
    );
    enc.write_all(bytes).ok()?;
    enc.finish().ok().map(axum::body::Bytes::from)
}

/// Whether the request's `Accept-Encoding` takes gzip: named, or `*`,
/// with a non-zero weight; `gzip;q=0` refuses it whatever `*` says.
fn takes_gzip(headers: &HeaderMap) -> bool {
    let codings: Vec<(String, bool)> = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|part| {
            let mut it = part.split(';').map(str::trim);
            let coding = it.next().unwrap_or_default().to_ascii_lowercase();
            let refused = it.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (coding, !refused)
        })
        .collect();
    match codings.iter().find(|(c, _)| c == "gzip") {
        Some((_, taken)) => *taken,
        None => codings.iter().any(|(c, taken)| c == "*" && *taken),
    }
}

/// An answer from the last tick: compressed when the client takes gzip and
/// the compressed copy is ready, plain otherwise.
fn cached(
    headers: &HeaderMap,
    plain: &axum::body::Bytes,
    compressed: &std::sync::OnceLock<axum::body::Bytes>,
    content_type: &'static str,
) -> Response {
    let gz = takes_gzip(headers)
        .then(|| compressed.get().cloned())
        .flatten();
    match gz {
        Some(body) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, content_type),
                (header::CONTENT_ENCODING, "gzip"),
                (header::VARY, "accept-encoding"),
            ],
            body,
        )
            .into_response(),
        None => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, content_type),
                (header::VARY, "accept-encoding"),
            ],
            plain.clone(),
        )
            .into_response(),
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
        if let crate::broker::Reach::Unreachable { since, servers } = self.broker.reach() {
            return Some(crate::floor::Outage {
                since: crate::rows::Instant(since),
                servers,
            });
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

/// An error answer: `{"error": code, "message": sentence}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Fields beside `error` and `message` (`last_answer_at`).
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = self.extra;
        body.insert("error".into(), self.code.into());
        body.insert("message".into(), self.message.into());
        (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::Value::Object(body).to_string(),
        )
            .into_response()
    }
}

pub fn error(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        code,
        message: message.into(),
        extra: serde_json::Map::new(),
    }
}

fn json_ok(v: serde_json::Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// The token's entry if it carries `scope`, else the 401 or 403 answer.
/// The token itself is never logged or echoed.
pub fn authorise(
    shared: &Shared,
    headers: &HeaderMap,
    scope: Scope,
) -> Result<tokens::Entry, ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(presented) = presented else {
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!("this route needs a token with the {scope} scope: Authorization: Bearer <token> (crewlet token add NAME --scopes {scope})"),
        ));
    };
    let file = shared.tokens.current().map_err(|e| {
        error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!("no token can be checked: {e}"),
        )
    })?;
    let Some(entry) = file.find(presented) else {
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the token is not known (revoked, or never added)",
        ));
    };
    if !entry.allows(scope) {
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the token {} lacks the {scope} scope", entry.name),
        ));
    }
    Ok(entry.clone())
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

async fn dashboard_route(State(shared): State<Arc<Shared>>) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                dashboard::content_security_policy(),
            ),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        dashboard::page(shared.config.retention.tick.0),
    )
        .into_response()
}

/// The last tick's families, with the two that change between ticks
/// (`crewlet_broker_connected`, `crewlet_answer_age_seconds`) as of this
/// request: during an outage a scrape still answers 200 and says so.
async fn metrics_route(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let last = shared.last();
    let tick = match &last {
        Some(l) => String::from_utf8_lossy(&l.metrics).into_owned(),
        None => metrics::encode(&[], &[], false, &shared.lasting),
    };
    let age = last.as_ref().map(|l| {
        (chrono::Utc::now() - l.at)
            .to_std()
            .unwrap_or_default()
            .as_secs_f64()
    });
    let text = metrics::with_live(&tick, shared.outage().is_none(), age);
    let plain = axum::body::Bytes::from(text);
    // Compressed per request: the exposition is small (per domain, not
    // per node), and its live lines differ from one scrape to the next.
    let compressed = std::sync::OnceLock::new();
    if takes_gzip(&headers) {
        if let Some(gz) = gzip(&plain) {
            let _ = compressed.set(gz);
        }
    }
    cached(&headers, &plain, &compressed, OPENMETRICS)
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    if shared.broker.connected() {
        json_ok(json!({"ready": true}))
    } else {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            format!("not connected to the broker at {}", shared.broker.url),
        )
        .into_response()
    }
}

async fn retention(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorise(&shared, &headers, Scope::Read) {
        return r.into_response();
    }
    if let Err(r) = reachable(&shared) {
        return r.into_response();
    }
    match shared.last() {
        Some(l) => cached(&headers, &l.status, &l.status_gzip, "application/json"),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "no tick has completed yet; the answer is there after the first",
        )
        .into_response(),
    }
}

/// The token (with `scope`) and the domain a `{stream}` route names, or
/// the 401, 403 or 404 answer.
fn gate(
    shared: &Shared,
    headers: &HeaderMap,
    scope: Scope,
    stream: &str,
) -> Result<(tokens::Entry, crate::config::Domain), ApiError> {
    let who = authorise(shared, headers, scope)?;
    Ok((who, domain_of(shared, stream)?))
}

/// As [`gate`] with the `read` scope, for a route that reads the log:
/// the broker reachable, or 503 `unreachable` (rather than a read that
/// waits out its timeout).
fn gate_read(
    shared: &Shared,
    headers: &HeaderMap,
    stream: &str,
) -> Result<(tokens::Entry, crate::config::Domain), ApiError> {
    let gated = gate(shared, headers, Scope::Read, stream)?;
    reachable(shared)?;
    Ok(gated)
}

/// As [`gate`], for a route that writes: the broker connected, or 503
/// before anything is judged (a judgement on reads that cannot be made
/// would answer with a refusal that is not one).
fn gate_write(
    shared: &Shared,
    headers: &HeaderMap,
    scope: Scope,
    stream: &str,
) -> Result<(tokens::Entry, crate::config::Domain), ApiError> {
    let gated = gate(shared, headers, scope, stream)?;
    reachable(shared)?;
    Ok(gated)
}

/// The broker reachable, or the 503 `unreachable` answer: an answer
/// computed earlier is not the state of the fleet, and a gesture judged on
/// reads that cannot be made would be a refusal that is not one. The
/// answer carries `last_answer_at` (null before any), which the dashboard
/// shows as the age of what it keeps on the screen.
fn reachable(shared: &Shared) -> Result<(), ApiError> {
    let Some(outage) = shared.outage() else {
        return Ok(());
    };
    let last = shared.last().map(|l| crate::rows::Instant(l.at));
    let shown = match last {
        Some(at) => format!("the last answer, of {at}, is not the state of the fleet"),
        None => "no answer was computed yet".to_string(),
    };
    let mut e = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unreachable",
        format!(
            "the broker cannot be reached (since {}; servers tried: {}); nothing is read or written, and {shown}",
            outage.since, outage.servers
        ),
    );
    e.extra
        .insert("last_answer_at".into(), last.map(|l| l.to_string()).into());
    Err(e)
}

/// The configured domain named by `{stream}` (its stream or its name), or
/// the 404 answer listing the configured ones.
pub fn domain_of(shared: &Shared, stream: &str) -> Result<crate::config::Domain, ApiError> {
    shared.config.domain(stream).cloned().ok_or_else(|| {
        error(
            StatusCode::NOT_FOUND,
            "unknown_stream",
            format!(
                "{stream:?} is not configured; configured: {}",
                shared.config.configured()
            ),
        )
    })
}

async fn tail(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(stream): Path<String>,
) -> Response {
    let (_, domain) = match gate_read(&shared, &headers, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    match shared.broker.tail(&domain.stream).await {
        Ok(Some(t)) => json_ok(json!({"next_seq": t.next_seq, "timestamp_ms": t.timestamp_ms})),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "unknown_stream",
            format!("stream {} does not exist on the broker", domain.stream),
        )
        .into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, "unreachable", e).into_response(),
    }
}

/// `from`, `limit` and `clamp` of the records route, each checked.
fn records_query(
    q: &std::collections::HashMap<String, String>,
) -> Result<(Option<u64>, usize, bool), ApiError> {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, "bad_request", m);
    if let Some(k) = q
        .keys()
        .find(|k| !matches!(k.as_str(), "from" | "limit" | "clamp"))
    {
        return Err(bad(format!(
            "unknown parameter {k:?}; allowed: from, limit, clamp"
        )));
    }
    let from = match q.get("from") {
        None => None,
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            bad(format!(
                "from={v:?} is not a sequence (a whole number, 1 or more)"
            ))
        })?),
    };
    let limit = match q.get("limit") {
        None => 100,
        Some(v) => v.parse::<usize>().map_err(|_| {
            bad(format!(
                "limit={v:?} is not a whole number; allowed: 1 to {}",
                crate::archive::merge::MAX_LIMIT
            ))
        })?,
    };
    let clamp = match q.get("clamp").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(v) => return Err(bad(format!("clamp={v:?}; allowed: true or false"))),
    };
    crate::archive::merge::check_input(from, limit).map_err(|e| bad(e.to_string()))?;
    Ok((from, limit, clamp))
}

async fn records(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(stream): Path<String>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    use crate::archive::merge::{self, MergeError};
    let (_, domain) = match gate_read(&shared, &headers, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let (from, limit, clamp) = match records_query(&q) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    match merge::read(&shared.broker, &shared.config, &domain, from, limit, clamp).await {
        Ok(m) => {
            let records: Vec<serde_json::Value> = m
                .records
                .iter()
                .map(|(r, archived)| merge::record_json(r, *archived))
                .collect();
            json_ok(json!({"records": records, "next": m.next}))
        }
        Err(MergeError::Trimmed { first_readable }) => (
            StatusCode::GONE,
            [(header::CONTENT_TYPE, "application/json")],
            json!({"error": "trimmed", "first_readable": first_readable,
                   "message": format!("trimmed: the first readable sequence is {first_readable} (clamp=true starts there)")})
            .to_string(),
        )
            .into_response(),
        Err(MergeError::Input(m)) => error(StatusCode::BAD_REQUEST, "bad_request", m).into_response(),
        Err(MergeError::Archive(m)) => error(StatusCode::INTERNAL_SERVER_ERROR, "archive", m).into_response(),
        Err(MergeError::Unreachable(m)) => error(StatusCode::SERVICE_UNAVAILABLE, "unreachable", m).into_response(),
    }
}

/// The body of `POST …/ack`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AckBody {
    position: serde_json::Value,
    /// Allow a position below the acknowledgement in force.
    #[serde(default)]
    lower: bool,
}

async fn ack(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(stream): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    use crate::ack::AckError;
    let (who, domain) = match gate_write(&shared, &headers, Scope::Ack, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let position = match serde_json::from_slice::<AckBody>(&body)
        .map_err(|e| {
            error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the body is not {{\"position\": N}}: {e}"),
            )
        })
        .and_then(|b| whole("position", &b.position, 0).map(|p| (p, b.lower)))
    {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let (position, lower) = position;
    let by = format!("token:{}", who.name);
    match crate::ack::acknowledge(
        &shared.broker,
        &shared.config,
        &domain,
        position,
        &by,
        lower,
    )
    .await
    {
        Ok(done) => json_ok(
            json!({"acknowledged": true, "stream": done.row.stream, "position": done.row.position, "by": done.row.by, "at": done.row.at, "previous": done.previous}),
        ),
        Err(e @ AckError::PolicyEngine { .. }) => {
            error(StatusCode::CONFLICT, "policy_engine", e.to_string()).into_response()
        }
        Err(e @ AckError::WouldLower { .. }) => {
            error(StatusCode::CONFLICT, "would_lower", e.to_string()).into_response()
        }
        Err(e @ AckError::PastTail { .. }) => {
            error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()).into_response()
        }
        Err(e @ AckError::Unreachable(_)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unreachable",
            e.to_string(),
        )
        .into_response(),
    }
}

/// The body of `POST …/trim`: exactly one of the two.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TrimBody {
    seq_num: Option<serde_json::Value>,
    timestamp_ms: Option<serde_json::Value>,
    #[serde(default)]
    reason: String,
}

/// A whole number in `0..=max` from a JSON value, or why not.
fn whole(field: &str, v: &serde_json::Value, min: u64) -> Result<u64, ApiError> {
    v.as_u64().filter(|n| *n >= min).ok_or_else(|| {
        error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("{field}: {v} is not a whole number, {min} or more"),
        )
    })
}

fn trim_ask(body: &[u8]) -> Result<(crate::requested::Ask, String), ApiError> {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, "bad_request", m);
    let b: TrimBody = serde_json::from_slice(body).map_err(|e| {
        bad(format!(
            "the body is not {{\"seq_num\": N}} or {{\"timestamp_ms\": T}}: {e}"
        ))
    })?;
    if b.reason.chars().count() > 1024 || b.reason.chars().any(char::is_control) {
        return Err(bad(
            "reason: at most 1024 characters, without control characters".into(),
        ));
    }
    let ask = match (&b.seq_num, &b.timestamp_ms) {
        (Some(n), None) => crate::requested::Ask::Entry(whole("seq_num", n, 1)?),
        (None, Some(t)) => {
            let ms = whole("timestamp_ms", t, 0)?;
            let at = i64::try_from(ms)
                .ok()
                .and_then(chrono::DateTime::from_timestamp_millis)
                .ok_or_else(|| bad(format!("timestamp_ms: {ms} is not an instant")))?;
            crate::requested::Ask::At(at)
        }
        _ => return Err(bad("give exactly one of seq_num and timestamp_ms".into())),
    };
    Ok((ask, b.reason))
}

async fn trim(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(stream): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    use crate::requested::AskError;
    let (who, domain) = match gate_write(&shared, &headers, Scope::Trim, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let (ask, reason) = match trim_ask(&body) {
        Ok(a) => a,
        Err(r) => return r.into_response(),
    };
    let by = format!("token:{}", who.name);
    match crate::requested::raise(&shared.broker, &shared.config, &domain, ask, &by, &reason).await
    {
        Ok(r) => json_ok(
            json!({"requested": r.requested, "applied_at_next_tick": r.applied_at_next_tick, "bounded_by": r.bounded_by, "unchanged": r.unchanged}),
        ),
        Err(AskError::Input(m)) => error(StatusCode::BAD_REQUEST, "bad_request", m).into_response(),
        Err(AskError::NoStream(m)) => {
            error(StatusCode::NOT_FOUND, "unknown_stream", m).into_response()
        }
        Err(AskError::Unreachable(m)) => {
            error(StatusCode::SERVICE_UNAVAILABLE, "unreachable", m).into_response()
        }
        Err(AskError::NotTaken(m)) => error(StatusCode::CONFLICT, "not_taken", m).into_response(),
        Err(AskError::Unresolved(m)) => {
            error(StatusCode::CONFLICT, "unresolved", m).into_response()
        }
    }
}

/// The body of `POST …/capacity`: `bytes` a number of bytes or an IEC
/// size as a string, `confirm` the same value again.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CapacityBody {
    bytes: serde_json::Value,
    confirm: Option<serde_json::Value>,
}

/// A size given as a JSON number or string, as typed.
fn size_text(field: &str, v: &serde_json::Value) -> Result<String, ApiError> {
    match v {
        serde_json::Value::Number(n) if n.as_u64().is_some() => Ok(n.to_string()),
        serde_json::Value::String(s) => Ok(s.clone()),
        other => Err(error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("{field}: {other} is not a size; give a whole number of bytes or a string such as \"8GiB\""),
        )),
    }
}

async fn capacity(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(stream): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    use crate::resize::{self, Outcome};
    let (_, domain) = match gate_write(&shared, &headers, Scope::Capacity, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let b: CapacityBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the body is not {{\"bytes\": B, \"confirm\": B}}: {e}"),
            )
            .into_response()
        }
    };
    let Some(confirm) = &b.confirm else {
        return error(
            StatusCode::BAD_REQUEST,
            "confirm_mismatch",
            "confirm_mismatch: confirm is required: repeat bytes exactly as given; nothing written",
        )
        .into_response();
    };
    let (bytes, confirm) = match (size_text("bytes", &b.bytes), size_text("confirm", confirm)) {
        (Ok(b), Ok(c)) => (b, c),
        (Err(r), _) | (_, Err(r)) => return r.into_response(),
    };
    let ask = resize::Ask {
        stream: domain.stream.clone(),
        bytes,
        confirm,
        surface: crate::human::Surface::Http,
    };
    let outcome = match resize::check(&shared.config, &ask) {
        Err(b) => Outcome::BadInput(b),
        Ok((domain, target)) => {
            resize::apply(&shared.config, &shared.broker, &domain, target).await
        }
    };
    let status = match &outcome {
        Outcome::Done(_) => StatusCode::OK,
        Outcome::BadInput(_) => StatusCode::BAD_REQUEST,
        Outcome::Unreadable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        Outcome::Missing { .. } => StatusCode::NOT_FOUND,
        Outcome::Refused { .. }
        | Outcome::BrokerRefused { .. }
        | Outcome::ChangedMeanwhile { .. }
        | Outcome::NotVerified { .. } => StatusCode::CONFLICT,
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        resize::json(&outcome).to_string(),
    )
        .into_response()
}

/// The body of `POST …/erase`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EraseBody {
    subject: String,
    confirm: Option<String>,
    reason: Option<String>,
    op_id: Option<String>,
}

async fn erase(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(stream): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    use crate::erase::{self, Outcome};
    let (who, domain) = match gate_write(&shared, &headers, Scope::Erase, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let b: EraseBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the body is not {{\"subject\": S, \"confirm\": S, \"reason\": R, \"op_id\": ID}}: {e}"),
            )
            .into_response()
        }
    };
    let ask = erase::Ask {
        stream: domain.stream.clone(),
        subject: b.subject,
        reason: b.reason,
        confirm: b.confirm,
        op_id: b.op_id,
        by: format!("token:{}", who.name),
        surface: crate::human::Surface::Http,
    };
    let outcome = match erase::check(&shared.config, &ask) {
        Err(b) => Outcome::BadInput(b),
        Ok((domain, op)) => {
            let (shared, ask, op) = (shared.clone(), ask.clone(), op.clone());
            let wait = erase_wait(&shared.config);
            let id = op.clone();
            match detached("erasure", &id, wait, async move {
                erase::apply(&shared.config, &shared.broker, &domain, &ask, op, |_| {}).await
            })
            .await
            {
                Ok(o) => o,
                Err(r) => return r.into_response(),
            }
        }
    };
    let status = match &outcome {
        Outcome::Done { .. } => StatusCode::OK,
        Outcome::BadInput(_) => StatusCode::BAD_REQUEST,
        Outcome::Refused {
            refusal: erase::Refusal::Unreachable,
            ..
        } => StatusCode::SERVICE_UNAVAILABLE,
        Outcome::Refused {
            refusal: erase::Refusal::StreamMissing,
            ..
        } => StatusCode::NOT_FOUND,
        Outcome::Refused { .. } | Outcome::Stopped { .. } => StatusCode::CONFLICT,
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        erase::json(&ask, &outcome).to_string(),
    )
        .into_response()
}

/// The body of `POST /v1/nodes/{node}/evict` and `…/readmit`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GestureBody {
    confirm: Option<String>,
    #[serde(default)]
    force: bool,
    op_id: Option<String>,
    reason: Option<String>,
}

/// Runs an operator's operation (`what`: gesture, erasure) under `op` on a
/// task of its own, so that a client that goes away, or a request that
/// times out, never leaves it half-done by dropping it; waits `wait` for
/// it, then answers that it is still running and how to see it finished.
async fn detached<T: Send + 'static>(
    what: &str,
    op: &crate::rows::OpId,
    wait: Duration,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::time::timeout(wait, tokio::spawn(work)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the {what} (op {op}) stopped: {e}; send it again with \"op_id\": \"{op}\" to finish it"),
        )),
        Err(_) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("the {what} is still running as op {op}; send it again with \"op_id\": \"{op}\" to see it finished"),
        )),
    }
}

/// How long a gesture may take before the route answers that it is still
/// running (it goes on, under the operation id the answer names), well
/// inside [`REQUEST_TIMEOUT`].
const GESTURE_WAIT: Duration = Duration::from_secs(8);

async fn evict(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(node): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    gesture_route(shared, headers, node, body, crate::rows::GateSign::Evict).await
}

async fn readmit(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(node): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    gesture_route(shared, headers, node, body, crate::rows::GateSign::Readmit).await
}

/// The gesture the CLI performs, judged and written by the same library
/// code, answered with the object `--json` prints: 200 with each log's
/// outcome, 400 for bad input, 409 for a refusal by judgement (its code in
/// `error`), nothing written in either.
async fn gesture_route(
    shared: Arc<Shared>,
    headers: HeaderMap,
    node: String,
    body: axum::body::Bytes,
    sign: crate::rows::GateSign,
) -> Response {
    use crate::gesture::{self, Performed};
    let who = match authorise(&shared, &headers, Scope::Gate).and_then(|w| {
        reachable(&shared)?;
        Ok(w)
    }) {
        Ok(w) => w,
        Err(r) => return r.into_response(),
    };
    let b: GestureBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the body is not {{\"confirm\": \"<node>\", \"force\": false, \"op_id\": \"…\", \"reason\": \"…\"}}: {e}"),
            )
            .into_response()
        }
    };
    let ask = gesture::Ask {
        node,
        confirm: b.confirm,
        force: b.force,
        op_id: b.op_id,
        reason: b.reason,
        by: format!("token:{}", who.name),
    };
    let performed = match gesture::check(&shared.config, &ask) {
        Err(p) => p,
        Ok(op) => {
            let (shared, ask, id) = (shared.clone(), ask.clone(), op.clone());
            match detached("gesture", &id, GESTURE_WAIT, async move {
                gesture::perform(&shared.config, &shared.broker, sign, &ask, op).await
            })
            .await
            {
                Ok(p) => p,
                Err(r) => return r.into_response(),
            }
        }
    };
    let mut v = gesture::json(sign, &ask, &performed, crate::human::Surface::Http);
    let status = match &performed {
        Performed::Done { .. } => StatusCode::OK,
        Performed::Refused { refusal, .. } if refusal.is_bad_input() => StatusCode::BAD_REQUEST,
        Performed::Refused { .. } | Performed::NoGatedLog => StatusCode::CONFLICT,
    };
    if status != StatusCode::OK {
        // The error body every route answers with, and the gesture's own.
        if let Some(obj) = v.as_object_mut() {
            let code = obj.get("refused").cloned().unwrap_or_default();
            obj.insert("error".into(), code);
        }
    }
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// The most connections served at once; more wait in the kernel's
/// backlog until one closes. The loop never waits on any of them.
pub const MAX_CONNECTIONS: usize = 256;

/// Serves `router` on `listener` until `shutdown` resolves; each request
/// bounded by [`REQUEST_TIMEOUT`], at most [`MAX_CONNECTIONS`] at once.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(shared);
    let limited = Limited {
        inner: listener,
        permits: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
    };
    axum::serve(limited, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Serves the HTTP surface on a thread of its own, with a runtime of its
/// own, until `stop` is notified; the returned receiver resolves when it
/// has stopped. Apart from the loop's runtime so that neither waits on the
/// other: a tick busy computing never delays an answer behind it on the
/// same worker, and requests (however many, however large the answer)
/// never take a worker the tick is waiting for. The broker client is
/// shared: its calls are messages to the connection's own task.
pub fn serve_apart(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    stop: Arc<tokio::sync::Notify>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<std::io::Result<()>>> {
    listener.set_nonblocking(true)?;
    // Two workers: a gesture or an erasure doing blocking work (zstd, a
    // directory's fsync) on one never stalls the answers on the other.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("crewlet-http")
        .build()?;
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("crewlet-http".into())
        .spawn(move || {
            let result = runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                serve(listener, shared, async move { stop.notified().await }).await
            });
            if let Err(e) = &result {
                tracing::error!(event = "http_failed", error = %e, "the HTTP surface stopped");
            }
            let _ = done.send(result);
        })?;
    Ok(finished)
}

/// A listener that accepts only while fewer than [`MAX_CONNECTIONS`] are
/// open: each connection holds a permit until it closes.
struct Limited {
    inner: tokio::net::TcpListener,
    permits: Arc<tokio::sync::Semaphore>,
}

/// A connection and the permit it holds.
struct Counted {
    stream: tokio::net::TcpStream,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl axum::serve::Listener for Limited {
    type Io = Counted;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Counted, std::net::SocketAddr) {
        loop {
            // The semaphore is never closed, so acquiring only waits.
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                continue;
            };
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    return (
                        Counted {
                            stream,
                            _permit: permit,
                        },
                        addr,
                    )
                }
                // Out of file descriptors and the like: wait a little.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A request that takes longer than its route's bound is answered 503.
async fn bounded(
    State(limit): State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("no answer within {}", crate::config::Dur(limit)),
        )
        .into_response(),
    }
}

/// How long the erase route waits for its erasure before answering that
/// it is still running: the erasure's own wait for a publish, and time to
/// rewrite the archive.
fn erase_wait(config: &Config) -> Duration {
    config.retention.tick.0 * 3 + Duration::from_secs(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(v: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, v.parse().expect("header"));
        takes_gzip(&h)
    }

    #[test]
    fn gzip_only_when_the_client_takes_it() {
        assert!(accepting("gzip"));
        assert!(accepting("deflate, gzip;q=1.0, *;q=0.5"));
        assert!(accepting("GZIP"));
        assert!(accepting("*"));
        assert!(!accepting("gzip;q=0"));
        assert!(!accepting("gzip;q=0, *"));
        assert!(!accepting("*;q=0"));
        assert!(!accepting("identity"));
        assert!(!accepting("br, deflate"));
        assert!(!takes_gzip(&HeaderMap::new()));
        let text = b"crewlet_trim_to 40\n".repeat(1000);
        let gz = gzip(&text).expect("compressed");
        assert!(gz.len() < text.len() / 10);
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out)
            .expect("decompress");
        assert_eq!(out, text);
    }
}
