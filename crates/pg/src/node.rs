//! Vectors walked on the query node: each large shard's vectors read once into an HNSW graph
//! of the node's own (`finder_ann`, the embedded index's walk), then kept up to date from the
//! sources whose content changed. pgvector's walk costs tens of milliseconds per thousand of
//! beam on a shard of half a million fragments; the node's walks the same beam in a few
//! (docs/SCALING.md, *Queries*).
//!
//! A query walks a shard's node graph only when it holds the shard at the generation the
//! query node opened; otherwise (still loading, or behind a run) the shard's list comes from
//! pgvector's index as before, and a sync starts beside the queries. A fragment scores the
//! same either way: the exact cosine of its stored vectors.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, TryLockError};
use std::time::{Duration, Instant};

use finder_ann::{Hnsw, HnswParams};
use finder_core::FragmentKey;
use finder_index::part_key;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{FromSql, ToSql, Type};
use postgres::IsolationLevel;

use crate::cluster::{take, Pool};
use crate::error::{db, PgError, Result};
use crate::schema::{self, from_db, to_db};
use crate::search::{Found, Meta};

/// After a failed sync, the next waits this long (queries walk pgvector's index meanwhile).
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// A graph with more tombstones than this share of its live rows is rebuilt without them.
const COMPACT_SHARE: f64 = 0.25;

/// A sync that finds more than this share of the sources changed or gone links every vector
/// anew, outside the lock queries take, rather than relinking in place under it.
const FULL_SHARE: f64 = 0.25;

/// The node's vector graphs, one per shard (by its write URL), kept across the reopens of a
/// long-running process (`finder serve`, `finder mcp`): every
/// [`PgFinder::walk_on_node`](crate::PgFinder::walk_on_node) of the process takes the same
/// value.
#[derive(Clone, Default)]
pub struct NodeVectors(Arc<Mutex<HashMap<String, Arc<Slot>>>>);

impl NodeVectors {
    pub(crate) fn slot(&self, shard: &str) -> Arc<Slot> {
        let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(slots.entry(shard.to_string()).or_default())
    }
}

/// One shard's graph on this node, and its sync.
#[derive(Default)]
pub(crate) struct Slot {
    index: RwLock<Option<ShardIndex>>,
    /// Held while a sync runs: one at a time.
    syncing: Mutex<()>,
    /// A sync runs beside the queries, or is about to.
    started: AtomicBool,
    failed_at: Mutex<Option<Instant>>,
    /// The sync that brought the graph to its generation.
    last: Mutex<Option<SyncReport>>,
}

/// What one sync did.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncReport {
    pub shard: usize,
    pub generation: u64,
    /// Read whole (a first load, or vectors made by another model) rather than changed
    /// sources only.
    pub full: bool,
    /// Sources whose fragments were read again, and those removed.
    pub changed: usize,
    pub removed: usize,
    /// Live vectors after the sync, every window of every fragment.
    pub vectors: usize,
    pub seconds: f64,
}

/// Which run a shard's rows are of: its generation, and when the run committed (a database
/// indexed anew from empty counts generations from 1 again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub generation: u64,
    pub committed_at: u64,
}

impl Stamp {
    pub(crate) fn of(record: &schema::RunRecord) -> Stamp {
        Stamp {
            generation: record.generation,
            committed_at: record.committed_at,
        }
    }
}

/// A shard's vectors as of one run.
struct ShardIndex {
    stamp: Stamp,
    /// What the vectors and passages were made with ([`made_by`]).
    made_by: u64,
    graph: Hnsw,
    fragments: HashMap<u64, Held>,
    /// The fragment of each graph key past a fragment's first window (`part_key`).
    parts: HashMap<u64, u64>,
    /// Each source's content hash (hashed again, to hold 8 bytes) and its fragments with
    /// vectors.
    sources: HashMap<u64, (u64, Vec<u64>)>,
}

/// What a query asks of a fragment besides its vectors.
#[derive(Clone, Copy)]
struct Held {
    source: u64,
    ordinal: u32,
    entity: bool,
    /// Its windows past the first (`part_key(fragment, 1..=later)`).
    later: u32,
}

/// How a shard's walk scores: its beam, the window it keeps, and `vector.window_weight` when
/// the shard holds later windows.
#[derive(Clone, Copy)]
pub(crate) struct Walk {
    pub ef: usize,
    pub window: usize,
    pub window_weight: Option<f32>,
}

impl Slot {
    /// The graph to walk now: `None` while a sync writes it, or after one panicked writing
    /// it (the next sync reads the shard whole).
    fn walkable(&self) -> Option<RwLockReadGuard<'_, Option<ShardIndex>>> {
        self.index.try_read().ok()
    }

    /// The shard's nearest fragments to `query` (a unit vector) when this node holds the shard
    /// as of `stamp`; `None` when it does not (or a sync is writing it now).
    pub(crate) fn nearest(
        &self,
        stamp: Stamp,
        shard: usize,
        query: &[f32],
        walk: Walk,
    ) -> Option<Vec<Found>> {
        let index = self.walkable()?;
        let index = index.as_ref().filter(|i| i.stamp == stamp)?;
        (index.graph.dim() == query.len()).then(|| index.nearest(shard, query, walk))
    }

    /// Whether the graph is as of `stamp` and free to walk now.
    pub(crate) fn holds(&self, stamp: Stamp) -> bool {
        let index = self.walkable();
        index.is_some_and(|i| i.as_ref().is_some_and(|i| i.stamp == stamp))
    }

    /// Starts a sync beside the queries when the shard is at another run than this node holds
    /// (none yet, or a run since), unless one runs already or the last failed a moment ago.
    /// Never waits.
    pub(crate) fn refresh(
        self: &Arc<Self>,
        stamp: Stamp,
        pool: &Pool,
        shard: usize,
        shards: usize,
    ) {
        let behind = match self.index.try_read() {
            Ok(index) => index.as_ref().is_none_or(|i| i.stamp != stamp),
            // A sync writes the graph now.
            Err(TryLockError::WouldBlock) => false,
            // A sync panicked while writing it.
            Err(TryLockError::Poisoned(_)) => true,
        };
        if !behind || self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let failed = *self
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if failed.is_some_and(|at| at.elapsed() < RETRY_AFTER) {
            self.started.store(false, Ordering::Release);
            return;
        }
        /// Lets the next sync start when this one ends, however it ends; after a panic, not
        /// before the retry delay.
        struct Started(Arc<Slot>);
        impl Drop for Started {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    let failed = &self.0.failed_at;
                    *failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
                }
                self.0.started.store(false, Ordering::Release);
            }
        }
        let (started, pool) = (Started(Arc::clone(self)), pool.clone());
        // A thread that cannot be spawned drops the guard with the closure.
        let _ = std::thread::Builder::new()
            .name(format!("finder-node-vectors-{shard}"))
            .spawn(move || {
                if let Err(e) = started.0.sync(&pool, shard, shards) {
                    tracing::warn!(
                        "shard {shard}: the node's vector walk is not up to date, so queries walk pgvector's index: {e}"
                    );
                }
            });
    }

    /// Brings the node's graph of the shard up to what the shard holds now: the sources whose
    /// content hash changed are read again, or everything when there is no graph yet, the
    /// vectors or passages were made otherwise (another model, `embed.windows`, index-time
    /// settings or word analysis), or a quarter of the sources changed. Queries walk the old
    /// graph (or pgvector's index) until the changes are in.
    pub(crate) fn sync(&self, pool: &Pool, shard: usize, shards: usize) -> Result<SyncReport> {
        let _one = self.syncing.lock().unwrap_or_else(PoisonError::into_inner);
        if self.index.is_poisoned() {
            // A sync panicked while writing the graph: it is read whole again.
            *self.index.write().unwrap_or_else(PoisonError::into_inner) = None;
            self.index.clear_poison();
        }
        let result = self.sync_now(pool, shard, shards);
        *self
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = result.is_err().then(Instant::now);
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match result? {
            Synced::Now(report) => {
                *last = Some(report.clone());
                Ok(report)
            }
            // Nothing to do: the sync that did it says what it did.
            Synced::Already(report) => Ok(last
                .clone()
                .filter(|l| l.generation == report.generation)
                .unwrap_or(report)),
        }
    }

    fn sync_now(&self, pool: &Pool, shard: usize, shards: usize) -> Result<Synced> {
        let started = Instant::now();
        let mut conn = take(pool, shard)?;
        let mut tx = conn
            .client()
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(db(format!(
                "shard {shard}: opening a snapshot for the node's vectors"
            )))?;
        let record =
            schema::read_meta(&mut tx, shard, shards)?.ok_or(PgError::NotIndexed(shard))?;
        let report = |full, changed, removed, vectors| SyncReport {
            shard,
            generation: record.generation,
            full,
            changed,
            removed,
            vectors,
            seconds: started.elapsed().as_secs_f64(),
        };
        let Some(dim) = record.dim else {
            *self.index.write().unwrap_or_else(PoisonError::into_inner) = None;
            return Ok(Synced::Now(report(true, 0, 0, 0)));
        };
        let (made_by, stamp) = (made_by(&record), Stamp::of(&record));
        let held = {
            let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
            // The diff below is by content, so it holds whatever runs (or database behind the
            // same URL) came between.
            let held = index.as_ref().filter(|i| i.made_by == made_by);
            held.map(|i| (i.stamp, i.graph.len()))
        };
        if let Some((at, vectors)) = held {
            if at == stamp {
                return Ok(Synced::Already(report(false, 0, 0, vectors)));
            }
        }
        let place = |what: &str| format!("shard {shard}: reading {what} for the node's vectors");
        let mut hashes = HashMap::new();
        let rows = tx
            .query_raw("SELECT skey, hash FROM finder_sources", no_params())
            .map_err(db(place("the sources")))?;
        rows.for_each(|row| {
            hashes.insert(from_db(row.get(0)), short_hash(row.get(1)));
            Ok(())
        })
        .map_err(db(place("the sources")))?;

        // The sources to read again, and those gone, against the graph held now; past a
        // quarter of the sources, linking everything anew beats relinking in place.
        let diff = held.and_then(|_| {
            let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
            let (changed, removed) = index.as_ref()?.changed(&hashes);
            let many = (changed.len() + removed.len()) as f64 > FULL_SHARE * hashes.len() as f64;
            (!many).then_some((changed, removed))
        });
        let Some((changed, removed)) = diff else {
            // The old graph is dropped first, so the node never holds two; the snapshot and
            // the connection go back before the minutes of linking.
            *self.index.write().unwrap_or_else(PoisonError::into_inner) = None;
            let rows = read_vectors(&mut tx, shard, dim, None)?;
            drop(tx);
            drop(conn);
            let index = ShardIndex::build(stamp, made_by, dim, hashes, rows, shard);
            let vectors = index.graph.len();
            *self.index.write().unwrap_or_else(PoisonError::into_inner) = Some(index);
            return Ok(Synced::Now(report(true, 0, 0, vectors)));
        };
        let rows = match changed.is_empty() {
            true => Rows::default(),
            false => read_vectors(&mut tx, shard, dim, Some(&changed))?,
        };
        drop(tx);
        drop(conn);
        // Only a sync writes the graph, and this one holds `syncing`.
        let dropped = || PgError::Mismatch {
            shard,
            reason: "the node's vectors were dropped during a sync".into(),
        };
        {
            let mut index = self.index.write().unwrap_or_else(PoisonError::into_inner);
            let held = index.as_mut().ok_or_else(dropped)?;
            held.apply(stamp, &changed, &removed, hashes, rows);
        }
        // Compacted beside the queries, which walk the graph with its tombstones meanwhile.
        let compacted = {
            let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
            let graph = index.as_ref().map(|i| &i.graph);
            graph
                .filter(|g| g.tombstones() as f64 > COMPACT_SHARE * g.len() as f64)
                .map(Hnsw::compact)
        };
        let mut index = self.index.write().unwrap_or_else(PoisonError::into_inner);
        let held = index.as_mut().ok_or_else(dropped)?;
        if let Some(graph) = compacted {
            held.graph = graph;
        }
        Ok(Synced::Now(report(
            false,
            changed.len(),
            removed.len(),
            held.graph.len(),
        )))
    }
}

/// What the stored vectors and passages were made with: the model, the vectors' length,
/// `embed.windows`, the index-time settings and the word analysis. Another value means every
/// fragment may have changed without its source's content hash changing (a rebuild).
fn made_by(record: &schema::RunRecord) -> u64 {
    let mut h = DefaultHasher::new();
    (&record.model, record.dim, record.windows, record.analysis).hash(&mut h);
    serde_json::to_string(&record.settings)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

/// What a sync found to do.
enum Synced {
    Now(SyncReport),
    /// The graph was at the shard's generation already.
    Already(SyncReport),
}

fn no_params() -> std::iter::Empty<&'static dyn ToSql> {
    std::iter::empty()
}

/// A source's content hash, hashed to 8 bytes (compared only within this process).
fn short_hash(hash: &str) -> u64 {
    let mut h = DefaultHasher::new();
    hash.hash(&mut h);
    h.finish()
}

/// Fragments and later windows read for the graph.
#[derive(Default)]
struct Rows {
    /// Fragment, source, ordinal, entity, unit vector.
    fragments: Vec<(u64, u64, u32, bool, Vec<f32>)>,
    /// Fragment, window (from 1), unit vector.
    parts: Vec<(u64, u32, Vec<f32>)>,
}

/// The vectors of every fragment of the shard with one, or of the fragments of `sources`.
fn read_vectors(
    tx: &mut postgres::Transaction<'_>,
    shard: usize,
    dim: usize,
    sources: Option<&[u64]>,
) -> Result<Rows> {
    let keys: Vec<i64> = sources
        .unwrap_or_default()
        .iter()
        .map(|s| to_db(*s))
        .collect();
    let filter = match sources {
        Some(_) => "AND f.skey = ANY($1)",
        None => "AND cardinality($1::int8[]) = 0",
    };
    let place = |what: &str| format!("shard {shard}: reading {what} for the node's vectors");
    let mut rows = Rows::default();
    // The first fragment whose vector is not `dim` long; reported after the rows are read.
    let mut failed = None;
    let mut unit = |row: &postgres::Row, at| -> std::result::Result<_, postgres::Error> {
        let StoredVector(v) = row.try_get(at)?;
        if v.len() != dim {
            failed.get_or_insert(row.get::<_, i64>(0));
            return Ok(None);
        }
        Ok(Some(finder_ann::distance::unit(v)))
    };
    let params: [&(dyn ToSql + Sync); 1] = [&keys];
    tx.query_raw(
        &format!(
            "SELECT f.fkey, f.skey, f.ordinal, s.entity, f.embedding
             FROM finder_fragments f JOIN finder_sources s ON s.skey = f.skey
             WHERE f.embedding IS NOT NULL {filter}"
        ),
        params.iter().copied(),
    )
    .map_err(db(place("the fragments' vectors")))?
    .for_each(|row| {
        if let Some(v) = unit(&row, 4)? {
            let ordinal = row.get::<_, i32>(2) as u32;
            let (fragment, source) = (from_db(row.get(0)), from_db(row.get(1)));
            rows.fragments
                .push((fragment, source, ordinal, row.get(3), v));
        }
        Ok(())
    })
    .map_err(db(place("the fragments' vectors")))?;
    tx.query_raw(
        &format!(
            "SELECT p.fkey, p.part, p.embedding
             FROM finder_parts p JOIN finder_fragments f ON f.fkey = p.fkey
             WHERE f.embedding IS NOT NULL {filter}"
        ),
        params.iter().copied(),
    )
    .map_err(db(place("the later windows")))?
    .for_each(|row| {
        if let Some(v) = unit(&row, 2)? {
            let part = row.get::<_, i32>(1).max(1) as u32;
            rows.parts.push((from_db(row.get(0)), part, v));
        }
        Ok(())
    })
    .map_err(db(place("the later windows")))?;
    if let Some(fragment) = failed {
        return Err(PgError::Mismatch {
            shard,
            reason: format!("fragment {fragment}: a stored vector that is not {dim} numbers long"),
        });
    }
    // In key order, whatever order the server sent them in (a parallel scan's is not fixed):
    // nodes that read the same rows link the same graph, and walk it alike.
    rows.fragments.sort_unstable_by_key(|f| f.0);
    rows.parts.sort_unstable_by_key(|p| (p.0, p.1));
    Ok(rows)
}

impl ShardIndex {
    fn build(
        stamp: Stamp,
        made_by: u64,
        dim: usize,
        hashes: HashMap<u64, u64>,
        rows: Rows,
        shard: usize,
    ) -> ShardIndex {
        let mut index = ShardIndex {
            stamp,
            made_by,
            graph: Hnsw::new(dim, HnswParams::default()),
            fragments: HashMap::new(),
            parts: HashMap::new(),
            sources: hashes
                .into_iter()
                .map(|(s, h)| (s, (h, Vec::new())))
                .collect(),
        };
        let n = rows.fragments.len() + rows.parts.len();
        let (mut keys, mut vectors) = (Vec::with_capacity(n), Vec::with_capacity(n * dim));
        index.hold(rows, |key, v| {
            keys.push(key);
            vectors.extend_from_slice(&v);
        });
        let mut last = Instant::now();
        index.graph = Hnsw::from_rows(dim, HnswParams::default(), keys, vectors, &mut |done| {
            if last.elapsed() >= Duration::from_secs(10) {
                last = Instant::now();
                tracing::info!(
                    "shard {shard}: the node's vector graph: {done} of {n} vectors linked"
                );
            }
        });
        index
    }

    /// Records `rows`' fragments and windows in the maps, handing each vector to `add`.
    fn hold(&mut self, rows: Rows, mut add: impl FnMut(u64, Vec<f32>)) {
        for (fragment, source, ordinal, entity, v) in rows.fragments {
            self.fragments.insert(
                fragment,
                Held {
                    source,
                    ordinal,
                    entity,
                    later: 0,
                },
            );
            if let Some((_, list)) = self.sources.get_mut(&source) {
                list.push(fragment);
            }
            add(fragment, v);
        }
        for (fragment, part, v) in rows.parts {
            let Some(held) = self.fragments.get_mut(&fragment) else {
                continue;
            };
            held.later = held.later.max(part);
            let key = part_key(fragment, part as usize);
            self.parts.insert(key, fragment);
            add(key, v);
        }
    }

    /// The sources to read again (new, or another content hash) and those gone, against
    /// `hashes`, what the shard holds now.
    fn changed(&self, hashes: &HashMap<u64, u64>) -> (Vec<u64>, Vec<u64>) {
        let changed = hashes
            .iter()
            .filter(|(s, h)| self.sources.get(s).map(|(held, _)| held) != Some(h))
            .map(|(s, _)| *s)
            .collect();
        let removed = self
            .sources
            .keys()
            .filter(|s| !hashes.contains_key(s))
            .copied()
            .collect();
        (changed, removed)
    }

    /// Drops the fragments of the changed and removed sources, adds `rows` (the changed
    /// sources' fragments as they are now), and moves to `stamp`.
    fn apply(
        &mut self,
        stamp: Stamp,
        changed: &[u64],
        removed: &[u64],
        hashes: HashMap<u64, u64>,
        rows: Rows,
    ) {
        for source in changed.iter().chain(removed) {
            let Some((_, fragments)) = self.sources.remove(source) else {
                continue;
            };
            for fragment in fragments {
                let Some(held) = self.fragments.remove(&fragment) else {
                    continue;
                };
                self.graph.remove(fragment);
                for part in 1..=held.later as usize {
                    let key = part_key(fragment, part);
                    self.graph.remove(key);
                    self.parts.remove(&key);
                }
            }
        }
        let wanted: HashSet<u64> = changed.iter().copied().collect();
        for (source, hash) in hashes {
            if wanted.contains(&source) {
                self.sources.insert(source, (hash, Vec::new()));
            }
        }
        let mut added: Vec<(u64, Vec<f32>)> = Vec::new();
        self.hold(rows, |key, v| added.push((key, v)));
        let items: Vec<(u64, &[f32])> = added.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        self.graph.insert_batch(&items);
        self.stamp = stamp;
    }

    /// As pgvector's walk scores (`search::nearest`): the beam's nearest windows, each of
    /// their fragments scored by its first window's cosine plus `window_weight` of what its
    /// best window adds, the best `window` kept, ties on the key.
    fn nearest(&self, shard: usize, query: &[f32], walk: Walk) -> Vec<Found> {
        let fragments = self.fragments.len().max(1);
        let rows = self.graph.len();
        let mut want = walk.window;
        if !self.parts.is_empty() {
            // As pgvector's list with later windows: the fragments of the beam's every window
            // are scored, not only those of the window's nearest.
            want = walk.ef.max(want);
        }
        let found: Vec<u64> = loop {
            let mut seen = HashSet::new();
            let keys: Vec<u64> = self
                .graph
                .search(query, want, walk.ef.max(want))
                .into_iter()
                // Without a window weight, as pgvector's list: first windows only.
                .filter(|(key, _)| walk.window_weight.is_some() || !self.parts.contains_key(key))
                .map(|(key, _)| *self.parts.get(&key).unwrap_or(&key))
                .filter(|f| seen.insert(*f))
                .collect();
            if keys.len() >= walk.window.min(fragments) || want >= rows {
                break keys;
            }
            want = (2 * want).min(rows);
        };
        let dot = |key: u64| {
            self.graph
                .get(key)
                .map(|v| finder_ann::distance::dot(v, query))
        };
        let mut scored: Vec<Found> = found
            .into_iter()
            .filter_map(|fragment| {
                let held = self.fragments.get(&fragment)?;
                let first = dot(fragment)?;
                let score = match walk.window_weight {
                    Some(w) if held.later > 0 => {
                        let best = (1..=held.later as usize)
                            .filter_map(|p| dot(part_key(fragment, p)))
                            .fold(first, f32::max);
                        first + w * (best - first)
                    }
                    _ => first,
                };
                Some(Found {
                    fragment: FragmentKey(fragment),
                    score,
                    meta: Meta {
                        source: held.source,
                        ordinal: held.ordinal,
                        entity: held.entity,
                        shard,
                    },
                })
            })
            .collect();
        scored.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.fragment.0.cmp(&b.fragment.0))
        });
        scored.truncate(walk.window);
        scored
    }
}

/// A vector in pgvector's binary form (as `writer::Vector` writes it): its length and a
/// reserved field (16 bits each), then each number as a big-endian `f32`.
struct StoredVector(Vec<f32>);

impl<'a> FromSql<'a> for StoredVector {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let (head, body) = raw
            .split_at_checked(4)
            .ok_or("a vector shorter than its header")?;
        let dim = usize::from(u16::from_be_bytes([head[0], head[1]]));
        if body.len() != 4 * dim {
            return Err(format!("a vector of {dim} numbers in {} bytes", body.len()).into());
        }
        Ok(StoredVector(
            body.chunks_exact(4)
                .map(|b| f32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ))
    }

    fn accepts(ty: &Type) -> bool {
        ty.name() == "vector"
    }
}
