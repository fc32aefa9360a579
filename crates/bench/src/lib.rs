//! finder-bench: the Rust half of the cross-system benchmark.
//!
//! - [`gen`]: a deterministic, streaming synthetic dataset generator;
//! - [`embed`]: a BEIR folder turned into a dataset with Finder's own MiniLM vectors;
//! - [`run`]: Finder indexed from a dataset and timed per query, per mode;
//! - [`pg`]: the same over the PostgreSQL backend;
//! - [`dataset`]: the dataset folder every system reads (the contract with the Python side).

pub mod dataset;
pub mod embed;
pub mod embed_speed;
pub mod gen;
pub mod pg;
pub mod rng;
pub mod run;
