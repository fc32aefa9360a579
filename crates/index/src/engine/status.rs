//! What an opened index holds: its commit, layers, sizes and the state of each derived layer.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::Result;
use crate::files::LEXICAL_DIR;
use crate::live::{self, LiveProgress};
use crate::record::RunCounts;
use crate::vector::{BUILD_RUN, VECTOR_DIR};
use crate::writer::INDEXING_RUN;

use super::*;

/// What `finder status` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub path: PathBuf,
    pub sources: u64,
    pub fragments: u64,
    pub segments: usize,
    /// Segments with a readable page file (`pages.rs`); the others' pages are read from the
    /// document store until the next run writes their files.
    pub page_files: usize,
    pub size_bytes: u64,
    pub origins: Vec<String>,
    pub settings: finder_core::IndexSettings,
    pub last_run: RunCounts,
    pub committed_at: u64,
    /// Commits so far that changed what the index holds.
    pub generation: u64,
    /// The word analysis the index was written with (`ANALYSIS`; older ones are read as
    /// written and rebuilt by the next indexing run).
    pub analysis: u32,
    /// Languages detected for some source's Latin words under `index.language = "auto"`,
    /// besides English; queries are analysed in each.
    pub languages: Vec<String>,
    /// The vector layer, when one has been built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors: Option<VectorStatus>,
    /// The relation graph, when one has been built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphStatus>,
    /// An indexing run under way, or one that stopped before its end (`running: false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexing: Option<LiveProgress>,
}

/// Whether the relation graph matches the last commit.
#[derive(Debug, Clone, Serialize)]
pub struct GraphStatus {
    /// Built from the last commit; `false` after a run was stopped between its commit and the
    /// graph build (the next `finder index` rebuilds it).
    pub current: bool,
    /// Built with other `[graph]` build settings than the ones the status was read with (an
    /// index made with `--config`, read without it): an index run with these rebuilds it.
    pub other_settings: bool,
}

/// How far the vector layer is.
#[derive(Debug, Clone, Serialize)]
pub struct VectorStatus {
    pub model_id: String,
    /// Vectors in the published graph.
    pub done: usize,
    /// Fragments in the lexical index now.
    pub total: u64,
    /// Vectors already embedded but not yet in the published graph (a build in progress or
    /// interrupted).
    pub pending: bool,
    /// A build under way (its stage, done / total, rate, time left), or one that stopped
    /// before its end (`running: false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<LiveProgress>,
}

fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

impl Finder {
    pub fn status(&self) -> Result<Status> {
        let searcher = self.reader.searcher();
        let size_bytes = dir_size(&self.dir.join(LEXICAL_DIR));
        let pages = self.page_files(&searcher)?;
        Ok(Status {
            path: self.dir.clone(),
            sources: self.info.sources,
            fragments: self.info.fragments,
            segments: searcher.segment_readers().len(),
            page_files: pages.iter().flatten().count(),
            size_bytes,
            origins: self.info.origins.clone(),
            settings: self.info.settings.clone(),
            last_run: self.info.last_run,
            committed_at: self.info.committed_at,
            generation: self.info.generation,
            analysis: self.info.analysis,
            languages: self.info.languages.clone(),
            vectors: self.vector_status(),
            graph: self.dir.join(crate::graph::GRAPH_DIR).exists().then(|| {
                let (current, other_settings) = crate::graph::graph_freshness(
                    &self.dir,
                    &self.settings.graph,
                    self.info.generation,
                );
                GraphStatus {
                    current,
                    other_settings,
                }
            }),
            indexing: live::read(&self.dir, INDEXING_RUN),
        })
    }

    pub(super) fn vector_status(&self) -> Option<VectorStatus> {
        let vdir = self.dir.join(VECTOR_DIR);
        let state = crate::vector::read_state_head(&vdir).ok().flatten();
        let log_len = std::fs::metadata(vdir.join(crate::vector::LOG_FILE)).map_or(0, |m| m.len());
        let build = live::read(&vdir, BUILD_RUN);
        if state.is_none() && log_len == 0 && build.is_none() {
            return None;
        }
        let state_time = std::fs::metadata(vdir.join(crate::vector::STATE_FILE))
            .and_then(|m| m.modified())
            .ok();
        let log_time = std::fs::metadata(vdir.join(crate::vector::LOG_FILE))
            .and_then(|m| m.modified())
            .ok();
        Some(VectorStatus {
            model_id: state
                .as_ref()
                .map_or_else(String::new, |s| s.model_id.clone()),
            done: state.as_ref().map_or(0, |s| s.vectors),
            total: self.info.fragments,
            pending: match (state_time, log_time) {
                (Some(s), Some(l)) => l > s,
                (None, Some(_)) => true,
                _ => false,
            },
            build,
        })
    }
}
