//! Text analysis: the stemmed word analyzer per language and the whole-word analyzer.
//!
//! With `index.language = "auto"` each word picks its stemmer and stop words by its script:
//! Cyrillic words are Russian, and Latin words take the language detected for their source
//! ([`source_language`]: German, French, Spanish and the other Snowball languages; English when
//! no other is clear), so a Russian note with English terms in it stems both halves right and a
//! German note stems as German. Queries are analysed once per language the index holds. From analysis 3, runs of Chinese, Japanese and Korean characters
//! (which no space separates) become overlapping character bigrams, in documents and queries
//! alike.
//!
//! The same analyzers tokenize documents at index time and queries at search time, so the
//! lexical channel and its oracle tests see identical terms.

use finder_core::{is_cjk, is_cyrillic, FastMap};
use frostem::Algorithm;
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer,
    StopWordFilter, TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
};

/// Name under which the word analyzer is registered.
pub(crate) const WORDS: &str = "finder_words";
/// Name under which the whole-word analyzer is registered (`finder_raw`: a name indexes
/// store, kept as it was).
pub(crate) const WHOLE_WORDS: &str = "finder_raw";

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

/// The version of the word analysis new indexes are written with. An index records its own
/// ([`crate::record::CommitInfo::analysis`]) and queries analyse words as it was written, so an
/// index made by an older version keeps matching until a run rebuilds it (which any indexing
/// run into it does). 1: until 2026-12-02; 2: plural acronyms fold to their singular
/// ([`acronym_singular`]); 3: runs of CJK characters become character bigrams
/// ([`CjkBigrams`]); 4: under `auto`, a source's Latin words take its detected language
/// ([`source_language`]).
pub const ANALYSIS: u32 = 4;

/// The language that picks a stemmer per word by its script.
pub const AUTO: &str = "auto";

/// The languages besides English whose Latin words `auto` stems by a source's detected
/// language: whatlang's code and the stemmer's name.
const DETECTED: [(whatlang::Lang, &str); 13] = [
    (whatlang::Lang::Dan, "danish"),
    (whatlang::Lang::Nld, "dutch"),
    (whatlang::Lang::Fin, "finnish"),
    (whatlang::Lang::Fra, "french"),
    (whatlang::Lang::Deu, "german"),
    (whatlang::Lang::Hun, "hungarian"),
    (whatlang::Lang::Ita, "italian"),
    (whatlang::Lang::Nob, "norwegian"),
    (whatlang::Lang::Por, "portuguese"),
    (whatlang::Lang::Ron, "romanian"),
    (whatlang::Lang::Spa, "spanish"),
    (whatlang::Lang::Swe, "swedish"),
    (whatlang::Lang::Tur, "turkish"),
];

/// Bytes of a source's text its language is detected from: a few paragraphs make whatlang's
/// guess reliable, and reading the rest of a long source would only cost time.
const DETECT_BYTES: usize = 1024;

/// The language of a source's Latin words under `auto`, from `texts` (its title and
/// passages, in order): one of [`DETECTED`] when whatlang, choosing among those and English,
/// finds it with confidence; `None` (English) otherwise, and for text mostly in another
/// script (a Russian note's English terms stay English).
pub fn source_language<'t>(texts: impl IntoIterator<Item = &'t str>) -> Option<&'static str> {
    static DETECTOR: std::sync::LazyLock<whatlang::Detector> = std::sync::LazyLock::new(|| {
        let mut allowed: Vec<whatlang::Lang> = DETECTED.iter().map(|&(lang, _)| lang).collect();
        allowed.push(whatlang::Lang::Eng);
        whatlang::Detector::with_allowlist(allowed)
    });
    let mut sample = String::new();
    for text in texts {
        if sample.len() >= DETECT_BYTES {
            break;
        }
        let mut end = text.len().min(DETECT_BYTES - sample.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        sample.push_str(&text[..end]);
        sample.push('\n');
    }
    // Count first: a guess can only stand with stop words behind it, and most sources (all
    // of an English corpus) hold too few of any other language's for one to. Only a source
    // where some language could win meets whatlang, which costs about 60 µs per kilobyte.
    let counts = StopCounts::of(&sample);
    if !counts.any_can_win() {
        return None;
    }
    let info = DETECTOR.detect(&sample)?;
    if info.script() != whatlang::Script::Latin || !info.is_reliable() {
        return None;
    }
    let at = DETECTED.iter().position(|&(lang, _)| lang == info.lang())?;
    counts.wins(at).then_some(DETECTED[at].1)
}

/// How many words of a sample are stop words of each of [`DETECTED`]'s languages and of
/// English. Prose uses its language's function words; a list of terms has none, and its
/// letters can look like any language to trigrams (`expired session restore latency backup`
/// reads as reliably Dutch), so a detected language stands only when its stop words reach
/// [`MIN_STOP_WORDS`] and outnumber English's.
struct StopCounts {
    detected: [usize; DETECTED.len()],
    english: usize,
}

impl StopCounts {
    fn of(sample: &str) -> StopCounts {
        /// Words met so far on this thread, each with one bit per language of [`DETECTED`]
        /// it is a stop word of and bit 15 for English; cleared when it reaches the bound.
        struct Known {
            lexicons: Vec<Lexicon>,
            english: Lexicon,
            words: FastMap<Box<str>, u16>,
        }
        /// A corpus's words stay in the memo (the synthetic corpora's 50,000 fit); a full one,
        /// about 12 MiB, starts again rather than probing fourteen stop lists for every new
        /// word.
        const KNOWN_MAX_WORDS: usize = 1 << 18;
        const ENGLISH_BIT: u16 = 1 << 15;
        thread_local! {
            static KNOWN: std::cell::RefCell<Option<Known>> = const { std::cell::RefCell::new(None) };
        }
        let mut counts = StopCounts {
            detected: [0; DETECTED.len()],
            english: 0,
        };
        KNOWN.with_borrow_mut(|known| {
            let known = known.get_or_insert_with(|| Known {
                lexicons: DETECTED
                    .iter()
                    .map(|&(_, name)| Lexicon::of(language(name).expect("a Snowball language")))
                    .collect(),
                english: Lexicon::of(Language::English),
                words: FastMap::default(),
            });
            for word in sample.split(|c: char| !c.is_alphanumeric()) {
                if word.is_empty() {
                    continue;
                }
                let lower = word.to_lowercase();
                let bits = match known.words.get(lower.as_str()) {
                    Some(&bits) => bits,
                    None => {
                        let mut bits = 0u16;
                        for (i, lexicon) in known.lexicons.iter_mut().enumerate() {
                            if lexicon.is_stop(&lower) {
                                bits |= 1 << i;
                            }
                        }
                        if known.english.is_stop(&lower) {
                            bits |= ENGLISH_BIT;
                        }
                        if known.words.len() >= KNOWN_MAX_WORDS {
                            known.words.clear();
                        }
                        known.words.insert(lower.as_str().into(), bits);
                        bits
                    }
                };
                for (i, count) in counts.detected.iter_mut().enumerate() {
                    *count += usize::from(bits & (1 << i) != 0);
                }
                counts.english += usize::from(bits & ENGLISH_BIT != 0);
            }
        });
        counts
    }

    /// Whether the language at `at` in [`DETECTED`] may stand as the sample's.
    fn wins(&self, at: usize) -> bool {
        let own = self.detected[at];
        own >= MIN_STOP_WORDS && own > self.english
    }

    fn any_can_win(&self) -> bool {
        (0..DETECTED.len()).any(|at| self.wins(at))
    }
}

/// The stop words a source's sample must hold in its detected language ([`source_language`]).
const MIN_STOP_WORDS: usize = 3;

/// Words split on non-alphanumerics, plural acronyms made singular (from analysis 2),
/// lowercased, accents folded, stop words dropped, stemmed.
pub(crate) fn word_analyzer(lang: &str, analysis: u32) -> TextAnalyzer {
    word_analyzer_remembering(lang, None, analysis, MEMO_MAX_WORDS)
}

/// The `auto` word analyzer of a source whose Latin words are in `latin` (a name
/// [`source_language`] gives): Cyrillic words stay Russian.
pub(crate) fn source_word_analyzer(latin: &str, analysis: u32) -> TextAnalyzer {
    word_analyzer_remembering(AUTO, Some(latin), analysis, MEMO_MAX_WORDS)
}

/// [`word_analyzer`] without its memo of stems, for a caller that remembers each word's term
/// itself (the postings writer analyses each distinct word once: a memo there only paid for
/// a probe and two copies per new word).
pub(crate) fn word_analyzer_unremembering(lang: &str, analysis: u32) -> TextAnalyzer {
    word_analyzer_remembering(lang, None, analysis, 0)
}

/// [`source_word_analyzer`] without its memo (see [`word_analyzer_unremembering`]).
pub(crate) fn source_word_analyzer_unremembering(latin: &str, analysis: u32) -> TextAnalyzer {
    word_analyzer_remembering(AUTO, Some(latin), analysis, 0)
}

/// [`word_analyzer`] whose stemmer remembers at most `memo_words` words; under `auto`, its
/// Latin words in `latin` when given.
fn word_analyzer_remembering(
    lang: &str,
    latin: Option<&str>,
    analysis: u32,
    memo_words: usize,
) -> TextAnalyzer {
    let picked = if lang == AUTO {
        latin.unwrap_or(lang)
    } else {
        lang
    };
    let language = language(picked).unwrap_or(Language::English);
    let mut stemmer = MemoStemmer::new(language, memo_words);
    if lang == AUTO {
        stemmer = stemmer.with_cyrillic(Language::Russian);
    }
    // Bigrams before the length limit: a run of CJK characters is one long token until split.
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(CjkBigrams { on: analysis >= 3 })
        .filter(RemoveLongFilter::limit(64))
        .filter(AcronymPlurals { on: analysis >= 2 })
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(stemmer)
        .build()
}

/// Splits a token holding CJK characters: each run of them becomes its overlapping character
/// bigrams (a lone character stays a unigram), and the letters or digits between runs stay
/// words. `東京都に住む` gives `東京 京都 都に に住 住む`, so a two-character query word finds
/// the text that holds it. Lucene's CJK bigram filter does the same; a dictionary segmenter
/// would give fewer, better terms for Chinese and Japanese, at the cost of a dictionary per
/// language.
#[derive(Clone, Copy)]
struct CjkBigrams {
    on: bool,
}

impl TokenFilter for CjkBigrams {
    type Tokenizer<T: Tokenizer> = CjkBigramsFilter<T>;

    fn transform<T: Tokenizer>(self, inner: T) -> CjkBigramsFilter<T> {
        CjkBigramsFilter { on: self.on, inner }
    }
}

#[derive(Clone)]
struct CjkBigramsFilter<T> {
    on: bool,
    inner: T,
}

impl<T: Tokenizer> Tokenizer for CjkBigramsFilter<T> {
    type TokenStream<'a> = CjkBigramsStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        CjkBigramsStream {
            on: self.on,
            tail: self.inner.token_stream(text),
            pending: Vec::new(),
            token: Token::default(),
            split: false,
            shift: 0,
        }
    }
}

struct CjkBigramsStream<S> {
    on: bool,
    tail: S,
    /// The pieces of the last split token still to hand out, last first.
    pending: Vec<Token>,
    /// The piece handed out last, when `split`; otherwise the tail's token is the current
    /// one, passed through in place.
    token: Token,
    split: bool,
    /// Positions the splits so far added: a token split in `n` pieces takes `n` positions.
    shift: usize,
}

impl<S: TokenStream> CjkBigramsStream<S> {
    /// The pieces of `token` in order: CJK runs as bigrams, other runs whole.
    fn split(token: &Token) -> Vec<Token> {
        let piece = |from: usize, to: usize| Token {
            offset_from: token.offset_from + from,
            offset_to: token.offset_from + to,
            text: token.text[from..to].to_string(),
            ..Token::default()
        };
        let mut pieces = Vec::new();
        let chars: Vec<(usize, char)> = token.text.char_indices().collect();
        let end_of = |i: usize| chars.get(i).map_or(token.text.len(), |&(at, _)| at);
        let mut i = 0;
        while i < chars.len() {
            let cjk = is_cjk(chars[i].1);
            let mut j = i;
            while j < chars.len() && is_cjk(chars[j].1) == cjk {
                j += 1;
            }
            if !cjk || j - i == 1 {
                pieces.push(piece(chars[i].0, end_of(j)));
            } else {
                for (k, &(at, _)) in chars.iter().enumerate().take(j - 1).skip(i) {
                    pieces.push(piece(at, end_of(k + 2)));
                }
            }
            i = j;
        }
        pieces
    }
}

impl<S: TokenStream> TokenStream for CjkBigramsStream<S> {
    fn advance(&mut self) -> bool {
        if let Some(next) = self.pending.pop() {
            self.token = next;
            return true;
        }
        if !self.tail.advance() {
            return false;
        }
        let token = self.tail.token_mut();
        token.position += self.shift;
        self.split = self.on && !token.text.is_ascii() && token.text.chars().any(is_cjk);
        if !self.split {
            return true;
        }
        let mut pieces = Self::split(token);
        for (k, piece) in pieces.iter_mut().enumerate() {
            piece.position = token.position + k;
        }
        self.shift += pieces.len().saturating_sub(1);
        pieces.reverse();
        self.pending = pieces;
        self.advance()
    }

    fn token(&self) -> &Token {
        if self.split {
            &self.token
        } else {
            self.tail.token()
        }
    }

    fn token_mut(&mut self) -> &mut Token {
        if self.split {
            &mut self.token
        } else {
            self.tail.token_mut()
        }
    }
}

/// The singular of a plural acronym, as written: `RNAs`, `miRNAs`, `GPUs`, `T3Rs`, `PhDs`
/// give `RNA`, `miRNA`, `GPU`, `T3R`, `PhD`; `None` for any other word. The shape: a final
/// lowercase `s` after an uppercase letter or a digit, with at least two uppercase letters
/// before it. Snowball's English stemmer leaves these plurals alone (its `s` rule needs a
/// vowel earlier in the word, not just before the `s`: `rnas`, `dcs`, `snps` stay), so a
/// plural acronym never met its singular; Porter's stemmer (SQLite's FTS5, Lucene's
/// `porter`) folds them. Runs before lowercasing, which erases the shape.
pub(crate) fn acronym_singular(word: &str) -> Option<&str> {
    let base = word.strip_suffix('s')?;
    let last = *base.as_bytes().last()?;
    let uppercase = base.bytes().filter(u8::is_ascii_uppercase).count();
    ((last.is_ascii_uppercase() || last.is_ascii_digit()) && uppercase >= 2).then_some(base)
}

/// Drops the `s` of plural acronyms ([`acronym_singular`]) when `on` (analysis 2 and later);
/// other tokens pass unchanged.
#[derive(Clone, Copy)]
struct AcronymPlurals {
    on: bool,
}

impl TokenFilter for AcronymPlurals {
    type Tokenizer<T: Tokenizer> = AcronymPluralsFilter<T>;

    fn transform<T: Tokenizer>(self, inner: T) -> AcronymPluralsFilter<T> {
        AcronymPluralsFilter { on: self.on, inner }
    }
}

#[derive(Clone)]
struct AcronymPluralsFilter<T> {
    on: bool,
    inner: T,
}

impl<T: Tokenizer> Tokenizer for AcronymPluralsFilter<T> {
    type TokenStream<'a> = AcronymPluralsStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        AcronymPluralsStream {
            on: self.on,
            tail: self.inner.token_stream(text),
        }
    }
}

struct AcronymPluralsStream<S> {
    on: bool,
    tail: S,
}

impl<S: TokenStream> TokenStream for AcronymPluralsStream<S> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        if self.on {
            let text = &mut self.tail.token_mut().text;
            if let Some(singular) = acronym_singular(text).map(str::len) {
                text.truncate(singular);
            }
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
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

/// Words a [`MemoStemmer`] remembers per analyzer, at most: past it, new words are looked up
/// and stemmed each time. Words are under 64 bytes (`RemoveLongFilter` runs first), so a full
/// memo is a few MiB.
const MEMO_MAX_WORDS: usize = 1 << 16;

/// tantivy's `StopWordFilter` then its `Stemmer` (the same stop words, the same Snowball
/// stemmers, so the same terms), with a memo of the words seen: a word's stem, or that it
/// is a stop word. Stop words and stemming were a third of the indexing threads' time
/// (`perf`, 100k synthetic fragments), and text repeats its words: an analyzer remembers
/// each word for the documents it goes on to index. A clone starts with an empty memo, so the
/// analyzer tantivy hands each segment writer (or query) remembers only what it analysed.
#[derive(Clone)]
struct MemoStemmer(Words);

impl MemoStemmer {
    fn new(language: Language, memo_words: usize) -> MemoStemmer {
        MemoStemmer(Words {
            memo_words,
            primary: Lexicon::of(language),
            cyrillic: None,
            memo: FastMap::default(),
        })
    }

    /// Words holding a Cyrillic letter take `language`'s stemmer and stop words instead.
    fn with_cyrillic(mut self, language: Language) -> MemoStemmer {
        self.0.cyrillic = Some(Lexicon::of(language));
        self
    }
}

/// One language's stemmer and stop words.
struct Lexicon {
    stemmer: frostem::Stemmer,
    /// The language's stop words as tantivy's filter over one whole word (none for a
    /// language tantivy has no list for).
    stop: Option<TextAnalyzer>,
}

impl Lexicon {
    fn of(language: Language) -> Lexicon {
        Lexicon {
            stemmer: frostem::Stemmer::new(algorithm(language)),
            stop: StopWordFilter::new(language).map(|stop| {
                TextAnalyzer::builder(RawTokenizer::default())
                    .filter(stop)
                    .build()
            }),
        }
    }

    /// `word`'s stem, `None` for a stop word.
    fn stem(&mut self, word: &str) -> Option<String> {
        (!self.is_stop(word)).then(|| self.stemmer.stem(word).into_owned())
    }

    fn is_stop(&mut self, word: &str) -> bool {
        self.stop
            .as_mut()
            .is_some_and(|stop| !stop.token_stream(word).advance())
    }
}

impl Clone for Lexicon {
    fn clone(&self) -> Self {
        Lexicon {
            stemmer: self.stemmer,
            stop: self.stop.clone(),
        }
    }
}

impl TokenFilter for MemoStemmer {
    type Tokenizer<T: Tokenizer> = MemoStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, inner: T) -> MemoStemmerFilter<T> {
        MemoStemmerFilter {
            words: self.0,
            inner,
        }
    }
}

#[derive(Clone)]
struct MemoStemmerFilter<T> {
    words: Words,
    inner: T,
}

/// A [`MemoStemmer`]'s stemmers, stop words and memo.
struct Words {
    /// The most words `memo` holds (0: none, and no probe).
    memo_words: usize,
    primary: Lexicon,
    /// For words holding a Cyrillic letter, when the language is `auto`.
    cyrillic: Option<Lexicon>,
    /// Word → its stem, or `None` for a stop word (at most `memo_words` words).
    memo: FastMap<Box<str>, Option<Box<str>>>,
}

impl Clone for Words {
    fn clone(&self) -> Self {
        Words {
            memo_words: self.memo_words,
            primary: self.primary.clone(),
            cyrillic: self.cyrillic.clone(),
            memo: FastMap::default(),
        }
    }
}

impl Words {
    fn memo_hit(&self, word: &str) -> Option<&Option<Box<str>>> {
        if self.memo_words == 0 {
            return None;
        }
        self.memo.get(word)
    }

    /// Puts `word`'s stem in its place; false for a stop word (to be dropped).
    fn stem_in_place(&mut self, word: &mut String) -> bool {
        if let Some(known) = self.memo_hit(word) {
            let Some(stem) = known else {
                return false;
            };
            word.clear();
            word.push_str(stem);
            return true;
        }
        let lexicon = match &mut self.cyrillic {
            Some(cyrillic) if word.chars().any(is_cyrillic) => cyrillic,
            _ => &mut self.primary,
        };
        let stem = lexicon.stem(word);
        if self.memo.len() < self.memo_words {
            self.memo
                .insert(word.as_str().into(), stem.as_deref().map(Into::into));
        }
        match stem {
            Some(stem) => {
                *word = stem;
                true
            }
            None => false,
        }
    }
}

impl<T: Tokenizer> Tokenizer for MemoStemmerFilter<T> {
    type TokenStream<'a> = MemoStemmerStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        MemoStemmerStream {
            tail: self.inner.token_stream(text),
            words: &mut self.words,
        }
    }
}

struct MemoStemmerStream<'a, S> {
    tail: S,
    words: &'a mut Words,
}

impl<S: TokenStream> TokenStream for MemoStemmerStream<'_, S> {
    fn advance(&mut self) -> bool {
        while self.tail.advance() {
            if self.words.stem_in_place(&mut self.tail.token_mut().text) {
                return true;
            }
        }
        false
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
pub(crate) fn whole_word_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(RawWords)
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .build()
}

/// Does the query hold an identifier-like token (a digit, or an inner `-`, `_`, `.`, `/`)?
/// In `auto` mode the trigram list runs only for such queries.
pub fn looks_like_identifier(query: &str) -> bool {
    query.split_whitespace().any(|word| {
        let word = trim_word(word);
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

/// A whitespace-separated word without the characters before its first alphanumeric one and
/// after its last: the whole word the whole-word analyzer takes. Its alphanumeric runs, the
/// word analyzer's words, are the untrimmed word's too.
pub(crate) fn trim_word(word: &str) -> &str {
    match word.as_bytes() {
        // Most words start and end with an ASCII letter or digit: nothing to trim.
        [first, .., last] if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() => word,
        [only] if only.is_ascii_alphanumeric() => word,
        _ => word.trim_matches(|c: char| !c.is_alphanumeric()),
    }
}

/// The whole words of `text`: its whitespace-separated words, each trimmed ([`trim_word`]),
/// the empty ones left out. The same words as
/// `text.split_whitespace().map(trim_word).filter(|w| !w.is_empty())`, with ASCII bytes tested
/// as bytes (the split's character by character decoding was a twentieth of the postings'
/// time on SciFact's abstracts).
pub(crate) struct WholeWords<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> WholeWords<'a> {
    pub(crate) fn new(text: &'a str) -> WholeWords<'a> {
        WholeWords { text, at: 0 }
    }

    /// Whether the character at byte `i` is whitespace (as `char::is_whitespace` says), and
    /// its length in bytes.
    fn space_at(&self, i: usize) -> (bool, usize) {
        let b = self.text.as_bytes()[i];
        if b.is_ascii() {
            (matches!(b, b'\t'..=b'\r' | b' '), 1)
        } else {
            let c = self.text[i..].chars().next().expect("at a char boundary");
            (c.is_whitespace(), c.len_utf8())
        }
    }
}

impl<'a> Iterator for WholeWords<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let len = self.text.len();
        loop {
            while self.at < len {
                let (space, n) = self.space_at(self.at);
                if !space {
                    break;
                }
                self.at += n;
            }
            if self.at == len {
                return None;
            }
            let start = self.at;
            while self.at < len {
                let (space, n) = self.space_at(self.at);
                if space {
                    break;
                }
                self.at += n;
            }
            let word = trim_word(&self.text[start..self.at]);
            if !word.is_empty() {
                return Some(word);
            }
        }
    }
}

#[derive(Clone, Default)]
struct RawWords;

/// The whole words of a text, made one at a time into one reused token (a list of them made up
/// front, a string each, was a tenth of the indexing threads' analysis).
struct RawWordStream<'a> {
    words: WholeWords<'a>,
    text: &'a str,
    token: Token,
}

impl Tokenizer for RawWords {
    type TokenStream<'a> = RawWordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> RawWordStream<'a> {
        RawWordStream {
            words: WholeWords::new(text),
            text,
            // At position `usize::MAX`: the first word advances it to 0.
            token: Token::default(),
        }
    }
}

impl TokenStream for RawWordStream<'_> {
    fn advance(&mut self) -> bool {
        if let Some(trimmed) = self.words.next() {
            // `trimmed` is a sub-slice of `text`: its offsets come from the pointers.
            let from = trimmed.as_ptr() as usize - self.text.as_ptr() as usize;
            self.token.offset_from = from;
            self.token.offset_to = from + trimmed.len();
            self.token.position = self.token.position.wrapping_add(1);
            self.token.text.clear();
            self.token.text.push_str(trimmed);
            return true;
        }
        false
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    #[test]
    fn a_source_is_detected_by_its_prose_and_lists_of_terms_stay_english() {
        for (text, expected) in [
            (
                "Die alten Häuser der Stadt wurden im letzten Jahrhundert gebaut, und viele \
                 von ihnen stehen heute leer.",
                Some("german"),
            ),
            (
                "Les vieilles maisons de la ville ont été construites au siècle dernier et \
                 beaucoup sont vides aujourd'hui.",
                Some("french"),
            ),
            (
                "Las casas antiguas de la ciudad fueron construidas en el siglo pasado y \
                 muchas están vacías hoy.",
                Some("spanish"),
            ),
            (
                "De oude huizen van de stad zijn in de vorige eeuw gebouwd en veel van \
                 die huizen staan nu leeg.",
                Some("dutch"),
            ),
            (
                "The old houses of the town were built in the last century, and many of \
                 them stand empty today.",
                None,
            ),
            // A list of terms: no function words, whatever its letters suggest.
            (
                "expired expired session restore latency backup rollback token token",
                None,
            ),
            // Mostly Cyrillic: its Latin words stay English.
            (
                "Настройка резервного копирования сервера: запускайте deployments по ночам.",
                None,
            ),
            ("Häuser", None),
        ] {
            assert_eq!(source_language([text]), expected, "{text}");
        }
        // The sample is cut at a character boundary, across texts.
        let long = "ä".repeat(DETECT_BYTES);
        assert_eq!(source_language(["a", &long, "b"]), None);
    }

    #[test]
    fn only_a_sample_with_another_languages_stop_words_meets_the_detector() {
        let at = |name: &str| DETECTED.iter().position(|&(_, n)| n == name).unwrap();
        let dutch = StopCounts::of("De oude huizen van de stad zijn in de vorige eeuw gebouwd.");
        assert!(dutch.wins(at("dutch")), "{:?}", dutch.detected);
        assert!(!dutch.wins(at("german")));
        // English prose holds English stop words at least as often as any other language's,
        // and a list of terms holds none: neither is worth whatlang's time.
        for text in [
            "The old houses of the town were built in the last century, and many of them stand empty.",
            "expired session restore latency backup rollback token",
        ] {
            let counts = StopCounts::of(text);
            assert!(!counts.any_can_win(), "{text}: {:?}", counts.detected);
        }
        // Counted again from the thread's memo, a word gives the same count.
        assert_eq!(
            StopCounts::of("de de de").detected,
            StopCounts::of("De de DE").detected
        );
    }

    #[test]
    fn plural_acronyms_have_their_singulars_shape() {
        for (plural, singular) in [
            ("RNAs", "RNA"),
            ("miRNAs", "miRNA"),
            ("GPUs", "GPU"),
            ("T3Rs", "T3R"),
            ("CD4s", "CD4"),
            ("PhDs", "PhD"),
            ("IDs", "ID"),
            ("dLNs", "dLN"),
        ] {
            assert_eq!(acronym_singular(plural), Some(singular), "{plural}");
        }
        // Not a plural acronym: one capital, a lowercase or final capital S, no digits-only.
        for word in [
            "Cells",
            "GENES",
            "AIDS",
            "Ms",
            "As",
            "1990s",
            "iPads",
            "McDonalds",
            "s",
            "",
        ] {
            assert_eq!(acronym_singular(word), None, "{word}");
        }
    }

    #[test]
    fn plural_acronyms_meet_their_singulars_from_analysis_2() {
        let text = "RNAs and the RNA; GPUs beat a GPU; SNPs, SNP; GENES cells";
        assert_eq!(
            terms(&mut word_analyzer("english", 2), text),
            vec!["rna", "rna", "gpu", "beat", "gpu", "snp", "snp", "gene", "cell"]
        );
        // Version 1, what older indexes hold: Snowball keeps these plurals.
        assert_eq!(
            terms(&mut word_analyzer("english", 1), text),
            vec!["rnas", "rna", "gpus", "beat", "gpu", "snps", "snp", "gene", "cell"]
        );
    }

    #[test]
    fn words_are_stemmed_and_stop_words_dropped() {
        let mut a = word_analyzer("english", ANALYSIS);
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
            .filter(CjkBigrams { on: true })
            .filter(RemoveLongFilter::limit(64))
            .filter(AcronymPlurals { on: true })
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

    // Every language the settings accept.
    use finder_core::LANGUAGES;

    #[test]
    fn auto_stems_each_word_by_its_script() {
        let mut auto = word_analyzer(AUTO, ANALYSIS);
        let mut russian = word_analyzer("russian", ANALYSIS);
        let mut english = word_analyzer("english", ANALYSIS);
        let text = "Настройки сервера: the running servers и отличные результаты";
        let want: Vec<String> = text
            .split_whitespace()
            .flat_map(|w| {
                let analyzer = if w.chars().any(is_cyrillic) {
                    &mut russian
                } else {
                    &mut english
                };
                terms(analyzer, w)
            })
            .collect();
        assert_eq!(terms(&mut auto, text), want);
        // A nominative and its genitive meet; English stop words and Russian ones both go.
        assert_eq!(terms(&mut auto, "сервер"), terms(&mut auto, "сервера"));
        assert_eq!(terms(&mut auto, "the и running"), vec!["run"]);
    }

    #[test]
    fn cjk_runs_become_bigrams_in_place() {
        let mut a = word_analyzer(AUTO, ANALYSIS);
        assert_eq!(
            terms(&mut a, "東京都に住む"),
            vec!["東京", "京都", "都に", "に住", "住む"]
        );
        assert_eq!(terms(&mut a, "한국어 검색"), vec!["한국", "국어", "검색"]);
        assert_eq!(
            terms(&mut a, "Rust語 v2の本"),
            vec!["rust", "語", "v2", "の本"]
        );
        // A run longer than the 64-byte word limit is split before the limit applies.
        let long = "日本語の文章には単語の間に空白がないので検索の前に分ける必要がある";
        assert_eq!(terms(&mut a, long).len(), long.chars().count() - 1);
        let mut stream = a.token_stream("ab 東京都");
        let mut seen = Vec::new();
        while stream.advance() {
            let t = stream.token();
            seen.push((t.text.clone(), t.offset_from, t.offset_to, t.position));
        }
        assert_eq!(
            seen,
            vec![
                ("ab".to_string(), 0, 2, 0),
                ("東京".to_string(), 3, 9, 1),
                ("京都".to_string(), 6, 12, 2)
            ]
        );
        // Indexes of analysis 2 read their words as they were written.
        let mut old = word_analyzer(AUTO, 2);
        assert_eq!(terms(&mut old, "東京都"), vec!["東京都"]);
    }

    #[test]
    fn remembered_stems_are_tantivys_stems() {
        let text =
            "Running runners ran; the RUNNING runner runs. Nationalization nationalize und der \
                    généralement générale Häuser häuslich отличный отличные çalışmalar \
                    running runners ran nationalization";
        // `auto` is english with Russian for Cyrillic words (`auto_stems_each_word_by_its_script`).
        for lang in LANGUAGES.iter().filter(|&&l| l != AUTO) {
            let mut memo = word_analyzer(lang, ANALYSIS);
            let mut unremembering = word_analyzer_unremembering(lang, ANALYSIS);
            let mut plain = tantivy_word_analyzer(lang);
            // The same analyzer twice: the second pass is read from its memo.
            for _ in 0..2 {
                let want = terms(&mut plain, text);
                assert_eq!(terms(&mut memo, text), want, "{lang}");
                assert_eq!(terms(&mut unremembering, text), want, "{lang}");
            }
        }
    }

    #[test]
    fn past_its_bound_the_memo_still_stems_every_word() {
        // More distinct words than the memo keeps, then words it kept and words it did not.
        let words: Vec<String> = (0..MEMO_MAX_WORDS + 500)
            .map(|i| format!("w{i}ing"))
            .collect();
        let mut memo = word_analyzer("english", ANALYSIS);
        let mut plain = tantivy_word_analyzer("english");
        let all = words.join(" ");
        assert_eq!(terms(&mut memo, &all), terms(&mut plain, &all));
        let again = format!("{} {}", words[3], words[MEMO_MAX_WORDS + 10]);
        assert_eq!(terms(&mut memo, &again), terms(&mut plain, &again));
    }

    proptest::proptest! {
        #[test]
        fn the_memo_stemmer_is_the_stemmer(
            lang in proptest::sample::select(
                LANGUAGES.iter().copied().filter(|&l| l != AUTO).collect::<Vec<_>>()
            ),
            texts in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        proptest::sample::select(vec![
                            "running", "runs", "généralement", "Häuser", "connection",
                            "connected", "отличные", "çalışmalar", "the", "and", "The", "und",
                            "der", "les", "и", "och", "og", "het", "que",
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
            let mut memo = word_analyzer(lang, ANALYSIS);
            let mut unremembering = word_analyzer_unremembering(lang, ANALYSIS);
            let mut plain = tantivy_word_analyzer(lang);
            for text in &texts {
                let want = terms(&mut plain, text);
                proptest::prop_assert_eq!(terms(&mut memo, text), want.clone());
                proptest::prop_assert_eq!(terms(&mut unremembering, text), want);
            }
        }
    }

    #[test]
    fn whole_words_keep_inner_punctuation() {
        let mut a = whole_word_analyzer();
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

    /// Every token of a stream: text, offsets, position.
    fn tokens(stream: &mut dyn TokenStream) -> Vec<(String, usize, usize, usize)> {
        let mut out = Vec::new();
        while stream.advance() {
            let t = stream.token();
            out.push((t.text.clone(), t.offset_from, t.offset_to, t.position));
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn whole_words_stream_as_they_were_listed(
            text in "[a-zA-Z0-9 .,()\\-«»é\t\n\r\u{b}\u{c}\u{1c}\u{85}\u{a0}\u{2003}\u{3000}]{0,40}|\\PC{0,20}",
        ) {
            // The list the tokenizer made up front before it streamed.
            let mut listed = Vec::new();
            for word in text.split_whitespace() {
                let trimmed = word.trim_matches(|c: char| !c.is_alphanumeric());
                if !trimmed.is_empty() {
                    let from = trimmed.as_ptr() as usize - text.as_ptr() as usize;
                    listed.push((trimmed.to_string(), from, from + trimmed.len(), listed.len()));
                }
            }
            let mut raw = RawWords;
            proptest::prop_assert_eq!(tokens(&mut raw.token_stream(&text)), listed);
        }
    }

    #[test]
    fn identifier_detection() {
        assert!(looks_like_identifier("error AUTH-041"));
        assert!(looks_like_identifier("v2 rollout"));
        assert!(looks_like_identifier("config.toml"));
        assert!(!looks_like_identifier("expired token, client!"));
    }
}
