//! The tantivy schema: one document per fragment. The first fragment of a source (ordinal 0)
//! also carries the source record (envelope, summary, hash, origin), so a source and its
//! fragments are written, replaced and deleted together in one atomic commit.

use tantivy::schema::{Field, Schema, TextOptions, FAST, INDEXED, STORED, STRING};
use tantivy::Index;

use crate::analyzer::{
    source_word_analyzer, whole_word_analyzer, word_analyzer, WHOLE_WORDS, WORDS,
};

/// The name of [`Fields::language`].
pub(crate) const LANGUAGE: &str = "lang";

/// Field handles, resolved once per index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fields {
    /// Source id, indexed raw: the delete and lookup key.
    pub source_id: Field,
    pub source_key: Field,
    pub fragment_key: Field,
    pub ordinal: Field,
    /// Title, heading and fragment text through the word analyzer (BM25 field): indexed by
    /// Finder's postings ([`crate::postings`]); by tantivy in indexes made before them.
    pub text: Field,
    /// The whole words: the same text through the whole-word analyzer, which partial words
    /// and identifiers expand into (`index.trigrams`, the `trigram` channel). Stored under the
    /// name `raw`; absent in indexes made before whole words were indexed.
    pub whole_words: Option<Field>,
    /// Fragment text exactly as in the source (stored only).
    pub body: Field,
    /// JSON: extent and heading; on ordinal 0 also the source record.
    pub meta: Field,
    /// A precomputed vector (little-endian f32s); absent in indexes made before it existed.
    pub vector: Option<Field>,
    /// 1 on the fragments of an entity record (searchable, never a result); absent in
    /// indexes made before entities existed.
    pub entity: Option<Field>,
    /// The language of the source's Latin words under `index.language = "auto"`, when
    /// detected as other than English ([`crate::analyzer::source_language`]): read by the
    /// postings plugin, neither indexed nor stored. Absent in indexes made before analysis 4.
    pub language: Option<Field>,
}

/// The schema of a new index. The analysed fields are neither indexed nor stored by tantivy:
/// Finder's postings plugin reads their values as tantivy writes each document.
pub(crate) fn build_schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let fields = Fields {
        source_id: b.add_text_field("source_id", STRING | STORED),
        source_key: b.add_u64_field("source_key", INDEXED | FAST | STORED),
        // Read from its column and the store, never looked up as a term: not indexed (a
        // term per fragment made tantivy's term dictionary and postings work at every build).
        // Indexes made before keep theirs, unused.
        fragment_key: b.add_u64_field("fragment_key", FAST | STORED),
        ordinal: b.add_u64_field("ordinal", INDEXED | FAST | STORED),
        text: b.add_text_field("text", TextOptions::default()),
        whole_words: Some(b.add_text_field("raw", TextOptions::default())),
        body: b.add_text_field("body", STORED),
        meta: b.add_text_field("meta", STORED),
        vector: Some(b.add_bytes_field("vector", STORED)),
        entity: Some(b.add_u64_field("entity", FAST)),
        language: Some(b.add_text_field(LANGUAGE, TextOptions::default())),
    };
    (b.build(), fields)
}

pub(crate) fn resolve(schema: &Schema) -> Option<Fields> {
    let f = |name: &str| schema.get_field(name).ok();
    Some(Fields {
        source_id: f("source_id")?,
        source_key: f("source_key")?,
        fragment_key: f("fragment_key")?,
        ordinal: f("ordinal")?,
        text: f("text")?,
        whole_words: f("raw"),
        body: f("body")?,
        meta: f("meta")?,
        vector: f("vector"),
        entity: f("entity"),
        language: f(LANGUAGE),
    })
}

/// Registers the analyzers the schema names, as analysis version `analysis` made its words
/// ([`crate::analyzer::ANALYSIS`]); must run before writing or querying.
pub(crate) fn register_analyzers(index: &Index, language: &str, analysis: u32) {
    index
        .tokenizers()
        .register(WORDS, word_analyzer(language, analysis));
    index
        .tokenizers()
        .register(WHOLE_WORDS, whole_word_analyzer());
}

/// The name the word analyzer of the sources detected in `language` is registered under.
pub(crate) fn language_words(language: &str) -> String {
    format!("{WORDS}:{language}")
}

/// Registers the word analyzer of each language detected for some source
/// ([`crate::record::CommitInfo::languages`]), under [`language_words`]: queries are analysed
/// in each, so a query word finds a source whatever its language's stem of the word.
pub(crate) fn register_language_analyzers(index: &Index, languages: &[String], analysis: u32) {
    for language in languages {
        index.tokenizers().register(
            &language_words(language),
            source_word_analyzer(language, analysis),
        );
    }
}
