//! The axum router: every route, its handler, and the layers around them. `/mcp` is the
//! MCP SDK's own service (`mcp::http_service`) behind the same layers.
//!
//! Handlers are thin: they resolve the space, run an operation from `ops` or `documents` on a
//! blocking thread (the index is synchronous) and wrap the answer in JSON.

use std::collections::HashMap;
use std::sync::Arc;

use crate::wire::{Health, SpaceList};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, Method, Uri};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;

use crate::access::Grants;
use crate::error::{Result, ServerError};
use crate::layers::{self, Granted, JsonBody, Target};
use crate::metrics::escape;
use crate::space::Space;
use crate::wire::{ContextRequest, Document, RecommendRequest, SearchRequest};
use crate::{documents, openapi, ops, page, AppRef};

/// The whole service: API under `/v1` (the `default` space) and `/v1/spaces/{space}`, the
/// page at `/`, health, metrics and the OpenAPI document.
pub fn router(app: AppRef) -> Router {
    let api = Router::new()
        .route("/search", post(search))
        .route("/context", post(context))
        .route("/recommend", post(recommend))
        .route("/status", get(status))
        .route(
            "/documents/{*id}",
            get(get_document).put(put_document).delete(delete_document),
        );
    Router::new()
        .route("/", get(page::index))
        .route("/assets/{file}", get(page::asset))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi_json))
        .route("/v1/spaces", get(spaces))
        .nest_service(
            "/mcp",
            crate::mcp::http_service(
                app.spaces.clone(),
                app.access.is_guarded(),
                app.limits.max_body_bytes,
            ),
        )
        .nest("/v1", api.clone())
        .nest("/v1/spaces/{space}", api)
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(app.limits.max_body_bytes))
        .layer(from_fn_with_state(app.clone(), layers::timeout))
        .layer(from_fn_with_state(app.clone(), layers::admit))
        .layer(from_fn_with_state(app.clone(), layers::auth))
        .layer(from_fn_with_state(app.clone(), layers::metrics))
        .with_state(app)
}

/// Runs `work` on a blocking thread with the space named by the path.
async fn in_space<T, F>(space: Arc<Space>, work: F) -> Result<Json<T>>
where
    T: Serialize + Send + 'static,
    F: FnOnce(&Arc<Space>) -> Result<T> + Send + 'static,
{
    let value = tokio::task::spawn_blocking(move || work(&space))
        .await
        .map_err(ServerError::internal)??;
    Ok(Json(value))
}

async fn search(
    target: Target,
    JsonBody(request): JsonBody<SearchRequest>,
) -> Result<impl IntoResponse> {
    in_space(target.space, move |s| ops::search(s, &request)).await
}

async fn context(
    target: Target,
    JsonBody(request): JsonBody<ContextRequest>,
) -> Result<impl IntoResponse> {
    in_space(target.space, move |s| ops::context(s, &request)).await
}

async fn recommend(
    target: Target,
    JsonBody(request): JsonBody<RecommendRequest>,
) -> Result<impl IntoResponse> {
    in_space(target.space, move |s| ops::recommend(s, &request)).await
}

async fn status(target: Target) -> Result<impl IntoResponse> {
    in_space(target.space, |s| ops::status(s)).await
}

/// `?lines=…` reads any indexed source's lines; without it, a document written through the
/// API in its stored form.
async fn get_document(
    target: Target,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response> {
    let id = target.id.unwrap_or_default();
    Ok(match params.get("lines").cloned() {
        Some(lines) => in_space(target.space, move |s| ops::get(s, &id, Some(&lines)))
            .await?
            .into_response(),
        None => in_space(target.space, move |s| documents::get(s, &id))
            .await?
            .into_response(),
    })
}

async fn put_document(
    target: Target,
    JsonBody(document): JsonBody<Document>,
) -> Result<impl IntoResponse> {
    let id = target.id.unwrap_or_default();
    in_space(target.space, move |s| documents::put(s, &id, document)).await
}

async fn delete_document(target: Target) -> Result<impl IntoResponse> {
    let id = target.id.unwrap_or_default();
    in_space(target.space, move |s| documents::delete(s, &id)).await
}

async fn spaces(State(app): State<AppRef>, Granted(grants): Granted) -> Result<impl IntoResponse> {
    let spaces = tokio::task::spawn_blocking(move || ops::spaces(&app.spaces, &grants))
        .await
        .map_err(ServerError::internal)?;
    Ok(Json(SpaceList { spaces }))
}

/// Names the spaces only when they are open to everyone: with tokens, which spaces exist is
/// for `/v1/spaces` to tell each token.
async fn health(State(app): State<AppRef>) -> impl IntoResponse {
    let spaces = if app.access.is_guarded() {
        Vec::new()
    } else {
        app.spaces.names()
    };
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        spaces,
    })
}

async fn metrics(State(app): State<AppRef>) -> Result<Response> {
    let app2 = app.clone();
    let gauges = tokio::task::spawn_blocking(move || space_gauges(&app2))
        .await
        .map_err(ServerError::internal)?;
    let body = app.metrics.render(&gauges);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

fn space_gauges(app: &AppRef) -> String {
    let mut out = String::from(
        "# HELP finder_space_sources Sources indexed in a space.\n# TYPE finder_space_sources gauge\n",
    );
    // `/metrics` is answered only to tokens that grant every space (see `layers::auth`).
    for summary in ops::spaces(&app.spaces, &Grants::All) {
        out.push_str(&format!(
            "finder_space_sources{{space=\"{}\"}} {}\n",
            escape(&summary.name),
            summary.sources
        ));
    }
    out
}

async fn openapi_json() -> impl IntoResponse {
    Json(openapi::document())
}

async fn unknown_route(method: Method, uri: Uri) -> ServerError {
    ServerError::UnknownRoute {
        method: method.to_string(),
        path: uri.path().to_string(),
    }
}

async fn method_not_allowed(method: Method, uri: Uri) -> ServerError {
    ServerError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_string(),
    }
}
