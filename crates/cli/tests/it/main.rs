//! End-to-end tests of the `finder` binary on fixtures written here.

mod bad_inputs;
mod crash;
mod mcp;
mod mcp_clients;
mod postgres;
mod refine;
mod watch;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `finder` without an embedding model (lexical only), so rankings do not depend on
/// whether the model is installed; [`with_model`] tests the semantic layer.
fn finder(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_finder"))
        .args(args)
        .env(
            "FINDER_CACHE_DIR",
            std::env::temp_dir().join("finder-cli-test-cache"),
        )
        .env("FINDER_MODEL_DIR", "/nonexistent/finder-model")
        .output()
        .expect("run finder")
}

fn ok(args: &[&str]) -> String {
    let out = finder(args);
    assert!(
        out.status.success(),
        "finder {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// A folder `dir` holding only the settings of a PostgreSQL store at `url` (embed none).
fn pg_home(dir: &Path, url: &str) -> PathBuf {
    write(
        dir,
        "finder.toml",
        &format!(
            "[embed]\nbackend = \"none\"\n\n[storage]\nbackend = \"postgres\"\nurls = [\"{url}\"]\n"
        ),
    );
    dir.to_path_buf()
}

fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

fn notes(root: &Path) -> PathBuf {
    write(root, "notes/tokens.md", "---\ntitle: Tokens\ntags: [auth]\n---\n# Tokens\n\nA refresh token lasts 30 days.\n\n## Expiry\n\nWhen the refresh token expired, reauthenticate the client.\n");
    write(
        root,
        "notes/backups.md",
        "# Backups\n\nNightly snapshots of the database.\n",
    );
    write(
        root,
        "notes/misc/cache.txt",
        "Cache warmup happens after each deploy.\n",
    );
    root.join("notes")
}

#[test]
fn index_search_status_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let index = tmp.path().join("idx");
    let (input, index) = (input.to_str().unwrap(), index.to_str().unwrap());

    let report: serde_json::Value =
        serde_json::from_str(&ok(&["index", input, "--index", index, "--json"])).unwrap();
    assert_eq!(report["added"], 3);
    let again: serde_json::Value =
        serde_json::from_str(&ok(&["index", input, "--index", index, "--json"])).unwrap();
    assert_eq!(
        (again["added"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(3))
    );

    let human = ok(&["search", "expired token", "--index", index]);
    assert!(human.contains("1. Tokens  [1.000]  tokens.md"), "{human}");
    assert!(
        human.contains("L9-11: ## Expiry When the refresh token expired"),
        "{human}"
    );

    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "search",
        "expired token",
        "--index",
        index,
        "--json",
        "--limit",
        "1",
    ]))
    .unwrap();
    let hit = &json["hits"][0];
    assert_eq!(hit["id"], "tokens.md");
    assert_eq!(hit["envelope"]["tags"][0], "auth");
    assert_eq!(hit["hints"][0]["extent"]["line_start"], 9);
    assert_eq!(json["diagnostics"]["channels"][0]["channel"], "lexical");
    assert!(hit["explain"]["parts"][0]["lists"][0]["rank"].as_u64() == Some(1));

    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", "--index", index, "--json"])).unwrap();
    assert_eq!(status["sources"], 3);
    assert_eq!(status["last_run"]["unchanged"], 3);
    assert_eq!(status["analysis"], finder_index::ANALYSIS);
    // The human form names the analysis only when the index's is older than the binary's.
    let human = ok(&["status", "--index", index]);
    assert!(
        human.contains("sources:   3") && !human.contains("analysis:"),
        "{human}"
    );
}

#[test]
fn bad_settings_are_refused_with_their_range() {
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let index = tmp.path().join("idx");
    let (input, index) = (input.to_str().unwrap(), index.to_str().unwrap());
    ok(&["index", input, "--index", index]);
    let out = finder(&[
        "search",
        "token",
        "--index",
        index,
        "--set",
        "finder.rrf_k=5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`finder.rrf_k`: value 5 is out of range; allowed: 10–200"),
        "{err}"
    );
    let out = finder(&["search", "token", "--index", index, "--set", "lexical.kl=1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean `lexical.k1`"));
    // A finder.toml in the index folder is read and validated too.
    write(Path::new(index), "finder.toml", "[lexical]\nb = 2.0\n");
    let out = finder(&["search", "token", "--index", index]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("finder.toml") && err.contains("allowed: 0–1"),
        "{err}"
    );
}

/// A tiny BEIR dataset: three documents, two judged queries.
pub(crate) fn beir(root: &Path) -> PathBuf {
    let dir = root.join("tiny");
    let corpus = [
        r#"{"_id":"d1","title":"Vitamin D","text":"Vitamin D deficiency is linked to bone loss."}"#,
        r#"{"_id":"d2","title":"Sleep","text":"Short sleep raises the risk of obesity in children."}"#,
        r#"{"_id":"d3","title":"Coffee","text":"Coffee intake and heart rhythm in adults."}"#,
    ];
    write(&dir, "corpus.jsonl", &corpus.join("\n"));
    write(&dir, "queries.jsonl", "{\"_id\":\"q1\",\"text\":\"vitamin D and bone\"}\n{\"_id\":\"q2\",\"text\":\"sleep duration obesity\"}\n");
    write(
        &dir,
        "qrels/test.tsv",
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n",
    );
    dir
}

#[test]
fn eval_reports_metrics_per_run_as_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = beir(tmp.path());
    let index = tmp.path().join("idx");
    let trec = tmp.path().join("runs");
    let out = ok(&[
        "eval",
        dataset.to_str().unwrap(),
        "--index",
        index.to_str().unwrap(),
        "--runs",
        "lexical",
        "--run",
        "flat:lexical.b=0",
        "--json",
        "--trec",
        trec.to_str().unwrap(),
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["dataset"], "tiny");
    assert_eq!(report["queries"], 2);
    for run in ["lexical", "flat"] {
        let r = &report["runs"][run];
        assert_eq!(r["metrics"]["ndcg@10"], 1.0, "{r}");
        assert_eq!(r["metrics"]["recall@100"], 1.0);
        assert!(r["latency_ms"]["p50"].as_f64().unwrap() >= 0.0);
        assert!(r["stages_ms"]["lexical"]["p95"].is_number());
    }
    assert_eq!(report["runs"]["flat"]["settings"]["lexical"]["b"], 0.0);
    // Each run's rankings in TREC run format: `query Q0 doc rank score run`, best first.
    for run in ["lexical", "flat"] {
        let lines = std::fs::read_to_string(trec.join(format!("{run}.trec"))).unwrap();
        let first: Vec<Vec<&str>> = lines
            .lines()
            .map(|l| l.split(' ').collect())
            .filter(|f: &Vec<&str>| f[3] == "1")
            .collect();
        assert_eq!(first.len(), 2, "{lines}");
        for (fields, (query, doc)) in first.iter().zip([("q1", "d1"), ("q2", "d2")]) {
            assert_eq!(
                (fields[0], fields[1], fields[2], fields[5]),
                (query, "Q0", doc, run),
                "{lines}"
            );
            assert!(fields[4].parse::<f64>().unwrap() > 0.0);
        }
    }
    // A threshold that cannot be met fails the command and says which run missed.
    let out = finder(&[
        "eval",
        dataset.to_str().unwrap(),
        "--index",
        index.to_str().unwrap(),
        "--min",
        "ndcg@10=1.5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lexical ndcg@10 = 1.0000 < 1.5"));
    // A minimum can be another run's value of the metric, give or take a margin.
    let relative = |min: &str| {
        finder(&[
            "eval",
            dataset.to_str().unwrap(),
            "--index",
            index.to_str().unwrap(),
            "--runs",
            "lexical",
            "--run",
            "flat:lexical.b=0",
            "--min",
            min,
        ])
    };
    assert_eq!(
        relative("flat.ndcg@10=lexical-0.003").status.code(),
        Some(0)
    );
    let out = relative("flat.ndcg@10=lexical+0.25");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("flat ndcg@10 = 1.0000 < 1.2500 (lexical+0.25)"),
        "{stderr}"
    );
    let out = relative("flat.ndcg@10=dense-0.003");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run named `dense`"));
}

#[test]
fn eval_builds_long_queries_from_a_vaults_links() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    let topics = [
        ("glacier", "moraine crevasse icefall serac"),
        ("volcano", "magma caldera fumarole tephra"),
        ("reef", "coral polyp atoll lagoon"),
        ("desert", "dune erg mesa wadi"),
        ("forest", "canopy understory lichen fern"),
        ("delta", "estuary silt distributary marsh"),
        ("tundra", "permafrost sedge lemming muskeg"),
        ("canyon", "gorge slickrock arroyo butte"),
    ];
    for (topic, words) in topics {
        write(
            &vault,
            &format!("{topic}-field-notes.md"),
            &format!(
                "# {topic} field notes\n\nWe walked past {words} and wrote about {words} again; \
             the guide is in [[{topic}-guide]].\n"
            ),
        );
        write(
            &vault,
            &format!("{topic}-guide.md"),
            &format!("# Guide\n\nA guide to {words}, with maps.\n"),
        );
    }
    let report = |runs: &str| -> serde_json::Value {
        let index = tmp.path().join("idx");
        serde_json::from_str(&ok(&[
            "eval",
            vault.to_str().unwrap(),
            "--queries",
            "links",
            "--index",
            index.to_str().unwrap(),
            "--runs",
            runs,
            "--json",
        ]))
        .unwrap()
    };
    let r = report("lexical,recommend");
    // Half the linking notes (by a hash of their id) are queries; each finds its guide.
    let queries = r["queries"].as_u64().unwrap();
    assert!((1..8).contains(&queries), "{r}");
    assert_eq!(r["runs"]["lexical"]["metrics"]["ndcg@10"], 1.0, "{r}");
    assert!(
        r["runs"]["recommend"]["metrics"]["recall@100"]
            .as_f64()
            .unwrap()
            > 0.0
    );

    // `recommend` starts from a query's own source, which a BEIR query is not.
    let out = finder(&[
        "eval",
        beir(tmp.path()).to_str().unwrap(),
        "--runs",
        "recommend",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--queries links"), "{err}");

    // The shared SilverBullet vault, when it is beside the repository.
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/silverbullet_docs_vault/notes");
    if shared.is_dir() {
        let index = tmp.path().join("sb");
        let r: serde_json::Value = serde_json::from_str(&ok(&[
            "eval",
            shared.to_str().unwrap(),
            "--queries",
            "links",
            "--index",
            index.to_str().unwrap(),
            "--json",
        ]))
        .unwrap();
        assert!(r["queries"].as_u64().unwrap() > 50, "{r}");
        let ndcg = r["runs"]["lexical"]["metrics"]["ndcg@10"].as_f64().unwrap();
        assert!(ndcg > 0.2, "a note's own words find what it links to: {r}");
    }
}

#[test]
fn eval_names_missing_layers_and_unknown_presets() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = beir(tmp.path());
    let out = finder(&["eval", dataset.to_str().unwrap(), "--runs", "dense"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs the semantic layer") && err.contains("finder model install"),
        "{err}"
    );
    // A hybrid run without the model answers lexically and says so.
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "eval",
        dataset.to_str().unwrap(),
        "--runs",
        "hybrid",
        "--json",
    ]))
    .unwrap();
    let notes = json["runs"]["hybrid"]["notes"].to_string();
    assert!(
        notes.contains("vector degraded") && notes.contains("model not found"),
        "{notes}"
    );
    let out = finder(&["eval", dataset.to_str().unwrap(), "--runs", "lexcal"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown preset `lexcal`"));
}

#[test]
fn precomputed_vectors_from_records_and_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"id":"x","title":"Ex","text":"first note","vector":[1,0,0]}"#,
        r#"{"id":"y","title":"Why","text":"second note","vector":[0,1,0]}"#,
    ];
    let input = write(tmp.path(), "r.jsonl", &lines.join("\n"));
    let config = write(
        tmp.path(),
        "p.toml",
        "[embed]\nbackend = \"precomputed\"\ndim = 3\n",
    );
    let vector = write(tmp.path(), "q.json", "[0.1, 0.9, 0]");
    let index = tmp.path().join("idx");
    let (input, index, config) = (
        input.to_str().unwrap(),
        index.to_str().unwrap(),
        config.to_str().unwrap(),
    );
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "index", input, "--index", index, "--config", config, "--json",
    ]))
    .unwrap();
    assert_eq!(report["vectors"]["embedded"], 2, "{report}");
    let search = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "search", "note", "--index", index, "--config", config, "--json",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&args)).unwrap()
    };
    let at = format!("@{}", vector.display());
    let json = search(&["--vector", &at, "--set", "lexical.enabled=false"]);
    assert_eq!(json["hits"][0]["id"], "y", "{json}");
    let json = search(&["--vector", "[1, 0, 0]", "--set", "lexical.enabled=false"]);
    assert_eq!(json["hits"][0]["id"], "x", "{json}");
    // No vector given: lexical answers, the vector channel says why it did not run.
    let json = search(&[]);
    assert_eq!(
        json["diagnostics"]["channels"][2]["status"], "degraded",
        "{json}"
    );
    let out = finder(&["search", "note", "--index", index, "--vector", "[1, \"a\"]"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--vector: expected a JSON array"));
}

#[test]
fn recommend_follows_links_and_explains_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "v/a.md", "# Alpha\n\nSee [[b]] for the rest.\n");
    write(tmp.path(), "v/b.md", "# Beta\n\nNothing in common.\n");
    write(
        tmp.path(),
        "v/c.md",
        "# Gamma\n\nUnrelated words entirely.\n",
    );
    let index = tmp.path().join("idx");
    let (input, index) = (
        tmp.path().join("v").to_str().unwrap().to_string(),
        index.to_str().unwrap().to_string(),
    );
    ok(&["index", &input, "--index", &index]);
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["recommend", "a.md", "--index", &index, "--json"])).unwrap();
    assert_eq!(json["hits"][0]["id"], "b.md", "{json}");
    assert_eq!(
        json["hits"][0]["explain"]["parts"][0]["via"],
        "via \"Alpha\" (links_to)"
    );
    assert!(json["hits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["id"] != "a.md"));
    let text = ok(&["recommend", "a.md", "--index", &index, "--explain"]);
    assert!(
        text.contains("+ boost") && text.contains("links_to"),
        "{text}"
    );
    let out = finder(&["recommend", "zzz.md", "--index", &index]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no source `zzz.md`"));
}

mod with_model {
    //! The semantic layer through the binary, with the real model (installed by
    //! `finder model install`; CI installs it before the tests).
    use super::*;

    fn model_installed() -> bool {
        let out = Command::new(env!("CARGO_BIN_EXE_finder"))
            .args(["model", "install", "--help"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let dir = std::env::var_os("FINDER_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap())
                    .join(".local/share/finder/models/all-minilm-l6-v2")
            });
        let present = dir.join("model.safetensors").is_file();
        if !present && std::env::var_os("CI").is_some() {
            panic!("CI must install the model before the tests (scripts/test.sh does)");
        }
        present
    }

    fn run(args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_finder"))
            .args(args)
            .output()
            .expect("run finder");
        assert!(
            out.status.success(),
            "finder {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn vectors_are_built_after_the_lexical_commit_and_find_paraphrases() {
        if !model_installed() {
            eprintln!("skipping: embedding model not installed");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let input = notes(tmp.path());
        let index = tmp.path().join("idx");
        let (input, index) = (input.to_str().unwrap(), index.to_str().unwrap());
        let report: serde_json::Value =
            serde_json::from_str(&run(&["index", input, "--index", index, "--json"])).unwrap();
        assert_eq!(report["vectors"]["embedded"], 4, "{report}");
        let again: serde_json::Value =
            serde_json::from_str(&run(&["index", input, "--index", index, "--json"])).unwrap();
        assert_eq!(
            (
                again["vectors"]["embedded"].as_u64(),
                again["vectors"]["reused"].as_u64()
            ),
            (Some(0), Some(4))
        );
        let status: serde_json::Value =
            serde_json::from_str(&run(&["status", "--index", index, "--json"])).unwrap();
        assert_eq!(
            (
                status["vectors"]["done"].as_u64(),
                status["vectors"]["total"].as_u64()
            ),
            (Some(4), Some(4))
        );

        // No word in common with the note, only meaning.
        let json: serde_json::Value = serde_json::from_str(&run(&[
            "search",
            "nightly copies of our data",
            "--index",
            index,
            "--json",
            "--set",
            "lexical.enabled=false",
        ]))
        .unwrap();
        assert_eq!(json["hits"][0]["id"], "backups.md", "{json}");
        let vector = &json["diagnostics"]["channels"][2];
        assert_eq!(
            (vector["channel"].as_str(), vector["status"].as_str()),
            (Some("vector"), Some("ran"))
        );
    }

    #[test]
    fn distill_makes_a_static_model_that_indexes_and_searches() {
        if !model_installed() {
            eprintln!("skipping: embedding model not installed");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("static");
        let out = run(&[
            "model",
            "distill",
            "--to",
            model.to_str().unwrap(),
            "--dims",
            "64",
        ]);
        assert!(out.contains("30522 tokens × 64 dims"), "{out}");
        for file in [
            "model.safetensors",
            "tokenizer.json",
            "config.json",
            "NOTICE",
        ] {
            assert!(model.join(file).is_file(), "{file}");
        }
        let config = write(
            tmp.path(),
            "static.toml",
            &format!(
                "[embed]\nbackend = \"static\"\nmodel_dir = {:?}\n",
                model.to_str().unwrap()
            ),
        );
        let input = notes(tmp.path());
        let index = tmp.path().join("idx");
        let (input, index, config) = (
            input.to_str().unwrap(),
            index.to_str().unwrap(),
            config.to_str().unwrap(),
        );
        let report: serde_json::Value = serde_json::from_str(&run(&[
            "index", input, "--index", index, "--config", config, "--json",
        ]))
        .unwrap();
        assert_eq!(report["vectors"]["embedded"], 4, "{report}");
        assert!(report["vectors"]["model_id"]
            .as_str()
            .unwrap()
            .starts_with("static/"));
        let json: serde_json::Value = serde_json::from_str(&run(&[
            "search",
            "backup restore",
            "--index",
            index,
            "--config",
            config,
            "--json",
            "--set",
            "lexical.enabled=false",
        ]))
        .unwrap();
        // The nearest fragment (vector rank 1) is the backups note.
        let first = json["hits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["explain"]["parts"][0]["lists"][0]["rank"] == 1)
            .expect("a hit holds vector rank 1");
        assert_eq!(first["id"], "backups.md", "{json}");
        assert_eq!(
            json["diagnostics"]["channels"][2]["status"], "ran",
            "{json}"
        );
    }
}

#[test]
fn get_prints_a_sources_lines_where_hints_point() {
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let index = tmp.path().join("idx");
    let (input, index) = (input.to_str().unwrap(), index.to_str().unwrap());
    ok(&["index", input, "--index", index]);
    let file = std::fs::read_to_string(Path::new(input).join("tokens.md")).unwrap();
    let numbered = |from: usize, to: usize| -> String {
        file.lines()
            .enumerate()
            .filter(|(i, _)| (from - 1..to).contains(i))
            .map(|(i, l)| format!("{:>5}  {l}\n", i + 1))
            .collect()
    };
    assert_eq!(
        ok(&["get", "tokens.md:9-11", "--index", index]),
        numbered(9, 11)
    );
    assert_eq!(
        ok(&["get", "tokens.md", "--lines", "7", "--index", index]),
        numbered(7, 7)
    );
    // Whole: every line a passage holds, numbered as in the file; the front matter and the
    // blank line between the two sections belong to no passage.
    assert_eq!(
        ok(&["get", "tokens.md", "--index", index]),
        numbered(5, 7) + &numbered(9, 11)
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["get", "tokens.md", "--index", index, "--json"])).unwrap();
    assert_eq!(
        (json["line_start"].as_u64(), json["last_line"].as_u64()),
        (Some(5), Some(11))
    );

    let missing = finder(&["get", "nowhere.md", "--index", index]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no source `nowhere.md`"));
    let reversed = finder(&["get", "tokens.md:9-3", "--index", index]);
    assert!(
        String::from_utf8_lossy(&reversed.stderr).contains("no source"),
        "a bad range reads as part of the id"
    );
    let bad = finder(&["get", "tokens.md", "--lines", "9-3", "--index", index]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("ends before it starts"));
}

#[test]
fn tags_dates_and_paths_narrow_a_search() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(
        root,
        "v/journal/2024-05.md",
        "---\ndate: 2024-05-10\ntags: [work]\n---\n# May\n\nThe release train left on time.\n",
    );
    write(
        root,
        "v/journal/2024-06.md",
        "---\ndate: 2024-06-02\ntags: [home]\n---\n# June\n\nThe release of the garden shed.\n",
    );
    write(
        root,
        "v/notes/release.md",
        "---\ntags: [work]\n---\n# Release checklist\n\nEvery release needs a changelog.\n",
    );
    let index = root.join("idx");
    let (input, index) = (root.join("v"), index.to_str().unwrap());
    ok(&["index", input.to_str().unwrap(), "--index", index]);
    let ids = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "search",
            "release",
            "--index",
            index,
            "--json",
            "--prefilter",
        ];
        args.extend_from_slice(extra);
        let out: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
        let mut ids: Vec<String> = out["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&[]).len(), 3);
    assert_eq!(
        ids(&["--tag", "WORK"]),
        ["journal/2024-05.md", "notes/release.md"]
    );
    assert_eq!(
        ids(&["--path", "journal/"]),
        ["journal/2024-05.md", "journal/2024-06.md"]
    );
    assert_eq!(ids(&["--from", "2024-05-15"]), ["journal/2024-06.md"]);
    assert_eq!(ids(&["--to", "2024-05"]), ["journal/2024-05.md"]);
    assert_eq!(
        ids(&["--from", "2024", "--to", "2024", "--tag", "home"]),
        ["journal/2024-06.md"]
    );
    let bad = finder(&["search", "release", "--index", index, "--from", "last week"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--from last week: not a date"));
}
