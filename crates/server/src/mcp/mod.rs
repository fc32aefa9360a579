//! The agent tool: the Model Context Protocol on the official Rust SDK (`rmcp`), over stdio
//! (`finder mcp`) and streamable HTTP (`/mcp` on `finder serve`: one warm process, one model
//! load, many agents). Tools: `search`, `context`, `get`, `recommend` and `status`, each one
//! call over the served spaces, with an output schema and a compact text rendering.
//!
//! Over HTTP the bearer token and the spaces it grants apply as on the REST API (the `auth`
//! layer puts the grants on the request, which the SDK hands to the handler). Arguments an
//! agent can fix (a bad range, an unknown space or source) answer a tool result with
//! `isError: true` and a message saying what to change; only an unknown tool is a protocol
//! error.

mod tools;

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::handler::server::common::{schema_for_output, schema_for_type};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::access::Grants;
use crate::error::ServerError;
use crate::ops;
use crate::space::{Space, Spaces, DEFAULT_SPACE};
use crate::wire::{ContextRequest, RecommendRequest, SearchRequest, SourceLines};
pub use tools::Detail;
use tools::*;

/// The tools `McpServer::tools` lists, by name.
const TOOLS: &[&str] = &["search", "context", "get", "recommend", "status"];

/// The MCP server over the given spaces. Cheap to clone: the HTTP transport makes one per
/// session, all sharing the spaces (and so the opened indexes and the loaded model).
#[derive(Clone)]
pub struct McpServer {
    spaces: Arc<Spaces>,
}

impl McpServer {
    pub fn new(spaces: Arc<Spaces>) -> McpServer {
        McpServer { spaces }
    }

    /// Speaks MCP on stdin and stdout until stdin closes.
    pub async fn run_stdio(self) -> std::io::Result<()> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(std::io::Error::other)?;
        running.waiting().await.map_err(std::io::Error::other)?;
        Ok(())
    }

    /// The spaces a call may use: over HTTP what the request's token grants, over stdio
    /// every space (whoever started the process owns it).
    fn grants(context: &RequestContext<RoleServer>) -> Grants {
        match context.extensions.get::<Parts>() {
            Some(parts) => parts
                .extensions
                .get::<Grants>()
                .cloned()
                .unwrap_or_else(|| Grants::Spaces(Default::default())),
            None => Grants::All,
        }
    }

    fn space(&self, name: Option<&str>, grants: &Grants) -> Result<Arc<Space>, ServerError> {
        self.spaces
            .get_granted(name.unwrap_or(DEFAULT_SPACE), grants)
    }

    /// Runs one tool: arguments parsed, the operation on a blocking thread (the index is
    /// synchronous), the answer rendered.
    fn run(
        &self,
        name: &str,
        arguments: JsonObject,
        grants: &Grants,
    ) -> Result<Answer, ServerError> {
        match name {
            "search" => {
                let a: SearchArgs = parse(arguments)?;
                let space = self.space(a.space.as_deref(), grants)?;
                let request = SearchRequest {
                    query: a.query,
                    limit: a.limit,
                    offset: a.offset,
                    settings: a.settings,
                    vector: None,
                    filters: a.extras,
                    tags: a.tags,
                    date_from: a.date_from,
                    date_to: a.date_to,
                    path_prefix: a.path_prefix,
                    // An agent's filter narrows the candidates, not the page.
                    prefilter: true,
                    scope: a.scope,
                    user: None,
                    sort: None,
                    min_score: None,
                };
                let out = search_out(ops::search(&space, &request)?, a.detail);
                Answer::new(render_search(&out), &out)
            }
            "context" => {
                let a: ContextArgs = parse(arguments)?;
                let space = self.space(a.space.as_deref(), grants)?;
                let request = ContextRequest {
                    query: a.query,
                    budget_chars: a.budget_chars,
                    budget_tokens: a.budget_tokens,
                    limit: a.limit,
                    settings: a.settings,
                };
                let out = context_out(ops::context(&space, &request)?);
                Answer::new(render_context(&out), &out)
            }
            "get" => {
                let a: GetArgs = parse(arguments)?;
                let space = self.space(a.space.as_deref(), grants)?;
                let out = ops::get(&space, &a.id, a.lines.as_deref())?;
                Answer::new(render_get(&out), &out)
            }
            "recommend" => {
                let a: RecommendArgs = parse(arguments)?;
                let space = self.space(a.space.as_deref(), grants)?;
                let request = RecommendRequest {
                    target: a.target,
                    limit: a.limit,
                    settings: a.settings,
                };
                let out = recommend_out(ops::recommend(&space, &request)?, a.detail);
                Answer::new(render_recommend(&out), &out)
            }
            "status" => {
                let a: StatusArgs = parse(arguments)?;
                let spaces = match a.space {
                    Some(name) => vec![self.space(Some(&name), grants)?],
                    None => self.spaces.granted(grants).cloned().collect(),
                };
                let out = StatusOut {
                    spaces: spaces
                        .iter()
                        .map(|s| ops::status(s).map(space_out))
                        .collect::<Result<_, _>>()?,
                };
                Answer::new(render_status(&out), &out)
            }
            other => unreachable!("tool `{other}` is checked before it runs"),
        }
    }

    fn tools(&self) -> Vec<Tool> {
        let read_only = |title: &str| {
            ToolAnnotations::with_title(title)
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false)
        };
        let tool = |name: &'static str,
                    title: &str,
                    description: String,
                    input: Arc<JsonObject>,
                    output: Arc<JsonObject>| {
            Tool::new(name, description, input)
                .with_title(title)
                .with_raw_output_schema(output)
                .with_annotations(read_only(title))
        };
        let spaces = self.spaces.names().join(", ");
        vec![
            tool(
                "search",
                "Search",
                format!("Ranked sources (notes, documents, records) for a query, best first. Each hit has its id, title, score (top is 1.0), summary and up to three passage hints; a hint's `at` (`id:40-52`) is what `get` reads. `detail`: `ids` for a few tokens per hit, `hints` (default), `full` adds why each ranked. Narrow with `tags`, `date_from` / `date_to`, `path_prefix` (a folder), `extras` (metadata values) or `scope` (ids). Spaces: {spaces}."),
                schema_for_type::<SearchArgs>(),
                schema_for_output::<SearchOut>(),
            ),
            tool(
                "context",
                "Context",
                "Evidence for answering a question in one call: the best matching passages, each headed `[n] title — id Lx-y`, packed into a character (or token) budget. Cite the `[n]`s; read more around one with `get`.".to_string(),
                schema_for_type::<ContextArgs>(),
                schema_for_output::<ContextOut>(),
            ),
            tool(
                "get",
                "Get",
                "A source's text with line numbers, whole or a line range: `id` as `search` returns it, with a range after a colon (`notes/a.md:40-80`, a hint's `at`) or in `lines`. Long sources are cut at about 6,000 tokens; `truncated` says so and where to read on.".to_string(),
                schema_for_type::<GetArgs>(),
                schema_for_output::<SourceLines>(),
            ),
            tool(
                "recommend",
                "Recommend",
                "Sources related to a given source (by id), with no query text: words of its title and summary, its vectors and its links.".to_string(),
                schema_for_type::<RecommendArgs>(),
                schema_for_output::<RecommendOut>(),
            ),
            tool(
                "status",
                "Status",
                "What each space holds and how fresh it is: sources, fragments, the last commit's time, and vector progress while a build runs.".to_string(),
                schema_for_type::<StatusArgs>(),
                schema_for_output::<StatusOut>(),
            ),
        ]
    }
}

/// A tool's answer: the compact text and the structured content.
struct Answer {
    text: String,
    structured: serde_json::Value,
}

impl Answer {
    fn new<T: Serialize>(text: String, value: &T) -> Result<Answer, ServerError> {
        Ok(Answer {
            text,
            structured: serde_json::to_value(value).map_err(ServerError::internal)?,
        })
    }
}

fn parse<T: DeserializeOwned>(arguments: JsonObject) -> Result<T, ServerError> {
    serde_json::from_value(serde_json::Value::Object(arguments))
        .map_err(|e| ServerError::invalid(format!("invalid arguments: {e}")))
}

/// A failed call as the model reads it: what went wrong and what to do, with the API's
/// error code.
fn tool_error(e: &ServerError) -> CallToolResult {
    if let ServerError::Internal { detail } = e {
        tracing::error!("MCP tool call: internal error: {detail}");
    }
    let body = e.body();
    let code = body["code"].as_str().unwrap_or("error").to_string();
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{} ({code})",
        e.public_message()
    ))])
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("finder", env!("CARGO_PKG_VERSION")).with_title("Finder"),
            )
            .with_instructions(format!(
                "Finder searches an indexed knowledge base (spaces: {}). `search` finds sources with passage hints; `get` reads a hint's lines (its `at`); `context` packs cited evidence into a budget; `recommend` finds sources like a given one; `status` tells what is indexed and how fresh.",
                self.spaces.names().join(", ")
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !TOOLS.contains(&name.as_str()) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`: the tools are search, context, get, recommend and status"),
                None,
            ));
        }
        let grants = Self::grants(&context);
        let arguments = request.arguments.unwrap_or_default();
        let server = self.clone();
        let outcome =
            tokio::task::spawn_blocking(move || server.run(&name, arguments, &grants)).await;
        let result = match outcome {
            Ok(Ok(answer)) => {
                let mut result = CallToolResult::structured(answer.structured);
                result.content = vec![ContentBlock::text(answer.text)];
                result
            }
            Ok(Err(e)) => tool_error(&e),
            Err(e) => tool_error(&ServerError::internal(e)),
        };
        Ok(result.into())
    }
}

/// The streamable HTTP transport for `/mcp`, over the app's spaces. Stateless, JSON answers:
/// every request stands alone, so one server serves many agents without keeping sessions.
/// Browsers may call it only from loopback pages (the `Origin` check); without tokens the
/// `Host` must be loopback too, the guard against DNS rebinding (with tokens, the token is).
pub fn http_service(
    spaces: Arc<Spaces>,
    guarded: bool,
    max_body_bytes: usize,
) -> StreamableHttpService<McpServer, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(max_body_bytes)
        .with_allowed_origins([
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
            "https://127.0.0.1:*",
            "https://[::1]:*",
        ]);
    if guarded {
        config = config.disable_allowed_hosts();
    }
    let server = McpServer::new(spaces);
    StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config)
}
