//! The synthetic dataset generator: a deterministic, streaming maker of corpora where both
//! words and vectors carry relevance signal.
//!
//! The model, briefly:
//! - a vocabulary of pronounceable words made from syllables, common words short, with
//!   Zipf–Mandelbrot frequencies (`1 / (rank + 2.7)`);
//! - topics, each with its own sub-vocabulary of moderately rare words (Zipf within the topic)
//!   and a random centroid direction; topic sizes follow a mild power law;
//! - a document picks a topic (and sometimes a second one), a lognormal length (30–400 words,
//!   under 3,000 characters, so it is one Finder fragment), and draws each word from its topic
//!   or from the global distribution, sometimes repeating one of its own rarer words;
//! - its vector is `unit(centroid + ½·second centroid + noise + rare-word component)`, the last
//!   being the normalised sum of fixed random vectors of its rarest words;
//! - it links to 0–5 documents, mostly of its own topic, preferring popular ones;
//! - a query targets one document: 2–6 of its rarer words, some swapped for other words of its
//!   topic (vocabulary mismatch), maybe one common topic word; its vector is the target's plus
//!   a pull toward the topic centroid plus noise. The target is the only judged document.
//!
//! Every document draws from its own random stream, so its bytes depend only on the seed and
//! its number; the output is written as it is made.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::dataset::{self, Meta};
use crate::rng::{normalize, Alias, Rng};

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    pub docs: usize,
    pub queries: usize,
    pub dim: usize,
    pub seed: u64,
    /// Words in the vocabulary.
    pub vocab: usize,
    /// Number of topics; `None`: one per 20 documents, between 1 and 1,000.
    pub topics: Option<usize>,
    /// Norm of the noise added to a query's vector (relative to its unit target): the
    /// dense channel's difficulty.
    pub query_noise: f32,
    /// Chance that each query word is swapped for another word of the topic: the lexical
    /// channel's difficulty (vocabulary mismatch).
    pub query_swap: f64,
    /// Progress lines on stderr.
    pub progress: bool,
}

impl GenOptions {
    pub fn new(docs: usize) -> GenOptions {
        GenOptions {
            docs,
            queries: 1000,
            dim: 384,
            seed: 42,
            vocab: DEFAULT_VOCAB,
            topics: None,
            query_noise: DEFAULT_QUERY_NOISE,
            query_swap: DEFAULT_QUERY_SWAP,
            progress: false,
        }
    }
}

/// What a run of the generator made.
#[derive(Debug, Clone)]
pub struct GenReport {
    pub docs: usize,
    pub queries: usize,
    pub topics: usize,
    pub links: u64,
    pub words: u64,
    pub bytes: u64,
    pub seconds: f64,
}

pub const DEFAULT_VOCAB: usize = 50_000;
pub const DEFAULT_QUERY_NOISE: f32 = 4.0;
pub const DEFAULT_QUERY_SWAP: f64 = 0.45;
/// Format of the generator's output; bumped whenever the same seed would give other bytes.
const VERSION: u32 = 1;

// Stream tags: each kind of draw has its own streams.
const VOCAB_STREAM: u64 = 1;
const WORD_VECTOR_STREAM: u64 = 2;
const TOPIC_STREAM: u64 = 3;
const TOPIC_OF_DOC_STREAM: u64 = 4;
const DOC_STREAM: u64 = 5;
const TARGET_STREAM: u64 = 6;
const QUERY_STREAM: u64 = 7;

/// Global word frequencies: Zipf–Mandelbrot.
const ZIPF_S: f64 = 1.0;
const ZIPF_Q: f64 = 2.7;
/// Words per topic and their frequency law inside the topic.
const TOPIC_WORDS: usize = 150;
const TOPIC_ZIPF_S: f64 = 0.9;
/// Topic words are drawn from ranks at or past this one (not the function words).
const TOPIC_MIN_RANK: usize = 200;
/// Topic sizes: Zipf with a flat head.
const TOPIC_SIZE_S: f64 = 0.6;
const TOPIC_SIZE_Q: f64 = 5.0;

/// Document length in words: lognormal around `LEN_MEDIAN`, clamped.
const LEN_MEDIAN: f64 = 90.0;
const LEN_SIGMA: f64 = 0.65;
const LEN_MIN: usize = 30;
const LEN_MAX: usize = 400;
/// Text stays under this many bytes (one Finder fragment holds 3,200 characters).
const MAX_TEXT: usize = 2_900;

/// Per word: from the primary topic, from the second topic, or a repeat of the document's
/// own rarer words (burstiness); otherwise from the global distribution.
const P_TOPIC: f64 = 0.30;
const P_SECOND_TOPIC: f64 = 0.08;
const P_REPEAT: f64 = 0.06;
const P_HAS_SECOND_TOPIC: f64 = 0.3;
/// Words at or past this rank are "rarer": repeats, query words.
const RARER_RANK: usize = 300;
/// The rarest words of a document shape its vector.
const VECTOR_WORDS: usize = 8;

/// Vector mixture weights (before normalising).
const W_TOPIC: f32 = 1.0;
const W_SECOND_TOPIC: f32 = 0.5;
const W_NOISE: f32 = 0.3;
const W_RARE: f32 = 0.3;

/// Links per document (0..=5) and how they are chosen.
const LINK_WEIGHTS: [f64; 6] = [0.2, 0.25, 0.2, 0.15, 0.1, 0.1];
const P_LINK_SAME_TOPIC: f64 = 0.8;
/// Popularity: index `⌊n·u^k⌋` into the candidates (lower indices are popular).
const LINK_SKEW: f64 = 3.0;

/// Queries: words taken, and how they are blurred.
const QUERY_MIN_WORDS: usize = 2;
const QUERY_MAX_WORDS: usize = 6;
const P_QUERY_COMMON: f64 = 0.5;
const Q_TOPIC: f32 = 0.35;

const ONSETS: &[&str] = &[
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br",
    "cr", "dr", "fr", "gr", "pr", "tr", "st", "sp", "sk", "sh", "ch", "th", "pl", "cl", "bl", "gl",
    "fl", "sl", "sm", "sn", "qu", "", "", "",
];
const NUCLEI: &[&str] = &[
    "a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ou", "ie", "oa", "au",
];
const CODAS: &[&str] = &[
    "", "", "", "n", "r", "l", "m", "t", "nd", "rk", "st", "ng", "x", "ck", "lt", "mp",
];
/// Tantivy's English stop words: a synthetic word equal to one would vanish from the index.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Generates a dataset into `out` (created if needed; existing dataset files are replaced).
pub fn generate(options: &GenOptions, out: &Path) -> Result<GenReport> {
    if options.docs == 0 {
        bail!("--docs must be at least 1");
    }
    if options.dim < 2 {
        bail!("--dim must be at least 2");
    }
    if options.vocab < 1_000 {
        bail!("--vocab must be at least 1000");
    }
    if !(options.query_noise >= 0.0 && options.query_noise.is_finite()) {
        bail!("--query-noise must be a finite number >= 0");
    }
    if !(0.0..=1.0).contains(&options.query_swap) {
        bail!("--query-swap must be between 0 and 1");
    }
    let started = Instant::now();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    // meta.json is written last: without it the folder is not a dataset.
    let _ = std::fs::remove_file(out.join(dataset::META));

    let model = Model::new(options);
    let queries = options.queries.min(options.docs);
    let targets = pick_targets(options.seed, options.docs, queries);

    let create = |name: &str| -> Result<BufWriter<File>> {
        let path = out.join(name);
        let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(BufWriter::with_capacity(1 << 22, file))
    };
    let mut corpus = create(dataset::CORPUS)?;
    let mut corpus_vectors = create(dataset::CORPUS_VECTORS)?;
    let mut made_queries: Vec<Option<(String, Vec<f32>)>> = vec![None; queries];
    let mut report = GenReport {
        docs: options.docs,
        queries,
        topics: model.topics,
        links: 0,
        words: 0,
        bytes: 0,
        seconds: 0.0,
    };
    let mut scratch = Scratch::new(options.dim);
    let mut last_progress = Instant::now();
    for i in 0..options.docs {
        let doc = model.document(i, &mut scratch);
        report.links += doc.links.len() as u64;
        report.words += doc.words as u64;
        scratch.line.clear();
        write_doc_line(&mut scratch.line, i, &doc);
        report.bytes += scratch.line.len() as u64;
        corpus.write_all(scratch.line.as_bytes())?;
        dataset::write_row(&mut corpus_vectors, &scratch.vector)?;
        if let Some(&q) = targets.get(&(i as u32)) {
            made_queries[q as usize] = Some(model.query(q as usize, i, &scratch));
        }
        if options.progress && last_progress.elapsed().as_secs_f64() >= 5.0 {
            last_progress = Instant::now();
            let rate = (i + 1) as f64 / started.elapsed().as_secs_f64();
            eprintln!("gen: {}/{} docs ({rate:.0} docs/s)", i + 1, options.docs);
        }
    }
    corpus.flush()?;
    corpus_vectors.flush()?;
    drop((corpus, corpus_vectors));

    let mut query_lines = create(dataset::QUERIES)?;
    let mut query_vectors = create(dataset::QUERY_VECTORS)?;
    let mut qrels = create(dataset::QRELS)?;
    writeln!(qrels, "{}", dataset::QRELS_HEADER)?;
    let mut by_query: Vec<(u32, u32)> = targets.iter().map(|(&d, &q)| (q, d)).collect();
    by_query.sort_unstable();
    for (q, doc) in by_query {
        let (text, vector) = made_queries[q as usize]
            .take()
            .expect("every target document was generated");
        let line = dataset::QueryLine {
            id: query_id(q as usize),
            text,
        };
        serde_json::to_writer(&mut query_lines, &line)?;
        query_lines.write_all(b"\n")?;
        dataset::write_row(&mut query_vectors, &vector)?;
        writeln!(qrels, "{}\t{}\t1", line.id, doc_id(doc as usize))?;
    }
    query_lines.flush()?;
    query_vectors.flush()?;
    qrels.flush()?;

    let name = out.file_name().map_or_else(
        || "synthetic".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Meta {
        name,
        dim: options.dim,
        docs: options.docs,
        queries,
        model: "synthetic".into(),
        generator: Some(describe(options)),
    }
    .write(out)?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The generator block of a dataset's `meta.json`: every parameter that shapes its bytes.
pub fn describe(options: &GenOptions) -> serde_json::Value {
    json!({
        "kind": "finder-bench gen",
        "version": VERSION,
        "seed": options.seed,
        "vocab": options.vocab,
        "topics": topic_count(options),
        "zipf": {"s": ZIPF_S, "q": ZIPF_Q},
        "topic_words": TOPIC_WORDS,
        "doc_words": {"median": LEN_MEDIAN, "sigma": LEN_SIGMA, "min": LEN_MIN, "max": LEN_MAX, "max_text_bytes": MAX_TEXT},
        "vector": {"topic": W_TOPIC, "second_topic": W_SECOND_TOPIC, "noise": W_NOISE, "rare_words": W_RARE, "rare_word_count": VECTOR_WORDS},
        "query": {"words": [QUERY_MIN_WORDS, QUERY_MAX_WORDS], "swap": options.query_swap, "common": P_QUERY_COMMON, "topic": Q_TOPIC, "noise": options.query_noise},
        "links": {"weights": LINK_WEIGHTS, "same_topic": P_LINK_SAME_TOPIC, "skew": LINK_SKEW},
    })
}

/// Whether `dir` holds a finished dataset that these options would generate again: the same
/// sizes and the same generator block. A dataset made by an older generator, or with other
/// options, is not current (a cache keyed on the folder's name alone once served a 10k corpus
/// made with older query parameters).
pub fn is_current(options: &GenOptions, dir: &Path) -> bool {
    let Ok(meta) = Meta::read(dir) else {
        return false;
    };
    meta.docs == options.docs
        && meta.dim == options.dim
        && meta.queries == options.queries.min(options.docs)
        && meta.generator.as_ref() == Some(&describe(options))
}

fn topic_count(options: &GenOptions) -> usize {
    options
        .topics
        .unwrap_or((options.docs / 20).clamp(1, 1000))
        .max(1)
}

/// `d0000001` for document 0.
pub fn doc_id(i: usize) -> String {
    format!("d{:07}", i + 1)
}

/// `q000001` for query 0.
pub fn query_id(i: usize) -> String {
    format!("q{:06}", i + 1)
}

/// Document → query number for `queries` distinct documents drawn uniformly.
fn pick_targets(seed: u64, docs: usize, queries: usize) -> HashMap<u32, u32> {
    let mut rng = Rng::stream(seed, TARGET_STREAM, 0);
    let mut targets = HashMap::with_capacity(queries);
    if queries * 2 > docs {
        // Dense: a partial shuffle of every document.
        let mut all: Vec<u32> = (0..docs as u32).collect();
        for q in 0..queries {
            let j = q + rng.below((docs - q) as u64) as usize;
            all.swap(q, j);
            targets.insert(all[q], q as u32);
        }
        return targets;
    }
    let mut q = 0u32;
    while (q as usize) < queries {
        let d = rng.below(docs as u64) as u32;
        if let std::collections::hash_map::Entry::Vacant(e) = targets.entry(d) {
            e.insert(q);
            q += 1;
        }
    }
    targets
}

/// Everything fixed before the first document: vocabulary, frequencies, topics, vectors.
struct Model {
    seed: u64,
    dim: usize,
    docs: usize,
    topics: usize,
    words: Vec<String>,
    global: Alias,
    /// `vocab × dim` fixed random directions, one per word.
    word_vectors: Vec<f32>,
    topic_size: Alias,
    /// The shared within-topic frequency law over `TOPIC_WORDS` slots.
    topic_law: Alias,
    /// `topics × TOPIC_WORDS` word ranks.
    topic_words: Vec<u32>,
    /// `topics × dim` centroids.
    centroids: Vec<f32>,
    topic_of: Vec<u32>,
    members: Vec<Vec<u32>>,
    query_noise: f32,
    query_swap: f64,
}

/// Buffers reused from document to document, and the last document's words.
struct Scratch {
    tokens: Vec<u32>,
    vector: Vec<f32>,
    noise: Vec<f32>,
    rare: Vec<f32>,
    line: String,
    primary: usize,
}

impl Scratch {
    fn new(dim: usize) -> Scratch {
        Scratch {
            tokens: Vec::new(),
            vector: vec![0.0; dim],
            noise: vec![0.0; dim],
            rare: vec![0.0; dim],
            line: String::new(),
            primary: 0,
        }
    }
}

/// One generated document (its words and vector stay in the scratch).
struct Generated {
    title: String,
    text: String,
    links: Vec<u32>,
    words: usize,
}

impl Model {
    fn new(options: &GenOptions) -> Model {
        let seed = options.seed;
        let dim = options.dim;
        let topics = topic_count(options);
        let words = vocabulary(seed, options.vocab);
        let global = Alias::zipf(words.len(), ZIPF_S, ZIPF_Q);
        let mut word_vectors = vec![0f32; words.len() * dim];
        let mut rng = Rng::stream(seed, WORD_VECTOR_STREAM, 0);
        for row in word_vectors.chunks_exact_mut(dim) {
            rng.unit_vector(row);
        }

        let topic_words_n = TOPIC_WORDS.min(words.len() - TOPIC_MIN_RANK);
        let mut topic_words = Vec::with_capacity(topics * topic_words_n);
        let mut centroids = vec![0f32; topics * dim];
        for t in 0..topics {
            let mut rng = Rng::stream(seed, TOPIC_STREAM, t as u64);
            rng.unit_vector(&mut centroids[t * dim..(t + 1) * dim]);
            let span = (words.len() - TOPIC_MIN_RANK) as f64;
            let mut chosen = HashSet::new();
            while chosen.len() < topic_words_n {
                // u² favours the less rare end: topic words are specialised, not unique.
                let u = rng.f64();
                let rank = TOPIC_MIN_RANK + (span * u * u) as usize;
                if chosen.insert(rank) {
                    topic_words.push(rank as u32);
                }
            }
        }
        let topic_size = Alias::zipf(topics, TOPIC_SIZE_S, TOPIC_SIZE_Q);
        let mut rng = Rng::stream(seed, TOPIC_OF_DOC_STREAM, 0);
        let mut members = vec![Vec::new(); topics];
        let topic_of: Vec<u32> = (0..options.docs)
            .map(|i| {
                let t = topic_size.sample(&mut rng);
                members[t].push(i as u32);
                t as u32
            })
            .collect();
        Model {
            seed,
            dim,
            docs: options.docs,
            topics,
            words,
            global,
            word_vectors,
            topic_size,
            topic_law: Alias::zipf(topic_words_n, TOPIC_ZIPF_S, 1.0),
            topic_words,
            centroids,
            topic_of,
            members,
            query_noise: options.query_noise,
            query_swap: options.query_swap,
        }
    }

    fn topic_word(&self, topic: usize, rng: &mut Rng) -> u32 {
        self.topic_words[topic * self.topic_law.len() + self.topic_law.sample(rng)]
    }

    fn centroid(&self, topic: usize) -> &[f32] {
        &self.centroids[topic * self.dim..(topic + 1) * self.dim]
    }

    fn word_vector(&self, rank: u32) -> &[f32] {
        let r = rank as usize;
        &self.word_vectors[r * self.dim..(r + 1) * self.dim]
    }

    /// Document `i`: its words and vector go to `s`, the rest is returned.
    fn document(&self, i: usize, s: &mut Scratch) -> Generated {
        let mut rng = Rng::stream(self.seed, DOC_STREAM, i as u64);
        let primary = self.topic_of[i] as usize;
        s.primary = primary;
        let second = (self.topics > 1 && rng.chance(P_HAS_SECOND_TOPIC)).then(|| loop {
            let t = self.topic_size.sample(&mut rng);
            if t != primary {
                break t;
            }
        });
        let len = ((LEN_MEDIAN.ln() + LEN_SIGMA * rng.normal()).exp().round() as usize)
            .clamp(LEN_MIN, LEN_MAX);

        // Words, then text: sentences of 6–18 words, capitalised, some commas.
        s.tokens.clear();
        let mut text = String::with_capacity(len * 7);
        let mut left_in_sentence = 0usize;
        while s.tokens.len() < len {
            let u = rng.f64();
            let word = if u < P_TOPIC {
                self.topic_word(primary, &mut rng)
            } else if u < P_TOPIC + P_SECOND_TOPIC && second.is_some() {
                self.topic_word(second.unwrap_or(primary), &mut rng)
            } else if u < P_TOPIC + P_SECOND_TOPIC + P_REPEAT && !s.tokens.is_empty() {
                let pick = s.tokens[rng.below(s.tokens.len() as u64) as usize];
                if (pick as usize) < RARER_RANK {
                    self.global.sample(&mut rng) as u32
                } else {
                    pick
                }
            } else {
                self.global.sample(&mut rng) as u32
            };
            let w = &self.words[word as usize];
            if text.len() + w.len() + 2 > MAX_TEXT {
                break;
            }
            if left_in_sentence == 0 {
                if !text.is_empty() {
                    text.push_str(". ");
                }
                left_in_sentence = rng.range(6, 18);
                push_capitalised(&mut text, w);
            } else {
                if rng.chance(0.08) {
                    text.push(',');
                }
                text.push(' ');
                text.push_str(w);
            }
            left_in_sentence -= 1;
            s.tokens.push(word);
        }
        text.push('.');

        // Title: 2–6 words from the topic and the document's rarer words.
        let n_title = rng.range(2, 6);
        let mut title = String::new();
        for k in 0..n_title {
            let word = if rng.chance(0.5) {
                self.topic_word(primary, &mut rng)
            } else {
                let pick = s.tokens[rng.below(s.tokens.len() as u64) as usize];
                if (pick as usize) < 100 {
                    self.topic_word(primary, &mut rng)
                } else {
                    pick
                }
            };
            if k > 0 {
                title.push(' ');
            }
            push_capitalised(&mut title, &self.words[word as usize]);
        }

        // Vector: topic centroid(s), noise, and the document's rarest words.
        let mut rare: Vec<u32> = s.tokens.clone();
        rare.sort_unstable_by(|a, b| b.cmp(a));
        rare.dedup();
        rare.truncate(VECTOR_WORDS);
        s.rare.iter_mut().for_each(|x| *x = 0.0);
        for &w in &rare {
            for (r, x) in s.rare.iter_mut().zip(self.word_vector(w)) {
                *r += x;
            }
        }
        normalize(&mut s.rare);
        rng.unit_vector(&mut s.noise);
        let c1 = self.centroid(primary);
        for (((v, c), n), r) in s.vector.iter_mut().zip(c1).zip(&s.noise).zip(&s.rare) {
            *v = W_TOPIC * c + W_NOISE * n + W_RARE * r;
        }
        if let Some(t) = second {
            for (v, c) in s.vector.iter_mut().zip(self.centroid(t)) {
                *v += W_SECOND_TOPIC * c;
            }
        }
        normalize(&mut s.vector);

        // Links: mostly within the topic, to popular documents.
        let n_links = pick_weighted(&mut rng, &LINK_WEIGHTS);
        let mut links: Vec<u32> = Vec::with_capacity(n_links);
        for _ in 0..n_links {
            for _attempt in 0..4 {
                let target = if rng.chance(P_LINK_SAME_TOPIC) {
                    let m = &self.members[primary];
                    m[skewed_index(&mut rng, m.len())]
                } else {
                    skewed_index(&mut rng, self.docs) as u32
                };
                if target as usize != i && !links.contains(&target) {
                    links.push(target);
                    break;
                }
            }
        }
        Generated {
            title,
            words: s.tokens.len(),
            text,
            links,
        }
    }

    /// Query `q` for document `doc`, made from the document just generated into `s`.
    fn query(&self, q: usize, doc: usize, s: &Scratch) -> (String, Vec<f32>) {
        let mut rng = Rng::stream(self.seed, QUERY_STREAM, q as u64);
        let mut rarer: Vec<u32> = s
            .tokens
            .iter()
            .copied()
            .filter(|&w| w as usize >= RARER_RANK)
            .collect();
        rarer.sort_unstable();
        rarer.dedup();
        if rarer.len() < QUERY_MIN_WORDS {
            rarer = s.tokens.clone();
            rarer.sort_unstable();
            rarer.dedup();
        }
        let k = rng.range(QUERY_MIN_WORDS, QUERY_MAX_WORDS).min(rarer.len());
        for j in 0..k {
            let pick = j + rng.below((rarer.len() - j) as u64) as usize;
            rarer.swap(j, pick);
        }
        let mut words: Vec<u32> = rarer[..k]
            .iter()
            .map(|&w| {
                if rng.chance(self.query_swap) {
                    self.topic_word(s.primary, &mut rng)
                } else {
                    w
                }
            })
            .collect();
        if rng.chance(P_QUERY_COMMON) {
            let common = self.topic_words[s.primary * self.topic_law.len() + rng.below(5) as usize];
            words.push(common);
        }
        for j in (1..words.len()).rev() {
            words.swap(j, rng.below(j as u64 + 1) as usize);
        }
        words.dedup();
        let text = words
            .iter()
            .map(|&w| self.words[w as usize].as_str())
            .collect::<Vec<_>>()
            .join(" ");

        let mut noise = vec![0f32; self.dim];
        rng.unit_vector(&mut noise);
        let c = self.centroid(s.primary);
        let mut v: Vec<f32> = (0..self.dim)
            .map(|d| s.vector[d] + Q_TOPIC * c[d] + self.query_noise * noise[d])
            .collect();
        normalize(&mut v);
        debug_assert_eq!(self.topic_of[doc] as usize, s.primary);
        (text, v)
    }
}

/// The vocabulary, most frequent first: pronounceable, unique, no stop words; common words
/// have fewer syllables.
fn vocabulary(seed: u64, size: usize) -> Vec<String> {
    let mut rng = Rng::stream(seed, VOCAB_STREAM, 0);
    let mut seen = HashSet::with_capacity(size);
    let mut words = Vec::with_capacity(size);
    let mut misses = 0usize;
    while words.len() < size {
        let rank = words.len();
        let (lo, hi) = match rank {
            0..100 => (1, 1),
            100..2_000 => (1, 2),
            2_000..15_000 => (2, 3),
            _ => (2, 4),
        };
        // A crowded syllable count gives way to a longer one.
        let syllables = rng.range(lo, hi) + misses / 64;
        let mut w = String::new();
        for k in 0..syllables {
            w.push_str(ONSETS[rng.below(ONSETS.len() as u64) as usize]);
            w.push_str(NUCLEI[rng.below(NUCLEI.len() as u64) as usize]);
            if k + 1 == syllables || rng.chance(0.25) {
                w.push_str(CODAS[rng.below(CODAS.len() as u64) as usize]);
            }
        }
        if w.len() < 2 || STOP_WORDS.contains(&w.as_str()) || !seen.insert(w.clone()) {
            misses += 1;
            continue;
        }
        misses = 0;
        words.push(w);
    }
    words
}

fn push_capitalised(out: &mut String, word: &str) {
    let mut chars = word.chars();
    if let Some(first) = chars.next() {
        out.push(first.to_ascii_uppercase());
        out.push_str(chars.as_str());
    }
}

fn pick_weighted(rng: &mut Rng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut u = rng.f64() * total;
    for (i, w) in weights.iter().enumerate() {
        if u < *w {
            return i;
        }
        u -= w;
    }
    weights.len() - 1
}

/// An index into `n` items skewed toward 0: a power law of popularity.
fn skewed_index(rng: &mut Rng, n: usize) -> usize {
    ((n as f64 * rng.f64().powf(LINK_SKEW)) as usize).min(n - 1)
}

/// The document's JSON line. Words are ASCII letters and the text adds only spaces, commas
/// and full stops, so no escaping is needed and the line is built by hand (fast).
fn write_doc_line(out: &mut String, i: usize, doc: &Generated) {
    use std::fmt::Write as _;
    let _ = write!(
        out,
        "{{\"id\":\"{}\",\"title\":\"{}\",\"text\":\"{}\",\"links\":[",
        doc_id(i),
        doc.title,
        doc.text
    );
    for (k, l) in doc.links.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        let _ = write!(out, "\"{}\"", doc_id(*l as usize));
    }
    out.push_str("]}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_unique_pronounceable_and_short_at_the_head() {
        let words = vocabulary(1, 20_000);
        let unique: HashSet<&String> = words.iter().collect();
        assert_eq!(unique.len(), words.len());
        assert!(words
            .iter()
            .all(|w| w.bytes().all(|b| b.is_ascii_lowercase())));
        assert!(!words.iter().any(|w| STOP_WORDS.contains(&w.as_str())));
        let mean = |r: &[String]| r.iter().map(String::len).sum::<usize>() as f64 / r.len() as f64;
        assert!(mean(&words[..100]) < mean(&words[15_000..]));
    }

    #[test]
    fn a_dataset_is_current_only_for_the_options_that_made_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = GenOptions::new(60);
        options.dim = 8;
        options.queries = 10;
        assert!(!is_current(&options, dir.path()), "no dataset yet");
        generate(&options, dir.path()).unwrap();
        assert!(is_current(&options, dir.path()));
        let mut noisier = options.clone();
        noisier.query_noise += 1.0;
        assert!(!is_current(&noisier, dir.path()));
        let mut larger = options.clone();
        larger.docs += 1;
        assert!(!is_current(&larger, dir.path()));
    }

    #[test]
    fn targets_are_distinct_in_both_regimes() {
        for (docs, queries) in [(1000, 50), (100, 90), (10, 10)] {
            let t = pick_targets(3, docs, queries);
            assert_eq!(t.len(), queries);
            let qs: HashSet<u32> = t.values().copied().collect();
            assert_eq!(qs.len(), queries);
            assert!(t.keys().all(|&d| (d as usize) < docs));
        }
    }

    #[test]
    fn documents_fit_one_fragment() {
        let mut options = GenOptions::new(400);
        options.dim = 16;
        options.vocab = 5_000;
        let model = Model::new(&options);
        let mut s = Scratch::new(16);
        for i in 0..400 {
            let doc = model.document(i, &mut s);
            assert!(doc.text.len() < 3_000, "{}", doc.text.len());
            assert!(doc.words >= LEN_MIN.min(doc.words));
            let n = doc.title.split(' ').count();
            assert!((2..=6).contains(&n), "{}", doc.title);
            assert!(doc.links.len() <= 5 && !doc.links.contains(&(i as u32)));
        }
    }
}
