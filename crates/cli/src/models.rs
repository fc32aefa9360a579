//! Embedding models from the command line: the cache that loads each model once, the vector
//! build after a lexical commit, `finder model install` and `finder model distill`.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use finder_core::{Embed, EmbedBackend, EmbedSettings, Settings};
use finder_index::{build_vectors, VectorProgress, VectorReport};
use indicatif::{ProgressBar, ProgressStyle};

/// A loaded embedding model with the settings it was loaded for.
struct Loaded {
    settings: EmbedSettings,
    model: Arc<dyn Embed>,
}

/// Embedding models loaded once and shared by every reopen of an index: a server reopens a
/// space after each commit, and loading the model each time would cost every write.
/// Failures are not cached, so a model installed later is picked up.
#[derive(Default)]
pub struct ModelCache(Mutex<Vec<Loaded>>);

impl ModelCache {
    /// The model `settings` name, loaded now or earlier; `Ok(None)` when there is none to
    /// load, `Err` with the reason it could not be loaded.
    pub fn get(
        &self,
        settings: &EmbedSettings,
    ) -> std::result::Result<Option<Arc<dyn Embed>>, String> {
        let mut loaded = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = loaded.iter().find(|l| l.settings == *settings) {
            return Ok(Some(Arc::clone(&l.model)));
        }
        let model = finder_embed::load(settings)?;
        if let Some(m) = &model {
            loaded.push(Loaded {
                settings: settings.clone(),
                model: Arc::clone(m),
            });
        }
        Ok(model)
    }
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
