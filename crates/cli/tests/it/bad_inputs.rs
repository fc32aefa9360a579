//! Bad inputs through the real binary: broken settings files, bad `--set` values and query
//! flags, inputs that cannot be read, and an index run over a folder of malformed files.
//! Every refusal exits non-zero and names the place (file, key or flag) on stderr; no run
//! ever panics.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{finder, ok, write};

/// Runs and counts `finder` invocations; no output may hold a Rust panic.
#[derive(Default)]
struct Runs {
    runs: usize,
    refused: usize,
    warnings: usize,
}

impl Runs {
    fn run(&mut self, args: &[&str]) -> Output {
        self.runs += 1;
        let out = finder(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("panicked at"),
            "finder {args:?} panicked: {err}"
        );
        out
    }

    /// A run that must fail with `code`, its stderr naming every one of `names`.
    fn refused(&mut self, args: &[&str], code: i32, names: &[&str]) -> String {
        let out = self.run(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "finder {args:?}: {err}");
        for name in names {
            assert!(
                err.contains(name),
                "finder {args:?}: stderr lacks {name:?}: {err}"
            );
        }
        self.refused += 1;
        err
    }
}

/// `finder` with a deadline, for inputs that could block (a FIFO): killed and reported as a
/// hang when it runs past `limit`.
fn finder_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_finder"))
        .args(args)
        .env("FINDER_MODEL_DIR", "/nonexistent/finder-model")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn finder");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("finder {args:?} still running after {limit:?}: it blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn mkfifo(path: &Path) -> bool {
    Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn bad_inputs_through_the_binary_name_their_place_and_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let mut runs = Runs::default();

    // A folder of bad files beside good ones, and a record file with bad lines.
    write(root, "notes/good.md", "# Good\n\nThe zebra runbook.\n");
    std::fs::write(root.join("notes/utf8.md"), b"line one\nbad \xff byte\n").unwrap();
    std::fs::write(
        root.join("notes/image.md"),
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
    )
    .unwrap();
    write(
        root,
        "notes/yaml.md",
        "---\ntitle: [unclosed\n---\nzebra body\n",
    );
    write(root, "notes/open.md", "---\ntitle: never closed\nzebra\n");
    write(
        root,
        "notes/deep.md",
        &format!("---\nx: {}\n---\nzebra\n", "[".repeat(5_000)),
    );
    write(
        root,
        "notes/rtl-\u{202e}dm.md",
        "zebra \u{200b}\u{202e} text\n",
    );
    write(
        root,
        "notes/huge.md",
        &format!("zebra {}", "[".repeat(2 << 20)),
    );
    write(root, "outside/secret.md", "the quokka secret\n");
    let mut expected_warnings = vec![
        "utf8.md:2: not valid UTF-8",
        "image.md: binary file",
        "yaml.md:3: front matter is not valid YAML",
        "open.md:1: front matter has no closing",
        "deep.md:2: front matter is not valid YAML",
    ];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(root.join("outside"), root.join("notes/out")).unwrap();
        std::os::unix::fs::symlink(root.join("outside/secret.md"), root.join("notes/secret.md"))
            .unwrap();
        expected_warnings.push("out: symlink not followed");
        expected_warnings.push("secret.md: symlink not followed");
        if mkfifo(&root.join("notes/pipe.md")) {
            expected_warnings.push("pipe.md: not a regular file (a FIFO)");
        }
    }
    let records = write(
        root,
        "records.jsonl",
        &[
            r#"{"id": "ok", "text": "zebra record"}"#,
            r#"{"id": "ok", "text": "again"}"#,
            r#"{"id": 1, "text": 5}"#,
            r#"{"text": "no id"}"#,
            "not json",
            &format!(
                r#"{{"id": "deep", "text": "x", "extras": {}}}"#,
                "[".repeat(1_000)
            ),
            r#"{"id": "rel", "text": "x", "relations": [{"to": "ok", "kind": 7}]}"#,
        ]
        .join("\n"),
    );
    expected_warnings.extend([
        "records.jsonl:2: duplicate id ok (first at line 1)",
        "records.jsonl:3: `text` must be a string",
        "records.jsonl:4: missing `id`",
        "records.jsonl:5: not valid JSON",
        "records.jsonl:6: not valid JSON",
        "records.jsonl:7: `relations`, item 1: `kind` must be a non-empty string",
    ]);
    let index = root.join("idx");
    let (notes, records, index) = (
        root.join("notes").display().to_string(),
        records.display().to_string(),
        index.display().to_string(),
    );
    let out = runs.run(&["index", &notes, &records, "--index", &index]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for w in &expected_warnings {
        assert!(err.contains(w), "no warning {w:?} in {err}");
    }
    runs.warnings += err.lines().filter(|l| l.starts_with("warning: ")).count();
    assert_eq!(
        err.lines().filter(|l| l.starts_with("warning: ")).count(),
        expected_warnings.len(),
        "{err}"
    );
    let found = ok(&[
        "search", "zebra", "--index", &index, "--json", "--limit", "50",
    ]);
    let hits: serde_json::Value = serde_json::from_str(&found).unwrap();
    let ids: Vec<&str> = hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    for id in ["good.md", "yaml.md", "open.md", "deep.md", "huge.md", "ok"] {
        assert!(ids.contains(&id), "{id} not found: {ids:?}");
    }
    let secret = ok(&["search", "quokka", "--index", &index, "--json"]);
    assert!(
        secret.contains("\"hits\": []"),
        "a symlink was followed: {secret}"
    );
    runs.runs += 2;

    // Inputs that cannot be read at all.
    runs.refused(
        &[
            "index",
            &root.join("missing").display().to_string(),
            "--index",
            &index,
        ],
        1,
        &["missing"],
    );
    write(root, "data.csv", "a,b\n");
    runs.refused(
        &[
            "index",
            &root.join("data.csv").display().to_string(),
            "--index",
            &index,
        ],
        1,
        &["data.csv", "not an input"],
    );
    runs.refused(
        &[
            "index",
            &root.join("notes/good.md").display().to_string(),
            "--index",
            &index,
        ],
        1,
        &["good.md", "pass its folder"],
    );
    #[cfg(unix)]
    if mkfifo(&root.join("pipe.jsonl")) {
        let fifo = root.join("pipe.jsonl").display().to_string();
        let out = finder_within(
            &["index", &fifo, "--index", &index],
            Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("pipe.jsonl") && err.contains("not a regular file"),
            "{err}"
        );
        assert!(!err.contains("panicked at"), "{err}");
        runs.runs += 1;
        runs.refused += 1;
    }

    // Broken settings files, in the index folder and given with --config.
    let idx = Path::new(&index);
    let configs: &[(&str, &[&str])] = &[
        (
            "[lexical]\nk1 = \"high\"\n",
            &["finder.toml", "`lexical.k1`", "expected a number"],
        ),
        (
            "[lexical]\nb = 7\n",
            &["finder.toml", "`lexical.b`", "allowed: 0–1"],
        ),
        (
            "[lexical]\nkone = 1\n",
            &["finder.toml", "`lexical.kone`", "unknown setting"],
        ),
        (
            "[lexicl]\nk1 = 1\n",
            &["finder.toml", "`lexicl.k1`", "unknown setting"],
        ),
        ("[lexical]\nk1 = = 1\n", &["finder.toml:2"]),
        (
            "[finder]\nrrf_k = 60\nrrf_k = 61\n",
            &["finder.toml:3", "duplicate key"],
        ),
        (
            "lexical = 3\n",
            &["finder.toml", "`lexical`", "a [lexical] table"],
        ),
        (
            "[refine]\nsort = \"sideways\"\n",
            &["finder.toml", "`refine.sort`", "`score`"],
        ),
        (
            "[finder]\nrollup_weights = []\n",
            &["finder.toml", "`finder.rollup_weights`", "1 to 10 weights"],
        ),
        (
            "[index]\nlanguage = \"klingon\"\n",
            &["finder.toml", "`index.language`", "english"],
        ),
    ];
    for (text, names) in configs {
        write(idx, "finder.toml", text);
        runs.refused(&["search", "zebra", "--index", &index], 1, names);
        // The same file given to `finder index --config` is named by its own path.
        let cfg = write(root, "bad.toml", text).display().to_string();
        let names: Vec<String> = names
            .iter()
            .map(|n| n.replace("finder.toml", "bad.toml"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        runs.refused(
            &["index", &notes, "--index", &index, "--config", &cfg],
            1,
            &names,
        );
    }
    std::fs::write(idx.join("finder.toml"), b"[lexical]\nk1 = \"\xe9\"\n").unwrap();
    runs.refused(
        &["search", "zebra", "--index", &index],
        1,
        &["finder.toml", "UTF-8"],
    );
    std::fs::remove_file(idx.join("finder.toml")).unwrap();
    runs.refused(
        &[
            "search",
            "zebra",
            "--index",
            &index,
            "--config",
            "/nonexistent/x.toml",
        ],
        1,
        &["/nonexistent/x.toml"],
    );

    // Bad --set values.
    let sets: &[(&str, &[&str])] = &[
        (
            "lexical.k1=fast",
            &["--set lexical.k1=fast", "`lexical.k1`", "expected a number"],
        ),
        ("lexical.k1=-1", &["`lexical.k1`", "allowed: 0–3"]),
        ("lexical.k1=nan", &["`lexical.k1`", "out of range"]),
        (
            "finder.fts_list_size=50",
            &[
                "`finder.fts_list_size`",
                "did you mean `lexical.fts_list_size`",
            ],
        ),
        ("lexical.k1", &["--set lexical.k1", "key=value"]),
        ("=3", &["unknown setting"]),
        ("finder.fusion=max", &["`finder.fusion`", "`rrf` or `cc`"]),
        (
            "vector.vec_list_size=99999999999999999999",
            &["`vector.vec_list_size`"],
        ),
        (
            "index.fragment_max_chars=500",
            &["index.fragment_max_chars", "cannot change at query time"],
        ),
        (
            "refine.plugins=[\"file:///etc/passwd\"]",
            &["`refine.plugins`", "http(s) URLs"],
        ),
    ];
    for (set, names) in sets {
        runs.refused(
            &["search", "zebra", "--index", &index, "--set", set],
            1,
            names,
        );
    }

    // Bad query flags: clap refuses malformed numbers (exit 2); the rest are named.
    runs.refused(
        &["search", "zebra", "--index", &index, "--limit", "-1"],
        2,
        &["'-1'"],
    );
    runs.refused(
        &["search", "zebra", "--index", &index, "--limit", "ten"],
        2,
        &["--limit"],
    );
    runs.refused(
        &[
            "search",
            "zebra",
            "--index",
            &index,
            "--offset",
            "99999999999999999999999",
        ],
        2,
        &["--offset"],
    );
    runs.refused(
        &["search", "zebra", "--index", &index, "--filter", "noequals"],
        1,
        &["--filter noequals", "KEY=VALUE"],
    );
    runs.refused(
        &[
            "search",
            "zebra",
            "--index",
            &index,
            "--vector",
            "[1, \"a\"]",
        ],
        1,
        &["--vector", "JSON array"],
    );
    runs.refused(
        &["search", "zebra", "--index", &index, "--vector", "[]"],
        1,
        &["--vector", "non-empty"],
    );
    runs.refused(
        &[
            "search",
            "zebra",
            "--index",
            &index,
            "--vector",
            "@/nonexistent/v.json",
        ],
        1,
        &["/nonexistent/v.json"],
    );
    runs.refused(
        &["search", "zebra", "--index", &index, "--sort", "sideways"],
        1,
        &["`refine.sort`"],
    );
    runs.refused(
        &["recommend", "no such id", "--index", &index],
        1,
        &["no such id"],
    );
    runs.refused(
        &[
            "search",
            "zebra",
            "--index",
            &root.join("nowhere").display().to_string(),
        ],
        1,
        &["nowhere"],
    );
    runs.refused(&["status", "--index", &notes], 1, &["notes"]);

    // Queries and flags that are odd but valid answer.
    let long = "zebra ".repeat(15_000);
    let odd: &[&[&str]] = &[
        &["search", "", "--index", &index],
        &["search", "\u{202e}\u{200b}", "--index", &index],
        &["search", "((( AND OR NOT title:x *", "--index", &index],
        &["search", &long, "--index", &index],
        &[
            "search",
            "zebra",
            "--index",
            &index,
            "--offset",
            "18446744073709551615",
        ],
        &["search", "zebra", "--index", &index, "--limit", "0"],
        &[
            "search",
            "zebra",
            "--index",
            &index,
            "--filter",
            "=",
            "--filter",
            "a==b",
            "--prefilter",
        ],
        &[
            "search", "zebra", "--index", &index, "--scope", "", "--scope", "\u{202e}",
        ],
        &[
            "search", "zebra", "--index", &index, "--user", "nobody", "--sort", "date",
        ],
        &[
            "search",
            "zebra",
            "--index",
            &index,
            "--vector",
            "[1e30, -1e30]",
        ],
    ];
    for args in odd {
        let out = runs.run(args);
        assert!(
            out.status.success(),
            "finder {:?}: {}",
            &args[..2],
            String::from_utf8_lossy(&out.stderr)
        );
    }

    println!(
        "bad inputs: {} finder runs, 0 panics, {} refused with the place named, {} index warnings",
        runs.runs, runs.refused, runs.warnings
    );
}
