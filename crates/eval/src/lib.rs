//! Finder's evaluation harness: BEIR datasets and qrels, long queries built from a vault's links, trec_eval-style metrics, and reports.
//!
//! Metrics, datasets and reports are pure or file-reading only; [`evaluate`] indexes a corpus
//! (into a cache keyed by its content) and runs every judged query through the same pipeline
//! the CLI uses.

mod dataset;
mod error;
mod links;
mod metrics;
mod report;
mod runner;

pub use dataset::{corpus_fingerprint, Dataset, Query};
pub use error::EvalError;
pub use links::links_dataset;
pub use metrics::{mrr_at, ndcg_at, percentile, recall_at, Metrics, QueryMetrics};
pub use report::{note_degraded, LatencyRecorder, Percentiles, Report, RunReport};
pub use runner::{cache_dir, check_minimums, evaluate, presets, EvalOptions, Queries, RunSpec};
