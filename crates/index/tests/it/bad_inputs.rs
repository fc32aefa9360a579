//! Bad inputs: a seeded corpus of malformed notes, record lines, file-system oddities, queries
//! and settings values (`bad_inputs/corpus.rs`), run through ingestion, indexing, search and
//! settings parsing. Nothing may panic; every rejected input is a problem naming its place and
//! reason; sources indexed before stay searchable; bad settings are refused with the key and
//! what was expected. The fuzz targets' findings are replayed here too (`tests/fuzz_cases/`).

mod corpus;

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use finder_core::{Query, Settings, SettingsError, SettingsErrorKind};
use finder_index::{fuzzing, index_inputs, read_input, Finder, IndexError, Problem, RunReport};

use corpus::{Expect, NoteCase, RecordCase, RecordExpect, Rng};

const SEED: u64 = 0x5eed_0008;
/// Good notes and records indexed before the bad ones arrive.
const GOOD: usize = 20;

/// Counts for the summary line.
#[derive(Default)]
struct Tally {
    /// Inputs tried: files, special entries, record lines, whole inputs, queries, settings.
    tried: usize,
    panics: Vec<String>,
    problems: usize,
    queries: usize,
    config: usize,
}

impl Tally {
    /// Runs `f`, counting a panic instead of unwinding.
    fn guard<T>(&mut self, what: &str, f: impl FnOnce() -> T) -> Option<T> {
        self.tried += 1;
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Some(v),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.panics.push(format!("{what}: {msg}"));
                None
            }
        }
    }
}

fn good_note(i: usize) -> String {
    format!(
        "---\ntitle: Good {i}\ntags: [good]\n---\n# Good note {i}\n\nThe {} runbook.\n",
        corpus::marker(900_000 + i)
    )
}

fn good_record(i: usize) -> String {
    serde_json::json!({"id": format!("r{i}"), "title": format!("Record {i}"), "text": format!("Record {} body.", corpus::marker(950_000 + i))}).to_string()
}

/// The good sources: id → marker.
fn good_markers() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..GOOD {
        out.push((format!("good/g{i}.md"), corpus::marker(900_000 + i)));
        out.push((format!("r{i}"), corpus::marker(950_000 + i)));
    }
    out
}

/// Whether a search for `marker` finds `id`.
fn finds(finder: &Finder, marker: &str, id: &str) -> bool {
    finder
        .search(marker, finder.settings(), 0, 10)
        .expect("search")
        .hits
        .iter()
        .any(|h| h.id == id)
}

/// The file part and line of a problem place: `a/b.md:3` → (`a/b.md`, Some(3)).
fn split_place(place: &str) -> (&str, Option<usize>) {
    match place.rsplit_once(':') {
        Some((file, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => {
            (file, line.parse().ok())
        }
        _ => (place, None),
    }
}

/// Reads `input` through ingestion alone: sources by id, problems in order.
fn read_all(input: &Path) -> (BTreeMap<String, finder_index::SourceDoc>, Vec<Problem>) {
    let mut sources = BTreeMap::new();
    let mut problems = Vec::new();
    read_input(
        input,
        "origin",
        &finder_core::IndexSettings::default(),
        &mut |item| match item {
            Ok(s) => {
                sources.insert(s.id.clone(), s);
            }
            Err(p) => problems.push(p),
        },
    )
    .expect("input readable as a whole");
    (sources, problems)
}

/// Checks each note case against what ingestion gave; returns the ids to search for.
fn check_notes(
    cases: &[NoteCase],
    prefix: &str,
    sources: &BTreeMap<String, finder_index::SourceDoc>,
    problems: &[Problem],
) -> Vec<(String, String)> {
    let mut by_file: HashMap<&str, Vec<&Problem>> = HashMap::new();
    for p in problems {
        by_file.entry(split_place(&p.place).0).or_default().push(p);
    }
    let mut searchable = Vec::new();
    for case in cases {
        let id = format!("{prefix}{}", case.name);
        let got = by_file.remove(id.as_str()).unwrap_or_default();
        let what = format!("{} case {id:?}", case.kind);
        let source = sources.get(&id);
        let line_ok = |p: &Problem, last: usize| {
            split_place(&p.place)
                .1
                .is_some_and(|l| (1..=last).contains(&l))
        };
        match &case.expect {
            Expect::Source => {
                assert!(got.is_empty(), "{what}: unexpected problems {got:?}");
                assert!(source.is_some(), "{what}: no source");
            }
            Expect::SourceMaybeProblem { last_line } => {
                assert!(source.is_some(), "{what}: no source");
                assert!(got.len() <= 1, "{what}: {got:?}");
                for p in &got {
                    assert!(line_ok(p, *last_line), "{what}: place {:?}", p.place);
                    assert!(p.reason.starts_with("front matter"), "{what}: {p}");
                }
            }
            Expect::SourceAndProblem { last_line, reason } => {
                assert!(source.is_some(), "{what}: no source");
                assert_eq!(got.len(), 1, "{what}: {got:?}");
                assert!(
                    line_ok(got[0], *last_line),
                    "{what}: place {:?}",
                    got[0].place
                );
                assert!(got[0].reason.starts_with(reason), "{what}: {}", got[0]);
            }
            Expect::Refused { line, reason } => {
                assert!(source.is_none(), "{what}: read as a source");
                assert_eq!(got.len(), 1, "{what}: {got:?}");
                let (_, at) = split_place(&got[0].place);
                assert_eq!(at, *line, "{what}: place {:?}", got[0].place);
                assert!(got[0].reason.contains(reason), "{what}: {}", got[0]);
            }
        }
        if let (Some(marker), Some(_)) = (&case.marker, source) {
            searchable.push((id, marker.clone()));
        }
    }
    assert!(by_file.is_empty(), "problems no case explains: {by_file:?}");
    searchable
}

/// Checks each record line against what ingestion gave; returns the ids to search for.
fn check_records(
    cases: &[RecordCase],
    lines: &[usize],
    file: &str,
    sources: &BTreeMap<String, finder_index::SourceDoc>,
    problems: &[Problem],
) -> Vec<(String, String)> {
    let mut by_line: HashMap<usize, Vec<&Problem>> = HashMap::new();
    for p in problems {
        let (f, line) = split_place(&p.place);
        assert_eq!(f, file, "{p}");
        by_line
            .entry(line.expect("a record problem names its line"))
            .or_default()
            .push(p);
    }
    let mut searchable = Vec::new();
    for (case, &line) in cases.iter().zip(lines) {
        let got = by_line.remove(&line).unwrap_or_default();
        let what = format!("{} record at {file}:{line}", case.kind);
        match &case.expect {
            RecordExpect::Nothing => assert!(got.is_empty(), "{what}: {got:?}"),
            RecordExpect::Problem(reason) => {
                assert_eq!(got.len(), 1, "{what}: {got:?}");
                assert!(
                    got[0].reason.contains(reason.as_str()),
                    "{what}: {}",
                    got[0]
                );
            }
            RecordExpect::Source { id, marker } => {
                assert!(got.is_empty(), "{what}: {got:?}");
                assert!(sources.contains_key(id), "{what}: no source {id:?}");
                if let Some(m) = marker {
                    searchable.push((id.clone(), m.clone()));
                }
            }
        }
    }
    assert!(by_line.is_empty(), "problems no case explains: {by_line:?}");
    searchable
}

fn mkfifo(path: &Path) -> bool {
    std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// Symlinks, a FIFO, a folder named like a note, a file name that is not UTF-8: each with
/// the reason its problem must give (None: read as a note).
#[cfg(unix)]
fn special_entries(root: &Path, outside: &Path) -> Vec<(String, Option<&'static str>)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;
    let mut out = Vec::new();
    let secret = outside.join("secret.md");
    symlink(outside, root.join("outside-dir")).unwrap();
    out.push(("outside-dir".to_string(), Some("symlink not followed")));
    symlink(&secret, root.join("outside.md")).unwrap();
    out.push(("outside.md".to_string(), Some("symlink not followed")));
    symlink(root.join("loop-b.md"), root.join("loop-a.md")).unwrap();
    symlink(root.join("loop-a.md"), root.join("loop-b.md")).unwrap();
    out.push(("loop-a.md".to_string(), Some("symlink not followed")));
    out.push(("loop-b.md".to_string(), Some("symlink not followed")));
    symlink(root, root.join("self-loop")).unwrap();
    out.push(("self-loop".to_string(), Some("symlink not followed")));
    symlink(root.join("nowhere.md"), root.join("dangling.md")).unwrap();
    out.push(("dangling.md".to_string(), Some("symlink not followed")));
    symlink("../../../../../../../../etc/passwd", root.join("climb.md")).unwrap();
    out.push(("climb.md".to_string(), Some("symlink not followed")));
    std::fs::create_dir_all(root.join("folder.md")).unwrap();
    std::fs::write(root.join("folder.md/inner.md"), "inner note").unwrap();
    out.push(("folder.md/inner.md".to_string(), None));
    if mkfifo(&root.join("pipe.md")) {
        out.push(("pipe.md".to_string(), Some("not a regular file")));
    }
    let name = std::ffi::OsStr::from_bytes(b"latin1-\xe9t\xe9.md");
    std::fs::write(root.join(name), "caf\u{e9}").unwrap();
    out.push((
        "latin1-\u{fffd}t\u{fffd}.md".to_string(),
        Some("file name is not valid UTF-8"),
    ));
    std::fs::write(root.join(".hidden.md"), "\0 never read").unwrap();
    std::fs::write(root.join("image.png"), b"\x89PNG\r\n\x1a\n\0").unwrap();
    out
}

#[cfg(unix)]
#[test]
fn bad_inputs_never_panic_are_reported_and_lose_nothing() {
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut rng = Rng::new(SEED);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let notes = root.join("notes");
    let records = root.join("records.jsonl");
    let index = root.join("index");
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let secret = corpus::marker(999_999);
    std::fs::write(outside.join("secret.md"), format!("# Secret\n\n{secret}\n")).unwrap();

    // 1. Good sources, indexed.
    for i in 0..GOOD {
        let path = notes.join(format!("good/g{i}.md"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, good_note(i)).unwrap();
    }
    let good_lines: Vec<String> = (0..GOOD).map(good_record).collect();
    corpus::write_records(&records, &good_lines, &[]);
    let settings = Settings::default();
    let inputs = vec![notes.clone(), records.clone()];
    let first = index_inputs(&index, &inputs, &settings, &mut |_| {}).expect("good run");
    assert!(first.problems.is_empty(), "{:?}", first.problems);
    assert_eq!(first.counts.added, 2 * GOOD as u64);

    // 2. The bad notes beside them, each also through the fuzz wrapper on its own.
    let note_cases = corpus::note_cases(&mut rng, 0, true);
    for case in &note_cases {
        let path = notes.join("bad").join(&case.name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &case.bytes).unwrap();
        if case.bytes.len() < 1 << 20 {
            tally.guard(&format!("note {}", case.name), || {
                fuzzing::note(&case.bytes)
            });
        } else {
            tally.tried += 1;
        }
    }
    let specials = special_entries(&notes.join("bad"), &outside);
    tally.tried += specials.len();
    // 3. Bad record lines after the good ones; two good records turn bad in place.
    let record_cases = corpus::record_cases(&mut rng, "x-", 500_000, true);
    let mut head = good_lines.clone();
    head[0] = r#"{"id": "r0", "text": 5}"#.to_string();
    head[1] = r#"{"id": "r1", "text": "unterminated"#.to_string();
    let lines = corpus::write_records(&records, &head, &record_cases);
    for case in &record_cases {
        if case.line.len() < 1 << 20 {
            tally.guard("record line", || fuzzing::records(&case.line));
        } else {
            tally.tried += 1;
        }
    }
    // Three good notes turn bad in place too: their indexed versions must be kept.
    std::fs::write(notes.join("good/g0.md"), b"bad \xff byte").unwrap();
    std::fs::write(notes.join("good/g1.md"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
    std::fs::remove_file(notes.join("good/g2.md")).unwrap();
    let g2_fifo = mkfifo(&notes.join("good/g2.md"));
    if !g2_fifo {
        std::fs::write(notes.join("good/g2.md"), b"\xfe\xff\0#").unwrap();
    }

    // Ingestion alone: every case gives what it must.
    let read_started = Instant::now();
    let (note_sources, note_problems) = read_all(&notes);
    let mut searchable = check_notes(
        &note_cases,
        "bad/",
        &note_sources,
        &note_problems
            .iter()
            .filter(|p| p.place.starts_with("bad/") && !is_special(&p.place, &specials))
            .cloned()
            .collect::<Vec<_>>(),
    );
    for (name, reason) in &specials {
        let id = format!("bad/{name}");
        let got: Vec<&Problem> = note_problems.iter().filter(|p| p.place == id).collect();
        match reason {
            Some(reason) => {
                assert_eq!(got.len(), 1, "{id}: {got:?}");
                assert!(got[0].reason.starts_with(reason), "{id}: {}", got[0]);
            }
            None => assert!(note_sources.contains_key(&id) && got.is_empty(), "{id}"),
        }
    }
    assert!(
        !note_sources
            .keys()
            .any(|id| id.contains("hidden") || id.ends_with(".png")),
        "hidden files and non-notes are not read"
    );
    for (i, reason) in [(0, "not valid UTF-8"), (1, "binary file")] {
        let p = note_problems
            .iter()
            .find(|p| p.place.starts_with(&format!("good/g{i}.md")))
            .unwrap_or_else(|| panic!("no problem for g{i}"));
        assert!(p.reason.contains(reason), "{p}");
    }
    let (record_sources, record_problems) = read_all(&records);
    searchable.extend(check_records(
        &record_cases,
        &lines,
        "records.jsonl",
        &record_sources,
        &record_problems
            .iter()
            .filter(|p| split_place(&p.place).1 > Some(GOOD))
            .cloned()
            .collect::<Vec<_>>(),
    ));
    assert!(
        record_problems[0].place == "records.jsonl:1"
            && record_problems[0].reason == "`text` must be a string"
    );
    assert!(
        record_problems[1].place == "records.jsonl:2"
            && record_problems[1].reason.starts_with("not valid JSON")
    );
    let read_time = read_started.elapsed();
    // 4. Indexing over all of it: nothing lost, every problem reported.
    let index_started = Instant::now();
    let report = index_inputs(&index, &inputs, &settings, &mut |_| {}).expect("bad run");
    let index_time = index_started.elapsed();
    let extra: Vec<&Problem> = report
        .problems
        .iter()
        .filter(|p| {
            !note_problems
                .iter()
                .chain(&record_problems)
                .any(|q| q.reason == p.reason && p.place.ends_with(&q.place))
        })
        .collect();
    assert!(
        extra.is_empty(),
        "{} more problems than ingestion found: {:#?}",
        extra.len(),
        &extra[..extra.len().min(5)]
    );
    assert_eq!(
        report.problems.len(),
        note_problems.len() + record_problems.len(),
        "the run reports what ingestion found"
    );
    assert_eq!(report.counts.removed, 0, "nothing indexed before is lost");
    tally.problems += report.problems.len();
    let finder = Finder::open(&index, settings.clone()).expect("open");
    for (id, marker) in good_markers() {
        assert!(finds(&finder, &marker, &id), "good source {id} lost");
    }
    for (id, marker) in &searchable {
        assert!(
            finds(&finder, marker, id),
            "accepted input {id:?} not searchable"
        );
    }
    assert!(
        finder
            .search(&secret, &settings, 0, 10)
            .unwrap()
            .hits
            .is_empty(),
        "a symlink was followed out of the input folder"
    );
    let again = index_inputs(&index, &inputs, &settings, &mut |_| {}).expect("third run");
    assert_eq!(
        again.problems, report.problems,
        "problems are deterministic"
    );
    assert_eq!(
        (
            again.counts.added,
            again.counts.updated,
            again.counts.removed
        ),
        (0, 0, 0)
    );
    // 5. Whole inputs that cannot be read: refused with the path, the index untouched.
    whole_inputs(root, &index, &settings, &mut tally);
    let finder = Finder::open(&index, settings.clone()).expect("open after refusals");
    for (id, marker) in good_markers() {
        assert!(
            finds(&finder, &marker, &id),
            "good source {id} lost after refusals"
        );
    }
    // 6. Bad records alone into fresh indexes: a BEIR corpus, precomputed vectors.
    beir_and_vectors(root, &mut rng, &mut tally);
    // 7. Queries.
    let query_started = Instant::now();
    let slowest = run_queries(&finder, &mut rng, &mut tally);
    let query_time = query_started.elapsed();

    // 8. Settings.
    config_values(root, &finder, &mut tally);

    assert!(tally.panics.is_empty(), "panics: {:#?}", tally.panics);
    println!(
        "bad inputs: {} tried, {} panics, {} reported problems, {} queries, {} config values",
        tally.tried,
        tally.panics.len(),
        tally.problems,
        tally.queries,
        tally.config
    );
    println!(
        "  ({} note files, {} special entries, {} record lines; read {:.1?}, indexed {:.1?}, queries {:.1?} (slowest {:.1?}), all {:.1?})",
        note_cases.len(),
        specials.len(),
        record_cases.len(),
        read_time,
        index_time,
        query_time,
        slowest,
        started.elapsed()
    );
}

fn is_special(place: &str, specials: &[(String, Option<&'static str>)]) -> bool {
    specials
        .iter()
        .any(|(name, _)| place == format!("bad/{name}"))
}

/// Inputs refused as a whole: each is an error naming the path, and the index is unchanged.
#[cfg(unix)]
fn whole_inputs(root: &Path, index: &Path, settings: &Settings, tally: &mut Tally) {
    let fifo = root.join("pipe.jsonl");
    let mut cases: Vec<(PathBuf, &str)> = vec![
        (root.join("missing"), "No such file"),
        (root.join("data.csv"), "not an input"),
        (root.join("notes/good/g5.md"), "pass its folder"),
    ];
    std::fs::write(root.join("data.csv"), "a,b\n").unwrap();
    if mkfifo(&fifo) {
        cases.push((fifo, "not a regular file"));
    }
    for (input, reason) in cases {
        let result = tally.guard("whole input", || {
            index_inputs(index, std::slice::from_ref(&input), settings, &mut |_| {})
        });
        match result {
            Some(Err(IndexError::Input(p))) => {
                assert!(
                    p.place
                        .contains(input.file_name().unwrap().to_str().unwrap()),
                    "{p}"
                );
                assert!(p.reason.contains(reason), "{p}");
                tally.problems += 1;
            }
            Some(other) => panic!("{}: {:?}", input.display(), other.map(|r| r.counts)),
            None => {}
        }
    }
}

/// A BEIR corpus of bad lines, and precomputed vectors of the wrong length.
fn beir_and_vectors(root: &Path, rng: &mut Rng, tally: &mut Tally) {
    let beir = root.join("beir");
    std::fs::create_dir_all(&beir).unwrap();
    let cases = corpus::record_cases(rng, "b-", 700_000, false);
    corpus::write_records(&beir.join("corpus.jsonl"), &[], &cases);
    tally.tried += cases.len();
    let report = index_inputs(
        &root.join("beir-index"),
        &[beir],
        &Settings::default(),
        &mut |_| {},
    )
    .expect("beir run");
    for p in &report.problems {
        assert!(p.place.starts_with("corpus.jsonl:"), "{p}");
    }
    tally.problems += report.problems.len();

    let mut settings = Settings::default();
    settings.set("embed.backend=precomputed").unwrap();
    settings.set("embed.dim=4").unwrap();
    let vectors = root.join("vectors.jsonl");
    let lines: Vec<String> = [
        r#"{"id": "v-ok", "text": "fine", "vector": [1, 0, 0, 0]}"#,
        r#"{"id": "v-short", "text": "short", "vector": [1, 0]}"#,
        r#"{"id": "v-long", "text": "long", "vector": [1, 0, 0, 0, 0]}"#,
        r#"{"id": "v-none", "text": "no vector"}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    corpus::write_records(&vectors, &lines, &[]);
    tally.tried += lines.len();
    let report: RunReport = index_inputs(
        &root.join("vector-index"),
        &[vectors],
        &settings,
        &mut |_| {},
    )
    .expect("vector run");
    let reasons: Vec<String> = report.problems.iter().map(|p| p.reason.clone()).collect();
    assert_eq!(
        reasons,
        vec![
            "source `v-short`: `vector` has 2 numbers; embed.dim is 4",
            "source `v-long`: `vector` has 5 numbers; embed.dim is 4"
        ]
    );
    assert!(report
        .problems
        .iter()
        .all(|p| p.place.ends_with("vectors.jsonl")));
    tally.problems += report.problems.len();
}

/// Every query through the whole pipeline with random request options; returns the slowest.
fn run_queries(finder: &Finder, rng: &mut Rng, tally: &mut Tally) -> Duration {
    let texts = corpus::queries(rng, true);
    let ids: Vec<String> = good_markers().into_iter().map(|(id, _)| id).collect();
    let mut slowest = Duration::ZERO;
    for text in &texts {
        let mut request = Query::text(text.clone(), 0, 10);
        match rng.below(6) {
            0 => request.offset = usize::MAX,
            1 => request.limit = 0,
            2 => request.limit = usize::MAX,
            3 => request.offset = rng.range(0, 5_000),
            _ => {}
        }
        for _ in 0..rng.below(3) {
            let key = rng
                .pick(&["tags", "team", "", "=", "\u{202e}", "k"])
                .to_string();
            let value = rng.pick(&["good", "", "a=b", "\u{200b}", "x"]).to_string();
            request.filters.insert(key, value.repeat(rng.range(1, 3)));
        }
        request.scope = match rng.below(6) {
            0 => Some(vec![]),
            1 => Some(vec![String::new(), "no-such-id".into()]),
            2 => Some(ids.iter().take(rng.range(1, 10)).cloned().collect()),
            3 => Some((0..5_000).map(|i| format!("id-{i}")).collect()),
            _ => None,
        };
        if rng.chance(10) {
            request.user = Some(rng.pick(&["", "nobody", "\u{202e}"]).to_string());
        }
        let like_unknown = rng.chance(5);
        if like_unknown {
            request.like = Some("no such source".into());
        } else if rng.chance(5) {
            request.like = Some(rng.pick(&ids).clone());
        }
        if rng.chance(10) {
            request.vector = Some(
                rng.pick(&[
                    vec![],
                    vec![f32::NAN],
                    vec![f32::INFINITY, 1.0],
                    vec![0.0; 3],
                ])
                .clone(),
            );
        }
        let overrides: Vec<String> = (0..rng.below(3))
            .map(|_| {
                rng.pick(&[
                    "refine.sort=date",
                    "refine.mmr=true",
                    "refine.dedup=true",
                    "refine.prefilter=true",
                    "graph.boost=false",
                    "lexical.trigram=on",
                    "refine.min_score=0.5",
                ])
                .to_string()
            })
            .collect();
        let settings = finder.settings_with(&overrides).expect("valid overrides");
        let t = Instant::now();
        let result = tally.guard("query", || finder.query(&request, &settings));
        slowest = slowest.max(t.elapsed());
        tally.queries += 1;
        match result {
            Some(Ok(response)) => {
                assert!(!like_unknown, "a recommend for an unknown source answered");
                assert!(response.hits.len() <= request.limit);
            }
            Some(Err(IndexError::UnknownSource(id))) => {
                assert!(like_unknown, "unknown source {id:?}");
            }
            Some(Err(e)) => panic!(
                "query {:?} failed: {e}",
                text.chars().take(40).collect::<String>()
            ),
            None => {}
        }
    }
    // Many words, each twice: the lexical lists keep each distinct term once, in first-seen
    // order, in one pass (they once compared each with all before it: minutes for a query
    // like this).
    let distinct: Vec<String> = (0..150_000).map(|i| format!("w{i}")).collect();
    let terms: Vec<String> = distinct
        .iter()
        .chain(distinct.iter().rev())
        .cloned()
        .collect();
    let field = finder_index::testing::text_field(finder.tantivy_index());
    let kept = finder_index::testing::query_terms(field, &terms);
    let kept: Vec<String> = kept
        .iter()
        .map(|t| t.value().as_str().unwrap().to_string())
        .collect();
    assert_eq!(kept, distinct);
    // The plain entry points too.
    for text in texts.iter().take(40) {
        tally.guard("search", || {
            finder
                .search(text, finder.settings(), 0, 5)
                .expect("search")
        });
        tally.queries += 1;
    }
    slowest
}

/// How a bad settings value must be refused.
#[derive(Debug)]
enum Refusal {
    /// Out of range: the message names the allowed range.
    Range,
    /// Wrong type or shape: the message says what was expected.
    Invalid,
    /// Unknown key.
    Unknown,
    /// Not TOML: the origin names the line.
    Syntax,
}

fn check_refusal(err: &SettingsError, key: &str, refusal: &Refusal, what: &str) {
    let text = err.to_string();
    match refusal {
        Refusal::Syntax => {
            assert!(
                matches!(err.kind, SettingsErrorKind::Syntax { .. }),
                "{what}: {text}"
            );
            assert!(
                split_place(&err.origin).1.is_some(),
                "{what}: no line in {text}"
            );
        }
        _ => assert_eq!(err.key, key, "{what}: {text}"),
    }
    match (&err.kind, refusal) {
        (SettingsErrorKind::OutOfRange { range, .. }, Refusal::Range | Refusal::Invalid) => {
            assert!(range.contains('–'), "{what}: {text}");
        }
        (SettingsErrorKind::Invalid { expected, .. }, Refusal::Invalid | Refusal::Range) => {
            assert!(!expected.is_empty(), "{what}: {text}");
            assert!(
                !expected.starts_with("invalid"),
                "{what}: serde's words leak: {text}"
            );
        }
        (SettingsErrorKind::UnknownKey { .. }, Refusal::Unknown) => {}
        (SettingsErrorKind::Syntax { .. }, Refusal::Syntax) => {}
        (kind, refusal) => panic!("{what}: expected {refusal:?}, got {kind:?} ({text})"),
    }
    assert!(
        text.contains(&format!("`{key}`")) || key.is_empty(),
        "{what}: {text}"
    );
}

/// Bad values for every key, in `finder.toml` and as `--set`; unknown keys; broken TOML.
fn config_values(root: &Path, finder: &Finder, tally: &mut Tally) {
    let defaults = toml::Table::try_from(Settings::default()).unwrap();
    let mut cases: Vec<(String, String, Refusal)> = Vec::new();
    for key in Settings::keys() {
        let (section, leaf) = key.split_once('.').unwrap();
        let default = &defaults[section][leaf];
        let bad: Vec<(&str, Refusal)> = match default {
            toml::Value::Float(_) | toml::Value::Integer(_) => vec![
                ("\"text\"", Refusal::Invalid),
                ("true", Refusal::Invalid),
                ("[1]", Refusal::Invalid),
                ("{ a = 1 }", Refusal::Invalid),
                ("-1", Refusal::Range),
                ("1e12", Refusal::Range),
                ("99999999999999999", Refusal::Range),
                ("nan", Refusal::Range),
                ("inf", Refusal::Range),
                ("-inf", Refusal::Range),
            ],
            toml::Value::Boolean(_) => vec![
                ("\"yes\"", Refusal::Invalid),
                ("1", Refusal::Invalid),
                ("[true]", Refusal::Invalid),
            ],
            toml::Value::String(_) => {
                let mut v = vec![
                    ("1", Refusal::Invalid),
                    ("true", Refusal::Invalid),
                    ("[\"a\"]", Refusal::Invalid),
                    ("{ a = 1 }", Refusal::Invalid),
                ];
                // Keys with a fixed set of values refuse anything else.
                if Settings::default()
                    .set(&format!("{key}=\"no-such-value\""))
                    .is_err()
                {
                    v.push(("\"no-such-value\"", Refusal::Invalid));
                    v.push(("\"\u{202e}\"", Refusal::Invalid));
                }
                v
            }
            toml::Value::Array(_) => vec![
                ("5", Refusal::Invalid),
                ("\"x\"", Refusal::Invalid),
                ("[{ a = 1 }]", Refusal::Invalid),
                ("[[1]]", Refusal::Invalid),
            ],
            _ => vec![],
        };
        for (value, refusal) in bad {
            cases.push((key.clone(), value.to_string(), refusal));
        }
    }
    for (key, value) in [
        ("finder.rollup_weights", "[]"),
        ("finder.rollup_weights", "[2.0]"),
        ("refine.personal_lambdas", "[1.0, 2.0]"),
        ("refine.plugins", "[\"ftp://x\"]"),
        ("index.language", "\"klingon\""),
        ("graph.node_labels", "[1]"),
    ] {
        cases.push((key.to_string(), value.to_string(), Refusal::Invalid));
    }

    let tried_before = tally.tried;
    for (key, value, refusal) in &cases {
        let (section, leaf) = key.split_once('.').unwrap();
        let text = format!("[{section}]\n{leaf} = {value}\n");
        let what = format!("finder.toml {key} = {value}");
        match tally.guard(&what, || Settings::from_toml(&text, "finder.toml")) {
            Some(Ok(_)) => panic!("{what}: accepted"),
            Some(Err(e)) => check_refusal(&e, key, refusal, &what),
            None => {}
        }
        let assignment = format!("{key}={value}");
        let mut settings = Settings::default();
        match tally.guard(&assignment, || settings.set(&assignment)) {
            Some(Ok(())) => panic!("--set {assignment}: accepted"),
            Some(Err(e)) => {
                check_refusal(&e, key, refusal, &assignment);
                assert!(e.origin.starts_with("--set "), "{e}");
            }
            None => {}
        }
        assert_eq!(
            settings,
            Settings::default(),
            "--set {assignment} changed settings"
        );
    }
    // A wrong value after good ones is named, not the first key of the file.
    let err = Settings::from_toml(
        "[lexical]\nk1 = 1.0\nb = \"x\"\n[finder]\nrrf_k = 60\n",
        "f",
    )
    .unwrap_err();
    assert_eq!(
        (err.key.as_str(), err.to_string().as_str()),
        (
            "lexical.b",
            "f: `lexical.b`: invalid value \"x\"; expected a number"
        )
    );

    let unknown: &[(&str, &str, Refusal)] = &[
        ("[lexical]\nk2 = 1\n", "lexical.k2", Refusal::Unknown),
        ("[lexicl]\nk1 = 1\n", "lexicl.k1", Refusal::Unknown),
        ("[typo]\n", "typo", Refusal::Unknown),
        ("top = 1\n", "top", Refusal::Unknown),
        ("lexical = 3\n", "lexical", Refusal::Invalid),
        ("[[lexical]]\nk1 = 1\n", "lexical", Refusal::Invalid),
        ("[lexical.k1]\n", "lexical.k1", Refusal::Invalid),
        ("[lexical.k1]\nx = 1\n", "lexical.k1", Refusal::Invalid),
        ("[lexical.nope]\nx = 1\n", "lexical.nope", Refusal::Unknown),
        ("[\"\u{202e}\"]\nk = 1\n", "\u{202e}.k", Refusal::Unknown),
        ("[lexical\nk1 = 1\n", "", Refusal::Syntax),
        ("[lexical]\nk1 = = 3\n", "", Refusal::Syntax),
        ("[lexical]\nk1 = 1\nk1 = 2\n", "", Refusal::Syntax),
        ("[lexical]\n[lexical]\n", "", Refusal::Syntax),
        ("\u{0}", "", Refusal::Syntax),
        ("k1 = \"unterminated\n", "", Refusal::Syntax),
        (
            "a = [1, \"mixed\", {}]\nb = 1979-05-27T07:32:00Z\n",
            "a",
            Refusal::Unknown,
        ),
    ];
    for (text, key, refusal) in unknown {
        let what = format!("finder.toml {text:?}");
        match tally.guard(&what, || Settings::from_toml(text, "finder.toml")) {
            Some(Ok(_)) => panic!("{what}: accepted"),
            Some(Err(e)) => check_refusal(&e, key, refusal, &what),
            None => {}
        }
    }
    // Empty known sections and a file of comments are fine.
    Settings::from_toml("[lexical]\n[graph]\n# nothing\n", "f").expect("empty sections");

    let sets: &[(&str, &str, Refusal)] = &[
        ("noequals", "noequals", Refusal::Invalid),
        ("=1", "", Refusal::Unknown),
        ("lexical.k1=", "lexical.k1", Refusal::Invalid),
        ("lexical.k1==1", "lexical.k1", Refusal::Invalid),
        ("a.b.c=1", "a.b.c", Refusal::Unknown),
        ("lexical=1", "lexical", Refusal::Unknown),
        ("lexical.k1=1;rm -rf /", "lexical.k1", Refusal::Invalid),
        ("\u{202e}=1", "\u{202e}", Refusal::Unknown),
    ];
    for (assignment, key, refusal) in sets {
        let mut settings = Settings::default();
        match tally.guard(assignment, || settings.set(assignment)) {
            Some(Ok(())) => panic!("--set {assignment}: accepted"),
            Some(Err(e)) => check_refusal(&e, key, refusal, assignment),
            None => {}
        }
    }
    // Index-time keys cannot change at query time.
    match finder.settings_with(&["index.fragment_max_chars=500".to_string()]) {
        Err(IndexError::IndexTimeSetting { key, .. }) => {
            assert_eq!(key, "index.fragment_max_chars")
        }
        other => panic!("index-time --set: {:?}", other.map(|_| ())),
    }
    // A settings file that is not UTF-8 names its path.
    let file = root.join("latin1.toml");
    std::fs::write(&file, b"[lexical]\nk1 = \"\xe9\"\n").unwrap();
    let err = finder_index::load_settings(root, Some(&file)).unwrap_err();
    assert!(err.to_string().contains("latin1.toml"), "{err}");
    tally.tried += 2;
    tally.config += tally.tried - tried_before;
}

/// The fuzz targets' findings and seeds, replayed through the same wrappers.
#[test]
fn fuzz_cases_replay_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_cases");
    let tmp = tempfile::tempdir().unwrap();
    let finder = fuzzing::query_index(tmp.path());
    let mut replayed = 0;
    for target in ["markdown", "records", "query", "config"] {
        let dir = root.join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no cases for {target}");
        for file in files {
            let bytes = std::fs::read(&file).unwrap();
            let run = || match target {
                "markdown" => fuzzing::note(&bytes),
                "records" => fuzzing::records(&bytes),
                "query" => fuzzing::query(Some(&finder), &String::from_utf8_lossy(&bytes)),
                _ => fuzzing::config(&String::from_utf8_lossy(&bytes)),
            };
            if catch_unwind(AssertUnwindSafe(run)).is_err() {
                panic!("fuzz case {} fails again", file.display());
            }
            replayed += 1;
        }
    }
    println!("fuzz cases: {replayed} replayed");
}
