//! The end of a run: its one commit, the merge of a small build's segments, the page files of
//! the new segments and the graph rebuilt from the committed snapshot.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use finder_core::Settings;
use tantivy::{Index, IndexWriter};

use super::{Progress, RunReport};
use crate::analyzer::ANALYSIS;
use crate::document::Problem;
use crate::error::Result;
use crate::files::LEXICAL_DIR;
use crate::graph::Parts;
use crate::pages::PagesAhead;
use crate::record::{CommitInfo, SourceRecord, FORMAT};
use crate::schema::Fields;
use crate::store_error;

/// The largest first build (or rebuild) whose segments are merged into one after its commit.
/// The merge rewrites the whole index: at 100k fragments 2.8 s, 18% of the lexical build, for
/// a lexical p50 18% lower (docs/perf/one-indexing-thread.md). Larger builds leave their
/// segments to tantivy's merge policy: there a merge is a rewrite of gigabytes, and a 1M
/// build's peak memory is already near its bound.
const MERGE_MAX_FRAGMENTS: u64 = 250_000;

/// Merges the committed segments into one, when there are several. A build leaves a segment
/// per indexing thread and memory budget, and a query pays for every segment: a term lookup
/// and a postings open per query word, and a store to read each page record from. Runs after
/// the background merges the commit started (their writer is gone): a merge of segments one
/// of those is merging would fail. Incremental runs leave the merging to the merge policy.
fn merge_segments(index: &Index) -> tantivy::Result<()> {
    let segments = index.searchable_segment_ids()?;
    if segments.len() < 2 {
        return Ok(());
    }
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000)?;
    writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
    writer.merge(&segments).wait()?;
    writer.wait_merging_threads()
}

/// What a run's commit needs besides the writer and the report.
pub(super) struct Commit<'a> {
    pub dir: &'a Path,
    pub index: &'a Index,
    pub fields: Fields,
    pub settings: &'a Settings,
    /// The payload of the commit before, `None` for a fresh index.
    pub previous: Option<CommitInfo>,
    /// The run's inputs, canonical.
    pub origins: Vec<String>,
    /// Sources with a date after the run.
    pub dated: u64,
    /// The languages detected for some source after the run, in order.
    pub languages: Vec<String>,
    /// Every document of the commit is new (a first build or a rebuild).
    pub from_empty: bool,
    /// The run changed what the index holds.
    pub changed: bool,
    /// Every source record after the run, when the run has them at hand (a run over some
    /// paths, or a follower's): the graph build takes them instead of reading the store.
    pub sources_after: Option<&'a HashMap<String, SourceRecord>>,
    /// A follower's graph parts: taken by the graph build instead of `graph/parts.json`,
    /// and given back what it found.
    pub parts: Option<&'a mut Option<Parts>>,
}

impl Commit<'_> {
    /// Commits the run with its payload, then does what only speeds queries up (the merge,
    /// the page files) and rebuilds the graph; a failure after the commit leaves it standing
    /// and is reported as a problem.
    pub(super) fn run(
        self,
        mut writer: IndexWriter,
        mut report: RunReport,
        mut ahead: Option<PagesAhead>,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<RunReport> {
        let Commit {
            dir,
            index,
            fields,
            settings,
            previous,
            origins,
            dated,
            languages,
            from_empty,
            changed,
            sources_after,
            parts,
        } = self;
        let err = |e| store_error(dir, e);
        let rebuild = report.rebuilt;
        let previous_generation = previous.as_ref().map_or(0, |i| i.generation);
        let generation = previous_generation + u64::from(changed || rebuild || previous.is_none());
        let mut all_origins: BTreeSet<String> = previous
            .map(|i| i.origins.into_iter().collect())
            .unwrap_or_default();
        all_origins.extend(origins);
        let new_info = CommitInfo {
            format: FORMAT,
            analysis: ANALYSIS,
            settings: settings.index.clone(),
            sources: report.sources,
            fragments: report.fragments,
            origins: all_origins.into_iter().collect(),
            last_run: report.counts,
            committed_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            generation,
            dated: Some(dated),
            languages,
        };
        progress(Progress::Committing);
        tracing::info!(
            index = %dir.display(),
            added = report.counts.added,
            updated = report.counts.updated,
            removed = report.counts.removed,
            unchanged = report.counts.unchanged,
            problems = report.counts.problems,
            rebuild,
            "committing"
        );
        let mut prepared = writer.prepare_commit().map_err(err)?;
        prepared.set_payload(&serde_json::to_string(&new_info).expect("commit info serialises"));
        prepared.commit().map_err(err)?;
        writer.wait_merging_threads().map_err(err)?;
        if from_empty && report.fragments <= MERGE_MAX_FRAGMENTS {
            // Only a speed-up: a failed merge leaves the commit standing and is reported.
            if let Err(e) = merge_segments(index) {
                report.problems.push(Problem {
                    place: dir.join(LEXICAL_DIR).display().to_string(),
                    reason: format!("segments not merged: {e}"),
                    source_id: None,
                });
            }
        }
        // Only a speed-up too: a segment without its page file is read from its store.
        progress(Progress::Pages);
        if let Err(e) = crate::pages::write_missing(dir, fields, ahead.take()) {
            report.problems.push(Problem {
                place: dir.join(LEXICAL_DIR).display().to_string(),
                reason: format!("page files not written: {e}"),
                source_id: None,
            });
        }
        crate::tuning::release_free_memory();

        // The graph is derived from the committed snapshot; it is redone when anything changed
        // or when it is missing. A failure here leaves the commit standing and is reported.
        let current = crate::graph::graph_is_current(dir, &settings.graph, generation);
        let stale = changed || !current || rebuild;
        let leftover = !settings.graph.build && dir.join(crate::graph::GRAPH_DIR).exists();
        if leftover || (settings.graph.build && stale) {
            progress(Progress::Graph);
            tracing::info!(index = %dir.display(), "building the graph");
            match crate::graph::build_graph_from(dir, settings, sources_after, parts) {
                Ok(g) => report.graph = Some(g),
                Err(e) => report.problems.push(Problem {
                    place: dir.join(crate::graph::GRAPH_DIR).display().to_string(),
                    reason: format!("graph not rebuilt: {e}"),
                    source_id: None,
                }),
            }
        }
        Ok(report)
    }
}
