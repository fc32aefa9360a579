//! The store a command queries, embedded or PostgreSQL, opened with its embedding model,
//! reranker and plugins attached.

use std::path::Path;
use std::sync::Arc;

use crate::models::ModelCache;

use anyhow::Result;
use finder_core::Settings;
use finder_index::Finder;

/// Opens an index for queries with the configured embedding model attached (or the reason it
/// is unavailable, which queries report as a degraded vector channel).
pub fn open(index: &Path, settings: Settings) -> Result<Finder> {
    open_cached(&ModelCache::default(), index, settings)
}

/// Like [`open`], with the model taken from (or added to) `cache`.
pub fn open_cached(cache: &ModelCache, index: &Path, settings: Settings) -> Result<Finder> {
    let embedder = cache.get(&settings.embed);
    let reranker = finder_embed::reranker(&settings.refine, embedder.clone().ok().flatten());
    let plugins = finder_embed::plugins(&settings.refine);
    let mut finder = Finder::open(index, settings)?;
    finder.attach_embedder(embedder);
    finder.attach_refiners(reranker, plugins);
    Ok(finder)
}

/// Re-attaches the reranker and plugins when per-query overrides changed them (`--set
/// refine.rerank=local`); the embedding model is loaded again only for the local reranker.
pub fn attach_refiners(finder: &mut Finder, settings: &Settings) {
    if let Some(r) = changed_refiners(settings, finder.settings()) {
        finder.attach_refiners(r.reranker, r.plugins);
    }
}

/// A reranker and the plugin retrievers, as stores attach them.
struct Refiners {
    reranker: Option<Arc<dyn finder_core::Reranker>>,
    plugins: Vec<Arc<dyn finder_core::PluginRetriever>>,
}

/// The reranker and plugins for `settings` when they differ from the ones made for `base`
/// (the settings a store was opened with); `None` when those still serve.
fn changed_refiners(settings: &Settings, base: &Settings) -> Option<Refiners> {
    let (now, base) = (&settings.refine, &base.refine);
    let same = now.rerank == base.rerank
        && now.rerank_url == base.rerank_url
        && now.rerank_model == base.rerank_model
        && now.timeout_ms == base.timeout_ms
        && now.plugins == base.plugins;
    if same {
        return None;
    }
    let embedder = match now.rerank {
        finder_core::RerankBackend::Local => finder_embed::load(&settings.embed).ok().flatten(),
        _ => None,
    };
    Some(Refiners {
        reranker: finder_embed::reranker(now, embedder),
        plugins: finder_embed::plugins(now),
    })
}

/// The store a command queries: the index folder, or PostgreSQL when `storage.backend =
/// "postgres"` (the folder then only holds `finder.toml`).
pub enum Store {
    Embedded(Box<Finder>),
    Postgres(Box<finder_pg::PgFinder>),
}

impl Store {
    /// Opens the store `settings` name, with the embedding model, reranker and plugins
    /// attached.
    pub fn open(index: &Path, settings: Settings) -> Result<Store> {
        if settings.storage.backend == finder_core::StorageBackend::Embedded {
            return open(index, settings).map(|f| Store::Embedded(Box::new(f)));
        }
        let config = finder_pg::PgConfig::from_settings(&settings.storage)?;
        let embedder = ModelCache::default().get(&settings.embed);
        let reranker = finder_embed::reranker(&settings.refine, embedder.clone().ok().flatten());
        let plugins = finder_embed::plugins(&settings.refine);
        let mut finder = finder_pg::PgFinder::open(&config, settings)?;
        finder.attach_embedder(embedder);
        finder.attach_refiners(reranker, plugins);
        Ok(Store::Postgres(Box::new(finder)))
    }

    pub fn settings_with(&self, overrides: &[String]) -> Result<Settings> {
        Ok(match self {
            Store::Embedded(f) => f.settings_with(overrides)?,
            Store::Postgres(f) => f.settings_with(overrides)?,
        })
    }

    /// Re-attaches the reranker and plugins when overrides changed them.
    pub fn attach_refiners(&mut self, settings: &Settings) {
        match self {
            Store::Embedded(f) => attach_refiners(f, settings),
            Store::Postgres(f) => {
                if let Some(r) = changed_refiners(settings, f.settings()) {
                    f.attach_refiners(r.reranker, r.plugins);
                }
            }
        }
    }

    pub fn query(
        &self,
        request: &finder_core::Query,
        settings: &Settings,
    ) -> Result<finder_core::SearchResponse> {
        Ok(match self {
            Store::Embedded(f) => f.query(request, settings)?,
            Store::Postgres(f) => f.query(request, settings)?,
        })
    }

    pub fn like_query(&self, id: &str, limit: usize) -> Result<finder_core::Query> {
        Ok(match self {
            Store::Embedded(f) => f.like_query(id, limit)?,
            Store::Postgres(f) => f.like_query(id, limit)?,
        })
    }
}
