//! Finder's MCP server driven by a client no one here wrote: the official Python SDK (PyPI
//! `mcp`, installed by `scripts/mcp-venv.sh`) runs `scripts/mcp_clients.py` against
//! `finder mcp` over stdio and against `finder serve` at `/mcp` over streamable HTTP, each in
//! the SDK's current protocol and in the older handshake. The script lists the tools, calls
//! each with valid and invalid arguments and checks every answer against the tool's output
//! schema; this test checks its report.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{notes, ok};

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The virtual environment's python, made (once) by the project's script.
fn python() -> String {
    let out = Command::new("bash")
        .arg(repo().join("scripts/mcp-venv.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/mcp-venv.sh");
    assert!(
        out.status.success(),
        "scripts/mcp-venv.sh failed: the Python MCP SDK is needed for this test (PyPI `mcp`)"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.lines().last().expect("the python path").to_string()
}

/// Runs the client script and returns its report, failing with the report on any failure.
fn drive(python: &str, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(repo().join("scripts/mcp_clients.py"))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/mcp_clients.py");
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "the Python MCP client found problems:\n{report}"
    );
    serde_json::from_str(&report).unwrap_or_else(|e| panic!("report is not JSON ({e}): {report}"))
}

fn assert_sessions(report: &Value, transport: &str) {
    for (mode, protocol) in [("auto", Some("2026-07-28")), ("legacy", None)] {
        let session = &report[format!("{transport}/{mode}")];
        assert_eq!(session["failures"], Value::Array(vec![]), "{report}");
        assert!(session["calls"].as_u64().unwrap() >= 15, "{report}");
        match protocol {
            Some(p) => assert_eq!(session["protocol"], p, "{report}"),
            // The handshake era: whichever revision the two agreed on before 2026.
            None => assert!(session["protocol"].as_str().unwrap() < "2026", "{report}"),
        }
    }
}

#[test]
fn the_python_sdk_uses_every_tool_over_stdio_and_http() {
    let python = python();
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let index = tmp.path().join("idx");
    let (input, index) = (input.to_str().unwrap(), index.to_str().unwrap());
    ok(&["index", input, "--index", index]);
    let finder = env!("CARGO_BIN_EXE_finder");

    // stdio: the SDK starts `finder mcp` itself, with an environment of its own choosing;
    // `env` pins the model folder so the answers do not depend on an installed model.
    let stdio =
        format!("env FINDER_MODEL_DIR=/nonexistent/finder-model {finder} mcp --index {index}");
    let report = drive(&python, &["--stdio", &stdio]);
    assert_sessions(&report, "stdio");

    // HTTP: one served process with a token; the SDK connects to its /mcp.
    let token_file = tmp.path().join("tokens");
    std::fs::write(&token_file, "mcp-client-test-token\n").unwrap();
    let mut server = Command::new(finder)
        .args([
            "serve",
            "--index",
            index,
            "--addr",
            "127.0.0.1:0",
            "--token-file",
        ])
        .arg(&token_file)
        .env("FINDER_MODEL_DIR", "/nonexistent/finder-model")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start finder serve");
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    // The rest of what it prints is read and let go, so the pipe never fills or closes.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .trim_end_matches('/')
        .to_string();
    let url = format!("{base}/mcp");
    let report = drive(
        &python,
        &["--http", &url, "--token", "mcp-client-test-token"],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_sessions(&report, "http");
    assert_eq!(
        report["http/no-token"]["failures"],
        Value::Array(vec![]),
        "{report}"
    );
}
