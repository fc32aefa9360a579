//! Building the relation graph from a committed snapshot: every fragment is a node, and so is
//! every entity (a link target with no note, a tag, a typed hub, a title with `link_titles`).
//! Edges: `next` between consecutive fragments, `links_to` for wiki and Markdown links,
//! `tagged` for tags, `member_of` for typed hubs, `is` from a title entity to its paragraph,
//! and `mentions` from a fragment to what it names.
//!
//! The graph is made again after each indexing run that changed something (titles anywhere
//! can change what any fragment mentions), reading only the texts of changed sources when
//! no new name appeared (`parts.rs`), and published atomically: `graph.json.tmp` is written
//! beside `graph.json` and renamed over it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

use finder_core::{
    FastMap, FastSet, GraphSettings, IndexSettings, LinkOrder, RelationKind, Settings,
};
use serde::{Deserialize, Serialize};

use super::parts::{parts_key, FragmentParts, Parts, SourceParts, PARTS_FILE};
use super::{links, tags, DfCounts, Hit, LinkResolver, LinkStyle, MentionConfig, MentionMatcher};
use crate::error::{IndexError, Result};
use crate::pages::Body;
use crate::record::{FragmentRecord, SourceRecord};
use crate::schema::Fields;
use crate::stored::{commit_info, map_heads, open_or_create};

/// Sub-folder of the index folder holding the graph.
pub(crate) const GRAPH_DIR: &str = "graph";
pub(crate) const GRAPH_FILE: &str = "graph.json";
/// The layout of `graph.json`; a reader refuses a file of a later one.
const FORMAT: u32 = 1;

/// Extras keys whose value makes a typed hub (a community).
const HUB_KEYS: &[&str] = &["type", "label", "topic", "category", "kind"];

/// What a non-fragment node stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// A link target with no note of its own.
    Missing,
    Tag,
    /// A typed hub (`type`, `label`, `topic`… in extras).
    Hub,
    /// A source's title (`link_titles`).
    Title,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EntityNode {
    pub name: String,
    pub kind: EntityKind,
}

/// The stored graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GraphFile {
    pub format: u32,
    /// Commit the graph was built from (`committed_at`).
    pub built_from: u64,
    /// Fragment nodes `0..fragments.len()`, by fragment key.
    pub fragments: Vec<u64>,
    /// Entity nodes, numbered after the fragments.
    pub entities: Vec<EntityNode>,
    /// `(from, to, kind)` over node ids.
    pub edges: Vec<(u32, u32, u8)>,
    /// What a query can name: a node and its names (title, aliases), filters applied.
    pub names: Vec<(u32, Vec<String>)>,
    /// Aliases left out of mention matching, with the reason.
    pub dropped_aliases: Vec<String>,
    /// Each source's first fragment node and title, for explain.
    pub titles: Vec<(u32, String)>,
    /// First fragment nodes of entity records (`"kind": "entity"`).
    #[serde(default)]
    pub entity_sources: Vec<u32>,
    /// Labels (`label` or `type` extras) of sources and entities, by first fragment node.
    #[serde(default)]
    pub labels: Vec<(u32, String)>,
    /// The settings the mention filters used, so queries name things the same way.
    pub min_alias_chars: usize,
    /// Links that resolved to another source: occurrences, and distinct source pairs.
    #[serde(default)]
    pub link_occurrences: usize,
    #[serde(default)]
    pub source_links: usize,
    /// Fragments whose texts this build read (not stored).
    #[serde(skip)]
    pub texts_read: usize,
}

impl GraphFile {
    /// Refuses a file a later Finder wrote, which this one would misread.
    pub(crate) fn check_format(&self) -> std::result::Result<(), String> {
        if self.format > FORMAT {
            return Err(format!(
                "graph format {} is a later Finder's (this one reads {FORMAT} and older); \
                 `finder index` builds it again in this one's",
                self.format
            ));
        }
        Ok(())
    }
}

/// What a graph build did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GraphReport {
    pub fragments: usize,
    pub entities: usize,
    pub edges: usize,
    /// Edges by kind.
    pub kinds: BTreeMap<String, usize>,
    pub dropped_aliases: usize,
    /// Links that resolved to another source, counted where they occur.
    pub link_occurrences: usize,
    /// Distinct (source, linked source) pairs.
    pub source_links: usize,
    /// Fragments whose texts were read: those of changed sources, or every one when the
    /// build starts over or a new name must be looked for everywhere (`graph/parts.json`).
    pub texts_read: usize,
    /// Sources whose records the build read from the store: none when the run (or a
    /// follower) held them.
    pub records_read: usize,
    pub seconds: f64,
}

/// One fragment of a [`GraphSource`]: its key and place in the source (its text is read from
/// the store when the build needs it).
#[derive(Debug, Clone)]
pub struct GraphFragment {
    pub key: u64,
    pub ordinal: u32,
}

/// What the graph build reads of a source, from whichever store holds it (the embedded index
/// or PostgreSQL), so both build the same graph from the same sources.
#[derive(Debug, Clone)]
pub struct GraphSource {
    id: String,
    /// The source's content hash: an unchanged one lets a build reuse what the last build
    /// found in its texts (`parts.rs`). Empty when unknown.
    hash: String,
    label: Option<String>,
    entity: bool,
    aliases: Vec<String>,
    relations: Vec<(String, String)>,
    title: String,
    tags: Vec<String>,
    hubs: Vec<String>,
    fragments: Vec<GraphFragment>,
}

impl GraphSource {
    /// A source as stored: its label and typed hubs come from the envelope's extras.
    pub fn new(
        id: String,
        envelope: &finder_core::Envelope,
        entity: bool,
        aliases: Vec<String>,
        relations: Vec<(String, String)>,
    ) -> GraphSource {
        let extras = &envelope.extras;
        GraphSource {
            id,
            hash: String::new(),
            label: extras
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("label") || k.eq_ignore_ascii_case("type"))
                .map(|(_, v)| v.clone()),
            entity,
            aliases,
            relations,
            title: envelope.title.clone(),
            tags: envelope.tags.clone(),
            hubs: extras
                .iter()
                .filter(|(k, v)| {
                    HUB_KEYS.contains(&k.to_lowercase().as_str()) && !v.trim().is_empty()
                })
                .map(|(k, v)| format!("{}:{}", k.to_lowercase(), v.trim().to_lowercase()))
                .collect(),
            fragments: Vec::new(),
        }
    }

    /// Adds a fragment; fragments may come in any order.
    pub fn push_fragment(&mut self, fragment: GraphFragment) {
        self.fragments.push(fragment);
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sets the source's content hash: with it, a build given [`GraphParts`] reads the
    /// source's texts only when it changed.
    pub fn set_hash(&mut self, hash: String) {
        self.hash = hash;
    }
}

/// Fragment texts read by key from a store outside this crate (PostgreSQL's shards), for
/// [`GraphData::build`].
pub trait FragmentTexts {
    /// Calls `f` with the key and text of every fragment in `keys` (every fragment when
    /// `None`), in any order; `Err` says why the store could not.
    fn for_each(
        &self,
        keys: Option<&[u64]>,
        f: &mut dyn FnMut(u64, String),
    ) -> std::result::Result<(), String>;
}

/// What a graph build found in each source's texts, for the next build to reuse (the
/// embedded index keeps it as `graph/parts.json`): opaque, stored as bytes.
pub struct GraphParts(Parts);

impl GraphParts {
    /// The parts stored as `bytes`, if they were made under the same settings; empty parts
    /// otherwise (the next build reads every text).
    pub fn from_bytes(bytes: Option<&[u8]>, g: &GraphSettings, index: &IndexSettings) -> Self {
        let key = parts_key(g, index);
        let stored = bytes.and_then(|b| Parts::from_slice(b, &key));
        GraphParts(stored.unwrap_or_else(|| Parts::empty(key)))
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).expect("the graph parts serialise")
    }
}

/// A built graph, ready to store (as JSON) or to load for queries.
pub struct GraphData(pub(crate) GraphFile);

impl GraphData {
    /// Builds the graph of `sources` (any order, given without their texts) as the embedded
    /// index would from the same sources; `built_from` is recorded as the commit it
    /// describes. The build asks `texts` for the texts of the sources whose hash changed
    /// since `parts` were made, by key (for every text, when a new name needs every text
    /// scanned), and `parts` become what this build found.
    pub fn build(
        mut sources: Vec<GraphSource>,
        texts: &dyn FragmentTexts,
        g: &GraphSettings,
        built_from: u64,
        parts: &mut GraphParts,
    ) -> Result<GraphData> {
        sources.sort_by(|a, b| a.id.cmp(&b.id));
        for s in &mut sources {
            s.fragments.sort_by_key(|f| f.ordinal);
        }
        let keys: Vec<u64> = sources
            .iter()
            .flat_map(|s| s.fragments.iter().map(|f| f.key))
            .collect();
        let by_key = ByKey {
            texts,
            nodes: keys.iter().copied().zip(0u32..).collect(),
            keys,
        };
        let mut aside = Aside::default();
        let file = extract(
            sources,
            &by_key,
            g,
            built_from,
            &mut aside,
            Some(&mut parts.0),
        )?;
        drop(aside);
        Ok(GraphData(file))
    }

    /// Fragments, entities, edges by kind, links.
    pub fn report(&self) -> GraphReport {
        report_of(&self.0)
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).expect("the graph serialises")
    }

    /// Reads what [`GraphData::to_json`] wrote.
    pub fn from_json(bytes: &[u8]) -> std::result::Result<GraphData, String> {
        let file: GraphFile =
            serde_json::from_slice(bytes).map_err(|e| format!("unreadable graph: {e}"))?;
        file.check_format()?;
        Ok(GraphData(file))
    }

    /// The graph as queries use it.
    pub fn into_access(self) -> LoadedGraph {
        LoadedGraph(super::GraphIndex::from_file(self.0))
    }
}

/// A graph loaded for queries (the boost, the entity and neighbour channels).
pub struct LoadedGraph(super::GraphIndex);

impl std::ops::Deref for LoadedGraph {
    type Target = dyn finder_core::GraphAccess;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

fn report_of(file: &GraphFile) -> GraphReport {
    let mut report = GraphReport {
        fragments: file.fragments.len(),
        entities: file.entities.len(),
        edges: file.edges.len(),
        dropped_aliases: file.dropped_aliases.len(),
        link_occurrences: file.link_occurrences,
        source_links: file.source_links,
        texts_read: file.texts_read,
        ..GraphReport::default()
    };
    for &(_, _, kind) in &file.edges {
        *report
            .kinds
            .entry(RelationKind::from_u8(kind).as_str().to_string())
            .or_default() += 1;
    }
    report
}

const STATE_FILE: &str = "state.json";

/// What shapes the built graph: a change rebuilds it even when no source changed. The
/// commit generation it was built from is part of it, so a graph left behind by a run killed
/// after its commit is rebuilt by the next run.
pub fn build_key(g: &GraphSettings, generation: u64) -> String {
    format!(
        "{FORMAT}:{:?}:{}:{}:{}:{}:g{generation}",
        g.link_order, g.mentions, g.link_titles, g.min_alias_chars, g.max_alias_df
    )
}

/// Whether the published graph was built with these settings from commit `generation`.
pub(crate) fn graph_is_current(dir: &Path, g: &GraphSettings, generation: u64) -> bool {
    let gdir = dir.join(GRAPH_DIR);
    gdir.join(GRAPH_FILE).exists()
        && std::fs::read_to_string(gdir.join(STATE_FILE))
            .is_ok_and(|k| k == build_key(g, generation))
}

/// Whether the published graph was built from commit `generation` (in this graph format), and
/// if so, whether with other settings than `g`.
pub(crate) fn graph_freshness(dir: &Path, g: &GraphSettings, generation: u64) -> (bool, bool) {
    let gdir = dir.join(GRAPH_DIR);
    let key = std::fs::read_to_string(gdir.join(STATE_FILE)).unwrap_or_default();
    match gdir.join(GRAPH_FILE).exists() {
        true => key_freshness(&key, g, generation),
        false => (false, false),
    }
}

/// Whether a graph stored under `key` ([`build_key`]) was built from commit `generation` in
/// this graph format, and if so, whether with other settings than `g`.
pub fn key_freshness(key: &str, g: &GraphSettings, generation: u64) -> (bool, bool) {
    let built = key.starts_with(&format!("{FORMAT}:")) && key.ends_with(&format!(":g{generation}"));
    (built, built && key != build_key(g, generation))
}

/// Builds the graph of the index in `dir` from its last commit and publishes it.
pub fn build_graph(dir: &Path, settings: &Settings) -> Result<GraphReport> {
    build_graph_from(dir, settings, None, None)
}

/// [`build_graph`], given the source records of the last commit when the caller holds them
/// (`None`: they are read from the store), and the parts a follower kept (`Some`: they
/// stand for `graph/parts.json`, and are replaced by what this build found).
pub(crate) fn build_graph_from(
    dir: &Path,
    settings: &Settings,
    records: Option<&HashMap<String, SourceRecord>>,
    kept_parts: Option<&mut Option<Parts>>,
) -> Result<GraphReport> {
    let started = Instant::now();
    let g = &settings.graph;
    let gdir = dir.join(GRAPH_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IndexError::Io { path, source }
    };
    if !g.build {
        if gdir.exists() {
            std::fs::remove_dir_all(&gdir).map_err(io(&gdir))?;
        }
        if let Some(kept) = kept_parts {
            *kept = None;
        }
        return Ok(GraphReport::default());
    }
    let (index, fields) = open_or_create(dir, settings)?;
    let info = commit_info(&index, dir)?;
    let built_from = info.as_ref().map_or(0, |i| i.committed_at);
    let generation = info.as_ref().map_or(0, |i| i.generation);
    drop(index);
    let (sources, records_read) = match records {
        Some(records) => (sources_of(records.values()), 0),
        None => {
            let sources = read_sources(dir, fields)?;
            let read = sources.len();
            (sources, read)
        }
    };
    let texts = Stored {
        dir,
        fields,
        nodes: sources
            .iter()
            .flat_map(|s| s.fragments.iter().map(|f| f.key))
            .zip(0u32..)
            .collect(),
    };
    let mut aside = Aside::default();
    // What the last build found in the texts of sources that have not changed since.
    let key = parts_key(g, &settings.index);
    let mut kept_parts = kept_parts;
    let held = kept_parts.as_deref_mut().and_then(Option::take);
    let mut parts = held
        .filter(|p| p.key == key)
        .or_else(|| Parts::load(&gdir, &key))
        .unwrap_or_else(|| Parts::empty(key));
    let file = extract(sources, &texts, g, built_from, &mut aside, Some(&mut parts))?;
    drop(texts);
    let mut report = report_of(&file);
    report.records_read = records_read;
    std::fs::create_dir_all(&gdir).map_err(io(&gdir))?;
    let path = gdir.join(GRAPH_FILE);
    let tmp = gdir.join("graph.json.tmp");
    {
        let f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        serde_json::to_writer(&mut w, &file).map_err(|e| IndexError::Io {
            path: tmp.clone(),
            source: e.into(),
        })?;
        let f = w.into_inner().map_err(|e| IndexError::Io {
            path: tmp.clone(),
            source: e.into_error(),
        })?;
        f.sync_all().map_err(io(&tmp))?;
    }
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    sync_dir(&gdir).map_err(io(&gdir))?;
    let state = gdir.join(STATE_FILE);
    write_synced(&state, build_key(g, generation).as_bytes()).map_err(io(&state))?;
    // The parts come after the graph is published: only a cache (the kept parts of each
    // source are checked against its hash), and a build that cannot keep them builds the
    // next graph from scratch.
    let parts_path = gdir.join(PARTS_FILE);
    let parts_tmp = gdir.join("parts.json.tmp");
    let kept = serde_json::to_vec(&parts)
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(&parts_tmp, json))
        .and_then(|()| std::fs::rename(&parts_tmp, &parts_path));
    if let Err(e) = kept {
        tracing::warn!(path = %parts_path.display(), "graph parts not kept: {e}");
        let _ = std::fs::remove_file(&parts_path);
    }
    match kept_parts {
        Some(kept) => *kept = Some(parts),
        None => aside.drop(parts),
    }
    drop(aside);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Writes `bytes` to `path` and flushes them to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    std::io::Write::write_all(&mut f, bytes)?;
    f.sync_all()
}

/// Makes a rename inside `dir` durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Every live source with its fragments (in ordinal order, without their texts: see
/// [`Stored`]), sorted by id.
fn read_sources(dir: &Path, fields: Fields) -> Result<Vec<GraphSource>> {
    // The store is read and each record decoded on every core; the sources are put together
    // here, in the store's order.
    let heads = map_heads(dir, fields, |doc| {
        let record: Option<FragmentRecord> = serde_json::from_str(&doc.meta).ok();
        let source = record.and_then(|r| r.source).map(|source| {
            let mut s = GraphSource::new(
                String::new(),
                &source.envelope,
                source.entity,
                source.aliases,
                source.relations,
            );
            s.hash = source.hash;
            s
        });
        let fragment = GraphFragment {
            key: doc.fragment_key,
            ordinal: doc.ordinal as u32,
        };
        (doc.source_id, fragment, source)
    })?;
    let fragments: usize = heads.iter().map(Vec::len).sum();
    // each source's place in `sources`: a map of the sources themselves would hold each
    // source's 200 bytes in twice as many slots
    let mut by_id: FastMap<String, usize> =
        FastMap::with_capacity_and_hasher(fragments, Default::default());
    let mut sources: Vec<GraphSource> = Vec::new();
    for (id, fragment, source) in heads.into_iter().flatten() {
        let at = *by_id.entry(id.clone()).or_insert_with(|| {
            sources.push(GraphSource::new(
                id,
                &Default::default(),
                false,
                Vec::new(),
                Vec::new(),
            ));
            sources.len() - 1
        });
        let entry = &mut sources[at];
        if let Some(mut source) = source {
            source.id = std::mem::take(&mut entry.id);
            source.fragments = std::mem::take(&mut entry.fragments);
            *entry = source;
        }
        // A source without text still gets a node: links can point at it.
        entry.fragments.push(fragment);
    }
    drop(by_id);
    sources.sort_by(|a, b| a.id.cmp(&b.id));
    for s in &mut sources {
        s.fragments.sort_by_key(|f| f.ordinal);
    }
    Ok(sources)
}

/// The sources of `records` as [`read_sources`] reads them from the store: each fragment's
/// key is the one its writer gave it ([`crate::fragment_key`]), and a source without
/// fragments (an empty note) has the one empty fragment its writer stores for it.
fn sources_of<'a>(records: impl Iterator<Item = &'a SourceRecord>) -> Vec<GraphSource> {
    let mut sources: Vec<GraphSource> = records
        .map(|r| {
            let mut s = GraphSource::new(
                r.id.clone(),
                &r.envelope,
                r.entity,
                r.aliases.clone(),
                r.relations.clone(),
            );
            s.hash = r.hash.clone();
            s.fragments = (0..r.fragments.max(1))
                .map(|ordinal| GraphFragment {
                    key: crate::fragment_key(&s.id, ordinal).0,
                    ordinal,
                })
                .collect();
            s
        })
        .collect();
    sources.sort_by(|a, b| a.id.cmp(&b.id));
    sources
}

/// Fragments per share of a pass over the texts.
const TEXT_SHARE: usize = 32 * 1024;

/// A share of fragment texts: each fragment's node and text.
type Share<'a> = [(u32, &'a str)];

/// The fragment texts of a graph build, read again from the store for each pass (links and
/// tags, mention counts, mentions): a million texts are a gigabyte not held. The embedded
/// index reads its page files ([`Stored`]); another store gives them by key ([`ByKey`]).
trait Texts {
    /// Calls `f` with every fragment's node and text (of the nodes `only` marks, when given),
    /// in shares of at most [`TEXT_SHARE`], in any order.
    fn shares(&self, only: Option<&[bool]>, f: &mut dyn FnMut(&Share<'_>)) -> Result<()>;
}

/// The texts read from the embedded index's page files (or its store, where a segment has
/// none: [`crate::pages::for_each_body`]), in its order, each fragment under its node.
struct Stored<'a> {
    dir: &'a Path,
    fields: Fields,
    nodes: FastMap<u64, u32>,
}

impl Texts for Stored<'_> {
    fn shares(&self, only: Option<&[bool]>, f: &mut dyn FnMut(&Share<'_>)) -> Result<()> {
        let mut owned: Vec<(u32, Body)> = Vec::with_capacity(TEXT_SHARE);
        let mut flush = |owned: &mut Vec<(u32, Body)>| {
            let share: Vec<(u32, &str)> = owned.iter().map(|(n, t)| (*n, &**t)).collect();
            f(&share);
            owned.clear();
        };
        crate::pages::for_each_body(self.dir, self.fields, &mut |key, body| {
            let wanted = |node: u32| only.is_none_or(|only| only[node as usize]);
            if let Some(&node) = self.nodes.get(&key).filter(|&&n| wanted(n)) {
                owned.push((node, body));
                if owned.len() == TEXT_SHARE {
                    flush(&mut owned);
                }
            }
            Ok(())
        })?;
        if !owned.is_empty() {
            flush(&mut owned);
        }
        Ok(())
    }
}

/// The texts a [`FragmentTexts`] gives, each fragment under its node.
struct ByKey<'a> {
    texts: &'a dyn FragmentTexts,
    /// Each node's fragment key, in node order.
    keys: Vec<u64>,
    nodes: FastMap<u64, u32>,
}

impl Texts for ByKey<'_> {
    fn shares(&self, only: Option<&[bool]>, f: &mut dyn FnMut(&Share<'_>)) -> Result<()> {
        let wanted: Option<Vec<u64>> = only.map(|only| {
            self.keys
                .iter()
                .zip(only)
                .filter_map(|(&key, &wanted)| wanted.then_some(key))
                .collect()
        });
        if wanted.as_ref().is_some_and(Vec::is_empty) {
            return Ok(());
        }
        let mut owned: Vec<(u32, String)> = Vec::with_capacity(TEXT_SHARE.min(1024));
        let mut flush = |owned: &mut Vec<(u32, String)>| {
            let share: Vec<(u32, &str)> = owned.iter().map(|(n, t)| (*n, t.as_str())).collect();
            f(&share);
            owned.clear();
        };
        self.texts
            .for_each(wanted.as_deref(), &mut |key, body| {
                let wanted = |node: u32| only.is_none_or(|only| only[node as usize]);
                if let Some(&node) = self.nodes.get(&key).filter(|&&n| wanted(n)) {
                    owned.push((node, body));
                    if owned.len() == TEXT_SHARE {
                        flush(&mut owned);
                    }
                }
            })
            .map_err(IndexError::GraphTexts)?;
        if !owned.is_empty() {
            flush(&mut owned);
        }
        Ok(())
    }
}

/// What a fragment's text holds for the graph besides mentions: its links' targets (as
/// written) and its tags' names, in text order.
#[derive(Debug, Default)]
struct Marks {
    links: Vec<String>,
    tags: Vec<String>,
}

/// Entities by their stable name, numbered after the fragments as they appear.
struct Entities {
    base: u32,
    by_id: FastMap<String, u32>,
    nodes: Vec<EntityNode>,
}

impl Entities {
    fn node(&mut self, id: String, name: &str, kind: EntityKind) -> u32 {
        if let Some(&n) = self.by_id.get(&id) {
            return n;
        }
        let n = self.base + self.nodes.len() as u32;
        self.nodes.push(EntityNode {
            name: name.to_string(),
            kind,
        });
        self.by_id.insert(id, n);
        n
    }
}

/// Values dropped on threads of their own, joined when this is dropped. Freeing a million
/// sources, or a matcher of a million aliases, takes most of a second; the build's
/// single-threaded steps after it (and the writing of the file) need not wait for it.
#[derive(Default)]
struct Aside(Vec<std::thread::JoinHandle<()>>);

impl Aside {
    /// Drops `value` on a new thread (on this one if none can be started).
    fn drop<T: Send + 'static>(&mut self, value: T) {
        let spawned = std::thread::Builder::new()
            .name("graph-drop".into())
            .spawn(move || drop(value));
        self.0.extend(spawned.ok());
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        for handle in self.0.drain(..) {
            // A panic while dropping has already been reported by the thread.
            let _ = handle.join();
        }
    }
}

/// Makes the graph of `sources`. With `parts` (`Some`, holding what the last build found or
/// empty parts), the texts of sources it holds unchanged are not read again, and it is
/// replaced by what this build found.
fn extract(
    sources: Vec<GraphSource>,
    texts: &dyn Texts,
    g: &GraphSettings,
    built_from: u64,
    aside: &mut Aside,
    mut parts: Option<&mut Parts>,
) -> Result<GraphFile> {
    let mut fragments = Vec::new();
    // First fragment node of each source, in `sources` order.
    let mut heads = Vec::with_capacity(sources.len());
    // Source index of each fragment node.
    let mut owner = Vec::new();
    for (si, s) in sources.iter().enumerate() {
        heads.push(fragments.len() as u32);
        for f in &s.fragments {
            fragments.push(f.key);
            owner.push(si);
        }
    }
    let mut entities = Entities {
        base: fragments.len() as u32,
        by_id: FastMap::default(),
        nodes: Vec::new(),
    };
    let mut edges: Vec<(u32, u32, u8)> = Vec::new();
    fn add(edges: &mut Vec<(u32, u32, u8)>, a: u32, b: u32, kind: RelationKind) {
        if a != b {
            edges.push((a, b, kind as u8));
        }
    }
    let style = match g.link_order {
        LinkOrder::TargetFirst => LinkStyle::TargetFirst,
        LinkOrder::LabelFirst => LinkStyle::LabelFirst,
    };
    // Links and tags of each fragment node, boxed: most fragments have none.
    let mut marks: Vec<Option<Box<Marks>>> = Vec::new();
    marks.resize_with(fragments.len(), || None);
    // The sources the kept parts hold unchanged: their marks and hits come from there, and
    // only the other fragments' texts are read (`changed`).
    let kept: Vec<Option<&SourceParts>> = sources
        .iter()
        .map(|s| {
            let keys = s.fragments.iter().map(|f| &f.key);
            parts
                .as_deref()
                .and_then(|p| p.unchanged(&s.id, &s.hash, keys))
        })
        .collect();
    let mut changed = vec![true; fragments.len()];
    // Fragments that had a text to scan: they count in the aliases' frequencies.
    let mut has_text = vec![false; fragments.len()];
    for (si, kept) in kept.iter().enumerate() {
        let Some(kept) = kept else { continue };
        for (fi, f) in kept.fragments.iter().enumerate() {
            let node = heads[si] as usize + fi;
            changed[node] = false;
            has_text[node] = f.text;
            if !f.links.is_empty() || !f.tags.is_empty() {
                marks[node] = Some(Box::new(Marks {
                    links: f.links.clone(),
                    tags: f.tags.clone(),
                }));
            }
        }
    }
    let incremental = parts.is_some() && changed.iter().any(|c| !c);
    let only = incremental.then_some(changed.as_slice());
    // Each share is scanned on every core, as the mention passes below are.
    let mut read = vec![false; fragments.len()];
    texts.shares(only, &mut |share| {
        for &(node, _) in share {
            has_text[node as usize] = true;
            read[node as usize] = true;
        }
        let found = super::mentions::on_every_core(share, |part| {
            part.iter()
                .filter_map(|&(node, body)| {
                    let m = Marks {
                        links: links(body, style)
                            .into_iter()
                            .map(|l| l.target)
                            .filter(|t| !t.trim().is_empty())
                            .collect(),
                        tags: tags(body).into_iter().map(|t| t.name).collect(),
                    };
                    (!m.links.is_empty() || !m.tags.is_empty()).then(|| (node, Box::new(m)))
                })
                .collect::<Vec<_>>()
        });
        for (node, m) in found.into_iter().flatten() {
            marks[node as usize] = Some(m);
        }
    })?;
    // Made when the first link needs it: a million sources' keys take seconds, and records
    // without links in their text (relations given as fields) never ask.
    let mut resolver: Option<LinkResolver> = None;
    let mut names: Vec<(u32, Vec<String>)> = Vec::new();
    // Title entity → its source, so a paragraph never mentions its own title.
    let mut title_owner: FastMap<u32, usize> = FastMap::default();

    let by_id: FastMap<&str, usize> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut entity_sources: Vec<u32> = Vec::new();
    let mut labels: Vec<(u32, String)> = Vec::new();
    let mut link_occurrences = 0usize;
    let mut source_links: FastSet<(usize, usize)> = FastSet::default();
    let mut node = 0u32;
    let mut titles = Vec::with_capacity(sources.len());
    // What this build found, by source, for the next one (hits are added below).
    let mut found_parts: Vec<(String, SourceParts)> = Vec::new();
    for (si, s) in sources.iter().enumerate() {
        let head = heads[si];
        titles.push((head, s.title.clone()));
        if let Some(label) = &s.label {
            labels.push((head, label.clone()));
        }
        for tag in &s.tags {
            let t = entities.node(format!("tag:{}", tag.to_lowercase()), tag, EntityKind::Tag);
            add(&mut edges, head, t, RelationKind::Tagged);
        }
        for hub in &s.hubs {
            let h = entities.node(format!("hub:{hub}"), hub, EntityKind::Hub);
            add(&mut edges, head, h, RelationKind::MemberOf);
        }
        if s.entity {
            // A declared entity is its own fragment: named by its name and aliases.
            entity_sources.push(head);
            let mut all = vec![s.title.clone()];
            all.extend(s.aliases.iter().cloned());
            names.push((head, all));
        } else if g.link_titles && !s.title.trim().is_empty() {
            let t = entities.node(format!("title:{}", s.id), &s.title, EntityKind::Title);
            add(&mut edges, t, head, RelationKind::Is);
            title_owner.insert(t, si);
            names.push((t, vec![s.title.clone()]));
        } else if g.mentions && !s.title.trim().is_empty() {
            let mut all = vec![s.title.clone()];
            all.extend(s.aliases.iter().cloned());
            names.push((head, all));
        }
        for (to, kind) in &s.relations {
            if let Some(&target) = by_id.get(to.as_str()) {
                let kind = RelationKind::parse(kind).unwrap_or(RelationKind::Relates);
                add(&mut edges, head, heads[target], kind);
            }
        }
        // This source's parts for the next build; each fragment's marks go in once used.
        let mut source_parts = parts.is_some().then(|| SourceParts {
            hash: s.hash.clone(),
            fragments: Vec::with_capacity(s.fragments.len()),
        });
        for fi in 0..s.fragments.len() {
            let this = node + fi as u32;
            if fi > 0 {
                add(&mut edges, this - 1, this, RelationKind::Next);
            }
            let fragment_parts = source_parts.as_mut().map(|p| {
                p.fragments.push(FragmentParts {
                    key: s.fragments[fi].key,
                    text: has_text[this as usize],
                    ..FragmentParts::default()
                });
                p.fragments.last_mut().expect("just pushed")
            });
            let Some(m) = marks[this as usize].take() else {
                continue;
            };
            for target in &m.links {
                let resolver = resolver.get_or_insert_with(|| {
                    LinkResolver::new(sources.iter().map(|s| s.id.as_str()))
                });
                match resolver.resolve(&s.id, target) {
                    Some(target) => {
                        link_occurrences += 1;
                        source_links.insert((si, target));
                        if target != si {
                            add(&mut edges, this, heads[target], RelationKind::LinksTo);
                        }
                    }
                    None => {
                        let key = super::normalize_target(target);
                        let e = entities.node(
                            format!("link:{key}"),
                            target.trim(),
                            EntityKind::Missing,
                        );
                        add(&mut edges, this, e, RelationKind::LinksTo);
                    }
                }
            }
            for tag in &m.tags {
                let t = entities.node(format!("tag:{tag}"), tag, EntityKind::Tag);
                add(&mut edges, this, t, RelationKind::Tagged);
            }
            if let Some(f) = fragment_parts {
                let Marks { links, tags } = *m;
                (f.links, f.tags) = (links, tags);
            }
        }
        if let Some(source) = source_parts {
            found_parts.push((s.id.clone(), source));
        }
        node += s.fragments.len() as u32;
    }
    // The sources, their id maps and the link resolver (over a gigabyte at a million
    // sources) are done with: the mention passes below need only the names and the nodes.
    drop(by_id);
    drop(resolver);
    drop(kept);
    aside.drop(sources);
    let source_links = source_links.len();

    // Missing link targets are named things too.
    for (i, e) in entities.nodes.iter().enumerate() {
        if e.kind == EntityKind::Missing {
            names.push((entities.base + i as u32, vec![e.name.clone()]));
        }
    }

    let mut dropped_aliases = Vec::new();
    // The aliases the kept hits were scanned for; set again below if this build scans.
    let old_aliases = parts.as_deref_mut().map(|p| std::mem::take(&mut p.aliases));
    // A name inside a link is that link, not a second relation.
    let linked: FastSet<(u32, u32)> = edges.iter().map(|&(a, b, _)| (a, b)).collect();
    if g.mentions && !names.is_empty() {
        let config = MentionConfig {
            min_chars: g.min_alias_chars,
            max_df: g.max_alias_df,
            ..MentionConfig::default()
        };
        let indexed = names
            .iter()
            .enumerate()
            .map(|(i, (_, aliases))| (i as u32, aliases.iter().map(String::as_str)));
        // `build_with_corpus`, over the texts a share at a time, each share scanned on every
        // core once: what the scan finds is kept per fragment node, and the mentions are
        // chosen from it once the frequency cap is known.
        let mut hits: Vec<Vec<Hit>> = Vec::new();
        let matcher = match MentionMatcher::build(indexed, &config) {
            Ok(m) => {
                hits.resize_with(fragments.len(), Vec::new);
                let aliases: Vec<String> = m.aliases().map(str::to_string).collect();
                // The kept hits serve when they were scanned for every alias of this
                // matcher: each alias is found on its own, so a hit of an alias gone is
                // only dropped. A new name needs every text scanned for it.
                let old = old_aliases.as_ref();
                let renumber: Option<Vec<Option<u32>>> = match old {
                    // the same aliases in the same order: the kept hits stand as they are
                    Some(old) if *old == aliases => Some((0..old.len() as u32).map(Some).collect()),
                    Some(old) => {
                        let index: FastMap<&str, u32> =
                            aliases.iter().map(String::as_str).zip(0..).collect();
                        let known: FastSet<&str> = old.iter().map(String::as_str).collect();
                        aliases
                            .iter()
                            .all(|a| known.contains(a.as_str()))
                            .then(|| old.iter().map(|a| index.get(a.as_str()).copied()).collect())
                    }
                    None => None,
                };
                let only = match (&renumber, parts.as_deref()) {
                    (Some(renumber), Some(kept)) if incremental => {
                        for (si, (id, _)) in found_parts.iter().enumerate() {
                            let head = heads[si] as usize;
                            let Some(old) = kept.sources.get(id) else {
                                continue;
                            };
                            if old.fragments.is_empty() || changed[head] {
                                continue;
                            }
                            for (fi, f) in old.fragments.iter().enumerate() {
                                hits[head + fi] = f
                                    .hits
                                    .iter()
                                    .filter_map(|&(start, end, alias)| {
                                        let alias = renumber.get(alias as usize).copied()??;
                                        Some(Hit::from_parts(start, end, alias))
                                    })
                                    .collect();
                            }
                        }
                        Some(changed.as_slice())
                    }
                    _ => None,
                };
                texts.shares(only, &mut |share| {
                    for &(node, _) in share {
                        read[node as usize] = true;
                    }
                    let bodies: Vec<&str> = share.iter().map(|(_, b)| *b).collect();
                    let (_, share_hits) = m.count_and_hit_all(&bodies);
                    for (&(node, _), found) in share.iter().zip(share_hits) {
                        hits[node as usize] = found;
                    }
                })?;
                let with_text = has_text.iter().filter(|t| **t).count() as u64;
                let counts =
                    DfCounts::of_hits(with_text, aliases.len(), hits.iter().map(Vec::as_slice));
                if let Some(parts) = parts.as_deref_mut() {
                    parts.aliases = aliases;
                    for (si, (_, source)) in found_parts.iter_mut().enumerate() {
                        for (fi, f) in source.fragments.iter_mut().enumerate() {
                            let node = heads[si] as usize + fi;
                            f.hits = hits[node].iter().map(|h| h.parts()).collect();
                        }
                    }
                }
                m.apply_df_cap_renumbered(&counts)
            }
            Err(e) => Err(e),
        };
        if let Ok((matcher, renumbered)) = matcher {
            // The edges follow in fragment-node order, made a range of fragments at a time
            // on every core.
            let ranges: Vec<std::ops::Range<usize>> = (0..hits.len())
                .step_by(TEXT_SHARE)
                .map(|start| start..hits.len().min(start + TEXT_SHARE))
                .collect();
            let found = crate::each_on_cores(&ranges, |range| {
                let mut found = Vec::new();
                for frag in range.clone() {
                    let this = frag as u32;
                    for m in matcher.mentions_of_hits(&hits[frag], &renumbered) {
                        // A title entity is its paragraph: the mention links the paragraphs
                        // directly (one hop), the entity stays the query's way in.
                        let named = names[m.entity as usize].0;
                        let target = title_owner.get(&named).map_or(named, |&si| heads[si]);
                        let same_source = (target as usize) < owner.len()
                            && owner[target as usize] == owner[frag];
                        if !same_source && !linked.contains(&(this, target)) {
                            add(&mut found, this, target, RelationKind::Mentions);
                        }
                    }
                }
                found
            });
            aside.drop(hits);
            edges.extend(found.into_iter().flatten());
            for d in matcher.dropped() {
                dropped_aliases.push(format!("{}: {}", d.alias, d.reason));
            }
            // The names some kept alias still stands for.
            let mut kept = vec![false; names.len()];
            for i in 0..matcher.aliases().len() {
                for &(e, _) in matcher.alias_owners(i) {
                    kept[e as usize] = true;
                }
            }
            names = names
                .into_iter()
                .zip(kept)
                .filter_map(|(n, kept)| kept.then_some(n))
                .collect();
            aside.drop(matcher);
        }
    }
    edges.sort_unstable();
    edges.dedup();
    if let Some(parts) = parts {
        parts.sources = found_parts.into_iter().collect();
    }
    Ok(GraphFile {
        format: FORMAT,
        built_from,
        fragments,
        entities: entities.nodes,
        edges,
        names,
        dropped_aliases,
        titles,
        entity_sources,
        labels,
        min_alias_chars: g.min_alias_chars,
        link_occurrences,
        source_links,
        texts_read: read.iter().filter(|r| **r).count(),
    })
}
