//! The crate's one error type.

use finder_index::Problem;

/// What can go wrong talking to PostgreSQL or writing a run.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The server refused or failed a statement, or the connection broke. `place` names the
    /// shard and what was being done, never the URL (it may hold a password).
    #[error("PostgreSQL, {place}: {source}")]
    Db {
        place: String,
        #[source]
        source: postgres::Error,
    },
    /// An input that cannot be read at all.
    #[error("{0}")]
    Input(Problem),
    /// No connection to a shard came within the pool's wait (every one busy, or no URL of
    /// the shard answers).
    #[error("shard {shard}: no connection: {reason}")]
    Unavailable { shard: usize, reason: String },
    /// Another indexing run holds the write lock of a shard.
    #[error("another indexing run has been writing to shard {0} for a minute; try again when it is done")]
    Busy(usize),
    /// What the database holds does not fit what this build or these settings expect.
    #[error("shard {shard}: {reason}")]
    Mismatch { shard: usize, reason: String },
    /// A bad backend configuration (no shards, a shard without a URL, …).
    #[error("PostgreSQL backend configuration: {0}")]
    Config(String),
    /// A shard no indexing run has written to yet.
    #[error("shard {0} holds no Finder index yet; run an indexing pass into it first")]
    NotIndexed(usize),
    /// A query-time setting that is out of range or would need another index.
    #[error(transparent)]
    Settings(#[from] finder_index::IndexError),
    /// `like` names a source no shard holds.
    #[error("unknown source `{0}`")]
    UnknownSource(String),
}

impl PgError {
    /// Whether a shard could not be reached: no connection came within the pool's wait, or
    /// the server closed or broke the connection under a statement (a replica gone, a
    /// restart). Worth trying again shortly; not a fault of the request or of the data.
    pub fn unavailable(&self) -> bool {
        match self {
            PgError::Unavailable { .. } => true,
            PgError::Db { source, .. } => lost(source),
            _ => false,
        }
    }
}

/// Whether `e` says the connection is gone (closed, broken mid-exchange, or the server shutting
/// down or refusing connections): the statement had no effect, and a new connection may
/// succeed.
pub(crate) fn lost(e: &postgres::Error) -> bool {
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    // A TLS handshake that failed comes as an I/O error too, but it is the configuration's
    // fault (an untrusted or misnamed certificate): trying again does not help.
    let tls = io
        .and_then(std::io::Error::get_ref)
        .is_some_and(|inner| inner.is::<rustls::Error>());
    e.is_closed()
        || (io.is_some() && !tls)
        || e.code()
            .is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08"))
}

pub type Result<T, E = PgError> = std::result::Result<T, E>;

/// Attaches a place to a driver error.
pub(crate) fn db(place: impl Into<String>) -> impl FnOnce(postgres::Error) -> PgError {
    let place = place.into();
    move |source| PgError::Db { place, source }
}
