//! Freshness you can verify: each source of the index's inputs, read again as the next run would
//! read it and compared with what the last commit holds (`finder status --files`).
//!
//! Nothing is written. A file is `indexed` when its text hashes to the indexed version's,
//! `changed` when it differs, `new` when the index lacks it, `gone` when the index holds it
//! but the input no longer does, `failed` when reading it fails (the indexed version, if any,
//! is what queries see), and `ignored` when a rule of the walk leaves it out (the rule named).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use finder_core::Settings;
use serde::Serialize;

use crate::error::Result;
use crate::ingest::{self, InputKind};

/// What the index knows of one source of its inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum FileState {
    Indexed,
    Changed,
    New,
    Gone,
    Failed { reason: String },
    Ignored { rule: String },
}

impl FileState {
    /// The state's name, as the JSON has it.
    pub fn name(&self) -> &'static str {
        match self {
            FileState::Indexed => "indexed",
            FileState::Changed => "changed",
            FileState::New => "new",
            FileState::Gone => "gone",
            FileState::Failed { .. } => "failed",
            FileState::Ignored { .. } => "ignored",
        }
    }
}

/// One source (a file of a folder input, a record of a JSON Lines input).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// The source id: the path relative to its folder input, or the record's id.
    pub id: String,
    /// The input it comes from (its canonical path).
    pub origin: String,
    #[serde(flatten)]
    pub state: FileState,
    /// Fragments of the indexed version (0 when there is none).
    pub fragments: u32,
    /// Of those, the ones whose vector is built.
    pub vectors: u32,
    /// A problem met reading a source that was read all the same (front matter that does not
    /// parse, say): what the next run will warn about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Every source of the inputs with its state, and the count per state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FilesReport {
    pub files: Vec<FileEntry>,
    pub totals: BTreeMap<String, usize>,
}

/// Reads the index's inputs again (read only) and compares each source with the last commit.
pub fn file_states(dir: &Path, settings: &Settings) -> Result<FilesReport> {
    // The index must exist: opening it for the catalog would make an empty one.
    let origins = crate::stored::peek_commit_info(dir)?
        .ok_or_else(|| crate::IndexError::NotFound(dir.to_path_buf()))?
        .origins;
    let (index, fields) = crate::stored::open_or_create(dir, settings)?;
    let catalog = crate::stored::load_catalog(&index, fields, dir)?;
    let built: HashMap<u64, u64> = crate::vector::read_state(&dir.join(crate::vector::VECTOR_DIR))
        .ok()
        .flatten()
        .map(|s| s.hashes)
        .unwrap_or_default();
    let vectors_of = |id: &str, fragments: u32| -> u32 {
        (0..fragments)
            .filter(|&o| built.contains_key(&crate::fragment_key(id, o).0))
            .count() as u32
    };

    let mut files = Vec::new();
    for origin in &origins {
        let path = PathBuf::from(origin);
        let mut read: HashMap<String, Option<String>> = HashMap::new();
        let mut failed: Vec<(String, String)> = Vec::new();
        let mut sink = |item: std::result::Result<crate::SourceDoc, crate::Problem>| match item {
            Ok(source) => {
                read.insert(source.id, Some(source.hash));
            }
            Err(problem) => {
                // The whole problem: its place carries the line (`notes/a.md:3`).
                let id = problem.source_id.clone().unwrap_or(problem.place.clone());
                failed.push((id, problem.to_string()));
            }
        };
        let kind = match ingest::read_input(&path, origin, &settings.index, &mut sink) {
            Ok(kind) => Some(kind),
            Err(problem) => {
                failed.push((origin.clone(), problem.reason));
                None
            }
        };
        let mut ids: Vec<&String> = read.keys().collect();
        ids.extend(
            catalog
                .iter()
                .filter(|(_, r)| &r.origin == origin)
                .map(|(id, _)| id),
        );
        ids.sort();
        ids.dedup();
        for id in ids {
            let stored = catalog.get(id).filter(|r| &r.origin == origin);
            let state = match (read.get(id).cloned().flatten(), stored) {
                (Some(hash), Some(r)) if r.hash == hash => FileState::Indexed,
                (Some(_), Some(_)) => FileState::Changed,
                (Some(_), None) => FileState::New,
                (None, _) => match failed.iter().find(|(f, _)| f == id) {
                    Some((_, reason)) => FileState::Failed {
                        reason: reason.clone(),
                    },
                    None => FileState::Gone,
                },
            };
            let fragments = stored.map_or(0, |r| r.fragments);
            let problem = match state {
                FileState::Failed { .. } => None,
                _ => failed.iter().find(|(f, _)| f == id).map(|(_, r)| r.clone()),
            };
            files.push(FileEntry {
                id: id.clone(),
                origin: origin.clone(),
                state,
                fragments,
                vectors: vectors_of(id, fragments),
                problem,
            });
        }
        // Failures of files the index never held.
        for (id, reason) in &failed {
            if !files.iter().any(|f| &f.id == id && &f.origin == origin) {
                files.push(FileEntry {
                    id: id.clone(),
                    origin: origin.clone(),
                    state: FileState::Failed {
                        reason: reason.clone(),
                    },
                    fragments: 0,
                    vectors: 0,
                    problem: None,
                });
            }
        }
        if kind == Some(InputKind::Folder) {
            for (id, rule) in ingest::ignored_files(&path) {
                files.push(FileEntry {
                    id,
                    origin: origin.clone(),
                    state: FileState::Ignored { rule },
                    fragments: 0,
                    vectors: 0,
                    problem: None,
                });
            }
        }
    }
    files.sort_by(|a, b| (&a.origin, &a.id).cmp(&(&b.origin, &b.id)));
    let mut totals = BTreeMap::new();
    for f in &files {
        *totals.entry(f.state.name().to_string()).or_default() += 1;
    }
    Ok(FilesReport { files, totals })
}
