//! Finder's own postings for the two analysed fields (the stemmed words of the BM25 list and
//! the whole words the trigram expansions read): written by a tantivy segment plugin on
//! tantivy's indexing threads, merged with their segments, read by the lexical list
//! ([`crate::lexical`]) and the expansions' dictionary ([`crate::expand::TermGrams`]).
//!
//! tantivy's postings writer hashes every token's bytes into its term table and appends the
//! document to that term's recorder: a random memory access per token, into a structure per
//! term. This writer finds each word (trimmed of its leading and trailing punctuation) in a
//! memo that gives its term id (the analysis runs once per distinct word of a segment), and
//! appends each document's (term, frequency) pairs to one list; the per-term lists are made
//! by one counting sort when the segment is written. Measured on the same documents, the two
//! fields' postings took 0.49× tantivy's time at 1M records (docs/perf/own-postings.md). When a document's two fields hold the same text (as Finder's writer makes them), one
//! probe per whitespace-separated word gives its terms in both ([`BothFields`]): the 1M
//! lexical build took 0.80× the time of two probes (docs/perf/own-postings.md).
//!
//! The terms are exactly the analyzers' ([`crate::analyzer`]): every filter of the word
//! analyzer acts on one token alone, so a word split as tantivy's `SimpleTokenizer` splits
//! it (runs of alphanumeric characters) and analysed alone gives the term it gives in its
//! text; the whole-word analyzer takes whitespace-separated words one at a time. The field
//! norms are tantivy's one-byte length codes and the token totals are counted as tantivy
//! counts them, so BM25 scores are the ones tantivy's postings gave.
//!
//! Layout of a segment's `<segment id>.fpost` (little-endian), one section per field, then a
//! directory:
//!
//! - a section: every term's postings, in term order; the field norms (a byte per document);
//!   the terms' bytes end to end, in order; the term table, 16 bytes a term (where its bytes
//!   end, its document frequency (u32), where its postings start (u64, from the file's start));
//! - a term's postings: blocks of [`BLOCK`] documents, each a byte of bit width for the
//!   document deltas and one for the frequencies less one, then both packed ([`BitPacker4x`]);
//!   the last `doc_freq % BLOCK` documents as varint deltas and varint frequencies;
//! - the directory: per field, its field id (u32), term count (u32), token total (u64), and
//!   where its postings, norms, term bytes and term table start (u64 each); then the field
//!   count (u32) and [`MAGIC`].

use std::any::Any;
use std::io::{self, Write};
use std::sync::Arc;

use bitpacking::{BitPacker, BitPacker4x};
use finder_core::FastMap;
use tantivy::directory::{OwnedBytes, TerminatingWrite};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::SegmentComponent;
use tantivy::indexer::doc_id_mapping::{DocIdMapping, MappingType};
use tantivy::schema::document::ErasedDocument;
use tantivy::schema::{Field, Schema, Value};
use tantivy::tokenizer::{TextAnalyzer, TokenStream};
use tantivy::{
    DocId, PluginMergeContext, PluginWriter, PluginWriterContext, Segment, SegmentPlugin,
    SegmentReader, TantivyDocument, TantivyError,
};

use crate::analyzer::{raw_analyzer, word_analyzer_unremembering, WholeWords};
use crate::bytes::{u32_at, u64_at};
use crate::files::POSTINGS_EXTENSION;
use crate::slots::{short_key, SlotKey, SlotTable};

const MAGIC: &[u8; 8] = b"FNDPOST1";

/// Documents per packed block.
const BLOCK: usize = BitPacker4x::BLOCK_LEN;

/// Bytes of a field's directory entry.
const DIRECTORY_ENTRY: usize = 4 + 4 + 8 + 4 * 8;

/// The schema's names of the two fields this plugin indexes.
const TEXT: &str = "text";
const RAW: &str = "raw";

/// A word that gives no term (a stop word, a word too long).
const NO_TERM: u32 = u32::MAX;

/// The plugin: writes the `text` and `raw` fields' postings of every segment tantivy writes or
/// merges, with the word analysis of `language` at version `analysis`.
pub(crate) struct WordsPlugin {
    pub language: String,
    pub analysis: u32,
}

impl WordsPlugin {
    pub(crate) fn new(language: &str, analysis: u32) -> Arc<WordsPlugin> {
        Arc::new(WordsPlugin {
            language: language.to_string(),
            analysis,
        })
    }
}

/// Whether `index` was made with Finder's postings (tantivy records a plugin's extensions at
/// the index's creation), not tantivy's (an index made before them).
pub(crate) fn made_with(index: &tantivy::Index) -> tantivy::Result<bool> {
    Ok(index
        .load_metas()?
        .persisted_custom_extensions
        .iter()
        .any(|e| e == POSTINGS_EXTENSION))
}

/// The two fields a schema holds for the plugin, each with its name (the whole-word field
/// is absent from the oldest schemas).
fn fields_of(schema: &Schema) -> Vec<(&'static str, Field)> {
    [TEXT, RAW]
        .into_iter()
        .filter_map(|name| Some((name, schema.get_field(name).ok()?)))
        .collect()
}

fn corrupt(what: impl std::fmt::Display) -> TantivyError {
    TantivyError::DataCorruption(tantivy::error::DataCorruption::comment_only(format!(
        "{POSTINGS_EXTENSION} file: {what}"
    )))
}

impl SegmentPlugin for WordsPlugin {
    fn extensions(&self) -> &[&str] {
        &[POSTINGS_EXTENSION]
    }

    fn create_writer(&self, ctx: &PluginWriterContext) -> tantivy::Result<Box<dyn PluginWriter>> {
        let schema = ctx.segment.schema();
        let fields = fields_of(&schema)
            .into_iter()
            .map(|(name, field)| {
                let words = name == TEXT;
                let analyzer = if words {
                    word_analyzer_unremembering(&self.language, self.analysis)
                } else {
                    raw_analyzer()
                };
                FieldWriter::new(field, analyzer, words)
            })
            .collect();
        Ok(Box::new(WordsWriter {
            fields,
            both: BothFields::default(),
            docs: 0,
        }))
    }

    fn merge(&self, ctx: PluginMergeContext) -> tantivy::Result<()> {
        if ctx.doc_id_mapping.mapping_type() == MappingType::Shuffled {
            return Err(TantivyError::InvalidArgument(
                "Finder's postings cannot merge a sorted index".into(),
            ));
        }
        // The merged segment stacks the source segments in order, their deleted documents
        // left out (tantivy's mapping for an index without a sort order).
        let mut new_ids: Vec<Vec<DocId>> = Vec::with_capacity(ctx.readers.len());
        let mut next: DocId = 0;
        for reader in ctx.readers {
            let mut ids = vec![DocId::MAX; reader.max_doc() as usize];
            for doc in reader.doc_ids_alive() {
                ids[doc as usize] = next;
                next += 1;
            }
            new_ids.push(ids);
        }
        let files = ctx
            .readers
            .iter()
            .map(|reader| {
                WordsFile::open(reader)?.ok_or_else(|| {
                    corrupt(format!(
                        "segment {} has none",
                        reader.segment_id().uuid_string()
                    ))
                })
            })
            .collect::<tantivy::Result<Vec<WordsFile>>>()?;
        let write = ctx
            .target_segment
            .open_write(SegmentComponent::Custom(POSTINGS_EXTENSION.into()))?;
        let mut out = Counting::new(write);
        let mut directory = Vec::new();
        let has_deletes = ctx.readers.iter().any(SegmentReader::has_deletes);
        for (_, field) in fields_of(ctx.schema) {
            let sections: Vec<Option<FieldWords<'_>>> =
                files.iter().map(|file| file.field(field)).collect();
            let mut norms = vec![0u8; next as usize];
            let mut total_tokens = 0u64;
            for ((section, ids), reader) in sections.iter().zip(&new_ids).zip(ctx.readers) {
                let Some(section) = section else { continue };
                for (old, &new) in ids.iter().enumerate() {
                    if new != DocId::MAX {
                        norms[new as usize] = section.norm_id(old as DocId);
                    }
                }
                // As tantivy counts a merged field's tokens: the sum of the segments' totals
                // when nothing was deleted, else the live documents' coded lengths.
                if has_deletes {
                    total_tokens += reader
                        .doc_ids_alive()
                        .map(|doc| {
                            u64::from(FieldNormReader::id_to_fieldnorm(section.norm_id(doc)))
                        })
                        .sum::<u64>();
                } else {
                    total_tokens += section.total_tokens();
                }
            }
            // Every segment's terms, sorted; equal terms next to each other, in segment order.
            let mut all: Vec<(&[u8], usize, TermEntry)> = Vec::new();
            for (i, section) in sections.iter().enumerate() {
                if let Some(section) = section {
                    for t in 0..section.term_count() {
                        all.push((section.term_bytes(t), i, section.entry(t)));
                    }
                }
            }
            all.sort_unstable_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
            let mut section = SectionWriter::new(field, &mut out);
            let (mut docs, mut tfs) = (Vec::new(), Vec::new());
            for group in all.chunk_by(|a, b| a.0 == b.0) {
                docs.clear();
                tfs.clear();
                for &(_, i, entry) in group {
                    let words = sections[i].as_ref().expect("listed from a section");
                    let mut blocks = words.postings(entry);
                    while !blocks.docs().is_empty() {
                        for (&doc, &tf) in blocks.docs().iter().zip(blocks.freqs()) {
                            let new = new_ids[i][doc as usize];
                            if new != DocId::MAX {
                                docs.push(new);
                                tfs.push(tf);
                            }
                        }
                        blocks.advance();
                    }
                }
                if !docs.is_empty() {
                    section.term(group[0].0, &docs, &tfs)?;
                }
            }
            directory.push(section.finish(&norms, total_tokens)?);
        }
        finish_file(out, &directory)?;
        Ok(())
    }
}

/// Words → a value (a word's term id, a word's ids in both fields, or a term's id): a word of
/// 1 to 15 bytes is its own key ([`SlotTable`]: one probe, one cache line, fetched ahead where
/// the next words are known), a longer one a boxed string.
struct Memo<V> {
    short: SlotTable<V>,
    long: FastMap<Box<str>, V>,
}

impl<V: Copy + Default> Default for Memo<V> {
    fn default() -> Memo<V> {
        Memo {
            short: SlotTable::default(),
            long: FastMap::default(),
        }
    }
}

impl<V: Copy + Default> Memo<V> {
    fn get(&self, word: &str) -> Option<V> {
        self.get_keyed(word, short_key(word))
    }

    /// [`Memo::get`] with the word's key already made.
    fn get_keyed(&self, word: &str, key: Option<SlotKey>) -> Option<V> {
        match key {
            Some(key) => self.short.get(key),
            None => self.long.get(word).copied(),
        }
    }

    fn insert(&mut self, word: &str, value: V) {
        self.insert_keyed(word, short_key(word), value);
    }

    /// [`Memo::insert`] with the word's key already made.
    fn insert_keyed(&mut self, word: &str, key: Option<SlotKey>, value: V) {
        match key {
            Some(key) => self.short.insert(key, value),
            None => {
                self.long.insert(word.into(), value);
            }
        }
    }

    fn bytes(&self) -> usize {
        self.short.bytes() + self.long.capacity() * (size_of::<(Box<str>, V)>() + 1 + 8)
    }
}

/// A segment's terms by id, their bytes in one buffer: one growing allocation for them all,
/// where each new term had taken two boxed copies (one in the list, one as its map's key).
#[derive(Default)]
struct Terms {
    bytes: String,
    /// Where each term ends in `bytes` (it starts where the one before it ends).
    ends: Vec<usize>,
}

impl Terms {
    /// Adds `term`; its id.
    fn push(&mut self, term: &str) -> u32 {
        self.bytes.push_str(term);
        self.ends.push(self.bytes.len());
        self.ends.len() as u32 - 1
    }

    fn get(&self, id: u32) -> &str {
        let id = id as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.bytes[start..self.ends[id]]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn bytes(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * size_of::<usize>()
    }
}

/// One field's terms and postings in a segment being written.
struct FieldWriter {
    field: Field,
    analyzer: TextAnalyzer,
    /// Words split as tantivy's `SimpleTokenizer` splits them (the word analyzer), or at
    /// whitespace (the whole-word analyzer).
    alphanumeric: bool,
    /// A word (an alphanumeric run, or a trimmed whole word) → its term id, or [`NO_TERM`].
    memo: Memo<u32>,
    /// A term → its id, and the terms by id.
    ids: Memo<u32>,
    terms: Terms,
    /// The current document's term ids.
    doc_terms: Vec<u32>,
    /// Every document's (term, frequency) pairs, each term once per document in the order
    /// of its first token, documents in order.
    pairs: Vec<(u32, u32)>,
    /// Per term id: the last document that held it (its number plus one; 0 for none yet) and
    /// its pair's index in `pairs` there. A document's tokens are counted through it, where a
    /// sort of each document's ids was a tenth of the indexing thread on SciFact.
    last_pair: Vec<(u32, u32)>,
    /// Where each document's pairs end in `pairs`.
    doc_ends: Vec<u32>,
    /// Each document's length code.
    norms: Vec<u8>,
    total_tokens: u64,
}

impl FieldWriter {
    fn new(field: Field, analyzer: TextAnalyzer, alphanumeric: bool) -> FieldWriter {
        FieldWriter {
            field,
            analyzer,
            alphanumeric,
            memo: Memo::default(),
            ids: Memo::default(),
            terms: Terms::default(),
            doc_terms: Vec::new(),
            pairs: Vec::new(),
            last_pair: Vec::new(),
            doc_ends: Vec::new(),
            norms: Vec::new(),
            total_tokens: 0,
        }
    }

    /// The term id of `word`, analysed alone the first time it is seen.
    fn id_of(&mut self, word: &str) -> u32 {
        if let Some(id) = self.memo.get(word) {
            return id;
        }
        let id = self.analyse(word);
        self.memo.insert(word, id);
        id
    }

    /// The term id of `word` analysed alone (the term added if new), or [`NO_TERM`].
    fn analyse(&mut self, word: &str) -> u32 {
        let mut stream = self.analyzer.token_stream(word);
        if !stream.advance() {
            return NO_TERM;
        }
        let term = stream.token().text.as_str();
        let key = short_key(term);
        match self.ids.get_keyed(term, key) {
            Some(id) => id,
            None => {
                let id = self.terms.push(term);
                self.ids.insert_keyed(term, key, id);
                id
            }
        }
    }

    /// The term ids of `words` to the current document's.
    fn push_words<'t>(&mut self, words: impl Iterator<Item = &'t str>) {
        for word in words {
            let id = self.id_of(word);
            if id != NO_TERM {
                self.doc_terms.push(id);
            }
        }
    }

    /// Indexes `texts` (the field's values in one document) as the document after the last.
    fn add<'t>(&mut self, texts: impl Iterator<Item = &'t str>) {
        self.doc_terms.clear();
        for text in texts {
            if self.alphanumeric {
                self.push_words(alphanumeric_runs(text));
            } else {
                // Trimmed first, as the analyzer trims them: one memo entry per trimmed word.
                self.push_words(WholeWords::new(text));
            }
        }
        self.end_document();
    }

    /// Ends the document whose term ids are in `doc_terms`: its length code and its
    /// (term, frequency) pairs.
    fn end_document(&mut self) {
        let tokens = self.doc_terms.len() as u32;
        self.total_tokens += u64::from(tokens);
        self.norms.push(FieldNormReader::fieldnorm_to_id(tokens));
        // Numbered from one: a zero in `last_pair` is a term no document held yet.
        let doc = self.doc_ends.len() as u32 + 1;
        if self.last_pair.len() < self.terms.len() {
            self.last_pair.resize(self.terms.len(), (0, 0));
        }
        for &id in &self.doc_terms {
            let last = &mut self.last_pair[id as usize];
            if last.0 == doc {
                self.pairs[last.1 as usize].1 += 1;
            } else {
                // Below 2³² pairs: their bytes count in the writer's memory (see `LISTED`).
                *last = (doc, self.pairs.len() as u32);
                self.pairs.push((id, 1));
            }
        }
        self.doc_ends.push(self.pairs.len() as u32);
    }

    fn mem_usage(&self) -> usize {
        self.pairs.capacity() * 8
            + self.last_pair.capacity() * 8
            + self.doc_ends.capacity() * 4
            + self.norms.capacity()
            + self.memo.bytes()
            + self.ids.bytes()
            + self.terms.bytes()
    }

    /// Writes the field's section: the pairs grouped by term (a counting sort), the terms in
    /// byte order.
    fn write<W: Write>(self, out: &mut Counting<W>) -> io::Result<DirectoryEntry> {
        let FieldWriter {
            field,
            terms,
            pairs,
            doc_ends,
            norms,
            total_tokens,
            ..
        } = self;
        let mut starts = vec![0usize; terms.len() + 1];
        for &(term, _) in &pairs {
            starts[term as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut at = starts.clone();
        let mut docs = vec![0 as DocId; pairs.len()];
        let mut tfs = vec![0u32; pairs.len()];
        let mut begin = 0usize;
        for (doc, &end) in doc_ends.iter().enumerate() {
            for &(term, tf) in &pairs[begin..end as usize] {
                let slot = &mut at[term as usize];
                docs[*slot] = doc as DocId;
                tfs[*slot] = tf;
                *slot += 1;
            }
            begin = end as usize;
        }
        drop(pairs);
        // The terms in byte order, compared by their first eight bytes where those differ:
        // most comparisons then read no term's bytes (the sort was a tenth of the write).
        let mut order: Vec<(u64, u32)> = (0..terms.len() as u32)
            .map(|id| (prefix_key(terms.get(id)), id))
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| terms.get(a.1).cmp(terms.get(b.1)))
        });
        let mut section = SectionWriter::new(field, out);
        for (_, id) in order {
            let range = starts[id as usize]..starts[id as usize + 1];
            section.term(terms.get(id).as_bytes(), &docs[range.clone()], &tfs[range])?;
        }
        section.finish(&norms, total_tokens)
    }
}

/// A term's first eight bytes as a big-endian number (zeros past its end): keys in the order
/// of the terms' bytes, two terms with the same key compared whole.
fn prefix_key(term: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let n = term.len().min(8);
    bytes[..n].copy_from_slice(&term.as_bytes()[..n]);
    u64::from_be_bytes(bytes)
}

/// The runs of alphanumeric characters of `text`, as tantivy's `SimpleTokenizer` splits it,
/// borrowed (ASCII bytes tested as bytes).
fn alphanumeric_runs(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let word_char = move |i: usize| -> (bool, usize) {
        let b = bytes[i];
        if b.is_ascii() {
            (b.is_ascii_alphanumeric(), 1)
        } else {
            let c = text[i..].chars().next().expect("at a char boundary");
            (c.is_alphanumeric(), c.len_utf8())
        }
    };
    std::iter::from_fn(move || {
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

/// The writer of one segment: each document's field values to each field's writer.
struct WordsWriter {
    fields: Vec<FieldWriter>,
    /// For documents whose two fields hold the same text.
    both: BothFields,
    docs: u32,
}

impl WordsWriter {
    /// Whether the document's word field and whole-word field hold the same values (as
    /// Finder's writer makes them when the trigram expansions are on).
    fn same_text(&self, doc: &TantivyDocument) -> bool {
        let values = |field: &FieldWriter| doc.get_all(field.field).filter_map(|v| v.as_str());
        match &self.fields[..] {
            [words, raw] if words.alphanumeric && !raw.alphanumeric => {
                values(words).eq(values(raw))
            }
            _ => false,
        }
    }
}

/// A whitespace-separated word's terms in both fields, found with one probe where each field
/// would make its own: the word field's words are the alphanumeric runs of each
/// whitespace-separated word (whitespace is never alphanumeric), so a word gives the same
/// terms wherever it stands, and the same as its [`trim_word`](crate::analyzer::trim_word).
#[derive(Default)]
struct BothFields {
    /// A trimmed word → its whole-word term id (or [`NO_TERM`]) and its word-field term
    /// ids: [`NO_TERM`] for none, an id below [`LISTED`] for one, else `LISTED + i` with
    /// `lists[i]` their count and the ids after it.
    memo: Memo<(u32, u32)>,
    lists: Vec<u32>,
    /// A text's whitespace-separated words (their byte ranges) and keys, made before any is
    /// looked up so that each probe's slot can be fetched [`AHEAD`] words early.
    words: Vec<(usize, usize, Option<SlotKey>)>,
}

/// Marks a word's word-field ids as kept in [`BothFields::lists`]. The lists stay far below
/// 2³¹ entries: their bytes count in the writer's memory, which tantivy keeps under 4 GB.
const LISTED: u32 = 1 << 31;

/// How many words ahead of its probe a word's memo slot is fetched.
const AHEAD: usize = 8;

impl BothFields {
    /// Indexes `texts` (one document's values of both fields) in `words` and `raw`.
    fn add<'t>(
        &mut self,
        words: &mut FieldWriter,
        raw: &mut FieldWriter,
        texts: impl Iterator<Item = &'t str>,
    ) {
        words.doc_terms.clear();
        raw.doc_terms.clear();
        for text in texts {
            self.words.clear();
            // Each word trimmed as the whole-word analyzer trims it: its terms in both fields
            // are the trimmed word's, and `cells,` `(cells` `cells.` share one memo entry (a
            // third fewer words analysed in SciFact's abstracts).
            for word in WholeWords::new(text) {
                let start = word.as_ptr() as usize - text.as_ptr() as usize;
                let key = short_key(word);
                if let (Some(key), true) = (key, self.words.len() < AHEAD) {
                    self.memo.short.prefetch(key);
                }
                self.words.push((start, start + word.len(), key));
            }
            for i in 0..self.words.len() {
                if let Some(&(_, _, Some(key))) = self.words.get(i + AHEAD) {
                    self.memo.short.prefetch(key);
                }
                let (start, end, key) = self.words[i];
                let word = &text[start..end];
                let (whole, parts) = match self.memo.get_keyed(word, key) {
                    Some(found) => found,
                    None => self.learn(word, words, raw),
                };
                if whole != NO_TERM {
                    raw.doc_terms.push(whole);
                }
                if parts < LISTED {
                    words.doc_terms.push(parts);
                } else if parts != NO_TERM {
                    let at = (parts - LISTED) as usize;
                    let count = self.lists[at] as usize;
                    words
                        .doc_terms
                        .extend_from_slice(&self.lists[at + 1..at + 1 + count]);
                }
            }
        }
        words.end_document();
        raw.end_document();
    }

    /// Analyses `word` for both fields, remembers and returns its terms.
    fn learn(&mut self, word: &str, words: &mut FieldWriter, raw: &mut FieldWriter) -> (u32, u32) {
        let whole = raw.analyse(word);
        let at = self.lists.len();
        self.lists.push(0);
        for part in alphanumeric_runs(word) {
            let id = words.id_of(part);
            if id != NO_TERM {
                self.lists.push(id);
            }
        }
        let count = self.lists.len() - at - 1;
        let parts = match count {
            0 => NO_TERM,
            1 if self.lists[at + 1] < LISTED => self.lists[at + 1],
            _ => {
                self.lists[at] = count as u32;
                LISTED + at as u32
            }
        };
        if parts < LISTED || parts == NO_TERM {
            self.lists.truncate(at);
        }
        self.memo.insert(word, (whole, parts));
        (whole, parts)
    }

    fn mem_usage(&self) -> usize {
        self.memo.bytes() + self.lists.capacity() * 4
    }
}

impl PluginWriter for WordsWriter {
    fn add_document(
        &mut self,
        doc_id: DocId,
        doc: &dyn ErasedDocument,
        _schema: &Schema,
    ) -> tantivy::Result<()> {
        if doc_id != self.docs {
            return Err(TantivyError::InvalidArgument(format!(
                "Finder's postings take documents in order: got {doc_id}, expected {}",
                self.docs
            )));
        }
        let doc = doc
            .as_any()
            .downcast_ref::<TantivyDocument>()
            .ok_or_else(|| {
                TantivyError::InvalidArgument("Finder's postings take TantivyDocuments".into())
            })?;
        if self.same_text(doc) {
            let [words, raw] = &mut self.fields[..] else {
                unreachable!("same_text holds for two fields only")
            };
            let texts = doc.get_all(words.field).filter_map(|value| value.as_str());
            self.both.add(words, raw, texts);
        } else {
            for field in &mut self.fields {
                field.add(doc.get_all(field.field).filter_map(|value| value.as_str()));
            }
        }
        self.docs += 1;
        Ok(())
    }

    fn serialize(
        self: Box<Self>,
        segment: &Segment,
        doc_id_map: Option<&DocIdMapping>,
    ) -> tantivy::Result<()> {
        if doc_id_map.is_some() {
            return Err(TantivyError::InvalidArgument(
                "Finder's postings cannot be written for a sorted index".into(),
            ));
        }
        let write = segment.open_write(SegmentComponent::Custom(POSTINGS_EXTENSION.into()))?;
        let mut out = Counting::new(write);
        let mut directory = Vec::new();
        for field in self.fields {
            directory.push(field.write(&mut out)?);
        }
        finish_file(out, &directory)?;
        Ok(())
    }

    fn mem_usage(&self) -> usize {
        self.fields
            .iter()
            .map(FieldWriter::mem_usage)
            .sum::<usize>()
            + self.both.mem_usage()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A writer that counts the bytes written through it.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Counting<W> {
    fn new(inner: W) -> Counting<W> {
        Counting { inner, written: 0 }
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// Where a field's section lies, and what the directory says of it.
struct DirectoryEntry {
    field: Field,
    terms: u32,
    total_tokens: u64,
    postings: u64,
    norms: u64,
    term_bytes: u64,
    table: u64,
}

/// Writes one field's section: the terms one at a time in byte order, then the rest.
struct SectionWriter<'a, W> {
    out: &'a mut Counting<W>,
    field: Field,
    postings: u64,
    /// Per term: where its bytes end, its document frequency, where its postings start.
    table: Vec<(u32, u32, u64)>,
    term_bytes: Vec<u8>,
    buffer: Vec<u8>,
}

impl<'a, W: Write> SectionWriter<'a, W> {
    fn new(field: Field, out: &'a mut Counting<W>) -> SectionWriter<'a, W> {
        let postings = out.written;
        SectionWriter {
            out,
            field,
            postings,
            table: Vec::new(),
            term_bytes: Vec::new(),
            buffer: Vec::new(),
        }
    }

    /// Adds a term (after every term before it in byte order) with its documents (ascending)
    /// and their frequencies.
    fn term(&mut self, term: &[u8], docs: &[DocId], tfs: &[u32]) -> io::Result<()> {
        debug_assert!(!docs.is_empty() && docs.len() == tfs.len());
        self.term_bytes.extend_from_slice(term);
        self.table.push((
            self.term_bytes.len() as u32,
            docs.len() as u32,
            self.out.written,
        ));
        self.buffer.clear();
        encode_postings(docs, tfs, &mut self.buffer);
        self.out.put(&self.buffer)
    }

    fn finish(self, norms: &[u8], total_tokens: u64) -> io::Result<DirectoryEntry> {
        let norms_at = self.out.written;
        self.out.put(norms)?;
        let bytes_at = self.out.written;
        self.out.put(&self.term_bytes)?;
        let table_at = self.out.written;
        let mut row = [0u8; 16];
        for &(end, doc_freq, start) in &self.table {
            row[..4].copy_from_slice(&end.to_le_bytes());
            row[4..8].copy_from_slice(&doc_freq.to_le_bytes());
            row[8..].copy_from_slice(&start.to_le_bytes());
            self.out.put(&row)?;
        }
        Ok(DirectoryEntry {
            field: self.field,
            terms: self.table.len() as u32,
            total_tokens,
            postings: self.postings,
            norms: norms_at,
            term_bytes: bytes_at,
            table: table_at,
        })
    }
}

/// Writes the directory and the magic, and closes the file.
fn finish_file<W: TerminatingWrite>(
    mut out: Counting<W>,
    directory: &[DirectoryEntry],
) -> io::Result<()> {
    for entry in directory {
        let mut row = Vec::with_capacity(DIRECTORY_ENTRY);
        row.extend_from_slice(&entry.field.field_id().to_le_bytes());
        row.extend_from_slice(&entry.terms.to_le_bytes());
        row.extend_from_slice(&entry.total_tokens.to_le_bytes());
        for at in [entry.postings, entry.norms, entry.term_bytes, entry.table] {
            row.extend_from_slice(&at.to_le_bytes());
        }
        out.put(&row)?;
    }
    out.put(&(directory.len() as u32).to_le_bytes())?;
    out.put(MAGIC)?;
    out.inner.terminate()
}

fn put_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> u32 {
    let mut value = 0u32;
    let mut shift = 0;
    loop {
        let b = bytes[*at];
        *at += 1;
        value |= u32::from(b & 0x7f) << shift;
        if b < 0x80 {
            return value;
        }
        shift += 7;
    }
}

/// A term's postings in the layout the module's documentation gives.
fn encode_postings(docs: &[DocId], tfs: &[u32], out: &mut Vec<u8>) {
    let packer = BitPacker4x::new();
    let mut previous = 0;
    let mut minus_one = [0u32; BLOCK];
    for (docs, tfs) in docs.chunks_exact(BLOCK).zip(tfs.chunks_exact(BLOCK)) {
        for (m, &tf) in minus_one.iter_mut().zip(tfs) {
            *m = tf - 1;
        }
        let doc_bits = packer.num_bits_sorted(previous, docs);
        let tf_bits = packer.num_bits(&minus_one);
        out.push(doc_bits);
        out.push(tf_bits);
        let at = out.len();
        out.resize(at + BitPacker4x::compressed_block_size(doc_bits), 0);
        packer.compress_sorted(previous, docs, &mut out[at..], doc_bits);
        let at = out.len();
        out.resize(at + BitPacker4x::compressed_block_size(tf_bits), 0);
        packer.compress(&minus_one, &mut out[at..], tf_bits);
        previous = docs[BLOCK - 1];
    }
    let rest = docs.len() % BLOCK;
    for (&doc, &tf) in docs[docs.len() - rest..]
        .iter()
        .zip(&tfs[tfs.len() - rest..])
    {
        put_varint(out, doc - previous);
        put_varint(out, tf);
        previous = doc;
    }
}

/// A term's place in its field's section.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TermEntry {
    pub doc_freq: u32,
    start: usize,
}

/// A term's postings, a block of up to [`BLOCK`] documents at a time: [`Blocks::docs`] is
/// empty once they are all read.
pub(crate) struct Blocks<'a> {
    bytes: &'a [u8],
    at: usize,
    left: u32,
    previous: DocId,
    docs: [DocId; BLOCK],
    tfs: [u32; BLOCK],
    len: usize,
}

impl<'a> Blocks<'a> {
    /// The `doc_freq` postings encoded at `at` in `bytes`, their first block read.
    fn new(bytes: &'a [u8], at: usize, doc_freq: u32) -> Blocks<'a> {
        let mut blocks = Blocks {
            bytes,
            at,
            left: doc_freq,
            previous: 0,
            docs: [0; BLOCK],
            tfs: [0; BLOCK],
            len: 0,
        };
        blocks.advance();
        blocks
    }

    pub(crate) fn docs(&self) -> &[DocId] {
        &self.docs[..self.len]
    }

    pub(crate) fn freqs(&self) -> &[u32] {
        &self.tfs[..self.len]
    }

    pub(crate) fn advance(&mut self) {
        if self.left as usize >= BLOCK {
            let packer = BitPacker4x::new();
            let doc_bits = self.bytes[self.at];
            let tf_bits = self.bytes[self.at + 1];
            self.at += 2;
            self.at += packer.decompress_sorted(
                self.previous,
                &self.bytes[self.at..],
                &mut self.docs,
                doc_bits,
            );
            self.at += packer.decompress(&self.bytes[self.at..], &mut self.tfs, tf_bits);
            for tf in &mut self.tfs {
                *tf += 1;
            }
            self.len = BLOCK;
        } else {
            self.len = self.left as usize;
            for i in 0..self.len {
                let doc = self.previous + get_varint(self.bytes, &mut self.at);
                self.docs[i] = doc;
                self.tfs[i] = get_varint(self.bytes, &mut self.at);
                self.previous = doc;
            }
        }
        self.left -= self.len as u32;
        if let Some(&last) = self.docs().last() {
            self.previous = last;
        }
    }
}

/// A segment's postings file, read.
pub(crate) struct WordsFile {
    bytes: OwnedBytes,
    sections: Vec<Section>,
}

#[derive(Clone, Copy)]
struct Section {
    field: Field,
    terms: usize,
    total_tokens: u64,
    norms: usize,
    term_bytes: usize,
    table: usize,
}

impl WordsFile {
    /// The postings file of `segment`; `None` when it has none (a segment written before
    /// Finder wrote its own postings).
    pub(crate) fn open(segment: &SegmentReader) -> tantivy::Result<Option<WordsFile>> {
        let slice = match segment.open_read(SegmentComponent::Custom(POSTINGS_EXTENSION.into())) {
            Ok(slice) => slice,
            Err(tantivy::directory::error::OpenReadError::FileDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let bytes = slice.read_bytes()?;
        WordsFile::parse(bytes, segment.max_doc()).map(Some)
    }

    fn parse(bytes: OwnedBytes, max_doc: u32) -> tantivy::Result<WordsFile> {
        let b = bytes.as_slice();
        let tail = MAGIC.len() + 4;
        if b.len() < tail || &b[b.len() - MAGIC.len()..] != MAGIC {
            return Err(corrupt("no magic at its end"));
        }
        let count = u32_at(b, b.len() - tail) as usize;
        let Some(start) = (b.len() - tail).checked_sub(count * DIRECTORY_ENTRY) else {
            return Err(corrupt("directory longer than the file"));
        };
        let mut sections = Vec::with_capacity(count);
        for i in 0..count {
            let at = start + i * DIRECTORY_ENTRY;
            let section = Section {
                field: Field::from_field_id(u32_at(b, at)),
                terms: u32_at(b, at + 4) as usize,
                total_tokens: u64_at(b, at + 8),
                norms: u64_at(b, at + 24) as usize,
                term_bytes: u64_at(b, at + 32) as usize,
                table: u64_at(b, at + 40) as usize,
            };
            let table_end = section.table + 16 * section.terms;
            let ordered = u64_at(b, at + 16) as usize <= section.norms
                && section.norms + max_doc as usize == section.term_bytes
                && section.term_bytes <= section.table
                && table_end <= start;
            if !ordered {
                return Err(corrupt(format!("section {i} out of its bounds")));
            }
            sections.push(section);
        }
        Ok(WordsFile { bytes, sections })
    }

    /// The postings of `field`; `None` when the file has none for it.
    pub(crate) fn field(&self, field: Field) -> Option<FieldWords<'_>> {
        self.sections
            .iter()
            .find(|s| s.field == field)
            .map(|&section| FieldWords {
                bytes: self.bytes.as_slice(),
                section,
            })
    }
}

/// One field's postings in a segment.
#[derive(Clone, Copy)]
pub(crate) struct FieldWords<'a> {
    bytes: &'a [u8],
    section: Section,
}

impl<'a> FieldWords<'a> {
    /// Tokens over every document of the segment, deleted ones too (as tantivy counts them).
    pub(crate) fn total_tokens(&self) -> u64 {
        self.section.total_tokens
    }

    /// The length code of `doc` (tantivy's field norm id).
    pub(crate) fn norm_id(&self, doc: DocId) -> u8 {
        self.bytes[self.section.norms + doc as usize]
    }

    pub(crate) fn term_count(&self) -> usize {
        self.section.terms
    }

    fn row(&self, i: usize) -> usize {
        self.section.table + 16 * i
    }

    /// The bytes of the `i`th term in byte order.
    pub(crate) fn term_bytes(&self, i: usize) -> &'a [u8] {
        let end = u32_at(self.bytes, self.row(i)) as usize;
        let start = if i == 0 {
            0
        } else {
            u32_at(self.bytes, self.row(i - 1)) as usize
        };
        &self.bytes[self.section.term_bytes + start..self.section.term_bytes + end]
    }

    fn entry(&self, i: usize) -> TermEntry {
        TermEntry {
            doc_freq: u32_at(self.bytes, self.row(i) + 4),
            start: u64_at(self.bytes, self.row(i) + 8) as usize,
        }
    }

    /// The entry of `term`, when the field holds it.
    pub(crate) fn find(&self, term: &[u8]) -> Option<TermEntry> {
        let (mut low, mut high) = (0, self.section.terms);
        while low < high {
            let mid = low + (high - low) / 2;
            match self.term_bytes(mid).cmp(term) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(self.entry(mid)),
            }
        }
        None
    }

    /// Every term, in byte order.
    pub(crate) fn terms(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        (0..self.section.terms).map(|i| self.term_bytes(i))
    }

    /// The postings of a term this field holds, its first block read.
    pub(crate) fn postings(&self, entry: TermEntry) -> Blocks<'a> {
        Blocks::new(self.bytes, entry.start, entry.doc_freq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::{ANALYSIS, RAW as RAW_WORDS, WORDS};
    use proptest::prelude::*;
    use tantivy::postings::Postings as _;
    use tantivy::schema::{IndexRecordOption, TextFieldIndexing, TextOptions, STRING};
    use tantivy::tokenizer::{SimpleTokenizer, Tokenizer};
    use tantivy::{DocSet, Index, IndexWriter, Term, TERMINATED};

    fn decode(docs: &[DocId], tfs: &[u32]) -> (Vec<DocId>, Vec<u32>) {
        let mut bytes = Vec::new();
        encode_postings(docs, tfs, &mut bytes);
        let mut blocks = Blocks::new(&bytes, 0, docs.len() as u32);
        let (mut out_docs, mut out_tfs) = (Vec::new(), Vec::new());
        while !blocks.docs().is_empty() {
            out_docs.extend_from_slice(blocks.docs());
            out_tfs.extend_from_slice(blocks.freqs());
            blocks.advance();
        }
        assert_eq!(blocks.at, bytes.len(), "every byte read");
        (out_docs, out_tfs)
    }

    proptest! {
        #[test]
        fn postings_decode_as_encoded(
            first in 0u32..3,
            gaps in proptest::collection::vec(1u32..100_000, 0..600),
            tfs in proptest::collection::vec(1u32..70_000, 601),
        ) {
            let mut docs = vec![first];
            for gap in gaps {
                docs.push(docs.last().unwrap() + gap);
            }
            let tfs = &tfs[..docs.len()];
            prop_assert_eq!(decode(&docs, tfs), (docs.clone(), tfs.to_vec()));
        }

        #[test]
        fn words_split_as_tantivys_simple_tokenizer(text in "\\PC{0,60}") {
            let mut tokenizer = SimpleTokenizer::default();
            let mut stream = tokenizer.token_stream(&text);
            let mut theirs = Vec::new();
            while stream.advance() {
                theirs.push(stream.token().text.clone());
            }
            let ours: Vec<&str> = alphanumeric_runs(&text).collect();
            prop_assert_eq!(ours, theirs);
        }
    }

    /// Words that exercise every filter: stop words, plural acronyms, case, accents, other
    /// scripts, punctuation inside and around words, numbers, a word over the length limit.
    const WORDS_USED: &[&str] = &[
        "the",
        "of",
        "RNAs",
        "GPUs",
        "running",
        "runs",
        "Naïve",
        "café",
        "CAFÉ",
        "日本語",
        "auth-041",
        "(AUTH-041),",
        "to-do",
        "e-mail",
        "42",
        "3.14",
        "x",
        "Straße",
        "wordwordwordwordwordwordwordwordwordwordwordwordwordwordwordwordwordword",
        "--",
        "«café»",
        "(naïve)",
        "—",
        "x.",
    ];
    const SEPARATORS: &[&str] = &[" ", ", ", "\n", " - ", "/", ".  ", "\t"];

    fn texts() -> impl Strategy<Value = Vec<String>> {
        let text = proptest::collection::vec((0..WORDS_USED.len(), 0..SEPARATORS.len()), 0..40)
            .prop_map(|words| {
                words
                    .into_iter()
                    .map(|(w, s)| format!("{}{}", WORDS_USED[w], SEPARATORS[s]))
                    .collect::<String>()
            });
        proptest::collection::vec(text, 1..30)
    }

    /// One field's postings as read back: per term, its documents and frequencies; each
    /// document's length code; the token total.
    type Read = (Vec<(Vec<u8>, Vec<(DocId, u32)>)>, Vec<u8>, u64);

    fn tantivys(segment: &SegmentReader, field: Field) -> Read {
        let inverted = segment.inverted_index(field).unwrap();
        let norms = segment.get_fieldnorms_reader(field).unwrap();
        let mut terms = Vec::new();
        let mut stream = inverted.terms().stream().unwrap();
        while stream.advance() {
            let mut postings = inverted
                .read_postings_from_terminfo(stream.value(), IndexRecordOption::WithFreqs)
                .unwrap();
            let mut list = Vec::new();
            while postings.doc() != TERMINATED {
                list.push((postings.doc(), postings.term_freq()));
                postings.advance();
            }
            terms.push((stream.key().to_vec(), list));
        }
        let norms = (0..segment.max_doc())
            .map(|d| norms.fieldnorm_id(d))
            .collect();
        (terms, norms, inverted.total_num_tokens())
    }

    fn ours(segment: &SegmentReader, field: Field) -> Read {
        let file = WordsFile::open(segment).unwrap().expect("a postings file");
        let words = file.field(field).expect("the field's section");
        let terms = (0..words.term_count())
            .map(|i| {
                let mut blocks = words.postings(words.entry(i));
                let mut list = Vec::new();
                while !blocks.docs().is_empty() {
                    list.extend(
                        blocks
                            .docs()
                            .iter()
                            .copied()
                            .zip(blocks.freqs().iter().copied()),
                    );
                    blocks.advance();
                }
                assert_eq!(list.len() as u32, words.entry(i).doc_freq);
                (words.term_bytes(i).to_vec(), list)
            })
            .collect();
        let norms = (0..segment.max_doc()).map(|d| words.norm_id(d)).collect();
        (terms, norms, words.total_tokens())
    }

    /// Writes `texts` into a fresh in-memory index (every fifth without its whole-word value),
    /// a third then the rest (two segments of different sizes), deletes every third, and merges the segments, smaller first, when
    /// `merge`: with tantivy's postings for the two fields, or with Finder's.
    fn write(texts: &[String], own: bool, merge: bool) -> Index {
        let mut b = Schema::builder();
        let id = b.add_text_field("id", STRING);
        let options = |tokenizer: &str| {
            if own {
                TextOptions::default()
            } else {
                TextOptions::default().set_indexing_options(
                    TextFieldIndexing::default()
                        .set_tokenizer(tokenizer)
                        .set_index_option(IndexRecordOption::WithFreqs),
                )
            }
        };
        let text = b.add_text_field(TEXT, options(WORDS));
        let raw = b.add_text_field(RAW, options(RAW_WORDS));
        let mut builder = Index::builder().schema(b.build());
        if own {
            builder = builder.register_plugin(WordsPlugin::new("english", ANALYSIS));
        }
        let index = builder.create_in_ram().unwrap();
        crate::schema::register_analyzers(&index, "english", ANALYSIS);
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        let half = texts.len() / 3;
        for (i, t) in texts.iter().enumerate() {
            // Every fifth document without its whole-word value (as with the trigram
            // expansions off): the plugin's path for fields that differ.
            let mut doc = tantivy::doc!(id => i.to_string(), text => t.as_str());
            if i % 5 != 4 {
                doc.add_text(raw, t);
            }
            writer.add_document(doc).unwrap();
            if i + 1 == half {
                writer.commit().unwrap();
            }
        }
        writer.commit().unwrap();
        for i in (0..texts.len()).step_by(3) {
            writer.delete_term(Term::from_field_text(id, &i.to_string()));
        }
        writer.commit().unwrap();
        if merge {
            let mut metas = index.searchable_segment_metas().unwrap();
            // The merged segment stacks its sources in the order given: the same in both.
            metas.sort_by_key(|m| m.max_doc());
            let segments: Vec<_> = metas.iter().map(|m| m.id()).collect();
            if segments.len() > 1 {
                writer.merge(&segments).wait().unwrap();
            }
        }
        writer.wait_merging_threads().unwrap();
        index
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Finder's postings hold what tantivy's hold for the same texts through the same
        /// analyzers: terms, documents, frequencies, length codes and token totals, in each
        /// segment written and in a segment merged from them with deleted documents.
        #[test]
        fn plugin_postings_equal_tantivys(texts in texts(), merge in any::<bool>()) {
            let theirs = write(&texts, false, merge);
            let ours_index = write(&texts, true, merge);
            let (a, b) = (theirs.reader().unwrap().searcher(), ours_index.reader().unwrap().searcher());
            prop_assert_eq!(a.segment_readers().len(), b.segment_readers().len());
            for (sa, sb) in a.segment_readers().iter().zip(b.segment_readers()) {
                prop_assert_eq!(sa.max_doc(), sb.max_doc());
                for name in [TEXT, RAW] {
                    let field = theirs.schema().get_field(name).unwrap();
                    prop_assert_eq!(tantivys(sa, field), ours(sb, field), "field {}", name);
                }
            }
        }
    }

    #[test]
    fn a_file_without_its_magic_is_refused() {
        let bytes = OwnedBytes::new(b"not a postings file".to_vec());
        let err = WordsFile::parse(bytes, 0).err().expect("refused");
        assert!(err.to_string().contains("no magic"), "{err}");
    }
}
