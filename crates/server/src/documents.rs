//! Documents written through the API: kept as a JSON Lines input file owned by the space
//! (`<index>/api-sources.jsonl`) and indexed by the same incremental, atomic run as any
//! other input. Over PostgreSQL the shards keep them instead (`finder_pg::write_documents`,
//! each document in the transaction of its source), so every query node over the same
//! shards reads and writes the same documents.
//!
//! Writes to one space are *group committed*: a write joins the space's queue; whichever
//! waiting writer finds no batch running takes every queued change, applies them in arrival
//! order, rewrites the file once (temporary file, fsync, rename, fsync of the folder), runs
//! `index_inputs` over it, which commits once, and hands each writer its own answer. Each
//! write is acknowledged only after the commit that holds it, so acknowledged still means
//! durable; a burst of writers pays for one file rewrite, one index pass and one graph
//! rebuild instead of one each. The file stays the truth: delete the index and
//! `finder index` rebuilds the same documents from it.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_core::StorageBackend;
use serde_json::{Map, Value};

use crate::error::{Result, ServerError};
use crate::space::{store_err, Space};
use crate::wire::{Document, StoredDocument, WriteResult};
use crate::writes::Change;

/// The input file of API documents inside an index folder.
pub const API_SOURCES: &str = "api-sources.jsonl";
/// Longest document id, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Adds or replaces the document `id`.
pub fn put(space: &Arc<Space>, id: &str, document: Document) -> Result<WriteResult> {
    validate(id, &document)?;
    submit(space, id, Some(document))
}

/// Removes the document `id` (only documents written through the API).
pub fn delete(space: &Arc<Space>, id: &str) -> Result<WriteResult> {
    submit(space, id, None)
}

/// Queues one write and waits for the commit that holds it, leading a batch when none runs.
fn submit(space: &Arc<Space>, id: &str, document: Option<Document>) -> Result<WriteResult> {
    let queue = space.write_queue();
    let mut state = queue.lock();
    let ticket = state.next_ticket;
    state.next_ticket += 1;
    state.pending.push(Change {
        ticket,
        id: id.to_string(),
        document,
    });
    loop {
        if let Some(answer) = state.answers.remove(&ticket) {
            return answer;
        }
        if !state.busy {
            // This writer's change is still queued (its answer is not in): it leads the
            // batch of everything queued so far.
            state.busy = true;
            let batch = std::mem::take(&mut state.pending);
            drop(state);
            let tickets: Vec<u64> = batch.iter().map(|c| c.ticket).collect();
            let answers = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                commit_batch(space, batch)
            }))
            .unwrap_or_else(|_| {
                tickets
                    .iter()
                    .map(|&t| (t, Err(ServerError::internal("a document write panicked"))))
                    .collect()
            });
            state = queue.lock();
            state.answers.extend(answers);
            state.busy = false;
            queue.batch_done.notify_all();
            continue;
        }
        state = queue
            .batch_done
            .wait(state)
            .unwrap_or_else(|p| p.into_inner());
    }
}

/// What one change did, before the commit decides whether it stands.
enum Outcome {
    Done(&'static str),
    Failed(ServerError),
}

/// Applies `batch` in order, writes and indexes the result once, and answers every change.
fn commit_batch(space: &Arc<Space>, batch: Vec<Change>) -> Vec<(u64, Result<WriteResult>)> {
    let guard = space.write_lock();
    let everyone = |e: ServerError| -> Vec<(u64, Result<WriteResult>)> {
        batch
            .iter()
            .map(|c| (c.ticket, Err(for_change(&e, c))))
            .collect()
    };
    if space.backend() == StorageBackend::Postgres {
        if let Err(e) = import_file(space) {
            return everyone(e);
        }
    }
    let ids: Vec<String> = batch.iter().map(|c| c.id.clone()).collect();
    let before = match stored(space, &ids) {
        Ok(b) => b,
        Err(e) => return everyone(e),
    };
    let indexed = match space.finder() {
        Ok(finder) => Some(finder),
        Err(ServerError::NotBuilt { .. }) => None,
        Err(e) => return everyone(e),
    };
    // Whether the index holds an id before this batch, then as the batch changes it: a put
    // of an id it holds (from a file input, say) updates rather than adds.
    let mut held: HashMap<&str, bool> = HashMap::new();
    let mut after = before.clone();
    let mut outcomes = Vec::with_capacity(batch.len());
    for change in &batch {
        let id = change.id.as_str();
        let was_held = match held.get(id) {
            Some(&h) => h,
            None => indexed
                .as_ref()
                .is_some_and(|f| f.source(id).ok().flatten().is_some()),
        };
        let outcome = match &change.document {
            Some(document) => {
                let result = match after.get(id) {
                    Some(previous) if previous == document && was_held => "unchanged",
                    _ if was_held => "updated",
                    _ => "added",
                };
                after.insert(id.to_string(), document.clone());
                held.insert(id, true);
                Outcome::Done(result)
            }
            None if after.remove(id).is_some() => {
                held.insert(id, false);
                Outcome::Done("deleted")
            }
            None => Outcome::Failed(ServerError::DocumentNotFound {
                space: space.name().to_string(),
                id: id.to_string(),
            }),
        };
        outcomes.push(outcome);
    }

    // Nothing to write when every change left its document as it was (or failed), unless
    // the index is missing while the file holds documents.
    let changed = after != before || (indexed.is_none() && !after.is_empty());
    let mut settings = None;
    if changed {
        match write_and_index(space, &before, &mut after) {
            Ok((refused, run_settings)) => {
                for (change, outcome) in batch.iter().zip(outcomes.iter_mut()) {
                    if let (Some(reason), Outcome::Done(_)) = (refused.get(&change.id), &outcome) {
                        *outcome = Outcome::Failed(ServerError::InvalidDocument {
                            id: change.id.clone(),
                            reason: reason.clone(),
                        });
                    }
                }
                settings = Some(run_settings);
            }
            Err(e) => {
                for (change, outcome) in batch.iter().zip(outcomes.iter_mut()) {
                    if let Outcome::Done(_) = outcome {
                        *outcome = Outcome::Failed(for_change(&e, change));
                    }
                }
            }
        }
    }
    let any_done = outcomes.iter().any(|o| matches!(o, Outcome::Done(_)));
    let acknowledged = if any_done {
        acknowledge(space)
    } else {
        Ok((0, 0))
    };
    drop(guard);
    let wrote = batch
        .iter()
        .zip(&outcomes)
        .any(|(_, o)| matches!(o, Outcome::Done(r) if *r != "unchanged"));
    if let (true, Some(settings)) = (wrote, settings) {
        after_write(space, settings);
    }
    batch
        .iter()
        .zip(outcomes)
        .map(|(change, outcome)| {
            let answer = match (outcome, &acknowledged) {
                (Outcome::Failed(e), _) => Err(e),
                (Outcome::Done(result), Ok((sources, committed_at))) => Ok(WriteResult {
                    space: space.name().to_string(),
                    id: change.id.clone(),
                    result: result.to_string(),
                    sources: *sources,
                    committed_at: *committed_at,
                }),
                (Outcome::Done(_), Err(e)) => Err(e.clone()),
            };
            (change.ticket, answer)
        })
        .collect()
}

/// The answer to `change` when its whole batch failed with `e`: a refusal that names no
/// document names the change's own.
fn for_change(e: &ServerError, change: &Change) -> ServerError {
    match e {
        ServerError::InvalidDocument { id, reason } if id.is_empty() => {
            ServerError::InvalidDocument {
                id: change.id.clone(),
                reason: reason.clone(),
            }
        }
        other => other.clone(),
    }
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
    let mut all = stored(space, &[id.to_string()])?;
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

/// The documents written through the API that the space keeps, by id: at least those of
/// `ids` (every one, from the file of an embedded index).
fn stored(space: &Space, ids: &[String]) -> Result<BTreeMap<String, Document>> {
    match space.backend() {
        StorageBackend::Embedded => read_all(space.dir()),
        StorageBackend::Postgres => {
            let config = pg_config(space)?;
            let records =
                finder_pg::read_documents(&config, Some(ids)).map_err(store_err(space))?;
            let mut out: BTreeMap<String, Document> = records
                .into_iter()
                .map(|(id, record)| {
                    let place = format!("API document `{id}` in PostgreSQL");
                    Ok((id, parse_record(&record).map_err(|why| bad(&place, why))?.1))
                })
                .collect::<Result<_>>()?;
            // Documents of a file not imported yet ([`import_file`]) are the space's too.
            if space.dir().join(API_SOURCES).exists() {
                for (id, document) in read_all(space.dir())? {
                    out.entry(id).or_insert(document);
                }
            }
            Ok(out)
        }
    }
}

/// The shards a PostgreSQL space's settings name.
fn pg_config(space: &Space) -> Result<finder_pg::PgConfig> {
    let settings = space.base_settings()?;
    finder_pg::PgConfig::from_settings(&settings.storage).map_err(store_err(space))
}

fn bad(place: &str, why: String) -> ServerError {
    ServerError::internal(format!("{place}: {why}"))
}

/// One Finder record (a JSON object with a string `id`) as its id and document.
fn parse_record(line: &str) -> std::result::Result<(String, Document), String> {
    let mut object: Map<String, Value> = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let id = match object.remove("id") {
        Some(Value::String(s)) => s,
        _ => return Err("record without a string `id`".into()),
    };
    let document: Document =
        serde_json::from_value(Value::Object(object)).map_err(|e| e.to_string())?;
    Ok((id, document))
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
        let place = format!("{}:{}", path.display(), n + 1);
        let (id, document) = parse_record(line).map_err(|why| bad(&place, why))?;
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

/// Writes `after`, indexes it and answers the ids the run refused, with why. A refused id
/// keeps its indexed version, so the file goes back to its `before` version too (and
/// `after` with it). When the run fails, or reports a problem that names no source, the
/// whole file goes back to `before` and is indexed again, so file and index agree.
fn write_and_index(
    space: &Space,
    before: &BTreeMap<String, Document>,
    after: &mut BTreeMap<String, Document>,
) -> Result<(HashMap<String, String>, finder_core::Settings)> {
    let (settings, embedder) = run_settings(space)?;
    if space.backend() == StorageBackend::Postgres {
        let refused = write_to_shards(space, before, after, &settings, embedder.as_deref())?;
        return Ok((refused, settings));
    }
    let path = space.dir().join(API_SOURCES);
    std::fs::create_dir_all(space.dir())
        .map_err(|e| ServerError::internal(format!("{}: {e}", space.dir().display())))?;
    write_atomic(&path, &render(after))?;
    let run = |settings: &finder_core::Settings| {
        let report = finder_store::index_inputs(
            space.dir(),
            std::slice::from_ref(&path),
            settings,
            embedder.as_deref(),
        );
        // Whatever the run did, readers must not keep a snapshot from before it.
        space.forget_reader();
        report
    };
    let report = match run(&settings) {
        Ok(report) => report,
        Err(e) => {
            write_atomic(&path, &render(before))?;
            return Err(store_err(space)(e));
        }
    };
    // A problem that names no source but a line of the file hid which ids the file holds.
    // Others (a graph that could not be rebuilt) leave the commit standing, as in `finder
    // index`, and go to the log.
    let (unplaced, other): (Vec<_>, Vec<_>) = report
        .problems()
        .iter()
        .filter(|p| p.source_id.is_none())
        .partition(|p| p.place.starts_with(API_SOURCES));
    for problem in other {
        tracing::warn!(
            space = space.name(),
            place = %problem.place,
            "{}",
            problem.reason
        );
    }
    if let Some(problem) = unplaced.first() {
        // The run could not tell which ids the file holds; put everything back.
        write_atomic(&path, &render(before))?;
        if let Err(e) = run(&settings) {
            tracing::error!(
                path = %path.display(),
                "re-indexing after a refused write failed: {e}"
            );
        }
        return Err(ServerError::InvalidDocument {
            id: String::new(),
            reason: problem.reason.clone(),
        });
    }
    let refused = take_back_refused(report.problems(), before, after);
    if !refused.is_empty() {
        // The run kept the previous version of each refused id, so the file must say the same.
        write_atomic(&path, &render(after))?;
    }
    Ok((refused, settings))
}

/// The settings a write's run indexes with and, over PostgreSQL (whose runs embed as they
/// write), the model the space's queries use.
fn run_settings(
    space: &Space,
) -> Result<(finder_core::Settings, Option<Arc<dyn finder_core::Embed>>)> {
    let settings = match space.finder() {
        Ok(finder) => finder.settings().clone(),
        Err(ServerError::NotBuilt { .. }) => space.base_settings()?,
        Err(e) => return Err(e),
    };
    let embedder = match space.backend() {
        StorageBackend::Embedded => None,
        StorageBackend::Postgres => space
            .finder()
            .ok()
            .and_then(|f| f.embedder())
            .or_else(|| space.models().and_then(|load| load(&settings))),
    };
    Ok((settings, embedder))
}

/// A PostgreSQL space written through the API before its shards kept the documents holds
/// them in its folder's file: at its next write they move into the shards (those the shards
/// do not hold yet), and the file is renamed `api-sources.jsonl.imported`.
fn import_file(space: &Space) -> Result<()> {
    let path = space.dir().join(API_SOURCES);
    if !path.exists() {
        return Ok(());
    }
    let documents = read_all(space.dir())?;
    let config = pg_config(space)?;
    let ids: Vec<String> = documents.keys().cloned().collect();
    let held = finder_pg::read_documents(&config, Some(&ids)).map_err(store_err(space))?;
    let changes: Vec<finder_pg::DocumentChange> = documents
        .iter()
        .filter(|(id, _)| !held.contains_key(*id))
        .map(|(id, document)| finder_pg::DocumentChange {
            id: id.clone(),
            record: Some(record_line(id, document)),
        })
        .collect();
    if !changes.is_empty() {
        let (settings, embedder) = run_settings(space)?;
        let report = finder_pg::write_documents(&config, &changes, &settings, embedder.as_deref());
        space.forget_reader();
        for problem in report.map_err(store_err(space))?.problems {
            tracing::warn!(space = space.name(), place = %problem.place, "importing {}: {}", API_SOURCES, problem.reason);
        }
        tracing::info!(
            space = space.name(),
            "moved {} documents from {} into the shards",
            changes.len(),
            path.display()
        );
    }
    let moved = path.with_extension("jsonl.imported");
    std::fs::rename(&path, &moved)
        .map_err(|e| ServerError::internal(format!("{}: {e}", path.display())))
}

/// The ids whose change a run refused, with why; each goes back to its `before` version in
/// `after`, as the run kept it.
fn take_back_refused(
    problems: &[finder_index::Problem],
    before: &BTreeMap<String, Document>,
    after: &mut BTreeMap<String, Document>,
) -> HashMap<String, String> {
    let mut refused = HashMap::new();
    for problem in problems {
        let Some(id) = &problem.source_id else {
            continue;
        };
        if before.get(id) == after.get(id) {
            continue;
        }
        match before.get(id) {
            Some(document) => after.insert(id.clone(), document.clone()),
            None => after.remove(id),
        };
        refused.insert(id.clone(), problem.reason.clone());
    }
    refused
}

/// The PostgreSQL side of [`write_and_index`]: the changed documents go to the shards'
/// table and index in one run, which commits nothing when it cannot tell the documents apart.
fn write_to_shards(
    space: &Space,
    before: &BTreeMap<String, Document>,
    after: &mut BTreeMap<String, Document>,
    settings: &finder_core::Settings,
    embedder: Option<&dyn finder_core::Embed>,
) -> Result<HashMap<String, String>> {
    let ids: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let changes: Vec<finder_pg::DocumentChange> = ids
        .into_iter()
        .filter(|id| before.get(*id) != after.get(*id))
        .map(|id| finder_pg::DocumentChange {
            id: id.clone(),
            record: after.get(id).map(|document| record_line(id, document)),
        })
        .collect();
    let config = pg_config(space)?;
    let report = finder_pg::write_documents(&config, &changes, settings, embedder);
    space.forget_reader();
    let report = report.map_err(store_err(space))?;
    for problem in report.problems.iter().filter(|p| p.source_id.is_none()) {
        tracing::warn!(space = space.name(), place = %problem.place, "{}", problem.reason);
    }
    Ok(take_back_refused(&report.problems, before, after))
}

/// A run of `inputs` into a PostgreSQL space's shards, over the `changed` paths under them
/// (every input when `None`), embedded with the model its API writes use. `serve --watch`
/// calls it with the space's write lock held; `finder watch` with a space of its own.
pub fn index_pg_inputs(
    space: &Space,
    inputs: &[PathBuf],
    changed: Option<&[PathBuf]>,
) -> Result<finder_pg::PgRunReport> {
    // The space's settings as its files say, not those of an opened store: a watch that
    // serves no queries never opens one.
    let settings = space.base_settings()?;
    let embedder = space.models().and_then(|load| load(&settings));
    let config = pg_config(space)?;
    let embedder = embedder.as_deref();
    let mut follower = space.pg_follower();
    let report = match changed {
        Some(changed) => {
            follower.index_changed(&config, inputs, changed, &settings, embedder, &mut |_| {})
        }
        None => follower.index_inputs(&config, inputs, &settings, embedder, &mut |_| {}),
    };
    drop(follower);
    space.forget_reader();
    report.map_err(store_err(space))
}

/// The space's source count and commit time after a batch, for its answers.
fn acknowledge(space: &Space) -> Result<(u64, u64)> {
    let status = space.finder()?.status().map_err(store_err(space))?;
    Ok((status.sources(), status.committed_at()))
}

fn render(documents: &BTreeMap<String, Document>) -> String {
    let mut out = String::new();
    for (id, document) in documents {
        out.push_str(&record_line(id, document));
        out.push('\n');
    }
    out
}

/// The document as one Finder record line (no line end), `id` first.
fn record_line(id: &str, document: &Document) -> String {
    let mut object = Map::new();
    object.insert("id".into(), Value::String(id.to_string()));
    if let Value::Object(fields) = serde_json::to_value(document).expect("documents serialise") {
        object.extend(fields);
    }
    Value::Object(object).to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        Document {
            title: "Note".into(),
            text: text.into(),
            date: None,
            tags: Vec::new(),
            summary: None,
            extras: BTreeMap::new(),
        }
    }

    fn change(ticket: u64, id: &str, text: Option<&str>) -> Change {
        Change {
            ticket,
            id: id.into(),
            document: text.map(doc),
        }
    }

    /// A space whose index holds one file source, `a.md`.
    fn space() -> (tempfile::TempDir, Arc<Space>) {
        let tmp = tempfile::tempdir().unwrap();
        let notes = tmp.path().join("notes");
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::write(notes.join("a.md"), "# Alpha\n\nA note from a file.\n").unwrap();
        let dir = tmp.path().join("idx");
        let settings = finder_index::load_settings(&dir, None).unwrap();
        finder_index::index_inputs(&dir, &[notes], &settings, &mut |_| {}).unwrap();
        let space = Arc::new(Space::new("default", &dir, None).unwrap());
        (tmp, space)
    }

    fn generation(space: &Space) -> u64 {
        space.finder().unwrap().status().unwrap().generation()
    }

    fn outcome(answer: &Result<WriteResult>) -> String {
        match answer {
            Ok(w) => format!("{} {}", w.id, w.result),
            Err(e) => e.code().to_string(),
        }
    }

    #[test]
    fn a_batch_applies_changes_in_order_in_one_commit() {
        let (_tmp, space) = space();
        let before = generation(&space);
        let answers = commit_batch(
            &space,
            vec![
                change(0, "k", Some("kiln one")),
                change(1, "k", Some("kiln one")),
                change(2, "k", Some("kiln two")),
                change(3, "gone", None),
                change(4, "tmp", Some("temporary")),
                change(5, "tmp", None),
                change(6, "a.md", Some("taken over by the API")),
            ],
        );
        let got: Vec<String> = answers.iter().map(|(_, a)| outcome(a)).collect();
        assert_eq!(
            got,
            [
                "k added",
                "k unchanged",
                "k updated",
                "document_not_found",
                "tmp added",
                "tmp deleted",
                "a.md updated",
            ]
        );
        let tickets: Vec<u64> = answers.iter().map(|(t, _)| *t).collect();
        assert_eq!(tickets, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(generation(&space), before + 1, "one commit for the batch");
        let all = read_all(space.dir()).unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a.md", "k"]);
        assert_eq!(all["k"].text, "kiln two");
        let finder = space.finder().unwrap();
        let hits = finder
            .search("kiln", finder.settings(), 0, 10)
            .unwrap()
            .hits;
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, "k");
        assert!(hits[0].summary.contains("two"), "{:?}", hits[0].summary);
        let acknowledged = answers[0].1.as_ref().unwrap();
        assert_eq!(acknowledged.sources, 2);
    }

    #[test]
    fn a_batch_that_changes_nothing_does_not_commit() {
        let (_tmp, space) = space();
        commit_batch(&space, vec![change(0, "k", Some("kiln"))]);
        let before = generation(&space);
        let answers = commit_batch(
            &space,
            vec![change(1, "k", Some("kiln")), change(2, "nope", None)],
        );
        let got: Vec<String> = answers.iter().map(|(_, a)| outcome(a)).collect();
        assert_eq!(got, ["k unchanged", "document_not_found"]);
        assert_eq!(generation(&space), before);
    }

    #[test]
    fn concurrent_writers_share_commits_and_each_is_acknowledged_after_its_own() {
        let (_tmp, space) = space();
        let before = generation(&space);
        let writers = 16;
        let barrier = std::sync::Barrier::new(writers);
        let answers: Vec<Result<WriteResult>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..writers)
                .map(|i| {
                    let (space, barrier) = (&space, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        put(space, &format!("w{i}"), doc(&format!("writer number{i}")))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, answer) in answers.iter().enumerate() {
            let w = answer.as_ref().unwrap();
            assert_eq!(
                (w.id.as_str(), w.result.as_str()),
                (&*format!("w{i}"), "added")
            );
            // The commit that acknowledged it already holds it.
            assert!(w.sources >= 2, "{w:?}");
        }
        let commits = generation(&space) - before;
        assert!(
            (1..writers as u64).contains(&commits),
            "{writers} writers took {commits} commits"
        );
        let finder = space.finder().unwrap();
        for i in 0..writers {
            let hits = finder
                .search(&format!("number{i}"), finder.settings(), 0, 5)
                .unwrap()
                .hits;
            assert!(hits.iter().any(|h| h.id == format!("w{i}")), "w{i}");
        }
        assert_eq!(read_all(space.dir()).unwrap().len(), writers);
    }
}
