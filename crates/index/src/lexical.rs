//! BM25 over tantivy's postings and field norms with query-time `k1` and `b`.
//!
//! tantivy's own scorer hard-codes k1 = 1.2 and b = 0.75. This scorer reads the same postings,
//! field norms and collection statistics and computes the same formula with any constants, so
//! at the defaults it ranks as tantivy does (tested) and otherwise follows the settings. At the
//! defaults tantivy's block-max WAND chooses the candidates (see [`top_k`]).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use finder_core::{bm25_idf, bm25_term_score, Bm25Params};
use tantivy::collector::TopDocs;
use tantivy::postings::Postings;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocId, DocSet, Searcher, Term, TERMINATED};

/// Counts each distinct term of an analyzed query; repeated query terms weigh more, as in a
/// boolean query with one clause per occurrence.
pub fn query_terms(field: Field, terms: &[String]) -> Vec<(Term, u32)> {
    // First-seen order, counted through a map: a query of many distinct words stays linear.
    let mut order: Vec<&str> = Vec::new();
    let mut counts: HashMap<&str, u32> = HashMap::new();
    for t in terms {
        let n = counts.entry(t.as_str()).or_insert(0);
        if *n == 0 {
            order.push(t);
        }
        *n += 1;
    }
    order
        .into_iter()
        .map(|t| (Term::from_field_text(field, t), counts[t]))
        .collect()
}

/// Collection statistics of one field, summed over segments the way tantivy sums them
/// (deleted documents count until their segment is merged).
pub struct FieldStats {
    pub num_docs: u64,
    pub avg_len: f32,
}

pub fn field_stats(searcher: &Searcher, field: Field) -> tantivy::Result<FieldStats> {
    let mut num_docs = 0u64;
    let mut tokens = 0u64;
    for segment in searcher.segment_readers() {
        num_docs += u64::from(segment.max_doc());
        tokens += segment.inverted_index(field)?.total_num_tokens();
    }
    let avg_len = if num_docs == 0 {
        1.0
    } else {
        (tokens as f32 / num_docs as f32).max(f32::MIN_POSITIVE)
    };
    Ok(FieldStats { num_docs, avg_len })
}

#[derive(PartialEq)]
struct Entry(f32, DocAddress);

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// "Greater" means worse, so the max-heap's top is the entry to evict: lower scores are
    /// worse, and on equal scores the later address is worse, as in tantivy's collector.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .total_cmp(&self.0)
            .then_with(|| self.1.cmp(&other.1))
    }
}

/// The `k` best fragments for `terms`, best first.
///
/// At tantivy's constants (k1 = 1.2, b = 0.75, the defaults) tantivy's block-max WAND picks
/// the `k` candidates, skipping the blocks of postings that cannot reach the running top `k`,
/// and each candidate is then scored again here with the very arithmetic of the exhaustive
/// scorer, so the scores are bit for bit those of [`top_k_exhaustive`] (the two orders of
/// summation differ in the last bits, which can only swap candidates tied at the `k`-th
/// score). Other constants take the exhaustive scorer.
pub fn top_k(
    searcher: &Searcher,
    field: Field,
    terms: &[(Term, u32)],
    params: Bm25Params,
    k: usize,
) -> tantivy::Result<Vec<(DocAddress, f32)>> {
    if terms.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    if params.k1 != TANTIVY_K1 || params.b != TANTIVY_B {
        return top_k_exhaustive(searcher, field, terms, params, k);
    }
    let clauses: Vec<(Occur, Box<dyn Query>)> = terms
        .iter()
        .flat_map(|(term, qtf)| {
            // one clause per occurrence, as the exhaustive scorer weighs a repeated term
            (0..*qtf).map(move |_| {
                let query = TermQuery::new(term.clone(), IndexRecordOption::WithFreqs);
                (Occur::Should, Box::new(query) as Box<dyn Query>)
            })
        })
        .collect();
    let picked = searcher.search(
        &BooleanQuery::new(clauses),
        &TopDocs::with_limit(k).order_by_score(),
    )?;
    let stats = field_stats(searcher, field)?;
    let idf = term_idfs(searcher, terms, &stats)?;
    let mut by_segment: BTreeMap<u32, Vec<DocId>> = BTreeMap::new();
    for (_, address) in picked {
        by_segment
            .entry(address.segment_ord)
            .or_default()
            .push(address.doc_id);
    }
    let mut out = Vec::with_capacity(k);
    for (seg_ord, mut docs) in by_segment {
        docs.sort_unstable();
        let segment = searcher.segment_reader(seg_ord);
        let inverted = segment.inverted_index(field)?;
        let norms = segment.get_fieldnorms_reader(field)?;
        let mut scores = vec![0f32; docs.len()];
        // Term by term, in query order, as the exhaustive scorer sums.
        for ((term, qtf), weight) in terms.iter().zip(&idf) {
            let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::WithFreqs)?
            else {
                continue;
            };
            let weight = weight * *qtf as f32;
            for (doc, score) in docs.iter().zip(scores.iter_mut()) {
                if postings.doc() < *doc && postings.seek(*doc) == TERMINATED {
                    break;
                }
                if postings.doc() == *doc {
                    let len = norms.fieldnorm(*doc) as f32;
                    *score +=
                        bm25_term_score(params, weight, postings.term_freq(), len, stats.avg_len);
                }
            }
        }
        out.extend(
            docs.into_iter()
                .zip(scores)
                .map(|(doc, score)| (DocAddress::new(seg_ord, doc), score)),
        );
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

/// The constants tantivy's own BM25 hard-codes.
const TANTIVY_K1: f32 = 1.2;
const TANTIVY_B: f32 = 0.75;

fn term_idfs(
    searcher: &Searcher,
    terms: &[(Term, u32)],
    stats: &FieldStats,
) -> tantivy::Result<Vec<f32>> {
    terms
        .iter()
        .map(|(term, _)| Ok(bm25_idf(stats.num_docs, searcher.doc_freq(term)?)))
        .collect()
}

/// The `k` best fragments for `terms`, best first: every posting of every term accumulated,
/// term at a time, per segment. Any `k1` and `b`.
pub fn top_k_exhaustive(
    searcher: &Searcher,
    field: Field,
    terms: &[(Term, u32)],
    params: Bm25Params,
    k: usize,
) -> tantivy::Result<Vec<(DocAddress, f32)>> {
    if terms.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    let stats = field_stats(searcher, field)?;
    let idf = term_idfs(searcher, terms, &stats)?;
    let mut heap: BinaryHeap<Entry> = BinaryHeap::with_capacity(k + 1);
    let mut acc: Vec<f32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    for (seg_ord, segment) in searcher.segment_readers().iter().enumerate() {
        let inverted = segment.inverted_index(field)?;
        let norms = segment.get_fieldnorms_reader(field)?;
        acc.clear();
        acc.resize(segment.max_doc() as usize, 0.0);
        touched.clear();
        for ((term, qtf), weight) in terms.iter().zip(&idf) {
            let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::WithFreqs)?
            else {
                continue;
            };
            let weight = weight * *qtf as f32;
            let mut doc = postings.doc();
            while doc != TERMINATED {
                let len = norms.fieldnorm(doc) as f32;
                let s = bm25_term_score(params, weight, postings.term_freq(), len, stats.avg_len);
                let slot = &mut acc[doc as usize];
                if *slot == 0.0 {
                    touched.push(doc);
                }
                *slot += s;
                doc = postings.advance();
            }
        }
        for &doc in &touched {
            if segment.is_deleted(doc) {
                continue;
            }
            let entry = Entry(acc[doc as usize], DocAddress::new(seg_ord as u32, doc));
            if heap.len() < k {
                heap.push(entry);
            } else if heap.peek().is_some_and(|min| entry < *min) {
                heap.pop();
                heap.push(entry);
            }
        }
    }
    let mut out: Vec<(DocAddress, f32)> = heap.into_iter().map(|e| (e.1, e.0)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}
