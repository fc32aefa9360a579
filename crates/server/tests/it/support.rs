//! Fixtures: small note folders indexed into temporary spaces, and a helper that sends one
//! request through the router and reads the JSON answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use finder_server::{Access, App, AppRef, Limits, Space, Spaces};
use serde_json::Value;
use tower::ServiceExt;

pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Four notes about tokens, backups and deploys, with tags and a `team` extra.
pub fn notes(root: &Path) -> PathBuf {
    let dir = root.join("notes");
    write(&dir, "tokens.md", "---\ntitle: Refresh tokens\ntags: [auth, security]\nteam: identity\n---\n# Refresh tokens\n\nA refresh token lasts 30 days.\n\n## Expiry\n\nWhen the refresh token expired, the client must reauthenticate.\nThe error code is AUTH-041.\n");
    write(&dir, "backups.md", "---\ntitle: Database backups\ntags: [database, ops]\nteam: platform\n---\n# Backups\n\nNightly snapshots of the database are kept for 30 days.\n\n## Restore\n\nRestore a backup with ops/db.sh restore.\n");
    write(&dir, "deploy.md", "---\ntitle: Deploy runbook\ntags: [ops]\nteam: platform\n---\n# Deploy\n\nDeploy from main on Tuesdays. Roll back with the previous release tag.\n");
    write(&dir, "sessions.md", "---\ntitle: Session cookies\ntags: [auth]\nteam: identity\n---\n# Sessions\n\nSession cookies carry a short-lived access token; the refresh token stays on the server.\n");
    dir
}

/// Indexes `input` into `root/<name>` and returns the index folder.
pub fn index(root: &Path, name: &str, input: &Path) -> PathBuf {
    let dir = root.join(name);
    let settings = finder_index::load_settings(&dir, None).unwrap();
    finder_index::index_inputs(&dir, &[input.to_path_buf()], &settings, &mut |_| {}).unwrap();
    dir
}

/// An app over the given `(name, dir)` spaces; `token`, when given, grants every space.
pub fn app_with(spaces: &[(&str, &Path)], token: Option<&str>, limits: Limits) -> AppRef {
    let access = token.map_or_else(Access::open, Access::token);
    app_with_access(spaces, access, limits)
}

/// An app over the given `(name, dir)` spaces with `access`.
pub fn app_with_access(spaces: &[(&str, &Path)], access: Access, limits: Limits) -> AppRef {
    let spaces = spaces
        .iter()
        .map(|(name, dir)| Space::new(name, dir, None).unwrap())
        .collect();
    App::new(Spaces::new(spaces).unwrap(), access, limits)
}

/// The notes fixture served as the `default` space.
pub fn fixture() -> (tempfile::TempDir, AppRef) {
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let dir = index(tmp.path(), "idx", &input);
    let app = app_with(&[("default", &dir)], None, Limits::default());
    (tmp, app)
}

pub fn short_limits() -> Limits {
    Limits {
        max_body_bytes: 4096,
        request_timeout: Duration::from_secs(10),
        write_timeout: Duration::from_secs(60),
        ..Limits::default()
    }
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

/// Sends one request through the router.
pub async fn send(
    app: &AppRef,
    method: &str,
    path: &str,
    body: Option<String>,
    token: Option<&str>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        request = request.header("authorization", format!("Bearer {t}"));
    }
    let request = match body {
        Some(b) => request
            .header("content-type", "application/json")
            .body(Body::from(b)),
        None => request.body(Body::empty()),
    }
    .unwrap();
    let response = finder_server::router(app.clone())
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        headers,
        text: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

/// Sends a JSON body and expects `expected`; returns the JSON answer.
pub async fn call(app: &AppRef, method: &str, path: &str, body: Value, expected: u16) -> Value {
    let body = if body.is_null() {
        None
    } else {
        Some(body.to_string())
    };
    let answer = send(app, method, path, body, None).await;
    assert_eq!(
        answer.status.as_u16(),
        expected,
        "{method} {path}: {}",
        answer.text
    );
    answer.json()
}

pub fn ids(result: &Value) -> Vec<String> {
    result["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

/// The real server on a loopback port, until `stop`.
pub struct Running {
    pub addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Starts `finder_server::serve` for `app` on `127.0.0.1:0`.
pub async fn start(app: AppRef) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(finder_server::serve(listener, app, async {
        let _ = stopped.await;
    }));
    Running { addr, stop, task }
}

impl Running {
    /// Asks the server to stop and waits for it (at most ten seconds: connections still
    /// open are not waited for longer).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
    }
}

pub struct McpReply {
    pub status: u16,
    pub body: Value,
}

/// Posts one JSON-RPC message to `/mcp` as a client of the 2025-06-18 revision would.
pub async fn mcp_post(app: &AppRef, message: Value, headers: &[(&str, &str)]) -> McpReply {
    let mut request = Request::builder().method("POST").uri("/mcp");
    if !headers.iter().any(|(k, _)| *k == "host") {
        request = request.header("host", "127.0.0.1:7700");
    }
    let mut request = request
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = finder_server::router(app.clone())
        .oneshot(request.body(Body::from(message.to_string())).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&bytes).to_string();
    // A JSON answer, or one SSE event carrying it.
    let json_text = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map_or(text.as_str(), str::trim);
    McpReply {
        status,
        body: serde_json::from_str(json_text).unwrap_or(Value::String(text.clone())),
    }
}
