//! Ingestion: turns one input (a notes folder, a JSON Lines file or a BEIR folder) into
//! sources with fragments, streaming them and the problems met in a deterministic order.

mod boundary;
mod formats;
mod fragment;
mod front_matter;
mod markdown;
mod note;
mod records;
mod summary;
mod walk;

pub(crate) use walk::{ignored_files, relative, IGNORE_FILES};

use std::path::{Path, PathBuf};

use finder_core::IndexSettings;

pub use fragment::fragment;
pub use summary::derive_summary;

// The parsers' own entry points, for `crate::fuzzing`.
pub(crate) use note::note_from_bytes;
pub(crate) use records::{read_lines, Layout};

use crate::document::{Problem, SourceDoc};

/// Longest title (and heading) kept, in characters. A title is indexed with every fragment of
/// its source (`index.title_in_fragments`) and a heading names each fragment under it, so a
/// runaway one (a 20 MB heading line, a record's megabyte `title`) would be copied into every
/// fragment; past this it is cut at a word break and ends in `…`. The full text of a heading
/// stays in its fragment.
pub(crate) const MAX_TITLE_CHARS: usize = 500;

/// `title` cut to [`MAX_TITLE_CHARS`].
pub(crate) fn clip_title(title: String) -> String {
    if title.chars().count() <= MAX_TITLE_CHARS {
        return title;
    }
    let mut cut: String = title.chars().take(MAX_TITLE_CHARS - 1).collect();
    if let Some(space) = cut.rfind(char::is_whitespace) {
        if cut[..space].chars().count() > MAX_TITLE_CHARS / 2 {
            cut.truncate(space);
        }
    }
    let mut cut = cut.trim_end().to_string();
    cut.push('…');
    cut
}

/// The bytes `inputs` hold, counted until the sum passes `limit`: a record file's length, a
/// BEIR folder's `corpus.jsonl`, a notes folder's note files. An input that cannot be read
/// counts nothing (reading it reports the problem).
pub(crate) fn input_bytes_up_to(inputs: &[PathBuf], limit: u64) -> u64 {
    let mut bytes = 0u64;
    for input in inputs {
        if bytes > limit {
            break;
        }
        bytes += match detect(input) {
            Ok(InputKind::Folder) => walk::note_bytes_up_to(input, limit - bytes),
            Ok(InputKind::Jsonl) => std::fs::metadata(input).map_or(0, |m| m.len()),
            Ok(InputKind::Beir) => {
                std::fs::metadata(input.join("corpus.jsonl")).map_or(0, |m| m.len())
            }
            Err(_) => 0,
        };
    }
    bytes
}

/// What kind of input a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A folder of Markdown / plain-text notes.
    Folder,
    /// A JSON Lines file of source records.
    Jsonl,
    /// A BEIR-layout folder (its `corpus.jsonl`).
    Beir,
}

/// A folder with `corpus.jsonl` is BEIR, any other folder is notes, a `.jsonl` / `.ndjson`
/// file is records. A single note file is refused: its id would depend on where it was
/// taken from, so its folder is the input.
pub fn detect(path: &Path) -> Result<InputKind, Problem> {
    let refuse = |reason: String| Problem {
        place: path.display().to_string(),
        reason,
        source_id: None,
    };
    let meta = std::fs::metadata(path).map_err(|e| refuse(format!("cannot read input: {e}")))?;
    if meta.is_dir() {
        return Ok(if path.join("corpus.jsonl").is_file() {
            InputKind::Beir
        } else {
            InputKind::Folder
        });
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".jsonl") || name.ends_with(".ndjson") {
        if !meta.is_file() {
            // Opening a FIFO would wait for a writer forever.
            return Err(refuse(format!(
                "not a regular file ({}); a record input must be a file",
                walk::special_kind(&meta.file_type())
            )));
        }
        return Ok(InputKind::Jsonl);
    }
    if walk::is_note_name(&name) {
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        return Err(refuse(format!(
            "a single note is not an input; pass its folder ({}) instead",
            folder.display()
        )));
    }
    Err(refuse(
        "not an input: expected a folder of notes, a .jsonl/.ndjson file or a BEIR folder"
            .to_string(),
    ))
}

/// Reads one input and streams every source (or problem) to `sink`, in a deterministic order
/// (sorted paths for folders, file order for records). `origin` is stored in each source.
/// The error is for an input that cannot be read at all; anything smaller is a problem in
/// the stream.
pub fn read_input(
    path: &Path,
    origin: &str,
    settings: &IndexSettings,
    sink: &mut dyn FnMut(Result<SourceDoc, Problem>),
) -> Result<InputKind, Problem> {
    let kind = detect(path)?;
    match kind {
        InputKind::Folder => {
            for item in walk::note_files(path) {
                match item {
                    Ok(file) => note::read_note(&file.id, &file.path, origin, settings, sink),
                    Err(problem) => sink(Err(problem)),
                }
            }
        }
        InputKind::Jsonl => {
            records::read_records(path, records::Layout::Records, origin, settings, sink)?
        }
        InputKind::Beir => {
            records::read_records(
                &path.join("corpus.jsonl"),
                records::Layout::Beir,
                origin,
                settings,
                sink,
            )?;
        }
    }
    Ok(kind)
}

/// Reads Finder records (JSON Lines, as in a `.jsonl` input) from `bytes`, as [`read_input`]
/// reads a record file: `name` is the file name in problem places, each line's bytes are its
/// source's hash. For records kept elsewhere than in a file (the API documents of a
/// PostgreSQL store).
pub fn read_record_lines(
    bytes: &[u8],
    name: &str,
    origin: &str,
    settings: &IndexSettings,
    sink: &mut dyn FnMut(Result<SourceDoc, Problem>),
) {
    records::read_lines(
        bytes,
        name,
        records::Layout::Records,
        origin,
        settings,
        sink,
    );
}

/// [`read_input`] of a folder input, reading only the notes at `paths` under it (files, or
/// folders and all they hold) that its walk would find, in the walk's order.
pub(crate) fn read_notes_at(
    folder: &Path,
    paths: &[PathBuf],
    origin: &str,
    settings: &IndexSettings,
    sink: &mut dyn FnMut(Result<SourceDoc, Problem>),
) {
    for item in walk::note_files_at(folder, paths) {
        match item {
            Ok(file) => note::read_note(&file.id, &file.path, origin, settings, sink),
            Err(problem) => sink(Err(problem)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    fn collect(path: &Path) -> (InputKind, Vec<SourceDoc>, Vec<Problem>) {
        let mut sources = Vec::new();
        let mut problems = Vec::new();
        let kind = read_input(
            path,
            "origin",
            &IndexSettings::default(),
            &mut |item| match item {
                Ok(s) => sources.push(s),
                Err(p) => problems.push(p),
            },
        )
        .unwrap();
        (kind, sources, problems)
    }

    fn write(root: &Path, name: &str, bytes: &[u8]) {
        let path = root.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    #[test]
    fn input_bytes_count_what_is_read_and_stop_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "notes/a.md", &[b'a'; 100]);
        write(root, "notes/sub/b.txt", &[b'b'; 50]);
        write(root, "notes/.hidden/c.md", &[b'c'; 1000]);
        write(root, "notes/image.png", &[b'd'; 1000]);
        write(root, "beir/corpus.jsonl", &[b'e'; 30]);
        write(root, "beir/queries.jsonl", &[b'f'; 1000]);
        write(root, "recs.jsonl", &[b'g'; 7]);
        let inputs =
            |names: &[&str]| -> Vec<PathBuf> { names.iter().map(|n| root.join(n)).collect() };
        let all = inputs(&["notes", "beir", "recs.jsonl", "missing.jsonl"]);
        assert_eq!(input_bytes_up_to(&all, u64::MAX), 187);
        assert_eq!(input_bytes_up_to(&inputs(&["notes"]), u64::MAX), 150);
        // Past the limit the count stops: the folder's walk after its first note, the rest
        // of the inputs unread.
        assert_eq!(input_bytes_up_to(&all, 10), 100);
        assert_eq!(input_bytes_up_to(&inputs(&["recs.jsonl", "beir"]), 5), 7);
        assert_eq!(input_bytes_up_to(&[], 0), 0);
    }

    #[test]
    fn detect_tells_the_kinds_apart() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "notes/a.md", b"x");
        write(root, "beir/corpus.jsonl", b"");
        write(root, "recs.JSONL", b"");
        write(root, "recs.ndjson", b"");
        write(root, "data.csv", b"");
        assert_eq!(detect(&root.join("notes")), Ok(InputKind::Folder));
        assert_eq!(detect(&root.join("beir")), Ok(InputKind::Beir));
        assert_eq!(detect(&root.join("recs.JSONL")), Ok(InputKind::Jsonl));
        assert_eq!(detect(&root.join("recs.ndjson")), Ok(InputKind::Jsonl));
        let single = detect(&root.join("notes/a.md")).unwrap_err();
        assert!(single.reason.contains("pass its folder"), "{single}");
        assert!(single.reason.contains("notes"), "{single}");
        assert!(detect(&root.join("data.csv"))
            .unwrap_err()
            .reason
            .starts_with("not an input"));
        assert!(detect(&root.join("missing"))
            .unwrap_err()
            .reason
            .starts_with("cannot read input"));
    }

    #[test]
    fn folder_input_streams_sources_and_problems_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "b.md", b"---\ntitle: B\n---\nBody of b.\n");
        write(root, "a.md", b"---\ntitle: [oops\n---\nBody of a.\n");
        write(root, "sub/c.txt", b"plain text note");
        write(root, "sub/bad.md", b"\xff");
        write(root, "sub/empty.md", b"");
        let mut order = Vec::new();
        read_input(root, "o", &IndexSettings::default(), &mut |item| {
            order.push(match item {
                Ok(s) => format!("ok {}", s.id),
                Err(p) => format!("problem {}", p.place),
            })
        })
        .unwrap();
        assert_eq!(
            order,
            vec![
                "ok a.md",
                "problem a.md:3",
                "ok b.md",
                "problem sub/bad.md:1",
                "ok sub/c.txt",
                "ok sub/empty.md"
            ]
        );
        let (kind, sources, _) = collect(root);
        assert_eq!(kind, InputKind::Folder);
        assert_eq!(sources[2].envelope.title, "c");
        assert_eq!(sources[2].summary, "plain text note");
        assert!(sources.iter().all(|s| s.origin == "origin"));
    }

    #[cfg(unix)]
    #[test]
    fn unreadable_file_is_a_problem_that_keeps_its_id() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "locked.md", b"secret");
        let path = dir.path().join("locked.md");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
        if fs::read(&path).is_ok() {
            println!("running with permission to read anything (root?); skipping");
            return;
        }
        let (_, sources, problems) = collect(dir.path());
        assert!(sources.is_empty());
        assert_eq!(problems[0].place, "locked.md");
        assert!(problems[0].reason.starts_with("cannot read file"));
        assert_eq!(problems[0].source_id.as_deref(), Some("locked.md"));
    }

    #[test]
    fn jsonl_and_beir_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "recs.jsonl",
            b"{\"id\": \"r1\", \"text\": \"one\"}\nnot json\n{\"id\": \"r2\", \"text\": \"two\"}\n",
        );
        let (kind, sources, problems) = collect(&root.join("recs.jsonl"));
        assert_eq!(kind, InputKind::Jsonl);
        assert_eq!(
            sources.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            vec!["r1", "r2"]
        );
        assert_eq!(problems[0].place, "recs.jsonl:2");

        write(
            root,
            "beir/corpus.jsonl",
            b"{\"_id\": \"d1\", \"title\": \"T\", \"text\": \"Doc text.\", \"metadata\": {}}\n",
        );
        write(
            root,
            "beir/queries.jsonl",
            b"{\"_id\": \"q1\", \"text\": \"query\"}\n",
        );
        let (kind, sources, problems) = collect(&root.join("beir"));
        assert_eq!(kind, InputKind::Beir);
        assert!(problems.is_empty());
        assert_eq!(sources.len(), 1);
        assert_eq!(
            (sources[0].id.as_str(), sources[0].envelope.title.as_str()),
            ("d1", "T")
        );
        assert_eq!(sources[0].fragments[0].text, "Doc text.");
    }

    fn shared_data(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data")
            .join(rel)
    }

    #[test]
    fn real_dendron_notes_read_cleanly_with_exact_extents() {
        let root = shared_data("dendron_site_vault/notes");
        if !root.is_dir() {
            println!("{} absent; skipping", root.display());
            return;
        }
        let (_, sources, problems) = collect(&root);
        for p in &problems {
            println!("problem: {p}");
        }
        assert!(sources.len() > 1000, "{} sources", sources.len());
        assert!(
            !problems.iter().any(|p| p.reason.contains("UTF-8")),
            "non-UTF-8 problems"
        );
        let mut fragments = 0;
        for source in &sources {
            let bytes = fs::read(root.join(&source.id)).unwrap();
            assert_eq!(source.hash, blake3::hash(&bytes).to_hex().to_string());
            for f in &source.fragments {
                let e = f.extent;
                assert_eq!(
                    &bytes[e.byte_start as usize..e.byte_end as usize],
                    f.text.as_bytes(),
                    "{}",
                    source.id
                );
                let lines_before = bytes[..e.byte_start as usize]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count();
                assert_eq!(e.line_start as usize, 1 + lines_before, "{}", source.id);
                assert!(f.text.chars().count() <= IndexSettings::default().fragment_max_chars);
                fragments += 1;
            }
        }
        println!(
            "{} sources, {fragments} fragments, {} problems",
            sources.len(),
            problems.len()
        );
    }

    #[test]
    fn bundled_example_notes_read_without_problems() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notes");
        if !root.is_dir() {
            println!("{} absent; skipping", root.display());
            return;
        }
        let (_, sources, problems) = collect(&root);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(
            (10..=14).contains(&sources.len()),
            "{} notes",
            sources.len()
        );
        assert!(
            sources.iter().any(|s| s.id.contains('/')),
            "a note in a subfolder"
        );
        assert!(
            sources.iter().any(|s| s.id.ends_with(".txt")),
            "a plain-text note"
        );
        assert!(sources
            .iter()
            .all(|s| !s.envelope.title.is_empty() && !s.summary.is_empty()));
    }
}
