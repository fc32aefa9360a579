//! Reciprocal rank fusion of whatever channel lists ran.
//!
//! Fusion works on ranks, not scores: BM25 scores and cosine similarities are not comparable
//! numbers, and ranks merge the same way across shards.

use serde::{Deserialize, Serialize};

use crate::model::{Channel, FragmentKey, RankedList};
use crate::settings::{Fusion, Settings};

/// A fragment's place in one list and what that place contributed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ListRank {
    pub channel: Channel,
    /// One-based rank in the channel's list.
    pub rank: u32,
    /// The channel's own score (BM25, cosine, …), for display only.
    pub score: f32,
    /// `1 / (rrf_k + rank)`.
    pub share: f64,
}

/// A fragment after fusion, with its seed score and the ranks that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusedFragment {
    pub fragment: FragmentKey,
    /// `Σ_lists weight / (rrf_k + rank)` (for `cc`, the weighted normalised scores).
    pub seed: f64,
    pub lists: Vec<ListRank>,
    /// What the graph boost added (`p` scaled to the seeds' total); 0 without a graph.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub boost: f64,
    /// The strongest path that carried the boost, e.g. `via entity "Ed Wood" (mentions)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

impl FusedFragment {
    /// The score rollup uses: the fused seed plus the graph boost.
    pub fn total(&self) -> f64 {
        self.seed + self.boost
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Fuses lists by reciprocal rank: `seed(f) = Σ weight_l/(rrf_k + rank_f)`, ranks one-based,
/// `weight_l` being the list's [`RankedList::weight`].
///
/// The result is sorted best first. Ties break on the best single rank, then on the channels'
/// own scores, each normalised over its list, then on the order the lists found them in, so
/// the order is deterministic. A fragment listed twice in one list counts once, at its best
/// rank.
pub fn rrf(lists: &[RankedList], rrf_k: u32) -> Vec<FusedFragment> {
    accumulate(lists, |l, rank, _| {
        lists[l].weight / (rrf_k as f64 + rank as f64)
    })
}

/// Sums `share(list index, one-based rank, channel score)` per fragment over the lists, a
/// fragment counting once per list (at its best rank), and sorts best first.
fn accumulate(lists: &[RankedList], share: impl Fn(usize, u32, f32) -> f64) -> Vec<FusedFragment> {
    let hits: usize = lists.iter().map(|l| l.hits.len()).sum();
    let mut by_fragment: crate::FastMap<FragmentKey, usize> =
        crate::FastMap::with_capacity_and_hasher(hits, Default::default());
    let mut fused: Vec<FusedFragment> = Vec::with_capacity(hits);
    for (l, list) in lists.iter().enumerate() {
        for (i, hit) in list.hits.iter().enumerate() {
            let rank = i as u32 + 1;
            let slot = *by_fragment.entry(hit.fragment).or_insert_with(|| {
                fused.push(FusedFragment {
                    fragment: hit.fragment,
                    seed: 0.0,
                    lists: Vec::with_capacity(lists.len()),
                    boost: 0.0,
                    via: None,
                });
                fused.len() - 1
            });
            let entry = &mut fused[slot];
            if entry.lists.iter().any(|r| r.channel == list.channel) {
                continue;
            }
            let share = share(l, rank, hit.score);
            entry.seed += share;
            entry.lists.push(ListRank {
                channel: list.channel,
                rank,
                score: hit.score,
                share,
            });
        }
    }
    sort_fused(lists, &mut fused);
    fused
}

/// Fuses by the method the settings name.
pub fn fuse(lists: &[RankedList], settings: &Settings) -> Vec<FusedFragment> {
    match settings.finder.fusion {
        Fusion::Rrf => rrf(lists, settings.finder.rrf_k),
        Fusion::Cc => convex(lists, settings.finder.alpha),
    }
}

/// Convex combination: each list's scores are min-max normalised to [0, 1]; the dense list
/// weighs `alpha`, the lexical lists share `1 − alpha` equally. When only one side ran, it
/// takes the whole weight. Each list's weight is further multiplied by its
/// [`RankedList::weight`]. `share` in each [`ListRank`] is the weighted normalised score.
pub fn convex(lists: &[RankedList], alpha: f64) -> Vec<FusedFragment> {
    let dense = |c: Channel| c == Channel::Vector;
    let n_dense = lists
        .iter()
        .filter(|l| dense(l.channel) && !l.hits.is_empty())
        .count();
    let n_sparse = lists
        .iter()
        .filter(|l| !dense(l.channel) && !l.hits.is_empty())
        .count();
    let (dense_side, sparse_side) = match (n_dense, n_sparse) {
        (0, _) => (0.0, 1.0),
        (_, 0) => (1.0, 0.0),
        _ => (alpha, 1.0 - alpha),
    };
    // Per list: its weight and the score range it is normalised over.
    let scales: Vec<(f64, f64, f64)> = lists
        .iter()
        .map(|list| {
            let side = if dense(list.channel) {
                dense_side / n_dense.max(1) as f64
            } else {
                sparse_side / n_sparse.max(1) as f64
            };
            let weight = side * list.weight;
            let (min, max) = score_range(list);
            (weight, f64::from(min), f64::from(max))
        })
        .collect();
    accumulate(lists, |l, _, score| {
        let (weight, min, max) = scales[l];
        let normalized = if max > min {
            (score as f64 - min) / (max - min)
        } else {
            1.0
        };
        weight * normalized
    })
}

/// The lowest and highest channel score in `list` (`(f32::MAX, f32::MIN)` when it is empty).
fn score_range(list: &RankedList) -> (f32, f32) {
    let scores = list.hits.iter().map(|h| h.score);
    let min = scores.clone().fold(f32::MAX, f32::min);
    let max = scores.fold(f32::MIN, f32::max);
    (min, max)
}

/// Sorts best first by seed. Equal seeds are common under reciprocal ranks: two lists that
/// hold two fragments at mirrored ranks (first and fifth, fifth and first) give them the same
/// sum. Those ties break on the best single rank, then on what the ranks drop: each channel's
/// own score, min-max normalised over its list (as [`convex`] does) and summed over the lists
/// that hold the fragment. The rest keep the order the lists found them in (the first list's
/// hits first: the lexical list's ahead of a graph list's). On SciFact the channels' scores
/// decided ties better than any fixed order of the lists or of the keys (docs/perf/fusion-constant.md).
fn sort_fused(lists: &[RankedList], fused: &mut Vec<FusedFragment>) {
    // The score range of each channel's list (a channel listed twice counts at its first list,
    // as `accumulate` counts it).
    let mut ranges: Vec<(Channel, f32, f32)> = Vec::with_capacity(lists.len());
    for list in lists {
        if ranges.iter().all(|(c, _, _)| *c != list.channel) {
            let (min, max) = score_range(list);
            ranges.push((list.channel, min, max));
        }
    }
    let scored = |f: &FusedFragment| -> f64 {
        f.lists
            .iter()
            .map(|l| match ranges.iter().find(|(c, _, _)| *c == l.channel) {
                Some(&(_, min, max)) if max > min => f64::from((l.score - min) / (max - min)),
                _ => 1.0,
            })
            .sum()
    };
    let best_rank = |f: &FusedFragment| f.lists.iter().map(|l| l.rank).min().unwrap_or(u32::MAX);
    // Each fragment's keys computed once, not at every comparison.
    let mut keyed: Vec<((f64, u32, f64), FusedFragment)> = fused
        .drain(..)
        .map(|f| ((f.seed, best_rank(&f), scored(&f)), f))
        .collect();
    // Stable: what is still tied keeps the order the lists found it in.
    keyed.sort_by(|(ka, _), (kb, _)| {
        kb.0.total_cmp(&ka.0)
            .then_with(|| ka.1.cmp(&kb.1))
            .then_with(|| kb.2.total_cmp(&ka.2))
    });
    fused.extend(keyed.into_iter().map(|(_, f)| f));
}

/// Divides every score by the largest, so the top becomes 1.0. Returns the divisor
/// (1.0 when there is nothing positive to divide by).
pub fn normalize_top(scores: &mut [f64]) -> f64 {
    let max = scores.iter().copied().fold(0.0_f64, f64::max);
    if max <= 0.0 {
        return 1.0;
    }
    for s in scores.iter_mut() {
        *s /= max;
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScoredFragment;
    use proptest::prelude::*;

    fn list(channel: Channel, keys: &[u64]) -> RankedList {
        let hits = keys
            .iter()
            .enumerate()
            .map(|(i, &k)| ScoredFragment {
                fragment: FragmentKey(k),
                score: 10.0 - i as f32,
            })
            .collect();
        RankedList::new(channel, hits)
    }

    /// The worked example of the hybrid-search theory seed: BM25 ranks A, B, C and dense
    /// ranks C, A, D.
    #[test]
    fn worked_example_orders_a_c_b_d() {
        let (a, b, c, d) = (1, 2, 3, 4);
        let lists = [
            list(Channel::Lexical, &[a, b, c]),
            list(Channel::Vector, &[c, a, d]),
        ];
        let fused = rrf(&lists, 60);
        let order: Vec<u64> = fused.iter().map(|f| f.fragment.0).collect();
        assert_eq!(order, vec![a, c, b, d]);
        let seeds: Vec<String> = fused.iter().map(|f| format!("{:.5}", f.seed)).collect();
        assert_eq!(seeds, vec!["0.03252", "0.03227", "0.01613", "0.01587"]);
        assert_eq!(fused[0].seed, 1.0 / 61.0 + 1.0 / 62.0);
        assert_eq!(fused[0].lists.len(), 2);
        assert_eq!(fused[0].lists[1].rank, 2);
    }

    #[test]
    fn a_lists_weight_scales_its_share() {
        let mut graph = list(Channel::Neighbours, &[9, 1]);
        graph.weight = 0.25;
        let lists = [list(Channel::Lexical, &[1, 2]), graph];
        let fused = rrf(&lists, 60);
        let seed = |key: u64| fused.iter().find(|f| f.fragment.0 == key).unwrap().seed;
        assert_eq!(seed(9), 0.25 / 61.0);
        assert_eq!(seed(1), 1.0 / 61.0 + 0.25 / 62.0);
        assert_eq!(fused[0].lists[1].share, 0.25 / 62.0);
        // Convex fusion scales the list's side by it too: lexical and graph lists share the
        // sparse side, here the whole weight.
        let fused = convex(&lists, 0.5);
        assert_eq!(fused[0].fragment, FragmentKey(1));
        assert_eq!(fused[0].seed, 0.5);
        let nine = fused.iter().find(|f| f.fragment.0 == 9).unwrap();
        assert_eq!(nine.seed, 0.5 * 0.25);
    }

    #[test]
    fn duplicates_within_a_list_count_once() {
        let fused = rrf(&[list(Channel::Lexical, &[7, 7, 8])], 60);
        assert_eq!(fused[0].seed, 1.0 / 61.0);
        assert_eq!(fused[1].seed, 1.0 / 63.0);
    }

    #[test]
    fn convex_blends_normalised_scores() {
        let lex = RankedList::new(
            Channel::Lexical,
            vec![
                ScoredFragment {
                    fragment: FragmentKey(1),
                    score: 10.0,
                },
                ScoredFragment {
                    fragment: FragmentKey(2),
                    score: 5.0,
                },
                ScoredFragment {
                    fragment: FragmentKey(3),
                    score: 0.0,
                },
            ],
        );
        let dense = RankedList::new(
            Channel::Vector,
            vec![
                ScoredFragment {
                    fragment: FragmentKey(3),
                    score: 0.9,
                },
                ScoredFragment {
                    fragment: FragmentKey(1),
                    score: 0.5,
                },
            ],
        );
        let fused = convex(&[lex.clone(), dense.clone()], 0.5);
        let seeds: Vec<(u64, f64)> = fused.iter().map(|f| (f.fragment.0, f.seed)).collect();
        assert_eq!(seeds, vec![(1, 0.5), (3, 0.5), (2, 0.25)]);
        // alpha = 1 listens to the dense list only.
        let fused = convex(&[lex.clone(), dense], 1.0);
        assert_eq!(fused[0].fragment, FragmentKey(3));
        // Alone, the lexical list takes the whole weight whatever alpha says.
        let fused = convex(&[lex], 0.9);
        assert_eq!(fused[0].seed, 1.0);
    }

    fn scored(channel: Channel, hits: &[(u64, f32)]) -> RankedList {
        RankedList::new(
            channel,
            hits.iter()
                .map(|&(k, score)| ScoredFragment {
                    fragment: FragmentKey(k),
                    score,
                })
                .collect(),
        )
    }

    #[test]
    fn mirrored_ranks_tie_break_on_the_channels_scores() {
        // 1 and 2 are first and second in one list, second and first in the other: the same
        // seed and the same best rank. 1 barely leads the words and trails the vectors by far.
        let lex = scored(Channel::Lexical, &[(1, 10.0), (2, 9.8), (3, 1.0)]);
        let dense = scored(Channel::Vector, &[(2, 0.9), (1, 0.3), (3, 0.1)]);
        let fused = rrf(&[lex.clone(), dense.clone()], 20);
        assert_eq!(fused[0].seed, fused[1].seed);
        let order: Vec<u64> = fused.iter().map(|f| f.fragment.0).collect();
        assert_eq!(
            order,
            vec![2, 1, 3],
            "2 is nearly level on words and far ahead on vectors"
        );
        // The lists in the other order: the same ranking.
        let swapped: Vec<u64> = rrf(&[dense, lex.clone()], 20)
            .iter()
            .map(|f| f.fragment.0)
            .collect();
        assert_eq!(swapped, order);
        // Where the scores tie too (one hit per list, each its list's best), the first list's
        // hit comes first, whatever the keys.
        let a = scored(Channel::Lexical, &[(7, 3.0)]);
        let b = scored(Channel::Vector, &[(4, 0.2)]);
        let first: Vec<u64> = rrf(&[a.clone(), b.clone()], 20)
            .iter()
            .map(|f| f.fragment.0)
            .collect();
        assert_eq!(first, vec![7, 4]);
        let first: Vec<u64> = rrf(&[b, a], 20).iter().map(|f| f.fragment.0).collect();
        assert_eq!(first, vec![4, 7]);
    }

    #[test]
    fn normalize_makes_top_one() {
        let mut s = vec![0.5, 0.25, 0.125];
        assert_eq!(normalize_top(&mut s), 0.5);
        assert_eq!(s, vec![1.0, 0.5, 0.25]);
        let mut empty: Vec<f64> = vec![];
        assert_eq!(normalize_top(&mut empty), 1.0);
    }

    proptest! {
        /// With one list, fusion keeps that list's order; the seed sums the shares.
        #[test]
        fn single_list_order_is_kept(keys in proptest::collection::hash_set(0u64..1000, 0..50), k in 10u32..200) {
            let keys: Vec<u64> = keys.into_iter().collect();
            let fused = rrf(&[list(Channel::Lexical, &keys)], k);
            let order: Vec<u64> = fused.iter().map(|f| f.fragment.0).collect();
            prop_assert_eq!(order, keys);
        }

        /// Seeds are sorted and each equals the sum of its listed shares.
        #[test]
        fn seeds_sorted_and_consistent(a in proptest::collection::hash_set(0u64..60, 0..40),
                                       b in proptest::collection::hash_set(0u64..60, 0..40)) {
            let a: Vec<u64> = a.into_iter().collect();
            let b: Vec<u64> = b.into_iter().collect();
            let fused = rrf(&[list(Channel::Lexical, &a), list(Channel::Vector, &b)], 60);
            for w in fused.windows(2) { prop_assert!(w[0].seed >= w[1].seed); }
            for f in &fused {
                let sum: f64 = f.lists.iter().map(|l| 1.0 / (60.0 + l.rank as f64)).sum();
                prop_assert!((sum - f.seed).abs() < 1e-12);
            }
        }
    }
}
