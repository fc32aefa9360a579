//! What every request passes through: the bearer token check, the per-request timeout, the
//! metrics recorder, and the extractors that turn bodies and paths into typed values with
//! errors in the API's own shape.

use std::collections::HashMap;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{
    FromRequest, FromRequestParts, MatchedPath, OptionalFromRequestParts, Path, Request, State,
};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::error::ServerError;
use crate::space::DEFAULT_SPACE;
use crate::AppRef;

/// Requires `Authorization: Bearer <token>` on the API and metrics when a token is set. The
/// page, its assets, `/health` and `/openapi.json` stay open: they hold no data.
pub async fn auth(State(app): State<AppRef>, request: Request, next: Next) -> Response {
    if let Some(token) = &app.token {
        let path = request.uri().path();
        let guarded = path == "/v1" || path.starts_with("/v1/") || path == "/metrics";
        if guarded && !bearer_matches(request.headers(), token) {
            return ServerError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}

fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(given) = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
    else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), token.as_bytes())
}

/// Compares without an early exit, so the time taken says nothing about the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
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

/// The space and (for document routes) the id named by the path.
pub struct Target {
    pub space: String,
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
        Ok(Target {
            space: params
                .remove("space")
                .unwrap_or_else(|| DEFAULT_SPACE.to_string()),
            id: params.remove("id"),
        })
    }
}
