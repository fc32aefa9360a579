//! Request and response bodies of the API (the MCP tools take the same shapes).

use std::collections::BTreeMap;

use finder_core::{Diagnostics, Extent, Hit};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

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

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    #[schema(max_length = 2000)]
    pub query: String,
    #[serde(default = "default_limit")]
    #[schema(minimum = 1, maximum = 100, default = 10)]
    pub limit: usize,
    #[serde(default)]
    #[schema(maximum = 10000, default = 0)]
    pub offset: usize,
    /// Query-time setting overrides by dotted key, e.g. `{"lexical.k1": 0.9}`; each value is
    /// checked against its range.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub settings: Overrides,
    /// The query's vector, used instead of embedding `query` (required by the `precomputed`
    /// embedding backend; it must come from the model the index's vectors were built with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 4096)]
    pub vector: Option<Vec<f32>>,
    /// `extras` equality filters: case-insensitive, all must hold. Applied after rerank; the
    /// page is not refilled and `diagnostics.refine.filtered_out` counts what they removed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filters: BTreeMap<String, String>,
    /// Only sources carrying every one of these tags (in any case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Only sources dated on or after this (`2024-05-01`, or a date and time); undated
    /// sources are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_from: Option<String>,
    /// Only sources dated on or before this; a bare date includes its whole day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_to: Option<String>,
    /// Only sources whose path starts with this (a folder such as `journal/2024/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Apply `filters`, `tags`, the dates and `path_prefix` inside every channel before
    /// ranking, so the page stays full.
    #[serde(default)]
    pub prefilter: bool,
    /// Only these source ids take part; every channel is restricted before ranking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 10000)]
    pub scope: Option<Vec<String>>,
    /// Personalise for this user (profiles from `refine.profiles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `score` (default) or `date` (newest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    /// Drop hits whose comparable `relevance` is below this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1)]
    pub min_score: Option<f64>,
}

/// Counts over the returned hits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SearchResult {
    pub space: String,
    pub query: String,
    pub offset: usize,
    pub limit: usize,
    pub hits: Vec<Hit>,
    pub facets: Facets,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    #[schema(max_length = 2000)]
    pub query: String,
    /// Most characters of evidence.
    #[serde(default)]
    #[schema(minimum = 200, maximum = 200000, default = 6000)]
    pub budget_chars: Option<usize>,
    /// Alternatively, a budget in tokens (about 4 characters each).
    #[serde(default)]
    pub budget_tokens: Option<usize>,
    /// Sources to draw evidence from.
    #[serde(default = "default_limit")]
    #[schema(minimum = 1, maximum = 100, default = 10)]
    pub limit: usize,
    /// Query-time setting overrides by dotted key.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub settings: Overrides,
}

/// One cited passage of context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecommendRequest {
    /// The source id to find neighbours of.
    pub target: String,
    #[serde(default = "default_limit")]
    #[schema(minimum = 1, maximum = 100, default = 10)]
    pub limit: usize,
    /// Query-time setting overrides by dotted key.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub settings: Overrides,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StoredDocument {
    pub space: String,
    pub id: String,
    pub document: Document,
}

/// A source's indexed lines, numbered as in the file or record: what a hint's line range
/// points at (`GET …/documents/{id}?lines=40-80`, the MCP `get` tool, `finder get`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
pub struct SourceLines {
    pub space: String,
    pub id: String,
    pub title: String,
    pub path: String,
    /// The first and last line shown (0 and 0 when the range holds no indexed line).
    pub line_start: u32,
    pub line_end: u32,
    /// The last line the index holds of this source.
    pub last_line: u32,
    /// The range held more than one answer shows; read on from `line_end + 1`.
    pub truncated: bool,
    /// The lines, each as `<number>  <text>`, one per line. Lines no passage holds (front
    /// matter) are left out, so numbers may jump.
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StatusResult {
    pub space: String,
    pub built: bool,
    /// True while an indexing run or a vector build is under way or due; what is already
    /// committed answers meanwhile.
    pub building: bool,
    /// Where the run under way is: the indexing run's when one runs, else the vector build's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Documents written through the API.
    pub api_documents: usize,
    /// What `finder status --json` shows; `null` before the first build.
    #[schema(value_type = Option<Object>)]
    pub index: Value,
}

/// A run's progress, for a progress bar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// `indexing` (the words, pages and graph) or `vectors`.
    pub layer: String,
    /// The stage within it: `reading`, `committing`, `pages`, `graph` while indexing;
    /// `queued`, `embedding`, `graph` for vectors.
    pub stage: String,
    pub done: u64,
    /// Items of the stage in all; unknown while an indexing run reads its inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Items per second since the stage began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Seconds the stage still needs at that rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_left: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SpaceSummary {
    pub name: String,
    pub built: bool,
    pub sources: u64,
}

/// An error: a stable code, a message for people and structured details.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code: invalid_request, invalid_setting, index_time_setting,
    /// query_too_long, payload_too_large, unauthorized, not_found, method_not_allowed,
    /// unknown_space, index_not_built, document_not_found, unknown_target, invalid_document,
    /// index_busy, timeout, overloaded, storage_unavailable, forbidden, internal.
    pub code: String,
    /// What went wrong and what to do, for people.
    pub message: String,
    /// Structured context: for settings `key`, `value`, `range` or `suggestion`; for limits
    /// the limit; for spaces the space.
    #[schema(value_type = Object)]
    pub details: Value,
}

/// The spaces a token may use.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SpaceList {
    pub spaces: Vec<SpaceSummary>,
}

/// Liveness.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
    pub version: String,
    /// The spaces, when they are open to every request (empty when the server has tokens).
    pub spaces: Vec<String>,
}
