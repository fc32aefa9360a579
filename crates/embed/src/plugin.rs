//! Plugin retrievers over HTTP: Finder posts `{query, k}` and reads ordered hits with ids,
//! scores and optional text (`{hits: [...]}`, `{results: [...]}` or a bare list). The pipeline
//! merges them under the frozen core head; a failing plugin is left out of that query.

use std::sync::Arc;
use std::time::Duration;

use finder_core::{PluginHit, PluginRetriever, RefineSettings};
use serde_json::{json, Value};

use crate::rerank::{agent, post};

pub struct HttpPlugin {
    url: String,
    agent: ureq::Agent,
}

impl HttpPlugin {
    pub fn new(url: &str, timeout: Duration) -> Self {
        HttpPlugin {
            url: url.to_string(),
            agent: agent(timeout),
        }
    }
}

impl PluginRetriever for HttpPlugin {
    fn name(&self) -> &str {
        &self.url
    }

    fn retrieve(&self, query: &str, depth: usize) -> Result<Vec<PluginHit>, String> {
        let reply = post(
            &self.agent,
            &self.url,
            None,
            &json!({ "query": query, "k": depth }),
        )?;
        let mut hits = parse_hits(&reply)?;
        hits.truncate(depth);
        Ok(hits)
    }
}

/// Reads the hits in the order given; the score defaults to 0 and the text to none.
pub fn parse_hits(reply: &Value) -> Result<Vec<PluginHit>, String> {
    let rows = reply
        .as_array()
        .or_else(|| reply.get("hits").and_then(Value::as_array))
        .or_else(|| reply.get("results").and_then(Value::as_array))
        .ok_or("unexpected plugin response: no hit list")?;
    rows.iter()
        .map(|row| {
            let id = match row.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => return Err("unexpected plugin response: a hit has no id".to_string()),
            };
            Ok(PluginHit {
                id,
                score: row.get("score").and_then(Value::as_f64).unwrap_or(0.0),
                text: row.get("text").and_then(Value::as_str).map(str::to_string),
            })
        })
        .collect()
}

/// One plugin per URL in `refine.plugins`.
pub fn plugins(settings: &RefineSettings) -> Vec<Arc<dyn PluginRetriever>> {
    settings
        .plugins
        .iter()
        .map(|url| {
            Arc::new(HttpPlugin::new(
                url,
                Duration::from_millis(settings.timeout_ms),
            )) as Arc<dyn PluginRetriever>
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hit_lists() {
        let hits =
            parse_hits(&json!({"hits": [{"id": "a", "score": 2.0, "text": "t"}, {"id": 7}]}))
                .unwrap();
        assert_eq!(hits[0].id, "a");
        assert_eq!(hits[0].text.as_deref(), Some("t"));
        assert_eq!(hits[1].id, "7");
        assert_eq!(hits[1].score, 0.0);
        assert!(parse_hits(&json!([{"score": 1}])).is_err());
    }
}
