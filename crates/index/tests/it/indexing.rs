//! Incremental and atomic indexing, extents, bad input, and query-time settings.

use finder_core::Settings;
use finder_index::{index_inputs, Finder, IndexError};

use crate::support::{ids, lexical_files, record, Fixture};

fn notes(fx: &Fixture) -> std::path::PathBuf {
    fx.write(
        "notes/auth.md",
        "---\ntitle: Auth errors\ntags: [auth, errors]\nteam: platform\n---\n# Auth errors\n\nAUTH-041 means the refresh token expired.\nReauthenticate the client.\n\n## Recovery\n\nSign in again to restore the session.\n",
    );
    fx.write(
        "notes/backup.md",
        "# Backups\n\nNightly database backups run at 02:00.\n\nRestore with the restore script.\n",
    );
    fx.write(
        "notes/team/oncall.md",
        "# On call\n\nThe on-call engineer rotates weekly.\n",
    );
    fx.path("notes")
}

#[test]
fn second_run_changes_nothing_and_an_edit_redoes_one() {
    let fx = Fixture::new();
    let input = notes(&fx);
    let s = Settings::default();
    let first = fx.index(&[&input], &s);
    assert_eq!(
        (
            first.counts.added,
            first.counts.updated,
            first.counts.unchanged
        ),
        (3, 0, 0)
    );
    let second = fx.index(&[&input], &s);
    assert_eq!(
        (
            second.counts.added,
            second.counts.updated,
            second.counts.removed,
            second.counts.unchanged
        ),
        (0, 0, 0, 3)
    );

    fx.write(
        "notes/backup.md",
        "# Backups\n\nNightly database backups run at 03:00 now.\n",
    );
    let third = fx.index(&[&input], &s);
    assert_eq!((third.counts.updated, third.counts.unchanged), (1, 2));
    let finder = fx.open();
    let hit = &finder.search("backups 03:00", &s, 0, 5).unwrap().hits[0];
    assert_eq!(hit.id, "backup.md");
    assert!(hit.hints[0].preview.contains("03:00"), "{:?}", hit.hints);

    std::fs::remove_file(fx.path("notes/team/oncall.md")).unwrap();
    let fourth = fx.index(&[&input], &s);
    assert_eq!((fourth.counts.removed, fourth.counts.unchanged), (1, 2));
    assert!(ids(&fx.open(), "on-call engineer rotates", &s)
        .iter()
        .all(|id| id != "team/oncall.md"));
    assert_eq!(fx.open().status().unwrap().sources, 2);
}

#[test]
fn an_ignore_rule_takes_its_files_out_and_back_in() {
    let fx = Fixture::new();
    let input = notes(&fx);
    let s = Settings::default();
    fx.write(
        "notes/node_modules/pkg/readme.md",
        "# Package\n\nVendored text.\n",
    );
    fx.write(
        "notes/.obsidian/workspace.md",
        "# Workspace\n\nEditor state.\n",
    );
    assert_eq!(fx.index(&[&input], &s).counts.added, 3);
    // A .finderignore written later removes what it names from the index.
    fx.write("notes/.finderignore", "team/\n");
    let second = fx.index(&[&input], &s);
    assert_eq!((second.counts.removed, second.counts.unchanged), (1, 2));
    assert!(second.problems.is_empty(), "{:?}", second.problems);
    assert!(ids(&fx.open(), "on-call engineer rotates", &s).is_empty());
    // A .gitignore counts without a git repository; `!` takes a file back.
    fx.write("notes/.finderignore", "");
    fx.write("notes/.gitignore", "*.md\n!auth.md\n");
    let third = fx.index(&[&input], &s);
    assert_eq!((third.counts.added, third.counts.removed), (0, 1));
    assert_eq!(fx.open().status().unwrap().sources, 1);
    std::fs::remove_file(fx.path("notes/.gitignore")).unwrap();
    let fourth = fx.index(&[&input], &s);
    assert_eq!((fourth.counts.added, fourth.counts.unchanged), (2, 1));
    assert_eq!(
        ids(&fx.open(), "on-call engineer rotates", &s),
        vec!["team/oncall.md".to_string()]
    );
}

#[test]
fn file_states_say_what_the_next_run_would_change() {
    use finder_index::freshness::{file_states, FileState};
    let fx = Fixture::new();
    let input = notes(&fx);
    let s = Settings::default();
    fx.index(&[&input], &s);
    let states = || -> Vec<(String, FileState)> {
        file_states(&fx.index_dir(), &s)
            .unwrap()
            .files
            .into_iter()
            .map(|f| (f.id, f.state))
            .collect()
    };
    assert!(
        states().iter().all(|(_, st)| *st == FileState::Indexed),
        "{:?}",
        states()
    );

    fx.write("notes/backup.md", "# Backups\n\nHourly now.\n");
    std::fs::remove_file(fx.path("notes/team/oncall.md")).unwrap();
    fx.write("notes/new.md", "# New\n\nFresh.\n");
    std::fs::write(fx.path("notes/bad.md"), b"\xff\xfe\x00bad").unwrap();
    fx.write("notes/drafts/wip.md", "# Draft\n");
    fx.write("notes/.finderignore", "drafts/\n");
    let rule = FileState::Ignored {
        rule: ".finderignore: drafts/".into(),
    };
    let before = states();
    assert_eq!(
        before
            .iter()
            .map(|(id, st)| (id.as_str(), st.name()))
            .collect::<Vec<_>>(),
        vec![
            ("auth.md", "indexed"),
            ("backup.md", "changed"),
            ("bad.md", "failed"),
            ("drafts/", "ignored"),
            ("new.md", "new"),
            ("team/oncall.md", "gone"),
        ]
    );
    assert_eq!(before[3].1, rule);
    let FileState::Failed { reason } = &before[2].1 else {
        unreachable!()
    };
    assert!(reason.contains("UTF-8"), "{reason}");

    // A run brings the index to the files: what is left is the failure and the rule.
    fx.index(&[&input], &s);
    let after = file_states(&fx.index_dir(), &s).unwrap();
    assert_eq!(after.totals.get("indexed"), Some(&3), "{after:?}");
    assert_eq!(
        (after.totals.get("failed"), after.totals.get("ignored")),
        (Some(&1), Some(&1))
    );
    assert_eq!(
        after
            .files
            .iter()
            .find(|f| f.id == "new.md")
            .unwrap()
            .fragments,
        1
    );
}

#[test]
fn hits_carry_envelope_summary_and_extents_on_the_right_lines() {
    let fx = Fixture::new();
    let input = notes(&fx);
    fx.index(&[&input], &Settings::default());
    let finder = fx.open();
    let response = finder
        .search("expired token", &Settings::default(), 0, 10)
        .unwrap();
    let hit = &response.hits[0];
    assert_eq!(hit.id, "auth.md");
    assert_eq!(hit.score, 1.0);
    assert_eq!(hit.envelope.title, "Auth errors");
    assert_eq!(hit.envelope.tags, vec!["auth", "errors"]);
    assert_eq!(
        hit.envelope.extras.get("team").map(String::as_str),
        Some("platform")
    );
    assert!(!hit.summary.is_empty());
    let file = std::fs::read_to_string(fx.path("notes/auth.md")).unwrap();
    let lines: Vec<&str> = file.lines().collect();
    let extent = hit.hints[0].extent;
    assert_eq!(lines[extent.line_start as usize - 1], "# Auth errors");
    let slice = &file[extent.byte_start as usize..extent.byte_end as usize];
    assert!(slice.contains("AUTH-041 means the refresh token expired."));
    assert!(lines[extent.line_end as usize - 1].contains("Reauthenticate"));
    // Explain: the lexical list placed this fragment first.
    let part = &hit.explain.parts[0];
    assert_eq!(part.lists[0].rank, 1);
    let rrf_k = f64::from(Settings::default().finder.rrf_k);
    assert!((part.seed - 1.0 / (rrf_k + 1.0)).abs() < 1e-12);
    let channels: Vec<&str> = response
        .diagnostics
        .channels
        .iter()
        .map(|c| c.channel.name())
        .collect();
    assert_eq!(
        channels,
        vec![
            "lexical",
            "trigram",
            "vector",
            "entities",
            "neighbours",
            "communities",
            "events"
        ]
    );
    assert!(response
        .diagnostics
        .stages
        .iter()
        .any(|s| s.stage == "fusion"));
}

#[test]
fn identifiers_and_partial_words_expand_into_indexed_words() {
    let fx = Fixture::new();
    let input = notes(&fx);
    fx.index(&[&input], &Settings::default());
    let finder = fx.open();
    let trigram = |r: &finder_core::SearchResponse| {
        r.diagnostics
            .channels
            .iter()
            .find(|c| c.channel.name() == "trigram")
            .cloned()
            .unwrap()
    };
    // `auto`: the identifier-like word expands (`auth-04` is part of `auth-041`) and joins the
    // lexical list.
    let response = finder
        .search("AUTH-04", &Settings::default(), 0, 10)
        .unwrap();
    let report = trigram(&response);
    assert_eq!(report.status, finder_core::ChannelStatus::Ran);
    assert_eq!(
        report.reason.as_deref(),
        Some("1 query word(s) expanded into 1 indexed word(s), scored in the lexical list")
    );
    assert_eq!(response.hits[0].id, "auth.md");
    let plain = finder
        .search("expired token", &Settings::default(), 0, 10)
        .unwrap();
    assert_eq!(trigram(&plain).status, finder_core::ChannelStatus::Skipped);

    // A partial word no stemmed word matches is found only when every word expands (`on`).
    let mut off = Settings::default();
    off.set("lexical.trigram=off").unwrap();
    assert!(finder
        .search("reauth", &off, 0, 10)
        .unwrap()
        .hits
        .is_empty());
    let mut on = Settings::default();
    on.set("lexical.trigram=on").unwrap();
    let found = finder.search("reauth", &on, 0, 10).unwrap();
    let found_ids: Vec<&str> = found.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(found_ids, ["auth.md"]);
    // The expansion weighs what share of the indexed word the query word covers.
    let exact = finder.search("reauthenticate", &on, 0, 10).unwrap();
    let lexical = |r: &finder_core::SearchResponse| r.hits[0].explain.parts[0].lists[0].score;
    assert!(lexical(&found) < lexical(&exact));
}

#[test]
fn query_time_k1_changes_ranking_without_reindexing() {
    let fx = Fixture::new();
    // "a" repeats one query term; "b" matches both terms once. A high k1 rewards repetition,
    // a low k1 saturates at once and rewards covering more terms.
    let lines = [
        record("a", "", "latency latency latency"),
        record("b", "", "latency report"),
        record("c", "", "report summary"),
        record("d", "", "report summary"),
        record("e", "", "report summary"),
    ];
    let input = fx.write("r.jsonl", &lines.join("\n"));
    fx.index(&[&input], &Settings::default());
    let finder = fx.open();
    let high = finder.settings_with(&["lexical.k1=3.0".into()]).unwrap();
    let low = finder.settings_with(&["lexical.k1=0.2".into()]).unwrap();
    assert_eq!(ids(&finder, "latency report", &high)[0], "a");
    assert_eq!(ids(&finder, "latency report", &low)[0], "b");
}

#[test]
fn out_of_range_and_index_time_overrides_are_refused() {
    let fx = Fixture::new();
    let input = notes(&fx);
    fx.index(&[&input], &Settings::default());
    let finder = fx.open();
    let err = finder
        .settings_with(&["finder.rrf_k=5".into()])
        .err()
        .unwrap();
    assert!(err.to_string().contains("allowed: 10–200"), "{err}");
    let err = finder
        .settings_with(&["index.fragment_max_chars=500".into()])
        .err()
        .unwrap();
    assert!(matches!(err, IndexError::IndexTimeSetting { .. }), "{err}");
    assert!(finder
        .settings_with(&["index.fragment_max_chars=3200".into()])
        .is_ok());
    // The graph's build keys shape what indexing extracted: refused too, with the built value.
    let err = finder
        .settings_with(&["graph.mentions=false".into()])
        .err()
        .unwrap();
    assert!(
        matches!(&err, IndexError::IndexTimeSetting { key, indexed } if key == "graph.mentions" && indexed == "true"),
        "{err}"
    );
    assert!(finder
        .settings_with(&["graph.mentions=true".into()])
        .is_ok());
    assert!(finder.settings_with(&["graph.damping=0.5".into()]).is_ok());
}

#[test]
fn bad_input_is_reported_and_nothing_indexed_is_lost() {
    let fx = Fixture::new();
    let input = notes(&fx);
    fx.index(&[&input], &Settings::default());
    // Break one note (invalid UTF-8) and add a malformed-front-matter note.
    std::fs::write(fx.path("notes/backup.md"), b"# Backups\n\xff\xfe broken\n").unwrap();
    fx.write(
        "notes/broken.md",
        "---\ntitle: [unclosed\n---\nBody of a broken note about kittens.\n",
    );
    let report = fx.index(&[&input], &Settings::default());
    let places: Vec<String> = report.problems.iter().map(|p| p.place.clone()).collect();
    assert!(
        places.iter().any(|p| p.starts_with("backup.md:2")),
        "{places:?}"
    );
    assert!(
        places.iter().any(|p| p.starts_with("broken.md")),
        "{places:?}"
    );
    assert_eq!(report.counts.kept, 1);
    let finder = fx.open();
    let s = Settings::default();
    assert_eq!(
        ids(&finder, "nightly database backups", &s)[0],
        "backup.md",
        "old version kept"
    );
    assert_eq!(
        ids(&finder, "kittens", &s)[0],
        "broken.md",
        "broken front matter still indexed"
    );
}

#[test]
fn malformed_jsonl_line_is_named_and_the_rest_indexed() {
    let fx = Fixture::new();
    let text = [
        record("r1", "One", "alpha text"),
        "{not json".to_string(),
        record("r3", "Three", "gamma text"),
    ];
    let input = fx.write("records.jsonl", &text.join("\n"));
    let report = fx.index(&[&input], &Settings::default());
    assert_eq!(report.counts.added, 2);
    assert!(
        report.problems[0].place.ends_with("records.jsonl:2"),
        "{:?}",
        report.problems
    );
}

#[test]
fn a_failed_run_leaves_the_last_commit_searchable() {
    let fx = Fixture::new();
    let input = notes(&fx);
    fx.index(&[&input], &Settings::default());
    fx.write("notes/new.md", "# New\n\nA brand new note about zebras.\n");
    let missing = fx.path("does-not-exist");
    let err = index_inputs(
        &fx.index_dir(),
        &[input.clone(), missing],
        &Settings::default(),
        &mut |_| {},
    );
    assert!(err.is_err());
    let finder = fx.open();
    assert!(
        ids(&finder, "zebras", &Settings::default()).is_empty(),
        "nothing of the failed run is visible"
    );
    assert_eq!(
        ids(&finder, "expired token", &Settings::default())[0],
        "auth.md"
    );
    assert_eq!(finder.status().unwrap().sources, 3);
}

#[test]
fn opening_a_missing_index_says_how_to_make_one() {
    let fx = Fixture::new();
    let err = Finder::open(&fx.path("nothing"), Settings::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("finder index"), "{err}");
}

#[test]
fn paging_splits_one_ranking() {
    let fx = Fixture::new();
    let lines: Vec<String> = (0..30)
        .map(|i| {
            record(
                &format!("r{i:02}"),
                "",
                &format!("shared word {}", "pad ".repeat(i)),
            )
        })
        .collect();
    let input = fx.write("r.jsonl", &lines.join("\n"));
    fx.index(&[&input], &Settings::default());
    let finder = fx.open();
    // The records differ only in padding: near-duplicates the collapse would fold together.
    let mut s = Settings::default();
    s.refine.dedup = false;
    let all: Vec<String> = finder
        .search("shared word", &s, 0, 30)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.id)
        .collect();
    let mut paged = Vec::new();
    for page in 0..3 {
        paged.extend(
            finder
                .search("shared word", &s, page * 10, 10)
                .unwrap()
                .hits
                .into_iter()
                .map(|h| h.id),
        );
    }
    assert_eq!(all.len(), 30);
    assert_eq!(paged, all);
}

#[test]
fn changing_index_time_settings_rebuilds_everything_once() {
    let fx = Fixture::new();
    let input = notes(&fx);
    let other = fx.write("more.jsonl", &record("r1", "Other", "other record text"));
    fx.index(&[&input], &Settings::default());
    fx.index(&[&other], &Settings::default());
    let mut small = Settings::default();
    small.index.fragment_max_chars = 200;
    // Both inputs are needed to rebuild; leaving one out is refused before anything changes.
    let err = index_inputs(
        &fx.index_dir(),
        std::slice::from_ref(&input),
        &small,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("pass every input"), "{err}");
    assert_eq!(fx.open().status().unwrap().sources, 4);
    let rebuilt = fx.index(&[&input, &other], &small);
    assert!(rebuilt.rebuilt);
    assert_eq!((rebuilt.counts.added, rebuilt.counts.unchanged), (4, 0));
    let status = fx.open().status().unwrap();
    assert_eq!(status.settings.fragment_max_chars, 200);
    assert_eq!(status.sources, 4);
    let again = fx.index(&[&input, &other], &small);
    assert_eq!((again.rebuilt, again.counts.unchanged), (false, 4));
}

#[test]
fn sources_of_other_inputs_survive_a_run() {
    let fx = Fixture::new();
    let input = notes(&fx);
    let other = fx.write("more.jsonl", &record("r1", "Other", "zebra crossing notes"));
    fx.index(&[&input], &Settings::default());
    fx.index(&[&other], &Settings::default());
    let third = fx.index(&[&input], &Settings::default());
    assert_eq!((third.counts.removed, third.counts.unchanged), (0, 3));
    assert_eq!(ids(&fx.open(), "zebra", &Settings::default()), vec!["r1"]);
}

/// A run killed before its commit leaves its new files behind (segments, delete bitsets
/// named by opstamp). The next run reuses the opstamps, so it must clear them first: found by
/// the SIGKILL harness as "File already exists: '<segment>.<opstamp>.del'".
#[test]
fn files_left_by_a_run_killed_before_its_commit_do_not_block_the_next_run() {
    let fx = Fixture::new();
    let input = notes(&fx);
    let settings = Settings::default();
    fx.index(&[&input], &settings);

    // Run 2 changes a note (a delete bitset on the old segment) and commits; putting the
    // previous meta.json back is exactly what a kill just before the commit leaves behind.
    let meta = fx.index_dir().join("lexical/meta.json");
    let committed = std::fs::read(&meta).unwrap();
    fx.write(
        "notes/backup.md",
        "# Backups\n\nWeekly snapshots, kept for 7 days.\n",
    );
    fx.index(&[&input], &settings);
    std::fs::write(&meta, committed).unwrap();

    let report = fx.index(&[&input], &settings);
    assert_eq!(report.counts.updated, 1);
    let finder = fx.open();
    assert_eq!(ids(&finder, "weekly snapshots", &settings)[0], "backup.md");
}

#[test]
fn a_source_given_twice_in_one_run_is_held_once_the_later_winning() {
    // A first run writes new sources without deleting anything first; a source read twice in
    // one run (within one input, then again from another) must still end up held once.
    let fx = Fixture::new();
    let a = fx.write(
        "a.jsonl",
        &[
            record("dup", "Dup", "walrus colony census"),
            record("solo", "Solo", "penguin rookery"),
            record("dup", "Dup", "narwhal tusk survey"),
        ]
        .join("\n"),
    );
    let b = fx.write("b.jsonl", &record("dup", "Dup", "beluga pod acoustics"));
    let s = Settings::default();
    let report = fx.index(&[&a, &b], &s);
    assert_eq!(report.sources, 2, "{:?}", report.problems);
    let finder = fx.open();
    assert_eq!(ids(&finder, "beluga acoustics", &s), vec!["dup"]);
    assert!(ids(&finder, "walrus census", &s).is_empty());
    assert!(ids(&finder, "narwhal survey", &s).is_empty());
    assert_eq!(ids(&finder, "penguin", &s), vec!["solo"]);
    assert_eq!(finder.status().unwrap().fragments, 2);
    // the documents themselves, not only the counts: one per fragment
    let searcher = finder.tantivy_index().reader().unwrap().searcher();
    assert_eq!(searcher.num_docs(), 2);

    // A later run that changes it replaces it, still once.
    let c = fx.write("b.jsonl", &record("dup", "Dup", "orca hunting"));
    fx.index(&[&a, &c], &s);
    let finder = fx.open();
    assert_eq!(ids(&finder, "orca hunting", &s), vec!["dup"]);
    assert!(ids(&finder, "beluga", &s).is_empty());
}

/// Segments of the index's last commit, counted by their document stores.
fn segments(index_dir: &std::path::Path) -> usize {
    lexical_files(index_dir, "store").len()
}

/// A first build ends as one segment, and searches as before: a small input is written by one
/// indexing thread, a larger one by a thread per core whose segments are merged after the
/// commit (forced here by a one-thread limit of 0 bytes). A later run adds a segment of its own
/// and leaves the merging to tantivy's merge policy.
#[test]
fn a_first_build_is_one_segment() {
    let fx = Fixture::new();
    let mut lines: Vec<String> = (0..3000)
        .map(|i| {
            record(
                &format!("r{i}"),
                &format!("Title {i}"),
                &format!("shared words w{i}"),
            )
        })
        .collect();
    let input = fx.write("records.jsonl", &lines.join("\n"));
    let settings = Settings::default();

    let threaded = fx.index_dir().with_file_name("threaded");
    let report = finder_index::testing::index_inputs_one_thread_up_to(
        &threaded,
        std::slice::from_ref(&input.to_path_buf()),
        &settings,
        0,
    )
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(segments(&threaded), 1);
    let finder = Finder::open(&threaded, Settings::default()).unwrap();
    assert_eq!(ids(&finder, "w1234", &settings), vec!["r1234"]);
    assert_eq!(ids(&finder, "shared", &settings).len(), 50);

    let report = fx.index(&[&input], &settings);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(segments(&fx.index_dir()), 1);
    assert_eq!(ids(&fx.open(), "w1234", &settings), vec!["r1234"]);
    assert_eq!(ids(&fx.open(), "shared", &settings).len(), 50);

    lines.push(record("late", "Late", "shared words w1234 late"));
    let input = fx.write("records.jsonl", &lines.join("\n"));
    let report = fx.index(&[&input], &settings);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.counts.added, 1);
    assert_eq!(segments(&fx.index_dir()), 2);
    let found = ids(&fx.open(), "w1234", &settings);
    assert_eq!(found.len(), 2);
    assert!(found.contains(&"late".to_string()) && found.contains(&"r1234".to_string()));
}

/// An index records the word analysis it was written with: queries analyse words as the index
/// did, and the next indexing run into an index of an older analysis rebuilds it.
#[test]
fn an_index_of_an_older_word_analysis_is_read_as_written_then_rebuilt() {
    let fx = Fixture::new();
    let input = fx.write(
        "records.jsonl",
        &[
            record("seq", "Sequencing", "We sequenced the RNAs of each sample."),
            record("gpu", "Hardware", "Training ran on one GPU."),
        ]
        .join("\n"),
    );
    let s = Settings::default();
    fx.index(&[&input], &s);
    let finder = fx.open();
    assert_eq!(finder.status().unwrap().analysis, finder_index::ANALYSIS);
    assert_eq!(ids(&finder, "RNA", &s), vec!["seq"]);
    assert_eq!(ids(&finder, "GPUs", &s), vec!["gpu"]);
    drop(finder);

    // Relabel the commit as one written before the analysis was recorded (version 1).
    let mut lexical = tantivy::Index::open_in_dir(fx.index_dir().join("lexical")).unwrap();
    lexical.register_plugin(finder_index::testing::postings_plugin("english"));
    let mut info: serde_json::Value =
        serde_json::from_str(&lexical.load_metas().unwrap().payload.unwrap()).unwrap();
    info.as_object_mut().unwrap().remove("analysis");
    let mut writer: tantivy::IndexWriter = lexical.writer(15_000_000).unwrap();
    let mut commit = writer.prepare_commit().unwrap();
    commit.set_payload(&info.to_string());
    commit.commit().unwrap();
    drop(writer);

    // Queried as version 1 made words: `GPUs` stays `gpus`, which the index (written by the
    // current analysis) does not hold.
    let finder = fx.open();
    assert_eq!(finder.status().unwrap().analysis, 1);
    assert!(ids(&finder, "GPUs", &s).is_empty());
    assert_eq!(ids(&finder, "GPU", &s), vec!["gpu"]);
    drop(finder);

    let run = fx.index(&[&input], &s);
    assert!(run.rebuilt, "an older analysis rebuilds the index");
    let finder = fx.open();
    assert_eq!(finder.status().unwrap().analysis, finder_index::ANALYSIS);
    assert_eq!(ids(&finder, "GPUs", &s), vec!["gpu"]);
}

/// An index of an earlier format is refused by queries, with what to do, and the next
/// indexing run (given every input it holds) builds it again from nothing.
#[test]
fn an_index_of_an_earlier_format_is_refused_then_rebuilt_from_nothing() {
    let fx = Fixture::new();
    let a = fx.write(
        "a.jsonl",
        &record("a", "Alpha", "Kestrels nest on the cliff."),
    );
    let b = fx.write("b.jsonl", &record("b", "Beta", "Herons wade in the marsh."));
    let s = Settings::default();
    fx.index(&[&a, &b], &s);

    // Relabel the commit as one of format 1.
    let mut lexical = tantivy::Index::open_in_dir(fx.index_dir().join("lexical")).unwrap();
    lexical.register_plugin(finder_index::testing::postings_plugin("english"));
    let mut info: serde_json::Value =
        serde_json::from_str(&lexical.load_metas().unwrap().payload.unwrap()).unwrap();
    info["format"] = 1.into();
    let mut writer: tantivy::IndexWriter = lexical.writer(15_000_000).unwrap();
    let mut commit = writer.prepare_commit().unwrap();
    commit.set_payload(&info.to_string());
    commit.commit().unwrap();
    drop(writer);

    let Err(refused) = Finder::open(&fx.index_dir(), s.clone()) else {
        panic!("an index of format 1 opened");
    };
    let message = refused.to_string();
    assert!(
        matches!(refused, IndexError::Outdated { found: 1, .. }),
        "{message}"
    );
    assert!(message.contains("run `finder index`"), "{message}");

    // A rebuild must be given every input the index holds; given one, it removes nothing.
    let err = index_inputs(&fx.index_dir(), &[a.to_path_buf()], &s, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("pass every input"), "{err}");
    assert!(fx.index_dir().join("lexical/meta.json").exists());

    let run = fx.index(&[&a, &b], &s);
    assert!(run.rebuilt, "an earlier format rebuilds the index");
    assert_eq!(run.counts.added, 2);
    let finder = fx.open();
    assert_eq!(ids(&finder, "herons", &s), vec!["b"]);
}

#[test]
fn an_index_a_later_finder_wrote_is_refused_and_left_as_it_was() {
    for key in ["format", "analysis"] {
        let fx = Fixture::new();
        let input = fx.write("records.jsonl", &record("a", "Alpha", "The first record."));
        let s = Settings::default();
        fx.index(&[&input], &s);

        // Relabel the commit as one a later Finder made.
        let mut lexical = tantivy::Index::open_in_dir(fx.index_dir().join("lexical")).unwrap();
        lexical.register_plugin(finder_index::testing::postings_plugin("english"));
        let mut info: serde_json::Value =
            serde_json::from_str(&lexical.load_metas().unwrap().payload.unwrap()).unwrap();
        let later = info[key].as_u64().expect("the commit records it") + 1;
        info[key] = later.into();
        let mut writer: tantivy::IndexWriter = lexical.writer(15_000_000).unwrap();
        let mut commit = writer.prepare_commit().unwrap();
        commit.set_payload(&info.to_string());
        commit.commit().unwrap();
        drop(writer);
        let meta = fx.index_dir().join("lexical/meta.json");
        let before = std::fs::read(&meta).unwrap();

        let what = if key == "format" {
            "record format"
        } else {
            "word analysis"
        };
        let refused = |e: IndexError| match e {
            IndexError::Corrupt { reason, .. } => {
                assert!(
                    reason.contains(&format!("{what} {later} by a later Finder")),
                    "{reason}"
                );
            }
            other => panic!("expected the index refused, got {other}"),
        };
        refused(
            Finder::open(&fx.index_dir(), s.clone())
                .err()
                .expect("open refused"),
        );
        let more = fx.write("more.jsonl", &record("b", "Beta", "A second record."));
        refused(index_inputs(&fx.index_dir(), &[more], &s, &mut |_| {}).expect_err("run refused"));
        assert_eq!(
            std::fs::read(&meta).unwrap(),
            before,
            "{key}: the commit is untouched"
        );
    }
}
