//! Per-space access control and isolation. Three spaces hold distinct data on purpose made
//! to collide: the same ids (`shared-1`, `shared-2`, the API document `api-doc`), the same
//! words (`harbor lantern`), the same `team` values and, in the two vector spaces, the same
//! vectors on different ids. Every endpoint is asked, with a token granting some spaces and
//! with none at all: no answer may hold another space's ids or text, and a space a token does
//! not grant answers exactly like a space that does not exist.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_core::Embed;
use finder_server::{Access, AppRef, Grants, Limits, Opener, Space, Spaces};
use serde_json::{json, Value};

use crate::support::{send, write, Answer};

const SPACES: [&str; 3] = ["alpha", "beta", "gamma"];

/// Strings that only the space's own data holds: its marker word (in every title, text,
/// tag and extra), its unique ids and its folder names.
fn markers(space: &str) -> [String; 5] {
    [
        format!("{space}mark"),
        format!("only-{space}"),
        format!("api-only-{space}"),
        format!("in-{space}"),
        format!("idx-{space}"),
    ]
}

/// The `precomputed` backend's stand-in: vectors come with the records.
struct GivenVectors;

impl Embed for GivenVectors {
    fn model_id(&self) -> &str {
        "precomputed/3"
    }

    fn dim(&self) -> usize {
        3
    }

    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Err("the precomputed backend embeds no text".into())
    }
}

/// Records of `space`: two shared ids and one of its own, with vectors in the vector spaces
/// (a vector that one space gives `shared-1` the other gives its own document).
fn records(space: &str, vectors: Option<[[f32; 3]; 3]>) -> String {
    let m = format!("{space}mark");
    let docs = [
        (
            "shared-1",
            "blue",
            format!("Harbor lantern {m}"),
            format!("The harbor lantern glows over the river. {m} keeps the copper bright."),
        ),
        (
            "shared-2",
            "red",
            format!("Lantern oil {m}"),
            format!("Lantern oil for the harbor, stored by {m} in copper drums."),
        ),
        (
            &*format!("only-{space}"),
            "blue",
            format!("Harbor ledger {m}"),
            format!("The harbor ledger of {m} lists every lantern and river barge."),
        ),
    ];
    let mut out = String::new();
    for (i, (id, team, title, text)) in docs.iter().enumerate() {
        let mut record = json!({
            "id": id, "title": title, "text": text,
            "tags": ["harbor", format!("{m}-tag")],
            "extras": {"team": team, "owner": format!("{m}-owner")},
            "date": format!("2024-0{}-01", i + 1),
        });
        if let Some(v) = vectors {
            record["vector"] = json!(v[i]);
        }
        out.push_str(&record.to_string());
        out.push('\n');
    }
    out
}

/// Builds the three spaces: `alpha` and `beta` with precomputed vectors, `gamma` without.
fn build(root: &Path) -> Vec<(String, PathBuf, bool)> {
    let mut out = Vec::new();
    for space in SPACES {
        let vectors = match space {
            "alpha" => Some([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
            "beta" => Some([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
            _ => None,
        };
        let input = root.join(format!("in-{space}"));
        write(&input, "records.jsonl", &records(space, vectors));
        let dir = root.join(format!("idx-{space}"));
        if vectors.is_some() {
            write(
                &dir,
                "finder.toml",
                "[embed]\nbackend = \"precomputed\"\ndim = 3\n",
            );
        }
        let settings = finder_index::load_settings(&dir, None).unwrap();
        let report = finder_index::index_inputs(
            &dir,
            &[input.join("records.jsonl")],
            &settings,
            &mut |_| {},
        )
        .unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        if vectors.is_some() {
            finder_index::build_vectors(&dir, &settings, &GivenVectors, &mut |_| {}).unwrap();
        }
        out.push((space.to_string(), dir, vectors.is_some()));
    }
    out
}

fn app(built: &[(String, PathBuf, bool)], access: Access) -> AppRef {
    let with_vectors: Opener = Arc::new(|dir, settings| {
        let mut finder = finder_store::Store::open(dir, settings)?;
        finder.attach_embedder(Ok(Some(Arc::new(GivenVectors))));
        Ok(finder)
    });
    let spaces = built
        .iter()
        .map(|(name, dir, vectors)| {
            let space = Space::new(name, dir, None).unwrap();
            if *vectors {
                space.with_opener(with_vectors.clone())
            } else {
                space
            }
        })
        .collect();
    finder_server::App::new(Spaces::new(spaces).unwrap(), access, Limits::default())
}

/// Every space route, as `(method, suffix, body, expected status)`, with documents named
/// by this space's marker. `api-only-<space>` (written by `seed`) exists only here.
fn routes(space: &str) -> Vec<(&'static str, String, Option<Value>, u16)> {
    let m = format!("{space}mark");
    let scope = json!(["shared-1", "only-alpha", "only-beta", "only-gamma"]);
    vec![
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "harbor lantern"})),
            200,
        ),
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "harbor lantern", "filters": {"team": "blue"}})),
            200,
        ),
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "harbor", "filters": {"team": "blue"}, "prefilter": true})),
            200,
        ),
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "harbor lantern", "scope": scope})),
            200,
        ),
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "lantern", "sort": "date", "limit": 50})),
            200,
        ),
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "harbor", "vector": [1.0, 0.0, 0.0]})),
            200,
        ),
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "", "vector": [0.0, 0.1, 1.0]})),
            200,
        ),
        (
            "POST",
            "/context".into(),
            Some(json!({"query": "harbor lantern river", "budget_chars": 2000})),
            200,
        ),
        (
            "POST",
            "/recommend".into(),
            Some(json!({"target": "shared-1"})),
            200,
        ),
        (
            "POST",
            "/recommend".into(),
            Some(json!({"target": format!("only-{space}")})),
            200,
        ),
        ("GET", "/status".into(), None, 200),
        (
            "PUT",
            "/documents/api-doc".into(),
            Some(
                json!({"title": format!("API lantern {m}"), "text": format!("harbor lantern written by {m}"), "tags": [format!("{m}-tag")]}),
            ),
            200,
        ),
        (
            "PUT",
            format!("/documents/api-only-{space}-temp"),
            Some(json!({"title": format!("Own {m}"), "text": format!("harbor note of {m}")})),
            200,
        ),
        (
            "POST",
            "/search".into(),
            Some(json!({"query": "harbor lantern written", "limit": 50})),
            200,
        ),
        (
            "POST",
            "/recommend".into(),
            Some(json!({"target": "api-doc"})),
            200,
        ),
        ("GET", "/documents/api-doc".into(), None, 200),
        ("GET", "/status".into(), None, 200),
        ("GET", format!("/documents/api-only-{space}"), None, 200),
        (
            "DELETE",
            format!("/documents/api-only-{space}-temp"),
            None,
            200,
        ),
        (
            "GET",
            format!("/documents/api-only-{space}-temp"),
            None,
            404,
        ),
    ]
}

/// Fails when `text` (an answer from `space`) holds a marker of another space.
fn assert_clean(space: &str, what: &str, text: &str) {
    let lower = text.to_lowercase();
    for other in SPACES.iter().filter(|o| **o != space) {
        for marker in markers(other) {
            assert!(
                !lower.contains(&marker),
                "{what} in `{space}` shows `{marker}` of `{other}`: {text}"
            );
        }
    }
}

async fn ask(
    app: &AppRef,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: &Option<Value>,
) -> Answer {
    send(
        app,
        method,
        path,
        body.as_ref().map(Value::to_string),
        token,
    )
    .await
}

/// Runs every route of `space` (granted to `token`) and checks what comes back.
async fn check_granted(app: &AppRef, token: Option<&str>, space: &str) {
    for (method, suffix, body, expected) in routes(space) {
        let path = format!("/v1/spaces/{space}{suffix}");
        let a = ask(app, token, method, &path, &body).await;
        let what = format!(
            "{method} {path} {}",
            body.as_ref().map_or(String::new(), Value::to_string)
        );
        assert_eq!(a.status.as_u16(), expected, "{what}: {}", a.text);
        assert_clean(space, &what, &a.text);
        if suffix == "/search" && expected == 200 {
            let r = a.json();
            assert_eq!(r["space"], space);
            for hit in r["hits"].as_array().unwrap() {
                let own = hit["envelope"]["title"].as_str().unwrap().to_lowercase();
                assert!(own.contains(&format!("{space}mark")), "{what}: {hit}");
            }
            // The vector-only query reaches the vector channel: the nearest of this space's
            // own vectors wins, never the other space's document with the same vector.
            if body.as_ref().is_some_and(|b| b["query"] == "") {
                let top = r["hits"][0]["id"].as_str();
                let expected = match space {
                    "alpha" => Some("only-alpha"),
                    "beta" => Some("shared-1"),
                    _ => None,
                };
                assert_eq!(top, expected, "{what}: {}", a.text);
            }
        }
    }
    // Ids that exist only in another space answer as ids that exist nowhere.
    for other in SPACES.iter().filter(|o| **o != space) {
        for (method, suffix, body) in [
            (
                "POST",
                "/recommend".to_string(),
                Some(json!({"target": format!("only-{other}")})),
            ),
            ("GET", format!("/documents/api-only-{other}"), None),
            ("DELETE", format!("/documents/api-only-{other}"), None),
        ] {
            let path = format!("/v1/spaces/{space}{suffix}");
            let a = ask(app, token, method, &path, &body).await;
            let never = |s: &str| s.replace(&format!("only-{other}"), "never-was");
            let b = ask(
                app,
                token,
                method,
                &never(&path),
                &body
                    .as_ref()
                    .map(|b| serde_json::from_str(&never(&b.to_string())).unwrap()),
            )
            .await;
            assert_eq!(a.status, 404, "{method} {path}: {}", a.text);
            assert_eq!(never(&a.text), b.text, "{method} {path}");
        }
    }
}

/// Every route of `space` answers `token` exactly as a space that does not exist, and
/// nothing is written.
async fn check_refused(app: &AppRef, token: &str, space: &str) {
    for (method, suffix, body, _) in routes(space) {
        let path = format!("/v1/spaces/{space}{suffix}");
        let a = ask(app, Some(token), method, &path, &body).await;
        let b = ask(
            app,
            Some(token),
            method,
            &format!("/v1/spaces/nosuch{suffix}"),
            &body,
        )
        .await;
        assert_eq!(a.status, 404, "{method} {path}: {}", a.text);
        assert_eq!(a.json()["code"], "unknown_space");
        assert_eq!(a.text.replace(space, "nosuch"), b.text, "{method} {path}");
        assert_eq!(a.headers.len(), b.headers.len(), "{method} {path}");
    }
}

/// Writes `api-only-<space>` into every space, so each space holds an API document the
/// others do not.
async fn seed(app: &AppRef, token: Option<&str>) {
    for space in SPACES {
        let m = format!("{space}mark");
        let body = json!({"title": format!("Only here {m}"), "text": format!("harbor lantern kept by {m}")});
        let a = ask(
            app,
            token,
            "PUT",
            &format!("/v1/spaces/{space}/documents/api-only-{space}"),
            &Some(body),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
}

fn listed(app_answer: &Answer) -> Vec<String> {
    app_answer.json()["spaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn tokens_see_only_their_spaces_and_nothing_crosses() {
    let tmp = tempfile::tempdir().unwrap();
    let built = build(tmp.path());
    let access = Access::open()
        .with("tok-alpha", Grants::spaces(["alpha"]))
        .with("tok-beta-gamma", Grants::spaces(["beta", "gamma"]))
        .with("tok-all", Grants::All);
    let app = app(&built, access);
    seed(&app, Some("tok-all")).await;

    check_granted(&app, Some("tok-alpha"), "alpha").await;
    for space in ["beta", "gamma"] {
        check_refused(&app, "tok-alpha", space).await;
    }
    for space in ["beta", "gamma"] {
        check_granted(&app, Some("tok-beta-gamma"), space).await;
    }
    check_refused(&app, "tok-beta-gamma", "alpha").await;
    for space in SPACES {
        check_granted(&app, Some("tok-all"), space).await;
    }
    // The refused writes wrote nothing: each space holds only its own API documents.
    for (name, dir, _) in &built {
        let file = std::fs::read_to_string(dir.join(finder_server::API_SOURCES)).unwrap();
        assert_clean(name, "api-sources.jsonl", &file);
    }

    let a = send(&app, "GET", "/v1/spaces", None, Some("tok-alpha")).await;
    assert_eq!(listed(&a), ["alpha"]);
    let a = send(&app, "GET", "/v1/spaces", None, Some("tok-beta-gamma")).await;
    assert_eq!(listed(&a), ["beta", "gamma"]);
    let a = send(&app, "GET", "/v1/spaces", None, Some("tok-all")).await;
    assert_eq!(listed(&a), SPACES);
    // Routes without a space use `default`, which is not served here: the same 404.
    let a = send(&app, "GET", "/v1/status", None, Some("tok-alpha")).await;
    assert_eq!(a.status, 404);
    assert!(a.text.contains("(served: alpha)"), "{}", a.text);

    // No token, or one the server does not know: 401 everywhere under /v1.
    for token in [None, Some("tok-alph"), Some("tok-alpha-x")] {
        let a = send(
            &app,
            "POST",
            "/v1/spaces/alpha/search",
            Some(json!({"query": "harbor"}).to_string()),
            token,
        )
        .await;
        assert_eq!(a.status, 401, "{token:?}");
        let a = send(&app, "GET", "/v1/spaces", None, token).await;
        assert_eq!(a.status, 401, "{token:?}");
    }
    // Metrics count every space: only a token that grants them all reads them.
    let a = send(&app, "GET", "/metrics", None, Some("tok-alpha")).await;
    assert_eq!(a.status, 403, "{}", a.text);
    assert_eq!(a.json()["code"], "forbidden");
    assert_eq!(
        send(&app, "GET", "/metrics", None, Some("tok-all"))
            .await
            .status,
        200
    );
    // Health names no space when tokens decide who sees which.
    let h = send(&app, "GET", "/health", None, None).await.json();
    assert_eq!(h["spaces"], json!([]));
}

#[tokio::test]
async fn open_spaces_share_nothing_either() {
    let tmp = tempfile::tempdir().unwrap();
    let built = build(tmp.path());
    let app = app(&built, Access::open());
    seed(&app, None).await;
    for space in SPACES {
        check_granted(&app, None, space).await;
    }
    let a = send(&app, "GET", "/v1/spaces", None, None).await;
    assert_eq!(listed(&a), SPACES);
    let h = send(&app, "GET", "/health", None, None).await.json();
    assert_eq!(h["spaces"], json!(SPACES));
}

#[test]
fn a_token_file_is_checked_against_the_served_spaces() {
    let tmp = tempfile::tempdir().unwrap();
    let served: Vec<String> = SPACES.iter().map(|s| s.to_string()).collect();
    let file = tmp.path().join("tokens");
    std::fs::write(
        &file,
        "# who sees what\ntok-a alpha\ntok-bg beta, gamma\ntok-all *\n",
    )
    .unwrap();
    let access = Access::from_file(&file, &served).unwrap();
    assert!(access.is_guarded());
    std::fs::write(&file, "tok-a alpha\ntok-s sales\n").unwrap();
    let e = Access::from_file(&file, &served).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}:2: grants the space `sales`, which is not served",
            file.display()
        )),
        "{e}"
    );
    std::fs::write(&file, "tok-a alpha\n\nloose\n").unwrap();
    let e = Access::from_file(&file, &served).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:3: a bare token", file.display())),
        "{e}"
    );
    assert!(
        e.contains("expected `TOKEN SPACE[,SPACE...]` or `TOKEN *`"),
        "{e}"
    );
}
