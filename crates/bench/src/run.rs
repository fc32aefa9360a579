//! Finder's side of the benchmark: index a dataset folder with its precomputed vectors, time
//! the lexical and vector builds apart, then time every query of each mode and score its first
//! page against the judgments.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use finder_core::{EmbedBackend, SearchResponse, Settings, BOOST_STAGE};
use finder_eval::{ndcg_at, percentile, recall_at, LatencyRecorder};
use finder_index::{build_vectors, index_inputs, Finder, Progress, VectorProgress};
use serde::Serialize;
use serde_json::{json, Value};

use crate::dataset::{Dataset, Doc, Query};

/// Hits per query: the first page, which is also what is scored.
pub const K: usize = 10;
/// Kind of the relations made from a document's `links`.
pub const LINK_KIND: &str = "links_to";

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub data: PathBuf,
    /// Index folder; `None`: a temporary folder.
    pub index: Option<PathBuf>,
    /// Keep the temporary index folder.
    pub keep: bool,
    /// Query the index already in `index` (built by an earlier run) without indexing.
    pub reuse: bool,
    /// Comma-separated eval presets.
    pub modes: String,
    /// More runs after the presets, each `name:key=value,...` (as `finder eval --run`).
    pub runs: Vec<String>,
    pub queries_limit: Option<usize>,
    /// Progress lines on stderr.
    pub progress: bool,
    /// Settings overrides (`key=value`, e.g. `index.trigrams=false`) for the index and queries.
    pub set: Vec<String>,
}

/// The runs to time: the presets `options.modes` names, then `options.runs`.
pub(crate) fn specs(options: &RunOptions) -> Result<Vec<finder_eval::RunSpec>> {
    let mut specs = finder_eval::presets(&options.modes).map_err(|e| anyhow::anyhow!("{e}"))?;
    for run in &options.runs {
        specs.push(finder_eval::RunSpec::parse(run).map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    Ok(specs)
}

/// The benchmark's settings: defaults, the dataset's given vectors, then `options.set`.
pub(crate) fn bench_settings(options: &RunOptions, dim: usize) -> Result<Settings> {
    let mut settings = Settings::default();
    settings.embed.backend = EmbedBackend::Precomputed;
    settings.embed.dim = dim;
    for o in &options.set {
        settings.set(o).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(settings)
}

/// One Finder record with its vector and relations, as `finder index` reads JSON Lines.
#[derive(Serialize)]
struct Record<'a> {
    id: &'a str,
    title: &'a str,
    text: &'a str,
    vector: &'a [f32],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    relations: Vec<Relation<'a>>,
}

#[derive(Serialize)]
struct Relation<'a> {
    to: &'a str,
    kind: &'static str,
}

/// Runs the benchmark and returns the result JSON (see the crate's README for its shape).
pub fn run(options: &RunOptions) -> Result<Value> {
    let dataset = Dataset::open(&options.data)?;
    let meta = &dataset.meta;
    let mut notes: Vec<String> = Vec::new();
    // Modes are checked before an hour of indexing, not after.
    let specs = specs(options)?;

    let scratch = tempfile::Builder::new()
        .prefix("finder-bench-")
        .tempdir()
        .context("creating a temporary folder")?;
    let index_dir = match &options.index {
        Some(dir) if options.reuse => {
            if !dir.join(finder_index::CONFIG_FILE).is_file() {
                bail!(
                    "--index {} --reuse: no index there; build one with `run --index {0}` first",
                    dir.display()
                );
            }
            dir.clone()
        }
        Some(dir) => {
            if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
                bail!(
                    "--index {}: the folder is not empty; give a new or empty one",
                    dir.display()
                );
            }
            dir.clone()
        }
        None => scratch.path().join("index"),
    };
    let settings = bench_settings(options, meta.dim)?;
    let embedder = finder_embed::Embedder::from_settings(&settings.embed)?
        .context("the precomputed backend is always available")?;
    let built = if options.reuse {
        notes.push(format!(
            "index reused from {} (index figures not measured)",
            index_dir.display()
        ));
        None
    } else {
        std::fs::create_dir_all(&index_dir)
            .with_context(|| format!("creating {}", index_dir.display()))?;
        // So `finder search --index DIR --vector ...` works on a kept index.
        std::fs::write(
            index_dir.join(finder_index::CONFIG_FILE),
            format!("[embed]\nbackend = \"precomputed\"\ndim = {}\n", meta.dim),
        )?;

        // The records file: not timed (a user's data would already be in this shape).
        let records = scratch.path().join("records.jsonl");
        let started = Instant::now();
        let (docs, record_bytes) = write_records(&dataset, &records)?;
        if options.progress {
            eprintln!(
                "finder: wrote {docs} records ({:.1} MB) in {:.1} s (not timed)",
                record_bytes as f64 / 1e6,
                started.elapsed().as_secs_f64()
            );
        }

        // Lexical: read, analyse, commit, build the graph.
        let started = Instant::now();
        let mut phases = Phases {
            cpu_start: self_cpu_s(),
            ..Phases::default()
        };
        let mut ticker = Ticker::new(options.progress);
        let report = index_inputs(
            &index_dir,
            std::slice::from_ref(&records),
            &settings,
            &mut |p| match p {
                Progress::Source { done } => {
                    ticker.tick(|| {
                        let rate = done as f64 / started.elapsed().as_secs_f64();
                        format!("finder: indexed {done}/{docs} sources ({rate:.0}/s)")
                    });
                }
                Progress::Committing => {
                    phases.commit = Some((started.elapsed().as_secs_f64(), self_cpu_s()));
                }
                Progress::Pages => {
                    phases.pages = Some((started.elapsed().as_secs_f64(), self_cpu_s()))
                }
                Progress::Graph => {
                    phases.graph = Some((started.elapsed().as_secs_f64(), self_cpu_s()))
                }
                Progress::Input { .. } => {}
            },
        )
        .with_context(|| format!("indexing into {}", index_dir.display()))?;
        let index_lexical_s = started.elapsed().as_secs_f64();
        phases.cpu_end = self_cpu_s();
        ticker.done();
        let _ = std::fs::remove_file(&records);
        let fragments = report.fragments as usize;
        ingest_notes(
            &report.problems,
            meta.docs,
            report.sources,
            report.fragments,
            &mut notes,
        );
        let index_graph_s = phases.graph_s(index_lexical_s);
        if options.progress {
            eprintln!(
                "finder: lexical index {index_lexical_s:.1} s, the graph build {index_graph_s:.1} s \
                 of it ({fragments} fragments)"
            );
        }

        // Vectors: the precomputed backend reads them back from the fragments and builds the
        // HNSW — unless no mode of this run reads them (`--modes lexical`: an indexing
        // profile need not wait for the graph of a million vectors).
        let started = Instant::now();
        let mut read = false;
        for spec in &specs {
            read |= reads_vectors(&settings, &spec.overrides)?;
        }
        if !read {
            notes.push("vectors not built: no mode of this run reads them".into());
        } else {
            let mut ticker = Ticker::new(options.progress);
            let vectors = build_vectors(&index_dir, &settings, &embedder, &mut |p| match p {
                VectorProgress::Embedding { done, total } => {
                    ticker.tick(|| format!("finder: vectors {done}/{total}"))
                }
                VectorProgress::Graph { done, total } => {
                    ticker.tick(|| format!("finder: HNSW graph {done}/{total}"))
                }
            })
            .with_context(|| format!("building vectors in {}", index_dir.display()))?;
            ticker.done();
            if vectors.total != fragments {
                notes.push(format!(
                    "{} vectors for {fragments} fragments",
                    vectors.total
                ));
            }
        }
        let index_vector_s = started.elapsed().as_secs_f64();
        let index_bytes = dir_size(&index_dir)?;
        if options.progress {
            eprintln!(
                "finder: vector index {index_vector_s:.1} s; index folder {:.1} MB",
                index_bytes as f64 / 1e6
            );
        }
        Some(Built {
            fragments,
            index_lexical_s,
            index_graph_s,
            index_vector_s,
            phases: phases.json(index_lexical_s),
            index_bytes,
        })
    };

    let mut finder = Finder::open(&index_dir, settings.clone())?;
    let embedder: Arc<dyn finder_core::Embed> = Arc::new(embedder);
    finder.attach_embedder(Ok(Some(embedder)));
    let queries = load_queries(&dataset, options.queries_limit, &mut notes)?;
    let Modes {
        modes,
        stages,
        lists,
    } = run_modes(
        "finder",
        &specs,
        &queries,
        |overrides| Ok(finder.settings_with(overrides)?),
        |q, settings| Ok(finder.search_with_vector(&q.text, Some(&q.vector), settings, 0, K)?),
        options.progress,
        &mut notes,
    )?;
    drop(finder);

    let kept = if options.index.is_some() {
        Some(index_dir.clone())
    } else if options.keep {
        Some(scratch.keep().join("index"))
    } else {
        None
    };
    if let Some(dir) = &kept {
        notes.push(format!("index kept in {}", dir.display()));
    }
    let field = |f: fn(&Built) -> Value| built.as_ref().map_or(Value::Null, f);
    Ok(json!({
        "system": "finder",
        "dataset": meta.name,
        "docs": meta.docs,
        "fragments": field(|b| b.fragments.into()),
        "queries": queries.len(),
        "index_s": field(|b| (b.index_lexical_s + b.index_vector_s).into()),
        "index_lexical_s": field(|b| b.index_lexical_s.into()),
        "index_graph_s": field(|b| b.index_graph_s.into()),
        "index_vector_s": field(|b| b.index_vector_s.into()),
        "index_phases": field(|b| b.phases.clone()),
        "index_bytes": field(|b| b.index_bytes.into()),
        "peak_rss_bytes": Value::Null,
        "self_rss_bytes": self_peak_rss(),
        "modes": modes,
        "stages": stages,
        "lists": lists,
        "notes": notes,
    }))
}

/// Whether a mode with these overrides on top of the run's `settings` queries the vector
/// index: every mode does but one that turns the vector channel off (the `lexical` preset,
/// or `--set vector.enabled=false`).
fn reads_vectors(settings: &Settings, overrides: &[String]) -> Result<bool> {
    let mut settings = settings.clone();
    for o in overrides {
        settings.set(o).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(settings.vector.enabled)
}

/// What indexing measured (absent when `--reuse` queried an earlier index).
struct Built {
    fragments: usize,
    /// The whole indexing run (`index_inputs`): the lexical layer, then the graph build that
    /// follows its commit.
    index_lexical_s: f64,
    /// The graph build's part of `index_lexical_s` (zero when the run built no graph): the
    /// graph is a layer of its own, as the vectors are, and no peer builds one.
    index_graph_s: f64,
    index_vector_s: f64,
    phases: Value,
    index_bytes: u64,
}

/// The one-line summary printed after a run.
pub fn summary_line(result: &Value) -> String {
    let mut line = format!(
        "{} {}: {} docs, index {:.1} s (lexical {:.1} + vector {:.1}), {:.1} MB",
        result["system"].as_str().unwrap_or("?"),
        result["dataset"].as_str().unwrap_or("?"),
        result["docs"],
        result["index_s"].as_f64().unwrap_or(0.0),
        result["index_lexical_s"].as_f64().unwrap_or(0.0),
        result["index_vector_s"].as_f64().unwrap_or(0.0),
        result["index_bytes"].as_f64().unwrap_or(0.0) / 1e6,
    );
    if let Some(modes) = result["modes"].as_object() {
        for (name, m) in modes {
            line.push_str(&format!(
                "; {name} p50 {:.2} ms nDCG@10 {:.3}",
                m["p50_ms"].as_f64().unwrap_or(0.0),
                m["ndcg10"].as_f64().unwrap_or(0.0)
            ));
        }
    }
    line
}

/// When the lexical run reached its commit, its page files and its graph build, in seconds
/// from its start, with the process's CPU time then (see [`self_cpu_s`]).
#[derive(Debug, Default)]
struct Phases {
    commit: Option<(f64, Option<f64>)>,
    pages: Option<(f64, Option<f64>)>,
    graph: Option<(f64, Option<f64>)>,
    cpu_start: Option<f64>,
    cpu_end: Option<f64>,
}

impl Phases {
    /// Seconds from the graph build's start to the end of a run that took `total` seconds.
    fn graph_s(&self, total: f64) -> f64 {
        self.graph.map_or(0.0, |(at, _)| total - at)
    }

    /// Seconds spent reading and writing documents, committing (with the merge), writing the
    /// page files, and building the graph, and the CPU seconds of each (every thread's; less
    /// noisy than the wall on a shared machine).
    fn json(&self, total: f64) -> Value {
        let (commit, cpu_commit) = self.commit.unwrap_or((total, self.cpu_end));
        let (graph, cpu_graph) = self.graph.unwrap_or((total, self.cpu_end));
        let (pages, cpu_pages) = self.pages.unwrap_or((graph, cpu_graph));
        let cpu = |from: Option<f64>, to: Option<f64>| match (from, to) {
            (Some(from), Some(to)) => json!(to - from),
            _ => Value::Null,
        };
        json!({
            "read_and_write_s": commit,
            "commit_s": pages - commit,
            "pages_s": graph - pages,
            "graph_s": self.graph_s(total),
            "read_and_write_cpu_s": cpu(self.cpu_start, cpu_commit),
            "commit_cpu_s": cpu(cpu_commit, cpu_pages),
            "pages_cpu_s": cpu(cpu_pages, cpu_graph),
            "graph_cpu_s": cpu(cpu_graph, self.cpu_end),
        })
    }
}

/// This process's CPU time so far, user and system, every thread's, in seconds (from
/// `/proc/self/stat`, in the kernel's 1/100 s ticks); `None` off Linux.
pub(crate) fn self_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces: state is
    // the first, utime and stime the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let user: f64 = fields.next()?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    Some((user + system) / 100.0)
}

struct ModeResult {
    summary: Value,
    stages: Value,
    notes: Vec<String>,
    /// Each query's top [`K`] source ids, in query order.
    lists: Vec<Vec<String>>,
}

/// The dataset's queries, cut to `limit`; a note counts those without judgments.
pub(crate) fn load_queries(
    dataset: &Dataset,
    limit: Option<usize>,
    notes: &mut Vec<String>,
) -> Result<Vec<Query>> {
    let mut queries = dataset.queries()?;
    if let Some(limit) = limit {
        queries.truncate(limit);
    }
    let unjudged = queries.iter().filter(|q| q.relevant.is_empty()).count();
    if unjudged > 0 {
        notes.push(format!(
            "{unjudged} queries have no relevant document: timed, not scored"
        ));
    }
    Ok(queries)
}

/// What [`run_modes`] measured, as the result's objects keyed by mode name.
pub(crate) struct Modes {
    /// Latency percentiles and quality per mode.
    pub(crate) modes: serde_json::Map<String, Value>,
    /// Each stage's p50 per mode.
    pub(crate) stages: serde_json::Map<String, Value>,
    /// Each query's top-[`K`] ids per mode, in query order: written beside the result as
    /// `lists.json`, the file the peers write, from which the harness computes the dense
    /// lists' share of the exact neighbours.
    pub(crate) lists: serde_json::Map<String, Value>,
}

/// Runs every mode: its settings from the preset's overrides, then [`run_mode`]; degraded
/// channels become notes.
pub(crate) fn run_modes(
    system: &str,
    specs: &[finder_eval::RunSpec],
    queries: &[Query],
    settings_with: impl Fn(&[String]) -> Result<Settings>,
    search: impl Fn(&Query, &Settings) -> Result<SearchResponse>,
    progress: bool,
    notes: &mut Vec<String>,
) -> Result<Modes> {
    let mut modes = serde_json::Map::new();
    let mut stages = serde_json::Map::new();
    let mut lists = serde_json::Map::new();
    for spec in specs {
        let settings =
            settings_with(&spec.overrides).with_context(|| format!("mode {}", spec.name))?;
        let result = run_mode(queries, |q| search(q, &settings))?;
        for note in result.notes {
            let note = format!("{}: {note}", spec.name);
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        if progress {
            eprintln!(
                "{system}: {} p50 {:.2} ms p95 {:.2} ms nDCG@10 {:.4} recall@10 {:.4}",
                spec.name,
                result.summary["p50_ms"].as_f64().unwrap_or(0.0),
                result.summary["p95_ms"].as_f64().unwrap_or(0.0),
                result.summary["ndcg10"].as_f64().unwrap_or(0.0),
                result.summary["recall10"].as_f64().unwrap_or(0.0),
            );
        }
        modes.insert(spec.name.clone(), result.summary);
        stages.insert(spec.name.clone(), result.stages);
        lists.insert(spec.name.clone(), json!(result.lists));
    }
    Ok(Modes {
        modes,
        stages,
        lists,
    })
}

/// Untimed passes over the queries before the timed one: 1, or `FINDER_BENCH_WARMUPS` (a
/// profiling aid: with many passes a profile of the process is mostly warm queries).
fn warmup_passes() -> Result<usize> {
    match std::env::var("FINDER_BENCH_WARMUPS") {
        Err(_) => Ok(1),
        Ok(v) => v.parse().map_err(|_| {
            anyhow::anyhow!("FINDER_BENCH_WARMUPS: expected a whole number of passes, got {v:?}")
        }),
    }
}

/// Warm-up passes (not timed, see [`warmup_passes`]), then every query timed on its own,
/// first page of `K`.
fn run_mode(
    queries: &[Query],
    search: impl Fn(&Query) -> Result<SearchResponse>,
) -> Result<ModeResult> {
    for _ in 0..warmup_passes()? {
        for q in queries {
            search(q)?;
        }
    }
    let mut latencies = Vec::with_capacity(queries.len());
    let mut recorder = LatencyRecorder::new();
    let mut ndcg = Vec::new();
    let mut recall = Vec::new();
    let mut notes = Vec::new();
    let mut lists = Vec::with_capacity(queries.len());
    for q in queries {
        let started = Instant::now();
        let response = search(q)?;
        latencies.push(started.elapsed().as_secs_f64() * 1e3);
        recorder.record_diagnostics(&response.diagnostics);
        finder_eval::note_degraded(&response.diagnostics, &mut notes);
        let ranked: Vec<String> = response.hits.into_iter().take(K).map(|h| h.id).collect();
        if !q.relevant.is_empty() {
            ndcg.push(ndcg_at(&ranked, &q.relevant, K));
            recall.push(recall_at(&ranked, &q.relevant, K));
        }
        lists.push(ranked);
    }
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let stages: serde_json::Map<String, Value> = recorder
        .stages()
        .into_iter()
        .map(|(stage, p)| (stage, json!(p.p50)))
        .collect();
    let mut summary = json!({
        "mean_ms": mean(&latencies),
        "ndcg10": mean(&ndcg),
        "recall10": mean(&recall),
    });
    put_tail_percentiles(&mut summary, "", &latencies);
    // The graph boost's own time, for the target on it (the whole query holds the channels,
    // fusion and rollup too); over the queries it ran in, which `boost_queries` counts.
    let boost = recorder.stage_samples(BOOST_STAGE);
    if !boost.is_empty() {
        summary["boost_queries"] = json!(boost.len());
        put_tail_percentiles(&mut summary, "boost_", boost);
    }
    Ok(ModeResult {
        summary,
        stages: Value::Object(stages),
        notes,
        lists,
    })
}

/// Sets `{prefix}p50_ms`, `{prefix}p95_ms` and `{prefix}p99_ms` of `summary` from `samples`.
fn put_tail_percentiles(summary: &mut Value, prefix: &str, samples: &[f64]) {
    for p in [50, 95, 99] {
        summary[format!("{prefix}p{p}_ms")] = json!(percentile(samples, f64::from(p)));
    }
}

/// Streams the corpus into Finder records; returns documents and bytes written.
pub(crate) fn write_records(dataset: &Dataset, path: &Path) -> Result<(usize, u64)> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = CountingWriter {
        inner: BufWriter::with_capacity(1 << 22, file),
        bytes: 0,
    };
    let docs = dataset.for_each_doc(|doc: Doc, vector| {
        let record = Record {
            id: &doc.id,
            title: &doc.title,
            text: &doc.text,
            vector,
            relations: doc
                .links
                .iter()
                .map(|to| Relation {
                    to,
                    kind: LINK_KIND,
                })
                .collect(),
        };
        serde_json::to_writer(&mut out, &record)?;
        out.write_all(b"\n")?;
        Ok(())
    })?;
    out.flush()?;
    Ok((docs, out.bytes))
}

struct CountingWriter<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Bytes of every file under `dir`.
pub fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// This process's peak resident set (`VmHWM`), in bytes; `None` off Linux.
pub fn self_peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A progress line at most every few seconds: overwritten on a terminal, appended otherwise.
pub struct Ticker {
    on: bool,
    terminal: bool,
    last: Instant,
    shown: bool,
}

impl Ticker {
    pub fn new(on: bool) -> Ticker {
        Ticker {
            on,
            terminal: std::io::stderr().is_terminal(),
            last: Instant::now(),
            shown: false,
        }
    }

    pub fn tick(&mut self, message: impl FnOnce() -> String) {
        let every = if self.terminal { 0.5 } else { 10.0 };
        if !self.on || self.last.elapsed().as_secs_f64() < every {
            return;
        }
        self.last = Instant::now();
        if self.terminal {
            eprint!("\r\x1b[K{}", message());
            self.shown = true;
        } else {
            eprintln!("{}", message());
        }
    }

    /// Clears an overwritten line.
    pub fn done(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

/// Notes on what indexing made of the dataset: input problems, documents that did not become
/// one source and one fragment each.
pub(crate) fn ingest_notes(
    problems: &[finder_index::Problem],
    docs: usize,
    sources: u64,
    fragments: u64,
    notes: &mut Vec<String>,
) {
    if let Some(first) = problems.first() {
        notes.push(format!("{} input problems, first: {first}", problems.len()));
    }
    if fragments as usize != docs || sources as usize != docs {
        notes.push(format!(
            "{docs} documents became {sources} sources and {fragments} fragments"
        ));
    }
}
