//! The routes that answer from the last tick: the page, `/metrics`,
//! `/readyz`, `/v1/retention`.

use super::*;

pub(super) async fn dashboard_route(State(shared): State<Arc<Shared>>) -> Response {
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
pub(super) async fn metrics_route(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> Response {
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

pub(super) async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
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

pub(super) async fn retention(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
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
