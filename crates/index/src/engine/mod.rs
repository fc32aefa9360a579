//! An opened index: its settings and snapshots. `query.rs` answers queries over a snapshot,
//! `status.rs` tells what the index holds, `read.rs` reads a source back.
//!
//! Each query takes one searcher (an immutable snapshot): it never sees half a commit, and
//! nothing a query does writes to the index.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_core::{Embed, FastMap, Settings};
use serde::Serialize;
use tantivy::{Index, IndexReader, ReloadPolicy};

use crate::error::{IndexError, Result};
use crate::files::LEXICAL_DIR;
use crate::pages::PageFile;
use crate::pread::PreadDirectory;
use crate::record::{CommitInfo, FORMAT};
use crate::schema::{register_analyzers, register_language_analyzers, resolve, Fields};
use crate::store_error;
use crate::stored::commit_info;
use crate::vector::{VectorIndex, VECTOR_DIR};

mod query;
mod read;
mod status;

pub use query::like_request;
use query::{KeyColumns, Seen};
pub use read::{Passage, SourceText};
pub use status::{GraphStatus, Status};

/// Name of the settings file looked up in the index folder.
pub const CONFIG_FILE: &str = "finder.toml";

/// Loads settings: defaults, then `config` (or `<index>/finder.toml` when present).
pub fn load_settings(index_dir: &Path, config: Option<&Path>) -> Result<Settings> {
    let path = match config {
        Some(p) => p.to_path_buf(),
        None => index_dir.join(CONFIG_FILE),
    };
    if config.is_none() && !path.exists() {
        return Ok(Settings::default());
    }
    let text = std::fs::read_to_string(&path).map_err(|source| IndexError::Io {
        path: path.clone(),
        source,
    })?;
    let mut settings = Settings::from_toml(&text, &path.display().to_string())?;
    // A relative certificate file is the config file's neighbour, wherever finder runs.
    let ca = Path::new(&settings.storage.tls_ca);
    if let (false, true, Some(folder)) = (
        settings.storage.tls_ca.is_empty(),
        ca.is_relative(),
        path.parent(),
    ) {
        settings.storage.tls_ca = folder.join(ca).display().to_string();
    }
    Ok(settings)
}

/// The query-side embedding model.
enum Semantic {
    /// None attached: the library user did not ask for one.
    Detached,
    /// `embed.backend = "none"`.
    Off,
    /// Configured but unusable; the reason is shown in diagnostics.
    Unavailable(String),
    Ready(Arc<dyn Embed>),
}

/// Something derived from one searcher generation, made by the first query that needs it and
/// shared by the others until the generation changes.
struct PerGeneration<T>(std::sync::Mutex<Option<(u64, Arc<T>)>>);

impl<T> Default for PerGeneration<T> {
    fn default() -> Self {
        PerGeneration(std::sync::Mutex::new(None))
    }
}

impl<T> PerGeneration<T> {
    /// The value for `generation`, made with `make` when the one held is missing or older.
    /// Queries that need it meanwhile wait for it rather than make it twice.
    fn get(&self, generation: u64, make: impl FnOnce() -> Result<T>) -> Result<Arc<T>> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, value)) = held.as_ref() {
            if *g == generation {
                return Ok(Arc::clone(value));
            }
        }
        let value = Arc::new(make()?);
        *held = Some((generation, Arc::clone(&value)));
        Ok(value)
    }
}

/// A Finder index opened for reading.
pub struct Finder {
    dir: PathBuf,
    /// The folder of `index`, for the files beside tantivy's own (page files).
    directory: PreadDirectory,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    info: CommitInfo,
    settings: Settings,
    vectors: std::result::Result<Option<VectorIndex>, String>,
    semantic: Semantic,
    graph: std::result::Result<Option<crate::graph::GraphIndex>, String>,
    /// Reranker, plugin retrievers and user profiles for the refinement stages.
    extensions: finder_core::Extensions,
    /// Where each fragment's document is, for the searcher generation it was read from.
    addresses: PerGeneration<FastMap<u64, Seen>>,
    /// The raw words' trigrams, for the searcher generation they were read from (built by the
    /// first query that expands a word).
    grams: PerGeneration<crate::expand::TermGrams>,
    /// Each segment's postings file, for the searcher generation they were opened in (kept
    /// open: a file mapped anew per query would be mapped and faulted in again each time).
    postings: PerGeneration<Vec<Option<crate::postings::PostingsFile>>>,
    /// Every segment's key columns, for the searcher generation they were opened from.
    columns: PerGeneration<Vec<KeyColumns>>,
    /// Every segment's page file where it has one, by segment ordinal, for the searcher
    /// generation they were opened from.
    pages: PerGeneration<Vec<Option<PageFile>>>,
}

/// Applies query-time overrides to `base`, the settings an index was opened with, whose
/// index-time values are `indexed`. Keys that shape what was stored (`index.*`, `embed.*`, the
/// graph's build keys, `storage.*`) may only repeat the stored value; every store uses this.
pub fn query_settings(
    base: &Settings,
    indexed: &finder_core::IndexSettings,
    overrides: &[String],
) -> Result<Settings> {
    let mut settings = base.clone();
    for o in overrides {
        settings.set(o)?;
        let embed_changed = settings.embed != base.embed;
        // The graph's build keys shape what `finder index` extracted.
        let graph_changed =
            crate::graph::build_key(&settings.graph, 0) != crate::graph::build_key(&base.graph, 0);
        let storage_changed = settings.storage != base.storage;
        if embed_changed || graph_changed || storage_changed || settings.index != *indexed {
            let key = o
                .split_once('=')
                .map_or(o.as_str(), |(k, _)| k.trim())
                .to_string();
            let indexed = if embed_changed {
                "the model the vectors were built with".to_string()
            } else if graph_changed {
                toml_value(&base.graph, &key)
            } else if storage_changed {
                "the store this index lives in".to_string()
            } else {
                toml_value(indexed, &key)
            };
            return Err(IndexError::IndexTimeSetting { key, indexed });
        }
    }
    Ok(settings)
}

impl Finder {
    /// Opens the index in `dir` with the given query-time settings as the base for queries.
    pub fn open(dir: &Path, settings: Settings) -> Result<Finder> {
        let path = dir.join(LEXICAL_DIR);
        if !path.join("meta.json").exists() {
            return Err(IndexError::NotFound(dir.to_path_buf()));
        }
        let directory = PreadDirectory::for_queries(&path, crate::pread::MAP_STORES_MAX_BYTES)
            .map_err(|e| store_error(dir, e))?;
        let index = Index::open(directory.clone()).map_err(|e| store_error(dir, e))?;
        let fields = resolve(&index.schema()).ok_or_else(|| IndexError::Corrupt {
            path: path.clone(),
            reason: "schema lacks Finder's fields".into(),
        })?;
        let info =
            commit_info(&index, dir)?.ok_or_else(|| IndexError::NotFound(dir.to_path_buf()))?;
        if info.format < FORMAT {
            return Err(IndexError::Outdated {
                path: dir.to_path_buf(),
                found: info.format,
                expected: FORMAT,
            });
        }
        register_analyzers(&index, &info.settings.language, info.analysis);
        register_language_analyzers(&index, &info.languages, info.analysis);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| store_error(dir, e))?;
        let mut settings = settings;
        settings.index = info.settings.clone();
        let extensions = finder_core::Extensions {
            profiles: crate::profiles::load(dir, &settings, &index)?,
            ..finder_core::Extensions::default()
        };
        // The graph before the vectors, and what its parse freed handed back in between: at a
        // million fragments the parse holds 0.55 GB for a moment and the loaded graph 0.22 GB,
        // so the difference passes below the vectors' 1.7 GB instead of on top of them
        // (docs/perf/query-open-memory.md).
        let graph = crate::graph::GraphIndex::load(dir);
        crate::tuning::release_free_memory();
        let vectors = VectorIndex::open(&dir.join(VECTOR_DIR)).map_err(|e| e.to_string());
        Ok(Finder {
            addresses: PerGeneration::default(),
            grams: PerGeneration::default(),
            postings: PerGeneration::default(),
            columns: PerGeneration::default(),
            pages: PerGeneration::default(),
            directory,
            dir: dir.to_path_buf(),
            index,
            reader,
            fields,
            info,
            settings,
            vectors,
            semantic: Semantic::Detached,
            graph,
            extensions,
        })
    }

    /// Attaches the query-side embedding model, as `finder_embed::load` returns it:
    /// `Ok(None)` when the semantic layer is off, `Err(reason)` when it is unavailable.
    pub fn attach_embedder(
        &mut self,
        embedder: std::result::Result<Option<Arc<dyn Embed>>, String>,
    ) {
        self.semantic = match embedder {
            Ok(Some(e)) => Semantic::Ready(e),
            Ok(None) => Semantic::Off,
            Err(reason) => Semantic::Unavailable(reason),
        };
    }

    /// Attaches the reranker and plugin retrievers of the refinement stages (built by the
    /// binaries from `[refine]`; user profiles are read at open).
    pub fn attach_refiners(
        &mut self,
        reranker: Option<Arc<dyn finder_core::Reranker>>,
        plugins: Vec<Arc<dyn finder_core::PluginRetriever>>,
    ) {
        self.extensions.reranker = reranker;
        self.extensions.plugins = plugins;
    }

    /// The base settings of this index (index-time values as indexed).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Applies `--set` overrides to a copy of the base settings. Index-time keys may only
    /// repeat the indexed value.
    pub fn settings_with(&self, overrides: &[String]) -> Result<Settings> {
        query_settings(&self.settings, &self.info.settings, overrides)
    }

    /// Picks up the latest commit (for long-lived readers such as a server).
    pub fn reload(&self) -> Result<()> {
        self.reader.reload().map_err(|e| store_error(&self.dir, e))
    }

    /// The underlying tantivy index (for tests and benchmarks that compare with tantivy).
    pub fn tantivy_index(&self) -> &Index {
        &self.index
    }
}

fn toml_value(settings: &impl Serialize, key: &str) -> String {
    let table = toml::Table::try_from(settings).unwrap_or_default();
    let leaf = key.rsplit('.').next().unwrap_or(key);
    table
        .get(leaf)
        .map_or_else(|| "?".to_string(), |v| v.to_string())
}
