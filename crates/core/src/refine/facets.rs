//! Facets: how many of the given hits carry each `extras` value and each tag.
//!
//! Counted over the hits a caller passes (the returned page), not over the corpus (seed 002,
//! "Filters and facets"): they describe this answer, not global counts.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Candidate;

/// One value and how many hits carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FacetValue {
    pub value: String,
    pub count: usize,
}

/// The values of one `extras` key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Facet {
    pub key: String,
    /// Most frequent first; ties by value.
    pub values: Vec<FacetValue>,
}

/// Facet counts over a set of hits.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Facets {
    /// One facet per `extras` key, keys in alphabetical order.
    pub extras: Vec<Facet>,
    /// Tags, most frequent first; ties by tag.
    pub tags: Vec<FacetValue>,
}

/// Counts each `extras` value per key and each tag over `(extras, tags)` of the hits, e.g. the
/// envelopes of a page. A tag listed twice on one hit counts once. Values are counted as
/// written.
pub fn facets<'a>(
    hits: impl IntoIterator<Item = (&'a BTreeMap<String, String>, &'a [String])>,
) -> Facets {
    let mut extras: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut tags: BTreeMap<&str, usize> = BTreeMap::new();
    for (hit_extras, hit_tags) in hits {
        for (k, v) in hit_extras {
            *extras.entry(k).or_default().entry(v).or_default() += 1;
        }
        let mut seen: Vec<&str> = hit_tags.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for t in seen {
            *tags.entry(t).or_default() += 1;
        }
    }
    Facets {
        extras: extras
            .into_iter()
            .map(|(key, values)| Facet {
                key: key.to_string(),
                values: by_count(values),
            })
            .collect(),
        tags: by_count(tags),
    }
}

/// Facets of a slice of candidates.
pub fn facets_of(candidates: &[Candidate<'_>]) -> Facets {
    facets(candidates.iter().map(|c| (c.extras, c.tags)))
}

fn by_count(counts: BTreeMap<&str, usize>) -> Vec<FacetValue> {
    let mut values: Vec<FacetValue> = counts
        .into_iter()
        .map(|(value, count)| FacetValue {
            value: value.to_string(),
            count,
        })
        .collect();
    // The map iterates values in order, and the sort is stable: ties stay alphabetical.
    values.sort_by_key(|v| std::cmp::Reverse(v.count));
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sorted_by_count_then_value() {
        let e = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let (a, b, c) = (
            e(&[("locale", "it"), ("product", "identity")]),
            e(&[("locale", "en"), ("product", "identity")]),
            e(&[("locale", "it")]),
        );
        let t = |tags: &[&str]| -> Vec<String> { tags.iter().map(|s| s.to_string()).collect() };
        let (ta, tb, tc) = (t(&["ops", "db", "ops"]), t(&["db"]), t(&["auth"]));
        let cands = [
            Candidate::new("a", 1.0).with_extras(&a).with_tags(&ta),
            Candidate::new("b", 0.9).with_extras(&b).with_tags(&tb),
            Candidate::new("c", 0.8).with_extras(&c).with_tags(&tc),
        ];
        let f = facets_of(&cands);
        let show = |values: &[FacetValue]| -> Vec<String> {
            values
                .iter()
                .map(|v| format!("{}:{}", v.value, v.count))
                .collect()
        };
        assert_eq!(f.extras.len(), 2);
        assert_eq!(f.extras[0].key, "locale");
        assert_eq!(show(&f.extras[0].values), vec!["it:2", "en:1"]);
        assert_eq!(f.extras[1].key, "product");
        assert_eq!(show(&f.extras[1].values), vec!["identity:2"]);
        assert_eq!(show(&f.tags), vec!["db:2", "auth:1", "ops:1"]);
        assert_eq!(facets_of(&[]), Facets::default());
    }
}
