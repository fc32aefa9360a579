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

/// The graph stored on shard 0 as JSON, without what differs between two builds of the same
/// sources (the commit it was built from, how many texts it read).
fn stored_graph(url: &str) -> serde_json::Value {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let row = client
        .query_one("SELECT data FROM finder_graph WHERE id = 1", &[])
        .unwrap();
    let mut graph: serde_json::Value = serde_json::from_slice(&row.get::<_, Vec<u8>>(0)).unwrap();
    let fields = graph.as_object_mut().unwrap();
    fields.remove("built_from");
    fields.remove("texts_read");
    graph
}

/// Forgets the stored graph and what its build found, so the next run builds it from
/// nothing; returns the parts it held.
fn forget_graph(url: &str) -> Vec<u8> {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let parts = client
        .query_one("SELECT data FROM finder_graph_parts WHERE id = 1", &[])
        .unwrap()
        .get(0);
    client
        .batch_execute("DELETE FROM finder_graph; DELETE FROM finder_graph_parts")
        .unwrap();
    parts
}

/// Puts back parts [`forget_graph`] returned, so the next build goes on from them.
fn restore_parts(url: &str, parts: &[u8]) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client
        .execute(
            "UPDATE finder_graph_parts SET data = $1 WHERE id = 1",
            &[&parts],
        )
        .unwrap();
}

#[test]
fn a_run_reads_only_the_changed_texts_and_builds_the_graph_a_fresh_build_would() {
    let Some(server) = support::server("graph incremental") else {
        return;
    };
    let (a, b) = (
        server.database("graph_inc_a"),
        server.database("graph_inc_b"),
    );
    let config = PgConfig {
        shards: [&a, &b]
            .iter()
            .map(|db| ShardUrls {
                write: db.url.clone(),
                read: Vec::new(),
            })
            .collect(),
        tls_ca: None,
    };
    let tmp = tempfile::tempdir().unwrap();
    let inputs = write_vault(tmp.path());
    let settings = settings();
    let index = tmp.path().join("index");
    let first = finder_pg::index_inputs(&config, &inputs, &settings).unwrap();
    let first = first.graph.unwrap();
    assert_eq!(
        first.texts_read, first.fragments,
        "the first build reads every text"
    );

    // Each step changes the notes, runs, and checks the graph against the embedded index's
    // over the same files and against a build from nothing over the same shards.
    let check = |step: &str, at_most: usize| {
        let run = finder_pg::index_inputs(&config, &inputs, &settings).unwrap();
        let graph = run.graph.expect("a changing run rebuilds the graph");
        assert!(
            graph.texts_read <= at_most,
            "{step}: read {} texts, expected at most {at_most}",
            graph.texts_read
        );
        let embedded = finder_index::index_inputs(&index, &inputs, &settings, &mut |_| {})
            .unwrap()
            .graph
            .unwrap();
        assert_eq!(
            (graph.fragments, graph.entities, graph.edges, &graph.kinds),
            (
                embedded.fragments,
                embedded.entities,
                embedded.edges,
                &embedded.kinds
            ),
            "{step}: the graph over PostgreSQL differs from the embedded one"
        );
        let kept = stored_graph(&a.url);
        let parts = forget_graph(&a.url);
        let fresh = finder_pg::index_inputs(&config, &inputs, &settings).unwrap();
        let fresh = fresh.graph.unwrap();
        assert_eq!(
            fresh.texts_read, fresh.fragments,
            "{step}: a fresh build reads all"
        );
        assert_eq!(
            kept,
            stored_graph(&a.url),
            "{step}: differs from a fresh build"
        );
        // The next step goes on from the parts of this step's build, not the fresh one's.
        restore_parts(&a.url, &parts);
    };
    finder_index::index_inputs(&index, &inputs, &settings, &mut |_| {}).unwrap();

    // An edit under the same title: only its texts are read.
    std::fs::write(
        inputs[0].join("kiln-0.md"),
        "# kiln 0\n\nRewritten: glaze notes that now link [[orchard-4]] and mention harbor 2.\n",
    )
    .unwrap();
    check("an edit", 2);
    // A note gone, one renamed: the kept hits of every other text stand.
    std::fs::remove_file(inputs[0].join("harbor-3.md")).unwrap();
    std::fs::rename(
        inputs[0].join("orchard-6.md"),
        inputs[0].join("orchard-six.md"),
    )
    .unwrap();
    check("a delete and a rename", 2);
    // A new title is a new name to look for: every text is read again.
    std::fs::write(
        inputs[0].join("lantern.md"),
        "# Lantern Works\n\nA workshop by the harbor, near kiln 1.\n",
    )
    .unwrap();
    std::fs::write(
        inputs[0].join("kiln-1.md"),
        "# kiln 1\n\nThe kiln behind Lantern Works.\n",
    )
    .unwrap();
    // An empty note (a source without fragments) is named by its file.
    std::fs::write(inputs[0].join("empty.md"), "").unwrap();
    check("a new title", usize::MAX);
}
