//! The routes on one log: tail, records, ack, trim, capacity, erase.

use super::*;

pub(super) async fn tail(
    State(shared): State<Arc<Shared>>,
    Path(stream): Path<String>,
) -> Response {
    let domain = match domain_reachable(&shared, &stream) {
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
pub(super) fn records_query(
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

pub(super) async fn records(
    State(shared): State<Arc<Shared>>,
    Path(stream): Path<String>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    use crate::archive::merge::{self, MergeError};
    let domain = match domain_reachable(&shared, &stream) {
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
pub(super) struct AckBody {
    position: serde_json::Value,
    /// Allow a position below the acknowledgement in force.
    #[serde(default)]
    lower: bool,
}

pub(super) async fn ack(
    State(shared): State<Arc<Shared>>,
    Token(who): Token,
    Path(stream): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    use crate::exit::Outcome as _;
    use crate::gesture::ack::{self, AckError};
    let domain = match domain_reachable(&shared, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let position = match body::<AckBody>(&bytes, r#"{"position": N}"#)
        .and_then(|b| whole("position", &b.position, 0).map(|p| (p, b.lower)))
    {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let (position, lower) = position;
    let ask = ack::check(&domain, position, &format!("token:{}", who.name), lower);
    match ack::acknowledge(&shared.broker, &shared.config, &ask).await {
        Ok(done) => json_ok(ack::json(&done)),
        // A position past the log answers the route's usual `bad_request`.
        Err(e @ AckError::PastTail { .. }) => {
            error(status_of(e.class()), "bad_request", e.to_string()).into_response()
        }
        Err(e) => error(status_of(e.class()), e.code(), e.to_string()).into_response(),
    }
}

/// The body of `POST …/trim`: exactly one of the two.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TrimBody {
    seq_num: Option<serde_json::Value>,
    timestamp_ms: Option<serde_json::Value>,
    #[serde(default)]
    reason: String,
}

/// A whole number in `0..=max` from a JSON value, or why not.
pub(super) fn whole(field: &str, v: &serde_json::Value, min: u64) -> Result<u64, ApiError> {
    v.as_u64().filter(|n| *n >= min).ok_or_else(|| {
        error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("{field}: {v} is not a whole number, {min} or more"),
        )
    })
}

pub(super) fn trim_ask(bytes: &[u8]) -> Result<(crate::gesture::trim::Ask, String), ApiError> {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, "bad_request", m);
    let b: TrimBody = super::auth::body(bytes, r#"{"seq_num": N} or {"timestamp_ms": T}"#)?;
    let ask = match (&b.seq_num, &b.timestamp_ms) {
        (Some(n), None) => crate::gesture::trim::Ask::Entry(whole("seq_num", n, 1)?),
        (None, Some(t)) => {
            let ms = whole("timestamp_ms", t, 0)?;
            let at = i64::try_from(ms)
                .ok()
                .and_then(chrono::DateTime::from_timestamp_millis)
                .ok_or_else(|| bad(format!("timestamp_ms: {ms} is not an instant")))?;
            crate::gesture::trim::Ask::At(at)
        }
        _ => return Err(bad("give exactly one of seq_num and timestamp_ms".into())),
    };
    Ok((ask, b.reason))
}

pub(super) async fn trim(
    State(shared): State<Arc<Shared>>,
    Token(who): Token,
    Path(stream): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    let domain = match domain_reachable(&shared, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let (ask, reason) = match trim_ask(&bytes) {
        Ok(a) => a,
        Err(r) => return r.into_response(),
    };
    use crate::exit::Outcome;
    let by = format!("token:{}", who.name);
    let checked = match crate::gesture::trim::check(ask, &by, &reason) {
        Ok(c) => c,
        Err(e) => return error(status_of(e.class()), e.code(), e.to_string()).into_response(),
    };
    match crate::gesture::trim::raise(&shared.broker, &shared.config, &domain, &checked).await {
        Ok(r) => json_ok(crate::gesture::trim::json(&r)),
        Err(e) => error(status_of(e.class()), e.code(), e.to_string()).into_response(),
    }
}

/// The body of `POST …/capacity`: `bytes` a number of bytes or an IEC
/// size as a string, `confirm` the same value again.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CapacityBody {
    bytes: serde_json::Value,
    confirm: Option<serde_json::Value>,
}

/// A size given as a JSON number or string, as typed.
pub(super) fn size_text(field: &str, v: &serde_json::Value) -> Result<String, ApiError> {
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

pub(super) async fn capacity(
    State(shared): State<Arc<Shared>>,
    Path(stream): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    use crate::gesture::capacity::{self as set_capacity, Outcome};
    let domain = match domain_reachable(&shared, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let b: CapacityBody = match body(&bytes, r#"{"bytes": B, "confirm": B}"#) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
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
    let ask = set_capacity::Ask {
        stream: domain.stream.clone(),
        bytes,
        confirm,
        surface: crate::human::Surface::Http,
    };
    let outcome = match set_capacity::check(&shared.config, &ask) {
        Err(b) => Outcome::BadInput(b),
        Ok((domain, target)) => {
            set_capacity::perform(&shared.config, &shared.broker, &domain, target).await
        }
    };
    let status = status_of(outcome.class());
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        set_capacity::json(&outcome).to_string(),
    )
        .into_response()
}

/// The body of `POST …/erase`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EraseBody {
    subject: String,
    confirm: Option<String>,
    reason: Option<String>,
    op_id: Option<String>,
}

pub(super) async fn erase(
    State(shared): State<Arc<Shared>>,
    Token(who): Token,
    Path(stream): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    use crate::gesture::erase::{self, Outcome};
    let domain = match domain_reachable(&shared, &stream) {
        Ok(g) => g,
        Err(r) => return r.into_response(),
    };
    let b: EraseBody = match body(
        &bytes,
        r#"{"subject": S, "confirm": S, "reason": R, "op_id": ID}"#,
    ) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
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
                erase::perform(&shared.config, &shared.broker, &domain, &ask, op, |_| {}).await
            })
            .await
            {
                Ok(o) => o,
                Err(r) => return r.into_response(),
            }
        }
    };
    let status = status_of(outcome.class());
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        erase::json(&ask, &outcome).to_string(),
    )
        .into_response()
}
