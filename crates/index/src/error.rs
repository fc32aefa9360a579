//! Errors of the index crate.

use std::path::PathBuf;

/// Everything that can go wrong opening, writing or querying an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The index folder does not hold a Finder index.
    #[error("no Finder index at {0} (run `finder index <INPUT> --index {0}` first)")]
    NotFound(PathBuf),
    /// A source id that the index does not hold (e.g. the target of a recommendation).
    #[error("no source `{0}` in this index")]
    UnknownSource(String),
    /// An input could not be read as a whole (a missing path, an unknown kind).
    #[error("{0}")]
    Input(crate::Problem),
    /// A setting was rejected.
    #[error(transparent)]
    Settings(#[from] finder_core::SettingsError),
    /// Another `finder index` holds the index.
    #[error("the index at {0} is being written by another process; try again when it finishes")]
    Busy(PathBuf),
    /// The index was written with other index-time settings than asked for.
    #[error("index-time setting `{key}` cannot change at query time (indexed with {indexed}); re-run `finder index` with the new value in finder.toml")]
    IndexTimeSetting { key: String, indexed: String },
    /// Storage failed underneath us.
    #[error("index storage at {path}: {source}")]
    Storage {
        path: PathBuf,
        #[source]
        source: tantivy::TantivyError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The embedding backend failed while building vectors.
    #[error("building vectors: {reason}")]
    Embedding { reason: String },
    /// The index was written in an earlier layout, which this version no longer reads.
    #[error("the index at {path} was written by an earlier Finder (index format {found}; this one reads {expected}): run `finder index` on the same inputs to rebuild it")]
    Outdated {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    /// The index holds data this version cannot read.
    #[error("index at {path} is corrupt or from another version: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A store outside this crate failed to give the graph build its fragment texts
    /// ([`crate::graph::FragmentTexts`]).
    #[error("reading fragment texts for the graph: {0}")]
    GraphTexts(String),
}

pub type Result<T, E = IndexError> = std::result::Result<T, E>;
