//! What the refinement stages get from outside the pure pipeline: a reranker, plugin
//! retrievers, user profiles and the clock. Binaries attach the network-backed ones; tests
//! attach in-memory ones.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::UserProfile;

/// Scores query–document pairs for the bounded rerank stage (a cross-encoder server, or the
/// embedding model). An error skips the stage for that query; it never fails the query.
pub trait Reranker: Send + Sync {
    /// A name for diagnostics, e.g. `http` or `local`.
    fn name(&self) -> &str;

    /// One score per document, higher is better, in the documents' order.
    fn rerank(&self, query: &str, documents: &[&str]) -> Result<Vec<f64>, String>;
}

/// One hit of an external retriever.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginHit {
    /// A source id; ids this index does not hold are shown with `text` as their summary.
    pub id: String,
    pub score: f64,
    pub text: Option<String>,
}

/// An external retriever whose ordered ids are merged under the frozen core head. An error
/// leaves the plugin out for that query.
pub trait PluginRetriever: Send + Sync {
    /// A name for explain and diagnostics (e.g. the URL).
    fn name(&self) -> &str;

    /// At most `depth` hits for `query`, best first.
    fn retrieve(&self, query: &str, depth: usize) -> Result<Vec<PluginHit>, String>;
}

/// The refinement stages' outside world. The default has no reranker, no plugins, no
/// profiles, and reads the system clock.
#[derive(Clone, Default)]
pub struct Extensions {
    pub reranker: Option<Arc<dyn Reranker>>,
    pub plugins: Vec<Arc<dyn PluginRetriever>>,
    /// User profiles by user id.
    pub profiles: Arc<BTreeMap<String, UserProfile>>,
    /// The time recency and interaction decay are measured at (Unix seconds); `None` reads
    /// the system clock once per query.
    pub now: Option<i64>,
}

impl Extensions {
    /// `now`, or the system clock.
    pub fn now(&self) -> i64 {
        self.now.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        })
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("reranker", &self.reranker.as_ref().map(|r| r.name()))
            .field(
                "plugins",
                &self.plugins.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .field("profiles", &self.profiles.len())
            .field("now", &self.now)
            .finish()
    }
}
