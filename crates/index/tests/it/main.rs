//! Integration tests of the index crate: the BM25 scorer against oracles, incremental and
//! atomic indexing, extents, and query-time settings.

mod bad_inputs;
mod bm25;
mod focused;
mod formats;
mod graph;
mod graph_incremental;
mod graph_layer;
mod indexing;
mod pages;
mod readers;
mod support;
mod vectors;
