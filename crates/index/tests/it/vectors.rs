//! The vector layer with a small deterministic embedder: building, resuming, model changes,
//! and every way the vector channel degrades instead of failing the query.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use finder_core::{Channel, ChannelStatus, Embed, SearchResponse, Settings};
use finder_index::{build_vectors, Finder, VectorProgress};

use crate::support::{record, Fixture};

/// Hashes words into 64 buckets: texts that share words get close vectors.
struct BagOfWords {
    /// Says it knows English only, as the default model does.
    english_only: bool,
    id: String,
    /// Fail every call after this many (to simulate a crash mid-build or a dead backend).
    fail_after: Option<usize>,
    calls: AtomicUsize,
    delay: Duration,
    /// Reads this many words at a time: a longer text is embedded window by window.
    window_words: Option<usize>,
}

impl BagOfWords {
    fn new(id: &str) -> BagOfWords {
        BagOfWords {
            english_only: false,
            id: id.into(),
            fail_after: None,
            calls: AtomicUsize::new(0),
            delay: Duration::ZERO,
            window_words: None,
        }
    }
}

impl Embed for BagOfWords {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        64
    }

    fn english_only(&self) -> bool {
        self.english_only
    }

    fn reads_in_windows(&self) -> bool {
        self.window_words.is_some()
    }

    fn embed_windows(&self, texts: &[&str]) -> Result<Vec<Vec<Vec<f32>>>, String> {
        let Some(size) = self.window_words else {
            return Ok(self.embed(texts)?.into_iter().map(|v| vec![v]).collect());
        };
        texts
            .iter()
            .map(|t| {
                let words: Vec<&str> = t.split_whitespace().collect();
                let windows: Vec<String> = words.chunks(size).map(|w| w.join(" ")).collect();
                let windows: Vec<&str> = windows.iter().map(String::as_str).collect();
                self.embed(&windows)
            })
            .collect()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail_after.is_some_and(|limit| n >= limit) {
            return Err("backend went away".into());
        }
        std::thread::sleep(self.delay);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 64];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = blake3::hash(w.to_lowercase().as_bytes()).as_bytes()[0] as usize;
                    v[h % 64] += 1.0;
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                v.iter_mut().for_each(|x| *x /= norm);
                v
            })
            .collect())
    }
}

fn corpus(fx: &Fixture, n: usize) -> std::path::PathBuf {
    let topics = [
        "database backup restore",
        "token expired login",
        "deploy rollback release",
        "cache latency",
    ];
    let lines: Vec<String> = (0..n)
        .map(|i| {
            record(
                &format!("r{i:03}"),
                &format!("Note {i}"),
                &format!("{} item {i}", topics[i % topics.len()]),
            )
        })
        .collect();
    fx.write("records.jsonl", &lines.join("\n"))
}

fn small_batches() -> Settings {
    let mut s = Settings::default();
    s.embed.batch_size = 4;
    s
}

fn open_with(fx: &Fixture, embedder: Arc<dyn Embed>) -> Finder {
    let mut finder = fx.open();
    finder.attach_embedder(Ok(Some(embedder)));
    finder
}

fn vector_report(r: &SearchResponse) -> (ChannelStatus, Option<String>, usize) {
    let c = r
        .diagnostics
        .channels
        .iter()
        .find(|c| c.channel == Channel::Vector)
        .expect("vector channel reported");
    (c.status, c.reason.clone(), c.hits)
}

#[test]
fn vectors_join_the_fusion_and_explain_shows_them() {
    let fx = Fixture::new();
    let input = corpus(&fx, 20);
    fx.index(&[&input], &Settings::default());
    let model = Arc::new(BagOfWords::new("bow"));
    let report = build_vectors(
        &fx.index_dir(),
        &small_batches(),
        model.as_ref(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((report.embedded, report.total), (20, 20));
    let finder = open_with(&fx, model);
    let r = finder
        .search("restore the database backup", &Settings::default(), 0, 5)
        .unwrap();
    let (status, _, hits) = vector_report(&r);
    assert_eq!(status, ChannelStatus::Ran);
    assert!(hits > 0);
    assert!(r.hits[0].explain.parts[0]
        .lists
        .iter()
        .any(|l| l.channel == Channel::Vector));
    assert!(r
        .diagnostics
        .stages
        .iter()
        .any(|s| s.stage == "vector.embed"));
    let status = finder.status().unwrap().vectors.unwrap();
    assert_eq!((status.done, status.total, status.pending), (20, 20, false));
    // Dense only: the lexical lists can be switched off per query.
    let dense = finder
        .settings_with(&["lexical.enabled=false".into()])
        .unwrap();
    let r = finder.search("database backup", &dense, 0, 5).unwrap();
    assert!(r.hits.iter().all(|h| h.explain.parts[0]
        .lists
        .iter()
        .all(|l| l.channel == Channel::Vector)));
    assert!(!r.hits.is_empty());
    // MMR diversifies by the fragments' vectors when the index has them.
    let mmr = finder.settings_with(&["refine.mmr=true".into()]).unwrap();
    let r = finder.search("database backup", &mmr, 0, 5).unwrap();
    let similarity = r.hits[1].explain.refinements.iter().find_map(|x| match x {
        finder_core::Refinement::Mmr(m) => Some(m.similarity),
        _ => None,
    });
    assert_eq!(
        similarity,
        Some(finder_core::Similarity::Cosine),
        "{:?}",
        r.hits[1]
    );
}

#[test]
fn an_interrupted_build_resumes_where_it_stopped() {
    let fx = Fixture::new();
    let input = corpus(&fx, 40);
    fx.index(&[&input], &Settings::default());
    let flaky = BagOfWords {
        fail_after: Some(3),
        ..BagOfWords::new("bow")
    };
    let err = build_vectors(&fx.index_dir(), &small_batches(), &flaky, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("backend went away"), "{err}");
    // Lexical search is unaffected; the status says the build is unfinished.
    let finder = fx.open();
    assert!(!finder
        .search("cache latency", &Settings::default(), 0, 5)
        .unwrap()
        .hits
        .is_empty());
    let status = finder.status().unwrap().vectors.unwrap();
    assert!(status.pending && status.done == 0, "{status:?}");
    // Three batches of four were logged; the resumed build embeds only the rest.
    let report = build_vectors(
        &fx.index_dir(),
        &small_batches(),
        &BagOfWords::new("bow"),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((report.embedded, report.reused, report.total), (28, 12, 40));
}

/// What a test does after a given call of the embedder, while a build is under way.
type Hook<'a> = (usize, Box<dyn Fn() + Send + Sync + 'a>);

/// Embeds as [`BagOfWords`] does, records every text in order, and runs each hook once, after
/// the call it names.
struct Recording<'a> {
    inner: BagOfWords,
    texts: std::sync::Mutex<Vec<String>>,
    hooks: Vec<Hook<'a>>,
}

impl Embed for Recording<'_> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let out = self.inner.embed(texts)?;
        self.texts
            .lock()
            .unwrap()
            .extend(texts.iter().map(|t| t.to_string()));
        let call = self.inner.calls.load(Ordering::SeqCst);
        for (after, hook) in &self.hooks {
            if *after == call {
                hook();
            }
        }
        Ok(out)
    }
}

#[test]
fn an_edit_during_a_build_is_published_before_the_backlog() {
    let fx = Fixture::new();
    let input = corpus(&fx, 12);
    fx.index(&[&input], &Settings::default());
    let dir = fx.index_dir();
    build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();

    // A backlog of 20 new records; while it is embedded, record 5 is edited and committed.
    let text = std::fs::read_to_string(&input).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.extend((12..32).map(|i| {
        record(
            &format!("r{i:03}"),
            &format!("Note {i}"),
            "cache latency backlog",
        )
    }));
    std::fs::write(&input, lines.join("\n")).unwrap();
    fx.index(&[&input], &Settings::default());
    let edited = "Note 5\nan edit that must not wait for the backlog";
    lines[5] = record(
        "r005",
        "Note 5",
        "an edit that must not wait for the backlog",
    );
    let after_edit = lines.join("\n");
    let dense = || {
        let finder = open_with(&fx, Arc::new(BagOfWords::new("bow")));
        let mut s = Settings::default();
        s.lexical.enabled = false;
        let hits = finder
            .search("edit must wait backlog", &s, 0, 1)
            .unwrap()
            .hits;
        hits.first().map(|h| h.id.clone())
    };
    let recording = Recording {
        inner: BagOfWords::new("bow"),
        texts: Default::default(),
        hooks: vec![
            (
                2,
                Box::new(|| {
                    std::fs::write(&input, &after_edit).unwrap();
                    fx.index(&[&input], &Settings::default());
                }),
            ),
            // In the backlog's first batch, the edit is already searchable by meaning.
            (4, Box::new(|| assert_eq!(dense().as_deref(), Some("r005")))),
        ],
    };
    let report = build_vectors(&dir, &small_batches(), &recording, &mut |_| {}).unwrap();
    let texts = recording.texts.lock().unwrap().clone();
    // Two batches of the backlog, then the build starts over: the edit first (published on
    // its own), then the twelve new records left.
    assert_eq!(texts.len(), 8 + 1 + 12, "{texts:?}");
    assert_eq!(texts[8], edited, "{texts:?}");
    assert!(texts[9..]
        .iter()
        .all(|t| t.ends_with("cache latency backlog")));
    assert_eq!((report.embedded, report.reused, report.total), (21, 11, 32));
    assert_eq!(dense().as_deref(), Some("r005"));
}

#[test]
fn edits_and_model_changes_redo_only_what_changed() {
    let fx = Fixture::new();
    let input = corpus(&fx, 12);
    fx.index(&[&input], &Settings::default());
    let dir = fx.index_dir();
    build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();
    let again =
        build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();
    assert_eq!((again.embedded, again.reused), (0, 12));

    // One record edited, one removed: one vector redone, one dropped.
    let text = std::fs::read_to_string(&input).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[0] = record("r000", "Note 0", "something entirely different");
    lines.pop();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let lexical = fx.index(&[&input], &Settings::default());
    assert_eq!((lexical.counts.updated, lexical.counts.removed), (1, 1));
    let update =
        build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();
    assert_eq!((update.embedded, update.removed, update.total), (1, 2, 11));

    // A new model rebuilds every vector, and the lexical index is not touched.
    let before = fx.open().status().unwrap().committed_at;
    let other = build_vectors(
        &dir,
        &small_batches(),
        &BagOfWords::new("bow-v2"),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((other.embedded, other.reused, other.total), (11, 0, 11));
    assert_eq!(fx.open().status().unwrap().committed_at, before);
}

#[test]
fn a_renamed_note_keeps_its_vectors() {
    let fx = Fixture::new();
    fx.write(
        "notes/a.md",
        "# Glacier\n\nMoraine and crevasse on the north face.\n",
    );
    fx.write(
        "notes/b.md",
        "# Volcano\n\nCaldera and tephra after the eruption.\n",
    );
    let input = fx.path("notes");
    fx.index(&[&input], &Settings::default());
    let dir = fx.index_dir();
    let first =
        build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();
    assert_eq!((first.embedded, first.total), (2, 2));
    // A move is a new source id with the same text: its vector is copied, not embedded.
    std::fs::create_dir_all(fx.path("notes/geo")).unwrap();
    std::fs::rename(fx.path("notes/a.md"), fx.path("notes/geo/glacier.md")).unwrap();
    let lexical = fx.index(&[&input], &Settings::default());
    assert_eq!((lexical.counts.added, lexical.counts.removed), (1, 1));
    let moved =
        build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();
    assert_eq!((moved.embedded, moved.reused, moved.total), (0, 2, 2));
    let finder = open_with(&fx, Arc::new(BagOfWords::new("bow")));
    let mut settings = Settings::default();
    settings.lexical.enabled = false;
    let r = finder.search("moraine crevasse", &settings, 0, 5).unwrap();
    assert_eq!(r.hits[0].id, "geo/glacier.md", "{:?}", r.hits);
}

#[test]
fn a_long_fragment_scores_as_its_best_window() {
    let fx = Fixture::new();
    let filler: Vec<String> = (0..40).map(|i| format!("filler{i}")).collect();
    let long = format!("# Long\n\n{} moraine crevasse\n", filler.join(" "));
    fx.write("notes/long.md", &long);
    fx.write("notes/short.md", "# Short\n\nmoraine glacier ice snow\n");
    fx.write("notes/other.md", "# Other\n\ncaldera tephra eruption\n");
    let input = fx.path("notes");
    fx.index(&[&input], &Settings::default());
    let dir = fx.index_dir();
    let windows = || BagOfWords {
        window_words: Some(10),
        ..BagOfWords::new("bow")
    };
    let mut build = small_batches();
    build.embed.windows = true;
    let report = build_vectors(&dir, &build, &windows(), &mut |_| {}).unwrap();
    assert_eq!((report.embedded, report.total), (3, 3));
    let finder = open_with(&fx, Arc::new(windows()));
    let mut dense = Settings::default();
    dense.lexical.enabled = false;
    dense.vector.window_weight = 1.0;
    let search = |finder: &Finder, query: &str, settings: &Settings| -> Vec<(String, f64)> {
        let r = finder.search(query, settings, 0, 5).unwrap();
        r.hits.iter().map(|h| (h.id.clone(), h.score)).collect()
    };
    let ids = |finder: &Finder, query: &str| search(finder, query, &dense);
    // Read whole, the long note's two words are lost among forty; its last window holds them.
    let hits = ids(&finder, "moraine crevasse");
    assert_eq!(hits[0].0, "long.md", "{hits:?}");
    assert_eq!(
        hits.len(),
        3,
        "every part maps back to its fragment once: {hits:?}"
    );
    // A query-time weight of 0 scores the first window alone, as without windows.
    let mut first_only = dense.clone();
    first_only.vector.window_weight = 0.0;
    let rank = |hits: &[(String, f64)], id: &str| hits.iter().position(|h| h.0 == id);
    let hits = search(&finder, "moraine crevasse", &first_only);
    let short = rank(&hits, "short.md").expect("the short note is found");
    assert!(
        rank(&hits, "long.md").is_none_or(|long| short < long),
        "{hits:?}"
    );
    let status = finder.status().unwrap().vectors.unwrap();
    assert_eq!(
        (status.done, status.total),
        (3, 3),
        "fragments, not windows"
    );

    // Shortened to one window: the later parts leave the graph, and the index equals a clean
    // build of the same files.
    fx.write("notes/long.md", "# Long\n\nfiller1 filler2 moraine\n");
    fx.index(&[&input], &Settings::default());
    let update = build_vectors(&dir, &build, &windows(), &mut |_| {}).unwrap();
    assert_eq!((update.embedded, update.removed, update.total), (1, 5, 3));
    let clean = Fixture::new();
    clean.write("notes/long.md", "# Long\n\nfiller1 filler2 moraine\n");
    clean.write("notes/short.md", "# Short\n\nmoraine glacier ice snow\n");
    clean.write("notes/other.md", "# Other\n\ncaldera tephra eruption\n");
    clean.index(&[&clean.path("notes")], &Settings::default());
    build_vectors(&clean.index_dir(), &build, &windows(), &mut |_| {}).unwrap();
    let updated = open_with(&fx, Arc::new(windows()));
    let rebuilt = open_with(&clean, Arc::new(windows()));
    for query in ["moraine crevasse", "filler30 filler31", "caldera"] {
        assert_eq!(ids(&updated, query), ids(&rebuilt, query), "{query}");
    }
    // Switched off, the windows go: one vector per fragment again.
    let mut firsts = small_batches();
    firsts.embed.windows = false;
    let off = build_vectors(&dir, &firsts, &windows(), &mut |_| {}).unwrap();
    assert_eq!((off.embedded, off.total), (3, 3));
    build_vectors(&clean.index_dir(), &firsts, &windows(), &mut |_| {}).unwrap();
    let updated = open_with(&fx, Arc::new(windows()));
    let rebuilt = open_with(&clean, Arc::new(windows()));
    for query in ["moraine crevasse", "filler1 filler2", "caldera"] {
        assert_eq!(ids(&updated, query), ids(&rebuilt, query), "{query}");
    }
}

/// An update inserts the changed vectors in key order, so the same change gives the same graph.
#[test]
fn the_same_update_gives_the_same_graph() {
    let graph_after_update = || {
        let fx = Fixture::new();
        let input = corpus(&fx, 40);
        fx.index(&[&input], &Settings::default());
        let dir = fx.index_dir();
        build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();
        let text = std::fs::read_to_string(&input).unwrap();
        let lines: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(i, line)| {
                if i % 4 == 0 {
                    record(&format!("r{i:03}"), "Edited", &format!("changed words {i}"))
                } else {
                    line.to_string()
                }
            })
            .collect();
        std::fs::write(&input, lines.join("\n")).unwrap();
        fx.index(&[&input], &Settings::default());
        let update =
            build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |_| {}).unwrap();
        assert_eq!(update.embedded, 10);
        std::fs::read(dir.join("vectors").join("ann.bin")).unwrap()
    };
    assert!(graph_after_update() == graph_after_update());
}

#[test]
fn every_semantic_failure_degrades_to_lexical() {
    let fx = Fixture::new();
    let input = corpus(&fx, 8);
    fx.index(&[&input], &Settings::default());
    let s = Settings::default();
    let query = "token expired";

    // No vectors built yet.
    let finder = open_with(&fx, Arc::new(BagOfWords::new("bow")));
    let r = finder.search(query, &s, 0, 5).unwrap();
    let (status, reason, _) = vector_report(&r);
    assert_eq!(status, ChannelStatus::Degraded);
    assert!(reason.unwrap().contains("no vectors built"));
    assert!(!r.hits.is_empty(), "lexical answers");

    build_vectors(&fx.index_dir(), &s, &BagOfWords::new("bow"), &mut |_| {}).unwrap();

    // Semantic layer off in the query settings.
    let off = finder
        .settings_with(&["vector.enabled=false".into()])
        .unwrap();
    let finder = open_with(&fx, Arc::new(BagOfWords::new("bow")));
    let (status, reason, _) = vector_report(&finder.search(query, &off, 0, 5).unwrap());
    assert_eq!(
        (status, reason.as_deref()),
        (ChannelStatus::Skipped, Some("vector.enabled = false"))
    );

    // Model missing (as the loader reports it).
    let mut missing = fx.open();
    missing.attach_embedder(Err(
        "model not found at /nowhere: no model.safetensors".into()
    ));
    let r = missing.search(query, &s, 0, 5).unwrap();
    let (status, reason, _) = vector_report(&r);
    assert_eq!(status, ChannelStatus::Degraded);
    assert!(reason.unwrap().contains("model not found"));
    assert!(!r.hits.is_empty());

    // The backend fails at query time.
    let broken = open_with(
        &fx,
        Arc::new(BagOfWords {
            fail_after: Some(0),
            ..BagOfWords::new("bow")
        }),
    );
    let r = broken.search(query, &s, 0, 5).unwrap();
    let (status, reason, _) = vector_report(&r);
    assert_eq!(status, ChannelStatus::Degraded);
    assert!(reason.unwrap().contains("backend went away"));
    assert!(!r.hits.is_empty());

    // The query embedding is slower than the budget.
    let slow = open_with(
        &fx,
        Arc::new(BagOfWords {
            delay: Duration::from_millis(300),
            ..BagOfWords::new("bow")
        }),
    );
    let tight = slow
        .settings_with(&["vector.query_embed_timeout_ms=20".into()])
        .unwrap();
    let r = slow.search(query, &tight, 0, 5).unwrap();
    let (status, reason, _) = vector_report(&r);
    assert_eq!(status, ChannelStatus::Degraded);
    assert!(reason.unwrap().contains("longer than 20 ms"));
    assert!(!r.hits.is_empty());

    // Vectors of another model are not used.
    let other = open_with(&fx, Arc::new(BagOfWords::new("other-model")));
    let (status, reason, _) = vector_report(&other.search(query, &s, 0, 5).unwrap());
    assert_eq!(status, ChannelStatus::Degraded);
    assert!(reason.unwrap().contains("run `finder index`"));
}

/// The `precomputed` backend's stand-in: vectors come with the data, nothing is embedded.
struct GivenVectors;

impl Embed for GivenVectors {
    fn model_id(&self) -> &str {
        "precomputed/3"
    }

    fn dim(&self) -> usize {
        3
    }

    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Err("the precomputed backend embeds no text".into())
    }
}

fn precomputed() -> Settings {
    let mut s = Settings::default();
    s.embed.backend = finder_core::EmbedBackend::Precomputed;
    s.embed.dim = 3;
    s
}

#[test]
fn precomputed_vectors_come_from_records_and_queries() {
    let fx = Fixture::new();
    let line = |id: &str, text: &str, v: [f32; 3]| {
        serde_json::json!({ "id": id, "title": id, "text": text, "vector": v }).to_string()
    };
    let input = fx.write(
        "records.jsonl",
        &[
            line("north", "alpha words", [1.0, 0.0, 0.0]),
            line("east", "beta words", [0.0, 2.0, 0.0]),
            line("up", "gamma words", [0.0, 0.0, 0.5]),
            // No vector: lexical only.
            serde_json::json!({ "id": "bare", "text": "delta words" }).to_string(),
        ]
        .join("\n"),
    );
    let settings = precomputed();
    let report = fx.index(&[&input], &settings);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let built = build_vectors(&fx.index_dir(), &settings, &GivenVectors, &mut |_| {}).unwrap();
    assert_eq!((built.embedded, built.total), (3, 3));

    let finder = open_with(&fx, Arc::new(GivenVectors));
    let mut dense = settings.clone();
    dense.lexical.enabled = false;
    // The nearest given vector wins, whatever its length was (vectors are normalised).
    let r = finder
        .search_with_vector("", Some(&[0.1, 3.0, 0.2]), &dense, 0, 10)
        .unwrap();
    assert_eq!(r.hits[0].id, "east");
    assert_eq!(vector_report(&r).0, ChannelStatus::Ran);

    // Without a query vector the channel degrades and says why; lexical still answers.
    let r = finder.search("alpha", &settings, 0, 10).unwrap();
    assert_eq!(r.hits[0].id, "north");
    // The text and record are read from a document that also stores the given vector.
    assert_eq!(r.hits[0].hints[0].preview, "alpha words");
    assert_eq!(r.hits[0].summary, "alpha words");
    assert_eq!(r.hits[0].envelope.title, "north");
    let (status, reason, _) = vector_report(&r);
    assert_eq!(status, ChannelStatus::Degraded);
    assert!(reason.unwrap().contains("precomputed"));

    // A query vector of the wrong length is named, not a failure.
    let r = finder
        .search_with_vector("alpha", Some(&[1.0, 0.0]), &settings, 0, 10)
        .unwrap();
    let (status, reason, _) = vector_report(&r);
    assert_eq!(status, ChannelStatus::Degraded);
    assert!(reason.unwrap().contains("2 numbers"), "{r:?}");

    // A changed vector is rebuilt; the others are reused.
    std::fs::write(
        &input,
        [
            line("north", "alpha words", [0.0, 1.0, 0.0]),
            line("east", "beta words", [0.0, 2.0, 0.0]),
            line("up", "gamma words", [0.0, 0.0, 0.5]),
        ]
        .join("\n"),
    )
    .unwrap();
    fx.index(&[&input], &settings);
    let again = build_vectors(&fx.index_dir(), &settings, &GivenVectors, &mut |_| {}).unwrap();
    assert_eq!((again.embedded, again.reused), (1, 2));
}

#[test]
fn a_records_vector_goes_with_one_fragment_not_every_one() {
    let fx = Fixture::new();
    // Long enough for several fragments at 200 characters each.
    let long: String = (0..12)
        .map(|i| format!("Paragraph {i} says something about subject{i}.\n\n"))
        .collect();
    let input = fx.write(
        "records.jsonl",
        &[
            serde_json::json!({ "id": "long", "title": "long", "text": long, "vector": [1, 0, 0] })
                .to_string(),
            serde_json::json!({ "id": "short", "text": "one paragraph", "vector": [0, 1, 0] })
                .to_string(),
        ]
        .join("\n"),
    );
    let mut settings = precomputed();
    settings.index.fragment_max_chars = 200;
    let report = fx.index(&[&input], &settings);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.fragments > 3, "the long record splits: {report:?}");
    let built = build_vectors(&fx.index_dir(), &settings, &GivenVectors, &mut |_| {}).unwrap();
    assert_eq!(built.total, 2, "one vector per record: {built:?}");

    // The dense list holds each record once, at its vector's similarity.
    let finder = open_with(&fx, Arc::new(GivenVectors));
    let mut dense = settings.clone();
    dense.lexical.enabled = false;
    let r = finder
        .search_with_vector("", Some(&[1.0, 0.5, 0.0]), &dense, 0, 10)
        .unwrap();
    let ids: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["long", "short"]);
    assert_eq!(vector_report(&r).2, 2, "one vector hit per record");

    // MMR still compares the records by their vectors when a hit's best fragment is not the
    // one holding the vector: here the query word picks one of `long`'s later fragments
    // above its first (second in the dense list).
    let mut mmr = settings.clone();
    mmr.refine.mmr = true;
    let r = finder
        .search_with_vector("subject11", Some(&[0.5, 1.0, 0.0]), &mmr, 0, 10)
        .unwrap();
    assert_eq!(r.hits[0].id, "long", "{r:?}");
    assert_ne!(r.hits[0].explain.parts[0].fragment, 0, "{r:?}");
    let similarity = r.hits[1].explain.refinements.iter().find_map(|x| match x {
        finder_core::Refinement::Mmr(m) => Some(m.similarity),
        _ => None,
    });
    assert_eq!(similarity, Some(finder_core::Similarity::Cosine), "{r:?}");
}

#[test]
fn a_precomputed_vector_of_the_wrong_length_is_a_problem_with_its_source() {
    let fx = Fixture::new();
    let input = fx.write(
        "records.jsonl",
        &[
            serde_json::json!({ "id": "ok", "text": "fine", "vector": [1, 0, 0] }).to_string(),
            serde_json::json!({ "id": "short", "text": "bad", "vector": [1, 0] }).to_string(),
            serde_json::json!({ "id": "junk", "text": "bad", "vector": ["x"] }).to_string(),
        ]
        .join("\n"),
    );
    let report = fx.index(&[&input], &precomputed());
    let problems: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    let named = |what: &[&str]| problems.iter().any(|p| what.iter().all(|w| p.contains(w)));
    assert!(
        named(&["records.jsonl:3", "`vector` must be"]),
        "{problems:?}"
    );
    assert!(named(&["`short`", "embed.dim is 3"]), "{problems:?}");
    assert_eq!(report.sources, 1);
}

#[test]
fn a_build_reports_embedding_then_the_graph_each_up_to_its_total() {
    let fx = Fixture::new();
    let input = corpus(&fx, 20);
    fx.index(&[&input], &Settings::default());
    let mut events = Vec::new();
    let report = build_vectors(
        &fx.index_dir(),
        &small_batches(),
        &BagOfWords::new("bow"),
        &mut |p| events.push(p),
    )
    .unwrap();
    let graph_from = events
        .iter()
        .position(|p| matches!(p, VectorProgress::Graph { .. }))
        .expect("the graph phase reports");
    // every embedding report comes first, counts up and ends at its total
    let embedding: Vec<(usize, usize)> = events[..graph_from]
        .iter()
        .map(|p| match *p {
            VectorProgress::Embedding { done, total } => (done, total),
            other => panic!("{other:?} before the graph phase"),
        })
        .collect();
    assert_eq!(embedding.first(), Some(&(0, 20)));
    assert_eq!(embedding.last(), Some(&(20, 20)));
    assert!(embedding.windows(2).all(|w| w[0].0 <= w[1].0));
    let graph: Vec<(usize, usize)> = events[graph_from..]
        .iter()
        .map(|p| match *p {
            VectorProgress::Graph { done, total } => (done, total),
            other => panic!("{other:?} after the graph phase began"),
        })
        .collect();
    assert_eq!(graph.first(), Some(&(0, report.total)));
    assert_eq!(graph.last(), Some(&(report.total, report.total)));

    // an unchanged rebuild embeds nothing and inserts nothing, and still says so
    let mut again = Vec::new();
    build_vectors(
        &fx.index_dir(),
        &small_batches(),
        &BagOfWords::new("bow"),
        &mut |p| again.push(p),
    )
    .unwrap();
    assert_eq!(
        again.first(),
        Some(&VectorProgress::Embedding { done: 0, total: 0 })
    );
    assert_eq!(
        again.last(),
        Some(&VectorProgress::Graph { done: 0, total: 0 })
    );
}

#[test]
fn an_english_model_sits_out_queries_in_other_scripts_and_says_why() {
    let fx = Fixture::new();
    let input = corpus(&fx, 8);
    fx.index(&[&input], &Settings::default());
    let model = BagOfWords {
        english_only: true,
        ..BagOfWords::new("english-bow")
    };
    build_vectors(&fx.index_dir(), &small_batches(), &model, &mut |_| {}).unwrap();
    let finder = open_with(&fx, Arc::new(model));
    let s = finder.settings().clone();
    let english = finder.search("database backup", &s, 0, 5).unwrap();
    assert_eq!(vector_report(&english).0, ChannelStatus::Ran);
    for (query, script) in [
        ("резервная копия базы", "Cyrillic"),
        ("データベースのバックアップ", "CJK"),
    ] {
        let r = finder.search(query, &s, 0, 5).unwrap();
        let (status, reason, _) = vector_report(&r);
        assert_eq!(status, ChannelStatus::Skipped, "{query}");
        let reason = reason.unwrap();
        assert!(
            reason.contains(script) && reason.contains("multilingual"),
            "{reason}"
        );
    }
    // Mostly English with one foreign word: the model still reads it.
    let mixed = finder.search("database backup копия", &s, 0, 5).unwrap();
    assert_eq!(vector_report(&mixed).0, ChannelStatus::Ran);
}

#[test]
fn status_shows_a_build_under_way_and_where_an_indexing_run_is() {
    let fx = Fixture::new();
    let input = corpus(&fx, 20);
    fx.index(&[&input], &Settings::default());
    let dir = fx.index_dir();
    let build_now = || fx.open().status().unwrap().vectors.and_then(|v| v.build);
    assert!(build_now().is_none());
    // Seen from within the build, as another process would see it.
    let mut seen = Vec::new();
    build_vectors(&dir, &small_batches(), &BagOfWords::new("bow"), &mut |p| {
        let run = build_now().expect("a build under way shows in the status");
        assert!(run.running, "{run:?}");
        assert_eq!(run.pid, std::process::id());
        seen.push((p, run.stage, run.done, run.total));
    })
    .unwrap();
    let embedding = |done| {
        (
            VectorProgress::Embedding { done, total: 20 },
            "embedding".to_string(),
            done as u64,
            Some(20),
        )
    };
    // The first report and the last of each stage are written at once; the others at most
    // once a second.
    assert_eq!(seen.first(), Some(&embedding(0)));
    assert!(seen.contains(&embedding(20)), "{seen:?}");
    assert!(seen.iter().any(|s| s.1 == "graph" && s.2 == s.3.unwrap()));
    // Done: the build's progress is gone, its vectors are published.
    assert!(build_now().is_none());
    assert_eq!(fx.open().status().unwrap().vectors.unwrap().done, 20);

    // An indexing run shows its stage while it lasts; a second run meanwhile is refused.
    let more = fx.write("more.jsonl", &record("m1", "More", "another note"));
    let mut stages = Vec::new();
    finder_index::index_inputs(
        &dir,
        &[input.clone(), more],
        &Settings::default(),
        &mut |p| {
            if let finder_index::Progress::Source { .. } | finder_index::Progress::Committing = p {
                let run = fx
                    .open()
                    .status()
                    .unwrap()
                    .indexing
                    .expect("a run under way shows");
                assert!(run.running);
                stages.push(run.stage);
                let again = finder_index::index_inputs(
                    &dir,
                    std::slice::from_ref(&input),
                    &Settings::default(),
                    &mut |_| {},
                );
                assert!(
                    matches!(again, Err(finder_index::IndexError::Busy(_))),
                    "{again:?}"
                );
            }
        },
    )
    .unwrap();
    assert_eq!(stages.first().map(String::as_str), Some("reading"));
    assert_eq!(stages.last().map(String::as_str), Some("committing"));
    assert!(fx.open().status().unwrap().indexing.is_none());
}
