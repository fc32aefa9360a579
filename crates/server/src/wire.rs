//! Request and response bodies of the API (the MCP tools take the same shapes).

use std::collections::BTreeMap;

use finder_core::{Diagnostics, Extent, Hit};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most hits one request may ask for.
pub const MAX_LIMIT: usize = 100;
/// Deepest offset one request may ask for.
pub const MAX_OFFSET: usize = 10_000;
pub const DEFAULT_LIMIT: usize = 10;
pub const DEFAULT_BUDGET_CHARS: usize = 6_000;
pub const MIN_BUDGET_CHARS: usize = 200;
pub const MAX_BUDGET_CHARS: usize = 200_000;
/// Characters per token assumed when a budget is given in tokens.
pub const CHARS_PER_TOKEN: usize = 4;

fn default_limit() -> usize {
    DEFAULT_LIMIT
}

/// Query-time setting overrides: dotted key to value, e.g. `{"lexical.k1": 0.9}`.
pub type Overrides = BTreeMap<String, Value>;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    pub query: String,
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub settings: Overrides,
    /// The query's vector, instead of embedding `query` (needed with the `precomputed`
    /// embedding backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<Vec<f32>>,
    /// `extras` equality filters (case-insensitive, all must hold), applied after rerank
    /// without refilling the page, or inside every channel with `prefilter`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filters: BTreeMap<String, String>,
    #[serde(default)]
    pub prefilter: bool,
    /// Only these source ids take part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Vec<String>>,
    /// Personalise for this user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `score` (default) or `date`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    /// Drop hits whose comparable `relevance` is below this (0–1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
}

/// Counts over the returned hits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Facets {
    /// Hits per tag.
    pub tags: BTreeMap<String, usize>,
    /// Hits per value, per `extras` key.
    pub extras: BTreeMap<String, BTreeMap<String, usize>>,
}

impl Facets {
    pub fn count(hits: &[Hit]) -> Facets {
        let mut facets = Facets::default();
        for hit in hits {
            for tag in &hit.envelope.tags {
                *facets.tags.entry(tag.clone()).or_default() += 1;
            }
            for (key, value) in &hit.envelope.extras {
                *facets
                    .extras
                    .entry(key.clone())
                    .or_default()
                    .entry(value.clone())
                    .or_default() += 1;
            }
        }
        facets
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchResult {
    pub space: String,
    pub query: String,
    pub offset: usize,
    pub limit: usize,
    pub hits: Vec<Hit>,
    pub facets: Facets,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    pub query: String,
    /// Most characters of evidence (default 6000).
    #[serde(default)]
    pub budget_chars: Option<usize>,
    /// Alternatively, a budget in tokens (about 4 characters each).
    #[serde(default)]
    pub budget_tokens: Option<usize>,
    /// Sources to draw evidence from (default 10).
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default)]
    pub settings: Overrides,
}

/// One cited passage of context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextPiece {
    /// One-based citation number, as it appears in `text`.
    pub n: usize,
    pub source_id: String,
    pub title: String,
    pub path: String,
    pub extent: Extent,
    /// The passage's fragment score (before rollup).
    pub score: f64,
    /// Rank of its source in the search.
    pub source_rank: usize,
    pub text: String,
    /// The passage was cut to fit the budget.
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextResult {
    pub space: String,
    pub query: String,
    pub budget_chars: usize,
    /// Characters of `text`.
    pub used_chars: usize,
    pub pieces: Vec<ContextPiece>,
    /// Passages that matched but did not fit the budget.
    pub omitted: usize,
    /// The pieces rendered for a prompt, each headed by `[n] title — id Lx-y`.
    pub text: String,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RecommendRequest {
    /// The source id to find neighbours of.
    pub target: String,
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default)]
    pub settings: Overrides,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecommendResult {
    pub space: String,
    pub target: String,
    /// How neighbours were found: `lexical` (the target's title and summary as a query).
    pub basis: String,
    /// The query text the target turned into.
    pub query: String,
    pub hits: Vec<Hit>,
    pub diagnostics: Diagnostics,
}

/// A document written through the API (the JSON Lines record shape, without `id`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    #[serde(default)]
    pub title: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extras: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteResult {
    pub space: String,
    pub id: String,
    /// `added`, `updated`, `unchanged` or `deleted`.
    pub result: String,
    /// Sources in the space after the write.
    pub sources: u64,
    /// Seconds since the Unix epoch of the commit that holds the write.
    pub committed_at: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredDocument {
    pub space: String,
    pub id: String,
    pub document: Document,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusResult {
    pub space: String,
    pub built: bool,
    /// True while a layer (vectors) is still being built; lexical search answers meanwhile.
    pub building: bool,
    /// `{done, total}` of the vector build, when the index reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Documents written through the API.
    pub api_documents: usize,
    /// What `finder status --json` shows; `null` before the first build.
    pub index: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpaceSummary {
    pub name: String,
    pub built: bool,
    pub sources: u64,
}
