//! `storage.backend = "postgres"` from the command line: `finder index`, `search`, `status`
//! `recommend` and `get` against a real server, with the graph.

use std::path::Path;

use crate::{finder, ok};

#[test]
fn index_search_status_and_recommend_over_postgres() {
    let Some(server) = finder_pg::testing::server("finder commands over postgres") else {
        return;
    };
    let db = server.database("cli");
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
    let home = crate::pg_home(&tmp.path().join("pg"), &db.url);
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
        status.contains("PostgreSQL, 1 shard")
            && status.contains("3 sources")
            && status.contains("graph: current"),
        "{status}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", "--index", home, "--json"])).unwrap();
    assert_eq!(status["graph"]["current"], true, "{status}");
    assert_eq!(status["sources"], 3, "{status}");
    let related: serde_json::Value =
        serde_json::from_str(&ok(&["recommend", "kiln.md", "--index", home, "--json"])).unwrap();
    assert_eq!(related["hits"][0]["id"], "studio.md", "{related}");

    // `get` reads a hint's lines from the database.
    let lines = ok(&["get", "kiln.md:3", "--index", home]);
    assert_eq!(
        lines.trim(),
        "3  Cone six glaze schedule for the [[studio]]. #pottery"
    );

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

#[test]
fn eval_runs_over_postgres_as_over_an_embedded_index() {
    let Some(server) = finder_pg::testing::server("finder eval over postgres") else {
        return;
    };
    let db = server.database("eval");
    let tmp = tempfile::tempdir().unwrap();
    let dataset = crate::beir(tmp.path());
    let config = tmp.path().join("pg.toml");
    std::fs::write(
        &config,
        format!(
            "[embed]\nbackend = \"none\"\n\n[storage]\nbackend = \"postgres\"\nurls = [\"{}\"]\n",
            db.url
        ),
    )
    .unwrap();
    let embedded = tmp.path().join("embedded.toml");
    std::fs::write(&embedded, "[embed]\nbackend = \"none\"\n").unwrap();
    let eval = |config: &Path| -> serde_json::Value {
        let out = ok(&[
            "eval",
            dataset.to_str().unwrap(),
            "--index",
            tmp.path().join("idx").to_str().unwrap(),
            "--runs",
            "lexical,full",
            "--config",
            config.to_str().unwrap(),
            "--json",
        ]);
        serde_json::from_str(&out).unwrap()
    };
    let pg = eval(&config);
    let local = eval(&embedded);
    for run in ["lexical", "full"] {
        assert_eq!(
            pg["runs"][run]["metrics"], local["runs"][run]["metrics"],
            "{run}"
        );
        assert_eq!(pg["runs"][run]["metrics"]["ndcg@10"], 1.0, "{pg}");
    }
    // The corpus went into the database, not the index folder.
    let status = ok(&[
        "status",
        "--index",
        tmp.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(status.contains("3 sources"), "{status}");
}
