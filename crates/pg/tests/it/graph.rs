//! The relation graph over PostgreSQL: built from every shard by the indexing run, it boosts
//! and explains as the embedded index's graph does over the same inputs.

use std::path::{Path, PathBuf};

use finder_core::{Channel, ChannelStatus, SearchResponse, Settings};
use finder_index::Finder;
use finder_pg::{PgConfig, PgFinder, ShardUrls};

use crate::support;

/// A small linked vault: chains of wiki-links, tags, and a record file with an entity and
/// declared relations, so every kind of edge is there.
fn write_vault(root: &Path) -> Vec<PathBuf> {
    let notes = root.join("vault");
    std::fs::create_dir_all(&notes).unwrap();
    let topics = [
        ("kiln", "glaze firing cone temperature"),
        ("harbor", "tide mooring ferry schedule"),
        ("orchard", "graft pruning blossom frost"),
    ];
    for (t, (name, words)) in topics.iter().enumerate() {
        for i in 0..8 {
            let next = format!("{name}-{}", (i + 1) % 8);
            let other = topics[(t + 1) % topics.len()].0;
            // Term counts and lengths differ from note to note, so no two score alike.
            let varied: Vec<&str> = words
                .split(' ')
                .enumerate()
                .flat_map(|(w, word)| std::iter::repeat_n(word, 1 + (i * (w + 1) + t) % 4))
                .chain(std::iter::repeat_n("aside", i * 2 + t))
                .collect();
            let body =
                format!(
                "---\ntags: [{name}]\n---\n# {name} {i}\n\nNotes on {} number {i}. See [[{next}]] \
                 and the [[{other}-{i}]] page. #{name}\n\nA second paragraph about {words} with \
                 detail {i}{}.\n",
                varied.join(" "),
                if i % 3 == t { " and Ada Quill's method" } else { "" }
            );
            std::fs::write(notes.join(format!("{name}-{i}.md")), body).unwrap();
        }
    }
    let records = root.join("records.jsonl");
    let lines = [
        serde_json::json!({"id": "ada", "kind": "entity", "title": "Ada Quill",
            "aliases": ["A. Quill"], "text": "Ada Quill, a potter who wrote about kilns."}),
        serde_json::json!({"id": "log-1", "title": "Firing log",
            "text": "The firing log of the winter batch.",
            "relations": [{"to": "ada", "kind": "written_by"}, {"to": "kiln-3.md"}]}),
        serde_json::json!({"id": "log-2", "title": "Ferry log",
            "text": "Crossing times kept at the harbor office.",
            "relations": [{"to": "harbor-5.md", "kind": "about"}]}),
    ];
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&records, text.join("\n")).unwrap();
    vec![notes, records]
}

fn settings() -> Settings {
    let mut s = support::settings();
    s.graph.build = true;
    s
}

fn ranking(r: &SearchResponse) -> Vec<(String, f64)> {
    r.hits.iter().map(|h| (h.id.clone(), h.score)).collect()
}

fn boost_ran(r: &SearchResponse) -> bool {
    r.diagnostics
        .boost
        .as_ref()
        .is_some_and(|b| b.status == ChannelStatus::Ran)
}

const QUERIES: &[&str] = &[
    "glaze firing",
    "tide mooring ferry",
    "graft pruning frost",
    "Ada Quill",
    "kiln 3",
    "firing log",
    "harbor office crossing",
    "blossom",
];

#[test]
fn graph_boost_matches_the_embedded_engine_and_spans_shards() {
    let Some(server) = support::server("graph parity") else {
        return;
    };
    let (whole, a, b) = (
        server.database("graph_whole"),
        server.database("graph_a"),
        server.database("graph_b"),
    );
    let tmp = tempfile::tempdir().unwrap();
    let inputs = write_vault(tmp.path());
    let settings = settings();
    let index = tmp.path().join("index");
    let embedded_run = finder_index::index_inputs(&index, &inputs, &settings, &mut |_| {}).unwrap();
    let one = PgConfig::single(&whole.url);
    let two = PgConfig {
        shards: vec![
            ShardUrls {
                write: a.url.clone(),
                read: Vec::new(),
            },
            ShardUrls {
                write: b.url.clone(),
                read: Vec::new(),
            },
        ],
        tls_ca: None,
    };
    let run_one = finder_pg::index_inputs(&one, &inputs, &settings).unwrap();
    let run_two = finder_pg::index_inputs(&two, &inputs, &settings).unwrap();
    let (g1, g2) = (run_one.graph.unwrap(), run_two.graph.unwrap());
    let built = embedded_run.graph.expect("the embedded run built a graph");
    for g in [&g1, &g2] {
        assert_eq!(
            (g.fragments, g.entities, g.edges, &g.kinds),
            (built.fragments, built.entities, built.edges, &built.kinds),
            "the graph over PostgreSQL differs from the embedded one"
        );
    }
    assert!(g1.kinds.contains_key("links_to") && g1.kinds.contains_key("tagged"));

    let embedded = Finder::open(&index, settings.clone()).unwrap();
    let pg_one = PgFinder::open(&one, settings.clone()).unwrap();
    let pg_two = PgFinder::open(&two, settings.clone()).unwrap();
    let mut boosted = 0;
    for q in QUERIES {
        let e = embedded.search(q, &settings, 0, 10).unwrap();
        let p1 = pg_one.search(q, &settings, 0, 10).unwrap();
        let p2 = pg_two.search(q, &settings, 0, 10).unwrap();
        assert!(
            boost_ran(&p1) && boost_ran(&p2),
            "`{q}`: {:?}",
            p1.diagnostics.boost
        );
        boosted += usize::from(boost_ran(&e));
        let (re, r1, r2) = (ranking(&e), ranking(&p1), ranking(&p2));
        let names = |r: &[(String, f64)]| r.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&re), names(&r1), "`{q}`: embedded vs PostgreSQL");
        assert_eq!(names(&r1), names(&r2), "`{q}`: one shard vs two");
        for (x, y) in re.iter().zip(&r1).chain(r1.iter().zip(&r2)) {
            assert!((x.1 - y.1).abs() < 1e-6, "`{q}`: {x:?} vs {y:?}");
        }
        // The entity channel runs over PostgreSQL too.
        let entities = p1
            .diagnostics
            .channels
            .iter()
            .find(|c| c.channel == Channel::Entities)
            .map(|c| c.status);
        assert_eq!(entities, Some(ChannelStatus::Ran), "`{q}`");
    }
    assert_eq!(boosted, QUERIES.len());

    // A run that changes nothing keeps the graph; one that changes a note rebuilds it.
    let again = finder_pg::index_inputs(&two, &inputs, &settings).unwrap();
    assert!(again.graph.is_none(), "an unchanged run rebuilt the graph");
    std::fs::write(
        inputs[0].join("kiln-0.md"),
        "# kiln 0\n\nRewritten: glaze notes that now link [[orchard-4]].\n",
    )
    .unwrap();
    let changed = finder_pg::index_inputs(&two, &inputs, &settings).unwrap();
    assert_eq!(changed.counts.updated, 1);
    assert!(changed.graph.is_some());
    // A query node opened before the change reports its graph as behind, not wrong.
    let r = pg_two.search("glaze", &settings, 0, 5).unwrap();
    assert!(!r.hits.is_empty());
    let fresh = PgFinder::open(&two, settings.clone()).unwrap();
    assert!(boost_ran(&fresh.search("glaze", &settings, 0, 5).unwrap()));
}

#[test]
fn a_query_node_without_a_stored_graph_says_why() {
    let Some(server) = support::server("graph absent") else {
        return;
    };
    let db = server.database("graph_none");
    let tmp = tempfile::tempdir().unwrap();
    let inputs = write_vault(tmp.path());
    let config = PgConfig::single(&db.url);
    let run = finder_pg::index_inputs(&config, &inputs, &support::settings()).unwrap();
    assert!(run.graph.is_none());
    let settings = settings();
    let pg = PgFinder::open(&config, settings.clone()).unwrap();
    let r = pg.search("glaze firing", &settings, 0, 5).unwrap();
    assert!(!r.hits.is_empty());
    let boost = r.diagnostics.boost.expect("the boost reports");
    assert_ne!(boost.status, ChannelStatus::Ran);
    assert!(
        boost
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("no graph stored"),
        "{boost:?}"
    );
}
