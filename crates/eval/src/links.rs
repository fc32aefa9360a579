//! A long-query dataset built from a folder of linked notes: a note that links to others is a
//! query, its own text with the links taken out, and the notes it links to are what it should
//! find. Nothing is tuned on it, and it runs on anyone's vault.
//!
//! Links are found and resolved as the graph build finds and resolves them
//! ([`finder_index::graph::links`], [`LinkResolver`], `graph.link_order`). What is searched is
//! a copy of the vault in which the query notes have lost their links too: otherwise the graph
//! would hold each answer as an edge of the query's own note. Half the linking notes (by a
//! hash of their id) are queries, so the other half's links remain for the graph to use; and
//! each query leaves its own note out of every list (its scope is the others).

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use finder_core::{LinkOrder, Settings};
use finder_index::graph::{links, Link, LinkResolver, LinkStyle};
use finder_index::SourceDoc;

use crate::dataset::{Dataset, Query};
use crate::error::EvalError;

/// Words a query must keep once its links are out: a note that is only a list of links asks
/// nothing.
const MIN_QUERY_WORDS: usize = 5;

/// Builds the dataset from the notes under `folder`, read with `settings` as an indexing run
/// reads them, and writes the copy to search under `copy` (unchanged files are not written
/// again). Problems reading a note leave it out; a folder with no note that links to another
/// is an error.
pub fn links_dataset(
    folder: &Path,
    settings: &Settings,
    copy: &Path,
) -> Result<Dataset, EvalError> {
    let mut notes: Vec<SourceDoc> = Vec::new();
    let origin = folder.display().to_string();
    finder_index::read_input(folder, &origin, &settings.index, &mut |item| {
        if let Ok(source) = item {
            notes.push(source);
        }
    })
    .map_err(|p| EvalError::Run(format!("reading the notes: {p}")))?;
    notes.sort_by(|a, b| a.id.cmp(&b.id));
    let style = match settings.graph.link_order {
        LinkOrder::TargetFirst => LinkStyle::TargetFirst,
        LinkOrder::LabelFirst => LinkStyle::LabelFirst,
    };
    let resolver = LinkResolver::new(notes.iter().map(|n| n.id.as_str()));
    let mut queries = Vec::new();
    let mut qrels: HashMap<String, HashMap<String, u32>> = HashMap::new();
    let mut fingerprint = blake3::Hasher::new();
    for note in &notes {
        fingerprint.update(note.id.as_bytes());
        fingerprint.update(note.hash.as_bytes());
        let path = folder.join(&note.id);
        let raw = std::fs::read(&path).map_err(|e| EvalError::io(&path, e))?;
        let kept = match std::str::from_utf8(&raw) {
            Ok(text) if is_query(&note.id) && is_plain_text(&note.id) => {
                match question(note, &notes, &resolver, style) {
                    Some((query, targets)) => {
                        queries.push(query);
                        qrels.insert(note.id.clone(), targets);
                        let spans: Vec<Range<usize>> = links(text, style)
                            .iter()
                            .map(|l| link_span(text, l))
                            .collect();
                        without(text, &spans).into_bytes()
                    }
                    None => raw,
                }
            }
            _ => raw,
        };
        write_if_changed(&copy.join(&note.id), &kept)?;
    }
    // A note gone from the vault goes from the copy too, or its old text would stay indexed.
    let ids: HashSet<PathBuf> = notes.iter().map(|n| copy.join(&n.id)).collect();
    std::fs::create_dir_all(copy).map_err(|e| EvalError::io(copy, e))?;
    remove_others(copy, &ids)?;
    if queries.is_empty() {
        return Err(EvalError::Run(format!(
            "{}: no note links to another note (graph.link_order = {:?}), so there is no query",
            folder.display(),
            settings.graph.link_order
        )));
    }
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| folder.display().to_string());
    let mut fingerprint = fingerprint.finalize().to_hex().to_string();
    fingerprint.truncate(16);
    Ok(Dataset {
        name,
        dir: copy.to_path_buf(),
        queries,
        qrels,
        sources: Some(notes.into_iter().map(|n| n.id).collect()),
        fingerprint: Some(fingerprint),
    })
}

/// Whether the note `id` is a query (half the notes, by a hash of the id); the others keep
/// their links for the graph.
fn is_query(id: &str) -> bool {
    blake3::hash(id.as_bytes()).as_bytes()[0].is_multiple_of(2)
}

/// Whether the links of a file can be cut from its bytes (a note, not a PDF or DOCX).
fn is_plain_text(id: &str) -> bool {
    [".md", ".markdown", ".txt", ".org"]
        .iter()
        .any(|ext| id.to_ascii_lowercase().ends_with(ext))
}

/// The query `note` makes (its passages without their links) and the notes it links to,
/// when it links to another note and keeps [`MIN_QUERY_WORDS`].
fn question(
    note: &SourceDoc,
    notes: &[SourceDoc],
    resolver: &LinkResolver,
    style: LinkStyle,
) -> Option<(Query, HashMap<String, u32>)> {
    let mut targets: HashMap<String, u32> = HashMap::new();
    let mut text = String::new();
    for fragment in &note.fragments {
        let found = links(&fragment.text, style);
        for link in &found {
            if let Some(at) = resolver.resolve(&note.id, &link.target) {
                if notes[at].id != note.id {
                    targets.insert(notes[at].id.clone(), 1);
                }
            }
        }
        let spans: Vec<Range<usize>> = found.iter().map(|l| link_span(&fragment.text, l)).collect();
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&without(&fragment.text, &spans));
    }
    if targets.is_empty() || text.split_whitespace().count() < MIN_QUERY_WORDS {
        return None;
    }
    let query = Query {
        id: note.id.clone(),
        text,
    };
    Some((query, targets))
}

/// Removes the files under `dir` that `keep` does not list (folders left in place).
fn remove_others(dir: &Path, keep: &HashSet<PathBuf>) -> Result<(), EvalError> {
    let entries = std::fs::read_dir(dir).map_err(|e| EvalError::io(dir, e))?;
    for entry in entries {
        let path = entry.map_err(|e| EvalError::io(dir, e))?.path();
        if path.is_dir() {
            remove_others(&path, keep)?;
        } else if !keep.contains(&path) {
            std::fs::remove_file(&path).map_err(|e| EvalError::io(&path, e))?;
        }
    }
    Ok(())
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), EvalError> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| EvalError::io(parent, e))?;
    }
    std::fs::write(path, bytes).map_err(|e| EvalError::io(path, e))
}

/// The bytes a link takes in `text`, an embed's `!` included.
fn link_span(text: &str, link: &Link) -> Range<usize> {
    let start = link.range.start;
    let bang = link.embed && start > 0 && text.as_bytes()[start - 1] == b'!';
    (start - usize::from(bang))..link.range.end
}

/// `text` without the byte `ranges` (in order, not overlapping).
fn without(text: &str, ranges: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in ranges {
        out.push_str(&text[at..r.start]);
        at = r.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault(notes: &[(String, String)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in notes {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    /// The first note names `note-N.md` that are (`true`) or are not queries.
    fn names(query: bool, n: usize) -> Vec<String> {
        (0..)
            .map(|i| format!("note-{i}.md"))
            .filter(|id| is_query(id) == query)
            .take(n)
            .collect()
    }

    #[test]
    fn a_linking_note_asks_for_its_targets_in_its_own_words_without_the_links() {
        let asking = &names(true, 2);
        let kept = &names(false, 1)[0];
        let body = "# Backups\n\nNightly snapshots of the database go to [[storage]] and are \
                    checked by ![[restore-drill]] each week. See [[missing]] too.\n";
        let dir = vault(&[
            (asking[0].clone(), body.to_string()),
            (asking[1].clone(), "# Short\n\nOnly [[storage]].\n".into()),
            (kept.clone(), body.to_string()),
            (
                "storage.md".into(),
                "# Storage\n\nBuckets and retention.\n".into(),
            ),
            (
                "restore-drill.md".into(),
                "# Restore drill\n\nHow we test restores.\n".into(),
            ),
        ]);
        let copy = tempfile::tempdir().unwrap();
        let mut settings = Settings::default();
        settings.embed.backend = finder_core::EmbedBackend::None;
        let d = links_dataset(dir.path(), &settings, copy.path()).unwrap();
        // The short note keeps too few words, the note that is no query keeps its links, and
        // `storage.md` and `restore-drill.md` link nowhere.
        assert_eq!(d.queries.len(), 1);
        let q = &d.queries[0];
        assert_eq!(&q.id, &asking[0]);
        assert!(
            !q.text.contains("[[") && !q.text.contains('!'),
            "{}",
            q.text
        );
        assert!(q
            .text
            .contains("Nightly snapshots of the database go to  and are"));
        let mut wanted: Vec<&String> = d.qrels[&asking[0]].keys().collect();
        wanted.sort();
        assert_eq!(wanted, ["restore-drill.md", "storage.md"]);
        assert_eq!(d.sources.as_ref().map(Vec::len), Some(5));
        // The copy searched: the query note without its links, every other file as it was.
        let read = |id: &str| std::fs::read_to_string(copy.path().join(id)).unwrap();
        assert!(!read(&asking[0]).contains("[[") && read(&asking[0]).contains("Nightly"));
        assert_eq!(read(kept), body);
        assert_eq!(read(&asking[1]), "# Short\n\nOnly [[storage]].\n");
        assert_eq!(d.dir, copy.path());
        // A note gone from the vault goes from the copy on the next build.
        std::fs::remove_file(dir.path().join(kept)).unwrap();
        links_dataset(dir.path(), &settings, copy.path()).unwrap();
        assert!(!copy.path().join(kept).exists());
        assert!(copy.path().join(&asking[0]).exists());
    }

    #[test]
    fn a_vault_without_links_is_an_error_naming_the_folder_and_the_link_order() {
        let dir = vault(&[(
            "a.md".into(),
            "# A\n\nNo links here at all, only words.\n".into(),
        )]);
        let copy = tempfile::tempdir().unwrap();
        let err = links_dataset(dir.path(), &Settings::default(), copy.path()).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("no note links") && message.contains("TargetFirst"),
            "{message}"
        );
    }
}
