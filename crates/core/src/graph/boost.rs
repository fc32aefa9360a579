//! The graph boost: personalized PageRank from the search hits over the relation graph.
//!
//! The restart vector `s` is the seed scores normalised to sum 1. The transition `W` is the
//! undirected adjacency with each edge weighted by its kind, parallel edges summed, each row
//! normalised by the node's total weight. One round is
//!
//! ```text
//! p ← (1 − d)·s + d·(Wᵀp + dangling·s)
//! ```
//!
//! where `dangling` is the mass on nodes whose edges all weigh 0 (or that have none); it
//! returns to the seeds. Starting from `p = s`, at most `iterations` rounds run, stopping early
//! once a round changes `p` by less than `epsilon` in L1.
//!
//! # How it stays local
//!
//! A global power iteration costs O(edges) per round (tens of milliseconds at a million
//! edges). Instead the iteration is unrolled by hop: with `r₀ = s` and `r_{j+1} = d·M·r_j`
//! (`M` being `Wᵀ` plus the dangling return), round `k` of the iteration is exactly
//! `p_k = (1 − d)·Σ_{j<k} r_j + r_k`. Each `r_j` is a sparse frontier around the seeds whose
//! mass is `d^j`, so only that frontier is touched, with dense scratch arrays reused across
//! queries. To keep the frontier small, an entry of mass `x` at a node of degree `deg` is
//! spread further only when `x ≥ push_threshold·deg` (the forward-push rule of Andersen, Chung
//! and Lang); below it the node keeps its own share and the `d·x` it would have passed on is
//! dropped. Every term is non-negative, so the result is a pointwise lower bound of the exact
//! iteration run for the same number of rounds, and the dropped mass
//! ([`Boost::mass_deficit`]) is exactly the L1 distance between the two. With
//! `push_threshold = 0` nothing is dropped and the result is the exact iteration.
//!
//! The threshold also bounds the work: spreading `x` from a node costs its degree, at most
//! `x / push_threshold`, and the mass spread over all rounds is at most `Σ d^j = 1/(1 − d)`,
//! so a query visits at most `1 / (push_threshold·(1 − d))` edges however large the graph is.
//! What it gives up is the thin tail two or more hops out: on a synthetic 100k-node, 1M-edge
//! graph with 20–200 seeds the default threshold loses at most about 9% of the mass (the L1
//! error), at most 1.6e-4 at any node, and leaves the ten best nodes by `seed + p` unchanged
//! (see `benches/graph_boost.rs`).
//!
//! For explain, each node also reports the neighbour that passed it the most mass and over
//! which kind of edge.

use super::adjacency::Graph;
use super::kind::{KindWeights, RelationKind};
use super::scratch::{BoostScratch, Slot, IN_P, IN_R, SENT};

/// Default damping `d`: the share of a node's mass passed to its neighbours each round. Low,
/// because the seed scores are nearly flat and a strong boost pushes the best hit down.
pub const DEFAULT_DAMPING: f64 = 0.3;
/// Default most rounds of the iteration.
pub const DEFAULT_ITERATIONS: u32 = 20;
/// Default early exit: stop once a round changes the boost by less than this in L1.
pub const DEFAULT_EPSILON: f64 = 1e-6;
/// Default push threshold: mass `x` at a node of degree `deg` spreads further only when
/// `x ≥ threshold·deg`. It bounds a query to about `1 / (threshold·(1 − d))` ≈ 95k edge visits
/// at the default damping, whatever the graph's size; see the module documentation for what it
/// costs in accuracy. It was 1e-5 (≈ 143k visits) until the boost stage at a million fragments
/// went over its 2 ms budget on a slow hour of a 2-core machine; 1.5e-5 ranked the HotpotQA
/// slice, SciFact and the 1M synthetic set exactly as 1e-5 did (docs/perf/graph-boost.md).
pub const DEFAULT_PUSH_THRESHOLD: f64 = 1.5e-5;

/// The boost's query-time parameters. Out-of-range values are clamped rather than refused
/// (settings validate their ranges where they are read): damping into `[0, 1]`, epsilon and
/// push threshold to at least 0, and NaN to the default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoostParams {
    /// Share of a node's mass passed to its neighbours each round, `0..=1`.
    pub damping: f64,
    /// Most rounds; 0 returns the normalised seeds unchanged.
    pub iterations: u32,
    /// Stop once a round changes the boost by less than this (L1).
    pub epsilon: f64,
    /// Locality: mass below `push_threshold·degree` at a node is not spread further (the
    /// degree counts a node's edges of every kind, weighted or not). 0 runs the exact
    /// iteration, touching everything the seeds reach.
    pub push_threshold: f64,
}

impl Default for BoostParams {
    fn default() -> BoostParams {
        BoostParams {
            damping: DEFAULT_DAMPING,
            iterations: DEFAULT_ITERATIONS,
            epsilon: DEFAULT_EPSILON,
            push_threshold: DEFAULT_PUSH_THRESHOLD,
        }
    }
}

impl BoostParams {
    /// The same parameters with a zero push threshold: the exact iteration. It touches
    /// everything the seeds reach (about 200 ms on a 1M-edge graph), so it is for tests,
    /// measurements and small graphs.
    pub fn exact(self) -> BoostParams {
        BoostParams {
            push_threshold: 0.0,
            ..self
        }
    }

    fn sanitized(self) -> BoostParams {
        let or_default = |v: f64, default: f64| if v.is_nan() { default } else { v };
        BoostParams {
            damping: or_default(self.damping, DEFAULT_DAMPING).clamp(0.0, 1.0),
            iterations: self.iterations,
            epsilon: or_default(self.epsilon, DEFAULT_EPSILON).max(0.0),
            push_threshold: or_default(self.push_threshold, DEFAULT_PUSH_THRESHOLD).max(0.0),
        }
    }
}

/// The strongest incoming contribution to a node: who passed it the most mass, over what.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Via {
    /// The neighbour that passed the mass.
    pub from: u32,
    /// The kind of the edge it came over (parallel edges of one kind count together).
    pub kind: RelationKind,
    /// The mass passed over those edges in all rounds, before this node kept its `1 − d` share
    /// and passed the rest on.
    pub amount: f64,
}

/// One node's boost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoostEntry {
    /// The node.
    pub node: u32,
    /// Its PageRank mass `p`, to be added to its seed score; never negative.
    pub score: f64,
    /// The neighbour that passed it the most mass; `None` when it got mass from no neighbour
    /// (a seed whose neighbours gave it nothing).
    pub via: Option<Via>,
}

/// The result of [`boost`]: every node the spread touched, with its mass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Boost {
    /// Touched nodes sorted by node id. Nodes not listed have `p = 0`.
    pub entries: Vec<BoostEntry>,
    /// Rounds run (at most the `iterations` asked for).
    pub rounds: u32,
    /// Mass dropped by the push threshold: the L1 distance to the exact iteration over the same
    /// rounds. The scores sum to `1 − mass_deficit` (empty seeds: no scores, deficit 0).
    pub mass_deficit: f64,
}

impl Boost {
    /// The entry of `node`, if the spread touched it.
    pub fn get(&self, node: u32) -> Option<&BoostEntry> {
        self.entries
            .binary_search_by_key(&node, |e| e.node)
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The boost of `node`; 0 for a node the spread did not touch.
    pub fn score(&self, node: u32) -> f64 {
        self.get(node).map_or(0.0, |e| e.score)
    }
}

/// Spreads the seeds' relevance over `graph`; see the module documentation for the iteration.
///
/// `seeds` are `(node, score)` pairs: duplicates add up; pairs with an unknown node or a score
/// that is not finite and positive are ignored. No usable seed gives an empty boost. Allocates
/// scratch the size of the graph; use [`boost_with`] on a hot path.
pub fn boost(
    graph: &Graph,
    seeds: &[(u32, f64)],
    weights: &KindWeights,
    params: &BoostParams,
) -> Boost {
    boost_with(graph, seeds, weights, params, &mut BoostScratch::new())
}

/// [`boost`] with caller-owned scratch buffers. The result depends only on the inputs, never on
/// what the scratch was used for before.
pub fn boost_with(
    graph: &Graph,
    seeds: &[(u32, f64)],
    weights: &KindWeights,
    params: &BoostParams,
    scratch: &mut BoostScratch,
) -> Boost {
    let n = graph.node_count();
    let params = params.sanitized();
    let d = params.damping;
    let table = weights.byte_table();
    // live[mask]: whether a node with these kinds has any edge of positive weight.
    let live: [bool; 256] =
        std::array::from_fn(|mask| (0..8).any(|k| mask & (1 << k) != 0 && table[k] > 0.0));

    let usable =
        |&(node, score): &(u32, f64)| (node as usize) < n && score.is_finite() && score > 0.0;
    // Scale by the largest score first so that the sum cannot overflow.
    let max = seeds
        .iter()
        .filter(|s| usable(s))
        .fold(0.0f64, |m, s| m.max(s.1));
    if max <= 0.0 {
        return Boost::default();
    }

    let BoostScratch {
        slots,
        touched,
        cur,
        next,
        restart,
    } = scratch;
    if slots.len() < n {
        slots.resize(n, Slot::EMPTY);
    }

    // r₀ = s, in frontier 0.
    for &(node, score) in seeds.iter().filter(|s| usable(s)) {
        let slot = &mut slots[node as usize];
        if slot.flags & IN_R == 0 {
            slot.flags |= IN_R;
            cur.push(node);
        }
        slot.r[0] += score / max;
    }
    let total: f64 = cur.iter().map(|&u| slots[u as usize].r[0]).sum();
    for &u in cur.iter() {
        let slot = &mut slots[u as usize];
        slot.r[0] /= total;
        restart.push((u, slot.r[0]));
    }

    let mut rounds = 0;
    let mut dropped = 0.0;
    for round in 0..params.iterations {
        rounds += 1;
        let (c, x_) = ((round & 1) as usize, ((round + 1) & 1) as usize);
        let (in_cur, in_next) = (IN_R << c, IN_R << x_);
        let mut dangling = 0.0;
        for &u in cur.iter() {
            let x = slots[u as usize].r[c];
            if !live[graph.kind_mask(u) as usize] {
                dangling += x;
                continue;
            }
            let (neighbours, kinds) = graph.row(u);
            if x < params.push_threshold * neighbours.len() as f64 {
                dropped += x;
                continue;
            }
            let slot = &mut slots[u as usize];
            if slot.flags & SENT == 0 {
                slot.flags |= SENT;
                slot.weight = kinds.iter().map(|&k| table[k as usize]).sum();
            }
            slot.sent += x;
            let f = d * x / slot.weight;
            // What u has passed per unit of weight over all rounds so far, for explain.
            let f_all = d * slot.sent / slot.weight;
            // A row is sorted by (neighbour, kind): parallel edges of one kind form a run and
            // are pushed (and explained) as one edge of their summed weight.
            let mut i = 0;
            while i < neighbours.len() {
                let (v, k) = (neighbours[i], kinds[i]);
                let mut j = i + 1;
                while j < neighbours.len() && neighbours[j] == v && kinds[j] == k {
                    j += 1;
                }
                let w = table[k as usize] * (j - i) as f64;
                i = j;
                if w <= 0.0 {
                    continue;
                }
                let target = &mut slots[v as usize];
                if target.flags & in_next == 0 {
                    target.flags |= in_next;
                    next.push(v);
                }
                target.r[x_] += f * w;
                // Streaming argmax of the total each (sender, kind) passed: the holder's total
                // is refreshed whenever it sends again, and a challenger is compared with its
                // own running total at each of its sends, so after its last send the true
                // maximum holds the slot.
                let amount = f_all * w;
                if target.best_from == u && target.best_kind == k {
                    target.best = amount;
                } else if amount > target.best
                    || (amount > 0.0
                        && amount == target.best
                        && (u, k) < (target.best_from, target.best_kind))
                {
                    target.best = amount;
                    target.best_from = u;
                    target.best_kind = k;
                }
            }
        }
        if dangling > 0.0 {
            for &(s, share) in restart.iter() {
                let slot = &mut slots[s as usize];
                if slot.flags & in_next == 0 {
                    slot.flags |= in_next;
                    next.push(s);
                }
                slot.r[x_] += d * dangling * share;
            }
        }

        // p_{j+1} − p_j = r_{j+1} − d·r_j; then p += (1 − d)·r_j and r_j is spent.
        let mut change = 0.0;
        for &u in next.iter() {
            let slot = &slots[u as usize];
            if slot.flags & in_cur == 0 {
                change += slot.r[x_];
            }
        }
        for &u in cur.iter() {
            let slot = &mut slots[u as usize];
            change += (slot.r[x_] - d * slot.r[c]).abs();
            if slot.flags & IN_P == 0 {
                slot.flags |= IN_P;
                touched.push(u);
            }
            slot.p += (1.0 - d) * slot.r[c];
            slot.r[c] = 0.0;
            slot.flags &= !in_cur;
        }
        cur.clear();
        std::mem::swap(cur, next);
        if change < params.epsilon {
            break;
        }
    }
    // The last frontier is kept whole: p_k = (1 − d)·Σ_{j<k} r_j + r_k.
    let c = (rounds & 1) as usize;
    for &u in cur.iter() {
        let slot = &mut slots[u as usize];
        if slot.flags & IN_P == 0 {
            slot.flags |= IN_P;
            touched.push(u);
        }
        slot.p += slot.r[c];
        slot.r[c] = 0.0;
        slot.flags &= !(IN_R << c);
    }
    cur.clear();

    touched.sort_unstable();
    let entries = touched
        .iter()
        .map(|&u| {
            let slot = &slots[u as usize];
            BoostEntry {
                node: u,
                score: slot.p,
                via: (slot.best_from != u32::MAX).then(|| Via {
                    from: slot.best_from,
                    kind: RelationKind::from_u8(slot.best_kind),
                    amount: slot.best,
                }),
            }
        })
        .collect();

    for &u in touched.iter() {
        slots[u as usize] = Slot::EMPTY;
    }
    touched.clear();
    restart.clear();

    Boost {
        entries,
        rounds,
        mass_deficit: d * dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> Graph {
        // 0 — 1 — 2, 3 alone.
        Graph::from_edges(4, &[(0, 1, 0), (1, 2, 1)])
    }

    #[test]
    fn empty_and_unusable_seeds_give_empty_boost() {
        let g = path();
        let w = KindWeights::default();
        let params = BoostParams::default();
        assert_eq!(boost(&g, &[], &w, &params), Boost::default());
        let junk = [
            (9, 1.0),
            (0, 0.0),
            (1, -2.0),
            (2, f64::NAN),
            (2, f64::INFINITY),
        ];
        assert_eq!(boost(&g, &junk, &w, &params), Boost::default());
        assert_eq!(
            boost(&Graph::default(), &[(0, 1.0)], &w, &params),
            Boost::default()
        );
    }

    #[test]
    fn zero_iterations_returns_normalised_seeds() {
        let g = path();
        let params = BoostParams {
            iterations: 0,
            ..BoostParams::default()
        };
        let b = boost(
            &g,
            &[(0, 3.0), (2, 1.0), (0, 0.0)],
            &KindWeights::default(),
            &params,
        );
        assert_eq!(b.rounds, 0);
        assert_eq!(b.entries.len(), 2);
        assert!((b.score(0) - 0.75).abs() < 1e-15);
        assert!((b.score(2) - 0.25).abs() < 1e-15);
    }

    #[test]
    fn spreads_along_edges_and_explains() {
        let g = path();
        let b = boost(
            &g,
            &[(0, 1.0)],
            &KindWeights::default(),
            &BoostParams::default(),
        );
        assert!(b.score(1) > b.score(2));
        assert!(b.score(2) > 0.0);
        assert_eq!(b.score(3), 0.0);
        let via = b
            .get(2)
            .and_then(|e| e.via)
            .expect("node 2 is reached through 1");
        assert_eq!((via.from, via.kind), (1, RelationKind::LinksTo));
        let total: f64 = b.entries.iter().map(|e| e.score).sum();
        assert!((total + b.mass_deficit - 1.0).abs() < 1e-12);
    }

    #[test]
    fn scratch_reuse_is_invisible() {
        let g = path();
        let w = KindWeights::default();
        let params = BoostParams::default();
        let mut scratch = BoostScratch::new();
        let first = boost_with(&g, &[(2, 1.0)], &w, &params, &mut scratch);
        let _ = boost_with(&g, &[(0, 1.0), (3, 2.0)], &w, &params, &mut scratch);
        let again = boost_with(&g, &[(2, 1.0)], &w, &params, &mut scratch);
        assert_eq!(first, again);
    }
}
