//! Process-wide memory tuning around the index's heavy phases, as a seam.
//!
//! Allocator settings, huge pages and heap trimming belong to the process, not to a library:
//! a server that embeds Finder must not find its allocator retuned. So the index only says
//! where its phases begin and end, and does nothing there unless the binary installed a
//! [`ProcessTuning`] (the `finder` and `finder-bench` binaries install `finder-tuning`'s).

use std::any::Any;
use std::sync::OnceLock;

/// What a binary may do to its process around an indexing run. Every method defaults to
/// doing nothing.
pub trait ProcessTuning: Send + Sync {
    /// Before a build phase (the lexical run, the vector build): large blocks of memory should
    /// go back to the system when freed.
    fn map_large_blocks(&self) {}

    /// After a build phase, and once a query engine has loaded: hand freed memory back.
    fn release_free_memory(&self) {}

    /// For the whole of an indexing run: keep what is freed for reuse until the guard drops.
    fn keep_freed_memory(&self) -> TuningGuard {
        TuningGuard::none()
    }

    /// For the whole of a small run (one indexing thread), graph included: fault memory in as
    /// small pages until the guard drops.
    fn small_pages(&self) -> TuningGuard {
        TuningGuard::none()
    }
}

/// Undoes a tuning when dropped (whatever the value it holds does on drop).
#[must_use = "the tuning ends when the guard is dropped"]
pub struct TuningGuard(#[allow(dead_code)] Option<Box<dyn Any + Send>>);

impl TuningGuard {
    /// A guard that undoes nothing.
    pub fn none() -> TuningGuard {
        TuningGuard(None)
    }

    /// A guard that drops `held` when it is dropped.
    pub fn holding(held: impl Any + Send) -> TuningGuard {
        TuningGuard(Some(Box::new(held)))
    }
}

static TUNING: OnceLock<&'static dyn ProcessTuning> = OnceLock::new();

/// Installs the process's tuning, once; `false` when one was installed already (it stays).
pub fn install_process_tuning(tuning: &'static dyn ProcessTuning) -> bool {
    TUNING.set(tuning).is_ok()
}

fn installed() -> Option<&'static dyn ProcessTuning> {
    TUNING.get().copied()
}

pub(crate) fn map_large_blocks() {
    if let Some(t) = installed() {
        t.map_large_blocks();
    }
}

pub(crate) fn release_free_memory() {
    if let Some(t) = installed() {
        t.release_free_memory();
    }
}

pub(crate) fn keep_freed_memory() -> TuningGuard {
    installed().map_or_else(TuningGuard::none, |t| t.keep_freed_memory())
}

pub(crate) fn small_pages() -> TuningGuard {
    installed().map_or_else(TuningGuard::none, |t| t.small_pages())
}
