//! Finder over PostgreSQL + pgvector: the same pipeline as the embedded index, with sources,
//! fragments, term statistics, vectors and relations in PostgreSQL, sharded over several
//! databases and read from streaming replicas.
//!
//! - [`index_inputs`] writes a run: the embedded engine's ingestion and analyzers, so the
//!   stored terms and lengths are the ones the embedded index would hold; incremental by
//!   content hash, one transaction per shard.
//! - [`PgFinder`] is a stateless query node: it implements `finder_core::Retriever` with BM25
//!   computed in SQL from the stored statistics (global over the shards) and nearest
//!   neighbours from pgvector's HNSW index, reordered by exact cosine; fusion, rollup and
//!   refinement are `finder_core::search` unchanged.
//! - [`NodeVectors`] lets a long-running query node walk the shards' vectors over HNSW
//!   graphs of its own, kept up to date from the changed sources ([`PgFinder::walk_on_node`]).
//! - [`PgConfig`] names the shards, each with a write URL and read URLs.
//!
//! `docs/SCALING.md` tells how to run it and what is not done yet.

mod cluster;
mod error;
mod finder;
mod graph;
mod node;
mod schema;
mod search;
mod terms;
#[cfg(feature = "testing")]
pub mod testing;
mod writer;

pub use cluster::{shard_of, with_database, PgConfig, ShardUrls};
pub use error::{PgError, Result};
pub use finder::PgFinder;
pub use node::{NodeVectors, SyncReport};
pub use schema::RunRecord;
pub use writer::{
    index_changed, index_inputs, index_inputs_with, read_documents, write_documents,
    DocumentChange, PgFollower, PgRunReport, API_ORIGIN,
};
