//! Writing a segment's postings on tantivy's indexing threads: words to term ids through a
//! memo, each document's (term, frequency) pairs in one list, one counting sort at the end.

use std::any::Any;
use std::io::{self, Write};

use finder_core::{is_cjk, FastMap};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::SegmentComponent;
use tantivy::indexer::doc_id_mapping::DocIdMapping;
use tantivy::schema::document::ErasedDocument;
use tantivy::schema::{Field, Schema, Value};
use tantivy::tokenizer::{TextAnalyzer, TokenStream};
use tantivy::{DocId, PluginWriter, Segment, TantivyDocument, TantivyError};

use crate::analyzer::{source_word_analyzer_unremembering, WholeWords};
use crate::files::POSTINGS_EXTENSION;
use crate::slots::{short_key, SlotKey, SlotTable};

use super::format::{finish_file, Counting, DirectoryEntry, SectionWriter};

/// Words → a value (a word's term id, a word's ids in both fields, or a term's id): a word of
/// 1 to 15 bytes is its own key ([`SlotTable`]: one probe, one cache line, fetched ahead where
/// the next words are known), a longer one a boxed string.
pub(super) struct Memo<V> {
    pub(super) short: SlotTable<V>,
    pub(super) long: FastMap<Box<str>, V>,
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
    pub(super) fn get(&self, word: &str) -> Option<V> {
        self.get_keyed(word, short_key(word))
    }

    /// [`Memo::get`] with the word's key already made.
    pub(super) fn get_keyed(&self, word: &str, key: Option<SlotKey>) -> Option<V> {
        match key {
            Some(key) => self.short.get(key),
            None => self.long.get(word).copied(),
        }
    }

    pub(super) fn insert(&mut self, word: &str, value: V) {
        self.insert_keyed(word, short_key(word), value);
    }

    /// [`Memo::insert`] with the word's key already made.
    pub(super) fn insert_keyed(&mut self, word: &str, key: Option<SlotKey>, value: V) {
        match key {
            Some(key) => self.short.insert(key, value),
            None => {
                self.long.insert(word.into(), value);
            }
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.short.bytes() + self.long.capacity() * (size_of::<(Box<str>, V)>() + 1 + 8)
    }
}

/// A segment's terms by id, their bytes in one buffer: one growing allocation for them all,
/// where each new term had taken two boxed copies (one in the list, one as its map's key).
#[derive(Default)]
pub(super) struct Terms {
    pub(super) bytes: String,
    /// Where each term ends in `bytes` (it starts where the one before it ends).
    pub(super) ends: Vec<usize>,
}

impl Terms {
    /// Adds `term`; its id.
    pub(super) fn push(&mut self, term: &str) -> u32 {
        self.bytes.push_str(term);
        self.ends.push(self.bytes.len());
        self.ends.len() as u32 - 1
    }

    pub(super) fn get(&self, id: u32) -> &str {
        let id = id as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.bytes[start..self.ends[id]]
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * size_of::<usize>()
    }
}

/// One field's terms and postings in a segment being written.
pub(super) struct FieldWriter {
    pub(super) field: Field,
    pub(super) analyzer: TextAnalyzer,
    /// Words split as tantivy's `SimpleTokenizer` splits them (the word analyzer), or at
    /// whitespace (the whole-word analyzer).
    pub(super) alphanumeric: bool,
    /// A word (an alphanumeric run, or a trimmed whole word) → its term id, or [`NO_TERM`].
    pub(super) memo: Memo<u32>,
    /// A term → its id, and the terms by id.
    pub(super) ids: Memo<u32>,
    pub(super) terms: Terms,
    /// The current document's term ids.
    pub(super) doc_terms: Vec<u32>,
    /// Every document's (term, frequency) pairs, each term once per document in the order
    /// of its first token, documents in order.
    pub(super) pairs: Vec<(u32, u32)>,
    /// Per term id: the last document that held it (its number plus one; 0 for none yet) and
    /// its pair's index in `pairs` there. A document's tokens are counted through it, where a
    /// sort of each document's ids was a tenth of the indexing thread on SciFact.
    pub(super) last_pair: Vec<(u32, u32)>,
    /// Where each document's pairs end in `pairs`.
    pub(super) doc_ends: Vec<u32>,
    /// Each document's length code.
    pub(super) norms: Vec<u8>,
    pub(super) total_tokens: u64,
}

impl FieldWriter {
    pub(super) fn new(field: Field, analyzer: TextAnalyzer, alphanumeric: bool) -> FieldWriter {
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
    pub(super) fn id_of(&mut self, word: &str) -> u32 {
        if let Some(id) = self.memo.get(word) {
            return id;
        }
        let id = self.analyse(word);
        self.memo.insert(word, id);
        id
    }

    /// The term id of `word` analysed alone (the term added if new), or [`NO_TERM`].
    pub(super) fn analyse(&mut self, word: &str) -> u32 {
        let mut stream = self.analyzer.token_stream(word);
        if !stream.advance() {
            return NO_TERM;
        }
        let term = stream.token().text.clone();
        drop(stream);
        self.term_id(&term)
    }

    fn term_id(&mut self, term: &str) -> u32 {
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

    /// Calls `each` with the term ids of one alphanumeric run: one (remembered) for most
    /// words; for a run of CJK characters its bigrams, each analysed every time.
    pub(super) fn each_id_of(&mut self, word: &str, mut each: impl FnMut(u32)) {
        if word.is_ascii() || !word.chars().any(is_cjk) {
            let id = self.id_of(word);
            if id != NO_TERM {
                each(id);
            }
            return;
        }
        let mut terms = Vec::new();
        let mut stream = self.analyzer.token_stream(word);
        while stream.advance() {
            terms.push(stream.token().text.clone());
        }
        drop(stream);
        for term in terms {
            each(self.term_id(&term));
        }
    }

    /// The term ids of `words` to the current document's.
    pub(super) fn push_words<'t>(&mut self, words: impl Iterator<Item = &'t str>) {
        let mut ids = std::mem::take(&mut self.doc_terms);
        for word in words {
            self.each_id_of(word, |id| ids.push(id));
        }
        self.doc_terms = ids;
    }

    /// Indexes `texts` (the field's values in one document) as the document after the last.
    pub(super) fn add<'t>(&mut self, texts: impl Iterator<Item = &'t str>) {
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
    pub(super) fn end_document(&mut self) {
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

    pub(super) fn mem_usage(&self) -> usize {
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
    pub(super) fn write<W: Write>(self, out: &mut Counting<W>) -> io::Result<DirectoryEntry> {
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
pub(super) fn prefix_key(term: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let n = term.len().min(8);
    bytes[..n].copy_from_slice(&term.as_bytes()[..n]);
    u64::from_be_bytes(bytes)
}

/// The runs of alphanumeric characters of `text`, as tantivy's `SimpleTokenizer` splits it,
/// borrowed (ASCII bytes tested as bytes).
pub(super) fn alphanumeric_runs(text: &str) -> impl Iterator<Item = &str> {
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
pub(super) struct PostingsWriter {
    pub(super) fields: Vec<FieldWriter>,
    /// For documents whose two fields hold the same text.
    pub(super) both: BothFields,
    pub(super) docs: u32,
    /// The field naming a document's detected language, when the schema has it.
    pub(super) language: Option<Field>,
    pub(super) analysis: u32,
    /// The word analyzer and memo of each detected language met so far (those of the index's
    /// own language are the word field's).
    pub(super) languages: Vec<LanguageWords>,
}

/// The word field's analyzer and memo for the documents of one detected language.
pub(super) struct LanguageWords {
    name: String,
    analyzer: TextAnalyzer,
    memo: Memo<u32>,
}

impl PostingsWriter {
    /// Indexes `doc`'s fields with the word analysis of `latin`: the word field's analyzer
    /// and memo are swapped for the language's while the document is added.
    fn add_in_language(&mut self, latin: &str, doc: &TantivyDocument) {
        let at = match self.languages.iter().position(|l| l.name == latin) {
            Some(at) => at,
            None => {
                self.languages.push(LanguageWords {
                    name: latin.to_string(),
                    analyzer: source_word_analyzer_unremembering(latin, self.analysis),
                    memo: Memo::default(),
                });
                self.languages.len() - 1
            }
        };
        let own = &mut self.languages[at];
        let swap = |fields: &mut [FieldWriter], own: &mut LanguageWords| {
            for words in fields.iter_mut().filter(|f| f.alphanumeric) {
                std::mem::swap(&mut words.analyzer, &mut own.analyzer);
                std::mem::swap(&mut words.memo, &mut own.memo);
            }
        };
        swap(&mut self.fields, own);
        for field in &mut self.fields {
            field.add(doc.get_all(field.field).filter_map(|value| value.as_str()));
        }
        swap(&mut self.fields, own);
    }
}

impl PostingsWriter {
    /// Whether the document's word field and whole-word field hold the same values (as
    /// Finder's writer makes them when the trigram expansions are on).
    pub(super) fn same_text(&self, doc: &TantivyDocument) -> bool {
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
pub(super) struct BothFields {
    /// A trimmed word → its whole-word term id (or [`NO_TERM`]) and its word-field term
    /// ids: [`NO_TERM`] for none, an id below [`LISTED`] for one, else `LISTED + i` with
    /// `lists[i]` their count and the ids after it.
    pub(super) memo: Memo<(u32, u32)>,
    pub(super) lists: Vec<u32>,
    /// A text's whitespace-separated words (their byte ranges) and keys, made before any is
    /// looked up so that each probe's slot can be fetched [`AHEAD`] words early.
    pub(super) words: Vec<(usize, usize, Option<SlotKey>)>,
}

/// Marks a word's word-field ids as kept in [`BothFields::lists`]. The lists stay far below
/// 2³¹ entries: their bytes count in the writer's memory, which tantivy keeps under 4 GB.
pub(super) const LISTED: u32 = 1 << 31;

/// How many words ahead of its probe a word's memo slot is fetched.
pub(super) const AHEAD: usize = 8;

impl BothFields {
    /// Indexes `texts` (one document's values of both fields) in `words` and `raw`.
    pub(super) fn add<'t>(
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
    pub(super) fn learn(
        &mut self,
        word: &str,
        words: &mut FieldWriter,
        raw: &mut FieldWriter,
    ) -> (u32, u32) {
        let whole = raw.analyse(word);
        let at = self.lists.len();
        self.lists.push(0);
        for part in alphanumeric_runs(word) {
            words.each_id_of(part, |id| self.lists.push(id));
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

    pub(super) fn mem_usage(&self) -> usize {
        self.memo.bytes() + self.lists.capacity() * 4
    }
}

impl PluginWriter for PostingsWriter {
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
        let latin = self
            .language
            .and_then(|field| doc.get_all(field).find_map(|value| value.as_str()));
        if let Some(latin) = latin {
            self.add_in_language(latin, doc);
        } else if self.same_text(doc) {
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
            + self.languages.iter().map(|l| l.memo.bytes()).sum::<usize>()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A word that gives no term (a stop word, a word too long).
const NO_TERM: u32 = u32::MAX;
