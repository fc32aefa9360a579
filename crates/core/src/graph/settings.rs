//! The `[graph]` settings: how the graph is built from the sources (read by `finder index`,
//! which rebuilds the graph on every run) and how queries use it (query-time).

use serde::{Deserialize, Serialize};

use super::boost::{BoostParams, DEFAULT_EPSILON, DEFAULT_ITERATIONS, DEFAULT_PUSH_THRESHOLD};
use super::kind::{KindWeights, RelationKind};

/// Seeds the boost restarts from: the best fused fragments only.
pub const DEFAULT_BOOST_SEEDS: usize = 20;
/// Neighbours taken per seed by the neighbours channel.
pub const DEFAULT_FAN_OUT: usize = 5;
/// Largest share of fragments a name may be found in and still link. A name that a
/// five-hundredth of the passages mention is a topic word ("Anxiety", "T-cell activation"), not
/// a name; its mentions drew general passages into SciFact's and the vaults' results
/// (docs/perf/alias-frequency.md).
pub const DEFAULT_MAX_ALIAS_DF: f64 = 0.002;

/// Half-life of the events channel's decay, in days.
pub const DEFAULT_EVENT_HALF_LIFE_DAYS: f64 = 365.0;

/// Wiki-link label order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkOrder {
    /// `[[target|label]]` (Obsidian, SilverBullet).
    TargetFirst,
    /// `[[label|target]]` (Dendron).
    LabelFirst,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GraphSettings {
    // Build (read by `finder index`).
    /// Extract links, tags and mentions and build the graph.
    pub build: bool,
    pub link_order: LinkOrder,
    /// A fragment naming a source's title (or an entity's name or alias) gets a `mentions` edge.
    pub mentions: bool,
    /// Each source title becomes an entity with an `is` edge to the source's first fragment
    /// (for BEIR-layout corpora of titled paragraphs).
    pub link_titles: bool,
    /// Shortest alias matched, in letters and digits.
    pub min_alias_chars: usize,
    /// Aliases found in more than this share of fragments never link.
    pub max_alias_df: f64,

    // Query time.
    /// Personalised-PageRank boost after fusion (adds, never gates).
    pub boost: bool,
    pub damping: f64,
    pub iterations: u32,
    pub epsilon: f64,
    /// Best fused fragments used as restart seeds.
    pub seeds: usize,
    /// Channel: sources whose title or alias the query names, and named entities.
    pub entities: bool,
    /// Only entities with one of these labels (`label`/`type` in their extras) are named by
    /// queries; empty for all. Case-insensitive.
    pub node_labels: Vec<String>,
    /// Channel: one hop from the best seeds.
    pub neighbours: bool,
    pub fan_out: usize,
    /// Channel: members of the seeds' hubs (tags, labels), weighted `1/log2(2+degree)`.
    pub communities: bool,
    /// Channel: the fused candidates again, weighted by `0.5^(age_days / half_life)` of their
    /// source's date (undated keeps weight 1).
    pub events: bool,
    pub event_half_life_days: f64,
    /// Edge weights by relation kind (0 removes the kind from the boost).
    pub weight_mentions: f64,
    pub weight_links_to: f64,
    pub weight_tagged: f64,
    pub weight_next: f64,
    pub weight_is: f64,
    pub weight_member_of: f64,
    pub weight_relates: f64,
}

impl Default for GraphSettings {
    fn default() -> Self {
        GraphSettings {
            build: true,
            link_order: LinkOrder::TargetFirst,
            mentions: true,
            link_titles: false,
            min_alias_chars: 4,
            max_alias_df: DEFAULT_MAX_ALIAS_DF,
            boost: true,
            damping: super::boost::DEFAULT_DAMPING,
            iterations: DEFAULT_ITERATIONS,
            epsilon: DEFAULT_EPSILON,
            seeds: DEFAULT_BOOST_SEEDS,
            entities: true,
            node_labels: Vec::new(),
            neighbours: true,
            fan_out: DEFAULT_FAN_OUT,
            communities: false,
            events: false,
            event_half_life_days: DEFAULT_EVENT_HALF_LIFE_DAYS,
            weight_mentions: 1.0,
            weight_links_to: 1.0,
            weight_tagged: 0.5,
            // Reading order within a source would only shuffle its own passages (and hints).
            weight_next: 0.0,
            weight_is: 1.0,
            weight_member_of: 0.5,
            weight_relates: 0.5,
        }
    }
}

impl GraphSettings {
    /// The per-kind weights the boost uses.
    pub fn weights(&self) -> KindWeights {
        KindWeights::default()
            .with(RelationKind::Mentions, self.weight_mentions)
            .with(RelationKind::LinksTo, self.weight_links_to)
            .with(RelationKind::Tagged, self.weight_tagged)
            .with(RelationKind::Next, self.weight_next)
            .with(RelationKind::Is, self.weight_is)
            .with(RelationKind::MemberOf, self.weight_member_of)
            .with(RelationKind::Relates, self.weight_relates)
    }

    /// Whether a named node with this label may be named under `node_labels`.
    pub fn label_allowed(&self, label: Option<&str>) -> bool {
        self.node_labels.is_empty()
            || label.is_some_and(|l| self.node_labels.iter().any(|n| n.eq_ignore_ascii_case(l)))
    }

    pub fn boost_params(&self) -> BoostParams {
        BoostParams {
            damping: self.damping,
            iterations: self.iterations,
            epsilon: self.epsilon,
            push_threshold: DEFAULT_PUSH_THRESHOLD,
        }
    }
}
