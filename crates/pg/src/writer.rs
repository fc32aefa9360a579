//! Indexing runs into PostgreSQL: read the inputs with the embedded engine's ingestion, redo
//! changed sources, drop the ones gone from this run's inputs, and commit each shard's
//! transaction once.
//!
//! Within a shard a run is atomic: rows, term statistics and the run record change in one
//! transaction, and readers (each query reads one snapshot) see the run whole or not at all.
//! Across shards the commits follow one another; a run stopped between them leaves some shards
//! at the new run, and the next run (incremental by content hash) brings the rest along.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use finder_core::{Embed, EmbedBackend, Settings};
use finder_index::{Admit, Focus, FragmentDoc, Problem, RunCounts, RunPlan, SourceDoc};
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::Transaction;

use crate::cluster::{connect, shard_of, PgConfig, Tls};
use crate::error::{db, PgError, Result};
use crate::graph;
use crate::schema::{self, to_db, RunRecord, WHOLE_WORDS, WORDS};
use crate::terms::{field_terms, stored_fragments, Analyzers};

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct PgRunReport {
    pub counts: RunCounts,
    pub problems: Vec<Problem>,
    /// Everything was rewritten because the index-time settings or the vector length changed.
    pub rebuilt: bool,
    /// Sources and fragments in all shards after the run.
    pub sources: u64,
    pub fragments: u64,
    /// The relation graph, when this run rebuilt it (`None`: it was current, or
    /// `graph.build = false`).
    pub graph: Option<finder_index::graph::GraphReport>,
}

/// Key of the advisory lock a run holds on each shard, so two runs never interleave (the
/// embedded index's directory lock).
const WRITE_LOCK: i64 = 0x4669_6e64_6572; // "Finder"

/// How long a run waits for another run's write lock before it gives up as busy.
const WRITE_LOCK_WAIT: &str = "60s";

/// Sources a run must add, update or remove (over all shards) to VACUUM them after it.
const VACUUM_AFTER_SOURCES: u64 = 1_000;

/// Sources written per batch of statements (and fragments embedded per model call, at most).
const BATCH_FRAGMENTS: usize = 512;

/// Indexes `inputs` into the shards of `config`, creating the tables when needed. Vectors are
/// the records' own with the `precomputed` backend; see [`index_inputs_with`] to embed.
pub fn index_inputs(
    config: &PgConfig,
    inputs: &[PathBuf],
    settings: &Settings,
) -> Result<PgRunReport> {
    index_inputs_with(config, inputs, settings, None, &mut |_| {})
}

/// [`index_inputs`] with an embedding model for the fragments (the text the embedded index
/// embeds: title, newline, fragment), and a callback told how many sources were read so far.
pub fn index_inputs_with(
    config: &PgConfig,
    inputs: &[PathBuf],
    settings: &Settings,
    embedder: Option<&dyn Embed>,
    progress: &mut dyn FnMut(u64),
) -> Result<PgRunReport> {
    run(
        config,
        Feed::inputs(inputs, None),
        settings,
        embedder,
        progress,
        None,
    )
}

/// [`index_inputs_with`] after `changed` paths under the inputs changed, as a file watcher
/// reports them: reads only the notes at those paths and removes the sources there that are
/// gone; every other source stays as it is. Reads every input when a path is not under a
/// folder input, when an ignore file changed and when the run must rebuild the index
/// ([`finder_index::Focus`]). The result is what [`index_inputs_with`] would make of the
/// same files.
pub fn index_changed(
    config: &PgConfig,
    inputs: &[PathBuf],
    changed: &[PathBuf],
    settings: &Settings,
    embedder: Option<&dyn Embed>,
    progress: &mut dyn FnMut(u64),
) -> Result<PgRunReport> {
    let focus = Focus::of(inputs, changed);
    let feed = Feed::inputs(inputs, focus.as_ref());
    run(config, feed, settings, embedder, progress, None)
}

/// Runs into the same shards one after another, as a watch makes them. Between runs it keeps
/// what the graph build after a run over a few sources would otherwise read whole from the
/// shards: every source's graph record (envelope, relations, fragment keys) and what the last
/// build found in each source's texts. What it keeps serves only the run it was kept for:
/// after another run (another node's, an API write's) the next build reads the shards again.
/// The price is that memory, while it lives: about 2 KB a source (a watch over the synthetic
/// 100k notes held 69 MB after its first run, 274 MB after its first graph build).
#[derive(Default)]
pub struct PgFollower {
    graph: Option<graph::Held>,
}

impl PgFollower {
    /// [`index_inputs_with`], keeping what the next run needs.
    pub fn index_inputs(
        &mut self,
        config: &PgConfig,
        inputs: &[PathBuf],
        settings: &Settings,
        embedder: Option<&dyn Embed>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PgRunReport> {
        let feed = Feed::inputs(inputs, None);
        run(config, feed, settings, embedder, progress, Some(self))
    }

    /// [`index_changed`], starting from what the last run kept and keeping what the next one
    /// needs.
    pub fn index_changed(
        &mut self,
        config: &PgConfig,
        inputs: &[PathBuf],
        changed: &[PathBuf],
        settings: &Settings,
        embedder: Option<&dyn Embed>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PgRunReport> {
        let focus = Focus::of(inputs, changed);
        let feed = Feed::inputs(inputs, focus.as_ref());
        run(config, feed, settings, embedder, progress, Some(self))
    }
}

/// What a run reads: inputs (over the changed paths under them, with a `focus`) and, when
/// `documents` is given, those API document changes.
#[derive(Clone, Copy)]
struct Feed<'a> {
    inputs: &'a [PathBuf],
    focus: Option<&'a Focus>,
    documents: Option<&'a [DocumentChange]>,
}

impl<'a> Feed<'a> {
    fn inputs(inputs: &'a [PathBuf], focus: Option<&'a Focus>) -> Feed<'a> {
        Feed {
            inputs,
            focus,
            documents: None,
        }
    }
}

/// The origin of the documents written through the API, which the shards keep
/// (`finder_documents`) instead of a file.
pub const API_ORIGIN: &str = "api:documents";

/// One document written through the API: `record` is its Finder record, one JSON line with
/// `id` equal to the change's (as in a `.jsonl` input); `None` deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentChange {
    pub id: String,
    pub record: Option<String>,
}

/// Applies API document writes in one run: each kept in `finder_documents` on its source's
/// shard and indexed in the same transaction as its rows, so a write is committed to both or
/// to neither. A put the run refuses (its problem names the id) leaves the stored document
/// and source as they were; deleting an id the table does not hold does nothing. The other
/// sources, from the inputs of `finder index` runs, are left as they are. A write that finds
/// a rebuild due (index-time settings, model or word analysis changed) is refused: that is
/// `finder index`'s work, over every input.
pub fn write_documents(
    config: &PgConfig,
    changes: &[DocumentChange],
    settings: &Settings,
    embedder: Option<&dyn Embed>,
) -> Result<PgRunReport> {
    for change in changes {
        let Some(record) = &change.record else {
            continue;
        };
        let id = serde_json::from_str::<serde_json::Value>(record)
            .ok()
            .and_then(|v| v.get("id")?.as_str().map(str::to_string));
        if id.as_deref() != Some(change.id.as_str()) {
            return Err(PgError::Config(format!(
                "API document `{}`: its record's `id` is {id:?}, not the document's",
                change.id
            )));
        }
    }
    let feed = Feed {
        inputs: &[],
        focus: None,
        documents: Some(changes),
    };
    run(config, feed, settings, embedder, &mut |_| {}, None)
}

/// The documents written through the API, by id (every one when `ids` is `None`), read from
/// each shard's primary so that a write acknowledged anywhere is seen.
pub fn read_documents(
    config: &PgConfig,
    ids: Option<&[String]>,
) -> Result<BTreeMap<String, String>> {
    config.validate()?;
    let n = config.shards.len();
    let tls = Tls::new(config.tls_ca.as_deref())?;
    let mut wanted: Vec<Vec<String>> = vec![Vec::new(); n];
    if let Some(ids) = ids {
        for id in ids {
            wanted[shard_of(finder_index::source_key(id), n)].push(id.clone());
        }
    }
    let mut out = BTreeMap::new();
    for (i, s) in config.shards.iter().enumerate() {
        if ids.is_some() && wanted[i].is_empty() {
            continue;
        }
        let mut client = connect(&s.write, i, &tls)?;
        out.extend(schema::read_documents(
            &mut client,
            i,
            ids.map(|_| &wanted[i][..]),
        )?);
    }
    Ok(out)
}

/// A run over `feed`; with a `follower`, from what it kept and keeping what the next run
/// needs.
fn run(
    config: &PgConfig,
    feed: Feed<'_>,
    settings: &Settings,
    embedder: Option<&dyn Embed>,
    progress: &mut dyn FnMut(u64),
    follower: Option<&mut PgFollower>,
) -> Result<PgRunReport> {
    let Feed {
        inputs,
        focus,
        documents,
    } = feed;
    let started = std::time::Instant::now();
    config.validate()?;
    let embedder = embedder.filter(|_| settings.embed.backend != EmbedBackend::Precomputed);
    // Every window of a long passage gets its vector, the later ones in `finder_parts`, as
    // the embedded index does with `embed.windows`.
    let mut windows = settings.embed.windows && embedder.is_some_and(|e| e.reads_in_windows());
    let n = config.shards.len();
    let tls = Tls::new(config.tls_ca.as_deref())?;
    let mut clients = Vec::with_capacity(n);
    for (i, s) in config.shards.iter().enumerate() {
        let mut client = connect(&s.write, i, &tls)?;
        // The DDL takes locks a running run holds too: it waits as long as the write lock.
        let limit = |sql: &str, client: &mut postgres::Client| {
            client
                .batch_execute(sql)
                .map_err(db(format!("shard {i}: starting the run")))
        };
        limit(
            &format!("SET lock_timeout = '{WRITE_LOCK_WAIT}'"),
            &mut client,
        )?;
        schema::create(&mut client, i).map_err(|e| busy_when_timed_out(e, i))?;
        limit("RESET lock_timeout", &mut client)?;
        // Every commit of the run returns once it is at least on the primary's disk (a server
        // set to wait for replicas keeps its setting): an acknowledged write survives a crash.
        // It also lets the VACUUM after a load mark pages all-visible: a tuple's commit hint
        // is not set while a commit near it in the commit log is unflushed (the run's own
        // graph, committed asynchronously, did that), and without the hint VACUUM leaves the
        // page to the heap fetches of index-only scans (a SciFact BM25 list: 583 buffers read
        // instead of 20).
        limit(
            "SELECT set_config('synchronous_commit', 'on', false)
             WHERE current_setting('synchronous_commit') IN ('off', 'local')",
            &mut client,
        )?;
        clients.push(client);
    }
    let mut txs: Vec<Transaction<'_>> = Vec::with_capacity(n);
    for (i, c) in clients.iter_mut().enumerate() {
        let mut tx = c
            .transaction()
            .map_err(db(format!("shard {i}: starting the run")))?;
        // Runs from several nodes (API writes through each) take turns: a run waits for the
        // one holding the lock, up to `WRITE_LOCK_WAIT`.
        tx.batch_execute(&format!("SET LOCAL lock_timeout = '{WRITE_LOCK_WAIT}'"))
            .map_err(db(format!("shard {i}: starting the run")))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
            .map_err(|e| {
                busy_when_timed_out(db(format!("shard {i}: taking the write lock"))(e), i)
            })?;
        tx.batch_execute("SET LOCAL lock_timeout TO DEFAULT")
            .map_err(db(format!("shard {i}: starting the run")))?;
        txs.push(tx);
    }
    let mut previous = Vec::with_capacity(n);
    for (i, tx) in txs.iter_mut().enumerate() {
        previous.push(schema::read_meta(tx, i, n)?);
    }

    if documents.is_some() && embedder.is_some_and(|e| e.reads_in_windows()) {
        // A document write embeds as the stored run did: switching `embed.windows` (or
        // meeting its new default) embeds every passage again, the work of `finder index`.
        if let Some(stored) = previous.iter().flatten().next() {
            windows = stored.windows;
        }
    }
    let (dim, model) = match embedder {
        // Vectors of every window are another index than first windows only.
        Some(e) if windows => (Some(e.dim()), Some(format!("{}+windows", e.model_id()))),
        Some(e) => (Some(e.dim()), Some(e.model_id().to_string())),
        None if settings.embed.backend == EmbedBackend::Precomputed => (
            Some(settings.embed.dim),
            Some(format!("precomputed/{}", settings.embed.dim)),
        ),
        None => (None, None),
    };
    let rebuild = previous.iter().flatten().any(|r| {
        r.settings != settings.index
            || r.dim != dim
            || r.model != model
            || r.analysis != finder_index::ANALYSIS
    });
    // What the follower kept serves when it describes the last run of these shards, with the
    // same graph settings (taken: a run that fails leaves it empty, and the next build reads
    // the shards).
    let shard_urls: Vec<String> = config.shards.iter().map(|s| s.write.clone()).collect();
    let last = previous
        .iter()
        .flatten()
        .map(|r| (r.generation, r.committed_at))
        .max();
    let mut follower = follower;
    let mut held = follower
        .as_deref_mut()
        .and_then(|f| f.graph.take())
        .filter(|h| {
            !rebuild
                && h.shards == shard_urls
                && last.is_some_and(|last| {
                    h.run == last
                        && h.key == finder_index::graph::build_key(&settings.graph, last.0)
                })
        });
    if rebuild && documents.is_some() {
        // A rebuild re-reads (and may re-embed) every input: not a document write's work.
        return Err(PgError::Mismatch {
            shard: 0,
            reason: "the index-time settings, the model or the word analysis changed since the \
                     last run, so the next run rebuilds the whole index; run `finder index` with \
                     every input it holds, then write again"
                .into(),
        });
    }
    // A watch whose model did not load would rebuild every shard without vectors, and the
    // next run that loads it would embed them all again (`embed.backend = "none"`, set on
    // purpose, rebuilds without them).
    let stored_model = previous.iter().flatten().find_map(|r| r.model.clone());
    let lost = model.is_none() && settings.embed.backend != EmbedBackend::None;
    if let (true, true, true, Some(stored)) = (rebuild, follower.is_some(), lost, stored_model) {
        return Err(PgError::Mismatch {
            shard: 0,
            reason: format!(
                "the shards hold vectors of {stored}, but the model of embed.backend = {:?} did \
                 not load, so this run would rebuild them all without vectors; make it load \
                 (MiniLM: `finder model install`), or run `finder index` to rebuild without it",
                settings.embed.backend
            ),
        });
    }
    let known: BTreeSet<String> = previous
        .iter()
        .flatten()
        .flat_map(|r| r.origins.iter().cloned())
        .collect();
    // A rebuild must be given every input that still holds sources; the API documents are in
    // the shards, so it reads them itself.
    let mut holding = BTreeSet::new();
    if rebuild {
        for (i, tx) in txs.iter_mut().enumerate() {
            for row in tx
                .query("SELECT DISTINCT origin FROM finder_sources", &[])
                .map_err(db(format!("shard {i}: reading the inputs")))?
            {
                holding.insert(row.get::<_, String>(0));
            }
        }
    }
    let must_give = known
        .iter()
        .filter(|o| o.as_str() != API_ORIGIN && (!rebuild || holding.contains(*o)));
    let mut plan = RunPlan::new(inputs, rebuild, must_give, "postgres").map_err(PgError::Input)?;
    // A rebuild reads everything; so does a first run.
    let focus = focus.filter(|_| !rebuild && previous.iter().all(Option::is_some));
    if let Some(focus) = focus {
        focus.limit(&mut plan, inputs);
    }
    // The API's records this run reads, by id: the batch's puts, or every stored one for a
    // rebuild (the table survives it).
    let api: Option<BTreeMap<String, String>> = match documents {
        Some(changes) => {
            let mut puts = BTreeMap::new();
            for change in changes {
                match &change.record {
                    Some(record) => puts.insert(change.id.clone(), record.clone()),
                    None => puts.remove(&change.id),
                };
            }
            plan.limit_to_ids(API_ORIGIN, changes.iter().map(|c| c.id.clone()).collect());
            Some(puts)
        }
        None if rebuild => {
            let mut all = BTreeMap::new();
            for (i, tx) in txs.iter_mut().enumerate() {
                all.extend(schema::read_documents(tx, i, None)?);
            }
            (!all.is_empty()).then_some(all)
        }
        None => None,
    };
    if api.is_some() {
        plan.origins.push(API_ORIGIN.to_string());
    }
    // A shard loaded from empty gets its vector index after the load: building HNSW once is
    // far cheaper than growing it row by row.
    let mut bulk = vec![false; n];
    for (i, tx) in txs.iter_mut().enumerate() {
        if rebuild || previous[i].is_none() {
            schema::reset(tx, i, dim)?;
            schema::drop_posting_keys(tx, i)?;
            bulk[i] = true;
        }
    }

    // id → (hash, origin) of every stored source.
    let mut catalog: HashMap<String, (String, String)> = HashMap::new();
    for (i, tx) in txs.iter_mut().enumerate() {
        for row in tx
            .query("SELECT id, hash, origin FROM finder_sources", &[])
            .map_err(db(format!("shard {i}: reading the catalog")))?
        {
            catalog.insert(row.get(0), (row.get(1), row.get(2)));
        }
    }
    tracing::debug!(
        seconds = started.elapsed().as_secs_f64(),
        "run: catalog read"
    );

    // The languages detected before stay listed (a query analysed in a language no source
    // holds any more finds nothing extra); a rebuild starts the list anew.
    let detected: Vec<String> = if rebuild {
        Vec::new()
    } else {
        previous
            .iter()
            .flatten()
            .flat_map(|r| r.languages.clone())
            .collect()
    };
    let mut analyzers = Analyzers::new(&settings.index.language, finder_index::ANALYSIS, &detected);
    let mut report = PgRunReport {
        rebuilt: rebuild,
        ..PgRunReport::default()
    };
    let mut written: HashSet<String> = HashSet::new();
    let mut failure: Option<PgError> = None;
    // Sources read but not written yet, each with whether it replaces a stored one.
    let mut pending: Vec<(bool, SourceDoc)> = Vec::new();
    let (mut pending_fragments, mut read) = (0usize, 0u64);
    let mut df: Vec<TermCounts> = vec![TermCounts::new(); n];
    let origins = plan.origins.clone();
    let feeds = inputs.iter().map(Some).chain(api.iter().map(|_| None));
    for (at, (input, origin)) in feeds.zip(&origins).enumerate() {
        let paths = focus.and_then(|f| f.as_slice().get(at)).map(Vec::as_slice);
        if paths.is_some_and(<[_]>::is_empty) {
            continue;
        }
        let mut sink = |item: std::result::Result<SourceDoc, Problem>| {
            if failure.is_some() {
                return;
            }
            let source = match item {
                Err(problem) => return plan.problem(origin, problem),
                Ok(source) => source,
            };
            if let Some(reason) = vector_problem(&source, settings) {
                return plan.reject(&source, &reason);
            }
            let previous = catalog.get(&source.id);
            let stored = previous.map(|(hash, from)| (hash.as_str(), from.as_str()));
            let Admit::Write { stored, .. } = plan.admit(&source, stored) else {
                return;
            };
            if let Some(held) = held.as_mut() {
                held.sources
                    .insert(source.id.clone(), graph::source_of(&source));
            }
            read += 1;
            if read % 1000 == 0 {
                progress(read);
            }
            // A source given twice in one run: the later one replaces the earlier.
            let mut replaces = stored;
            if !written.insert(source.id.clone()) {
                match pending.iter().position(|(_, s)| s.id == source.id) {
                    Some(at) => {
                        pending.remove(at);
                    }
                    None => replaces = true,
                }
            }
            pending_fragments += source.fragments.len().max(1);
            pending.push((replaces, source));
            if pending_fragments >= BATCH_FRAGMENTS {
                pending_fragments = 0;
                let batch = std::mem::take(&mut pending);
                if let Err(e) = write_batch(
                    &mut txs,
                    &mut df,
                    batch,
                    settings,
                    dim,
                    embedder.map(|e| (e, windows)),
                    &mut analyzers,
                ) {
                    failure = Some(e);
                }
            }
        };
        match (input, &api) {
            (Some(input), _) => {
                finder_index::read_input_at(input, paths, origin, &settings.index, &mut sink)
                    .map_err(PgError::Input)?;
            }
            // Each record on its own: a problem with one names it, and keeps only its stored
            // version.
            (None, Some(records)) => {
                for (id, record) in records {
                    let place = format!("API document `{id}`");
                    finder_index::read_record_lines(
                        record.as_bytes(),
                        &place,
                        origin,
                        &settings.index,
                        &mut |item| {
                            sink(item.map_err(|mut problem| {
                                problem.source_id.get_or_insert_with(|| id.clone());
                                problem
                            }))
                        },
                    );
                }
            }
            (None, None) => unreachable!("an API feed is only listed with its records"),
        }
        if let Some(e) = failure.take() {
            return Err(e);
        }
    }
    write_batch(
        &mut txs,
        &mut df,
        std::mem::take(&mut pending),
        settings,
        dim,
        embedder.map(|e| (e, windows)),
        &mut analyzers,
    )?;
    progress(read);

    // Sources of this run's inputs that were not seen are gone from their input, unless the
    // input had errors that hid which ids it holds.
    let mut gone: Vec<Vec<i64>> = vec![Vec::new(); n];
    let stored = catalog
        .iter()
        .map(|(id, (_, origin))| (id, origin.as_str()));
    for id in plan.finish(stored, |id| written.contains(id)) {
        if let Some(held) = held.as_mut() {
            held.sources.remove(id.as_str());
        }
        let key = finder_index::source_key(id);
        gone[shard_of(key, n)].push(to_db(key.0));
    }
    for (shard, keys) in gone.iter().enumerate() {
        write_df(&mut txs[shard], shard, &mut df[shard])?;
        if !keys.is_empty() {
            delete_sources(&mut txs[shard], shard, keys)?;
        }
    }
    if let (Some(changes), Some(records)) = (documents, &api) {
        write_document_rows(&mut txs, &plan, changes, records)?;
    }
    let changed = plan.changed();
    let origins = std::mem::take(&mut plan.origins);
    report.counts = plan.counts;
    report.problems = plan.problems;
    let generation = previous
        .iter()
        .flatten()
        .map(|r| r.generation)
        .max()
        .unwrap_or(0)
        + u64::from(changed || rebuild || previous.iter().any(Option::is_none));
    let mut all_origins = if rebuild { BTreeSet::new() } else { known };
    all_origins.extend(origins);
    let languages: Vec<String> = analyzers
        .detected_names()
        .map(str::to_string)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let committed_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let c = &report.counts;
    let large = c.added + c.updated + c.removed >= VACUUM_AFTER_SOURCES;
    // The planner's statistics are taken again after a load, or a change of a tenth of the
    // sources (about autovacuum's threshold); a smaller change leaves them to autovacuum:
    // ANALYZE samples every table, 0.8 s a shard at 50k sources.
    let before: u64 = previous.iter().flatten().map(|r| r.sources).sum();
    let analyze = changed && (large || (c.added + c.updated + c.removed) * 10 >= before);
    for (i, tx) in txs.iter_mut().enumerate() {
        tx.batch_execute("DELETE FROM finder_terms WHERE df <= 0")
            .map_err(db(format!("shard {i}: dropping unused terms")))?;
        if bulk[i] {
            schema::add_posting_keys(tx, i)?;
        }
        if analyze || bulk[i] {
            // Fresh statistics, or the planner may scan every vector instead of the index.
            tx.batch_execute(
                "ANALYZE finder_sources, finder_fragments, finder_parts, finder_postings, finder_terms",
            )
            .map_err(db(format!("shard {i}: updating the planner's statistics")))?;
        }
        // Built once the rows are in; built again by `finder index` when its parameters
        // changed. An API write keeps the index it finds: a rebuild takes minutes at scale, and
        // would hold the write's transaction (and every write behind it) as long. The later
        // windows' index only with `embed.windows`.
        let st = &settings.storage;
        let wanted = (st.hnsw_m, st.hnsw_ef_construction);
        let indexes = if windows { 2 } else { 1 };
        for (index, table) in schema::VECTOR_INDEXES.into_iter().take(indexes) {
            let built = match dim {
                None => continue,
                Some(_) => schema::vector_index_params(tx, i, index)?,
            };
            if built == Some(wanted) || (built.is_some() && documents.is_some()) {
                continue;
            }
            tx.batch_execute(&format!(
                "SET LOCAL maintenance_work_mem = '1GB';
                 DROP INDEX IF EXISTS {index};
                 CREATE INDEX {index} ON {table}
                 USING hnsw (embedding vector_cosine_ops)
                 WITH (m = {}, ef_construction = {});",
                wanted.0, wanted.1
            ))
            .map_err(db(format!(
                "shard {i}: building the vector index of {table}"
            )))?;
        }
        let row = tx
            .query_one(
                "SELECT (SELECT count(*) FROM finder_sources),
                        (SELECT count(*) FROM finder_fragments),
                        (SELECT count(*) FROM finder_sources
                         WHERE coalesce(envelope->>'date', '') <> '')",
                &[],
            )
            .map_err(db(format!("shard {i}: counting")))?;
        let (sources, fragments, dated): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        report.sources += sources as u64;
        report.fragments += fragments as u64;
        let record = RunRecord {
            settings: settings.index.clone(),
            dim,
            sources: sources as u64,
            fragments: fragments as u64,
            origins: all_origins.iter().cloned().collect(),
            last_run: report.counts,
            committed_at,
            generation,
            model: model.clone(),
            dated: Some(dated as u64),
            analysis: finder_index::ANALYSIS,
            languages: languages.clone(),
            windows,
        };
        schema::write_meta(tx, i, n, &record)?;
    }
    tracing::debug!(seconds = started.elapsed().as_secs_f64(), "run: written");
    for (i, tx) in txs.into_iter().enumerate() {
        tx.commit()
            .map_err(db(format!("shard {i}: committing the run")))?;
    }
    tracing::debug!(seconds = started.elapsed().as_secs_f64(), "run: committed");
    // The graph spans the shards, so it is built once every shard has committed.
    let key = finder_index::graph::build_key(&settings.graph, generation);
    if !settings.graph.build || !graph::is_current(&mut clients[graph::GRAPH_SHARD], &key)? {
        let run = (key.as_str(), generation, committed_at);
        let keep = follower.is_some();
        let (built, kept) = graph::rebuild(&mut clients, settings, run, held, keep)?;
        report.graph = built;
        if let Some(follower) = follower {
            follower.graph = kept.map(|held| graph::Held {
                shards: shard_urls,
                ..held
            });
        }
    } else if let Some(follower) = follower {
        // The graph stands (nothing changed): so does what was kept for it, now as of this
        // run's commit.
        follower.graph = held.filter(|h| h.key == key).map(|held| graph::Held {
            run: (generation, committed_at),
            ..held
        });
    }
    // Index-only scans of the postings read the heap for every row of a page that VACUUM has
    // not marked all-visible (SciFact's BM25 statement: 15.7 ms with heap fetches, 1.3 ms
    // without); autovacuum gets there minutes later. A load or a large change is vacuumed
    // here, after the commit and the graph (VACUUM runs outside a transaction); small runs (an
    // API write) leave it to autovacuum. A failure leaves the run standing and is reported.
    for (i, client) in clients.iter_mut().enumerate() {
        if !(bulk[i] || large) {
            continue;
        }
        if let Err(e) = client.batch_execute(
            "VACUUM finder_sources, finder_fragments, finder_parts, finder_postings, finder_terms",
        ) {
            report.problems.push(Problem {
                place: format!("shard {i}"),
                reason: format!(
                    "VACUUM after the run failed (queries read more until autovacuum runs): {e}"
                ),
                source_id: None,
            });
        }
    }
    Ok(report)
}

/// Keeps the API document changes the run took in `finder_documents`: a put whose source the
/// run refused (a problem names it; the run read nothing else) keeps the stored document, as
/// its source keeps its stored version.
fn write_document_rows(
    txs: &mut [Transaction<'_>],
    plan: &RunPlan,
    changes: &[DocumentChange],
    records: &BTreeMap<String, String>,
) -> Result<()> {
    let refused: HashSet<&str> = plan
        .problems
        .iter()
        .filter_map(|p| p.source_id.as_deref())
        .collect();
    let n = txs.len();
    for change in changes {
        let shard = shard_of(finder_index::source_key(&change.id), n);
        let tx = &mut txs[shard];
        let failed = db(format!(
            "shard {shard}: writing API document `{}`",
            change.id
        ));
        match records.get(&change.id) {
            Some(record) if !refused.contains(change.id.as_str()) => tx
                .execute(
                    "INSERT INTO finder_documents (id, record) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET record = $2",
                    &[&change.id, record],
                )
                .map_err(failed)?,
            Some(_) => 0,
            None => tx
                .execute("DELETE FROM finder_documents WHERE id = $1", &[&change.id])
                .map_err(failed)?,
        };
    }
    Ok(())
}

/// `Busy` when `e` is the lock timeout (`55P03`): another run held the lock all along.
fn busy_when_timed_out(e: PgError, shard: usize) -> PgError {
    match &e {
        PgError::Db { source, .. } if source.code().is_some_and(|c| c.code() == "55P03") => {
            PgError::Busy(shard)
        }
        _ => e,
    }
}

/// Why a source's precomputed vector cannot be used, when the backend uses them.
fn vector_problem(source: &SourceDoc, settings: &Settings) -> Option<String> {
    if settings.embed.backend != EmbedBackend::Precomputed {
        return None;
    }
    let v = source.vector.as_ref()?;
    if v.len() != settings.embed.dim {
        return Some(format!(
            "`vector` has {} numbers; embed.dim is {}",
            v.len(),
            settings.embed.dim
        ));
    }
    v.iter()
        .any(|x| !x.is_finite())
        .then(|| "`vector` holds a number that is not finite".to_string())
}

/// Removes sources (cascading to its fragments, postings and relations) and takes its
/// share out of the term statistics first. Nothing happens for an unknown key.
fn delete_sources(tx: &mut Transaction<'_>, shard: usize, keys: &[i64]) -> Result<()> {
    tx.execute(
        "WITH gone AS (
             SELECT p.field, p.term, count(*) AS n
             FROM finder_postings p JOIN finder_fragments f ON f.fkey = p.fkey
             WHERE f.skey = ANY($1) GROUP BY p.field, p.term)
         UPDATE finder_terms t SET df = t.df - gone.n
         FROM gone WHERE t.field = gone.field AND t.term = gone.term",
        &[&keys],
    )
    .map_err(db(format!("shard {shard}: updating term statistics")))?;
    tx.execute(
        "UPDATE finder_stats s SET
             docs = s.docs - c.docs,
             tokens = s.tokens - CASE s.field WHEN 0 THEN c.words ELSE c.raw_words END
         FROM (SELECT count(*) AS docs, coalesce(sum(words), 0) AS words,
                      coalesce(sum(raw_words), 0) AS raw_words
               FROM finder_fragments WHERE skey = ANY($1)) c",
        &[&keys],
    )
    .map_err(db(format!("shard {shard}: updating field statistics")))?;
    tx.execute("DELETE FROM finder_sources WHERE skey = ANY($1)", &[&keys])
        .map_err(db(format!("shard {shard}: deleting sources")))?;
    Ok(())
}

/// pgvector's text form of a vector: `[x,y,…]` (Rust prints the shortest exact `f32`).
pub(crate) fn vector_text(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 10 + 2);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

/// One batch's rows for one shard, as column arrays for `unnest`.
#[derive(Default)]
struct Rows {
    replaced: Vec<i64>,
    // finder_sources
    skeys: Vec<i64>,
    ids: Vec<String>,
    origins: Vec<String>,
    hashes: Vec<String>,
    envelopes: Vec<serde_json::Value>,
    summaries: Vec<String>,
    entities: Vec<bool>,
    aliases: Vec<serde_json::Value>,
    counts: Vec<i32>,
    // finder_fragments
    fkeys: Vec<i64>,
    owners: Vec<i64>,
    ordinals: Vec<i32>,
    bodies: Vec<String>,
    headings: Vec<Option<String>>,
    byte_starts: Vec<i64>,
    byte_ends: Vec<i64>,
    line_starts: Vec<i32>,
    line_ends: Vec<i32>,
    words: Vec<i32>,
    raw_words: Vec<i32>,
    embeddings: Vec<Option<Vec<f32>>>,
    // finder_parts
    part_fkeys: Vec<i64>,
    parts: Vec<i32>,
    part_embeddings: Vec<Vec<f32>>,
    // finder_postings
    p_fields: Vec<i16>,
    p_terms: Vec<String>,
    p_fkeys: Vec<i64>,
    p_tfs: Vec<i32>,
    p_norms: Vec<i32>,
    // finder_relations
    r_skeys: Vec<i64>,
    r_to: Vec<String>,
    r_kinds: Vec<String>,
    words_total: i64,
    raw_words_total: i64,
}

/// Writes a batch of sources: embeds the fragments that need a vector, then per shard
/// removes the versions they replace and inserts sources, fragments, postings, relations and
/// their share of the statistics, a handful of statements per shard.
fn write_batch(
    txs: &mut [Transaction<'_>],
    df: &mut [TermCounts],
    batch: Vec<(bool, SourceDoc)>,
    settings: &Settings,
    dim: Option<usize>,
    embedder: Option<(&dyn Embed, bool)>,
    analyzers: &mut Analyzers,
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let stored: Vec<Vec<FragmentDoc>> = batch.iter().map(|(_, s)| stored_fragments(s)).collect();
    let vectors = match embedder {
        Some((e, windows)) => embed_batch(e, windows, &batch, &stored)?,
        None => batch
            .iter()
            .zip(&stored)
            .map(|((_, s), fragments)| {
                // The record's vector goes with one fragment, as in the embedded index.
                let home = finder_index::vector_home(fragments);
                let mut v = dim.and(s.vector.clone());
                fragments
                    .iter()
                    .map(|f| v.take_if(|_| home == Some(f.ordinal)).into_iter().collect())
                    .collect()
            })
            .collect(),
    };
    let mut shards: Vec<Rows> = (0..txs.len()).map(|_| Rows::default()).collect();
    for (((replaces, source), fragments), vectors) in batch.iter().zip(&stored).zip(vectors) {
        let latin = finder_index::detected_language(source, &settings.index);
        let skey = to_db(finder_index::source_key(&source.id).0);
        let r = &mut shards[shard_of(finder_index::source_key(&source.id), txs.len())];
        if *replaces {
            r.replaced.push(skey);
        }
        r.skeys.push(skey);
        r.ids.push(source.id.clone());
        r.origins.push(source.origin.clone());
        r.hashes.push(source.hash.clone());
        r.envelopes
            .push(serde_json::to_value(&source.envelope).expect("envelope serialises"));
        r.summaries.push(source.summary.clone());
        r.entities.push(source.entity);
        r.aliases
            .push(serde_json::to_value(&source.aliases).expect("aliases serialise"));
        r.counts.push(source.fragments.len() as i32);
        for (fragment, embedding) in fragments.iter().zip(vectors) {
            let fkey = to_db(finder_index::fragment_key(&source.id, fragment.ordinal).0);
            let indexed =
                finder_index::indexed_text(&source.envelope.title, fragment, &settings.index);
            let words = field_terms(analyzers.words_in(latin), &indexed);
            let raw = settings
                .index
                .trigrams
                .then(|| field_terms(&mut analyzers.whole_words, &indexed));
            let raw_len = raw.as_ref().map_or(0, |t| t.len);
            r.words_total += i64::from(words.len);
            r.raw_words_total += i64::from(raw_len);
            let e = fragment.extent;
            r.fkeys.push(fkey);
            r.owners.push(skey);
            r.ordinals.push(fragment.ordinal as i32);
            r.bodies.push(fragment.text.clone());
            r.headings.push(fragment.heading.clone());
            r.byte_starts.push(e.byte_start as i64);
            r.byte_ends.push(e.byte_end as i64);
            r.line_starts.push(e.line_start as i32);
            r.line_ends.push(e.line_end as i32);
            r.words.push(words.len as i32);
            r.raw_words.push(raw_len as i32);
            let mut windows = embedding.into_iter();
            r.embeddings.push(windows.next());
            for (part, vector) in (1..).zip(windows) {
                r.part_fkeys.push(fkey);
                r.parts.push(part);
                r.part_embeddings.push(vector);
            }
            for (field, t) in [(WORDS, Some(words)), (WHOLE_WORDS, raw)] {
                let Some(t) = t else { continue };
                for (term, tf) in t.counts {
                    r.p_fields.push(field);
                    r.p_terms.push(term);
                    r.p_fkeys.push(fkey);
                    r.p_tfs.push(tf as i32);
                    r.p_norms.push(t.norm as i32);
                }
            }
        }
        for (to, kind) in &source.relations {
            r.r_skeys.push(skey);
            r.r_to.push(to.clone());
            r.r_kinds.push(kind.clone());
        }
    }
    // Shards are separate servers (or databases): write to them at once.
    std::thread::scope(|scope| {
        let handles: Vec<_> = txs
            .iter_mut()
            .zip(df.iter_mut())
            .zip(&shards)
            .enumerate()
            .filter(|(_, (_, r))| !r.skeys.is_empty())
            .map(|(shard, ((tx, df), r))| scope.spawn(move || write_rows(tx, shard, r, df)))
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("shard writer thread panicked"))
    })
}

/// The vectors of a batch's fragments from the model, per fragment its first window's and,
/// with `windows`, every later window's.
fn embed_batch(
    embedder: &dyn Embed,
    windows: bool,
    batch: &[(bool, SourceDoc)],
    stored: &[Vec<FragmentDoc>],
) -> Result<Vec<Vec<Vec<Vec<f32>>>>> {
    let mut texts = Vec::new();
    for ((_, source), fragments) in batch.iter().zip(stored) {
        for f in fragments.iter().filter(|f| !f.text.trim().is_empty()) {
            texts.push(finder_index::fragment_text_to_embed(
                &source.envelope.title,
                &f.text,
            ));
        }
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let failed = |reason: String| PgError::Config(format!("embedding fragments: {reason}"));
    let mut vectors = if windows {
        embedder.embed_windows(&refs).map_err(failed)?
    } else {
        let firsts = embedder.embed(&refs).map_err(failed)?;
        firsts.into_iter().map(|v| vec![v]).collect()
    }
    .into_iter();
    Ok(stored
        .iter()
        .map(|fragments| {
            fragments
                .iter()
                .map(|f| {
                    (!f.text.trim().is_empty())
                        .then(|| vectors.next())
                        .flatten()
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect())
}

/// Document frequencies a run added to a shard and has not written yet: kept in memory and
/// written once ([`write_df`]), rather than upserting every term of every batch.
type TermCounts = HashMap<(i16, String), i64>;

/// Adds the pending document frequencies to `finder_terms`.
fn write_df(tx: &mut Transaction<'_>, shard: usize, df: &mut TermCounts) -> Result<()> {
    if df.is_empty() {
        return Ok(());
    }
    let (keys, counts): (Vec<(i16, String)>, Vec<i64>) = std::mem::take(df).into_iter().unzip();
    let (fields, terms): (Vec<i16>, Vec<String>) = keys.into_iter().unzip();
    tx.execute(
        "INSERT INTO finder_terms (field, term, df)
         SELECT * FROM unnest($1::int2[], $2::text[], $3::int8[])
         ON CONFLICT (field, term) DO UPDATE SET df = finder_terms.df + EXCLUDED.df",
        &[&fields, &terms, &counts],
    )
    .map(drop)
    .map_err(db(format!("shard {shard}: writing term statistics")))
}

/// One shard's share of a batch: one statement per table, `COPY` for fragments and postings.
fn write_rows(tx: &mut Transaction<'_>, shard: usize, r: &Rows, df: &mut TermCounts) -> Result<()> {
    let place = |what: &str| format!("shard {shard}: writing {what}");
    if !r.replaced.is_empty() {
        // What is removed is subtracted from the stored counts: bring them up to date first.
        write_df(tx, shard, df)?;
        delete_sources(tx, shard, &r.replaced)?;
    }
    tx.execute(
        "INSERT INTO finder_sources (skey, id, origin, hash, envelope, summary, entity, aliases, fragments)
         SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::jsonb[],
                              $6::text[], $7::bool[], $8::jsonb[], $9::int4[])",
        &[
            &r.skeys, &r.ids, &r.origins, &r.hashes, &r.envelopes, &r.summaries, &r.entities,
            &r.aliases, &r.counts,
        ],
    )
    .map_err(db(place("sources")))?;
    let mut fragments = copy_in(
        tx,
        "finder_fragments",
        "fkey, skey, ordinal, body, heading, byte_start, byte_end, line_start, line_end, words, \
         raw_words, embedding",
    )
    .map_err(db(place("fragments")))?;
    for i in 0..r.fkeys.len() {
        let embedding = r.embeddings[i].as_deref().map(Vector);
        fragments
            .write(&[
                &r.fkeys[i],
                &r.owners[i],
                &r.ordinals[i],
                &r.bodies[i],
                &r.headings[i],
                &r.byte_starts[i],
                &r.byte_ends[i],
                &r.line_starts[i],
                &r.line_ends[i],
                &r.words[i],
                &r.raw_words[i],
                &embedding,
            ])
            .map_err(db(place("fragments")))?;
    }
    fragments.finish().map_err(db(place("fragments")))?;
    if !r.part_fkeys.is_empty() {
        let mut parts = copy_in(tx, "finder_parts", "fkey, part, embedding")
            .map_err(db(place("later windows")))?;
        for i in 0..r.part_fkeys.len() {
            let embedding = Vector(&r.part_embeddings[i]);
            parts
                .write(&[&r.part_fkeys[i], &r.parts[i], &embedding])
                .map_err(db(place("later windows")))?;
        }
        parts.finish().map_err(db(place("later windows")))?;
    }
    let mut postings = copy_in(tx, "finder_postings", "field, term, fkey, tf, norm")
        .map_err(db(place("postings")))?;
    for i in 0..r.p_fkeys.len() {
        postings
            .write(&[
                &r.p_fields[i],
                &r.p_terms[i],
                &r.p_fkeys[i],
                &r.p_tfs[i],
                &r.p_norms[i],
            ])
            .map_err(db(place("postings")))?;
    }
    postings.finish().map_err(db(place("postings")))?;
    for (field, term) in r.p_fields.iter().zip(&r.p_terms) {
        *df.entry((*field, term.clone())).or_default() += 1;
    }
    tx.execute(
        "UPDATE finder_stats SET docs = docs + $1::int8,
             tokens = tokens + CASE field WHEN 0 THEN $2::int8 ELSE $3::int8 END",
        &[&(r.fkeys.len() as i64), &r.words_total, &r.raw_words_total],
    )
    .map_err(db(place("field statistics")))?;
    if !r.r_skeys.is_empty() {
        tx.execute(
            "INSERT INTO finder_relations (skey, to_id, kind)
             SELECT * FROM unnest($1::int8[], $2::text[], $3::text[])",
            &[&r.r_skeys, &r.r_to, &r.r_kinds],
        )
        .map_err(db(place("relations")))?;
    }
    Ok(())
}

/// A binary `COPY` into `columns` of `table`, typed as the table's own columns are (the
/// vector column's type comes from pgvector, whatever its schema).
fn copy_in<'a>(
    tx: &'a mut Transaction<'_>,
    table: &str,
    columns: &str,
) -> std::result::Result<BinaryCopyInWriter<'a>, postgres::Error> {
    let types: Vec<Type> = tx
        .prepare(&format!("SELECT {columns} FROM {table} LIMIT 0"))?
        .columns()
        .iter()
        .map(|c| c.type_().clone())
        .collect();
    let writer = tx.copy_in(&format!(
        "COPY {table} ({columns}) FROM STDIN (FORMAT binary)"
    ))?;
    Ok(BinaryCopyInWriter::new(writer, &types))
}

/// A vector in pgvector's binary form: its length and a reserved field (16 bits each), then
/// each number as a big-endian `f32`.
#[derive(Debug)]
struct Vector<'a>(&'a [f32]);

impl ToSql for Vector<'_> {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let dim = u16::try_from(self.0.len()).map_err(|_| "a vector longer than 65,535")?;
        out.put_u16(dim);
        out.put_u16(0);
        for x in self.0 {
            out.put_f32(*x);
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        ty.name() == "vector"
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_print_in_pgvector_text_form() {
        assert_eq!(vector_text(&[1.0, -0.5, 0.1]), "[1,-0.5,0.1]");
        assert_eq!(vector_text(&[]), "[]");
    }
}
