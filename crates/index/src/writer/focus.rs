//! A run over the paths a file watcher reported, for any store: which notes of which input it
//! reads, and which stored sources it decides about. Everything else stays as stored.

use std::path::{Path, PathBuf};

use finder_core::IndexSettings;

use super::RunPlan;
use crate::document::{Problem, SourceDoc};
use crate::ingest;

/// The changed paths under each folder input, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Focus(Vec<Vec<PathBuf>>);

impl Focus {
    /// The focus of a run after `changed` paths (created, edited, renamed or deleted files and
    /// folders) under `inputs`; `None` when the run must read every input: a path not under a
    /// folder input, or an ignore file (its rules may take in or leave out anything).
    pub fn of(inputs: &[PathBuf], changed: &[PathBuf]) -> Option<Focus> {
        let folders: Vec<Option<PathBuf>> = inputs
            .iter()
            .map(|i| i.canonicalize().ok().filter(|c| c.is_dir()))
            .collect();
        let mut focus = vec![Vec::new(); inputs.len()];
        for path in changed {
            let ignore_file = path
                .file_name()
                .is_some_and(|n| ingest::IGNORE_FILES.iter().any(|f| n == *f));
            let at = folders
                .iter()
                .position(|f| f.as_ref().is_some_and(|f| path.starts_with(f) && path != f));
            match at {
                Some(at) if !ignore_file => focus[at].push(path.clone()),
                _ => return None,
            }
        }
        Some(Focus(focus))
    }

    /// The changed paths under each input.
    pub fn as_slice(&self) -> &[Vec<PathBuf>] {
        &self.0
    }

    /// Limits `plan` (made over `inputs`) to the sources at the changed paths: an input with
    /// no changed path keeps all its sources.
    pub fn limit(&self, plan: &mut RunPlan, inputs: &[PathBuf]) {
        limit(plan, inputs, &self.0);
    }
}

pub(super) fn limit(plan: &mut RunPlan, inputs: &[PathBuf], focus: &[Vec<PathBuf>]) {
    for ((input, origin), paths) in inputs.iter().zip(plan.origins.clone()).zip(focus) {
        let root = input.canonicalize().unwrap_or_else(|_| input.clone());
        let ids = paths.iter().map(|p| ingest::relative(&root, p)).collect();
        plan.limit_to(&origin, ids);
    }
}

/// [`crate::read_input`] of the notes at `paths` under the folder `input` only (those its walk
/// would find, in the walk's order); every source of the input when `paths` is `None`.
pub fn read_input_at(
    input: &Path,
    paths: Option<&[PathBuf]>,
    origin: &str,
    settings: &IndexSettings,
    sink: &mut dyn FnMut(Result<SourceDoc, Problem>),
) -> Result<(), Problem> {
    match paths {
        Some(paths) => {
            ingest::read_notes_at(input, paths, origin, settings, sink);
            Ok(())
        }
        None => ingest::read_input(input, origin, settings, sink).map(|_| ()),
    }
}
