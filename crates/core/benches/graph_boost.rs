//! Latency of the graph boost on a synthetic 100k-node, 1M-edge graph, and how far the push
//! threshold moves it from the exact iteration.
//!
//! `cargo bench -p finder-core --bench graph_boost` prints, per damping and push threshold,
//! p50/p95/max latency over 200 queries of 20–200 seeds (one thread, reused scratch), the
//! nodes touched, and against the exact iteration (threshold 0) the L1 and L∞ error and how
//! much of the exact top 10 survives.
//! A plain `main` rather than criterion: the figures wanted are per-query percentiles.

use std::time::{Duration, Instant};

use finder_core::graph::{
    boost_with, Boost, BoostParams, BoostScratch, Graph, KindWeights, DEFAULT_DAMPING,
    DEFAULT_PUSH_THRESHOLD,
};

const NODES: u32 = 100_000;
const EDGES_PER_NODE: u32 = 10;
const QUERIES: usize = 200;
const WARMUP: usize = 20;

/// xorshift64*: small, deterministic, good enough for a synthetic graph.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Preferential attachment (each new node links to `EDGES_PER_NODE` earlier nodes, mostly
/// chosen in proportion to their degree), which gives power-law degrees with hubs in the
/// thousands; kinds drawn so that mentions dominate, as they do in a real corpus.
fn synthetic_graph(rng: &mut Rng) -> Vec<(u32, u32, u8)> {
    let mut edges = Vec::with_capacity((NODES * EDGES_PER_NODE) as usize);
    let mut ends: Vec<u32> = Vec::with_capacity(2 * (NODES * EDGES_PER_NODE) as usize);
    for u in 1..NODES {
        for _ in 0..EDGES_PER_NODE {
            let v = if ends.is_empty() || rng.below(4) == 0 {
                rng.below(u64::from(u)) as u32
            } else {
                ends[rng.below(ends.len() as u64) as usize]
            };
            let kind = match rng.below(10) {
                0..=4 => 0,
                5 | 6 => 1,
                7 => 2,
                8 => 3,
                _ => rng.below(8) as u8,
            };
            edges.push((u, v, kind));
            ends.push(u);
            ends.push(v);
        }
    }
    edges
}

/// Seed lists like fused hits: 20–200 distinct nodes with RRF-shaped scores.
fn queries(rng: &mut Rng) -> Vec<Vec<(u32, f64)>> {
    (0..QUERIES + WARMUP)
        .map(|_| {
            let count = 20 + rng.below(181) as usize;
            (0..count)
                .map(|rank| {
                    let node = rng.below(u64::from(NODES)) as u32;
                    (node, 1.0 / (60.0 + rank as f64 + 1.0))
                })
                .collect()
        })
        .collect()
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// The `k` best nodes by `seed + p`, as the pipeline would rank them.
fn top(seeds: &[(u32, f64)], b: &Boost, k: usize) -> Vec<u32> {
    let mut ranked: Vec<(f64, u32)> = b.entries.iter().map(|e| (e.score, e.node)).collect();
    for r in ranked.iter_mut() {
        r.0 += seeds
            .iter()
            .filter(|s| s.0 == r.1)
            .map(|s| s.1)
            .sum::<f64>();
    }
    best(ranked, k)
}

/// The `k` best nodes by `p` among those that are not seeds: what the boost brings in.
fn top_new(seeds: &[(u32, f64)], b: &Boost, k: usize) -> Vec<u32> {
    let ranked = b
        .entries
        .iter()
        .filter(|e| !seeds.iter().any(|s| s.0 == e.node))
        .map(|e| (e.score, e.node))
        .collect();
    best(ranked, k)
}

fn best(mut ranked: Vec<(f64, u32)>, k: usize) -> Vec<u32> {
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.into_iter().take(k).map(|(_, n)| n).collect()
}

fn overlap(a: &[u32], b: &[u32]) -> usize {
    a.iter().filter(|n| b.contains(n)).count()
}

/// L1 and L∞ distance; `exact` touches a superset of what `approx` does.
fn error(approx: &Boost, exact: &Boost) -> (f64, f64) {
    let (mut l1, mut linf) = (0.0f64, 0.0f64);
    for e in &exact.entries {
        let diff = (e.score - approx.score(e.node)).abs();
        l1 += diff;
        linf = linf.max(diff);
    }
    (l1, linf)
}

fn main() {
    // `cargo test --all-targets` runs bench targets without `--bench`: check that it starts,
    // and leave the measurement to `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("graph_boost: run with `cargo bench -p finder-core --bench graph_boost`");
        return;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let edges = synthetic_graph(&mut rng);
    let started = Instant::now();
    let graph = Graph::from_edges(NODES, &edges);
    let build = started.elapsed();
    let max_degree = (0..NODES).map(|u| graph.degree(u)).max().unwrap_or(0);
    println!(
        "graph: {} nodes, {} edges, max degree {}, built in {:.0} ms; {} queries of 20-200 seeds",
        graph.node_count(),
        graph.edge_count(),
        max_degree,
        build.as_secs_f64() * 1e3,
        QUERIES
    );
    let queries = queries(&mut rng);
    let weights = KindWeights::default();
    let mut scratch = BoostScratch::new();

    // Errors are against the exact iteration (threshold 0): the worst L1 and L∞ over the
    // queries, and the share of the exact top 10 by seed + p and by p among non-seeds kept.
    println!(
        "{:>7} {:>10} {:>7} {:>7} {:>7} {:>7} {:>6} {:>8} {:>8} {:>7} {:>7}",
        "damping",
        "threshold",
        "p50 ms",
        "p95 ms",
        "max ms",
        "touched",
        "rounds",
        "max L1",
        "max L∞",
        "top10",
        "new10"
    );
    for damping in [DEFAULT_DAMPING, 0.5] {
        let exact_params = BoostParams {
            damping,
            ..BoostParams::default()
        }
        .exact();
        let exact: Vec<Boost> = queries
            .iter()
            .map(|q| boost_with(&graph, q, &weights, &exact_params, &mut scratch))
            .collect();
        for threshold in [0.0, 1e-6, 3e-6, 1e-5, DEFAULT_PUSH_THRESHOLD, 3e-5, 1e-4] {
            let params = BoostParams {
                push_threshold: threshold,
                ..exact_params
            };
            let mut times = Vec::with_capacity(QUERIES);
            let (mut touched, mut rounds) = (0usize, 0u32);
            let (mut l1, mut linf, mut top10, mut new10) = (0.0f64, 0.0f64, 0usize, 0usize);
            for (i, seeds) in queries.iter().enumerate() {
                let t = Instant::now();
                let b = boost_with(&graph, seeds, &weights, &params, &mut scratch);
                let elapsed = t.elapsed();
                if i < WARMUP {
                    continue;
                }
                times.push(elapsed);
                touched += b.entries.len();
                rounds += b.rounds;
                let (e1, einf) = error(&b, &exact[i]);
                l1 = l1.max(e1);
                linf = linf.max(einf);
                top10 += overlap(&top(seeds, &b, 10), &top(seeds, &exact[i], 10));
                new10 += overlap(&top_new(seeds, &b, 10), &top_new(seeds, &exact[i], 10));
            }
            times.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let pct = |hits: usize| 100.0 * hits as f64 / (10 * QUERIES) as f64;
            let mark = if threshold == DEFAULT_PUSH_THRESHOLD {
                "*"
            } else {
                " "
            };
            println!(
                "{:>7} {:>9.1e}{} {:>7.3} {:>7.3} {:>7.3} {:>7} {:>6.1} {:>8.1e} {:>8.1e} {:>6.1}% {:>6.1}%",
                damping,
                threshold,
                mark,
                ms(percentile(&times, 0.5)),
                ms(percentile(&times, 0.95)),
                ms(percentile(&times, 1.0)),
                touched / QUERIES,
                f64::from(rounds) / QUERIES as f64,
                l1,
                linf,
                pct(top10),
                pct(new10),
            );
        }
    }
    println!("* the default push threshold");
}
