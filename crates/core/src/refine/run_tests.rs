//! The refinement stages through the real pipeline, on an in-memory store.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proptest::prelude::*;

use crate::model::{
    Channel, Envelope, Extent, FragmentKey, Query, RankedList, ScoredFragment, SourceKey,
};
use crate::pipeline::{search_with, ChannelOutcome, FragmentMeta, Retriever, SourceView};
use crate::refine::{
    Attr, Extensions, PluginHit, PluginRetriever, Refinement, RerankBackend, Reranker, SortOrder,
    UserProfile,
};
use crate::settings::Settings;

const DAY: i64 = 86_400;
const NOW: i64 = 20_000 * DAY;

/// Sources `s0..sN`, fragment `10·i + j` is fragment `j` of source `i`.
#[derive(Default)]
struct Store {
    lists: Vec<(Channel, Vec<u64>)>,
    sources: HashMap<u64, SourceView>,
    texts: HashMap<u64, String>,
}

impl Store {
    fn add(&mut self, i: u64, text: &str, date: Option<&str>, extras: &[(&str, &str)]) {
        self.sources.insert(
            i,
            SourceView {
                id: format!("s{i}"),
                envelope: Envelope {
                    title: format!("S{i}"),
                    path: format!("s{i}"),
                    date: date.map(str::to_string),
                    extras: extras
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    tags: extras
                        .iter()
                        .filter(|(k, _)| *k == "tag")
                        .map(|(_, v)| v.to_string())
                        .collect(),
                },
                summary: text.to_string(),
            },
        );
        self.texts.insert(10 * i, text.to_string());
    }
}

impl Retriever for Store {
    type Error = std::convert::Infallible;

    fn channels(&self) -> Vec<Channel> {
        self.lists.iter().map(|l| l.0).collect()
    }

    fn retrieve(
        &self,
        channel: Channel,
        _: &Query,
        _: &Settings,
        depth: usize,
    ) -> Result<ChannelOutcome, Self::Error> {
        let keys = &self.lists.iter().find(|l| l.0 == channel).unwrap().1;
        Ok(ChannelOutcome::Ran(RankedList::new(
            channel,
            keys.iter()
                .take(depth)
                .map(|&k| ScoredFragment {
                    fragment: FragmentKey(k),
                    score: 1.0,
                })
                .collect(),
        )))
    }

    fn fragment_meta(
        &self,
        fragments: &[FragmentKey],
    ) -> Result<Vec<Option<FragmentMeta>>, Self::Error> {
        Ok(fragments
            .iter()
            .map(|f| {
                Some(FragmentMeta {
                    source: Some(SourceKey(f.0 / 10)),
                    ordinal: (f.0 % 10) as u32,
                })
            })
            .collect())
    }

    fn source(&self, source: SourceKey) -> Result<Option<SourceView>, Self::Error> {
        Ok(self.sources.get(&source.0).cloned())
    }

    fn fragment_text(&self, fragment: FragmentKey) -> Result<Option<String>, Self::Error> {
        Ok(self.texts.get(&fragment.0).cloned())
    }

    fn source_key(&self, id: &str) -> Option<SourceKey> {
        id.strip_prefix('s')
            .and_then(|n| n.parse().ok())
            .filter(|n| self.sources.contains_key(n))
            .map(SourceKey)
    }

    fn hint(
        &self,
        fragment: FragmentKey,
        _: &str,
        _: usize,
    ) -> Result<Option<(String, Extent)>, Self::Error> {
        Ok(self
            .texts
            .get(&fragment.0)
            .map(|t| (t.clone(), Extent::default())))
    }
}

/// Distinct words per source, so nothing collapses unless a test wants it.
fn text(i: u64) -> String {
    format!("w{i}a w{i}b w{i}c w{i}d w{i}e w{i}f w{i}g w{i}h")
}

/// `n` single-fragment sources ranked `s0, s1, ...` by one lexical list.
fn ranked_store(n: u64) -> Store {
    let mut store = Store::default();
    for i in 0..n {
        store.add(i, &text(i), None, &[]);
    }
    store.lists = vec![(Channel::Lexical, (0..n).map(|i| 10 * i).collect())];
    store
}

fn ext() -> Extensions {
    Extensions {
        now: Some(NOW),
        ..Extensions::default()
    }
}

fn ids(r: &crate::SearchResponse) -> Vec<&str> {
    r.hits.iter().map(|h| h.id.as_str()).collect()
}

fn settings(sets: &[&str]) -> Settings {
    let mut s = Settings::default();
    for a in sets {
        s.set(a).unwrap();
    }
    s
}

/// Scores `1 / (1 + position of "s<i>" in a fixed preference)`: reverses the order given.
struct Reverse;
impl Reranker for Reverse {
    fn name(&self) -> &str {
        "reverse"
    }
    fn rerank(&self, _: &str, docs: &[&str]) -> Result<Vec<f64>, String> {
        Ok((0..docs.len()).map(|i| i as f64).collect())
    }
}

struct Broken;
impl Reranker for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn rerank(&self, _: &str, _: &[&str]) -> Result<Vec<f64>, String> {
        Err("connection refused".into())
    }
}

/// Seed 002: "retrieved 20 → reranked 10 → 4 match locale=it AND product=identity →
/// return 4". Matches further down the list are not fetched to fill the page.
#[test]
fn retrieved_20_reranked_10_four_match() {
    let mut store = ranked_store(30);
    for i in [1, 4, 12, 19, 22, 25] {
        store.add(
            i,
            &text(i),
            None,
            &[("locale", "IT"), ("product", "Identity")],
        );
    }
    store.add(6, &text(6), None, &[("locale", "it")]);
    let ext = Extensions {
        reranker: Some(Arc::new(Reverse)),
        ..ext()
    };
    let s = settings(&["lexical.fts_list_size=20", "refine.rerank=local"]);
    let mut q = Query::text("identity", 0, 20);
    q.filters = BTreeMap::from([
        ("locale".into(), "it".into()),
        ("product".into(), "identity".into()),
    ]);
    let r = search_with(&store, &q, &s, &ext).unwrap();
    // The reranker reversed the head of 10: s4 and s1 in that order, then the tail's 12, 19.
    assert_eq!(ids(&r), vec!["s4", "s1", "s12", "s19"]);
    assert_eq!(r.diagnostics.refine.filtered_out, 16);
    let rerank = r.hits[0].explain.refinements.iter().find_map(|x| match x {
        Refinement::Rerank(e) => Some(e.clone()),
        _ => None,
    });
    let rerank = rerank.expect("rerank explained");
    assert_eq!((rerank.rank_before, rerank.rank_after), (5, 6));
    let stages: Vec<&str> = r
        .diagnostics
        .stages
        .iter()
        .map(|s| s.stage.as_str())
        .collect();
    assert!(
        stages.contains(&"rerank") && stages.contains(&"filter"),
        "{stages:?}"
    );
    // With the prefilter the same filters apply inside the channel, so the page holds every
    // match the lists can give.
    let s = settings(&["lexical.fts_list_size=20", "refine.prefilter=true"]);
    let r = search_with(&store, &q, &s, &ext).unwrap();
    assert_eq!(ids(&r), vec!["s1", "s4", "s12", "s19", "s22", "s25"]);
    assert_eq!(r.diagnostics.refine.filtered_out, 0);
    assert!(r.diagnostics.refine.prefiltered > 0);
}

#[test]
fn a_failing_reranker_degrades_the_stage_not_the_query() {
    let store = ranked_store(5);
    let ext = Extensions {
        reranker: Some(Arc::new(Broken)),
        ..ext()
    };
    let s = settings(&["refine.rerank=local"]);
    let r = search_with(&store, &Query::text("q", 0, 5), &s, &ext).unwrap();
    assert_eq!(ids(&r), vec!["s0", "s1", "s2", "s3", "s4"]);
    assert_eq!(r.diagnostics.refine.degraded[0].stage, "rerank");
    assert!(r.diagnostics.refine.degraded[0].reason.contains("refused"));
    // Asked for but not attached: also a reason, never an error.
    let r = search_with(
        &store,
        &Query::text("q", 0, 5),
        &s,
        &super::super::Extensions::default(),
    )
    .unwrap();
    assert!(r.diagnostics.refine.degraded[0]
        .reason
        .contains("no reranker"));
}

#[test]
fn scope_restricts_every_list_before_ranking() {
    let mut store = ranked_store(12);
    store.lists.push((Channel::Vector, vec![110, 70, 30]));
    let mut q = Query::text("q", 0, 10);
    q.scope = Some(vec!["s7".into(), "s11".into()]);
    let r = search_with(&store, &q, &Settings::default(), &ext()).unwrap();
    assert_eq!(ids(&r), vec!["s7", "s11"]);
    // Ranks are taken within the scoped lists: s7 is second in both, s11 second and first.
    let ranks: Vec<u32> = r.hits[1].explain.parts[0]
        .lists
        .iter()
        .map(|l| l.rank)
        .collect();
    assert_eq!(ranks, vec![2, 1]);
}

struct Sidecar;
impl PluginRetriever for Sidecar {
    fn name(&self) -> &str {
        "sidecar"
    }
    fn retrieve(&self, _: &str, _: usize) -> Result<Vec<PluginHit>, String> {
        Ok(vec![
            PluginHit {
                id: "external-1".into(),
                score: 9.0,
                text: Some("found elsewhere".into()),
            },
            PluginHit {
                id: "s11".into(),
                score: 8.0,
                text: None,
            },
        ])
    }
}

/// Seed 002: plugins add recall but cannot displace the core top-10 head.
#[test]
fn plugin_hits_merge_below_the_frozen_head() {
    let store = ranked_store(14);
    let ext = Extensions {
        plugins: vec![Arc::new(Sidecar)],
        ..ext()
    };
    let mut s = Settings::default();
    s.refine.plugins = vec!["http://sidecar".into()];
    let r = search_with(&store, &Query::text("q", 0, 16), &s, &ext).unwrap();
    let got = ids(&r);
    let head: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
    assert_eq!(
        got[..10],
        head.iter().map(String::as_str).collect::<Vec<_>>()[..]
    );
    // Below the head: s11 gains from its plugin rank, the plugin-only hit is shown with its
    // text; every id once.
    assert_eq!(got[10], "s11");
    assert!(got.contains(&"external-1"));
    let external = r.hits.iter().find(|h| h.id == "external-1").unwrap();
    assert_eq!(external.summary, "found elsewhere");
    assert_eq!(got.len(), 15);
    let frozen = r.hits[0]
        .explain
        .refinements
        .iter()
        .any(|x| matches!(x, Refinement::PluginMerge(e) if e.frozen));
    assert!(frozen);
}

#[test]
fn recency_reorders_dated_sources_and_date_sort_replaces_it() {
    let mut store = ranked_store(3);
    store.add(0, &text(0), Some("1970-01-01"), &[]);
    store.add(2, &text(2), Some("2024-10-01"), &[]);
    let r = search_with(
        &store,
        &Query::text("q", 0, 3),
        &Settings::default(),
        &ext(),
    )
    .unwrap();
    // s0 is 54 years old: 0.8 · 1 + 0.2 · ~0 loses to undated s1 (0.8 · 0.98 + 0.2).
    assert_eq!(ids(&r), vec!["s1", "s2", "s0"]);
    assert!(matches!(
        r.hits[0].explain.refinements[0],
        Refinement::Recency(_)
    ));
    let s = settings(&["refine.sort=date"]);
    assert_eq!(s.refine.sort, SortOrder::Date);
    let r = search_with(&store, &Query::text("q", 0, 3), &s, &ext()).unwrap();
    assert_eq!(ids(&r), vec!["s2", "s0", "s1"]);
}

#[test]
fn near_duplicates_collapse_into_the_better_hit() {
    let mut store = ranked_store(4);
    let same = "tokens expire after one hour unless the client refreshes them first";
    store.add(1, same, None, &[]);
    // The same note posted again, capitalised differently.
    store.add(3, &same.to_uppercase(), None, &[]);
    let r = search_with(
        &store,
        &Query::text("q", 0, 4),
        &settings(&["refine.dedup=true"]),
        &ext(),
    )
    .unwrap();
    assert_eq!(ids(&r), vec!["s0", "s1", "s2"]);
    assert_eq!(r.diagnostics.refine.collapsed, 1);
    let absorbed = r.hits[1].explain.refinements.iter().find_map(|x| match x {
        Refinement::Collapse(c) => Some(c.absorbed.clone()),
        _ => None,
    });
    assert_eq!(absorbed.unwrap()[0].id, "s3");
    let s = settings(&["refine.dedup=false"]);
    let r = search_with(&store, &Query::text("q", 0, 4), &s, &ext()).unwrap();
    assert_eq!(r.hits.len(), 4);
}

/// Seed 002's gate: a one-word query follows taste (λ 0.85); a code turns it off.
#[test]
fn personalization_follows_the_query_gate() {
    let mut store = ranked_store(4);
    store.add(3, &text(3), None, &[("tag", "security")]);
    let profile = UserProfile {
        prefers: vec![(Attr::tag("security"), 1.0)],
        interactions: Vec::new(),
    };
    let ext = Extensions {
        profiles: Arc::new(BTreeMap::from([("ana".to_string(), profile)])),
        ..ext()
    };
    let mut q = Query::text("security", 0, 4);
    q.user = Some("ana".into());
    let r = search_with(&store, &q, &Settings::default(), &ext).unwrap();
    assert_eq!(ids(&r)[0], "s3");
    assert!(r
        .diagnostics
        .refine
        .personalization
        .as_deref()
        .unwrap()
        .starts_with("applied"));
    q.text = "SEC-204".into();
    let r = search_with(&store, &q, &Settings::default(), &ext).unwrap();
    assert_eq!(ids(&r), vec!["s0", "s1", "s2", "s3"]);
    q.user = Some("nobody".into());
    q.text = "security".into();
    let r = search_with(&store, &q, &Settings::default(), &ext).unwrap();
    assert_eq!(ids(&r), vec!["s0", "s1", "s2", "s3"]);
}

/// The comparable score: first in every list that ran is 1; it falls with rank and with lists
/// that missed the hit, whatever the other hits of the query; `min_score` cuts on it.
#[test]
fn relevance_is_comparable_and_min_score_cuts_on_it() {
    let mut store = ranked_store(5);
    store.lists.push((Channel::Vector, vec![0, 40]));
    // The arithmetic below is at `rrf_k` 60.
    let r = search_with(
        &store,
        &Query::text("q", 0, 5),
        &settings(&["finder.rrf_k=60"]),
        &ext(),
    )
    .unwrap();
    let rel: Vec<f64> = r.hits.iter().map(|h| h.relevance).collect();
    assert_eq!(ids(&r), vec!["s0", "s4", "s1", "s2", "s3"]);
    assert_eq!(rel[0], 1.0);
    // s1: rank 2 in one of two lists: (1/62) / (2/61).
    assert!((rel[2] - 61.0 / 124.0).abs() < 1e-12, "{rel:?}");
    assert!(rel.iter().all(|x| (0.0..=1.0).contains(x)));
    let s = settings(&["finder.rrf_k=60", "refine.min_score=0.49"]);
    let r = search_with(&store, &Query::text("q", 0, 5), &s, &ext()).unwrap();
    assert_eq!(ids(&r), vec!["s0", "s4", "s1"]);
    assert_eq!(r.diagnostics.refine.below_min_score, 2);
    // Scores stay top-is-1.0 for display.
    assert_eq!(r.hits[0].score, 1.0);
}

#[test]
fn facets_count_the_returned_hits() {
    let mut store = ranked_store(3);
    store.add(0, &text(0), None, &[("locale", "it")]);
    store.add(1, &text(1), None, &[("locale", "it")]);
    store.add(2, &text(2), None, &[("locale", "en")]);
    let r = search_with(
        &store,
        &Query::text("q", 0, 2),
        &Settings::default(),
        &ext(),
    )
    .unwrap();
    assert_eq!(r.facets.extras[0].key, "locale");
    assert_eq!(r.facets.extras[0].values[0].count, 2);
    assert_eq!(r.facets.extras[0].values.len(), 1);
}

/// A store with two lists over sources with 1–3 fragments, dates, tags and some duplicate
/// texts, small list sizes so that deep pages need deeper lists.
fn random_store(n: u64, perm_a: &[u64], perm_b: &[u64], dated: &[bool], dup: &[bool]) -> Store {
    let mut store = Store::default();
    for i in 0..n {
        let t = if dup[i as usize] { text(0) } else { text(i) };
        let date = dated[i as usize].then(|| format!("{}", 1990 + i));
        let tag = if i % 3 == 0 { "security" } else { "ops" };
        store.add(i, &t, date.as_deref(), &[("tag", tag)]);
        for j in 1..(i % 3) {
            store.texts.insert(10 * i + j, format!("{t} part {j}"));
        }
    }
    let frags = |perm: &[u64]| -> Vec<u64> {
        perm.iter()
            .flat_map(|&i| (0..=(i % 3)).map(move |j| 10 * i + j))
            .collect()
    };
    store.lists = vec![
        (Channel::Lexical, frags(perm_a)),
        (Channel::Vector, frags(perm_b)),
    ];
    store
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Pages concatenated equal one long page, hit for hit (scores and explanations too),
    /// with any of the reordering stages on or none (a plain query explains only the sources
    /// that can reach its page).
    #[test]
    fn pages_concatenate_to_the_long_page(
        (n, perm_a, perm_b) in (12u64..60).prop_flat_map(|n| (
            Just(n),
            Just((0..n).collect::<Vec<u64>>()).prop_shuffle(),
            Just((0..n).collect::<Vec<u64>>()).prop_shuffle(),
        )),
        dated in proptest::collection::vec(any::<bool>(), 60),
        dup in proptest::collection::vec(proptest::bool::weighted(0.1), 60),
        page in 1usize..12,
        mmr in any::<bool>(),
        rerank in any::<bool>(),
        user in any::<bool>(),
        scope in any::<bool>(),
    ) {
        let store = random_store(n, &perm_a, &perm_b, &dated, &dup);
        let mut s = settings(&["lexical.fts_list_size=10", "vector.vec_list_size=10"]);
        s.refine.mmr = mmr;
        s.refine.mmr_depth = 8;
        if rerank {
            s.refine.rerank = RerankBackend::Local;
        }
        let ext = Extensions {
            reranker: Some(Arc::new(Reverse)),
            profiles: Arc::new(BTreeMap::from([(
                "ana".to_string(),
                UserProfile { prefers: vec![(Attr::tag("security"), 1.0)], interactions: vec![] },
            )])),
            ..ext()
        };
        let base = {
            let mut q = Query::text("security", 0, 0);
            q.user = user.then(|| "ana".to_string());
            if scope {
                q.scope = Some((0..n).filter(|i| i % 2 == 1).map(|i| format!("s{i}")).collect());
            }
            q
        };
        let long = search_with(&store, &Query { limit: 4 * page, ..base.clone() }, &s, &ext).unwrap();
        let mut joined = Vec::new();
        for p in 0..4 {
            let q = Query { offset: p * page, limit: page, ..base.clone() };
            let r = search_with(&store, &q, &s, &ext).unwrap();
            for (i, h) in r.hits.iter().enumerate() {
                prop_assert_eq!(h.rank, p * page + i + 1);
                joined.push(h.clone());
            }
        }
        prop_assert_eq!(joined, long.hits);
    }
}

/// A plain query (no stage reads the pool) explains only the sources that can reach its page;
/// each page's hits, explanations included, are still the long page's.
#[test]
fn a_plain_query_explains_its_page_as_the_long_page_does() {
    let n = 40u64;
    let perm_a: Vec<u64> = (0..n).rev().collect();
    let perm_b: Vec<u64> = (0..n).map(|i| (i * 7) % n).collect();
    let store = random_store(n, &perm_a, &perm_b, &[false; 60], &[false; 60]);
    let mut s = settings(&["lexical.fts_list_size=30", "vector.vec_list_size=30"]);
    s.refine.recency = false;
    let base = Query::text("security", 0, 0);
    let long = search_with(
        &store,
        &Query {
            limit: 24,
            ..base.clone()
        },
        &s,
        &ext(),
    )
    .unwrap();
    assert_eq!(long.hits.len(), 24);
    assert!(long.hits.iter().all(|h| !h.explain.parts.is_empty()));
    for (offset, limit) in [(0, 1), (0, 5), (3, 4), (7, 10), (20, 4)] {
        let q = Query {
            offset,
            limit,
            ..base.clone()
        };
        let page = search_with(&store, &q, &s, &ext()).unwrap();
        assert_eq!(
            page.hits,
            long.hits[offset..offset + limit],
            "page {offset}+{limit}"
        );
        assert_eq!(
            page.diagnostics.ranked_sources, long.diagnostics.ranked_sources,
            "page {offset}+{limit}: the long ranking is the same"
        );
    }
}
