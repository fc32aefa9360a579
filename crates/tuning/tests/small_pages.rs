//! A small build runs without transparent huge pages, and the process gets them back after it.
//! A test binary of its own: the flag is the process's, and the `it` tests' builds,
//! running alongside, would turn it off too.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use finder_core::Settings;
use finder_index::{index_inputs, Progress};
use finder_tuning::{small_pages_now, SmallPages};

#[test]
fn huge_pages_are_off_while_any_holder_lives_and_back_after_the_last() {
    // The flag is inherited from the parent process: start from huge pages on.
    // SAFETY: setting the process's huge-page flag, which only changes how pages are faulted.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0) },
        0
    );
    assert!(!small_pages_now());
    let first = SmallPages::hold();
    assert!(small_pages_now());
    let second = SmallPages::hold();
    drop(first);
    assert!(small_pages_now(), "the second holder still lives");
    drop(second);
    assert!(!small_pages_now(), "back on after the last");

    // Turned off by someone else before the first holder: left off after the last.
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) },
        0
    );
    drop(SmallPages::hold());
    assert!(small_pages_now(), "not the holder's to turn back on");
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0) },
        0
    );
    assert!(!small_pages_now());

    // A build, with the tuning installed: off from its first input to its graph, on again
    // after it.
    finder_tuning::install();
    let tmp = tempfile::tempdir().unwrap();
    let records = tmp.path().join("records.jsonl");
    let lines: Vec<String> = (0..20)
        .map(|i| {
            format!(
                r#"{{"id":"r{i}","title":"Record {i}","text":"Kestrel {i} nests near [[Record {}]] by the river."}}"#,
                (i + 1) % 20
            )
        })
        .collect();
    std::fs::write(&records, lines.join("\n")).unwrap();
    let mut seen: Vec<(&'static str, bool)> = Vec::new();
    let report = index_inputs(
        &tmp.path().join("index"),
        &[records],
        &Settings::default(),
        &mut |p| {
            let phase = match p {
                Progress::Input { .. } => "input",
                Progress::Source { .. } => "source",
                Progress::Committing => "commit",
                Progress::Pages => "pages",
                Progress::Graph => "graph",
            };
            if seen.last().map(|s| s.0) != Some(phase) {
                seen.push((phase, small_pages_now()));
            }
        },
    )
    .expect("indexed");
    assert_eq!(report.counts.added, 20);
    assert_eq!(
        seen,
        [
            ("input", true),
            ("source", true),
            ("commit", true),
            ("pages", true),
            ("graph", true)
        ]
    );
    assert!(!small_pages_now(), "on again after the build");
}
