//! Runs limited to the paths a watcher saw change (`index_changed`, through a `Follower` as a
//! watch makes them) against runs over every file: after any sequence of file and folder
//! changes, both indexes hold the same sources and the same graph, and every file reads as
//! indexed. Some changes are indexed by another writer, so what the follower kept no longer
//! describes the index.

use std::path::{Path, PathBuf};

use finder_core::Settings;
use finder_index::freshness::file_states;
use finder_index::{index_changed, index_inputs, Follower};
use proptest::prelude::*;

use crate::support::graph_file;

/// One change to the vault, with the paths a watcher reports for it.
#[derive(Debug, Clone)]
enum Change {
    Write {
        at: u8,
        words: u8,
    },
    /// A write indexed by another writer than the follower.
    Outside {
        at: u8,
        words: u8,
    },
    Delete {
        at: u8,
    },
    Rename {
        from: u8,
        to: u8,
    },
    RenameFolder {
        from: u8,
        to: u8,
    },
    DeleteFolder {
        at: u8,
    },
}

const FOLDERS: &[&str] = &["", "a", "a/b", "c", ".hidden", "node_modules"];

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        5 => (any::<u8>(), any::<u8>()).prop_map(|(at, words)| Change::Write { at, words }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(at, words)| Change::Outside { at, words }),
        2 => any::<u8>().prop_map(|at| Change::Delete { at }),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(from, to)| Change::Rename { from, to }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(from, to)| Change::RenameFolder { from, to }),
        1 => any::<u8>().prop_map(|at| Change::DeleteFolder { at }),
    ]
}

/// The file a number names: a folder, a name, and an ignored (`*.tmp.md`) or plain note.
fn file(root: &Path, n: u8) -> PathBuf {
    let folder = FOLDERS[n as usize % FOLDERS.len()];
    let name = match n / 6 % 4 {
        3 => format!("n{}.tmp.md", n / 24 % 3),
        _ => format!("n{}.md", n / 6 % 4),
    };
    root.join(folder).join(name)
}

fn folder(root: &Path, n: u8) -> PathBuf {
    // not the root itself
    root.join(FOLDERS[1 + n as usize % (FOLDERS.len() - 1)])
}

/// Applies `change`; returns the paths a watcher would report.
fn apply(root: &Path, change: &Change) -> Vec<PathBuf> {
    match *change {
        Change::Write { at, words } | Change::Outside { at, words } => {
            let path = file(root, at);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            // Some notes are empty or hold front matter only: a source without fragments.
            let text = match words % 8 {
                0 => String::new(),
                1 => format!("---\ntags: [t{at}]\n---\n"),
                _ => format!("# Note {at}\n\nword{} and more words {words}\n", words % 7),
            };
            std::fs::write(&path, text).unwrap();
            vec![path]
        }
        Change::Delete { at } => {
            let path = file(root, at);
            let _ = std::fs::remove_file(&path);
            vec![path]
        }
        Change::Rename { from, to } => {
            let (from, to) = (file(root, from), file(root, to));
            if from.is_file() {
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::rename(&from, &to).unwrap();
            }
            vec![from, to]
        }
        Change::RenameFolder { from, to } => {
            let (from, to) = (folder(root, from), folder(root, to));
            // A folder cannot move into itself, nor over a folder that holds files.
            if from.is_dir() && !to.starts_with(&from) && !from.starts_with(&to) && !to.exists() {
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::rename(&from, &to).unwrap();
            }
            vec![from, to]
        }
        Change::DeleteFolder { at } => {
            let path = folder(root, at);
            let _ = std::fs::remove_dir_all(&path);
            vec![path]
        }
    }
}

fn check(changes: &[Change]) {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(notes.join("a")).unwrap();
    std::fs::write(notes.join(".finderignore"), "*.tmp.md\n").unwrap();
    std::fs::write(notes.join("a/first.md"), "# First\n\nthe first note\n").unwrap();
    let notes = notes.canonicalize().unwrap();
    let (watched, full) = (dir.path().join("watched"), dir.path().join("full"));
    let settings = Settings::default();
    // The input as a user may give it (here through a link); the changed paths come
    // canonical, as a watcher's do.
    let link = dir.path().join("vault");
    std::os::unix::fs::symlink(&notes, &link).unwrap();
    let inputs = [link];
    let mut follower = Follower::default();
    follower
        .index_inputs(&watched, &inputs, &settings, &mut |_| {})
        .unwrap();
    for (step, change) in changes.iter().enumerate() {
        let paths = apply(&notes, change);
        match change {
            Change::Outside { .. } => {
                index_changed(&watched, &inputs, &paths, &settings, &mut |_| {})
            }
            _ => follower.index_changed(&watched, &inputs, &paths, &settings, &mut |_| {}),
        }
        .unwrap();
        index_inputs(&full, &inputs, &settings, &mut |_| {}).unwrap();
        let (a, b) = (
            file_states(&watched, &settings).unwrap(),
            file_states(&full, &settings).unwrap(),
        );
        assert_eq!(a, b, "after {:?}", &changes[..=step]);
        // The graph made from the run's own records equals the one read from the store.
        assert_eq!(
            graph_file(&watched),
            graph_file(&full),
            "graph after {:?}",
            &changes[..=step]
        );
        let stale: Vec<_> = a
            .files
            .iter()
            .filter(|f| !matches!(f.state.name(), "indexed" | "ignored"))
            .collect();
        assert!(stale.is_empty(), "after {:?}: {stale:?}", &changes[..=step]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn a_run_over_the_changed_paths_equals_a_run_over_every_file(
        changes in prop::collection::vec(change(), 1..10)
    ) {
        check(&changes);
    }
}

#[test]
fn a_run_over_changed_paths_reads_only_them_and_an_ignore_file_reads_all() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    for i in 0..20 {
        std::fs::create_dir_all(notes.join("sub")).unwrap();
        std::fs::write(
            notes.join(format!("sub/n{i}.md")),
            format!("# N{i}\n\ntext {i}\n"),
        )
        .unwrap();
    }
    let notes = notes.canonicalize().unwrap();
    let index = dir.path().join("index");
    let settings = Settings::default();
    let inputs = [notes.clone()];
    index_inputs(&index, &inputs, &settings, &mut |_| {}).unwrap();
    let read = |changed: &[PathBuf]| {
        let mut sources = 0;
        let report = index_changed(&index, &inputs, changed, &settings, &mut |p| {
            if let finder_index::Progress::Source { done } = p {
                sources = done;
            }
        })
        .unwrap();
        (sources, report.counts)
    };
    std::fs::write(notes.join("sub/n3.md"), "# N3\n\nedited\n").unwrap();
    let (sources, counts) = read(&[notes.join("sub/n3.md")]);
    assert_eq!((sources, counts.updated, counts.unchanged), (1, 1, 0));
    // A rename: the old path is gone, the new one read.
    std::fs::rename(notes.join("sub/n4.md"), notes.join("sub/four.md")).unwrap();
    let (sources, counts) = read(&[notes.join("sub/n4.md"), notes.join("sub/four.md")]);
    assert_eq!((sources, counts.added, counts.removed), (1, 1, 1));
    // A folder moved, reported with a note inside it: each note is read once.
    std::fs::rename(notes.join("sub"), notes.join("moved")).unwrap();
    let changed = [
        notes.join("sub"),
        notes.join("moved"),
        notes.join("moved/n5.md"),
    ];
    let (sources, counts) = read(&changed);
    assert_eq!((sources, counts.added, counts.removed), (20, 20, 20));
    assert_eq!(counts.problems, 0);
    // A new ignore rule may leave out anything: every file is read.
    std::fs::write(notes.join(".finderignore"), "n1*.md\n").unwrap();
    let (sources, counts) = read(&[notes.join(".finderignore")]);
    assert_eq!((sources, counts.removed), (9, 11));
}
