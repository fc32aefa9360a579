//! The graph boost against a dense power-iteration oracle, and the invariants the ranking
//! relies on: seeds keep their share, the boost is never negative, it is deterministic, a zero
//! kind weight removes edges and parallel edges add up.

use finder_core::graph::{
    boost, boost_with, Boost, BoostParams, BoostScratch, Graph, KindWeights, RelationKind,
    DEFAULT_PUSH_THRESHOLD, KIND_COUNT,
};
use proptest::prelude::*;

type Edge = (u32, u32, u8);

/// The iteration as specified, over an n×n matrix: `p ← (1−d)s + d(Wᵀp + dangling·s)` from
/// `p = s`, at most `iterations` rounds, stopping once a round changes `p` by less than epsilon.
fn oracle(
    n: usize,
    edges: &[Edge],
    seeds: &[(u32, f64)],
    weights: &KindWeights,
    params: &BoostParams,
) -> Vec<f64> {
    let weight = |k: u8| {
        let kind = RelationKind::from_u8(k);
        let w = weights.get(kind);
        if w.is_finite() && w > 0.0 {
            w
        } else {
            0.0
        }
    };
    let mut a = vec![vec![0.0f64; n]; n];
    for &(x, y, k) in edges {
        let (x, y) = (x as usize, y as usize);
        if x != y && x < n && y < n {
            a[x][y] += weight(k);
            a[y][x] += weight(k);
        }
    }
    let out: Vec<f64> = a.iter().map(|row| row.iter().sum()).collect();

    let mut s = vec![0.0; n];
    for &(node, score) in seeds {
        if (node as usize) < n && score.is_finite() && score > 0.0 {
            s[node as usize] += score;
        }
    }
    let total: f64 = s.iter().sum();
    if total <= 0.0 {
        return vec![0.0; n];
    }
    s.iter_mut().for_each(|x| *x /= total);

    let d = params.damping;
    let mut p = s.clone();
    for _ in 0..params.iterations {
        let dangling: f64 = (0..n).filter(|&u| out[u] <= 0.0).map(|u| p[u]).sum();
        let mut new: Vec<f64> = s
            .iter()
            .map(|&x| (1.0 - d) * x + d * dangling * x)
            .collect();
        for u in 0..n {
            if out[u] > 0.0 {
                for v in 0..n {
                    new[v] += d * p[u] * a[u][v] / out[u];
                }
            }
        }
        let change: f64 = new.iter().zip(&p).map(|(x, y)| (x - y).abs()).sum();
        p = new;
        if change < params.epsilon {
            break;
        }
    }
    p
}

/// Per node, every (total passed, sender, kind) over `rounds` rounds of the exact iteration,
/// largest first: a sender `u` passes `d·Σ_j r_j[u]·w/W(u)` over its edges of one kind.
fn via_oracle(
    n: usize,
    edges: &[Edge],
    seeds: &[(u32, f64)],
    weights: &KindWeights,
    d: f64,
    rounds: u32,
) -> Vec<Vec<(f64, u32, RelationKind)>> {
    let weight = |k: RelationKind| {
        let w = weights.get(k);
        if w.is_finite() && w > 0.0 {
            w
        } else {
            0.0
        }
    };
    // by_kind[u][v][k]: summed weight of u–v edges of kind k.
    let mut by_kind = vec![vec![[0.0f64; KIND_COUNT]; n]; n];
    for &(x, y, k) in edges {
        let (x, y) = (x as usize, y as usize);
        if x != y && x < n && y < n {
            let kind = RelationKind::from_u8(k);
            by_kind[x][y][kind as usize] += weight(kind);
            by_kind[y][x][kind as usize] += weight(kind);
        }
    }
    let out: Vec<f64> = by_kind
        .iter()
        .map(|row| row.iter().flatten().sum())
        .collect();
    let s = normalised_seeds(n, seeds);
    let mut r = s.clone();
    let mut sent = vec![0.0; n];
    for _ in 0..rounds {
        let dangling: f64 = (0..n).filter(|&u| out[u] <= 0.0).map(|u| r[u]).sum();
        let mut next: Vec<f64> = s.iter().map(|&x| d * dangling * x).collect();
        for u in 0..n {
            if out[u] > 0.0 {
                sent[u] += r[u];
                for v in 0..n {
                    let w: f64 = by_kind[u][v].iter().sum();
                    next[v] += d * r[u] * w / out[u];
                }
            }
        }
        r = next;
    }
    let mut result = vec![Vec::new(); n];
    for u in 0..n {
        for v in 0..n {
            for kind in RelationKind::ALL {
                let w = by_kind[u][v][kind as usize];
                let amount = d * sent[u] * w / out[u].max(f64::MIN_POSITIVE);
                if amount > 0.0 {
                    result[v].push((amount, u as u32, kind));
                }
            }
        }
    }
    for candidates in &mut result {
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    }
    result
}

fn dense(n: usize, b: &Boost) -> Vec<f64> {
    let mut p = vec![0.0; n];
    for e in &b.entries {
        p[e.node as usize] = e.score;
    }
    p
}

fn l1(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

fn normalised_seeds(n: usize, seeds: &[(u32, f64)]) -> Vec<f64> {
    let mut s = vec![0.0; n];
    for &(node, score) in seeds {
        if (node as usize) < n && score > 0.0 {
            s[node as usize] += score;
        }
    }
    let total: f64 = s.iter().sum();
    if total > 0.0 {
        s.iter_mut().for_each(|x| *x /= total);
    }
    s
}

/// An entry as bit patterns: node, score, and via's sender, kind and amount.
type EntryBits = (u32, u64, Option<(u32, RelationKind, u64)>);

/// Bit patterns, so that "same output" means the very same floats.
fn bits(b: &Boost) -> Vec<EntryBits> {
    b.entries
        .iter()
        .map(|e| {
            let via = e.via.map(|v| (v.from, v.kind, v.amount.to_bits()));
            (e.node, e.score.to_bits(), via)
        })
        .collect()
}

/// A node count, edges (some naming unknown nodes, some self-loops, kinds past the named
/// ones), and seeds (some unknown, some zero).
fn case() -> impl Strategy<Value = (usize, Vec<Edge>, Vec<(u32, f64)>)> {
    (1usize..24).prop_flat_map(|n| {
        let node = 0..(n as u32 + 2);
        let edges = prop::collection::vec((node.clone(), node.clone(), 0u8..10), 0..80);
        let score = prop_oneof![1 => Just(0.0), 6 => 0.001f64..1.0];
        let seeds = prop::collection::vec((node, score), 0..8);
        (Just(n), edges, seeds)
    })
}

fn kind_weights() -> impl Strategy<Value = KindWeights> {
    let w = prop_oneof![1 => Just(0.0), 1 => Just(1.0), 2 => 0.1f64..3.0];
    prop::array::uniform8(w).prop_map(KindWeights::new)
}

fn params() -> impl Strategy<Value = BoostParams> {
    let damping = prop_oneof![1 => Just(0.0), 1 => Just(1.0), 8 => 0.0f64..=0.95];
    (damping, 0u32..30).prop_map(|(damping, iterations)| BoostParams {
        damping,
        iterations,
        ..BoostParams::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn exact_mode_equals_the_dense_oracle(
        (n, edges, seeds) in case(), weights in kind_weights(), params in params()
    ) {
        let g = Graph::from_edges(n as u32, &edges);
        let b = boost(&g, &seeds, &weights, &params.exact());
        let want = oracle(n, &edges, &seeds, &weights, &params);
        prop_assert_eq!(b.mass_deficit, 0.0);
        // An early exit decided on the other side of epsilon moves p by less than epsilon.
        prop_assert!(l1(&dense(n, &b), &want) < 2e-6, "L1 {}", l1(&dense(n, &b), &want));
    }

    /// With the push threshold on, the result is a pointwise lower bound of the exact iteration
    /// run for as many rounds, and the L1 distance to it is the mass the threshold dropped. (Not
    /// of the exact iteration with its own early exit: dropped mass also shrinks a round's
    /// change, so the thresholded run can stop rounds earlier, further off than epsilon.)
    #[test]
    fn thresholded_error_is_the_reported_deficit(
        (n, edges, seeds) in case(),
        weights in kind_weights(),
        params in params(),
        threshold in prop_oneof![Just(DEFAULT_PUSH_THRESHOLD), 0.0f64..0.05],
    ) {
        let params = BoostParams { push_threshold: threshold, ..params };
        let g = Graph::from_edges(n as u32, &edges);
        let b = boost(&g, &seeds, &weights, &params);
        let same_rounds = BoostParams { iterations: b.rounds, epsilon: 0.0, ..params };
        let want = oracle(n, &edges, &seeds, &weights, &same_rounds);
        let got = dense(n, &b);
        prop_assert!(
            (l1(&got, &want) - b.mass_deficit).abs() <= 1e-9,
            "L1 {} deficit {}", l1(&got, &want), b.mass_deficit
        );
        for (x, y) in got.iter().zip(&want) {
            prop_assert!(*x <= y + 1e-12);
        }
    }

    /// The defaults on small graphs. Rows here are tiny but can hold dozens of parallel
    /// entries, which raise a node's threshold; the largest error seen is about 1.5e-4.
    #[test]
    fn defaults_stay_close_to_the_oracle(
        (n, edges, seeds) in case(), weights in kind_weights()
    ) {
        let params = BoostParams::default();
        let g = Graph::from_edges(n as u32, &edges);
        let b = boost(&g, &seeds, &weights, &params);
        let want = oracle(n, &edges, &seeds, &weights, &params);
        prop_assert!(l1(&dense(n, &b), &want) < 1e-3);
    }

    /// Without an early exit both run the same rounds, and the threshold's error is exactly
    /// the reported deficit: the approximation is a pointwise lower bound.
    #[test]
    fn deficit_is_the_exact_l1_error(
        (n, edges, seeds) in case(),
        weights in kind_weights(),
        params in params(),
        threshold in 0.0f64..0.05,
    ) {
        let params = BoostParams { epsilon: 0.0, push_threshold: threshold, ..params };
        let g = Graph::from_edges(n as u32, &edges);
        let b = boost(&g, &seeds, &weights, &params);
        let want = oracle(n, &edges, &seeds, &weights, &params);
        let got = dense(n, &b);
        for (x, y) in got.iter().zip(&want) {
            prop_assert!(*x <= y + 1e-12);
        }
        prop_assert!((l1(&got, &want) - b.mass_deficit).abs() < 1e-9);
        if !b.entries.is_empty() {
            let total: f64 = got.iter().sum();
            prop_assert!((total + b.mass_deficit - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn seeds_keep_their_share_and_nothing_is_negative(
        (n, edges, seeds) in case(),
        weights in kind_weights(),
        params in params(),
        threshold in prop_oneof![Just(1e-7), 0.0f64..0.2],
    ) {
        let params = BoostParams { push_threshold: threshold, ..params };
        let g = Graph::from_edges(n as u32, &edges);
        let b = boost(&g, &seeds, &weights, &params);
        let s = normalised_seeds(n, &seeds);
        for e in &b.entries {
            prop_assert!(e.score.is_finite() && e.score >= 0.0);
        }
        for (u, &share) in s.iter().enumerate() {
            prop_assert!(b.score(u as u32) >= (1.0 - params.damping) * share - 1e-12);
        }
        prop_assert_eq!(b.entries.is_empty(), s.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn without_edges_the_boost_is_the_seeds((n, _, seeds) in case(), params in params()) {
        let g = Graph::from_edges(n as u32, &[]);
        let b = boost(&g, &seeds, &KindWeights::default(), &params);
        let s = normalised_seeds(n, &seeds);
        for (u, &share) in s.iter().enumerate() {
            prop_assert!((b.score(u as u32) - share).abs() < 1e-12);
        }
        prop_assert!(b.entries.iter().all(|e| e.via.is_none()));
    }

    #[test]
    fn deterministic_whatever_the_edge_order_and_scratch(
        (n, edges, seeds) in case(), weights in kind_weights(), params in params()
    ) {
        let g = Graph::from_edges(n as u32, &edges);
        let mut reversed = edges.clone();
        reversed.reverse();
        let h = Graph::from_edges(n as u32, &reversed);
        let mut scratch = BoostScratch::new();
        let first = boost_with(&g, &seeds, &weights, &params, &mut scratch);
        let _ = boost_with(&g, &[(0, 1.0)], &KindWeights::default(), &params, &mut scratch);
        let second = boost_with(&h, &seeds, &weights, &params, &mut scratch);
        prop_assert_eq!(bits(&first), bits(&second));
        prop_assert_eq!(first.rounds, second.rounds);
        prop_assert_eq!(first.mass_deficit.to_bits(), second.mass_deficit.to_bits());
    }

    #[test]
    fn the_graphs_pooled_scratch_gives_what_a_fresh_one_gives(
        (n, edges, seeds) in case(), weights in kind_weights(), params in params()
    ) {
        let g = Graph::from_edges(n as u32, &edges);
        let fresh = boost(&g, &seeds, &weights, &params);
        // the pooled buffers were used by another query first, and by this one twice
        let _ = g.with_scratch(|s| boost_with(&g, &[(0, 1.0)], &KindWeights::default(), &params, s));
        for _ in 0..2 {
            let pooled = g.with_scratch(|s| boost_with(&g, &seeds, &weights, &params, s));
            prop_assert_eq!(bits(&fresh), bits(&pooled));
            prop_assert_eq!(fresh.rounds, pooled.rounds);
        }
        // a clone starts with an empty pool and boosts alike
        let clone = g.clone();
        let cloned = clone.with_scratch(|s| boost_with(&clone, &seeds, &weights, &params, s));
        prop_assert_eq!(bits(&fresh), bits(&cloned));
    }

    #[test]
    fn zero_weight_equals_removing_the_kind(
        (n, edges, seeds) in case(),
        weights in kind_weights(),
        params in params(),
        kind in 0u8..(KIND_COUNT as u8),
    ) {
        let kind = RelationKind::from_u8(kind);
        let zeroed = weights.with(kind, 0.0);
        let kept: Vec<Edge> =
            edges.iter().copied().filter(|e| RelationKind::from_u8(e.2) != kind).collect();
        // Exact mode: the push threshold counts entries of every kind, weighted or not.
        let params = params.exact();
        let a = boost(&Graph::from_edges(n as u32, &edges), &seeds, &zeroed, &params);
        let b = boost(&Graph::from_edges(n as u32, &kept), &seeds, &zeroed, &params);
        prop_assert_eq!(bits(&a), bits(&b));
    }

    #[test]
    fn parallel_edges_add_up(
        (n, edges, seeds) in case(),
        weights in kind_weights(),
        params in params(),
        kind in 0u8..(KIND_COUNT as u8),
    ) {
        let kind = RelationKind::from_u8(kind);
        let mut doubled = edges.clone();
        doubled.extend(edges.iter().copied().filter(|e| RelationKind::from_u8(e.2) == kind));
        let heavier = weights.with(kind, 2.0 * weights.get(kind));
        let params = params.exact();
        let a = boost(&Graph::from_edges(n as u32, &doubled), &seeds, &weights, &params);
        let b = boost(&Graph::from_edges(n as u32, &edges), &seeds, &heavier, &params);
        prop_assert!(l1(&dense(n, &a), &dense(n, &b)) < 1e-9);
    }

    #[test]
    fn only_weight_ratios_matter(
        (n, edges, seeds) in case(), weights in kind_weights(), params in params(),
        scale in 0.01f64..100.0,
    ) {
        let scaled = KindWeights::new(weights.as_array().map(|w| w * scale));
        let g = Graph::from_edges(n as u32, &edges);
        let a = boost(&g, &seeds, &weights, &params.exact());
        let b = boost(&g, &seeds, &scaled, &params.exact());
        prop_assert!(l1(&dense(n, &a), &dense(n, &b)) < 1e-9);
    }

    #[test]
    fn via_is_the_largest_total_any_neighbour_passed(
        (n, edges, seeds) in case(), weights in kind_weights(), params in params()
    ) {
        let g = Graph::from_edges(n as u32, &edges);
        let b = boost(&g, &seeds, &weights, &params.exact());
        let want = via_oracle(n, &edges, &seeds, &weights, params.damping, b.rounds);
        for (v, candidates) in want.iter().enumerate() {
            let got = b.get(v as u32).and_then(|e| e.via);
            let Some(&(best, from, kind)) = candidates.first() else {
                prop_assert!(got.is_none(), "node {} got {:?}", v, got);
                continue;
            };
            let via = got.expect("a node that was passed mass explains it");
            prop_assert!((via.amount - best).abs() <= 1e-9 * best);
            // Where two candidates tie to rounding, either may win.
            let near_tie = candidates.get(1).is_some_and(|c| best - c.0 <= 1e-9 * best);
            if !near_tie {
                prop_assert_eq!((via.from, via.kind), (from, kind));
            }
        }
    }

    #[test]
    fn via_names_a_real_edge(
        (n, edges, seeds) in case(), weights in kind_weights(), params in params()
    ) {
        let g = Graph::from_edges(n as u32, &edges);
        let b = boost(&g, &seeds, &weights, &params);
        for e in &b.entries {
            if let Some(via) = e.via {
                prop_assert!(g.neighbours(e.node).any(|edge| edge == (via.from, via.kind)));
                prop_assert!(weights.get(via.kind) > 0.0 && via.amount > 0.0);
            }
        }
    }
}

#[test]
fn mixed_parallel_kinds_sum_like_one_heavier_edge() {
    // 0 and 1 joined by a mention (weight 1) and a link (weight 2), versus by one `next` edge
    // of weight 3; 1–2 is a mention of weight 1 in both.
    let params = BoostParams::default().exact();
    let w = KindWeights::default().with(RelationKind::LinksTo, 2.0);
    let two = Graph::from_edges(3, &[(0, 1, 0), (1, 0, 1), (1, 2, 0)]);
    let w_one = KindWeights::default().with(RelationKind::Next, 3.0);
    let one = Graph::from_edges(3, &[(0, 1, 3), (1, 2, 0)]);
    let a = boost(&two, &[(0, 1.0)], &w, &params);
    let b = boost(&one, &[(0, 1.0)], &w_one, &params);
    for node in 0..3 {
        assert!((a.score(node) - b.score(node)).abs() < 1e-12, "node {node}");
    }
    // Explain names the kind that carried the most into node 1: the link (2 of 3).
    let via = a.get(1).and_then(|e| e.via).expect("node 1 is reached");
    assert_eq!((via.from, via.kind), (0, RelationKind::LinksTo));
}

#[test]
fn an_entity_the_query_hits_carries_relevance_to_what_mentions_it() {
    // Entity 0 is a strong hit; paragraphs 1 and 2 mention it; paragraph 3 is a weak hit
    // linked to 2 only. Paragraph 2 is reached through the entity, not through 3.
    let g = Graph::from_edges(5, &[(1, 0, 0), (2, 0, 0), (3, 2, 1), (4, 3, 3)]);
    let b = boost(
        &g,
        &[(0, 1.0), (3, 0.2)],
        &KindWeights::default(),
        &BoostParams::default(),
    );
    let via = b
        .get(2)
        .and_then(|e| e.via)
        .expect("paragraph 2 is reached");
    assert_eq!((via.from, via.kind), (0, RelationKind::Mentions));
    assert!(b.score(1) > 0.0 && b.score(2) > b.score(1));
    // The link from 3 is what 4 gets, and 4 is a hop further than 2 is.
    assert_eq!(b.get(4).and_then(|e| e.via).map(|v| v.from), Some(3));
    assert!(b.score(4) < b.score(2));
}
