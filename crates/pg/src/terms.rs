//! What the lexical fields hold, computed exactly as the embedded index computes it: the same
//! indexed text per fragment, the same analyzers, the same lengths.
//!
//! A fragment's length is stored twice: exactly (`finder_fragments.words`, summed into the
//! average) and as tantivy's one-byte field norm decodes it (`finder_postings.norm`, used in
//! the score), so a fragment scores the same number here as in the embedded index.

use std::collections::HashMap;

use finder_index::{FragmentDoc, SourceDoc};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::tokenizer::TextAnalyzer;

/// The analyzers of one index language, and the word analyzers of the languages detected
/// for some source under `auto` (`finder_index::detected_language`).
#[derive(Clone)]
pub(crate) struct Analyzers {
    pub words: TextAnalyzer,
    pub whole_words: TextAnalyzer,
    analysis: u32,
    /// Each detected language met so far with its word analyzer, in the order met.
    pub detected: Vec<(String, TextAnalyzer)>,
}

impl Analyzers {
    /// The analyzers of `language` as analysis version `analysis` made the terms, with the
    /// word analyzers of the `detected` languages.
    pub fn new(language: &str, analysis: u32, detected: &[String]) -> Analyzers {
        let mut analyzers = Analyzers {
            words: finder_index::testing::word_analyzer_at(language, analysis),
            whole_words: finder_index::testing::whole_word_analyzer(),
            analysis,
            detected: Vec::new(),
        };
        for latin in detected {
            analyzers.words_in(Some(latin));
        }
        analyzers
    }

    /// The word analyzer of a source whose Latin words are in `latin` (the index's own for
    /// `None`).
    pub fn words_in(&mut self, latin: Option<&str>) -> &mut TextAnalyzer {
        let Some(latin) = latin else {
            return &mut self.words;
        };
        let at = match self.detected.iter().position(|(name, _)| name == latin) {
            Some(at) => at,
            None => {
                let analyzer = finder_index::testing::source_word_analyzer_at(latin, self.analysis);
                self.detected.push((latin.to_string(), analyzer));
                self.detected.len() - 1
            }
        };
        &mut self.detected[at].1
    }

    /// The names of the detected languages met so far.
    pub fn detected_names(&self) -> impl Iterator<Item = &str> {
        self.detected.iter().map(|(name, _)| name.as_str())
    }
}

/// The analyzed terms of one field of one fragment.
pub(crate) struct FieldTerms {
    /// Tokens in the field (its exact length).
    pub len: u32,
    /// The length as the embedded index's field norm stores it.
    pub norm: u32,
    /// Term frequencies, in first-seen order.
    pub counts: Vec<(String, u32)>,
}

pub(crate) fn field_terms(analyzer: &mut TextAnalyzer, text: &str) -> FieldTerms {
    let tokens = finder_index::testing::analyze(analyzer, text);
    let len = tokens.len() as u32;
    FieldTerms {
        len,
        norm: FieldNormReader::constant(1, len).fieldnorm(0),
        counts: count(tokens),
    }
}

/// Counts each distinct term, in first-seen order: a fragment's term frequencies.
pub(crate) fn count(tokens: Vec<String>) -> Vec<(String, u32)> {
    let mut order: Vec<(String, u32)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for t in tokens {
        match at.get(&t) {
            Some(&i) => order[i].1 += 1,
            None => {
                at.insert(t.clone(), order.len());
                order.push((t, 1));
            }
        }
    }
    order
}

/// The fragments a source is stored as: its own, or one empty placeholder so the source
/// record has a home (as in the embedded index, the placeholder counts as a document).
pub(crate) fn stored_fragments(source: &SourceDoc) -> Vec<FragmentDoc> {
    if source.fragments.is_empty() {
        vec![FragmentDoc {
            ordinal: 0,
            text: String::new(),
            heading: None,
            extent: Default::default(),
        }]
    } else {
        source.fragments.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_counted_in_first_seen_order() {
        let mut a = Analyzers::new("english", finder_index::ANALYSIS, &[]);
        let t = field_terms(&mut a.words, "Tokens expire; the token EXPIRED");
        assert_eq!(t.len, 4);
        assert_eq!(
            t.counts,
            vec![("token".to_string(), 2), ("expir".to_string(), 2)]
        );
    }

    #[test]
    fn long_fields_take_the_quantised_norm() {
        let mut a = Analyzers::new("english", finder_index::ANALYSIS, &[]);
        let text = "word ".repeat(1000);
        let t = field_terms(&mut a.words, &text);
        assert_eq!(t.len, 1000);
        assert!(t.norm <= 1000 && t.norm > 800, "{}", t.norm);
        let short = field_terms(&mut a.words, "alpha beta");
        assert_eq!(short.norm, 2);
    }
}
