//! One query surface over Finder's two stores: an embedded index folder ([`Finder`]) or
//! PostgreSQL + pgvector ([`PgFinder`]), chosen by `storage.backend` in the settings.
//!
//! The HTTP service, the MCP tools and the `finder` commands hold a [`Store`] and never ask
//! which one it is: both run the same pipeline (`finder_core::search_with`) and answer with
//! the same types. Indexing runs dispatch the same way through [`index_inputs`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_core::{
    Embed, PluginRetriever, Query, Reranker, SearchResponse, Settings, SourceView, StorageBackend,
};
use finder_index::{Finder, IndexError, Problem, SourceText};
use finder_pg::{PgConfig, PgError, PgFinder, PgRunReport, RunRecord};
use serde::Serialize;

/// What can go wrong in either store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Pg(#[from] PgError),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A store opened for queries.
pub enum Store {
    Embedded(Box<Finder>),
    Postgres(Box<PgFinder>),
}

impl Store {
    /// Opens the store `settings.storage` names: the index folder `dir`, or the PostgreSQL
    /// shards (the folder then only holds `finder.toml`). No model is attached yet.
    pub fn open(dir: &Path, settings: Settings) -> Result<Store> {
        Ok(match settings.storage.backend {
            StorageBackend::Embedded => Store::Embedded(Box::new(Finder::open(dir, settings)?)),
            StorageBackend::Postgres => {
                let config = PgConfig::from_settings(&settings.storage)?;
                let mut pg = PgFinder::open(&config, settings)?;
                pg.load_profiles(dir)?;
                Store::Postgres(Box::new(pg))
            }
        })
    }

    pub fn backend(&self) -> StorageBackend {
        match self {
            Store::Embedded(_) => StorageBackend::Embedded,
            Store::Postgres(_) => StorageBackend::Postgres,
        }
    }

    /// Attaches the query-side embedding model: `Ok(None)` when the semantic layer is off,
    /// `Err(reason)` when it is unavailable (queries then report a degraded vector channel).
    pub fn attach_embedder(
        &mut self,
        embedder: std::result::Result<Option<Arc<dyn Embed>>, String>,
    ) {
        match self {
            Store::Embedded(f) => f.attach_embedder(embedder),
            Store::Postgres(f) => f.attach_embedder(embedder),
        }
    }

    /// Attaches the reranker and plugin retrievers of the refinement stages.
    pub fn attach_refiners(
        &mut self,
        reranker: Option<Arc<dyn Reranker>>,
        plugins: Vec<Arc<dyn PluginRetriever>>,
    ) {
        match self {
            Store::Embedded(f) => f.attach_refiners(reranker, plugins),
            Store::Postgres(f) => f.attach_refiners(reranker, plugins),
        }
    }

    /// The base settings, with the index-time values as indexed.
    pub fn settings(&self) -> &Settings {
        match self {
            Store::Embedded(f) => f.settings(),
            Store::Postgres(f) => f.settings(),
        }
    }

    /// The base settings with query-time overrides (`key=value`) applied; a key that shapes
    /// what was stored may only repeat the stored value.
    pub fn settings_with(&self, overrides: &[String]) -> Result<Settings> {
        Ok(match self {
            Store::Embedded(f) => f.settings_with(overrides)?,
            Store::Postgres(f) => f.settings_with(overrides)?,
        })
    }

    /// Runs a request through the whole pipeline.
    pub fn query(&self, request: &Query, settings: &Settings) -> Result<SearchResponse> {
        Ok(match self {
            Store::Embedded(f) => f.query(request, settings)?,
            Store::Postgres(f) => f.query(request, settings)?,
        })
    }

    /// Runs a text query (one page of `limit` hits from `offset`).
    pub fn search(
        &self,
        text: &str,
        settings: &Settings,
        offset: usize,
        limit: usize,
    ) -> Result<SearchResponse> {
        self.query(&Query::text(text, offset, limit), settings)
    }

    /// The request behind "sources like `id`".
    pub fn like_query(&self, id: &str, limit: usize) -> Result<Query> {
        Ok(match self {
            Store::Embedded(f) => f.like_query(id, limit)?,
            Store::Postgres(f) => f.like_query(id, limit)?,
        })
    }

    /// A source by id, as hits show it.
    pub fn source(&self, id: &str) -> Result<Option<SourceView>> {
        Ok(match self {
            Store::Embedded(f) => f.source(id)?,
            Store::Postgres(f) => f.source(id)?,
        })
    }

    /// A source with its passages in source order, numbered by their lines.
    pub fn source_text(&self, id: &str) -> Result<Option<SourceText>> {
        Ok(match self {
            Store::Embedded(f) => f.source_text(id)?,
            Store::Postgres(f) => f.source_text(id)?,
        })
    }

    /// What the store holds now.
    pub fn status(&self) -> Result<Status> {
        Ok(match self {
            Store::Embedded(f) => Status::Embedded(Box::new(f.status()?)),
            Store::Postgres(f) => Status::Postgres(PgStatus::read(f)?),
        })
    }

    /// The embedding model attached for queries, which an index run into PostgreSQL embeds
    /// with too (the embedded index builds its vectors in a separate step).
    pub fn embedder(&self) -> Option<Arc<dyn Embed>> {
        match self {
            Store::Embedded(_) => None,
            Store::Postgres(f) => f.embedder(),
        }
    }
}

/// What a store holds, as `finder status --json` and the API's status show it.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Status {
    Embedded(Box<finder_index::Status>),
    Postgres(PgStatus),
}

impl Status {
    pub fn sources(&self) -> u64 {
        match self {
            Status::Embedded(s) => s.sources,
            Status::Postgres(s) => s.sources,
        }
    }

    /// Runs so far that changed what the store holds (the latest shard's, over PostgreSQL).
    pub fn generation(&self) -> u64 {
        match self {
            Status::Embedded(s) => s.generation,
            Status::Postgres(s) => s.generation,
        }
    }

    /// The inputs indexed so far, as given to `finder index`.
    pub fn origins(&self) -> &[String] {
        match self {
            Status::Embedded(s) => &s.origins,
            Status::Postgres(s) => &s.origins,
        }
    }

    /// When the last run committed, in seconds since the Unix epoch.
    pub fn committed_at(&self) -> u64 {
        match self {
            Status::Embedded(s) => s.committed_at,
            Status::Postgres(s) => s.committed_at,
        }
    }
}

/// The shards of a PostgreSQL store, summed, with each shard's run record.
#[derive(Debug, Clone, Serialize)]
pub struct PgStatus {
    /// Always `"postgres"`: tells this status from an embedded index's.
    pub backend: &'static str,
    pub sources: u64,
    pub fragments: u64,
    /// The latest shard's commit and generation.
    pub committed_at: u64,
    pub generation: u64,
    pub origins: Vec<String>,
    /// Whether the graph stored on shard 0 was built from the last run (`None`: none is
    /// stored).
    pub graph: Option<finder_index::GraphStatus>,
    pub shards: Vec<RunRecord>,
}

impl PgStatus {
    /// The shards' state, read now.
    pub fn read(finder: &PgFinder) -> Result<PgStatus> {
        let (records, graph_key) = finder.read_status()?;
        Ok(PgStatus::of(records, graph_key, &finder.settings().graph))
    }

    fn of(
        shards: Vec<RunRecord>,
        graph_key: Option<String>,
        g: &finder_core::GraphSettings,
    ) -> PgStatus {
        let generation = shards.iter().map(|r| r.generation).max().unwrap_or(0);
        // As the embedded index tells them: built from the last run, and with which settings.
        let graph = graph_key.map(|key| {
            let (current, other_settings) = finder_index::graph::key_freshness(&key, g, generation);
            finder_index::GraphStatus {
                current,
                other_settings,
            }
        });
        PgStatus {
            backend: "postgres",
            graph,
            sources: shards.iter().map(|r| r.sources).sum(),
            fragments: shards.iter().map(|r| r.fragments).sum(),
            committed_at: shards.iter().map(|r| r.committed_at).max().unwrap_or(0),
            generation: shards.iter().map(|r| r.generation).max().unwrap_or(0),
            origins: shards
                .first()
                .map(|r| r.origins.clone())
                .unwrap_or_default(),
            shards,
        }
    }
}

/// What an indexing run did, in either store.
#[derive(Debug)]
pub enum RunReport {
    Embedded(Box<finder_index::RunReport>),
    Postgres(PgRunReport),
}

impl RunReport {
    /// Inputs or sources the run could not take, with why.
    pub fn problems(&self) -> &[Problem] {
        match self {
            RunReport::Embedded(r) => &r.problems,
            RunReport::Postgres(r) => &r.problems,
        }
    }
}

/// Indexes `inputs` into the store `settings.storage` names (`dir` is the embedded index's
/// folder). PostgreSQL runs embed their fragments with `embedder` as they write them; the
/// embedded index builds its vectors afterwards (`finder_index::build_vectors`).
pub fn index_inputs(
    dir: &Path,
    inputs: &[PathBuf],
    settings: &Settings,
    embedder: Option<&dyn Embed>,
) -> Result<RunReport> {
    Ok(match settings.storage.backend {
        StorageBackend::Embedded => RunReport::Embedded(Box::new(finder_index::index_inputs(
            dir,
            inputs,
            settings,
            &mut |_| {},
        )?)),
        StorageBackend::Postgres => {
            let config = PgConfig::from_settings(&settings.storage)?;
            RunReport::Postgres(finder_pg::index_inputs_with(
                &config,
                inputs,
                settings,
                embedder,
                &mut |_| {},
            )?)
        }
    })
}
