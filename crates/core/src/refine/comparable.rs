//! A score that means the same across queries, and a `min_score` cut on it.
//!
//! Hit scores are relative (the top is 1.0 for every query), so they cannot tell a strong
//! answer from the best of weak ones. The RRF share can: a fragment's reciprocal-rank sum
//! divided by the largest sum the lists that ran could give, `Σ_lists 1/(rrf_k + 1)`. It is
//! 1 for a fragment ranked first by every list that ran and falls toward 0 as ranks grow or
//! lists miss it. It is computed from ranks, so it holds whichever fusion ordered the hits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fusion::ListRank;
use crate::model::Channel;

/// Hits whose comparable score falls below this are dropped (0 keeps everything).
pub const DEFAULT_MIN_SCORE: f64 = 0.0;

/// Settings of the `min_score` cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MinScoreParams {
    /// Range 0–1, on the comparable score.
    pub min_score: f64,
}

impl Default for MinScoreParams {
    fn default() -> Self {
        MinScoreParams {
            min_score: DEFAULT_MIN_SCORE,
        }
    }
}

/// A hit's absolute relevance and what it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparableScore {
    /// `rrf_sum / max_possible`, in [0, 1].
    pub share: f64,
    /// `Σ 1/(rrf_k + rank)` over the lists that returned the fragment.
    pub rrf_sum: f64,
    /// `lists_ran / (rrf_k + 1)`.
    pub max_possible: f64,
    pub lists_ran: usize,
}

/// The largest RRF sum `lists_ran` lists can give one fragment: first in each.
pub fn max_rrf_sum(lists_ran: usize, rrf_k: u32) -> f64 {
    lists_ran as f64 / (rrf_k as f64 + 1.0)
}

/// `seed / max_rrf_sum(lists_ran, rrf_k)`, clamped to [0, 1]; 0 when no list ran.
pub fn rrf_share(seed: f64, lists_ran: usize, rrf_k: u32) -> f64 {
    let max = max_rrf_sum(lists_ran, rrf_k);
    if max > 0.0 && seed.is_finite() {
        (seed / max).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The comparable score of a fragment from its ranks in the lists that ran (a channel counts
/// once, at its best rank). For a source, pass its best fragment's ranks: rollup weights add
/// a fraction of the next fragments, which no bound of this kind accounts for.
pub fn comparable_score(ranks: &[ListRank], lists_ran: usize, rrf_k: u32) -> ComparableScore {
    let mut best: BTreeMap<Channel, u32> = BTreeMap::new();
    for r in ranks {
        let rank = best.entry(r.channel).or_insert(r.rank);
        *rank = (*rank).min(r.rank);
    }
    let rrf_sum: f64 = best
        .values()
        .map(|&rank| 1.0 / (rrf_k as f64 + rank.max(1) as f64))
        .sum();
    ComparableScore {
        share: rrf_share(rrf_sum, lists_ran, rrf_k),
        rrf_sum,
        max_possible: max_rrf_sum(lists_ran, rrf_k),
        lists_ran,
    }
}

/// Indices of the scores at or above `min_score`, in order, and how many fell below.
/// NaN counts as below.
pub fn filter_min_score(scores: &[f64], min_score: f64) -> (Vec<usize>, usize) {
    let kept: Vec<usize> = scores
        .iter()
        .enumerate()
        .filter(|(_, &s)| s >= min_score)
        .map(|(i, _)| i)
        .collect();
    let dropped = scores.len() - kept.len();
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::rrf;
    use crate::model::{FragmentKey, RankedList, ScoredFragment};
    use proptest::prelude::*;

    fn list(channel: Channel, keys: &[u64]) -> RankedList {
        RankedList::new(
            channel,
            keys.iter()
                .map(|&k| ScoredFragment {
                    fragment: FragmentKey(k),
                    score: 1.0,
                })
                .collect(),
        )
    }

    #[test]
    fn first_in_every_list_is_one() {
        let lists = [
            list(Channel::Lexical, &[1, 2, 3]),
            list(Channel::Trigram, &[1, 3]),
            list(Channel::Vector, &[1, 2]),
        ];
        let fused = rrf(&lists, 60);
        let top = comparable_score(&fused[0].lists, 3, 60);
        assert_eq!(top.share, 1.0);
        assert_eq!(rrf_share(fused[0].seed, 3, 60), 1.0);
        // The same rank-1 fragment is weaker when a list that ran did not return it.
        assert!((comparable_score(&fused[0].lists[..2], 3, 60).share - 2.0 / 3.0).abs() < 1e-12);
    }

    /// The seed's worked example: A is first in BM25 and second in dense.
    #[test]
    fn worked_example_share() {
        let lists = [
            list(Channel::Lexical, &[1, 2, 3]),
            list(Channel::Vector, &[3, 1, 4]),
        ];
        let fused = rrf(&lists, 60);
        let a = comparable_score(&fused[0].lists, 2, 60);
        assert!((a.share - (1.0 / 61.0 + 1.0 / 62.0) / (2.0 / 61.0)).abs() < 1e-12);
        assert!((a.max_possible - 2.0 / 61.0).abs() < 1e-15);
        assert_eq!(rrf_share(0.1, 0, 60), 0.0);
    }

    #[test]
    fn min_score_keeps_order_and_counts_drops() {
        let (kept, dropped) = filter_min_score(&[0.9, 0.2, f64::NAN, 0.5], 0.5);
        assert_eq!(kept, vec![0, 3]);
        assert_eq!(dropped, 2);
        assert_eq!(
            filter_min_score(&[0.0, 0.1], DEFAULT_MIN_SCORE).0,
            vec![0, 1]
        );
        let mut settings = crate::Settings::default();
        let err = settings.set("refine.min_score=1.1").unwrap_err();
        assert_eq!(err.key, "refine.min_score");
    }

    proptest! {
        #[test]
        fn share_stays_in_unit_interval(
            lex in proptest::collection::vec(0u64..30, 0..40),
            vec in proptest::collection::vec(0u64..30, 0..40),
            k in 10u32..200,
        ) {
            let lists = [list(Channel::Lexical, &lex), list(Channel::Vector, &vec)];
            for f in rrf(&lists, k) {
                let s = comparable_score(&f.lists, 2, k);
                prop_assert!((0.0..=1.0).contains(&s.share));
                prop_assert!((s.rrf_sum - f.seed).abs() < 1e-12);
            }
        }
    }
}
