//! `finder mcp`: the real binary speaks MCP over stdio — handshake, tool list, a tool call
//! and an error — exactly as an agent host drives it, in raw JSON-RPC. `mcp_clients.rs`
//! drives the same through the official Python SDK.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use super::{notes, ok};

struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Session {
    fn start(index: &str) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_finder"))
            .args(["mcp", "--index", index])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start finder mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Session {
            child,
            stdin: Some(stdin),
            lines,
        }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn reply(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("finder mcp answers within a minute");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mcp_handshake_and_tool_calls_over_stdio() {
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let index = tmp.path().join("idx");
    let (input, index) = (input.to_str().unwrap(), index.to_str().unwrap());
    ok(&["index", input, "--index", index]);

    let mut s = Session::start(index);
    s.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "finder-test", "version": "1.0"},
        }}),
    );
    let init = s.reply();
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "finder");
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = s.reply();
    assert_eq!(
        list["id"], 2,
        "a notification gets no answer, so the next line is this one"
    );
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["search", "context", "get", "recommend", "status"]);
    assert_eq!(
        list["result"]["tools"][0]["inputSchema"]["required"],
        json!(["query"])
    );

    s.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "expired token", "limit": 3},
        }}),
    );
    let call = s.reply();
    assert_eq!(call["id"], 3);
    let result = &call["result"];
    assert_eq!(result["isError"], false, "{call}");
    assert_eq!(result["content"][0]["type"], "text");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("1. Tokens [1.000] tokens.md"), "{text}");
    assert!(text.contains("tokens.md:9-11:"), "{text}");
    assert_eq!(result["structuredContent"]["hits"][0]["id"], "tokens.md");

    s.send(
        json!({"jsonrpc": "2.0", "id": 33, "method": "tools/call", "params": {
            "name": "get", "arguments": {"id": "tokens.md:9-11"},
        }}),
    );
    let get = s.reply();
    let lines = &get["result"]["structuredContent"];
    assert_eq!(
        (lines["line_start"].as_u64(), lines["line_end"].as_u64()),
        (Some(9), Some(11)),
        "{get}"
    );
    let file = std::fs::read_to_string(Path::new(input).join("tokens.md")).unwrap();
    let numbered: String = file
        .lines()
        .enumerate()
        .filter(|(i, _)| (8..11).contains(i))
        .map(|(i, l)| format!("{:>5}  {l}\n", i + 1))
        .collect();
    assert_eq!(
        lines["text"],
        numbered.as_str(),
        "the lines as the file has them"
    );

    s.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "context", "arguments": {"query": "refresh token", "budget_chars": 250},
        }}),
    );
    let context = s.reply();
    let text = context["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("[1] Tokens — tokens.md L"), "{text}");
    assert!(text.chars().count() <= 250);

    s.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "token", "settings": {"lexical.k1": 9}},
        }}),
    );
    let error = s.reply();
    assert_eq!(error["id"], 5);
    assert_eq!(error["result"]["isError"], true, "{error}");
    let text = error["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("lexical.k1") && text.contains("invalid_setting"),
        "{text}"
    );

    // Closing stdin ends the session cleanly.
    drop(s.stdin.take());
    let status = s.child.wait().unwrap();
    assert!(status.success(), "finder mcp exited with {status}");
}
