//! Incremental, atomic indexing runs: read inputs, redo changed sources, drop deleted ones,
//! commit once.
//!
//! Nothing is visible until the single commit at the end; a run that fails or is killed
//! leaves the previous commit intact. A source whose input fails to read this time keeps
//! its indexed version.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use finder_core::Settings;
use tantivy::{IndexWriter, Term};

use crate::analyzer::ANALYSIS;
use crate::document::Problem;
use crate::error::{IndexError, Result};
use crate::files::LEXICAL_DIR;
use crate::live::{Begin, LiveRun};
use crate::record::{RunCounts, SourceRecord, FORMAT};
use crate::stored::{commit_info, commit_stamp, load_catalog, open_or_create};
use crate::{ingest, store_error};

mod commit;
mod focus;
mod plan;
mod run;

pub use focus::{read_input_at, Focus};
pub use plan::{Admit, RunPlan};

/// The name of an indexing run's lock and progress files in the index folder ([`LiveRun`]).
pub(crate) const INDEXING_RUN: &str = "indexing";

/// Progress of a run, for progress bars.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// Starting to read an input.
    Input { path: &'a Path, kind: &'a str },
    /// One more source read (`done` counts all inputs so far).
    Source { done: u64 },
    /// Writing the commit.
    Committing,
    /// Writing the page files of the commit's new segments (see `pages`).
    Pages,
    /// Rebuilding the relation graph from the new commit.
    Graph,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    pub counts: RunCounts,
    pub problems: Vec<Problem>,
    /// The whole index was rebuilt because index-time settings changed.
    pub rebuilt: bool,
    pub sources: u64,
    pub fragments: u64,
    /// The relation graph rebuilt after the commit (`None` when off or when nothing changed).
    pub graph: Option<crate::graph::GraphReport>,
}

/// Indexes `inputs` into the index folder `dir`, creating it when needed.
pub fn index_inputs(
    dir: &Path,
    inputs: &[PathBuf],
    settings: &Settings,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<RunReport> {
    index_inputs_one_thread_up_to(dir, inputs, settings, progress, ONE_THREAD_MAX_INPUT_BYTES)
}

/// [`index_inputs`] after `changed` paths under the inputs changed (created, edited, renamed
/// or deleted files and folders, as a file watcher reports them): reads only the notes at
/// those paths and removes the sources there that are gone; every other source stays as it
/// is. Falls back to reading every input when a path is not under a folder input, when an
/// ignore file changed (its rules may take in or leave out anything) and when the run must
/// rebuild the index. The result is what [`index_inputs`] would make of the same files.
pub fn index_changed(
    dir: &Path,
    inputs: &[PathBuf],
    changed: &[PathBuf],
    settings: &Settings,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<RunReport> {
    changed_run(dir, inputs, changed, settings, progress, None)
}

/// Runs into one index one after another, as a watch makes them (one follower per index).
/// Between runs it keeps in memory what a run over a few changed paths would otherwise read
/// whole: the record of every source as of the last commit (the run's catalog, and the graph
/// build's sources) and what the last graph build found in each source's texts
/// (`graph/parts.json`). What it keeps serves only the commit it was kept for: a run after
/// another writer's commit reads the index again. The price is that memory, held while it
/// lives: the records (about a kilobyte a source, summaries included) and the parts (220 bytes
/// a source over the synthetic 100k notes).
#[derive(Default)]
pub struct Follower {
    /// The catalog after the last run, under the stamp of the commit it describes.
    catalog: Option<(String, HashMap<String, SourceRecord>)>,
    /// The last graph build's parts.
    parts: Option<crate::graph::Parts>,
}

impl Follower {
    /// [`index_inputs`], keeping what the next run needs.
    pub fn index_inputs(
        &mut self,
        dir: &Path,
        inputs: &[PathBuf],
        settings: &Settings,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<RunReport> {
        let limit = ONE_THREAD_MAX_INPUT_BYTES;
        run_inputs(dir, inputs, settings, progress, limit, None, Some(self))
    }

    /// [`index_changed`], starting from what the last run kept and keeping what the next
    /// one needs.
    pub fn index_changed(
        &mut self,
        dir: &Path,
        inputs: &[PathBuf],
        changed: &[PathBuf],
        settings: &Settings,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<RunReport> {
        changed_run(dir, inputs, changed, settings, progress, Some(self))
    }
}

fn changed_run(
    dir: &Path,
    inputs: &[PathBuf],
    changed: &[PathBuf],
    settings: &Settings,
    progress: &mut dyn FnMut(Progress<'_>),
    follower: Option<&mut Follower>,
) -> Result<RunReport> {
    let focus = Focus::of(inputs, changed);
    let focus = focus.as_ref().map(Focus::as_slice);
    let limit = ONE_THREAD_MAX_INPUT_BYTES;
    run_inputs(dir, inputs, settings, progress, limit, focus, follower)
}

/// The first analysis whose indexes have [`crate::schema::Fields::language`].
const LANGUAGE_FIELD: u32 = 4;

/// Removes an index of an earlier format, which this version neither reads nor writes into,
/// or of an analysis before [`LANGUAGE_FIELD`], whose schema lacks the field a source's
/// detected language goes in, so that the run builds it again from nothing; `true` when it
/// did. Like any rebuild it needs every input the index holds, and checks that before it
/// removes anything. The derived graph goes with it; the vectors stay, reused by text.
fn rebuild_outdated(dir: &Path, inputs: &[PathBuf]) -> Result<bool> {
    let Some(old) = crate::stored::peek_commit_info(dir)? else {
        return Ok(false);
    };
    if old.format >= FORMAT && old.analysis >= LANGUAGE_FIELD {
        return Ok(false);
    }
    RunPlan::new(inputs, true, &old.origins, &dir.display().to_string())
        .map_err(IndexError::Input)?;
    tracing::info!(index = %dir.display(), format = old.format, analysis = old.analysis, "rebuilding an index of an earlier format");
    for part in [LEXICAL_DIR, crate::graph::GRAPH_DIR] {
        let path = dir.join(part);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|source| IndexError::Io { path, source })?;
        }
    }
    Ok(true)
}

/// [`index_inputs`], with inputs of at most `one_thread_max_bytes` written by one thread.
pub(crate) fn index_inputs_one_thread_up_to(
    dir: &Path,
    inputs: &[PathBuf],
    settings: &Settings,
    progress: &mut dyn FnMut(Progress<'_>),
    one_thread_max_bytes: u64,
) -> Result<RunReport> {
    run_inputs(
        dir,
        inputs,
        settings,
        progress,
        one_thread_max_bytes,
        None,
        None,
    )
}

/// One run: over every input, or (`focus`, per input) over the paths under it that changed;
/// with a `follower`, from what it kept and keeping what the next run needs.
fn run_inputs(
    dir: &Path,
    inputs: &[PathBuf],
    settings: &Settings,
    progress: &mut dyn FnMut(Progress<'_>),
    one_thread_max_bytes: u64,
    focus: Option<&[Vec<PathBuf>]>,
    mut follower: Option<&mut Follower>,
) -> Result<RunReport> {
    crate::tuning::map_large_blocks();
    // Declared first, so dropped last: its release comes after the writer and the rest.
    let _keep = crate::tuning::keep_freed_memory();
    let outdated = rebuild_outdated(dir, inputs)?;
    let (index, fields) = open_or_create(dir, settings)?;
    // One run at a time per index; while it lasts, `indexing.json` says how far it is.
    let mut live = match LiveRun::try_begin(dir, INDEXING_RUN) {
        Ok(Begin::Started(run)) => run,
        Ok(Begin::Busy) => return Err(IndexError::Busy(dir.to_path_buf())),
        Err(source) => {
            let path = dir.join(INDEXING_RUN);
            return Err(IndexError::Io { path, source });
        }
    };
    let mut progress = |p: Progress<'_>| {
        match &p {
            Progress::Input { .. } => live.report("reading", 0, None),
            Progress::Source { done } => live.report("reading", *done, None),
            Progress::Committing => live.report("committing", 0, None),
            Progress::Pages => live.report("pages", 0, None),
            Progress::Graph => live.report("graph", 0, None),
        }
        progress(p);
    };
    let progress: &mut dyn FnMut(Progress<'_>) = &mut progress;
    let info = commit_info(&index, dir)?;
    let err = |e| store_error(dir, e);
    let rebuild = info
        .as_ref()
        .is_some_and(|i| i.settings != settings.index || i.analysis != ANALYSIS);
    // Every document of this run's commit is new (see `merge_segments`).
    let from_empty = info.is_none() || rebuild;

    // What the follower kept serves if no other writer committed since (taken: a run that
    // fails leaves it empty, and the next run reads the index).
    let kept = follower.as_deref_mut().and_then(|f| f.catalog.take());
    let catalog = match kept {
        Some((kept_for, catalog)) if kept_for == commit_stamp(&index, dir)? => catalog,
        _ => load_catalog(&index, fields, dir)?,
    };
    // The records after the run are put together for the graph build (a run over some
    // paths) and for the follower.
    let keep_records = focus.is_some() || follower.is_some();
    let known = info.iter().flat_map(|i| &i.origins);
    let mut plan = RunPlan::new(inputs, rebuild, known, &dir.display().to_string())
        .map_err(IndexError::Input)?;
    // A rebuild reads everything; so does a first run.
    let focus = focus.filter(|_| !(rebuild || outdated || info.is_none()));
    if let Some(focus) = focus {
        focus::limit(&mut plan, inputs, focus);
    }

    // A small run is written by one thread, into one segment: the build needs no merge.
    let small = focus.is_some()
        || ingest::input_bytes_up_to(inputs, one_thread_max_bytes) <= one_thread_max_bytes;
    // It is also built, graph included, in small pages (`ProcessTuning::small_pages`).
    let _small_pages = small.then(crate::tuning::small_pages);
    let opened = if small {
        index.writer_with_num_threads(1, WRITER_MEMORY_BYTES)
    } else {
        index.writer(WRITER_MEMORY_BYTES)
    };
    let writer: IndexWriter = opened.map_err(|e| match e {
        tantivy::TantivyError::LockFailure(..) => IndexError::Busy(dir.to_path_buf()),
        e => store_error(dir, e),
    })?;
    // A run killed before its commit leaves files the last commit does not reference (new
    // segments, delete bitsets named by opstamp). The next run reuses those opstamps, so they
    // must go before it writes: tantivy refuses to overwrite an existing file.
    writer.garbage_collect_files().wait().map_err(err)?;
    // A small run's page file is made as its documents are added (see `PagesAhead`); its
    // records' file is made only now, under the writer's lock.
    let mut ahead = if small {
        let before = index.searchable_segment_ids().map_err(err)?;
        crate::pages::PagesAhead::start(dir, before.into_iter().collect())
    } else {
        None
    };
    if rebuild {
        writer.delete_all_documents().map_err(err)?;
    }

    let target = run::Target {
        dir,
        writer: &writer,
        fields,
        settings,
        catalog: &catalog,
        focus,
        keep_records,
    };
    let (written, mut records) =
        run::write_sources(&target, inputs, &mut plan, ahead.as_mut(), progress)?;

    // Sources of this run's inputs that were not seen are gone from their input, unless the
    // input had errors that hid which ids it holds.
    let stored = catalog.iter().map(|(id, r)| (id, r.origin.as_str()));
    for id in plan.finish(stored, |id| written.contains_key(id)) {
        writer.delete_term(Term::from_field_text(fields.source_id, id));
    }

    // Totals after this run: the previous catalog, minus removals, plus what was written.
    let mut totals: HashMap<&String, (u32, bool, Option<&str>)> = HashMap::new();
    if !rebuild {
        for (id, r) in &catalog {
            if plan.keeps(id, &r.origin) {
                let counts = (
                    r.fragments,
                    r.envelope.date.is_some(),
                    r.language.as_deref(),
                );
                totals.insert(id, counts);
            }
        }
    }
    for (id, w) in &written {
        totals.insert(id, (w.fragments, w.dated, w.language));
    }
    let sources = totals.len() as u64;
    let fragments = totals.values().map(|&(n, ..)| n as u64).sum();
    let dated = totals.values().filter(|&&(_, d, _)| d).count() as u64;
    let languages: BTreeSet<String> = totals
        .values()
        .filter_map(|&(.., language)| language.map(str::to_string))
        .collect();
    // The run's bookkeeping (sets of every source id: hundreds of MB at a million sources) is
    // done with; the commit and the graph build below should not hold it.
    drop(totals);
    // Every source record after the run (the kept ones and those written): the graph build
    // need not read them all from the store again.
    let after = keep_records.then(|| {
        let mut after = if rebuild { HashMap::new() } else { catalog };
        after.retain(|id, r| plan.keeps(id, &r.origin));
        after.extend(records.drain());
        after
    });
    drop((written, records));

    let changed = plan.changed();
    let report = RunReport {
        rebuilt: rebuild || outdated,
        sources,
        fragments,
        counts: plan.counts,
        problems: plan.problems,
        graph: None,
    };
    let origins = plan.origins;
    let commit = commit::Commit {
        dir,
        index: &index,
        fields,
        settings,
        previous: info,
        origins,
        dated,
        languages: languages.into_iter().collect(),
        from_empty,
        changed,
        sources_after: after.as_ref(),
        parts: follower.as_deref_mut().map(|f| &mut f.parts),
    };
    let report = commit.run(writer, report, ahead, progress)?;
    if let (Some(follower), Some(after)) = (follower, after) {
        // Still the only writer (`live`): the stamp is this run's commit. Without one, the
        // next run reads the catalog from the index.
        follower.catalog = commit_stamp(&index, dir).ok().map(|stamp| (stamp, after));
    }
    Ok(report)
    // `_keep`, dropped after every other local, hands back what the run freed.
}

/// Memory the indexing threads share for the postings they hold before writing a segment
/// (tantivy gives each thread an equal part and flushes a thread's segment when its part is
/// full). It is taken as documents come, so a small run uses little of it. At 100 MB a
/// segment held about 25k fragments, and the forty or so of a 1M build were merged by
/// tantivy's merge policy while the build went on and at its commit; at 800 MB each thread
/// writes two segments (460k fragments, then the rest), the commit takes 0.8 s instead of
/// 8.1, the lexical build 8% less in two paired runs, and its peak stays 1.3 GB (below the
/// query phase's 2.3 GB with vectors; docs/perf/one-indexing-thread.md).
const WRITER_MEMORY_BYTES: usize = 800_000_000;

/// Inputs of at most this many bytes are indexed by one thread (larger ones by a thread per
/// core, up to tantivy's eight). Reading and analysing the input is the build's bottleneck, not
/// the threads that write the postings, and on two cores a second writing thread mostly
/// competes with the reading one; it also writes a second segment, which a build from nothing
/// then merges (`MERGE_MAX_FRAGMENTS`), rewriting the whole index. Paired runs of
/// `finder-bench run` (records with their vectors; docs/perf/one-indexing-thread.md):
/// SciFact (5,231 fragments) 0.25 s against 0.46, synthetic 10k (57.7 MB) 0.49 against 0.62,
/// synthetic 100k (577 MB) 3.6 against 4.4, with half the peak memory; at 1M (5.8 GB) one
/// thread was 4–9% slower (33.4 and 34.7 s against 32.2 and 31.9). Counted from the inputs'
/// sizes before the run; an incremental run over large inputs keeps the threads.
const ONE_THREAD_MAX_INPUT_BYTES: u64 = 1 << 30;
