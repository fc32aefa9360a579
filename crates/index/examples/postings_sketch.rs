//! What a postings writer of Finder's own would save against tantivy's, measured on the same
//! documents in one process (issue 7's indexing target; docs/BENCHMARKS.md, nineteenth pass).
//!
//! Every variant indexes each record's title and text twice, as Finder's writer does: stemmed
//! words with stop words dropped (the BM25 field), and whole whitespace words lowercased (the
//! field the trigram expansions read), with term frequencies and no positions, on tantivy's
//! indexing threads (one per core, 800 MB in all), plus a stored copy of the text.
//!
//! - `tantivy`: the two fields are tantivy text fields. The stemmed field's analyzer remembers
//!   each lowercased, folded word's stem (as Finder's `MemoStemmer` does), then tantivy's
//!   postings writer hashes every token's bytes into its term table.
//! - `own`: the two fields are neither indexed nor stored; a segment plugin (tantivy's
//!   `SegmentPlugin`, on the same indexing threads) splits the same words and finds each
//!   word, as written, in a memo that gives its term id (a word of up to 15 bytes is its own
//!   key), then appends the document to that term's list: one hash per token instead of two,
//!   no lowercasing or folding of a word it has seen.
//! - `sorted`: as `own`, but each document's term ids are sorted and counted, and its (term,
//!   document, frequency) triples appended to one list; the lists per term are made once, by
//!   a counting sort, when the segment is written (no write to a list per token).
//! - `none`: the same documents with no plugin: no postings at all, what the rest of the
//!   write (documents, the stored text, the commit) costs.
//!
//! `own` and `sorted` write their terms sorted, each with its delta-coded postings (no skip
//! data, no FST: less than a real format costs to write, a small part of the whole).
//! Checked: per field, `tantivy`, `own` and `sorted` count the same (document, term) pairs
//! and the same tokens.
//!
//! ```sh
//! cargo run --release -p finder-index --example postings_sketch -- \
//!     RECORDS.jsonl [LIMIT] [ROUNDS] [VARIANT,...]
//! ```
//! `RECORDS.jsonl`: one JSON object per line with `title` and `text` (a `finder-bench gen`
//! corpus's `corpus.jsonl`); read before the clock starts. Each variant indexes into a
//! temporary folder that goes when it is done.

use std::any::Any;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustc_hash::FxHashMap;
use tantivy::directory::TerminatingWrite;
use tantivy::index::SegmentComponent;
use tantivy::indexer::doc_id_mapping::DocIdMapping;
use tantivy::schema::document::ErasedDocument;
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer,
    Stemmer, StopWordFilter, TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
    WhitespaceTokenizer,
};
use tantivy::{
    DocId, Index, IndexWriter, PluginMergeContext, PluginWriter, PluginWriterContext, Segment,
    SegmentPlugin, TantivyDocument,
};

type Error = Box<dyn std::error::Error>;

const WRITER_MEMORY_BYTES: usize = 800_000_000;
const MAX_WORD_BYTES: usize = 64;
const EXTENSION: &str = "fpost";

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: postings_sketch RECORDS.jsonl [LIMIT] [ROUNDS] [VARIANT,...]")?;
    let limit: usize = args.get(1).map_or(Ok(usize::MAX), |s| s.parse())?;
    let rounds: usize = args.get(2).map_or(Ok(2), |s| s.parse())?;
    let variants: Vec<&str> = args
        .get(3)
        .map_or("tantivy,own,sorted,none", String::as_str)
        .split(',')
        .collect();
    if let Some(unknown) = variants
        .iter()
        .find(|v| !["tantivy", "own", "sorted", "none"].contains(v))
    {
        return Err(format!("unknown variant `{unknown}`: tantivy, own, sorted or none").into());
    }
    let texts = read_texts(path, limit)?;
    println!("{} records from {path}", texts.len());
    // What the first variant that indexes words counted, which every other must count too.
    let mut expected: Option<(&str, [Counts; 2])> = None;
    for round in 1..=rounds {
        for &variant in &variants {
            let scratch = tempfile::tempdir_in(std::env::temp_dir())?;
            let run = match variant {
                "tantivy" => index_tantivy(&texts, scratch.path())?,
                "own" => index_own(&texts, scratch.path(), Some(false))?,
                "sorted" => index_own(&texts, scratch.path(), Some(true))?,
                _ => index_own(&texts, scratch.path(), None)?,
            };
            println!(
                "round {round} {:7}: {:6.2} s wall, {:6.2} s CPU, {:7.0} records/s; stemmed field {} pairs / {} tokens, whole words {} pairs / {} tokens",
                variant,
                run.wall,
                run.cpu,
                texts.len() as f64 / run.wall,
                run.counts[0].pairs,
                run.counts[0].tokens,
                run.counts[1].pairs,
                run.counts[1].tokens,
            );
            if variant == "none" {
                continue;
            }
            match expected {
                None => expected = Some((variant, run.counts)),
                Some((first, counts)) if counts != run.counts => {
                    return Err(format!(
                        "`{variant}` counted {:?}, `{first}` {counts:?}: the variants do not index the same words",
                        run.counts
                    )
                    .into())
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

fn read_texts(path: &str, limit: usize) -> Result<Vec<String>, Error> {
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(default)]
        title: String,
        #[serde(default)]
        text: String,
    }
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut out = Vec::new();
    for (n, line) in file.lines().take(limit).enumerate() {
        let line: Line =
            serde_json::from_str(&line?).map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        out.push(format!("{}\n{}", line.title, line.text));
    }
    Ok(out)
}

/// What one variant took and counted.
struct Run {
    wall: f64,
    cpu: f64,
    counts: [Counts; 2],
}

/// Per field: (document, term) pairs and tokens indexed.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct Counts {
    pairs: u64,
    tokens: u64,
}

/// User and system CPU seconds of this process so far (Linux: `/proc/self/stat`; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The fields after the command's closing parenthesis; utime and stime are the 12th and
    // 13th of them, in clock ticks (100 a second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: f64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}

/// Adds every text to `index` (fields `text`, `raw`, `body`) and commits: the timed part.
fn write_all(index: &Index, texts: &[String]) -> Result<(f64, f64), Error> {
    let schema = index.schema();
    let [text, raw, body] = ["text", "raw", "body"].map(|name| schema.get_field(name).unwrap());
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let mut writer: IndexWriter = index.writer(WRITER_MEMORY_BYTES)?;
    writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
    for t in texts {
        let mut doc = TantivyDocument::default();
        doc.add_text(text, t);
        doc.add_text(raw, t);
        doc.add_text(body, t);
        writer.add_document(doc)?;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    Ok((wall.elapsed().as_secs_f64(), cpu_seconds() - cpu))
}

fn index_tantivy(texts: &[String], dir: &std::path::Path) -> Result<Run, Error> {
    let mut b = Schema::builder();
    let analysed = |tokenizer: &str| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer)
                .set_index_option(IndexRecordOption::WithFreqs),
        )
    };
    let text = b.add_text_field("text", analysed("words"));
    let raw = b.add_text_field("raw", analysed("whole"));
    b.add_text_field("body", STORED);
    let index = Index::create_in_dir(dir, b.build())?;
    index.tokenizers().register(
        "words",
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_WORD_BYTES))
            .filter(LowerCaser)
            .filter(AsciiFoldingFilter)
            .filter(MemoStem(Words::new()))
            .build(),
    );
    index.tokenizers().register(
        "whole",
        TextAnalyzer::builder(WhitespaceTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_WORD_BYTES))
            .filter(LowerCaser)
            .build(),
    );
    let (wall, cpu) = write_all(&index, texts)?;
    let searcher = index.reader()?.searcher();
    let mut counts = [Counts::default(); 2];
    for segment in searcher.segment_readers() {
        for (i, field) in [text, raw].into_iter().enumerate() {
            let inverted = segment.inverted_index(field)?;
            counts[i].tokens += inverted.total_num_tokens();
            let mut terms = inverted.terms().stream()?;
            while terms.advance() {
                counts[i].pairs += u64::from(terms.value().doc_freq);
            }
        }
    }
    Ok(Run { wall, cpu, counts })
}

/// The `own` variant (`Some(false)`), the `sorted` one (`Some(true)`), or with `None` the
/// `none` one: the same documents with no postings at all (what the rest of the write costs).
fn index_own(texts: &[String], dir: &std::path::Path, own: Option<bool>) -> Result<Run, Error> {
    let mut b = Schema::builder();
    b.add_text_field("text", TextOptions::default());
    b.add_text_field("raw", TextOptions::default());
    b.add_text_field("body", STORED);
    let plugin = Arc::new(OwnPostings {
        sorted: own == Some(true),
        counts: Arc::default(),
    });
    let mut builder = Index::builder().schema(b.build());
    if own.is_some() {
        builder = builder.register_plugin(plugin.clone());
    }
    let index = builder.create_in_dir(dir)?;
    let (wall, cpu) = write_all(&index, texts)?;
    let counts = *plugin.counts.lock().unwrap();
    Ok(Run { wall, cpu, counts })
}

/// A word's stem, or that it is a stop word, remembered per analyzer.
struct Words {
    stop: TextAnalyzer,
    stemmer: TextAnalyzer,
    memo: FxHashMap<Box<str>, Option<Box<str>>>,
}

impl Words {
    fn new() -> Words {
        Words {
            stop: TextAnalyzer::builder(RawTokenizer::default())
                .filter(StopWordFilter::new(Language::English).unwrap())
                .build(),
            stemmer: TextAnalyzer::builder(RawTokenizer::default())
                .filter(Stemmer::new(Language::English))
                .build(),
            memo: FxHashMap::default(),
        }
    }

    /// Puts the stem of a lowercased, folded word in its place; false for a stop word.
    fn stem_in_place(&mut self, word: &mut String) -> bool {
        if let Some(known) = self.memo.get(word.as_str()) {
            let Some(stem) = known else {
                return false;
            };
            word.clear();
            word.push_str(stem);
            return true;
        }
        let stem: Option<Box<str>> = self.stop.token_stream(word).advance().then(|| {
            let mut stream = self.stemmer.token_stream(word);
            stream.advance();
            stream.token().text.as_str().into()
        });
        self.memo.insert(word.as_str().into(), stem.clone());
        match stem {
            Some(stem) => {
                word.clear();
                word.push_str(&stem);
                true
            }
            None => false,
        }
    }
}

impl Clone for Words {
    fn clone(&self) -> Words {
        Words::new()
    }
}

#[derive(Clone)]
struct MemoStem(Words);

impl TokenFilter for MemoStem {
    type Tokenizer<T: Tokenizer> = MemoStemFilter<T>;

    fn transform<T: Tokenizer>(self, inner: T) -> MemoStemFilter<T> {
        MemoStemFilter {
            words: self.0,
            inner,
        }
    }
}

#[derive(Clone)]
struct MemoStemFilter<T> {
    words: Words,
    inner: T,
}

impl<T: Tokenizer> Tokenizer for MemoStemFilter<T> {
    type TokenStream<'a> = MemoStemStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        MemoStemStream {
            tail: self.inner.token_stream(text),
            words: &mut self.words,
        }
    }
}

struct MemoStemStream<'a, S> {
    tail: S,
    words: &'a mut Words,
}

impl<S: TokenStream> TokenStream for MemoStemStream<'_, S> {
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

/// The `own` and `sorted` variants' segment plugin: its writers add what they counted here.
struct OwnPostings {
    sorted: bool,
    counts: Arc<Mutex<[Counts; 2]>>,
}

impl SegmentPlugin for OwnPostings {
    fn extensions(&self) -> &[&str] {
        &[EXTENSION]
    }

    fn create_writer(&self, ctx: &PluginWriterContext) -> tantivy::Result<Box<dyn PluginWriter>> {
        let schema = ctx.segment.schema();
        Ok(Box::new(OwnWriter {
            text: schema.get_field("text")?,
            raw: schema.get_field("raw")?,
            fields: [(); 2].map(|()| FieldPostings {
                sorted: self.sorted,
                ..FieldPostings::default()
            }),
            words: Words::new(),
            lower: String::new(),
            bytes: 0,
            counts: self.counts.clone(),
        }))
    }

    fn merge(&self, _ctx: PluginMergeContext) -> tantivy::Result<()> {
        Err(tantivy::TantivyError::InvalidArgument(
            "the sketch writes with NoMergePolicy and never merges".into(),
        ))
    }
}

/// Words → term ids; a word of at most 15 bytes is its own key (its bytes and its length in
/// a `u128`: one probe, no key read elsewhere), a longer one a boxed string.
#[derive(Default)]
struct Memo {
    short: FxHashMap<u128, u32>,
    long: FxHashMap<Box<str>, u32>,
}

impl Memo {
    fn key(word: &str) -> Option<u128> {
        let bytes = word.as_bytes();
        (bytes.len() < 16).then(|| {
            let mut key = [0u8; 16];
            key[..bytes.len()].copy_from_slice(bytes);
            key[15] = bytes.len() as u8;
            u128::from_le_bytes(key)
        })
    }

    fn get(&self, word: &str) -> Option<&u32> {
        match Memo::key(word) {
            Some(key) => self.short.get(&key),
            None => self.long.get(word),
        }
    }

    fn insert(&mut self, word: &str, id: u32) {
        match Memo::key(word) {
            Some(key) => self.short.insert(key, id),
            None => self.long.insert(word.into(), id),
        };
    }
}

/// One field's terms and postings in a segment being written.
#[derive(Default)]
struct FieldPostings {
    /// A word as written → its term id, or `u32::MAX` for a word that is no term.
    memo: Memo,
    /// A term's text → its id (words that analyse to the same term share it).
    ids: FxHashMap<Box<str>, u32>,
    terms: Vec<Box<str>>,
    /// Inverted as the tokens come (`own`: a list per term, appended to) or at the end
    /// (`sorted`: each document's term ids sorted and counted, appended to one list of
    /// (term, document, frequency) in document order, grouped by term when written).
    sorted: bool,
    /// `own`: per term, the documents holding it and how often, in document order.
    lists: Vec<Vec<(DocId, u32)>>,
    /// `sorted`: the current document's term ids, then every document's (term, doc, tf).
    doc_terms: Vec<u32>,
    entries: Vec<(u32, DocId, u32)>,
    /// Tokens per document (what BM25's length normalisation reads).
    lengths: Vec<u32>,
}

impl FieldPostings {
    fn id_of(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.ids.get(term) {
            return id;
        }
        let id = self.terms.len() as u32;
        self.ids.insert(term.into(), id);
        self.terms.push(term.into());
        if !self.sorted {
            self.lists.push(Vec::new());
        }
        id
    }

    /// Adds one occurrence of term `id` in `doc`; returns the bytes it added.
    fn add(&mut self, id: u32, doc: DocId) -> usize {
        if self.sorted {
            self.doc_terms.push(id);
            return 0;
        }
        let list = &mut self.lists[id as usize];
        match list.last_mut() {
            Some((last, tf)) if *last == doc => {
                *tf += 1;
                0
            }
            _ => {
                list.push((doc, 1));
                8
            }
        }
    }

    /// Ends document `doc` of `length` tokens; returns the bytes it added.
    fn end(&mut self, doc: DocId, length: u32) -> usize {
        self.lengths.push(length);
        if !self.sorted {
            return 4;
        }
        self.doc_terms.sort_unstable();
        let before = self.entries.len();
        for run in self.doc_terms.chunk_by(|a, b| a == b) {
            self.entries.push((run[0], doc, run.len() as u32));
        }
        self.doc_terms.clear();
        4 + 12 * (self.entries.len() - before)
    }

    /// Every term's postings: where each starts in the returned list (term ids in order).
    fn grouped(&self) -> (Vec<(DocId, u32)>, Vec<usize>) {
        if !self.sorted {
            let mut starts = Vec::with_capacity(self.lists.len() + 1);
            let mut all = Vec::new();
            for list in &self.lists {
                starts.push(all.len());
                all.extend_from_slice(list);
            }
            starts.push(all.len());
            return (all, starts);
        }
        let mut starts = vec![0usize; self.terms.len() + 1];
        for &(term, _, _) in &self.entries {
            starts[term as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut at = starts.clone();
        let mut all = vec![(0, 0); self.entries.len()];
        for &(term, doc, tf) in &self.entries {
            all[at[term as usize]] = (doc, tf);
            at[term as usize] += 1;
        }
        (all, starts)
    }
}

struct OwnWriter {
    text: Field,
    raw: Field,
    fields: [FieldPostings; 2],
    words: Words,
    lower: String,
    bytes: usize,
    counts: Arc<Mutex<[Counts; 2]>>,
}

impl OwnWriter {
    /// The stemmed field: the words tantivy's `SimpleTokenizer` splits (runs of alphanumeric
    /// characters), borrowed from the text, then the memo of words as written.
    fn add_words(&mut self, doc: DocId, text: &str) {
        let field = &mut self.fields[0];
        let mut length = 0;
        for word in alphanumeric_runs(text) {
            if word.len() > MAX_WORD_BYTES {
                continue;
            }
            let id = match field.memo.get(word) {
                Some(&id) => id,
                None => {
                    // A word not seen: lowercased and folded as the tantivy variant does.
                    let mut folded = TextAnalyzer::builder(RawTokenizer::default())
                        .filter(LowerCaser)
                        .filter(AsciiFoldingFilter)
                        .build();
                    let mut s = folded.token_stream(word);
                    s.advance();
                    let mut stem = s.token().text.clone();
                    let id = if self.words.stem_in_place(&mut stem) {
                        field.id_of(&stem)
                    } else {
                        u32::MAX
                    };
                    field.memo.insert(word, id);
                    id
                }
            };
            if id != u32::MAX {
                self.bytes += field.add(id, doc);
                length += 1;
            }
        }
        self.bytes += field.end(doc, length);
    }

    /// The whole-word field: whitespace words, lowercased once per distinct word.
    fn add_whole_words(&mut self, doc: DocId, text: &str) {
        let field = &mut self.fields[1];
        let mut length = 0;
        for word in text.split_ascii_whitespace() {
            let id = match field.memo.get(word) {
                Some(&id) => id,
                None => {
                    self.lower.clear();
                    self.lower.push_str(word);
                    self.lower.make_ascii_lowercase();
                    let lower = std::mem::take(&mut self.lower);
                    // Lowercased as tantivy's `LowerCaser` does beyond ASCII.
                    let lower = if lower.is_ascii() {
                        lower
                    } else {
                        word.to_lowercase()
                    };
                    let id = if lower.len() > MAX_WORD_BYTES {
                        u32::MAX
                    } else {
                        field.id_of(&lower)
                    };
                    field.memo.insert(word, id);
                    id
                }
            };
            if id != u32::MAX {
                self.bytes += field.add(id, doc);
                length += 1;
            }
        }
        self.bytes += field.end(doc, length);
    }
}

impl PluginWriter for OwnWriter {
    fn add_document(
        &mut self,
        doc_id: DocId,
        doc: &dyn ErasedDocument,
        _schema: &Schema,
    ) -> tantivy::Result<()> {
        let doc = doc
            .as_any()
            .downcast_ref::<TantivyDocument>()
            .expect("the sketch adds TantivyDocuments");
        let text = doc
            .get_first(self.text)
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let raw = doc
            .get_first(self.raw)
            .and_then(|v| v.as_str())
            .unwrap_or("");
        self.add_words(doc_id, text);
        self.add_whole_words(doc_id, raw);
        Ok(())
    }

    fn serialize(
        self: Box<Self>,
        segment: &Segment,
        doc_id_map: Option<&DocIdMapping>,
    ) -> tantivy::Result<()> {
        assert!(doc_id_map.is_none(), "the index is not sorted");
        let mut out = segment.open_write(SegmentComponent::Custom(EXTENSION.into()))?;
        let mut counts = [Counts::default(); 2];
        let mut buffer = Vec::new();
        for (field, count) in self.fields.iter().zip(&mut counts) {
            let mut order: Vec<u32> = (0..field.terms.len() as u32).collect();
            order.sort_unstable_by(|&a, &b| field.terms[a as usize].cmp(&field.terms[b as usize]));
            write_vint(&mut buffer, order.len() as u64);
            let (all, starts) = field.grouped();
            for id in order {
                let term = field.terms[id as usize].as_bytes();
                let list = &all[starts[id as usize]..starts[id as usize + 1]];
                write_vint(&mut buffer, term.len() as u64);
                buffer.extend_from_slice(term);
                write_vint(&mut buffer, list.len() as u64);
                let mut previous = 0;
                for &(doc, tf) in list {
                    write_vint(&mut buffer, u64::from(doc - previous));
                    write_vint(&mut buffer, u64::from(tf));
                    previous = doc;
                }
                count.pairs += list.len() as u64;
                if buffer.len() > 1 << 20 {
                    out.write_all(&buffer)?;
                    buffer.clear();
                }
            }
            for &length in &field.lengths {
                buffer.push(length.min(255) as u8);
                count.tokens += u64::from(length);
            }
        }
        out.write_all(&buffer)?;
        out.terminate()?;
        let mut total = self.counts.lock().unwrap();
        for (total, count) in total.iter_mut().zip(counts) {
            total.pairs += count.pairs;
            total.tokens += count.tokens;
        }
        Ok(())
    }

    fn mem_usage(&self) -> usize {
        self.bytes
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The runs of alphanumeric characters of `text`, as tantivy's `SimpleTokenizer` splits them,
/// borrowed (ASCII bytes tested as bytes).
fn alphanumeric_runs(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        let word_char = |i: usize| -> (bool, usize) {
            let b = bytes[i];
            if b.is_ascii() {
                (b.is_ascii_alphanumeric(), 1)
            } else {
                let c = text[i..].chars().next().expect("a char boundary");
                (c.is_alphanumeric(), c.len_utf8())
            }
        };
        while at < bytes.len() {
            let (is_word, len) = word_char(at);
            if is_word {
                break;
            }
            at += len;
        }
        if at == bytes.len() {
            return None;
        }
        let start = at;
        while at < bytes.len() {
            let (is_word, len) = word_char(at);
            if !is_word {
                break;
            }
            at += len;
        }
        Some(&text[start..at])
    })
}

fn write_vint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
