//! Answering a query over one snapshot: the channels (BM25 with its expansions, vectors,
//! entities, the like channel), the page of sources, and the `Retriever` the pipeline drives.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use finder_core::{
    query_term_weights, Bm25Params, Channel, ChannelOutcome, Extent, FastMap, FragmentKey,
    FragmentMeta, Query, Retriever, SearchResponse, Settings, SourceKey, SourceView, StageTime,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocSet, Searcher, Term, TERMINATED};

use crate::analyzer::{terms, WORDS};
use crate::error::{IndexError, Result};
use crate::files::LEXICAL_DIR;
use crate::lexical::top_k_terms;
use crate::pages::{Body, PageFile, Stored};
use crate::schema::{language_words, Fields};
use crate::store_error;
use crate::vector::{SearchLimits, VectorIndex};

use super::*;

/// Fragment key → the document holding it and its keys, for one searcher generation.
type Addresses = Arc<FastMap<u64, Seen>>;

/// Snapshots a query tries, each reloaded after the last, when a postings file of the one it
/// has is gone (a writer merged its segment away and collected the files).
const STALE_SNAPSHOT_RETRIES: u32 = 5;

/// The request behind "sources related to `id`" (any store): the source's title and summary
/// as text, and the source itself for the graph and vector channels to start from.
pub fn like_request(id: &str, view: &SourceView, limit: usize) -> Query {
    const LIKE_TEXT_CHARS: usize = 600;
    let text: String = format!("{} {}", view.envelope.title, view.summary)
        .chars()
        .take(LIKE_TEXT_CHARS)
        .collect();
    let mut request = Query::text(text.trim(), 0, limit);
    request.like = Some(id.to_string());
    request
}

/// What a query learned about a fragment it touched.
#[derive(Clone, Copy)]
pub(super) struct Seen {
    address: DocAddress,
    source: SourceKey,
    ordinal: u32,
    /// A fragment of an entity record: it seeds, it never ranks.
    entity: bool,
}

/// A segment's key columns.
pub(super) struct KeyColumns {
    fragment_key: tantivy::columnar::Column<u64>,
    source_key: tantivy::columnar::Column<u64>,
    ordinal: tantivy::columnar::Column<u64>,
    entity: Option<tantivy::columnar::Column<u64>>,
}

/// One query's view: a snapshot plus what its channels found.
struct QueryRun<'a> {
    finder: &'a Finder,
    searcher: Searcher,
    seen: RefCell<FastMap<FragmentKey, Seen>>,
    /// Fragment addresses, taken from the [`Finder`] at this query's first lookup by key.
    addresses: RefCell<Option<Addresses>>,
    /// Every segment's key columns, by segment ordinal (see `QueryRun::key_columns`).
    columns: RefCell<Option<Arc<Vec<KeyColumns>>>>,
    /// Every segment's page file, by segment ordinal (see `QueryRun::page_files`).
    pages: RefCell<Option<Arc<Vec<Option<PageFile>>>>>,
    /// The query's words as built searches, for the page's previews (see `Retriever::hint`).
    words: RefCell<Option<crate::preview::QueryWords>>,
    /// Where each seen source's first fragment (the one holding its record) is.
    firsts: RefCell<FastMap<SourceKey, DocAddress>>,
    /// Stored fragments read so far (a page's source and its hints are often one document).
    docs: RefCell<FastMap<DocAddress, Rc<Stored>>>,
    /// Sub-stage timings (query embedding) reported with the response.
    extra: RefCell<Vec<StageTime>>,
    /// The query's vector when the caller gave one (unit length).
    vector: Option<Vec<f32>>,
    /// What the trigram channel expanded for the lexical list: query words, indexed words.
    expanded: Cell<Option<(usize, usize)>>,
}

impl<'a> QueryRun<'a> {
    fn new(finder: &'a Finder, vector: Option<Vec<f32>>) -> QueryRun<'a> {
        QueryRun {
            finder,
            searcher: finder.reader.searcher(),
            seen: RefCell::default(),
            addresses: RefCell::default(),
            columns: RefCell::default(),
            pages: RefCell::default(),
            words: RefCell::default(),
            firsts: RefCell::default(),
            docs: RefCell::default(),
            extra: RefCell::new(Vec::new()),
            vector,
            expanded: Cell::new(None),
        }
    }

    fn fields(&self) -> Fields {
        self.finder.fields
    }

    fn err(&self, e: tantivy::TantivyError) -> IndexError {
        store_error(&self.finder.dir, e)
    }

    /// Every segment's key columns, opened once per searcher generation (opening them was
    /// a few percent of a query) and shared by the queries that read it.
    fn key_columns(&self) -> Result<Arc<Vec<KeyColumns>>> {
        if let Some(columns) = self.columns.borrow().as_ref() {
            return Ok(Arc::clone(columns));
        }
        let generation = self.searcher.generation().generation_id();
        let columns = self.finder.columns.get(generation, || {
            let mut all = Vec::new();
            for segment in self.searcher.segment_readers() {
                let fast = segment.fast_fields();
                let column = |name: &str| fast.u64(name).map_err(|e| self.err(e));
                all.push(KeyColumns {
                    fragment_key: column("fragment_key")?,
                    source_key: column("source_key")?,
                    ordinal: column("ordinal")?,
                    entity: self.fields().entity.and_then(|_| fast.u64("entity").ok()),
                });
            }
            Ok(all)
        })?;
        *self.columns.borrow_mut() = Some(Arc::clone(&columns));
        Ok(columns)
    }

    /// Reads keys of a fragment document and remembers them for later stages.
    fn remember(&self, columns: &[KeyColumns], address: DocAddress) -> Result<FragmentKey> {
        let (key, seen) = self.read_keys(columns, address)?;
        self.note(key, seen);
        Ok(key)
    }

    /// The fragment key and the other keys of the document at `address`.
    fn read_keys(
        &self,
        columns: &[KeyColumns],
        address: DocAddress,
    ) -> Result<(FragmentKey, Seen)> {
        let c = columns
            .get(address.segment_ord as usize)
            .ok_or_else(|| IndexError::Corrupt {
                path: self.finder.dir.clone(),
                reason: format!("no segment {}", address.segment_ord),
            })?;
        let read = |column: &tantivy::columnar::Column<u64>, name: &str| -> Result<u64> {
            column
                .first(address.doc_id)
                .ok_or_else(|| IndexError::Corrupt {
                    path: self.finder.dir.clone(),
                    reason: format!("fragment without `{name}`"),
                })
        };
        let key = FragmentKey(read(&c.fragment_key, "fragment_key")?);
        let entity = c.entity.as_ref().and_then(|col| col.first(address.doc_id)) == Some(1);
        let seen = Seen {
            address,
            source: SourceKey(read(&c.source_key, "source_key")?),
            ordinal: read(&c.ordinal, "ordinal")? as u32,
            entity,
        };
        Ok((key, seen))
    }

    /// Remembers a fragment this query touched, for later stages.
    fn note(&self, key: FragmentKey, seen: Seen) {
        if seen.ordinal == 0 {
            self.firsts.borrow_mut().insert(seen.source, seen.address);
        }
        self.seen.borrow_mut().insert(key, seen);
    }

    /// Live documents holding `term`, across segments.
    fn docs_with(&self, term: &Term) -> Result<Vec<DocAddress>> {
        let mut out = Vec::new();
        for (ord, segment) in self.searcher.segment_readers().iter().enumerate() {
            let inverted = segment
                .inverted_index(term.field())
                .map_err(|e| self.err(e))?;
            let postings = inverted
                .read_postings(term, IndexRecordOption::Basic)
                .map_err(|e| self.err(e.into()))?;
            let Some(mut postings) = postings else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if !segment.is_deleted(doc) {
                    out.push(DocAddress::new(ord as u32, doc));
                }
                doc = postings.advance();
            }
        }
        Ok(out)
    }

    fn lookup(&self, fragment: FragmentKey) -> Result<Option<Seen>> {
        if let Some(s) = self.seen.borrow().get(&fragment) {
            return Ok(Some(*s));
        }
        let found = self.addresses()?.get(&fragment.0).copied();
        if let Some(seen) = found {
            self.note(fragment, seen);
        }
        Ok(found)
    }

    /// Every live fragment's document and keys by fragment key, for this query's searcher:
    /// built once per searcher generation from the key columns (vector hits and graph nodes
    /// name fragments by key; a term lookup each cost more than the rest of their rollup, and
    /// reading the key columns for each was about a third of a 1M rollup: one map entry is
    /// one cache miss).
    fn addresses(&self) -> Result<Addresses> {
        if let Some(map) = self.addresses.borrow().as_ref() {
            return Ok(Arc::clone(map));
        }
        let generation = self.searcher.generation().generation_id();
        let map = self.finder.addresses.get(generation, || {
            let columns = self.key_columns()?;
            let mut map = FastMap::with_capacity_and_hasher(
                self.searcher.num_docs() as usize,
                Default::default(),
            );
            for (ord, segment) in self.searcher.segment_readers().iter().enumerate() {
                for doc in segment.doc_ids_alive() {
                    // A document without its keys cannot be named by key: left out, as the
                    // key column alone used to leave it.
                    if let Ok((key, seen)) =
                        self.read_keys(&columns, DocAddress::new(ord as u32, doc))
                    {
                        map.insert(key.0, seen);
                    }
                }
            }
            Ok(map)
        })?;
        *self.addresses.borrow_mut() = Some(Arc::clone(&map));
        Ok(map)
    }

    /// The whole words' trigrams of this snapshot (`field`), built by the first query of a
    /// searcher generation that expands a word and shared by the rest.
    fn term_grams(&self, field: Field) -> Result<Arc<crate::expand::TermGrams>> {
        let generation = self.searcher.generation().generation_id();
        let words = self.segment_postings()?;
        self.finder.grams.get(generation, || {
            crate::expand::TermGrams::build(&self.searcher, &words, field).map_err(|e| self.err(e))
        })
    }

    /// Opens this snapshot's postings files; false when a segment that should have one has
    /// none (see [`Finder::query`]).
    fn postings_complete(&self) -> Result<bool> {
        let words = self.segment_postings()?;
        Ok(words.iter().all(Option::is_some))
    }

    /// Every segment's postings file of this snapshot, opened by its first query.
    fn segment_postings(&self) -> Result<Arc<Vec<Option<crate::postings::PostingsFile>>>> {
        let generation = self.searcher.generation().generation_id();
        self.finder.postings.get(generation, || {
            crate::lexical::segment_postings(&self.searcher).map_err(|e| self.err(e))
        })
    }

    /// The trigram channel's terms for `query`: each expanded word's dictionary words in the
    /// whole-word field, weighted; what it did is kept for the channel's report. Empty when
    /// the channel does not run (the reason is what [`Self::trigram_status`] reports).
    fn expansions(&self, query: &str, settings: &Settings) -> Result<Vec<(Term, f32)>> {
        let words = crate::expand::expansion_words(query, settings.lexical.trigram);
        let field = match (
            self.fields().whole_words,
            self.finder.info.settings.trigrams,
        ) {
            (Some(field), true) if !words.is_empty() => field,
            _ => return Ok(Vec::new()),
        };
        let grams = self.term_grams(field)?;
        let mut out: Vec<(Term, f32)> = Vec::new();
        let mut at: FastMap<&[u8], usize> = FastMap::default();
        for (word, count) in &words {
            for term in grams.expand(word, settings.lexical.trigram_expansions) {
                let w = crate::expand::expansion_weight(word, term, *count, &settings.lexical);
                match at.get(term) {
                    Some(&i) => out[i].1 += w,
                    None => {
                        at.insert(term, out.len());
                        // Whole words come from a text field: valid UTF-8.
                        let text = String::from_utf8_lossy(term);
                        out.push((Term::from_field_text(field, &text), w));
                    }
                }
            }
        }
        self.expanded.set(Some((words.len(), out.len())));
        Ok(out)
    }

    /// What the trigram channel reports for `query` (its expansions joined the lexical list).
    fn trigram_status(&self, query: &str, settings: &Settings) -> ChannelOutcome {
        let unavailable = if !self.finder.info.settings.trigrams {
            Some(crate::expand::NOT_INDEXED)
        } else if self.fields().whole_words.is_none() {
            Some(
                "the index was made before whole words were indexed; re-create it to expand \
                 partial words and identifiers",
            )
        } else {
            None
        };
        crate::expand::channel_outcome(query, &settings.lexical, unavailable, self.expanded.get())
    }

    /// A fragment document's body and record, read once per query (a page's hint and its
    /// source's view often read the same document).
    fn stored(&self, address: DocAddress) -> Result<Rc<Stored>> {
        if let Some(hit) = self.docs.borrow().get(&address) {
            return Ok(Rc::clone(hit));
        }
        let read = Rc::new(self.read_stored(address)?);
        self.docs.borrow_mut().insert(address, Rc::clone(&read));
        Ok(read)
    }

    /// Every segment's page file (see [`Finder::page_files`]); `None` for a segment without
    /// a readable one.
    fn page_files(&self) -> Result<Arc<Vec<Option<PageFile>>>> {
        if let Some(pages) = self.pages.borrow().as_ref() {
            return Ok(Arc::clone(pages));
        }
        let pages = self.finder.page_files(&self.searcher)?;
        *self.pages.borrow_mut() = Some(Arc::clone(&pages));
        Ok(pages)
    }

    /// The page record at `address`: from its segment's page file, or from the document
    /// store where the file cannot give it.
    fn read_stored(&self, address: DocAddress) -> Result<Stored> {
        let pages = self.page_files()?;
        let file = pages
            .get(address.segment_ord as usize)
            .and_then(Option::as_ref);
        if let Some(stored) = file.and_then(|f| f.read(address.doc_id)) {
            return Ok(stored);
        }
        let doc = crate::stored::read_head(&self.searcher, self.fields(), address)
            .map_err(|e| self.err(e))?;
        let record = serde_json::from_str(&doc.meta).map_err(|e| IndexError::Corrupt {
            path: self.finder.dir.clone(),
            reason: format!("fragment record: {e}"),
        })?;
        Ok((Body::Store(doc.body), record))
    }

    /// The lexical list: BM25 over the stemmed words, plus the trigram channel's expansions.
    fn bm25(&self, query: &str, settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let mut analyzer = self
            .finder
            .index
            .tokenizers()
            .get(WORDS)
            .expect("analyzers are registered at open");
        let field = self.fields().text;
        // Sources detected in another language hold its stems: the query's words in each.
        let mut passes = vec![terms(&mut analyzer, query)];
        for language in &self.finder.info.languages {
            let words = self
                .finder
                .index
                .tokenizers()
                .get(&language_words(language));
            if let Some(mut analyzer) = words {
                passes.push(terms(&mut analyzer, query));
            }
        }
        let mut list: Vec<(Term, f32)> = query_term_weights(&passes, settings.lexical.k3)
            .into_iter()
            .map(|(t, weight)| (Term::from_field_text(field, &t), weight))
            .collect();
        list.extend(self.expansions(query, settings)?);
        if list.is_empty() {
            return Ok(ChannelOutcome::Skipped(
                "the query has no searchable terms".into(),
            ));
        }
        let params = Bm25Params {
            k1: settings.lexical.k1,
            b: settings.lexical.b,
        };
        let words = self.segment_postings()?;
        let top =
            top_k_terms(&self.searcher, &words, &list, params, depth).map_err(|e| self.err(e))?;
        let mut hits = Vec::with_capacity(top.len());
        let columns = self.key_columns()?;
        // Room for every hit at once, rather than growing the maps a rehash at a time.
        self.seen.borrow_mut().reserve(top.len());
        self.firsts.borrow_mut().reserve(top.len());
        for (address, score) in top {
            hits.push(finder_core::ScoredFragment {
                fragment: self.remember(&columns, address)?,
                score,
            });
        }
        // Equal scores go by fragment key rather than by where tantivy stored the documents,
        // so a merge of segments never reorders a list (and PostgreSQL orders ties alike).
        // The list comes best first: only each run of equal scores is put in that order.
        for ties in hits.chunk_by_mut(|a, b| a.score.total_cmp(&b.score).is_eq()) {
            if ties.len() > 1 {
                ties.sort_unstable_by_key(|h| h.fragment);
            }
        }
        Ok(ChannelOutcome::Ran(finder_core::RankedList::new(
            Channel::Lexical,
            hits,
        )))
    }
}

impl QueryRun<'_> {
    fn vector(&self, request: &Query, settings: &Settings, depth: usize) -> Result<ChannelOutcome> {
        let degraded = |why: String| Ok(ChannelOutcome::Degraded(why));
        if !settings.vector.enabled {
            return Ok(ChannelOutcome::Skipped("vector.enabled = false".into()));
        }
        let query = request.text.as_str();
        if let (Some(id), None, Ok(Some(index))) =
            (&request.like, &self.vector, &self.finder.vectors)
        {
            // Recommend: the target's own vectors (each fragment's first window), averaged,
            // are the query.
            let mut sum = vec![0f32; index.dim()];
            for key in self.like_fragments(id)? {
                if let Some(v) = index.vector(key.0) {
                    sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
                }
            }
            if sum.iter().any(|&x| x != 0.0) {
                let v = finder_ann::distance::unit(sum);
                return Ok(self.nearest(index, &v, settings, depth));
            }
            return Ok(ChannelOutcome::Skipped(
                "the target source has no vectors".into(),
            ));
        }
        if let (Some(given), Ok(Some(index))) = (&self.vector, &self.finder.vectors) {
            if given.len() != index.dim() {
                return degraded(format!(
                    "the query vector has {} numbers, the index's vectors {}",
                    given.len(),
                    index.dim()
                ));
            }
            return Ok(self.nearest(index, given, settings, depth));
        }
        let embedder = match &self.finder.semantic {
            Semantic::Off => return Ok(ChannelOutcome::Skipped("embed.backend = \"none\"".into())),
            Semantic::Detached => {
                return degraded("no embedding model attached to this reader".into())
            }
            Semantic::Unavailable(reason) => return degraded(reason.clone()),
            Semantic::Ready(e) => Arc::clone(e),
        };
        let index = match &self.finder.vectors {
            Ok(Some(index)) => index,
            Ok(None) => {
                return degraded(
                    "no vectors built yet; run `finder index` with the model installed".into(),
                )
            }
            Err(reason) => return degraded(format!("vector index unreadable: {reason}")),
        };
        if index.state.model_id != embedder.model_id() {
            return degraded(format!(
                "vectors were built with `{}` but the configured model is `{}`; run `finder index` to rebuild them",
                index.state.model_id,
                embedder.model_id()
            ));
        }
        if query.trim().is_empty() {
            return Ok(ChannelOutcome::Skipped("the query is empty".into()));
        }
        if embedder.english_only() {
            if let Some(script) = finder_core::non_latin_script(query) {
                return Ok(ChannelOutcome::Skipped(format!(
                    "the query is mostly {script} and `{}` knows English only; for other languages set embed.backend = \"http\" with a multilingual model (README, \"Languages and formats\")",
                    embedder.model_id()
                )));
            }
        }
        let started = Instant::now();
        let timeout = Duration::from_millis(settings.vector.query_embed_timeout_ms);
        let embedded = finder_core::embed_with_timeout(embedder, query.to_string(), timeout);
        self.extra.borrow_mut().push(StageTime {
            stage: "vector.embed".into(),
            ms: started.elapsed().as_secs_f64() * 1e3,
        });
        let vector = match embedded {
            Ok(v) if v.len() == index.dim() => v,
            Ok(v) => {
                return degraded(format!(
                    "the model returned {} dimensions, the index has {}",
                    v.len(),
                    index.dim()
                ))
            }
            Err(reason) => return degraded(reason),
        };
        Ok(self.nearest(index, &vector, settings, depth))
    }

    fn nearest(
        &self,
        index: &VectorIndex,
        vector: &[f32],
        settings: &Settings,
        depth: usize,
    ) -> ChannelOutcome {
        let v = &settings.vector;
        let hits = index
            .search(
                vector,
                depth,
                v.beam(index.len()),
                SearchLimits {
                    max_distance: v.max_vector_distance,
                    window_weight: v.window_weight,
                },
            )
            .into_iter()
            .map(|(key, sim)| finder_core::ScoredFragment {
                fragment: FragmentKey(key),
                score: sim,
            })
            .collect();
        ChannelOutcome::Ran(finder_core::RankedList::new(Channel::Vector, hits))
    }
}

impl Retriever for QueryRun<'_> {
    type Error = IndexError;

    fn channels(&self) -> Vec<Channel> {
        vec![
            Channel::Lexical,
            Channel::Trigram,
            Channel::Vector,
            Channel::Entities,
        ]
    }

    fn like_fragments(&self, id: &str) -> Result<Vec<FragmentKey>> {
        let term = Term::from_field_text(self.fields().source_id, id);
        let docs = self.docs_with(&term)?;
        if docs.is_empty() {
            return Err(IndexError::UnknownSource(id.to_string()));
        }
        let mut keys = Vec::with_capacity(docs.len());
        let columns = self.key_columns()?;
        for address in docs {
            keys.push(self.remember(&columns, address)?);
        }
        keys.sort_by_key(|k| self.seen.borrow().get(k).map_or(0, |s| s.ordinal));
        Ok(keys)
    }

    fn graph(&self) -> finder_core::GraphState<'_> {
        match &self.finder.graph {
            Ok(Some(g)) => finder_core::GraphState::Ready(g),
            Ok(None) => finder_core::GraphState::Unavailable(
                "no graph built yet; run `finder index`".into(),
            ),
            Err(e) => finder_core::GraphState::Unavailable(format!("graph unreadable: {e}")),
        }
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
                (Ok(Some(g)), true) => {
                    ChannelOutcome::Ran(finder_core::entity_list(g, query, &settings.graph, depth))
                }
                (Ok(None), true) => ChannelOutcome::Skipped("no graph built yet".into()),
                (Err(e), true) => ChannelOutcome::Degraded(format!("graph unreadable: {e}")),
            }),
            Channel::Neighbours | Channel::Communities | Channel::Events | Channel::Like => Ok(
                ChannelOutcome::Skipped("derived from the fused seeds by the pipeline".into()),
            ),
        }
    }

    fn extra_stages(&self) -> Vec<StageTime> {
        self.extra.take()
    }

    fn fragment_meta(&self, fragments: &[FragmentKey]) -> Result<Vec<Option<FragmentMeta>>> {
        fragments
            .iter()
            .map(|&f| {
                Ok(self.lookup(f)?.map(|s| FragmentMeta {
                    source: (!s.entity).then_some(s.source),
                    ordinal: s.ordinal,
                }))
            })
            .collect()
    }

    fn source(&self, source: SourceKey) -> Result<Option<SourceView>> {
        let view = |address| -> Result<Option<SourceView>> {
            Ok(self.stored(address)?.1.source.as_ref().map(|r| SourceView {
                id: r.id.clone(),
                envelope: r.envelope.clone(),
                summary: r.summary.clone(),
            }))
        };
        // The record is on the source's first fragment: where a list already found that
        // fragment, no term lookup.
        let first = self.firsts.borrow().get(&source).copied();
        if let Some(found) = first.map(view).transpose()?.flatten() {
            return Ok(Some(found));
        }
        let term = Term::from_field_u64(self.fields().source_key, source.0);
        for address in self.docs_with(&term)? {
            if let Some(found) = view(address)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    fn fragment_vector(&self, fragment: FragmentKey) -> Option<Vec<f32>> {
        match &self.finder.vectors {
            Ok(Some(index)) => index.vector(fragment.0).map(<[f32]>::to_vec),
            _ => None,
        }
    }

    fn fragment_text(&self, fragment: FragmentKey) -> Result<Option<String>> {
        match self.lookup(fragment)? {
            Some(seen) => Ok(Some(self.stored(seen.address)?.0.to_string())),
            None => Ok(None),
        }
    }

    fn source_key(&self, id: &str) -> Option<SourceKey> {
        Some(crate::keys::source_key(id))
    }

    fn may_have_dates(&self) -> bool {
        self.finder.info.dated != Some(0)
    }

    fn hint(
        &self,
        fragment: FragmentKey,
        query: &str,
        max_chars: usize,
    ) -> Result<Option<(String, Extent)>> {
        let Some(seen) = self.lookup(fragment)? else {
            return Ok(None);
        };
        let stored = self.stored(seen.address)?;
        let mut words = self.words.borrow_mut();
        if words.as_ref().is_none_or(|w| w.query() != query) {
            *words = Some(crate::preview::QueryWords::new(query));
        }
        let words = words.as_ref().expect("the query's words were set above");
        Ok(Some((words.preview(&stored.0, max_chars), stored.1.extent)))
    }
}

impl Finder {
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

    /// Like [`Finder::search`], with the query's vector given rather than embedded here (the
    /// `precomputed` backend, or a caller that embedded the query itself). The vector must
    /// come from the model the index's vectors were built with.
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

    /// Runs a full request (text and/or vector, page, filters, scope, user) through the
    /// pipeline.
    pub fn query(&self, request: &Query, settings: &Settings) -> Result<SearchResponse> {
        let vector = request
            .vector
            .as_ref()
            .map(|v| finder_ann::distance::unit(v.clone()));
        let mut attempts = 0;
        loop {
            let run = QueryRun::new(self, vector.clone());
            // A snapshot's postings files are opened by its first query, after tantivy opened
            // the segments' own files: a writer that merged a segment away meanwhile may have
            // removed its file. That snapshot is past; the query runs on the next one.
            if run.postings_complete()? {
                return finder_core::search_with(&run, request, settings, &self.extensions);
            }
            attempts += 1;
            if attempts == STALE_SNAPSHOT_RETRIES {
                return Err(IndexError::Corrupt {
                    path: self.dir.join(LEXICAL_DIR),
                    reason: format!(
                        "a segment's {} file is missing in {attempts} snapshots in a row",
                        crate::files::POSTINGS_EXTENSION
                    ),
                });
            }
            self.reload()?;
        }
    }

    /// A source by id, as hits show it: `None` when the index does not hold it.
    pub fn source(&self, id: &str) -> Result<Option<SourceView>> {
        let run = QueryRun::new(self, None);
        Retriever::source(&run, crate::keys::source_key(id))
    }

    /// The request behind "sources related to `id`": the source's fragments seed the graph
    /// boost and its vectors the vector list (`Query::like`), its title and summary (at most
    /// 600 characters) the lexical lists; the source itself never comes back.
    pub fn like_query(&self, id: &str, limit: usize) -> Result<Query> {
        let view = self
            .source(id)?
            .ok_or_else(|| IndexError::UnknownSource(id.to_string()))?;
        Ok(like_request(id, &view, limit))
    }

    /// Every segment of `searcher` with its page file where it has a readable one, by
    /// segment ordinal: opened once per searcher generation and shared by its queries.
    pub(super) fn page_files(&self, searcher: &Searcher) -> Result<Arc<Vec<Option<PageFile>>>> {
        let generation = searcher.generation().generation_id();
        self.pages.get(generation, || {
            Ok(searcher
                .segment_readers()
                .iter()
                .map(|segment| PageFile::open(&self.directory, segment))
                .collect())
        })
    }
}
