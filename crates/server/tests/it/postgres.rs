//! The service over PostgreSQL: a space whose `finder.toml` names `storage.backend =
//! "postgres"` answers the API and the MCP tools exactly as a space over an embedded index of
//! the same files, takes document writes (acknowledged once committed in the database), and
//! sees runs made by another node.

use std::path::{Path, PathBuf};

use finder_server::Limits;
use serde_json::{json, Value};

use crate::support::{app_with, call, ids, mcp_post, notes, write};

/// A space folder whose settings point at `url` (or an embedded index when `None`).
fn space_dir(root: &Path, name: &str, url: Option<&str>) -> PathBuf {
    let dir = root.join(name);
    let storage = match url {
        Some(url) => format!("\n[storage]\nbackend = \"postgres\"\nurls = [\"{url}\"]\n"),
        None => String::new(),
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
    let db = server.database("serve");
    let tmp = tempfile::tempdir().unwrap();
    let input = notes(tmp.path());
    let embedded = space_dir(tmp.path(), "idx", None);
    let pg = space_dir(tmp.path(), "pg", Some(&db.url));
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
    let fresh = finder_pg::PgFinder::open(
        &finder_pg::PgConfig::single(&db.url),
        finder_index::load_settings(&pg, None).unwrap(),
    )
    .unwrap();
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
}

/// Calls one MCP tool at `/mcp` and returns its result.
async fn mcp_call(app: &finder_server::AppRef, tool: &str, arguments: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    mcp_post(app, message, &[]).await.body["result"].clone()
}
