//! The service over PostgreSQL: a space whose `finder.toml` names `storage.backend =
//! "postgres"` answers the API and the MCP tools exactly as a space over an embedded index of
//! the same files, takes document writes (acknowledged once committed in the database), and
//! sees runs made by another node.

use std::path::{Path, PathBuf};

use finder_server::Limits;
use serde_json::{json, Value};

use crate::support::{app_with, call, ids, mcp_post, notes, send, write};

/// A space folder whose settings point at the shards `urls` (an embedded index when none).
fn space_dir(root: &Path, name: &str, urls: &[&str]) -> PathBuf {
    let dir = root.join(name);
    let storage = if urls.is_empty() {
        String::new()
    } else {
        format!(
            "\n[storage]\nbackend = \"postgres\"\nurls = {}\n",
            serde_json::to_string(urls).unwrap()
        )
    };
    write(
        &dir,
        "finder.toml",
        &format!("[embed]\nbackend = \"none\"\n{storage}"),
    );
    dir
}

fn index(dir: &Path, inputs: &[PathBuf]) {
    let settings = finder_index::load_settings(dir, None).unwrap();
    let report = finder_store::index_inputs(dir, inputs, &settings, None).unwrap();
    assert!(report.problems().is_empty(), "{:?}", report.problems());
}

/// Hits without the timings, which differ between any two runs.
fn ranking(result: &Value) -> Vec<(String, String, Value)> {
    result["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap().to_string(),
                format!("{:.5}", h["score"].as_f64().unwrap()),
                h["hints"].clone(),
            )
        })
        .collect()
}

// Synchronous: the PostgreSQL client blocks, so the test's own calls to it run outside the
// runtime that drives the requests (the server runs them on blocking threads).
#[test]
fn the_api_and_mcp_answer_over_postgres_as_over_an_embedded_index() {
    let Some(server) = finder_pg::testing::server("service over postgres") else {
        return;
    };
    // Two shards: each source lives on one, and every answer merges both.
    let (one, two) = (server.database("serve"), server.database("serve"));
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let embedded = space_dir(tmp.path(), "idx", &[]);
    let pg = space_dir(tmp.path(), "pg", &[&one.url, &two.url]);
    index(&embedded, std::slice::from_ref(&input));
    index(&pg, std::slice::from_ref(&input));
    let app = app_with(&[("emb", &embedded), ("pg", &pg)], None, Limits::default());
    let runtime = tokio::runtime::Runtime::new().unwrap();

    runtime.block_on(async {
        for query in [
            "expired refresh token",
            "database backups",
            "deploy tuesday",
            "sesion",
        ] {
            let body = json!({"query": query, "limit": 5});
            let a = call(&app, "POST", "/v1/spaces/emb/search", body.clone(), 200).await;
            let b = call(&app, "POST", "/v1/spaces/pg/search", body, 200).await;
            assert!(query == "sesion" || !ids(&a).is_empty(), "{query}: {a:#}");
            assert_eq!(ranking(&a), ranking(&b), "{query}: {a:#}\n{b:#}");
            assert_eq!(a["facets"], b["facets"], "{query}");
        }
        let r = call(
            &app,
            "POST",
            "/v1/spaces/pg/search",
            json!({"query": "token", "filters": {"team": "platform"}}),
            200,
        )
        .await;
        assert!(ids(&r).is_empty(), "{r:#}");

        for space in ["emb", "pg"] {
            let context = call(
                &app,
                "POST",
                &format!("/v1/spaces/{space}/context"),
                json!({"query": "restore a backup", "limit": 2}),
                200,
            )
            .await;
            assert!(
                context["text"]
                    .as_str()
                    .unwrap()
                    .contains("ops/db.sh restore"),
                "{context:#}"
            );
            let like = call(
                &app,
                "POST",
                &format!("/v1/spaces/{space}/recommend"),
                json!({"target": "tokens.md", "limit": 3}),
                200,
            )
            .await;
            assert_eq!(ids(&like)[0], "sessions.md", "{space}: {like:#}");
        }
        let unknown = call(
            &app,
            "POST",
            "/v1/spaces/pg/recommend",
            json!({"target": "nowhere.md"}),
            404,
        )
        .await;
        assert_eq!(unknown["code"], "unknown_target");
        let status = call(&app, "GET", "/v1/spaces/pg/status", Value::Null, 200).await;
        assert_eq!(status["built"], true);
        assert_eq!(status["index"]["backend"], "postgres");
        assert_eq!(status["index"]["sources"], 4);
        let spaces = call(&app, "GET", "/v1/spaces", Value::Null, 200).await;
        assert_eq!(spaces["spaces"][1]["sources"], 4, "{spaces:#}");

        // MCP reads through the same surface: `get` returns the numbered lines of a hint.
        let mcp = mcp_call(
            &app,
            "get",
            json!({"space": "pg", "id": "backups.md:12-12"}),
        )
        .await;
        let text = mcp["structuredContent"]["text"].as_str().unwrap();
        assert!(
            text.contains("Restore a backup with ops/db.sh restore."),
            "{mcp:#}"
        );
        let embedded_get = mcp_call(
            &app,
            "get",
            json!({"space": "emb", "id": "backups.md:12-12"}),
        )
        .await;
        assert_eq!(embedded_get["structuredContent"]["text"], text);
        let found = mcp_call(
            &app,
            "search",
            json!({"space": "pg", "query": "rollback release"}),
        )
        .await;
        assert_eq!(
            found["structuredContent"]["hits"][0]["id"], "deploy.md",
            "{found:#}"
        );
        let said = mcp_call(&app, "status", json!({"space": "pg"})).await;
        assert_eq!(said["isError"], false, "{said:#}");
    });

    // Writes: acknowledged means committed in the database, and searchable at once.
    let doc = json!({"title": "Kiln furnace manual", "text": "The kiln furnace reaches 1300 degrees.\nVent the kiln before opening."});
    let w = runtime.block_on(call(
        &app,
        "PUT",
        "/v1/spaces/pg/documents/kiln-1",
        doc,
        200,
    ));
    assert_eq!(w["result"], "added");
    assert_eq!(w["sources"], 5);
    let settings = finder_index::load_settings(&pg, None).unwrap();
    let config = finder_pg::PgConfig::from_settings(&settings.storage).unwrap();
    let fresh = finder_pg::PgFinder::open(&config, settings).unwrap();
    assert!(fresh.source("kiln-1").unwrap().is_some());
    runtime.block_on(async {
        let r = call(
            &app,
            "POST",
            "/v1/spaces/pg/search",
            json!({"query": "kiln furnace"}),
            200,
        )
        .await;
        assert_eq!(ids(&r), ["kiln-1"]);
        // The files' sources stay: the write's run covers the API's input only.
        let r = call(
            &app,
            "POST",
            "/v1/spaces/pg/search",
            json!({"query": "refresh token"}),
            200,
        )
        .await;
        assert_eq!(ids(&r)[0], "tokens.md");
        let d = call(
            &app,
            "DELETE",
            "/v1/spaces/pg/documents/kiln-1",
            Value::Null,
            200,
        )
        .await;
        assert_eq!(
            (d["result"].as_str(), d["sources"].as_u64()),
            (Some("deleted"), Some(4))
        );
    });
    assert!(fresh.source("kiln-1").unwrap().is_none());

    // Another node's run (here `finder_store::index_inputs` beside the server) is seen
    // without a restart.
    write(
        &input,
        "kiln.md",
        "# Kiln\n\nGlaze firing schedule, cone six.\n",
    );
    index(&pg, std::slice::from_ref(&input));
    std::thread::sleep(finder_server::PG_RECHECK);
    let r = runtime.block_on(call(
        &app,
        "POST",
        "/v1/spaces/pg/search",
        json!({"query": "glaze firing"}),
        200,
    ));
    assert_eq!(ids(&r), ["kiln.md"]);
    // The space reopened with that run's graph, not the one it had.
    assert_eq!(r["diagnostics"]["boost"]["status"], "ran", "{r:#}");
    // A server shutting down drops its spaces on a runtime's thread; their pooled
    // connections must close without blocking it.
    runtime.block_on(async move { drop(app) });
}

/// Calls one MCP tool at `/mcp` and returns its result.
async fn mcp_call(app: &finder_server::AppRef, tool: &str, arguments: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    mcp_post(app, message, &[]).await.body["result"].clone()
}

/// Writes go on while the primary restarts: those acknowledged before, during or after are
/// all in the database afterwards, writes resume, and queries move to new connections.
#[test]
fn acknowledged_writes_survive_a_primary_restart() {
    let Some(server) = finder_pg::testing::private_server("primary restart") else {
        return;
    };
    let db = server.database("restart");
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let pg = space_dir(tmp.path(), "pg", &[&db.url]);
    index(&pg, std::slice::from_ref(&input));
    let app = app_with(&[("pg", &pg)], None, Limits::default());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let found = |query: &str| {
        runtime.block_on(call(
            &app,
            "POST",
            "/v1/spaces/pg/search",
            json!({"query": query}),
            200,
        ))
    };
    assert_eq!(ids(&found("refresh token"))[0], "tokens.md");

    let acknowledged = std::sync::Mutex::new(Vec::new());
    let refused = std::sync::Mutex::new(Vec::new());
    let restarted = std::sync::atomic::AtomicBool::new(false);
    // Writes go on until the restart is over and forty were sent; a refused one (the
    // server away) is fast, so the writer waits a little after each.
    let written = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut i = 0;
            while i < 40 || !restarted.load(std::sync::atomic::Ordering::Acquire) {
                i += 1;
                let id = format!("doc-{i}");
                let body = json!({"title": format!("Furnace log {i}"), "text": format!("Kiln entry number{i}.")});
                let answer = runtime.block_on(send(
                    &app,
                    "PUT",
                    &format!("/v1/spaces/pg/documents/{id}"),
                    Some(body.to_string()),
                    None,
                ));
                if answer.status == 200 {
                    acknowledged.lock().unwrap().push(id);
                } else {
                    refused
                        .lock()
                        .unwrap()
                        .push((answer.status, format!("{id}: {}", answer.text)));
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
            i
        });
        while acknowledged.lock().unwrap().len() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        server.restart().expect("restart the primary");
        restarted.store(true, std::sync::atomic::Ordering::Release);
        writer.join().unwrap()
    });
    let acknowledged = acknowledged.into_inner().unwrap();
    let refused = refused.into_inner().unwrap();
    let last = format!("doc-{written}");
    assert!(
        acknowledged.last() == Some(&last),
        "writes did not resume: {refused:#?}"
    );
    // A write the server could not take is refused as the storage being away for now (503,
    // to be retried), never as a fault of the request or of the server.
    for (status, text) in &refused {
        assert!(
            *status == 503 && text.contains("storage_unavailable"),
            "{status} {text}"
        );
    }
    let fresh = finder_pg::PgFinder::open(
        &finder_pg::PgConfig::single(&db.url),
        finder_index::load_settings(&pg, None).unwrap(),
    )
    .unwrap();
    for id in &acknowledged {
        assert!(
            fresh.source(id).unwrap().is_some(),
            "{id} was acknowledged but is not in the database"
        );
    }
    // The served space's pooled connections died with the server; queries go on.
    assert_eq!(ids(&found("refresh token"))[0], "tokens.md");
    assert_eq!(ids(&found(&format!("number{written}"))), [last]);
    eprintln!(
        "primary restart: {} writes acknowledged, {} refused while it was down",
        acknowledged.len(),
        refused.len()
    );
}

/// Two query nodes over the same shards, each with its own space folder: a document written
/// through one is read, found, replaced and deleted through the other, and a rebuild of the
/// index from the files keeps it, because the shards keep the API's documents.
#[test]
fn api_documents_are_shared_by_every_node_over_the_shards() {
    let Some(server) = finder_pg::testing::server("api documents over postgres") else {
        return;
    };
    let (one, two) = (server.database("nodes"), server.database("nodes"));
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let urls = [one.url.as_str(), two.url.as_str()];
    let (a, b) = (
        space_dir(tmp.path(), "a", &urls),
        space_dir(tmp.path(), "b", &urls),
    );
    index(&a, std::slice::from_ref(&input));
    let node_a = app_with(&[("pg", &a)], None, Limits::default());
    let node_b = app_with(&[("pg", &b)], None, Limits::default());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let doc = |text: &str| json!({"title": "Kiln furnace manual", "text": text});
    let search = |app: &finder_server::AppRef, query: &str| {
        ids(&runtime.block_on(call(
            app,
            "POST",
            "/v1/spaces/pg/search",
            json!({"query": query}),
            200,
        )))
    };
    let path = "/v1/spaces/pg/documents/kiln-1";

    let w = runtime.block_on(call(&node_a, "PUT", path, doc("Vent the kiln first."), 200));
    assert_eq!(
        (w["result"].as_str(), w["sources"].as_u64()),
        (Some("added"), Some(5))
    );
    let got = runtime.block_on(call(&node_b, "GET", path, Value::Null, 200));
    assert_eq!(got["document"]["text"], "Vent the kiln first.", "{got:#}");
    assert_eq!(search(&node_b, "vent kiln"), ["kiln-1"]);

    // Replaced through the other node: an update, seen by the first.
    let w = runtime.block_on(call(&node_b, "PUT", path, doc("Glaze at cone six."), 200));
    assert_eq!(w["result"], "updated", "{w:#}");
    assert_eq!(search(&node_a, "glaze cone"), ["kiln-1"]);
    assert!(search(&node_a, "vent").is_empty());

    // A rebuild from the files (an index-time setting changed) keeps the API's documents.
    std::fs::write(
        a.join("finder.toml"),
        std::fs::read_to_string(a.join("finder.toml")).unwrap()
            + "[index]\nfragment_max_chars = 1500\n",
    )
    .unwrap();
    let settings = finder_index::load_settings(&a, None).unwrap();
    let report =
        finder_store::index_inputs(&a, std::slice::from_ref(&input), &settings, None).unwrap();
    let finder_store::RunReport::Postgres(report) = report else {
        panic!("a postgres space runs over postgres");
    };
    assert!(report.rebuilt && report.problems.is_empty(), "{report:?}");
    assert_eq!(report.sources, 5, "{report:?}");
    std::fs::write(
        b.join("finder.toml"),
        std::fs::read_to_string(a.join("finder.toml")).unwrap(),
    )
    .unwrap();
    std::thread::sleep(finder_server::PG_RECHECK);
    assert_eq!(search(&node_b, "glaze cone"), ["kiln-1"]);

    // Deleted through the second node: gone for both, from the index and the table.
    let d = runtime.block_on(call(&node_b, "DELETE", path, Value::Null, 200));
    assert_eq!(
        (d["result"].as_str(), d["sources"].as_u64()),
        (Some("deleted"), Some(4))
    );
    runtime.block_on(call(&node_a, "GET", path, Value::Null, 404));
    runtime.block_on(call(&node_a, "DELETE", path, Value::Null, 404));
    assert!(search(&node_a, "glaze cone").is_empty());
    let config = finder_pg::PgConfig::from_settings(&settings.storage).unwrap();
    assert!(finder_pg::read_documents(&config, None).unwrap().is_empty());
    // Neither node keeps a file of its own.
    for dir in [&a, &b] {
        assert!(
            !dir.join(finder_server::API_SOURCES).exists(),
            "{}",
            dir.display()
        );
    }
    runtime.block_on(async move {
        drop(node_a);
        drop(node_b);
    });
}

/// A space written through the API before the shards kept its documents has them in its
/// folder's `api-sources.jsonl`, indexed as an input of their own: they are read from there
/// until the next write moves them into the shards, and a rebuild then no longer asks for the
/// file.
#[test]
fn documents_of_an_older_node_file_move_into_the_shards() {
    let Some(server) = finder_pg::testing::server("api documents from a file") else {
        return;
    };
    let db = server.database("legacy");
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let pg = space_dir(tmp.path(), "pg", &[&db.url]);
    let legacy = pg.join(finder_server::API_SOURCES);
    write(
        &pg,
        finder_server::API_SOURCES,
        "{\"id\":\"old-1\",\"title\":\"Kiln log\",\"text\":\"Bisque firing at cone four.\"}\n",
    );
    index(&pg, &[input.clone(), legacy.clone()]);
    let app = app_with(&[("pg", &pg)], None, Limits::default());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let path = "/v1/spaces/pg/documents/old-1";
    let got = runtime.block_on(call(&app, "GET", path, Value::Null, 200));
    assert_eq!(got["document"]["title"], "Kiln log", "{got:#}");

    let doc = json!({"title": "Glaze notes", "text": "Celadon glaze on stoneware."});
    let w = runtime.block_on(call(&app, "PUT", "/v1/spaces/pg/documents/new-1", doc, 200));
    assert_eq!(w["result"], "added", "{w:#}");
    assert!(!legacy.exists() && legacy.with_extension("jsonl.imported").exists());
    let settings = finder_index::load_settings(&pg, None).unwrap();
    let config = finder_pg::PgConfig::from_settings(&settings.storage).unwrap();
    let stored = finder_pg::read_documents(&config, None).unwrap();
    assert_eq!(stored.keys().collect::<Vec<_>>(), ["new-1", "old-1"]);
    let got = runtime.block_on(call(&app, "GET", path, Value::Null, 200));
    assert_eq!(got["document"]["text"], "Bisque firing at cone four.");

    // The file's input holds no source any more: a rebuild needs the notes only.
    std::fs::write(
        pg.join("finder.toml"),
        std::fs::read_to_string(pg.join("finder.toml")).unwrap()
            + "[index]\nfragment_max_chars = 1500\n",
    )
    .unwrap();
    let settings = finder_index::load_settings(&pg, None).unwrap();
    let report =
        finder_store::index_inputs(&pg, std::slice::from_ref(&input), &settings, None).unwrap();
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    let fresh = finder_pg::PgFinder::open(&config, settings.clone()).unwrap();
    for id in ["old-1", "new-1"] {
        assert!(fresh.source(id).unwrap().is_some(), "{id}");
    }
    runtime.block_on(async move { drop(app) });
}
