//! Error shapes: every failure answers `{code, message, details}` with the right status.

use std::time::Duration;

use finder_server::Limits;
use serde_json::{json, Value};

use crate::support::{app_with, call, fixture, index, notes, send, short_limits};

fn assert_shape(body: &Value) {
    assert!(body["code"].is_string(), "{body}");
    assert!(body["message"].is_string(), "{body}");
    assert!(body["details"].is_object(), "{body}");
}

#[tokio::test]
async fn a_bad_setting_names_the_key_and_its_range() {
    let (_tmp, app) = fixture();
    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "settings": {"lexical.k1": 7}}),
        400,
    )
    .await;
    assert_shape(&e);
    assert_eq!(e["code"], "invalid_setting");
    assert_eq!(e["details"]["key"], "lexical.k1");
    assert_eq!(e["details"]["reason"], "out_of_range");
    assert_eq!(e["details"]["range"], "0–3");
    assert!(e["message"].as_str().unwrap().contains("lexical.k1"), "{e}");

    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "settings": {"lexical.k": 1}}),
        400,
    )
    .await;
    assert_eq!(e["details"]["reason"], "unknown_key");
    assert_eq!(e["details"]["suggestion"], "lexical.k1");

    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "settings": {"index.trigrams": false}}),
        400,
    )
    .await;
    assert_eq!(e["code"], "index_time_setting");
    assert_eq!(e["details"]["key"], "index.trigrams");

    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "settings": {"lexical.k1": null}}),
        400,
    )
    .await;
    assert_eq!(e["details"]["field"], "lexical.k1");
}

#[tokio::test]
async fn malformed_bodies_and_out_of_range_fields_are_400() {
    let (_tmp, app) = fixture();
    let a = send(&app, "POST", "/v1/search", Some("{not json".into()), None).await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["code"], "invalid_request");
    let e = call(&app, "POST", "/v1/search", json!({"q": "token"}), 400).await;
    assert!(
        e["message"].as_str().unwrap().contains("unknown field `q`"),
        "{e}"
    );
    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "limit": 1000}),
        400,
    )
    .await;
    assert_eq!(e["details"]["field"], "limit");
    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "vector": []}),
        400,
    )
    .await;
    assert_eq!(e["details"]["field"], "vector");
    // A query vector the index cannot use costs the vector channel, never the answer.
    let r = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "vector": [0.5, 0.5]}),
        200,
    )
    .await;
    assert!(!r["hits"].as_array().unwrap().is_empty(), "{r:#}");
    let e = call(
        &app,
        "POST",
        "/v1/context",
        json!({"query": "token", "budget_chars": 10}),
        400,
    )
    .await;
    assert_eq!(e["details"]["field"], "budget_chars");
}

#[tokio::test]
async fn long_queries_and_large_bodies_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = index(tmp.path(), "idx", &notes(tmp.path()));
    let app = app_with(&[("default", &dir)], None, short_limits());
    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "word ".repeat(401)}),
        400,
    )
    .await;
    assert_shape(&e);
    assert_eq!(e["code"], "query_too_long");
    assert_eq!(e["details"]["max"], finder_server::MAX_QUERY_CHARS);

    let big = json!({"query": "x", "settings": {"pad": "y".repeat(5000)}}).to_string();
    let a = send(&app, "POST", "/v1/search", Some(big), None).await;
    assert_eq!(a.status, 413, "{}", a.text);
    assert_eq!(a.json()["code"], "payload_too_large");
    assert_eq!(a.json()["details"]["limit_bytes"], 4096);
}

#[tokio::test]
async fn unknown_spaces_routes_and_methods() {
    let (_tmp, app) = fixture();
    let e = call(
        &app,
        "POST",
        "/v1/spaces/nope/search",
        json!({"query": "token"}),
        404,
    )
    .await;
    assert_shape(&e);
    assert_eq!(e["code"], "unknown_space");
    assert_eq!(e["details"]["space"], "nope");
    assert!(e["message"].as_str().unwrap().contains("served: default"));

    let e = call(&app, "GET", "/v1/nothing", Value::Null, 404).await;
    assert_eq!(e["code"], "not_found");
    let e = call(&app, "GET", "/v1/search", Value::Null, 405).await;
    assert_eq!(e["code"], "method_not_allowed");
}

#[tokio::test]
async fn a_token_guards_the_api_and_metrics_but_not_health_or_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = index(tmp.path(), "idx", &notes(tmp.path()));
    let app = app_with(&[("default", &dir)], Some("s3cret"), Limits::default());
    let body = Some(json!({"query": "token"}).to_string());

    let missing = send(&app, "POST", "/v1/search", body.clone(), None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.json()["code"], "unauthorized");
    assert!(missing.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    assert_eq!(
        send(&app, "POST", "/v1/search", body.clone(), Some("wrong"))
            .await
            .status,
        401
    );
    assert_eq!(
        send(&app, "POST", "/v1/search", body.clone(), Some("s3cret"))
            .await
            .status,
        200
    );
    assert_eq!(send(&app, "GET", "/metrics", None, None).await.status, 401);
    assert_eq!(
        send(&app, "GET", "/metrics", None, Some("s3cret"))
            .await
            .status,
        200
    );
    assert_eq!(send(&app, "GET", "/health", None, None).await.status, 200);
    assert_eq!(send(&app, "GET", "/", None, None).await.status, 200);
    assert_eq!(
        send(&app, "GET", "/openapi.json", None, None).await.status,
        200
    );
}

#[tokio::test]
async fn a_space_without_an_index_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let app = app_with(
        &[("default", &tmp.path().join("empty"))],
        None,
        Limits::default(),
    );
    let e = call(&app, "POST", "/v1/search", json!({"query": "token"}), 409).await;
    assert_eq!(e["code"], "index_not_built");
    let s = call(&app, "GET", "/v1/status", Value::Null, 200).await;
    assert_eq!(s["built"], false);
    assert_eq!(s["index"], Value::Null);
}

#[tokio::test]
async fn a_request_past_its_time_limit_is_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = index(tmp.path(), "idx", &notes(tmp.path()));
    // An index that takes longer to open than the request may last.
    let slow: finder_server::Opener = std::sync::Arc::new(|dir, settings| {
        std::thread::sleep(Duration::from_millis(400));
        finder_store::Store::open(dir, settings)
    });
    let space = finder_server::Space::new("default", &dir, None)
        .unwrap()
        .with_opener(slow);
    let limits = Limits {
        request_timeout: Duration::from_millis(50),
        ..Limits::default()
    };
    let app = finder_server::App::new(
        finder_server::Spaces::new(vec![space]).unwrap(),
        finder_server::Access::open(),
        limits,
    );
    let e = call(&app, "POST", "/v1/search", json!({"query": "token"}), 503).await;
    assert_eq!(e["code"], "timeout");
    assert_eq!(e["details"]["limit_ms"], 50);
}

#[test]
fn binding_beyond_loopback_needs_a_token() {
    assert!(finder_server::check_bind("127.0.0.1:0", false).is_ok());
    assert!(finder_server::check_bind("[::1]:0", false).is_ok());
    let e = finder_server::check_bind("0.0.0.0:7700", false).unwrap_err();
    assert!(e.to_string().contains("--token-file"), "{e}");
    assert!(finder_server::check_bind("0.0.0.0:7700", true).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_in_flight_limit_requests_get_503_with_retry_after() {
    use std::sync::{Arc, Condvar, Mutex};
    let tmp = tempfile::tempdir().unwrap();
    let dir = index(tmp.path(), "idx", &notes(tmp.path()));
    // An index that opens only when the test says so, counting who waits for it.
    let gate = Arc::new((Mutex::new((false, 0usize)), Condvar::new()));
    let g = gate.clone();
    let held: finder_server::Opener = Arc::new(move |dir, settings| {
        let (lock, cv) = &*g;
        let mut state = lock.lock().unwrap();
        state.1 += 1;
        cv.notify_all();
        while !state.0 {
            state = cv.wait(state).unwrap();
        }
        drop(state);
        finder_store::Store::open(dir, settings)
    });
    let space = finder_server::Space::new("default", &dir, None)
        .unwrap()
        .with_opener(held);
    let limits = Limits {
        max_in_flight: 1,
        ..Limits::default()
    };
    let app = finder_server::App::new(
        finder_server::Spaces::new(vec![space]).unwrap(),
        finder_server::Access::open(),
        limits,
    );
    let body = json!({"query": "token"}).to_string();
    let first = tokio::spawn({
        let (app, body) = (app.clone(), body.clone());
        async move { send(&app, "POST", "/v1/search", Some(body), None).await }
    });
    // Wait until the first request is inside the index open.
    {
        let gate = gate.clone();
        tokio::task::spawn_blocking(move || {
            let (lock, cv) = &*gate;
            let mut state = lock.lock().unwrap();
            while state.1 == 0 {
                state = cv.wait(state).unwrap();
            }
        })
        .await
        .unwrap();
    }
    let refused = send(&app, "POST", "/v1/search", Some(body.clone()), None).await;
    assert_eq!(refused.status, 503, "{}", refused.text);
    let e = refused.json();
    assert_shape(&e);
    assert_eq!(e["code"], "overloaded");
    assert_eq!(e["details"]["limit_in_flight"], 1);
    assert_eq!(e["details"]["retry"], true);
    assert_eq!(refused.headers["retry-after"], "1");
    // A liveness probe is never refused.
    assert_eq!(send(&app, "GET", "/health", None, None).await.status, 200);

    {
        let (lock, cv) = &*gate;
        lock.lock().unwrap().0 = true;
        cv.notify_all();
    }
    assert_eq!(first.await.unwrap().status, 200);
    // The slot is free again.
    let again = send(&app, "POST", "/v1/search", Some(body), None).await;
    assert_eq!(again.status, 200, "{}", again.text);
}

#[tokio::test]
async fn a_huge_query_or_body_is_refused_under_the_default_limits() {
    let (_tmp, app) = fixture();
    // Far longer than a query may be, yet within the body limit: the query check answers.
    let e = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "q".repeat(500_000)}),
        400,
    )
    .await;
    assert_eq!(e["code"], "query_too_long");
    assert_eq!(e["details"]["chars"], 500_000);
    let e = call(
        &app,
        "POST",
        "/v1/context",
        json!({"query": "é".repeat(finder_server::MAX_QUERY_CHARS + 1)}),
        400,
    )
    .await;
    assert_eq!(e["code"], "query_too_long");
    // Bodies past 1 MiB are refused on every route that reads one, writes included.
    let huge = "x".repeat(Limits::default().max_body_bytes + 1);
    for (method, path, body) in [
        ("POST", "/v1/search", json!({"query": huge})),
        ("POST", "/v1/context", json!({"query": huge})),
        ("POST", "/v1/recommend", json!({"target": huge})),
        (
            "PUT",
            "/v1/documents/big",
            json!({"title": "Big", "text": huge}),
        ),
    ] {
        let a = send(&app, method, path, Some(body.to_string()), None).await;
        assert_eq!(a.status, 413, "{method} {path}: {}", a.text);
        assert_eq!(a.json()["code"], "payload_too_large");
        assert_eq!(
            a.json()["details"]["limit_bytes"],
            Limits::default().max_body_bytes
        );
    }
    let e = call(&app, "GET", "/v1/documents/big", Value::Null, 404).await;
    assert_eq!(e["code"], "document_not_found");
}

#[tokio::test]
async fn huge_requests_over_tcp_are_refused_and_the_server_keeps_serving() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_tmp, app) = fixture();
    let server = crate::support::start(app).await;

    // A request target of 1 MiB: refused without reading it all into memory.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let target = format!("/v1/search?q={}", "a".repeat(1024 * 1024));
    let head = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
    let status = exchange(&mut stream, head.as_bytes()).await;
    // hyper answers 431 once its header buffer is full; a reset that overtakes the answer
    // is a refusal too.
    assert!(
        matches!(status, Some(431) | None),
        "a 1 MiB request target got {status:?}"
    );

    // A body announced as 100 MiB: 413 from the first megabyte on.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut request = b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{\"query\": \"".to_vec();
    request.extend(std::iter::repeat_n(b'a', 2 * 1024 * 1024));
    let status = exchange(&mut stream, &request).await;
    assert_eq!(status, Some(413));

    // Headers of 1 MiB.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "b".repeat(1024 * 1024)
    );
    let status = exchange(&mut stream, head.as_bytes()).await;
    assert!(
        matches!(status, Some(431) | None),
        "1 MiB of headers got {status:?}"
    );

    let mut client = crate::client::Client::new(server.addr, None);
    let r = client
        .send("POST", "/v1/search", Some(r#"{"query": "refresh token"}"#))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    server.stop().await;

    /// Writes `bytes` (as far as the server takes them) while reading the status of the
    /// answer; `None` when the server closed without one.
    async fn exchange(stream: &mut tokio::net::TcpStream, bytes: &[u8]) -> Option<u16> {
        let (mut read, mut write) = stream.split();
        let send = async {
            let _ = write.write_all(bytes).await;
        };
        let receive = async {
            let mut buf = vec![0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(2).any(|w| w == b"\r\n") {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            String::from_utf8_lossy(&got)
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
        };
        let (_, status) = tokio::time::timeout(Duration::from_secs(20), async {
            tokio::join!(send, receive)
        })
        .await
        .expect("the server answered or closed within 20 s");
        status
    }
}
