//! What is stored beside each fragment (its extent and heading) and, on a source's first
//! fragment, the source record; and the commit payload that describes the whole index.

use finder_core::{Envelope, Extent, IndexSettings};
use serde::{Deserialize, Serialize};

/// Stored on ordinal 0 of every source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SourceRecord {
    pub id: String,
    pub origin: String,
    pub hash: String,
    pub envelope: Envelope,
    pub summary: String,
    pub fragments: u32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entity: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relations: Vec<(String, String)>,
}

/// The `meta` field of a fragment document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FragmentRecord {
    pub extent: Extent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceRecord>,
}

/// Counts of one indexing run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    /// Sources whose input failed this run; their indexed version was kept.
    pub kept: u64,
    pub problems: u64,
}

/// Written atomically with every commit (tantivy's commit payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub format: u32,
    pub settings: IndexSettings,
    pub sources: u64,
    pub fragments: u64,
    /// Inputs (origins) indexed so far.
    pub origins: Vec<String>,
    pub last_run: RunCounts,
    /// Seconds since the Unix epoch.
    pub committed_at: u64,
    /// Counts the commits that changed what the index holds (a run that changed nothing
    /// keeps it): derived layers (the graph) record the generation they were built from, so
    /// a run killed between the commit and their rebuild is caught by the next run.
    #[serde(default)]
    pub generation: u64,
    /// Sources with a date (`None`: an index written before this was counted).
    #[serde(default)]
    pub dated: Option<u64>,
}

pub(crate) const FORMAT: u32 = 1;
