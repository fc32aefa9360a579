//! The seam between the pipeline and embedding backends: anything that turns texts into
//! L2-normalised vectors. Backends live in `finder-embed`; tests use small fakes.

use std::sync::Arc;
use std::time::Duration;

/// An embedding model. Implementations must return one normalised vector per text.
pub trait Embed: Send + Sync {
    /// Names the model and its settings; vectors made by different ids are never mixed.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
    /// Every part of each text the model reads, one vector per part, first part first: a
    /// model that reads a limited window embeds a longer text window by window, so no part of
    /// a passage goes unread. The first vector is the one [`Embed::embed`] gives. By default
    /// the text is one part.
    fn embed_windows(&self, texts: &[&str]) -> Result<Vec<Vec<Vec<f32>>>, String> {
        Ok(self.embed(texts)?.into_iter().map(|v| vec![v]).collect())
    }
    /// Whether [`Embed::embed_windows`] can give a text more than one part: when it cannot,
    /// `embed.windows` changes nothing and nothing is embedded again for it.
    fn reads_in_windows(&self) -> bool {
        false
    }
    /// Whether the model was trained on English text only: a query written mostly in
    /// another script then gets no vector list (its vector would be noise), and the channel
    /// says why.
    fn english_only(&self) -> bool {
        false
    }
}

/// Embeds one query on another thread and gives up after `timeout`: a slow model or server
/// costs the query its vector list, never its answer. The error says why, for the channel's
/// `degraded` report.
pub fn embed_with_timeout(
    embedder: Arc<dyn Embed>,
    query: String,
    timeout: Duration,
) -> Result<Vec<f32>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(embedder.embed(&[query.as_str()]));
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(mut vectors)) if vectors.len() == 1 => Ok(vectors.remove(0)),
        Ok(Ok(_)) => Err("the model returned no vector for the query".into()),
        Ok(Err(e)) => Err(format!("query embedding failed: {e}")),
        Err(_) => Err(format!(
            "query embedding took longer than {} ms (vector.query_embed_timeout_ms)",
            timeout.as_millis()
        )),
    }
}
