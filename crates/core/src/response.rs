//! What a search returns: hits with their hints and explain, facets, and the diagnostics of
//! each channel and stage.

use serde::{Deserialize, Serialize};

use crate::fusion::ListRank;
use crate::model::{Channel, Envelope, Extent};
use crate::refine::{Facets, Refinement};

/// A passage of a hit that tells the client where to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Hint {
    pub preview: String,
    pub extent: Extent,
    /// The fragment's final score before rollup.
    pub score: f64,
}

/// How one fragment contributed to its source's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExplainPart {
    /// Fragment ordinal within its source.
    pub fragment: u32,
    /// Rollup weight (1, 0.1, 0.05 by default) applied to this fragment.
    pub weight: f64,
    /// The fragment's fused score (RRF seed).
    pub seed: f64,
    /// Rank and RRF share in each list that returned the fragment.
    pub lists: Vec<ListRank>,
    /// What the graph boost added to the seed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub boost: f64,
    /// The strongest path that carried the boost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Why a hit scored what it scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Explain {
    /// Sum of the weighted parts, before normalisation.
    pub raw: f64,
    /// Divisor that made the top hit 1.0.
    pub normalized_by: f64,
    /// The best fragments of the source, in rollup order.
    pub parts: Vec<ExplainPart>,
    /// Fragments of the source that matched but fell outside the rollup weights.
    pub other_fragments: usize,
    /// What each refinement stage did to the hit, in the order they ran.
    #[serde(default, skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub refinements: Vec<Refinement>,
}

/// One ranked source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Hit {
    /// One-based position in the whole ranking (offset included).
    pub rank: usize,
    pub id: String,
    /// Score relative to the best hit of this query (top is 1.0).
    pub score: f64,
    /// Absolute relevance in [0, 1] that means the same across queries: the best fragment's
    /// reciprocal-rank sum over the largest sum the lists that ran could give.
    #[serde(default)]
    pub relevance: f64,
    pub envelope: Envelope,
    pub summary: String,
    pub hints: Vec<Hint>,
    pub explain: Explain,
}

/// What happened to a channel during one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ChannelStatus {
    #[default]
    Ran,
    Skipped,
    Degraded,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelReport {
    pub channel: Channel,
    pub status: ChannelStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub hits: usize,
    pub ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StageTime {
    pub stage: String,
    pub ms: f64,
}

/// What the graph boost did for one query.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BoostDiagnostics {
    pub status: ChannelStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Fused fragments used as restart seeds.
    pub seeds: usize,
    /// Entities the query named, seeded too.
    pub named: usize,
    /// Nodes the spread reached.
    pub touched: usize,
    /// Fragments brought in by the graph alone.
    pub added: usize,
    pub rounds: u32,
}

/// Per-response account of the pipeline.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Diagnostics {
    pub channels: Vec<ChannelReport>,
    /// Stages in the pipeline's order, each with its own time; channels a store ran at once
    /// overlap, so their times may add up to more than the query's.
    pub stages: Vec<StageTime>,
    pub total_ms: f64,
    /// Fragments that entered fusion.
    pub fused_fragments: usize,
    /// Sources after rollup, before paging.
    pub ranked_sources: usize,
    /// The graph boost: what it started from and reached, or why it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<BoostDiagnostics>,
    /// What the refinement stages removed, and the ones that could not run.
    #[serde(default)]
    pub refine: RefineReport,
}

/// Per-response account of the refinement stages.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RefineReport {
    /// Hits the late `extras` filters removed (the page is not refilled).
    pub filtered_out: usize,
    /// Hits the prefilter or scope removed from the channel lists (fragments).
    pub prefiltered: usize,
    /// Hits folded into a better-ranked near-duplicate.
    pub collapsed: usize,
    /// Hits below `refine.min_score`.
    pub below_min_score: usize,
    /// Whether personalization reordered the hits, and why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub personalization: Option<String>,
    /// Stages that were asked for but could not run (a reranker or plugin that failed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<StageIssue>,
}

/// A refinement stage that could not run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StageIssue {
    pub stage: String,
    pub reason: String,
}

impl Diagnostics {
    /// Channels that could not run as asked, with their reasons.
    pub fn degraded(&self) -> impl Iterator<Item = &ChannelReport> {
        self.channels
            .iter()
            .filter(|c| c.status == ChannelStatus::Degraded)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResponse {
    pub query: String,
    pub offset: usize,
    pub limit: usize,
    pub hits: Vec<Hit>,
    /// Counts per `extras` value and tag over the returned hits.
    #[serde(default, skip_deserializing)]
    pub facets: Facets,
    pub diagnostics: Diagnostics,
}
