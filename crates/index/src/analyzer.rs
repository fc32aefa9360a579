//! Text analysis: the stemmed word analyzer per language and the per-word trigram tokenizer.
//!
//! The same analyzers tokenize documents at index time and queries at search time, so the
//! lexical channel and its oracle tests see identical terms.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Name under which the word analyzer is registered.
pub(crate) const WORDS: &str = "finder_words";
/// Name under which the trigram analyzer is registered.
pub(crate) const TRIGRAMS: &str = "finder_trigrams";

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

/// Trigrams of each whitespace-separated word, lowercased: `AUTH-041` gives `aut`, `uth`,
/// `th-`, `h-0`, `-04`, `041`. Words of one or two characters are kept whole.
pub(crate) fn trigram_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(WordTrigrams)
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
struct WordTrigrams;

struct WordTrigramStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for WordTrigrams {
    type TokenStream<'a> = WordTrigramStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordTrigramStream {
        let mut tokens = Vec::new();
        let mut push = |from: usize, to: usize| {
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position: tokens.len(),
                text: text[from..to].to_string(),
                position_length: 1,
            })
        };
        let mut word_start = None;
        let bounds = text
            .char_indices()
            .map(|(i, c)| (i, c.is_whitespace()))
            .chain([(text.len(), true)]);
        for (i, is_space) in bounds {
            match (word_start, is_space) {
                (None, false) => word_start = Some(i),
                (Some(start), true) => {
                    let word = &text[start..i];
                    let offsets: Vec<usize> = word
                        .char_indices()
                        .map(|(j, _)| start + j)
                        .chain([i])
                        .collect();
                    if offsets.len() <= 4 {
                        push(start, i);
                    } else {
                        for w in offsets.windows(4) {
                            push(w[0], w[3]);
                        }
                    }
                    word_start = None;
                }
                _ => {}
            }
        }
        WordTrigramStream { tokens, next: 0 }
    }
}

impl TokenStream for WordTrigramStream {
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
    fn identifiers_become_trigrams() {
        let mut a = trigram_analyzer();
        assert_eq!(
            terms(&mut a, "AUTH-041"),
            vec!["aut", "uth", "th-", "h-0", "-04", "041"]
        );
        assert_eq!(
            terms(&mut a, "a ok  Zürich"),
            vec!["a", "ok", "zür", "üri", "ric", "ich"]
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
