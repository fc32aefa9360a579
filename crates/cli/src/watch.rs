//! `finder watch` and `finder serve --watch`: index again whenever the inputs change.
//!
//! Each run is the ordinary incremental `finder index` (finder_index::watch says why), then the
//! vectors of what changed. A run that finds the index busy (another writer) is retried.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use finder_core::Settings;
use finder_index::watch::{Changes, Trigger};
use finder_index::{index_inputs, IndexError};
use finder_server::Space;

use crate::{models, render};

/// How long to wait before retrying a run that found the index busy, and how often.
const BUSY_RETRY: Duration = Duration::from_millis(500);
const BUSY_TRIES: u32 = 20;

/// When to run: the debounce and the fallback rescan (`None`: events only).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub debounce: Duration,
    pub rescan: Option<Duration>,
}

/// `finder watch`: one run now, then one per change until Ctrl-C (or the watcher fails).
pub fn watch(
    inputs: &[PathBuf],
    index: &Path,
    config: Option<&Path>,
    timing: Timing,
) -> Result<ExitCode> {
    let settings = finder_index::load_settings(index, config)?;
    if settings.storage.backend != finder_core::StorageBackend::Embedded {
        anyhow::bail!(
            "`finder watch` follows files into an embedded index only so far (storage.backend = \"postgres\"); run `finder index` after changes instead"
        );
    }
    // Watching starts before the first run, so nothing saved during it is missed.
    let changes = Changes::new(inputs, index, timing.debounce, timing.rescan)
        .with_context(|| format!("watching the inputs of {}", index.display()))?;
    println!(
        "{}",
        run_logged(index, inputs, &settings, "first run", true)?
    );
    println!(
        "watching {} input(s) for {} (Ctrl-C stops)",
        inputs.len(),
        index.display()
    );
    while let Some(trigger) = changes.wait() {
        match run_logged(index, inputs, &settings, &why(&trigger), false) {
            Ok(line) => println!("{line}"),
            // A failed run is reported and the next change tries again: what was indexed
            // before stays as it was.
            Err(e) => eprintln!("warning: {e:#}"),
        }
    }
    anyhow::bail!("the file watcher stopped")
}

/// `serve --watch`: a thread per space that follows the inputs the space was indexed from,
/// holding the space's write lock during each run (API writes wait for it, and it for them).
pub fn follow(space: Arc<Space>, timing: Timing) -> Result<Option<String>> {
    let inputs: Vec<PathBuf> = match space.finder() {
        Ok(finder) => finder
            .status()?
            .origins
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect(),
        Err(_) => Vec::new(),
    };
    if inputs.is_empty() {
        return Ok(None);
    }
    let changes = Changes::new(&inputs, space.dir(), timing.debounce, timing.rescan)?;
    let said = format!(
        "follows {}",
        inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::thread::Builder::new()
        .name(format!("watch {}", space.name()))
        .spawn(move || {
            while let Some(trigger) = changes.wait() {
                let settings = match space.base_settings() {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("finder serve: space {}: {e}", space.name());
                        continue;
                    }
                };
                let _writes = space.write_lock();
                match run_logged(space.dir(), &inputs, &settings, &why(&trigger), false) {
                    Ok(line) => println!("space {}: {line}", space.name()),
                    Err(e) => eprintln!("finder serve: space {}: {e:#}", space.name()),
                }
            }
        })?;
    Ok(Some(said))
}

/// What a trigger says in the log line.
fn why(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Changed(paths) => {
            let first = paths[0].display();
            match paths.len() {
                1 => format!("{first} changed"),
                n => format!("{first} and {} more changed", n - 1),
            }
        }
        Trigger::Rescan => "rescan".to_string(),
        Trigger::Lost(e) => format!("events may be lost ({e}); catching up"),
    }
}

/// One run, retried while another writer holds the index; a one-line account of it. The
/// vectors are built when something changed, or always with `vectors`.
fn run_logged(
    index: &Path,
    inputs: &[PathBuf],
    settings: &Settings,
    why: &str,
    vectors: bool,
) -> Result<String> {
    let started = Instant::now();
    let mut tries = 0;
    let report = loop {
        match index_inputs(index, inputs, settings, &mut |_| {}) {
            Err(IndexError::Busy(_)) if tries < BUSY_TRIES => {
                tries += 1;
                std::thread::sleep(BUSY_RETRY);
            }
            other => break other.with_context(|| format!("indexing into {}", index.display()))?,
        }
    };
    for problem in &report.problems {
        eprintln!("warning: {problem}");
    }
    let lexical = started.elapsed().as_secs_f64();
    let c = report.counts;
    let mut line = format!(
        "{why}: {} added, {} updated, {} removed ({:.2} s)",
        c.added, c.updated, c.removed, lexical
    );
    if vectors || c.added + c.updated + c.removed > 0 {
        let vectors = models::build(index, settings)
            .with_context(|| format!("building vectors in {}", index.display()))?;
        line.push_str("; ");
        line.push_str(&render::vector_report(&vectors));
    }
    Ok(line)
}
