//! MCP at `/mcp` in process (streamable HTTP, raw JSON-RPC): tools with output schemas, the
//! token and its spaces, the `Origin` and `Host` guards, and errors a model can act on. The
//! real-client tests (the Python SDK over stdio and HTTP) are in finder-cli's tests.

use finder_server::{Access, AppRef, Grants, Limits};
use serde_json::{json, Value};

use crate::support::{app_with, app_with_access, index, mcp_post as post, notes};

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

fn fixture(token: Option<&str>) -> (tempfile::TempDir, AppRef) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = index(tmp.path(), "idx", &notes(tmp.path()));
    let app = app_with(&[("default", &dir)], token, Limits::default());
    (tmp, app)
}

#[tokio::test]
async fn tools_list_with_schemas_and_answer_in_both_forms() {
    let (_tmp, app) = fixture(None);
    let init = post(
        &app,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        &[],
    )
    .await;
    assert_eq!(init.status, 200, "{}", init.body);
    assert_eq!(init.body["result"]["serverInfo"]["name"], "finder");

    let list = post(
        &app,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        &[],
    )
    .await;
    let tools = list.body["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search", "context", "get", "recommend", "status"]);
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
    }

    let search = post(
        &app,
        call(
            3,
            "search",
            json!({"query": "expired refresh token", "limit": 2}),
        ),
        &[],
    )
    .await;
    let result = &search.body["result"];
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("1. Refresh tokens [1.000] tokens.md"),
        "{text}"
    );
    let hint = &result["structuredContent"]["hits"][0]["hints"][0];
    let at = hint["at"].as_str().unwrap();
    assert!(at.starts_with("tokens.md:"), "{hint}");
    assert!(result["structuredContent"]["hits"][0]
        .get("explain")
        .is_none());

    // The hint's `at` is what `get` reads: its lines, numbered as in the file.
    let get = post(&app, call(4, "get", json!({"id": at})), &[]).await;
    let lines = &get.body["result"]["structuredContent"];
    assert_eq!(lines["line_start"], hint["line_start"], "{lines}");
    let text = lines["text"].as_str().unwrap();
    assert!(text.contains("the refresh token expired"), "{text}");
    let first = format!("{:>5}  ", hint["line_start"].as_u64().unwrap());
    assert!(text.starts_with(&first), "{text}");

    let ids = post(
        &app,
        call(5, "search", json!({"query": "token", "detail": "ids"})),
        &[],
    )
    .await;
    let hit = &ids.body["result"]["structuredContent"]["hits"][0];
    assert!(
        hit.get("hints").is_none() && hit.get("summary").is_none(),
        "{hit}"
    );
    let full = post(
        &app,
        call(6, "search", json!({"query": "token", "detail": "full"})),
        &[],
    )
    .await;
    assert!(full.body["result"]["structuredContent"]["diagnostics"].is_object());
    assert!(full.body["result"]["structuredContent"]["hits"][0]["explain"].is_object());

    let narrowed = post(
        &app,
        call(
            7,
            "search",
            json!({"query": "token", "extras": {"team": "platform"}}),
        ),
        &[],
    )
    .await;
    for hit in narrowed.body["result"]["structuredContent"]["hits"]
        .as_array()
        .unwrap()
    {
        assert_ne!(hit["id"], "tokens.md", "{hit}");
    }

    let ops = post(
        &app,
        call(
            9,
            "search",
            json!({"query": "release snapshots", "tags": ["OPS"], "path_prefix": "d"}),
        ),
        &[],
    )
    .await;
    let hits = &ops.body["result"]["structuredContent"]["hits"];
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
    assert_eq!(hits[0]["id"], "deploy.md", "{hits}");

    let status = post(&app, call(8, "status", json!({})), &[]).await;
    let space = &status.body["result"]["structuredContent"]["spaces"][0];
    assert_eq!(space["sources"], 4, "{space}");
}

#[tokio::test]
async fn mistakes_answer_what_to_change() {
    let (_tmp, app) = fixture(None);
    for (arguments, wanted) in [
        (
            json!({"query": "x", "settings": {"lexical.b": 2}}),
            "lexical.b",
        ),
        (json!({"query": "x", "space": "nope"}), "unknown_space"),
        (json!({"query": "x", "limit": 0}), "limit"),
        (json!({"quer": "x"}), "unknown field `quer`"),
        (json!({"query": "x", "date_to": "soon"}), "date_to"),
    ] {
        let r = post(&app, call(1, "search", arguments.clone()), &[]).await;
        let result = &r.body["result"];
        assert_eq!(result["isError"], true, "{arguments}: {}", r.body);
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(wanted), "{arguments}: {text}");
    }
    let r = post(
        &app,
        call(2, "get", json!({"id": "tokens.md", "lines": "80-40"})),
        &[],
    )
    .await;
    assert!(r.body["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("ends before it starts"));
    let r = post(&app, call(3, "get", json!({"id": "nowhere.md"})), &[]).await;
    assert!(r.body["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("unknown_target"));
    let unknown = post(&app, call(4, "delete_everything", json!({})), &[]).await;
    assert_eq!(unknown.body["error"]["code"], -32602, "{}", unknown.body);
}

#[tokio::test]
async fn tokens_spaces_and_origins_guard_mcp_as_they_guard_the_api() {
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let alpha = index(tmp.path(), "alpha", &input);
    let beta = index(tmp.path(), "beta", &input);
    let access = Access::open()
        .with("tok-alpha", Grants::spaces(["alpha"]))
        .with("tok-all", Grants::All);
    let app = app_with_access(
        &[("alpha", &alpha), ("beta", &beta)],
        access,
        Limits::default(),
    );
    let search = |space: &str| call(1, "search", json!({"query": "token", "space": space}));

    let none = post(&app, search("alpha"), &[]).await;
    assert_eq!(none.status, 401, "{}", none.body);
    let own = post(
        &app,
        search("alpha"),
        &[("authorization", "Bearer tok-alpha")],
    )
    .await;
    assert_eq!(own.body["result"]["isError"], false, "{}", own.body);
    // A space the token is not granted reads exactly as one that does not exist.
    let other = post(
        &app,
        search("beta"),
        &[("authorization", "Bearer tok-alpha")],
    )
    .await;
    let text = other.body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("unknown_space"), "{text}");
    let status = post(
        &app,
        call(2, "status", json!({})),
        &[("authorization", "Bearer tok-alpha")],
    )
    .await;
    assert_eq!(
        status.body["result"]["structuredContent"]["spaces"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let all = post(&app, search("beta"), &[("authorization", "Bearer tok-all")]).await;
    assert_eq!(all.body["result"]["isError"], false, "{}", all.body);

    // A page on another origin may not call it, even with a token.
    let page = post(
        &app,
        search("alpha"),
        &[
            ("authorization", "Bearer tok-all"),
            ("origin", "https://evil.example"),
        ],
    )
    .await;
    assert_eq!(page.status, 403, "{}", page.body);
    let local = post(
        &app,
        search("alpha"),
        &[
            ("authorization", "Bearer tok-all"),
            ("origin", "http://127.0.0.1:7700"),
        ],
    )
    .await;
    assert_eq!(local.status, 200, "{}", local.body);

    // Without tokens the Host must be loopback: a rebound DNS name is refused.
    let (_tmp, open) = fixture(None);
    let rebound = post(
        &open,
        search("default"),
        &[("host", "attacker.example:7700")],
    )
    .await;
    assert!(rebound.status >= 400, "{}", rebound.body);
}
