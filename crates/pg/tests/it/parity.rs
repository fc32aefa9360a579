//! The PostgreSQL backend ranks as the embedded index does over the same inputs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_core::{Channel, Embed, SearchResponse, Settings};
use finder_index::Finder;
use finder_pg::{NodeVectors, PgConfig, PgFinder};

use crate::support::{self, overlap};

fn ids(r: &SearchResponse) -> Vec<String> {
    r.hits.iter().map(|h| h.id.clone()).collect()
}

/// Vectors a database holds: every fragment's first window and every later one.
fn stored_vectors(url: &str) -> usize {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM finder_fragments WHERE embedding IS NOT NULL)
                  + (SELECT count(*) FROM finder_parts)",
            &[],
        )
        .unwrap();
    row.get::<_, i64>(0) as usize
}

/// Whether the response's vector list came from the node's own graph.
fn walked_on_node(r: &SearchResponse) -> bool {
    r.diagnostics
        .stages
        .iter()
        .any(|s| s.stage == "vector.node_walk")
}

/// The channel score of each hit's best fragment, by id.
fn channel_scores(r: &SearchResponse, channel: Channel) -> Vec<(String, f32)> {
    r.hits
        .iter()
        .filter_map(|h| {
            let part = h.explain.parts.first()?;
            let list = part.lists.iter().find(|l| l.channel == channel)?;
            Some((h.id.clone(), list.score))
        })
        .collect()
}

struct Pair {
    embedded: Finder,
    pg: PgFinder,
}

fn index_both(index: &Path, config: &PgConfig, inputs: &[PathBuf], settings: &Settings) -> Pair {
    let embedded_run = finder_index::index_inputs(index, inputs, settings, &mut |_| {}).unwrap();
    let pg_run = finder_pg::index_inputs(config, inputs, settings).unwrap();
    assert_eq!(embedded_run.counts, pg_run.counts, "run counts differ");
    assert_eq!(
        (embedded_run.sources, embedded_run.fragments),
        (pg_run.sources, pg_run.fragments)
    );
    Pair {
        embedded: Finder::open(index, settings.clone()).unwrap(),
        pg: PgFinder::open(config, settings.clone()).unwrap(),
    }
}

/// Compares the top 10 of every query; returns (queries with the same order, mean overlap).
/// With `same_stats`, the BM25 scores must agree too: not after deletes, which the embedded
/// index keeps counting in `N` and the average length until its segments merge, while
/// PostgreSQL's statistics are exact.
fn compare(
    pair: &Pair,
    queries: &[String],
    settings: &Settings,
    what: &str,
    same_stats: bool,
) -> (usize, f64) {
    let (mut same, mut sum, mut worst) = (0, 0.0, 0f32);
    for q in queries {
        let a = pair.embedded.search(q, settings, 0, 10).unwrap();
        let b = pair.pg.search(q, settings, 0, 10).unwrap();
        let (ia, ib) = (ids(&a), ids(&b));
        let o = overlap(&ia, &ib, 10);
        assert!(
            ia == ib || o >= 0.9,
            "{what} `{q}`: overlap {o}\nembedded {ia:?}\npostgres {ib:?}"
        );
        same += usize::from(ia == ib);
        sum += o;
        // Where both rank a source, its best fragment has the same BM25 score.
        let pg_scores = channel_scores(&b, Channel::Lexical);
        for (id, s) in channel_scores(&a, Channel::Lexical) {
            if let Some((_, t)) = pg_scores.iter().find(|(i, _)| *i == id) {
                if same_stats {
                    assert!(
                        (s - t).abs() <= 1e-4 * s.abs().max(1.0),
                        "{what} `{q}`: BM25 of `{id}` is {s} embedded, {t} in PostgreSQL"
                    );
                }
                worst = worst.max((s - t).abs() / s.abs().max(1e-6));
            }
        }
        // The same hit shows the same best hint (the others may swap on tied scores).
        if let (Some(x), Some(y)) = (a.hits.first(), b.hits.first()) {
            if x.id == y.id {
                let best =
                    |h: &finder_core::Hit| h.hints.first().map(|h| (h.preview.clone(), h.extent));
                assert_eq!(best(x), best(y), "{what} `{q}`: hints differ");
                assert_eq!(x.envelope, y.envelope);
                assert_eq!(x.summary, y.summary);
            }
        }
    }
    let mean = sum / queries.len() as f64;
    println!(
        "{what}: {same}/{} queries with the same top 10, mean overlap {mean:.3}, largest relative BM25 difference {worst:.2e}",
        queries.len()
    );
    (same, mean)
}

#[test]
fn lexical_search_ingest_and_delete_match_the_embedded_engine() {
    let Some(server) = support::server("lexical parity") else {
        return;
    };
    let db = server.database("lexical");
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_notes(tmp.path(), 48, 7);
    let settings = support::settings();
    let config = PgConfig::single(&db.url);
    let index = tmp.path().join("index");
    let pair = index_both(&index, &config, std::slice::from_ref(&notes), &settings);
    let mut queries: Vec<String> = support::queries(40, 11).into_iter().map(|q| q.0).collect();
    // Identifier-like queries expand through the trigram channel too.
    queries.extend(["snapshot-1 disk".to_string(), "token_refresh".to_string()]);
    let (_, mean) = compare(&pair, &queries, &settings, "lexical", true);
    assert!(mean >= 0.9);

    // An unchanged run changes nothing.
    let again = finder_pg::index_inputs(&config, std::slice::from_ref(&notes), &settings).unwrap();
    assert_eq!(again.counts.unchanged, 48);
    assert_eq!(
        again.counts.added + again.counts.updated + again.counts.removed,
        0
    );

    // Delete some notes, change one, add one: both engines follow.
    drop(pair);
    for i in [1, 5, 9, 20, 33] {
        std::fs::remove_file(notes.join(format!("note-{i:03}.md"))).unwrap();
    }
    std::fs::write(
        notes.join("note-002.md"),
        "---\ntitle: rewritten\n---\n\nThe refresh token expired during the zeppelin deploy.\n",
    )
    .unwrap();
    std::fs::write(
        notes.join("new.md"),
        "# Fresh\n\nA note about snapshot retention and billing receipts.\n",
    )
    .unwrap();
    // A German note: its words stem as German in both engines, queries in both languages.
    std::fs::write(
        notes.join("stadt.md"),
        "# Die Stadt\n\nDie alten Häuser der Stadt wurden im letzten Jahrhundert gebaut, und \
         viele von ihnen stehen heute leer.\n",
    )
    .unwrap();
    let pair = index_both(&index, &config, std::slice::from_ref(&notes), &settings);
    let r = pair.pg.search("zeppelin", &settings, 0, 3).unwrap();
    assert_eq!(r.hits[0].id, "note-002.md");
    for q in ["Haus", "Häusern"] {
        let r = pair.pg.search(q, &settings, 0, 3).unwrap();
        assert_eq!(ids(&r), ["stadt.md"], "`{q}` in PostgreSQL");
        queries.push(q.to_string());
    }
    for q in &queries {
        let hits = ids(&pair.pg.search(q, &settings, 0, 50).unwrap());
        assert!(
            !hits.contains(&"note-005.md".to_string()),
            "a deleted note came back"
        );
    }
    let (_, mean) = compare(&pair, &queries, &settings, "lexical after deletes", false);
    assert!(mean >= 0.9);
}

/// The `precomputed` backend's stand-in for building the embedded index's vectors.
struct GivenVectors;

impl Embed for GivenVectors {
    fn model_id(&self) -> &str {
        "precomputed/8"
    }

    fn dim(&self) -> usize {
        support::DIM
    }

    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Err("the precomputed backend embeds no text".into())
    }
}

#[test]
fn hybrid_search_matches_the_embedded_engine() {
    let Some(server) = support::server("hybrid parity") else {
        return;
    };
    let db = server.database("hybrid");
    let tmp = tempfile::tempdir().unwrap();
    let records = support::write_records(tmp.path(), 60, 3);
    let settings = support::settings();
    let config = PgConfig::single(&db.url);
    let index = tmp.path().join("index");
    finder_index::index_inputs(
        &index,
        std::slice::from_ref(&records),
        &settings,
        &mut |_| {},
    )
    .unwrap();
    finder_index::build_vectors(&index, &settings, &GivenVectors, &mut |_| {}).unwrap();
    finder_pg::index_inputs(&config, &[records], &settings).unwrap();
    let mut embedded = Finder::open(&index, settings.clone()).unwrap();
    embedded.attach_embedder(Ok(Some(Arc::new(GivenVectors))));
    let pg = PgFinder::open(&config, settings.clone()).unwrap();

    let (mut same, mut sum) = (0, 0.0);
    let queries = support::queries(40, 5);
    for (q, v) in &queries {
        let a = embedded
            .search_with_vector(q, Some(v), &settings, 0, 10)
            .unwrap();
        let b = pg.search_with_vector(q, Some(v), &settings, 0, 10).unwrap();
        for r in [&a, &b] {
            let vector = r
                .diagnostics
                .channels
                .iter()
                .find(|c| c.channel == Channel::Vector);
            assert_eq!(
                vector.map(|c| c.status),
                Some(finder_core::ChannelStatus::Ran),
                "{:?}",
                r.diagnostics.channels
            );
        }
        let (ia, ib) = (ids(&a), ids(&b));
        let o = overlap(&ia, &ib, 10);
        assert!(
            o >= 0.9,
            "hybrid `{q}`: overlap {o}\nembedded {ia:?}\npostgres {ib:?}"
        );
        same += usize::from(ia == ib);
        sum += o;
        // Cosine similarities agree.
        let pg_scores = channel_scores(&b, Channel::Vector);
        for (id, s) in channel_scores(&a, Channel::Vector) {
            if let Some((_, t)) = pg_scores.iter().find(|(i, _)| *i == id) {
                assert!((s - t).abs() < 1e-4, "`{q}`: cosine of `{id}` {s} vs {t}");
            }
        }
    }
    println!(
        "hybrid: {same}/{} queries with the same top 10, mean overlap {:.3}",
        queries.len(),
        sum / queries.len() as f64
    );
    // On one shard the vector list ran beside the lexical one, on a second connection that
    // read the query's snapshot: one query after another, the node holds two.
    let mut admin = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let readers: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            &[&db.name],
        )
        .unwrap()
        .get(0);
    assert!(
        readers >= 2,
        "{readers} connection(s): the lists ran in turn"
    );

    // A dense-only query ranks by the vectors alone; a wrong-length vector degrades.
    let mut dense = settings.clone();
    dense.lexical.enabled = false;
    let (_, v) = &queries[0];
    let a = embedded
        .search_with_vector("", Some(v), &dense, 0, 10)
        .unwrap();
    let b = pg.search_with_vector("", Some(v), &dense, 0, 10).unwrap();
    assert_eq!(ids(&a), ids(&b));
    let r = pg
        .search_with_vector("token", Some(&[1.0, 0.0]), &settings, 0, 5)
        .unwrap();
    let vector = r
        .diagnostics
        .channels
        .iter()
        .find(|c| c.channel == Channel::Vector)
        .unwrap();
    assert_eq!(vector.status, finder_core::ChannelStatus::Degraded);
    assert!(!r.hits.is_empty());
}

/// A deterministic stand-in model: each word adds to a few coordinates chosen by its hash, so
/// texts sharing words point alike; unit length, as every `Embed` returns.
struct WordHashes;

impl Embed for WordHashes {
    fn model_id(&self) -> &str {
        "test/word-hashes"
    }

    fn dim(&self) -> usize {
        16
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = [0f32; 16];
                for w in t.split_whitespace() {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                        });
                    v[(h % 16) as usize] += 1.0;
                    v[((h >> 8) % 16) as usize] += 0.5;
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

#[test]
fn vectors_embedded_at_ingest_match_the_embedded_engine() {
    let Some(server) = support::server("embedding at ingest") else {
        return;
    };
    let db = server.database("embedded_vectors");
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_notes(tmp.path(), 40, 17);
    // The same record given by two inputs: the later one wins, written once.
    let (first, second) = (tmp.path().join("a.jsonl"), tmp.path().join("b.jsonl"));
    std::fs::write(
        &first,
        "{\"id\": \"twice\", \"title\": \"first\", \"text\": \"kiln glaze\"}\n",
    )
    .unwrap();
    std::fs::write(
        &second,
        "{\"id\": \"twice\", \"title\": \"second\", \"text\": \"kiln glaze firing\"}\n",
    )
    .unwrap();
    let mut settings = support::settings();
    settings.embed.backend = finder_core::EmbedBackend::Minilm;
    settings.embed.dim = 16;
    let config = PgConfig::single(&db.url);
    let index = tmp.path().join("index");
    let inputs = vec![notes, first, second];
    finder_index::index_inputs(&index, &inputs, &settings, &mut |_| {}).unwrap();
    finder_index::build_vectors(&index, &settings, &WordHashes, &mut |_| {}).unwrap();
    let mut read = 0;
    let run =
        finder_pg::index_inputs_with(&config, &inputs, &settings, Some(&WordHashes), &mut |n| {
            read = n
        })
        .unwrap();
    assert_eq!(read, 42, "progress counts every source read");
    assert_eq!(run.sources, 41);
    let mut embedded = Finder::open(&index, settings.clone()).unwrap();
    embedded.attach_embedder(Ok(Some(Arc::new(WordHashes))));
    let mut pg = PgFinder::open(&config, settings.clone()).unwrap();
    pg.attach_embedder(Ok(Some(Arc::new(WordHashes))));
    let mut dense = settings.clone();
    dense.lexical.enabled = false;
    // Over the exact scan, then over each shard's HNSW index, its beam wider than the
    // window (the rows asked of the walk, of which the exact cosine keeps the window), then
    // over the node's own graph.
    for (walk, node) in [(false, false), (true, false), (true, true)] {
        if node {
            pg.walk_on_node(&NodeVectors::default());
            let synced = pg.sync_node_vectors().unwrap();
            assert_eq!(synced.len(), 1);
            assert!(synced[0].full, "{synced:?}");
            assert_eq!(synced[0].vectors, stored_vectors(&db.url), "{synced:?}");
        } else if walk {
            prefer_indexes(&db.url);
            pg = PgFinder::open(&config, settings.clone()).unwrap();
            pg.attach_embedder(Ok(Some(Arc::new(WordHashes))));
            pg.walk_vectors_always();
            dense.vector.ef_search = 2 * dense.vector.vec_list_size;
        }
        for (q, _) in support::queries(20, 9) {
            let a = embedded.search(&q, &dense, 0, 10).unwrap();
            let b = pg.search(&q, &dense, 0, 10).unwrap();
            assert_eq!(ids(&a), ids(&b), "dense `{q}`, walk {walk}, node {node}");
            assert_eq!(
                walked_on_node(&b),
                node,
                "`{q}`: {:?}",
                b.diagnostics.stages
            );
            let pg_scores = channel_scores(&b, Channel::Vector);
            for (id, s) in channel_scores(&a, Channel::Vector) {
                if let Some((_, t)) = pg_scores.iter().find(|(i, _)| *i == id) {
                    assert!((s - t).abs() < 1e-4, "`{q}`: cosine of `{id}` {s} vs {t}");
                }
            }
        }
    }
    let r = pg.search("kiln glaze firing", &settings, 0, 3).unwrap();
    assert_eq!(r.hits[0].id, "twice");
    assert_eq!(r.hits[0].envelope.title, "second");
    // Another model is another index: the next run rebuilds.
    struct Other;
    impl Embed for Other {
        fn model_id(&self) -> &str {
            "test/other"
        }
        fn dim(&self) -> usize {
            16
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            WordHashes.embed(texts)
        }
    }
    let again =
        finder_pg::index_inputs_with(&config, &inputs, &settings, Some(&Other), &mut |_| {})
            .unwrap();
    assert!(again.rebuilt);
}

/// Has the database's new connections use its indexes wherever they can: tables of a few
/// dozen rows would otherwise be scanned whole, and the HNSW walk would go untested.
fn prefer_indexes(url: &str) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET enable_seqscan = off', \
             current_database()); END $$",
        )
        .unwrap();
}

/// A stand-in model that reads a window of [`WINDOW_WORDS`] words: a longer text is embedded
/// window by window ([`WordHashes`] of each), its first window being what `embed` gives.
struct Windowed;

const WINDOW_WORDS: usize = 12;

impl Windowed {
    fn windows(text: &str) -> Vec<String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() {
            return vec![String::new()];
        }
        words.chunks(WINDOW_WORDS).map(|w| w.join(" ")).collect()
    }
}

impl Embed for Windowed {
    fn model_id(&self) -> &str {
        "test/windowed"
    }

    fn dim(&self) -> usize {
        16
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let firsts: Vec<String> = texts
            .iter()
            .map(|t| Windowed::windows(t).remove(0))
            .collect();
        WordHashes.embed(&firsts.iter().map(String::as_str).collect::<Vec<_>>())
    }

    fn embed_windows(&self, texts: &[&str]) -> Result<Vec<Vec<Vec<f32>>>, String> {
        texts
            .iter()
            .map(|t| {
                let windows = Windowed::windows(t);
                WordHashes.embed(&windows.iter().map(String::as_str).collect::<Vec<_>>())
            })
            .collect()
    }

    fn reads_in_windows(&self) -> bool {
        true
    }
}

/// With `embed.windows`, every window of a long passage has its vector in the shards too,
/// and a fragment scores as in the embedded index: its first window plus `window_weight` of
/// what its best window adds. A passage matched only past its first window is found; over an
/// HNSW walk (a shard past the exact-scan size) as over the scan. Turning windows off
/// rebuilds, as another model would.
#[test]
fn every_window_of_a_passage_scores_as_in_the_embedded_engine() {
    let Some(server) = support::server("embedding every window") else {
        return;
    };
    let db = server.database("windows");
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_notes(tmp.path(), 40, 23);
    // A passage whose only mention of the query's words is in its third window.
    let late = tmp.path().join("late.jsonl");
    // Eight words three times: the third window holds the three words alone.
    let filler = "plain words about nothing in particular here now ".repeat(3);
    std::fs::write(
        &late,
        format!(
            "{{\"id\": \"late\", \"title\": \"Notes\", \"text\": \"{filler} zebra quagga okapi\"}}\n"
        ),
    )
    .unwrap();
    let mut settings = support::settings();
    settings.embed.backend = finder_core::EmbedBackend::Minilm;
    settings.embed.dim = 16;
    settings.embed.windows = true;
    let config = PgConfig::single(&db.url);
    let index = tmp.path().join("index");
    let inputs = vec![notes, late];
    finder_index::index_inputs(&index, &inputs, &settings, &mut |_| {}).unwrap();
    finder_index::build_vectors(&index, &settings, &Windowed, &mut |_| {}).unwrap();
    finder_pg::index_inputs_with(&config, &inputs, &settings, Some(&Windowed), &mut |_| {})
        .unwrap();
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let parts: i64 = client
        .query_one("SELECT count(*) FROM finder_parts", &[])
        .unwrap()
        .get(0);
    assert!(parts > 0, "no later windows stored");

    let mut embedded = Finder::open(&index, settings.clone()).unwrap();
    embedded.attach_embedder(Ok(Some(Arc::new(Windowed))));
    let mut pg = PgFinder::open(&config, settings.clone()).unwrap();
    pg.attach_embedder(Ok(Some(Arc::new(Windowed))));
    let mut dense = settings.clone();
    dense.lexical.enabled = false;
    let mut queries: Vec<String> = support::queries(20, 5)
        .into_iter()
        .map(|(q, _)| q)
        .collect();
    queries.push("zebra quagga okapi".into());
    // `in_order`: the node's own walk scores a window in `f32` as the embedded index does, but
    // folds every window of a fragment where the embedded index folds those its walk found,
    // so windows of near-equal similarity (the filler repeats) may tie the other way there.
    let same_as = |pg: &PgFinder, weight: f32, in_order: bool| {
        let mut dense = dense.clone();
        dense.vector.window_weight = weight;
        for q in &queries {
            let a = embedded.search(q, &dense, 0, 10).unwrap();
            let b = pg.search(q, &dense, 0, 10).unwrap();
            let pg_scores = channel_scores(&b, Channel::Vector);
            let (mut x, mut y) = (ids(&a), ids(&b));
            if !in_order {
                x.sort();
                y.sort();
            }
            assert_eq!(x, y, "dense `{q}` at weight {weight}");
            for (id, s) in channel_scores(&a, Channel::Vector) {
                let t = pg_scores.iter().find(|(i, _)| *i == id).unwrap().1;
                assert!((s - t).abs() < 1e-4, "`{q}`: cosine of `{id}` {s} vs {t}");
            }
        }
    };
    let same = |pg: &PgFinder, weight: f32| same_as(pg, weight, true);
    same(&pg, 0.5);
    same(&pg, 1.0);
    let mut whole = dense.clone();
    whole.vector.window_weight = 1.0;
    let found = pg.search("zebra quagga okapi", &whole, 0, 3).unwrap();
    assert_eq!(ids(&found)[0], "late");
    // Its first window (the title and filler) is far from the query; its last is near.
    let mut first_only = dense.clone();
    first_only.vector.window_weight = 0.0;
    let first = pg.search("zebra quagga okapi", &first_only, 0, 50).unwrap();
    let first = channel_scores(&first, Channel::Vector);
    let first = first
        .iter()
        .find(|(id, _)| id == "late")
        .map_or(0.0, |s| s.1);
    assert!(
        channel_scores(&found, Channel::Vector)[0].1 > first + 0.5,
        "{found:?}"
    );

    // The same lists over each shard's HNSW indexes instead of the exact scan.
    prefer_indexes(&db.url);
    let mut pg = PgFinder::open(&config, settings.clone()).unwrap();
    pg.attach_embedder(Ok(Some(Arc::new(Windowed))));
    pg.walk_vectors_always();
    same(&pg, 0.5);
    same(&pg, 1.0);
    // The same over the node's own graph, which holds every window too.
    let mut node = PgFinder::open(&config, settings.clone()).unwrap();
    node.attach_embedder(Ok(Some(Arc::new(Windowed))));
    node.walk_vectors_always();
    node.walk_on_node(&NodeVectors::default());
    let synced = node.sync_node_vectors().unwrap();
    assert_eq!(synced[0].vectors, stored_vectors(&db.url), "{synced:?}");
    same_as(&node, 0.5, false);
    same_as(&node, 1.0, false);
    let walked = node.search("zebra quagga okapi", &whole, 0, 3).unwrap();
    assert!(walked_on_node(&walked), "{:?}", walked.diagnostics.stages);
    assert_eq!(ids(&walked), ids(&found));
    // A list of 10 (a window of 15 rows per index): found by the later windows' walk.
    let mut narrow = whole.clone();
    narrow.vector.vec_list_size = 10;
    let found = pg.search("zebra quagga okapi", &narrow, 0, 3).unwrap();
    assert_eq!(ids(&found)[0], "late");

    let mut firsts = settings.clone();
    firsts.embed.windows = false;
    // A document write keeps the stored run's windows: switching them is `finder index`'s work.
    let record = format!(r#"{{"id": "api", "title": "Api", "text": "{filler} zebra okapi"}}"#);
    let put = finder_pg::write_documents(
        &config,
        &[finder_pg::DocumentChange {
            id: "api".into(),
            record: Some(record),
        }],
        &firsts,
        Some(&Windowed),
    )
    .unwrap();
    assert!(!put.rebuilt && put.problems.is_empty(), "{put:?}");
    let api_parts: i64 = client
        .query_one(
            "SELECT count(*) FROM finder_parts p JOIN finder_fragments f USING (fkey)
             JOIN finder_sources s USING (skey) WHERE s.id = 'api'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(api_parts > 0, "the written document lost its later windows");
    let again =
        finder_pg::index_inputs_with(&config, &inputs, &firsts, Some(&Windowed), &mut |_| {})
            .unwrap();
    assert!(again.rebuilt, "windows off is another index");
    let parts: i64 = client
        .query_one("SELECT count(*) FROM finder_parts", &[])
        .unwrap()
        .get(0);
    assert_eq!(parts, 0);
}

/// Two records indexed into `db` without vectors: the corpus of the word-analysis tests.
fn two_records(db: &support::Database) -> (tempfile::TempDir, PathBuf, Settings, PgConfig) {
    let tmp = tempfile::tempdir().unwrap();
    let records = tmp.path().join("records.jsonl");
    std::fs::write(
        &records,
        [
            r#"{"id": "seq", "title": "Sequencing", "text": "We sequenced the RNAs of each sample."}"#,
            r#"{"id": "gpu", "title": "Hardware", "text": "Training ran on one GPU."}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let mut settings = support::settings();
    settings.embed.backend = finder_core::EmbedBackend::None;
    let config = PgConfig::single(&db.url);
    finder_pg::index_inputs(&config, std::slice::from_ref(&records), &settings).unwrap();
    (tmp, records, settings, config)
}

/// The shards record the word analysis their terms were made with: queries analyse words as
/// the rows were written, and the next run into rows of an older analysis rebuilds them.
#[test]
fn rows_of_an_older_word_analysis_are_read_as_written_then_rebuilt() {
    let Some(server) = support::server("analysis version") else {
        return;
    };
    let db = server.database("analysis");
    let (_tmp, records, settings, config) = two_records(&db);
    let inputs = std::slice::from_ref(&records);
    let search = |q: &str| {
        let pg = PgFinder::open(&config, settings.clone()).unwrap();
        ids(&pg.search(q, &settings, 0, 10).unwrap())
    };
    assert_eq!(search("RNA"), vec!["seq"]);
    assert_eq!(search("GPUs"), vec!["gpu"]);

    // Relabel the rows as written before the analysis was recorded (version 1).
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    client
        .batch_execute("UPDATE finder_meta SET record = record - 'analysis'")
        .unwrap();
    // `GPUs` is analysed as version 1 made it (`gpus`), which the rows do not hold.
    assert!(search("GPUs").is_empty());
    assert_eq!(search("GPU"), vec!["gpu"]);

    let again = finder_pg::index_inputs(&config, inputs, &settings).unwrap();
    assert!(again.rebuilt, "an older analysis rebuilds the rows");
    assert_eq!(search("GPUs"), vec!["gpu"]);
}

/// Rows a later Finder wrote (a word analysis above this build's) are neither read with this
/// build's analysis nor rebuilt by it: opening and indexing are refused, naming both
/// versions, and the rows stay as they were.
#[test]
fn rows_of_a_later_word_analysis_are_refused_and_left_as_they_were() {
    let Some(server) = support::server("later analysis") else {
        return;
    };
    let db = server.database("later_analysis");
    let (_tmp, records, settings, config) = two_records(&db);
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let relabel = |client: &mut postgres::Client, analysis: u32| {
        client
            .execute(
                "UPDATE finder_meta SET record = jsonb_set(record, '{analysis}', to_jsonb($1::int))",
                &[&(analysis as i32)],
            )
            .unwrap();
    };
    let held = |client: &mut postgres::Client| -> (i64, String) {
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM finder_fragments), record->>'generation' FROM finder_meta",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    let before = held(&mut client);
    let later = finder_index::ANALYSIS + 1;
    relabel(&mut client, later);

    let expected = format!(
        "shard 0: the terms were written with word analysis {later} by a later Finder; this one reads word analysis {} and older",
        finder_index::ANALYSIS
    );
    let opened = PgFinder::open(&config, settings.clone())
        .err()
        .expect("refused");
    assert!(opened.to_string().starts_with(&expected), "{opened}");
    let run = finder_pg::index_inputs(&config, std::slice::from_ref(&records), &settings)
        .expect_err("refused");
    assert!(run.to_string().starts_with(&expected), "{run}");
    assert_eq!(held(&mut client), before, "the refused run wrote nothing");

    // Labelled as this build's again, the rows answer as they did.
    relabel(&mut client, finder_index::ANALYSIS);
    let pg = PgFinder::open(&config, settings.clone()).unwrap();
    assert_eq!(
        ids(&pg.search("RNA", &settings, 0, 10).unwrap()),
        vec!["seq"]
    );
}

#[test]
fn the_vector_index_is_built_again_when_its_parameters_change() {
    let Some(server) = support::server("hnsw parameters") else {
        return;
    };
    let db = server.database("hnsw_params");
    let tmp = tempfile::tempdir().unwrap();
    let records = support::write_records(tmp.path(), 30, 4);
    let mut settings = support::settings();
    let config = PgConfig::single(&db.url);
    let options = || -> Vec<String> {
        let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        client
            .query_one(
                "SELECT reloptions FROM pg_class
                 WHERE oid = to_regclass('finder_fragments_embedding')",
                &[],
            )
            .unwrap()
            .get(0)
    };
    let inputs = std::slice::from_ref(&records);
    finder_pg::index_inputs(&config, inputs, &settings).unwrap();
    assert_eq!(options(), ["m=16", "ef_construction=200"]);
    (
        settings.storage.hnsw_m,
        settings.storage.hnsw_ef_construction,
    ) = (8, 40);
    // An API write keeps the index it finds: a rebuild is `finder index`'s work.
    let first = std::fs::read_to_string(&records).unwrap();
    let mut record: serde_json::Value =
        serde_json::from_str(first.lines().next().unwrap()).unwrap();
    record["id"] = "api-1".into();
    let change = finder_pg::DocumentChange {
        id: "api-1".into(),
        record: Some(record.to_string()),
    };
    let put = finder_pg::write_documents(&config, &[change], &settings, None).unwrap();
    assert_eq!((put.counts.added, put.problems.len()), (1, 0), "{put:?}");
    assert_eq!(options(), ["m=16", "ef_construction=200"]);
    // Nothing changed in the sources; the index is built again with the new parameters.
    let run = finder_pg::index_inputs(&config, inputs, &settings).unwrap();
    assert_eq!(run.counts.unchanged, 30);
    assert_eq!(options(), ["m=8", "ef_construction=40"]);
    let pg = PgFinder::open(&config, settings.clone()).unwrap();
    let (q, v) = &support::queries(1, 6)[0];
    let hits = pg.search_with_vector(q, Some(v), &settings, 0, 5).unwrap();
    assert_eq!(hits.hits.len(), 5);
    // A value pgvector would refuse is refused first, naming the key.
    settings.storage.hnsw_ef_construction = 10;
    let err = settings.validate("test").unwrap_err().to_string();
    assert!(err.contains("storage.hnsw_ef_construction"), "{err}");
}

/// A query node's own vector graph follows the shards: after a run that changes, adds and
/// deletes notes, a sync reads the changed sources only, and the node's lists equal the exact
/// scan's, before and after.
#[test]
fn the_node_graph_follows_the_changed_sources() {
    let Some(server) = support::server("the node's vector graph") else {
        return;
    };
    let shards = [server.database("node_a"), server.database("node_b")];
    let config = PgConfig {
        shards: shards
            .iter()
            .map(|d| finder_pg::ShardUrls {
                write: d.url.clone(),
                read: Vec::new(),
            })
            .collect(),
        tls_ca: None,
    };
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_notes(tmp.path(), 60, 31);
    let mut settings = support::settings();
    settings.embed.backend = finder_core::EmbedBackend::Minilm;
    settings.embed.dim = 16;
    let run = || {
        let inputs = std::slice::from_ref(&notes);
        finder_pg::index_inputs_with(&config, inputs, &settings, Some(&WordHashes), &mut |_| {})
            .unwrap()
    };
    run();
    let vectors = NodeVectors::default();
    let open_with = |settings: &Settings, node: bool| {
        let mut pg = PgFinder::open(&config, settings.clone()).unwrap();
        pg.attach_embedder(Ok(Some(Arc::new(WordHashes))));
        if node {
            pg.walk_vectors_always();
            pg.walk_on_node(&vectors);
        }
        pg
    };
    let open = |node: bool| open_with(&settings, node);
    let mut dense = settings.clone();
    dense.lexical.enabled = false;
    // Dense alone, then hybrid: with the node's walk its vector list runs beside the lexical
    // list over both shards.
    let same = |node: &PgFinder, exact: &PgFinder| {
        for (q, _) in support::queries(20, 13) {
            for (mode, settings) in [("dense", &dense), ("hybrid", &settings)] {
                let on_node = node.search(&q, settings, 0, 10).unwrap();
                let scanned = exact.search(&q, settings, 0, 10).unwrap();
                let walked = walked_on_node(&on_node) && !walked_on_node(&scanned);
                assert!(walked, "{mode} `{q}`");
                assert_eq!(ids(&on_node), ids(&scanned), "{mode} `{q}`");
            }
        }
    };
    let node = open(true);
    let synced = node.sync_node_vectors().unwrap();
    assert!(
        synced.len() == 2 && synced.iter().all(|r| r.full),
        "{synced:?}"
    );
    let held: usize = synced.iter().map(|r| r.vectors).sum();
    same(&node, &open(false));

    std::fs::write(
        notes.join("note-001.md"),
        "---\ntitle: Changed\n---\n\nkiln glaze firing, then kiln glaze again\n",
    )
    .unwrap();
    std::fs::remove_file(notes.join("note-002.md")).unwrap();
    std::fs::write(
        notes.join("note-new.md"),
        "---\ntitle: New\n---\n\nzebra quagga okapi\n",
    )
    .unwrap();
    run();
    let node = open(true);
    let synced = node.sync_node_vectors().unwrap();
    let count = |f: fn(&finder_pg::SyncReport) -> usize| synced.iter().map(f).sum::<usize>();
    assert_eq!(
        (count(|r| r.changed), count(|r| r.removed)),
        (2, 1),
        "{synced:?}"
    );
    assert!(synced.iter().all(|r| !r.full), "{synced:?}");
    let now = stored_vectors(&shards[0].url) + stored_vectors(&shards[1].url);
    assert_eq!(count(|r| r.vectors), now, "{synced:?}");
    assert_ne!(now, held, "the run changed no vector");
    same(&node, &open(false));
    let found = node.search("zebra quagga okapi", &dense, 0, 10).unwrap();
    let titles: Vec<&str> = found
        .hits
        .iter()
        .map(|h| h.envelope.title.as_str())
        .collect();
    assert!(titles.contains(&"New"), "{titles:?}");
    assert!(
        !ids(&found).iter().any(|id| id.contains("note-002")),
        "{:?}",
        ids(&found)
    );

    // Passages cut shorter: every fragment changes, no source's content hash does. The node
    // sees another index and loads it whole.
    let mut shorter = settings.clone();
    shorter.index.fragment_max_chars = 200;
    let rebuilt = finder_pg::index_inputs_with(
        &config,
        std::slice::from_ref(&notes),
        &shorter,
        Some(&WordHashes),
        &mut |_| {},
    )
    .unwrap();
    assert!(rebuilt.rebuilt, "{rebuilt:?}");
    let node = open_with(&shorter, true);
    let synced = node.sync_node_vectors().unwrap();
    assert!(synced.iter().all(|r| r.full), "{synced:?}");
    let now = stored_vectors(&shards[0].url) + stored_vectors(&shards[1].url);
    assert_eq!(synced.iter().map(|r| r.vectors).sum::<usize>(), now);
    let exact = open_with(&shorter, false);
    for (q, _) in support::queries(20, 17) {
        let on_node = node.search(&q, &dense, 0, 10).unwrap();
        let scanned = exact.search(&q, &dense, 0, 10).unwrap();
        assert!(walked_on_node(&on_node), "`{q}`");
        assert_eq!(ids(&on_node), ids(&scanned), "after the rebuild, `{q}`");
    }

    // A run after the node's reader opened: its queries read the new rows, so the node's
    // graph (at the old generation) sits out until a sync brings it there.
    std::fs::write(
        notes.join("note-new.md"),
        "---\ntitle: Newer\n---\n\nzebra okapi, then kiln glaze\n",
    )
    .unwrap();
    let inputs = std::slice::from_ref(&notes);
    finder_pg::index_inputs_with(&config, inputs, &shorter, Some(&WordHashes), &mut |_| {})
        .unwrap();
    let behind = node.search("zebra okapi", &dense, 0, 10).unwrap();
    assert!(!walked_on_node(&behind), "{:?}", behind.diagnostics.stages);
    let synced = node.sync_node_vectors().unwrap();
    assert_eq!(
        synced.iter().map(|r| r.changed).sum::<usize>(),
        1,
        "{synced:?}"
    );
    let caught_up = node.search("zebra okapi", &dense, 0, 10).unwrap();
    assert!(
        walked_on_node(&caught_up),
        "{:?}",
        caught_up.diagnostics.stages
    );
    assert_eq!(ids(&caught_up), ids(&behind));
}

/// Personalised queries over PostgreSQL read `refine.profiles` as the embedded engine does,
/// an interaction naming an item taking that item's tags from the shards, and rank alike.
#[test]
fn user_profiles_personalise_as_in_the_embedded_engine() {
    let Some(server) = support::server("user profiles") else {
        return;
    };
    let db = server.database("profiles");
    let tmp = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (1..=6)
        .map(|i| {
            let tag = if i == 5 { "security" } else { "ops" };
            let token = "token ".repeat(7 - i);
            format!(
                r#"{{"id": "r{i}", "title": "Token note {i}", "text": "{token} note {i}", "tags": ["{tag}"]}}"#
            )
        })
        .collect();
    let records = tmp.path().join("r.jsonl");
    std::fs::write(&records, lines.join("\n")).unwrap();
    // Ana prefers the tag; Bo read r5 yesterday, whose tag the shards give.
    let yesterday = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 86_400;
    std::fs::write(
        tmp.path().join("users.jsonl"),
        format!(
            "{{\"user\": \"ana\", \"prefers\": {{\"tag\": \"security\"}}, \"weight\": 3}}\n\
             {{\"user\": \"bo\", \"interaction\": \"r5\", \"at\": {yesterday}}}\n"
        ),
    )
    .unwrap();
    let mut settings = support::settings();
    settings.refine.profiles = "users.jsonl".into();
    let config = PgConfig::single(&db.url);
    let index = tmp.path().join("index");
    let inputs = std::slice::from_ref(&records);
    finder_index::index_inputs(&index, inputs, &settings, &mut |_| {}).unwrap();
    finder_pg::index_inputs(&config, inputs, &settings).unwrap();
    // Both read the file from the folder given (the index's, the configuration's).
    std::fs::rename(tmp.path().join("users.jsonl"), index.join("users.jsonl")).unwrap();
    let embedded = Finder::open(&index, settings.clone()).unwrap();
    let mut pg = PgFinder::open(&config, settings.clone()).unwrap();
    pg.load_profiles(&index).unwrap();
    for user in ["ana", "bo"] {
        let request = finder_core::Query {
            user: Some(user.into()),
            ..finder_core::Query::text("token", 0, 6)
        };
        let a = embedded.query(&request, &settings).unwrap();
        let b = pg.query(&request, &settings).unwrap();
        assert_eq!(ids(&a), ids(&b), "{user}");
        assert_eq!(ids(&b)[0], "r5", "{user}: {:?}", b.diagnostics.refine);
    }
    // Without profiles the words alone rank: r1 repeats "token" most.
    let plain = pg.search("token", &settings, 0, 6).unwrap();
    assert_eq!(ids(&plain)[0], "r1");
}
