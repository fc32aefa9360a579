//! The graph after each indexing run reuses what the last build found in unchanged sources
//! (`graph/parts.json`); after any sequence of edits it must equal a build from scratch.

use std::path::Path;

use finder_core::Settings;
use finder_index::graph::build_graph;
use proptest::prelude::*;

use crate::support::{graph_file, Fixture};

const TITLES: &[&str] = &[
    "Christopher Nolan",
    "Inception",
    "Memento",
    "Tomato Garden",
    "Deep Work",
    "Quantum Tea",
    "Alpha Centauri",
    "Night Shift",
];
const FILLER: &[&str] = &[
    "the", "film", "notes", "about", "water", "sun", "later", "plan",
];
const NOTES: u8 = 6;

/// One change to the vault: a note written (created or edited), deleted or renamed.
#[derive(Debug, Clone)]
enum Edit {
    Write { note: u8, title: u8, words: Vec<u8> },
    Delete { note: u8 },
    Rename { from: u8, to: u8 },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (0..NOTES, 0..TITLES.len() as u8, prop::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(note, title, words)| Edit::Write { note, title, words }),
        1 => (0..NOTES).prop_map(|note| Edit::Delete { note }),
        1 => (0..NOTES, 0..NOTES).prop_map(|(from, to)| Edit::Rename { from, to }),
    ]
}

/// A note's text: a title, then words that mention titles, link notes (some missing), tag
/// and fill.
fn note_text(title: u8, words: &[u8]) -> String {
    let mut body = Vec::new();
    for &w in words {
        body.push(match w % 5 {
            0 => TITLES[(w / 5) as usize % TITLES.len()].to_string(),
            1 => format!("[[n{}]]", (w / 5) % (NOTES + 2)),
            2 => format!("#t{}", (w / 5) % 3),
            _ => FILLER[(w / 5) as usize % FILLER.len()].to_string(),
        });
    }
    format!("# {}\n\n{}.\n", TITLES[title as usize], body.join(" "))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Applies `edits` one indexing run each; after each run the graph equals one built from
/// scratch over a copy of the index. Returns the texts each run read and how many fragments
/// the index held.
fn check(edits: &[Edit]) -> Vec<(usize, usize)> {
    let fx = Fixture::new();
    let notes = fx.path("notes");
    let path = |n: u8| notes.join(format!("n{n}.md"));
    fx.write("notes/n0.md", &note_text(0, &[1, 5, 6, 10]));
    fx.write("notes/n1.md", &note_text(1, &[0, 11, 3]));
    let settings = Settings::default();
    let mut read = Vec::new();
    for (step, e) in edits.iter().enumerate() {
        match e {
            Edit::Write { note, title, words } => {
                std::fs::write(path(*note), note_text(*title, words)).unwrap()
            }
            Edit::Delete { note } => {
                let _ = std::fs::remove_file(path(*note));
            }
            Edit::Rename { from, to } => {
                let _ = std::fs::rename(path(*from), path(*to));
            }
        }
        let report = fx.index(&[&notes], &settings);
        let index = fx.index_dir();
        if let Some(g) = &report.graph {
            read.push((g.texts_read, g.fragments));
        }
        let scratch = fx.path(&format!("scratch{step}"));
        copy_dir(&index, &scratch);
        std::fs::remove_file(scratch.join("graph/parts.json")).unwrap();
        let full = build_graph(&scratch, &settings).unwrap();
        assert_eq!(
            full.texts_read, full.fragments,
            "a build from scratch reads every text"
        );
        let (kept, fresh) = (graph_file(&index), graph_file(&scratch));
        if kept != fresh {
            let differ: Vec<String> = fresh
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, v)| kept.get(k.as_str()) != Some(v))
                .map(|(k, v)| format!("{k}: {} / {v}", kept[k.as_str()]))
                .collect();
            panic!("after {:?}: {}", &edits[..=step], differ.join("; "));
        }
        std::fs::remove_dir_all(&scratch).unwrap();
    }
    read
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_graph_after_any_edits_equals_a_build_from_scratch(
        edits in prop::collection::vec(edit(), 1..8)
    ) {
        check(&edits);
    }
}

#[test]
fn an_edit_that_names_nothing_new_reads_only_its_own_texts() {
    let mut edits: Vec<Edit> = (0..NOTES)
        .map(|note| Edit::Write {
            note,
            title: note,
            words: vec![0, 5, 11, 16, 3, 8],
        })
        .collect();
    // The same words in another order: no new title, link target or tag.
    edits.push(Edit::Write {
        note: 2,
        title: 2,
        words: vec![8, 3, 16, 11, 5, 0],
    });
    let read = check(&edits);
    let (texts, fragments) = *read.last().unwrap();
    assert!(texts >= 1 && texts < fragments, "{read:?}");
    // A new title is looked for in every text.
    edits.push(Edit::Write {
        note: 3,
        title: 7,
        words: vec![3],
    });
    let read = check(&edits);
    let (texts, fragments) = *read.last().unwrap();
    assert_eq!(texts, fragments, "{read:?}");
}
