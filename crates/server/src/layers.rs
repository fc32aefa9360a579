//! What every request passes through: the bearer token check, the in-flight limit, the
//! per-request timeout, the metrics recorder, and the extractors that turn bodies and paths
//! into typed values with errors in the API's own shape.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{
    FromRequest, FromRequestParts, MatchedPath, OptionalFromRequestParts, Path, Request, State,
};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::access::Grants;
use crate::error::ServerError;
use crate::space::{Space, DEFAULT_SPACE};
use crate::AppRef;

/// Requires a bearer token the server knows on the API, MCP and metrics when it has tokens, and
/// hands what the token grants to the handlers (`Granted`, `Target`). The page, its assets,
/// `/health` and `/openapi.json` stay open: they hold no data. `/metrics` counts requests to
/// every space, so it needs a token that grants every space.
pub async fn auth(State(app): State<AppRef>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let guarded = path == "/v1"
        || path.starts_with("/v1/")
        || path == "/metrics"
        || path == "/mcp"
        || path.starts_with("/mcp/");
    if !guarded {
        return next.run(request).await;
    }
    let Some(grants) = app.access.grants_for(request.headers()) else {
        return ServerError::Unauthorized.into_response();
    };
    if path == "/metrics" && !grants.covers(app.spaces.iter().map(|s| s.name())) {
        return ServerError::Forbidden {
            what: "/metrics".to_string(),
        }
        .into_response();
    }
    request.extensions_mut().insert(grants);
    next.run(request).await
}

/// Answers 503 `overloaded` at once when `Limits::max_in_flight` requests are being handled,
/// so a burst cannot queue without bound. `/health` always passes: a liveness probe must not
/// fail because the server is busy.
pub async fn admit(State(app): State<AppRef>, request: Request, next: Next) -> Response {
    if request.uri().path() == "/health" {
        return next.run(request).await;
    }
    match app.in_flight.try_acquire() {
        Ok(_permit) => next.run(request).await,
        Err(_) => ServerError::Overloaded {
            limit: app.limits.max_in_flight,
        }
        .into_response(),
    }
}

/// Stops a request that runs past its limit. Writes get the longer limit: the index commit
/// they wait for may take a while, and their acknowledgement must mean the commit happened.
pub async fn timeout(State(app): State<AppRef>, request: Request, next: Next) -> Response {
    let write = matches!(*request.method(), Method::PUT | Method::DELETE);
    let limit = if write {
        app.limits.write_timeout
    } else {
        app.limits.request_timeout
    };
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ServerError::Timeout {
            ms: limit.as_millis() as u64,
        }
        .into_response(),
    }
}

/// Counts each request under its route template and method.
pub async fn metrics(State(app): State<AppRef>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let response = next.run(request).await;
    app.metrics.record(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// A JSON body parsed with the API's error shape. The content type is not checked: a body
/// sent by `curl -d` is JSON too.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppRef> for JsonBody<T> {
    type Rejection = ServerError;

    async fn from_request(request: Request, state: &AppRef) -> Result<Self, ServerError> {
        let bytes = Bytes::from_request(request, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ServerError::PayloadTooLarge {
                    limit: state.limits.max_body_bytes,
                }
            } else {
                ServerError::invalid(r.body_text())
            }
        })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ServerError::invalid(format!("request body: {e}")))
    }
}

/// What the request's token grants (set by `auth`); nothing when `auth` did not run.
pub struct Granted(pub Grants);

impl FromRequestParts<AppRef> for Granted {
    type Rejection = ServerError;

    async fn from_request_parts(parts: &mut Parts, _: &AppRef) -> Result<Self, ServerError> {
        Ok(Granted(granted(parts)))
    }
}

fn granted(parts: &Parts) -> Grants {
    parts
        .extensions
        .get::<Grants>()
        .cloned()
        .unwrap_or_else(|| Grants::Spaces(Default::default()))
}

/// The space (granted to the request's token) and, for document routes, the id named by the
/// path. Resolved before the body is read, so an unknown or ungranted space is the same 404
/// whatever the body holds.
pub struct Target {
    pub space: Arc<Space>,
    pub id: Option<String>,
}

impl FromRequestParts<AppRef> for Target {
    type Rejection = ServerError;

    async fn from_request_parts(parts: &mut Parts, state: &AppRef) -> Result<Self, ServerError> {
        let params: Option<Path<HashMap<String, String>>> =
            <Path<HashMap<String, String>> as OptionalFromRequestParts<AppRef>>::from_request_parts(
                parts, state,
            )
            .await
            .map_err(|r| ServerError::invalid(r.body_text()))?;
        let mut params = params.map(|p| p.0).unwrap_or_default();
        let name = params
            .remove("space")
            .unwrap_or_else(|| DEFAULT_SPACE.to_string());
        Ok(Target {
            space: state.spaces.get_granted(&name, &granted(parts))?,
            id: params.remove("id"),
        })
    }
}
