//! Finder as a service: the HTTP JSON API, the web search page and the MCP agent tool.
//!
//! This is the only crate that knows HTTP and JSON wire formats. It serves one or more
//! *spaces* (independent index folders) through the same operations (`ops`): search, context,
//! recommend, get, status and document writes. The HTTP router (`http`) and the MCP server
//! (`mcp`, on stdio or at `/mcp`) are two front ends over them.

mod access;
mod documents;
mod error;
mod http;
mod layers;
mod mcp;
mod metrics;
mod openapi;
mod ops;
mod page;
mod space;
mod wire;
mod writes;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

pub use access::{Access, Grants};
pub use documents::{index_pg_inputs, API_SOURCES};
pub use error::{Result, ServerError};
pub use http::router;
pub use mcp::{http_service as mcp_http_service, Detail, McpServer};
pub use openapi::{document as openapi_document, markdown as openapi_markdown};
pub use ops::{read_lines, MAX_GET_CHARS, MAX_QUERY_CHARS};
pub use space::{
    parse_space_arg, AfterWrite, Models, Opener, Space, Spaces, DEFAULT_SPACE, PG_RECHECK,
};
pub use wire::*;

/// Limits applied to every request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    /// For reads (search, context, recommend, status).
    pub request_timeout: Duration,
    /// For document writes, which wait for the index commit.
    pub write_timeout: Duration,
    /// Requests handled at once (at least 1); past it a request is answered 503 `overloaded`
    /// with `Retry-After` at once instead of waiting in an unbounded queue. `/health` is
    /// never refused.
    pub max_in_flight: usize,
}

/// The default of `Limits::max_in_flight`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(120),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

/// Everything a request handler can reach.
pub struct App {
    pub spaces: Arc<Spaces>,
    /// Which bearer tokens `/v1/*` and `/metrics` accept, and which spaces each grants.
    pub access: Access,
    pub limits: Limits,
    metrics: metrics::Metrics,
    in_flight: tokio::sync::Semaphore,
}

/// The shared application state.
pub type AppRef = Arc<App>;

impl App {
    pub fn new(spaces: Spaces, access: Access, limits: Limits) -> AppRef {
        let limits = Limits {
            max_in_flight: limits.max_in_flight.max(1),
            ..limits
        };
        Arc::new(App {
            spaces: Arc::new(spaces),
            access,
            in_flight: tokio::sync::Semaphore::new(limits.max_in_flight),
            limits,
            metrics: metrics::Metrics::default(),
        })
    }
}

/// Refuses to listen beyond loopback without a token: anyone on the network could read
/// and write the index otherwise.
pub fn check_bind(addr: &str, has_token: bool) -> Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| ServerError::invalid_field("addr", format!("cannot resolve `{addr}`: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(ServerError::invalid_field(
            "addr",
            format!("`{addr}` resolves to no address"),
        ));
    }
    if !has_token && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(ServerError::invalid_field(
            "addr",
            format!("refusing to listen on {addr} (beyond loopback) without --token-file: anyone who reaches it could read and change the index"),
        ));
    }
    Ok(addrs)
}

/// Serves `app` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: AppRef,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Binds `addrs` (the first that works), reports the bound address to `ready`, and serves
/// `app` on its own runtime until Ctrl-C or SIGTERM.
pub fn serve_blocking(
    addrs: &[SocketAddr],
    app: AppRef,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addrs).await?;
        ready(listener.local_addr()?);
        serve(listener, app, shutdown_signal()).await
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
