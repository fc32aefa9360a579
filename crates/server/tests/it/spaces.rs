//! Several spaces side by side: each route works per space and nothing crosses.

use serde_json::json;

use crate::support::{app_with, call, ids, index, notes, write};

#[tokio::test]
async fn spaces_are_isolated() {
    let tmp = tempfile::tempdir().unwrap();
    let notes_dir = notes(tmp.path());
    let a = index(tmp.path(), "a", &notes_dir);
    let other = tmp.path().join("other");
    write(
        &other,
        "garden.md",
        "# Garden\n\nWater the tomatoes every morning.\n",
    );
    let b = index(tmp.path(), "b", &other);
    let app = app_with(
        &[("default", &a), ("garden", &b)],
        None,
        finder_server::Limits::default(),
    );

    let r = call(
        &app,
        "POST",
        "/v1/spaces/garden/search",
        json!({"query": "tomatoes"}),
        200,
    )
    .await;
    assert_eq!(r["space"], "garden");
    assert_eq!(ids(&r), vec!["garden.md"]);
    let r = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "tomatoes"}),
        200,
    )
    .await;
    assert!(ids(&r).is_empty());
    let r = call(
        &app,
        "POST",
        "/v1/spaces/garden/search",
        json!({"query": "refresh token"}),
        200,
    )
    .await;
    assert!(ids(&r).is_empty());

    // A write to one space is invisible in the other.
    call(
        &app,
        "PUT",
        "/v1/spaces/garden/documents/basil",
        json!({"title": "Basil", "text": "Basil likes sun."}),
        200,
    )
    .await;
    let r = call(
        &app,
        "POST",
        "/v1/spaces/garden/search",
        json!({"query": "basil"}),
        200,
    )
    .await;
    assert_eq!(ids(&r), vec!["basil"]);
    let r = call(&app, "POST", "/v1/search", json!({"query": "basil"}), 200).await;
    assert!(ids(&r).is_empty());
    call(
        &app,
        "GET",
        "/v1/documents/basil",
        serde_json::Value::Null,
        404,
    )
    .await;
    call(
        &app,
        "DELETE",
        "/v1/spaces/default/documents/basil",
        serde_json::Value::Null,
        404,
    )
    .await;

    let s = call(
        &app,
        "GET",
        "/v1/spaces/garden/status",
        serde_json::Value::Null,
        200,
    )
    .await;
    assert_eq!(s["index"]["sources"], 2);
    let s = call(
        &app,
        "GET",
        "/v1/spaces/default/status",
        serde_json::Value::Null,
        200,
    )
    .await;
    assert_eq!(s["index"]["sources"], 4);
    assert_eq!(s["api_documents"], 0);
}
