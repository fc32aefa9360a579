//! Opening a store for a command with its embedding model, reranker and plugins attached.

use std::path::Path;
use std::sync::Arc;

use crate::models::ModelCache;

use anyhow::Result;
use finder_core::Settings;
use finder_store::Store;

/// Opens the store `settings` name (an index folder, or PostgreSQL) for queries, with the
/// configured embedding model attached (or the reason it is unavailable, which queries report
/// as a degraded vector channel).
pub fn open(index: &Path, settings: Settings) -> Result<Store> {
    Ok(open_cached(&ModelCache::default(), index, settings)?)
}

/// Like [`open`], with the model taken from (or added to) `cache`.
pub fn open_cached(
    cache: &ModelCache,
    index: &Path,
    settings: Settings,
) -> finder_store::Result<Store> {
    let embedder = cache.get(&settings.embed);
    let reranker = finder_embed::reranker(&settings.refine, embedder.clone().ok().flatten());
    let plugins = finder_embed::plugins(&settings.refine);
    let mut store = Store::open(index, settings)?;
    store.attach_embedder(embedder);
    store.attach_refiners(reranker, plugins);
    Ok(store)
}

/// Re-attaches the reranker and plugins when per-query overrides changed them (`--set
/// refine.rerank=local`); the embedding model is loaded again only for the local reranker.
pub fn attach_refiners(store: &mut Store, settings: &Settings) {
    if let Some(r) = changed_refiners(settings, store.settings()) {
        store.attach_refiners(r.reranker, r.plugins);
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
