//! Refinement stages that run after rollup: recency blend and date order, near-duplicate
//! collapse, bounded rerank, plugin merge, MMR diversity, `extras` filters, personalization,
//! facets and a score that means the same across queries.
//!
//! Every stage is a pure function over a slice of [`Candidate`]s, best first, and returns the
//! new order as [`Ranked`] entries that point back into that slice by index, each with a
//! record of why it moved. The caller owns the data; [`reorder`] turns a stage's output into
//! the next stage's input. Nothing here reads a clock: the caller passes `now`.

mod comparable;
mod dedup;
mod extensions;
mod facets;
mod filter;
mod mmr;
mod personal;
mod plugin;
mod recency;
mod rerank;
mod run;
mod settings;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::Envelope;

pub use comparable::{
    comparable_score, filter_min_score, max_rrf_sum, rrf_share, ComparableScore, MinScoreParams,
    DEFAULT_MIN_SCORE,
};
pub use dedup::{
    collapse_near_duplicates, hamming, simhash, Absorbed, CollapseExplain, DedupParams,
    DEFAULT_SIMHASH_MAX_DISTANCE, DEFAULT_SIMHASH_SHINGLE,
};
pub use extensions::{Extensions, PluginHit, PluginRetriever, Reranker};
pub use facets::{facets, facets_of, Facet, FacetValue, Facets};
pub use filter::{apply_filter, Filtered, SourceFilter};
pub use mmr::{mmr, MmrExplain, MmrParams, Similarity, DEFAULT_MMR_LAMBDA};
pub use personal::{
    content_tokens, personalization_lambda, personalize, preference_weights, Attr, Interaction,
    PersonalExplain, PersonalParams, PersonalSummary, Personalized, QueryGate, UserProfile,
    DEFAULT_INTERACTION_HALF_LIFE_DAYS, DEFAULT_PERSONAL_LAMBDAS, NODE_ID_KEY,
};
pub use plugin::{
    merge_plugins, MergedHit, PluginList, PluginMergeExplain, PluginMergeParams, PluginRank,
    DEFAULT_FROZEN_HEAD,
};
pub use recency::{
    parse_date, parse_date_bound, recency_blend, recency_factor, sort_by_date, DateExplain,
    RecencyExplain, RecencyParams, DEFAULT_RECENCY_BLEND, DEFAULT_RECENCY_HALF_LIFE_DAYS,
};
pub use rerank::{
    apply_rerank, rerank_plan, RerankExplain, RerankMode, RerankPlan, CATALOG_MAX_DEPTH,
    CATALOG_MIN_DEPTH, CATALOG_RERANK_HEAD, DEFAULT_RERANK_HEAD,
};
pub(crate) use run::{base_depth, Level, Refiner};
pub use settings::{
    RefineSettings, RerankBackend, SortOrder, DEFAULT_MMR_DEPTH, DEFAULT_PLUGIN_DEPTH,
    DEFAULT_REFINE_TIMEOUT_MS,
};

/// The settings section the refinement keys are reported under in validation errors.
pub const SECTION: &str = "refine";

/// What a refinement stage sees of one ranked source. It borrows everything but its score,
/// so building a slice of candidates copies no text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate<'a> {
    /// The source id shown to the user (absorbed duplicates are reported by it).
    pub id: &'a str,
    /// The score so far; higher is better.
    pub score: f64,
    /// Source date as Unix seconds; `None` when undated or unparsable.
    pub date: Option<i64>,
    /// Text used for near-duplicate and term similarity (summary or best fragment).
    pub text: &'a str,
    /// A precomputed 64-bit simhash of `text`; computed from `text` when `None`.
    pub simhash: Option<u64>,
    /// An embedding of the source (e.g. its best fragment's vector), for cosine similarity.
    pub vector: Option<&'a [f32]>,
    /// The envelope's scalar metadata.
    pub extras: &'a BTreeMap<String, String>,
    /// The envelope's tags.
    pub tags: &'a [String],
    /// The envelope's path (the id until an envelope says otherwise).
    pub path: &'a str,
}

static NO_EXTRAS: BTreeMap<String, String> = BTreeMap::new();

impl<'a> Candidate<'a> {
    /// A candidate with only an id and a score: no date, text, vector, extras or tags.
    pub fn new(id: &'a str, score: f64) -> Self {
        Candidate {
            id,
            score,
            date: None,
            text: "",
            simhash: None,
            vector: None,
            extras: &NO_EXTRAS,
            tags: &[],
            path: id,
        }
    }

    /// Takes date (parsed with [`parse_date`]), extras and tags from an envelope.
    pub fn with_envelope(self, envelope: &'a Envelope) -> Self {
        Candidate {
            date: envelope.date.as_deref().and_then(parse_date),
            extras: &envelope.extras,
            tags: &envelope.tags,
            path: &envelope.path,
            ..self
        }
    }

    /// Sets the date (Unix seconds).
    pub fn with_date(self, date: Option<i64>) -> Self {
        Candidate { date, ..self }
    }

    /// Sets the text used for similarity.
    pub fn with_text(self, text: &'a str) -> Self {
        Candidate { text, ..self }
    }

    /// Sets the embedding used for cosine similarity.
    pub fn with_vector(self, vector: &'a [f32]) -> Self {
        Candidate {
            vector: Some(vector),
            ..self
        }
    }

    /// Sets the extras.
    pub fn with_extras(self, extras: &'a BTreeMap<String, String>) -> Self {
        Candidate { extras, ..self }
    }

    /// Sets the tags.
    pub fn with_tags(self, tags: &'a [String]) -> Self {
        Candidate { tags, ..self }
    }
}

/// One entry of a stage's output: which input candidate sits here, its score after the stage,
/// and the stage's record of why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked<R> {
    /// Index into the slice the stage was given.
    #[serde(skip)]
    pub index: usize,
    pub score: f64,
    pub explain: R,
}

/// The candidates in a stage's output order, carrying the scores the stage gave them: the
/// input of the next stage.
pub fn reorder<'a, R>(candidates: &[Candidate<'a>], ranked: &[Ranked<R>]) -> Vec<Candidate<'a>> {
    ranked
        .iter()
        .filter_map(|r| {
            candidates.get(r.index).map(|c| Candidate {
                score: r.score,
                ..*c
            })
        })
        .collect()
}

/// A stage's record for one hit, tagged with the stage, ready to append to a hit's explain.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum Refinement {
    Recency(RecencyExplain),
    DateSort(DateExplain),
    Collapse(CollapseExplain),
    Rerank(RerankExplain),
    PluginMerge(PluginMergeExplain),
    Mmr(MmrExplain),
    Personalization(PersonalExplain),
    Comparable(ComparableScore),
}

/// Sorts best first by `key` (NaN counts as the worst value), keeping input order on ties.
pub(crate) fn sort_desc_stable<T>(items: &mut [T], key: impl Fn(&T) -> f64) {
    items.sort_by(|a, b| finite_or_worst(key(b)).total_cmp(&finite_or_worst(key(a))));
}

/// NaN becomes negative infinity so that it sorts last and never wins a comparison.
pub(crate) fn finite_or_worst(x: f64) -> f64 {
    if x.is_nan() {
        f64::NEG_INFINITY
    } else {
        x
    }
}

/// Divisor that makes the largest score 1.0 (1.0 when no score is positive).
pub(crate) fn top_divisor(scores: impl Iterator<Item = f64>) -> f64 {
    let max = scores.filter(|s| s.is_finite()).fold(0.0_f64, f64::max);
    if max > 0.0 {
        max
    } else {
        1.0
    }
}

/// Lowercased runs of alphanumeric characters: the words of a text.
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// 64-bit FNV-1a followed by a splitmix64 finaliser: stable across platforms and Rust
/// versions (unlike `DefaultHasher`), with well-spread bits for simhash.
pub(crate) fn hash64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorder_applies_order_and_scores() {
        let c = [Candidate::new("a", 1.0), Candidate::new("b", 0.5)];
        let ranked = vec![
            Ranked {
                index: 1,
                score: 0.9,
                explain: (),
            },
            Ranked {
                index: 0,
                score: 0.8,
                explain: (),
            },
        ];
        let next = reorder(&c, &ranked);
        assert_eq!(next[0].id, "b");
        assert_eq!(next[0].score, 0.9);
        assert_eq!(next[1].id, "a");
    }

    #[test]
    fn envelope_fills_date_extras_and_tags() {
        let envelope = Envelope {
            date: Some("1970-01-02".into()),
            tags: vec!["ops".into()],
            extras: BTreeMap::from([("locale".into(), "it".into())]),
            ..Envelope::default()
        };
        let c = Candidate::new("a", 1.0).with_envelope(&envelope);
        assert_eq!(c.date, Some(86_400));
        assert_eq!(c.tags, ["ops".to_string()]);
        assert_eq!(c.extras.get("locale").map(String::as_str), Some("it"));
    }

    #[test]
    fn nan_sorts_last_and_ties_keep_order() {
        let mut v = vec![(0, 1.0), (1, f64::NAN), (2, 2.0), (3, 1.0)];
        sort_desc_stable(&mut v, |x| x.1);
        let order: Vec<usize> = v.iter().map(|x| x.0).collect();
        assert_eq!(order, vec![2, 0, 3, 1]);
    }

    #[test]
    fn validation_names_key_and_range() {
        let err = crate::Settings::default()
            .set("refine.mmr_lambda=1.5")
            .unwrap_err();
        assert_eq!(err.key, "refine.mmr_lambda");
        assert_eq!(
            err.to_string(),
            "--set refine.mmr_lambda=1.5: `refine.mmr_lambda`: value 1.5 is out of range; allowed: 0–1"
        );
    }
}
