//! An HNSW index (Malkov & Yashunin, 2016) for approximate nearest neighbours by cosine
//! similarity over L2-normalised `f32` vectors, with tombstone deletes and a checksummed
//! binary file format.
//!
//! Layout, chosen for a million 384-dimensional vectors on a small machine: every vector
//! lives in one flat `Vec<f32>` (row `r` at `r * dim`), rows are internal `u32` ids, and the
//! graph is stored in fixed-stride `u32` arrays — layer 0 holds `1 + 2m` slots per row (a
//! count, then up to `2m` neighbours), the upper layers `1 + m` slots per row and layer in a
//! second array that only rows above layer 0 use (about one row in `m`). There are no
//! per-node allocations, so building and loading are a handful of large `Vec`s.
//!
//! An index that answers queries may also hold `i8` codes of its rows, one scale per row
//! ([`Hnsw::quantize`]): the walk then scores the codes, a quarter of the bytes, and only the
//! rows it keeps are re-scored with their `f32` vectors.
//!
//! Similarity is the dot product throughout (vectors are normalised, so it equals the
//! cosine); "closer" always means "larger dot product".
//!
//! Deleting a key only marks its row as a tombstone: the row stays in the graph as a
//! waypoint, so search quality does not drop suddenly, but it is never returned. Re-inserting
//! a key tombstones its old row and adds a new one. [`Hnsw::compact`] rebuilds the graph
//! without tombstones once they make up a noticeable fraction of the rows.
//!
//! Everything is deterministic given the seed and the order of operations: levels come from
//! an internal SplitMix64 generator whose state is saved with the index, and every ordering
//! breaks ties on the row id.
//!
//! # File format
//!
//! Version 1, all integers little-endian:
//!
//! ```text
//! header  magic "FNDRHNSW" (8 bytes) | version u32 | body length u64
//! body    dim u32 | m u32 | ef_construction u32 | seed u64 | rng state u64 | rows u64
//!         | entry row u32 (u32::MAX when empty) | max level u32 | upper-layer slots u64
//!         | keys: rows × u64 | tombstones: rows × u8 (0 or 1) | levels: rows × u8
//!         | vectors: rows × dim × f32 | layer 0: rows × (1 + 2m) × u32 (count, neighbours)
//!         | upper layers: slots × u32: for each row with level > 0, in row order,
//!           `level` blocks of (1 + m) u32 (count, neighbours) for layers 1..=level
//! trailer blake3 of the body (32 bytes)
//! ```
//!
//! The body length in the header lets a reader check the counts before trusting them, and
//! the trailer lets a writer stream the body without holding it in memory.

mod build;
pub mod distance;
mod file;
mod key_rows;
pub mod order;
mod quantize;
mod rows;
mod search;
#[cfg(test)]
mod tests;

pub use rows::Rows;

use std::io;
use std::sync::Mutex;

use key_rows::KeyRows;
use quantize::Codes;
use search::{Scratch, SCAN_MAX_ROWS};

/// Default neighbours per node on the upper layers (`2m` on layer 0): at a million vectors,
/// 32 keeps the exact top 10 at a given beam better than 16 does, for 18% more build time
/// and 128 bytes a row (docs/perf/hnsw-beam.md).
pub const DEFAULT_M: usize = 32;

/// Default beam width while inserting.
pub const DEFAULT_EF_CONSTRUCTION: usize = 200;

/// Default seed of the level generator.
pub const DEFAULT_SEED: u64 = 0x5EED_F1DE_4A11_0001;

/// The largest `m` accepted; far beyond any useful value, it bounds the stride a file may
/// declare.
const MAX_M: usize = 1 << 12;

/// Levels are capped so that a level fits a byte and a freak draw cannot make the entry
/// point absurdly tall. With `m >= 2` a level above 24 has probability below 2^-24 per row.
const MAX_LEVEL: usize = 24;

/// Marks "no row" (an empty index's entry point, a level-0 row's upper-layer offset).
const NONE: u32 = u32::MAX;

/// Build parameters of an [`Hnsw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HnswParams {
    /// Neighbours kept per node on the upper layers; layer 0 keeps up to `2m`. At least 2.
    pub m: usize,
    /// Beam width while inserting; larger builds a better graph, more slowly.
    pub ef_construction: usize,
    /// Seed of the level generator.
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            m: DEFAULT_M,
            ef_construction: DEFAULT_EF_CONSTRUCTION,
            seed: DEFAULT_SEED,
        }
    }
}

/// Why a stored vector index could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AnnError {
    #[error(
        "not a Finder vector index: expected the magic bytes \"{expected}\", found \"{found}\""
    )]
    BadMagic { expected: String, found: String },
    #[error("vector index format version {found} is not supported: this build reads version {expected}; rebuild the vector index")]
    UnsupportedVersion { found: u32, expected: u32 },
    #[error("vector index is truncated: expected {expected} bytes of {section}, the input ended after {found}")]
    Truncated {
        section: &'static str,
        expected: u64,
        found: u64,
    },
    #[error("vector index is corrupt: checksum mismatch (expected blake3 {expected}, computed {computed})")]
    Checksum { expected: String, computed: String },
    #[error("vector index is corrupt: {0}")]
    Corrupt(String),
    #[error("reading the vector index: {0}")]
    Io(#[from] io::Error),
}

/// A hierarchical navigable small world graph over normalised vectors keyed by `u64`.
///
/// `search` and `exact` take `&self` and may run on many threads at once (the type is `Sync`);
/// `insert`, `remove` and `compact` need exclusive access, so a writer builds or updates its
/// own copy and publishes it, in keeping with the index's immutable snapshots.
pub struct Hnsw {
    dim: usize,
    params: HnswParams,
    /// Row `r` is `vectors[r * dim..(r + 1) * dim]`.
    vectors: Vec<f32>,
    /// The rows as `i8` codes, when the index answers queries (see [`Hnsw::quantize`]); any
    /// insert drops them.
    codes: Option<Codes>,
    /// A search over codes scans every row up to this many rows ([`SCAN_MAX_ROWS`]; tests
    /// lower it to reach the walk).
    scan_rows: usize,
    /// The external key of each row.
    keys: Vec<u64>,
    /// Tombstones: the row stays in the graph but is never returned.
    deleted: Vec<bool>,
    /// The top layer of each row.
    levels: Vec<u8>,
    /// Layer 0: `1 + 2m` slots per row, a count then the neighbour rows.
    links0: Vec<u32>,
    /// Where each row's upper-layer blocks start in `links_upper`; `NONE` for level-0 rows.
    upper_offsets: Vec<u32>,
    /// Layers 1..=level of each row above layer 0: `1 + m` slots per layer.
    links_upper: Vec<u32>,
    /// The row search starts from (the first row that reached `max_level`), or `NONE`.
    entry: u32,
    max_level: usize,
    /// The row of each live key.
    rows_by_key: KeyRows,
    /// SplitMix64 state for drawing levels.
    rng: u64,
    /// Reusable search buffers, see [`Scratch`].
    scratch: Mutex<Vec<Scratch>>,
}

impl std::fmt::Debug for Hnsw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hnsw")
            .field("dim", &self.dim)
            .field("params", &self.params)
            .field("rows", &self.rows())
            .field("live", &self.len())
            .field("max_level", &self.max_level)
            .finish_non_exhaustive()
    }
}

impl Hnsw {
    /// An empty index of `dim`-dimensional vectors.
    ///
    /// # Panics
    /// If `dim` is zero or above `u32::MAX`, or `m` is not in `2..=4096`: these are
    /// programming errors, not data errors.
    pub fn new(dim: usize, params: HnswParams) -> Self {
        assert!(
            dim > 0 && u32::try_from(dim).is_ok(),
            "HNSW dimension must be in 1..=u32::MAX, got {dim}"
        );
        assert!(
            (2..=MAX_M).contains(&params.m),
            "HNSW m must be in 2..={MAX_M}, got {}",
            params.m
        );
        let params = HnswParams {
            ef_construction: params.ef_construction.max(params.m),
            ..params
        };
        Hnsw {
            dim,
            params,
            vectors: Vec::new(),
            codes: None,
            scan_rows: SCAN_MAX_ROWS,
            keys: Vec::new(),
            deleted: Vec::new(),
            levels: Vec::new(),
            links0: Vec::new(),
            upper_offsets: Vec::new(),
            links_upper: Vec::new(),
            entry: NONE,
            max_level: 0,
            rows_by_key: KeyRows::default(),
            rng: params.seed,
            scratch: Mutex::new(Vec::new()),
        }
    }

    /// Room for `rows` more rows, so that a build of known size grows its arrays once
    /// instead of doubling them (a doubling holds the old and the new array at once: 1.5 GB
    /// of vectors would briefly need 4.5 GB).
    pub fn reserve(&mut self, rows: usize) {
        self.vectors.reserve_exact(rows * self.dim);
        self.reserve_nodes(rows);
    }

    /// [`Hnsw::reserve`] for everything but the vectors.
    fn reserve_nodes(&mut self, rows: usize) {
        self.keys.reserve_exact(rows);
        self.deleted.reserve_exact(rows);
        self.levels.reserve_exact(rows);
        self.links0.reserve_exact(rows * (1 + 2 * self.params.m));
        self.upper_offsets.reserve_exact(rows);
    }

    /// Live (not deleted) vectors.
    pub fn len(&self) -> usize {
        self.rows_by_key.len()
    }

    /// Whether no live vector is left.
    pub fn is_empty(&self) -> bool {
        self.rows_by_key.len() == 0
    }

    /// The dimension of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The parameters the graph is built with.
    pub fn params(&self) -> HnswParams {
        self.params
    }

    /// Deleted rows still in the graph; [`Hnsw::compact`] drops them.
    pub fn tombstones(&self) -> usize {
        self.rows() - self.len()
    }

    /// Tombstones `key`; returns whether it was present.
    pub fn remove(&mut self, key: u64) -> bool {
        self.rows_by_key.remove(&self.keys, &mut self.deleted, key)
    }

    /// The stored vector of a live key.
    pub fn get(&self, key: u64) -> Option<&[f32]> {
        self.rows_by_key
            .get(&self.keys, &self.deleted, key)
            .map(|row| self.vector(row))
    }

    /// A new index holding only the live vectors, built afresh with the same parameters and
    /// seed (in row order, on every core, so the result is deterministic). It costs as much as
    /// building from scratch; the graph is not patched in place because removing a waypoint would
    /// leave its neighbours with holes that only a rebuild repairs well.
    pub fn compact(&self) -> Hnsw {
        let mut out = Hnsw::new(self.dim, self.params);
        let live = self.len();
        out.vectors.reserve(live * self.dim);
        out.keys.reserve(live);
        out.deleted.reserve(live);
        out.levels.reserve(live);
        out.links0.reserve(live * out.stride0());
        out.upper_offsets.reserve(live);
        let live: Vec<(u64, &[f32])> = (0..self.rows() as u32)
            .filter(|&row| !self.deleted[row as usize])
            .map(|row| (self.keys[row as usize], self.vector(row)))
            .collect();
        out.insert_batch(&live);
        out
    }
}

impl Hnsw {
    fn rows(&self) -> usize {
        self.keys.len()
    }

    fn stride0(&self) -> usize {
        1 + 2 * self.params.m
    }

    fn stride_upper(&self) -> usize {
        1 + self.params.m
    }

    #[inline]
    fn vector(&self, row: u32) -> &[f32] {
        row_vector((&self.vectors, self.dim), row)
    }

    fn check_query(&self, query: &[f32]) {
        assert_eq!(
            query.len(),
            self.dim,
            "query of dimension {} against an index of dimension {}",
            query.len(),
            self.dim
        );
    }

    /// Where the `[count, neighbours...]` block of `row` on `layer` starts, in `links0` for
    /// layer 0 and in `links_upper` above.
    #[inline]
    fn block(&self, row: u32, layer: usize) -> usize {
        if layer == 0 {
            row as usize * self.stride0()
        } else {
            self.upper_offsets[row as usize] as usize + (layer - 1) * self.stride_upper()
        }
    }

    #[inline]
    fn neighbors(&self, row: u32, layer: usize) -> &[u32] {
        let start = self.block(row, layer);
        let links = if layer == 0 {
            &self.links0
        } else {
            &self.links_upper
        };
        let count = links[start] as usize;
        &links[start + 1..start + 1 + count]
    }

    fn set_neighbors(&mut self, row: u32, layer: usize, neighbors: &[u32]) {
        let start = self.block(row, layer);
        let links = if layer == 0 {
            &mut self.links0
        } else {
            &mut self.links_upper
        };
        links[start] = neighbors.len() as u32;
        links[start + 1..start + 1 + neighbors.len()].copy_from_slice(neighbors);
    }

    /// The most neighbours a row keeps on `layer`.
    fn capacity(&self, layer: usize) -> usize {
        if layer == 0 {
            2 * self.params.m
        } else {
            self.params.m
        }
    }

    /// `floor(-ln(U) / ln(m))` for `U` uniform in (0, 1]: each layer holds about `1/m` of the
    /// rows of the layer below.
    fn random_level(&mut self) -> usize {
        let u = 1.0 - (splitmix64(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64;
        let level = -u.ln() / (self.params.m as f64).ln();
        (level as usize).min(MAX_LEVEL)
    }
}

/// Threads a batched build shares its work over: the available parallelism, at most 8.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// A row's vector (or code) out of the flat array.
#[inline]
fn row_vector<T>((vectors, dim): (&[T], usize), row: u32) -> &[T] {
    let start = row as usize * dim;
    &vectors[start..start + dim]
}

/// SplitMix64: a tiny, well-mixed generator, enough for drawing levels.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
