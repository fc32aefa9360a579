//! Folding text and names the same way (words, lowercase, accents), and the filters an alias
//! must pass.

use std::ops::Range;

use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser, SimpleTokenizer, TextAnalyzer};

use crate::graph::stop_words::is_stop_word;

use super::{DropReason, MentionConfig, MAX_ALIAS_CHARS};

/// `text` folded for matching: its words lowercased and accent-folded, joined by single
/// spaces (`Pokémon: Jean-Luc` → `pokemon jean luc`).
pub fn fold(text: &str) -> String {
    let words = Words::of(text);
    words
        .padded
        .get(1..words.padded.len().saturating_sub(1))
        .unwrap_or("")
        .to_string()
}

/// `Title (disambiguator)` → `Title`; None for names without a final parenthesis.
pub(super) fn strip_disambiguator(name: &str) -> Option<&str> {
    let inner = name.strip_suffix(')')?;
    let open = inner.rfind('(')?;
    let base = inner[..open].trim();
    (!base.is_empty()).then_some(base)
}

/// Why a folded alias cannot be used, if it cannot.
pub(super) fn filter(folded: &str, config: &MentionConfig) -> Option<DropReason> {
    let chars = folded.chars().filter(|&c| c != ' ').count();
    if chars == 0 {
        return Some(DropReason::Empty);
    }
    let all = folded.chars().count();
    if all > MAX_ALIAS_CHARS {
        return Some(DropReason::TooLong {
            chars: all,
            max: MAX_ALIAS_CHARS,
        });
    }
    if chars < config.min_chars {
        return Some(DropReason::TooShort {
            chars,
            min: config.min_chars,
        });
    }
    if config.stop_words && !folded.contains(' ') && is_stop_word(folded) {
        return Some(DropReason::StopWord);
    }
    None
}

/// A text's folded words: ` w1 w2 … wn ` (padded with one space each side) and where each
/// word lies, there and in the text.
pub(super) struct Words {
    pub(super) padded: String,
    /// Per word: its start and end in `padded`, and its bytes in the text.
    pub(super) spans: Vec<(usize, usize, Range<usize>)>,
}

impl Words {
    pub(super) fn of(text: &str) -> Words {
        if text.is_ascii() {
            return Words::of_ascii(text);
        }
        let mut analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(LowerCaser)
            .filter(AsciiFoldingFilter)
            .build();
        let mut padded = String::with_capacity(text.len() + 2);
        padded.push(' ');
        let mut spans = Vec::new();
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            let token = stream.token();
            let start = padded.len();
            // Folding can yield punctuation (`½` → `1/2`); words hold letters and digits only.
            // It can also yield capitals (`ʜ` → `H`, after the lowercasing), so it is followed
            // by lowercasing again: folding folded text changes nothing.
            padded.extend(
                token
                    .text
                    .chars()
                    .flat_map(char::to_lowercase)
                    .filter(|c| c.is_alphanumeric()),
            );
            if padded.len() == start {
                continue;
            }
            spans.push((start, padded.len(), token.offset_from..token.offset_to));
            padded.push(' ');
        }
        if spans.is_empty() {
            padded.push(' ');
        }
        Words { padded, spans }
    }

    /// [`Words::of`] for ASCII text, without the analyzer: its words are the runs of ASCII
    /// letters and digits (what the tokenizer splits on), lowercased (all the filters do to
    /// them).
    pub(super) fn of_ascii(text: &str) -> Words {
        let bytes = text.as_bytes();
        let mut padded = String::with_capacity(text.len() + 2);
        padded.push(' ');
        let mut spans = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            if !bytes[at].is_ascii_alphanumeric() {
                at += 1;
                continue;
            }
            let from = at;
            while at < bytes.len() && bytes[at].is_ascii_alphanumeric() {
                at += 1;
            }
            let start = padded.len();
            padded.extend(
                bytes[from..at]
                    .iter()
                    .map(|b| b.to_ascii_lowercase() as char),
            );
            spans.push((start, padded.len(), from..at));
            padded.push(' ');
        }
        if spans.is_empty() {
            padded.push(' ');
        }
        Words { padded, spans }
    }

    /// The text bytes of the padded match `start..end` (spaces included), from its first
    /// word's start to its last word's end.
    pub(super) fn source_range(&self, start: usize, end: usize) -> Option<Range<usize>> {
        let first = self
            .spans
            .binary_search_by_key(&(start + 1), |s| s.0)
            .ok()?;
        let last = self
            .spans
            .binary_search_by_key(&end.checked_sub(1)?, |s| s.1)
            .ok()?;
        Some(self.spans[first].2.start..self.spans[last].2.end)
    }
}
