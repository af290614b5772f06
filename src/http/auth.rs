//! The preamble every route shares: the error answer, the bearer token
//! checked for the typed [`Scope`] the route table gives the route, the
//! configured domain a `{stream}` names, and whether the broker can be
//! reached.

use super::*;

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

/// The HTTP status of an outcome's class (the CLI's exit code comes from
/// the same class).
pub(super) fn status_of(class: crate::exit::Class) -> StatusCode {
    StatusCode::from_u16(class.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

pub fn error(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        code,
        message: message.into(),
        extra: serde_json::Map::new(),
    }
}

/// A route's JSON body, or the 400 that names the shape it must have
/// (`shape`, as written in docs/http.md) and what did not parse.
pub(super) fn body<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    shape: &str,
) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("the body is not {shape}: {e}"),
        )
    })
}

pub(super) fn json_ok(v: serde_json::Value) -> Response {
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

/// The router's check in front of every route that needs a scope
/// ([`super::Access::Needs`]): the token must carry `scope`, or the
/// request is answered 401 or 403 before its handler runs or its body is
/// read. The checked token goes on to the handler as [`Token`].
pub(super) async fn require(
    State((shared, scope)): State<(Arc<Shared>, Scope)>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match authorise(&shared, request.headers(), scope) {
        Ok(who) => {
            request.extensions_mut().insert(who);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

/// The token the router checked for this route's scope. A handler that
/// takes one on a route the table declares public answers 500, and the
/// route tests find it: there is no way to reach it with an unchecked
/// token.
pub struct Token(pub tokens::Entry);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Token {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Token, ApiError> {
        parts
            .extensions
            .get::<tokens::Entry>()
            .cloned()
            .map(Token)
            .ok_or_else(|| {
                error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "this route declares no scope in the router's table, so no token was checked; nothing was read or written",
                )
            })
    }
}

/// The domain a `{stream}` route names, with the broker reachable: else
/// the 404 or 503 answer (rather than a read that waits out its timeout,
/// or a judgement on reads that cannot be made, which would answer with a
/// refusal that is not one).
pub(super) fn domain_reachable(
    shared: &Shared,
    stream: &str,
) -> Result<crate::config::Domain, ApiError> {
    let domain = domain_of(shared, stream)?;
    reachable(shared)?;
    Ok(domain)
}

/// The broker reachable, or the 503 `unreachable` answer: an answer
/// computed earlier is not the state of the fleet, and a gesture judged on
/// reads that cannot be made would be a refusal that is not one. The
/// answer carries `last_answer_at` (null before any), which the dashboard
/// shows as the age of what it keeps on the screen.
pub(super) fn reachable(shared: &Shared) -> Result<(), ApiError> {
    let Some(outage) = shared.outage() else {
        return Ok(());
    };
    let last = shared.last().map(|l| crate::rows::Timestamp(l.at));
    let shown = match last {
        Some(at) => format!("the last answer, of {at}, is not the state of the fleet"),
        None => "no answer was computed yet".to_string(),
    };
    let mut e = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unreachable",
        match &outage.refused {
            // Still `unreachable` (the error code clients key on): the
            // message says the servers answer and refuse.
            Some(why) => format!(
                "the broker refuses this sidecar's credentials ({why}; since {}; servers tried: {}); nothing is read or written, and {shown}",
                outage.since, outage.servers
            ),
            None => format!(
                "the broker cannot be reached (since {}; servers tried: {}); nothing is read or written, and {shown}",
                outage.since, outage.servers
            ),
        },
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
