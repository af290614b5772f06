//! The routes on one node: evict and readmit.

use super::*;

/// The body of `POST /v1/nodes/{node}/evict` and `…/readmit`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GestureBody {
    confirm: Option<String>,
    #[serde(default)]
    force: bool,
    op_id: Option<String>,
    reason: Option<String>,
}

/// How long a gesture may take before the route answers that it is still
/// running (it goes on, under the operation id the answer names), well
/// inside [`REQUEST_TIMEOUT`].
pub(super) const GESTURE_WAIT: Duration = Duration::from_secs(8);

pub(super) async fn evict(
    State(shared): State<Arc<Shared>>,
    Token(who): Token,
    Path(node): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    gesture_route(shared, who, node, bytes, crate::rows::GateSign::Evict).await
}

pub(super) async fn readmit(
    State(shared): State<Arc<Shared>>,
    Token(who): Token,
    Path(node): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    gesture_route(shared, who, node, bytes, crate::rows::GateSign::Readmit).await
}

/// The gesture the CLI performs, judged and written by the same library
/// code, answered with the object `--json` prints: 200 with each log's
/// outcome, 400 for bad input, 409 for a refusal by judgement (its code in
/// `error`), nothing written in either.
pub(super) async fn gesture_route(
    shared: Arc<Shared>,
    who: tokens::Entry,
    node: String,
    bytes: axum::body::Bytes,
    sign: crate::rows::GateSign,
) -> Response {
    use crate::gesture;
    if let Err(r) = reachable(&shared) {
        return r.into_response();
    }
    let b: GestureBody = match body(
        &bytes,
        r#"{"confirm": "<node>", "force": false, "op_id": "…", "reason": "…"}"#,
    ) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let ask = gesture::evict::Ask {
        node,
        confirm: b.confirm,
        force: b.force,
        op_id: b.op_id,
        reason: b.reason,
        by: format!("token:{}", who.name),
    };
    let performed = match gesture::evict::check(&shared.config, &ask) {
        Err(p) => p,
        Ok(op) => {
            let (shared, ask, id) = (shared.clone(), ask.clone(), op.clone());
            match detached("gesture", &id, GESTURE_WAIT, async move {
                gesture::evict::perform(&shared.config, &shared.broker, sign, &ask, op).await
            })
            .await
            {
                Ok(p) => p,
                Err(r) => return r.into_response(),
            }
        }
    };
    let mut v = gesture::evict::json(sign, &ask, &performed, crate::human::Surface::Http);
    let status = status_of(performed.class());
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
