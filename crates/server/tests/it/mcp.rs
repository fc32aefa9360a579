//! The MCP session in process: handshake, tool list, calls and errors.

use finder_server::{McpServer, Space, Spaces};
use serde_json::{json, Value};

use crate::support::{index, notes};

fn server() -> (tempfile::TempDir, McpServer) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = index(tmp.path(), "idx", &notes(tmp.path()));
    let spaces = Spaces::new(vec![Space::new("default", &dir, None).unwrap()]).unwrap();
    (tmp, McpServer::new(spaces))
}

fn ask(server: &McpServer, message: Value) -> Value {
    let reply = server.handle_line(&message.to_string()).expect("a reply");
    serde_json::from_str(&reply).unwrap()
}

#[test]
fn handshake_lists_tools_and_negotiates_the_version() {
    let (_tmp, s) = server();
    let init = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
    );
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    assert_eq!(init["result"]["serverInfo"]["name"], "finder");
    let newer = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2099-01-01"}}),
    );
    assert_eq!(newer["result"]["protocolVersion"], "2025-06-18");
    assert!(s
        .handle_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .is_none());

    let list = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    );
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search", "context", "recommend"]);
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object");
        assert!(t["description"].as_str().unwrap().len() > 20);
    }
}

#[test]
fn tools_answer_with_text_and_structured_content() {
    let (_tmp, s) = server();
    let r = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "expired refresh token", "limit": 2}}}),
    );
    let result = &r["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(result["content"][0]["type"], "text");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("1. Refresh tokens [1.000] id: tokens.md"),
        "{text}"
    );
    assert_eq!(result["structuredContent"]["hits"][0]["id"], "tokens.md");

    let c = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "context", "arguments": {"query": "refresh token", "budget_chars": 300}}}),
    );
    let text = c["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("[1] Refresh tokens — tokens.md L"),
        "{text}"
    );
    assert!(text.chars().count() <= 300);

    let rec = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "recommend", "arguments": {"target": "tokens.md"}}}),
    );
    assert!(rec["result"]["structuredContent"]["basis"]
        .as_str()
        .unwrap()
        .starts_with("lexical"));
}

#[test]
fn errors_are_json_rpc_errors() {
    let (_tmp, s) = server();
    let bad = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "x", "settings": {"lexical.b": 2}}}}),
    );
    assert_eq!(bad["error"]["code"], -32602);
    assert_eq!(bad["error"]["data"]["code"], "invalid_setting");
    assert_eq!(bad["error"]["data"]["details"]["range"], "0–1");
    let unknown = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "delete_everything"}}),
    );
    assert_eq!(unknown["error"]["code"], -32602);
    let space = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "x", "space": "nope"}}}),
    );
    assert_eq!(space["error"]["data"]["code"], "unknown_space");
    let method = ask(
        &s,
        json!({"jsonrpc": "2.0", "id": 4, "method": "resources/list"}),
    );
    assert_eq!(method["error"]["code"], -32601);
    let parse: Value = serde_json::from_str(&s.handle_line("{oops").unwrap()).unwrap();
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
}
