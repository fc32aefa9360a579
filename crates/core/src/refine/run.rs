//! Runs the refinement stages over the pipeline's rolled-up ranking, in DESIGN's order:
//! recency blend (or date order), near-duplicate collapse, bounded rerank, plugin merge, MMR,
//! late `extras` filters, personalization and the `min_score` cut; then pages.
//!
//! Paging cannot break because no stage ever sees the page. The pipeline ranks in *levels*:
//! level 0 runs every channel at its list size, level `i` at `2^i` times that. Each level is
//! refined as a whole, and contributes the sources no earlier level had, in its own order,
//! after everything earlier levels placed. That long ranking does not depend on the page
//! asked for; a page only decides how many levels are computed. Filters and `min_score` only
//! remove: they never make the pipeline retrieve deeper (no silent refill).

use std::collections::{HashMap, HashSet};

use super::{
    apply_filter, apply_rerank, collapse_near_duplicates, comparable_score, facets, merge_plugins,
    mmr, personalize, recency_blend, rerank_plan, sort_by_date, Candidate, Extensions, Facets,
    PluginList, Ranked, Refinement, RerankBackend, RerankMode, SortOrder, SourceFilter,
};
use crate::model::{Envelope, FragmentKey, Query, RankedList, SourceKey};
use crate::pipeline::{FragmentMeta, Retriever, SourceView, Stopwatch};
use crate::response::{ExplainPart, RefineReport, StageIssue};
use crate::rollup::SourceScore;
use crate::settings::Settings;
use crate::{FastMap, FastSet};

/// The text a plugin gave with each id it returned.
type PluginTexts = HashMap<String, Option<String>>;

/// One ranked source on its way through the stages.
pub(crate) struct Entry {
    /// The source's view; a placeholder while `pending` (read for the page only).
    pub view: SourceView,
    /// The stored source, when the entry is one (plugin-only hits may not be).
    pub key: Option<SourceKey>,
    pub pending: bool,
    /// The rollup score.
    pub raw: f64,
    /// The score after the stages so far.
    pub score: f64,
    pub relevance: f64,
    pub parts: Vec<ExplainPart>,
    pub fragments: Vec<(FragmentKey, f64)>,
    pub other_fragments: usize,
    pub refinements: Vec<Refinement>,
    /// Text for similarity and rerank: the best fragment's text, else the summary.
    pub text: String,
    pub vector: Option<Vec<f32>>,
    /// The normalised score shown to the user.
    pub shown: f64,
    pub normalized_by: f64,
}

/// One level's rolled-up ranking, as the pipeline hands it over.
pub(crate) struct Level<'a> {
    pub ranked: &'a [SourceScore],
    /// Explain parts of the ranked sources, in the same order: of every one, or of the first
    /// [`Refiner::explained`] when the rest cannot reach the page. Those past the end get no
    /// entry: they count as placed, and the long ranking ends before them.
    pub parts: Vec<Vec<ExplainPart>>,
    /// Channel lists that ran at this level (the comparable score's denominator).
    pub lists_ran: usize,
}

/// The refinement state of one query across levels.
pub(crate) struct Refiner<'x> {
    ext: &'x Extensions,
    now: i64,
    filter: SourceFilter,
    scope: Option<HashSet<String>>,
    views: FastMap<SourceKey, Option<SourceView>>,
    texts: FastMap<SourceKey, String>,
    rerank_scores: HashMap<String, f64>,
    rerank_failed: bool,
    /// Each plugin's list (asked once per query) with the texts it gave per id.
    plugins: Option<Vec<(PluginList, PluginTexts)>>,
    consumed: HashSet<String>,
    /// Sources placed (or passed over) by key: what levels without views go by.
    consumed_keys: FastSet<SourceKey>,
    /// Sources placed before the late removals (what decides whether to go deeper).
    placed: usize,
    out: Vec<Entry>,
    pub report: RefineReport,
}

impl<'x> Refiner<'x> {
    pub fn new(ext: &'x Extensions, request: &Query) -> Self {
        Refiner {
            ext,
            now: ext.now(),
            filter: SourceFilter::of(request),
            scope: request
                .scope
                .as_ref()
                .map(|ids| ids.iter().cloned().collect()),
            views: FastMap::default(),
            texts: FastMap::default(),
            rerank_scores: HashMap::new(),
            rerank_failed: false,
            plugins: None,
            consumed: HashSet::new(),
            consumed_keys: FastSet::default(),
            placed: 0,
            out: Vec::new(),
            report: RefineReport::default(),
        }
    }

    /// Whether no stage reads the pooled sources (dates, text, extras, ids): their views are
    /// then read for the page alone, most of a plain query's cost otherwise.
    fn lazy<R: Retriever>(&self, store: &R, request: &Query, settings: &Settings) -> bool {
        let r = &settings.refine;
        let reads_pool = r.dedup
            || r.mmr
            || r.rerank != RerankBackend::None
            || self.restricts(settings)
            || !self.filter.is_empty()
            || request.user.is_some()
            || !r.plugins.is_empty()
            || !self.ext.plugins.is_empty()
            || match r.sort {
                SortOrder::Date => true,
                SortOrder::Score => r.recency && store.may_have_dates(),
            };
        !reads_pool
    }

    /// How many of the next level's ranked sources need their explain parts (see
    /// [`Level::parts`]): the first `wanted` when nothing can reorder or drop the first
    /// level's sources (no stage reads the pool, no `min_score`), so the page is its first
    /// `wanted` places; all of them otherwise.
    pub fn explained<R: Retriever>(
        &self,
        store: &R,
        request: &Query,
        settings: &Settings,
        wanted: usize,
    ) -> usize {
        let first = self.out.is_empty() && self.consumed_keys.is_empty();
        if first && settings.refine.min_score <= 0.0 && self.lazy(store, request, settings) {
            wanted
        } else {
            usize::MAX
        }
    }

    /// Sources placed so far, before late filters and `min_score` removed any.
    pub fn placed(&self) -> usize {
        self.placed
    }

    /// Whether channel lists must be restricted before ranking (scope, or the prefilter).
    pub fn restricts(&self, settings: &Settings) -> bool {
        self.scope.is_some() || (settings.refine.prefilter && !self.filter.is_empty())
    }

    /// Whether a source may take part at all: in scope and, with the prefilter, matching the
    /// filters. Unknown sources are kept out.
    pub fn admits<R: Retriever>(
        &mut self,
        store: &R,
        source: SourceKey,
        settings: &Settings,
    ) -> Result<bool, R::Error> {
        let prefilter = settings.refine.prefilter;
        self.view(store, source)?;
        let Some(Some(view)) = self.views.get(&source) else {
            return Ok(false);
        };
        let in_scope = self.scope.as_ref().is_none_or(|s| s.contains(&view.id));
        Ok(in_scope && (!prefilter || self.filter.admits(&view.envelope)))
    }

    /// Drops from a channel list the fragments whose source is out of scope or, with the
    /// prefilter, fails the filters. Entity fragments (no source) stay: they carry relevance
    /// to their neighbours and never rank themselves.
    pub fn restrict<R: Retriever>(
        &mut self,
        store: &R,
        mut list: RankedList,
        settings: &Settings,
    ) -> Result<RankedList, R::Error> {
        if !self.restricts(settings) {
            return Ok(list);
        }
        let keys: Vec<FragmentKey> = list.hits.iter().map(|h| h.fragment).collect();
        let metas = store.fragment_meta(&keys)?;
        let mut keep = Vec::with_capacity(keys.len());
        for meta in metas {
            keep.push(match meta {
                Some(FragmentMeta {
                    source: Some(source),
                    ..
                }) => self.admits(store, source, settings)?,
                Some(_) => true,
                None => false,
            });
        }
        let before = list.hits.len();
        let mut keep = keep.into_iter();
        list.hits.retain(|_| keep.next().unwrap_or(false));
        self.report.prefiltered += before - list.hits.len();
        Ok(list)
    }

    fn view<R: Retriever>(
        &mut self,
        store: &R,
        source: SourceKey,
    ) -> Result<Option<&SourceView>, R::Error> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.views.entry(source) {
            slot.insert(store.source(source)?);
        }
        Ok(self.views[&source].as_ref())
    }

    /// Refines one level and appends the sources it adds to the long ranking.
    pub fn add_level<R: Retriever>(
        &mut self,
        store: &R,
        request: &Query,
        settings: &Settings,
        level: Level<'_>,
        watch: &mut Stopwatch,
    ) -> Result<(), R::Error> {
        let r = &settings.refine;
        let rrf_k = settings.finder.rrf_k;
        let needs_text = r.dedup || r.mmr || r.rerank != RerankBackend::None;
        let restricts = self.restricts(settings);
        let lazy = self.lazy(store, request, settings);
        // Past the explained sources (see `Level::parts`) nothing reaches the page: an entry
        // of a few hundred bytes built, moved and dropped for each of them is work for none.
        let unexplained = level.ranked.len().saturating_sub(level.parts.len());
        let explained = level.ranked.len() - unexplained;
        let mut entries = Vec::with_capacity(explained);
        for (source, parts) in level.ranked[..explained].iter().zip(level.parts) {
            // Lists derived after fusion (graph neighbours, communities) were not restricted
            // with the channels: scope and the prefilter hold for every source regardless.
            if restricts && !self.admits(store, source.source, settings)? {
                continue;
            }
            let view = if lazy {
                SourceView {
                    id: String::new(),
                    envelope: Envelope::default(),
                    summary: String::new(),
                }
            } else {
                let Some(view) = self.view(store, source.source)?.cloned() else {
                    continue;
                };
                view
            };
            let best = source.fragments.first().map(|f| f.0);
            let text = match (needs_text, best) {
                (true, Some(f)) => self.text(store, source.source, f, &view.summary)?,
                _ => String::new(),
            };
            // The best fragment's vector, else another hit fragment's: a record's given
            // vector sits on one of its fragments only.
            let vector = if r.mmr {
                source
                    .fragments
                    .iter()
                    .find_map(|f| store.fragment_vector(f.0))
            } else {
                None
            };
            let relevance = parts.first().map_or(0.0, |p| {
                comparable_score(&p.lists, level.lists_ran, rrf_k).share
            });
            entries.push(Entry {
                view,
                key: Some(source.source),
                pending: lazy,
                raw: source.score,
                score: source.score,
                relevance,
                other_fragments: source.fragments.len().saturating_sub(parts.len()),
                parts,
                fragments: source.fragments.clone(),
                refinements: Vec::new(),
                text,
                vector,
                shown: 0.0,
                normalized_by: 1.0,
            });
        }
        watch.lap("refine_data");

        // Recency blend, or the date order instead of it.
        match r.sort {
            SortOrder::Date => {
                let ranked = sort_by_date(&candidates(&entries));
                entries = apply(entries, ranked, Refinement::DateSort);
                watch.lap("date_sort");
            }
            SortOrder::Score if r.recency => {
                let c = candidates(&entries);
                // Without any date the blend would only compress scores: skip it.
                if c.iter().any(|c| c.date.is_some()) {
                    let ranked = recency_blend(&c, &r.recency_params(), self.now);
                    entries = apply(entries, ranked, Refinement::Recency);
                    watch.lap("recency");
                }
            }
            SortOrder::Score => {}
        }

        if r.dedup {
            let kept = collapse_near_duplicates(&candidates(&entries), &r.dedup_params());
            for k in &kept {
                for a in &k.explain.absorbed {
                    if let Some(key) = store.source_key(&a.id) {
                        self.consumed_keys.insert(key);
                    }
                    if self.consumed.insert(a.id.clone()) {
                        self.report.collapsed += 1;
                    }
                }
            }
            entries = apply(entries, kept, Refinement::Collapse);
            watch.lap("dedup");
        }

        if r.rerank != RerankBackend::None {
            self.rerank(request, settings, &mut entries);
            watch.lap("rerank");
        }

        if !r.plugins.is_empty() || !self.ext.plugins.is_empty() {
            entries = self.merge_plugins(store, request, settings, entries)?;
            watch.lap("plugins");
        }

        if r.mmr {
            let ranked = mmr(&candidates(&entries), &r.mmr_params(), r.mmr_depth);
            entries = apply(entries, ranked, Refinement::Mmr);
            watch.lap("mmr");
        }

        // Scores of this level, shown with its best as 1.0; later levels never outrank
        // what earlier ones placed.
        let divisor = super::top_divisor(entries.iter().map(|e| e.score));
        let ceiling = self.out.last().map_or(f64::INFINITY, |e| e.shown);
        // Kept in place: an entry is a few hundred bytes, and moving every one into a new
        // vector was most of a plain query's copying.
        let mut segment = entries;
        self.consumed_keys.reserve(level.ranked.len());
        let (consumed_keys, consumed) = (&mut self.consumed_keys, &mut self.consumed);
        segment.retain_mut(|e| {
            let new_key = e.key.is_none_or(|k| consumed_keys.insert(k));
            let new_id = e.pending || consumed.insert(e.view.id.clone());
            if new_key && new_id {
                e.normalized_by = divisor;
                e.shown = (e.score / divisor).min(ceiling);
            }
            new_key && new_id
        });
        for s in level.ranked {
            self.consumed_keys.insert(s.source);
            if let Some(Some(v)) = self.views.get(&s.source) {
                self.consumed.insert(v.id.clone());
            }
        }
        self.placed += segment.len() + unexplained;

        if !self.filter.is_empty() && !r.prefilter {
            let kept = apply_filter(&candidates(&segment), &self.filter);
            self.report.filtered_out += kept.filtered_out;
            let keep: HashSet<usize> = kept.kept.into_iter().collect();
            segment = segment
                .into_iter()
                .enumerate()
                .filter(|(i, _)| keep.contains(i))
                .map(|(_, e)| e)
                .collect();
            watch.lap("filter");
        }

        if let Some(user) = &request.user {
            let profile = self.ext.profiles.get(user);
            let p = personalize(
                &candidates(&segment),
                &request.text,
                profile,
                &r.personal_params(),
                self.now,
            );
            self.report.personalization = Some(match (&p.summary.reason, p.summary.applied) {
                (_, true) => format!("applied (lambda {})", p.summary.gate.lambda),
                (Some(why), false) => format!("not applied: {why}"),
                (None, false) => "not applied".to_string(),
            });
            if p.summary.applied {
                let shown: Vec<f64> = segment.iter().map(|e| e.shown).collect();
                segment = apply(segment, p.ranked, Refinement::Personalization);
                // Each place keeps its score, as the stage does.
                for (e, s) in segment.iter_mut().zip(shown) {
                    e.shown = s;
                }
            }
            watch.lap("personalize");
        }

        if r.min_score > 0.0 {
            let before = segment.len();
            segment.retain(|e| e.relevance >= r.min_score);
            self.report.below_min_score += before - segment.len();
            watch.lap("min_score");
        }
        if self.out.is_empty() {
            self.out = segment;
        } else {
            self.out.extend(segment);
        }
        Ok(())
    }

    /// The best fragment's full text (cached per source), or the summary.
    fn text<R: Retriever>(
        &mut self,
        store: &R,
        source: SourceKey,
        fragment: FragmentKey,
        summary: &str,
    ) -> Result<String, R::Error> {
        if let Some(t) = self.texts.get(&source) {
            return Ok(t.clone());
        }
        let text = store
            .fragment_text(fragment)?
            .unwrap_or_else(|| summary.to_string());
        self.texts.insert(source, text.clone());
        Ok(text)
    }

    /// Bounded rerank of the head; a failing reranker skips the stage and says why.
    fn rerank(&mut self, request: &Query, settings: &Settings, entries: &mut Vec<Entry>) {
        let r = &settings.refine;
        let Some(reranker) = self.ext.reranker.as_ref().filter(|_| !self.rerank_failed) else {
            if !self.rerank_failed {
                self.rerank_failed = true;
                self.report.degraded.push(StageIssue {
                    stage: "rerank".into(),
                    reason: format!("refine.rerank = {:?} but no reranker is attached", r.rerank),
                });
            }
            return;
        };
        let head = rerank_plan(r.rerank_mode, usize::MAX).rerank_count;
        let head = head.min(entries.len());
        let missing: Vec<usize> = (0..head)
            .filter(|&i| !self.rerank_scores.contains_key(&entries[i].view.id))
            .collect();
        if !missing.is_empty() {
            let docs: Vec<&str> = missing.iter().map(|&i| entries[i].text.as_str()).collect();
            match reranker.rerank(&request.text, &docs) {
                Ok(scores) if scores.len() == docs.len() => {
                    for (&i, s) in missing.iter().zip(scores) {
                        self.rerank_scores.insert(entries[i].view.id.clone(), s);
                    }
                }
                Ok(scores) => {
                    return self.rerank_error(format!(
                        "the reranker returned {} scores for {} documents",
                        scores.len(),
                        docs.len()
                    ))
                }
                Err(e) => return self.rerank_error(e),
            }
        }
        let scores: Vec<f64> = entries[..head]
            .iter()
            .map(|e| self.rerank_scores[&e.view.id])
            .collect();
        let ranked = apply_rerank(&candidates(entries), &scores);
        *entries = apply(std::mem::take(entries), ranked, Refinement::Rerank);
    }

    fn rerank_error(&mut self, reason: String) {
        self.rerank_failed = true;
        self.report.degraded.push(StageIssue {
            stage: "rerank".into(),
            reason,
        });
    }

    /// Merges the plugin lists (asked once per query) under the frozen core head.
    fn merge_plugins<R: Retriever>(
        &mut self,
        store: &R,
        request: &Query,
        settings: &Settings,
        entries: Vec<Entry>,
    ) -> Result<Vec<Entry>, R::Error> {
        if self.plugins.is_none() {
            let mut lists = Vec::new();
            for plugin in &self.ext.plugins {
                match plugin.retrieve(&request.text, settings.refine.plugin_depth) {
                    Ok(hits) => {
                        let texts = hits
                            .iter()
                            .map(|h| (h.id.clone(), h.text.clone()))
                            .collect();
                        let hits = hits
                            .into_iter()
                            .filter(|h| self.scope.as_ref().is_none_or(|s| s.contains(&h.id)))
                            .map(|h| (h.id, h.score))
                            .collect();
                        let name = plugin.name().to_string();
                        lists.push((PluginList { name, hits }, texts));
                    }
                    Err(reason) => self.report.degraded.push(StageIssue {
                        stage: format!("plugin {}", plugin.name()),
                        reason,
                    }),
                }
            }
            if self.ext.plugins.is_empty() {
                self.report.degraded.push(StageIssue {
                    stage: "plugins".into(),
                    reason: "refine.plugins is set but no plugin retriever is attached".into(),
                });
            }
            self.plugins = Some(lists);
        }
        let lists = self.plugins.take().unwrap_or_default();
        let plain: Vec<PluginList> = lists.iter().map(|(l, _)| l.clone()).collect();
        let merged = merge_plugins(
            &candidates(&entries),
            &plain,
            &settings.refine.plugin_params(),
            settings.finder.rrf_k,
        );
        let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(merged.len());
        for m in merged {
            let entry = match m.core_index {
                Some(i) => slots[i].take(),
                None => {
                    let text = lists
                        .iter()
                        .find_map(|(_, t)| t.get(&m.id).cloned().flatten());
                    self.plugin_entry(store, settings, &m.id, text)?
                }
            };
            if let Some(mut e) = entry {
                e.score = m.score;
                e.refinements.push(Refinement::PluginMerge(m.explain));
                out.push(e);
            }
        }
        self.plugins = Some(lists);
        Ok(out)
    }

    /// An entry for a hit only a plugin found: the indexed source when this index holds the
    /// id, else a bare one showing the plugin's text. `None` when the prefilter rejects it.
    fn plugin_entry<R: Retriever>(
        &mut self,
        store: &R,
        settings: &Settings,
        id: &str,
        text: Option<String>,
    ) -> Result<Option<Entry>, R::Error> {
        let source = store.source_key(id);
        let view = match source {
            Some(key) => self.view(store, key)?.cloned(),
            None => None,
        };
        let view = view.unwrap_or_else(|| SourceView {
            id: id.to_string(),
            envelope: Envelope {
                title: id.to_string(),
                path: id.to_string(),
                ..Envelope::default()
            },
            summary: text.clone().unwrap_or_default(),
        });
        if settings.refine.prefilter && !self.filter.admits(&view.envelope) {
            return Ok(None);
        }
        Ok(Some(Entry {
            text: text.unwrap_or_else(|| view.summary.clone()),
            view,
            key: source,
            pending: false,
            raw: 0.0,
            score: 0.0,
            relevance: 0.0,
            parts: Vec::new(),
            fragments: Vec::new(),
            other_fragments: 0,
            refinements: Vec::new(),
            vector: None,
            shown: 0.0,
            normalized_by: 1.0,
        }))
    }

    /// The long ranking from `offset`, at most `limit` entries (their views read now when
    /// the stages did not need them), and facets over them. The store is told the views and
    /// the first `hints` fragments of each entry the page will show, in one
    /// [`Retriever::prefetch`].
    pub fn page<R: Retriever>(
        mut self,
        store: &R,
        offset: usize,
        limit: usize,
        hints: usize,
    ) -> Result<Page, R::Error> {
        let shown = || self.out.iter().skip(offset).take(limit);
        let pending: Vec<SourceKey> = shown()
            .filter(|e| e.pending)
            .filter_map(|e| e.key)
            .collect();
        let fragments: Vec<FragmentKey> = shown()
            .flat_map(|e| e.fragments.iter().take(hints))
            .map(|&(fragment, _)| fragment)
            .collect();
        store.prefetch(&pending, &fragments)?;
        let mut page: Vec<(usize, Entry)> = Vec::with_capacity(limit.min(self.out.len()));
        for (i, mut e) in self.out.drain(..).enumerate().skip(offset).take(limit) {
            if e.pending {
                // A source gone from the store since its fragments ranked is left out.
                let Some(view) = e.key.map(|k| store.source(k)).transpose()?.flatten() else {
                    continue;
                };
                e.view = view;
                e.pending = false;
            }
            page.push((i, e));
        }
        let facets = facets(
            page.iter()
                .map(|(_, e)| (&e.view.envelope.extras, e.view.envelope.tags.as_slice())),
        );
        Ok((page, facets, self.report))
    }
}

/// A page of the long ranking (with each entry's rank), its facets and the stages' report.
pub(crate) type Page = (Vec<(usize, Entry)>, Facets, RefineReport);

/// The stages' view of the entries, borrowing their data.
fn candidates(entries: &[Entry]) -> Vec<Candidate<'_>> {
    entries
        .iter()
        .map(|e| {
            let c = Candidate::new(&e.view.id, e.score)
                .with_envelope(&e.view.envelope)
                .with_text(&e.text);
            match &e.vector {
                Some(v) => c.with_vector(v),
                None => c,
            }
        })
        .collect()
}

/// Puts the entries in a stage's order with its scores, recording its explain on each.
/// Entries the stage left out (absorbed duplicates) are dropped.
fn apply<R>(
    entries: Vec<Entry>,
    ranked: Vec<Ranked<R>>,
    wrap: impl Fn(R) -> Refinement,
) -> Vec<Entry> {
    let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    ranked
        .into_iter()
        .filter_map(|r| {
            let mut e = slots.get_mut(r.index)?.take()?;
            e.score = r.score;
            e.refinements.push(wrap(r.explain));
            Some(e)
        })
        .collect()
}

/// Depth multiplier used with [`RerankMode`]: catalog mode retrieves at least
/// `min(200, max(k, 50))` candidates, `k` being a channel's list size.
pub(crate) fn base_depth(settings: &Settings, list_size: usize) -> usize {
    let r = &settings.refine;
    if r.rerank != RerankBackend::None && r.rerank_mode == RerankMode::Catalog {
        rerank_plan(RerankMode::Catalog, list_size)
            .retrieve_depth
            .max(list_size)
    } else {
        list_size
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
