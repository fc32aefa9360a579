//! Query-gated personalization (DESIGN step 5; seed 002, "Query-gated personalization").
//!
//! `personal = (1 − λ(q)) · retrieve^ + λ(q) · preference^`, both min-max normalised over the
//! hits being personalised. λ depends on the query alone: 0 when a token carries a digit (a
//! code such as `SEC-204` is navigational), else 0.85 / 0.50 / 0.25 / 0.10 for 1 / 2 / 3 / 4+
//! content tokens, so a short broad query leans on taste and a detailed one on relevance.
//! A hit's preference is the sum, over its attributes (extras pairs and tags), of the user's
//! direct `PREFERS` weights plus one `0.5^(age_days / 14)` per past interaction with an item
//! carrying that attribute. Taste reorders, it never removes: a missing user, λ = 0 or no
//! preference signal leaves the incoming order and scores as they were.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{sort_desc_stable, Candidate, Ranked};

/// λ for 1, 2, 3 and 4 or more content tokens.
pub const DEFAULT_PERSONAL_LAMBDAS: [f64; 4] = [0.85, 0.50, 0.25, 0.10];
/// Age, in days, at which an interaction counts half.
pub const DEFAULT_INTERACTION_HALF_LIFE_DAYS: f64 = 14.0;
/// The `extras` key naming a hit's catalog node.
pub const NODE_ID_KEY: &str = "node_id";

/// Words that carry no topic of their own and do not count as content tokens.
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
    "how", "i", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "that",
    "the", "this", "to", "was", "we", "what", "when", "where", "which", "who", "why", "with",
    "you", "your",
];

/// Settings of the personalization stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PersonalParams {
    /// λ for 1, 2, 3 and 4+ content tokens. Each in range 0–1.
    pub personal_lambdas: [f64; 4],
    /// Range 1–3 650 days.
    pub interaction_half_life_days: f64,
    /// Personalise only hits with an `extras.node_id` (catalog items); the others keep their
    /// places.
    pub catalog_only: bool,
}

impl Default for PersonalParams {
    fn default() -> Self {
        PersonalParams {
            personal_lambdas: DEFAULT_PERSONAL_LAMBDAS,
            interaction_half_life_days: DEFAULT_INTERACTION_HALF_LIFE_DAYS,
            catalog_only: false,
        }
    }
}

/// Something about an item a user can prefer. Built lowercased, so matching ignores case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Attr {
    /// An `extras` pair, e.g. `level = beginner`.
    Extra { key: String, value: String },
    /// A tag.
    Tag(String),
}

impl Attr {
    /// An `extras` pair, lowercased.
    pub fn extra(key: &str, value: &str) -> Attr {
        Attr::Extra {
            key: key.to_lowercase(),
            value: value.to_lowercase(),
        }
    }

    /// A tag, lowercased.
    pub fn tag(tag: &str) -> Attr {
        Attr::Tag(tag.to_lowercase())
    }
}

/// One past interaction (`USER → EVENT → ITEM`): when, and the attributes of the item.
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction {
    /// Unix seconds.
    pub at: i64,
    pub attrs: Vec<Attr>,
}

/// What is known of a user's taste.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserProfile {
    /// Direct `USER -PREFERS→ ATTR` edges with their weights.
    pub prefers: Vec<(Attr, f64)>,
    pub interactions: Vec<Interaction>,
}

/// How the query gates personalization.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryGate {
    pub lambda: f64,
    pub content_tokens: usize,
    /// A token carries a digit, which turns personalization off.
    pub digit_token: bool,
}

/// Whether personalization ran for a query, and why not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PersonalSummary {
    pub gate: QueryGate,
    pub applied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How one hit was personalised. The numbers are `None` when the stage did not apply to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PersonalExplain {
    pub lambda: f64,
    /// Incoming score, min-max normalised over the personalised hits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieve: Option<f64>,
    /// Summed preference weight of the hit's attributes, before normalisation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preference_raw: Option<f64>,
    /// Preference, min-max normalised over the personalised hits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preference: Option<f64>,
    /// `(1 − λ) · retrieve + λ · preference`: the key the hits were ordered by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub personal: Option<f64>,
}

/// The personalised order and the per-query summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Personalized {
    pub ranked: Vec<Ranked<PersonalExplain>>,
    pub summary: PersonalSummary,
}

/// The query's content tokens: whitespace-separated words, trimmed of punctuation at both
/// ends and lowercased, without stop words.
pub fn content_tokens(query: &str) -> Vec<String> {
    query_tokens(query)
        .filter(|t| !STOP_WORDS.contains(&t.as_str()))
        .collect()
}

fn query_tokens(query: &str) -> impl Iterator<Item = String> + '_ {
    query
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
}

/// λ for a query: 0 with a digit-bearing token or no content token, else the entry of
/// `lambdas` for 1, 2, 3 or 4+ content tokens.
pub fn personalization_lambda(query: &str, lambdas: &[f64; 4]) -> QueryGate {
    let digit_token = query_tokens(query).any(|t| t.chars().any(|c| c.is_numeric()));
    let content = content_tokens(query).len();
    let lambda = match content {
        _ if digit_token => 0.0,
        0 => 0.0,
        n => lambdas[n.min(4) - 1],
    };
    QueryGate {
        lambda,
        content_tokens: content,
        digit_token,
    }
}

/// Weight per attribute: direct preferences plus interactions decayed by their age at `now`
/// (future interactions count fully).
pub fn preference_weights(
    user: &UserProfile,
    now: i64,
    half_life_days: f64,
) -> BTreeMap<Attr, f64> {
    let mut weights: BTreeMap<Attr, f64> = BTreeMap::new();
    for (attr, w) in &user.prefers {
        *weights.entry(attr.clone()).or_default() += w;
    }
    for event in &user.interactions {
        let age_days = now.saturating_sub(event.at).max(0) as f64 / 86_400.0;
        let decay = 0.5_f64.powf(age_days / half_life_days.max(f64::MIN_POSITIVE));
        for attr in &event.attrs {
            *weights.entry(attr.clone()).or_default() += decay;
        }
    }
    weights
}

/// A candidate's summed preference: each distinct attribute (extras pair or tag) counts once.
fn preference_of(c: &Candidate<'_>, weights: &BTreeMap<Attr, f64>) -> f64 {
    let mut attrs: Vec<Attr> = c
        .extras
        .iter()
        .map(|(k, v)| Attr::extra(k, v))
        .chain(c.tags.iter().map(|t| Attr::tag(t)))
        .collect();
    attrs.sort();
    attrs.dedup();
    attrs.iter().filter_map(|a| weights.get(a)).sum()
}

/// Reorders the hits by `(1 − λ) · retrieve^ + λ · preference^`. Personalised hits trade
/// places among themselves; each place keeps its incoming score, so scores stay in order and
/// on the incoming scale (the explain carries the blend). With `catalog_only`, hits without
/// an `extras.node_id` keep their places.
pub fn personalize(
    candidates: &[Candidate<'_>],
    query: &str,
    user: Option<&UserProfile>,
    params: &PersonalParams,
    now: i64,
) -> Personalized {
    let gate = personalization_lambda(query, &params.personal_lambdas);
    let lambda = gate.lambda;
    let unchanged = |reason: &str, gate: QueryGate| Personalized {
        ranked: in_place(candidates, lambda),
        summary: PersonalSummary {
            gate,
            applied: false,
            reason: Some(reason.to_string()),
        },
    };
    let Some(user) = user else {
        return unchanged("no user", gate);
    };
    if lambda <= 0.0 {
        let why = if gate.digit_token {
            "the query has a digit-bearing token"
        } else if gate.content_tokens == 0 {
            "the query has no content token"
        } else {
            "lambda is 0"
        };
        return unchanged(why, gate);
    }
    let slots: Vec<usize> = (0..candidates.len())
        .filter(|&i| !params.catalog_only || candidates[i].extras.contains_key(NODE_ID_KEY))
        .collect();
    if slots.is_empty() {
        return unchanged("no catalog hit", gate);
    }
    let weights = preference_weights(user, now, params.interaction_half_life_days);
    let raw_pref: Vec<f64> = slots
        .iter()
        .map(|&i| preference_of(&candidates[i], &weights))
        .collect();
    let retrieve = min_max(slots.iter().map(|&i| candidates[i].score).collect());
    let Some(pref) = spread(&raw_pref).then(|| min_max(raw_pref.clone())) else {
        return unchanged("no preference signal among the hits", gate);
    };

    // Order the personalised hits by the blend, then seat them in the slots they came from.
    let mut order: Vec<(usize, f64)> = (0..slots.len())
        .map(|j| (j, (1.0 - lambda) * retrieve[j] + lambda * pref[j]))
        .collect();
    sort_desc_stable(&mut order, |x| x.1);
    let mut ranked = in_place(candidates, lambda);
    for (&slot, &(j, personal)) in slots.iter().zip(&order) {
        let index = slots[j];
        ranked[slot] = Ranked {
            index,
            score: candidates[slot].score,
            explain: PersonalExplain {
                lambda,
                retrieve: Some(retrieve[j]),
                preference_raw: Some(raw_pref[j]),
                preference: Some(pref[j]),
                personal: Some(personal),
            },
        };
    }
    Personalized {
        ranked,
        summary: PersonalSummary {
            gate,
            applied: true,
            reason: None,
        },
    }
}

/// The incoming order with empty records: what hits the stage does not touch look like.
fn in_place(candidates: &[Candidate<'_>], lambda: f64) -> Vec<Ranked<PersonalExplain>> {
    candidates
        .iter()
        .enumerate()
        .map(|(index, c)| Ranked {
            index,
            score: c.score,
            explain: PersonalExplain {
                lambda,
                retrieve: None,
                preference_raw: None,
                preference: None,
                personal: None,
            },
        })
        .collect()
}

/// True when the finite values are not all equal.
fn spread(values: &[f64]) -> bool {
    let mut finite = values.iter().filter(|v| v.is_finite());
    match finite.next() {
        Some(first) => finite.any(|v| v != first),
        None => false,
    }
}

/// `(x − min) / (max − min)`; all ones when every value is equal, 0 for non-finite values.
fn min_max(values: Vec<f64>) -> Vec<f64> {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let min = finite.clone().fold(f64::INFINITY, f64::min);
    let max = finite.fold(f64::NEG_INFINITY, f64::max);
    values
        .into_iter()
        .map(|v| match v {
            _ if !v.is_finite() => 0.0,
            _ if max > min => (v - min) / (max - min),
            _ => 1.0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    #[test]
    fn lambda_follows_the_seed_table() {
        let l = |q: &str| personalization_lambda(q, &DEFAULT_PERSONAL_LAMBDAS).lambda;
        assert_eq!(l("security"), 0.85);
        assert_eq!(l("security course"), 0.50);
        assert_eq!(l("security course beginner"), 0.25);
        assert_eq!(l("security course for a beginner"), 0.25);
        assert_eq!(l("advanced security course beginner"), 0.10);
        assert_eq!(l("one two three four five six"), 0.10);
        assert_eq!(l("SEC-204"), 0.0);
        assert_eq!(l("security course 2024"), 0.0);
        assert_eq!(l("the of and"), 0.0);
        assert_eq!(l(""), 0.0);
        assert_eq!(
            content_tokens("How do I reset MY password?"),
            ["reset", "password"]
        );
        let gate = personalization_lambda("SEC-204 course", &DEFAULT_PERSONAL_LAMBDAS);
        assert!(gate.digit_token);
        assert_eq!(gate.content_tokens, 2);
    }

    #[test]
    fn interactions_decay_with_a_fourteen_day_half_life() {
        let now = 100 * DAY;
        let user = UserProfile {
            prefers: vec![(Attr::tag("Security"), 1.0)],
            interactions: vec![
                Interaction {
                    at: now - 14 * DAY,
                    attrs: vec![Attr::extra("level", "Beginner")],
                },
                Interaction {
                    at: now,
                    attrs: vec![Attr::extra("level", "beginner"), Attr::tag("security")],
                },
            ],
        };
        let w = preference_weights(&user, now, DEFAULT_INTERACTION_HALF_LIFE_DAYS);
        assert_eq!(w[&Attr::tag("security")], 2.0);
        assert!((w[&Attr::extra("LEVEL", "beginner")] - 1.5).abs() < 1e-12);
    }

    struct Catalog {
        extras: Vec<BTreeMap<String, String>>,
    }

    impl Catalog {
        /// Four courses; the user prefers the `beginner` level, which only `c` and `d` have.
        fn new() -> Self {
            let item = |node: &str, level: &str| {
                BTreeMap::from([
                    (NODE_ID_KEY.to_string(), node.to_string()),
                    ("level".to_string(), level.to_string()),
                ])
            };
            Catalog {
                extras: vec![
                    item("n-a", "expert"),
                    item("n-b", "expert"),
                    item("n-c", "beginner"),
                    BTreeMap::from([("level".to_string(), "beginner".to_string())]),
                ],
            }
        }

        fn candidates(&self) -> Vec<Candidate<'_>> {
            ["a", "b", "c", "d"]
                .iter()
                .zip([1.0, 0.9, 0.8, 0.7])
                .zip(&self.extras)
                .map(|((id, score), e)| Candidate::new(id, score).with_extras(e))
                .collect()
        }
    }

    fn user() -> UserProfile {
        UserProfile {
            prefers: vec![(Attr::extra("level", "beginner"), 1.0)],
            interactions: Vec::new(),
        }
    }

    fn ids(c: &[Candidate], p: &Personalized) -> Vec<String> {
        p.ranked.iter().map(|r| c[r.index].id.to_string()).collect()
    }

    #[test]
    fn a_broad_query_follows_taste_and_a_detailed_one_relevance() {
        let catalog = Catalog::new();
        let c = catalog.candidates();
        let params = PersonalParams::default();
        let broad = personalize(&c, "security", Some(&user()), &params, 0);
        assert!(broad.summary.applied);
        // λ 0.85: retrieve^ = 1, 2/3, 1/3, 0; preference^ = 0, 0, 1, 1.
        assert_eq!(ids(&c, &broad), ["c", "d", "a", "b"]);
        let top = &broad.ranked[0];
        assert!((top.explain.personal.unwrap() - (0.15 / 3.0 + 0.85)).abs() < 1e-12);
        assert_eq!(top.explain.preference_raw, Some(1.0));
        // Each place keeps its incoming score.
        let scores: Vec<f64> = broad.ranked.iter().map(|r| r.score).collect();
        assert_eq!(scores, [1.0, 0.9, 0.8, 0.7]);
        // λ 0.10: a = 0.9, c = 0.9·1/3 + 0.1 = 0.4; relevance keeps the lead.
        let detailed = personalize(
            &c,
            "advanced security course for beginner engineers",
            Some(&user()),
            &params,
            0,
        );
        assert_eq!(ids(&c, &detailed), ["a", "b", "c", "d"]);
    }

    #[test]
    fn catalog_only_keeps_hits_without_node_id_in_place() {
        let catalog = Catalog::new();
        let c = catalog.candidates();
        let params = PersonalParams {
            catalog_only: true,
            ..PersonalParams::default()
        };
        let p = personalize(&c, "security", Some(&user()), &params, 0);
        assert_eq!(ids(&c, &p), ["c", "a", "b", "d"]);
        assert_eq!(p.ranked[3].explain.personal, None);
    }

    #[test]
    fn missing_user_lambda_zero_or_no_signal_leave_the_order() {
        let catalog = Catalog::new();
        let c = catalog.candidates();
        let params = PersonalParams::default();
        let keep = ["a", "b", "c", "d"];
        let none = personalize(&c, "security", None, &params, 0);
        assert_eq!(ids(&c, &none), keep);
        assert_eq!(none.summary.reason.as_deref(), Some("no user"));
        let code = personalize(&c, "SEC-204", Some(&user()), &params, 0);
        assert_eq!(ids(&c, &code), keep);
        assert!(!code.summary.applied);
        assert_eq!(code.summary.gate.lambda, 0.0);
        let zero = PersonalParams {
            personal_lambdas: [0.0; 4],
            ..PersonalParams::default()
        };
        assert_eq!(
            ids(&c, &personalize(&c, "security", Some(&user()), &zero, 0)),
            keep
        );
        let stranger = UserProfile::default();
        let flat = personalize(&c, "security", Some(&stranger), &params, 0);
        assert_eq!(ids(&c, &flat), keep);
        assert!(!flat.summary.applied);
        let scores: Vec<f64> = flat.ranked.iter().map(|r| r.score).collect();
        assert_eq!(scores, [1.0, 0.9, 0.8, 0.7]);
    }
}
