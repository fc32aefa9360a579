//! The graph stages of the pipeline: the boost after fusion, and the channels derived from the
//! fused seeds (neighbours, communities). Storage exposes its graph through [`GraphAccess`].

use std::collections::HashMap;

use super::boost::boost_with;
use super::settings::GraphSettings;
use super::{Graph, RelationKind};
use crate::fusion::FusedFragment;
use crate::model::{Channel, FragmentKey, RankedList, ScoredFragment};

/// A store's graph as the pipeline sees it.
pub trait GraphAccess {
    fn graph(&self) -> &Graph;
    /// The node of a fragment, if the graph has it.
    fn node(&self, fragment: FragmentKey) -> Option<u32>;
    /// The fragment a node is; `None` for entity nodes.
    fn fragment(&self, node: u32) -> Option<FragmentKey>;
    /// How explain names a node: `entity "Ed Wood"`, `"Backups" (fragment 2)`.
    fn describe(&self, node: u32) -> String;
    /// Nodes whose name or alias the query text names, longest names first.
    fn named(&self, text: &str) -> Vec<u32>;
    /// Whether a node is a hub (tag or typed group) for the communities channel.
    fn is_hub(&self, node: u32) -> bool;
    /// The label (type) of a named node, for `graph.node_labels`.
    fn label(&self, node: u32) -> Option<&str> {
        let _ = node;
        None
    }
}

/// What the boost did for one query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoostReport {
    pub seeds: usize,
    /// Entity nodes the query named, seeded alongside the fused fragments.
    pub named: usize,
    pub touched: usize,
    /// Fragments the boost brought in that no list had.
    pub added: usize,
    pub rounds: u32,
}

/// Runs the personalised-PageRank boost from the best fused fragments (and the entities the
/// query names) and adds it to the fused list: `boost = max(0, p − s) · Σ seeds` with `s` the
/// normalised restart vector — what the graph carried to a fragment beyond its own restart
/// mass, on the seeds' scale. It adds and never gates; without edges it is zero everywhere. Fragments reached only through the graph join the list
/// with their boost alone. The list is re-sorted by `seed + boost`, ties keeping their order.
pub fn apply_boost(
    access: &dyn GraphAccess,
    fused: &mut Vec<FusedFragment>,
    named: &[u32],
    settings: &GraphSettings,
) -> BoostReport {
    let mut seeds: Vec<(u32, f64)> = fused
        .iter()
        .take(settings.seeds)
        .filter_map(|f| access.node(f.fragment).map(|n| (n, f.seed)))
        .filter(|(_, s)| *s > 0.0)
        .collect();
    let top = seeds.iter().map(|(_, s)| *s).fold(0.0f64, f64::max);
    let named_mass = if top > 0.0 { top } else { 1.0 };
    let named: Vec<u32> = named
        .iter()
        .copied()
        .filter(|n| !seeds.iter().any(|(s, _)| s == n))
        .collect();
    seeds.extend(named.iter().map(|&n| (n, named_mass)));
    if seeds.is_empty() {
        return BoostReport::default();
    }
    let total: f64 = seeds.iter().map(|(_, s)| s).sum();
    let graph = access.graph();
    let result = graph.with_scratch(|scratch| {
        boost_with(
            graph,
            &seeds,
            &settings.weights(),
            &settings.boost_params(),
            scratch,
        )
    });
    let position: HashMap<FragmentKey, usize> = fused
        .iter()
        .enumerate()
        .map(|(i, f)| (f.fragment, i))
        .collect();
    // What the graph added beyond the restart itself: an isolated seed ends where it started
    // (its mass comes back to it), so it gains nothing; a linked one gains what its
    // neighbours send.
    let mut restart: HashMap<u32, f64> = HashMap::new();
    for &(node, s) in &seeds {
        *restart.entry(node).or_default() += s / total;
    }
    let mut added = 0;
    for entry in &result.entries {
        let Some(fragment) = access.fragment(entry.node) else {
            continue;
        };
        let own = restart.get(&entry.node).copied().unwrap_or(0.0);
        let amount = (entry.score - own).max(0.0) * total;
        if amount <= 0.0 {
            continue;
        }
        let via = entry
            .via
            .filter(|v| v.from != entry.node)
            .map(|v| format!("via {} ({})", access.describe(v.from), v.kind.as_str()));
        match position.get(&fragment) {
            Some(&i) => {
                fused[i].boost = amount;
                fused[i].via = via;
            }
            None => {
                added += 1;
                fused.push(FusedFragment {
                    fragment,
                    seed: 0.0,
                    lists: Vec::new(),
                    boost: amount,
                    via,
                });
            }
        }
    }
    // Stable: equal totals keep fusion's order (its ties already broken), then the fragments
    // the graph added, in the order the walk listed them.
    fused.sort_by(|a, b| b.total().total_cmp(&a.total()));
    BoostReport {
        seeds: seeds.len() - named.len(),
        named: named.len(),
        touched: result.entries.len(),
        added,
        rounds: result.rounds,
    }
}

/// The entities channel: fragments that are what the query names (a source whose title the
/// query names, the paragraph a named title entity `is`), longest names first.
pub fn entity_list(
    access: &dyn GraphAccess,
    text: &str,
    settings: &GraphSettings,
    depth: usize,
) -> RankedList {
    let graph = access.graph();
    let mut hits = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for node in named_allowed(access, text, settings) {
        let targets: Vec<u32> = match access.fragment(node) {
            Some(_) => vec![node],
            None => graph
                .neighbours(node)
                .filter(|&(_, k)| k == RelationKind::Is)
                .map(|(n, _)| n)
                .collect(),
        };
        for t in targets {
            if let Some(f) = access.fragment(t) {
                if seen.insert(f) {
                    hits.push(f);
                }
            }
        }
    }
    let n = hits.len();
    RankedList::new(
        Channel::Entities,
        hits.into_iter()
            .take(depth)
            .enumerate()
            .map(|(i, fragment)| ScoredFragment {
                fragment,
                score: (n - i) as f32,
            })
            .collect(),
    )
}

/// The nodes the query names whose label `graph.node_labels` allows.
pub fn named_allowed(access: &dyn GraphAccess, text: &str, settings: &GraphSettings) -> Vec<u32> {
    let mut named = access.named(text);
    named.retain(|&n| settings.label_allowed(access.label(n)));
    named
}

/// How much the neighbours list counts per share of the seeds the graph links: HotpotQA's
/// bridge passages reach the top five more often at 1.25 than at 1, while SciFact's train split
/// stays where it was (docs/perf/graph-neighbours.md).
pub const NEIGHBOURS_PER_SHARE: f64 = 1.25;

/// The neighbours channel: fragments one hop from the best seeds, at most `fan_out` per seed,
/// scored by the seed's score times the edge weight.
///
/// The list's fusion weight is [`NEIGHBOURS_PER_SHARE`] times the share of the `seeds` slots
/// whose seed has a neighbouring fragment at all (at most 1): how much the graph knows about
/// this query's neighbourhood. Reciprocal
/// ranks ignore how many seeds a list was drawn from, so without it two linked passages out of
/// twenty seeds would take the first ranks of a list that counts as much as the lexical one,
/// and a note linked from the one passage that holds a rare word would tie with it. Where most
/// passages link (a note vault, HotpotQA's mentions) the weight stays near 1; where a few
/// mentions are all there is (SciFact's titles) it falls to an eighth or less
/// (docs/perf/graph-neighbours.md).
pub fn neighbour_list(
    access: &dyn GraphAccess,
    fused: &[FusedFragment],
    settings: &GraphSettings,
    depth: usize,
) -> RankedList {
    let weights = settings.weights();
    let mut scores: HashMap<FragmentKey, f64> = HashMap::new();
    let (mut seeds, mut linked) = (0usize, 0usize);
    for f in fused.iter().take(settings.seeds) {
        let Some(node) = access.node(f.fragment) else {
            continue;
        };
        seeds += 1;
        let mut around: Vec<(u32, f64)> = access
            .graph()
            .neighbours(node)
            .map(|(n, k)| (n, weights.get(k)))
            .filter(|(_, w)| *w > 0.0)
            .collect();
        around.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        around.dedup_by_key(|(n, _)| *n);
        let mut taken = 0;
        for (n, w) in around {
            if taken >= settings.fan_out {
                break;
            }
            if let Some(fragment) = access.fragment(n) {
                if fragment != f.fragment {
                    *scores.entry(fragment).or_default() += f.seed * w;
                    taken += 1;
                }
            }
        }
        linked += usize::from(taken > 0);
    }
    let mut list = ranked(Channel::Neighbours, scores, depth);
    if seeds > 0 {
        let share = linked as f64 / settings.seeds.max(seeds) as f64;
        list.weight = (NEIGHBOURS_PER_SHARE * share).min(1.0);
    }
    list
}

/// The communities channel: members of the hubs the best seeds belong to, each hub's vote
/// weighted `1/log2(2 + degree)` so big hubs say little.
pub fn community_list(
    access: &dyn GraphAccess,
    fused: &[FusedFragment],
    settings: &GraphSettings,
    depth: usize,
) -> RankedList {
    let graph = access.graph();
    let mut scores: HashMap<FragmentKey, f64> = HashMap::new();
    for f in fused.iter().take(settings.seeds) {
        let Some(node) = access.node(f.fragment) else {
            continue;
        };
        for (hub, _) in graph.neighbours(node) {
            if !access.is_hub(hub) {
                continue;
            }
            let weight = 1.0 / (2.0 + graph.degree(hub) as f64).log2();
            for (member, _) in graph.neighbours(hub) {
                if let Some(fragment) = access.fragment(member) {
                    if fragment != f.fragment {
                        *scores.entry(fragment).or_default() += f.seed * weight;
                    }
                }
            }
        }
    }
    ranked(Channel::Communities, scores, depth)
}

fn ranked(channel: Channel, scores: HashMap<FragmentKey, f64>, depth: usize) -> RankedList {
    let mut hits: Vec<(FragmentKey, f64)> = scores.into_iter().collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    RankedList::new(
        channel,
        hits.into_iter()
            .take(depth)
            .map(|(fragment, s)| ScoredFragment {
                fragment,
                score: s as f32,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes below `fragments` are the fragments of the same number; the rest are entities.
    struct Fixture {
        graph: Graph,
        fragments: u32,
    }

    impl GraphAccess for Fixture {
        fn graph(&self) -> &Graph {
            &self.graph
        }
        fn node(&self, fragment: FragmentKey) -> Option<u32> {
            (fragment.0 < u64::from(self.fragments)).then_some(fragment.0 as u32)
        }
        fn fragment(&self, node: u32) -> Option<FragmentKey> {
            (node < self.fragments).then_some(FragmentKey(u64::from(node)))
        }
        fn describe(&self, node: u32) -> String {
            node.to_string()
        }
        fn named(&self, _: &str) -> Vec<u32> {
            Vec::new()
        }
        fn is_hub(&self, _: u32) -> bool {
            false
        }
    }

    fn seeds(keys: &[u64]) -> Vec<FusedFragment> {
        keys.iter()
            .enumerate()
            .map(|(i, &k)| FusedFragment {
                fragment: FragmentKey(k),
                seed: 1.0 / (61 + i) as f64,
                lists: Vec::new(),
                boost: 0.0,
                via: None,
            })
            .collect()
    }

    #[test]
    fn the_neighbours_list_counts_by_the_share_of_seeds_it_links() {
        let mentions = RelationKind::Mentions.as_u8();
        let is = RelationKind::Is.as_u8();
        // Fragments 0..5; node 5 is a title entity, a leaf of fragment 1.
        let fx = Fixture {
            graph: Graph::from_edges(6, &[(0, 4, mentions), (1, 5, is)]),
            fragments: 5,
        };
        let settings = GraphSettings::default();
        // Four seeds in four slots, one of which links to a passage: the entity leaf is no
        // passage.
        let four = GraphSettings {
            seeds: 4,
            ..GraphSettings::default()
        };
        let list = neighbour_list(&fx, &seeds(&[0, 1, 2, 3]), &four, 10);
        let hits: Vec<u64> = list.hits.iter().map(|h| h.fragment.0).collect();
        assert_eq!(hits, vec![4]);
        assert_eq!(list.weight, 0.25 * NEIGHBOURS_PER_SHARE);
        // Every seed linked, and as many seeds as slots: the list counts fully, no more.
        let two = GraphSettings {
            seeds: 2,
            ..GraphSettings::default()
        };
        let list = neighbour_list(&fx, &seeds(&[0, 4]), &two, 10);
        assert_eq!(list.weight, 1.0);
        // Fewer seeds than slots (a rare word found in two passages): the graph knows less.
        let list = neighbour_list(&fx, &seeds(&[0, 4]), &settings, 10);
        assert_eq!(
            list.weight,
            NEIGHBOURS_PER_SHARE * 2.0 / settings.seeds as f64
        );
        // No seed with a node: nothing to weigh, an empty list at full weight.
        let list = neighbour_list(&fx, &seeds(&[7, 8]), &settings, 10);
        assert!(list.hits.is_empty());
        assert_eq!(list.weight, 1.0);
    }
}
