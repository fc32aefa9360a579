//! The queue of API writes: writers wait in it for the commit that holds their change, and
//! one of them leads each batch (see `documents.rs`).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::Result;
use crate::wire::{Document, WriteResult};

/// The queue of writes waiting for a space's next commit.
#[derive(Default)]
pub(crate) struct WriteQueue {
    pub(crate) state: Mutex<QueueState>,
    /// Signalled when a batch ends: its writers find their answers, and one of the writers
    /// still queued becomes the next batch's leader.
    pub(crate) batch_done: Condvar,
}

#[derive(Default)]
pub(crate) struct QueueState {
    pub(crate) next_ticket: u64,
    pub(crate) pending: Vec<Change>,
    pub(crate) answers: HashMap<u64, Result<WriteResult>>,
    /// A batch is being written.
    pub(crate) busy: bool,
}

/// One queued write: `document` is `None` for a delete.
pub(crate) struct Change {
    pub(crate) ticket: u64,
    pub(crate) id: String,
    pub(crate) document: Option<Document>,
}

impl WriteQueue {
    pub(crate) fn lock(&self) -> MutexGuard<'_, QueueState> {
        // Answers are handed out under this lock and nothing half-done is kept in it, so a
        // poisoned lock is safe to take.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
