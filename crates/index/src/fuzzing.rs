//! Entry points over every parser that reads untrusted text, for the fuzz targets in `fuzz/`
//! and for the stable regression test that replays their findings
//! (`tests/it/bad_inputs.rs`, cases under `tests/fuzz_cases/`).
//!
//! Each function feeds its input through the real parser and then checks what that parser
//! promises besides not panicking: problems name their place, extents slice the text they
//! describe, ranges fall on character boundaries, a refused setting leaves the settings as
//! they were. A broken promise panics, so libFuzzer records it as a crash.

use std::ops::Range;
use std::path::{Path, PathBuf};

use finder_core::{IndexSettings, Query, Settings, SourceFilter};

use crate::document::{Problem, SourceDoc};
use crate::graph::{
    code_ranges, fold, links, normalize_tag, normalize_target, tags, LinkResolver, LinkStyle,
    MentionConfig, MentionMatcher,
};
use crate::ingest::{note_from_bytes, read_lines, Layout};
use crate::{derive_summary, Finder};

/// The id the fuzzed note is read under.
pub const NOTE_ID: &str = "fuzz/note.md";
/// The file name the fuzzed records are read under.
pub const RECORDS_NAME: &str = "fuzz.jsonl";

/// One note file's bytes through ingestion (UTF-8 check, front matter, title, summary,
/// fragments at two sizes), then links, tags, code spans and mentions over its text.
pub fn note(bytes: &[u8]) {
    for max_chars in [200, finder_core::DEFAULT_FRAGMENT_MAX_CHARS] {
        let settings = IndexSettings {
            fragment_max_chars: max_chars,
            ..IndexSettings::default()
        };
        let mut sources = 0;
        let items = note_from_bytes(NOTE_ID, bytes, "origin", &settings);
        // The source comes before its problems: the writer takes an id named by a problem
        // first as a second source with that id.
        let first_ok = items.first().is_some_and(Result::is_ok);
        for item in items {
            match item {
                Ok(source) => {
                    sources += 1;
                    check_source(&source, Some(bytes), max_chars);
                }
                Err(problem) => check_problem(&problem, NOTE_ID, bytes),
            }
        }
        assert!(sources <= 1, "one note gave {sources} sources");
        assert!(sources == 0 || first_ok, "a problem came before the source");
    }
    let text = String::from_utf8_lossy(bytes);
    let summary = derive_summary(&text, 280);
    assert!(summary.chars().count() <= 280, "summary longer than asked");
    text_structure(&text);
}

/// Links, tags, code spans, link targets and mentions of `text`.
pub fn text_structure(text: &str) {
    for range in code_ranges(text) {
        check_range(text, &range, "code range");
    }
    let mut targets = Vec::new();
    for style in [LinkStyle::TargetFirst, LinkStyle::LabelFirst] {
        for link in links(text, style) {
            check_range(text, &link.range, "link");
            let _ = normalize_target(&link.target);
            targets.push(link.target);
        }
    }
    for tag in tags(text) {
        check_range(text, &tag.range, "tag");
        assert_eq!(
            normalize_tag(&text[tag.range.clone()]).as_deref(),
            Some(tag.name.as_str()),
            "a tag's text normalises to its name"
        );
    }
    // Notes named like the link targets found, so resolution has something to find.
    let mut ids: Vec<String> = targets.iter().map(|t| format!("{t}.md")).collect();
    ids.extend([
        "a.md".to_string(),
        "dir/b.md".to_string(),
        NOTE_ID.to_string(),
    ]);
    let resolver = LinkResolver::new(&ids);
    for target in &targets {
        if let Some(i) = resolver.resolve(NOTE_ID, target) {
            assert!(i < resolver.len(), "resolved to a note that does not exist");
        }
    }
    // Entities named by the text's own lines (and parts of them), found in the text again.
    let names: Vec<(u32, Vec<String>)> = text
        .lines()
        .take(16)
        .enumerate()
        .map(|(i, line)| {
            let short: String = line.chars().take(40).collect();
            (i as u32, vec![line.to_string(), short])
        })
        .collect();
    let config = MentionConfig {
        min_chars: 1,
        ..MentionConfig::default()
    };
    if let Ok(matcher) = MentionMatcher::build_with_corpus(names, &config, [text]) {
        for mention in matcher.find(text) {
            check_range(text, &mention.range, "mention");
            assert!(mention.alias < matcher.aliases().len());
        }
    }
    let folded = fold(text);
    assert_eq!(fold(&folded), folded, "fold is idempotent");
}

/// JSON Lines bytes through the record reader, in both layouts (Finder records and BEIR).
pub fn records(bytes: &[u8]) {
    let lines = bytes.split(|&b| b == b'\n').count();
    for layout in [Layout::Records, Layout::Beir] {
        let settings = IndexSettings {
            fragment_max_chars: 200,
            ..IndexSettings::default()
        };
        let mut ids = std::collections::HashSet::new();
        read_lines(
            bytes,
            RECORDS_NAME,
            layout,
            "origin",
            &settings,
            &mut |item| match item {
                Ok(source) => {
                    check_source(&source, None, 200);
                    assert!(ids.insert(source.id.clone()), "id {} twice", source.id);
                }
                Err(problem) => {
                    let line = problem
                        .place
                        .strip_prefix(RECORDS_NAME)
                        .and_then(|rest| rest.strip_prefix(':'))
                        .and_then(|n| n.parse::<usize>().ok())
                        .unwrap_or_else(|| panic!("place without a line: {problem}"));
                    assert!((1..=lines).contains(&line), "line {line} of {lines}");
                    assert!(!problem.reason.is_empty(), "a problem without a reason");
                }
            },
        );
    }
}

/// Settings text: `text` as a whole `finder.toml`, then each of its lines as a `--set`
/// override on the defaults.
pub fn config(text: &str) {
    const ORIGIN: &str = "finder.toml";
    match Settings::from_toml(text, ORIGIN) {
        Ok(settings) => {
            settings
                .validate(ORIGIN)
                .expect("accepted settings validate");
            let again = toml::to_string(&settings).expect("settings serialise");
            let back = Settings::from_toml(&again, ORIGIN).expect("serialised settings parse");
            assert_eq!(back, settings, "settings survive a round trip");
        }
        Err(e) => {
            assert!(e.origin.starts_with(ORIGIN), "origin {}", e.origin);
            let syntax = matches!(e.kind, finder_core::SettingsErrorKind::Syntax { .. });
            // Only a syntax error, or a key that is itself empty (`"" = 1`), names no key.
            let empty_key = text.contains("\"\"") || text.contains("''");
            assert!(
                syntax || empty_key || !e.key.is_empty(),
                "no key named: {e}"
            );
            assert!(!e.to_string().is_empty());
        }
    }
    for line in text.lines().take(64) {
        set(line);
    }
}

/// One `--set` override on the defaults: refused with the key named and the settings left
/// alone, or accepted with valid settings.
pub fn set(assignment: &str) {
    let mut settings = Settings::default();
    match settings.set(assignment) {
        Ok(()) => settings
            .validate("--set")
            .expect("accepted overrides validate"),
        Err(e) => {
            assert_eq!(
                settings,
                Settings::default(),
                "a refused --set changed settings"
            );
            assert!(e.origin.starts_with("--set "), "origin {}", e.origin);
            let named = assignment.split_once('=').map_or(assignment, |(k, _)| k);
            assert!(
                named.trim().is_empty() || !e.key.is_empty(),
                "no key named: {e}"
            );
        }
    }
}

/// The text of one query through the analyzers and the query-side helpers; with `finder`,
/// also through the whole pipeline. The input holds the query text on its first line and
/// optional request lines after it: `filter KEY=VALUE`, `scope ID`, `user ID`, `like ID`,
/// `set KEY=VALUE`, `offset N`, `limit N`, `vector X,Y,…`.
pub fn query(finder: Option<&Finder>, input: &str) {
    let mut lines = input.split('\n');
    let text = lines.next().unwrap_or("");
    let mut request = Query::text(text, 0, 10);
    let mut overrides = Vec::new();
    let mut filters = Vec::new();
    for line in lines.take(32) {
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        match verb {
            // The command line's `--filter KEY=VALUE`.
            "filter" => {
                if let Some((k, v)) = rest.split_once('=') {
                    request
                        .filters
                        .insert(k.trim().to_string(), v.trim().to_string());
                    filters.push((k.to_string(), v.to_string()));
                }
            }
            "scope" => request
                .scope
                .get_or_insert_with(Vec::new)
                .push(rest.to_string()),
            "user" => request.user = Some(rest.to_string()),
            "like" => request.like = Some(rest.to_string()),
            "set" => overrides.push(rest.to_string()),
            "offset" => request.offset = rest.trim().parse().unwrap_or(0),
            "limit" => request.limit = rest.trim().parse().unwrap_or(10),
            "vector" => {
                request.vector = Some(
                    rest.split(',')
                        .filter_map(|x| x.trim().parse::<f32>().ok())
                        .collect(),
                )
            }
            _ => {}
        }
    }
    let _ = SourceFilter::new(filters);
    analyzers(text);
    let _ = finder_core::content_tokens(text);
    let _ = finder_core::parse_date(text);
    let body = "The refresh token expired after 30 days; AUTH-041 is logged. ".repeat(20);
    for max in [1, 40, 240] {
        let p = crate::preview::preview(&body, text, max);
        assert!(p.chars().count() <= max + 2, "preview longer than asked");
    }
    let Some(finder) = finder else { return };
    // A page far down the ranking costs levels of work; the pipeline caps it, the fuzzer
    // need not explore it.
    request.offset = request.offset.min(1_000);
    request.limit = request.limit.min(1_000);
    let settings = match finder.settings_with(&overrides) {
        Ok(settings) => settings,
        Err(_) => finder.settings().clone(),
    };
    match finder.query(&request, &settings) {
        Ok(response) => {
            assert!(
                response.hits.len() <= request.limit,
                "more hits than the limit"
            );
            for hit in &response.hits {
                assert!(hit.score.is_finite(), "score {}", hit.score);
            }
        }
        // A recommend target that is not indexed is the one error a query may give.
        Err(crate::IndexError::UnknownSource(_)) => assert!(request.like.is_some()),
        Err(e) => panic!("query failed: {e}"),
    }
}

/// The word analyzer (two languages) and the whole-word analyzer over `text`.
fn analyzers(text: &str) {
    let _ = crate::looks_like_identifier(text);
    for language in ["english", "german"] {
        let mut words = crate::analyzer::word_analyzer(language, crate::analyzer::ANALYSIS);
        for term in crate::analyzer::terms(&mut words, text) {
            assert!(!term.is_empty() && term.len() <= 64 * 4, "term {term:?}");
        }
    }
    let mut raw = crate::analyzer::whole_word_analyzer();
    for term in crate::analyzer::terms(&mut raw, text) {
        assert!(
            !term.is_empty() && term.len() <= 64 * 4 && !term.contains(char::is_whitespace),
            "whole word {term:?}"
        );
    }
}

/// A small fixed index for [`query`] in `dir` (created; notes, records and an entity), opened.
pub fn query_index(dir: &Path) -> Finder {
    let notes = dir.join("notes");
    let files: [(&str, &str); 4] = [
        (
            "tokens.md",
            "---\ntitle: Tokens\ntags: [auth]\nteam: platform\n---\n# Tokens\n\nA refresh token lasts 30 days. See [[backups]].\n\n## Expiry\n\nAUTH-041 means the refresh token expired. #security\n",
        ),
        (
            "backups.md",
            "---\ndate: 2024-03-01\nteam: data\n---\n# Backups\n\nNightly snapshots of the database, kept for 30 days.\n",
        ),
        ("misc/cache.txt", "Cache warmup happens after each deploy of Postgres.\n"),
        ("empty.md", ""),
    ];
    for (name, text) in files {
        let path = notes.join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("notes folder");
        std::fs::write(path, text).expect("write note");
    }
    let records = dir.join("records.jsonl");
    std::fs::write(
        &records,
        concat!(
            r#"{"id": "db:postgres", "kind": "entity", "name": "Postgres", "aliases": ["PostgreSQL"], "label": "Database"}"#,
            "\n",
            r#"{"id": "r1", "title": "Runbook", "text": "Restart Postgres when the cache is cold.", "date": "2023-11-02", "relations": [{"to": "db:postgres", "kind": "relates"}]}"#,
            "\n"
        ),
    )
    .expect("write records");
    let index = dir.join("index");
    let settings = Settings::default();
    crate::index_inputs(&index, &[notes, records], &settings, &mut |_| {})
        .expect("index the query fixture");
    Finder::open(&index, settings).expect("open the query fixture")
}

/// A temporary folder for one process's fixture, removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A new empty folder under the system's temporary folder.
    pub fn new(name: &str) -> ScratchDir {
        let path = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("scratch folder");
        ScratchDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check_problem(problem: &Problem, id: &str, bytes: &[u8]) {
    assert!(
        problem.place == id || problem.place.starts_with(&format!("{id}:")),
        "place {:?} does not name {id}",
        problem.place
    );
    if let Some(line) = problem.place.strip_prefix(&format!("{id}:")) {
        let line: usize = line.parse().expect("a line number");
        let lines = 1 + bytes.iter().filter(|&&b| b == b'\n').count();
        assert!((1..=lines).contains(&line), "line {line} of {lines}");
    }
    assert!(!problem.reason.is_empty(), "a problem without a reason");
    assert_eq!(problem.source_id.as_deref(), Some(id));
}

/// A source's fragments: in order, non-empty, trimmed, within `max_chars`, and (for files)
/// slicing `bytes` to exactly their text at their lines.
fn check_source(source: &SourceDoc, bytes: Option<&[u8]>, max_chars: usize) {
    assert!(!source.id.trim().is_empty(), "empty id");
    assert!(
        source.envelope.title.chars().count() <= crate::ingest::MAX_TITLE_CHARS,
        "title of {} chars",
        source.envelope.title.chars().count()
    );
    for (i, f) in source.fragments.iter().enumerate() {
        assert_eq!(f.ordinal as usize, i);
        assert!(
            !f.text.is_empty() && f.text.trim() == f.text,
            "{:?}",
            f.text
        );
        assert!(f.text.chars().count() <= max_chars);
        let e = f.extent;
        assert!(e.byte_start < e.byte_end && e.line_start <= e.line_end);
        if let Some(bytes) = bytes {
            let slice = &bytes[e.byte_start as usize..e.byte_end as usize];
            assert_eq!(slice, f.text.as_bytes(), "extent slices the text");
            let newlines = bytes[..e.byte_start as usize]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            assert_eq!(e.line_start as usize, 1 + newlines, "line of the extent");
        }
    }
}

fn check_range(text: &str, range: &Range<usize>, what: &str) {
    assert!(
        range.start <= range.end && range.end <= text.len(),
        "{what} {range:?} outside 0..{}",
        text.len()
    );
    assert!(
        text.is_char_boundary(range.start) && text.is_char_boundary(range.end),
        "{what} {range:?} splits a character"
    );
}
