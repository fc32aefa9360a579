//! Document writes: upsert, then search finds it; delete, then it is gone; the API input file
//! is the durable truth.

use serde_json::{json, Value};

use crate::support::{call, fixture, ids};

#[tokio::test]
async fn upsert_then_search_finds_it_and_delete_removes_it() {
    let (tmp, app) = fixture();
    let doc = json!({"title": "Kiln furnace manual", "text": "The kiln furnace reaches 1300 degrees.\nVent the kiln before opening.", "tags": ["hardware"], "extras": {"team": "studio"}});
    let w = call(&app, "PUT", "/v1/documents/kiln-1", doc.clone(), 200).await;
    assert_eq!(w["result"], "added");
    assert_eq!(w["id"], "kiln-1");
    assert_eq!(w["sources"], 5);
    assert!(w["committed_at"].as_u64().unwrap() > 0);

    let r = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "kiln furnace"}),
        200,
    )
    .await;
    assert_eq!(ids(&r), vec!["kiln-1"]);
    assert_eq!(r["hits"][0]["envelope"]["tags"], json!(["hardware"]));
    assert_eq!(r["facets"]["extras"]["team"]["studio"], 1);

    // The write is in the space's input file, so `finder index` can rebuild it.
    let file =
        std::fs::read_to_string(tmp.path().join("idx").join(finder_server::API_SOURCES)).unwrap();
    assert!(file.contains("\"id\":\"kiln-1\""), "{file}");

    let same = call(&app, "PUT", "/v1/documents/kiln-1", doc, 200).await;
    assert_eq!(same["result"], "unchanged");
    let changed = json!({"title": "Kiln furnace manual", "text": "Vent the kiln for ten minutes."});
    assert_eq!(
        call(&app, "PUT", "/v1/documents/kiln-1", changed.clone(), 200).await["result"],
        "updated"
    );
    let stored = call(&app, "GET", "/v1/documents/kiln-1", Value::Null, 200).await;
    assert_eq!(stored["document"], changed);
    let s = call(&app, "GET", "/v1/status", Value::Null, 200).await;
    assert_eq!(s["api_documents"], 1);

    let d = call(&app, "DELETE", "/v1/documents/kiln-1", Value::Null, 200).await;
    assert_eq!(d["result"], "deleted");
    assert_eq!(d["sources"], 4);
    let r = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "kiln furnace"}),
        200,
    )
    .await;
    assert!(ids(&r).is_empty(), "{r:#}");
    let e = call(&app, "DELETE", "/v1/documents/kiln-1", Value::Null, 404).await;
    assert_eq!(e["code"], "document_not_found");
    // Sources from files are untouched by API writes.
    let r = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "refresh token"}),
        200,
    )
    .await;
    assert_eq!(ids(&r)[0], "tokens.md");
}

#[tokio::test]
async fn ids_with_slashes_and_a_new_space_built_by_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let app = crate::support::app_with(
        &[("default", &tmp.path().join("fresh"))],
        None,
        finder_server::Limits::default(),
    );
    let w = call(
        &app,
        "PUT",
        "/v1/documents/guides/setup%20notes",
        json!({"title": "Setup", "text": "Install the widget."}),
        200,
    )
    .await;
    assert_eq!(w["id"], "guides/setup notes");
    assert_eq!(w["sources"], 1);
    let r = call(&app, "POST", "/v1/search", json!({"query": "widget"}), 200).await;
    assert_eq!(ids(&r), vec!["guides/setup notes"]);
    let g = call(
        &app,
        "GET",
        "/v1/documents/guides/setup%20notes",
        Value::Null,
        200,
    )
    .await;
    assert_eq!(g["document"]["title"], "Setup");
}

#[tokio::test]
async fn invalid_documents_are_refused_and_nothing_changes() {
    let (tmp, app) = fixture();
    let e = call(
        &app,
        "PUT",
        "/v1/documents/x",
        json!({"title": "No text"}),
        400,
    )
    .await;
    assert_eq!(e["code"], "invalid_request");
    assert!(e["message"].as_str().unwrap().contains("text"), "{e}");
    let e = call(
        &app,
        "PUT",
        "/v1/documents/x",
        json!({"text": " ", "title": ""}),
        400,
    )
    .await;
    assert_eq!(e["code"], "invalid_document");
    let e = call(
        &app,
        "PUT",
        "/v1/documents/x",
        json!({"text": "t", "extras": {"n": 1}}),
        400,
    )
    .await;
    assert_eq!(e["code"], "invalid_request");
    assert!(!tmp
        .path()
        .join("idx")
        .join(finder_server::API_SOURCES)
        .exists());
}

#[tokio::test]
async fn lines_read_any_source_where_its_hints_point() {
    let (_tmp, app) = fixture();
    let hits = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "refresh token expired"}),
        200,
    )
    .await;
    let hint = &hits["hits"][0]["hints"][0];
    let (start, end) = (
        hint["extent"]["line_start"].as_u64().unwrap(),
        hint["extent"]["line_end"].as_u64().unwrap(),
    );
    let path = format!("/v1/documents/tokens.md?lines={start}-{end}");
    let lines = call(&app, "GET", &path, Value::Null, 200).await;
    assert_eq!(
        (lines["line_start"].as_u64(), lines["line_end"].as_u64()),
        (Some(start), Some(end))
    );
    assert!(
        lines["text"]
            .as_str()
            .unwrap()
            .contains("the refresh token expired"),
        "{lines}"
    );
    assert_eq!(lines["truncated"], false);
    // A file source has no stored API form: without `lines` it is not a document.
    call(&app, "GET", "/v1/documents/tokens.md", Value::Null, 404).await;
    let bad = call(
        &app,
        "GET",
        "/v1/documents/tokens.md?lines=x",
        Value::Null,
        400,
    )
    .await;
    assert_eq!(bad["details"]["field"], "lines", "{bad}");
    let gone = call(
        &app,
        "GET",
        "/v1/documents/gone.md?lines=all",
        Value::Null,
        404,
    )
    .await;
    assert_eq!(gone["code"], "unknown_target");
    let date = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "date_from": "soon"}),
        400,
    )
    .await;
    assert!(
        date["message"].as_str().unwrap().contains("not a date"),
        "{date}"
    );
}
