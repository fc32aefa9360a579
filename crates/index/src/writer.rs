//! Incremental, atomic indexing runs: read inputs, redo changed sources, drop deleted ones,
//! commit once.
//!
//! Nothing is visible until the single commit at the end; a run that fails or is killed
//! leaves the previous commit intact. A source whose input fails to read this time keeps
//! its indexed version.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use finder_core::Settings;
use tantivy::{doc, Index, IndexWriter, Term};

use crate::analyzer::ANALYSIS;
use crate::document::{Problem, SourceDoc};
use crate::error::{IndexError, Result};
use crate::files::LEXICAL_DIR;
use crate::keys::{fragment_key, source_key};
use crate::record::{CommitInfo, FragmentRecord, RunCounts, SourceRecord, FORMAT};
use crate::schema::Fields;
use crate::stored::{commit_info, load_catalog, open_or_create};
use crate::{ingest, store_error};

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

/// [`index_inputs`], with inputs of at most `one_thread_max_bytes` written by one thread.
pub(crate) fn index_inputs_one_thread_up_to(
    dir: &Path,
    inputs: &[PathBuf],
    settings: &Settings,
    progress: &mut dyn FnMut(Progress<'_>),
    one_thread_max_bytes: u64,
) -> Result<RunReport> {
    crate::tuning::map_large_blocks();
    // Declared first, so dropped last: its release comes after the writer and the rest.
    let _keep = crate::tuning::keep_freed_memory();
    let (index, fields) = open_or_create(dir, settings)?;
    let info = commit_info(&index, dir)?;
    let err = |e| store_error(dir, e);
    let rebuild = info
        .as_ref()
        .is_some_and(|i| i.settings != settings.index || i.analysis != ANALYSIS);
    // Every document of this run's commit is new (see `merge_segments`).
    let from_empty = info.is_none() || rebuild;

    let catalog = load_catalog(&index, fields, dir)?;
    let mut origins = Vec::new();
    for input in inputs {
        let canonical = input.canonicalize().map_err(|e| {
            IndexError::Input(Problem {
                place: input.display().to_string(),
                reason: format!("cannot read input: {e}"),
                source_id: None,
            })
        })?;
        origins.push(canonical.display().to_string());
    }
    if rebuild {
        let missing: Vec<&String> = info
            .iter()
            .flat_map(|i| &i.origins)
            .filter(|o| !origins.contains(o))
            .collect();
        if !missing.is_empty() {
            return Err(IndexError::Input(Problem {
                place: dir.display().to_string(),
                reason: format!(
                    "index-time settings or the word analysis changed, so the whole index is rebuilt; pass every input it holds (missing: {})",
                    missing.iter().map(|s| s.to_string()).collect::<Vec<String>>().join(", ")
                ),
                source_id: None,
            }));
        }
    }

    // A small run is written by one thread, into one segment: the build needs no merge.
    let small = ingest::input_bytes_up_to(inputs, one_thread_max_bytes) <= one_thread_max_bytes;
    // It is also built, graph included, without huge pages (`ProcessTuning::small_pages`).
    let _small_pages = small.then(crate::tuning::small_pages);
    let opened = if small {
        index.writer_with_num_threads(1, WRITER_MEMORY_BYTES)
    } else {
        index.writer(WRITER_MEMORY_BYTES)
    };
    let mut writer: IndexWriter = opened.map_err(|e| match e {
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

    let mut report = RunReport {
        rebuilt: rebuild,
        ..RunReport::default()
    };
    // Ids this run's inputs hold (a source or a problem naming it): never removed.
    let mut seen: HashSet<String> = HashSet::new();
    // Ids a source was read for: a second one is a duplicate.
    let mut sourced: HashSet<String> = HashSet::new();
    // Per source written: its fragment count and whether it is dated, all the totals need
    // (the whole record is in the index; a million of them held here were a gigabyte).
    let mut written: HashMap<String, (u32, bool)> = HashMap::new();
    let mut incomplete: HashSet<String> = HashSet::new();
    let mut done = 0u64;
    let mut failure: Option<IndexError> = None;
    for (input, origin) in inputs.iter().zip(&origins) {
        let kind = ingest::detect(input).map_err(IndexError::Input)?;
        progress(Progress::Input {
            path: input,
            kind: kind_name(&kind),
        });
        let mut sink = |item: std::result::Result<SourceDoc, Problem>| {
            if failure.is_some() {
                return;
            }
            done += 1;
            progress(Progress::Source { done });
            match item {
                Err(problem) => {
                    match &problem.source_id {
                        Some(id) => {
                            seen.insert(id.clone());
                        }
                        None => {
                            incomplete.insert(origin.clone());
                        }
                    }
                    report.problems.push(problem);
                }
                Ok(source) => {
                    if let Some(reason) = vector_problem(&source, fields, settings) {
                        seen.insert(source.id.clone());
                        report.problems.push(Problem {
                            place: source.origin.clone(),
                            reason: format!("source `{}`: {reason}", source.id),
                            source_id: Some(source.id.clone()),
                        });
                        return;
                    }
                    seen.insert(source.id.clone());
                    let first_in_run = sourced.insert(source.id.clone());
                    if !first_in_run {
                        report.problems.push(Problem {
                            place: source.origin.clone(),
                            reason: format!(
                                "source id `{}` also comes from another input; the later one wins",
                                source.id
                            ),
                            source_id: Some(source.id.clone()),
                        });
                    }
                    let previous = catalog.get(&source.id);
                    if !rebuild
                        && previous
                            .is_some_and(|p| p.hash == source.hash && p.origin == source.origin)
                    {
                        report.counts.unchanged += 1;
                        return;
                    }
                    if previous.is_some() && !rebuild {
                        report.counts.updated += 1;
                    } else {
                        report.counts.added += 1;
                    }
                    // Only a source the committed index holds, or one this run already
                    // wrote, has documents to replace: tantivy keeps every delete in memory
                    // until the commit (about 1 KB each, a gigabyte for a first run of 1M).
                    if (previous.is_some() && !rebuild) || !first_in_run {
                        writer.delete_term(Term::from_field_text(fields.source_id, &source.id));
                    }
                    match add_source(&writer, fields, settings, &source, ahead.as_mut()) {
                        Ok(record) => {
                            let dated = record.envelope.date.is_some();
                            written.insert(source.id.clone(), (record.fragments, dated));
                        }
                        Err(e) => failure = Some(store_error(dir, e)),
                    }
                }
            }
        };
        ingest::read_input(input, origin, &settings.index, &mut sink).map_err(IndexError::Input)?;
        if let Some(e) = failure.take() {
            return Err(e);
        }
    }

    // Sources of this run's inputs that were not seen are gone from their input, unless the
    // input had errors that hid which ids it holds.
    let mut kept_ids = HashSet::new();
    for (id, record) in &catalog {
        if seen.contains(id) || !origins.contains(&record.origin) {
            continue;
        }
        if incomplete.contains(&record.origin) {
            kept_ids.insert(id.clone());
            continue;
        }
        writer.delete_term(Term::from_field_text(fields.source_id, id));
        report.counts.removed += 1;
    }
    let failed_ids: HashSet<&String> = report
        .problems
        .iter()
        .filter_map(|p| p.source_id.as_ref())
        .collect();
    report.counts.kept = (kept_ids.len()
        + failed_ids
            .iter()
            .filter(|id| catalog.contains_key(**id) && !written.contains_key(**id))
            .count()) as u64;
    report.counts.problems = report.problems.len() as u64;

    // Totals after this run: the previous catalog, minus removals, plus what was written.
    let mut totals: HashMap<&String, (u32, bool)> = HashMap::new();
    if !rebuild {
        for (id, r) in &catalog {
            let removed =
                origins.contains(&r.origin) && !seen.contains(id) && !kept_ids.contains(id);
            if !removed {
                totals.insert(id, (r.fragments, r.envelope.date.is_some()));
            }
        }
    }
    for (id, &counts) in &written {
        totals.insert(id, counts);
    }
    report.sources = totals.len() as u64;
    report.fragments = totals.values().map(|&(n, _)| n as u64).sum();
    let dated = totals.values().filter(|&&(_, d)| d).count() as u64;
    // The run's bookkeeping (sets of every source id: hundreds of MB at a million sources) is
    // done with; the commit and the graph build below should not hold it.
    drop(totals);
    drop((catalog, seen, sourced, written, incomplete, kept_ids));

    let changed = report.counts.added + report.counts.updated + report.counts.removed > 0;
    let previous_generation = info.as_ref().map_or(0, |i| i.generation);
    let generation = previous_generation + u64::from(changed || rebuild || info.is_none());
    let mut all_origins: BTreeSet<String> = info
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
        if let Err(e) = merge_segments(&index) {
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

    // The graph is derived from the committed snapshot; it is redone when anything changed or
    // when it is missing. A failure here leaves the commit standing and is reported.
    let current = crate::graph::graph_is_current(dir, &settings.graph, generation);
    let stale = changed || !current || report.rebuilt;
    let leftover = !settings.graph.build && dir.join(crate::graph::GRAPH_DIR).exists();
    if leftover || (settings.graph.build && stale) {
        progress(Progress::Graph);
        tracing::info!(index = %dir.display(), "building the graph");
        match crate::graph::build_graph(dir, settings) {
            Ok(g) => report.graph = Some(g),
            Err(e) => report.problems.push(Problem {
                place: dir.join(crate::graph::GRAPH_DIR).display().to_string(),
                reason: format!("graph not rebuilt: {e}"),
                source_id: None,
            }),
        }
    }
    // `_keep`, dropped after every other local, hands back what the run freed.
    Ok(report)
}

/// Why a source's precomputed vector cannot be used, when the backend uses them.
fn vector_problem(source: &SourceDoc, fields: Fields, settings: &Settings) -> Option<String> {
    if settings.embed.backend != finder_core::EmbedBackend::Precomputed {
        return None;
    }
    let v = source.vector.as_ref()?;
    if fields.vector.is_none() {
        return Some(
            "this index predates stored vectors; index into a new folder to use `vector`".into(),
        );
    }
    (v.len() != settings.embed.dim).then(|| {
        format!(
            "`vector` has {} numbers; embed.dim is {}",
            v.len(),
            settings.embed.dim
        )
    })
}

fn kind_name(kind: &ingest::InputKind) -> &'static str {
    match kind {
        ingest::InputKind::Folder => "folder",
        ingest::InputKind::Jsonl => "jsonl",
        ingest::InputKind::Beir => "beir",
    }
}

/// Writes one document per fragment (at least one per source, so the record has a home), and
/// its page record to `ahead` when given.
fn add_source(
    writer: &IndexWriter,
    fields: Fields,
    settings: &Settings,
    source: &SourceDoc,
    mut ahead: Option<&mut crate::pages::PagesAhead>,
) -> tantivy::Result<SourceRecord> {
    let record = SourceRecord {
        id: source.id.clone(),
        origin: source.origin.clone(),
        hash: source.hash.clone(),
        envelope: source.envelope.clone(),
        summary: source.summary.clone(),
        fragments: source.fragments.len() as u32,
        entity: source.entity,
        aliases: source.aliases.clone(),
        relations: source.relations.clone(),
    };
    let skey = source_key(&source.id);
    let title = source.envelope.title.as_str();
    let placeholder;
    let fragments = if source.fragments.is_empty() {
        placeholder = [crate::document::FragmentDoc {
            ordinal: 0,
            text: String::new(),
            heading: None,
            extent: Default::default(),
        }];
        &placeholder[..]
    } else {
        &source.fragments[..]
    };
    let vector_home = crate::document::vector_home(fragments);
    for fragment in fragments {
        let first = fragment.ordinal == 0;
        let mut indexed = String::new();
        if first || settings.index.title_in_fragments {
            indexed.push_str(title);
            indexed.push('\n');
            if let Some(h) = &fragment.heading {
                indexed.push_str(h);
                indexed.push('\n');
            }
        }
        indexed.push_str(&fragment.text);
        let meta = FragmentRecord {
            extent: fragment.extent,
            heading: fragment.heading.clone(),
            source: first.then(|| record.clone()),
        };
        let key = fragment_key(&source.id, fragment.ordinal).0;
        let mut doc = doc!(
            fields.source_id => source.id.as_str(),
            fields.source_key => skey.0,
            fields.fragment_key => key,
            fields.ordinal => fragment.ordinal as u64,
            fields.text => indexed.as_str(),
            fields.body => fragment.text.as_str(),
            fields.meta => serde_json::to_string(&meta).expect("record serialises"),
        );
        if let (Some(field), true) = (fields.raw, settings.index.trigrams) {
            doc.add_text(field, &indexed);
        }
        if let (Some(field), true) = (fields.entity, source.entity) {
            doc.add_u64(field, 1);
        }
        // Stored whatever the backend, so switching to `precomputed` needs no re-read.
        if let (Some(field), Some(v), true) = (
            fields.vector,
            &source.vector,
            vector_home == Some(fragment.ordinal),
        ) {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            doc.add_bytes(field, &bytes);
        }
        writer.add_document(doc)?;
        if let Some(ahead) = &mut ahead {
            ahead.push(
                key,
                &fragment.text,
                &fragment.extent,
                first.then_some(&record),
            );
        }
    }
    Ok(record)
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
