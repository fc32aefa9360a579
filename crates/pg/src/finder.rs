//! A query node over PostgreSQL: connections to each shard's read URL, and the
//! [`Retriever`] that runs Finder's pipeline over them.
//!
//! A query node holds no index state, only connections: any number of them can serve the
//! same shards. Each query reads one snapshot per shard (a `REPEATABLE READ READ ONLY`
//! transaction), fans out to the shards in parallel, and merges per-shard lists by score into
//! one list per channel, which is exactly the unsharded list because the scores are global
//! (BM25 with statistics summed over shards, cosine similarity). Fusion, rollup and the
//! refinements then run unchanged in `finder_core`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use finder_core::{
    bm25_idf, timed, Channel, ChannelOutcome, Embed, EmbedBackend, Extent, FragmentKey,
    FragmentMeta, GraphState, Query, RankedList, Retriever, ScoredFragment, SearchResponse,
    Settings, SourceKey, SourceView, StageTime, Timed,
};

use crate::cluster::{
    connect_any, read_pool, shard_of, take, Conn, PgConfig, Pool, Pooled, Tls, POOL_SIZE,
};
use crate::error::{db, lost, PgError, Result};
use crate::graph;
use crate::node::{self, NodeVectors, Slot, Stamp, SyncReport};

/// Why a query node has no graph: none was stored.
const NO_GRAPH: &str = "no graph stored; run `finder index` with graph.build = true";
use crate::schema::{self, to_db, RunRecord, WHOLE_WORDS, WORDS};
use crate::search::{self, Found, Meta, Stats};
use crate::terms::Analyzers;

/// The query-side embedding model (as in the embedded engine).
enum Semantic {
    Detached,
    Off,
    Unavailable(String),
    Ready(Arc<dyn Embed>),
}

/// Finder over PostgreSQL, opened for queries.
pub struct PgFinder {
    /// A pool of read connections per shard; a query holds one of each for its snapshot.
    conns: Vec<Pool>,
    /// What each shard's last run recorded, read at open.
    records: Vec<RunRecord>,
    settings: Settings,
    analyzers: Analyzers,
    semantic: Semantic,
    extensions: finder_core::Extensions,
    /// The key of the graph stored when the node opened (`None`: none).
    graph_key: Option<String>,
    /// The relation graph as of open (`Ok(None)`: none stored; `Err`: unusable, with why).
    graph: std::result::Result<Option<finder_index::graph::LoadedGraph>, String>,
    /// Per shard, its fragments: whether its vector list is an exact scan rather than an
    /// HNSW walk ([`search::EXACT_SCAN_MAX`]), and the beam of a walk.
    rows: Vec<u64>,
    /// Each shard's write URL: what names its graph in a [`NodeVectors`].
    shard_ids: Vec<String>,
    /// Per shard, the node's own vector graph ([`PgFinder::walk_on_node`]); empty when
    /// pgvector walks every shard.
    node: Vec<Arc<Slot>>,
}

impl PgFinder {
    /// Connects to each shard's read URL (the first that answers) with `settings` as the base
    /// for queries; the index-time settings come from what the shards hold.
    pub fn open(config: &PgConfig, settings: Settings) -> Result<PgFinder> {
        config.validate()?;
        let n = config.shards.len();
        // Connections made here only read what the shards hold; queries take theirs from
        // the pools.
        let tls = Tls::new(config.tls_ca.as_deref())?;
        let mut clients = Vec::with_capacity(n);
        let mut records = Vec::with_capacity(n);
        for i in 0..n {
            let mut client = connect_any(&config.read_urls(i), i, &tls)?;
            let record = schema::read_meta(&mut client, i, n)?.ok_or(PgError::NotIndexed(i))?;
            if let Some(first) = records.first() {
                let first: &RunRecord = first;
                if first.settings != record.settings
                    || first.dim != record.dim
                    || first.analysis != record.analysis
                {
                    return Err(PgError::Mismatch {
                        shard: i,
                        reason: "its index-time settings or word analysis differ from shard 0's; index all shards in one run".into(),
                    });
                }
            }
            records.push(record);
            clients.push(client);
        }
        let mut settings = settings;
        settings.index = records[0].settings.clone();
        let key = finder_index::graph::build_key(&settings.graph, records[0].generation);
        // Read before the graph itself, so that a graph stored after it shows in a later
        // `read_state` (the records above come before both for the same reason).
        let graph_key = graph::stored_key(&mut clients[graph::GRAPH_SHARD])?;
        let graph = graph::load(&mut clients[graph::GRAPH_SHARD], &key);
        Ok(PgFinder {
            rows: records.iter().map(|r| r.fragments).collect(),
            shard_ids: config.shards.iter().map(|s| s.write.clone()).collect(),
            node: Vec::new(),
            graph,
            graph_key,
            conns: (0..n).map(|i| read_pool(config, i, &tls)).collect(),
            analyzers: Analyzers::new(
                &settings.index.language,
                records[0].analysis,
                &records[0].languages,
            ),
            records,
            settings,
            semantic: Semantic::Detached,
            extensions: finder_core::Extensions::default(),
        })
    }

    /// Has every shard answer the vector list by its HNSW indexes, however few fragments it
    /// holds, as a shard past the exact scan's size does: for tests of the walk on a small
    /// corpus.
    #[cfg(feature = "testing")]
    pub fn walk_vectors_always(&mut self) {
        for rows in &mut self.rows {
            *rows = (*rows).max(search::EXACT_SCAN_MAX + 1);
        }
    }

    /// Walks the vectors of each shard past the exact scan's size on this node, over a graph
    /// of its own that `vectors` keeps across reopens, instead of pgvector's index. A shard
    /// the node does not hold at the generation this reader opened (the first load, a run
    /// since) is walked by pgvector's index meanwhile, and a sync starts beside the queries.
    /// For long-running processes: the first load reads every vector of the shards.
    pub fn walk_on_node(&mut self, vectors: &NodeVectors) {
        self.node = self.shard_ids.iter().map(|id| vectors.slot(id)).collect();
        self.refresh_node();
    }

    /// Brings the node's graphs up to what the shards hold now and waits for it (a benchmark
    /// before it times queries); nothing without [`PgFinder::walk_on_node`].
    pub fn sync_node_vectors(&self) -> Result<Vec<SyncReport>> {
        let n = self.conns.len();
        (0..self.node.len())
            .filter(|i| self.walks(*i))
            .map(|i| self.node[i].sync(&self.conns[i], i, n))
            .collect()
    }

    /// Whether a shard's vector list is a walk (not an exact scan).
    fn walks(&self, shard: usize) -> bool {
        self.rows[shard] > search::EXACT_SCAN_MAX
    }

    /// Whether the node holds every shard's vectors as of the runs `stamps` name.
    fn node_holds_all(&self, stamps: &[Stamp]) -> bool {
        !self.node.is_empty()
            && (0..self.node.len()).all(|i| self.walks(i) && self.node[i].holds(stamps[i]))
    }

    /// Starts a sync of each node graph behind the run this reader opened of its shard.
    fn refresh_node(&self) {
        let n = self.conns.len();
        for (i, slot) in self.node.iter().enumerate() {
            if self.walks(i) {
                slot.refresh(Stamp::of(&self.records[i]), &self.conns[i], i, n);
            }
        }
    }

    /// Each shard's nearest fragments to `vector` by the node's own graph, for the shards the
    /// node holds as of `stamps` (the runs the query's snapshot reads); `None` for the others,
    /// and those behind start a sync.
    fn node_lists(
        &self,
        vector: &[f32],
        settings: &finder_core::VectorSettings,
        window: usize,
        stamps: &[Stamp],
    ) -> Vec<Option<Vec<Found>>> {
        let n = self.conns.len();
        if self.node.is_empty() || !(0..n).any(|i| self.walks(i)) {
            return vec![None; n];
        }
        let query = finder_ann::distance::unit(vector.to_vec());
        let window_weight = self.records[0]
            .windows
            .then_some(settings.window_weight)
            .filter(|w| *w > 0.0);
        let list = |i: usize| {
            if !self.walks(i) {
                return None;
            }
            let walk = node::Walk {
                ef: settings.beam(self.rows[i] as usize),
                window,
                window_weight,
            };
            let Some(mut found) = self.node[i].nearest(stamps[i], i, &query, walk) else {
                self.node[i].refresh(stamps[i], &self.conns[i], i, n);
                return None;
            };
            found.retain(|f| 1.0 - f.score <= settings.max_vector_distance);
            Some(found)
        };
        match n {
            1 => vec![list(0)],
            n => std::thread::scope(|scope| {
                let list = &list;
                let handles: Vec<_> = (0..n).map(|i| scope.spawn(move || list(i))).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("node vector walk panicked"))
                    .collect()
            }),
        }
    }

    /// Attaches the query-side embedding model: `Ok(None)` when the semantic layer is off,
    /// `Err(reason)` when it is unavailable.
    pub fn attach_embedder(
        &mut self,
        embedder: std::result::Result<Option<Arc<dyn Embed>>, String>,
    ) {
        self.semantic = match embedder {
            Ok(Some(e)) => Semantic::Ready(e),
            Ok(None) => Semantic::Off,
            Err(reason) => Semantic::Unavailable(reason),
        };
    }

    /// Attaches the reranker and plugin retrievers of the refinement stages.
    pub fn attach_refiners(
        &mut self,
        reranker: Option<Arc<dyn finder_core::Reranker>>,
        plugins: Vec<Arc<dyn finder_core::PluginRetriever>>,
    ) {
        self.extensions.reranker = reranker;
        self.extensions.plugins = plugins;
    }

    /// Reads the user profiles `refine.profiles` names (relative to the current folder, then
    /// `dir`: the folder of the configuration), for personalised queries; an interaction that
    /// names an item takes its tags and `extras` from the shards.
    pub fn load_profiles(&mut self, dir: &std::path::Path) -> Result<()> {
        let item = |id: &str| {
            let view = self.source(id).ok().flatten()?;
            Some(finder_index::envelope_attrs(&view.envelope))
        };
        let profiles = finder_index::read_profiles(dir, &self.settings, item)?;
        self.extensions.profiles = profiles;
        Ok(())
    }

    /// The base settings (index-time values as indexed).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Applies query-time overrides (`--set`) to the base settings; keys that shape what was
    /// stored may only repeat the stored value.
    pub fn settings_with(&self, overrides: &[String]) -> Result<Settings> {
        Ok(finder_index::query_settings(
            &self.settings,
            &self.records[0].settings,
            overrides,
        )?)
    }

    /// What each shard's last run recorded (as read at open).
    pub fn records(&self) -> &[RunRecord] {
        &self.records
    }

    /// Runs one query through the whole pipeline.
    pub fn search(
        &self,
        query: &str,
        settings: &Settings,
        offset: usize,
        limit: usize,
    ) -> Result<SearchResponse> {
        self.search_with_vector(query, None, settings, offset, limit)
    }

    /// Like [`PgFinder::search`], with the query's vector given.
    pub fn search_with_vector(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        settings: &Settings,
        offset: usize,
        limit: usize,
    ) -> Result<SearchResponse> {
        let mut request = Query::text(query, offset, limit);
        request.vector = vector.map(<[f32]>::to_vec);
        self.query(&request, settings)
    }

    /// Runs a full request through the pipeline, on one snapshot per shard. A query whose
    /// connection the server closed under it (a replica gone, a restart) runs once more on
    /// new connections: reads have no effect, so nothing is done twice.
    pub fn query(&self, request: &Query, settings: &Settings) -> Result<SearchResponse> {
        // On one shard the lexical and vector lists run at once (`retrieve_all`), on two
        // connections reading the snapshot exported as the query begins. Over several shards
        // each list already keeps every shard busy: they run in turn there
        // (docs/perf/pg-lists-at-once.md), unless the node walks the vectors itself.
        let searches_vectors = request.vector.is_some()
            || request.like.is_some()
            || matches!(self.semantic, Semantic::Ready(_));
        let both = settings.lexical.enabled
            && settings.vector.enabled
            && self.records[0].dim.is_some()
            && searches_vectors;
        let share = both && self.conns.len() == 1;
        let begin = || {
            let mut run = self.begin(request.vector.clone(), share)?;
            run.beside |= both && self.node_holds_all(&run.stamps);
            Ok::<_, PgError>(run)
        };
        let run = begin()?;
        match finder_core::search_with(&run, request, settings, &self.extensions) {
            Err(PgError::Db { source, .. }) if lost(&source) => {
                drop(run);
                let run = begin()?;
                finder_core::search_with(&run, request, settings, &self.extensions)
            }
            other => other,
        }
    }

    /// The request behind "sources related to `id`" (as the embedded engine makes it).
    pub fn like_query(&self, id: &str, limit: usize) -> Result<Query> {
        let view = self
            .source(id)?
            .ok_or_else(|| PgError::UnknownSource(id.to_string()))?;
        Ok(finder_index::like_request(id, &view, limit))
    }

    /// A source by id, as hits show it.
    pub fn source(&self, id: &str) -> Result<Option<SourceView>> {
        let run = self.begin(None, false)?;
        Retriever::source(&run, finder_index::source_key(id))
    }

    /// The source `id` with its passages in source order, as `finder get` shows them; `None`
    /// when no shard holds it.
    pub fn source_text(&self, id: &str) -> Result<Option<finder_index::SourceText>> {
        let run = self.begin(None, false)?;
        let key = finder_index::source_key(id);
        // Two ids could share a key; the stored id settles it.
        let Some(view) = Retriever::source(&run, key)?.filter(|v| v.id == id) else {
            return Ok(None);
        };
        let shard = shard_of(key, self.conns.len());
        let rows = run.on(shard, |c| {
            c.query(
                "SELECT fkey, body, byte_start, byte_end, line_start, line_end, heading
                 FROM finder_fragments WHERE skey = $1 ORDER BY ordinal",
                &[&to_db(key.0)],
            )
            .map_err(db(format!("shard {shard}: reading the passages of `{id}`")))
        })?;
        let passages = rows
            .iter()
            .map(|r| {
                let (text, extent) = body_of(r);
                finder_index::Passage {
                    text,
                    heading: r.get(6),
                    extent,
                }
            })
            .collect();
        Ok(Some(finder_index::SourceText { view, passages }))
    }

    /// What the node opened: each shard's generation and the stored graph's key. Compared
    /// with [`PgFinder::read_state`], it says whether a run (or its graph) came since.
    pub fn opened_state(&self) -> (Vec<u64>, Option<String>) {
        (
            self.records.iter().map(|r| r.generation).collect(),
            self.graph_key.clone(),
        )
    }

    /// Each shard's generation and the stored graph's key, read now (one snapshot per shard).
    pub fn read_state(&self) -> Result<(Vec<u64>, Option<String>)> {
        let run = self.begin(None, false)?;
        let records = run.records()?;
        let key = run.on(graph::GRAPH_SHARD, |c| graph::stored_key(c.client()))?;
        Ok((records.iter().map(|r| r.generation).collect(), key))
    }

    /// What each shard's last run recorded and the stored graph's key, read now (one
    /// snapshot per shard).
    pub fn read_status(&self) -> Result<(Vec<RunRecord>, Option<String>)> {
        let run = self.begin(None, false)?;
        let records = run.records()?;
        let key = run.on(graph::GRAPH_SHARD, |c| graph::stored_key(c.client()))?;
        Ok((records, key))
    }

    /// What each shard's last run recorded, read now (not as of open).
    pub fn read_records(&self) -> Result<Vec<RunRecord>> {
        self.begin(None, false)?.records()
    }

    /// The attached embedding model, when one is ready (index runs through the node embed
    /// with the model its queries use).
    pub fn embedder(&self) -> Option<Arc<dyn Embed>> {
        match &self.semantic {
            Semantic::Ready(e) => Some(Arc::clone(e)),
            _ => None,
        }
    }

    /// Takes a connection of every shard (in shard order, so concurrent queries never
    /// deadlock) and opens the query's snapshot on each. A connection the server dropped (a
    /// replica gone, a restart) is replaced by a new one, which goes to the first read URL
    /// that answers.
    fn begin(&self, vector: Option<Vec<f32>>, mut share: bool) -> Result<PgQuery<'_>> {
        let mut guards: Vec<Pooled> = Vec::with_capacity(self.conns.len());
        let mut snapshots = Vec::new();
        // With the node's walk, the run of each shard the query's snapshot reads: a shard the
        // node holds as of another is walked by pgvector's index.
        let mut stamps: Vec<Stamp> = self.records.iter().map(Stamp::of).collect();
        const RUN: &str = "SELECT record->>'generation', record->>'committed_at'
                           FROM finder_meta WHERE id = 1";
        for (i, pool) in self.conns.iter().enumerate() {
            // Idle connections to a server that went away fail here one by one, and the pool
            // drops each (broken); then a new one goes to the first URL that answers.
            let mut tries = 0;
            let conn = loop {
                let failed = match take(pool, i) {
                    Ok(mut conn) => {
                        let mut begin = match share {
                            true => format!("{BEGIN}; SELECT pg_export_snapshot()"),
                            false => BEGIN.to_string(),
                        };
                        if !self.node.is_empty() {
                            begin = format!("{begin}; {RUN}");
                        }
                        match conn.client().simple_query(&begin) {
                            Ok(messages) => {
                                // Rows in the statements' order: the snapshot, the run.
                                let mut rows = messages.iter().filter_map(|m| match m {
                                    postgres::SimpleQueryMessage::Row(row) => Some(row),
                                    _ => None,
                                });
                                if share {
                                    let snapshot = rows.next().and_then(|r| r.get(0));
                                    snapshots.extend(snapshot.map(str::to_string));
                                }
                                let number = |r: &postgres::SimpleQueryRow, at| {
                                    r.get(at).and_then(|x: &str| x.parse().ok())
                                };
                                if let Some(r) = rows.next() {
                                    if let (Some(generation), Some(committed_at)) =
                                        (number(r, 0), number(r, 1))
                                    {
                                        stamps[i] = Stamp {
                                            generation,
                                            committed_at,
                                        };
                                    }
                                }
                                break conn;
                            }
                            Err(e) if lost(&e) && tries < POOL_SIZE => {
                                tries += 1;
                                continue;
                            }
                            Err(_) if share => {
                                // No snapshot to share here: the lists run in turn.
                                roll_back(std::slice::from_mut(&mut conn));
                                share = false;
                                continue;
                            }
                            Err(e) => {
                                roll_back(std::slice::from_mut(&mut conn));
                                db(format!("shard {i}: opening the query's snapshot"))(e)
                            }
                        }
                    }
                    Err(e) => e,
                };
                // The shards already begun go back to their pools idle, not in a transaction.
                roll_back(&mut guards);
                return Err(failed);
            };
            guards.push(conn);
        }
        Ok(PgQuery {
            finder: self,
            conns: RefCell::new(guards),
            seen: RefCell::new(HashMap::new()),
            views: RefCell::new(HashMap::new()),
            bodies: RefCell::new(HashMap::new()),
            extra: RefCell::new(Vec::new()),
            vector,
            expanded: std::cell::Cell::new(None),
            stamps,
            beside: share && snapshots.len() == self.conns.len(),
            snapshots: (share && snapshots.len() == self.conns.len()).then_some(snapshots),
        })
    }
}

/// One query's view: a snapshot per shard and what its channels found.
struct PgQuery<'a> {
    finder: &'a PgFinder,
    conns: RefCell<Vec<Pooled>>,
    seen: RefCell<HashMap<FragmentKey, Meta>>,
    /// Sources and fragment bodies read ahead for the page (`Retriever::prefetch`).
    views: RefCell<HashMap<SourceKey, Option<SourceView>>>,
    bodies: RefCell<HashMap<FragmentKey, Option<(String, Extent)>>>,
    extra: RefCell<Vec<StageTime>>,
    vector: Option<Vec<f32>>,
    /// What the trigram channel expanded for the lexical list: query words, indexed words.
    expanded: std::cell::Cell<Option<(usize, usize)>>,
    /// Each shard's snapshot, exported for connections beside the query's own.
    snapshots: Option<Vec<String>>,
    /// The vector list runs beside the other lists (`retrieve_all`): on connections that read
    /// `snapshots`, or by the node's own walk.
    beside: bool,
    /// The run of each shard the query's snapshot reads (with the node's walk; else the one
    /// the reader opened).
    stamps: Vec<Stamp>,
}

impl Drop for PgQuery<'_> {
    fn drop(&mut self) {
        roll_back(self.conns.get_mut());
    }
}

/// How a query's read transaction begins on each shard: one snapshot, no writes.
const BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// Ends each connection's transaction, so it goes back to its pool idle (a broken one is
/// dropped by the pool).
fn roll_back(conns: &mut [Pooled]) {
    for conn in conns {
        let _ = conn.batch_execute("ROLLBACK");
    }
}

impl PgQuery<'_> {
    fn shards(&self) -> usize {
        self.finder.conns.len()
    }

    /// Runs `f` on every shard, in parallel when there are several.
    fn fan_out<T: Send>(&self, f: impl Fn(usize, &mut Conn) -> Result<T> + Sync) -> Result<Vec<T>> {
        fan_out(&mut self.conns.borrow_mut(), f)
    }

    /// Each shard's run record in this snapshot.
    fn records(&self) -> Result<Vec<RunRecord>> {
        let n = self.shards();
        self.fan_out(|i, c| schema::read_meta(c.client(), i, n)?.ok_or(PgError::NotIndexed(i)))
    }

    /// Runs `f` on one shard.
    fn on<T>(&self, shard: usize, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut conns = self.conns.borrow_mut();
        f(&mut conns[shard])
    }

    fn remember(&self, found: &[Found]) {
        let mut seen = self.seen.borrow_mut();
        for f in found {
            seen.insert(f.fragment, f.meta);
        }
    }

    fn lookup(&self, fragment: FragmentKey) -> Result<Option<Meta>> {
        if let Some(m) = self.seen.borrow().get(&fragment) {
            return Ok(Some(*m));
        }
        self.lookup_many(&[fragment])?;
        Ok(self.seen.borrow().get(&fragment).copied())
    }

    /// Looks up fragments not seen yet on every shard (a fragment key does not say its
    /// shard).
    fn lookup_many(&self, fragments: &[FragmentKey]) -> Result<()> {
        let missing: Vec<FragmentKey> = {
            let seen = self.seen.borrow();
            fragments
                .iter()
                .copied()
                .filter(|f| !seen.contains_key(f))
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        let found = self.fan_out(|i, c| search::lookup(c, i, &missing))?;
        let mut seen = self.seen.borrow_mut();
        for (fragment, meta) in found.into_iter().flatten() {
            seen.insert(fragment, meta);
        }
        Ok(())
    }

    /// Merges per-shard lists by score (global scores, so this is the unsharded list), ties
    /// on the key, and keeps the best `depth`.
    fn merge(&self, channel: Channel, lists: Vec<Vec<Found>>, depth: usize) -> ChannelOutcome {
        let mut all: Vec<Found> = lists.into_iter().flatten().collect();
        all.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.fragment.cmp(&b.fragment))
        });
        all.truncate(depth);
        self.remember(&all);
        ChannelOutcome::Ran(RankedList::new(
            channel,
            all.iter()
                .map(|f| ScoredFragment {
                    fragment: f.fragment,
                    score: f.score,
                })
                .collect(),
        ))
    }

    /// The lexical list: BM25 over the stemmed words plus the trigram channel's expansions,
    /// scored as the embedded index scores them (each term with its own field's statistics).
    /// Two statements per shard: the terms' statistics and expansions, then the list.
    fn bm25(&self, query: &str, settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let mut analyzers = self.finder.analyzers.clone();
        // Each distinct word once, as the embedded index weighs them (`query_terms`).
        // Sources detected in another language hold its stems: the query's words in each,
        // weighed as the embedded index weighs them (`query_term_weights`).
        let mut passes = vec![finder_index::testing::analyze(&mut analyzers.words, query)];
        for (_, analyzer) in &mut analyzers.detected {
            passes.push(finder_index::testing::analyze(analyzer, query));
        }
        let words = finder_core::query_term_weights(&passes, settings.lexical.k3);
        let expanding = match self.finder.settings.index.trigrams {
            true => finder_index::expand::expansion_words(query, settings.lexical.trigram),
            false => Vec::new(),
        };
        if words.is_empty() && expanding.is_empty() {
            return Ok(ChannelOutcome::Skipped(
                "the query has no searchable terms".into(),
            ));
        }
        let names: Vec<String> = words.iter().map(|(t, _)| t.clone()).collect();
        let asked: Vec<&str> = expanding.iter().map(|(w, _)| w.as_str()).collect();
        let cap = settings.lexical.trigram_expansions;
        let per_shard = self.fan_out(|i, c| search::terms(c, i, &names, &asked, cap))?;
        let (mut stemmed, mut whole) = (Stats::default(), Stats::default());
        for shard in &per_shard {
            stemmed.add(&shard.words);
            whole.add(&shard.whole);
        }
        let expansions = self.expansions(&expanding, &per_shard, settings);
        if words.is_empty() && expansions.is_empty() {
            return Ok(ChannelOutcome::Skipped(
                "the query has no searchable terms".into(),
            ));
        }
        // The embedded scorer's constants: IDF over all fragments, average length over them.
        let avg_len = |stats: &Stats| {
            if stats.docs == 0 {
                1.0
            } else {
                (stats.tokens as f32 / stats.docs as f32).max(f32::MIN_POSITIVE)
            }
        };
        let (mut fields, mut live, mut weights, mut avgs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let stemmed_terms = words
            .into_iter()
            .zip(stemmed.df.iter().copied())
            .map(|((term, w), df)| (WORDS, term, w, df, &stemmed));
        let whole_terms = expansions
            .into_iter()
            .map(|(term, w, df)| (WHOLE_WORDS, term, w, df, &whole));
        for (field, term, w, df, stats) in stemmed_terms.chain(whole_terms) {
            if df > 0 {
                fields.push(field);
                live.push(term);
                weights.push(f64::from(bm25_idf(stats.docs, df) * w));
                avgs.push(f64::from(avg_len(stats)));
            }
        }
        if live.is_empty() {
            return Ok(self.merge(Channel::Lexical, Vec::new(), depth));
        }
        let params = (settings.lexical.k1, settings.lexical.b);
        let lists = self
            .fan_out(|i, c| search::bm25(c, i, &fields, &live, &weights, &avgs, params, depth))?;
        Ok(self.merge(Channel::Lexical, lists, depth))
    }

    /// The trigram channel's terms for `query`: each expanded word's indexed words that hold
    /// it (from every shard's candidates), picked and weighted as the embedded index does,
    /// with their global document frequencies.
    fn expansions(
        &self,
        expanding: &[(String, u32)],
        per_shard: &[search::ShardTerms],
        settings: &Settings,
    ) -> Vec<(String, f32, u64)> {
        if expanding.is_empty() {
            return Vec::new();
        }
        // A word's global frequency: the sum of each shard's (a shard lists a word once per
        // expanded query word that it holds, with the same frequency).
        let mut df: HashMap<&str, u64> = HashMap::new();
        for shard in per_shard {
            let mut seen: HashMap<&str, u64> = HashMap::new();
            for (term, n) in shard.held.iter().flatten() {
                seen.insert(term, *n);
            }
            for (term, n) in seen {
                *df.entry(term).or_default() += n;
            }
        }
        let cap = settings.lexical.trigram_expansions;
        let mut out: Vec<(String, f32, u64)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for (at_word, (word, n)) in expanding.iter().enumerate() {
            let candidates: Vec<&[u8]> = per_shard
                .iter()
                .flat_map(|s| &s.held[at_word])
                .map(|(t, _)| t.as_bytes())
                .collect();
            for term in finder_index::expand::pick_expansions(word, candidates, cap) {
                let w = finder_index::expand::expansion_weight(word, term, *n, &settings.lexical);
                let term = String::from_utf8_lossy(term).into_owned();
                match at.get(&term) {
                    Some(&i) => out[i].1 += w,
                    None => {
                        at.insert(term.clone(), out.len());
                        let n = df.get(term.as_str()).copied().unwrap_or(0);
                        out.push((term, w, n));
                    }
                }
            }
        }
        self.expanded.set(Some((expanding.len(), out.len())));
        out
    }

    /// What the trigram channel reports for `query` (its expansions joined the lexical list).
    fn trigram_status(&self, query: &str, settings: &Settings) -> ChannelOutcome {
        let unavailable =
            (!self.finder.settings.index.trigrams).then_some(finder_index::expand::NOT_INDEXED);
        finder_index::expand::channel_outcome(
            query,
            &settings.lexical,
            unavailable,
            self.expanded.get(),
        )
    }

    fn dim(&self) -> Option<usize> {
        self.finder.records[0].dim
    }

    /// What the vector channel will search with for `request`, or why it will not search.
    fn probe(&self, request: &Query, settings: &Settings) -> Result<Probe> {
        let degraded = |why: String| Ok(Probe::Outcome(ChannelOutcome::Degraded(why)));
        let skipped = |why: &str| Ok(Probe::Outcome(ChannelOutcome::Skipped(why.into())));
        if !settings.vector.enabled {
            return skipped("vector.enabled = false");
        }
        let Some(dim) = self.dim() else {
            return degraded(
                "no vectors stored (index with embed.backend = \"precomputed\")".into(),
            );
        };
        if let (Some(id), None) = (&request.like, &self.vector) {
            // Recommend: the target's own vectors, averaged, are the query.
            let mut sum = vec![0f32; dim];
            for key in self.like_fragments(id)? {
                if let Some(v) = self.fragment_vector(key) {
                    sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
                }
            }
            if sum.iter().any(|&x| x != 0.0) {
                return Ok(Probe::Vector(sum));
            }
            return skipped("the target source has no vectors");
        }
        if let Some(given) = &self.vector {
            if given.len() != dim {
                return degraded(format!(
                    "the query vector has {} numbers, the index's vectors {dim}",
                    given.len()
                ));
            }
            return Ok(Probe::Vector(given.clone()));
        }
        match &self.finder.semantic {
            Semantic::Off => skipped("embed.backend = \"none\""),
            Semantic::Detached if settings.embed.backend == EmbedBackend::None => {
                skipped("embed.backend = \"none\"")
            }
            Semantic::Detached => degraded("no embedding model attached to this reader".into()),
            Semantic::Unavailable(reason) => degraded(reason.clone()),
            Semantic::Ready(_) if request.text.trim().is_empty() => skipped("the query is empty"),
            Semantic::Ready(e) => Ok(Probe::Embed(Arc::clone(e), dim)),
        }
    }

    fn vector(&self, request: &Query, settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let (vector, stage) = self
            .probe(request, settings)?
            .vector(&request.text, settings);
        self.extra.borrow_mut().extend(stage);
        match vector {
            Ok(v) => self.nearest(&v, settings, depth),
            Err(outcome) => Ok(outcome),
        }
    }

    /// Nearest fragments over all shards: each shard's window (half again as wide as `depth`,
    /// as in the embedded index), exact cosine, cut at `max_vector_distance`.
    fn nearest(&self, vector: &[f32], settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let started = Instant::now();
        let (vs, window) = (&settings.vector, window(depth));
        let walked = self.finder.node_lists(vector, vs, window, &self.stamps);
        if walked.iter().any(Option::is_some) {
            self.extra.borrow_mut().push(node_stage(started.elapsed()));
        }
        self.finish_nearest(vector, settings, depth, walked)
    }

    /// The vector channel from each shard's list the node walked (`walked`), and pgvector's on
    /// the query's own connections for the others.
    fn finish_nearest(
        &self,
        vector: &[f32],
        settings: &Settings,
        depth: usize,
        walked: Vec<Option<Vec<Found>>>,
    ) -> Result<ChannelOutcome> {
        let lists = match walked.iter().all(Option::is_some) {
            true => walked.into_iter().flatten().collect(),
            false => {
                let text = crate::writer::vector_text(vector);
                let (rows, windows) = (&self.finder.rows, self.finder.records[0].windows);
                let (vs, window) = (&settings.vector, window(depth));
                let mut conns = self.conns.borrow_mut();
                nearest_lists(&mut conns, rows, windows, &text, vs, window, &walked)?
            }
        };
        Ok(self.merge(Channel::Vector, lists, depth))
    }

    /// The lexical and the vector channel at once: the query embedding and the vector search
    /// (on connections of their own, reading the query's snapshot) run beside the other
    /// channels, which run in turn on the query's connections. Without free connections, the
    /// vector search runs after them, the embedding still beside them.
    fn retrieve_beside(
        &self,
        asked: &[(Channel, usize)],
        at: usize,
        request: &Query,
        settings: &Settings,
    ) -> Result<Vec<Timed<ChannelOutcome>>> {
        let probed = timed(|| self.probe(request, settings))?;
        let depth = asked[at].1;
        let rest: Vec<(Channel, usize)> = [&asked[..at], &asked[at + 1..]].concat();
        let others = || finder_core::retrieve_each(self, &rest, request, settings);
        let (others, vector) = match probed.value {
            Probe::Outcome(outcome) => (
                others(),
                Timed {
                    value: outcome,
                    ms: probed.ms,
                },
            ),
            probe => {
                let snapshots = self.snapshots.as_deref();
                let (pools, rows) = (&self.finder.conns, &self.finder.rows);
                let windows = self.finder.records[0].windows;
                let (finder, stamps) = (self.finder, &self.stamps);
                let (others, (vector, stage, lists, took, walked)) = std::thread::scope(|scope| {
                    let beside = scope.spawn(move || {
                        let started = Instant::now();
                        let (vector, stage) = probe.vector(&request.text, settings);
                        let mut walked = None;
                        let lists = vector.as_ref().ok().map(|v| {
                            let walk = Instant::now();
                            let (vs, window) = (&settings.vector, window(depth));
                            let on_node = finder.node_lists(v, vs, window, stamps);
                            if on_node.iter().any(Option::is_some) {
                                walked = Some(walk.elapsed());
                            }
                            if on_node.iter().all(Option::is_some) {
                                return Beside::Lists(on_node.into_iter().flatten().collect());
                            }
                            let aside = snapshots.and_then(|s| Aside::open(pools, s));
                            let Some(mut aside) = aside else {
                                return Beside::Left(on_node);
                            };
                            let text = crate::writer::vector_text(v);
                            let conns = &mut aside.0;
                            match nearest_lists(conns, rows, windows, &text, vs, window, &on_node) {
                                Ok(lists) => Beside::Lists(lists),
                                Err(_) => Beside::Failed,
                            }
                        });
                        (vector, stage, lists, started.elapsed(), walked)
                    });
                    let others = others();
                    (
                        others,
                        beside.join().expect("vector search thread panicked"),
                    )
                });
                self.extra.borrow_mut().extend(stage);
                self.extra.borrow_mut().extend(walked.map(node_stage));
                let started = Instant::now();
                let outcome = match (vector, lists) {
                    (Err(outcome), _) => outcome,
                    (Ok(_), Some(Beside::Lists(lists))) => {
                        self.merge(Channel::Vector, lists, depth)
                    }
                    // No connection free beside the others, or none beside (several shards,
                    // some not walked on the node): what is left runs on the query's own.
                    (Ok(v), Some(Beside::Left(walked))) => {
                        self.finish_nearest(&v, settings, depth, walked)?
                    }
                    // A connection beside failed: the search runs again on the query's own.
                    (Ok(v), _) => self.nearest(&v, settings, depth)?,
                };
                let ms = probed.ms + (took + started.elapsed()).as_secs_f64() * 1e3;
                (others, Timed { value: outcome, ms })
            }
        };
        let mut outcomes = others?;
        outcomes.insert(at, vector);
        Ok(outcomes)
    }

    /// Body and extent of a fragment.
    fn body(&self, fragment: FragmentKey) -> Result<Option<(String, Extent)>> {
        if let Some(body) = self.bodies.borrow().get(&fragment) {
            return Ok(body.clone());
        }
        let Some(meta) = self.lookup(fragment)? else {
            return Ok(None);
        };
        let row = self.on(meta.shard, |c| {
            c.query_opt(
                "SELECT fkey, body, byte_start, byte_end, line_start, line_end
                 FROM finder_fragments WHERE fkey = $1",
                &[&to_db(fragment.0)],
            )
            .map_err(db(format!("shard {}: reading a fragment", meta.shard)))
        })?;
        Ok(row.map(|r| body_of(&r)))
    }

    /// Reads the views of `sources` into `views` and the bodies of `fragments` into
    /// `bodies`: one statement per shard for both.
    fn prefetch_page(&self, sources: &[SourceKey], fragments: &[FragmentKey]) -> Result<()> {
        self.lookup_many(fragments)?;
        let n = self.shards();
        let (mut source_keys, mut fragment_keys) = (vec![Vec::new(); n], vec![Vec::new(); n]);
        for s in sources {
            source_keys[shard_of(*s, n)].push(to_db(s.0));
        }
        {
            let seen = self.seen.borrow();
            for f in fragments {
                if let Some(meta) = seen.get(f) {
                    fragment_keys[meta.shard].push(to_db(f.0));
                }
            }
        }
        // Rows by kind: 0 a source (`key, id, envelope, summary`), 1 a passage (`key, body`
        // and its extent at columns 5..9).
        let rows = self.fan_out(|i, c| {
            if source_keys[i].is_empty() && fragment_keys[i].is_empty() {
                return Ok(Vec::new());
            }
            c.query(
                "SELECT 0::int2, skey, id, envelope, summary,
                        NULL::int8, NULL::int8, NULL::int4, NULL::int4
                 FROM finder_sources WHERE skey = ANY($1)
                 UNION ALL
                 SELECT 1::int2, fkey, body, NULL::jsonb, NULL::text,
                        byte_start, byte_end, line_start, line_end
                 FROM finder_fragments WHERE fkey = ANY($2)",
                &[&source_keys[i], &fragment_keys[i]],
            )
            .map_err(db(format!(
                "shard {i}: reading the page's sources and passages"
            )))
        })?;
        let (mut views, mut bodies) = (self.views.borrow_mut(), self.bodies.borrow_mut());
        views.extend(sources.iter().map(|s| (*s, None)));
        bodies.extend(fragments.iter().map(|f| (*f, None)));
        for (shard, rows) in rows.into_iter().enumerate() {
            for row in rows {
                let key = schema::from_db(row.get(1));
                if row.get::<_, i16>(0) == 0 {
                    views.insert(SourceKey(key), Some(view_of(&row, 2, shard)?));
                } else {
                    let extent = extent_of(&row, 5);
                    bodies.insert(FragmentKey(key), Some((row.get(2), extent)));
                }
            }
        }
        Ok(())
    }
}

/// What the vector search beside the other lists came to.
enum Beside {
    Lists(Vec<Vec<Found>>),
    /// Each shard's list where the node walked it; the rest are to run on the query's own
    /// connections.
    Left(Vec<Option<Vec<Found>>>),
    Failed,
}

/// The time the node's own vector walk took, as a stage of the response's diagnostics.
fn node_stage(took: Duration) -> StageTime {
    StageTime {
        stage: "vector.node_walk".into(),
        ms: took.as_secs_f64() * 1e3,
    }
}

/// How many nearest fragments a shard returns for a list of `depth`: half again as many, as
/// the embedded index re-scores.
fn window(depth: usize) -> usize {
    depth + depth / 2
}

/// Runs `f` on each shard's connection of `conns`, in parallel when there are several.
fn fan_out<T: Send>(
    conns: &mut [Pooled],
    f: impl Fn(usize, &mut Conn) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    if let [conn] = conns {
        return Ok(vec![f(0, conn)?]);
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = conns
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                let client: &mut Conn = c;
                scope.spawn(move || f(i, client))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("shard query thread panicked"))
            .collect()
    })
}

/// Each shard's nearest fragments to `vector` (pgvector's text form): its window, by exact
/// cosine, cut at `max_vector_distance`; a shard with a list in `walked` (the node's walk)
/// keeps it.
#[allow(clippy::too_many_arguments)]
fn nearest_lists(
    conns: &mut [Pooled],
    rows: &[u64],
    windows: bool,
    vector: &str,
    settings: &finder_core::VectorSettings,
    window: usize,
    walked: &[Option<Vec<Found>>],
) -> Result<Vec<Vec<Found>>> {
    fan_out(conns, |i, c| {
        if let Some(found) = walked.get(i).and_then(Option::as_ref) {
            return Ok(found.clone());
        }
        let (beam, exact) = (
            settings.beam(rows[i] as usize),
            rows[i] <= search::EXACT_SCAN_MAX,
        );
        let mut found = search::nearest(
            c,
            i,
            vector,
            window,
            beam,
            exact,
            windows
                .then_some(settings.window_weight)
                .filter(|w| *w > 0.0),
        )?;
        found.retain(|f| 1.0 - f.score <= settings.max_vector_distance);
        Ok(found)
    })
}

/// Connections beside a query's own, one per shard, each in a transaction that reads the
/// query's snapshot; rolled back when dropped.
struct Aside(Vec<Pooled>);

impl Aside {
    /// Takes a free connection of each shard and opens the snapshot `snapshots[i]` on it:
    /// `None` when a shard has none free at once (one is made for the next query) or the
    /// snapshot cannot be opened there (another server behind the same URL list).
    fn open(pools: &[Pool], snapshots: &[String]) -> Option<Aside> {
        let mut aside = Aside(Vec::with_capacity(pools.len()));
        for (pool, id) in pools.iter().zip(snapshots) {
            // Not `try_get`: a zero wait also has the pool make a connection when none is
            // idle, so the next query finds one.
            let mut conn = pool.get_timeout(Duration::ZERO).ok()?;
            let begin = format!(
                "{BEGIN}; SET TRANSACTION SNAPSHOT '{}'",
                id.replace('\'', "''")
            );
            let begun = conn.batch_execute(&begin).is_ok();
            aside.0.push(conn);
            if !begun {
                return None;
            }
        }
        Some(aside)
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        roll_back(&mut self.0);
    }
}

/// What the vector channel searches with, or its outcome when it does not search.
enum Probe {
    Vector(Vec<f32>),
    /// The query text, to embed with this model into vectors of this length.
    Embed(Arc<dyn Embed>, usize),
    Outcome(ChannelOutcome),
}

impl Probe {
    /// The vector to search with (embedding `text` within `vector.query_embed_timeout_ms`
    /// when it must, and timing that), or the channel's outcome when there is none.
    fn vector(
        self,
        text: &str,
        settings: &Settings,
    ) -> (
        std::result::Result<Vec<f32>, ChannelOutcome>,
        Option<StageTime>,
    ) {
        let (embedder, dim) = match self {
            Probe::Vector(v) => return (Ok(v), None),
            Probe::Outcome(outcome) => return (Err(outcome), None),
            Probe::Embed(embedder, dim) => (embedder, dim),
        };
        let started = Instant::now();
        let timeout = Duration::from_millis(settings.vector.query_embed_timeout_ms);
        let embedded = finder_core::embed_with_timeout(embedder, text.to_string(), timeout);
        let stage = StageTime {
            stage: "vector.embed".into(),
            ms: started.elapsed().as_secs_f64() * 1e3,
        };
        let vector = match embedded {
            Ok(v) if v.len() == dim => Ok(v),
            Ok(v) => Err(ChannelOutcome::Degraded(format!(
                "the model returned {} dimensions, the index has {dim}",
                v.len()
            ))),
            Err(reason) => Err(ChannelOutcome::Degraded(reason)),
        };
        (vector, Some(stage))
    }
}

/// A source's view from `id, envelope, summary` at columns `from..`.
fn view_of(row: &postgres::Row, from: usize, shard: usize) -> Result<SourceView> {
    let envelope: serde_json::Value = row.get(from + 1);
    let envelope = serde_json::from_value(envelope).map_err(|e| PgError::Mismatch {
        shard,
        reason: format!("unreadable envelope: {e}"),
    })?;
    Ok(SourceView {
        id: row.get(from),
        envelope,
        summary: row.get(from + 2),
    })
}

/// A fragment's body and extent from `fkey, body, byte_start, byte_end, line_start, line_end`.
fn body_of(row: &postgres::Row) -> (String, Extent) {
    (row.get(1), extent_of(row, 2))
}

/// An extent from `byte_start, byte_end, line_start, line_end` at columns `from..`.
fn extent_of(row: &postgres::Row, from: usize) -> Extent {
    Extent {
        byte_start: row.get::<_, i64>(from) as u64,
        byte_end: row.get::<_, i64>(from + 1) as u64,
        line_start: row.get::<_, i32>(from + 2) as u32,
        line_end: row.get::<_, i32>(from + 3) as u32,
        page: None,
    }
}

impl Retriever for PgQuery<'_> {
    type Error = PgError;

    fn channels(&self) -> Vec<Channel> {
        vec![
            Channel::Lexical,
            Channel::Trigram,
            Channel::Vector,
            Channel::Entities,
        ]
    }

    fn retrieve(
        &self,
        channel: Channel,
        request: &Query,
        settings: &Settings,
        depth: usize,
    ) -> Result<ChannelOutcome> {
        let query = request.text.as_str();
        match channel {
            Channel::Lexical | Channel::Trigram if !settings.lexical.enabled => {
                Ok(ChannelOutcome::Skipped("lexical.enabled = false".into()))
            }
            Channel::Lexical => self.bm25(query, settings, depth),
            Channel::Trigram => Ok(self.trigram_status(query, settings)),
            Channel::Vector => self.vector(request, settings, depth),
            Channel::Entities => Ok(match (&self.finder.graph, settings.graph.entities) {
                (_, false) => ChannelOutcome::Skipped("graph.entities = false".into()),
                (Ok(Some(g)), true) => ChannelOutcome::Ran(finder_core::entity_list(
                    &**g,
                    query,
                    &settings.graph,
                    depth,
                )),
                (Ok(None), true) => ChannelOutcome::Skipped(NO_GRAPH.into()),
                (Err(e), true) => ChannelOutcome::Degraded(e.clone()),
            }),
            Channel::Neighbours | Channel::Communities | Channel::Events | Channel::Like => Ok(
                ChannelOutcome::Skipped("derived from the fused seeds by the pipeline".into()),
            ),
        }
    }

    fn retrieve_all(
        &self,
        asked: &[(Channel, usize)],
        request: &Query,
        settings: &Settings,
    ) -> Result<Vec<Timed<ChannelOutcome>>> {
        // The query exported its snapshot when both lists will run on one shard, or the node
        // walks the vectors itself (`PgFinder::query`); otherwise they run in turn.
        match asked.iter().position(|a| a.0 == Channel::Vector) {
            Some(at) if self.beside => self.retrieve_beside(asked, at, request, settings),
            _ => finder_core::retrieve_each(self, asked, request, settings),
        }
    }

    fn fragment_meta(&self, fragments: &[FragmentKey]) -> Result<Vec<Option<FragmentMeta>>> {
        self.lookup_many(fragments)?;
        let seen = self.seen.borrow();
        Ok(fragments
            .iter()
            .map(|f| {
                seen.get(f).map(|m| FragmentMeta {
                    source: (!m.entity).then_some(SourceKey(m.source)),
                    ordinal: m.ordinal,
                })
            })
            .collect())
    }

    fn source(&self, source: SourceKey) -> Result<Option<SourceView>> {
        if let Some(view) = self.views.borrow().get(&source) {
            return Ok(view.clone());
        }
        let shard = shard_of(source, self.shards());
        let row = self.on(shard, |c| {
            c.query_opt(
                "SELECT id, envelope, summary FROM finder_sources WHERE skey = $1",
                &[&to_db(source.0)],
            )
            .map_err(db(format!("shard {shard}: reading a source")))
        })?;
        row.map(|r| view_of(&r, 0, shard)).transpose()
    }

    fn prefetch(&self, sources: &[SourceKey], fragments: &[FragmentKey]) -> Result<()> {
        if sources.is_empty() && fragments.is_empty() {
            return Ok(());
        }
        self.prefetch_page(sources, fragments)
    }

    fn extra_stages(&self) -> Vec<StageTime> {
        self.extra.take()
    }

    fn fragment_text(&self, fragment: FragmentKey) -> Result<Option<String>> {
        Ok(self.body(fragment)?.map(|(text, _)| text))
    }

    fn fragment_vector(&self, fragment: FragmentKey) -> Option<Vec<f32>> {
        let meta = self.lookup(fragment).ok()??;
        let row = self
            .on(meta.shard, |c| {
                c.query_opt(
                    "SELECT embedding::text FROM finder_fragments WHERE fkey = $1",
                    &[&to_db(fragment.0)],
                )
                .map_err(db("reading a vector"))
            })
            .ok()??;
        let text: Option<String> = row.get(0);
        search::parse_vector(&text?)
    }

    fn source_key(&self, id: &str) -> Option<SourceKey> {
        Some(finder_index::source_key(id))
    }

    fn like_fragments(&self, id: &str) -> Result<Vec<FragmentKey>> {
        let key = finder_index::source_key(id);
        let shard = shard_of(key, self.shards());
        let rows = self.on(shard, |c| {
            c.query(
                "SELECT f.fkey, 0::float4, f.skey, f.ordinal, s.entity
                 FROM finder_fragments f JOIN finder_sources s ON s.skey = f.skey
                 WHERE f.skey = $1 ORDER BY f.ordinal",
                &[&to_db(key.0)],
            )
            .map_err(db(format!("shard {shard}: reading a source's fragments")))
        })?;
        if rows.is_empty() {
            return Err(PgError::UnknownSource(id.to_string()));
        }
        let found: Vec<Found> = rows
            .iter()
            .map(|r| Found {
                fragment: FragmentKey(schema::from_db(r.get(0))),
                score: 0.0,
                meta: Meta {
                    source: schema::from_db(r.get(2)),
                    ordinal: r.get::<_, i32>(3) as u32,
                    entity: r.get(4),
                    shard,
                },
            })
            .collect();
        self.remember(&found);
        Ok(found.into_iter().map(|f| f.fragment).collect())
    }

    fn may_have_dates(&self) -> bool {
        self.finder.records.iter().any(|r| r.dated != Some(0))
    }

    fn graph(&self) -> GraphState<'_> {
        match &self.finder.graph {
            Ok(Some(g)) => GraphState::Ready(&**g),
            Ok(None) => GraphState::Unavailable(NO_GRAPH.into()),
            Err(e) => GraphState::Unavailable(e.clone()),
        }
    }

    fn hint(
        &self,
        fragment: FragmentKey,
        query: &str,
        max_chars: usize,
    ) -> Result<Option<(String, Extent)>> {
        Ok(self
            .body(fragment)?
            .map(|(body, extent)| (finder_index::preview(&body, query, max_chars), extent)))
    }
}
