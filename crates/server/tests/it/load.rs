//! A load test over real TCP on loopback: the real server (`finder_server::serve`) over a
//! fixture space, N kept-alive clients for D seconds, each mixing searches with document
//! upserts (one request in five is a PUT of a new or changed document). Every answer must be
//! 200, and every acknowledged upsert must be searchable by its unique word at the end (and
//! a changed document no longer by its previous word). Prints one line:
//!
//! `load: clients=50 secs=8 searches=… (…/s) p50=… p95=… p99=… upserts=… (…/s) p50=… p95=… p99=… errors=0`
//!
//! `FINDER_LOAD_CLIENTS` (default 50) and `FINDER_LOAD_SECS` (default 8) size it; run
//! `FINDER_LOAD_SECS=60 cargo test -p finder-server --release --test it load -- --nocapture`
//! for the figures worth quoting. It stops by itself: clients stop at the deadline and the
//! whole test is bounded by the deadline plus a grace period.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use finder_server::{Access, App, Limits, Space, Spaces};
use serde_json::json;
use tokio::task::JoinSet;

use crate::client::Client;
use crate::support::{index, start, write};

const WORDS: &[&str] = &[
    "river", "garden", "ledger", "backup", "deploy", "token", "session", "kernel", "window",
    "harbor", "copper", "lantern", "meadow", "signal", "thunder", "voyage", "cipher", "marble",
    "orchard", "pylon", "quartz", "saddle", "timber", "velvet", "walnut", "anchor", "beacon",
    "canyon", "dynamo", "ember", "falcon", "glacier", "hollow", "island", "jungle", "kettle",
    "lagoon", "mirror", "nectar", "oyster", "pepper", "quiver", "ribbon", "summit", "tunnel",
    "umbrella", "valley", "wizard", "yonder", "zephyr",
];

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(default)
}

/// xorshift64*: deterministic per client, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn words(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| WORDS[self.below(WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A word found in no other document: `qz`, six letters from `n`, and `x` (which no stemming
/// rule strips).
fn unique_word(n: u64) -> String {
    let mut s = String::from("qz");
    let mut v = n;
    for _ in 0..6 {
        s.push((b'a' + (v % 26) as u8) as char);
        v /= 26;
    }
    s.push('x');
    s
}

/// Several hundred generated notes, so searches do real work.
fn corpus(root: &Path) -> std::path::PathBuf {
    let dir = root.join("corpus");
    let mut rng = Rng(0x5EED);
    for i in 0..400 {
        let title = rng.words(2);
        let body: Vec<String> = (0..4).map(|_| rng.words(12)).collect();
        write(
            &dir,
            &format!("n{i:03}.md"),
            &format!("# {title}\n\n{}\n", body.join(".\n\n")),
        );
    }
    dir
}

#[derive(Default)]
struct Tally {
    searches: Vec<Duration>,
    upserts: Vec<Duration>,
    errors: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn load_searches_and_upserts_over_tcp() {
    let clients = env_or("FINDER_LOAD_CLIENTS", 50) as usize;
    let secs = env_or("FINDER_LOAD_SECS", 8);
    let tmp = tempfile::tempdir().unwrap();
    let dir = index(tmp.path(), "idx", &corpus(tmp.path()));
    let spaces = Spaces::new(vec![Space::new("default", &dir, None).unwrap()]).unwrap();
    let limits = Limits {
        max_in_flight: clients.max(finder_server::DEFAULT_MAX_IN_FLIGHT),
        ..Limits::default()
    };
    let app = App::new(spaces, Access::open(), limits);
    let server = start(app).await;
    let addr = server.addr;

    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut tasks = JoinSet::new();
    for c in 0..clients {
        tasks.spawn(client(addr, c, deadline));
    }
    let grace = Duration::from_secs(secs + 240);
    let mut total = Tally::default();
    let joined = tokio::time::timeout(grace, async {
        while let Some(t) = tasks.join_next().await {
            let t = t.expect("a client task panicked");
            total.searches.extend(t.searches);
            total.upserts.extend(t.upserts);
            total.errors.extend(t.errors);
        }
    })
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    server.stop().await;
    assert!(joined.is_ok(), "the load test ran past {grace:?}");

    println!(
        "load: clients={clients} secs={secs} searches={} ({:.1}/s) {} upserts={} ({:.1}/s) {} errors={}",
        total.searches.len(),
        total.searches.len() as f64 / elapsed,
        percentiles(&mut total.searches),
        total.upserts.len(),
        total.upserts.len() as f64 / elapsed,
        percentiles(&mut total.upserts),
        total.errors.len()
    );
    assert!(
        total.errors.is_empty(),
        "{} errors, first ones: {:#?}",
        total.errors.len(),
        &total.errors[..total.errors.len().min(10)]
    );
    assert!(!total.searches.is_empty() && !total.upserts.is_empty());
}

/// One client: searches and upserts until `deadline`, then checks its acknowledged writes.
async fn client(addr: std::net::SocketAddr, c: usize, deadline: Instant) -> Tally {
    let mut http = Client::new(addr, None);
    http.timeout = Duration::from_secs(150);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (c as u64 + 1).wrapping_mul(0x1000_0001));
    let mut tally = Tally::default();
    // id -> (latest acknowledged word, the word it replaced)
    let mut mine: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut written = 0u64;
    while Instant::now() < deadline {
        if rng.below(5) == 0 {
            let id = if mine.is_empty() || rng.below(2) == 0 {
                format!("load-{c}-{}", mine.len())
            } else {
                mine.keys().nth(rng.below(mine.len())).unwrap().clone()
            };
            let word = unique_word(c as u64 * 1_000_000 + written);
            written += 1;
            let body = json!({
                "title": format!("Load note {id}"),
                "text": format!("{} {word} {}", rng.words(8), rng.words(8)),
                "tags": ["load"],
            })
            .to_string();
            let t = Instant::now();
            match http
                .send("PUT", &format!("/v1/documents/{id}"), Some(&body))
                .await
            {
                Ok(r) if r.status == 200 => {
                    tally.upserts.push(t.elapsed());
                    let previous = mine.remove(&id).map(|(w, _)| w);
                    mine.insert(id, (word, previous));
                }
                Ok(r) => tally
                    .errors
                    .push(format!("PUT {id}: {} {}", r.status, r.body)),
                Err(e) => tally.errors.push(e),
            }
        } else {
            let body = json!({"query": rng.words(2), "limit": 10}).to_string();
            let t = Instant::now();
            match http.send("POST", "/v1/search", Some(&body)).await {
                Ok(r) if r.status == 200 => tally.searches.push(t.elapsed()),
                Ok(r) => tally
                    .errors
                    .push(format!("search: {} {}", r.status, r.body)),
                Err(e) => tally.errors.push(e),
            }
        }
    }
    // Acknowledged means durable and searchable: each write is found by its word, and a
    // replaced version no longer is.
    for (id, (word, previous)) in &mine {
        let found = search_ids(&mut http, word, &mut tally).await;
        if found.as_ref().is_some_and(|ids| !ids.contains(id)) {
            tally.errors.push(format!(
                "{id}: not found by its word {word} (got {found:?})"
            ));
        }
        if let Some(old) = previous {
            let found = search_ids(&mut http, old, &mut tally).await;
            if found.as_ref().is_some_and(|ids| ids.contains(id)) {
                tally
                    .errors
                    .push(format!("{id}: still found by its replaced word {old}"));
            }
        }
    }
    tally
}

async fn search_ids(http: &mut Client, word: &str, tally: &mut Tally) -> Option<Vec<String>> {
    let body = json!({"query": word, "limit": 5}).to_string();
    match http.send("POST", "/v1/search", Some(&body)).await {
        Ok(r) if r.status == 200 => Some(
            r.json()["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["id"].as_str().unwrap().to_string())
                .collect(),
        ),
        Ok(r) => {
            tally
                .errors
                .push(format!("check {word}: {} {}", r.status, r.body));
            None
        }
        Err(e) => {
            tally.errors.push(e);
            None
        }
    }
}

fn percentiles(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "p50=- p95=- p99=-".into();
    }
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        format!("{:.1}ms", samples[i].as_secs_f64() * 1000.0)
    };
    format!("p50={} p95={} p99={}", at(0.50), at(0.95), at(0.99))
}
