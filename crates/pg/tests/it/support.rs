//! A real PostgreSQL for the tests (`finder_pg::testing`), and a corpus both engines index.

use std::path::{Path, PathBuf};

use finder_core::{EmbedBackend, Settings};

pub use finder_pg::testing::{private_server, server, Database};
pub use finder_pg::with_database;

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
