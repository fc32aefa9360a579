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
}

impl EvalError {
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
