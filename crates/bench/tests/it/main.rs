//! finder-bench's integration tests: the generator's output is deterministic and a valid
//! dataset, `run` scores Finder on it, and `embed` reproduces Finder's own vectors.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use finder_bench::dataset::{Dataset, Doc};
use finder_bench::gen::{generate, GenOptions};
use finder_bench::run::{run, RunOptions};

const FILES: &[&str] = &[
    "meta.json",
    "corpus.jsonl",
    "corpus.f32",
    "queries.jsonl",
    "queries.f32",
    "qrels.tsv",
];

fn small(docs: usize, queries: usize, seed: u64) -> GenOptions {
    GenOptions {
        queries,
        seed,
        // A smaller vocabulary keeps the debug-build tests fast; the law is the same.
        vocab: 5_000,
        ..GenOptions::new(docs)
    }
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap()
}

#[test]
fn the_generator_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    // Same folder name: it is the dataset's name in meta.json.
    let [a, b, c] = ["a", "b", "c"].map(|p| tmp.path().join(p).join("synthetic"));
    generate(&small(400, 30, 7), &a).unwrap();
    generate(&small(400, 30, 7), &b).unwrap();
    generate(&small(400, 30, 8), &c).unwrap();
    for file in FILES {
        assert!(
            read(&a, file) == read(&b, file),
            "{file} differs for one seed"
        );
    }
    assert!(read(&a, "corpus.jsonl") != read(&c, "corpus.jsonl"));
    assert!(read(&a, "corpus.f32") != read(&c, "corpus.f32"));
}

#[test]
fn the_generator_writes_a_valid_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("synthetic-small");
    let report = generate(&small(500, 40, 1), &dir).unwrap();
    assert_eq!((report.docs, report.queries), (500, 40));

    let dataset = Dataset::open(&dir).unwrap();
    let meta = &dataset.meta;
    assert_eq!(meta.name, "synthetic-small");
    assert_eq!((meta.docs, meta.queries, meta.dim), (500, 40, 384));
    assert_eq!(meta.model, "synthetic");
    assert_eq!(meta.generator.as_ref().unwrap()["seed"], 1);

    let mut docs: Vec<Doc> = Vec::new();
    dataset
        .for_each_doc(|doc, v| {
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{}: norm {norm}", doc.id);
            docs.push(doc);
            Ok(())
        })
        .unwrap();
    let ids: HashSet<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids.len(), 500);
    assert_eq!(docs[0].id, "d0000001");
    assert_eq!(docs[499].id, "d0000500");
    let mut lengths = Vec::new();
    for d in &docs {
        assert!(d.text.chars().count() < 3_000, "{} is too long", d.id);
        let words = d.text.split_whitespace().count();
        lengths.push(words);
        let title_words = d.title.split_whitespace().count();
        assert!((2..=6).contains(&title_words), "{}: {}", d.id, d.title);
        assert!(d.links.len() <= 5);
        for l in &d.links {
            assert!(
                ids.contains(l.as_str()) && *l != d.id,
                "{}: bad link {l}",
                d.id
            );
        }
    }
    lengths.sort_unstable();
    assert!(lengths[0] >= 30 && lengths[lengths.len() - 1] <= 400);
    assert!(lengths[0] < lengths[lengths.len() / 2] && lengths[lengths.len() / 2] < 200);

    let queries = dataset.queries().unwrap();
    assert_eq!(queries.len(), 40);
    let mut targets = HashSet::new();
    for q in &queries {
        let norm: f32 = q.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
        assert!(!q.text.trim().is_empty());
        assert_eq!(q.relevant.len(), 1, "{}", q.id);
        for doc in q.relevant.keys() {
            assert!(
                ids.contains(doc.as_str()),
                "{}: judged {doc} is not a doc",
                q.id
            );
            targets.insert(doc.clone());
        }
    }
    assert_eq!(targets.len(), 40, "targets are distinct");
    let qrels = String::from_utf8(read(&dir, "qrels.tsv")).unwrap();
    assert!(qrels.starts_with("query-id\tcorpus-id\tscore\n"));
    assert_eq!(qrels.lines().count(), 41);
}

#[test]
fn run_scores_finder_on_a_generated_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    generate(&small(300, 20, 3), &data).unwrap();
    let index = tmp.path().join("index");
    let result = run(&RunOptions {
        data: data.clone(),
        index: Some(index.clone()),
        keep: false,
        reuse: false,
        modes: "lexical,dense,hybrid,boost".into(),
        runs: Vec::new(),
        queries_limit: None,
        progress: false,
        set: Vec::new(),
    })
    .unwrap();
    assert_eq!(result["system"], "finder");
    assert_eq!(result["dataset"], "data");
    assert_eq!(result["docs"], 300);
    assert_eq!(result["fragments"], 300, "{}", result["notes"]);
    assert_eq!(result["queries"], 20);
    assert!(result["index_bytes"].as_u64().unwrap() > 0);
    let total = result["index_s"].as_f64().unwrap();
    let parts =
        result["index_lexical_s"].as_f64().unwrap() + result["index_vector_s"].as_f64().unwrap();
    assert!((total - parts).abs() < 1e-9);
    assert!(result["peak_rss_bytes"].is_null());
    for mode in ["lexical", "dense", "hybrid"] {
        let m = &result["modes"][mode];
        let ndcg = m["ndcg10"].as_f64().unwrap();
        assert!(ndcg > 0.0 && ndcg <= 1.0, "{mode} nDCG@10 = {ndcg}");
        for key in ["p50_ms", "p95_ms", "p99_ms", "mean_ms", "recall10"] {
            assert!(m[key].as_f64().is_some(), "{mode}.{key} missing");
        }
        assert!(m["p50_ms"].as_f64() <= m["p99_ms"].as_f64());
        assert!(result["stages"][mode]
            .as_object()
            .is_some_and(|s| !s.is_empty()));
    }
    // The boost's own time is reported where it ran, for every query: the generated
    // documents link to each other, so there is a graph to boost along.
    let boost = &result["modes"]["boost"];
    assert_eq!(boost["boost_queries"], 20, "{boost}");
    let p = |key: &str| boost[key].as_f64().unwrap();
    assert!(0.0 < p("boost_p50_ms") && p("boost_p50_ms") <= p("boost_p95_ms"));
    assert!(p("boost_p95_ms") <= p("boost_p99_ms") && p("boost_p99_ms") <= p("p99_ms"));
    assert_eq!(
        result["stages"]["boost"]["graph.boost"].as_f64(),
        Some(p("boost_p50_ms"))
    );
    for mode in ["lexical", "dense", "hybrid"] {
        assert!(
            result["modes"][mode].get("boost_queries").is_none(),
            "{mode}"
        );
    }
    // Each mode's top-10 lists, one per query in query order: the file the harness compares
    // with the exact neighbours. Recall@10 recomputed from them is the reported one.
    let queries = Dataset::open(&data).unwrap().queries().unwrap();
    for mode in ["lexical", "dense", "hybrid"] {
        let lists = result["lists"][mode].as_array().unwrap();
        assert_eq!(lists.len(), queries.len(), "{mode}");
        let mut recall = Vec::new();
        for (list, q) in lists.iter().zip(&queries) {
            let ids: Vec<&str> = list
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(ids.len(), 10, "{mode}: 300 documents fill every page");
            assert_eq!(
                ids.iter().collect::<HashSet<_>>().len(),
                10,
                "{mode}: {ids:?}"
            );
            if !q.relevant.is_empty() {
                let graded = |id: &str| q.relevant.get(id).is_some_and(|&g| g > 0);
                let relevant = q.relevant.keys().filter(|id| graded(id)).count();
                let found = ids.iter().filter(|id| graded(id)).count();
                recall.push(found as f64 / relevant as f64);
            }
        }
        let mean = recall.iter().sum::<f64>() / recall.len() as f64;
        let reported = result["modes"][mode]["recall10"].as_f64().unwrap();
        assert!(
            (mean - reported).abs() < 1e-9,
            "{mode}: {mean} vs {reported}"
        );
    }
    let lexical = result["modes"]["lexical"]["recall10"].as_f64().unwrap();
    assert!(
        lexical > 0.5,
        "lexical finds the target for most queries: {lexical}"
    );
    let notes = result["notes"].as_array().unwrap();
    assert!(
        !notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("degraded")),
        "{notes:?}"
    );
    // A given index folder is kept, and a second run refuses to overwrite it.
    assert!(index.join("lexical").exists());
    let again = run(&RunOptions {
        data: data.clone(),
        index: Some(index.clone()),
        keep: false,
        reuse: false,
        modes: "lexical".into(),
        runs: Vec::new(),
        queries_limit: Some(2),
        progress: false,
        set: Vec::new(),
    });
    assert!(again.unwrap_err().to_string().contains("not empty"));
    // --reuse queries it without indexing: the same rankings, no index figures.
    let reused = run(&RunOptions {
        data: data.clone(),
        index: Some(index),
        keep: false,
        reuse: true,
        modes: "lexical,dense,hybrid".into(),
        // A named run after the presets, with overrides of its own.
        runs: vec!["narrow:lexical.enabled=false,vector.vec_list_size=10".into()],
        queries_limit: None,
        progress: false,
        set: Vec::new(),
    })
    .unwrap();
    for mode in ["lexical", "dense", "hybrid"] {
        assert_eq!(
            reused["modes"][mode]["ndcg10"], result["modes"][mode]["ndcg10"],
            "{mode}"
        );
    }
    assert!(
        reused["modes"]["narrow"]["ndcg10"].as_f64().is_some(),
        "{reused}"
    );
    assert!(reused["index_s"].is_null() && reused["fragments"].is_null());
    // and refuses a folder with no index in it
    let err = run(&RunOptions {
        data,
        index: Some(tmp.path().join("nothing")),
        keep: false,
        reuse: true,
        modes: "lexical".into(),
        runs: Vec::new(),
        queries_limit: None,
        progress: false,
        set: Vec::new(),
    })
    .unwrap_err();
    assert!(err.to_string().contains("no index there"), "{err}");
}

#[test]
fn a_lexical_run_builds_no_vectors() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    generate(&small(200, 10, 5), &data).unwrap();
    let index = tmp.path().join("index");
    let result = run(&RunOptions {
        data,
        index: Some(index.clone()),
        keep: false,
        reuse: false,
        modes: "lexical".into(),
        runs: Vec::new(),
        queries_limit: None,
        progress: false,
        set: Vec::new(),
    })
    .unwrap();
    assert_eq!(result["fragments"], 200);
    let notes = result["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("vectors not built")),
        "{notes:?}"
    );
    assert!(!index.join("vectors").join("ann.bin").exists());
    let recall = result["modes"]["lexical"]["recall10"].as_f64().unwrap();
    assert!(recall > 0.5, "lexical still ranks: {recall}");
}

#[test]
fn run_refuses_an_unknown_mode_before_indexing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    generate(&small(20, 2, 3), &data).unwrap();
    let err = run(&RunOptions {
        data,
        index: Some(tmp.path().join("index")),
        keep: false,
        reuse: false,
        modes: "lexical,bogus".into(),
        runs: Vec::new(),
        queries_limit: None,
        progress: false,
        set: Vec::new(),
    })
    .unwrap_err();
    assert!(err.to_string().contains("bogus"), "{err}");
    assert!(!tmp.path().join("index").exists());
}

/// A tiny BEIR folder: one long document (two fragments), one untitled, one blank line.
fn tiny_beir(dir: &Path) {
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    let long = "Sentence about cell membranes and lipids. ".repeat(100);
    let corpus = [
        serde_json::json!({"_id": "a", "title": "Lipid rafts", "text": long}),
        serde_json::json!({"_id": 7, "title": "", "text": "Mitochondria make ATP."}),
        serde_json::json!({"_id": "c", "title": "Gene drives", "text": "Mosquito populations."}),
    ];
    let mut text: String = corpus.iter().map(|v| format!("{v}\n")).collect();
    text.insert(0, '\n');
    std::fs::write(dir.join("corpus.jsonl"), text).unwrap();
    std::fs::write(
        dir.join("queries.jsonl"),
        "{\"_id\": \"1\", \"text\": \"energy in cells\"}\n{\"_id\": \"2\", \"text\": \"unjudged\"}\n{\"_id\": \"3\", \"text\": \"malaria vectors\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("qrels/test.tsv"),
        "query-id\tcorpus-id\tscore\n1\t7\t1\n3\tc\t2\n3\ta\t0\n",
    )
    .unwrap();
}

#[test]
fn embed_text_is_what_finder_embeds_for_a_fragment() {
    let tmp = tempfile::tempdir().unwrap();
    tiny_beir(tmp.path());
    let mut sources = Vec::new();
    finder_index::read_input(
        tmp.path(),
        "t",
        &finder_core::IndexSettings::default(),
        &mut |s| sources.push(s.unwrap()),
    )
    .unwrap();
    assert_eq!(sources.len(), 3);
    assert!(sources[0].fragments.len() > 1, "the long document splits");
    let first = finder_bench::embed::embed_text(&sources[0]);
    assert!(first.starts_with("Lipid rafts\nSentence about cell membranes"));
    assert!(first.len() < 3_300);
    assert_eq!(
        finder_bench::embed::embed_text(&sources[1]),
        "Mitochondria make ATP."
    );
}

/// With the MiniLM model installed, `embed` gives vectors with which Finder's dense ranking
/// (precomputed backend) equals its own (MiniLM backend). Skipped without the model.
#[test]
fn embedded_vectors_reproduce_finders_own_dense_ranking() {
    let model_dir = finder_embed::default_model_dir();
    if finder_embed::verify_minilm(&model_dir).is_err() {
        eprintln!("skipped: no MiniLM model in {}", model_dir.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let beir = tmp.path().join("tiny");
    tiny_beir(&beir);
    let out = tmp.path().join("data");
    let options = finder_bench::embed::EmbedOptions {
        beir: beir.clone(),
        out: out.clone(),
        split: "test".into(),
        progress: false,
    };
    let report = finder_bench::embed::embed(&options).unwrap();
    assert_eq!((report.docs, report.queries, report.skipped), (3, 2, false));
    assert!(finder_bench::embed::embed(&options).unwrap().skipped);
    let dataset = Dataset::open(&out).unwrap();
    assert_eq!(dataset.meta.model, "all-MiniLM-L6-v2");
    let queries = dataset.queries().unwrap();
    let ids: Vec<&str> = queries.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["1", "3"]);
    assert_eq!(queries[1].relevant, HashMap::from([("c".to_string(), 2)]));

    // Finder's own: index the BEIR folder with MiniLM and search by text.
    let own = tmp.path().join("own");
    let settings = finder_core::Settings::default();
    finder_index::index_inputs(&own, &[beir], &settings, &mut |_| {}).unwrap();
    let model = finder_embed::Embedder::from_settings(&settings.embed)
        .unwrap()
        .unwrap();
    finder_index::build_vectors(&own, &settings, &model, &mut |_| {}).unwrap();
    let mut finder = finder_index::Finder::open(&own, settings).unwrap();
    let model: std::sync::Arc<dyn finder_core::Embed> = std::sync::Arc::new(model);
    finder.attach_embedder(Ok(Some(model)));
    let dense = finder
        .settings_with(&finder_eval::presets("dense").unwrap()[0].overrides)
        .unwrap();
    // The bench's: the precomputed vectors. Only single-fragment documents can match exactly,
    // so compare the scores of those.
    let result = run(&RunOptions {
        data: out,
        index: Some(tmp.path().join("bench")),
        keep: false,
        reuse: false,
        modes: "dense".into(),
        runs: Vec::new(),
        queries_limit: None,
        progress: false,
        set: Vec::new(),
    })
    .unwrap();
    assert_eq!(result["fragments"].as_u64(), Some(4));
    let bench = finder_index::Finder::open(
        &tmp.path().join("bench"),
        finder_index::load_settings(&tmp.path().join("bench"), None).unwrap(),
    )
    .unwrap();
    let bench_dense = bench
        .settings_with(&finder_eval::presets("dense").unwrap()[0].overrides)
        .unwrap();
    for q in &queries {
        let theirs = finder.search(&q.text, &dense, 0, 10).unwrap();
        let ours = bench
            .search_with_vector(&q.text, Some(&q.vector), &bench_dense, 0, 10)
            .unwrap();
        let scores = |r: &finder_core::SearchResponse| -> Vec<(String, f64)> {
            r.hits
                .iter()
                .filter(|h| h.id != "a")
                .map(|h| (h.id.clone(), h.explain.raw))
                .collect()
        };
        let (t, o) = (scores(&theirs), scores(&ours));
        assert_eq!(
            t.iter().map(|x| &x.0).collect::<Vec<_>>(),
            o.iter().map(|x| &x.0).collect::<Vec<_>>(),
            "query {}",
            q.id
        );
    }
}
