//! Finder's postings against tantivy's: terms, postings, length codes and totals, written and
//! merged.

use super::format::encode_postings;
use super::*;
use crate::analyzer::{ANALYSIS, WHOLE_WORDS as WHOLE_WORDS_ANALYZER, WORDS};
use proptest::prelude::*;
use tantivy::directory::OwnedBytes;
use tantivy::postings::Postings as _;
use tantivy::schema::{IndexRecordOption, TextFieldIndexing, TextOptions, STRING};
use tantivy::tokenizer::TokenStream;
use tantivy::tokenizer::{SimpleTokenizer, Tokenizer};
use tantivy::{DocId, SegmentReader};
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
    let file = PostingsFile::open(segment)
        .unwrap()
        .expect("a postings file");
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
    let raw = b.add_text_field(WHOLE_WORDS, options(WHOLE_WORDS_ANALYZER));
    let mut builder = Index::builder().schema(b.build());
    if own {
        builder = builder.register_plugin(PostingsPlugin::new("english", ANALYSIS));
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
            for name in [TEXT, WHOLE_WORDS] {
                let field = theirs.schema().get_field(name).unwrap();
                prop_assert_eq!(tantivys(sa, field), ours(sb, field), "field {}", name);
            }
        }
    }
}

#[test]
fn a_file_without_its_magic_is_refused() {
    let bytes = OwnedBytes::new(b"not a postings file".to_vec());
    let err = PostingsFile::parse(bytes, 0).err().expect("refused");
    assert!(err.to_string().contains("no magic"), "{err}");
}
