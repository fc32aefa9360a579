//! Documents written through the API: kept as a JSON Lines input file owned by the space
//! (`<index>/api-sources.jsonl`) and indexed by the same incremental, atomic run as any
//! other input.
//!
//! A write rewrites the file atomically (temporary file, fsync, rename, fsync of the folder),
//! then runs `index_inputs` over it, which commits once; the write is acknowledged only after
//! that commit. The file stays the truth: delete the index and `finder index` rebuilds the
//! same documents from it. Writes to one space are serialised by its write lock.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_index::{index_inputs, RunReport};
use serde_json::{Map, Value};

use crate::error::{Result, ServerError};
use crate::space::{index_err, Space};
use crate::wire::{Document, StoredDocument, WriteResult};

/// The input file of API documents inside an index folder.
pub const API_SOURCES: &str = "api-sources.jsonl";
/// Longest document id, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Adds or replaces the document `id`.
pub fn put(space: &Arc<Space>, id: &str, document: Document) -> Result<WriteResult> {
    validate(id, &document)?;
    let guard = space.write_lock();
    let before = read_all(space.dir())?;
    let mut after = before.clone();
    after.insert(id.to_string(), document);
    let (report, settings) = write_and_index(space, id, &before, &after)?;
    let result = if report.counts.added > 0 {
        "added"
    } else if report.counts.updated > 0 {
        "updated"
    } else {
        "unchanged"
    };
    let answer = acknowledge(space, id, result)?;
    drop(guard);
    if result != "unchanged" {
        after_write(space, settings);
    }
    Ok(answer)
}

/// Removes the document `id` (only documents written through the API).
pub fn delete(space: &Arc<Space>, id: &str) -> Result<WriteResult> {
    let guard = space.write_lock();
    let before = read_all(space.dir())?;
    if !before.contains_key(id) {
        return Err(ServerError::DocumentNotFound {
            space: space.name().to_string(),
            id: id.to_string(),
        });
    }
    let mut after = before.clone();
    after.remove(id);
    let (_, settings) = write_and_index(space, id, &before, &after)?;
    let answer = acknowledge(space, id, "deleted")?;
    drop(guard);
    after_write(space, settings);
    Ok(answer)
}

/// Hands the committed write to the space's after-write hook on its own thread, which waits
/// for the write lock so that it never overlaps the next write.
fn after_write(space: &Arc<Space>, settings: finder_core::Settings) {
    let Some(hook) = space.after_write() else {
        return;
    };
    let space = Arc::clone(space);
    std::thread::spawn(move || {
        let _guard = space.write_lock();
        hook(space.dir(), &settings);
    });
}

/// The stored form of a document written through the API.
pub fn get(space: &Space, id: &str) -> Result<StoredDocument> {
    let mut all = read_all(space.dir())?;
    match all.remove(id) {
        Some(document) => Ok(StoredDocument {
            space: space.name().to_string(),
            id: id.to_string(),
            document,
        }),
        None => Err(ServerError::DocumentNotFound {
            space: space.name().to_string(),
            id: id.to_string(),
        }),
    }
}

/// Every document written through the API, by id.
pub fn read_all(dir: &Path) -> Result<BTreeMap<String, Document>> {
    let path = dir.join(API_SOURCES);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(ServerError::internal(format!("{}: {e}", path.display()))),
    };
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad =
            |why: String| ServerError::internal(format!("{}:{}: {why}", path.display(), n + 1));
        let mut object: Map<String, Value> =
            serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let id = match object.remove("id") {
            Some(Value::String(s)) => s,
            _ => return Err(bad("record without a string `id`".into())),
        };
        let document: Document =
            serde_json::from_value(Value::Object(object)).map_err(|e| bad(e.to_string()))?;
        out.insert(id, document);
    }
    Ok(out)
}

fn validate(id: &str, document: &Document) -> Result<()> {
    if id.trim().is_empty() {
        return Err(ServerError::invalid_field("id", "the document id is empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(ServerError::invalid_field(
            "id",
            format!("the document id is longer than {MAX_ID_BYTES} bytes"),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(ServerError::invalid_field(
            "id",
            "the document id holds a control character",
        ));
    }
    if document.text.trim().is_empty() && document.title.trim().is_empty() {
        return Err(ServerError::InvalidDocument {
            id: id.to_string(),
            reason: "both `title` and `text` are empty: there is nothing to search".into(),
        });
    }
    Ok(())
}

/// Writes `after`, indexes it, and restores `before` when the run fails or refuses `id`.
fn write_and_index(
    space: &Space,
    id: &str,
    before: &BTreeMap<String, Document>,
    after: &BTreeMap<String, Document>,
) -> Result<(RunReport, finder_core::Settings)> {
    let path = space.dir().join(API_SOURCES);
    std::fs::create_dir_all(space.dir())
        .map_err(|e| ServerError::internal(format!("{}: {e}", space.dir().display())))?;
    write_atomic(&path, &render(after))?;
    let settings = match space.finder() {
        Ok(finder) => finder.settings().clone(),
        Err(ServerError::NotBuilt { .. }) => space.base_settings()?,
        Err(e) => return Err(e),
    };
    let restore = || write_atomic(&path, &render(before));
    let report = match index_inputs(
        space.dir(),
        std::slice::from_ref(&path),
        &settings,
        &mut |_| {},
    ) {
        Ok(report) => report,
        Err(e) => {
            restore()?;
            return Err(index_err(space)(e));
        }
    };
    if let Some(problem) = report
        .problems
        .iter()
        .find(|p| p.source_id.as_deref() == Some(id) || p.source_id.is_none())
    {
        // The run kept the previous version of `id`, so the file must say the same.
        restore()?;
        return Err(ServerError::InvalidDocument {
            id: id.to_string(),
            reason: problem.reason.clone(),
        });
    }
    Ok((report, settings))
}

fn acknowledge(space: &Space, id: &str, result: &str) -> Result<WriteResult> {
    let status = space.finder()?.status().map_err(index_err(space))?;
    Ok(WriteResult {
        space: space.name().to_string(),
        id: id.to_string(),
        result: result.to_string(),
        sources: status.sources,
        committed_at: status.committed_at,
    })
}

fn render(documents: &BTreeMap<String, Document>) -> String {
    let mut out = String::new();
    for (id, document) in documents {
        let mut object = Map::new();
        object.insert("id".into(), Value::String(id.clone()));
        if let Value::Object(fields) = serde_json::to_value(document).expect("documents serialise")
        {
            object.extend(fields);
        }
        out.push_str(&Value::Object(object).to_string());
        out.push('\n');
    }
    out
}

/// Replaces `path` with `text` so that a crash leaves either the old or the new file.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let fail =
        |what: &Path, e: std::io::Error| ServerError::internal(format!("{}: {e}", what.display()));
    let tmp: PathBuf = path.with_extension("jsonl.tmp");
    let mut file = std::fs::File::create(&tmp).map_err(|e| fail(&tmp, e))?;
    file.write_all(text.as_bytes()).map_err(|e| fail(&tmp, e))?;
    file.sync_all().map_err(|e| fail(&tmp, e))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| fail(path, e))?;
    if let Some(parent) = path.parent() {
        // The rename is durable only once the folder's entry is on disk.
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| fail(parent, e))?;
    }
    Ok(())
}
