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
mod graph;
mod model;
mod pipeline;
mod refine;
mod response;
mod rollup;
mod settings;

pub use bm25::{bm25_idf, bm25_length_norm, bm25_term_score, bm25_tf_score, Bm25Params};
pub use embed::{embed_with_timeout, Embed};
pub use error::{SettingsError, SettingsErrorKind};
pub use fusion::{convex, fuse, normalize_top, rrf, FusedFragment, ListRank};
pub use graph::{
    apply_boost, boost, boost_with, community_list, entity_list, neighbour_list, Boost, BoostEntry,
    BoostParams, BoostReport, BoostScratch, Graph, GraphAccess, GraphSettings, KindWeights,
    LinkOrder, RelationKind, Via, DEFAULT_BOOST_SEEDS, DEFAULT_DAMPING, DEFAULT_EPSILON,
    DEFAULT_FAN_OUT, DEFAULT_ITERATIONS, DEFAULT_PUSH_THRESHOLD, KIND_COUNT,
};
pub use model::{
    Channel, Envelope, Extent, FragmentKey, Query, RankedList, ScoredFragment, SourceKey,
};
pub use pipeline::{
    search, search_with, ChannelOutcome, FragmentMeta, GraphState, Retriever, SourceView,
    Stopwatch, BOOST_STAGE,
};
pub use refine::{
    apply_filter, apply_rerank, collapse_near_duplicates, comparable_score, content_tokens, facets,
    facets_of, filter_min_score, hamming, max_rrf_sum, merge_plugins, mmr, parse_date,
    personalization_lambda, personalize, preference_weights, recency_blend, recency_factor,
    reorder, rerank_plan, rrf_share, simhash, sort_by_date, Absorbed, Attr, Candidate,
    CollapseExplain, ComparableScore, DateExplain, DedupParams, Extensions, ExtrasFilter, Facet,
    FacetValue, Facets, Filtered, Interaction, MergedHit, MinScoreParams, MmrExplain, MmrParams,
    PersonalExplain, PersonalParams, PersonalSummary, Personalized, PluginHit, PluginList,
    PluginMergeExplain, PluginMergeParams, PluginRank, PluginRetriever, QueryGate, Ranked,
    RecencyExplain, RecencyParams, RefineSettings, Refinement, RerankBackend, RerankExplain,
    RerankMode, RerankPlan, Reranker, Similarity, SortOrder, UserProfile, CATALOG_MAX_DEPTH,
    CATALOG_MIN_DEPTH, CATALOG_RERANK_HEAD, DEFAULT_FROZEN_HEAD,
    DEFAULT_INTERACTION_HALF_LIFE_DAYS, DEFAULT_MIN_SCORE, DEFAULT_MMR_DEPTH, DEFAULT_MMR_LAMBDA,
    DEFAULT_PERSONAL_LAMBDAS, DEFAULT_PLUGIN_DEPTH, DEFAULT_RECENCY_BLEND,
    DEFAULT_RECENCY_HALF_LIFE_DAYS, DEFAULT_REFINE_TIMEOUT_MS, DEFAULT_RERANK_HEAD,
    DEFAULT_SIMHASH_MAX_DISTANCE, DEFAULT_SIMHASH_SHINGLE, NODE_ID_KEY,
};
pub use response::{
    BoostDiagnostics, ChannelReport, ChannelStatus, Diagnostics, Explain, ExplainPart, Hint, Hit,
    RefineReport, SearchResponse, StageIssue, StageTime,
};
pub use rollup::{rollup, rollup_with_owners, RollupPart, SourceScore};
pub use settings::{
    levenshtein, EmbedBackend, EmbedSettings, FinderSettings, Fusion, IndexSettings,
    LexicalSettings, Settings, StorageBackend, StorageSettings, TrigramMode, VectorSettings,
    DEFAULT_ALPHA, DEFAULT_B, DEFAULT_EF_SEARCH, DEFAULT_FRAGMENT_MAX_CHARS, DEFAULT_FTS_LIST_SIZE,
    DEFAULT_K1, DEFAULT_MAX_HINTS, DEFAULT_MAX_VECTOR_DISTANCE, DEFAULT_QUERY_EMBED_TIMEOUT_MS,
    DEFAULT_RRF_K, DEFAULT_SUMMARY_MAX_CHARS, DEFAULT_VEC_LIST_SIZE, LANGUAGES,
};

/// A hash map for the query path's keys (fragment and source keys are hashes already, so
/// SipHash's protection buys nothing there): rustc's Fx hash.
pub type FastMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// A hash set of the query path's keys, hashed as [`FastMap`]'s.
pub type FastSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;
