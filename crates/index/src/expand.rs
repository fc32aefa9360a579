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

use finder_core::{ChannelOutcome, FastMap, LexicalSettings, TrigramMode};
use tantivy::schema::Field;
use tantivy::Searcher;

use crate::analyzer::{looks_like_identifier, terms, whole_word_analyzer};
use crate::postings::PostingsFile;

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
    for word in terms(&mut whole_word_analyzer(), query) {
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

/// Why the trigram channel cannot run on an index built with `index.trigrams = false`.
pub const NOT_INDEXED: &str = "the index was built with index.trigrams = false";

/// What the trigram channel reports for `query` in either store: skipped when the mode or the
/// query leave nothing to expand, degraded when the store cannot expand (`unavailable` says
/// why), otherwise what the lexical list took from it (`expanded`: query words, indexed words).
pub fn channel_outcome(
    query: &str,
    settings: &LexicalSettings,
    unavailable: Option<&str>,
    expanded: Option<(usize, usize)>,
) -> ChannelOutcome {
    match settings.trigram {
        TrigramMode::Off => return ChannelOutcome::Skipped("lexical.trigram = off".into()),
        TrigramMode::Auto if !looks_like_identifier(query) => {
            return ChannelOutcome::Skipped(
                "no identifier-like word in the query (lexical.trigram = auto)".into(),
            )
        }
        _ => {}
    }
    if let Some(why) = unavailable {
        return ChannelOutcome::Degraded(why.to_string());
    }
    match expanded {
        Some((words, terms)) => ChannelOutcome::Joined(format!(
            "{words} query word(s) expanded into {terms} indexed word(s), scored in the lexical list"
        )),
        None => ChannelOutcome::Skipped("the query has no word to expand".into()),
    }
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
#[derive(Default)]
pub(crate) struct TermGrams {
    /// The distinct words, sorted by bytes, end to end (a word per entry of `ends`: about
    /// eight bytes a word besides its own, where a boxed word costs some forty).
    bytes: Vec<u8>,
    /// Where each word ends in `bytes` (it starts where the previous one ends).
    ends: Vec<usize>,
    /// Trigram (three bytes, packed) → the ids of the words holding it, ascending.
    grams: FastMap<u32, Vec<u32>>,
}

fn pack(gram: &[u8]) -> u32 {
    u32::from(gram[0]) << 16 | u32::from(gram[1]) << 8 | u32::from(gram[2])
}

impl TermGrams {
    /// Reads the `field` dictionary of every segment of `searcher`: Finder's postings file
    /// (`files`, in segment order), or tantivy's dictionary in a segment without one.
    pub(crate) fn build(
        searcher: &Searcher,
        files: &[Option<PostingsFile>],
        field: Field,
    ) -> tantivy::Result<TermGrams> {
        let mut words = TermGrams::default();
        let segments = searcher.segment_readers();
        for (segment, file) in segments.iter().zip(files) {
            let file = crate::lexical::postings_of(segment, file)?;
            for term in file.field(field).iter().flat_map(|f| f.terms()) {
                words.push(term);
            }
        }
        if segments.len() > 1 {
            // Each dictionary is sorted; their union is sorted and deduplicated here.
            let mut order: Vec<usize> = (0..words.ends.len()).collect();
            order.sort_unstable_by(|&a, &b| words.word(a).cmp(words.word(b)));
            order.dedup_by(|a, b| words.word(*a) == words.word(*b));
            let mut merged = TermGrams::default();
            for i in order {
                merged.push(words.word(i));
            }
            words = merged;
        }
        words.index_grams();
        Ok(words)
    }

    /// Words already sorted and distinct (tests).
    #[cfg(test)]
    fn from_sorted(words: &[&str]) -> TermGrams {
        let mut out = TermGrams::default();
        for w in words {
            out.push(w.as_bytes());
        }
        out.index_grams();
        out
    }

    fn push(&mut self, word: &[u8]) {
        self.bytes.extend_from_slice(word);
        self.ends.push(self.bytes.len());
    }

    fn word(&self, id: usize) -> &[u8] {
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.bytes[start..self.ends[id]]
    }

    fn index_grams(&mut self) {
        let mut grams: FastMap<u32, Vec<u32>> = FastMap::default();
        let mut seen: Vec<u32> = Vec::new();
        for id in 0..self.ends.len() {
            seen.clear();
            seen.extend(self.word(id).windows(3).map(pack));
            seen.sort_unstable();
            seen.dedup();
            for &g in &seen {
                grams.entry(g).or_default().push(id as u32);
            }
        }
        grams.values_mut().for_each(Vec::shrink_to_fit);
        self.grams = grams;
    }

    /// The dictionary words that hold `word`, as [`pick_expansions`] orders and caps them.
    pub(crate) fn expand(&self, word: &str, cap: usize) -> Vec<&[u8]> {
        let needle = word.as_bytes();
        if needle.len() < MIN_PARTIAL_BYTES {
            // Binary search over the sorted words.
            let (mut lo, mut hi) = (0, self.ends.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match self.word(mid).cmp(needle) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return vec![self.word(mid)],
                }
            }
            return Vec::new();
        }
        // The rarest trigram's words are the candidates; `pick_expansions` keeps those that
        // hold the word.
        let mut rarest: Option<&Vec<u32>> = None;
        for g in needle.windows(3).map(pack) {
            match self.grams.get(&g) {
                None => return Vec::new(),
                Some(ids) if rarest.is_none_or(|r| ids.len() < r.len()) => rarest = Some(ids),
                Some(_) => {}
            }
        }
        let candidates = rarest.map_or_else(Vec::new, |ids| {
            ids.iter().map(|&id| self.word(id as usize)).collect()
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
        let grams = TermGrams::from_sorted(&["auth", "auth-041", "author", "oauth", "v2", "zebra"]);
        assert_eq!(grams.expand("auth", 2), vec![&b"auth"[..], b"oauth"]);
        assert_eq!(grams.expand("th-0", 8), vec![&b"auth-041"[..]]);
        assert_eq!(grams.expand("v2", 8), vec![&b"v2"[..]]);
        assert!(grams.expand("v3", 8).is_empty());
        assert!(grams.expand("xyz", 8).is_empty());
        let settings = LexicalSettings::default();
        let w = expansion_weight("auth", b"oauth", 2, &settings);
        assert!((w - settings.trigram_weight * 2.0 * 0.8).abs() < 1e-6);
    }
}
