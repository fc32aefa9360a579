//! How a walk scores a row: exactly over `f32` rows, or over `i8` codes (one scale per row).

use crate::distance::{code_sum, dot, dot_i8_summed, quantize};
use crate::{row_vector, Hnsw};

impl Hnsw {
    /// Makes [`Hnsw::search`] walk the graph over `i8` codes of the rows and re-score only
    /// what the walk keeps: a row's code is a quarter of its size, and the walk, which
    /// reads thousands of rows per query, is bound by memory. The results are still ranked
    /// by exact similarity; what can change is which rows the walk keeps, as with any beam
    /// width. It costs a quarter of the rows' memory again; an insert undoes it.
    pub fn quantize(&mut self) {
        self.codes = Some(Codes::of(&self.vectors, self.dim));
    }

    /// Whether searches walk over codes (see [`Hnsw::quantize`]).
    #[cfg_attr(not(test), allow(dead_code))] // API; only the tests read it so far.
    pub fn is_quantized(&self) -> bool {
        self.codes.is_some()
    }
}

/// How a graph walk scores a row against its query: larger is closer.
pub(crate) trait Sim {
    fn sim(&self, row: u32) -> f32;

    /// Touches the memory of `rows` before they are scored, see [`warm_rows`].
    fn warm(&self, rows: impl IntoIterator<Item = u32>);
}

/// The exact similarity: the dot product of `f32` rows.
pub(crate) struct Exact<'a> {
    pub(crate) vectors: &'a [f32],
    pub(crate) dim: usize,
    pub(crate) query: &'a [f32],
}

impl<'a> Exact<'a> {
    pub(crate) fn new(index: &'a Hnsw, query: &'a [f32]) -> Self {
        Exact {
            vectors: &index.vectors,
            dim: index.dim,
            query,
        }
    }
}

impl Sim for Exact<'_> {
    #[inline]
    fn sim(&self, row: u32) -> f32 {
        dot(self.query, row_vector((self.vectors, self.dim), row))
    }

    fn warm(&self, rows: impl IntoIterator<Item = u32>) {
        warm_rows(self.vectors, self.dim, rows);
    }
}

/// The rows as `i8` codes, one scale per row: `row ≈ scale · code` (see
/// [`super::distance::quantize`]).
pub(crate) struct Codes {
    /// Row `r` is `codes[r * dim..(r + 1) * dim]`.
    pub(crate) codes: Vec<i8>,
    pub(crate) scales: Vec<f32>,
}

impl Codes {
    pub(crate) fn of(vectors: &[f32], dim: usize) -> Codes {
        let mut out = Codes {
            codes: Vec::with_capacity(vectors.len()),
            scales: Vec::with_capacity(vectors.len() / dim),
        };
        for row in vectors.chunks_exact(dim) {
            let scale = quantize(row, &mut out.codes);
            out.scales.push(scale);
        }
        out
    }
}

/// The similarity of codes: the query coded the same way, the integer dot product scaled
/// back. Its error is a small fraction of the gaps that matter to a walk, and the rows a
/// walk keeps are re-scored exactly.
pub(crate) struct Coded<'a> {
    pub(crate) codes: &'a Codes,
    pub(crate) dim: usize,
    pub(crate) query: Vec<i8>,
    /// The sum of the query's codes (see [`dot_i8_summed`]).
    pub(crate) query_sum: i32,
    pub(crate) scale: f32,
}

impl<'a> Coded<'a> {
    pub(crate) fn new(codes: &'a Codes, dim: usize, query: &[f32]) -> Self {
        let mut coded = Vec::with_capacity(dim);
        let scale = quantize(query, &mut coded);
        Coded {
            codes,
            dim,
            query_sum: code_sum(&coded),
            query: coded,
            scale,
        }
    }
}

impl Sim for Coded<'_> {
    #[inline]
    fn sim(&self, row: u32) -> f32 {
        let code = row_vector((&self.codes.codes, self.dim), row);
        let dot = dot_i8_summed(&self.query, self.query_sum, code);
        self.scale * self.codes.scales[row as usize] * dot as f32
    }

    fn warm(&self, rows: impl IntoIterator<Item = u32>) {
        warm_rows(&self.codes.codes, self.dim, rows);
    }
}

/// Reads one number per cache line of each of `rows` (`row_len` numbers each, row-major in
/// `data`) before they are scored.
///
/// Scoring a neighbour list is bound by memory, not arithmetic: a 384-dimensional row is
/// 24 cache lines as floats and 6 as codes, and the rows of a million vectors are far larger
/// than any cache. The scoring consumes one row after another, so each one's misses would be
/// waited for in turn; touching every line of all of them first puts the misses in flight
/// together. Safe Rust has no prefetch instruction, and a plain load does the job: it made
/// graph construction about 20% faster on 20,000 vectors of dimension 384. Unoptimised
/// builds skip it: there the arithmetic, not memory, is the bottleneck, and the loop would
/// only slow the tests down.
pub(crate) fn warm_rows<T: Copy + Into<f32>>(
    data: &[T],
    row_len: usize,
    rows: impl IntoIterator<Item = u32>,
) {
    let per_line = (64 / std::mem::size_of::<T>()).max(1);
    if cfg!(debug_assertions) {
        return;
    }
    let mut sink = 0.0f32;
    for row in rows {
        for &x in row_vector((data, row_len), row).iter().step_by(per_line) {
            sink += x.into();
        }
    }
    std::hint::black_box(sink);
}
