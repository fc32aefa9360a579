//! The tables one shard holds, and the run record (`finder_meta`) that describes them.
//!
//! Sources own their fragments, a fragment owns its postings, and deleting a source cascades;
//! the statistics BM25 needs (`finder_terms.df`, `finder_stats`) are kept by the writer in
//! the same transaction as the rows they count. Keys are Finder's 64-bit source and fragment
//! keys stored as `bigint` (the same bits, read as signed).

use finder_core::IndexSettings;
use finder_index::RunCounts;
use postgres::GenericClient;
use serde::{Deserialize, Serialize};

use crate::error::{db, PgError, Result};

/// Bumped when the tables change shape; a shard of another format is refused.
pub(crate) const FORMAT: i32 = 2;

/// `finder_postings.field` and `finder_stats.field` of the stemmed word field.
pub(crate) const WORDS: i16 = 0;
/// … and of the whole-word field (the trigram channel's expansions; format 1 held character
/// trigrams here).
pub(crate) const WHOLE_WORDS: i16 = 1;

const DDL: &str = "
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS finder_meta (
    id integer PRIMARY KEY CHECK (id = 1),
    format integer NOT NULL,
    shard integer NOT NULL,
    shards integer NOT NULL,
    record jsonb NOT NULL
);
CREATE TABLE IF NOT EXISTS finder_sources (
    skey bigint PRIMARY KEY,
    id text NOT NULL UNIQUE,
    origin text NOT NULL,
    hash text NOT NULL,
    envelope jsonb NOT NULL,
    summary text NOT NULL,
    entity boolean NOT NULL,
    aliases jsonb NOT NULL,
    fragments integer NOT NULL
);
CREATE INDEX IF NOT EXISTS finder_sources_origin ON finder_sources (origin);
CREATE TABLE IF NOT EXISTS finder_fragments (
    fkey bigint PRIMARY KEY,
    skey bigint NOT NULL REFERENCES finder_sources ON DELETE CASCADE,
    ordinal integer NOT NULL,
    body text NOT NULL,
    heading text,
    byte_start bigint NOT NULL,
    byte_end bigint NOT NULL,
    line_start integer NOT NULL,
    line_end integer NOT NULL,
    words integer NOT NULL,
    raw_words integer NOT NULL,
    embedding vector
);
CREATE INDEX IF NOT EXISTS finder_fragments_source ON finder_fragments (skey, ordinal);
CREATE TABLE IF NOT EXISTS finder_parts (
    fkey bigint NOT NULL REFERENCES finder_fragments ON DELETE CASCADE,
    part integer NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (fkey, part)
);
CREATE TABLE IF NOT EXISTS finder_postings (
    field smallint NOT NULL,
    term text NOT NULL,
    fkey bigint NOT NULL REFERENCES finder_fragments ON DELETE CASCADE,
    tf integer NOT NULL,
    norm integer NOT NULL,
    PRIMARY KEY (field, term, fkey) INCLUDE (tf, norm)
);
CREATE INDEX IF NOT EXISTS finder_postings_fragment ON finder_postings (fkey);
CREATE TABLE IF NOT EXISTS finder_terms (
    field smallint NOT NULL,
    term text NOT NULL,
    df bigint NOT NULL,
    PRIMARY KEY (field, term) INCLUDE (df)
);
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS finder_terms_whole_trigrams ON finder_terms
    USING gin (term gin_trgm_ops) WHERE field = 1;
CREATE TABLE IF NOT EXISTS finder_stats (
    field smallint PRIMARY KEY,
    docs bigint NOT NULL,
    tokens bigint NOT NULL
);
INSERT INTO finder_stats VALUES (0, 0, 0), (1, 0, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS finder_relations (
    skey bigint NOT NULL REFERENCES finder_sources ON DELETE CASCADE,
    to_id text NOT NULL,
    kind text NOT NULL
);
CREATE INDEX IF NOT EXISTS finder_relations_source ON finder_relations (skey);
CREATE TABLE IF NOT EXISTS finder_graph (
    id integer PRIMARY KEY CHECK (id = 1),
    build_key text NOT NULL,
    data bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS finder_graph_parts (
    id integer PRIMARY KEY CHECK (id = 1),
    data bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS finder_documents (
    id text PRIMARY KEY,
    record text NOT NULL
);
-- The graph and its parts come compressed (graph.rs, `pack`): not compressed again. A role
-- that does not own the tables leaves them as they are (PostgreSQL compresses in vain).
DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attname = 'data' AND attstorage <> 'e'
               AND attrelid IN ('finder_graph'::regclass, 'finder_graph_parts'::regclass)) THEN
        ALTER TABLE finder_graph ALTER COLUMN data SET STORAGE EXTERNAL;
        ALTER TABLE finder_graph_parts ALTER COLUMN data SET STORAGE EXTERNAL;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN NULL;
END $$;
";

/// What the last run left in a shard, stored with it (the embedded index's `CommitInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Index-time settings the rows were made with.
    pub settings: IndexSettings,
    /// Length of the stored vectors; `None` when the shard holds none.
    pub dim: Option<usize>,
    /// Sources and fragments in this shard.
    pub sources: u64,
    pub fragments: u64,
    /// Inputs indexed so far (all shards share the list).
    pub origins: Vec<String>,
    pub last_run: RunCounts,
    /// Seconds since the Unix epoch.
    pub committed_at: u64,
    /// Runs that changed what the index holds.
    pub generation: u64,
    /// The model the vectors come from (`precomputed/<dim>` for given vectors).
    #[serde(default)]
    pub model: Option<String>,
    /// Sources with a date in this shard (`None`: written before this was counted).
    #[serde(default)]
    pub dated: Option<u64>,
    /// The word analysis the terms were made with (`finder_index::ANALYSIS`); 1 for rows
    /// written before it was recorded.
    #[serde(default = "first_analysis")]
    pub analysis: u32,
    /// The languages detected for some source of any shard (`finder_index::detected_language`),
    /// in order: queries are analysed in each too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
    /// Every window of a long passage has its vector (`embed.windows`): the later ones are in
    /// `finder_parts`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub windows: bool,
}

fn first_analysis() -> u32 {
    1
}

/// Creates the tables when missing (idempotent; the first writer of a database runs it).
pub(crate) fn create(client: &mut impl GenericClient, shard: usize) -> Result<()> {
    client
        .batch_execute(DDL)
        .map_err(db(format!("shard {shard}: creating the tables")))
}

/// Reads the run record, checking the format, the shard's place and that no later Finder
/// wrote it (a later word analysis is refused, as the embedded index refuses one); `None`
/// before the first run.
pub(crate) fn read_meta(
    client: &mut impl GenericClient,
    shard: usize,
    shards: usize,
) -> Result<Option<RunRecord>> {
    let exists = client
        .query_one("SELECT to_regclass('finder_meta') IS NOT NULL", &[])
        .map_err(db(format!("shard {shard}: looking for Finder's tables")))?
        .get::<_, bool>(0);
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_opt(
            "SELECT format, shard, shards, record FROM finder_meta WHERE id = 1",
            &[],
        )
        .map_err(db(format!("shard {shard}: reading the run record")))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let mismatch = |reason: String| PgError::Mismatch { shard, reason };
    let format: i32 = row.get(0);
    if format != FORMAT {
        return Err(mismatch(format!(
            "the tables have format {format}, this build reads {FORMAT}; index into an empty database"
        )));
    }
    let (at, of): (i32, i32) = (row.get(1), row.get(2));
    if (at as usize, of as usize) != (shard, shards) {
        return Err(mismatch(format!(
            "this database was written as shard {at} of {of}, but is configured as shard {shard} of {shards}; shards must be listed in the order they were indexed with"
        )));
    }
    let record: serde_json::Value = row.get(3);
    let record: RunRecord = serde_json::from_value(record)
        .map_err(|e| mismatch(format!("unreadable run record: {e}")))?;
    // Terms a later Finder made would be read with this build's analysis, or rebuilt by it.
    if record.analysis > finder_index::ANALYSIS {
        return Err(mismatch(format!(
            "the terms were written with word analysis {} by a later Finder; this one reads \
             word analysis {} and older: use that Finder, or index into an empty database",
            record.analysis,
            finder_index::ANALYSIS
        )));
    }
    Ok(Some(record))
}

pub(crate) fn write_meta(
    client: &mut impl GenericClient,
    shard: usize,
    shards: usize,
    record: &RunRecord,
) -> Result<()> {
    let json = serde_json::to_value(record).expect("run record serialises");
    client
        .execute(
            "INSERT INTO finder_meta (id, format, shard, shards, record) VALUES (1, $1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET format = $1, shard = $2, shards = $3, record = $4",
            &[&FORMAT, &(shard as i32), &(shards as i32), &json],
        )
        .map(drop)
        .map_err(db(format!("shard {shard}: writing the run record")))
}

/// The API documents the shard keeps (`writer::API_ORIGIN`), by id: those of `ids`, or all.
/// None before the first run made the table.
pub(crate) fn read_documents(
    client: &mut impl GenericClient,
    shard: usize,
    ids: Option<&[String]>,
) -> Result<Vec<(String, String)>> {
    let failed = || db(format!("shard {shard}: reading the API documents"));
    let exists: bool = client
        .query_one("SELECT to_regclass('finder_documents') IS NOT NULL", &[])
        .map_err(failed())?
        .get(0);
    if !exists {
        return Ok(Vec::new());
    }
    let rows = match ids {
        Some(ids) => client.query(
            "SELECT id, record FROM finder_documents WHERE id = ANY($1)",
            &[&ids],
        ),
        None => client.query("SELECT id, record FROM finder_documents", &[]),
    }
    .map_err(failed())?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Empties every table but the API documents' and sets the vector column's length (a rebuild: the index-time
/// settings or the vector length changed). The HNSW index needs a fixed length, so the
/// column is typed `vector(dim)`; the writer builds the index once the rows are in. Vectors
/// stay in the row (`STORAGE MAIN`): TOASTed, every distance would first fetch and join
/// chunks (the fragment's body moves out instead).
pub(crate) fn reset(
    client: &mut impl GenericClient,
    shard: usize,
    dim: Option<usize>,
) -> Result<()> {
    let column = match dim {
        Some(d) => format!("vector({d})"),
        None => "vector".to_string(),
    };
    let sql = format!(
        "TRUNCATE finder_sources, finder_fragments, finder_parts, finder_postings, finder_terms,
             finder_relations;
         UPDATE finder_stats SET docs = 0, tokens = 0;
         DROP INDEX IF EXISTS finder_fragments_embedding;
         DROP INDEX IF EXISTS finder_parts_embedding;
         ALTER TABLE finder_fragments ALTER COLUMN embedding TYPE {column};
         ALTER TABLE finder_fragments ALTER COLUMN embedding SET STORAGE MAIN;
         ALTER TABLE finder_parts ALTER COLUMN embedding TYPE {column};
         ALTER TABLE finder_parts ALTER COLUMN embedding SET STORAGE MAIN;"
    );
    client.batch_execute(&sql).map_err(db(format!(
        "shard {shard}: emptying the tables for a rebuild"
    )))
}

/// The HNSW indexes of the vectors: on `finder_fragments` (each passage's first window) and
/// on `finder_parts` (the later windows), each with its table.
pub(crate) const VECTOR_INDEXES: [(&str, &str); 2] = [
    ("finder_fragments_embedding", "finder_fragments"),
    ("finder_parts_embedding", "finder_parts"),
];

/// pgvector's `m` and `ef_construction` for an HNSW index built without them.
const PGVECTOR_M: u32 = 16;
const PGVECTOR_EF_CONSTRUCTION: u32 = 64;

/// The `(m, ef_construction)` the shard's HNSW index `index` was built with (pgvector's
/// defaults when it was built without them); `None` when there is none.
pub(crate) fn vector_index_params(
    client: &mut impl GenericClient,
    shard: usize,
    index: &str,
) -> Result<Option<(u32, u32)>> {
    let row = client
        .query_opt(
            "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass($1)",
            &[&index],
        )
        .map_err(db(format!("shard {shard}: reading the vector index")))?;
    Ok(row.map(|row| {
        let options: Vec<String> = row.get(0);
        let value = |name: &str, default: u32| {
            options
                .iter()
                .find_map(|o| o.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or(default)
        };
        // pgvector's own defaults, not Finder's: an index built without options has these.
        (
            value("m", PGVECTOR_M),
            value("ef_construction", PGVECTOR_EF_CONSTRUCTION),
        )
    }))
}

/// Before a load into empty tables: the postings' key and foreign key go, so the bulk of the
/// rows goes in without a B-tree insert and a lookup each ([`add_posting_keys`] puts them
/// back, built once over sorted data, in the same transaction).
pub(crate) fn drop_posting_keys(client: &mut impl GenericClient, shard: usize) -> Result<()> {
    client
        .batch_execute(
            "ALTER TABLE finder_postings DROP CONSTRAINT IF EXISTS finder_postings_pkey,
                 DROP CONSTRAINT IF EXISTS finder_postings_fkey_fkey;
             DROP INDEX IF EXISTS finder_postings_fragment;",
        )
        .map_err(db(format!("shard {shard}: preparing a bulk load")))
}

/// Restores what [`drop_posting_keys`] removed.
pub(crate) fn add_posting_keys(client: &mut impl GenericClient, shard: usize) -> Result<()> {
    client
        .batch_execute(
            "SET LOCAL maintenance_work_mem = '1GB';
             ALTER TABLE finder_postings ADD PRIMARY KEY (field, term, fkey) INCLUDE (tf, norm),
                 ADD FOREIGN KEY (fkey) REFERENCES finder_fragments ON DELETE CASCADE;
             CREATE INDEX finder_postings_fragment ON finder_postings (fkey);",
        )
        .map_err(db(format!(
            "shard {shard}: indexing the postings after a bulk load"
        )))
}

/// Maps a key to the `bigint` that stores it.
pub(crate) fn to_db(key: u64) -> i64 {
    key as i64
}

pub(crate) fn from_db(key: i64) -> u64 {
    key as u64
}
