//! `finder watch` and `finder serve --watch`: index again whenever the inputs change.
//!
//! After events, a run reads only the changed paths (`Follower::index_changed`, or
//! `finder_pg::index_changed` over PostgreSQL); the first run, a rescan and a run after lost
//! events read every file (finder_index::watch says why). A watch's runs into an embedded index
//! share a `Follower`, which keeps the source records and the graph's parts in memory from one
//! run to the next. The vectors of what changed are built on a thread of their own, so the next
//! lexical run never waits for embedding; requests made during a build make one more build
//! after it (over PostgreSQL a run embeds what it writes). A run that finds the index busy
//! (another writer) is retried; over PostgreSQL a run waits up to a minute for another node's.
//! After a run that failed, the next change reads every input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use finder_core::{Settings, StorageBackend};
use finder_index::watch::{Changes, Trigger};
use finder_index::{Follower, IndexError, Problem, RunCounts};
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
    let mut target = match settings.storage.backend {
        StorageBackend::Embedded => Target::embedded(),
        StorageBackend::Postgres => {
            // Over PostgreSQL a run embeds as it writes, with the model a served space's API
            // writes use.
            let models = Arc::new(models::ModelCache::default());
            let load: finder_server::Models =
                Arc::new(move |settings| models.get(&settings.embed).ok().flatten());
            let space = Space::new("watch", index, config)?.with_models(load);
            Target::postgres(Arc::new(space))
        }
    };
    // Watching starts before the first run, so nothing saved during it is missed.
    let changes = Changes::new(inputs, index, timing.debounce, timing.rescan)
        .with_context(|| format!("watching the inputs of {}", index.display()))?;
    let fixed = settings.clone();
    let vectors = target.builds_vectors().then(|| {
        vector_builder(
            index.to_path_buf(),
            move || Ok(fixed.clone()),
            String::new(),
        )
    });
    let (line, _) = run_logged(&mut target, index, inputs, &settings, None)?;
    println!("{line}");
    if let Some(vectors) = &vectors {
        let _ = vectors.send(());
    }
    println!(
        "watching {} input(s) for {} (Ctrl-C stops)",
        inputs.len(),
        index.display()
    );
    while let Some(trigger) = changes.wait() {
        match run_logged(&mut target, index, inputs, &settings, Some(&trigger)) {
            Ok((line, changed)) => {
                println!("{line}");
                if let Some(vectors) = vectors.as_ref().filter(|_| changed) {
                    let _ = vectors.send(());
                }
            }
            // A failed run is reported and the next change reads every input: what was
            // indexed before stays as it was, and the failed run's changes are not lost.
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
            .origins()
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
    // Both loops read the space's settings afresh for each run, so an edited finder.toml
    // applies to the next lexical run and the next vector build alike.
    let of_space = Arc::clone(&space);
    let vectors = vector_builder(
        space.dir().to_path_buf(),
        move || Ok(of_space.base_settings()?),
        format!("space {}: ", space.name()),
    );
    std::thread::Builder::new()
        .name(format!("watch {}", space.name()))
        .spawn(move || {
            let mut target = match space.backend() {
                StorageBackend::Embedded => Target::embedded(),
                StorageBackend::Postgres => Target::postgres(Arc::clone(&space)),
            };
            while let Some(trigger) = changes.wait() {
                let settings = match space.base_settings() {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("finder serve: space {}: {e}", space.name());
                        target.missed();
                        continue;
                    }
                };
                let outcome = {
                    let _writes = space.write_lock();
                    let dir = space.dir();
                    run_logged(&mut target, dir, &inputs, &settings, Some(&trigger))
                };
                match outcome {
                    Ok((line, changed)) => {
                        println!("space {}: {line}", space.name());
                        if changed && target.builds_vectors() {
                            let _ = vectors.send(());
                        }
                    }
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

/// A thread that builds the vectors of `index` whenever asked, with the settings `settings`
/// gives at that moment; asks made during a build are served by one build after it. Builds
/// of one index never overlap, in this process or across processes (`build_vectors` holds a
/// lock).
fn vector_builder(
    index: PathBuf,
    settings: impl Fn() -> Result<Settings> + Send + 'static,
    label: String,
) -> Sender<()> {
    let (tx, rx) = channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("vectors".to_string())
        .spawn(move || {
            while rx.recv().is_ok() {
                while rx.try_recv().is_ok() {}
                match settings().and_then(|s| models::build(&index, &s)) {
                    Ok(outcome) => println!("{label}{}", render::vector_report(&outcome)),
                    Err(e) => eprintln!(
                        "warning: {label}building vectors in {}: {e:#}",
                        index.display()
                    ),
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("warning: no vector builds while watching: {e}");
    }
    tx
}

/// What a watch runs into, and whether its last run failed: the failed run's changed paths
/// are not reported again, so the next run reads every input.
struct Target {
    store: Store,
    failed: bool,
}

enum Store {
    /// An embedded index, with what its runs keep for the next one.
    Embedded(Follower),
    /// The shards of a PostgreSQL space.
    Postgres(Arc<Space>),
}

impl Target {
    fn embedded() -> Target {
        Target {
            store: Store::Embedded(Follower::default()),
            failed: false,
        }
    }

    fn postgres(space: Arc<Space>) -> Target {
        Target {
            store: Store::Postgres(space),
            failed: false,
        }
    }

    /// A change that no run took: the next run reads every input.
    fn missed(&mut self) {
        self.failed = true;
    }

    /// Whether vectors are built after a run (over PostgreSQL a run embeds as it writes).
    fn builds_vectors(&self) -> bool {
        matches!(self.store, Store::Embedded(_))
    }

    /// One run after `changed` paths (`None`: over every input): what it counted, and the
    /// problems it met.
    fn run(
        &mut self,
        index: &Path,
        inputs: &[PathBuf],
        settings: &Settings,
        changed: Option<&[PathBuf]>,
    ) -> Result<(RunCounts, Vec<Problem>)> {
        let changed = changed.filter(|_| !self.failed);
        self.failed = true;
        let outcome = match &mut self.store {
            Store::Embedded(follower) => {
                let mut tries = 0;
                loop {
                    let run = match changed {
                        Some(paths) => {
                            follower.index_changed(index, inputs, paths, settings, &mut |_| {})
                        }
                        None => follower.index_inputs(index, inputs, settings, &mut |_| {}),
                    };
                    match run {
                        Err(IndexError::Busy(_)) if tries < BUSY_TRIES => {
                            tries += 1;
                            std::thread::sleep(BUSY_RETRY);
                        }
                        other => {
                            let report = other
                                .with_context(|| format!("indexing into {}", index.display()))?;
                            break (report.counts, report.problems);
                        }
                    }
                }
            }
            // A run waits for another node's run itself (its write lock), up to a minute.
            Store::Postgres(space) => {
                let report = finder_server::index_pg_inputs(space, inputs, changed)
                    .with_context(|| format!("indexing into the shards of {}", index.display()))?;
                (report.counts, report.problems)
            }
        };
        self.failed = false;
        Ok(outcome)
    }
}

/// One lexical run for `trigger` (none: the first run), retried while another writer holds
/// the index: a one-line account of it, and whether it changed anything.
fn run_logged(
    target: &mut Target,
    index: &Path,
    inputs: &[PathBuf],
    settings: &Settings,
    trigger: Option<&Trigger>,
) -> Result<(String, bool)> {
    let started = Instant::now();
    let why = trigger.map_or_else(|| "first run".to_string(), why);
    let changed = match trigger {
        Some(Trigger::Changed(paths)) => Some(paths.as_slice()),
        _ => None,
    };
    let (c, problems) = target.run(index, inputs, settings, changed)?;
    for problem in &problems {
        eprintln!("warning: {problem}");
    }
    let line = format!(
        "{why}: {} added, {} updated, {} removed ({:.2} s)",
        c.added,
        c.updated,
        c.removed,
        started.elapsed().as_secs_f64()
    );
    Ok((line, c.added + c.updated + c.removed > 0))
}
