//! Following the inputs: file-system notifications (the `notify` crate) turned into "run the
//! index again" triggers, with a periodic rescan for file systems that send none. A burst of
//! events becomes one trigger once the inputs have been quiet for the debounce time, or at the
//! latest [`MAX_WAIT_DEBOUNCES`] debounce times after its first event, so a steady stream of
//! saves still gets runs. Access events (a file opened or read, which every run itself
//! causes) are not changes.
//!
//! A trigger carries the changed paths; the run ([`crate::index_changed`]) reads only those
//! and removes what is gone there, writing what changed, so a burst of saves or a rename (its
//! fragments keep their vectors: they are keyed by text) needs no event-by-event bookkeeping
//! here. A changed ignore file, a rescan or lost events make a run over every file. The
//! watcher only decides when to run and where to look.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use crate::error::{IndexError, Result};

/// Default quiet time before a burst of events becomes one run.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);
/// Default interval of the fallback rescan.
pub const DEFAULT_RESCAN: Duration = Duration::from_secs(300);

/// A trigger waits at most this many debounce times after its first event.
pub const MAX_WAIT_DEBOUNCES: u32 = 10;

/// Why the inputs should be indexed again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Files changed under the inputs: the changed paths, sorted, each once.
    Changed(Vec<PathBuf>),
    /// The rescan interval passed without an event.
    Rescan,
    /// The watcher reported an error (events may have been lost); a run catches up.
    Lost(String),
}

/// The change feed of a set of inputs.
pub struct Changes {
    _watcher: RecommendedWatcher,
    /// The paths of each change event, or the watcher's error.
    events: Receiver<std::result::Result<Vec<PathBuf>, String>>,
    debounce: Duration,
    /// Paths whose events never count: the index folder (when it sits inside an input).
    index: PathBuf,
    /// Single-file inputs, whose folder is watched for them alone.
    files: Vec<PathBuf>,
    /// Folder inputs, watched recursively.
    folders: Vec<PathBuf>,
    rescan: Option<Duration>,
}

impl Changes {
    /// Starts watching `inputs` (folders recursively; a file through its folder, for editors
    /// that save by renaming a new file over the old one). Events inside `index` are ignored.
    pub fn new(
        inputs: &[PathBuf],
        index: &Path,
        debounce: Duration,
        rescan: Option<Duration>,
    ) -> Result<Changes> {
        let (tx, events) = channel();
        let handler = move |event: notify::Result<notify::Event>| {
            let sent = match event {
                Ok(e) if e.kind.is_access() => return,
                Ok(e) => tx.send(Ok(e.paths)),
                Err(e) => tx.send(Err(e.to_string())),
            };
            // The receiver is gone: the watch is over.
            let _ = sent;
        };
        let mut watcher = notify::recommended_watcher(handler).map_err(|e| IndexError::Io {
            path: index.to_path_buf(),
            source: std::io::Error::other(format!("cannot start watching: {e}")),
        })?;
        let (mut files, mut folders) = (Vec::new(), Vec::new());
        for input in inputs {
            let input = input.canonicalize().map_err(|source| IndexError::Io {
                path: input.clone(),
                source,
            })?;
            let (target, mode) = if input.is_dir() {
                folders.push(input.clone());
                (input.clone(), RecursiveMode::Recursive)
            } else {
                files.push(input.clone());
                let parent = input.parent().unwrap_or(Path::new("/")).to_path_buf();
                (parent, RecursiveMode::NonRecursive)
            };
            watcher.watch(&target, mode).map_err(|e| IndexError::Io {
                path: target.clone(),
                source: std::io::Error::other(format!("cannot watch: {e}")),
            })?;
        }
        let index = index.canonicalize().unwrap_or_else(|_| index.to_path_buf());
        Ok(Changes {
            _watcher: watcher,
            events,
            debounce,
            index,
            files,
            folders,
            rescan,
        })
    }

    /// Waits for the next reason to run: a batch of relevant changes followed by `debounce` of
    /// quiet (or [`MAX_WAIT_DEBOUNCES`] of them since its first change), the rescan interval,
    /// or a watcher error. `None` when the watcher is gone.
    pub fn wait(&self) -> Option<Trigger> {
        let deadline = self.rescan.map(|d| Instant::now() + d);
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut first: Option<Instant> = None;
        loop {
            // Before the first change: until the rescan is due. After it: until a quiet spell,
            // or the longest a change may wait.
            let timeout = match first {
                None => deadline.map(|at| at.saturating_duration_since(Instant::now())),
                Some(at) => {
                    let left = (at + self.debounce * MAX_WAIT_DEBOUNCES)
                        .saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    Some(self.debounce.min(left))
                }
            };
            let got = match timeout {
                Some(t) => match self.events.recv_timeout(t) {
                    Ok(got) => got,
                    Err(RecvTimeoutError::Timeout) if paths.is_empty() => {
                        return Some(Trigger::Rescan)
                    }
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return None,
                },
                None => self.events.recv().ok()?,
            };
            match got {
                Ok(changed) => {
                    paths.extend(changed.into_iter().filter(|p| self.counts(p)));
                    if !paths.is_empty() && first.is_none() {
                        first = Some(Instant::now());
                    }
                }
                Err(e) => return Some(Trigger::Lost(e)),
            }
        }
        paths.sort();
        paths.dedup();
        Some(Trigger::Changed(paths))
    }

    /// Whether an event at `path` can change what the inputs hold: a single-file input itself,
    /// or a path under a folder input that is not inside the index folder and not inside a
    /// hidden name (`.git`, `.obsidian`), ignore files excepted.
    fn counts(&self, path: &Path) -> bool {
        if path.starts_with(&self.index) {
            return false;
        }
        if self.files.iter().any(|f| f == path) {
            return true;
        }
        let Some(rel) = self.folders.iter().find_map(|d| path.strip_prefix(d).ok()) else {
            return false;
        };
        let parts: Vec<&str> = rel
            .components()
            .map(|c| c.as_os_str().to_str().unwrap_or(""))
            .collect();
        let hidden = |s: &&str| s.starts_with('.');
        match parts.split_last() {
            None => false,
            Some((name, folders)) => {
                !folders.iter().any(hidden)
                    && (!hidden(name) || crate::ingest::IGNORE_FILES.contains(name))
            }
        }
    }
}
