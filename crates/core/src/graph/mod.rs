//! The relation graph and the boost it gives search hits (personalized PageRank).
//!
//! Storage builds a [`Graph`] once from `(from, to, kind)` edges over dense node ids; each query
//! runs [`boost`] from its fused hits with the kind weights and parameters of its settings.
//! Nothing here knows what a node is: callers map fragment keys to ids and back.

mod adjacency;
mod boost;
mod kind;
mod scratch;
mod settings;
mod stage;

pub use adjacency::Graph;
pub use boost::{
    boost, boost_with, Boost, BoostEntry, BoostParams, Via, DEFAULT_DAMPING, DEFAULT_EPSILON,
    DEFAULT_ITERATIONS, DEFAULT_PUSH_THRESHOLD,
};
pub use kind::{KindWeights, RelationKind, KIND_COUNT};
pub use scratch::BoostScratch;
pub use settings::{
    GraphSettings, LinkOrder, DEFAULT_BOOST_SEEDS, DEFAULT_FAN_OUT, DEFAULT_MAX_ALIAS_DF,
};
pub use stage::{
    apply_boost, community_list, entity_list, named_allowed, neighbour_list, BoostReport,
    GraphAccess,
};
