//! The OpenAPI 3.1 document of the HTTP API (served at `/openapi.json`) and its Markdown
//! rendering (`docs/API.md`). The schemas are derived from the wire types with utoipa, so they
//! cannot drift from the structs; the routes are listed here with what each one does.
//!
//! A test checks that every route of the router appears here and that `docs/API.md` is the
//! rendering of this document.

use serde_json::{json, Map, Value};

use utoipa::OpenApi;

use crate::wire::{
    ContextRequest, ContextResult, Document, ErrorBody, Health, RecommendRequest, RecommendResult,
    SearchRequest, SearchResult, SourceLines, SpaceList, StatusResult, StoredDocument, WriteResult,
};
use crate::{DEFAULT_MAX_IN_FLIGHT, MAX_QUERY_CHARS};

/// The routes that exist for the default space (`/v1/...`) and for each named space
/// (`/v1/spaces/{space}/...`): (path suffix, method, operation id, summary, description,
/// request schema, response schema, extra error statuses).
type SpaceRoute = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
    &'static [&'static str],
);

const SPACE_ROUTES: &[SpaceRoute] = &[
    ("/search", "post", "search", "Search",
     "Ranked sources for a query, each with its envelope, summary, passage hints (preview and extent) and an explain block; facets over the returned hits; diagnostics with the channels that ran, were skipped or degraded, and per-stage timings. `settings` overrides query-time settings for this request only.",
     Some("SearchRequest"), "SearchResult", &["400", "404", "409"]),
    ("/context", "post", "context", "Context for an LLM",
     "The best matching passages, best first, each cited by source id and line extent, rendered into `text` without exceeding the character budget (`budget_tokens` counts 4 characters per token). A passage that does not fit whole is cut at a word boundary when at least 120 characters remain; the rest are counted in `omitted`.",
     Some("ContextRequest"), "ContextResult", &["400", "404", "409"]),
    ("/recommend", "post", "recommend", "Recommend",
     "Sources related to a target source, without query text: the target's fragments seed the graph boost (links, mentions, tags), its vectors query the vector list, its title and summary the lexical lists; the target itself is left out. `basis` names what contributed (e.g. `lexical+vector+graph`).",
     Some("RecommendRequest"), "RecommendResult", &["400", "404", "409"]),
    ("/status", "get", "status", "Index status",
     "What the space holds (sources, fragments, segments, size, inputs, index-time settings, last run), whether it is built, and the progress of a run under way (indexing or a vector build: stage, done / total, rate, time left).",
     None, "StatusResult", &["404"]),
    ("/documents/{id}", "put", "putDocument", "Add or replace a document",
     "Writes the document to the space's API input file (`api-sources.jsonl` in the index folder, replaced atomically; over PostgreSQL, the shards' `finder_documents` table, shared by every node) and indexes it incrementally in one commit (over PostgreSQL, one per shard); writes that arrive while a commit runs are applied in arrival order and share the next one. The answer comes only after the commit that holds the write is durable. An id that a file input also uses is taken over by the API document until that input is indexed again.",
     Some("Document"), "WriteResult", &["400", "404", "409", "413"]),
    ("/documents/{id}", "get", "getDocument", "Read a document, or any source's lines",
     "Without `lines`: the stored form of a document added with PUT (sources indexed from files are not listed this way). With `?lines=40-80` (also `40-`, `40` or `all`): the lines of any indexed source, numbered as in its file or record, as a hint's line range points at them; at most 24,000 characters, `truncated` when the range held more. 404 `unknown_target` when no source has the id.",
     None, "StoredDocument|SourceLines", &["400", "404"]),
    ("/documents/{id}", "delete", "deleteDocument", "Delete a document written through the API",
     "Removes the document from the API input file (over PostgreSQL, the shards' table) and from the index in one commit (over PostgreSQL, one per shard), answered after the commit. Sources indexed from files are removed by deleting the file and running `finder index` again.",
     None, "WriteResult", &["404", "409"]),
];

/// The whole OpenAPI document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for (suffix, method, op, summary, description, request, response, errors) in SPACE_ROUTES {
        for named in [false, true] {
            let path = if named {
                format!("/v1/spaces/{{space}}{suffix}")
            } else {
                format!("/v1{suffix}")
            };
            let mut parameters = Vec::new();
            if named {
                parameters.push(json!({"name": "space", "in": "path", "required": true, "schema": {"type": "string"}, "description": "A space name given to `finder serve --index NAME=DIR`."}));
            }
            if suffix.contains("{id}") {
                parameters.push(json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}, "description": "Document id; percent-encode `/` or write it as more path segments."}));
            }
            let mut operation = json!({
                "operationId": if named { format!("{op}InSpace") } else { op.to_string() },
                "summary": summary,
                "description": if named { format!("As `{} /v1{suffix}`, in the named space.", method.to_uppercase()) } else { description.to_string() },
                "parameters": parameters,
                "responses": responses(response, errors),
            });
            if named {
                operation["x-space-variant"] = json!(true);
            }
            if let Some(req) = request {
                operation["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": schema_ref(req)}}});
            }
            let entry = paths.entry(path).or_insert_with(|| json!({}));
            entry[*method] = operation;
        }
    }
    let plain = [
        ("/", "page", "The web search page", "HTML page: search as you type, hits with hints and line ranges, an explain drawer per hit, facets, banners for degraded channels and builds in progress. Served from the binary; no external assets.", "text/html", None),
        ("/health", "health", "Liveness", "Always 200 while the process serves, however busy; lists the spaces when they are open to every request (an empty list when the server has tokens). Needs no token.", "application/json", Some("Health")),
        ("/metrics", "metrics", "Prometheus metrics", "`finder_http_requests_total{route,method,status}`, the `finder_http_request_duration_seconds` histogram per route and method, and `finder_space_sources{space}`. With tokens, only a token that grants every space may read them (403 `forbidden` otherwise).", "text/plain", None),
        ("/openapi.json", "openapi", "This document", "The OpenAPI 3.1 description of the API.", "application/json", None),
        ("/v1/spaces", "spaces", "Served spaces", "Each space the token is granted (every space when the server has no tokens), with whether it is built and how many sources it holds.", "application/json", Some("SpaceList")),
    ];
    for (path, op, summary, description, kind, schema) in plain {
        let content = match schema {
            Some(s) => json!({ kind: { "schema": schema_ref(s) } }),
            None => json!({ kind: {} }),
        };
        let mut errors = vec![];
        if path == "/metrics" || path.starts_with("/v1") {
            errors.push("401");
        }
        if path == "/metrics" {
            errors.push("403");
        }
        if path != "/health" {
            errors.push("503");
        }
        let mut responses = Map::new();
        responses.insert(
            "200".into(),
            json!({"description": "OK", "content": content}),
        );
        for status in errors {
            responses.insert(status.into(), error_response(status));
        }
        paths.insert(path.to_string(), json!({"get": {"operationId": op, "summary": summary, "description": description, "responses": responses}}));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Finder HTTP API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": format!("Hybrid retrieval over notes, documents and records. Every route under `/v1/` uses the space `default`; the same routes under `/v1/spaces/{{space}}/` use a named space (`finder serve --index NAME=DIR`, repeatable); spaces share nothing. Errors are JSON `{{code, message, details}}`. Limits: request bodies up to 1 MiB (413), queries up to {MAX_QUERY_CHARS} characters (400 `query_too_long`), 10 s per read and 120 s per write (503 `timeout`), {DEFAULT_MAX_IN_FLIGHT} requests in flight (503 `overloaded` with `Retry-After`, at once rather than queued). When the server has tokens (`--token-file`, required to listen beyond loopback), `/v1/*` and `/metrics` need `Authorization: Bearer <token>`. The token file holds one bare token (every space) or lines `TOKEN SPACE[,SPACE...]` and `TOKEN *`; a token sees only its spaces: one it is not granted answers 404 `unknown_space` exactly as a space that does not exist, and `/v1/spaces` lists only granted ones. Concurrent writes to a space are committed together; each is answered after the commit that holds it."),
        },
        "servers": [{"url": "http://127.0.0.1:7700"}],
        "security": [{}, {"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas(),
        },
    })
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn error_response(status: &str) -> Value {
    let description = match status {
        "400" => "Invalid request: bad JSON, a field out of range, a rejected setting (details name the key and range), a query too long, a refused document",
        "401" => "Missing or wrong bearer token",
        "403" => "The token does not grant every space",
        "404" => "Unknown space (or one the token is not granted), document or target",
        "409" => "The space has no index yet, or another process is writing it",
        "413" => "Request body too large",
        "503" => "The request ran past its time limit (`timeout`), too many requests are in flight (`overloaded`, with `Retry-After`), or a PostgreSQL space's shards cannot be reached (`storage_unavailable`, with `Retry-After`)",
        _ => "Error",
    };
    json!({"description": description, "content": {"application/json": {"schema": schema_ref("ErrorBody")}}})
}

fn responses(ok: &str, errors: &[&str]) -> Value {
    let mut out = Map::new();
    // `A|B`: the route answers one of several shapes (its description says when).
    let schema = match ok.split('|').collect::<Vec<_>>()[..] {
        [one] => schema_ref(one),
        ref several => {
            json!({ "oneOf": several.iter().map(|s| schema_ref(s)).collect::<Vec<_>>() })
        }
    };
    out.insert(
        "200".into(),
        json!({"description": "OK", "content": {"application/json": {"schema": schema}}}),
    );
    for status in ["401"].iter().chain(errors).chain(["503"].iter()) {
        out.insert(status.to_string(), error_response(status));
    }
    Value::Object(out)
}

/// The schemas, derived from the wire types (and the core types they hold) by utoipa.
#[derive(OpenApi)]
#[openapi(components(schemas(
    ErrorBody,
    SearchRequest,
    SearchResult,
    ContextRequest,
    ContextResult,
    RecommendRequest,
    RecommendResult,
    Document,
    WriteResult,
    StoredDocument,
    SourceLines,
    StatusResult,
    SpaceList,
    Health
)))]
struct Schemas;

fn schemas() -> Value {
    let components = Schemas::openapi().components.unwrap_or_default();
    serde_json::to_value(components.schemas).expect("schemas serialise")
}

/// Renders the document as Markdown (`docs/API.md`).
pub fn markdown(doc: &Value) -> String {
    let mut out = String::new();
    let info = &doc["info"];
    out.push_str(&format!("# {}\n\n", text(&info["title"])));
    out.push_str("<!-- Generated from /openapi.json by the finder-server test `api_md_matches_openapi`; run it with FINDER_UPDATE_DOCS=1 to refresh. -->\n\n");
    out.push_str(&format!("{}\n\n", text(&info["description"])));
    out.push_str("## Routes\n\n| method | path | what |\n|---|---|---|\n");
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    for (path, item) in &paths {
        for (method, op) in item.as_object().into_iter().flatten() {
            out.push_str(&format!(
                "| {} | `{}` | {} |\n",
                method.to_uppercase(),
                path,
                text(&op["summary"])
            ));
        }
    }
    for (path, item) in &paths {
        for (method, op) in item.as_object().into_iter().flatten() {
            if op.get("x-space-variant").is_some() {
                continue;
            }
            out.push_str(&format!(
                "\n## {} `{}`\n\n{}\n\n{}\n",
                method.to_uppercase(),
                path,
                text(&op["summary"]),
                text(&op["description"])
            ));
            if let Some(body) = op.pointer("/requestBody/content/application~1json/schema") {
                out.push_str(&format!("\nRequest body: {}\n", type_name(body)));
            }
            out.push_str("\n| status | meaning | body |\n|---|---|---|\n");
            for (status, response) in op["responses"].as_object().into_iter().flatten() {
                let body = response["content"]
                    .as_object()
                    .and_then(|c| c.values().next())
                    .and_then(|c| c.get("schema"))
                    .map_or_else(
                        || {
                            response["content"]
                                .as_object()
                                .and_then(|c| c.keys().next().cloned())
                                .unwrap_or_default()
                        },
                        type_name,
                    );
                out.push_str(&format!(
                    "| {status} | {} | {body} |\n",
                    text(&response["description"])
                ));
            }
        }
    }
    out.push_str("\n## Schemas\n");
    for (name, schema) in doc["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        out.push_str(&format!("\n### {name}\n\n"));
        properties_table(schema, &mut out);
    }
    out
}

fn properties_table(schema: &Value, out: &mut String) {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    out.push_str("| field | type | required | description |\n|---|---|---|---|\n");
    for (field, prop) in schema["properties"].as_object().into_iter().flatten() {
        let mut description = text(&prop["description"]);
        let mut bounds = Vec::new();
        for (key, label) in [
            ("minimum", "min"),
            ("maximum", "max"),
            ("maxLength", "max length"),
            ("default", "default"),
        ] {
            if let Some(v) = prop.get(key) {
                bounds.push(format!("{label} {v}"));
            }
        }
        if let Some(values) = prop["enum"].as_array() {
            bounds.push(format!(
                "one of {}",
                values
                    .iter()
                    .map(|v| format!("`{}`", text(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !bounds.is_empty() {
            if !description.is_empty() {
                description.push(' ');
            }
            description.push_str(&format!("({})", bounds.join("; ")));
        }
        let req = if required.contains(&field.as_str()) {
            "yes"
        } else {
            ""
        };
        out.push_str(&format!(
            "| `{field}` | {} | {req} | {} |\n",
            type_name(prop),
            description.replace('|', "\\|").replace('\n', " ")
        ));
    }
}

fn type_name(schema: &Value) -> String {
    // An optional reference: `oneOf` of `null` and the reference.
    if let Some(options) = schema["oneOf"].as_array() {
        let names: Vec<String> = options
            .iter()
            .filter(|o| o["type"] != "null")
            .map(type_name)
            .collect();
        return names.join(" or ");
    }
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("[{name}](#{})", name.to_lowercase());
    }
    match &schema["type"] {
        Value::String(t) if t == "array" => format!("array of {}", type_name(&schema["items"])),
        Value::String(t) if t == "object" && schema.get("properties").is_none() => {
            match schema.get("additionalProperties") {
                Some(Value::Object(_)) => {
                    format!("map of {}", type_name(&schema["additionalProperties"]))
                }
                _ => "object".to_string(),
            }
        }
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts.iter().map(text).collect::<Vec<_>>().join(" or "),
        _ => "any".to_string(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        DEFAULT_BUDGET_CHARS, DEFAULT_LIMIT, MAX_BUDGET_CHARS, MAX_LIMIT, MAX_OFFSET,
        MIN_BUDGET_CHARS,
    };
    use crate::MAX_QUERY_CHARS;

    /// The bounds written on the wire types' fields are the ones the server enforces.
    #[test]
    fn schema_bounds_are_the_enforced_limits() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        let search = &schemas["SearchRequest"]["properties"];
        assert_eq!(search["query"]["maxLength"], MAX_QUERY_CHARS);
        assert_eq!(search["limit"]["maximum"], MAX_LIMIT);
        assert_eq!(search["limit"]["default"], DEFAULT_LIMIT);
        assert_eq!(search["offset"]["maximum"], MAX_OFFSET);
        let context = &schemas["ContextRequest"]["properties"];
        assert_eq!(context["query"]["maxLength"], MAX_QUERY_CHARS);
        assert_eq!(context["limit"]["maximum"], MAX_LIMIT);
        let budget = &context["budget_chars"];
        assert_eq!(budget["minimum"], MIN_BUDGET_CHARS);
        assert_eq!(budget["maximum"], MAX_BUDGET_CHARS);
        assert_eq!(budget["default"], DEFAULT_BUDGET_CHARS);
        assert_eq!(
            schemas["RecommendRequest"]["properties"]["limit"]["maximum"],
            MAX_LIMIT
        );
    }

    /// Every type a schema refers to is in the document.
    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let text = doc.to_string();
        for piece in text.split("#/components/schemas/").skip(1) {
            let name: String = piece.chars().take_while(|c| *c != '"').collect();
            assert!(doc["components"]["schemas"][&name].is_object(), "{name}");
        }
    }
}
