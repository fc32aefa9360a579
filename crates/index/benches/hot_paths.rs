//! The hot paths of a query, measured one by one with criterion on synthetic data made here:
//! BM25 top-k over 50k fragments, HNSW search over 20k 384-dimensional vectors, reciprocal
//! rank fusion of three lists, the graph boost on a 100k-node graph, the rollup of a fused
//! list, whole queries (lexical, and hybrid with a given vector) through `Finder`, and the
//! indexing run's reading of record lines with given vectors.
//!
//! `cargo bench -p finder-index --bench hot_paths [-- FILTER]`. Under `cargo test
//! --all-targets` (no `--bench` argument) it only says how to run it: building the corpora
//! takes a while and timings are not tests.

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion};
use finder_core::{
    boost_with, rollup, rrf, BoostParams, BoostScratch, Channel, EmbedBackend, FragmentKey, Graph,
    KindWeights, RankedList, ScoredFragment, Settings, SourceKey,
};
use finder_index::testing::{self, Hnsw, HnswParams};
use finder_index::{build_vectors, index_inputs, Finder};

/// splitmix64: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// A Zipf-like rank in `0..n`: small ranks are common.
    fn zipf(&mut self, n: usize) -> usize {
        let u = self.unit().max(1e-6);
        ((n as f32).powf(u) - 1.0) as usize % n
    }
}

const VOCAB: usize = 20_000;
const TOPICS: usize = 200;
const DIM: usize = 384;

fn word(i: usize) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "ba", "po", "ge", "zu", "fi", "ha",
        "jo",
    ];
    let mut w = String::new();
    let mut x = i + 1;
    while x > 0 {
        w.push_str(SYLLABLES[x % 16]);
        x /= 16;
    }
    w
}

fn topic_vector(t: usize) -> Vec<f32> {
    let mut rng = Rng(t as u64 * 7919 + 1);
    (0..DIM).map(|_| rng.unit() - 0.5).collect()
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn doc_vector(rng: &mut Rng, t: usize) -> Vec<f32> {
    let base = topic_vector(t);
    unit(base.iter().map(|x| x + 0.4 * (rng.unit() - 0.5)).collect())
}

/// Text of one fragment: Zipf-distributed common words plus its topic's words.
fn text(rng: &mut Rng, t: usize, words: usize) -> String {
    (0..words)
        .map(|_| {
            if rng.below(3) == 0 {
                word(VOCAB / 2 + (t * 50 + rng.below(50)) % (VOCAB / 2))
            } else {
                word(rng.zipf(VOCAB / 2))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An index of `n` one-fragment records, with `dim`-sized vectors when `vectors`.
fn corpus(dir: &std::path::Path, n: usize, vectors: bool) -> (PathBuf, Settings) {
    let mut rng = Rng(n as u64);
    let records = dir.join("records.jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&records).unwrap());
    for i in 0..n {
        let t = rng.below(TOPICS);
        let words = 40 + rng.below(120);
        let mut record = serde_json::json!({
            "id": format!("d{i:07}"),
            "title": text(&mut rng, t, 4),
            "text": text(&mut rng, t, words),
        });
        if vectors {
            record["vector"] = serde_json::json!(doc_vector(&mut rng, t));
        }
        writeln!(w, "{record}").unwrap();
    }
    w.flush().unwrap();
    let mut settings = Settings::default();
    settings.graph.build = false;
    settings.embed.backend = if vectors {
        EmbedBackend::Precomputed
    } else {
        EmbedBackend::None
    };
    settings.embed.dim = DIM;
    let index = dir.join("index");
    index_inputs(&index, &[records], &settings, &mut |_| {}).unwrap();
    if vectors {
        struct Given;
        impl finder_core::Embed for Given {
            fn model_id(&self) -> &str {
                "precomputed/384"
            }
            fn dim(&self) -> usize {
                DIM
            }
            fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, String> {
                Err("given vectors only".into())
            }
        }
        build_vectors(&index, &settings, &Given, &mut |_| {}).unwrap();
    }
    (index, settings)
}

fn queries(rng: &mut Rng, n: usize) -> Vec<(String, Vec<f32>)> {
    (0..n)
        .map(|_| {
            let t = rng.below(TOPICS);
            let words = 2 + rng.below(3);
            (text(rng, t, words), doc_vector(rng, t))
        })
        .collect()
}

fn bm25_top_k(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, settings) = corpus(tmp.path(), 50_000, false);
    let finder = Finder::open(&dir, settings).unwrap();
    let index = finder.tantivy_index();
    let searcher = index.reader().unwrap().searcher();
    let field = testing::text_field(index);
    let mut analyzer = testing::word_analyzer("english");
    let queries: Vec<_> = queries(&mut Rng(1), 64)
        .into_iter()
        .map(|(q, _)| testing::query_terms(field, &testing::analyze(&mut analyzer, &q)))
        .collect();
    let params = finder_core::Bm25Params { k1: 1.2, b: 0.75 };
    let mut group = c.benchmark_group("bm25_top_k_50k");
    for k in [10, 100] {
        group.bench_with_input(BenchmarkId::from_parameter(k), &k, |b, &k| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(testing::top_k(&searcher, field, &queries[i], params, k).unwrap())
            })
        });
    }
    group.finish();
}

fn ann_search(c: &mut Criterion) {
    let mut rng = Rng(7);
    let mut hnsw = Hnsw::new(DIM, HnswParams::default());
    for key in 0..20_000u64 {
        let t = rng.below(TOPICS);
        hnsw.insert(key, &doc_vector(&mut rng, t));
    }
    let queries = queries(&mut rng, 64);
    let mut group = c.benchmark_group("hnsw_20k_384d");
    group.bench_function("exact_k200", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % queries.len();
            black_box(hnsw.exact(&queries[i].1, 200))
        })
    });
    // Over floats as built, then as an opened index of this size searches: over `i8` codes,
    // the kept rows re-scored exactly.
    for (name, codes) in [("k200_ef", false), ("k200_codes_ef", true)] {
        if codes {
            hnsw.quantize();
        }
        for ef in [64, 128] {
            group.bench_with_input(BenchmarkId::new(name, ef), &ef, |b, &ef| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % queries.len();
                    black_box(hnsw.search(&queries[i].1, 200, ef))
                })
            });
        }
    }
    group.finish();
}

fn list(rng: &mut Rng, channel: Channel, n: usize) -> RankedList {
    RankedList::new(
        channel,
        (0..n)
            .map(|r| ScoredFragment {
                fragment: FragmentKey(rng.below(600) as u64),
                score: (n - r) as f32,
            })
            .collect(),
    )
}

fn fusion_and_rollup(c: &mut Criterion) {
    let mut rng = Rng(11);
    let lists = vec![
        list(&mut rng, Channel::Lexical, 100),
        list(&mut rng, Channel::Vector, 200),
        list(&mut rng, Channel::Trigram, 100),
    ];
    c.bench_function("rrf_3_lists_400", |b| b.iter(|| black_box(rrf(&lists, 60))));
    let fused: Vec<(FragmentKey, f64)> = rrf(&lists, 60)
        .into_iter()
        .map(|f| (f.fragment, f.total()))
        .collect();
    c.bench_function("rollup_fused_to_sources", |b| {
        b.iter(|| {
            black_box(rollup(
                &fused,
                |f| Some(SourceKey(f.0 / 3)),
                &[1.0, 0.1, 0.05],
            ))
        })
    });
}

fn graph_boost(c: &mut Criterion) {
    const NODES: u32 = 100_000;
    let mut rng = Rng(13);
    let edges: Vec<(u32, u32, u8)> = (0..NODES * 10)
        .map(|i| {
            let a = i / 10;
            let b = if rng.below(4) == 0 {
                rng.below(NODES as usize) as u32
            } else {
                (a + 1 + rng.below(50) as u32) % NODES
            };
            (a, b, (rng.below(4) + 1) as u8)
        })
        .collect();
    let graph = Graph::from_edges(NODES, &edges);
    let seeds: Vec<Vec<(u32, f64)>> = (0..32)
        .map(|_| {
            (0..100)
                .map(|r| (rng.below(NODES as usize) as u32, 1.0 / (61.0 + r as f64)))
                .collect()
        })
        .collect();
    let (weights, params) = (KindWeights::default(), BoostParams::default());
    let mut scratch = BoostScratch::new();
    c.bench_function("ppr_boost_100k_nodes_1m_edges_100_seeds", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % seeds.len();
            black_box(boost_with(
                &graph,
                &seeds[i],
                &weights,
                &params,
                &mut scratch,
            ))
        })
    });
}

fn whole_query(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, settings) = corpus(tmp.path(), 20_000, true);
    let finder = Finder::open(&dir, settings.clone()).unwrap();
    let queries = queries(&mut Rng(3), 64);
    let lexical = {
        let mut s = settings.clone();
        s.vector.enabled = false;
        s
    };
    let mut group = c.benchmark_group("query_20k");
    group.bench_function("lexical_page_10", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % queries.len();
            black_box(finder.search(&queries[i].0, &lexical, 0, 10).unwrap())
        })
    });
    group.bench_function("hybrid_page_10_given_vector", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % queries.len();
            let (q, v) = &queries[i];
            black_box(
                finder
                    .search_with_vector(q, Some(v), &settings, 0, 10)
                    .unwrap(),
            )
        })
    });
    group.finish();
}

/// The reading thread's work per record line: 2,000 records of ~200 words with a
/// 384-dimensional given vector.
fn record_lines(c: &mut Criterion) {
    let mut rng = Rng(11);
    let mut bytes = Vec::new();
    for i in 0..2_000 {
        let t = rng.below(TOPICS);
        let title = serde_json::to_string(&text(&mut rng, t, 4)).unwrap();
        let body = serde_json::to_string(&text(&mut rng, t, 200)).unwrap();
        // Each `f32` in its shortest form, as a serialised `[f32]` has it.
        let vector = doc_vector(&mut rng, t)
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",");
        writeln!(
            bytes,
            r#"{{"id":"r{i}","title":{title},"text":{body},"vector":[{vector}]}}"#
        )
        .unwrap();
    }
    assert_eq!(testing::read_record_lines(&bytes), 2_000);
    c.bench_function("read_2000_record_lines_384d", |b| {
        b.iter(|| black_box(testing::read_record_lines(black_box(&bytes))))
    });
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("hot_paths: run with `cargo bench -p finder-index --bench hot_paths`");
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bm25_top_k(&mut c);
    ann_search(&mut c);
    fusion_and_rollup(&mut c);
    graph_boost(&mut c);
    whole_query(&mut c);
    record_lines(&mut c);
    c.final_summary();
}
