//! `finder search` flags of the refinement stages: filters (late and prefilter), scope,
//! date order, user profiles, and the comparable relevance with `min_score`.

use super::{ok, write};

/// Six records about tokens in two locales, dated, and a profiles file.
fn index(root: &std::path::Path) -> (String, String) {
    let lines: Vec<String> = (1..=6)
        .map(|i| {
            let locale = if i % 2 == 0 { "it" } else { "en" };
            let tag = if i == 5 { "security" } else { "ops" };
            format!(
                r#"{{"id": "r{i}", "title": "Token note {i}", "text": "{}{}", "date": "2024-0{i}-01", "tags": ["{tag}"], "extras": {{"locale": "{locale}"}}}}"#,
                "token ".repeat(7 - i),
                [
                    "alpha rivers cross the northern plains in spring",
                    "bravo engines need cold oil before a long flight",
                    "charlie keeps the ledger of every warehouse shipment",
                    "delta wings fold when the hangar doors close early",
                    "echo chambers repeat each sound until it fades out",
                    "foxtrot dancers practise slow steps on wooden floors",
                ][i - 1],
            )
        })
        .collect();
    let input = write(root, "r.jsonl", &lines.join("\n"));
    write(
        root,
        "users.jsonl",
        "{\"user\": \"ana\", \"prefers\": {\"tag\": \"security\"}, \"weight\": 3}\n",
    );
    let index = root.join("idx");
    let (input, index) = (input.to_str().unwrap(), index.to_str().unwrap());
    ok(&["index", input, "--index", index]);
    (
        index.to_string(),
        root.join("users.jsonl").display().to_string(),
    )
}

fn ids(json: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

fn search(index: &str, extra: &[&str]) -> String {
    let mut args = vec!["search", "token", "--index", index, "--json"];
    args.extend_from_slice(extra);
    ok(&args)
}

#[test]
fn filter_scope_sort_user_and_min_score_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let (index, users) = index(tmp.path());
    let index = index.as_str();

    // BM25 favours the records that repeat "token" most: r1 first. Recency (on by default)
    // is mild next to that gap.
    let all = ids(&search(index, &[]));
    assert_eq!(all.len(), 6);

    let json = search(index, &["--filter", "LOCALE=IT"]);
    assert_eq!(ids(&json), vec!["r2", "r4", "r6"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["diagnostics"]["refine"]["filtered_out"], 3);
    assert_eq!(v["facets"]["extras"][0]["values"][0]["value"], "it");

    let json = search(
        index,
        &["--filter", "locale=it", "--prefilter", "--limit", "2"],
    );
    assert_eq!(ids(&json), vec!["r2", "r4"]);

    let json = search(index, &["--scope", "r3", "--scope", "r6"]);
    assert_eq!(ids(&json), vec!["r3", "r6"]);

    let json = search(index, &["--sort", "date"]);
    assert_eq!(ids(&json), vec!["r6", "r5", "r4", "r3", "r2", "r1"]);

    let profiles = format!("refine.profiles={users}");
    let json = search(index, &["--user", "ana", "--set", &profiles]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["diagnostics"]["refine"]["personalization"]
            .as_str()
            .unwrap()
            .starts_with("not applied"),
        "profiles are read when the index is opened: {v}"
    );
    let config = write(
        tmp.path(),
        "finder.toml",
        &format!("[refine]\nprofiles = {users:?}\n"),
    );
    let json = search(
        index,
        &["--user", "ana", "--config", config.to_str().unwrap()],
    );
    // "token" is one content token: λ = 0.85, so taste (security, r5) leads.
    assert_eq!(ids(&json)[0], "r5");

    let v: serde_json::Value = serde_json::from_str(&search(index, &[])).unwrap();
    let rel: Vec<f64> = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["relevance"].as_f64().unwrap())
        .collect();
    assert!(rel.iter().all(|r| (0.0..=1.0).contains(r)), "{rel:?}");
    let cut = format!("refine.min_score={}", (rel[1] + rel[2]) / 2.0);
    let json = search(index, &["--set", &cut]);
    assert_eq!(ids(&json).len(), 2);

    let out = super::finder(&["search", "token", "--index", index, "--sort", "sideways"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refine.sort"), "{err}");
}
