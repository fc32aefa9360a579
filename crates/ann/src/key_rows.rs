//! Finding a live key's row without a map entry per row.

use std::collections::HashMap;

/// Where each live key's row is. A build from rows in key order (as Finder's vector build
/// lays them out) gives rows whose keys increase from the first: those are found by binary
/// search over the index's own `keys`, and only rows out of that order (inserted later, or
/// a key replaced) take a map entry. At a million rows a map of every key held about 34 MiB
/// beside the graph (docs/perf/hnsw-beam.md).
#[derive(Debug, Default)]
pub(crate) struct KeyRows {
    /// Rows `0..sorted` have strictly increasing keys, tombstones included.
    sorted: usize,
    /// Live keys of rows at or past `sorted`.
    later: HashMap<u64, u32>,
    /// Live keys in all.
    live: usize,
}

impl KeyRows {
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// The live row of `key`.
    pub(crate) fn get(&self, keys: &[u64], deleted: &[bool], key: u64) -> Option<u32> {
        if let Some(&row) = self.later.get(&key) {
            return Some(row);
        }
        let row = keys[..self.sorted].binary_search(&key).ok()?;
        (!deleted[row]).then_some(row as u32)
    }

    /// Records the live row just pushed, whose key `keys[row]` must not be live already.
    pub(crate) fn push(&mut self, keys: &[u64], row: u32) {
        if !self.extend_order(keys, row) {
            self.later.insert(keys[row as usize], row);
        }
        self.live += 1;
    }

    /// Records a row pushed as a tombstone (read from a file): it only extends the order.
    pub(crate) fn push_dead(&mut self, keys: &[u64], row: u32) {
        self.extend_order(keys, row);
    }

    /// Takes `row` into the ordered prefix when it follows it with a greater key.
    fn extend_order(&mut self, keys: &[u64], row: u32) -> bool {
        let at = row as usize;
        let follows = at == self.sorted && (at == 0 || keys[at - 1] < keys[at]);
        self.sorted += usize::from(follows);
        follows
    }

    /// Forgets the live row of `key`, marking it deleted; returns whether there was one.
    pub(crate) fn remove(&mut self, keys: &[u64], deleted: &mut [bool], key: u64) -> bool {
        let Some(row) = self.get(keys, deleted, key) else {
            return false;
        };
        self.later.remove(&key);
        deleted[row as usize] = true;
        self.live -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `KeyRows` against a map of every live key, through pushes in and out of key order,
    /// replacements and removals.
    #[test]
    fn finds_what_a_map_of_every_key_finds() {
        let (mut keys, mut deleted) = (Vec::new(), Vec::new());
        let mut rows = KeyRows::default();
        let mut map: HashMap<u64, u32> = HashMap::new();
        let mut state = 7u64;
        for step in 0..3_000u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Ascending keys first, then any.
            let key = if step < 1_000 {
                step * 3
            } else {
                (state >> 33) % 4_000
            };
            if step % 5 == 4 {
                let removed = rows.remove(&keys, &mut deleted, key);
                assert_eq!(removed, map.remove(&key).is_some(), "remove {key}");
                continue;
            }
            rows.remove(&keys, &mut deleted, key);
            keys.push(key);
            deleted.push(false);
            let row = keys.len() as u32 - 1;
            rows.push(&keys, row);
            map.insert(key, row);
            assert_eq!(rows.len(), map.len());
        }
        assert!(rows.sorted >= 800, "the ascending start is found by search");
        for key in 0..4_000 {
            assert_eq!(
                rows.get(&keys, &deleted, key),
                map.get(&key).copied(),
                "{key}"
            );
        }
    }
}
