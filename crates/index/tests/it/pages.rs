//! Page files: a page read from them is the page read from the document store, and a
//! segment whose file is missing or damaged is read from the store.

use std::path::{Path, PathBuf};

use finder_core::Settings;

use crate::support::{lexical_files as files, record, Fixture};

fn contains(bytes: &[u8], needle: &[u8]) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle)
}

/// Notes with every part of an envelope (date, tags, extras), several fragments each, and
/// records.
fn inputs(fx: &Fixture) -> Vec<PathBuf> {
    fx.write(
        "notes/auth.md",
        "---\ntitle: Auth errors\ndate: 2026-03-01\ntags: [auth, errors]\nteam: platform\n---\n# Auth errors\n\nAUTH-041 means the refresh token expired.\nReauthenticate the client.\n\n## Recovery\n\nSign in again to restore the session. The token café is ünïcode.\n",
    );
    fx.write(
        "notes/backup.md",
        "# Backups\n\nNightly database backups run at 02:00.\n\nRestore with the restore script; the token is not needed.\n",
    );
    let lines: Vec<String> = (0..40)
        .map(|i| {
            record(
                &format!("r{i}"),
                &format!("Record {i}"),
                &format!("token session restore words w{i}"),
            )
        })
        .collect();
    vec![
        fx.path("notes"),
        fx.write("records.jsonl", &lines.join("\n")),
    ]
}

/// A fixture with [`inputs`] indexed with the default settings, without problems.
fn built() -> (Fixture, Vec<PathBuf>) {
    let fx = Fixture::new();
    let inputs = inputs(&fx);
    let report = run(&fx, &inputs);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    (fx, inputs)
}

/// An indexing run over `inputs` with the default settings.
fn run(fx: &Fixture, inputs: &[PathBuf]) -> finder_index::RunReport {
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    fx.index(&inputs, &Settings::default())
}

/// What the page records give each hit of each query: its id, envelope, summary, and its
/// hints' previews and extents (scores are left out: the recency blend's moves with the
/// clock).
fn pages(fx: &Fixture, settings: &Settings) -> Vec<serde_json::Value> {
    let finder = fx.open();
    [
        "token",
        "restore session",
        "AUTH-041",
        "w7 backups",
        "ünïcode",
    ]
    .iter()
    .map(|q| {
        let response = finder.search(q, settings, 0, 20).expect("search");
        assert!(!response.hits.is_empty(), "{q}");
        let hits: Vec<_> = response
            .hits
            .iter()
            .map(|h| {
                let hints: Vec<_> = h.hints.iter().map(|x| (&x.preview, x.extent)).collect();
                serde_json::json!([h.id, h.envelope, h.summary, hints])
            })
            .collect();
        serde_json::Value::from(hits)
    })
    .collect()
}

#[test]
fn pages_read_from_page_files_are_the_stores_pages() {
    let (fx, inputs) = built();
    let settings = Settings::default();
    let written = files(&fx.index_dir(), "pages");
    assert_eq!(written.len(), files(&fx.index_dir(), "store").len());
    let status = fx.open().status().unwrap();
    assert_eq!(
        (status.page_files, status.segments),
        (written.len(), written.len())
    );
    let from_files = pages(&fx, &settings);

    // The page is the file's: an edit to a body there (of the same length) shows.
    let file = written
        .iter()
        .find(|f| contains(&std::fs::read(f).unwrap(), b"Nightly"))
        .expect("a page file holds the backups note");
    let bytes = std::fs::read(file).unwrap();
    let at = (0..bytes.len())
        .find(|&i| bytes[i..].starts_with(b"Nightly"))
        .unwrap();
    let mut edited = bytes.clone();
    edited[at..at + 7].copy_from_slice(b"NIGHTLY");
    std::fs::write(file, &edited).unwrap();
    let hit = &fx.open().search("backups", &settings, 0, 5).unwrap().hits[0];
    assert!(hit.hints[0].preview.contains("NIGHTLY"), "{:?}", hit.hints);
    std::fs::write(file, &bytes).unwrap();
    assert_eq!(pages(&fx, &settings), from_files);

    // Damaged: each record's first length made too long (those records are read from the
    // store), then the file cut short (the whole file is).
    let bytes = std::fs::read(&written[0]).unwrap();
    let docs = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let records = 16 + 8 * (docs + 1);
    let mut damaged = bytes.clone();
    for doc in 0..docs {
        let at = 16 + 8 * doc;
        let offset = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        damaged[records + offset..records + offset + 4].copy_from_slice(&[0xff; 4]);
    }
    std::fs::write(&written[0], &damaged).unwrap();
    assert_eq!(pages(&fx, &settings), from_files);
    std::fs::write(&written[0], &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(pages(&fx, &settings), from_files);

    // Missing: every page read from the store.
    for file in &written {
        std::fs::remove_file(file).unwrap();
    }
    assert_eq!(fx.open().status().unwrap().page_files, 0);
    assert_eq!(pages(&fx, &settings), from_files);

    // The next run writes the missing files again, though nothing changed.
    let report = run(&fx, &inputs);
    assert_eq!(report.counts.unchanged, 42);
    assert_eq!(files(&fx.index_dir(), "pages"), written);
    assert_eq!(pages(&fx, &settings), from_files);
}

#[test]
fn a_later_run_writes_its_segments_page_file_and_removes_gone_ones() {
    let (fx, inputs) = built();
    let settings = Settings::default();
    let stale = fx
        .index_dir()
        .join("lexical/00000000000000000000000000000000.pages");
    std::fs::write(&stale, b"left behind").unwrap();

    for round in 0..4 {
        fx.write(
            "notes/backup.md",
            &format!("# Backups\n\nRound {round}: backups restore the token w{round}.\n"),
        );
        let report = run(&fx, &inputs);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.counts.updated, 1);
        let stores: Vec<String> = files(&fx.index_dir(), "store")
            .iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        let pages: Vec<String> = files(&fx.index_dir(), "pages")
            .iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(pages, stores, "round {round}");
        let finder = fx.open();
        let hit = &finder.search("backups", &settings, 0, 5).unwrap().hits[0];
        assert!(hit.hints[0].preview.contains(&format!("Round {round}")));
    }
    assert!(!stale.exists());
}

#[test]
fn a_page_file_that_cannot_be_written_is_a_problem_and_the_store_answers() {
    let (fx, inputs) = built();
    let settings = Settings::default();
    let from_files = pages(&fx, &settings);
    let written = files(&fx.index_dir(), "pages");
    // A folder where the file's temporary name would be: its write fails.
    let blocked = PathBuf::from(format!("{}.tmp", written[0].display()));
    std::fs::remove_file(&written[0]).unwrap();
    std::fs::create_dir(&blocked).unwrap();

    let report = run(&fx, &inputs);
    assert_eq!(report.counts.unchanged, 42);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.reason.starts_with("page files not written")),
        "{:?}",
        report.problems
    );
    assert!(!written[0].exists());
    assert_eq!(pages(&fx, &settings), from_files);

    std::fs::remove_dir(&blocked).unwrap();
    let report = run(&fx, &inputs);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(written[0].exists());
    assert_eq!(pages(&fx, &settings), from_files);
}

/// The page file of a small run's one new segment is made from the records the run made as it
/// added its documents; it is the file the segment's store gives, byte for byte, for a first
/// run and for a later run that updates a source.
#[test]
fn a_small_runs_page_file_is_made_as_it_writes_and_is_the_stores() {
    let ahead = finder_index::testing::page_files_written_ahead;
    let before = ahead();
    let (fx, inputs) = built();
    assert_eq!(ahead(), before + 1);
    let first = files(&fx.index_dir(), "pages");
    assert_eq!(first.len(), 1);
    fx.write(
        "notes/backup.md",
        "# Backups\n\nWeekly now: the restore script, the token, and «café» notes.\n",
    );
    let report = run(&fx, &inputs);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.counts.updated, 1);
    assert_eq!(ahead(), before + 2);

    // Every file again, this time from the stores (a run that adds nothing has no records).
    let written = files(&fx.index_dir(), "pages");
    assert_eq!(written.len(), 2);
    let bytes: Vec<Vec<u8>> = written.iter().map(|f| std::fs::read(f).unwrap()).collect();
    for file in &written {
        std::fs::remove_file(file).unwrap();
    }
    let report = run(&fx, &inputs);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(ahead(), before + 2);
    assert_eq!(files(&fx.index_dir(), "pages"), written);
    for (file, bytes) in written.iter().zip(&bytes) {
        assert!(std::fs::read(file).unwrap() == *bytes, "{}", file.display());
    }
}

/// Run after run that adds a note, the merge policy merging the small segments at some of
/// the commits: every run's page files give the pages the stores give.
#[test]
fn page_files_made_as_runs_write_stay_the_stores_through_merges() {
    let (fx, inputs) = built();
    let settings = Settings::default();
    let mut segments = Vec::new();
    for round in 0..12 {
        fx.write(
            &format!("notes/round{round}.md"),
            &format!("# Round {round}\n\nThe restore token w{round}, «nightly» backups.\n"),
        );
        let report = run(&fx, &inputs);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.counts.added, 1, "round {round}");
        segments.push(fx.open().status().unwrap().segments);
        let from_files = pages(&fx, &settings);
        for file in files(&fx.index_dir(), "pages") {
            std::fs::remove_file(file).unwrap();
        }
        assert_eq!(pages(&fx, &settings), from_files, "round {round}");
        let report = run(&fx, &inputs);
        assert_eq!(report.counts.unchanged, 43 + round, "round {round}");
    }
    // Some commit merged: the segment count fell between two runs.
    assert!(
        segments.windows(2).any(|w| w[1] < w[0]),
        "no merge in {segments:?}"
    );
}
