//! `storage.backend = "postgres"` from the command line: `finder index`, `search`, `status`
//! and `recommend` against a real server, with the graph; `serve` refuses it, naming why.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{finder, ok};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
}

/// A server started by `scripts/postgres.sh` for this test, stopped when dropped.
struct Server {
    dir: PathBuf,
    url: String,
}

impl Server {
    fn start() -> Result<Server, String> {
        let dir = std::env::temp_dir().join(format!("finder-cli-pg-{}", std::process::id()));
        let out = Command::new("bash")
            .arg(script())
            .args(["start", &dir.display().to_string()])
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let url = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .trim()
            .to_string();
        Ok(Server { dir, url })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["stop", &self.dir.display().to_string()])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn index_search_status_and_recommend_over_postgres() {
    let server = match std::env::var("FINDER_PG_URL") {
        Ok(url) => Server {
            dir: PathBuf::new(),
            url,
        },
        Err(_) => match Server::start() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("SKIPPED: FINDER_PG_URL is unset and no server could be started: {e}");
                return;
            }
        },
    };
    let tmp = tempfile::tempdir().unwrap();
    let notes = tmp.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(
        notes.join("kiln.md"),
        "# Kiln firing\n\nCone six glaze schedule for the [[studio]]. #pottery\n",
    )
    .unwrap();
    std::fs::write(
        notes.join("studio.md"),
        "# Studio\n\nThe shared workshop: wheels, shelves and the electric kiln. #pottery\n",
    )
    .unwrap();
    std::fs::write(
        notes.join("harbor.md"),
        "# Harbor\n\nFerry timetable and mooring fees.\n",
    )
    .unwrap();
    let home = tmp.path().join("pg");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("finder.toml"),
        format!(
            "[embed]\nbackend = \"none\"\n\n[storage]\nbackend = \"postgres\"\nurls = [\"{}\"]\n",
            server.url
        ),
    )
    .unwrap();
    let (notes, home) = (notes.to_str().unwrap(), home.to_str().unwrap());

    let first = ok(&["index", notes, "--index", home, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(report["backend"], "postgres");
    assert_eq!(report["added"], 3);
    assert!(report["graph"]["edges"].as_u64().unwrap() > 0, "{report}");
    // Nothing changed: nothing written, the graph kept.
    let again: serde_json::Value =
        serde_json::from_str(&ok(&["index", notes, "--index", home, "--json"])).unwrap();
    assert_eq!(again["unchanged"], 3);
    assert!(again["graph"].is_null());

    let found: serde_json::Value = serde_json::from_str(&ok(&[
        "search",
        "glaze schedule",
        "--index",
        home,
        "--json",
    ]))
    .unwrap();
    assert_eq!(found["hits"][0]["id"], "kiln.md");
    let boost = &found["diagnostics"]["boost"];
    assert_eq!(boost["status"], "ran", "{boost}");
    // The linked note comes along through the graph.
    let ids: Vec<&str> = found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["id"].as_str())
        .collect();
    assert!(ids.contains(&"studio.md"), "{ids:?}");

    // Query-time settings apply; index-time ones are refused with the stored value.
    ok(&[
        "search",
        "ferry",
        "--index",
        home,
        "--set",
        "lexical.k1=0.9",
    ]);
    let refused = finder(&[
        "search",
        "ferry",
        "--index",
        home,
        "--set",
        "index.language=french",
    ]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("index.language"), "{err}");

    let status = ok(&["status", "--index", home]);
    assert!(
        status.contains("PostgreSQL, 1 shard") && status.contains("3 sources"),
        "{status}"
    );
    let related: serde_json::Value =
        serde_json::from_str(&ok(&["recommend", "kiln.md", "--index", home, "--json"])).unwrap();
    assert_eq!(related["hits"][0]["id"], "studio.md", "{related}");

    let serve = finder(&["serve", "--index", home]);
    assert!(!serve.status.success());
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains("postgres"), "{err}");

    // A bad URL is named by its key.
    std::fs::write(
        Path::new(home).join("finder.toml"),
        "[storage]\nbackend = \"postgres\"\nurls = []\n",
    )
    .unwrap();
    let bad = finder(&["search", "ferry", "--index", home]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("storage.urls"),
        "{err}"
    );
}
