//! `docs/CONFIG.md` and the README's settings block are generated from the settings table.
//! Set FINDER_UPDATE_DOCS=1 to rewrite them after changing a setting.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn update() -> bool {
    std::env::var_os("FINDER_UPDATE_DOCS").is_some()
}

#[test]
fn config_md_is_the_settings_table() {
    let path = root().join("docs/CONFIG.md");
    let expected = finder_core::settings::reference_markdown();
    if update() {
        std::fs::write(&path, &expected).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "docs/CONFIG.md is out of date with the settings table; run \
         `FINDER_UPDATE_DOCS=1 cargo test -p finder-core --test settings_docs` and commit it"
    );
}

#[test]
fn the_readme_settings_block_is_the_settings_table() {
    const BEGIN: &str = "<!-- settings:begin -->\n";
    const END: &str = "<!-- settings:end -->";
    let path = root().join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme
        .find(BEGIN)
        .expect("README has a settings:begin marker")
        + BEGIN.len();
    let end = readme.find(END).expect("README has a settings:end marker");
    let expected = format!("```toml\n{}```\n", finder_core::settings::readme_toml());
    if update() {
        let updated = format!("{}{expected}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        readme[start..end] == expected,
        "README.md's settings block is out of date with the settings table; run \
         `FINDER_UPDATE_DOCS=1 cargo test -p finder-core --test settings_docs` and commit it"
    );
}
