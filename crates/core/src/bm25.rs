//! BM25 term scoring with query-time `k1` and `b`.
//!
//! The formula follows Lucene and tantivy (the `+1` inside the IDF logarithm keeps the weight
//! positive for very common terms), so that at the default constants Finder's scorer ranks
//! exactly as tantivy's own BM25 does over the same postings.

/// The two BM25 constants. Both are query-time settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation: 0 ignores length, 1 normalises fully.
    pub b: f32,
}

/// Inverse document frequency: `ln(1 + (N - n + 0.5) / (n + 0.5))`.
pub fn bm25_idf(num_docs: u64, doc_freq: u64) -> f32 {
    let n = doc_freq as f64;
    let total = num_docs as f64;
    ((1.0 + (total - n + 0.5) / (n + 0.5)).ln()) as f32
}

/// Score of one term in one document: `idf · (k1+1) · tf / (tf + k1·(1 − b + b·len/avgdl))`.
#[inline]
pub fn bm25_term_score(params: Bm25Params, idf: f32, tf: u32, doc_len: f32, avg_len: f32) -> f32 {
    bm25_tf_score(params, idf, tf, bm25_length_norm(params, doc_len, avg_len))
}

/// The length part of the denominator, `k1·(1 − b + b·len/avgdl)`: one value per stored
/// length, so a scorer over many postings computes it once per length (tantivy keeps 256).
#[inline]
pub fn bm25_length_norm(params: Bm25Params, doc_len: f32, avg_len: f32) -> f32 {
    params.k1 * (1.0 - params.b + params.b * doc_len / avg_len)
}

/// [`bm25_term_score`] with the length part already computed by [`bm25_length_norm`]; the
/// same arithmetic in the same order, so the two give the same bits.
#[inline]
pub fn bm25_tf_score(params: Bm25Params, idf: f32, tf: u32, norm: f32) -> f32 {
    let tf = tf as f32;
    idf * (params.k1 + 1.0) * tf / (tf + norm)
}

/// The weight of a word the query holds `count` times, BM25's query-side saturation
/// `(k3 + 1) · count / (k3 + count)`: 1 for a word said once, approaching `k3 + 1` for a word
/// said often. `k3 = 0` weighs every word once, however often the query repeats it.
pub fn query_term_weight(count: u32, k3: f32) -> f32 {
    let count = count as f32;
    if k3 <= 0.0 || count <= 1.0 {
        return 1.0;
    }
    (k3 + 1.0) * count / (k3 + count)
}

/// Each distinct term of a query with its [`query_term_weight`], in first-seen order. A
/// query analysed in several languages gives one pass of terms per language; a term counts
/// as often as the pass that holds it most often (a word the languages stem alike is one
/// word, not two).
pub fn query_term_weights(passes: &[Vec<String>], k3: f32) -> Vec<(String, f32)> {
    let mut order: Vec<(String, u32)> = Vec::new();
    let mut at: crate::FastMap<&str, usize> = crate::FastMap::default();
    let mut in_pass: crate::FastMap<&str, u32> = crate::FastMap::default();
    for pass in passes {
        in_pass.clear();
        for term in pass {
            *in_pass.entry(term.as_str()).or_default() += 1;
        }
        for term in pass {
            let count = in_pass[term.as_str()];
            match at.get(term.as_str()) {
                Some(&i) => order[i].1 = order[i].1.max(count),
                None => {
                    at.insert(term.as_str(), order.len());
                    order.push((term.clone(), count));
                }
            }
        }
    }
    order
        .into_iter()
        .map(|(term, count)| (term, query_term_weight(count, k3)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_query_words_weigh_more_and_saturate() {
        assert_eq!(query_term_weight(1, 1.5), 1.0);
        assert_eq!(query_term_weight(5, 0.0), 1.0);
        let (two, four, many) = (
            query_term_weight(2, 1.5),
            query_term_weight(4, 1.5),
            query_term_weight(1000, 1.5),
        );
        assert!(1.0 < two && two < four && four < many && many < 2.5);
        assert!((two - 2.5 * 2.0 / 3.5).abs() < 1e-6);
        let passes = [
            vec!["cell".to_string(), "cell".into(), "die".into()],
            vec!["cell".to_string(), "cell".into(), "zell".into()],
        ];
        let weights = query_term_weights(&passes, 1.5);
        let names: Vec<&str> = weights.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(names, ["cell", "die", "zell"]);
        assert_eq!(
            weights[0].1,
            query_term_weight(2, 1.5),
            "the most in one pass"
        );
        assert_eq!((weights[1].1, weights[2].1), (1.0, 1.0));
    }

    #[test]
    fn rare_terms_weigh_more_and_weights_stay_positive() {
        assert!(bm25_idf(1000, 1) > bm25_idf(1000, 100));
        assert!(bm25_idf(1000, 1000) > 0.0);
    }

    #[test]
    fn b_zero_ignores_length() {
        let p = Bm25Params { k1: 1.2, b: 0.0 };
        assert_eq!(
            bm25_term_score(p, 2.0, 3, 10.0, 50.0),
            bm25_term_score(p, 2.0, 3, 500.0, 50.0)
        );
        let p = Bm25Params { k1: 1.2, b: 0.75 };
        assert!(bm25_term_score(p, 2.0, 3, 10.0, 50.0) > bm25_term_score(p, 2.0, 3, 500.0, 50.0));
    }

    #[test]
    fn frequency_saturates_by_k1() {
        let p = Bm25Params { k1: 1.2, b: 0.75 };
        let one = bm25_term_score(p, 1.0, 1, 50.0, 50.0);
        let many = bm25_term_score(p, 1.0, 1000, 50.0, 50.0);
        assert!((one - 1.0).abs() < 1e-6, "tf=1 at avg length scores idf");
        assert!(many < 2.2 + 1e-6 && many > 2.19, "bounded by k1+1");
    }
}
