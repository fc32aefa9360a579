//! The trigram channel: partial words and identifiers expanded into the whole words of the
//! index that hold them.
//!
//! The index keeps each fragment's whitespace words whole (the `raw` field: punctuation at the
//! ends trimmed, lowercased, unstemmed). [`TermGrams`] maps every distinct whole word of a
//! snapshot to its byte trigrams, once per searcher generation, so a query word finds the
//! dictionary words it is part of (`auth-04` → `auth-041`; `auth` → `auth`, `oauth`,
//! `auth-041`, …) by intersecting short lists instead of scanning the dictionary. The
//! expansions are scored as ordinary terms in the lexical list, each weighted by
//! `lexical.trigram_weight` times the share of it the query word covers.
//!
//! The PostgreSQL backend finds its candidates with SQL and goes through the same
//! [`expansion_words`], [`pick_expansions`] and [`expansion_weight`], so both stores expand alike.

use finder_core::{FastMap, LexicalSettings, TrigramMode};
use tantivy::schema::Field;
use tantivy::Searcher;

use crate::analyzer::{looks_like_identifier, raw_analyzer, terms};

/// Query words shorter than this (in bytes) expand only into themselves.
pub const MIN_PARTIAL_BYTES: usize = 3;

/// Distinct query words expanded at most (the first ones): a pasted page of text does not
/// become thousands of expansions.
pub const MAX_EXPANDED_WORDS: usize = 32;

/// The whole words of `query` the trigram channel expands under `mode`, each with how often
/// the query holds it, in first-seen order, at most [`MAX_EXPANDED_WORDS`]: identifier-like
/// words in `auto`, every word in `on`, none in `off`.
pub fn expansion_words(query: &str, mode: TrigramMode) -> Vec<(String, u32)> {
    if mode == TrigramMode::Off {
        return Vec::new();
    }
    let mut out: Vec<(String, u32)> = Vec::new();
    let mut at: FastMap<String, usize> = FastMap::default();
    for word in terms(&mut raw_analyzer(), query) {
        if mode == TrigramMode::Auto && !looks_like_identifier(&word) {
            continue;
        }
        if let Some(&i) = at.get(&word) {
            out[i].1 += 1;
        } else if out.len() < MAX_EXPANDED_WORDS {
            at.insert(word.clone(), out.len());
            out.push((word, 1));
        }
    }
    out
}

/// Of `candidates` (dictionary words), those that hold `word` — only `word` itself when it is
/// shorter than [`MIN_PARTIAL_BYTES`] — shortest first, ties by bytes, at most `cap`.
pub fn pick_expansions<'a>(word: &str, mut candidates: Vec<&'a [u8]>, cap: usize) -> Vec<&'a [u8]> {
    let needle = word.as_bytes();
    if needle.len() < MIN_PARTIAL_BYTES {
        candidates.retain(|c| *c == needle);
    } else {
        let finder = memchr::memmem::Finder::new(needle);
        candidates.retain(|c| finder.find(c).is_some());
    }
    candidates.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    candidates.dedup();
    candidates.truncate(cap);
    candidates
}

/// The weight of the dictionary word `term` expanded from `word`, held `count` times by the
/// query.
pub fn expansion_weight(word: &str, term: &[u8], count: u32, settings: &LexicalSettings) -> f32 {
    settings.trigram_weight * count as f32 * word.len() as f32 / term.len().max(1) as f32
}

/// Every distinct raw word of one snapshot, and the words each byte trigram occurs in.
pub(crate) struct TermGrams {
    /// Distinct words, sorted by bytes.
    words: Vec<Box<[u8]>>,
    /// Trigram (three bytes, packed) → the ids of the words holding it, ascending.
    grams: FastMap<u32, Vec<u32>>,
}

fn pack(gram: &[u8]) -> u32 {
    u32::from(gram[0]) << 16 | u32::from(gram[1]) << 8 | u32::from(gram[2])
}

impl TermGrams {
    /// Reads the `field` dictionary of every segment of `searcher`.
    pub(crate) fn build(searcher: &Searcher, field: Field) -> tantivy::Result<TermGrams> {
        let mut words: Vec<Box<[u8]>> = Vec::new();
        for segment in searcher.segment_readers() {
            let inverted = segment.inverted_index(field)?;
            let mut stream = inverted.terms().stream()?;
            while stream.advance() {
                words.push(stream.key().into());
            }
        }
        words.sort_unstable();
        words.dedup();
        let mut grams: FastMap<u32, Vec<u32>> = FastMap::default();
        let mut seen: Vec<u32> = Vec::new();
        for (id, word) in words.iter().enumerate() {
            seen.clear();
            seen.extend(word.windows(3).map(pack));
            seen.sort_unstable();
            seen.dedup();
            for &g in &seen {
                grams.entry(g).or_default().push(id as u32);
            }
        }
        Ok(TermGrams { words, grams })
    }

    /// The dictionary words that hold `word`, as [`pick_expansions`] orders and caps them.
    pub(crate) fn expand(&self, word: &str, cap: usize) -> Vec<&[u8]> {
        let needle = word.as_bytes();
        if needle.len() < MIN_PARTIAL_BYTES {
            return match self.words.binary_search_by(|w| (**w).cmp(needle)) {
                Ok(i) => vec![&*self.words[i]],
                Err(_) => Vec::new(),
            };
        }
        // The rarest trigram's words are the candidates; `pick_expansions` checks each holds the word.
        let mut rarest: Option<&Vec<u32>> = None;
        for g in needle.windows(3).map(pack) {
            match self.grams.get(&g) {
                None => return Vec::new(),
                Some(ids) if rarest.is_none_or(|r| ids.len() < r.len()) => rarest = Some(ids),
                Some(_) => {}
            }
        }
        let candidates = rarest.map_or_else(Vec::new, |ids| {
            ids.iter().map(|&id| &*self.words[id as usize]).collect()
        });
        pick_expansions(word, candidates, cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_to_expand_follow_the_mode() {
        let q = "Error AUTH-041 in auth, auth-041 v2";
        assert!(expansion_words(q, TrigramMode::Off).is_empty());
        assert_eq!(
            expansion_words(q, TrigramMode::Auto),
            vec![("auth-041".to_string(), 2), ("v2".to_string(), 1)]
        );
        let on = expansion_words(q, TrigramMode::On);
        assert_eq!(on[0], ("error".to_string(), 1));
        assert_eq!(on.len(), 5);
        let long: String = (0..1000).map(|i| format!("w{i} ")).collect();
        let capped = expansion_words(&long, TrigramMode::On);
        assert_eq!(capped.len(), MAX_EXPANDED_WORDS);
        assert_eq!(capped[0], ("w0".to_string(), 1));
    }

    #[test]
    fn expansions_hold_the_word_shortest_first() {
        let dict: Vec<&[u8]> = vec![
            b"oauth",
            b"authentication",
            b"auth",
            b"author",
            b"path",
            b"auth",
        ];
        let picked = pick_expansions("auth", dict.clone(), 3);
        assert_eq!(picked, vec![&b"auth"[..], b"oauth", b"author"]);
        // A word under three bytes matches only itself.
        assert_eq!(
            pick_expansions("v2", vec![b"v2", b"v2.1"], 8),
            vec![&b"v2"[..]]
        );
        let settings = LexicalSettings::default();
        let w = expansion_weight("auth", b"oauth", 2, &settings);
        assert!((w - settings.trigram_weight * 2.0 * 0.8).abs() < 1e-6);
    }
}
