//! What an indexing run decides about its sources, whatever store it writes to: the inputs'
//! origins, whether a rebuild may go ahead, which sources are new, changed or unchanged, which
//! are gone from their input, and the run's counts and problems. The embedded writer and the
//! PostgreSQL one (`finder-pg`) both run this plan and differ only in how they write.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::document::{Problem, SourceDoc};
use crate::record::RunCounts;

/// One run's bookkeeping, from its inputs to its counts.
#[derive(Debug, Default)]
pub struct RunPlan {
    /// Each input, canonical, in the order given.
    pub origins: Vec<String>,
    /// Everything is rewritten: the index-time settings or the word analysis changed.
    pub rebuild: bool,
    pub counts: RunCounts,
    pub problems: Vec<Problem>,
    /// Ids this run's inputs hold (a source or a problem naming it): never removed.
    seen: HashSet<String>,
    /// Ids a source was read for: a second one is a duplicate.
    sourced: HashSet<String>,
    /// Inputs with a problem that hid which ids they hold: their sources are kept.
    incomplete: HashSet<String>,
    /// A run that read only some paths of its inputs decides only about the sources there:
    /// by origin, the ids (and the folders, as `id/` prefixes) it read. `None`: all.
    scope: Option<std::collections::HashMap<String, Vec<String>>>,
    /// Origins whose scope holds ids only, matched whole (record ids may hold `/`).
    exact: HashSet<String>,
}

/// What to do with a source that was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// The stored version has the same text and origin: nothing to write.
    Unchanged,
    /// Write it. `stored`: a version the store already holds is replaced; `first_in_run`:
    /// no earlier input of this run gave the same id (a later one replaces an earlier one).
    Write { stored: bool, first_in_run: bool },
}

impl RunPlan {
    /// Plans a run over `inputs`. `known` are the origins the store holds: a rebuild must be
    /// given every one of them, or it would drop what it was not given. `place` names the
    /// store in that error.
    pub fn new<'a>(
        inputs: &[PathBuf],
        rebuild: bool,
        known: impl IntoIterator<Item = &'a String>,
        place: &str,
    ) -> Result<RunPlan, Problem> {
        let mut origins = Vec::with_capacity(inputs.len());
        for input in inputs {
            let canonical = input.canonicalize().map_err(|e| Problem {
                place: input.display().to_string(),
                reason: format!("cannot read input: {e}"),
                source_id: None,
            })?;
            origins.push(canonical.display().to_string());
        }
        if rebuild {
            let missing: Vec<&str> = known
                .into_iter()
                .filter(|o| !origins.contains(o))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(Problem {
                    place: place.to_string(),
                    reason: format!(
                        "index-time settings or the word analysis changed, so the whole index \
                         is rebuilt; pass every input it holds (missing: {})",
                        missing.join(", ")
                    ),
                    source_id: None,
                });
            }
        }
        Ok(RunPlan {
            origins,
            rebuild,
            ..RunPlan::default()
        })
    }

    /// A problem reading `origin`: a source it names keeps its stored version; one that names
    /// none keeps every source of the input.
    pub fn problem(&mut self, origin: &str, problem: Problem) {
        match &problem.source_id {
            Some(id) => {
                self.seen.insert(id.clone());
            }
            None => {
                self.incomplete.insert(origin.to_string());
            }
        }
        self.problems.push(problem);
    }

    /// A source that was read but cannot be written (`reason`); its stored version is kept.
    pub fn reject(&mut self, source: &SourceDoc, reason: &str) {
        self.seen.insert(source.id.clone());
        self.problems.push(Problem {
            place: source.origin.clone(),
            reason: format!("source `{}`: {reason}", source.id),
            source_id: Some(source.id.clone()),
        });
    }

    /// Decides about a source that was read; `stored` is the `(hash, origin)` of the version
    /// the store holds, if any. Counts it as added, updated or unchanged.
    pub fn admit(&mut self, source: &SourceDoc, stored: Option<(&str, &str)>) -> Admit {
        self.seen.insert(source.id.clone());
        let first_in_run = self.sourced.insert(source.id.clone());
        if !first_in_run {
            self.problems.push(Problem {
                place: source.origin.clone(),
                reason: format!(
                    "source id `{}` also comes from another input; the later one wins",
                    source.id
                ),
                source_id: Some(source.id.clone()),
            });
        }
        let same =
            stored.is_some_and(|(hash, origin)| hash == source.hash && origin == source.origin);
        if !self.rebuild && same {
            self.counts.unchanged += 1;
            return Admit::Unchanged;
        }
        let stored = stored.is_some() && !self.rebuild;
        if stored {
            self.counts.updated += 1;
        } else {
            self.counts.added += 1;
        }
        Admit::Write {
            stored,
            first_in_run,
        }
    }

    /// Limits what the run decides about to the sources at `ids` of `origin` (each a note's
    /// id, or a folder's, whose notes it covers), for each origin so limited; the sources of
    /// other origins are kept as they are.
    pub fn limit_to(&mut self, origin: &str, ids: Vec<String>) {
        self.scope
            .get_or_insert_with(Default::default)
            .insert(origin.to_string(), ids);
    }

    /// [`Self::limit_to`] with ids only: a source is in scope when its id is one of `ids`,
    /// never as a folder of others (`a` does not cover `a/b`).
    pub fn limit_to_ids(&mut self, origin: &str, ids: Vec<String>) {
        self.exact.insert(origin.to_string());
        self.limit_to(origin, ids);
    }

    /// Whether the run decides about the stored source `id` of `origin`.
    fn in_scope(&self, id: &str, origin: &str) -> bool {
        let Some(scope) = &self.scope else {
            return self.origins.iter().any(|o| o == origin);
        };
        let exact = self.exact.contains(origin);
        scope.get(origin).is_some_and(|ids| {
            ids.iter().any(|at| {
                id == at
                    || (!exact
                        && id.len() > at.len()
                        && id.starts_with(at.as_str())
                        && id.as_bytes()[at.len()] == b'/')
            })
        })
    }

    /// Whether a stored source of `origin` is gone from this run's inputs and must be removed:
    /// `None` when this run does not decide about it (another input's, or seen this run),
    /// `Some(false)` when it is kept because its input had a problem that hid its ids.
    fn gone(&self, id: &str, origin: &str) -> Option<bool> {
        if self.seen.contains(id) || !self.in_scope(id, origin) {
            return None;
        }
        Some(!self.incomplete.contains(origin))
    }

    /// After every input was read: the stored sources (`(id, origin)`) to remove, counted.
    /// `written` tells whether this run wrote an id; with the stored ids it gives how many
    /// sources kept their stored version because their input failed.
    pub fn finish<'a>(
        &mut self,
        stored: impl IntoIterator<Item = (&'a String, &'a str)>,
        written: impl Fn(&str) -> bool,
    ) -> Vec<&'a String> {
        let mut removed = Vec::new();
        let mut kept = 0u64;
        let mut failed_kept = 0u64;
        let failed: HashSet<&str> = self
            .problems
            .iter()
            .filter_map(|p| p.source_id.as_deref())
            .collect();
        for (id, origin) in stored {
            match self.gone(id, origin) {
                Some(true) => removed.push(id),
                Some(false) => kept += 1,
                None => {}
            }
            if failed.contains(id.as_str()) && !written(id) {
                failed_kept += 1;
            }
        }
        self.counts.removed = removed.len() as u64;
        self.counts.kept = kept + failed_kept;
        self.counts.problems = self.problems.len() as u64;
        removed
    }

    /// Whether a stored source survives the run (it is not among what [`Self::finish`]
    /// removes).
    pub fn keeps(&self, id: &str, origin: &str) -> bool {
        self.gone(id, origin) != Some(true)
    }

    /// Whether the run changed what the store holds.
    pub fn changed(&self) -> bool {
        self.counts.added + self.counts.updated + self.counts.removed > 0
    }
}
