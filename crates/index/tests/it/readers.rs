//! Consistent readers: searches running while indexing runs commit always see one whole
//! committed snapshot — every source of a response from the same run, every fragment of a
//! source from the same run as its title — and never an error.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use finder_core::{Query, Settings};
use finder_index::{index_inputs, Finder};

use crate::support::Fixture;

const SOURCES: usize = 24;
const RUNS: u32 = 30;

/// Every source rewritten for run `generation`: its title and each of its three fragments
/// carry the marker `mk<generation>`; runs alternate whether the `extra*` sources exist.
fn write_generation(root: &Path, generation: u32) {
    let notes = root.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    for i in 0..SOURCES {
        let mut text = format!("---\ntitle: S{i} mk{generation}\n---\n");
        for part in ["alpha", "beta", "gamma"] {
            text.push_str(&format!(
                "## {part} mk{generation}\n\nmk{generation} shared {part} words for source {i} mk{generation}\n\n"
            ));
        }
        std::fs::write(notes.join(format!("s{i}.md")), text).unwrap();
    }
    for i in 0..4 {
        let path = notes.join(format!("extra{i}.md"));
        if generation.is_multiple_of(2) {
            std::fs::write(
                &path,
                format!("# Extra {i} mk{generation}\n\nmk{generation} shared extra\n"),
            )
            .unwrap();
        } else if path.exists() {
            std::fs::remove_file(&path).unwrap();
        }
    }
}

/// Every `mk<N>` marker in `text`.
fn markers(text: &str) -> BTreeSet<u32> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter_map(|w| w.strip_prefix("mk").and_then(|n| n.parse().ok()))
        .collect()
}

/// One response holds one snapshot: the generation it shows, checked whole.
fn check_response(finder: &Finder) -> u32 {
    let response = finder
        .query(&Query::text("shared", 0, 100), finder.settings())
        .unwrap_or_else(|e| panic!("a search during indexing failed: {e}"));
    let mut seen = BTreeSet::new();
    for hit in &response.hits {
        seen.extend(markers(&hit.envelope.title));
        for hint in &hit.hints {
            seen.extend(markers(&hint.preview));
        }
    }
    assert_eq!(
        seen.len(),
        1,
        "one response mixes runs {seen:?}: {:?}",
        response
            .hits
            .iter()
            .map(|h| &h.envelope.title)
            .collect::<Vec<_>>()
    );
    let generation = *seen.first().unwrap();
    let expected = SOURCES + if generation.is_multiple_of(2) { 4 } else { 0 };
    assert_eq!(
        response.hits.len(),
        expected,
        "run {generation} committed {expected} sources, the response holds {}",
        response.hits.len()
    );
    generation
}

#[test]
fn searches_during_indexing_see_whole_commits() {
    let fx = Fixture::new();
    let root = fx.dir.path().to_path_buf();
    let index = fx.index_dir();
    let settings = Settings::default();
    write_generation(&root, 0);
    index_inputs(&index, &[root.join("notes")], &settings, &mut |_| {}).unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (root, index, done, settings) =
            (root.clone(), index.clone(), done.clone(), settings.clone());
        std::thread::spawn(move || {
            for generation in 1..=RUNS {
                write_generation(&root, generation);
                index_inputs(&index, &[root.join("notes")], &settings, &mut |_| {})
                    .unwrap_or_else(|e| panic!("run {generation}: {e}"));
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    // One reader keeps its Finder and reloads it; the other opens the index afresh each
    // time (as a server does when the folder changes), graph and all.
    let reloading = {
        let (index, done) = (index.clone(), done.clone());
        std::thread::spawn(move || {
            let finder = Finder::open(&index, Settings::default()).unwrap();
            let mut seen = BTreeSet::new();
            let mut last = 0;
            let mut searches = 0;
            while !done.load(Ordering::SeqCst) {
                finder.reload().unwrap();
                let generation = check_response(&finder);
                assert!(
                    generation >= last,
                    "went back from run {last} to {generation}"
                );
                last = generation;
                seen.insert(generation);
                searches += 1;
            }
            (seen, searches)
        })
    };
    let reopening = {
        let (index, done) = (index.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            let mut searches = 0;
            while !done.load(Ordering::SeqCst) {
                let finder = Finder::open(&index, Settings::default())
                    .unwrap_or_else(|e| panic!("opening during indexing failed: {e}"));
                seen.insert(check_response(&finder));
                searches += 1;
            }
            (seen, searches)
        })
    };
    writer.join().unwrap();
    let (reloaded, reload_searches) = reloading.join().unwrap();
    let (reopened, reopen_searches) = reopening.join().unwrap();
    // The readers overlapped the runs: they saw several commits, each one whole.
    assert!(
        reloaded.len() >= 3 && reopened.len() >= 3,
        "readers saw too few commits to test anything: {reloaded:?} / {reopened:?}"
    );
    let last = Finder::open(&index, Settings::default()).unwrap();
    assert_eq!(check_response(&last), RUNS);
    println!(
        "readers: {} searches during {RUNS} indexing runs, 0 errors, 0 mixed responses; \
         {} commits seen by the reloading reader, {} by the reopening one",
        reload_searches + reopen_searches,
        reloaded.len(),
        reopened.len()
    );
}
