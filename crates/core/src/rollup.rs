//! Rollup from fragments to sources: `source = w1·f1 + w2·f2 + w3·f3` over the source's best
//! fragments (1, 0.1, 0.05 by default).
//!
//! Using only the best fragment would ignore independent hits in one source; summing them all
//! would favour long documents. Entity fragments have no source and never become results.

use crate::model::{FragmentKey, SourceKey};

/// One weighted fragment inside a source's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RollupPart {
    pub fragment: FragmentKey,
    pub fragment_score: f64,
    pub weight: f64,
}

/// A source with its rolled-up score.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceScore {
    pub source: SourceKey,
    pub score: f64,
    /// The weighted fragments, best first (at most `weights.len()`).
    pub parts: Vec<RollupPart>,
    /// Every matched fragment of the source, best first (hints are drawn from these).
    pub fragments: Vec<(FragmentKey, f64)>,
}

/// Groups scored fragments by source and scores each source by its weighted best fragments.
///
/// `owner` maps a fragment to its source, or `None` for entity fragments, which carry relevance
/// to their neighbours but never rank. Sources come back best first; tied sources keep the
/// order their best fragments have in `fragments` (fusion's order: deterministic, with its own
/// ties broken).
pub fn rollup(
    fragments: &[(FragmentKey, f64)],
    owner: impl Fn(FragmentKey) -> Option<SourceKey>,
    weights: &[f64],
) -> Vec<SourceScore> {
    let owners: Vec<Option<SourceKey>> = fragments.iter().map(|&(f, _)| owner(f)).collect();
    rollup_with_owners(fragments, &owners, weights)
}

/// [`rollup`] with each fragment's source given by position (`owners[i]` owns
/// `fragments[i]`; a fragment past the end of `owners` has none), for callers that have
/// them in a list already rather than behind a lookup.
pub fn rollup_with_owners(
    fragments: &[(FragmentKey, f64)],
    owners: &[Option<SourceKey>],
    weights: &[f64],
) -> Vec<SourceScore> {
    let mut slots: crate::FastMap<SourceKey, usize> =
        crate::FastMap::with_capacity_and_hasher(fragments.len(), Default::default());
    let mut sources: Vec<SourceScore> = Vec::with_capacity(fragments.len());
    for (&(fragment, score), &owner) in fragments.iter().zip(owners) {
        let Some(source) = owner else {
            continue;
        };
        let slot = *slots.entry(source).or_insert_with(|| {
            sources.push(SourceScore {
                source,
                score: 0.0,
                parts: Vec::new(),
                fragments: Vec::new(),
            });
            sources.len() - 1
        });
        sources[slot].fragments.push((fragment, score));
    }
    for s in &mut sources {
        s.fragments
            .sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        s.parts = s
            .fragments
            .iter()
            .zip(weights)
            .map(|(&(fragment, fragment_score), &weight)| RollupPart {
                fragment,
                fragment_score,
                weight,
            })
            .collect();
        s.score = s.parts.iter().map(|p| p.weight * p.fragment_score).sum();
    }
    // Stable: tied sources keep the order of their best fragments in `fragments`, which
    // fusion broke its own ties in (the source key would throw that order away).
    sources.sort_by(|a, b| b.score.total_cmp(&a.score));
    sources
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const W: [f64; 3] = [1.0, 0.1, 0.05];

    fn owner_of(map: &[(u64, Option<u64>)]) -> impl Fn(FragmentKey) -> Option<SourceKey> + '_ {
        move |f| {
            map.iter()
                .find(|(k, _)| *k == f.0)
                .and_then(|(_, s)| s.map(SourceKey))
        }
    }

    #[test]
    fn tapering_bonus_for_extra_fragments() {
        let owners = [
            (1, Some(10)),
            (2, Some(10)),
            (3, Some(10)),
            (4, Some(10)),
            (5, Some(20)),
        ];
        let frags = [
            (FragmentKey(1), 0.5),
            (FragmentKey(5), 0.52),
            (FragmentKey(2), 0.4),
            (FragmentKey(3), 0.2),
            (FragmentKey(4), 0.1),
        ];
        let out = rollup(&frags, owner_of(&owners), &W);
        assert_eq!(out[0].source, SourceKey(10));
        assert!((out[0].score - (0.5 + 0.04 + 0.01)).abs() < 1e-12);
        assert_eq!(out[0].parts.len(), 3);
        assert_eq!(
            out[0].fragments.len(),
            4,
            "the fourth fragment is kept for hints"
        );
        assert_eq!(out[1].source, SourceKey(20));
        assert_eq!(out[1].score, 0.52);
    }

    #[test]
    fn tied_sources_keep_the_fused_order() {
        // Fusion put source 30's fragment ahead of source 10's at the same score; the source
        // key would put 10 first.
        let owners = [(3, Some(30)), (1, Some(10)), (2, Some(20))];
        let out = rollup(
            &[
                (FragmentKey(3), 0.5),
                (FragmentKey(1), 0.5),
                (FragmentKey(2), 0.7),
            ],
            owner_of(&owners),
            &W,
        );
        let order: Vec<u64> = out.iter().map(|s| s.source.0).collect();
        assert_eq!(order, vec![20, 30, 10]);
    }

    #[test]
    fn entity_fragments_never_rank() {
        let owners = [(1, None), (2, Some(7))];
        let out = rollup(
            &[(FragmentKey(1), 9.0), (FragmentKey(2), 0.1)],
            owner_of(&owners),
            &W,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].source, SourceKey(7));
    }

    proptest! {
        /// A source scores at least its best fragment and at most `Σ w · best`.
        #[test]
        fn bounded_by_best_fragment(scores in proptest::collection::vec((0u64..5, 0.0f64..1.0), 1..40)) {
            let frags: Vec<(FragmentKey, f64)> = scores.iter().enumerate()
                .map(|(i, &(_, s))| (FragmentKey(i as u64), s)).collect();
            let owner = |f: FragmentKey| Some(SourceKey(scores[f.0 as usize].0));
            let out = rollup(&frags, owner, &W);
            for s in &out {
                let best = s.fragments[0].1;
                prop_assert!(s.score >= best - 1e-12);
                prop_assert!(s.score <= best * 1.15 + 1e-12);
            }
            for w in out.windows(2) { prop_assert!(w[0].score >= w[1].score); }
        }
    }
}
