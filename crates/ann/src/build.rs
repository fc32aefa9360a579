//! Inserting rows: one at a time, or a batch planned on several threads and linked in order.

use std::sync::PoisonError;

use crate::distance::dot;
use crate::quantize::{Exact, Sim};
use crate::search::{Scored, Scratch};
use crate::{row_vector, Hnsw, HnswParams, NONE};

impl Hnsw {
    /// Adds `vector` (already normalised) under `key`. A key already present is replaced: its
    /// old row becomes a tombstone and the vector gets a new row.
    ///
    /// # Panics
    /// If `vector.len()` differs from the index dimension, or the index already holds
    /// `u32::MAX - 1` rows.
    pub fn insert(&mut self, key: u64, vector: &[f32]) {
        let (row, level) = self.append_row(key, vector);
        self.link_one(row, level, vector);
    }

    /// Links one pushed row (`query` is its vector) into the graph by itself; the first row
    /// becomes the entry point, as does any row above the top level.
    pub(crate) fn link_one(&mut self, row: u32, level: usize, query: &[f32]) {
        if self.entry == NONE {
            self.entry = row;
            self.max_level = level;
            return;
        }
        self.connect(row, level, query);
        if level > self.max_level {
            self.entry = row;
            self.max_level = level;
        }
    }

    /// Adds the rows of `items` (each `(key, normalised vector)`) as [`Hnsw::insert`] would
    /// one by one, using every available core: in batches of [`BATCH`], each new row's
    /// neighbours are searched in parallel over the graph as it stood before its batch, plus
    /// the batch's earlier rows by exact similarity; then the rows are linked in, the
    /// back-links of layer 0 again in parallel (each thread owns a range of rows). A row does
    /// not walk through the links its batch-mates add, which costs a little recall (see the
    /// tests) and gains the cores. The result depends on the items and their order only, not
    /// on the number of threads.
    ///
    /// # Panics
    /// As [`Hnsw::insert`].
    pub fn insert_batch(&mut self, items: &[(u64, &[f32])]) {
        self.insert_batch_on(items, crate::cores());
    }

    pub(crate) fn insert_batch_on(&mut self, items: &[(u64, &[f32])], threads: usize) {
        let mut rest = items;
        // A young graph is too small to search in batches: its first rows go one by one.
        while let Some(((key, vector), tail)) = rest.split_first() {
            if self.rows() >= SEQUENTIAL_ROWS {
                break;
            }
            self.insert(*key, vector);
            rest = tail;
        }
        for chunk in rest.chunks(BATCH) {
            self.insert_chunk(chunk, threads);
        }
    }

    /// One batch of [`Hnsw::insert_batch`]; the graph already has an entry point.
    pub(crate) fn insert_chunk(&mut self, chunk: &[(u64, &[f32])], threads: usize) {
        let rows: Vec<(u32, usize)> = chunk
            .iter()
            .map(|(key, vector)| self.append_row(*key, vector))
            .collect();
        self.link_batch(&rows, threads);
    }

    /// An index over `keys` and their normalised vectors (`vectors[i * dim..(i + 1) * dim]`
    /// is `keys[i]`'s), the same graph [`Hnsw::insert_batch`] of them in this order builds,
    /// but over the given array itself instead of a copy: a million 384-dimensional vectors
    /// are 1.5 GB, which a build should hold once. `progress(rows linked)` after each batch.
    ///
    /// # Panics
    /// If `vectors` is not `keys.len() * dim` long, a key repeats, or as [`Hnsw::new`].
    pub fn from_rows(
        dim: usize,
        params: HnswParams,
        keys: Vec<u64>,
        vectors: Vec<f32>,
        progress: &mut dyn FnMut(usize),
    ) -> Hnsw {
        Self::from_rows_on(dim, params, keys, vectors, crate::cores(), progress)
    }

    pub(crate) fn from_rows_on(
        dim: usize,
        params: HnswParams,
        keys: Vec<u64>,
        vectors: Vec<f32>,
        threads: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Hnsw {
        let mut g = Hnsw::new(dim, params);
        assert_eq!(
            vectors.len(),
            keys.len() * dim,
            "{} numbers given for {} rows of dimension {dim}",
            vectors.len(),
            keys.len()
        );
        g.vectors = vectors;
        g.reserve_nodes(keys.len());
        let mut next = 0;
        // As `insert_batch_on`: the first rows one by one, then batches.
        while next < keys.len() && next < SEQUENTIAL_ROWS {
            let (row, level) = g.push_node(keys[next]);
            let query = g.vector(row).to_vec();
            g.link_one(row, level, &query);
            next += 1;
        }
        progress(next);
        for chunk in keys[next..].chunks(BATCH) {
            let rows: Vec<(u32, usize)> = chunk.iter().map(|&key| g.push_node(key)).collect();
            g.link_batch(&rows, threads);
            next += chunk.len();
            progress(next);
        }
        assert_eq!(g.len(), keys.len(), "a key repeats in Hnsw::from_rows");
        g
    }

    /// Links a batch of rows already pushed (vector and node) into the graph, which already
    /// has an entry point: see [`Hnsw::insert_batch`].
    pub(crate) fn link_batch(&mut self, rows: &[(u32, usize)], threads: usize) {
        // Search: read-only, the rows shared out to the threads one at a time.
        let plans: Vec<Vec<Vec<Scored>>> = {
            let this = &*self;
            let next = std::sync::atomic::AtomicUsize::new(0);
            let work = || {
                let mut done = Vec::new();
                this.with_scratch(|s| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= rows.len() {
                        break;
                    }
                    done.push((i, this.plan_row(s, rows, i)));
                });
                done
            };
            let mut found: Vec<(usize, Vec<Vec<Scored>>)> = if threads <= 1 {
                work()
            } else {
                std::thread::scope(|scope| {
                    let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
                    handles
                        .into_iter()
                        .flat_map(|h| h.join().expect("an HNSW build thread panicked"))
                        .collect()
                })
            };
            found.sort_unstable_by_key(|(i, _)| *i);
            found.into_iter().map(|(_, plan)| plan).collect()
        };

        // Link: each new row's own lists, then the back-links in batch order per target row.
        let mut back0 = Vec::new();
        for (&(row, _), plan) in rows.iter().zip(&plans) {
            for (layer, selected) in plan.iter().enumerate() {
                let ids: Vec<u32> = selected.iter().map(|s| s.row).collect();
                self.set_neighbors(row, layer, &ids);
            }
        }
        for (&(row, _), plan) in rows.iter().zip(&plans) {
            for (layer, selected) in plan.iter().enumerate().skip(1) {
                for s in selected {
                    self.link_back(s.row, row, s.sim, layer);
                }
            }
            back0.extend(plan[0].iter().map(|s| (s.row, row, s.sim)));
        }
        self.link_back0_parallel(&back0, threads);

        for &(row, level) in rows {
            if level > self.max_level {
                self.entry = row;
                self.max_level = level;
            }
        }
    }

    /// The neighbours the `i`-th row of a batch links to on each of its layers, with their
    /// similarities: [`Hnsw::connect`]'s search over the graph before the batch, joined by
    /// the batch's earlier rows.
    pub(crate) fn plan_row(
        &self,
        s: &mut Scratch,
        batch: &[(u32, usize)],
        i: usize,
    ) -> Vec<Vec<Scored>> {
        let (row, level) = batch[i];
        let query = self.vector(row);
        let mut candidates: Vec<Vec<Scored>> = vec![Vec::new(); level + 1];
        let exact = Exact::new(self, query);
        let mut cur = Scored {
            sim: exact.sim(self.entry),
            row: self.entry,
        };
        for layer in (level + 1..=self.max_level).rev() {
            cur = self.greedy(&exact, cur, layer);
        }
        let mut entries = vec![cur];
        for layer in (0..=level.min(self.max_level)).rev() {
            let found = self.search_layer(
                s,
                &exact,
                &entries,
                self.params.ef_construction,
                layer,
                false,
            );
            candidates[layer].clone_from(&found);
            entries = found;
        }
        let mut selected = Vec::with_capacity(self.params.m);
        candidates
            .into_iter()
            .enumerate()
            .map(|(layer, mut found)| {
                for &(other, other_level) in &batch[..i] {
                    if other_level >= layer {
                        found.push(Scored {
                            sim: dot(query, self.vector(other)),
                            row: other,
                        });
                    }
                }
                found.sort_unstable_by(|a, b| b.cmp(a));
                found.truncate(self.params.ef_construction);
                self.select_neighbors(&found, self.params.m, &mut selected);
                selected
                    .iter()
                    .map(|&n| {
                        *found
                            .iter()
                            .find(|s| s.row == n)
                            .expect("selected from found")
                    })
                    .collect()
            })
            .collect()
    }

    /// Applies layer-0 back-links `(target, new, similarity)` in their order per target,
    /// each thread on its own contiguous range of target rows.
    pub(crate) fn link_back0_parallel(&mut self, requests: &[(u32, u32, f32)], threads: usize) {
        let stride = self.stride0();
        let cap = self.capacity(0);
        let (dim, vectors) = (self.dim, &self.vectors[..]);
        let rows = self.keys.len();
        let per = rows.div_ceil(threads.max(1)).max(1);
        let apply = |links: &mut [u32], first: usize| {
            let mut candidates = Vec::new();
            let mut kept = Vec::new();
            for &(target, new, sim) in requests {
                let t = target as usize;
                if t >= first && t < first + per {
                    let start = (t - first) * stride;
                    link_back_at(
                        links,
                        start,
                        cap,
                        (vectors, dim),
                        (target, new, sim),
                        (&mut candidates, &mut kept),
                    );
                }
            }
        };
        if threads <= 1 {
            apply(&mut self.links0, 0);
            return;
        }
        std::thread::scope(|scope| {
            for (part, links) in self.links0.chunks_mut(per * stride).enumerate() {
                scope.spawn(move || apply(links, part * per));
            }
        });
    }

    /// Pushes a new row (no links yet) and returns it with its drawn level; a key already
    /// present becomes a tombstone.
    pub(crate) fn append_row(&mut self, key: u64, vector: &[f32]) -> (u32, usize) {
        assert_eq!(
            vector.len(),
            self.dim,
            "vector of dimension {} inserted into an index of dimension {}",
            vector.len(),
            self.dim
        );
        self.vectors.extend_from_slice(vector);
        self.push_node(key)
    }

    /// The graph's side of a new row whose vector is already in `vectors`: its key, level
    /// and empty link lists.
    pub(crate) fn push_node(&mut self, key: u64) -> (u32, usize) {
        let row = u32::try_from(self.rows())
            .ok()
            .filter(|&r| r < NONE)
            .expect("HNSW holds at most u32::MAX - 1 rows");
        self.remove(key);
        self.codes = None;

        let level = self.random_level();
        self.keys.push(key);
        self.deleted.push(false);
        self.levels.push(level as u8);
        self.links0.resize(self.links0.len() + self.stride0(), 0);
        if level == 0 {
            self.upper_offsets.push(NONE);
        } else {
            let offset =
                u32::try_from(self.links_upper.len()).expect("upper-layer links exceed u32");
            self.upper_offsets.push(offset);
            self.links_upper
                .resize(self.links_upper.len() + level * self.stride_upper(), 0);
        }
        self.rows_by_key.push(&self.keys, row);
        (row, level)
    }
}

impl Hnsw {
    /// The neighbour selection heuristic (the paper's algorithm 4): going through
    /// `candidates` best first, keep one only if it is closer to the base than to every
    /// neighbour already kept. This spreads the links over directions instead of spending them
    /// all inside one tight cluster, which keeps clusters connected to each other.
    pub(crate) fn select_neighbors(&self, candidates: &[Scored], max: usize, out: &mut Vec<u32>) {
        select_neighbors_in((&self.vectors, self.dim), candidates, max, out);
    }

    /// Links a newly added `row` into every layer up to `level`.
    pub(crate) fn connect(&mut self, row: u32, level: usize, query: &[f32]) {
        let mut cur = Scored {
            sim: dot(query, self.vector(self.entry)),
            row: self.entry,
        };
        for layer in (level + 1..=self.max_level).rev() {
            cur = self.greedy(&Exact::new(self, query), cur, layer);
        }
        let mut scratch = self
            .scratch
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default();
        let mut entries = vec![cur];
        let mut selected = Vec::with_capacity(self.params.m);
        for layer in (0..=level.min(self.max_level)).rev() {
            // Tombstones are kept as candidates: they are valid waypoints.
            let found = self.search_layer(
                &mut scratch,
                &Exact::new(self, query),
                &entries,
                self.params.ef_construction,
                layer,
                false,
            );
            // New rows get `m` links on every layer; layer 0 leaves room for `m` more that
            // later rows add back to them.
            self.select_neighbors(&found, self.params.m, &mut selected);
            self.set_neighbors(row, layer, &selected);
            for &n in &selected {
                let sim = found.iter().find(|s| s.row == n).map_or(0.0, |s| s.sim);
                self.link_back(n, row, sim, layer);
            }
            entries = found;
        }
        self.scratch
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .push(scratch);
    }

    /// Adds `new` (at similarity `sim`) to the neighbours of `row` on `layer`; when the list
    /// is full, re-selects among the old neighbours and `new` with the heuristic.
    pub(crate) fn link_back(&mut self, row: u32, new: u32, sim: f32, layer: usize) {
        let cap = self.capacity(layer);
        let start = self.block(row, layer);
        let links = if layer == 0 {
            &mut self.links0
        } else {
            &mut self.links_upper
        };
        link_back_at(
            links,
            start,
            cap,
            (&self.vectors, self.dim),
            (row, new, sim),
            (&mut Vec::new(), &mut Vec::new()),
        );
    }
}

/// Rows per batch of [`Hnsw::insert_batch`]: enough work to share out, few enough that a
/// row rarely misses a batch-mate's links.
pub(crate) const BATCH: usize = 256;

/// [`Hnsw::insert_batch`] inserts one by one until the graph has this many rows.
pub(crate) const SEQUENTIAL_ROWS: usize = 4 * BATCH;

/// The neighbour selection heuristic over `candidates` (best first), see
/// [`Hnsw::select_neighbors`]; a free function so the build threads can run it.
pub(crate) fn select_neighbors_in(
    vectors: (&[f32], usize),
    candidates: &[Scored],
    max: usize,
    out: &mut Vec<u32>,
) {
    out.clear();
    for c in candidates {
        if out.len() >= max {
            break;
        }
        let cv = row_vector(vectors, c.row);
        if out
            .iter()
            .all(|&kept| dot(cv, row_vector(vectors, kept)) <= c.sim)
        {
            out.push(c.row);
        }
    }
}

/// Adds `new` (at similarity `sim`) to the `[count, neighbours…]` block at `links[start..]`
/// of `row`, which holds at most `cap`; when it is full, re-selects among the old
/// neighbours and `new` with the heuristic. `scratch` holds reusable buffers.
pub(crate) fn link_back_at(
    links: &mut [u32],
    start: usize,
    cap: usize,
    vectors: (&[f32], usize),
    (row, new, sim): (u32, u32, f32),
    (candidates, kept): (&mut Vec<Scored>, &mut Vec<u32>),
) {
    let count = links[start] as usize;
    if count < cap {
        links[start + 1 + count] = new;
        links[start] += 1;
        return;
    }
    let base = row_vector(vectors, row);
    candidates.clear();
    candidates.extend(links[start + 1..start + 1 + count].iter().map(|&n| Scored {
        sim: dot(base, row_vector(vectors, n)),
        row: n,
    }));
    candidates.push(Scored { sim, row: new });
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    select_neighbors_in(vectors, candidates, cap, kept);
    links[start] = kept.len() as u32;
    links[start + 1..start + 1 + kept.len()].copy_from_slice(kept);
}
