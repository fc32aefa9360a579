//! Query vectors kept for reuse: a query asked again (an agent repeating a search, the page
//! asking again for the same words, `finder eval` running one query in several modes) is not
//! embedded again. Only single texts are kept; a vector build's batches pass through.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};

use finder_core::Embed;
use lru::LruCache;

/// Query vectors kept per model: 1,024 of MiniLM's take 1.5 MiB.
pub const QUERY_CACHE_ENTRIES: usize = 1024;

/// An embedding model whose single-text answers are kept, the least recently used dropped
/// first once `QUERY_CACHE_ENTRIES` are held.
pub struct QueryCache {
    inner: Arc<dyn Embed>,
    kept: Mutex<LruCache<String, Vec<f32>>>,
}

impl QueryCache {
    pub fn new(inner: Arc<dyn Embed>, entries: usize) -> QueryCache {
        let entries = NonZeroUsize::new(entries).unwrap_or(NonZeroUsize::MIN);
        QueryCache {
            inner,
            kept: Mutex::new(LruCache::new(entries)),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, LruCache<String, Vec<f32>>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Embed for QueryCache {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn english_only(&self) -> bool {
        self.inner.english_only()
    }

    fn embed_windows(&self, texts: &[&str]) -> Result<Vec<Vec<Vec<f32>>>, String> {
        self.inner.embed_windows(texts)
    }

    fn reads_in_windows(&self) -> bool {
        self.inner.reads_in_windows()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let [text] = texts else {
            return self.inner.embed(texts);
        };
        if let Some(v) = self.kept().get(*text) {
            return Ok(vec![v.clone()]);
        }
        // Embedded outside the lock: a slow query does not hold up the others.
        let vectors = self.inner.embed(texts)?;
        if let [v] = vectors.as_slice() {
            self.kept().put(text.to_string(), v.clone());
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts the texts it embeds; the vector is the text's length.
    struct Counting(AtomicUsize);

    impl Embed for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn dim(&self) -> usize {
            1
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[test]
    fn a_query_asked_again_is_not_embedded_again() {
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let cache = QueryCache::new(inner.clone(), 2);
        let embedded = || inner.0.load(Ordering::SeqCst);
        assert_eq!(cache.embed(&["abc"]).unwrap(), vec![vec![3.0]]);
        assert_eq!(cache.embed(&["abc"]).unwrap(), vec![vec![3.0]]);
        assert_eq!(embedded(), 1);
        // Batches (a vector build) pass through and are not kept.
        cache.embed(&["abc", "de"]).unwrap();
        assert_eq!(embedded(), 3);
        cache.embed(&["de"]).unwrap();
        assert_eq!(embedded(), 4);
        // Two are kept: a third query drops the least recently used ("abc").
        cache.embed(&["fghi"]).unwrap();
        cache.embed(&["de"]).unwrap();
        assert_eq!(embedded(), 5);
        cache.embed(&["abc"]).unwrap();
        assert_eq!(embedded(), 6);
        assert_eq!((cache.model_id(), cache.dim()), ("counting", 1));
    }
}
