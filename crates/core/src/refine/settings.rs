//! The `[refine]` settings section: which refinement stages run after rollup, and their
//! constants. Every key is query-time (`--set refine.key=value`, per request).

use serde::{Deserialize, Serialize};

use super::{
    DedupParams, MmrParams, PersonalParams, PluginMergeParams, RecencyParams, RerankMode,
    DEFAULT_FROZEN_HEAD, DEFAULT_INTERACTION_HALF_LIFE_DAYS, DEFAULT_MIN_SCORE, DEFAULT_MMR_LAMBDA,
    DEFAULT_PERSONAL_LAMBDAS, DEFAULT_RECENCY_BLEND, DEFAULT_RECENCY_HALF_LIFE_DAYS,
    DEFAULT_SIMHASH_MAX_DISTANCE, DEFAULT_SIMHASH_SHINGLE,
};
use crate::error::{SettingsError, SettingsErrorKind};

/// Positions MMR diversifies, from the top of the ranking.
pub const DEFAULT_MMR_DEPTH: usize = 50;
/// Hits each plugin retriever is asked for.
pub const DEFAULT_PLUGIN_DEPTH: usize = 50;
/// How long a reranker or plugin call may take before its stage is skipped.
pub const DEFAULT_REFINE_TIMEOUT_MS: u64 = 2_000;

/// The order of the ranking before the later stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    /// By score (with the recency blend when it is on).
    #[default]
    Score,
    /// Newest first; undated sources last. Replaces the recency blend.
    Date,
}

/// Which reranker the bounded rerank stage uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankBackend {
    /// No rerank stage.
    #[default]
    None,
    /// A `/rerank` server (TEI, Cohere, Jina shapes) at `rerank_url`.
    Http,
    /// Cosine of the query and full fragment text under the embedding model.
    Local,
}

/// Refinement stages (DESIGN step 5), in the order they run: recency blend or date order,
/// near-duplicate collapse, bounded rerank, plugin merge, MMR, late `extras` filters,
/// personalization, `min_score`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RefineSettings {
    /// Blend the score with the source date's recency (only when some hit is dated).
    pub recency: bool,
    pub recency_blend: f64,
    pub recency_half_life_days: f64,
    /// `score` or `date`.
    pub sort: SortOrder,
    /// Collapse near-duplicates by simhash.
    pub dedup: bool,
    pub simhash_shingle: usize,
    pub simhash_max_distance: u32,
    /// `none`, `http` or `local`.
    pub rerank: RerankBackend,
    /// `default` (rerank the first 10) or `catalog` (retrieve at least 50, rerank 50).
    pub rerank_mode: RerankMode,
    /// The `/rerank` endpoint of the `http` reranker.
    pub rerank_url: String,
    /// Model name sent to the reranker (empty: none sent).
    pub rerank_model: String,
    /// Timeout of one reranker or plugin call.
    pub timeout_ms: u64,
    /// Plugin retriever URLs, merged under the frozen core head.
    pub plugins: Vec<String>,
    pub plugin_depth: usize,
    pub frozen_head: usize,
    /// Diversify the head by maximal marginal relevance.
    pub mmr: bool,
    pub mmr_lambda: f64,
    pub mmr_depth: usize,
    /// Apply the query's `extras` filters inside every channel (before ranking, page kept
    /// full) instead of late (after rerank, no refill).
    pub prefilter: bool,
    /// Drop hits whose comparable relevance is below this (0 keeps all).
    pub min_score: f64,
    pub personal_lambdas: [f64; 4],
    pub interaction_half_life_days: f64,
    pub catalog_only: bool,
    /// JSON Lines file of users, preferences and interactions, read when the index is
    /// opened (relative paths: the current folder, then the index folder). Empty: none.
    pub profiles: String,
}

impl Default for RefineSettings {
    fn default() -> Self {
        RefineSettings {
            recency: true,
            recency_blend: DEFAULT_RECENCY_BLEND,
            recency_half_life_days: DEFAULT_RECENCY_HALF_LIFE_DAYS,
            sort: SortOrder::Score,
            // Off by default: on SciFact and HotpotQA it folded nothing and cost ~11 ms p50
            // (docs/perf/refine-defaults.md); corpora with copies turn it on.
            dedup: false,
            simhash_shingle: DEFAULT_SIMHASH_SHINGLE,
            simhash_max_distance: DEFAULT_SIMHASH_MAX_DISTANCE,
            rerank: RerankBackend::None,
            rerank_mode: RerankMode::Default,
            rerank_url: String::new(),
            rerank_model: String::new(),
            timeout_ms: DEFAULT_REFINE_TIMEOUT_MS,
            plugins: Vec::new(),
            plugin_depth: DEFAULT_PLUGIN_DEPTH,
            frozen_head: DEFAULT_FROZEN_HEAD,
            mmr: false,
            mmr_lambda: DEFAULT_MMR_LAMBDA,
            mmr_depth: DEFAULT_MMR_DEPTH,
            prefilter: false,
            min_score: DEFAULT_MIN_SCORE,
            personal_lambdas: DEFAULT_PERSONAL_LAMBDAS,
            interaction_half_life_days: DEFAULT_INTERACTION_HALF_LIFE_DAYS,
            catalog_only: false,
            profiles: String::new(),
        }
    }
}

impl RefineSettings {
    pub fn recency_params(&self) -> RecencyParams {
        RecencyParams {
            recency_blend: self.recency_blend,
            recency_half_life_days: self.recency_half_life_days,
        }
    }

    pub fn dedup_params(&self) -> DedupParams {
        DedupParams {
            simhash_shingle: self.simhash_shingle,
            simhash_max_distance: self.simhash_max_distance,
        }
    }

    pub fn plugin_params(&self) -> PluginMergeParams {
        PluginMergeParams {
            frozen_head: self.frozen_head,
        }
    }

    pub fn mmr_params(&self) -> MmrParams {
        MmrParams {
            mmr_lambda: self.mmr_lambda,
        }
    }

    pub fn personal_params(&self) -> PersonalParams {
        PersonalParams {
            personal_lambdas: self.personal_lambdas,
            interaction_half_life_days: self.interaction_half_life_days,
            catalog_only: self.catalog_only,
        }
    }

    /// Checks what the settings table's ranges cannot say (the URLs), naming the `refine.*`
    /// key.
    pub fn validate(&self, origin: &str) -> Result<(), SettingsError> {
        if self.rerank == RerankBackend::Http && !is_http_url(&self.rerank_url) {
            return Err(invalid(
                origin,
                "rerank_url",
                &format!("{:?}", self.rerank_url),
                "an http(s) URL when refine.rerank = \"http\"",
            ));
        }
        if let Some(bad) = self.plugins.iter().find(|u| !is_http_url(u)) {
            return Err(invalid(
                origin,
                "plugins",
                &format!("{bad:?}"),
                "a list of http(s) URLs",
            ));
        }
        Ok(())
    }
}

fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

fn invalid(origin: &str, field: &str, value: &str, expected: &str) -> SettingsError {
    SettingsError {
        origin: origin.to_string(),
        key: format!("{}.{field}", super::SECTION),
        kind: SettingsErrorKind::Invalid {
            value: value.to_string(),
            expected: expected.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        RefineSettings::default().validate("defaults").unwrap();
    }

    #[test]
    fn http_rerank_needs_a_url_and_plugins_must_be_urls() {
        let s = RefineSettings {
            rerank: RerankBackend::Http,
            ..RefineSettings::default()
        };
        assert_eq!(s.validate("t").unwrap_err().key, "refine.rerank_url");
        let s = RefineSettings {
            plugins: vec!["ftp://x".into()],
            ..RefineSettings::default()
        };
        assert_eq!(s.validate("t").unwrap_err().key, "refine.plugins");
    }

    #[test]
    fn keys_are_reachable_with_set_and_suggested() {
        let mut s = crate::settings::Settings::default();
        s.set("refine.mmr=true").unwrap();
        s.set("refine.sort=date").unwrap();
        s.set("refine.plugins=[\"http://localhost:9/p\"]").unwrap();
        s.set("refine.personal_lambdas=[0.9, 0.5, 0.2, 0.0]")
            .unwrap();
        assert!(s.refine.mmr);
        assert_eq!(s.refine.sort, SortOrder::Date);
        assert_eq!(s.refine.plugins.len(), 1);
        assert!(crate::settings::Settings::keys().contains(&"refine.min_score".to_string()));
        let err = s.set("refine.mmr_lamda=0.5").unwrap_err();
        assert_eq!(
            err.kind,
            SettingsErrorKind::UnknownKey {
                suggestion: Some("refine.mmr_lambda".into())
            }
        );
        let err = s.set("refine.min_score=1.5").unwrap_err();
        assert_eq!(err.key, "refine.min_score");
        let err = s.set("refine.rerank=http").unwrap_err();
        assert_eq!(err.key, "refine.rerank_url");
    }

    #[test]
    fn ranges_name_the_key() {
        let settings = crate::Settings {
            refine: RefineSettings {
                mmr_depth: 0,
                ..RefineSettings::default()
            },
            ..crate::Settings::default()
        };
        assert_eq!(settings.validate("t").unwrap_err().key, "refine.mmr_depth");
    }
}
