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
    let json = finder_pg::testing::stored_json(&row.get::<_, Vec<u8>>(0));
    let mut graph: serde_json::Value = serde_json::from_slice(&json).unwrap();
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
    let config = two_shards(&a, &b);
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

/// Every source the shards hold, as `(id, hash, origin)`, in id order.
fn stored_sources(config: &PgConfig) -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    for shard in &config.shards {
        let mut client = postgres::Client::connect(&shard.write, postgres::NoTls).unwrap();
        for row in client
            .query("SELECT id, hash, origin FROM finder_sources", &[])
            .unwrap()
        {
            all.push((row.get(0), row.get(1), row.get(2)));
        }
    }
    all.sort();
    all
}

fn two_shards(a: &support::Database, b: &support::Database) -> PgConfig {
    PgConfig {
        shards: [a, b]
            .iter()
            .map(|db| ShardUrls {
                write: db.url.clone(),
                read: Vec::new(),
            })
            .collect(),
        tls_ca: None,
    }
}

#[test]
fn a_followed_run_over_the_changed_paths_ends_where_a_run_over_every_file_does() {
    let Some(server) = support::server("focused runs") else {
        return;
    };
    let dbs: Vec<support::Database> = ["focus_a", "focus_b", "whole_a", "whole_b"]
        .iter()
        .map(|name| server.database(name))
        .collect();
    let (focused, whole) = (two_shards(&dbs[0], &dbs[1]), two_shards(&dbs[2], &dbs[3]));
    let tmp = tempfile::tempdir().unwrap();
    let inputs = write_vault(tmp.path());
    let settings = settings();
    let mut follower = finder_pg::PgFollower::default();
    let first = follower
        .index_inputs(&focused, &inputs, &settings, None, &mut |_| {})
        .unwrap();
    assert_eq!(first.graph.unwrap().records_read, first.sources as usize);
    let notes = inputs[0].canonicalize().unwrap();

    // Each step changes files and hands the run the paths a watcher would report.
    let step = |follower: &mut finder_pg::PgFollower,
                what: &str,
                changed: &[PathBuf],
                expected: (u64, u64, u64)| {
        let run = follower
            .index_changed(&focused, &inputs, changed, &settings, None, &mut |_| {})
            .unwrap();
        let c = run.counts;
        // Nothing outside the changed paths is read: no source is found unchanged.
        assert_eq!(
            (c.added, c.updated, c.removed, c.unchanged),
            (expected.0, expected.1, expected.2, 0),
            "{what}: {c:?}"
        );
        // The follower held every source's record: the graph read none from the shards.
        assert_eq!(run.graph.unwrap().records_read, 0, "{what}");
        let built = finder_pg::index_inputs(&whole, &inputs, &settings).unwrap();
        assert_eq!(built.sources, run.sources, "{what}");
        assert_eq!(
            stored_sources(&focused),
            stored_sources(&whole),
            "{what}: the sources differ from a run over every file"
        );
        assert_eq!(
            stored_graph(&dbs[0].url),
            stored_graph(&dbs[2].url),
            "{what}: the graph differs from a run over every file"
        );
        let (a, b) = (
            PgFinder::open(&focused, settings.clone()).unwrap(),
            PgFinder::open(&whole, settings.clone()).unwrap(),
        );
        for q in QUERIES {
            let x = a.search(q, &settings, 0, 10).unwrap();
            let y = b.search(q, &settings, 0, 10).unwrap();
            assert_eq!(ranking(&x), ranking(&y), "{what}: `{q}`");
        }
    };

    std::fs::write(
        notes.join("kiln-2.md"),
        "# kiln 2\n\nNow about the [[harbor-1]] ferry and its mooring.\n",
    )
    .unwrap();
    step(
        &mut follower,
        "an edit",
        &[notes.join("kiln-2.md")],
        (0, 1, 0),
    );

    std::fs::create_dir_all(notes.join("sheds")).unwrap();
    std::fs::write(
        notes.join("sheds/tool-shed.md"),
        "# Tool shed\n\nPruning saws for the [[orchard-2]]. #orchard\n",
    )
    .unwrap();
    // An empty note is stored with one empty fragment, which the graph holds too.
    std::fs::write(notes.join("sheds/empty.md"), "").unwrap();
    std::fs::remove_file(notes.join("harbor-4.md")).unwrap();
    let changed = [notes.join("sheds"), notes.join("harbor-4.md")];
    step(
        &mut follower,
        "a new folder and a delete",
        &changed,
        (2, 0, 1),
    );

    std::fs::rename(notes.join("sheds"), notes.join("barns")).unwrap();
    let changed = [notes.join("sheds"), notes.join("barns")];
    step(&mut follower, "a folder renamed", &changed, (2, 0, 2));

    // Another writer's run: the follower's records are behind, and the next build reads the
    // shards again.
    std::fs::write(
        notes.join("orchard-1.md"),
        "# orchard 1\n\nBlossom and frost, after the [[kiln-2]] firing.\n",
    )
    .unwrap();
    finder_pg::index_inputs(&focused, &inputs, &settings).unwrap();
    std::fs::write(notes.join("orchard-1.md"), "# orchard 1\n\nFrost again.\n").unwrap();
    let orchard = [notes.join("orchard-1.md")];
    let run = follower
        .index_changed(&focused, &inputs, &orchard, &settings, None, &mut |_| {})
        .unwrap();
    assert_eq!(run.graph.unwrap().records_read, run.sources as usize);
    // A save that changed nothing builds no graph, and keeps what the follower holds.
    let run = follower
        .index_changed(&focused, &inputs, &orchard, &settings, None, &mut |_| {})
        .unwrap();
    assert_eq!((run.counts.unchanged, run.graph.is_none()), (1, true));
    std::fs::write(
        notes.join("kiln-2.md"),
        "# kiln 2\n\nBack to glaze and cone.\n",
    )
    .unwrap();
    step(
        &mut follower,
        "an edit after that",
        &[notes.join("kiln-2.md")],
        (0, 1, 0),
    );
}

#[test]
fn a_followed_run_that_lost_its_model_leaves_the_vectors_as_they_are() {
    let Some(server) = support::server("lost model") else {
        return;
    };
    let db = server.database("lost_model");
    let config = PgConfig::single(&db.url);
    let tmp = tempfile::tempdir().unwrap();
    let inputs = write_vault(tmp.path());
    let settings = settings();
    finder_pg::index_inputs(&config, &inputs, &settings).unwrap();
    // A watch whose model did not load: the run would rebuild every shard without vectors.
    let mut without = settings.clone();
    without.embed.backend = finder_core::EmbedBackend::Minilm;
    let mut follower = finder_pg::PgFollower::default();
    let refused = follower
        .index_inputs(&config, &inputs, &without, None, &mut |_| {})
        .unwrap_err();
    assert!(refused.to_string().contains("did not load"), "{refused}");
    let records = PgFinder::open(&config, settings.clone())
        .unwrap()
        .read_records()
        .unwrap();
    assert_eq!(records[0].model.as_deref(), Some("precomputed/8"));
    assert_eq!(records[0].generation, 1);
    // Without vectors on purpose, the run rebuilds the shards without them.
    without.embed.backend = finder_core::EmbedBackend::None;
    let run = follower
        .index_inputs(&config, &inputs, &without, None, &mut |_| {})
        .unwrap();
    assert!(run.rebuilt);
}
