//! Near-duplicate collapse by 64-bit simhash over word shingles (seed 004, step 8).
//!
//! Walking best first, a hit whose simhash lies within `simhash_max_distance` bits of a hit
//! already kept is absorbed by the best-ranked such hit, which then reports what it absorbed.
//! Kept hashes are indexed by bands: split into `max_distance + 1` bands, two hashes within
//! that distance agree exactly on at least one band, so only hits sharing a band are compared.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{hash64, words, Candidate, Ranked};

/// Words per shingle. Pairs keep word order without letting one changed word touch as many
/// shingles as triples do, which matters on passages of a few dozen words.
pub const DEFAULT_SIMHASH_SHINGLE: usize = 2;
/// Largest Hamming distance between two simhashes that still counts as a near-duplicate.
///
/// The seeds give no number. The web-scale habit of 3 bits assumes pages of thousands of
/// words; on passages of 15–100 words one replaced word already moves the hash by 0–16 bits
/// (most often 4–6), while distinct paragraphs of this project's own documents stay 18 bits
/// or more apart. 8 keeps a wide margin from unrelated texts (two independent hashes agree
/// within 8 bits with probability about 3·10⁻¹⁰) and catches most small edits.
pub const DEFAULT_SIMHASH_MAX_DISTANCE: u32 = 8;

/// Settings of the near-duplicate collapse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DedupParams {
    /// Words per shingle. Range 1–8.
    pub simhash_shingle: usize,
    /// Bits (of 64) two hashes may differ in. Range 0–32.
    pub simhash_max_distance: u32,
}

impl Default for DedupParams {
    fn default() -> Self {
        DedupParams {
            simhash_shingle: DEFAULT_SIMHASH_SHINGLE,
            simhash_max_distance: DEFAULT_SIMHASH_MAX_DISTANCE,
        }
    }
}

/// A hit folded into a better-ranked near-duplicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Absorbed {
    pub id: String,
    /// Hamming distance between the two simhashes.
    pub distance: u32,
}

/// What a kept hit absorbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CollapseExplain {
    /// The hit's simhash in hex; `None` when it has no words (such hits are never collapsed).
    pub simhash: Option<String>,
    pub absorbed_count: usize,
    /// Absorbed hits in their incoming order.
    pub absorbed: Vec<Absorbed>,
}

/// The 64-bit simhash of a text over shingles of `shingle` consecutive lowercased words (a
/// text shorter than a shingle is one shingle). Each bit is the majority vote of that bit over
/// the shingles' hashes, every occurrence voting. `None` when the text has no words.
pub fn simhash(text: &str, shingle: usize) -> Option<u64> {
    let words: Vec<String> = words(text).collect();
    if words.is_empty() {
        return None;
    }
    let width = shingle.clamp(1, words.len());
    let mut votes = [0_i32; 64];
    let mut buf = Vec::new();
    for window in words.windows(width) {
        buf.clear();
        for w in window {
            buf.extend_from_slice(w.as_bytes());
            // A separator no word contains, so ("ab", "c") and ("a", "bc") differ.
            buf.push(0);
        }
        let h = hash64(&buf);
        for (bit, vote) in votes.iter_mut().enumerate() {
            *vote += if h >> bit & 1 == 1 { 1 } else { -1 };
        }
    }
    Some(
        votes
            .iter()
            .enumerate()
            .filter(|(_, &v)| v > 0)
            .fold(0, |acc, (bit, _)| acc | 1 << bit),
    )
}

/// Number of bits in which two hashes differ.
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Collapses near-duplicates, keeping the best-ranked hit of each group in the incoming order.
/// Kept hits keep their scores. Candidates with a precomputed `simhash` use it; the others hash
/// their `text`. Deterministic: an absorbed hit goes to the best-ranked kept hit in range.
pub fn collapse_near_duplicates(
    candidates: &[Candidate<'_>],
    params: &DedupParams,
) -> Vec<Ranked<CollapseExplain>> {
    let max = params.simhash_max_distance.min(63);
    let bands = max as usize + 1;
    let mut out: Vec<Ranked<CollapseExplain>> = Vec::new();
    let mut kept_hash: Vec<u64> = Vec::new();
    // (band, band bits) → positions in `out` of kept hits with those bits.
    let mut buckets: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
    for (index, c) in candidates.iter().enumerate() {
        let hash = c
            .simhash
            .or_else(|| simhash(c.text, params.simhash_shingle));
        let Some(h) = hash else {
            out.push(kept(index, c.score, None));
            kept_hash.push(0);
            continue;
        };
        let mut best: Option<(usize, u32)> = None;
        for b in 0..bands {
            let Some(positions) = buckets.get(&(b, band(h, b, bands))) else {
                continue;
            };
            for &k in positions {
                let d = hamming(h, kept_hash[k]);
                if d <= max && best.is_none_or(|(bk, _)| k < bk) {
                    best = Some((k, d));
                }
            }
        }
        match best {
            Some((k, distance)) => {
                let e = &mut out[k].explain;
                e.absorbed.push(Absorbed {
                    id: c.id.to_string(),
                    distance,
                });
                e.absorbed_count += 1;
            }
            None => {
                let position = out.len();
                out.push(kept(index, c.score, Some(h)));
                kept_hash.push(h);
                for b in 0..bands {
                    buckets
                        .entry((b, band(h, b, bands)))
                        .or_default()
                        .push(position);
                }
            }
        }
    }
    out
}

fn kept(index: usize, score: f64, hash: Option<u64>) -> Ranked<CollapseExplain> {
    Ranked {
        index,
        score,
        explain: CollapseExplain {
            simhash: hash.map(|h| format!("{h:016x}")),
            absorbed_count: 0,
            absorbed: Vec::new(),
        },
    }
}

/// Bits `[64·b/bands, 64·(b+1)/bands)` of `h`.
fn band(h: u64, b: usize, bands: usize) -> u64 {
    let lo = 64 * b / bands;
    let hi = 64 * (b + 1) / bands;
    let width = hi - lo;
    if width >= 64 {
        h
    } else {
        (h >> lo) & ((1_u64 << width) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const RESTORE: &str = "To restore a backup, stop the service, copy the snapshot from the \
        bucket into the data folder, check the checksum of every file, start the service \
        again and watch the logs until the first request succeeds. Old snapshots are kept \
        for thirty days and removed by the nightly job, which also reports their sizes.";

    #[test]
    fn same_text_hashes_the_same_and_case_is_ignored() {
        let a = simhash(RESTORE, DEFAULT_SIMHASH_SHINGLE).unwrap();
        assert_eq!(
            Some(a),
            simhash(&RESTORE.to_uppercase(), DEFAULT_SIMHASH_SHINGLE)
        );
        assert!(
            hamming(
                a,
                simhash("Configure connection pooling.", DEFAULT_SIMHASH_SHINGLE).unwrap()
            ) > DEFAULT_SIMHASH_MAX_DISTANCE
        );
        assert_eq!(simhash("  ,; ", 3), None);
        assert!(simhash("one", DEFAULT_SIMHASH_SHINGLE).is_some());
    }

    #[test]
    fn one_changed_word_stays_near_and_another_text_is_far() {
        let a = simhash(RESTORE, DEFAULT_SIMHASH_SHINGLE).unwrap();
        let edited = RESTORE.replace("thirty", "sixty");
        let b = simhash(&edited, DEFAULT_SIMHASH_SHINGLE).unwrap();
        assert!(
            hamming(a, b) <= DEFAULT_SIMHASH_MAX_DISTANCE,
            "{}",
            hamming(a, b)
        );
        let other = "Token validation errors carry a status code; the reference lists \
            every code with its meaning, the component that raises it and what a client \
            should do next, from retrying after a pause to asking the user to sign in.";
        assert!(
            hamming(a, simhash(other, DEFAULT_SIMHASH_SHINGLE).unwrap())
                > 2 * DEFAULT_SIMHASH_MAX_DISTANCE
        );
    }

    #[test]
    fn kept_hit_reports_what_it_absorbed() {
        let mirror = RESTORE.replace("thirty", "sixty");
        let empty = "";
        let c = [
            Candidate::new("restore", 1.0).with_text(RESTORE),
            Candidate::new("pooling", 0.9).with_text("Configure connection pooling."),
            Candidate::new("mirror", 0.8).with_text(&mirror),
            Candidate::new("blank-1", 0.7).with_text(empty),
            Candidate::new("blank-2", 0.6).with_text(empty),
            Candidate::new("copy", 0.5).with_text(RESTORE),
        ];
        let out = collapse_near_duplicates(&c, &DedupParams::default());
        let ids: Vec<&str> = out.iter().map(|r| c[r.index].id).collect();
        // Texts without words are never collapsed into each other.
        assert_eq!(ids, vec!["restore", "pooling", "blank-1", "blank-2"]);
        let e = &out[0].explain;
        assert_eq!(e.absorbed_count, 2);
        let absorbed: Vec<&str> = e.absorbed.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(absorbed, vec!["mirror", "copy"]);
        assert_eq!(e.absorbed[1].distance, 0);
        assert_eq!(out[0].score, 1.0);
        assert_eq!(out[2].explain.simhash, None);
    }

    #[test]
    fn precomputed_hash_wins_over_text() {
        let c = [
            Candidate {
                simhash: Some(0b1111),
                ..Candidate::new("a", 1.0)
            },
            Candidate {
                simhash: Some(0b0111),
                ..Candidate::new("b", 0.5).with_text("unrelated words entirely")
            },
        ];
        assert_eq!(
            collapse_near_duplicates(&c, &DedupParams::default()).len(),
            1
        );
        let strict = DedupParams {
            simhash_max_distance: 0,
            ..DedupParams::default()
        };
        assert_eq!(collapse_near_duplicates(&c, &strict).len(), 2);
    }

    /// Brute force: each hit is absorbed by the first kept hit within range, else kept.
    fn oracle(hashes: &[u64], max: u32) -> Vec<(usize, Vec<usize>)> {
        let mut kept: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, &h) in hashes.iter().enumerate() {
            match kept.iter_mut().find(|(k, _)| hamming(hashes[*k], h) <= max) {
                Some((_, absorbed)) => absorbed.push(i),
                None => kept.push((i, Vec::new())),
            }
        }
        kept
    }

    proptest! {
        #[test]
        fn banded_collapse_equals_brute_force(
            base in proptest::collection::vec(any::<u64>(), 1..4),
            flips in proptest::collection::vec((0usize..4, any::<u64>(), 0u32..6), 0..60),
            max in 0u32..8,
        ) {
            // Hashes near a few bases, so that collapses actually happen.
            let hashes: Vec<u64> = flips
                .iter()
                .map(|&(b, noise, bits)| {
                    let mut mask = 0u64;
                    let mut n = noise;
                    for _ in 0..bits {
                        mask |= 1 << (n % 64);
                        n /= 64;
                    }
                    base[b % base.len()] ^ mask
                })
                .collect();
            let ids: Vec<String> = (0..hashes.len()).map(|i| i.to_string()).collect();
            let c: Vec<Candidate> = hashes
                .iter()
                .zip(&ids)
                .map(|(&h, id)| Candidate { simhash: Some(h), ..Candidate::new(id, 1.0) })
                .collect();
            let params = DedupParams { simhash_max_distance: max, ..DedupParams::default() };
            let got: Vec<(usize, Vec<usize>)> = collapse_near_duplicates(&c, &params)
                .iter()
                .map(|r| {
                    let absorbed = r.explain.absorbed.iter().map(|a| a.id.parse().unwrap());
                    (r.index, absorbed.collect())
                })
                .collect();
            prop_assert_eq!(got, oracle(&hashes, max));
        }
    }
}
