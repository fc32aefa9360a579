//! Text analysis: the stemmed word analyzer per language and the whole-word analyzer.
//!
//! The same analyzers tokenize documents at index time and queries at search time, so the
//! lexical channel and its oracle tests see identical terms.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Name under which the word analyzer is registered.
pub(crate) const WORDS: &str = "finder_words";
/// Name under which the whole-word analyzer is registered.
pub(crate) const RAW: &str = "finder_raw";

fn language(name: &str) -> Option<Language> {
    Some(match name {
        "english" => Language::English,
        "danish" => Language::Danish,
        "dutch" => Language::Dutch,
        "finnish" => Language::Finnish,
        "french" => Language::French,
        "german" => Language::German,
        "hungarian" => Language::Hungarian,
        "italian" => Language::Italian,
        "norwegian" => Language::Norwegian,
        "portuguese" => Language::Portuguese,
        "romanian" => Language::Romanian,
        "russian" => Language::Russian,
        "spanish" => Language::Spanish,
        "swedish" => Language::Swedish,
        "turkish" => Language::Turkish,
        _ => return None,
    })
}

/// Words split on non-alphanumerics, lowercased, accents folded, stop words dropped, stemmed.
pub(crate) fn word_analyzer(lang: &str) -> TextAnalyzer {
    let language = language(lang).unwrap_or(Language::English);
    let builder = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .dynamic();
    let builder = match StopWordFilter::new(language) {
        Some(stop) => builder.filter_dynamic(stop),
        None => builder,
    };
    builder.filter_dynamic(Stemmer::new(language)).build()
}

/// Whitespace-separated words, their leading and trailing punctuation trimmed, lowercased,
/// unstemmed: `(AUTH-041),` gives `auth-041`. The terms the trigram list expands partial
/// words and identifiers into.
pub(crate) fn raw_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(RawWords)
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .build()
}

/// Does the query hold an identifier-like token (a digit, or an inner `-`, `_`, `.`, `/`)?
/// In `auto` mode the trigram list runs only for such queries.
pub fn looks_like_identifier(query: &str) -> bool {
    query.split_whitespace().any(|word| {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric());
        word.chars().any(|c| c.is_ascii_digit()) || word.contains(['-', '_', '.', '/'])
    })
}

/// Collects the analyzed terms of `text`.
pub fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

#[derive(Clone, Default)]
struct RawWords;

/// Tokens made up front.
struct TokenList {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for RawWords {
    type TokenStream<'a> = TokenList;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> TokenList {
        let mut tokens = Vec::new();
        for word in text.split_whitespace() {
            let trimmed = word.trim_matches(|c: char| !c.is_alphanumeric());
            if trimmed.is_empty() {
                continue;
            }
            // `trimmed` is a sub-slice of `text`: its offsets come from the pointers.
            let from = trimmed.as_ptr() as usize - text.as_ptr() as usize;
            tokens.push(Token {
                offset_from: from,
                offset_to: from + trimmed.len(),
                position: tokens.len(),
                text: trimmed.to_string(),
                position_length: 1,
            });
        }
        TokenList { tokens, next: 0 }
    }
}

impl TokenStream for TokenList {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_stemmed_and_stop_words_dropped() {
        let mut a = word_analyzer("english");
        assert_eq!(
            terms(&mut a, "The tokens EXPIRED, running!"),
            vec!["token", "expir", "run"]
        );
        assert_eq!(terms(&mut a, "café"), vec!["cafe"]);
    }

    #[test]
    fn whole_words_keep_inner_punctuation() {
        let mut a = raw_analyzer();
        assert_eq!(
            terms(&mut a, "(AUTH-041), see config.toml: a  Zürich --"),
            vec!["auth-041", "see", "config.toml", "a", "zürich"]
        );
        let mut stream = a.token_stream("  «v2.1»");
        assert!(stream.advance());
        assert_eq!(
            (stream.token().offset_from, stream.token().offset_to),
            (4, 8)
        );
    }

    #[test]
    fn identifier_detection() {
        assert!(looks_like_identifier("error AUTH-041"));
        assert!(looks_like_identifier("v2 rollout"));
        assert!(looks_like_identifier("config.toml"));
        assert!(!looks_like_identifier("expired token, client!"));
    }
}
