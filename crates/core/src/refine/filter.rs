//! Hard-AND source filters (DESIGN step 5; seed 002, "Filters and facets"): `extras` values
//! by case-insensitive equality of key and value, tags (every one, in any case), a date range
//! and a path prefix. Every clause must hold.
//!
//! Applied late, after rerank, the filter only removes: it never retrieves again to fill the
//! page, and it says how many hits it removed. The same predicate can scope candidates
//! earlier (before ranking) when a caller wants a filter that does not shrink the page.

use serde::Serialize;

use super::Candidate;
use crate::model::{Envelope, Query};

/// A conjunction of clauses over a source's envelope: `key = value` over `extras` and tags,
/// compared case-insensitively, a date range and a path prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SourceFilter {
    /// Lowercased `(key, value)` clauses, sorted and deduplicated.
    clauses: Vec<(String, String)>,
    /// Lowercased tags, every one required.
    tags: Vec<String>,
    /// Inclusive bounds on the source's date (Unix seconds); an undated source fails a range.
    date_from: Option<i64>,
    date_to: Option<i64>,
    path_prefix: Option<String>,
}

impl SourceFilter {
    /// A filter requiring every `(key, value)` pair of `extras`. An empty filter keeps
    /// everything.
    pub fn new<K: AsRef<str>, V: AsRef<str>>(clauses: impl IntoIterator<Item = (K, V)>) -> Self {
        let mut clauses: Vec<(String, String)> = clauses
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_lowercase(), v.as_ref().to_lowercase()))
            .collect();
        clauses.sort();
        clauses.dedup();
        SourceFilter {
            clauses,
            ..SourceFilter::default()
        }
    }

    /// Every filter a query carries.
    pub fn of(query: &Query) -> Self {
        SourceFilter::new(query.filters.iter())
            .with_tags(&query.tags)
            .with_dates(query.date_from, query.date_to)
            .with_path_prefix(query.path_prefix.as_deref())
    }

    /// Also requires each of `tags` (in any case).
    pub fn with_tags(mut self, tags: &[String]) -> Self {
        self.tags = tags.iter().map(|t| t.to_lowercase()).collect();
        self.tags.sort();
        self.tags.dedup();
        self
    }

    /// Also requires a date within `from..=to` (Unix seconds; either bound may be open).
    pub fn with_dates(mut self, from: Option<i64>, to: Option<i64>) -> Self {
        (self.date_from, self.date_to) = (from, to);
        self
    }

    /// Also requires a path starting with `prefix`.
    pub fn with_path_prefix(mut self, prefix: Option<&str>) -> Self {
        self.path_prefix = prefix.filter(|p| !p.is_empty()).map(str::to_string);
        self
    }

    /// True when the filter has no clause.
    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty()
            && self.tags.is_empty()
            && self.date_from.is_none()
            && self.date_to.is_none()
            && self.path_prefix.is_none()
    }

    /// The `extras` clauses as `(key, value)`, lowercased.
    pub fn clauses(&self) -> &[(String, String)] {
        &self.clauses
    }

    /// Whether a source with this envelope passes: usable as a prefilter on views.
    pub fn admits(&self, envelope: &Envelope) -> bool {
        self.passes(&Candidate::new(&envelope.path, 0.0).with_envelope(envelope))
    }

    /// Whether `candidate` (its extras, tags, date and path) passes every clause.
    pub fn passes(&self, candidate: &Candidate<'_>) -> bool {
        let extras = candidate.extras;
        let extras_hold = self.clauses.iter().all(|(key, value)| {
            extras
                .iter()
                .any(|(k, v)| k.to_lowercase() == *key && v.to_lowercase() == *value)
        });
        let tags_hold = self
            .tags
            .iter()
            .all(|t| candidate.tags.iter().any(|have| have.to_lowercase() == *t));
        let dated = self.date_from.is_none() && self.date_to.is_none()
            || candidate.date.is_some_and(|d| {
                self.date_from.is_none_or(|from| d >= from) && self.date_to.is_none_or(|to| d <= to)
            });
        let placed = self
            .path_prefix
            .as_deref()
            .is_none_or(|prefix| candidate.path.starts_with(prefix));
        extras_hold && tags_hold && dated && placed
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

/// Keeps the candidates that pass every clause, in order.
pub fn apply_filter(candidates: &[Candidate<'_>], filter: &SourceFilter) -> Filtered {
    let kept: Vec<usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| filter.passes(c))
        .map(|(i, _)| i)
        .collect();
    Filtered {
        filtered_out: candidates.len() - kept.len(),
        kept,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn extras(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn passes(filter: &SourceFilter, extras: &BTreeMap<String, String>) -> bool {
        filter.passes(&Candidate::new("x", 1.0).with_extras(extras))
    }

    #[test]
    fn every_clause_must_hold_in_any_case() {
        let filter = SourceFilter::new([("locale", "IT"), ("Product", "identity")]);
        assert!(passes(
            &filter,
            &extras(&[("locale", "it"), ("product", "Identity")])
        ));
        assert!(passes(
            &filter,
            &extras(&[("LOCALE", "It"), ("product", "identity"), ("team", "x")])
        ));
        assert!(!passes(&filter, &extras(&[("locale", "it")])));
        assert!(!passes(
            &filter,
            &extras(&[("locale", "it"), ("product", "billing")])
        ));
        assert!(!passes(
            &filter,
            &extras(&[("locale", "italian"), ("product", "identity")])
        ));
        assert!(passes(&SourceFilter::default(), &BTreeMap::new()));
    }

    #[test]
    fn tags_dates_and_paths_narrow_by_the_envelope() {
        let envelope = |path: &str, date: Option<&str>, tags: &[&str]| Envelope {
            path: path.to_string(),
            date: date.map(str::to_string),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..Envelope::default()
        };
        let journal = envelope("journal/2024/05.md", Some("2024-05-10"), &["Work", "ops"]);
        let undated = envelope("notes/a.md", None, &["work"]);
        let day = 86_400;
        let may_10 = crate::parse_date("2024-05-10").unwrap();

        let work = SourceFilter::default().with_tags(&["WORK".to_string()]);
        assert!(work.admits(&journal) && work.admits(&undated));
        let both = SourceFilter::default().with_tags(&["work".into(), "home".into()]);
        assert!(!both.admits(&journal));

        let may = SourceFilter::default().with_dates(Some(may_10 - day), Some(may_10));
        assert!(may.admits(&journal), "bounds are inclusive");
        assert!(!may.admits(&undated), "a range leaves undated sources out");
        let later = SourceFilter::default().with_dates(Some(may_10 + 1), None);
        assert!(!later.admits(&journal));

        let folder = SourceFilter::default().with_path_prefix(Some("journal/"));
        assert!(folder.admits(&journal) && !folder.admits(&undated));
        assert!(SourceFilter::default()
            .with_path_prefix(Some(""))
            .is_empty());
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
        let out = apply_filter(&c, &SourceFilter::new([("locale", "it")]));
        assert_eq!(out.kept, vec![1, 3]);
        assert_eq!(out.filtered_out, 2);
    }
}
