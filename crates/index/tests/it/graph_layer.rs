//! The graph layer end to end: extraction at index time, the boost with its explain, the
//! entities channel, recommend, and what happens without a graph.

use finder_core::{ChannelStatus, Query, Settings};
use finder_index::IndexError;

use crate::support::Fixture;

fn vault(fx: &Fixture) -> std::path::PathBuf {
    fx.write(
        "notes/nolan.md",
        "---\ntags: [people]\n---\n# Christopher Nolan\n\nA director of long, puzzling films.\n",
    );
    fx.write(
        "notes/inception.md",
        "# Inception\n\nA heist inside dreams, directed by [[nolan]]. #film\n",
    );
    fx.write(
        "notes/memento.md",
        "# Memento\n\nAnother Christopher Nolan film, told backwards. See [[missing note]].\n",
    );
    fx.write(
        "notes/garden.md",
        "# Gardening\n\nTomatoes need sun and water.\n",
    );
    fx.path("notes")
}

fn lexical_only() -> Settings {
    let mut s = Settings::default();
    s.vector.enabled = false;
    s
}

#[test]
fn notes_become_a_graph_of_links_tags_and_mentions() {
    let fx = Fixture::new();
    let notes = vault(&fx);
    let report = fx.index(&[&notes], &Settings::default());
    let graph = report.graph.expect("graph built");
    let kind = |k: &str| graph.kinds.get(k).copied().unwrap_or(0);
    // inception → nolan, memento → the missing note.
    assert_eq!(kind("links_to"), 2, "{graph:?}");
    // memento names "Christopher Nolan".
    assert_eq!(kind("mentions"), 1, "{graph:?}");
    // #film inline, `people` from front matter.
    assert_eq!(kind("tagged"), 2, "{graph:?}");
    // Entities: the missing note and two tags.
    assert_eq!(graph.entities, 3, "{graph:?}");

    // Unchanged inputs leave the graph alone; an edit rebuilds it.
    let again = fx.index(&[&notes], &Settings::default());
    assert!(again.graph.is_none());
    fx.write("notes/memento.md", "# Memento\n\nTold backwards.\n");
    let edited = fx.index(&[&notes], &Settings::default()).graph.unwrap();
    assert_eq!(edited.kinds.get("links_to"), Some(&1));
    assert_eq!(edited.kinds.get("mentions"), None);
}

/// A graph built with other `[graph]` settings (an index made with `--config`) is current for
/// its commit; the status read with other settings says so instead of calling it behind.
#[test]
fn status_tells_a_graph_of_other_settings_from_one_behind() {
    let fx = Fixture::new();
    let notes = vault(&fx);
    let mut label_first = Settings::default();
    label_first.graph.link_order = finder_core::LinkOrder::LabelFirst;
    fx.index(&[&notes], &label_first);
    let status = |settings: &Settings| {
        finder_index::Finder::open(&fx.index_dir(), settings.clone())
            .unwrap()
            .status()
            .unwrap()
            .graph
            .expect("a graph")
    };
    let same = status(&label_first);
    assert!(same.current && !same.other_settings, "{same:?}");
    let other = status(&Settings::default());
    assert!(other.current && other.other_settings, "{other:?}");
}

#[test]
fn the_boost_carries_relevance_along_links_and_explains_the_path() {
    let fx = Fixture::new();
    let notes = vault(&fx);
    fx.index(&[&notes], &Settings::default());
    let finder = fx.open();
    // The boost alone: the neighbours channel would list the director as well.
    let mut settings = lexical_only();
    settings.graph.neighbours = false;
    let r = finder.search("heist dreams", &settings, 0, 10).unwrap();
    let ids: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids[0], "inception.md", "{ids:?}");
    // The director's note shares no word with the query: the link brought it.
    let nolan = r
        .hits
        .iter()
        .find(|h| h.id == "nolan.md")
        .unwrap_or_else(|| panic!("{ids:?}"));
    let part = &nolan.explain.parts[0];
    assert!(part.lists.is_empty() && part.boost > 0.0, "{part:?}");
    assert_eq!(part.via.as_deref(), Some("via \"Inception\" (links_to)"));
    let boost = r.diagnostics.boost.as_ref().unwrap();
    assert_eq!(boost.status, ChannelStatus::Ran);
    assert!(boost.added >= 1, "{boost:?}");
    // The boost only adds: the lexical hit keeps its place, and without it the note is gone.
    let mut off = settings.clone();
    off.graph.boost = false;
    let plain = finder.search("heist dreams", &off, 0, 10).unwrap();
    assert_eq!(plain.hits[0].id, "inception.md");
    assert!(plain.hits.iter().all(|h| h.id != "nolan.md"));
    assert!(plain.hits[0].explain.parts[0].boost == 0.0);
}

#[test]
fn a_query_naming_a_title_seeds_that_source() {
    let fx = Fixture::new();
    let notes = vault(&fx);
    fx.index(&[&notes], &Settings::default());
    let finder = fx.open();
    let r = finder
        .search("what did christopher nolan make", &lexical_only(), 0, 10)
        .unwrap();
    let entities = r
        .diagnostics
        .channels
        .iter()
        .find(|c| c.channel == finder_core::Channel::Entities)
        .unwrap();
    assert_eq!((entities.status, entities.hits), (ChannelStatus::Ran, 1));
    assert_eq!(r.hits[0].id, "nolan.md");
    assert_eq!(r.diagnostics.boost.as_ref().unwrap().named, 0);
}

#[test]
fn recommend_follows_the_graph_from_a_source_and_leaves_it_out() {
    let fx = Fixture::new();
    let notes = vault(&fx);
    fx.index(&[&notes], &Settings::default());
    let finder = fx.open();
    let request = Query {
        like: Some("inception.md".into()),
        limit: 10,
        ..Query::default()
    };
    let r = finder.query(&request, &lexical_only()).unwrap();
    let ids: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids.first(), Some(&"nolan.md"), "{ids:?}");
    assert!(!ids.contains(&"inception.md"));
    assert!(!ids.contains(&"garden.md"), "{ids:?}");
    let unknown = Query {
        like: Some("nope.md".into()),
        limit: 10,
        ..Query::default()
    };
    match finder.query(&unknown, &lexical_only()) {
        Err(IndexError::UnknownSource(id)) => assert_eq!(id, "nope.md"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_a_graph_the_boost_says_why_and_search_still_answers() {
    let fx = Fixture::new();
    let notes = vault(&fx);
    let mut no_graph = Settings::default();
    no_graph.graph.build = false;
    let report = fx.index(&[&notes], &no_graph);
    assert!(report.graph.is_none());
    assert!(answers_without_the_boost(&fx).contains("no graph built"));
}

/// Searches the vault with the boost unavailable: the lexical answer stands, the boost is
/// degraded; returns its reason.
fn answers_without_the_boost(fx: &Fixture) -> String {
    let r = fx
        .open()
        .search("heist dreams", &lexical_only(), 0, 10)
        .unwrap();
    assert_eq!(r.hits[0].id, "inception.md");
    let boost = r.diagnostics.boost.unwrap();
    assert_eq!(boost.status, ChannelStatus::Degraded);
    boost.reason.expect("a degraded boost says why")
}

#[test]
fn a_graph_file_of_a_later_format_is_refused_with_why_and_search_still_answers() {
    let fx = Fixture::new();
    let notes = vault(&fx);
    fx.index(&[&notes], &Settings::default());
    let path = fx.index_dir().join("graph/graph.json");
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let format = file["format"].as_u64().expect("the file says its format");
    file["format"] = (format + 1).into();
    std::fs::write(&path, file.to_string()).unwrap();

    let reason = answers_without_the_boost(&fx);
    assert!(
        reason.contains(&format!("graph format {} is a later Finder's", format + 1)),
        "{reason}"
    );
}

/// The dendron vault's built graph against its `links.tsv`: 3,010 resolved occurrences,
/// 2,346 distinct note pairs (from its SOURCE.md). Skipped when the data is absent.
#[test]
fn the_dendron_vault_graph_matches_its_links_tsv() {
    let vault = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/dendron_site_vault");
    if !vault.join("links.tsv").is_file() {
        eprintln!("skipping: {} not present", vault.display());
        return;
    }
    let tsv = std::fs::read_to_string(vault.join("links.tsv")).unwrap();
    let rows: Vec<(&str, &str)> = tsv
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((f.next()?, f.next()?))
        })
        .collect();
    let pairs: std::collections::HashSet<&(&str, &str)> = rows.iter().collect();
    let fx = Fixture::new();
    let mut settings = Settings::default();
    settings.graph.link_order = finder_core::LinkOrder::LabelFirst;
    let report = fx.index(&[&vault], &settings);
    let graph = report.graph.expect("graph built");
    let within = |got: usize, want: usize| (got as f64 - want as f64).abs() / want as f64 <= 0.02;
    eprintln!(
        "dendron graph: {} link occurrences (links.tsv {}), {} source pairs (links.tsv {})",
        graph.link_occurrences,
        rows.len(),
        graph.source_links,
        pairs.len()
    );
    assert!(within(graph.link_occurrences, rows.len()), "{graph:?}");
    assert!(within(graph.source_links, pairs.len()), "{graph:?}");
}

#[test]
fn declared_entities_seed_the_graph_and_never_rank() {
    let fx = Fixture::new();
    let lines = [
        serde_json::json!({"id": "person:nolan", "kind": "entity", "name": "Christopher Nolan",
            "aliases": ["Chris Nolan"], "label": "Person",
            "description": "British film director known for nonlinear storytelling"}),
        serde_json::json!({"id": "film:memento", "title": "Memento", "text": "A man with no short-term memory hunts a killer.",
            "relations": [{"to": "person:nolan", "kind": "directed_by"}]}),
        serde_json::json!({"id": "film:tenet", "title": "Tenet", "text": "Time runs backwards for a secret agent.",
            "relations": [{"to": "person:nolan", "kind": "directed_by"}]}),
        serde_json::json!({"id": "film:other", "title": "Paddington", "text": "A bear in London eats marmalade."}),
    ];
    let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let input = fx.write("catalog.jsonl", &lines.join("\n"));
    let report = fx.index(&[&input], &Settings::default());
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let graph = report.graph.unwrap();
    // Two declared relations (an unknown kind is `relates`); the label is a typed hub.
    assert_eq!(graph.kinds.get("relates"), Some(&2), "{graph:?}");
    assert_eq!(graph.kinds.get("member_of"), Some(&1), "{graph:?}");

    let finder = fx.open();
    // The query matches only the entity's description; the films come through the graph.
    let r = finder
        .search(
            "british director nonlinear storytelling",
            &lexical_only(),
            0,
            10,
        )
        .unwrap();
    let ids: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    assert!(
        !ids.contains(&"person:nolan"),
        "an entity never ranks: {ids:?}"
    );
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&"film:memento") && ids.contains(&"film:tenet"));
    assert_eq!(
        r.hits[0].explain.parts[0].lists[0].channel,
        finder_core::Channel::Neighbours
    );
    // The boost alone carries them too, and says through what.
    let mut boost_only = lexical_only();
    boost_only.graph.neighbours = false;
    let r = finder
        .search(
            "british director nonlinear storytelling",
            &boost_only,
            0,
            10,
        )
        .unwrap();
    assert_eq!(r.hits.len(), 2, "{r:?}");
    let via = r.hits[0].explain.parts[0].via.as_deref();
    let via = via.unwrap_or_else(|| panic!("{:#?}", r.hits[0].explain));
    assert_eq!(via, "via entity \"Christopher Nolan\" (relates)");
    // An alias in the query names the entity too.
    let r = finder
        .search("chris nolan", &lexical_only(), 0, 10)
        .unwrap();
    assert!(r.hits.iter().any(|h| h.id == "film:tenet"), "{r:?}");
}

#[test]
fn a_bad_entity_or_relation_is_a_problem_with_its_line() {
    let fx = Fixture::new();
    let input = fx.write(
        "catalog.jsonl",
        &[
            r#"{"id": "a", "kind": "person", "name": "X"}"#,
            r#"{"id": "b", "text": "t", "relations": [{"kind": "x"}]}"#,
            r#"{"id": "c", "text": "fine"}"#,
        ]
        .join("\n"),
    );
    let report = fx.index(&[&input], &Settings::default());
    let problems: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("catalog.jsonl:1") && problems[0].contains("`kind`"));
    assert!(problems[1].contains("catalog.jsonl:2") && problems[1].contains("`relations`"));
    assert_eq!(report.sources, 1);
}

#[test]
fn node_labels_restrict_what_a_query_can_name() {
    let fx = Fixture::new();
    let lines = [
        serde_json::json!({"id": "p", "kind": "entity", "name": "Ada Lovelace", "label": "Person"}),
        serde_json::json!({"id": "n", "title": "Notes", "text": "Analytical engine notes.",
            "relations": [{"to": "p", "kind": "relates"}]}),
    ];
    let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let input = fx.write("c.jsonl", &lines.join("\n"));
    fx.index(&[&input], &Settings::default());
    let finder = fx.open();
    let entity_hits = |labels: &[&str]| {
        let mut s = lexical_only();
        s.graph.node_labels = labels.iter().map(|l| l.to_string()).collect();
        let r = finder.search("who was ada lovelace", &s, 0, 10).unwrap();
        let c = r
            .diagnostics
            .channels
            .iter()
            .find(|c| c.channel == finder_core::Channel::Entities)
            .unwrap();
        c.hits
    };
    assert_eq!(entity_hits(&[]), 1);
    assert_eq!(entity_hits(&["person"]), 1);
    assert_eq!(entity_hits(&["Film"]), 0);
}

#[test]
fn the_events_channel_prefers_recent_sources() {
    let fx = Fixture::new();
    let lines = [
        serde_json::json!({"id": "old", "title": "Outage report", "text": "Database outage report.", "date": "2001-01-01"}),
        serde_json::json!({"id": "new", "title": "Outage review", "text": "Database outage review.", "date": "2026-11-01"}),
        serde_json::json!({"id": "undated", "title": "Outage notes", "text": "Database outage notes."}),
    ];
    let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let input = fx.write("c.jsonl", &lines.join("\n"));
    fx.index(&[&input], &Settings::default());
    let mut s = lexical_only();
    s.graph.events = true;
    s.graph.event_half_life_days = 30.0;
    let r = fx.open().search("database outage", &s, 0, 10).unwrap();
    let rank_in_events = |id: &str| {
        let hit = r.hits.iter().find(|h| h.id == id).unwrap();
        hit.explain.parts[0]
            .lists
            .iter()
            .find(|l| l.channel == finder_core::Channel::Events)
            .map(|l| l.rank)
    };
    // Undated keeps its weight, a month-old source halves, a 25-year-old one vanishes to last.
    assert_eq!(rank_in_events("undated"), Some(1));
    assert_eq!(rank_in_events("new"), Some(2));
    assert_eq!(rank_in_events("old"), Some(3));
}
