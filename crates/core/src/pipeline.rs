//! The query pipeline: channels → fusion → rollup → normalise → page → materialise.
//!
//! Storage plugs in through [`Retriever`]: it runs channels and looks up fragments and sources.
//! The stages themselves are the pure functions of this crate, so a PostgreSQL backend or an
//! in-memory test corpus ranks exactly as the embedded index does.

use std::collections::HashMap;
use std::time::Instant;

use crate::fusion::fuse;
use crate::model::{Channel, Envelope, Extent, FragmentKey, Query, RankedList, SourceKey};
use crate::refine::{base_depth, Extensions, Level, Refiner};
use crate::response::{
    BoostDiagnostics, ChannelReport, ChannelStatus, Diagnostics, Explain, ExplainPart, Hint, Hit,
    SearchResponse, StageTime,
};
use crate::rollup::rollup_with_owners;
use crate::settings::Settings;
use crate::FastMap;

/// The stage (in [`Diagnostics::stages`](crate::Diagnostics)) that times the graph boost:
/// matching the query's entity names and the personalized PageRank over the graph.
pub const BOOST_STAGE: &str = "graph.boost";

/// What a channel did for one query.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelOutcome {
    Ran(RankedList),
    /// Ran, and what it found joined another channel's list instead of making its own (the
    /// trigram channel's expansions are scored in the lexical list); the note says what.
    Joined(String),
    /// Not asked for, or not applicable to this query (e.g. the trigram channel in `auto`
    /// mode without an identifier-like word).
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

/// What a piece of work returned, with its wall time in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed<T> {
    pub value: T,
    pub ms: f64,
}

/// Runs `f` and times it; an error passes through untimed.
pub fn timed<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<Timed<T>, E> {
    let started = Instant::now();
    let value = f()?;
    Ok(Timed {
        value,
        ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// Runs each asked channel of `store` in turn, timed: [`Retriever::retrieve_all`]'s default.
pub fn retrieve_each<R: Retriever + ?Sized>(
    store: &R,
    asked: &[(Channel, usize)],
    query: &Query,
    settings: &Settings,
) -> Result<Vec<Timed<ChannelOutcome>>, R::Error> {
    asked
        .iter()
        .map(|&(channel, depth)| timed(|| store.retrieve(channel, query, settings, depth)))
        .collect()
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

    /// Runs each asked channel (with its depth) and says how long each took, in the order
    /// asked. The default runs them one after the other; a store whose channels wait on the
    /// network runs them at once, so their times overlap.
    fn retrieve_all(
        &self,
        asked: &[(Channel, usize)],
        query: &Query,
        settings: &Settings,
    ) -> Result<Vec<Timed<ChannelOutcome>>, Self::Error> {
        retrieve_each(self, asked, query, settings)
    }

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

    /// The full text of a fragment, for near-duplicate collapse, MMR and rerank; `None` when
    /// the store cannot say (the source summary stands in).
    fn fragment_text(&self, _fragment: FragmentKey) -> Result<Option<String>, Self::Error> {
        Ok(None)
    }

    /// A fragment's vector, for MMR by cosine; `None` falls back to term similarity.
    fn fragment_vector(&self, _fragment: FragmentKey) -> Option<Vec<f32>> {
        None
    }

    /// Whether any source may carry a date. `false` lets the recency blend (which skips
    /// undated pools) go without reading every pooled source's envelope.
    fn may_have_dates(&self) -> bool {
        true
    }

    /// The key of a source id, when this store holds it (plugin hits name sources by id).
    fn source_key(&self, _id: &str) -> Option<SourceKey> {
        None
    }

    /// The fragments of the source a recommendation starts from (`Query::like`); an unknown
    /// id is the store's error.
    fn like_fragments(&self, id: &str) -> Result<Vec<FragmentKey>, Self::Error> {
        let _ = id;
        Ok(Vec::new())
    }

    /// The relation graph, when the store has one.
    fn graph(&self) -> GraphState<'_> {
        GraphState::Absent
    }

    /// The sources and fragments a page is about to show (views, then hints). A store whose
    /// reads are round trips fetches them here in one batch, and `source` and `hint` answer
    /// from it; the default does nothing.
    fn prefetch(
        &self,
        _sources: &[SourceKey],
        _fragments: &[FragmentKey],
    ) -> Result<(), Self::Error> {
        Ok(())
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

    /// Records `ms` under `stage`, measured by the caller (stages that ran at once).
    pub fn record(&mut self, stage: &str, ms: f64) {
        self.stages.push(StageTime {
            stage: stage.to_string(),
            ms,
        });
    }

    /// Starts the next lap now: the time since the last one is in stages already recorded.
    pub fn skip(&mut self) {
        self.last = Instant::now();
    }

    pub fn finish(self) -> (Vec<StageTime>, f64) {
        (self.stages, self.started.elapsed().as_secs_f64() * 1e3)
    }
}

/// The graph's part after the first fusion: channels derived from the fused seeds
/// (neighbours, communities; fused again with the rest), then the boost. Reports the boost,
/// or why it did not run; `None` when the store has no graph layer at all.
// The stage reads and extends the loop's lists, reports, fusion and timer in place.
#[allow(clippy::too_many_arguments)]
fn graph_stages<R: Retriever>(
    store: &R,
    request: &Query,
    settings: &Settings,
    lists: &mut Vec<RankedList>,
    reports: &mut Vec<ChannelReport>,
    fused: &mut Vec<crate::fusion::FusedFragment>,
    watch: &mut Stopwatch,
    now: i64,
) -> Option<BoostDiagnostics> {
    let g = &settings.graph;
    let access = match store.graph() {
        GraphState::Absent => return None,
        GraphState::Unavailable(reason) => {
            return Some(BoostDiagnostics {
                status: if g.boost {
                    ChannelStatus::Degraded
                } else {
                    ChannelStatus::Skipped
                },
                reason: Some(reason),
                ..BoostDiagnostics::default()
            })
        }
        GraphState::Ready(access) => access,
    };
    let derived = [
        (
            Channel::Neighbours,
            g.neighbours,
            "graph.neighbours = false",
        ),
        (
            Channel::Communities,
            g.communities,
            "graph.communities = false",
        ),
        (Channel::Events, g.events, "graph.events = false"),
    ];
    let mut more = false;
    for (channel, on, off) in derived {
        let depth = settings.list_size(channel);
        let (status, reason, hits) = if !on {
            (ChannelStatus::Skipped, Some(off.to_string()), 0)
        } else {
            let list = match channel {
                Channel::Neighbours => crate::graph::neighbour_list(access, fused, g, depth),
                Channel::Events => event_list(store, fused, g, depth, now),
                _ => crate::graph::community_list(access, fused, g, depth),
            };
            let n = list.hits.len();
            more |= n > 0;
            // A list that counts less than fully says so, and why.
            let note = (n > 0 && list.weight < 1.0).then(|| {
                format!(
                    "{n} hits, counted at {:.2} (by the share of the seeds with a linked passage)",
                    list.weight
                )
            });
            lists.push(list);
            (ChannelStatus::Ran, note, n)
        };
        let ms = watch.lap(channel.name());
        reports.push(ChannelReport {
            channel,
            status,
            reason,
            hits,
            ms,
        });
    }
    if more {
        *fused = fuse(lists, settings);
        watch.lap("fusion.graph");
    }
    if !g.boost {
        return Some(BoostDiagnostics {
            status: ChannelStatus::Skipped,
            reason: Some("graph.boost = false".into()),
            ..BoostDiagnostics::default()
        });
    }
    let named = if g.entities {
        crate::graph::named_allowed(access, &request.text, g)
    } else {
        Vec::new()
    };
    let report = crate::graph::apply_boost(access, fused, &named, g);
    watch.lap(BOOST_STAGE);
    Some(BoostDiagnostics {
        status: ChannelStatus::Ran,
        reason: None,
        seeds: report.seeds,
        named: report.named,
        touched: report.touched,
        added: report.added,
        rounds: report.rounds,
    })
}

/// The events channel: the best fused candidates again, each weighted by
/// `0.5^(age_days / half_life)` of its source's date; undated ones keep weight 1. A source
/// the store cannot show counts as undated.
fn event_list<R: Retriever>(
    store: &R,
    fused: &[crate::fusion::FusedFragment],
    g: &crate::graph::GraphSettings,
    depth: usize,
    now: i64,
) -> RankedList {
    let head: Vec<&crate::fusion::FusedFragment> = fused.iter().take(depth).collect();
    let keys: Vec<FragmentKey> = head.iter().map(|f| f.fragment).collect();
    let metas = store.fragment_meta(&keys).unwrap_or_default();
    let mut dates: HashMap<SourceKey, Option<i64>> = HashMap::new();
    let mut hits: Vec<(FragmentKey, f64)> = Vec::with_capacity(head.len());
    for (i, f) in head.iter().enumerate() {
        let Some(source) = metas.get(i).copied().flatten().and_then(|m| m.source) else {
            continue;
        };
        let date = *dates.entry(source).or_insert_with(|| {
            store
                .source(source)
                .ok()
                .flatten()
                .and_then(|v| v.envelope.date)
                .and_then(|d| crate::refine::parse_date(&d))
        });
        let weight = date.map_or(1.0, |at| {
            let age_days = ((now - at).max(0) as f64) / 86_400.0;
            0.5f64.powf(age_days / g.event_half_life_days)
        });
        hits.push((f.fragment, f.total() * weight));
    }
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    RankedList::new(
        Channel::Events,
        hits.into_iter()
            .map(|(fragment, s)| crate::ScoredFragment {
                fragment,
                score: s as f32,
            })
            .collect(),
    )
}

/// Whether a store has a graph for this query.
pub enum GraphState<'a> {
    /// The store has no graph layer.
    Absent,
    /// It has one, but not now (not built yet, unreadable); the reason is reported.
    Unavailable(String),
    Ready(&'a dyn crate::graph::GraphAccess),
}

/// The deepest a channel list grows to fill a deep page.
const MAX_DEPTH: usize = 2_000;

/// Runs the whole pipeline for one query and returns hits `offset..offset+limit`.
pub fn search<R: Retriever>(
    store: &R,
    request: &Query,
    settings: &Settings,
) -> Result<SearchResponse, R::Error> {
    search_with(store, request, settings, &Extensions::default())
}

/// [`search`] with a reranker, plugin retrievers, user profiles or a fixed clock for the
/// refinement stages.
pub fn search_with<R: Retriever>(
    store: &R,
    request: &Query,
    settings: &Settings,
    ext: &Extensions,
) -> Result<SearchResponse, R::Error> {
    let (query, offset, limit) = (request.text.as_str(), request.offset, request.limit);
    let mut watch = Stopwatch::default();
    let wanted = offset.saturating_add(limit);
    // Channel lists hold fragments and a page holds sources. Ranking goes by levels: level
    // `i` runs every channel at `2^i` times its list size and only adds sources after those
    // earlier levels placed, so the long ranking never depends on the page (see
    // `refine/run.rs`); a deep page just computes more levels.
    let mut level: u32 = 0;
    let mut refiner = Refiner::new(ext, request);
    let mut boost_diag;
    // Recommend: the target source's own fragments are the seeds, and never a result.
    let like = match &request.like {
        Some(id) => store.like_fragments(id)?,
        None => Vec::new(),
    };
    let (reports, fused_fragments, ranked_sources) = loop {
        let mut lists = Vec::new();
        let mut reports = Vec::new();
        let mut truncated = false;
        let mut deepest = 0;
        let asked: Vec<(Channel, usize)> = store
            .channels()
            .into_iter()
            .map(|channel| {
                let depth = base_depth(settings, settings.list_size(channel))
                    .saturating_mul(1 << level.min(16))
                    .min(MAX_DEPTH);
                (channel, depth)
            })
            .collect();
        let outcomes = store.retrieve_all(&asked, request, settings)?;
        watch.skip();
        for (&(channel, depth), outcome) in asked.iter().zip(outcomes) {
            // A channel's time is its own run plus its restriction below: channels a store
            // ran at once overlap, so their times may add up to more than the stage's.
            let restricting = Instant::now();
            let (status, reason, hits) = match outcome.value {
                ChannelOutcome::Ran(list) => {
                    truncated |= list.hits.len() >= depth;
                    deepest = deepest.max(list.hits.len());
                    // Scope and the prefilter restrict each list before ranking.
                    let list = refiner.restrict(store, list, settings)?;
                    let n = list.hits.len();
                    lists.push(list);
                    (ChannelStatus::Ran, None, n)
                }
                ChannelOutcome::Joined(note) => (ChannelStatus::Ran, Some(note), 0),
                ChannelOutcome::Skipped(why) => (ChannelStatus::Skipped, Some(why), 0),
                ChannelOutcome::Degraded(why) => (ChannelStatus::Degraded, Some(why), 0),
            };
            let ms = outcome.ms + restricting.elapsed().as_secs_f64() * 1e3;
            watch.record(channel.name(), ms);
            reports.push(ChannelReport {
                channel,
                status,
                reason,
                hits,
                ms,
            });
        }
        watch.skip();

        if !like.is_empty() {
            lists.push(RankedList::new(
                Channel::Like,
                like.iter()
                    .map(|&fragment| crate::ScoredFragment {
                        fragment,
                        score: 1.0,
                    })
                    .collect(),
            ));
            reports.push(ChannelReport {
                channel: Channel::Like,
                status: ChannelStatus::Ran,
                reason: None,
                hits: like.len(),
                ms: 0.0,
            });
        }
        let mut fused = fuse(&lists, settings);
        watch.lap("fusion");
        boost_diag = graph_stages(
            store,
            request,
            settings,
            &mut lists,
            &mut reports,
            &mut fused,
            &mut watch,
            ext.now(),
        );
        if !like.is_empty() {
            fused.retain(|f| !like.contains(&f.fragment));
        }

        let keys: Vec<FragmentKey> = fused.iter().map(|f| f.fragment).collect();
        let metas = store.fragment_meta(&keys)?;
        let owners: Vec<Option<SourceKey>> = metas
            .iter()
            .map(|m| m.as_ref().and_then(|m| m.source))
            .collect();
        let scored: Vec<(FragmentKey, f64)> =
            fused.iter().map(|f| (f.fragment, f.total())).collect();
        let ranked = rollup_with_owners(&scored, &owners, &settings.finder.rollup_weights);
        watch.lap("rollup");
        // Each fused fragment with its ordinal (0 where its metadata is gone), for the parts.
        let by_fragment: FastMap<FragmentKey, (&crate::fusion::FusedFragment, u32)> = fused
            .iter()
            .zip(&metas)
            .map(|(f, m)| (f.fragment, (f, m.as_ref().map_or(0, |m| m.ordinal))))
            .collect();
        let explained = refiner.explained(store, request, settings, wanted);
        let parts: Vec<Vec<ExplainPart>> = ranked
            .iter()
            .take(explained)
            .map(|source| {
                source
                    .parts
                    .iter()
                    .map(|p| {
                        let (fused, ordinal) = by_fragment[&p.fragment];
                        ExplainPart {
                            fragment: ordinal,
                            weight: p.weight,
                            seed: fused.seed,
                            lists: fused.lists.clone(),
                            boost: fused.boost,
                            via: fused.via.clone(),
                        }
                    })
                    .collect()
            })
            .collect();
        refiner.add_level(
            store,
            request,
            settings,
            Level {
                ranked: &ranked,
                parts,
                lists_ran: lists.len(),
            },
            &mut watch,
        )?;
        if refiner.placed() >= wanted || !truncated || deepest >= MAX_DEPTH {
            break (reports, fused.len(), ranked.len());
        }
        level += 1;
    };
    let (page, facets, refine_report) =
        refiner.page(store, offset, limit, settings.finder.max_hints)?;
    let mut hits = Vec::with_capacity(page.len());
    for (i, entry) in page {
        let mut hints = Vec::new();
        for &(fragment, score) in entry.fragments.iter().take(settings.finder.max_hints) {
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
        hits.push(Hit {
            rank: i + 1,
            id: entry.view.id,
            score: entry.shown,
            relevance: entry.relevance,
            envelope: entry.view.envelope,
            summary: entry.view.summary,
            hints,
            explain: Explain {
                raw: entry.raw,
                normalized_by: entry.normalized_by,
                parts: entry.parts,
                other_fragments: entry.other_fragments,
                refinements: entry.refinements,
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
        facets,
        diagnostics: Diagnostics {
            channels: reports,
            stages,
            total_ms,
            fused_fragments,
            boost: boost_diag,
            ranked_sources,
            refine: refine_report,
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
        /// Sources read through `source`, and whether any may carry a date.
        reads: std::cell::Cell<usize>,
        dated: bool,
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
                Some(l) => ChannelOutcome::Ran(RankedList::new(
                    channel,
                    l.hits.iter().take(depth).copied().collect(),
                )),
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

        fn may_have_dates(&self) -> bool {
            self.dated
        }

        fn source(&self, source: SourceKey) -> Result<Option<SourceView>, Self::Error> {
            self.reads.set(self.reads.get() + 1);
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

        fn fragment_text(&self, fragment: FragmentKey) -> Result<Option<String>, Self::Error> {
            // Distinct texts, so the near-duplicate collapse keeps every source.
            const TEXTS: [&str; 6] = [
                "alpha beta gamma delta epsilon",
                "tokens expire after one hour unless refreshed",
                "the deployment pipeline runs nightly on the build farm",
                "rust ownership rules prevent data races at compile time",
                "an entity fragment never ranks as a result",
                "paging must never skip or repeat a hit",
            ];
            Ok(Some(TEXTS[fragment.0 as usize % TEXTS.len()].to_string()))
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
        RankedList::new(
            channel,
            keys.iter()
                .map(|&k| ScoredFragment {
                    fragment: FragmentKey(k),
                    score: 1.0,
                })
                .collect(),
        )
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
            reads: std::cell::Cell::new(0),
            dated: true,
        }
    }

    #[test]
    fn undated_pools_read_views_for_the_page_only() {
        let mut many = memory();
        // Forty sources of one fragment each, ranked by one list.
        let keys: Vec<u64> = (100..140).collect();
        many.lists = vec![list(Channel::Lexical, &keys)];
        many.owners = keys.iter().map(|&k| (k, (Some(k), 0))).collect();
        let request = Query::text("q", 2, 5);
        let eager = search(&many, &request, &Settings::default()).unwrap();
        let eager_reads = many.reads.replace(0);
        many.dated = false;
        let lazy = search(&many, &request, &Settings::default()).unwrap();
        let lazy_reads = many.reads.get();
        let shown = |r: &SearchResponse| {
            r.hits
                .iter()
                .map(|h| {
                    (
                        h.rank,
                        h.id.clone(),
                        h.score,
                        h.envelope.clone(),
                        h.summary.clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(shown(&eager), shown(&lazy));
        assert_eq!(lazy.hits.len(), 5);
        assert_eq!(lazy_reads, 5, "only the page's sources are read");
        assert!(eager_reads >= 40, "{eager_reads}");
        // A stage that needs the pool's envelopes reads them again.
        let mut by_date = Settings::default();
        by_date.refine.sort = crate::refine::SortOrder::Date;
        many.reads.set(0);
        search(&many, &request, &by_date).unwrap();
        assert!(many.reads.get() >= 40);
    }

    #[test]
    fn pipeline_fuses_rolls_up_and_explains() {
        // The arithmetic below is at `rrf_k` 60.
        let mut settings = Settings::default();
        settings.finder.rrf_k = 60;
        let r = search(&memory(), &Query::text("q", 0, 10), &settings).unwrap();
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
                "refine_data",
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
