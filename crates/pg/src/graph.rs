//! The relation graph over PostgreSQL: built by the indexing run from every shard's sources
//! with the embedded engine's extraction (links, tags, typed hubs, entities, mentions, declared
//! relations), stored on shard 0, and loaded by each query node when it opens.
//!
//! Like the embedded index's graph it is derived state, rebuilt after a run that changed
//! something and keyed by the run's generation and the graph's build settings: a run stopped
//! between its commit and the graph's write leaves the previous graph marked behind, and the
//! next run rebuilds it. As the embedded index keeps `graph/parts.json`, shard 0 keeps what
//! the last build found in each source's texts (`finder_graph_parts`): a rebuild reads the
//! texts of the sources whose hash changed, not every text.

use std::cell::RefCell;
use std::collections::HashMap;

use finder_core::Settings;
use finder_index::graph::{
    FragmentTexts, GraphData, GraphFragment, GraphParts, GraphReport, GraphSource, LoadedGraph,
};
use postgres::{Client, GenericClient, Transaction};

use crate::error::{db, Result};
use crate::schema::{from_db, to_db};

/// Shard 0 holds the graph of the whole index.
pub(crate) const GRAPH_SHARD: usize = 0;

/// Whether shard 0 holds the graph for `key`.
pub(crate) fn is_current(client: &mut impl GenericClient, key: &str) -> Result<bool> {
    Ok(client
        .query_opt(
            "SELECT 1 FROM finder_graph WHERE id = 1 AND build_key = $1",
            &[&key],
        )
        .map_err(db(format!(
            "shard {GRAPH_SHARD}: reading the graph's state"
        )))?
        .is_some())
}

/// What a [`crate::PgFollower`] keeps of the graph between runs: the graph records of every
/// source and the parts, as of the graph built under `key` by the run `run` (generation and
/// commit time) into the shards at `shards` (their write URLs).
pub(crate) struct Held {
    pub key: String,
    pub run: (u64, u64),
    pub shards: Vec<String>,
    /// Every source's graph record, by id.
    pub sources: HashMap<String, GraphSource>,
    pub parts: GraphParts,
}

/// Builds the graph from every shard (each read after the run's commits) and stores it on
/// shard 0 under `key`, with the parts the next build reuses; without `graph.build` the
/// stored graph is removed. With `held` sources and parts (the state of run `generation`,
/// brought up to date by the run) it reads neither from the shards, only the texts of the
/// changed sources; with `keep`, it returns what a follower keeps for the next run.
pub(crate) fn rebuild(
    clients: &mut [Client],
    settings: &Settings,
    run: (&str, u64, u64),
    held: Option<Held>,
    keep: bool,
) -> Result<(Option<GraphReport>, Option<Held>)> {
    let (key, generation, built_from) = run;
    if !settings.graph.build {
        clients[GRAPH_SHARD]
            .batch_execute("DELETE FROM finder_graph; DELETE FROM finder_graph_parts")
            .map_err(db(format!("shard {GRAPH_SHARD}: removing the graph")))?;
        return Ok((None, None));
    }
    let started = std::time::Instant::now();
    let Built {
        data,
        parts,
        kept,
        records_read,
    } = build(clients, settings, generation, built_from, held, keep)?;
    let built = started.elapsed().as_secs_f64();
    let mut report = data.report();
    report.records_read = records_read;
    let mut tx = clients[GRAPH_SHARD]
        .transaction()
        .map_err(db(format!("shard {GRAPH_SHARD}: storing the graph")))?;
    tx.execute(
        "INSERT INTO finder_graph (id, build_key, data) VALUES (1, $1, $2)
         ON CONFLICT (id) DO UPDATE SET build_key = $1, data = $2",
        &[&key, &pack(&data.to_json())],
    )
    .map_err(db(format!("shard {GRAPH_SHARD}: storing the graph")))?;
    tx.execute(
        "INSERT INTO finder_graph_parts (id, data) VALUES (1, $1)
         ON CONFLICT (id) DO UPDATE SET data = $1",
        &[&pack(&parts.to_bytes())],
    )
    .map_err(db(format!(
        "shard {GRAPH_SHARD}: storing the graph's parts"
    )))?;
    tx.commit()
        .map_err(db(format!("shard {GRAPH_SHARD}: storing the graph")))?;
    report.seconds = started.elapsed().as_secs_f64();
    tracing::debug!(
        built,
        stored = report.seconds - built,
        texts_read = report.texts_read,
        "graph over postgres"
    );
    let held = kept.map(|sources| Held {
        key: key.to_string(),
        run: (generation, built_from),
        shards: Vec::new(),
        sources,
        parts,
    });
    Ok((Some(report), held))
}

/// What [`build`] made.
struct Built {
    data: GraphData,
    parts: GraphParts,
    /// Every source's graph record, when asked to keep them.
    kept: Option<HashMap<String, GraphSource>>,
    /// Sources whose records were read from the shards.
    records_read: usize,
}

/// The graph of every shard, the parts the next build reuses and, with `keep`, every
/// source's graph record. Each shard is read in one snapshot, its texts included, so the texts
/// read go with the hashes read; `held` sources and parts stand for those the snapshots
/// would give when every shard is still at run `generation` (no other run since).
fn build(
    clients: &mut [Client],
    settings: &Settings,
    generation: u64,
    built_from: u64,
    held: Option<Held>,
    keep: bool,
) -> Result<Built> {
    let started = std::time::Instant::now();
    let n = clients.len();
    let mut snapshots = Vec::with_capacity(n);
    let mut held = held;
    for (i, client) in clients.iter_mut().enumerate() {
        let mut tx = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(db(format!("shard {i}: reading the sources for the graph")))?;
        // The snapshot stays open while the graph is assembled and its texts streamed: a
        // server's statement or idle-in-transaction timeout must not cut it.
        tx.batch_execute(
            "SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0",
        )
        .map_err(db(format!("shard {i}: reading the sources for the graph")))?;
        if held.is_some() {
            let at = crate::schema::read_meta(&mut tx, i, n)?.map(|r| r.generation);
            if at != Some(generation) {
                // Another run committed since: what was held is behind.
                held = None;
            }
        }
        snapshots.push(tx);
    }
    let (sources, kept, mut parts, records_read) = match held {
        Some(held) => {
            let sources: Vec<GraphSource> = held.sources.values().cloned().collect();
            (sources, held.sources, held.parts, 0)
        }
        None => {
            let mut sources = Vec::new();
            for (i, tx) in snapshots.iter_mut().enumerate() {
                read_sources(tx, i, &mut sources)?;
            }
            let stored: Option<Vec<u8>> = snapshots[GRAPH_SHARD]
                .query_opt("SELECT data FROM finder_graph_parts WHERE id = 1", &[])
                .map_err(db(format!(
                    "shard {GRAPH_SHARD}: reading the graph's parts"
                )))?
                .map(|row| row.get(0));
            // Unreadable parts only cost a build that reads every text.
            let stored = stored.and_then(|b| unpack(&b).ok().map(|json| json.into_owned()));
            let parts = GraphParts::from_bytes(stored.as_deref(), &settings.graph, &settings.index);
            let kept = match keep {
                true => sources
                    .iter()
                    .map(|s| (s.id().to_string(), s.clone()))
                    .collect(),
                false => HashMap::new(),
            };
            let read = sources.len();
            (sources, kept, parts, read)
        }
    };
    tracing::debug!(
        read = started.elapsed().as_secs_f64(),
        records_read,
        "graph over postgres: sources and parts"
    );
    let texts = ShardTexts {
        snapshots: RefCell::new(snapshots),
        failed: RefCell::new(None),
    };
    let built = GraphData::build(sources, &texts, &settings.graph, built_from, &mut parts);
    // A shard that failed to give texts says so as itself (a connection lost is the store
    // being unavailable, not a graph fault).
    if let Some(e) = texts.failed.into_inner() {
        return Err(e);
    }
    for (i, tx) in texts.snapshots.into_inner().into_iter().enumerate() {
        tx.commit()
            .map_err(db(format!("shard {i}: reading the sources for the graph")))?;
    }
    Ok(Built {
        data: built?,
        parts,
        kept: keep.then_some(kept),
        records_read,
    })
}

/// The graph record of a source a run writes, as [`read_sources`] reads it back: its
/// fragments are those the writer stores (an empty source has one).
pub(crate) fn source_of(source: &finder_index::SourceDoc) -> GraphSource {
    let mut s = GraphSource::new(
        source.id.clone(),
        &source.envelope,
        source.entity,
        source.aliases.clone(),
        source.relations.clone(),
    );
    s.set_hash(source.hash.clone());
    for f in crate::terms::stored_fragments(source) {
        let ordinal = f.ordinal;
        s.push_fragment(GraphFragment {
            key: finder_index::fragment_key(&source.id, ordinal).0,
            ordinal,
        });
    }
    s
}

/// Appends the sources of one shard with their relations and fragment keys (not their texts:
/// [`ShardTexts`] reads those the build asks for).
fn read_sources(tx: &mut Transaction<'_>, shard: usize, out: &mut Vec<GraphSource>) -> Result<()> {
    let mut at: HashMap<u64, usize> = HashMap::new();
    let rows = tx
        .query(
            "SELECT s.skey, s.id, s.envelope, s.entity, s.aliases,
                    coalesce((SELECT jsonb_agg(jsonb_build_array(r.to_id, r.kind))
                              FROM finder_relations r WHERE r.skey = s.skey), '[]'::jsonb),
                    s.hash
             FROM finder_sources s",
            &[],
        )
        .map_err(db(format!(
            "shard {shard}: reading the sources for the graph"
        )))?;
    for row in rows {
        let skey = from_db(row.get(0));
        let envelope: serde_json::Value = row.get(2);
        let envelope = serde_json::from_value(envelope).unwrap_or_default();
        let aliases: serde_json::Value = row.get(4);
        let relations: serde_json::Value = row.get(5);
        at.insert(skey, out.len());
        let mut source = GraphSource::new(
            row.get(1),
            &envelope,
            row.get(3),
            serde_json::from_value(aliases).unwrap_or_default(),
            serde_json::from_value(relations).unwrap_or_default(),
        );
        source.set_hash(row.get(6));
        out.push(source);
    }
    let rows = tx
        .query("SELECT skey, fkey, ordinal FROM finder_fragments", &[])
        .map_err(db(format!(
            "shard {shard}: reading the fragments for the graph"
        )))?;
    for row in rows {
        if let Some(&i) = at.get(&from_db(row.get(0))) {
            out[i].push_fragment(GraphFragment {
                key: from_db(row.get(1)),
                ordinal: row.get::<_, i32>(2) as u32,
            });
        }
    }
    Ok(())
}

/// The fragment texts of every shard, by key, read in the snapshots the sources were read in.
struct ShardTexts<'a> {
    snapshots: RefCell<Vec<Transaction<'a>>>,
    /// The error a shard gave, kept as the store's.
    failed: RefCell<Option<crate::error::PgError>>,
}

impl FragmentTexts for ShardTexts<'_> {
    fn for_each(
        &self,
        keys: Option<&[u64]>,
        f: &mut dyn FnMut(u64, String),
    ) -> std::result::Result<(), String> {
        use postgres::fallible_iterator::FallibleIterator;
        let wanted: Option<Vec<i64>> = keys.map(|k| k.iter().map(|&k| to_db(k)).collect());
        let mut snapshots = self.snapshots.borrow_mut();
        for (i, tx) in snapshots.iter_mut().enumerate() {
            let failed = |e: postgres::Error| {
                let e = db(format!("shard {i}: reading fragment texts"))(e);
                let said = e.to_string();
                *self.failed.borrow_mut() = Some(e);
                said
            };
            // Streamed: every text of a large index is more than one should hold at once.
            let mut rows = match &wanted {
                Some(keys) => tx.query_raw(
                    "SELECT fkey, body FROM finder_fragments WHERE fkey = ANY($1)",
                    [keys],
                ),
                None => tx.query_raw(
                    "SELECT fkey, body FROM finder_fragments",
                    std::iter::empty::<&i64>(),
                ),
            }
            .map_err(failed)?;
            while let Some(row) = rows.next().map_err(failed)? {
                f(from_db(row.get(0)), row.get(1));
            }
        }
        Ok(())
    }
}

/// What starts a stored graph or parts compressed by [`pack`] (the JSON of an older Finder
/// starts with `{`).
const PACKED: &[u8] = b"finder-lz4\0";

/// The graph and its parts are stored compressed with LZ4 (tantivy's compressor, already in
/// the build), in columns PostgreSQL does not compress again: over the synthetic 100k notes
/// its own compression (pglz) took 0.8 s of each build's storing. The compressed bytes follow
/// their BLAKE3 hash, so damage is told apart from a bug.
fn pack(json: &[u8]) -> Vec<u8> {
    let packed = lz4_flex::compress_prepend_size(json);
    let mut out = PACKED.to_vec();
    out.extend(blake3::hash(&packed).as_bytes());
    out.extend(packed);
    out
}

/// What [`pack`] stored, or the JSON an older Finder stored as it is.
pub(crate) fn unpack(bytes: &[u8]) -> std::result::Result<std::borrow::Cow<'_, [u8]>, String> {
    let Some(packed) = bytes.strip_prefix(PACKED) else {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    };
    let damaged = |why: String| format!("shard {GRAPH_SHARD}: the stored graph is damaged: {why}");
    let (hash, packed) = packed
        .split_at_checked(blake3::OUT_LEN)
        .ok_or_else(|| damaged("too short".into()))?;
    if blake3::hash(packed).as_bytes() != hash {
        return Err(damaged("its checksum does not match".into()));
    }
    lz4_flex::decompress_size_prepended(packed)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| damaged(e.to_string()))
}

/// The key of the graph stored on this shard, `None` when there is none.
pub(crate) fn stored_key(client: &mut impl GenericClient) -> Result<Option<String>> {
    let row = client
        .query_opt("SELECT build_key FROM finder_graph WHERE id = 1", &[])
        .map_err(db(format!("shard {GRAPH_SHARD}: reading the graph's key")))?;
    Ok(row.map(|r| r.get(0)))
}

/// The stored graph as a query node uses it: `Ok(None)` when none is stored, `Err(reason)`
/// when it is unreadable or behind the last run.
pub(crate) fn load(
    client: &mut impl GenericClient,
    key: &str,
) -> std::result::Result<Option<LoadedGraph>, String> {
    let row = client
        .query_opt("SELECT build_key, data FROM finder_graph WHERE id = 1", &[])
        .map_err(|e| format!("shard {GRAPH_SHARD}: reading the graph: {e}"))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let stored: String = row.get(0);
    if stored != key {
        return Err(
            "the graph is behind the last indexing run (or was built with other graph settings); run `finder index` again"
                .into(),
        );
    }
    let bytes: Vec<u8> = row.get(1);
    GraphData::from_json(&unpack(&bytes)?).map(|g| Some(g.into_access()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_blobs_are_read_back_packed_or_as_older_json() {
        let json = br#"{"format":1,"edges":[[0,1,2],[1,2,2]]}"#.repeat(50);
        let packed = pack(&json);
        assert!(packed.len() < json.len());
        assert_eq!(unpack(&packed).unwrap().as_ref(), json.as_slice());
        // A graph an older Finder stored is JSON as it is.
        assert_eq!(unpack(&json).unwrap().as_ref(), json.as_slice());
        let mut damaged = packed.clone();
        damaged.truncate(packed.len() / 2);
        assert!(unpack(&damaged).unwrap_err().contains("damaged"));
    }
}
