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
    bm25_idf, Channel, ChannelOutcome, Embed, EmbedBackend, Extent, FragmentKey, FragmentMeta,
    GraphState, Query, RankedList, Retriever, ScoredFragment, SearchResponse, Settings, SourceKey,
    SourceView, StageTime,
};

use crate::cluster::{
    connect_any, read_pool, shard_of, take, Conn, PgConfig, Pool, Pooled, Tls, POOL_SIZE,
};
use crate::error::{db, lost, PgError, Result};
use crate::graph;

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
        let run = self.begin(request.vector.clone())?;
        match finder_core::search_with(&run, request, settings, &self.extensions) {
            Err(PgError::Db { source, .. }) if lost(&source) => {
                drop(run);
                let run = self.begin(request.vector.clone())?;
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
        let run = self.begin(None)?;
        Retriever::source(&run, finder_index::source_key(id))
    }

    /// The source `id` with its passages in source order, as `finder get` shows them; `None`
    /// when no shard holds it.
    pub fn source_text(&self, id: &str) -> Result<Option<finder_index::SourceText>> {
        let run = self.begin(None)?;
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
        let run = self.begin(None)?;
        let records = run.records()?;
        let key = run.on(graph::GRAPH_SHARD, |c| graph::stored_key(c.client()))?;
        Ok((records.iter().map(|r| r.generation).collect(), key))
    }

    /// What each shard's last run recorded, read now (not as of open).
    pub fn read_records(&self) -> Result<Vec<RunRecord>> {
        self.begin(None)?.records()
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
    fn begin(&self, vector: Option<Vec<f32>>) -> Result<PgQuery<'_>> {
        const BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
        let mut guards: Vec<Pooled> = Vec::with_capacity(self.conns.len());
        for (i, pool) in self.conns.iter().enumerate() {
            // Idle connections to a server that went away fail here one by one, and the pool
            // drops each (broken); then a new one goes to the first URL that answers.
            let mut tries = 0;
            let conn = loop {
                let failed = match take(pool, i) {
                    Ok(mut conn) => match conn.batch_execute(BEGIN) {
                        Ok(()) => break conn,
                        Err(e) if lost(&e) && tries < POOL_SIZE => {
                            tries += 1;
                            continue;
                        }
                        Err(e) => db(format!("shard {i}: opening the query's snapshot"))(e),
                    },
                    Err(e) => e,
                };
                // The shards already begun go back to their pools idle, not in a transaction.
                for conn in &mut guards {
                    let _ = conn.batch_execute("ROLLBACK");
                }
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
}

impl Drop for PgQuery<'_> {
    fn drop(&mut self) {
        for conn in self.conns.get_mut().iter_mut() {
            let _ = conn.batch_execute("ROLLBACK");
        }
    }
}

impl PgQuery<'_> {
    fn shards(&self) -> usize {
        self.finder.conns.len()
    }

    /// Runs `f` on every shard, in parallel when there are several.
    fn fan_out<T: Send>(&self, f: impl Fn(usize, &mut Conn) -> Result<T> + Sync) -> Result<Vec<T>> {
        let mut conns = self.conns.borrow_mut();
        if conns.len() == 1 {
            return Ok(vec![f(0, &mut conns[0])?]);
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
    fn bm25(&self, query: &str, settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let mut analyzers = self.finder.analyzers.clone();
        // Each distinct word once, as the embedded index weighs them (`query_terms`).
        // Sources detected in another language hold its stems: the query's words in each,
        // weighed as the embedded index weighs them (`query_term_weights`).
        let mut passes = vec![finder_index::testing::analyze(&mut analyzers.words, query)];
        for (_, analyzer) in &mut analyzers.detected {
            passes.push(finder_index::testing::analyze(analyzer, query));
        }
        let mut terms: Vec<(i16, String, f32)> =
            finder_core::query_term_weights(&passes, settings.lexical.k3)
                .into_iter()
                .map(|(t, weight)| (WORDS, t, weight))
                .collect();
        terms.extend(self.expansions(query, settings)?);
        if terms.is_empty() {
            return Ok(ChannelOutcome::Skipped(
                "the query has no searchable terms".into(),
            ));
        }
        let (mut fields, mut live, mut weights, mut avgs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for field in [WORDS, WHOLE_WORDS] {
            let of_field: Vec<&(i16, String, f32)> =
                terms.iter().filter(|(f, _, _)| *f == field).collect();
            if of_field.is_empty() {
                continue;
            }
            let names: Vec<String> = of_field.iter().map(|(_, t, _)| t.clone()).collect();
            let mut global = Stats::default();
            for s in self.fan_out(|i, c| search::stats(c, i, field, &names))? {
                global.add(&s);
            }
            // The embedded scorer's constants: IDF over all fragments, average length over them.
            let avg_len = if global.docs == 0 {
                1.0
            } else {
                (global.tokens as f32 / global.docs as f32).max(f32::MIN_POSITIVE)
            };
            for ((_, term, w), df) in of_field.into_iter().zip(&global.df) {
                if *df > 0 {
                    fields.push(field);
                    live.push(term.clone());
                    weights.push(f64::from(bm25_idf(global.docs, *df) * *w));
                    avgs.push(f64::from(avg_len));
                }
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
    /// it (from every shard's term statistics), picked and weighted as the embedded index does.
    fn expansions(&self, query: &str, settings: &Settings) -> Result<Vec<(i16, String, f32)>> {
        let words = finder_index::expand::expansion_words(query, settings.lexical.trigram);
        if words.is_empty() || !self.finder.settings.index.trigrams {
            return Ok(Vec::new());
        }
        let cap = settings.lexical.trigram_expansions;
        let mut out: Vec<(i16, String, f32)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        let asked: Vec<&str> = words.iter().map(|(w, _)| w.as_str()).collect();
        let per_shard = self.fan_out(|i, c| search::holding(c, i, &asked, cap))?;
        for (at_word, (word, n)) in words.iter().enumerate() {
            let found: Vec<&String> = per_shard.iter().flat_map(|s| &s[at_word]).collect();
            let candidates: Vec<&[u8]> = found.iter().map(|t| t.as_bytes()).collect();
            for term in finder_index::expand::pick_expansions(word, candidates, cap) {
                let w = finder_index::expand::expansion_weight(word, term, *n, &settings.lexical);
                let term = String::from_utf8_lossy(term).into_owned();
                match at.get(&term) {
                    Some(&i) => out[i].2 += w,
                    None => {
                        at.insert(term.clone(), out.len());
                        out.push((WHOLE_WORDS, term, w));
                    }
                }
            }
        }
        self.expanded.set(Some((words.len(), out.len())));
        Ok(out)
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

    fn vector(&self, request: &Query, settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let degraded = |why: String| Ok(ChannelOutcome::Degraded(why));
        if !settings.vector.enabled {
            return Ok(ChannelOutcome::Skipped("vector.enabled = false".into()));
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
                return self.nearest(&sum, settings, depth);
            }
            return Ok(ChannelOutcome::Skipped(
                "the target source has no vectors".into(),
            ));
        }
        if let Some(given) = &self.vector {
            if given.len() != dim {
                return degraded(format!(
                    "the query vector has {} numbers, the index's vectors {dim}",
                    given.len()
                ));
            }
            return self.nearest(given, settings, depth);
        }
        let embedder = match &self.finder.semantic {
            Semantic::Off => return Ok(ChannelOutcome::Skipped("embed.backend = \"none\"".into())),
            Semantic::Detached if settings.embed.backend == EmbedBackend::None => {
                return Ok(ChannelOutcome::Skipped("embed.backend = \"none\"".into()))
            }
            Semantic::Detached => {
                return degraded("no embedding model attached to this reader".into())
            }
            Semantic::Unavailable(reason) => return degraded(reason.clone()),
            Semantic::Ready(e) => Arc::clone(e),
        };
        if request.text.trim().is_empty() {
            return Ok(ChannelOutcome::Skipped("the query is empty".into()));
        }
        let started = Instant::now();
        let timeout = Duration::from_millis(settings.vector.query_embed_timeout_ms);
        let embedded = finder_core::embed_with_timeout(embedder, request.text.clone(), timeout);
        self.extra.borrow_mut().push(StageTime {
            stage: "vector.embed".into(),
            ms: started.elapsed().as_secs_f64() * 1e3,
        });
        match embedded {
            Ok(v) if v.len() == dim => self.nearest(&v, settings, depth),
            Ok(v) => degraded(format!(
                "the model returned {} dimensions, the index has {dim}",
                v.len()
            )),
            Err(reason) => degraded(reason),
        }
    }

    /// Nearest fragments over all shards: each shard's HNSW window (half again as wide as
    /// `depth`, as in the embedded index), exact cosine, cut at `max_vector_distance`.
    fn nearest(&self, vector: &[f32], settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let v = &settings.vector;
        let text = crate::writer::vector_text(vector);
        let window = depth + depth / 2;
        let lists = self.fan_out(|i, c| {
            let mut found = search::nearest(c, i, &text, window, v.ef_search)?;
            found.retain(|f| 1.0 - f.score <= v.max_vector_distance);
            Ok(found)
        })?;
        Ok(self.merge(Channel::Vector, lists, depth))
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

    /// Reads the views of `sources` into `views`, one statement per shard.
    fn prefetch_sources(&self, sources: &[SourceKey]) -> Result<()> {
        let mut by_shard = vec![Vec::new(); self.shards()];
        for s in sources {
            by_shard[shard_of(*s, self.shards())].push(to_db(s.0));
        }
        let rows = self.rows_by_keys(
            &by_shard,
            "SELECT skey, id, envelope, summary FROM finder_sources WHERE skey = ANY($1)",
            "the page's sources",
        )?;
        let mut views = self.views.borrow_mut();
        for s in sources {
            views.insert(*s, None);
        }
        for (shard, row) in rows {
            let key = SourceKey(schema::from_db(row.get(0)));
            views.insert(key, Some(view_of(&row, 1, shard)?));
        }
        Ok(())
    }

    /// Reads the bodies of `fragments` into `bodies`, one statement per shard.
    fn prefetch_bodies(&self, fragments: &[FragmentKey]) -> Result<()> {
        self.lookup_many(fragments)?;
        let mut by_shard = vec![Vec::new(); self.shards()];
        {
            let seen = self.seen.borrow();
            for f in fragments {
                if let Some(meta) = seen.get(f) {
                    by_shard[meta.shard].push(to_db(f.0));
                }
            }
        }
        let rows = self.rows_by_keys(
            &by_shard,
            "SELECT fkey, body, byte_start, byte_end, line_start, line_end
             FROM finder_fragments WHERE fkey = ANY($1)",
            "the page's passages",
        )?;
        let mut bodies = self.bodies.borrow_mut();
        for f in fragments {
            bodies.insert(*f, None);
        }
        for (_, row) in rows {
            bodies.insert(
                FragmentKey(schema::from_db(row.get(0))),
                Some(body_of(&row)),
            );
        }
        Ok(())
    }

    /// Runs `sql` on every shard with that shard's keys as `$1` (shards without keys are not
    /// asked), in parallel; the rows with their shard.
    fn rows_by_keys(
        &self,
        by_shard: &[Vec<i64>],
        sql: &str,
        what: &str,
    ) -> Result<Vec<(usize, postgres::Row)>> {
        let rows = self.fan_out(|i, c| {
            if by_shard[i].is_empty() {
                return Ok(Vec::new());
            }
            c.query(sql, &[&by_shard[i]])
                .map_err(db(format!("shard {i}: reading {what}")))
        })?;
        Ok(rows
            .into_iter()
            .enumerate()
            .flat_map(|(i, rows)| rows.into_iter().map(move |r| (i, r)))
            .collect())
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
    (
        row.get(1),
        Extent {
            byte_start: row.get::<_, i64>(2) as u64,
            byte_end: row.get::<_, i64>(3) as u64,
            line_start: row.get::<_, i32>(4) as u32,
            line_end: row.get::<_, i32>(5) as u32,
            page: None,
        },
    )
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
        if !sources.is_empty() {
            self.prefetch_sources(sources)?;
        }
        if !fragments.is_empty() {
            self.prefetch_bodies(fragments)?;
        }
        Ok(())
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
