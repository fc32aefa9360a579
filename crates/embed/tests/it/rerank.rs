//! The HTTP reranker and plugin retriever against a local fake server: both request shapes,
//! both response shapes, and errors that come back as messages (the stage degrades).

use std::time::Duration;

use finder_core::{PluginRetriever, Reranker};
use finder_embed::{HttpPlugin, HttpReranker};
use serde_json::{json, Value};

use crate::http::fake_server;

#[test]
fn tei_shape_without_a_model() {
    let (url, _) = fake_server(|_, body| {
        let request: Value = serde_json::from_str(body).unwrap();
        assert_eq!(request["query"], "expired token");
        let texts = request["texts"].as_array().unwrap();
        // Score by whether the text mentions "token"; answer out of order, as TEI sorts.
        let mut rows: Vec<Value> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"index": i, "score": if t.as_str().unwrap().contains("token") { 0.9 } else { 0.1 }}))
            .collect();
        rows.reverse();
        (200, Value::Array(rows).to_string(), Duration::ZERO)
    });
    let r = HttpReranker::new(&url, "", None, Duration::from_secs(2));
    let scores = r
        .rerank("expired token", &["weather report", "token expiry", "ops"])
        .unwrap();
    assert_eq!(scores, vec![0.1, 0.9, 0.1]);
}

#[test]
fn cohere_shape_with_a_model() {
    let (url, _) = fake_server(|_, body| {
        let request: Value = serde_json::from_str(body).unwrap();
        assert_eq!(request["model"], "rerank-v3");
        assert_eq!(request["top_n"], 2);
        assert_eq!(request["documents"].as_array().unwrap().len(), 2);
        let reply = json!({"results": [
            {"index": 1, "relevance_score": 0.8},
            {"index": 0, "relevance_score": 0.3}
        ]});
        (200, reply.to_string(), Duration::ZERO)
    });
    let r = HttpReranker::new(&url, "rerank-v3", Some("k".into()), Duration::from_secs(2));
    assert_eq!(r.rerank("q", &["a", "b"]).unwrap(), vec![0.3, 0.8]);
}

#[test]
fn errors_and_timeouts_are_messages() {
    let (url, _) = fake_server(|_, _| (500, "{}".into(), Duration::ZERO));
    let r = HttpReranker::new(&url, "", None, Duration::from_secs(2));
    let err = r.rerank("q", &["a"]).unwrap_err();
    assert!(err.contains("HTTP 500"), "{err}");
    let (url, _) = fake_server(|_, _| (200, "[]".into(), Duration::from_millis(800)));
    let r = HttpReranker::new(&url, "", None, Duration::from_millis(100));
    assert!(r.rerank("q", &["a"]).is_err());
}

#[test]
fn plugin_returns_ordered_hits() {
    let (url, _) = fake_server(|_, body| {
        let request: Value = serde_json::from_str(body).unwrap();
        assert_eq!(request["k"], 2);
        let reply = json!({"hits": [
            {"id": "p1", "score": 3.0, "text": "from the plugin"},
            {"id": "p2", "score": 2.0},
            {"id": "p3", "score": 1.0}
        ]});
        (200, reply.to_string(), Duration::ZERO)
    });
    let p = HttpPlugin::new(&url, Duration::from_secs(2));
    let hits = p.retrieve("q", 2).unwrap();
    let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, vec!["p1", "p2"]);
    assert_eq!(hits[0].text.as_deref(), Some("from the plugin"));
    let (url, _) = fake_server(|_, _| (404, "no".into(), Duration::ZERO));
    assert!(HttpPlugin::new(&url, Duration::from_secs(2))
        .retrieve("q", 5)
        .is_err());
}
