//! Hard-AND `extras` filters: every clause must hold, by case-insensitive equality of key and
//! value (DESIGN step 5; seed 002, "Filters and facets").
//!
//! Applied late, after rerank, the filter only removes: it never retrieves again to fill the
//! page, and it says how many hits it removed. The same predicate can scope candidates
//! earlier (before ranking) when a caller wants a filter that does not shrink the page.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Candidate;

/// A conjunction of `key = value` clauses over `extras`, compared case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ExtrasFilter {
    /// Lowercased `(key, value)` clauses, sorted and deduplicated.
    clauses: Vec<(String, String)>,
}

impl ExtrasFilter {
    /// A filter requiring every `(key, value)` pair. An empty filter keeps everything.
    pub fn new<K: AsRef<str>, V: AsRef<str>>(clauses: impl IntoIterator<Item = (K, V)>) -> Self {
        let mut clauses: Vec<(String, String)> = clauses
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_lowercase(), v.as_ref().to_lowercase()))
            .collect();
        clauses.sort();
        clauses.dedup();
        ExtrasFilter { clauses }
    }

    /// True when the filter has no clause.
    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty()
    }

    /// The clauses as `(key, value)`, lowercased.
    pub fn clauses(&self) -> &[(String, String)] {
        &self.clauses
    }

    /// Whether `extras` satisfies every clause: usable as a prefilter on envelopes.
    pub fn matches(&self, extras: &BTreeMap<String, String>) -> bool {
        self.clauses.iter().all(|(key, value)| {
            extras
                .iter()
                .any(|(k, v)| k.to_lowercase() == *key && v.to_lowercase() == *value)
        })
    }
}

/// What a late filter kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Filtered {
    /// Indices of the kept candidates, in their incoming order.
    pub kept: Vec<usize>,
    /// How many candidates the filter removed (the page is not refilled).
    pub filtered_out: usize,
}

/// Keeps the candidates whose extras match every clause, in order.
pub fn apply_filter(candidates: &[Candidate<'_>], filter: &ExtrasFilter) -> Filtered {
    let kept: Vec<usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| filter.matches(c.extras))
        .map(|(i, _)| i)
        .collect();
    Filtered {
        filtered_out: candidates.len() - kept.len(),
        kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extras(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_clause_must_hold_in_any_case() {
        let filter = ExtrasFilter::new([("locale", "IT"), ("Product", "identity")]);
        assert!(filter.matches(&extras(&[("locale", "it"), ("product", "Identity")])));
        assert!(filter.matches(&extras(&[
            ("LOCALE", "It"),
            ("product", "identity"),
            ("team", "x")
        ])));
        assert!(!filter.matches(&extras(&[("locale", "it")])));
        assert!(!filter.matches(&extras(&[("locale", "it"), ("product", "billing")])));
        assert!(!filter.matches(&extras(&[("locale", "italian"), ("product", "identity")])));
        assert!(ExtrasFilter::default().matches(&BTreeMap::new()));
    }

    #[test]
    fn late_filter_keeps_order_and_counts_the_rest() {
        let it = extras(&[("locale", "it")]);
        let en = extras(&[("locale", "en")]);
        let c = [
            Candidate::new("a", 1.0).with_extras(&en),
            Candidate::new("b", 0.9).with_extras(&it),
            Candidate::new("c", 0.8),
            Candidate::new("d", 0.7).with_extras(&it),
        ];
        let out = apply_filter(&c, &ExtrasFilter::new([("locale", "it")]));
        assert_eq!(out.kept, vec![1, 3]);
        assert_eq!(out.filtered_out, 2);
    }
}
