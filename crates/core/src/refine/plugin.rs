//! Plugin retrievers merged after core fusion, under a frozen core head (DESIGN step 5; seed
//! 002, "Plugin candidate merge").
//!
//! The first `frozen_head` hits of the core order stay where they are: an experimental
//! retriever can add recall but cannot silently replace the proven top. Below the head, the
//! core tail and the plugin lists are fused by reciprocal rank, as the channels are, with the
//! core tail keeping its original ranks.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{finite_or_worst, Candidate};

/// Core hits that plugin lists cannot displace.
pub const DEFAULT_FROZEN_HEAD: usize = 10;

/// Settings of the plugin merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginMergeParams {
    /// Range 0–100.
    pub frozen_head: usize,
}

impl Default for PluginMergeParams {
    fn default() -> Self {
        PluginMergeParams {
            frozen_head: DEFAULT_FROZEN_HEAD,
        }
    }
}

/// The ranked output of one external retriever, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginList {
    pub name: String,
    /// `(source id, the plugin's own score)`.
    pub hits: Vec<(String, f64)>,
}

/// A hit's place in one plugin list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginRank {
    pub plugin: String,
    /// One-based.
    pub rank: usize,
    /// The plugin's own score, for display.
    pub score: f64,
    /// `1 / (rrf_k + rank)`; 0 for hits in the frozen head, which plugins do not move.
    pub share: f64,
}

/// How a hit got its place in the merged order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginMergeExplain {
    /// The hit is in the frozen core head.
    pub frozen: bool,
    /// One-based rank in the core order; `None` for hits only plugins found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_rank: Option<usize>,
    /// Ranks in the plugin lists that returned the hit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<PluginRank>,
    /// Reciprocal-rank sum below the head (core tail rank + plugin ranks); `None` in the head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rrf: Option<f64>,
}

/// One hit of the merged order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergedHit {
    pub id: String,
    /// Index into the core candidates; `None` for hits only plugins found (the caller
    /// materialises those).
    #[serde(skip)]
    pub core_index: Option<usize>,
    /// Head: the core score. Tail: `rrf` scaled so the tail's best equals the last head
    /// score, keeping scores in rank order.
    pub score: f64,
    pub explain: PluginMergeExplain,
}

/// Merges plugin lists into the core order: the first `frozen_head` core hits as they are,
/// then the core tail and the plugin hits by `Σ 1/(rrf_k + rank)`. Ties go to core hits by
/// core rank, then by first appearance in the plugin lists. A plugin hit already in the
/// head is recorded on it and does not appear twice.
pub fn merge_plugins(
    core: &[Candidate<'_>],
    plugins: &[PluginList],
    params: &PluginMergeParams,
    rrf_k: u32,
) -> Vec<MergedHit> {
    let head = params.frozen_head.min(core.len());
    let share = |rank: usize| 1.0 / (rrf_k as f64 + rank as f64);
    let mut out: Vec<MergedHit> = Vec::new();
    let mut slot: HashMap<&str, usize> = HashMap::new();
    for (i, c) in core.iter().enumerate() {
        if slot.contains_key(c.id) {
            continue;
        }
        slot.insert(c.id, out.len());
        let frozen = i < head;
        out.push(MergedHit {
            id: c.id.to_string(),
            core_index: Some(i),
            score: c.score,
            explain: PluginMergeExplain {
                frozen,
                core_rank: Some(i + 1),
                plugins: Vec::new(),
                rrf: (!frozen).then(|| share(i + 1)),
            },
        });
    }
    for list in plugins {
        let mut seen: Vec<&str> = Vec::new();
        for (r, (id, score)) in list.hits.iter().enumerate() {
            if seen.contains(&id.as_str()) {
                continue;
            }
            seen.push(id);
            let rank = r + 1;
            let at = *slot.entry(id.as_str()).or_insert_with(|| {
                out.push(MergedHit {
                    id: id.clone(),
                    core_index: None,
                    score: 0.0,
                    explain: PluginMergeExplain {
                        frozen: false,
                        core_rank: None,
                        plugins: Vec::new(),
                        rrf: Some(0.0),
                    },
                });
                out.len() - 1
            });
            let e = &mut out[at].explain;
            let s = if e.frozen { 0.0 } else { share(rank) };
            if let Some(sum) = e.rrf.as_mut() {
                *sum += s;
            }
            e.plugins.push(PluginRank {
                plugin: list.name.clone(),
                rank,
                score: *score,
                share: s,
            });
        }
    }
    let frozen = out.iter().take_while(|h| h.explain.frozen).count();
    let tail = &mut out[frozen..];
    // Core hits sit before plugin-only hits and both in order of appearance, so a stable sort
    // on the sum alone gives the documented tie-breaks.
    tail.sort_by(|a, b| {
        let key = |h: &MergedHit| finite_or_worst(h.explain.rrf.unwrap_or(0.0));
        key(b).total_cmp(&key(a))
    });
    let floor = match frozen {
        0 => core.iter().map(|c| c.score).fold(f64::NAN, f64::max),
        n => out[n - 1].score,
    };
    let floor = if floor.is_finite() { floor } else { 1.0 };
    let best = out[frozen..]
        .first()
        .and_then(|h| h.explain.rrf)
        .unwrap_or(0.0);
    for h in &mut out[frozen..] {
        let rrf = h.explain.rrf.unwrap_or(0.0);
        h.score = if best > 0.0 { floor * rrf / best } else { 0.0 };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(ids: &[&'static str]) -> Vec<Candidate<'static>> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| Candidate::new(id, 1.0 - i as f64 * 0.01))
            .collect()
    }

    fn plugin(name: &str, ids: &[&str]) -> PluginList {
        PluginList {
            name: name.to_string(),
            hits: ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.to_string(), 10.0 - i as f64))
                .collect(),
        }
    }

    const CORE: [&str; 14] = [
        "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11", "c12", "c13", "c14",
    ];

    #[test]
    fn the_core_head_stays_frozen() {
        let c = core(&CORE);
        // The plugin puts its own finds and the core's tail above the core's head.
        let p = plugin("sidecar", &["p1", "c12", "p2", "c1", "c3", "p3"]);
        let merged = merge_plugins(&c, &[p], &PluginMergeParams::default(), 60);
        let ids: Vec<&str> = merged.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids[..10], CORE[..10]);
        for (h, cand) in merged.iter().zip(&c).take(10) {
            assert_eq!(h.score, cand.score);
            assert!(h.explain.frozen);
        }
        // Tail: c12 = 1/72 + 1/62 beats p1 = 1/61, then p2 = 1/63, p3 = 1/66, c11 = 1/71, ...
        assert_eq!(ids[10..], ["c12", "p1", "p2", "p3", "c11", "c13", "c14"]);
        assert_eq!(merged.len(), 17);
        // The plugin's rank for a head hit is recorded but moves nothing.
        assert_eq!(merged[0].explain.plugins[0].rank, 4);
        assert_eq!(merged[0].explain.plugins[0].share, 0.0);
        assert_eq!(merged[11].core_index, None);
        // Scores stay in rank order.
        assert!(merged.windows(2).all(|w| w[0].score >= w[1].score));
        assert_eq!(merged[10].score, merged[9].score);
    }

    #[test]
    fn without_plugins_the_order_is_the_core_order() {
        let c = core(&CORE);
        let merged = merge_plugins(&c, &[], &PluginMergeParams::default(), 60);
        let ids: Vec<&str> = merged.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, CORE);
        let none = merge_plugins(
            &[],
            &[plugin("p", &["x", "y"])],
            &PluginMergeParams::default(),
            60,
        );
        let ids: Vec<&str> = none.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["x", "y"]);
        assert_eq!(none[0].score, 1.0);
    }
}
