//! Finder's ranking core: the data model, the pure pipeline stages and the settings.
//!
//! Nothing in this crate touches files, sockets or clocks other than the stage timer used for
//! diagnostics. Channels (lexical, vector, graph) live in storage crates and hand this crate
//! ranked lists through the [`Retriever`] seam; every stage here is a function over lists that
//! can be tested in memory.

pub mod bm25;
pub mod embed;
pub mod error;
pub mod fusion;
pub mod graph;
pub mod model;
pub mod pipeline;
pub mod refine;
pub mod response;
pub mod rollup;
pub mod script;
pub mod settings;

// What the other crates use, at the root; the rest is reached through its module.
pub use bm25::{
    bm25_idf, bm25_length_norm, bm25_term_score, bm25_tf_score, query_term_weight,
    query_term_weights, Bm25Params,
};
pub use embed::{embed_with_timeout, Embed};
pub use error::{SettingsError, SettingsErrorKind};
pub use fusion::rrf;
pub use graph::{
    boost_with, entity_list, BoostParams, BoostScratch, Graph, GraphAccess, GraphSettings,
    KindWeights, LinkOrder, RelationKind,
};
pub use model::{
    Channel, Envelope, Extent, FragmentKey, Query, RankedList, ScoredFragment, SourceKey,
};
pub use pipeline::{
    retrieve_each, search, search_with, timed, ChannelOutcome, FragmentMeta, GraphState, Retriever,
    SourceView, Timed, BOOST_STAGE,
};
pub use refine::{
    content_tokens, parse_date, parse_date_bound, Attr, Extensions, Interaction, PluginHit,
    PluginRetriever, RefineSettings, Refinement, RerankBackend, Reranker, Similarity, SourceFilter,
    UserProfile,
};
pub use response::{ChannelStatus, Diagnostics, Hit, SearchResponse, StageTime};
pub use rollup::rollup;
pub use script::{is_cjk, is_cyrillic, non_latin_script};
pub use settings::{
    EmbedBackend, EmbedSettings, IndexSettings, LexicalSettings, Settings, StorageBackend,
    StorageSettings, TrigramMode, VectorSettings, DEFAULT_FRAGMENT_MAX_CHARS,
    DEFAULT_PG_HNSW_EF_CONSTRUCTION, DEFAULT_PG_HNSW_M, LANGUAGES,
};

/// A hash map for the query path's keys (fragment and source keys are hashes already, so
/// SipHash's protection buys nothing there): rustc's Fx hash.
pub type FastMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// A hash set of the query path's keys, hashed as [`FastMap`]'s.
pub type FastSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;
