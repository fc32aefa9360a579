//! `finder-ann-bench`: Finder's HNSW (`finder-ann`) side by side with maintained HNSW crates
//! from crates.io, on the same vectors and the same build parameters.
//!
//! The vectors are generated in-process and deterministic: `--clusters` random unit centres,
//! each with 64 directions of its own along which its members spread, plus isotropic noise,
//! every point normalised (the model of `finder-ann`'s own recall tests, closer to text
//! embeddings than uniform noise). `--n` points are indexed; `--queries` more points from the
//! same distribution are held out as queries. The truth is the exact top `k` by brute force.
//!
//! For each engine: build time (wall, every core), the heap the index holds, and per beam
//! width recall@k against the truth and single-threaded query latency (p50, p99; one untimed
//! pass over the queries first). `finder-ann` is measured twice on one build: walking the
//! `f32` rows, then walking `i8` codes ([`finder_ann::Hnsw::quantize`], how Finder answers
//! queries on indexes up to about 350,000 rows).
//!
//! Writes a JSON report to `--out` and prints a markdown table.

mod engines;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use finder_ann::distance::{dot, scale_to_unit};
use serde::Serialize;

use engines::{Engine, Index, Params, DATA};

/// The system allocator, counting the bytes live on the heap: an index's memory is what the
/// count grows by while it is built.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes straight to `System`, with the caller's own arguments; the count
// is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[derive(Parser, Debug, Serialize)]
#[command(about = "finder-ann against maintained Rust HNSW crates on the same vectors")]
struct Args {
    /// Vectors indexed.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// Held-out query vectors.
    #[arg(long, default_value_t = 1_000)]
    queries: usize,
    #[arg(long, default_value_t = 384)]
    dim: usize,
    #[arg(long, default_value_t = 1_000)]
    clusters: usize,
    /// Seed of the vectors and of every engine's level draws.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Neighbours per node on the upper layers (2m on layer 0), where the engine lets it be set.
    #[arg(long, default_value_t = finder_ann::DEFAULT_M)]
    m: usize,
    #[arg(long, default_value_t = finder_ann::DEFAULT_EF_CONSTRUCTION)]
    ef_construction: usize,
    /// Beam widths searched, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,128")]
    ef: Vec<usize>,
    /// Neighbours per query whose recall is measured.
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// Engines, in order, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "finder-ann,hnsw_rs,instant-distance"
    )]
    #[serde(skip)]
    engines: Vec<Engine>,
    /// A peer's build still running after this many seconds stops and is reported as capped
    /// (finder-ann, the baseline, always runs to the end).
    #[arg(long, default_value_t = 1_500)]
    cap_s: u64,
    /// Where the JSON report goes.
    #[arg(long)]
    out: PathBuf,
}

/// The vectors: `n` indexed rows, then the held-out queries, each `dim` floats, unit length.
pub struct Dataset {
    pub dim: usize,
    pub n: usize,
    base: Vec<f32>,
    queries: Vec<f32>,
}

impl Dataset {
    pub fn row(&self, i: usize) -> &[f32] {
        &self.base[i * self.dim..(i + 1) * self.dim]
    }

    pub fn query(&self, q: usize) -> &[f32] {
        &self.queries[q * self.dim..(q + 1) * self.dim]
    }

    fn query_count(&self) -> usize {
        self.queries.len() / self.dim
    }
}

/// SplitMix64 with Box–Muller normals.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn gauss(&mut self) -> f32 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }

    fn unit(&mut self, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|_| self.gauss()).collect();
        scale_to_unit(&mut v);
        v
    }
}

/// Directions per cluster, their spread and the isotropic noise (as vector norms): the
/// constants of `finder-ann`'s recall fixture.
const LOCAL_DIRS: usize = 64;
const LOCAL_SPREAD: f32 = 0.1;
const NOISE: f32 = 0.6;

/// The dataset of `args`, the same for any number of threads: point `i` draws from its own
/// generator, seeded from `args.seed` and `i`.
fn generate(args: &Args) -> Dataset {
    let dim = args.dim;
    let mut rng = Rng(args.seed);
    let centres: Vec<Vec<f32>> = (0..args.clusters).map(|_| rng.unit(dim)).collect();
    let directions: Vec<Vec<Vec<f32>>> = (0..args.clusters)
        .map(|_| (0..LOCAL_DIRS).map(|_| rng.unit(dim)).collect())
        .collect();
    let iso = NOISE / (dim as f32).sqrt();
    let point = |i: usize, out: &mut [f32]| {
        let mut rng = Rng(args.seed ^ (i as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let c = (rng.next() % args.clusters as u64) as usize;
        for (x, centre) in out.iter_mut().zip(&centres[c]) {
            *x = centre + rng.gauss() * iso;
        }
        for dir in &directions[c] {
            let g = rng.gauss() * LOCAL_SPREAD;
            for (x, d) in out.iter_mut().zip(dir) {
                *x += g * d;
            }
        }
        scale_to_unit(out);
    };
    let mut all = vec![0f32; (args.n + args.queries) * dim];
    let per = (args.n + args.queries).div_ceil(cores()).max(1);
    std::thread::scope(|scope| {
        for (t, chunk) in all.chunks_mut(per * dim).enumerate() {
            let point = &point;
            scope.spawn(move || {
                for (j, out) in chunk.chunks_exact_mut(dim).enumerate() {
                    point(t * per + j, out);
                }
            });
        }
    });
    let queries = all.split_off(args.n * dim);
    Dataset {
        dim,
        n: args.n,
        base: all,
        queries,
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The exact `k` nearest rows of every query, best first, by brute force on every core (each
/// thread scores its share of the rows against every query, a block of rows at a time).
fn exact_top_k(data: &Dataset, k: usize) -> Vec<Vec<u64>> {
    const BLOCK: usize = 256;
    let queries = data.query_count();
    let per = data.n.div_ceil(cores()).max(1);
    let parts: Vec<Vec<Vec<(f32, u32)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..data.n)
            .step_by(per)
            .map(|from| {
                scope.spawn(move || {
                    let to = (from + per).min(data.n);
                    let mut best: Vec<Vec<(f32, u32)>> = vec![Vec::with_capacity(k + 1); queries];
                    for block in (from..to).step_by(BLOCK) {
                        for (q, top) in best.iter_mut().enumerate() {
                            let query = data.query(q);
                            for row in block..(block + BLOCK).min(to) {
                                let sim = dot(query, data.row(row));
                                if top.len() < k || sim > top[top.len() - 1].0 {
                                    let at = top.partition_point(|&(s, _)| s >= sim);
                                    top.insert(at, (sim, row as u32));
                                    top.truncate(k);
                                }
                            }
                        }
                    }
                    best
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("an exact-search thread panicked"))
            .collect()
    });
    (0..queries)
        .map(|q| {
            let mut all: Vec<(f32, u32)> = parts.iter().flat_map(|p| p[q].clone()).collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            all.into_iter()
                .take(k)
                .map(|(_, row)| u64::from(row))
                .collect()
        })
        .collect()
}

/// Build progress on stderr.
pub fn progress(done: usize, total: usize, start: Instant) {
    eprintln!(
        "  {done}/{total} rows, {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// One engine (or variant) at one size.
#[derive(Serialize)]
struct Measured {
    engine: String,
    rows: usize,
    build_s: f64,
    /// CPU seconds (user and system, every thread) the build took: less swayed than the wall
    /// time by other work on the machine.
    build_cpu_s: f64,
    /// The build stopped at `--cap-s` with `rows` of `--n` indexed; nothing was searched.
    capped: bool,
    /// Heap bytes the index holds (with its vectors), in MiB.
    index_mib: f64,
    /// Links per node on layer 0.
    layer0_links: usize,
    runs: Vec<Run>,
    note: &'static str,
}

/// Searches at one beam width.
#[derive(Serialize)]
struct Run {
    ef: usize,
    recall: f64,
    p50_ms: f64,
    p99_ms: f64,
    mean_ms: f64,
}

#[derive(Serialize)]
struct Report {
    command: String,
    args: Args,
    engines: Vec<&'static str>,
    cores: usize,
    cpu: String,
    /// `/proc/loadavg` at the start and the end: other work on the machine shows here.
    loadavg: [String; 2],
    generate_s: f64,
    exact_s: f64,
    results: Vec<Measured>,
}

/// Recall and latency of `index` at each of `args.ef`: an untimed pass, then a timed one.
fn measure(index: &mut Index, data: &Dataset, truth: &[Vec<u64>], args: &Args) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for &ef in &args.ef {
        index.set_ef(ef)?;
        for q in 0..truth.len() {
            std::hint::black_box(index.search(data, q, args.k));
        }
        let mut times = Vec::with_capacity(truth.len());
        let mut hits = 0usize;
        for (q, want) in truth.iter().enumerate() {
            let start = Instant::now();
            let found = index.search(data, q, args.k);
            times.push(start.elapsed());
            hits += found.iter().filter(|key| want.contains(key)).count();
        }
        times.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let at = |p: f64| ms(times[((times.len() - 1) as f64 * p).round() as usize]);
        runs.push(Run {
            ef,
            recall: hits as f64 / (truth.len() * args.k) as f64,
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            mean_ms: ms(times.iter().sum::<Duration>()) / times.len() as f64,
        });
    }
    Ok(runs)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// CPU seconds this process has used, user and system, every thread (`/proc/self/stat`,
/// in the kernel's fixed 100 ticks a second); 0 where it cannot be read.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name, which is in parentheses and may hold spaces: utime and
    // stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "?".into(), |s| s.trim().into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "?".into())
}

fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.n > 0 && args.queries > 0 && args.dim > 0 && args.clusters > 0 && args.k > 0,
        "--n, --queries, --dim, --clusters and --k must be positive"
    );
    anyhow::ensure!(
        args.n < u32::MAX as usize / 2,
        "--n must stay below 2^31 (row numbers are u32)"
    );
    anyhow::ensure!(
        args.ef.iter().all(|&ef| ef >= args.k),
        "every --ef must be at least --k"
    );
    let load_start = loadavg();

    let start = Instant::now();
    eprintln!(
        "generating {} + {} vectors of dimension {}",
        args.n, args.queries, args.dim
    );
    if DATA.set(generate(&args)).is_err() {
        unreachable!("DATA is set once");
    }
    let data = DATA.get().expect("DATA was just set");
    let generate_s = start.elapsed().as_secs_f64();

    let start = Instant::now();
    let truth = exact_top_k(data, args.k);
    let exact_s = start.elapsed().as_secs_f64();
    eprintln!(
        "generated in {generate_s:.1} s, exact top {} in {exact_s:.1} s",
        args.k
    );

    let params = Params {
        m: args.m,
        ef_construction: args.ef_construction,
        seed: args.seed,
        cap: Duration::from_secs(args.cap_s),
    };
    let vector_bytes = data.n * data.dim * std::mem::size_of::<f32>();
    let mut results = Vec::new();
    for &engine in &args.engines {
        eprintln!("{}: building over {} rows", engine.name(), data.n);
        let (before, cpu_before) = (live(), cpu_seconds());
        let build = engines::build(engine, data, params)?;
        let held = live().saturating_sub(before);
        let build_cpu_s = cpu_seconds() - cpu_before;
        eprintln!(
            "{}: built {} rows in {:.1} s",
            engine.name(),
            build.rows,
            build.seconds
        );
        let (layer0_links, index_mib, note) = match engine {
            Engine::Finder => (2 * args.m, mib(held), "f32 walk"),
            Engine::HnswRs => (2 * args.m, mib(held), ""),
            // Its points are row numbers into the dataset: add the vectors it reads.
            Engine::Instant => (64, mib(held + vector_bytes), "m 32, fixed"),
        };
        let mut measured = Measured {
            engine: engine.name().into(),
            rows: build.rows,
            build_s: build.seconds,
            build_cpu_s,
            capped: build.capped,
            index_mib,
            layer0_links,
            runs: Vec::new(),
            note,
        };
        let Some(mut index) = build.index.filter(|_| !build.capped) else {
            results.push(measured);
            if engine == Engine::Instant {
                // Its build thread cannot be stopped: leave the remaining engines out rather
                // than time them against it. Returning from `main` ends it.
                eprintln!("instant-distance capped: no further engine runs");
                break;
            }
            continue;
        };
        measured.runs = measure(&mut index, data, &truth, &args)?;
        results.push(measured);
        if let Index::Finder { index: hnsw, .. } = &mut index {
            hnsw.quantize();
            let held = live().saturating_sub(before);
            let runs = measure(&mut index, data, &truth, &args)?;
            results.push(Measured {
                engine: "finder-ann".into(),
                rows: build.rows,
                build_s: build.seconds,
                build_cpu_s,
                capped: false,
                index_mib: mib(held),
                layer0_links,
                runs,
                note: "i8 walk",
            });
        }
        drop(index);
    }

    let report = Report {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        engines: args.engines.iter().map(|e| e.name()).collect(),
        args,
        cores: cores(),
        cpu: cpu_model(),
        loadavg: [load_start, loadavg()],
        generate_s,
        exact_s,
        results,
    };
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(&report.args.out, json + "\n")
        .with_context(|| format!("writing the report to {}", report.args.out.display()))?;
    print!("{}", markdown(&report));
    Ok(())
}

/// The results as a markdown table, one row per engine (or variant).
fn markdown(report: &Report) -> String {
    let efs = &report.args.ef;
    let mut out = String::from("| crate | vectors | build s (CPU s) | index MiB |");
    for ef in efs {
        out += &format!(" recall@{} ef {ef} |", report.args.k);
    }
    for ef in efs {
        out += &format!(" p50 / p99 ms ef {ef} |");
    }
    out += "\n|---|---:|---:|---:|";
    out += &"---:|".repeat(2 * efs.len());
    out += "\n";
    for r in &report.results {
        let name = if r.note.is_empty() {
            r.engine.clone()
        } else {
            format!("{} ({})", r.engine, r.note)
        };
        let rows = if r.capped {
            format!("{} of {} (capped)", r.rows, report.args.n)
        } else {
            r.rows.to_string()
        };
        out += &format!(
            "| {name} | {rows} | {:.1} ({:.0}) | {:.0} |",
            r.build_s, r.build_cpu_s, r.index_mib
        );
        for ef in efs {
            match r.runs.iter().find(|run| run.ef == *ef) {
                Some(run) => out += &format!(" {:.3} |", run.recall),
                None => out += " – |",
            }
        }
        for ef in efs {
            match r.runs.iter().find(|run| run.ef == *ef) {
                Some(run) => out += &format!(" {:.3} / {:.3} |", run.p50_ms, run.p99_ms),
                None => out += " – |",
            }
        }
        out += "\n";
    }
    out
}
