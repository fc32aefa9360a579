//! The semantic layer from the command line: opening an index with its embedding model,
//! building vectors after a lexical commit, and installing the model.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use finder_core::{Embed, EmbedBackend, EmbedSettings, Settings};
use finder_index::{build_vectors, Finder, VectorProgress, VectorReport};
use indicatif::{ProgressBar, ProgressStyle};

/// Opens an index for queries with the configured embedding model attached (or the reason it
/// is unavailable, which queries report as a degraded vector channel).
pub fn open(index: &Path, settings: Settings) -> Result<Finder> {
    open_cached(&ModelCache::default(), index, settings)
}

/// A loaded embedding model with the settings it was loaded for.
type Loaded = (EmbedSettings, Arc<dyn Embed>);

/// Embedding models loaded once and shared by every reopen of an index: a server reopens a
/// space after each commit, and loading the model each time would cost every write.
/// Failures are not cached, so a model installed later is picked up.
#[derive(Default)]
pub struct ModelCache(Mutex<Vec<Loaded>>);

impl ModelCache {
    fn get(&self, settings: &EmbedSettings) -> std::result::Result<Option<Arc<dyn Embed>>, String> {
        let mut loaded = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, model)) = loaded.iter().find(|(s, _)| s == settings) {
            return Ok(Some(Arc::clone(model)));
        }
        let model = finder_embed::load(settings)?;
        if let Some(m) = &model {
            loaded.push((settings.clone(), Arc::clone(m)));
        }
        Ok(model)
    }
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
    if let Some((reranker, plugins)) = changed_refiners(settings, finder.settings()) {
        finder.attach_refiners(reranker, plugins);
    }
}

/// A reranker and the plugin retrievers, as stores attach them.
type Refiners = (
    Option<Arc<dyn finder_core::Reranker>>,
    Vec<Arc<dyn finder_core::PluginRetriever>>,
);

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
    Some((
        finder_embed::reranker(now, embedder),
        finder_embed::plugins(now),
    ))
}

/// What happened to the vector layer during `finder index`.
pub enum VectorOutcome {
    Built(VectorReport),
    /// The semantic layer is off or unavailable; lexical search works regardless.
    Skipped(String),
}

/// Builds the vectors after the lexical commit, with a progress bar on a terminal.
pub fn build(index: &Path, settings: &Settings) -> Result<VectorOutcome> {
    if settings.embed.backend == EmbedBackend::None {
        return Ok(VectorOutcome::Skipped("embed.backend = \"none\"".into()));
    }
    let embedder = match finder_embed::Embedder::from_settings(&settings.embed) {
        Ok(Some(e)) => e,
        Ok(None) => return Ok(VectorOutcome::Skipped("embed.backend = \"none\"".into())),
        Err(e) => return Ok(VectorOutcome::Skipped(e.to_string())),
    };
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "vectors: {msg} {bar:30} {pos}/{len} · {per_sec} · eta {eta}",
            )
            .expect("valid template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut phase = "";
    let report = build_vectors(index, settings, &embedder, &mut |p| {
        let (name, done, total) = match p {
            VectorProgress::Embedding { done, total } => ("embedding fragments", done, total),
            VectorProgress::Graph { done, total } => ("building the ANN graph", done, total),
        };
        if name != phase {
            // a new phase starts its own count and rate
            phase = name;
            bar.reset();
            bar.set_message(name);
        }
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    Ok(VectorOutcome::Built(report))
}

/// `finder model install`: fetches the MiniLM model into `dir` (default data folder).
pub fn install(dir: Option<&Path>) -> Result<()> {
    let dir = dir.map_or_else(finder_embed::default_model_dir, Path::to_path_buf);
    finder_embed::install_minilm(&dir, &mut |msg| eprintln!("{msg}"))?;
    Ok(())
}

/// `finder model distill`: a static model from the MiniLM folder.
pub fn distill(from: Option<&Path>, to: Option<&Path>, dims: usize) -> Result<()> {
    let from = from.map_or_else(finder_embed::default_model_dir, Path::to_path_buf);
    let to = to.map_or_else(finder_embed::default_static_dir, Path::to_path_buf);
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("distilling {bar:30} {pos}/{len} tokens · eta {eta}")
                .expect("valid template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let report = finder_embed::distill(&from, &to, dims, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    println!(
        "static model: {} tokens × {} dims in {:.1} s ({:.1}% of the variance kept) → {}",
        report.tokens,
        report.dims,
        report.seconds,
        report.explained_variance * 100.0,
        report.dir.display()
    );
    println!("use it with `[embed] backend = \"static\"` (model_dir defaults to that folder)");
    Ok(())
}

/// Reads a query vector given as a JSON array or `@FILE` holding one.
pub fn parse_vector(arg: &str) -> Result<Vec<f32>> {
    let (text, place) = match arg.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--vector {path}: {e}"))?,
            path.to_string(),
        ),
        None => (arg.to_string(), "--vector".to_string()),
    };
    let values: Vec<f64> = serde_json::from_str(text.trim())
        .map_err(|e| anyhow::anyhow!("{place}: expected a JSON array of numbers ({e})"))?;
    if values.is_empty() || values.iter().any(|x| !x.is_finite()) {
        anyhow::bail!("{place}: expected a non-empty array of finite numbers");
    }
    Ok(values.into_iter().map(|x| x as f32).collect())
}

/// The store a command queries: the index folder, or PostgreSQL when `storage.backend =
/// "postgres"` (the folder then only holds `finder.toml`).
pub enum Engine {
    Embedded(Box<Finder>),
    Postgres(Box<finder_pg::PgFinder>),
}

impl Engine {
    /// Opens the store `settings` name, with the embedding model, reranker and plugins
    /// attached.
    pub fn open(index: &Path, settings: Settings) -> Result<Engine> {
        if settings.storage.backend == finder_core::StorageBackend::Embedded {
            return open(index, settings).map(|f| Engine::Embedded(Box::new(f)));
        }
        let config = finder_pg::PgConfig::from_settings(&settings.storage)?;
        let embedder = ModelCache::default().get(&settings.embed);
        let reranker = finder_embed::reranker(&settings.refine, embedder.clone().ok().flatten());
        let plugins = finder_embed::plugins(&settings.refine);
        let mut finder = finder_pg::PgFinder::open(&config, settings)?;
        finder.attach_embedder(embedder);
        finder.attach_refiners(reranker, plugins);
        Ok(Engine::Postgres(Box::new(finder)))
    }

    pub fn settings_with(&self, overrides: &[String]) -> Result<Settings> {
        Ok(match self {
            Engine::Embedded(f) => f.settings_with(overrides)?,
            Engine::Postgres(f) => f.settings_with(overrides)?,
        })
    }

    /// Re-attaches the reranker and plugins when overrides changed them.
    pub fn attach_refiners(&mut self, settings: &Settings) {
        match self {
            Engine::Embedded(f) => attach_refiners(f, settings),
            Engine::Postgres(f) => {
                if let Some((reranker, plugins)) = changed_refiners(settings, f.settings()) {
                    f.attach_refiners(reranker, plugins);
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
            Engine::Embedded(f) => f.query(request, settings)?,
            Engine::Postgres(f) => f.query(request, settings)?,
        })
    }

    pub fn like_query(&self, id: &str, limit: usize) -> Result<finder_core::Query> {
        Ok(match self {
            Engine::Embedded(f) => f.like_query(id, limit)?,
            Engine::Postgres(f) => f.like_query(id, limit)?,
        })
    }
}
