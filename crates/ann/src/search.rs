//! Walking the graph: the greedy descent, the beam on layer 0, the exact re-score.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::PoisonError;

use crate::distance::dot;
use crate::quantize::{Coded, Exact, Sim};
use crate::Hnsw;

impl Hnsw {
    /// The (approximately) `k` nearest live vectors to `query`, best first, as
    /// `(key, cosine similarity)`. `ef` is the beam width on layer 0 (at least `k`); larger is
    /// slower and finds more of the true neighbours. Ties break on insertion order.
    ///
    /// When the graph walk reaches fewer than `k` live rows (a tiny index, or one where
    /// tombstones cut off part of the graph) while more exist, this falls back to exact
    /// search, so it returns `min(k, len)` results.
    ///
    /// # Panics
    /// If `query.len()` differs from the index dimension.
    pub fn search(&self, query: &[f32], k: usize, ef: usize) -> Vec<(u64, f32)> {
        self.check_query(query);
        if k == 0 || self.is_empty() {
            return Vec::new();
        }
        let ef = ef.max(k);
        let found = match &self.codes {
            None => self.walk(&Exact::new(self, query), ef),
            Some(codes) => {
                let coded = Coded::new(codes, self.dim, query);
                let mut found = if self.rows() <= self.scan_rows {
                    self.scan(&coded, ef)
                } else {
                    self.walk(&coded, ef)
                };
                self.rescore(query, &mut found);
                found
            }
        };
        if found.len() < k && found.len() < self.len() {
            return self.exact(query, k);
        }
        found
            .into_iter()
            .take(k)
            .map(|s| (self.keys[s.row as usize], s.sim))
            .collect()
    }

    /// The `ef` best live rows a walk from the entry point finds, by `sim`, best first.
    pub(crate) fn walk(&self, sim: &impl Sim, ef: usize) -> Vec<Scored> {
        let mut cur = Scored {
            sim: sim.sim(self.entry),
            row: self.entry,
        };
        for layer in (1..=self.max_level).rev() {
            cur = self.greedy(sim, cur, layer);
        }
        self.with_scratch(|s| self.search_layer(s, sim, &[cur], ef, 0, true))
    }

    /// The `ef` best live rows by `sim` over every row, best first: on a small index, reading
    /// every row's code in order costs less than a walk's scattered reads (see
    /// [`SCAN_MAX_ROWS`]).
    pub(crate) fn scan(&self, sim: &impl Sim, ef: usize) -> Vec<Scored> {
        // Selected as integer keys in `Scored`'s order: a compare of two `u64`s instead of
        // `total_cmp` and a tie test, over every row of the index.
        let mut all: Vec<u64> = (0..self.rows() as u32)
            .filter(|&row| !self.deleted[row as usize])
            .map(|row| Scored::key(sim.sim(row), row))
            .collect();
        if all.len() > ef {
            all.select_nth_unstable_by(ef - 1, |a, b| b.cmp(a));
            all.truncate(ef);
        }
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.into_iter().map(Scored::from_key).collect()
    }

    /// Replaces the similarities of a walk over codes by the exact ones of the `f32` rows,
    /// and sorts the rows best first by them.
    pub(crate) fn rescore(&self, query: &[f32], found: &mut [Scored]) {
        let exact = Exact::new(self, query);
        exact.warm(found.iter().map(|s| s.row));
        for s in found.iter_mut() {
            s.sim = exact.sim(s.row);
        }
        found.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// The exact `k` nearest live vectors by brute force, best first; the oracle for
    /// `search`, and the better choice for small sets.
    ///
    /// # Panics
    /// If `query.len()` differs from the index dimension.
    pub fn exact(&self, query: &[f32], k: usize) -> Vec<(u64, f32)> {
        self.check_query(query);
        if k == 0 {
            return Vec::new();
        }
        let mut best: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(k + 1);
        for (row, v) in self.vectors.chunks_exact(self.dim).enumerate() {
            if self.deleted[row] {
                continue;
            }
            let s = Scored {
                sim: dot(query, v),
                row: row as u32,
            };
            if best.len() < k {
                best.push(Reverse(s));
            } else if best.peek().is_some_and(|w| s > w.0) {
                best.pop();
                best.push(Reverse(s));
            }
        }
        // Ascending `Reverse` order is descending similarity: best first.
        best.into_sorted_vec()
            .into_iter()
            .map(|Reverse(s)| (self.keys[s.row as usize], s.sim))
            .collect()
    }
}

/// A candidate row and its similarity to the current query. Ordered by similarity, ties by
/// the lower row (inserted earlier) being better, so every heap and sort is deterministic.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scored {
    pub(crate) sim: f32,
    pub(crate) row: u32,
}

impl Scored {
    /// An integer that orders as [`Scored`] does: the similarity's bits made monotone (as
    /// `f32::total_cmp` orders them) above the row's complement (the lower row is better).
    pub(crate) fn key(sim: f32, row: u32) -> u64 {
        (u64::from(crate::order::ordered_bits(sim)) << 32) | u64::from(!row)
    }

    pub(crate) fn from_key(key: u64) -> Scored {
        Scored {
            sim: crate::order::from_ordered_bits((key >> 32) as u32),
            row: !(key as u32),
        }
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sim
            .total_cmp(&other.sim)
            .then_with(|| other.row.cmp(&self.row))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

/// Buffers one graph walk needs: the visited set, both heaps and the unvisited neighbours of
/// the node being expanded.
///
/// `search` takes `&self` and may run on several threads, so these cannot live in the index
/// unguarded. They sit in a `Mutex<Vec<Scratch>>` pool on the index: a walk pops one (or
/// makes one), uses it without holding the lock, and pushes it back. The lock is held only
/// for the pop and the push, so concurrent searches do not serialise, the pool never holds
/// more buffers than the peak number of concurrent searches, and the memory goes away with
/// the index (a `thread_local` would keep a row-sized buffer alive on every thread that ever
/// searched, for the life of the thread, sized by the largest index it saw).
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) visited: Visited,
    pub(crate) candidates: BinaryHeap<Scored>,
    pub(crate) results: BinaryHeap<Reverse<Scored>>,
    pub(crate) fresh: Vec<u32>,
}

/// A visited set over rows that clears in O(1): a row is visited when its stamp equals the
/// current generation, and starting a walk bumps the generation. Only when the `u32`
/// generation wraps around are the stamps zeroed.
#[derive(Default)]
pub(crate) struct Visited {
    pub(crate) stamps: Vec<u32>,
    pub(crate) generation: u32,
}

impl Visited {
    pub(crate) fn reset(&mut self, rows: usize) {
        if self.stamps.len() < rows {
            self.stamps.resize(rows, 0);
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamps.fill(0);
            self.generation = 1;
        }
    }

    /// Marks `row` visited; returns whether it was new.
    #[inline]
    pub(crate) fn insert(&mut self, row: u32) -> bool {
        let stamp = &mut self.stamps[row as usize];
        let new = *stamp != self.generation;
        *stamp = self.generation;
        new
    }
}

impl Hnsw {
    pub(crate) fn with_scratch<T>(&self, f: impl FnOnce(&mut Scratch) -> T) -> T {
        let mut scratch = self
            .scratch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default();
        let out = f(&mut scratch);
        self.scratch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(scratch);
        out
    }

    /// Greedy descent on an upper layer: move to the best neighbour until none is better.
    pub(crate) fn greedy(&self, sim: &impl Sim, mut cur: Scored, layer: usize) -> Scored {
        loop {
            let mut moved = false;
            for &n in self.neighbors(cur.row, layer) {
                let sim = sim.sim(n);
                if sim > cur.sim {
                    cur = Scored { sim, row: n };
                    moved = true;
                }
            }
            if !moved {
                return cur;
            }
        }
    }

    /// Beam search on one layer from `entries`, keeping the `ef` best rows; returns them best
    /// first. With `live_only`, tombstoned rows are walked through but not returned (and do
    /// not count towards `ef`).
    pub(crate) fn search_layer(
        &self,
        s: &mut Scratch,
        sim: &impl Sim,
        entries: &[Scored],
        ef: usize,
        layer: usize,
        live_only: bool,
    ) -> Vec<Scored> {
        s.visited.reset(self.rows());
        s.candidates.clear();
        s.results.clear();
        for &e in entries {
            if s.visited.insert(e.row) {
                s.candidates.push(e);
                if !live_only || !self.deleted[e.row as usize] {
                    s.results.push(Reverse(e));
                }
            }
        }
        while s.results.len() > ef {
            s.results.pop();
        }

        while let Some(c) = s.candidates.pop() {
            // The best remaining candidate is worse than the worst result: done.
            let full = s.results.len() >= ef;
            if full && s.results.peek().is_some_and(|w| c.sim < w.0.sim) {
                break;
            }
            s.fresh.clear();
            for &n in self.neighbors(c.row, layer) {
                if s.visited.insert(n) {
                    s.fresh.push(n);
                }
            }
            sim.warm(s.fresh.iter().copied());
            for &n in &s.fresh {
                let sim = sim.sim(n);
                let worst = s.results.peek().map_or(f32::NEG_INFINITY, |w| w.0.sim);
                if s.results.len() >= ef && sim <= worst {
                    continue;
                }
                let scored = Scored { sim, row: n };
                s.candidates.push(scored);
                if !live_only || !self.deleted[n as usize] {
                    s.results.push(Reverse(scored));
                    if s.results.len() > ef {
                        s.results.pop();
                    }
                }
            }
        }
        let mut out: Vec<Scored> = s.results.drain().map(|Reverse(x)| x).collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out
    }
}

/// Up to this many rows, a search over codes scores every row's code in order instead of
/// walking the graph; the kept rows are re-scored exactly either way. A scan reads
/// `rows × dim` bytes in sequence, which the prefetcher streams; a walk with a beam of a few
/// hundred reads thousands of rows at scattered places, each a few cache misses. Measured
/// on SciFact (5,183 rows of 384 dimensions) and the 10k synthetic corpus, the scan was the
/// faster (docs/perf/i8-vector-walk.md); larger sizes were not measured, so they walk.
pub(crate) const SCAN_MAX_ROWS: usize = 10_000;
