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

use std::sync::Arc;

use tantivy::schema::{Field, Schema};
use tantivy::{PluginMergeContext, PluginWriter, PluginWriterContext, SegmentPlugin, TantivyError};

use crate::analyzer::{whole_word_analyzer, word_analyzer_unremembering};
use crate::files::POSTINGS_EXTENSION;
use crate::schema::LANGUAGE;

mod format;
mod merge;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use read::*;
use write::*;

/// The schema's names of the two fields this plugin indexes: the stemmed words and the whole
/// words (stored as `raw`, a name indexes hold).
const TEXT: &str = "text";
const WHOLE_WORDS: &str = "raw";

/// The plugin: writes the `text` and `raw` fields' postings of every segment tantivy writes or
/// merges, with the word analysis of `language` at version `analysis`.
pub(crate) struct PostingsPlugin {
    pub language: String,
    pub analysis: u32,
}

impl PostingsPlugin {
    pub(crate) fn new(language: &str, analysis: u32) -> Arc<PostingsPlugin> {
        Arc::new(PostingsPlugin {
            language: language.to_string(),
            analysis,
        })
    }
}

/// The two fields a schema holds for the plugin, each with its name (the whole-word field
/// is absent from the oldest schemas).
fn fields_of(schema: &Schema) -> Vec<(&'static str, Field)> {
    [TEXT, WHOLE_WORDS]
        .into_iter()
        .filter_map(|name| Some((name, schema.get_field(name).ok()?)))
        .collect()
}

fn corrupt(what: impl std::fmt::Display) -> TantivyError {
    TantivyError::DataCorruption(tantivy::error::DataCorruption::comment_only(format!(
        "{POSTINGS_EXTENSION} file: {what}"
    )))
}

impl SegmentPlugin for PostingsPlugin {
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
                    whole_word_analyzer()
                };
                FieldWriter::new(field, analyzer, words)
            })
            .collect();
        Ok(Box::new(PostingsWriter {
            fields,
            both: BothFields::default(),
            docs: 0,
            language: schema.get_field(LANGUAGE).ok(),
            analysis: self.analysis,
            languages: Vec::new(),
        }))
    }

    fn merge(&self, ctx: PluginMergeContext) -> tantivy::Result<()> {
        merge::merge(ctx)
    }
}
