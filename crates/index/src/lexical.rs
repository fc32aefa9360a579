//! BM25 over the analysed fields' postings and field norms with query-time `k1` and `b`.
//!
//! A segment's postings are Finder's own ([`crate::postings`]) where it has them, and
//! tantivy's in a segment written before them. tantivy's own scorer hard-codes k1 = 1.2 and
//! b = 0.75. This scorer reads postings, field norms and collection statistics of the same
//! values either way and computes the same formula with any constants, so at the defaults it
//! ranks as tantivy does (tested) and otherwise follows the settings.

use std::collections::HashSet;

use finder_core::{bm25_idf, bm25_length_norm, bm25_tf_score, Bm25Params};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::schema::Field;
use tantivy::{DocAddress, DocId, Searcher, SegmentReader, Term};

use crate::postings::{FieldPostings, PostingsFile, TermEntry};

use finder_ann::order::{from_ordered_bits, ordered_bits};

/// Each distinct term of an analyzed query once, in first-seen order (each weighs 1): a word
/// repeated in the query counts once, as tantivy's query parser and qdrant's BM25 query make
/// of it. Counted per occurrence, a repeated word outweighed the query's other words: on
/// SciFact (60 of 300 test claims repeat a word) and the synthetic sets, counting each once
/// ranked better on every split (docs/perf/query-term-frequency.md).
pub fn query_terms(field: Field, terms: &[String]) -> Vec<Term> {
    // Through a set: a query of many distinct words stays linear.
    let mut seen: HashSet<&str> = HashSet::with_capacity(terms.len());
    terms
        .iter()
        .filter(|t| seen.insert(t.as_str()))
        .map(|t| Term::from_field_text(field, t))
        .collect()
}

/// Collection statistics of one field, summed over segments the way tantivy sums them
/// (deleted documents count until their segment is merged).
pub struct FieldStats {
    pub num_docs: u64,
    pub avg_len: f32,
}

/// Every segment's postings file of `searcher` (`None` for a segment without one), in segment
/// order: what [`field_stats`] and [`top_k_terms`] read Finder's postings from.
pub fn segment_postings(searcher: &Searcher) -> tantivy::Result<Vec<Option<PostingsFile>>> {
    searcher
        .segment_readers()
        .iter()
        .map(PostingsFile::open)
        .collect()
}

pub fn field_stats(
    searcher: &Searcher,
    words: &[Option<PostingsFile>],
    field: Field,
) -> tantivy::Result<FieldStats> {
    let mut num_docs = 0u64;
    let mut tokens = 0u64;
    for (segment, words) in searcher.segment_readers().iter().zip(words) {
        num_docs += u64::from(segment.max_doc());
        tokens += postings_of(segment, words)?
            .field(field)
            .map_or(0, |f| f.total_tokens());
    }
    let avg_len = if num_docs == 0 {
        1.0
    } else {
        (tokens as f32 / num_docs as f32).max(f32::MIN_POSITIVE)
    };
    Ok(FieldStats { num_docs, avg_len })
}

/// A candidate as one integer whose ascending order is best first: the score's bits (in
/// `f32::total_cmp`'s order) inverted, then the segment, then the document, so on equal
/// scores the later address is worse, as in tantivy's collector. Selecting and sorting plain
/// integers is several times cheaper than comparing scores and addresses field by field.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry(u128);

impl Entry {
    fn new(score: f32, address: DocAddress) -> Entry {
        let rank = !ordered_bits(score);
        Entry(
            u128::from(rank) << 64
                | u128::from(address.segment_ord) << 32
                | u128::from(address.doc_id),
        )
    }

    fn score(self) -> f32 {
        from_ordered_bits(!((self.0 >> 64) as u32))
    }

    fn address(self) -> DocAddress {
        DocAddress::new((self.0 >> 32) as u32, self.0 as u32)
    }
}

/// The length part of the BM25 denominator for each of the 256 lengths a field norm stores.
fn length_norms(params: Bm25Params, avg_len: f32) -> [f32; 256] {
    std::array::from_fn(|id| {
        let len = FieldNormReader::id_to_fieldnorm(id as u8) as f32;
        bm25_length_norm(params, len, avg_len)
    })
}

/// The `k` best fragments for `terms` of `field`, each at weight 1, best first; see
/// [`top_k_terms`] (the postings files opened for this call).
pub fn top_k(
    searcher: &Searcher,
    field: Field,
    terms: &[Term],
    params: Bm25Params,
    k: usize,
) -> tantivy::Result<Vec<(DocAddress, f32)>> {
    let weighted: Vec<(Term, f32)> = terms
        .iter()
        .map(|t| {
            debug_assert_eq!(t.field(), field);
            (t.clone(), 1.0)
        })
        .collect();
    top_k_terms(searcher, &segment_postings(searcher)?, &weighted, params, k)
}

/// The postings file of a segment, which every segment of an index of the current format has
/// (the engine reloads a snapshot whose files a merge removed before it was opened).
pub(crate) fn postings_of<'a>(
    segment: &SegmentReader,
    file: &'a Option<PostingsFile>,
) -> tantivy::Result<&'a PostingsFile> {
    file.as_ref().ok_or_else(|| {
        tantivy::TantivyError::DataCorruption(tantivy::error::DataCorruption::comment_only(
            format!(
                "segment {} has no postings file; index the files again to rebuild it",
                segment.segment_id().uuid_string()
            ),
        ))
    })
}

/// Adds `weight`-weighted BM25 of one term's block of documents to their scores, listing each
/// document the first time it scores.
#[inline]
#[allow(clippy::too_many_arguments)]
fn accumulate(
    docs: &[DocId],
    tfs: &[u32],
    norm_id: impl Fn(DocId) -> u8,
    by_length: &[f32; 256],
    params: Bm25Params,
    weight: f32,
    acc: &mut [f32],
    touched: &mut Vec<u32>,
) {
    for (&doc, &tf) in docs.iter().zip(tfs) {
        let norm = by_length[norm_id(doc) as usize];
        let s = bm25_tf_score(params, weight, tf, norm);
        let slot = &mut acc[doc as usize];
        // Listed once, at its first score; a term weighing nothing (`lexical.trigram_weight`
        // 0) adds no candidate.
        if *slot == 0.0 && s != 0.0 {
            touched.push(doc);
        }
        *slot += s;
    }
}

/// The `k` best fragments for weighted `terms`, best first: every posting of every term
/// accumulated, term at a time, per segment, a decoded block of 128 at a time, with the length
/// part of the formula looked up per stored length. A term's score is multiplied by its weight
/// (an expansion weighs less than the word it came from; a repeated query word is one term).
/// The terms may belong to several fields: each term is scored with its own field's statistics
/// and lengths, and a fragment's score is the sum.
///
/// No pruning: tantivy's block-max WAND (at its constants, picking candidates for a rescore
/// here) was measured slower for Finder's lists of 100 — 0.74 against 0.38 ms per word query
/// over 1M fragments, 0.26 against 0.14 ms over 100k, and 2.3 against 0.27 ms for the trigram
/// list's dozens of terms on SciFact (`finder-bench run --reuse`, docs/perf/bm25-list.md).
pub fn top_k_terms(
    searcher: &Searcher,
    words: &[Option<PostingsFile>],
    terms: &[(Term, f32)],
    params: Bm25Params,
    k: usize,
) -> tantivy::Result<Vec<(DocAddress, f32)>> {
    if terms.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    // The fields in first-seen order, each with its statistics and length table.
    let mut fields: Vec<Field> = Vec::new();
    for (term, _) in terms {
        if !fields.contains(&term.field()) {
            fields.push(term.field());
        }
    }
    let mut num_docs = Vec::with_capacity(fields.len());
    let mut by_length = Vec::with_capacity(fields.len());
    for &field in &fields {
        let stats = field_stats(searcher, words, field)?;
        num_docs.push(stats.num_docs);
        by_length.push(length_norms(params, stats.avg_len));
    }
    let field_of: Vec<usize> = terms
        .iter()
        .map(|(t, _)| fields.iter().position(|&f| f == t.field()).unwrap_or(0))
        .collect();
    // Each segment's postings readers with each term's dictionary entry in them, looked up
    // once: the document frequencies they hold sum to what `Searcher::doc_freq` counts, and
    // they open the postings.
    let mut entries = Vec::with_capacity(searcher.segment_readers().len());
    for (segment, words) in searcher.segment_readers().iter().zip(words) {
        let file = postings_of(segment, words)?;
        let postings: Vec<Option<FieldPostings<'_>>> =
            fields.iter().map(|&f| file.field(f)).collect();
        let infos: Vec<Option<TermEntry>> = terms
            .iter()
            .zip(&field_of)
            .map(|((term, _), &f)| {
                postings[f]
                    .as_ref()
                    .and_then(|p| p.find(term.serialized_value_bytes()))
            })
            .collect();
        entries.push((postings, infos));
    }
    let idf: Vec<f32> = (0..terms.len())
        .map(|t| {
            let doc_freq = entries
                .iter()
                .filter_map(|(_, infos)| infos[t].as_ref())
                .map(|info| u64::from(info.doc_freq))
                .sum();
            bm25_idf(num_docs[field_of[t]], doc_freq)
        })
        .collect();
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let Scratch {
            acc,
            touched,
            clean,
        } = &mut *scratch;
        if !*clean {
            // A query that unwound mid-segment (a panic) left scores behind.
            acc.fill(0.0);
            *clean = true;
        }
        let mut best: Vec<Entry> = Vec::with_capacity(k.saturating_mul(2).max(KEEP_AT_LEAST));
        let mut floor = f32::NEG_INFINITY;
        for (seg_ord, segment) in searcher.segment_readers().iter().enumerate() {
            let (postings, infos) = &entries[seg_ord];
            let max_doc = segment.max_doc() as usize;
            if acc.len() < max_doc {
                acc.resize(max_doc, 0.0);
            }
            touched.clear();
            *clean = false;
            let terms = terms.iter().zip(&idf).zip(infos).zip(&field_of);
            for ((((_, qtf), weight), info), &f) in terms {
                let Some(info) = info else {
                    continue;
                };
                let by_length = &by_length[f];
                let weight = weight * *qtf;
                let words = postings[f].as_ref().expect("found in these postings");
                let mut blocks = words.postings(*info);
                while !blocks.docs().is_empty() {
                    let norm_id = |doc| words.norm_id(doc);
                    let (docs, tfs) = (blocks.docs(), blocks.freqs());
                    accumulate(docs, tfs, norm_id, by_length, params, weight, acc, touched);
                    blocks.advance();
                }
            }
            // Every touched score is read and zeroed: the accumulator is all zeros for the
            // next segment or query without clearing the whole of it.
            for &doc in touched.iter() {
                let score = std::mem::take(&mut acc[doc as usize]);
                // Below the k-th best of a cut, a candidate cannot be among the k best.
                if score >= floor && !segment.is_deleted(doc) {
                    best.push(Entry::new(score, DocAddress::new(seg_ord as u32, doc)));
                    if best.len() == best.capacity() {
                        floor = keep_best(&mut best, k).unwrap_or(floor);
                    }
                }
            }
            *clean = true;
        }
        keep_best(&mut best, k);
        best.sort_unstable();
        Ok(best.into_iter().map(|e| (e.address(), e.score())).collect())
    })
}

/// Below this many candidates the selection waits for more before cutting them to `k`.
const KEEP_AT_LEAST: usize = 1024;

/// A scoring thread's accumulator, all zeros between uses, and the documents one segment's
/// terms touched: kept across queries, so a query neither allocates nor clears one score per
/// document of the segment (a memset of the whole segment was 8% of the list at 100k). It
/// holds one `f32` per document of the largest segment the thread scored, for the thread's
/// life (4 MB a thread for a segment of a million fragments).
struct Scratch {
    acc: Vec<f32>,
    touched: Vec<u32>,
    /// False while a segment's scores are in `acc`.
    clean: bool,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            acc: Vec::new(),
            touched: Vec::new(),
            clean: true,
        })
    };
}

/// Cuts `entries` to its `k` best (in no order) and returns the score of the worst kept, when
/// it cut: a linear selection, where a heap kept over every candidate sifted for most of them
/// (12% of the list at 100k).
fn keep_best(entries: &mut Vec<Entry>, k: usize) -> Option<f32> {
    if entries.len() <= k || k == 0 {
        return None;
    }
    let (_, worst, _) = entries.select_nth_unstable(k - 1);
    let floor = worst.score();
    entries.truncate(k);
    Some(floor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    /// The order by its definition: higher scores first (`total_cmp`), then the earlier
    /// address.
    fn by_fields(a: (f32, DocAddress), b: (f32, DocAddress)) -> Ordering {
        b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1))
    }

    fn score() -> impl Strategy<Value = f32> {
        prop_oneof![
            Just(0.0f32),
            Just(-0.0f32),
            Just(f32::INFINITY),
            Just(f32::MIN_POSITIVE),
            any::<f32>(),
            0.0f32..20.0,
        ]
    }

    proptest! {
        #[test]
        fn entries_order_as_their_scores_and_addresses(
            a in (score(), 0u32..4, any::<u32>()),
            b in (score(), 0u32..4, any::<u32>()),
        ) {
            let a = (a.0, DocAddress::new(a.1, a.2));
            let b = (b.0, DocAddress::new(b.1, b.2));
            let (x, y) = (Entry::new(a.0, a.1), Entry::new(b.0, b.1));
            prop_assert_eq!(x.cmp(&y), by_fields(a, b));
            prop_assert_eq!(x.score().to_bits(), a.0.to_bits());
            prop_assert_eq!(x.address(), a.1);
        }
    }
}
