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

#[cfg(test)]
mod tests {
    use super::*;

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
