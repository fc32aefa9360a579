//! The read routes through the router: search, context, recommend, status, health, metrics,
//! the OpenAPI document and the page.

use serde_json::{json, Value};

use crate::support::{call, fixture, ids, send};

#[tokio::test]
async fn search_returns_ranked_hits_with_hints_explain_facets_and_diagnostics() {
    let (_tmp, app) = fixture();
    let r = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "expired refresh token"}),
        200,
    )
    .await;
    assert_eq!(r["space"], "default");
    let hits = ids(&r);
    assert_eq!(hits.first().map(String::as_str), Some("tokens.md"), "{r:#}");
    let top = &r["hits"][0];
    assert_eq!(top["rank"], 1);
    assert_eq!(top["score"], 1.0);
    assert_eq!(top["envelope"]["title"], "Refresh tokens");
    let hint = &top["hints"][0];
    assert!(
        hint["preview"].as_str().unwrap().contains("expired"),
        "{hint}"
    );
    assert!(hint["extent"]["line_start"].as_u64().unwrap() >= 1);
    assert!(hint["extent"]["line_end"].as_u64() >= hint["extent"]["line_start"].as_u64());
    let part = &top["explain"]["parts"][0];
    assert_eq!(part["lists"][0]["channel"], "lexical");
    assert_eq!(part["lists"][0]["rank"], 1);
    // Facets count the returned hits.
    let n_auth = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| {
            h["envelope"]["tags"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("auth")))
        })
        .count();
    assert_eq!(r["facets"]["tags"]["auth"], n_auth);
    assert!(r["facets"]["extras"]["team"]["identity"].as_u64().unwrap() >= 1);
    let channels: Vec<&str> = r["diagnostics"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["channel"].as_str().unwrap())
        .collect();
    assert!(channels.contains(&"lexical"), "{channels:?}");
    assert!(!r["diagnostics"]["stages"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn search_applies_settings_overrides_and_paging() {
    let (_tmp, app) = fixture();
    let body = json!({"query": "token", "settings": {"finder.max_hints": 1, "lexical.k1": 0.9, "lexical.trigram": "off"}});
    let r = call(&app, "POST", "/v1/search", body, 200).await;
    for hit in r["hits"].as_array().unwrap() {
        assert!(hit["hints"].as_array().unwrap().len() <= 1, "{hit}");
    }
    let trigram = r["diagnostics"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel"] == "trigram")
        .cloned()
        .unwrap();
    assert_eq!(trigram["status"], "skipped");

    let all = ids(&call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "limit": 10}),
        200,
    )
    .await);
    let second = call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "token", "limit": 1, "offset": 1}),
        200,
    )
    .await;
    assert!(all.len() >= 2, "{all:?}");
    assert_eq!(ids(&second), vec![all[1].clone()]);
    assert_eq!(second["hits"][0]["rank"], 2);
}

#[tokio::test]
async fn context_cites_sources_and_stays_within_the_budget() {
    let (_tmp, app) = fixture();
    let wide = call(
        &app,
        "POST",
        "/v1/context",
        json!({"query": "refresh token", "budget_chars": 5000}),
        200,
    )
    .await;
    let pieces = wide["pieces"].as_array().unwrap();
    assert!(pieces.len() >= 2, "{wide:#}");
    assert_eq!(pieces[0]["n"], 1);
    assert_eq!(pieces[0]["source_id"], "tokens.md");
    assert!(pieces[0]["extent"]["line_start"].as_u64().unwrap() >= 1);
    let text = wide["text"].as_str().unwrap();
    assert!(
        text.starts_with("[1] Refresh tokens — tokens.md L"),
        "{text}"
    );
    assert_eq!(
        wide["used_chars"].as_u64().unwrap() as usize,
        text.chars().count()
    );
    // Best passage first.
    let scores: Vec<f64> = pieces
        .iter()
        .map(|p| p["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");

    for budget in [200usize, 260, 400] {
        let narrow = call(
            &app,
            "POST",
            "/v1/context",
            json!({"query": "refresh token", "budget_chars": budget}),
            200,
        )
        .await;
        let used = narrow["used_chars"].as_u64().unwrap() as usize;
        assert!(used <= budget, "used {used} of {budget}: {narrow:#}");
        assert_eq!(used, narrow["text"].as_str().unwrap().chars().count());
        if wide["used_chars"].as_u64().unwrap() as usize > budget {
            let cut = narrow["pieces"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["truncated"] == true);
            assert!(cut || narrow["omitted"].as_u64() > Some(0), "{narrow:#}");
        }
    }

    let tokens = call(
        &app,
        "POST",
        "/v1/context",
        json!({"query": "refresh token", "budget_tokens": 100}),
        200,
    )
    .await;
    assert_eq!(tokens["budget_chars"], 400);
    assert!(tokens["used_chars"].as_u64().unwrap() <= 400);
}

#[tokio::test]
async fn recommend_finds_neighbours_of_a_source_without_itself() {
    let (_tmp, app) = fixture();
    let r = call(
        &app,
        "POST",
        "/v1/recommend",
        json!({"target": "tokens.md", "limit": 3}),
        200,
    )
    .await;
    // No model in tests: the lexical lists and the graph (if the fixture links) found them.
    assert!(r["basis"].as_str().unwrap().starts_with("lexical"), "{r:#}");
    assert!(
        r["query"].as_str().unwrap().contains("Refresh tokens"),
        "{r:#}"
    );
    let hits = ids(&r);
    assert!(!hits.contains(&"tokens.md".to_string()));
    // The other note about refresh tokens is among the neighbours.
    assert!(hits.contains(&"sessions.md".to_string()), "{hits:?}");
    assert_eq!(r["hits"][0]["rank"], 1);

    let missing = call(
        &app,
        "POST",
        "/v1/recommend",
        json!({"target": "nope.md"}),
        404,
    )
    .await;
    assert_eq!(missing["code"], "unknown_target");
}

#[tokio::test]
async fn status_health_spaces_and_metrics() {
    let (_tmp, app) = fixture();
    let s = call(&app, "GET", "/v1/status", Value::Null, 200).await;
    assert_eq!(s["built"], true);
    assert_eq!(s["building"], false);
    assert_eq!(s["index"]["sources"], 4);
    assert_eq!(s["api_documents"], 0);

    let h = call(&app, "GET", "/health", Value::Null, 200).await;
    assert_eq!(h["status"], "ok");
    assert_eq!(h["spaces"], json!(["default"]));

    let spaces = call(&app, "GET", "/v1/spaces", Value::Null, 200).await;
    assert_eq!(
        spaces["spaces"],
        json!([{"name": "default", "built": true, "sources": 4}])
    );

    call(&app, "POST", "/v1/search", json!({"query": "backup"}), 200).await;
    call(
        &app,
        "POST",
        "/v1/search",
        json!({"query": "backup", "limit": 0}),
        400,
    )
    .await;
    let m = send(&app, "GET", "/metrics", None, None).await;
    assert_eq!(m.status, 200);
    assert!(m.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert!(
        m.text.contains(
            "finder_http_requests_total{route=\"/v1/search\",method=\"POST\",status=\"200\"} 1"
        ),
        "{}",
        m.text
    );
    assert!(
        m.text.contains(
            "finder_http_requests_total{route=\"/v1/search\",method=\"POST\",status=\"400\"} 1"
        ),
        "{}",
        m.text
    );
    assert!(
        m.text.contains(
            "finder_http_request_duration_seconds_count{route=\"/v1/search\",method=\"POST\"} 2"
        ),
        "{}",
        m.text
    );
    assert!(
        m.text.contains("finder_space_sources{space=\"default\"} 4"),
        "{}",
        m.text
    );
}

#[tokio::test]
async fn the_page_and_its_assets_come_from_the_binary() {
    let (_tmp, app) = fixture();
    let page = send(&app, "GET", "/", None, None).await;
    assert_eq!(page.status, 200);
    assert!(page.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(page
        .text
        .contains("<script src=\"/assets/app.js\"></script>"));
    assert!(
        !page.text.contains("http://") && !page.text.contains("https://"),
        "no external assets"
    );
    for (asset, kind) in [
        ("app.js", "text/javascript"),
        ("style.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let a = send(&app, "GET", &format!("/assets/{asset}"), None, None).await;
        assert_eq!(a.status, 200, "{asset}");
        assert!(a.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with(kind));
        assert!(!a.text.is_empty());
    }
    assert_eq!(
        send(&app, "GET", "/assets/nope.js", None, None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn openapi_covers_every_route() {
    let (_tmp, app) = fixture();
    let doc = call(&app, "GET", "/openapi.json", Value::Null, 200).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for prefix in ["/v1", "/v1/spaces/{space}"] {
        for (path, method) in [
            ("/search", "post"),
            ("/context", "post"),
            ("/recommend", "post"),
            ("/status", "get"),
            ("/documents/{id}", "put"),
            ("/documents/{id}", "get"),
            ("/documents/{id}", "delete"),
        ] {
            let full = format!("{prefix}{path}");
            assert!(
                paths.get(&full).and_then(|p| p.get(method)).is_some(),
                "{method} {full} missing"
            );
        }
    }
    for path in ["/", "/health", "/metrics", "/openapi.json", "/v1/spaces"] {
        assert!(paths[path]["get"].is_object(), "{path} missing");
    }
    // Every $ref resolves.
    let text = doc.to_string();
    for piece in text.split("#/components/schemas/").skip(1) {
        let name: String = piece.chars().take_while(|c| c.is_alphanumeric()).collect();
        assert!(
            doc["components"]["schemas"][&name].is_object(),
            "dangling $ref {name}"
        );
    }
}

#[tokio::test]
async fn search_takes_filters_scope_sort_and_min_score() {
    let (_tmp, app) = fixture();
    let body = json!({"query": "token", "filters": {"TEAM": "Identity"}});
    let r = call(&app, "POST", "/v1/search", body, 200).await;
    let hits = ids(&r);
    assert!(!hits.is_empty());
    for h in r["hits"].as_array().unwrap() {
        assert_eq!(h["envelope"]["extras"]["team"], "identity", "{h}");
        let rel = h["relevance"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&rel), "{rel}");
    }
    let unfiltered = ids(&call(&app, "POST", "/v1/search", json!({"query": "token"}), 200).await);
    assert_eq!(
        r["diagnostics"]["refine"]["filtered_out"].as_u64().unwrap() as usize,
        unfiltered.len() - hits.len()
    );

    let body = json!({"query": "token", "scope": ["backups.md"]});
    let r = call(&app, "POST", "/v1/search", body, 200).await;
    assert!(ids(&r).iter().all(|id| id == "backups.md"), "{r:#}");

    let body = json!({"query": "token", "min_score": 1.0});
    let r = call(&app, "POST", "/v1/search", body, 200).await;
    assert!(ids(&r).len() < unfiltered.len());

    let body = json!({"query": "token", "sort": "sideways"});
    let r = call(&app, "POST", "/v1/search", body, 400).await;
    assert!(
        r["message"].as_str().unwrap().contains("refine.sort"),
        "{r}"
    );
    let body = json!({"query": "token", "min_score": 2});
    call(&app, "POST", "/v1/search", body, 400).await;
}
