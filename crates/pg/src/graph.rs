//! The relation graph over PostgreSQL: built by the indexing run from every shard's sources
//! with the embedded engine's extraction (links, tags, typed hubs, entities, mentions, declared
//! relations), stored on shard 0, and loaded by each query node when it opens.
//!
//! Like the embedded index's graph it is derived state, rebuilt after a run that changed
//! something and keyed by the run's generation and the graph's build settings: a run stopped
//! between its commit and the graph's write leaves the previous graph marked behind, and the
//! next run rebuilds it.

use finder_core::Settings;
use finder_index::graph::{GraphData, GraphFragment, GraphReport, GraphSource, LoadedGraph};
use postgres::{Client, GenericClient};
use std::collections::HashMap;

use crate::error::{db, Result};
use crate::schema::from_db;

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

/// Builds the graph from every shard (each read in its own snapshot, after the run's commits)
/// and stores it on shard 0 under `key`; without `graph.build` the stored graph is removed.
pub(crate) fn rebuild(
    clients: &mut [Client],
    settings: &Settings,
    key: &str,
    built_from: u64,
) -> Result<Option<GraphReport>> {
    if !settings.graph.build {
        clients[GRAPH_SHARD]
            .execute("DELETE FROM finder_graph", &[])
            .map_err(db(format!("shard {GRAPH_SHARD}: removing the graph")))?;
        return Ok(None);
    }
    let mut sources = Vec::new();
    for (i, client) in clients.iter_mut().enumerate() {
        read_sources(client, i, &mut sources)?;
    }
    let data = GraphData::build(sources, &settings.graph, built_from);
    let report = data.report();
    clients[GRAPH_SHARD]
        .execute(
            "INSERT INTO finder_graph (id, build_key, data) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET build_key = $1, data = $2",
            &[&key, &data.to_json()],
        )
        .map_err(db(format!("shard {GRAPH_SHARD}: storing the graph")))?;
    Ok(Some(report))
}

/// Appends the sources of one shard, with their relations and fragments.
fn read_sources(client: &mut Client, shard: usize, out: &mut Vec<GraphSource>) -> Result<()> {
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(db(format!(
            "shard {shard}: reading the sources for the graph"
        )))?;
    let mut at: HashMap<u64, usize> = HashMap::new();
    let rows = tx
        .query(
            "SELECT s.skey, s.id, s.envelope, s.entity, s.aliases,
                    coalesce((SELECT jsonb_agg(jsonb_build_array(r.to_id, r.kind))
                              FROM finder_relations r WHERE r.skey = s.skey), '[]'::jsonb)
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
        out.push(GraphSource::new(
            row.get(1),
            &envelope,
            row.get(3),
            serde_json::from_value(aliases).unwrap_or_default(),
            serde_json::from_value(relations).unwrap_or_default(),
        ));
    }
    let rows = tx
        .query(
            "SELECT skey, fkey, ordinal, body FROM finder_fragments",
            &[],
        )
        .map_err(db(format!(
            "shard {shard}: reading the fragments for the graph"
        )))?;
    for row in rows {
        if let Some(&i) = at.get(&from_db(row.get(0))) {
            out[i].push_fragment(GraphFragment {
                key: from_db(row.get(1)),
                ordinal: row.get::<_, i32>(2) as u32,
                body: row.get(3),
            });
        }
    }
    tx.commit().map_err(db(format!(
        "shard {shard}: reading the sources for the graph"
    )))
}

/// The stored graph as a query node uses it: `Ok(None)` when none is stored, `Err(reason)`
/// when it is unreadable or behind the last run.
/// The key of the graph stored on this shard, `None` when there is none.
pub(crate) fn stored_key(client: &mut impl GenericClient) -> Result<Option<String>> {
    let row = client
        .query_opt("SELECT build_key FROM finder_graph WHERE id = 1", &[])
        .map_err(db(format!("shard {GRAPH_SHARD}: reading the graph's key")))?;
    Ok(row.map(|r| r.get(0)))
}

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
    GraphData::from_json(&bytes).map(|g| Some(g.into_access()))
}
