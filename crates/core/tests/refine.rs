//! The refinement stages chained through the public API, as the pipeline will run them.

use std::collections::BTreeMap;

use finder_core::refine::{
    apply_filter, apply_rerank, collapse_near_duplicates, facets_of, merge_plugins, mmr,
    personalize, recency_blend, reorder, rerank_plan, Attr, Candidate, DedupParams, MmrParams,
    PersonalParams, PluginList, PluginMergeParams, RecencyParams, Refinement, RerankMode,
    SourceFilter, UserProfile,
};
use finder_core::settings::DEFAULT_RRF_K;
use finder_core::Envelope;

fn envelope(date: Option<&str>, extras: &[(&str, &str)], tags: &[&str]) -> Envelope {
    Envelope {
        date: date.map(str::to_string),
        extras: extras
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        ..Envelope::default()
    }
}

/// Seed 002: "retrieved 20 → reranked 10 → 4 match locale=it AND product=identity → return 4".
/// The late filter runs on the reranked head and never refills it from the tail.
#[test]
fn retrieved_20_reranked_10_four_match() {
    let plan = rerank_plan(RerankMode::Default, 20);
    assert_eq!((plan.retrieve_depth, plan.rerank_count), (20, 10));

    let ids: Vec<String> = (1..=20).map(|i| format!("doc{i}")).collect();
    // Head matches: doc2, doc5, doc7, doc10. doc3 has the locale only, doc4 the wrong case of
    // nothing at all. The tail holds matches too (doc12, doc15) that must not come back.
    let matching = [2, 5, 7, 10, 12, 15];
    let envelopes: Vec<Envelope> = (1..=20)
        .map(|i| match i {
            _ if matching.contains(&i) && i % 2 == 0 => {
                envelope(None, &[("locale", "IT"), ("product", "Identity")], &[])
            }
            _ if matching.contains(&i) => {
                envelope(None, &[("locale", "it"), ("product", "identity")], &[])
            }
            3 => envelope(None, &[("locale", "it"), ("product", "billing")], &[]),
            _ => envelope(None, &[("locale", "en"), ("product", "identity")], &[]),
        })
        .collect();
    let retrieved: Vec<Candidate> = ids
        .iter()
        .zip(&envelopes)
        .enumerate()
        .map(|(i, (id, e))| Candidate::new(id, 1.0 - i as f64 * 0.01).with_envelope(e))
        .collect();

    // The reranker prefers the reverse of the head order.
    let rerank_scores: Vec<f64> = (0..plan.rerank_count).map(|i| i as f64).collect();
    let reranked = apply_rerank(&retrieved, &rerank_scores);
    let reranked = reorder(&retrieved, &reranked);
    let head = &reranked[..plan.rerank_count];
    assert_eq!(head[0].id, "doc10");

    let filter = SourceFilter::new([("locale", "it"), ("product", "identity")]);
    let filtered = apply_filter(head, &filter);
    let returned: Vec<&str> = filtered.kept.iter().map(|&i| head[i].id).collect();
    assert_eq!(returned, ["doc10", "doc7", "doc5", "doc2"]);
    assert_eq!(filtered.filtered_out, 6);

    // Facets describe the four returned hits only.
    let page: Vec<Candidate> = filtered.kept.iter().map(|&i| head[i]).collect();
    let f = facets_of(&page);
    assert_eq!(f.extras[0].key, "locale");
    let counts: Vec<(String, usize)> = f.extras[0]
        .values
        .iter()
        .map(|v| (v.value.clone(), v.count))
        .collect();
    assert_eq!(counts, [("IT".to_string(), 2), ("it".to_string(), 2)]);
}

/// Every stage in DESIGN order over one small result set: each keeps the set coherent for
/// the next, and their records serialise as tagged explain entries.
#[test]
fn stages_chain_in_design_order() {
    let day = 86_400;
    let now = 20_000 * day;
    let texts = [
        "Restore a backup by copying the nightly snapshot into the data folder and restarting.",
        "Restore a backup by copying the nightly snapshot into the data folder and restarting!",
        "Rotate the signing keys every quarter and publish the new public key.",
        "Configure connection pooling and request retries for the gateway.",
    ];
    let envelopes = [
        envelope(Some("2024-01-01"), &[("level", "expert")], &["ops"]),
        envelope(Some("2024-06-01"), &[("level", "expert")], &["ops"]),
        envelope(None, &[("level", "beginner")], &["security"]),
        envelope(Some("1999-01-01"), &[("level", "beginner")], &["network"]),
    ];
    let ids = ["restore", "restore-copy", "keys", "pooling"];
    let start: Vec<Candidate> = (0..4)
        .map(|i| {
            Candidate::new(ids[i], 0.04 - i as f64 * 0.005)
                .with_text(texts[i])
                .with_envelope(&envelopes[i])
        })
        .collect();

    let recency = recency_blend(&start, &RecencyParams::default(), now);
    let mut explain: BTreeMap<String, Vec<Refinement>> = BTreeMap::new();
    let mut note = |c: &[Candidate], ranked: Vec<(usize, Refinement)>| {
        for (i, r) in ranked {
            explain.entry(c[i].id.to_string()).or_default().push(r);
        }
    };
    note(
        &start,
        recency
            .iter()
            .map(|r| (r.index, Refinement::Recency(r.explain.clone())))
            .collect(),
    );
    let c = reorder(&start, &recency);

    let collapsed = collapse_near_duplicates(&c, &DedupParams::default());
    assert_eq!(collapsed.len(), 3);
    let keeper = &collapsed[0];
    assert_eq!(keeper.explain.absorbed_count, 1);
    note(
        &c,
        collapsed
            .iter()
            .map(|r| (r.index, Refinement::Collapse(r.explain.clone())))
            .collect(),
    );
    let c = reorder(&c, &collapsed);

    let reranked = apply_rerank(&c, &[0.2, 0.9]);
    let c = reorder(&c, &reranked);

    let plugin = PluginList {
        name: "sidecar".into(),
        hits: vec![("external".into(), 3.0)],
    };
    let merged = merge_plugins(&c, &[plugin], &PluginMergeParams::default(), DEFAULT_RRF_K);
    // All three core hits sit in the frozen head; the plugin's find comes after them.
    let order: Vec<&str> = merged.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(order[..3], [c[0].id, c[1].id, c[2].id]);
    assert_eq!(order[3], "external");
    let core_only: Vec<Candidate> = merged
        .iter()
        .filter_map(|h| h.core_index)
        .map(|i| c[i])
        .collect();

    let diverse = mmr(&core_only, &MmrParams::default(), core_only.len());
    let c = reorder(&core_only, &diverse);

    let user = UserProfile {
        prefers: vec![(Attr::extra("level", "beginner"), 1.0)],
        interactions: Vec::new(),
    };
    let personal = personalize(&c, "security", Some(&user), &PersonalParams::default(), now);
    assert!(personal.summary.applied);
    let c = reorder(&c, &personal.ranked);
    assert!(c.windows(2).all(|w| w[0].score >= w[1].score));
    assert_eq!(c.len(), 3);

    let restore = serde_json::to_value(&explain["restore"]).unwrap();
    assert_eq!(restore[0]["stage"], "recency");
    assert_eq!(restore[1]["stage"], "collapse");
    assert_eq!(restore[1]["absorbed"][0]["id"], "restore-copy");
}
