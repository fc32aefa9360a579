//! The HTTP backend against a local fake embedding server (OpenAI and Ollama shapes),
//! with retries on server errors and a timeout.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use finder_embed::{Embedder, HttpConfig};

/// Serves `handle(request number, body) -> (status, body, delay)` on a loopback port until
/// the test ends; returns the URL.
pub(crate) fn fake_server(
    handle: impl Fn(usize, &str) -> (u16, String, Duration) + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/embeddings", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(50) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let (status, reply, delay) = handle(n, &String::from_utf8_lossy(&body));
            std::thread::sleep(delay);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (url, count)
}

/// One 3-d vector per input text, in the OpenAI response shape.
fn openai_reply(body: &str) -> String {
    let request: serde_json::Value = serde_json::from_str(body).unwrap();
    let n = request["input"].as_array().unwrap().len();
    let data: Vec<serde_json::Value> = (0..n)
        .map(|i| serde_json::json!({"index": i, "embedding": [1.0, i as f64, 0.0]}))
        .collect();
    serde_json::json!({ "data": data }).to_string()
}

fn config(url: &str, timeout_ms: u64) -> HttpConfig {
    HttpConfig {
        url: url.into(),
        model: "fake".into(),
        api_key: None,
        timeout: Duration::from_millis(timeout_ms),
        retries: 2,
    }
}

#[test]
fn embeds_batches_and_learns_the_dimension() {
    let (url, _) = fake_server(|_, body| (200, openai_reply(body), Duration::ZERO));
    let e = Embedder::http(config(&url, 2_000)).unwrap();
    assert_eq!(e.dim(), 3);
    let v = e.embed(&["a", "b"]).unwrap();
    assert_eq!(v[0], vec![1.0, 0.0, 0.0]);
    let norm: f32 = v[1].iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-6);
}

#[test]
fn retries_server_errors_then_succeeds() {
    // Probe succeeds, the next two requests fail with 503, the third succeeds.
    let (url, count) = fake_server(|n, body| match n {
        1 | 2 => (503, "{\"error\":\"busy\"}".into(), Duration::ZERO),
        _ => (200, openai_reply(body), Duration::ZERO),
    });
    let e = Embedder::http(config(&url, 2_000)).unwrap();
    assert_eq!(e.embed(&["x"]).unwrap().len(), 1);
    assert_eq!(count.load(Ordering::SeqCst), 4);
}

#[test]
fn client_errors_are_not_retried_and_name_the_status() {
    let (url, count) = fake_server(|n, body| match n {
        0 => (200, openai_reply(body), Duration::ZERO),
        _ => (400, "{\"error\":\"bad model\"}".into(), Duration::ZERO),
    });
    let e = Embedder::http(config(&url, 2_000)).unwrap();
    let err = e.embed(&["x"]).unwrap_err().to_string();
    assert!(
        err.contains("HTTP 400") && err.contains("bad model"),
        "{err}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[test]
fn a_slow_server_times_out() {
    let (url, _) = fake_server(|_, body| (200, openai_reply(body), Duration::from_millis(1_500)));
    let err = Embedder::http(config(&url, 200)).unwrap_err().to_string();
    assert!(err.contains("attempt"), "{err}");
}

#[test]
fn ollama_shape_is_understood() {
    let (url, _) =
        fake_server(|_, _| (200, "{\"embeddings\":[[0.0, 2.0]]}".into(), Duration::ZERO));
    let e = Embedder::http(config(&url, 2_000)).unwrap();
    assert_eq!(e.embed(&["x"]).unwrap(), vec![vec![0.0, 1.0]]);
}
