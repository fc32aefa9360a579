//! API documents kept in the shards (`finder_pg::write_documents`): each in the transaction
//! of its source, a refused one left as it was, the files' sources untouched.

use finder_core::Settings;
use finder_pg::{read_documents, write_documents, DocumentChange, PgConfig, PgFinder};

use crate::support;

fn put(id: &str, text: &str, vector: &[f32]) -> DocumentChange {
    let record = serde_json::json!({"id": id, "title": "Furnace", "text": text, "vector": vector});
    DocumentChange {
        id: id.to_string(),
        record: Some(record.to_string()),
    }
}

fn delete(id: &str) -> DocumentChange {
    DocumentChange {
        id: id.to_string(),
        record: None,
    }
}

fn ids(config: &PgConfig, settings: &Settings, query: &str) -> Vec<String> {
    let pg = PgFinder::open(config, settings.clone()).unwrap();
    let r = pg.search(query, settings, 0, 10).unwrap();
    r.hits.into_iter().map(|h| h.id).collect()
}

#[test]
fn api_documents_live_in_the_shards_with_their_sources() {
    let Some(server) = support::server("api documents") else {
        return;
    };
    let (one, two) = (server.database("docs"), server.database("docs"));
    let config = PgConfig {
        shards: [&one, &two]
            .iter()
            .map(|d| finder_pg::ShardUrls {
                write: d.url.clone(),
                read: Vec::new(),
            })
            .collect(),
        ..PgConfig::single(&one.url)
    };
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_records(tmp.path(), 20, 7);
    let settings = support::settings();
    finder_pg::index_inputs(&config, std::slice::from_ref(&notes), &settings).unwrap();
    let unit = |i: usize| {
        let mut v = vec![0.0; support::DIM];
        v[i] = 1.0;
        v
    };

    let report = write_documents(
        &config,
        &[
            put("kiln", "kiln glaze firing", &unit(0)),
            put("oven", "oven bread baking", &unit(1)),
            put("gone", "temporary", &unit(2)),
            delete("gone"),
        ],
        &settings,
        None,
    )
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!((report.counts.added, report.sources), (2, 22));
    let stored = read_documents(&config, None).unwrap();
    assert_eq!(stored.keys().collect::<Vec<_>>(), ["kiln", "oven"]);
    assert_eq!(ids(&config, &settings, "glaze"), ["kiln"]);

    // A put the run refuses (a vector of another length) keeps the stored document and its
    // source; the other change of the batch stands.
    let report = write_documents(
        &config,
        &[put("kiln", "kiln cracked", &[1.0, 0.0]), delete("oven")],
        &settings,
        None,
    )
    .unwrap();
    let refused: Vec<_> = report
        .problems
        .iter()
        .map(|p| p.source_id.clone())
        .collect();
    assert_eq!(refused, [Some("kiln".to_string())], "{:?}", report.problems);
    assert_eq!((report.counts.removed, report.sources), (1, 21));
    let stored = read_documents(&config, Some(&["kiln".into(), "oven".into()])).unwrap();
    assert_eq!(stored.keys().collect::<Vec<_>>(), ["kiln"]);
    assert!(stored["kiln"].contains("glaze"), "{stored:?}");
    assert_eq!(ids(&config, &settings, "glaze"), ["kiln"]);
    assert!(ids(&config, &settings, "cracked").is_empty());

    // Ids are whole: a write of `guides` is not one of `guides/setup`.
    write_documents(
        &config,
        &[
            put("guides", "guide index", &unit(3)),
            put("guides/setup", "setup walkthrough", &unit(4)),
        ],
        &settings,
        None,
    )
    .unwrap();
    let report = write_documents(&config, &[delete("guides")], &settings, None).unwrap();
    assert_eq!(report.counts.removed, 1);
    assert_eq!(ids(&config, &settings, "walkthrough"), ["guides/setup"]);

    // A record that names another id is the caller's mistake, refused before any write.
    let mut wrong = put("kiln", "kiln", &unit(0));
    wrong.id = "other".into();
    let refused = write_documents(&config, &[wrong], &settings, None).unwrap_err();
    assert!(refused.to_string().contains("`other`"), "{refused}");

    // A run of the files alone leaves the API's documents, and a rebuild reads them again.
    finder_pg::index_inputs(&config, std::slice::from_ref(&notes), &settings).unwrap();
    assert_eq!(ids(&config, &settings, "glaze"), ["kiln"]);
    let mut rebuilt = settings.clone();
    rebuilt.index.fragment_max_chars = 1_000;
    // A write that finds a rebuild due leaves it to `finder index`.
    let due = write_documents(&config, &[put("new", "new", &unit(5))], &rebuilt, None)
        .unwrap_err()
        .to_string();
    assert!(due.contains("finder index"), "{due}");
    let report = finder_pg::index_inputs(&config, std::slice::from_ref(&notes), &rebuilt).unwrap();
    assert!(report.rebuilt);
    assert_eq!(report.sources, 22, "{report:?}");
    assert_eq!(ids(&config, &rebuilt, "glaze"), ["kiln"]);
    assert_eq!(ids(&config, &rebuilt, "walkthrough"), ["guides/setup"]);
    assert!(ids(&config, &rebuilt, "new").is_empty());
}
