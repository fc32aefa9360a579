//! Finder's ranking core: the data model, the pure pipeline stages and the settings.
//!
//! Nothing in this crate touches files, sockets or clocks other than the stage timer used for
//! diagnostics. Channels (lexical, vector, graph) live in storage crates and hand this crate
//! ranked lists through the [`Retriever`] seam; every stage here is a function over lists that
//! can be tested in memory.

mod bm25;
mod embed;
mod error;
mod fusion;
mod model;
mod pipeline;
mod rollup;
mod settings;

pub use bm25::{bm25_idf, bm25_term_score, Bm25Params};
pub use embed::Embed;
pub use error::{SettingsError, SettingsErrorKind};
pub use fusion::{convex, fuse, normalize_top, rrf, FusedFragment, ListRank};
pub use model::{
    Channel, ChannelReport, ChannelStatus, Diagnostics, Envelope, Explain, ExplainPart, Extent,
    FragmentKey, Hint, Hit, RankedList, ScoredFragment, SearchResponse, SourceKey, StageTime,
};
pub use pipeline::{search, ChannelOutcome, FragmentMeta, Retriever, SourceView, Stopwatch};
pub use rollup::{rollup, RollupPart, SourceScore};
pub use settings::{
    levenshtein, EmbedBackend, EmbedSettings, FinderSettings, Fusion, IndexSettings,
    LexicalSettings, Settings, TrigramMode, VectorSettings, DEFAULT_ALPHA, DEFAULT_B,
    DEFAULT_EF_SEARCH, DEFAULT_FRAGMENT_MAX_CHARS, DEFAULT_FTS_LIST_SIZE, DEFAULT_K1,
    DEFAULT_MAX_HINTS, DEFAULT_MAX_VECTOR_DISTANCE, DEFAULT_QUERY_EMBED_TIMEOUT_MS, DEFAULT_RRF_K,
    DEFAULT_SUMMARY_MAX_CHARS, DEFAULT_VEC_LIST_SIZE,
};
