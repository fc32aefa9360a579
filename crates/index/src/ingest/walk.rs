//! The folder walk: every note file under a folder, sorted by relative path, reporting symlinks
//! instead of following them. It skips what ripgrep skips, through ripgrep's own `ignore`
//! crate: hidden names (`.git`, `.obsidian`, `.hidden.md`), and whatever `.gitignore`,
//! `.ignore` or a `.finderignore` in the folder or above it says. Two differences: a
//! `.gitignore` counts without a git repository around it (a vault is often not one), and the
//! user's global git excludes do not (the index follows the folder's files alone). `node_modules`
//! folders are skipped too.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ignore::{DirEntry, Walk, WalkBuilder};

use crate::document::Problem;

/// A note file found by the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NoteFile {
    /// Path relative to the folder, `/`-separated: the source id.
    pub id: String,
    pub path: PathBuf,
}

/// Whether a file name is a note: `.md`, `.markdown` or `.txt`, in any case.
pub(super) fn is_note_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".md", ".markdown", ".txt"]
        .iter()
        .any(|ext| lower.ends_with(ext))
        || super::formats::format_of(&lower).is_some()
}

/// Finder's own ignore file, read like a `.gitignore` (later rules win, `!` re-includes).
pub const IGNORE_FILE: &str = ".finderignore";

/// Every ignore file the walk reads, the first taking precedence in one folder.
pub(crate) const IGNORE_FILES: [&str; 3] = [IGNORE_FILE, ".ignore", ".gitignore"];

/// Folders skipped wherever they are, besides hidden ones.
const SKIPPED_DIRS: &[&str] = &["node_modules"];

/// The walk over `root` with the rules above; `sorted` walks each folder in name order.
fn walker(root: &Path, sorted: bool) -> Walk {
    walker_from(root, None, sorted)
}

/// [`walker`] started at `start` (`root` or a folder under it; the ignore files of the
/// folders above `start` apply, as they do in a walk from `root`), `max_depth` deep at most.
fn walker_from(start: &Path, max_depth: Option<usize>, sorted: bool) -> Walk {
    let mut builder = WalkBuilder::new(start);
    builder.max_depth(max_depth);
    builder
        .follow_links(false)
        .hidden(true)
        .require_git(false)
        .git_global(false)
        .add_custom_ignore_filename(IGNORE_FILE)
        .filter_entry(|e| {
            let dir = e.file_type().is_some_and(|t| t.is_dir());
            !(dir && e.depth() > 0 && SKIPPED_DIRS.iter().any(|d| e.file_name() == *d))
        });
    if sorted {
        builder.sort_by_file_name(|a, b| a.cmp(b));
    }
    builder.build()
}

/// The path an `ignore` error is about, if it names one.
fn error_path(e: &ignore::Error) -> Option<&Path> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}

fn is_file(entry: &DirEntry) -> bool {
    entry.file_type().is_some_and(|t| t.is_file())
}

/// What the walk of `root` leaves out by a rule, each with the rule that did: note files, and
/// folders (listed once, not their contents). Hidden names are not listed.
pub(crate) fn ignored_files(root: &Path) -> Vec<(String, String)> {
    let kept: std::collections::HashSet<PathBuf> = walker(root, false)
        .flatten()
        .map(DirEntry::into_path)
        .collect();
    let mut everything = WalkBuilder::new(root);
    everything
        .standard_filters(false)
        .hidden(true)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    let mut matchers = std::collections::HashMap::new();
    let mut out: Vec<(String, String)> = Vec::new();
    let mut skipped_dirs: Vec<PathBuf> = Vec::new();
    for entry in everything.build().flatten() {
        let path = entry.path();
        if entry.depth() == 0
            || kept.contains(path)
            || skipped_dirs.iter().any(|d| path.starts_with(d))
        {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir {
            skipped_dirs.push(path.to_path_buf());
        } else if !is_note_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let mut id = relative(root, path);
        if is_dir {
            id.push('/');
        }
        out.push((id, rule_for(root, path, is_dir, &mut matchers)));
    }
    out
}

/// The ignore rule that leaves `path` out: the nearest ignore file with a matching line,
/// `.finderignore` before `.ignore` before `.gitignore` in one folder.
fn rule_for(
    root: &Path,
    path: &Path,
    is_dir: bool,
    matchers: &mut std::collections::HashMap<PathBuf, ignore::gitignore::Gitignore>,
) -> String {
    if is_dir
        && SKIPPED_DIRS
            .iter()
            .any(|d| path.file_name() == Some(d.as_ref()))
    {
        return "always skipped".to_string();
    }
    for dir in path.ancestors().skip(1).take_while(|d| d.starts_with(root)) {
        for name in IGNORE_FILES {
            let file = dir.join(name);
            if !file.is_file() {
                continue;
            }
            let matcher = matchers
                .entry(file.clone())
                .or_insert_with(|| ignore::gitignore::Gitignore::new(&file).0);
            if let ignore::Match::Ignore(glob) = matcher.matched_path_or_any_parents(path, is_dir) {
                return format!("{}: {}", relative(root, &file), glob.original());
            }
        }
    }
    "an ignore file above the folder".to_string()
}

/// The bytes of the note files under `root`, counted until the sum passes `limit` (the walk
/// stops there, so a large folder is not walked to its end for an estimate). What cannot be
/// read counts nothing: the reading walk reports it.
pub(super) fn note_bytes_up_to(root: &Path, limit: u64) -> u64 {
    let mut bytes = 0u64;
    for entry in walker(root, true).flatten() {
        if !is_file(&entry) || !is_note_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        bytes += entry.metadata().map_or(0, |m| m.len());
        if bytes > limit {
            break;
        }
    }
    bytes
}

/// The note files under `root` and the problems met on the way, in relative-path order.
pub(super) fn note_files(root: &Path) -> Vec<Result<NoteFile, Problem>> {
    note_files_from(root, root, None, &|_| true)
}

/// The note files a walk of `root` finds at `paths` (files, or folders and all they hold),
/// and the problems it reports there, in the same order; a path the walk would not reach
/// (hidden, ignored, gone) gives nothing.
pub(super) fn note_files_at(root: &Path, paths: &[PathBuf]) -> Vec<Result<NoteFile, Problem>> {
    // The paths come canonical (from a file watcher); the input may have been given as
    // `notes` or `./vault/../notes`.
    let root = &root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut folders: Vec<&PathBuf> = Vec::new();
    let mut files: std::collections::BTreeMap<&Path, HashSet<&Path>> = Default::default();
    for path in paths {
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        // Hidden and always-skipped folders are never walked into; a walk from below them
        // would not know it.
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let name = parts.pop();
        let skipped = |p: &String| p.starts_with('.') || SKIPPED_DIRS.contains(&p.as_str());
        if parts.iter().any(skipped) || name.as_ref().is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if meta.is_dir() && !name.as_ref().is_some_and(skipped) {
            folders.push(path);
        } else if !meta.is_dir() {
            files
                .entry(path.parent().unwrap_or(root))
                .or_default()
                .insert(path);
        }
    }
    // Each note once: what a changed folder holds is read with it.
    folders.sort();
    folders.dedup_by(|inner, outer| inner.starts_with(outer));
    let in_folder = |p: &Path| folders.iter().any(|f| p.starts_with(f));
    let mut found = Vec::new();
    for &folder in &folders {
        // A folder's entry itself is judged by the walk of its parent.
        let parent = folder.parent().unwrap_or(root);
        let reached = walker_from(parent, Some(1), false)
            .flatten()
            .any(|e| e.depth() == 1 && e.path() == folder);
        if reached {
            found.extend(note_files_from(root, folder, None, &|_| true));
        }
    }
    // Files are read by one walk of their folder each, however many changed there.
    for (parent, paths) in files.into_iter().filter(|(parent, _)| !in_folder(parent)) {
        found.extend(note_files_from(root, parent, Some(1), &|p| {
            paths.contains(p)
        }));
    }
    found
}

/// The note files of a walk from `start` (under `root`, ids relative to `root`) whose path
/// `wanted` keeps.
fn note_files_from(
    root: &Path,
    start: &Path,
    max_depth: Option<usize>,
    wanted: &dyn Fn(&Path) -> bool,
) -> Vec<Result<NoteFile, Problem>> {
    let mut found: Vec<(String, Result<NoteFile, Problem>)> = Vec::new();
    for entry in walker_from(start, max_depth, false) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                if error_path(&e).is_some_and(|p| !wanted(p)) {
                    continue;
                }
                let place = error_path(&e)
                    .map_or_else(|| root.display().to_string(), |p| relative(root, p));
                let reason = format!(
                    "cannot read: {}",
                    e.io_error()
                        .map_or_else(|| e.to_string(), ToString::to_string)
                );
                found.push((
                    place.clone(),
                    Err(Problem {
                        place,
                        reason,
                        source_id: None,
                    }),
                ));
                continue;
            }
        };
        if let Some(e) = entry.error() {
            // An ignore file with a rule that does not parse: the other rules still hold.
            let place =
                error_path(e).map_or_else(|| relative(root, entry.path()), |p| relative(root, p));
            found.push((
                place.clone(),
                Err(Problem {
                    place: place.clone(),
                    reason: format!("ignore rule not understood: {e}"),
                    source_id: Some(place),
                }),
            ));
        }
        if entry.depth() == 0 || !wanted(entry.path()) {
            continue;
        }
        let name = entry.file_name().to_string_lossy();
        let id = relative(root, entry.path());
        if entry.path_is_symlink() {
            // Only links that would have been read are worth a word: folders and note names.
            let to_dir = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
            if to_dir || is_note_name(&name) {
                let problem = Problem {
                    place: id.clone(),
                    reason: "symlink not followed".to_string(),
                    // An id (never indexed) rather than None: a skipped link must not hold
                    // back removals for the whole folder.
                    source_id: Some(id.clone()),
                };
                found.push((id, Err(problem)));
            }
            continue;
        }
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if !is_note_name(&name) || file_type.is_dir() {
            continue;
        }
        if !file_type.is_file() {
            // A FIFO, socket or device named like a note: opening a FIFO would wait for a
            // writer forever, so it is reported and never opened.
            let problem = Problem {
                place: id.clone(),
                reason: format!(
                    "not a regular file ({}); not read",
                    special_kind(&file_type)
                ),
                source_id: Some(id.clone()),
            };
            found.push((id, Err(problem)));
            continue;
        }
        if entry
            .path()
            .strip_prefix(root)
            .ok()
            .and_then(Path::to_str)
            .is_none()
        {
            let reason = "file name is not valid UTF-8; rename it to index it".to_string();
            found.push((
                id.clone(),
                Err(Problem {
                    place: id,
                    reason,
                    source_id: None,
                }),
            ));
            continue;
        }
        found.push((
            id.clone(),
            Ok(NoteFile {
                id,
                path: entry.into_path(),
            }),
        ));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.into_iter().map(|(_, item)| item).collect()
}

/// What kind of special file a non-regular, non-folder, non-link entry is.
pub(super) fn special_kind(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "a device";
        }
    }
    let _ = file_type;
    "a special file"
}

/// `path` relative to `root`, with `/` between components.
/// The id of the note at `path` in a walk of `root`: its relative path, `/`-separated.
pub(crate) fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn ids(root: &Path) -> Vec<Result<String, String>> {
        note_files(root)
            .into_iter()
            .map(|r| r.map(|f| f.id).map_err(|p| p.to_string()))
            .collect()
    }

    #[test]
    fn walks_sorted_skipping_hidden_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in [
            "b.md",
            "a.TXT",
            "sub/c.markdown",
            "sub/deeper/d.md",
            "image.png",
            ".hidden.md",
            ".git/x.md",
            "sub/.obsidian/y.md",
        ] {
            let path = root.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, "x").unwrap();
        }
        assert_eq!(
            ids(root),
            vec![
                Ok("a.TXT".into()),
                Ok("b.md".into()),
                Ok("sub/c.markdown".into()),
                Ok("sub/deeper/d.md".into())
            ]
        );
    }

    #[test]
    fn ignore_files_are_honoured_as_ripgrep_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in [
            "keep.md",
            "drafts/wip.md",
            "sub/scratch.tmp.md",
            "sub/kept.md",
            "sub/private.md",
            "vendor/readme.md",
            "vendor/notes.md",
            "node_modules/pkg/readme.md",
        ] {
            let path = root.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, "x").unwrap();
        }
        // No git repository: the .gitignore counts all the same.
        fs::write(root.join(".gitignore"), "drafts/\n*.tmp.md\n").unwrap();
        fs::write(root.join("sub/.ignore"), "private.md\n").unwrap();
        // Finder's own file, with a rule that takes one file back.
        fs::write(root.join(".finderignore"), "vendor/*\n!vendor/notes.md\n").unwrap();
        assert_eq!(
            ids(root),
            vec![
                Ok("keep.md".into()),
                Ok("sub/kept.md".into()),
                Ok("vendor/notes.md".into())
            ]
        );
        // The estimate walks by the same rules.
        assert_eq!(note_bytes_up_to(root, u64::MAX), 3);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_reported_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("notes");
        let outside = dir.path().join("outside");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.md"), "x").unwrap();
        fs::write(root.join("real.md"), "x").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.md"), root.join("link.md")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linked_dir")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.md"), root.join("not_a_note.bin")).unwrap();
        assert_eq!(
            ids(&root),
            vec![
                Err("link.md: symlink not followed".into()),
                Err("linked_dir: symlink not followed".into()),
                Ok("real.md".into()),
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn special_files_named_like_notes_are_reported_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let fifo = root.join("pipe.md");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            println!("mkfifo unavailable; skipping");
            return;
        }
        fs::create_dir_all(root.join("folder.md")).unwrap();
        fs::write(root.join("folder.md/inner.md"), "x").unwrap();
        assert_eq!(
            ids(root),
            vec![
                Ok("folder.md/inner.md".into()),
                Err("pipe.md: not a regular file (a FIFO); not read".into()),
            ]
        );
    }

    #[test]
    fn note_names_by_extension_in_any_case() {
        assert!(is_note_name("A.MD") && is_note_name("x.Markdown") && is_note_name("t.txt"));
        assert!(!is_note_name("x.mdx") && !is_note_name("md") && !is_note_name("a.json"));
    }
}
