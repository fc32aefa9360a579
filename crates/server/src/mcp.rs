//! The agent tool: the Model Context Protocol over stdio (JSON-RPC 2.0, one message per
//! line), offering `search`, `context` and `recommend` over the served spaces.
//!
//! Requests are answered in order on the calling thread; stdout carries protocol messages
//! only (diagnostics go to the log, on stderr). Invalid arguments (a bad setting, an unknown space) are
//! JSON-RPC errors with the API's `{code, message, details}` as `data`; a tool that ran but
//! could not answer (no index yet, storage fault) returns `isError: true` so the model can
//! read why.

use std::io::{BufRead, Write};

use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use crate::error::ServerError;
use crate::space::{Spaces, DEFAULT_SPACE};
use crate::wire::{
    ContextRequest, ContextResult, RecommendRequest, RecommendResult, SearchRequest, SearchResult,
};
use crate::{ops, MAX_QUERY_CHARS};

/// Protocol revisions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// One MCP session over the given spaces.
pub struct McpServer {
    spaces: Spaces,
}

/// A JSON-RPC error.
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl McpServer {
    pub fn new(spaces: Spaces) -> McpServer {
        McpServer { spaces }
    }

    /// Handles one incoming line; returns the line to send back, if any (notifications and
    /// responses get none).
    pub fn handle_line(&self, line: &str) -> Option<String> {
        let message: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                return Some(reply_error(
                    Value::Null,
                    RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
                ))
            }
        };
        let Value::Object(message) = message else {
            return Some(reply_error(
                Value::Null,
                RpcError::new(
                    INVALID_REQUEST,
                    "expected one JSON-RPC object per line (batches are not supported)",
                ),
            ));
        };
        let id = message.get("id").cloned();
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            // A response to something we never send, or garbage: answer only if it has an id
            // and is not a response.
            let is_response = message.contains_key("result") || message.contains_key("error");
            return match id {
                Some(id) if !is_response => Some(reply_error(
                    id,
                    RpcError::new(INVALID_REQUEST, "missing `method`"),
                )),
                _ => None,
            };
        };
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return id.map(|id| {
                reply_error(
                    id,
                    RpcError::new(INVALID_REQUEST, "`jsonrpc` must be \"2.0\""),
                )
            });
        }
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = id else {
            // Notifications (`notifications/initialized`, `notifications/cancelled`, …) need
            // no answer and change nothing here.
            return None;
        };
        Some(match self.dispatch(method, &params) {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string(),
            Err(e) => reply_error(id, e),
        })
    }

    fn dispatch(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => Ok(self.initialize(params)),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": self.tools() })),
            "tools/call" => self.call(params),
            other => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            )),
        }
    }

    fn initialize(&self, params: &Value) -> Value {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let version = asked
            .filter(|v| PROTOCOL_VERSIONS.contains(v))
            .unwrap_or(PROTOCOL_VERSIONS[0]);
        json!({
            "protocolVersion": version,
            "capabilities": { "tools": { "listChanged": false } },
            "serverInfo": { "name": "finder", "title": "Finder", "version": env!("CARGO_PKG_VERSION") },
            "instructions": format!(
                "Finder searches an indexed knowledge base (spaces: {}). Use `search` for ranked sources with passage hints (line ranges), `context` for cited evidence within a character budget, and `recommend` for sources similar to a given source id.",
                self.spaces.names().join(", ")
            ),
        })
    }

    fn tools(&self) -> Value {
        let names = self.spaces.names();
        let space = json!({
            "type": "string",
            "enum": names,
            "default": DEFAULT_SPACE,
            "description": "Which index to use.",
        });
        let settings = json!({
            "type": "object",
            "description": "Query-time setting overrides, e.g. {\"lexical.k1\": 0.9, \"finder.max_hints\": 1}.",
            "additionalProperties": true,
        });
        let limit = json!({ "type": "integer", "minimum": 1, "maximum": crate::MAX_LIMIT, "default": crate::DEFAULT_LIMIT });
        let query = json!({ "type": "string", "maxLength": MAX_QUERY_CHARS, "description": "What to look for, in words." });
        json!([
            {
                "name": "search",
                "title": "Search",
                "description": "Ranked sources for a query: title, score (top is 1.0), summary and up to three passage hints with their line ranges, plus why each ranked where it did.",
                "inputSchema": {
                    "type": "object",
                    "properties": { "query": query, "limit": limit, "offset": { "type": "integer", "minimum": 0, "default": 0 }, "space": space, "settings": settings },
                    "required": ["query"],
                    "additionalProperties": false,
                },
            },
            {
                "name": "context",
                "title": "Context",
                "description": "Compact evidence for answering a question: the best matching passages, each cited as [n] title — source id and line range, within a character (or token) budget.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "query": query,
                        "budget_chars": { "type": "integer", "minimum": crate::MIN_BUDGET_CHARS, "maximum": crate::MAX_BUDGET_CHARS, "default": crate::DEFAULT_BUDGET_CHARS },
                        "budget_tokens": { "type": "integer", "minimum": 50, "description": "Alternative to budget_chars (about 4 characters per token)." },
                        "limit": limit, "space": space, "settings": settings,
                    },
                    "required": ["query"],
                    "additionalProperties": false,
                },
            },
            {
                "name": "recommend",
                "title": "Recommend",
                "description": "Sources similar to a given source (by id), without query text. Today similarity is lexical: the target's title and summary are searched, the target excluded.",
                "inputSchema": {
                    "type": "object",
                    "properties": { "target": { "type": "string", "description": "A source id as returned by search." }, "limit": limit, "space": space, "settings": settings },
                    "required": ["target"],
                    "additionalProperties": false,
                },
            },
        ])
    }

    fn call(&self, params: &Value) -> Result<Value, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call needs a tool `name`"))?;
        let mut arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "`arguments` must be an object",
                ))
            }
        };
        let space_name = match arguments.remove("space") {
            None | Some(Value::Null) => DEFAULT_SPACE.to_string(),
            Some(Value::String(s)) => s,
            Some(_) => return Err(RpcError::new(INVALID_PARAMS, "`space` must be a string")),
        };
        let space = self.spaces.get(&space_name).map_err(user_error)?;
        let outcome = match name {
            "search" => {
                let request: SearchRequest = arguments_as(arguments)?;
                ops::search(&space, &request).map(|r| (render_search(&r), to_value(&r)))
            }
            "context" => {
                let request: ContextRequest = arguments_as(arguments)?;
                ops::context(&space, &request).map(|r| (render_context(&r), to_value(&r)))
            }
            "recommend" => {
                let request: RecommendRequest = arguments_as(arguments)?;
                ops::recommend(&space, &request).map(|r| (render_recommend(&r), to_value(&r)))
            }
            other => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("unknown tool: {other}"),
                ))
            }
        };
        match outcome {
            Ok((text, structured)) => Ok(json!({
                "content": [{ "type": "text", "text": text }],
                "structuredContent": structured,
                "isError": false,
            })),
            Err(e) if e.status().is_client_error() && e.status() != StatusCode::CONFLICT => {
                Err(user_error(e))
            }
            Err(e) => {
                if let ServerError::Internal { detail } = &e {
                    tracing::error!("MCP tool call: internal error: {detail}");
                }
                Ok(json!({
                    "content": [{ "type": "text", "text": e.public_message() }],
                    "structuredContent": e.body(),
                    "isError": true,
                }))
            }
        }
    }
}

/// Reads JSON-RPC messages from `input` until it closes, answering on `output`.
pub fn run_stdio(
    server: &McpServer,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = server.handle_line(&line) {
            output.write_all(reply.as_bytes())?;
            output.write_all(b"\n")?;
            output.flush()?;
        }
    }
    Ok(())
}

fn reply_error(id: Value, e: RpcError) -> String {
    let mut error = json!({ "code": e.code, "message": e.message });
    if let Some(data) = e.data {
        error["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error }).to_string()
}

fn user_error(e: ServerError) -> RpcError {
    RpcError {
        code: if e.status().is_client_error() {
            INVALID_PARAMS
        } else {
            INTERNAL_ERROR
        },
        message: e.public_message(),
        data: Some(e.body()),
    }
}

fn arguments_as<T: DeserializeOwned>(arguments: Map<String, Value>) -> Result<T, RpcError> {
    serde_json::from_value(Value::Object(arguments))
        .map_err(|e| RpcError::new(INVALID_PARAMS, format!("invalid arguments: {e}")))
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn render_hits(hits: &[finder_core::Hit], out: &mut String) {
    for hit in hits {
        out.push_str(&format!(
            "{}. {} [{:.3}] id: {}\n",
            hit.rank, hit.envelope.title, hit.score, hit.id
        ));
        if !hit.summary.is_empty() {
            out.push_str(&format!("   {}\n", hit.summary));
        }
        for hint in &hit.hints {
            out.push_str(&format!(
                "   L{}-{}: {}\n",
                hint.extent.line_start, hint.extent.line_end, hint.preview
            ));
        }
    }
}

fn render_search(r: &SearchResult) -> String {
    if r.hits.is_empty() {
        return format!("No results for \"{}\".", r.query);
    }
    let mut out = format!("Results for \"{}\" (space {}):\n", r.query, r.space);
    render_hits(&r.hits, &mut out);
    out
}

fn render_context(r: &ContextResult) -> String {
    if r.pieces.is_empty() {
        return format!("No evidence found for \"{}\".", r.query);
    }
    r.text.clone()
}

fn render_recommend(r: &RecommendResult) -> String {
    if r.hits.is_empty() {
        return format!("Nothing similar to {} found.", r.target);
    }
    let mut out = format!("Sources similar to {} (by {}):\n", r.target, r.basis);
    render_hits(&r.hits, &mut out);
    out
}
