//! Bounded rerank: how deep to retrieve and how many hits a reranker may reorder, and applying
//! its scores to that head only (DESIGN step 5; seed 002, "Bounded reranking").
//!
//! A reranker orders what it is given; it cannot bring back a hit that was never retrieved.
//! Only the head moves, and each head place keeps its incoming score, so scores stay in rank
//! order and comparable with the tail's.

use serde::{Deserialize, Serialize};

use super::{sort_desc_stable, Candidate, Ranked};

/// Hits reordered in `default` mode.
pub const DEFAULT_RERANK_HEAD: usize = 10;
/// Hits reordered in `catalog` mode.
pub const CATALOG_RERANK_HEAD: usize = 50;
/// Catalog mode retrieves at least this many candidates...
pub const CATALOG_MIN_DEPTH: usize = 50;
/// ...and at most this many.
pub const CATALOG_MAX_DEPTH: usize = 200;

/// How much the reranker sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankMode {
    /// Retrieve `k`, rerank at most the first 10.
    #[default]
    Default,
    /// Retrieve `min(200, max(k, 50))`, rerank at most the first 50.
    Catalog,
}

/// Candidate depth and head size for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RerankPlan {
    /// Candidates to retrieve.
    pub retrieve_depth: usize,
    /// Candidates the reranker reorders (never more than are retrieved).
    pub rerank_count: usize,
}

/// The plan for a request of `k` hits.
pub fn rerank_plan(mode: RerankMode, k: usize) -> RerankPlan {
    let (retrieve_depth, head) = match mode {
        RerankMode::Default => (k, DEFAULT_RERANK_HEAD),
        RerankMode::Catalog => (
            k.clamp(CATALOG_MIN_DEPTH, CATALOG_MAX_DEPTH),
            CATALOG_RERANK_HEAD,
        ),
    };
    RerankPlan {
        retrieve_depth,
        rerank_count: head.min(retrieve_depth),
    }
}

/// What the reranker did to one hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RerankExplain {
    /// The reranker's score; `None` outside the head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank_score: Option<f64>,
    /// The hit's score before the stage.
    pub score_before: f64,
    /// One-based rank before and after.
    pub rank_before: usize,
    pub rank_after: usize,
    /// `rank_before − rank_after`: positive when the reranker moved the hit up.
    pub delta: i64,
}

/// Reorders the first `head_scores.len()` candidates by those scores (best first, ties keep
/// the incoming order; NaN sorts last) and leaves the rest in place. Scores beyond the
/// candidates are ignored. Each head place keeps its incoming score.
pub fn apply_rerank(
    candidates: &[Candidate<'_>],
    head_scores: &[f64],
) -> Vec<Ranked<RerankExplain>> {
    let head = head_scores.len().min(candidates.len());
    let mut order: Vec<usize> = (0..head).collect();
    sort_desc_stable(&mut order, |&i| head_scores[i]);
    order.extend(head..candidates.len());
    order
        .into_iter()
        .enumerate()
        .map(|(place, index)| Ranked {
            index,
            score: candidates[place].score,
            explain: RerankExplain {
                rerank_score: head_scores.get(index).copied().filter(|_| index < head),
                score_before: candidates[index].score,
                rank_before: index + 1,
                rank_after: place + 1,
                delta: index as i64 - place as i64,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_seed_table() {
        let plan = |mode, k| {
            let p = rerank_plan(mode, k);
            (p.retrieve_depth, p.rerank_count)
        };
        assert_eq!(plan(RerankMode::Default, 20), (20, 10));
        assert_eq!(plan(RerankMode::Default, 5), (5, 5));
        assert_eq!(plan(RerankMode::Catalog, 10), (50, 50));
        assert_eq!(plan(RerankMode::Catalog, 120), (120, 50));
        assert_eq!(plan(RerankMode::Catalog, 500), (200, 50));
    }

    #[test]
    fn only_the_head_moves_and_reports_its_delta() {
        let ids = ["a", "b", "c", "d"];
        let c: Vec<Candidate> = ids
            .iter()
            .zip([1.0, 0.8, 0.6, 0.4])
            .map(|(id, s)| Candidate::new(id, s))
            .collect();
        let out = apply_rerank(&c, &[0.1, 0.3, 0.9]);
        let order: Vec<&str> = out.iter().map(|r| c[r.index].id).collect();
        assert_eq!(order, vec!["c", "b", "a", "d"]);
        let scores: Vec<f64> = out.iter().map(|r| r.score).collect();
        assert_eq!(scores, vec![1.0, 0.8, 0.6, 0.4]);
        let e = &out[0].explain;
        assert_eq!((e.rank_before, e.rank_after, e.delta), (3, 1, 2));
        assert_eq!(e.rerank_score, Some(0.9));
        assert_eq!(e.score_before, 0.6);
        assert_eq!(out[2].explain.delta, -2);
        assert_eq!(out[3].explain.rerank_score, None);
        assert_eq!(out[3].explain.delta, 0);
        // More scores than candidates, and no scores at all.
        assert_eq!(apply_rerank(&c[..1], &[0.5, 0.7]).len(), 1);
        let same: Vec<usize> = apply_rerank(&c, &[]).iter().map(|r| r.index).collect();
        assert_eq!(same, vec![0, 1, 2, 3]);
    }
}
