//! `docs/API.md` is the Markdown rendering of the OpenAPI document. Set FINDER_UPDATE_DOCS=1
//! to rewrite it after changing the API.

use std::path::PathBuf;

#[test]
fn api_md_matches_openapi() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/API.md");
    let expected = finder_server::openapi_markdown(&finder_server::openapi_document());
    if std::env::var_os("FINDER_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "docs/API.md is out of date with the OpenAPI document; run `FINDER_UPDATE_DOCS=1 cargo test -p finder-server api_md` and commit it"
    );
}
