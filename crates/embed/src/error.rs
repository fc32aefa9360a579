//! Errors of the embedding backends.

use std::path::PathBuf;

/// `dir/name` when it is a file; otherwise the model is missing, and `what` says what the
/// folder should have been.
pub(crate) fn model_file(
    dir: &std::path::Path,
    name: &str,
    what: &str,
) -> Result<PathBuf, EmbedError> {
    let p = dir.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(EmbedError::ModelMissing {
            path: dir.to_path_buf(),
            what: format!("no {name}{what}"),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model folder or one of its files is missing.
    #[error("model not found at {path}: {what} (run `finder model install`)")]
    ModelMissing { path: PathBuf, what: String },
    /// A model file does not match its pinned checksum.
    #[error("{path}: sha256 {found} does not match the pinned {expected}")]
    Checksum {
        path: PathBuf,
        expected: String,
        found: String,
    },
    /// The model files could not be loaded.
    #[error("loading model from {path}: {message}")]
    Load { path: PathBuf, message: String },
    /// Inference failed.
    #[error("embedding failed: {0}")]
    Inference(String),
    /// Installing the model failed.
    #[error("installing the model: {0}")]
    Install(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
