//! Finder's evaluation harness: BEIR datasets and qrels, trec_eval-style metrics, and reports.
//!
//! Everything here is pure or file-reading only; running queries against an index is left to
//! the caller, which feeds rankings into [`QueryMetrics::compute`] and timings into a
//! [`LatencyRecorder`], then assembles a [`Report`].

mod dataset;
mod error;
mod metrics;
mod report;

pub use dataset::{corpus_fingerprint, Dataset, Query};
pub use error::EvalError;
pub use metrics::{mrr_at, ndcg_at, percentile, recall_at, Metrics, QueryMetrics};
pub use report::{LatencyRecorder, Percentiles, Report, RunReport};
