//! The OpenAPI 3.1 document of the HTTP API (served at `/openapi.json`), written by hand
//! beside the wire types, and its Markdown rendering (`docs/API.md`).
//!
//! A test checks that every route of the router appears here and that `docs/API.md` is the
//! rendering of this document, so the two cannot drift apart silently.

use serde_json::{json, Map, Value};

use crate::wire::{
    DEFAULT_BUDGET_CHARS, DEFAULT_LIMIT, MAX_BUDGET_CHARS, MAX_LIMIT, MAX_OFFSET, MIN_BUDGET_CHARS,
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
     "What the space holds (sources, fragments, segments, size, inputs, index-time settings, last run), whether it is built, and build progress while a layer (vectors) is still being built.",
     None, "StatusResult", &["404"]),
    ("/documents/{id}", "put", "putDocument", "Add or replace a document",
     "Writes the document to the space's API input file (`api-sources.jsonl` in the index folder, replaced atomically) and indexes it incrementally in one commit; writes that arrive while a commit runs are applied in arrival order and share the next one. The answer comes only after the commit that holds the write is durable. An id that a file input also uses is taken over by the API document until that input is indexed again.",
     Some("Document"), "WriteResult", &["400", "404", "409", "413"]),
    ("/documents/{id}", "get", "getDocument", "Read a document written through the API",
     "The stored form of a document added with PUT. Sources indexed from files are not listed here.",
     None, "StoredDocument", &["404"]),
    ("/documents/{id}", "delete", "deleteDocument", "Delete a document written through the API",
     "Removes the document from the API input file and from the index in one commit, answered after the commit. Sources indexed from files are removed by deleting the file and running `finder index` again.",
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
        "503" => "The request ran past its time limit (`timeout`), or too many requests are in flight (`overloaded`, with `Retry-After`)",
        _ => "Error",
    };
    json!({"description": description, "content": {"application/json": {"schema": schema_ref("Error")}}})
}

fn responses(ok: &str, errors: &[&str]) -> Value {
    let mut out = Map::new();
    out.insert(
        "200".into(),
        json!({"description": "OK", "content": {"application/json": {"schema": schema_ref(ok)}}}),
    );
    for status in ["401"].iter().chain(errors).chain(["503"].iter()) {
        out.insert(status.to_string(), error_response(status));
    }
    Value::Object(out)
}

fn obj(required: &[&str], properties: Value) -> Value {
    json!({ "type": "object", "required": required, "properties": properties })
}

fn schemas() -> Value {
    let settings = json!({"type": "object", "additionalProperties": true, "description": "Query-time setting overrides by dotted key, e.g. `{\"lexical.k1\": 0.9, \"lexical.trigram\": \"on\"}`. Each value is checked against its range."});
    let limit =
        json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT});
    json!({
        "Error": obj(&["code", "message", "details"], json!({
            "code": {"type": "string", "description": "Stable machine-readable code: invalid_request, invalid_setting, index_time_setting, query_too_long, payload_too_large, unauthorized, not_found, method_not_allowed, unknown_space, index_not_built, document_not_found, unknown_target, invalid_document, index_busy, timeout, overloaded, forbidden, internal."},
            "message": {"type": "string", "description": "What went wrong and what to do, for people."},
            "details": {"type": "object", "description": "Structured context: for settings `key`, `value`, `range` or `suggestion`; for limits the limit; for spaces the space."},
        })),
        "SearchRequest": obj(&["query"], json!({
            "query": {"type": "string", "maxLength": MAX_QUERY_CHARS},
            "limit": limit,
            "offset": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "default": 0},
            "settings": settings,
            "vector": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 4096, "description": "The query's vector, used instead of embedding `query` (required by the `precomputed` embedding backend; must come from the model the index's vectors were built with)."},
            "filters": {"type": "object", "additionalProperties": {"type": "string"}, "description": "`extras` equality filters: case-insensitive, all must hold. Applied after rerank; the page is not refilled and `diagnostics.refine.filtered_out` counts what they removed."},
            "prefilter": {"type": "boolean", "default": false, "description": "Apply `filters` inside every channel before ranking, so the page stays full."},
            "scope": {"type": "array", "items": {"type": "string"}, "maxItems": 10000, "description": "Only these source ids take part; every channel is restricted before ranking."},
            "user": {"type": "string", "description": "Personalise for this user (profiles from `refine.profiles`)."},
            "sort": {"type": "string", "enum": ["score", "date"], "default": "score"},
            "min_score": {"type": "number", "minimum": 0, "maximum": 1, "description": "Drop hits whose `relevance` is below this."},
        })),
        "SearchResult": obj(&["space", "query", "offset", "limit", "hits", "facets", "diagnostics"], json!({
            "space": {"type": "string"}, "query": {"type": "string"},
            "offset": {"type": "integer"}, "limit": {"type": "integer"},
            "hits": {"type": "array", "items": schema_ref("Hit")},
            "facets": schema_ref("Facets"),
            "diagnostics": schema_ref("Diagnostics"),
        })),
        "Hit": obj(&["rank", "id", "score", "envelope", "summary", "hints", "explain"], json!({
            "rank": {"type": "integer", "description": "One-based position in the whole ranking (offset included)."},
            "id": {"type": "string", "description": "Source id: relative path for files, record id for records."},
            "score": {"type": "number", "description": "Relative to the best hit of the query (top is 1.0)."},
            "relevance": {"type": "number", "minimum": 0, "maximum": 1, "description": "Absolute relevance that means the same across queries: the best passage's reciprocal-rank sum over the largest the lists that ran could give."},
            "envelope": schema_ref("Envelope"),
            "summary": {"type": "string"},
            "hints": {"type": "array", "items": schema_ref("Hint")},
            "explain": schema_ref("Explain"),
        })),
        "Envelope": obj(&["title", "path"], json!({
            "title": {"type": "string"}, "path": {"type": "string"},
            "date": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extras": {"type": "object", "additionalProperties": {"type": "string"}},
        })),
        "Hint": obj(&["preview", "extent", "score"], json!({
            "preview": {"type": "string", "description": "A window of the passage around the query terms."},
            "extent": schema_ref("Extent"),
            "score": {"type": "number", "description": "The passage's fused score before rollup."},
        })),
        "Extent": obj(&["byte_start", "byte_end", "line_start", "line_end"], json!({
            "byte_start": {"type": "integer"}, "byte_end": {"type": "integer", "description": "Exclusive."},
            "line_start": {"type": "integer", "description": "One-based."}, "line_end": {"type": "integer", "description": "Inclusive."},
        })),
        "Explain": obj(&["raw", "normalized_by", "parts", "other_fragments"], json!({
            "raw": {"type": "number", "description": "Sum of the weighted parts."},
            "normalized_by": {"type": "number", "description": "Divisor that made the top hit 1.0."},
            "parts": {"type": "array", "items": schema_ref("ExplainPart")},
            "other_fragments": {"type": "integer", "description": "Matching passages beyond the rollup weights."},
            "refinements": {"type": "array", "items": {"type": "object", "required": ["stage"], "properties": {"stage": {"type": "string", "enum": ["recency", "date_sort", "collapse", "rerank", "plugin_merge", "mmr", "personalization"]}}}, "description": "What each refinement stage did to the hit, in order (recency factor, absorbed duplicates, rerank delta, frozen head, MMR similarity, personalization blend)."},
        })),
        "ExplainPart": obj(&["fragment", "weight", "seed", "lists"], json!({
            "fragment": {"type": "integer", "description": "Passage ordinal within the source."},
            "weight": {"type": "number", "description": "Rollup weight applied."},
            "seed": {"type": "number", "description": "Fused (RRF) score of the passage."},
            "lists": {"type": "array", "items": schema_ref("ListRank")},
        })),
        "ListRank": obj(&["channel", "rank", "score", "share"], json!({
            "channel": {"type": "string", "enum": ["lexical", "trigram", "vector"]},
            "rank": {"type": "integer", "description": "One-based rank in the channel's list."},
            "score": {"type": "number", "description": "The channel's own score (BM25, cosine)."},
            "share": {"type": "number", "description": "1 / (rrf_k + rank)."},
        })),
        "Diagnostics": obj(&["channels", "stages", "total_ms", "fused_fragments", "ranked_sources"], json!({
            "channels": {"type": "array", "items": schema_ref("ChannelReport")},
            "stages": {"type": "array", "items": obj(&["stage", "ms"], json!({"stage": {"type": "string"}, "ms": {"type": "number"}}))},
            "total_ms": {"type": "number"},
            "fused_fragments": {"type": "integer"},
            "ranked_sources": {"type": "integer"},
            "refine": {"type": "object", "description": "What the refinement stages removed (`filtered_out`, `prefiltered`, `collapsed`, `below_min_score`), `personalization`, and `degraded` stages with their reasons."},
        })),
        "ChannelReport": obj(&["channel", "status", "hits", "ms"], json!({
            "channel": {"type": "string"},
            "status": {"type": "string", "enum": ["ran", "skipped", "degraded"]},
            "reason": {"type": "string"},
            "hits": {"type": "integer"}, "ms": {"type": "number"},
        })),
        "Facets": obj(&["tags", "extras"], json!({
            "tags": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Returned hits per tag."},
            "extras": {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}}, "description": "Returned hits per value, per extras key."},
        })),
        "ContextRequest": obj(&["query"], json!({
            "query": {"type": "string", "maxLength": MAX_QUERY_CHARS},
            "budget_chars": {"type": "integer", "minimum": MIN_BUDGET_CHARS, "maximum": MAX_BUDGET_CHARS, "default": DEFAULT_BUDGET_CHARS},
            "budget_tokens": {"type": "integer", "description": "Instead of budget_chars: about 4 characters per token."},
            "limit": limit,
            "settings": settings,
        })),
        "ContextResult": obj(&["space", "query", "budget_chars", "used_chars", "pieces", "omitted", "text", "diagnostics"], json!({
            "space": {"type": "string"}, "query": {"type": "string"},
            "budget_chars": {"type": "integer"},
            "used_chars": {"type": "integer", "description": "Characters of `text`; never above the budget."},
            "pieces": {"type": "array", "items": schema_ref("ContextPiece")},
            "omitted": {"type": "integer", "description": "Matching passages that did not fit."},
            "text": {"type": "string", "description": "The pieces rendered for a prompt, each headed `[n] title — id Lx-y`."},
            "diagnostics": schema_ref("Diagnostics"),
        })),
        "ContextPiece": obj(&["n", "source_id", "title", "path", "extent", "score", "source_rank", "text", "truncated"], json!({
            "n": {"type": "integer", "description": "Citation number in `text`."},
            "source_id": {"type": "string"}, "title": {"type": "string"}, "path": {"type": "string"},
            "extent": schema_ref("Extent"),
            "score": {"type": "number"}, "source_rank": {"type": "integer"},
            "text": {"type": "string"}, "truncated": {"type": "boolean"},
        })),
        "RecommendRequest": obj(&["target"], json!({
            "target": {"type": "string", "description": "A source id."},
            "limit": limit,
            "settings": settings,
        })),
        "RecommendResult": obj(&["space", "target", "basis", "query", "hits", "diagnostics"], json!({
            "space": {"type": "string"}, "target": {"type": "string"},
            "basis": {"type": "string", "description": "What found the neighbours, joined by `+`: channels that returned hits (`lexical`, `vector`, …) and `graph` when the boost reached anything."},
            "query": {"type": "string", "description": "The text the target turned into."},
            "hits": {"type": "array", "items": schema_ref("Hit")},
            "diagnostics": schema_ref("Diagnostics"),
        })),
        "Document": obj(&["text"], json!({
            "title": {"type": "string", "default": ""},
            "text": {"type": "string"},
            "date": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "summary": {"type": "string", "description": "Derived from the text when absent."},
            "extras": {"type": "object", "additionalProperties": {"type": "string"}},
        })),
        "WriteResult": obj(&["space", "id", "result", "sources", "committed_at"], json!({
            "space": {"type": "string"}, "id": {"type": "string"},
            "result": {"type": "string", "enum": ["added", "updated", "unchanged", "deleted"]},
            "sources": {"type": "integer", "description": "Sources in the space after the write."},
            "committed_at": {"type": "integer", "description": "Unix seconds of the commit holding the write."},
        })),
        "StoredDocument": obj(&["space", "id", "document"], json!({
            "space": {"type": "string"}, "id": {"type": "string"}, "document": schema_ref("Document"),
        })),
        "StatusResult": obj(&["space", "built", "building", "api_documents", "index"], json!({
            "space": {"type": "string"},
            "built": {"type": "boolean"},
            "building": {"type": "boolean", "description": "A layer (vectors) is still being built; lexical search answers meanwhile."},
            "progress": obj(&["done", "total"], json!({"done": {"type": "integer"}, "total": {"type": "integer"}})),
            "api_documents": {"type": "integer", "description": "Documents written through the API."},
            "index": {"type": ["object", "null"], "description": "What `finder status --json` shows; null before the first build."},
        })),
        "SpaceList": obj(&["spaces"], json!({
            "spaces": {"type": "array", "items": obj(&["name", "built", "sources"], json!({
                "name": {"type": "string"}, "built": {"type": "boolean"}, "sources": {"type": "integer"},
            }))},
        })),
        "Health": obj(&["status", "version", "spaces"], json!({
            "status": {"type": "string", "enum": ["ok"]},
            "version": {"type": "string"},
            "spaces": {"type": "array", "items": {"type": "string"}},
        })),
    })
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
            description.replace('|', "\\|")
        ));
    }
}

fn type_name(schema: &Value) -> String {
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
