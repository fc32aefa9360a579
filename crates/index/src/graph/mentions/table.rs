//! The tables a scan probes: runs of words keyed by the hash of their words, a Bloom filter
//! in front of the long runs, and the one-word table.

use finder_core::FastMap;

use crate::slots::{SlotKey, SlotTable};

use super::Alias;

/// No alias: the end of a [`WordTable::same_hash`] chain, or a run no alias ends with.
pub(super) const NO_ALIAS: u32 = u32::MAX;

/// The first value of a run's hash, before its first word ([`extend`]).
pub(super) const RUN_SEED: u64 = 0x243f_6a88_85a3_08d3;

/// How many words ahead of its probes a scan fetches the first-word table's slot and the
/// filter's word for the runs starting there.
pub(super) const AHEAD: usize = 8;

/// The hash of a run of words after one more word whose own hash is `word`.
pub(super) fn extend(run: u64, word: u64) -> u64 {
    (run.rotate_left(23) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A folded word's hash.
pub(super) fn word_hash(word: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(word.as_bytes())
}

/// What the table knows of one run of words (by its hash). The default is only an empty
/// slot's filling ([`SlotTable`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Run {
    /// The last alias added whose words hash to this run's ([`NO_ALIAS`] when none); the
    /// others follow through [`WordTable::same_hash`].
    pub(super) alias: u32,
    /// Some alias has more words after a run with this hash: the scan goes on.
    pub(super) longer: bool,
}

/// A Bloom filter over the keys of a table of runs: 11 to 22 bits a key, three of them set
/// in one 64-bit word, so asking costs one read from an array a twelfth of the table's size
/// or less (4 MB at a million titles, where the table of longer runs is over 100 MB). Most
/// runs of two words a text holds start no alias: the filter answers for them (about 1% of
/// false positives, never a false negative).
#[derive(Debug, Clone, Default)]
pub(super) struct Filter {
    pub(super) words: Vec<u64>,
}

impl Filter {
    pub(super) fn of(keys: &FastMap<u64, Run>) -> Filter {
        let mut filter = Filter {
            words: vec![0; (keys.len() * 11 / 64).next_power_of_two().clamp(1, 1 << 26)],
        };
        for &key in keys.keys() {
            let (word, bits) = filter.place(key);
            filter.words[word] |= bits;
        }
        filter
    }

    /// The word of `key` and its three bits there.
    pub(super) fn place(&self, key: u64) -> (usize, u64) {
        let h = key.wrapping_mul(0xff51_afd7_ed55_8ccd);
        // The word from the product's top bits (at most 26 of them), the bits from below.
        let word = (h >> 38) as usize & (self.words.len() - 1);
        let bits = 1 << ((h >> 20) & 63) | 1 << ((h >> 26) & 63) | 1 << ((h >> 32) & 63);
        (word, bits)
    }

    pub(super) fn may_hold(&self, key: u64) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let (word, bits) = self.place(key);
        self.words[word] & bits == bits
    }

    /// Asks the processor to fetch the word [`Filter::may_hold`] will read for `key`.
    pub(super) fn prefetch(&self, key: u64) {
        if !self.words.is_empty() {
            crate::slots::prefetch(&self.words[self.place(key).0]);
        }
    }
}

/// Aliases by the hashes of their words: every prefix of every alias is a key. Runs of one
/// word have a table of their own, as a scan probes one at nearly every word of a text and
/// the aliases' distinct first words are few.
#[derive(Debug, Clone)]
pub(super) struct WordTable {
    /// Runs of one word, by [`first_key`]: a table whose probes can be fetched ahead.
    pub(super) first: SlotTable<Run>,
    /// Runs of two words or more.
    pub(super) longer: FastMap<u64, Run>,
    /// Which keys `longer` may hold.
    pub(super) pairs: Filter,
    /// Per alias, the next alias whose words hash the same ([`NO_ALIAS`] ends the chain).
    pub(super) same_hash: Vec<u32>,
    /// The most words in an alias: no scan goes further.
    pub(super) max_words: usize,
    /// Run hashes are masked with this (all ones; tests narrow it to force collisions).
    pub(super) mask: u64,
}

impl WordTable {
    pub(super) fn new(aliases: &[Alias], mask: u64) -> WordTable {
        let mut table = WordTable {
            first: SlotTable::default(),
            longer: FastMap::default(),
            pairs: Filter::default(),
            same_hash: vec![NO_ALIAS; aliases.len()],
            max_words: 0,
            mask,
        };
        table.longer.reserve(2 * aliases.len());
        for (index, alias) in aliases.iter().enumerate() {
            let words = alias.folded.split(' ').count();
            table.max_words = table.max_words.max(words);
            let mut run = RUN_SEED;
            for (k, word) in alias.folded.split(' ').enumerate() {
                run = extend(run, word_hash(word));
                let empty = Run {
                    alias: NO_ALIAS,
                    longer: false,
                };
                let entry = if k == 0 {
                    table.first.get_or_insert(first_key(run & mask), empty)
                } else {
                    table.longer.entry(run & mask).or_insert(empty)
                };
                if k + 1 < words {
                    entry.longer = true;
                } else {
                    table.same_hash[index] = entry.alias;
                    entry.alias = index as u32;
                }
            }
        }
        table.pairs = Filter::of(&table.longer);
        table
    }

    /// What the table knows of a run of `words` words (one or more) whose hash is `run`.
    pub(super) fn get(&self, words: usize, run: u64) -> Option<Run> {
        let key = run & self.mask;
        if words == 1 {
            self.first.get(first_key(key))
        } else if self.pairs.may_hold(key) {
            self.longer.get(&key).copied()
        } else {
            None
        }
    }

    /// Asks the processor to fetch what [`WordTable::get`] will read for the runs of one and
    /// two words whose hashes are `one` and `two`.
    pub(super) fn prefetch(&self, one: u64, two: Option<u64>) {
        self.first.prefetch(first_key(one & self.mask));
        if let (Some(two), true) = (two, self.max_words > 1) {
            self.pairs.prefetch(two & self.mask);
        }
    }
}

/// A one-word run's key in [`WordTable::first`]: its hash, and a one (a slot key's second half
/// is never zero).
pub(super) fn first_key(run: u64) -> SlotKey {
    [run, 1]
}
