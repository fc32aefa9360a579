//! Queries read from a streaming replica while runs write to the primary.

use std::time::{Duration, Instant};

use finder_pg::{PgConfig, PgFinder, ShardUrls};
use postgres::{Client, NoTls};

use crate::support::{self, with_database};

/// Waits until the replica has replayed everything the primary has written (the insert
/// position: the test server commits without waiting for the flush).
fn wait_for_replay(primary: &str, replica: &str) {
    let lsn: String = Client::connect(primary, NoTls)
        .unwrap()
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
        .unwrap()
        .get(0);
    let mut client = Client::connect(replica, NoTls).unwrap();
    let started = Instant::now();
    loop {
        let caught_up: bool = client
            .query_one(
                "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false)",
                &[&lsn],
            )
            .unwrap()
            .get(0);
        if caught_up {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the replica did not catch up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn queries_read_from_a_streaming_replica() {
    let Some(server) = support::server("replica reads") else {
        return;
    };
    let db = server.database("replicated");
    // With a server of our own, a real streaming replica; with FINDER_PG_URL, the same
    // server stands in for one.
    let replica = if server.owned {
        Some(server.replica().expect("start a streaming replica"))
    } else {
        eprintln!("replica reads: FINDER_PG_URL given, so the primary stands in for the replica");
        None
    };
    let read_url = match &replica {
        Some(r) => with_database(&r.url, &db.name),
        None => db.url.clone(),
    };
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_notes(tmp.path(), 30, 31);
    let settings = support::settings();
    let primary = PgConfig::single(&db.url);
    let replicated = PgConfig {
        shards: vec![ShardUrls {
            write: db.url.clone(),
            read: vec![read_url.clone()],
        }],
        tls_ca: None,
    };
    finder_pg::index_inputs(&replicated, std::slice::from_ref(&notes), &settings).unwrap();
    wait_for_replay(&db.url, &read_url);
    if replica.is_some() {
        let mut c = Client::connect(&read_url, NoTls).unwrap();
        assert!(c
            .query_one("SELECT pg_is_in_recovery()", &[])
            .unwrap()
            .get::<_, bool>(0));
        // A replica takes no writes: a run pointed at it fails and says so.
        let err = finder_pg::index_inputs(
            &PgConfig::single(&read_url),
            std::slice::from_ref(&notes),
            &settings,
        )
        .expect_err("writing to a replica fails");
        assert!(err.to_string().contains("PostgreSQL"), "{err}");
    }

    let from_primary = PgFinder::open(&primary, settings.clone()).unwrap();
    let from_replica = PgFinder::open(&replicated, settings.clone()).unwrap();
    for (q, _) in support::queries(15, 32) {
        let a = from_primary.search(&q, &settings, 0, 10).unwrap();
        let b = from_replica.search(&q, &settings, 0, 10).unwrap();
        let ids = |r: &finder_core::SearchResponse| {
            r.hits.iter().map(|h| h.id.clone()).collect::<Vec<_>>()
        };
        assert_eq!(ids(&a), ids(&b), "`{q}`");
    }

    // A later run reaches the replica's readers once replayed.
    std::fs::write(notes.join("late.md"), "# Late\n\nzebra crossing quartz\n").unwrap();
    finder_pg::index_inputs(&replicated, &[notes], &settings).unwrap();
    wait_for_replay(&db.url, &read_url);
    let r = from_replica
        .search("zebra quartz", &settings, 0, 5)
        .unwrap();
    assert_eq!(r.hits.first().map(|h| h.id.as_str()), Some("late.md"));
    drop(from_replica);
    drop(from_primary);
    drop(replica);
}

/// A replica that goes away while queries run: they move to the primary (the read URLs' last
/// resort), none fails, and each answers as before.
#[test]
fn queries_move_off_a_replica_that_goes_away() {
    let Some(server) = support::private_server("replica loss") else {
        return;
    };
    let db = server.database("replica_loss");
    let replica = server.replica().expect("start a streaming replica");
    let read_url = with_database(&replica.url, &db.name);
    let tmp = tempfile::tempdir().unwrap();
    let notes = support::write_notes(tmp.path(), 30, 41);
    let settings = support::settings();
    let config = PgConfig {
        shards: vec![ShardUrls {
            write: db.url.clone(),
            read: vec![read_url.clone()],
        }],
        tls_ca: None,
    };
    finder_pg::index_inputs(&config, std::slice::from_ref(&notes), &settings).unwrap();
    wait_for_replay(&db.url, &read_url);
    let finder = PgFinder::open(&config, settings.clone()).unwrap();
    // Hybrid queries: the vector list runs beside the lexical one on connections of its own.
    let queries = support::queries(12, 42);
    let ids = |(q, v): &(String, Vec<f32>)| -> Result<Vec<String>, String> {
        let r = finder
            .search_with_vector(q, Some(v), &settings, 0, 10)
            .map_err(|e| e.to_string())?;
        Ok(r.hits.into_iter().map(|h| h.id).collect())
    };
    let expected: Vec<Vec<String>> = queries.iter().map(|q| ids(q).unwrap()).collect();
    // Four readers keep several pooled connections to the replica busy while it stops.
    let stopped = std::sync::atomic::AtomicBool::new(false);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..4)
            .map(|t| {
                let (queries, expected, stopped) = (&queries, &expected, &stopped);
                scope.spawn(move || {
                    let mut failed = Vec::new();
                    let mut after = 0;
                    let mut i = t;
                    while after < 20 {
                        let at = i % queries.len();
                        match ids(&queries[at]) {
                            Ok(got) if got == expected[at] => {}
                            Ok(got) => failed.push(format!("`{}`: {got:?}", queries[at].0)),
                            Err(e) => failed.push(format!("`{}`: {e}", queries[at].0)),
                        }
                        if stopped.load(std::sync::atomic::Ordering::Acquire) {
                            after += 1;
                        }
                        i += 1;
                    }
                    failed
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        replica.stop().expect("stop the replica");
        stopped.store(true, std::sync::atomic::Ordering::Release);
        readers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
    let mut on = Client::connect(&db.url, NoTls).unwrap();
    let from_primary: i64 = on
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
            &[&db.name],
        )
        .unwrap()
        .get(0);
    assert!(from_primary >= 2, "queries did not move to the primary");
}
