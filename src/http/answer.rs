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
    // During an outage the last answer's values stand, and the alarm is
    // the outage's (`broker_unreachable`, `broker_refused`), not the
    // alarms that answer had.
    let outage_alarms = shared.outage_alarms();
    let tick = match &last {
        _ if !outage_alarms.is_empty() => metrics::encode(
            last.as_ref().map_or(&[][..], |l| &l.answers[..]),
            &outage_alarms,
            &shared.lasting,
        ),
        Some(l) => String::from_utf8_lossy(&l.metrics).into_owned(),
        None => metrics::encode(&[], &[], &shared.lasting),
    };
    let age = last.as_ref().map(|l| {
        (chrono::Utc::now() - l.at)
            .to_std()
            .unwrap_or_default()
            .as_secs_f64()
    });
    let held = metrics::duty_still_held(
        last.as_ref().is_some_and(|l| l.duty_held),
        age,
        shared.config.retention.duty_ttl(),
    );
    let text = metrics::with_live(&tick, shared.outage().is_none(), age, held);
    let plain = axum::body::Bytes::from(text);
    // Compressed per request: the exposition is small (per domain, not
    // per node), and its live lines differ from one scrape to the next.
    let compressed = takes_gzip(&headers).then(|| gzip(&plain)).flatten();
    cached(&headers, &plain, compressed.as_ref(), OPENMETRICS)
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

pub(super) async fn retention(
    State(shared): State<Arc<Shared>>,
    axum::extract::Query(query): axum::extract::Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = reachable(&shared) {
        return r.into_response();
    }
    if !query.is_empty() {
        return previewed(&shared, &query).await;
    }
    match shared.last() {
        Some(l) => cached(
            &headers,
            &l.status,
            l.status_gzip.as_ref(),
            "application/json",
        ),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "no tick has completed yet; the answer is there after the first",
        )
        .into_response(),
    }
}

/// `GET /v1/retention?if_evicted=…&if_released=…&if_acked=…&if_readmitted=…`
/// (docs/http.md, Previews): a fresh read, as `status` makes, with the
/// gestures applied in memory; the answer is `/v1/retention`'s (the last
/// tick's) with the `preview` of this read beside it. Nothing is written.
async fn previewed(shared: &Shared, query: &[(String, String)]) -> Response {
    let ask = match preview_ask(query) {
        Ok(a) => a,
        Err(message) => {
            return error(StatusCode::BAD_REQUEST, "bad_request", message).into_response()
        }
    };
    let config = &shared.config;
    let now = chrono::Utc::now();
    let fresh = crate::tick::answers(&shared.broker, config, "", now).await;
    let policy = crate::floor::Policy::from_config(config, "");
    let at = crate::clock::broker_now(fresh.offset, now);
    let changed = match crate::preview::apply(
        config,
        &fresh.parsed,
        &fresh.reads,
        &ask,
        policy.fence_window,
        at,
    ) {
        Ok(c) => c,
        Err(refused) => {
            let status =
                StatusCode::from_u16(refused.class().http_status()).unwrap_or(StatusCode::CONFLICT);
            // The refusal names the CLI's flag; here it came as a parameter.
            let mut message = refused.to_string();
            for (flag, param) in [
                ("--if-evicted", "if_evicted"),
                ("--if-released", "if_released"),
                ("--if-acked", "if_acked"),
                ("--if-readmitted", "if_readmitted"),
                ("--if-ignored", "if_ignored"),
                ("--if-adopted", "if_adopted"),
            ] {
                message = message.replace(flag, param);
            }
            return error(status, refused.code(), message).into_response();
        }
    };
    let after = crate::tick::compute_each(config, &policy, &changed.rows, &changed.reads, at);
    let previews = crate::preview::compare(&ask, &fresh.answers, &after, &fresh.reads);
    // The answer `/v1/retention` gives (the last tick's), with the preview
    // beside it; before the first tick, this read's answers.
    let mut body = shared
        .last()
        .and_then(|l| serde_json::from_slice::<serde_json::Value>(&l.status).ok())
        .unwrap_or_else(|| {
            let domains: Vec<serde_json::Value> = fresh
                .answers
                .iter()
                .map(|a| serde_json::to_value(a).unwrap_or_default())
                .collect();
            json!({"at": crate::rows::Timestamp(now), "node": config.node.id, "domains": domains})
        });
    if let Some(obj) = body.as_object_mut() {
        obj.insert(
            "preview".into(),
            json!({"asked": crate::preview::asked_json(&ask), "domains": previews}),
        );
    }
    json_ok(body)
}

/// The query's gestures: `if_evicted` and `if_readmitted` take NODE[,NODE…],
/// `if_released` a hold id, `if_acked` STREAM=SEQ, `if_ignored`
/// NAME[,NAME…] (a replica or named consumer), `force` true or false;
/// each may repeat. Anything else is refused, naming the parameter.
fn preview_ask(query: &[(String, String)]) -> Result<crate::preview::Ask, String> {
    let mut ask = crate::preview::Ask::default();
    let nodes = |v: &str| {
        v.split(',')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    for (k, v) in query {
        match k.as_str() {
            "if_evicted" => ask.evict.extend(nodes(v)),
            "if_readmitted" => ask.readmit.extend(nodes(v)),
            "if_released" => ask.release.push(v.clone()),
            "if_ignored" => ask.ignore.extend(nodes(v)),
            "if_adopted" => ask.adopt.extend(nodes(v)),
            "if_acked" => ask
                .ack
                .push(crate::preview::parse_ack(v).map_err(|e| format!("if_acked: {e}"))?),
            "force" => {
                ask.force = match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("force: {v:?} is not true or false")),
                }
            }
            other => {
                return Err(format!(
                    "{other:?} is not a parameter of /v1/retention (if_evicted, if_released, if_acked, if_readmitted, if_ignored, if_adopted, force)"
                ))
            }
        }
    }
    if ask.is_empty() {
        return Err("force alone previews nothing: give if_evicted with it".into());
    }
    Ok(ask)
}
