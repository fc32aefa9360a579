//! A real PostgreSQL for the tests, fresh databases on it, and a corpus both engines index.
//!
//! `FINDER_PG_URL` (an admin URL: it may create databases) names a server to use; otherwise
//! `scripts/postgres.sh` starts one in a temporary folder while any test needs it. Only when
//! neither works are the tests skipped, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use finder_core::{EmbedBackend, Settings};
use postgres::{Client, NoTls};

pub use finder_pg::with_database;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
}

fn server_dir() -> PathBuf {
    std::env::temp_dir().join(format!("finder-pg-test-{}", std::process::id()))
}

/// How many tests hold the server the script started (it stops with the last one).
static USERS: Mutex<(usize, Option<String>)> = Mutex::new((0, None));

fn run_script(args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed: {}",
            script().display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(stdout.lines().last().unwrap_or("").trim().to_string())
}

/// A server for one test; `None` (after saying why) when there is none to be had.
pub struct Server {
    pub url: String,
    /// Started by the script (so a replica of it can be made too).
    pub owned: bool,
}

pub fn server(test: &str) -> Option<Server> {
    if let Ok(url) = std::env::var("FINDER_PG_URL") {
        return Some(Server { url, owned: false });
    }
    let mut users = USERS.lock().unwrap_or_else(|e| e.into_inner());
    if users.0 == 0 {
        let dir = server_dir();
        match run_script(&["start", &dir.display().to_string()]) {
            Ok(url) => users.1 = Some(url),
            Err(e) => {
                eprintln!(
                    "SKIPPED {test}: FINDER_PG_URL is unset and scripts/postgres.sh could not start a server: {e}"
                );
                return None;
            }
        }
    }
    users.0 += 1;
    Some(Server {
        url: users.1.clone().expect("started"),
        owned: true,
    })
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let mut users = USERS.lock().unwrap_or_else(|e| e.into_inner());
        users.0 -= 1;
        if users.0 == 0 {
            let dir = server_dir();
            if let Err(e) = run_script(&["stop", &dir.display().to_string()]) {
                eprintln!("{e}");
            }
            let _ = std::fs::remove_dir_all(&dir);
            users.1 = None;
        }
    }
}

/// A streaming replica of the script's server, stopped when dropped.
pub struct Replica {
    pub url: String,
    dir: PathBuf,
}

impl Server {
    pub fn replica(&self) -> Result<Replica, String> {
        let dir = std::env::temp_dir().join(format!("finder-pg-replica-{}", std::process::id()));
        let url = run_script(&[
            "replica",
            &server_dir().display().to_string(),
            &dir.display().to_string(),
        ])?;
        Ok(Replica { url, dir })
    }

    /// A fresh, empty database; dropped with the value.
    pub fn database(&self, name: &str) -> Database {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let db = format!(
            "finder_{name}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = Client::connect(&self.url, NoTls).expect("connect to the test server");
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .expect("create a test database");
        Database {
            url: with_database(&self.url, &db),
            admin_url: self.url.clone(),
            name: db,
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = run_script(&["stop", &self.dir.display().to_string()]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Database {
    pub url: String,
    pub name: String,
    admin_url: String,
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.admin_url, NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Settings both engines index and query with: no graph (the PostgreSQL backend has none
/// yet), precomputed vectors of length [`DIM`].
pub fn settings() -> Settings {
    let mut s = Settings::default();
    s.graph.build = false;
    s.embed.backend = EmbedBackend::Precomputed;
    s.embed.dim = DIM;
    s
}

pub const DIM: usize = 8;

/// A small deterministic generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn unit(&mut self) -> f32 {
        (self.next() % 10_000) as f32 / 10_000.0
    }
}

pub const TOPICS: &[&[&str]] = &[
    &[
        "token", "session", "login", "expired", "refresh", "password", "oauth", "cookie",
    ],
    &[
        "backup",
        "restore",
        "snapshot",
        "disk",
        "archive",
        "retention",
        "volume",
        "copy",
    ],
    &[
        "deploy", "release", "rollback", "pipeline", "canary", "staging", "build", "artifact",
    ],
    &[
        "invoice", "payment", "refund", "billing", "currency", "tax", "receipt", "customer",
    ],
    &[
        "latency",
        "cache",
        "timeout",
        "queue",
        "throughput",
        "memory",
        "profile",
        "index",
    ],
];

pub const FILLER: &[&str] = &[
    "team", "note", "check", "step", "guide", "service", "config", "error", "user", "report",
    "daily", "review", "change", "plan", "issue", "owner", "window", "alert", "metric", "host",
];

/// Text of `words` words mostly from topic `t`.
pub fn text(rng: &mut Rng, t: usize, words: usize) -> String {
    (0..words)
        .map(|_| {
            if rng.below(3) == 0 {
                FILLER[rng.below(FILLER.len())]
            } else {
                TOPICS[t][rng.below(TOPICS[t].len())]
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A vector near topic `t`'s direction.
pub fn topic_vector(rng: &mut Rng, t: usize) -> Vec<f32> {
    (0..DIM)
        .map(|i| if i == t { 1.0 } else { 0.0 } + 0.6 * rng.unit() - 0.3)
        .collect()
}

/// A notes folder of `n` Markdown notes (front matter, headings, several paragraphs).
pub fn write_notes(root: &Path, n: usize, seed: u64) -> PathBuf {
    let dir = root.join("notes");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(seed);
    for i in 0..n {
        let t = i % TOPICS.len();
        let title = format!("{} {} {i}", TOPICS[t][rng.below(8)], FILLER[rng.below(20)]);
        let mut body = format!("---\ntitle: {title}\ntags: [{}]\n---\n\n", TOPICS[t][0]);
        for s in 0..1 + rng.below(3) {
            let other = if rng.below(4) == 0 {
                rng.below(TOPICS.len())
            } else {
                t
            };
            let words = 10 + rng.below(60);
            body.push_str(&format!(
                "## Part {s}\n\n{}\n\n",
                text(&mut rng, other, words)
            ));
        }
        std::fs::write(dir.join(format!("note-{i:03}.md")), body).unwrap();
    }
    dir
}

/// A JSON Lines file of `n` records with vectors.
pub fn write_records(root: &Path, n: usize, seed: u64) -> PathBuf {
    let path = root.join("records.jsonl");
    let mut rng = Rng::new(seed);
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let t = i % TOPICS.len();
            let words = 15 + rng.below(50);
            serde_json::json!({
                "id": format!("rec-{i:03}"),
                "title": format!("{} {}", TOPICS[t][rng.below(8)], FILLER[rng.below(20)]),
                "text": text(&mut rng, t, words),
                "vector": topic_vector(&mut rng, t),
            })
            .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

/// Queries: one to three topic words, sometimes a filler word.
pub fn queries(n: usize, seed: u64) -> Vec<(String, Vec<f32>)> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let t = rng.below(TOPICS.len());
            let mut words: Vec<&str> = (0..1 + rng.below(3))
                .map(|_| TOPICS[t][rng.below(8)])
                .collect();
            if rng.below(2) == 0 {
                words.push(FILLER[rng.below(FILLER.len())]);
            }
            (words.join(" "), topic_vector(&mut rng, t))
        })
        .collect()
}

/// Share of `a`'s first `k` ids also in `b`'s first `k`.
pub fn overlap(a: &[String], b: &[String], k: usize) -> f64 {
    let a: Vec<&String> = a.iter().take(k).collect();
    if a.is_empty() {
        return if b.is_empty() { 1.0 } else { 0.0 };
    }
    let b: Vec<&String> = b.iter().take(k).collect();
    a.iter().filter(|x| b.contains(x)).count() as f64 / a.len() as f64
}
