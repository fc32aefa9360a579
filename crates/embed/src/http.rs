//! An embedding server reached over HTTP: OpenAI-compatible `/v1/embeddings` (also served by
//! TEI, vLLM, llama.cpp and Ollama's `/v1`) or Ollama's native `/api/embed`. Requests carry a
//! batch, time out, and are retried with exponential backoff on connection errors, 429 and 5xx.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::EmbedError;

/// What the HTTP backend needs to know.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub retries: u32,
}

pub struct HttpEmbedder {
    config: HttpConfig,
    agent: ureq::Agent,
    dim: usize,
    model_id: String,
}

impl HttpEmbedder {
    /// Connects and embeds a probe text to learn the dimension (and to fail early).
    pub fn connect(config: HttpConfig) -> Result<HttpEmbedder, EmbedError> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let model_id = format!("http:{}#{}", config.url, config.model);
        let mut embedder = HttpEmbedder {
            config,
            agent,
            dim: 0,
            model_id,
        };
        let probe = embedder.embed(&["dimension probe"])?;
        embedder.dim = probe[0].len();
        Ok(embedder)
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let body = json!({ "model": self.config.model, "input": texts });
        let mut attempt = 0;
        loop {
            match self.post(&body) {
                Ok(value) => return parse(&value, texts.len(), self.dim),
                Err((retryable, message)) if retryable && attempt < self.config.retries => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(100 << attempt.min(6)));
                    let _ = message;
                }
                Err((_, message)) => {
                    return Err(EmbedError::Inference(format!(
                        "{} after {} attempt(s): {message}",
                        self.config.url,
                        attempt + 1
                    )))
                }
            }
        }
    }

    /// One request; the error says whether a retry may help.
    fn post(&self, body: &Value) -> Result<Value, (bool, String)> {
        let mut request = self
            .agent
            .post(&self.config.url)
            .header("content-type", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header("authorization", &format!("Bearer {key}"));
        }
        let mut response = request.send_json(body).map_err(|e| (true, e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| (true, e.to_string()))?;
        if status == 429 || status >= 500 {
            return Err((true, format!("HTTP {status}: {}", snippet(&text))));
        }
        if status >= 400 {
            return Err((false, format!("HTTP {status}: {}", snippet(&text))));
        }
        serde_json::from_str(&text).map_err(|e| {
            (
                false,
                format!("response is not JSON ({e}): {}", snippet(&text)),
            )
        })
    }
}

fn snippet(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Reads `{"data":[{"embedding":[..],"index":i}]}` (OpenAI) or `{"embeddings":[[..]]}`
/// (Ollama), checks count and dimension, and normalises.
fn parse(value: &Value, expected: usize, dim: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let bad = |why: &str| EmbedError::Inference(format!("unexpected response: {why}"));
    let rows: Vec<(usize, &Value)> = if let Some(data) = value.get("data").and_then(Value::as_array)
    {
        data.iter()
            .enumerate()
            .map(|(i, item)| {
                let index = item
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(i, |x| x as usize);
                (index, item.get("embedding").unwrap_or(&Value::Null))
            })
            .collect()
    } else if let Some(rows) = value.get("embeddings").and_then(Value::as_array) {
        rows.iter().enumerate().collect()
    } else {
        return Err(bad("neither `data` (OpenAI) nor `embeddings` (Ollama)"));
    };
    if rows.len() != expected {
        return Err(bad(&format!("{} vectors for {expected} texts", rows.len())));
    }
    let mut out = vec![Vec::new(); expected];
    for (index, row) in rows {
        let numbers = row
            .as_array()
            .ok_or_else(|| bad("an embedding is not an array"))?;
        let mut v: Vec<f32> = numbers
            .iter()
            .map(|x| {
                x.as_f64()
                    .map(|f| f as f32)
                    .ok_or_else(|| bad("an embedding holds a non-number"))
            })
            .collect::<Result<_, _>>()?;
        if v.is_empty() || (dim != 0 && v.len() != dim) {
            return Err(bad(&format!(
                "dimension {} where {dim} was expected",
                v.len()
            )));
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        let slot = out
            .get_mut(index)
            .ok_or_else(|| bad("index out of range"))?;
        *slot = v;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_shapes_and_normalises() {
        let openai = json!({"data": [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 4.0]}]});
        let v = parse(&openai, 2, 0).unwrap();
        assert_eq!(v, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
        let ollama = json!({"embeddings": [[1.0, 0.0]]});
        assert_eq!(parse(&ollama, 1, 2).unwrap(), vec![vec![1.0, 0.0]]);
    }

    #[test]
    fn rejects_wrong_counts_and_dimensions() {
        assert!(parse(&json!({"embeddings": [[1.0]]}), 2, 0).is_err());
        assert!(parse(&json!({"embeddings": [[1.0, 2.0, 3.0]]}), 1, 2).is_err());
        assert!(parse(&json!({"vectors": []}), 0, 0).is_err());
    }
}
