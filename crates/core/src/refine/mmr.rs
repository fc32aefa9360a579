//! Maximal marginal relevance: trades relevance against similarity to hits already placed
//! (DESIGN step 5, `mmr_lambda` 0.7; seed 004, step 10).
//!
//! Each position takes the candidate with the best `λ · relevance − (1 − λ) · max_similarity`,
//! where relevance is the score divided by the best score and max_similarity is the largest
//! similarity to a hit already placed. Similarity is the cosine of the vectors when every
//! candidate has one (of one dimension; opposite directions count as 0), otherwise the
//! Jaccard overlap of their word sets.

use serde::{Deserialize, Serialize};

use super::{finite_or_worst, hash64, top_divisor, words, Candidate, Ranked};

/// Weight of relevance against diversity: 1 keeps the incoming order.
pub const DEFAULT_MMR_LAMBDA: f64 = 0.7;

/// Settings of the MMR stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MmrParams {
    /// Range 0–1.
    pub mmr_lambda: f64,
}

impl Default for MmrParams {
    fn default() -> Self {
        MmrParams {
            mmr_lambda: DEFAULT_MMR_LAMBDA,
        }
    }
}

/// How two candidates were compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Similarity {
    /// Cosine of the candidates' vectors.
    Cosine,
    /// Shared words over all words of the two texts.
    Jaccard,
}

/// Why a hit took its place in the MMR order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MmrExplain {
    /// Score divided by the best score.
    pub relevance: f64,
    pub similarity: Similarity,
    /// Largest similarity to a hit placed before it; `None` past the diversified head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_similarity: Option<f64>,
    /// The hit placed before it that it is most similar to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similar_to: Option<String>,
    /// `λ · relevance − (1 − λ) · max_similarity` when it was picked; `None` past the head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mmr: Option<f64>,
}

/// Reorders the first `head` positions by MMR (O(n · head) similarities); the candidates not
/// picked follow in their incoming order. Scores are unchanged, so the result is no longer
/// sorted by score. Ties go to the better-ranked candidate.
pub fn mmr(
    candidates: &[Candidate<'_>],
    params: &MmrParams,
    head: usize,
) -> Vec<Ranked<MmrExplain>> {
    let lambda = params.mmr_lambda;
    let divisor = top_divisor(candidates.iter().map(|c| c.score));
    let relevance: Vec<f64> = candidates
        .iter()
        .map(|c| finite_or_worst(c.score / divisor))
        .collect();
    let measure = Measure::new(candidates);
    let kind = measure.kind();

    // Per candidate: largest similarity to the picked ones, and which one it was.
    let mut nearest: Vec<(f64, Option<usize>)> = vec![(0.0, None); candidates.len()];
    let mut picked = vec![false; candidates.len()];
    let mut out = Vec::with_capacity(candidates.len());
    for _ in 0..head.min(candidates.len()) {
        let value = |i: usize| lambda * relevance[i] - (1.0 - lambda) * nearest[i].0;
        let mut best: Option<(usize, f64)> = None;
        for i in (0..candidates.len()).filter(|&i| !picked[i]) {
            let v = value(i);
            if best.is_none_or(|(_, bv)| v > bv) {
                best = Some((i, v));
            }
        }
        let Some((choice, v)) = best else { break };
        picked[choice] = true;
        out.push(Ranked {
            index: choice,
            score: candidates[choice].score,
            explain: MmrExplain {
                relevance: relevance[choice],
                similarity: kind,
                max_similarity: Some(nearest[choice].0),
                similar_to: nearest[choice].1.map(|j| candidates[j].id.to_string()),
                mmr: Some(v),
            },
        });
        for i in (0..candidates.len()).filter(|&i| !picked[i]) {
            let s = measure.similarity(i, choice);
            if nearest[i].1.is_none() || s > nearest[i].0 {
                nearest[i] = (s, Some(choice));
            }
        }
    }
    for (i, c) in candidates.iter().enumerate().filter(|(i, _)| !picked[*i]) {
        out.push(Ranked {
            index: i,
            score: c.score,
            explain: MmrExplain {
                relevance: relevance[i],
                similarity: kind,
                max_similarity: None,
                similar_to: None,
                mmr: None,
            },
        });
    }
    out
}

/// Precomputed per-candidate data for one similarity.
enum Measure<'a> {
    /// Vectors and their norms.
    Cosine(Vec<(&'a [f32], f64)>),
    /// Sorted, deduplicated word hashes.
    Jaccard(Vec<Vec<u64>>),
}

impl<'a> Measure<'a> {
    fn new(candidates: &[Candidate<'a>]) -> Self {
        let dim = candidates.first().and_then(|c| c.vector).map(<[f32]>::len);
        let all_vectors = dim.is_some_and(|d| d > 0)
            && candidates.iter().all(|c| c.vector.map(<[f32]>::len) == dim);
        if all_vectors {
            return Measure::Cosine(
                candidates
                    .iter()
                    .filter_map(|c| c.vector)
                    .map(|v| (v, dot(v, v).sqrt()))
                    .collect(),
            );
        }
        Measure::Jaccard(
            candidates
                .iter()
                .map(|c| {
                    let mut set: Vec<u64> = words(c.text).map(|w| hash64(w.as_bytes())).collect();
                    set.sort_unstable();
                    set.dedup();
                    set
                })
                .collect(),
        )
    }

    fn kind(&self) -> Similarity {
        match self {
            Measure::Cosine(_) => Similarity::Cosine,
            Measure::Jaccard(_) => Similarity::Jaccard,
        }
    }

    fn similarity(&self, a: usize, b: usize) -> f64 {
        match self {
            Measure::Cosine(v) => {
                let ((x, nx), (y, ny)) = (v[a], v[b]);
                if nx > 0.0 && ny > 0.0 {
                    // Opposite directions count as unrelated, not as a diversity bonus.
                    (dot(x, y) / (nx * ny)).max(0.0)
                } else {
                    0.0
                }
            }
            Measure::Jaccard(sets) => jaccard(&sets[a], &sets[b]),
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
}

/// `|a ∩ b| / |a ∪ b|` of two sorted sets; 0 when both are empty.
fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - shared;
    if union == 0 {
        0.0
    } else {
        shared as f64 / union as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(c: &[Candidate], lambda: f64) -> Vec<String> {
        mmr(c, &MmrParams { mmr_lambda: lambda }, c.len())
            .iter()
            .map(|r| c[r.index].id.to_string())
            .collect()
    }

    #[test]
    fn near_copy_yields_to_a_different_hit() {
        let (a, a2, b) = ([1.0, 0.0], [0.99, 0.05], [0.0, 1.0]);
        let c = [
            Candidate::new("a", 1.0).with_vector(&a),
            Candidate::new("a2", 0.95).with_vector(&a2),
            Candidate::new("b", 0.8).with_vector(&b),
        ];
        assert_eq!(order(&c, 0.7), vec!["a", "b", "a2"]);
        // λ = 1 is relevance alone.
        assert_eq!(order(&c, 1.0), vec!["a", "a2", "b"]);
        let out = mmr(&c, &MmrParams::default(), 3);
        assert_eq!(out[0].explain.similarity, Similarity::Cosine);
        assert_eq!(out[2].explain.similar_to.as_deref(), Some("a"));
        assert!(out[2].explain.max_similarity.unwrap() > 0.99);
        assert_eq!(out[2].score, 0.95);
    }

    #[test]
    fn without_every_vector_it_compares_words() {
        let v = [1.0, 0.0];
        let c = [
            Candidate::new("a", 1.0)
                .with_text("restore a backup from the snapshot")
                .with_vector(&v),
            Candidate::new("a2", 0.95).with_text("restore the backup from a snapshot"),
            Candidate::new("b", 0.8).with_text("configure connection pooling"),
        ];
        assert_eq!(order(&c, 0.7), vec!["a", "b", "a2"]);
        let out = mmr(&c, &MmrParams::default(), 3);
        assert_eq!(out[0].explain.similarity, Similarity::Jaccard);
        assert_eq!(out[2].explain.max_similarity, Some(1.0));
    }

    #[test]
    fn only_the_head_is_diversified() {
        let (a, a2, b, d) = ([1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.7, 0.7]);
        let c = [
            Candidate::new("a", 1.0).with_vector(&a),
            Candidate::new("a2", 0.9).with_vector(&a2),
            Candidate::new("d", 0.85).with_vector(&d),
            Candidate::new("b", 0.8).with_vector(&b),
        ];
        let out = mmr(&c, &MmrParams::default(), 2);
        let ids: Vec<&str> = out.iter().map(|r| c[r.index].id).collect();
        assert_eq!(ids, vec!["a", "b", "a2", "d"]);
        assert_eq!(out[2].explain.mmr, None);
        assert!(mmr(&[], &MmrParams::default(), 10).is_empty());
    }
}
