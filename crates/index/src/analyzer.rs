//! Text analysis: the stemmed word analyzer per language and the whole-word analyzer.
//!
//! The same analyzers tokenize documents at index time and queries at search time, so the
//! lexical channel and its oracle tests see identical terms.

use finder_core::FastMap;
use frostem::Algorithm;
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, StopWordFilter,
    TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
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
    builder.filter_dynamic(MemoStemmer::new(language)).build()
}

/// The Snowball algorithm tantivy's `Stemmer` runs for `language`.
fn algorithm(language: Language) -> Algorithm {
    match language {
        Language::Arabic => Algorithm::Arabic,
        Language::Danish => Algorithm::Danish,
        Language::Dutch => Algorithm::Dutch,
        Language::English => Algorithm::English,
        Language::Finnish => Algorithm::Finnish,
        Language::French => Algorithm::French,
        Language::German => Algorithm::German,
        Language::Greek => Algorithm::Greek,
        Language::Hungarian => Algorithm::Hungarian,
        Language::Italian => Algorithm::Italian,
        Language::Norwegian => Algorithm::Norwegian,
        Language::Portuguese => Algorithm::Portuguese,
        Language::Romanian => Algorithm::Romanian,
        Language::Russian => Algorithm::Russian,
        Language::Spanish => Algorithm::Spanish,
        Language::Swedish => Algorithm::Swedish,
        Language::Tamil => Algorithm::Tamil,
        Language::Turkish => Algorithm::Turkish,
    }
}

/// Words a [`MemoStemmer`] remembers per analyzer, at most: past it, new words are stemmed
/// each time. Words are under 64 bytes (`RemoveLongFilter` runs first), so a full memo is a
/// few MiB.
const MEMO_MAX_WORDS: usize = 1 << 16;

/// tantivy's `Stemmer` filter (the same Snowball stemmers, the same terms) with a memo of the
/// words it has stemmed. Stemming was a third of the indexing threads' time (`perf`, 100k
/// synthetic fragments), and text repeats its words: an analyzer remembers each word's stem
/// for the documents it goes on to index. A clone starts with an empty memo, so the analyzer
/// tantivy hands each segment writer (or query) remembers only what it analysed itself.
#[derive(Clone, Copy)]
struct MemoStemmer {
    stemmer: frostem::Stemmer,
}

impl MemoStemmer {
    fn new(language: Language) -> MemoStemmer {
        MemoStemmer {
            stemmer: frostem::Stemmer::new(algorithm(language)),
        }
    }
}

impl TokenFilter for MemoStemmer {
    type Tokenizer<T: Tokenizer> = MemoStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, inner: T) -> MemoStemmerFilter<T> {
        MemoStemmerFilter {
            stemmer: self.stemmer,
            memo: FastMap::default(),
            inner,
        }
    }
}

struct MemoStemmerFilter<T> {
    stemmer: frostem::Stemmer,
    /// Word → stem, for the words this analyzer has stemmed (at most [`MEMO_MAX_WORDS`]).
    memo: FastMap<Box<str>, Box<str>>,
    inner: T,
}

impl<T: Clone> Clone for MemoStemmerFilter<T> {
    fn clone(&self) -> Self {
        MemoStemmerFilter {
            stemmer: self.stemmer,
            memo: FastMap::default(),
            inner: self.inner.clone(),
        }
    }
}

impl<T: Tokenizer> Tokenizer for MemoStemmerFilter<T> {
    type TokenStream<'a> = MemoStemmerStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        MemoStemmerStream {
            tail: self.inner.token_stream(text),
            stemmer: self.stemmer,
            memo: &mut self.memo,
        }
    }
}

struct MemoStemmerStream<'a, S> {
    tail: S,
    stemmer: frostem::Stemmer,
    memo: &'a mut FastMap<Box<str>, Box<str>>,
}

impl<S: TokenStream> TokenStream for MemoStemmerStream<'_, S> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let token = self.tail.token_mut();
        if let Some(stem) = self.memo.get(token.text.as_str()) {
            token.text.clear();
            token.text.push_str(stem);
            return true;
        }
        let stem = self.stemmer.stem(&token.text).into_owned();
        if self.memo.len() < MEMO_MAX_WORDS {
            self.memo
                .insert(token.text.as_str().into(), stem.as_str().into());
        }
        token.text = stem;
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
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
    use proptest::strategy::Strategy;

    #[test]
    fn words_are_stemmed_and_stop_words_dropped() {
        let mut a = word_analyzer("english");
        assert_eq!(
            terms(&mut a, "The tokens EXPIRED, running!"),
            vec!["token", "expir", "run"]
        );
        assert_eq!(terms(&mut a, "café"), vec!["cafe"]);
    }

    /// The analyzer as it was, with tantivy's own `Stemmer`: the memo must not change a term.
    fn tantivy_word_analyzer(lang: &str) -> TextAnalyzer {
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
        builder
            .filter_dynamic(tantivy::tokenizer::Stemmer::new(language))
            .build()
    }

    const LANGUAGES: [&str; 15] = [
        "english",
        "danish",
        "dutch",
        "finnish",
        "french",
        "german",
        "hungarian",
        "italian",
        "norwegian",
        "portuguese",
        "romanian",
        "russian",
        "spanish",
        "swedish",
        "turkish",
    ];

    #[test]
    fn remembered_stems_are_tantivys_stems() {
        let text = "Running runners ran; the RUNNING runner runs. Nationalization nationalize \
                    généralement générale Häuser häuslich отличный отличные çalışmalar \
                    running runners ran nationalization";
        for lang in LANGUAGES {
            let mut memo = word_analyzer(lang);
            let mut plain = tantivy_word_analyzer(lang);
            // The same analyzer twice: the second pass is read from its memo.
            for _ in 0..2 {
                assert_eq!(terms(&mut memo, text), terms(&mut plain, text), "{lang}");
            }
        }
    }

    #[test]
    fn past_its_bound_the_memo_still_stems_every_word() {
        // More distinct words than the memo keeps, then words it kept and words it did not.
        let words: Vec<String> = (0..MEMO_MAX_WORDS + 500)
            .map(|i| format!("w{i}ing"))
            .collect();
        let mut memo = word_analyzer("english");
        let mut plain = tantivy_word_analyzer("english");
        let all = words.join(" ");
        assert_eq!(terms(&mut memo, &all), terms(&mut plain, &all));
        let again = format!("{} {}", words[3], words[MEMO_MAX_WORDS + 10]);
        assert_eq!(terms(&mut memo, &again), terms(&mut plain, &again));
    }

    proptest::proptest! {
        #[test]
        fn the_memo_stemmer_is_the_stemmer(
            lang in proptest::sample::select(LANGUAGES.to_vec()),
            texts in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        proptest::sample::select(vec![
                            "running", "runs", "généralement", "Häuser", "connection",
                            "connected", "отличные", "çalışmalar", "the", "and",
                        ]).prop_map(str::to_string),
                        "[a-zA-Zàéöüßçğış]{1,12}",
                        "\\PC{1,8}",
                    ],
                    0..20,
                ).prop_map(|w| w.join(" ")),
                1..4,
            ),
        ) {
            // One analyzer over several texts, as a segment writer indexes documents.
            let mut memo = word_analyzer(lang);
            let mut plain = tantivy_word_analyzer(lang);
            for text in &texts {
                proptest::prop_assert_eq!(terms(&mut memo, text), terms(&mut plain, text));
            }
        }
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
