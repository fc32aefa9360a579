//! The vectors a build holds, as one array: row `i` is `keys[i]`'s vector, with the hash of
//! what it was computed from. A million 384-dimensional vectors cost their 1.5 GB and
//! nothing per vector, and the array can become the HNSW's own ([`crate::Hnsw::from_rows`]).

/// Vectors by row, see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    dim: usize,
    pub keys: Vec<u64>,
    pub hashes: Vec<u64>,
    pub data: Vec<f32>,
}

impl Rows {
    pub fn with_capacity(dim: usize, rows: usize) -> Rows {
        Rows {
            dim,
            keys: Vec::with_capacity(rows),
            hashes: Vec::with_capacity(rows),
            data: Vec::with_capacity(rows * dim),
        }
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// Appends a row.
    ///
    /// # Panics
    /// If `vector` is not `dim` long (the callers check and report it first).
    pub fn push(&mut self, key: u64, hash: u64, vector: &[f32]) {
        assert_eq!(vector.len(), self.dim, "row of the wrong dimension");
        self.keys.push(key);
        self.hashes.push(hash);
        self.data.extend_from_slice(vector);
    }

    /// Keeps the rows `keep(key, hash)` accepts, in order, moving them down in place.
    pub fn retain(&mut self, mut keep: impl FnMut(u64, u64) -> bool) {
        let dim = self.dim;
        let mut kept = 0;
        for i in 0..self.len() {
            if keep(self.keys[i], self.hashes[i]) {
                if kept != i {
                    self.keys[kept] = self.keys[i];
                    self.hashes[kept] = self.hashes[i];
                    self.data.copy_within(i * dim..(i + 1) * dim, kept * dim);
                }
                kept += 1;
            }
        }
        self.keys.truncate(kept);
        self.hashes.truncate(kept);
        self.data.truncate(kept * dim);
    }

    /// Every row as `(key, hash, vector)`, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &[f32])> + '_ {
        (0..self.len()).map(|i| (self.keys[i], self.hashes[i], self.row(i)))
    }

    /// Scales every row to unit length ([`crate::distance::scale_to_unit`]).
    pub fn normalize(&mut self) {
        for row in self.data.chunks_exact_mut(self.dim) {
            crate::distance::scale_to_unit(row);
        }
    }

    /// Puts the rows in key order, moving them within the array (one row of scratch), so
    /// sorting a gigabyte of vectors needs no second gigabyte.
    pub fn sort_by_key(&mut self) {
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_unstable_by_key(|&i| self.keys[i as usize]);
        // Row `i` takes the row at `order[i]`: follow each cycle of the permutation once.
        let dim = self.dim;
        let mut scratch = vec![0f32; dim];
        let mut placed = vec![false; self.len()];
        for start in 0..self.len() {
            if placed[start] || order[start] as usize == start {
                continue;
            }
            scratch.copy_from_slice(&self.data[start * dim..(start + 1) * dim]);
            let mut at = start;
            loop {
                placed[at] = true;
                let from = order[at] as usize;
                if from == start {
                    self.data[at * dim..(at + 1) * dim].copy_from_slice(&scratch);
                    break;
                }
                self.data
                    .copy_within(from * dim..(from + 1) * dim, at * dim);
                at = from;
            }
        }
        self.keys = order.iter().map(|&i| self.keys[i as usize]).collect();
        self.hashes = order.iter().map(|&i| self.hashes[i as usize]).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rows(keys: &[u64]) -> Rows {
        let mut r = Rows::with_capacity(3, keys.len());
        for &k in keys {
            r.push(k, k ^ 0xff, &[k as f32, k as f32 + 0.5, -(k as f32)]);
        }
        r
    }

    proptest! {
        #[test]
        fn sorting_in_place_is_sorting(keys in proptest::collection::hash_set(0u64..10_000, 0..200)) {
            let keys: Vec<u64> = keys.into_iter().collect();
            let mut sorted_keys = keys.clone();
            sorted_keys.sort_unstable();
            let mut r = rows(&keys);
            r.sort_by_key();
            prop_assert_eq!(r, rows(&sorted_keys));
        }

        #[test]
        fn retain_keeps_the_accepted_rows_in_order(keys in proptest::collection::vec(0u64..1000, 0..100)) {
            let mut r = rows(&keys);
            r.retain(|k, h| k % 3 != 0 && h == k ^ 0xff);
            let kept: Vec<u64> = keys.iter().copied().filter(|k| k % 3 != 0).collect();
            prop_assert_eq!(r, rows(&kept));
        }
    }

    #[test]
    fn rows_normalize_to_unit_length_and_zero_stays_zero() {
        let mut r = Rows::with_capacity(2, 2);
        r.push(1, 0, &[3.0, 4.0]);
        r.push(2, 0, &[0.0, 0.0]);
        r.normalize();
        assert_eq!(r.row(0), &[0.6, 0.8]);
        assert_eq!(r.row(1), &[0.0, 0.0]);
    }
}
