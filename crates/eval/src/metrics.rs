//! Retrieval metrics with trec_eval definitions (nDCG@k, recall@k, MRR@k), percentiles, and means.
//!
//! Every function takes `ranked` (doc ids, best first) and `judged` (doc id → grade). A grade
//! above 0 counts as relevant for recall and MRR; nDCG uses the grade itself as the gain.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// Grade of each of the first `k` ranked ids, with repeats of an id graded 0.
///
/// Callers are meant to pass deduplicated lists; crediting only the first occurrence is a
/// cheap guard that keeps every metric within [0, 1] if one slips through.
fn top_grades<'a>(
    ranked: &'a [String],
    judged: &'a HashMap<String, u32>,
    k: usize,
) -> impl Iterator<Item = u32> + 'a {
    let mut seen = HashSet::new();
    ranked.iter().take(k).map(move |id| {
        if seen.insert(id.as_str()) {
            judged.get(id).copied().unwrap_or(0)
        } else {
            0
        }
    })
}

/// nDCG@k as trec_eval's `ndcg_cut.k`: linear gain, discount `log2(rank + 1)` for 1-based rank.
/// The ideal ranking sorts all judged grades descending. 0 when nothing judged is relevant.
pub fn ndcg_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let discount = |i: usize| ((i + 2) as f64).log2();
    let mut ideal: Vec<u32> = judged.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, &g)| f64::from(g) / discount(i))
        .sum();
    if idcg == 0.0 {
        return 0.0;
    }
    let dcg: f64 = top_grades(ranked, judged, k)
        .enumerate()
        .map(|(i, g)| f64::from(g) / discount(i))
        .sum();
    dcg / idcg
}

/// recall@k: relevant documents in the top k over all relevant documents; 0 when none exist.
pub fn recall_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let relevant = judged.values().filter(|&&g| g > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = top_grades(ranked, judged, k).filter(|&g| g > 0).count();
    found as f64 / relevant as f64
}

/// MRR@k: 1 / rank of the first relevant document within the top k, else 0.
pub fn mrr_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    top_grades(ranked, judged, k)
        .position(|g| g > 0)
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// The `p`-th percentile (`p` in 0..=100, clamped) of `values`, which need not be sorted.
///
/// Uses linear interpolation between the closest ranks, like numpy's default: the position is
/// `p / 100 * (n - 1)` in the sorted values. An empty input yields 0.0 rather than NaN so the
/// JSON report stays parseable (serde_json writes NaN as `null`).
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 100.0) };
    let pos = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// The metrics of one query. Serialises with the same keys as [`Metrics`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct QueryMetrics {
    #[serde(rename = "ndcg@10")]
    pub ndcg_10: f64,
    #[serde(rename = "recall@2")]
    pub recall_2: f64,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    #[serde(rename = "recall@100")]
    pub recall_100: f64,
    #[serde(rename = "mrr@10")]
    pub mrr_10: f64,
}

impl QueryMetrics {
    /// Scores one ranking against its judgments.
    pub fn compute(ranked: &[String], judged: &HashMap<String, u32>) -> QueryMetrics {
        QueryMetrics {
            ndcg_10: ndcg_at(ranked, judged, 10),
            recall_2: recall_at(ranked, judged, 2),
            recall_5: recall_at(ranked, judged, 5),
            recall_10: recall_at(ranked, judged, 10),
            recall_100: recall_at(ranked, judged, 100),
            mrr_10: mrr_at(ranked, judged, 10),
        }
    }
}

/// Metrics averaged over queries; a struct rather than a map so the JSON keys keep this order
/// (a `BTreeMap` would sort `recall@10` before `recall@2`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Metrics {
    #[serde(rename = "ndcg@10")]
    pub ndcg_10: f64,
    #[serde(rename = "recall@2")]
    pub recall_2: f64,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    #[serde(rename = "recall@100")]
    pub recall_100: f64,
    #[serde(rename = "mrr@10")]
    pub mrr_10: f64,
}

impl Metrics {
    /// Arithmetic mean of each metric over `per_query`; all zeros when it is empty.
    pub fn mean(per_query: &[QueryMetrics]) -> Metrics {
        if per_query.is_empty() {
            return Metrics::default();
        }
        let n = per_query.len() as f64;
        let avg = |f: fn(&QueryMetrics) -> f64| per_query.iter().map(f).sum::<f64>() / n;
        Metrics {
            ndcg_10: avg(|q| q.ndcg_10),
            recall_2: avg(|q| q.recall_2),
            recall_5: avg(|q| q.recall_5),
            recall_10: avg(|q| q.recall_10),
            recall_100: avg(|q| q.recall_100),
            mrr_10: avg(|q| q.mrr_10),
        }
    }

    /// `(key, value)` pairs in report order, keys as in the JSON.
    pub fn entries(&self) -> [(&'static str, f64); 6] {
        [
            ("ndcg@10", self.ndcg_10),
            ("recall@2", self.recall_2),
            ("recall@5", self.recall_5),
            ("recall@10", self.recall_10),
            ("recall@100", self.recall_100),
            ("mrr@10", self.mrr_10),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn qrels(pairs: &[(&str, u32)]) -> HashMap<String, u32> {
        pairs.iter().map(|(d, g)| (d.to_string(), *g)).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn relevant_at_ranks_one_and_three() {
        let ranked = ids(&["a", "x", "b", "y"]);
        let judged = qrels(&[("a", 1), ("b", 1)]);
        // DCG = 1/log2(2) + 1/log2(4); IDCG = 1/log2(2) + 1/log2(3).
        let want =
            (1.0 / 2f64.log2() + 1.0 / 4f64.log2()) / (1.0 / 2f64.log2() + 1.0 / 3f64.log2());
        assert!(close(ndcg_at(&ranked, &judged, 10), want));
        assert!((want - 0.919_720_8).abs() < 1e-6);
        assert!(close(recall_at(&ranked, &judged, 2), 0.5));
        assert!(close(recall_at(&ranked, &judged, 3), 1.0));
        assert!(close(mrr_at(&ranked, &judged, 10), 1.0));
        // Cut at 2: only "a" counts, while the ideal still has two slots.
        let want2 = 1.0 / (1.0 + 1.0 / 3f64.log2());
        assert!(close(ndcg_at(&ranked, &judged, 2), want2));
    }

    #[test]
    fn graded_gains_are_linear() {
        let ranked = ids(&["b", "a", "c"]);
        let judged = qrels(&[("a", 2), ("b", 1), ("z", 0)]);
        let dcg = 1.0 / 2f64.log2() + 2.0 / 3f64.log2();
        let idcg = 2.0 / 2f64.log2() + 1.0 / 3f64.log2();
        assert!(close(ndcg_at(&ranked, &judged, 10), dcg / idcg));
        // An ideal with more judged documents than k only counts the top k grades.
        let judged = qrels(&[("a", 3), ("b", 2), ("c", 1)]);
        let ranked = ids(&["c"]);
        assert!(close(ndcg_at(&ranked, &judged, 1), 1.0 / 3.0));
    }

    #[test]
    fn mrr_uses_first_relevant_within_k() {
        let ranked = ids(&["x", "y", "a", "b"]);
        let judged = qrels(&[("a", 1), ("b", 2), ("x", 0)]);
        assert!(close(mrr_at(&ranked, &judged, 10), 1.0 / 3.0));
        assert_eq!(mrr_at(&ranked, &judged, 2), 0.0);
    }

    #[test]
    fn nothing_relevant_scores_zero() {
        let ranked = ids(&["a", "b"]);
        for judged in [qrels(&[]), qrels(&[("a", 0), ("b", 0)])] {
            assert_eq!(ndcg_at(&ranked, &judged, 10), 0.0);
            assert_eq!(recall_at(&ranked, &judged, 10), 0.0);
            assert_eq!(mrr_at(&ranked, &judged, 10), 0.0);
        }
        let judged = qrels(&[("a", 1)]);
        assert_eq!(ndcg_at(&[], &judged, 10), 0.0);
        assert_eq!(recall_at(&[], &judged, 10), 0.0);
        assert_eq!(mrr_at(&ranked, &judged, 0), 0.0);
        assert_eq!(ndcg_at(&ranked, &judged, 0), 0.0);
    }

    #[test]
    fn k_beyond_the_list_is_harmless() {
        let ranked = ids(&["a"]);
        let judged = qrels(&[("a", 1), ("b", 1)]);
        assert!(close(recall_at(&ranked, &judged, 1000), 0.5));
        assert!(close(
            ndcg_at(&ranked, &judged, 1000),
            1.0 / (1.0 + 1.0 / 3f64.log2())
        ));
    }

    #[test]
    fn repeated_ids_earn_nothing_twice() {
        let ranked = ids(&["a", "a", "a"]);
        let judged = qrels(&[("a", 1), ("b", 1)]);
        assert!(close(recall_at(&ranked, &judged, 10), 0.5));
        assert!(ndcg_at(&ranked, &judged, 10) <= 1.0);
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        let v = [15.0, 20.0, 35.0, 40.0, 50.0];
        assert_eq!(percentile(&v, 50.0), 35.0);
        assert_eq!(percentile(&v, 0.0), 15.0);
        assert_eq!(percentile(&v, 100.0), 50.0);
        // numpy.percentile([15, 20, 35, 40, 50], 40) == 29.0: pos 1.6 between 20 and 35.
        assert!(close(percentile(&v, 40.0), 29.0));
        // Unsorted input, pos 0.95 * 3 = 2.85 between 3 and 4.
        assert!(close(percentile(&[4.0, 1.0, 3.0, 2.0], 95.0), 3.85));
        assert_eq!(percentile(&[7.0], 95.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
        assert_eq!(percentile(&v, 250.0), 50.0);
    }

    #[test]
    fn mean_and_json_keys() {
        let judged = qrels(&[("a", 1), ("b", 1)]);
        let all = QueryMetrics::compute(&ids(&["a", "b"]), &judged);
        let none = QueryMetrics::compute(&ids(&["x"]), &judged);
        assert_eq!(all.recall_2, 1.0);
        let m = Metrics::mean(&[all, none]);
        assert!(close(m.ndcg_10, 0.5));
        assert!(close(m.recall_2, 0.5));
        assert!(close(m.recall_100, 0.5));
        assert!(close(m.mrr_10, 0.5));
        assert_eq!(Metrics::mean(&[]), Metrics::default());
        let json = serde_json::to_string(&m).unwrap();
        let keys: Vec<&str> = m.entries().iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "ndcg@10",
                "recall@2",
                "recall@5",
                "recall@10",
                "recall@100",
                "mrr@10"
            ]
        );
        let mut at = 0;
        for key in keys {
            let found = json[at..].find(&format!("\"{key}\":")).expect(key);
            at += found;
        }
        let back: Metrics = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }

    fn ranking_and_judgments() -> impl Strategy<Value = (Vec<String>, HashMap<String, u32>)> {
        (
            proptest::sample::subsequence((0..40).collect::<Vec<u32>>(), 0..40).prop_shuffle(),
            proptest::collection::hash_map(0u32..40, 0u32..4, 0..15),
        )
            .prop_map(|(order, grades)| {
                let ranked = order.iter().map(|d| format!("d{d}")).collect();
                let judged = grades
                    .into_iter()
                    .map(|(d, g)| (format!("d{d}"), g))
                    .collect();
                (ranked, judged)
            })
    }

    proptest! {
        #[test]
        fn metrics_are_bounded_and_recall_grows((ranked, judged) in ranking_and_judgments()) {
            let in_unit = |x: f64| (0.0..=1.0 + 1e-12).contains(&x);
            let mut last = 0.0;
            for k in [0usize, 1, 2, 3, 5, 10, 20, 100] {
                let n = ndcg_at(&ranked, &judged, k);
                let r = recall_at(&ranked, &judged, k);
                let m = mrr_at(&ranked, &judged, k);
                prop_assert!(in_unit(n), "ndcg@{k} = {n}");
                prop_assert!(in_unit(r), "recall@{k} = {r}");
                prop_assert!(in_unit(m), "mrr@{k} = {m}");
                prop_assert!(r >= last, "recall@{k} = {r} < {last}");
                last = r;
            }
            let q = QueryMetrics::compute(&ranked, &judged);
            prop_assert!(q.recall_2 <= q.recall_5 && q.recall_5 <= q.recall_10);
            prop_assert!(q.recall_10 <= q.recall_100);
        }

        #[test]
        fn percentile_stays_within_range(values in proptest::collection::vec(-1e6f64..1e6, 1..50), p in 0f64..=100.0) {
            let got = percentile(&values, p);
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(got >= lo && got <= hi);
            prop_assert!(percentile(&values, 50.0) <= percentile(&values, 95.0));
        }
    }
}
