//! Rerankers for the bounded rerank stage: a `/rerank` server (the shape TEI, Cohere and Jina
//! share) and a local one that scores by the embedding model's cosine over full fragment text.
//! A failing reranker returns an error the pipeline reports; the query still answers.

use std::sync::Arc;
use std::time::Duration;

use finder_core::{Embed, RefineSettings, RerankBackend, Reranker};
use serde_json::{json, Value};

/// Environment variable holding the rerank server's bearer token.
pub const RERANK_API_KEY_ENV: &str = "FINDER_RERANK_API_KEY";

/// A `/rerank` endpoint. Without a model name the request is TEI's
/// (`{query, texts}`); with one it is Cohere's and Jina's (`{model, query, documents,
/// top_n}`). Both answer with indices and scores: TEI `[{index, score}]`, the others
/// `{results: [{index, relevance_score}]}`.
pub struct HttpReranker {
    url: String,
    model: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl HttpReranker {
    pub fn new(url: &str, model: &str, api_key: Option<String>, timeout: Duration) -> Self {
        HttpReranker {
            url: url.to_string(),
            model: model.to_string(),
            api_key,
            agent: agent(timeout),
        }
    }
}

impl Reranker for HttpReranker {
    fn name(&self) -> &str {
        "http"
    }

    fn rerank(&self, query: &str, documents: &[&str]) -> Result<Vec<f64>, String> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let body = if self.model.is_empty() {
            json!({ "query": query, "texts": documents, "raw_scores": false })
        } else {
            json!({
                "model": self.model,
                "query": query,
                "documents": documents,
                "top_n": documents.len(),
                "return_documents": false,
            })
        };
        let reply = post(&self.agent, &self.url, self.api_key.as_deref(), &body)?;
        parse_scores(&reply, documents.len())
    }
}

/// Reads `[{index, score}]` or `{results: [{index, relevance_score | score}]}` into one score
/// per document; a document the server left out scores below every returned one.
pub fn parse_scores(reply: &Value, n: usize) -> Result<Vec<f64>, String> {
    let rows = reply
        .as_array()
        .or_else(|| reply.get("results").and_then(Value::as_array))
        .or_else(|| reply.get("data").and_then(Value::as_array))
        .ok_or("unexpected rerank response: no result list")?;
    let mut scores = vec![f64::NEG_INFINITY; n];
    for row in rows {
        let index =
            row.get("index")
                .and_then(Value::as_u64)
                .ok_or("unexpected rerank response: a result has no index")? as usize;
        let score = row
            .get("relevance_score")
            .or_else(|| row.get("score"))
            .and_then(Value::as_f64)
            .ok_or("unexpected rerank response: a result has no score")?;
        *scores
            .get_mut(index)
            .ok_or("unexpected rerank response: index out of range")? = score;
    }
    Ok(scores)
}

/// Scores each document by the cosine of its vector and the query's under the embedding
/// model, the document read as one input (as far as the model reads).
pub struct EmbedReranker {
    embed: Arc<dyn Embed>,
}

impl EmbedReranker {
    pub fn new(embed: Arc<dyn Embed>) -> Self {
        EmbedReranker { embed }
    }
}

impl Reranker for EmbedReranker {
    fn name(&self) -> &str {
        "local"
    }

    fn rerank(&self, query: &str, documents: &[&str]) -> Result<Vec<f64>, String> {
        let mut texts = Vec::with_capacity(documents.len() + 1);
        texts.push(query);
        texts.extend_from_slice(documents);
        let vectors = self.embed.embed(&texts)?;
        if vectors.len() != texts.len() {
            return Err(format!(
                "the model returned {} vectors for {} texts",
                vectors.len(),
                texts.len()
            ));
        }
        let q = &vectors[0];
        Ok(vectors[1..].iter().map(|d| cosine(q, d)).collect())
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (x, y) in a.iter().zip(b) {
        dot += *x as f64 * *y as f64;
        na += *x as f64 * *x as f64;
        nb += *y as f64 * *y as f64;
    }
    if na > 0.0 && nb > 0.0 {
        dot / (na.sqrt() * nb.sqrt())
    } else {
        0.0
    }
}

/// The reranker `[refine]` asks for: `None` for `rerank = "none"`, and for `local` without an
/// embedding model (the stage then reports that no reranker is attached).
pub fn reranker(
    settings: &RefineSettings,
    embedder: Option<Arc<dyn Embed>>,
) -> Option<Arc<dyn Reranker>> {
    match settings.rerank {
        RerankBackend::None => None,
        RerankBackend::Http => Some(Arc::new(HttpReranker::new(
            &settings.rerank_url,
            &settings.rerank_model,
            std::env::var(RERANK_API_KEY_ENV)
                .ok()
                .filter(|k| !k.is_empty()),
            Duration::from_millis(settings.timeout_ms),
        ))),
        RerankBackend::Local => {
            embedder.map(|e| Arc::new(EmbedReranker::new(e)) as Arc<dyn Reranker>)
        }
    }
}

pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into()
}

/// One JSON POST; any failure is a message naming the URL.
pub(crate) fn post(
    agent: &ureq::Agent,
    url: &str,
    api_key: Option<&str>,
    body: &Value,
) -> Result<Value, String> {
    let mut request = agent.post(url).header("content-type", "application/json");
    if let Some(key) = api_key {
        request = request.header("authorization", &format!("Bearer {key}"));
    }
    let mut response = request.send_json(body).map_err(|e| format!("{url}: {e}"))?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("{url}: {e}"))?;
    if status >= 400 {
        let snippet: String = text.chars().take(200).collect();
        return Err(format!("{url}: HTTP {status}: {snippet}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("{url}: response is not JSON ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tei_and_cohere_shapes() {
        let tei = json!([{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}]);
        assert_eq!(parse_scores(&tei, 2).unwrap(), vec![0.1, 0.9]);
        let cohere = json!({"results": [{"index": 0, "relevance_score": 0.5}]});
        assert_eq!(
            parse_scores(&cohere, 2).unwrap(),
            vec![0.5, f64::NEG_INFINITY]
        );
        assert!(parse_scores(&json!({"results": [{"index": 7, "score": 1.0}]}), 2).is_err());
        assert!(parse_scores(&json!({"oops": 1}), 2).is_err());
    }

    struct Fixed;
    impl Embed for Fixed {
        fn model_id(&self) -> &str {
            "fixed"
        }
        fn dim(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            Ok(texts
                .iter()
                .map(|t| {
                    if t.contains("token") {
                        vec![1.0, 0.0]
                    } else {
                        vec![0.0, 1.0]
                    }
                })
                .collect())
        }
    }

    #[test]
    fn local_reranker_scores_by_cosine() {
        let r = EmbedReranker::new(Arc::new(Fixed));
        let scores = r.rerank("token", &["weather", "token expiry"]).unwrap();
        assert_eq!(scores, vec![0.0, 1.0]);
    }
}
