//! The crate's one error type: everything that can go wrong loading a dataset.

use std::path::PathBuf;

/// Failures of the evaluation harness. Every variant names the file, and parse errors name the
/// 1-based line, so a bad dataset can be fixed without a debugger.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line of the file is malformed.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// A run specification or preset is not usable.
    #[error("{0}")]
    Run(String),
    /// A run's settings were rejected.
    #[error("run `{run}`: {source}")]
    Settings {
        run: String,
        #[source]
        source: Box<finder_store::StoreError>,
    },
    /// Building or querying the index failed.
    #[error(transparent)]
    Index(Box<finder_store::StoreError>),
    /// A `--min` threshold was not met.
    #[error("quality below threshold: {0}")]
    BelowThreshold(String),
}

impl From<finder_index::IndexError> for EvalError {
    fn from(e: finder_index::IndexError) -> Self {
        EvalError::Index(Box::new(e.into()))
    }
}

impl From<finder_store::StoreError> for EvalError {
    fn from(e: finder_store::StoreError) -> Self {
        EvalError::Index(Box::new(e))
    }
}

impl EvalError {
    pub(crate) fn settings(run: &str, source: finder_store::StoreError) -> Self {
        EvalError::Settings {
            run: run.to_string(),
            source: Box::new(source),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EvalError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn parse(path: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Self {
        EvalError::Parse {
            path: path.into(),
            line,
            message: message.into(),
        }
    }
}
