//! The relation graph and the boost it gives search hits (personalized PageRank).
//!
//! Storage builds a [`Graph`] once from `(from, to, kind)` edges over dense node ids; each query
//! runs [`boost`] from its fused hits with the kind weights and parameters of its settings.
//! Nothing here knows what a node is: callers map fragment keys to ids and back.

mod adjacency;
mod boost;
mod kind;

pub use adjacency::Graph;
pub use boost::{
    boost, boost_with, Boost, BoostEntry, BoostParams, BoostScratch, Via, DEFAULT_DAMPING,
    DEFAULT_EPSILON, DEFAULT_ITERATIONS, DEFAULT_PUSH_THRESHOLD,
};
pub use kind::{KindWeights, RelationKind, KIND_COUNT};
