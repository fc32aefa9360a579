//! The query pipeline: channels → fusion → rollup → normalise → page → materialise.
//!
//! Storage plugs in through [`Retriever`]: it runs channels and looks up fragments and sources.
//! The stages themselves are the pure functions of this crate, so a PostgreSQL backend or an
//! in-memory test corpus ranks exactly as the embedded index does.

use std::collections::HashMap;
use std::time::Instant;

use crate::fusion::{fuse, normalize_top};
use crate::model::{
    Channel, ChannelReport, ChannelStatus, Diagnostics, Envelope, Explain, ExplainPart, Extent,
    FragmentKey, Hint, Hit, Query, RankedList, SearchResponse, SourceKey, StageTime,
};
use crate::rollup::rollup;
use crate::settings::Settings;

/// What a channel did for one query.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelOutcome {
    Ran(RankedList),
    /// Not asked for, or not applicable to this query (e.g. trigram list in `auto` mode).
    Skipped(String),
    /// Asked for but unavailable; the other channels answer.
    Degraded(String),
}

/// What rollup and explain need to know of a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentMeta {
    /// `None` for entity fragments.
    pub source: Option<SourceKey>,
    pub ordinal: u32,
}

/// What a hit shows of its source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceView {
    pub id: String,
    pub envelope: Envelope,
    pub summary: String,
}

/// The seam between the pipeline and storage.
pub trait Retriever {
    type Error;

    /// Channels this store can run, in the order they should be reported.
    fn channels(&self) -> Vec<Channel>;

    /// Runs one channel, returning at most `depth` candidates (the channel's list size, or more
    /// when a deep page needs them).
    fn retrieve(
        &self,
        channel: Channel,
        query: &Query,
        settings: &Settings,
        depth: usize,
    ) -> Result<ChannelOutcome, Self::Error>;

    /// Looks up fragments; unknown ones come back as `None`.
    fn fragment_meta(
        &self,
        fragments: &[FragmentKey],
    ) -> Result<Vec<Option<FragmentMeta>>, Self::Error>;

    /// Looks up a source for display.
    fn source(&self, source: SourceKey) -> Result<Option<SourceView>, Self::Error>;

    /// Timings of sub-stages the store measured itself (e.g. query embedding), reported
    /// after the pipeline's own stages.
    fn extra_stages(&self) -> Vec<StageTime> {
        Vec::new()
    }

    /// Text preview (at most `max_chars` characters) and extent of a fragment.
    fn hint(
        &self,
        fragment: FragmentKey,
        query: &str,
        max_chars: usize,
    ) -> Result<Option<(String, Extent)>, Self::Error>;
}

/// Measures consecutive stages.
pub struct Stopwatch {
    started: Instant,
    last: Instant,
    stages: Vec<StageTime>,
}

impl Default for Stopwatch {
    fn default() -> Self {
        let now = Instant::now();
        Stopwatch {
            started: now,
            last: now,
            stages: Vec::new(),
        }
    }
}

impl Stopwatch {
    /// Records the time since the previous lap under `stage`, and returns it in ms.
    pub fn lap(&mut self, stage: &str) -> f64 {
        let now = Instant::now();
        let ms = (now - self.last).as_secs_f64() * 1e3;
        self.last = now;
        self.stages.push(StageTime {
            stage: stage.to_string(),
            ms,
        });
        ms
    }

    pub fn finish(self) -> (Vec<StageTime>, f64) {
        (self.stages, self.started.elapsed().as_secs_f64() * 1e3)
    }
}

/// The deepest a channel list grows to fill a deep page.
const MAX_DEPTH: usize = 2_000;

/// Runs the whole pipeline for one query and returns hits `offset..offset+limit`.
pub fn search<R: Retriever>(
    store: &R,
    request: &Query,
    settings: &Settings,
) -> Result<SearchResponse, R::Error> {
    let (query, offset, limit) = (request.text.as_str(), request.offset, request.limit);
    let mut watch = Stopwatch::default();
    let wanted = offset.saturating_add(limit);
    // Channel lists hold fragments and a page holds sources; when a page reaches past what the
    // lists gave, they are run again deeper, so deep pages are as complete as shallow ones.
    let mut extra_depth = 0;
    let (lists, reports, fused, meta, ranked) = loop {
        let mut lists = Vec::new();
        let mut reports = Vec::new();
        let mut truncated = false;
        for channel in store.channels() {
            let depth = settings.list_size(channel).max(wanted).max(extra_depth);
            let outcome = store.retrieve(channel, request, settings, depth)?;
            let ms = watch.lap(channel.name());
            let (status, reason, hits) = match outcome {
                ChannelOutcome::Ran(list) => {
                    let n = list.hits.len();
                    truncated |= n >= depth;
                    lists.push(list);
                    (ChannelStatus::Ran, None, n)
                }
                ChannelOutcome::Skipped(why) => (ChannelStatus::Skipped, Some(why), 0),
                ChannelOutcome::Degraded(why) => (ChannelStatus::Degraded, Some(why), 0),
            };
            reports.push(ChannelReport {
                channel,
                status,
                reason,
                hits,
                ms,
            });
        }

        let fused = fuse(&lists, settings);
        watch.lap("fusion");

        let keys: Vec<FragmentKey> = fused.iter().map(|f| f.fragment).collect();
        let metas = store.fragment_meta(&keys)?;
        let meta: HashMap<FragmentKey, FragmentMeta> = keys
            .iter()
            .zip(metas)
            .filter_map(|(k, m)| m.map(|m| (*k, m)))
            .collect();
        let scored: Vec<(FragmentKey, f64)> = fused.iter().map(|f| (f.fragment, f.seed)).collect();
        let ranked = rollup(
            &scored,
            |f| meta.get(&f).and_then(|m| m.source),
            &settings.finder.rollup_weights,
        );
        watch.lap("rollup");
        let deepest = lists.iter().map(|l| l.hits.len()).max().unwrap_or(0);
        if ranked.len() >= wanted || !truncated || deepest >= MAX_DEPTH {
            break (lists, reports, fused, meta, ranked);
        }
        extra_depth = (deepest * 2).min(MAX_DEPTH);
    };
    drop(lists);
    let mut scores: Vec<f64> = ranked.iter().map(|s| s.score).collect();
    let divisor = normalize_top(&mut scores);

    let by_fragment: HashMap<FragmentKey, &crate::FusedFragment> =
        fused.iter().map(|f| (f.fragment, f)).collect();
    let mut hits = Vec::new();
    for (i, source) in ranked.iter().enumerate().skip(offset).take(limit) {
        let Some(view) = store.source(source.source)? else {
            continue;
        };
        let mut hints = Vec::new();
        for &(fragment, score) in source.fragments.iter().take(settings.finder.max_hints) {
            if let Some((preview, extent)) =
                store.hint(fragment, query, settings.finder.preview_chars)?
            {
                hints.push(Hint {
                    preview,
                    extent,
                    score,
                });
            }
        }
        let parts = source
            .parts
            .iter()
            .map(|p| {
                let fused = by_fragment[&p.fragment];
                ExplainPart {
                    fragment: meta.get(&p.fragment).map_or(0, |m| m.ordinal),
                    weight: p.weight,
                    seed: fused.seed,
                    lists: fused.lists.clone(),
                }
            })
            .collect();
        hits.push(Hit {
            rank: i + 1,
            id: view.id,
            score: scores[i],
            envelope: view.envelope,
            summary: view.summary,
            hints,
            explain: Explain {
                raw: source.score,
                normalized_by: divisor,
                parts,
                other_fragments: source.fragments.len().saturating_sub(source.parts.len()),
            },
        });
    }
    watch.lap("materialize");

    let (mut stages, total_ms) = watch.finish();
    stages.extend(store.extra_stages());
    Ok(SearchResponse {
        query: query.to_string(),
        offset,
        limit,
        hits,
        diagnostics: Diagnostics {
            channels: reports,
            stages,
            total_ms,
            fused_fragments: fused.len(),
            ranked_sources: ranked.len(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScoredFragment;

    /// An in-memory store: fixed channel lists, fragment owners and source titles.
    struct Memory {
        lists: Vec<RankedList>,
        owners: HashMap<u64, (Option<u64>, u32)>,
    }

    impl Retriever for Memory {
        type Error = std::convert::Infallible;

        fn channels(&self) -> Vec<Channel> {
            vec![Channel::Lexical, Channel::Vector, Channel::Trigram]
        }

        fn retrieve(
            &self,
            channel: Channel,
            _: &Query,
            _: &Settings,
            depth: usize,
        ) -> Result<ChannelOutcome, Self::Error> {
            Ok(match self.lists.iter().find(|l| l.channel == channel) {
                Some(l) => ChannelOutcome::Ran(RankedList {
                    channel,
                    hits: l.hits.iter().take(depth).copied().collect(),
                }),
                None if channel == Channel::Vector => ChannelOutcome::Degraded("no model".into()),
                None => ChannelOutcome::Skipped("not asked".into()),
            })
        }

        fn fragment_meta(
            &self,
            fragments: &[FragmentKey],
        ) -> Result<Vec<Option<FragmentMeta>>, Self::Error> {
            Ok(fragments
                .iter()
                .map(|f| {
                    self.owners.get(&f.0).map(|&(s, ordinal)| FragmentMeta {
                        source: s.map(SourceKey),
                        ordinal,
                    })
                })
                .collect())
        }

        fn source(&self, source: SourceKey) -> Result<Option<SourceView>, Self::Error> {
            let id = format!("s{}", source.0);
            Ok(Some(SourceView {
                id: id.clone(),
                envelope: Envelope {
                    title: id.to_uppercase(),
                    path: id,
                    ..Envelope::default()
                },
                summary: "summary".into(),
            }))
        }

        fn hint(
            &self,
            fragment: FragmentKey,
            _: &str,
            _: usize,
        ) -> Result<Option<(String, Extent)>, Self::Error> {
            let line = fragment.0 as u32;
            Ok(Some((
                format!("fragment {}", fragment.0),
                Extent {
                    line_start: line,
                    line_end: line,
                    ..Extent::default()
                },
            )))
        }
    }

    fn list(channel: Channel, keys: &[u64]) -> RankedList {
        RankedList {
            channel,
            hits: keys
                .iter()
                .map(|&k| ScoredFragment {
                    fragment: FragmentKey(k),
                    score: 1.0,
                })
                .collect(),
        }
    }

    /// Fragments 1, 2 belong to source 10; 3 to source 20; 4 is an entity; 5 to source 30.
    fn memory() -> Memory {
        Memory {
            lists: vec![
                list(Channel::Lexical, &[1, 4, 3, 2]),
                list(Channel::Trigram, &[3, 5]),
            ],
            owners: HashMap::from([
                (1, (Some(10), 0)),
                (2, (Some(10), 1)),
                (3, (Some(20), 0)),
                (4, (None, 0)),
                (5, (Some(30), 0)),
            ]),
        }
    }

    #[test]
    fn pipeline_fuses_rolls_up_and_explains() {
        let r = search(&memory(), &Query::text("q", 0, 10), &Settings::default()).unwrap();
        let ids: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
        // s20: 1/63 + 1/61 beats s10: 1/61 + 0.1 · 1/64; the entity fragment never ranks.
        assert_eq!(ids, vec!["s20", "s10", "s30"]);
        assert_eq!(r.hits[0].score, 1.0);
        let s10 = &r.hits[1];
        let raw = 1.0 / 61.0 + 0.1 / 64.0;
        assert!((s10.explain.raw - raw).abs() < 1e-12);
        assert!((s10.score - raw / (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(s10.hints.len(), 2);
        assert_eq!(s10.explain.parts[1].fragment, 1);
        assert_eq!(s10.explain.parts[1].weight, 0.1);
        assert_eq!(r.hits[0].explain.parts[0].lists.len(), 2);
        let statuses: Vec<ChannelStatus> =
            r.diagnostics.channels.iter().map(|c| c.status).collect();
        assert_eq!(
            statuses,
            vec![
                ChannelStatus::Ran,
                ChannelStatus::Degraded,
                ChannelStatus::Ran
            ]
        );
        assert_eq!(r.diagnostics.degraded().count(), 1);
        let stages: Vec<&str> = r
            .diagnostics
            .stages
            .iter()
            .map(|s| s.stage.as_str())
            .collect();
        assert_eq!(
            stages,
            vec![
                "lexical",
                "vector",
                "trigram",
                "fusion",
                "rollup",
                "materialize"
            ]
        );
        assert_eq!(r.diagnostics.ranked_sources, 3);
    }

    #[test]
    fn max_hints_and_paging_apply() {
        let mut settings = Settings::default();
        settings.finder.max_hints = 1;
        let r = search(&memory(), &Query::text("q", 1, 1), &settings).unwrap();
        assert_eq!(r.hits.len(), 1);
        assert_eq!(r.hits[0].rank, 2);
        assert_eq!(r.hits[0].id, "s10");
        assert_eq!(r.hits[0].hints.len(), 1);
    }
}
