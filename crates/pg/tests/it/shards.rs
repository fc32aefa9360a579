//! Sources spread over two databases rank exactly as in one.

use finder_core::SearchResponse;
use finder_pg::{PgConfig, PgFinder, ShardUrls};

use crate::support;

fn ranking(r: &SearchResponse) -> Vec<(String, f64)> {
    r.hits.iter().map(|h| (h.id.clone(), h.score)).collect()
}

fn assert_same(one: &PgFinder, two: &PgFinder, queries: &[(String, Vec<f32>)], what: &str) {
    let settings = support::settings();
    for (q, v) in queries {
        for offset in [0, 7] {
            let a = one
                .search_with_vector(q, Some(v), &settings, offset, 10)
                .unwrap();
            let b = two
                .search_with_vector(q, Some(v), &settings, offset, 10)
                .unwrap();
            let (ra, rb) = (ranking(&a), ranking(&b));
            assert_eq!(
                ra.iter().map(|x| &x.0).collect::<Vec<_>>(),
                rb.iter().map(|x| &x.0).collect::<Vec<_>>(),
                "{what} `{q}` at {offset}"
            );
            for (x, y) in ra.iter().zip(&rb) {
                assert!((x.1 - y.1).abs() < 1e-9, "{what} `{q}`: {x:?} vs {y:?}");
            }
            assert_eq!(
                a.hits.iter().map(|h| &h.hints).collect::<Vec<_>>(),
                b.hits.iter().map(|h| &h.hints).collect::<Vec<_>>()
            );
        }
    }
    println!(
        "{what}: {} queries, sharded ranking equal to unsharded",
        queries.len()
    );
}

#[test]
fn two_shards_rank_as_one_database() {
    let Some(server) = support::server("sharding") else {
        return;
    };
    let (whole, a, b) = (
        server.database("whole"),
        server.database("shard_a"),
        server.database("shard_b"),
    );
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_notes(tmp.path(), 40, 21);
    let records = support::write_records(tmp.path(), 40, 22);
    let inputs = vec![notes.clone(), records];
    let settings = support::settings();
    let one = PgConfig::single(&whole.url);
    let two = PgConfig {
        shards: vec![
            ShardUrls {
                write: a.url.clone(),
                read: vec![],
            },
            ShardUrls {
                write: b.url.clone(),
                read: vec![],
            },
        ],
        tls_ca: None,
    };
    let r1 = finder_pg::index_inputs(&one, &inputs, &settings).unwrap();
    let r2 = finder_pg::index_inputs(&two, &inputs, &settings).unwrap();
    assert_eq!(
        (r1.counts, r1.sources, r1.fragments),
        (r2.counts, r2.sources, r2.fragments)
    );

    let finder1 = PgFinder::open(&one, settings.clone()).unwrap();
    let finder2 = PgFinder::open(&two, settings.clone()).unwrap();
    let held: Vec<u64> = finder2.records().iter().map(|r| r.sources).collect();
    assert!(
        held.iter().all(|&n| n > 10),
        "both shards hold sources: {held:?}"
    );
    assert_eq!(held.iter().sum::<u64>(), 80);
    let queries = support::queries(30, 23);
    assert_same(&finder1, &finder2, &queries, "sharded");

    // Incremental runs keep them equal (deletes touch the shard that holds the source).
    drop((finder1, finder2));
    for i in [0, 3, 4, 17] {
        std::fs::remove_file(notes.join(format!("note-{i:03}.md"))).unwrap();
    }
    finder_pg::index_inputs(&one, &inputs, &settings).unwrap();
    finder_pg::index_inputs(&two, &inputs, &settings).unwrap();
    let finder1 = PgFinder::open(&one, settings.clone()).unwrap();
    let finder2 = PgFinder::open(&two, settings.clone()).unwrap();
    assert_same(&finder1, &finder2, &queries, "sharded after deletes");

    // Shards listed in another order are refused, not silently mixed up.
    let swapped = PgConfig {
        shards: vec![two.shards[1].clone(), two.shards[0].clone()],
        tls_ca: None,
    };
    let err = PgFinder::open(&swapped, settings.clone())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("shard 1 of 2"), "{err}");

    // So are shards whose terms different word analyses made (shard 1 relabelled as written
    // before the analysis was recorded): a query would analyse its words as shard 0's were.
    let mut client = postgres::Client::connect(&b.url, postgres::NoTls).unwrap();
    client
        .batch_execute("UPDATE finder_meta SET record = record - 'analysis'")
        .unwrap();
    let err = PgFinder::open(&two, settings.clone())
        .err()
        .expect("refused");
    assert_eq!(
        err.to_string(),
        "shard 1: its index-time settings or word analysis differ from shard 0's; index all shards in one run"
    );
}
