//! BEIR folder → benchmark dataset, with all-MiniLM-L6-v2 vectors made by Finder's own model.
//!
//! Each document is embedded as `finder_index::build_vectors` embeds a fragment's first window
//! (with `embed.windows` off, its only one): the source title (as Finder clipped it), a newline,
//! and the fragment's text — the first fragment that is not blank — truncated by the model to
//! `embed.max_tokens` word pieces. Every system is given this one vector per document. The corpus is
//! read through Finder's own ingestion (`read_input`), so the title, fragments and skipped
//! lines are Finder's; the raw line is read alongside to keep the original text for the other
//! systems. A document Finder splits into several fragments gets its first fragment's vector
//! (the model reads only the first 256 word pieces, which the first fragment holds).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use finder_core::{EmbedBackend, Settings};
use serde_json::{json, Value};

use crate::dataset::{self, Dataset, Meta};

/// Documents embedded per window: sorted by length inside a window so a batch pads little,
/// while memory stays bounded on big corpora.
const WINDOW: usize = 4_096;
/// Bumped when the same input would give a different dataset.
const RECIPE_VERSION: u32 = 1;

#[derive(Debug, Clone)]
pub struct EmbedOptions {
    pub beir: PathBuf,
    pub out: PathBuf,
    /// The qrels split whose queries are kept.
    pub split: String,
    pub progress: bool,
}

#[derive(Debug, Clone)]
pub struct EmbedReport {
    pub docs: usize,
    pub queries: usize,
    /// The dataset was already there, made from the same input.
    pub skipped: bool,
    pub seconds: f64,
}

/// Converts and embeds; does nothing when `out` already holds this input's dataset.
pub fn embed(options: &EmbedOptions) -> Result<EmbedReport> {
    let started = Instant::now();
    let beir = &options.beir;
    let qrels_path = beir.join("qrels").join(format!("{}.tsv", options.split));
    let corpus_hash = hash_files(&[beir.join("corpus.jsonl")])?;
    let input_hash = hash_files(&[
        beir.join("corpus.jsonl"),
        beir.join("queries.jsonl"),
        qrels_path.clone(),
    ])?;
    let settings = Settings::default();
    if settings.embed.backend != EmbedBackend::Minilm {
        bail!("Finder's default embedding backend is no longer MiniLM; update finder-bench");
    }
    let model_dir = finder_embed::model_dir_or_default(&settings.embed.model_dir);
    let embedder = finder_embed::Embedder::from_settings(&settings.embed)
        .with_context(|| {
            format!(
                "loading MiniLM from {} (install it with `finder model install`)",
                model_dir.display()
            )
        })?
        .context("no embedding model configured")?;
    // The model id names the model and how it computes: other vectors, another dataset.
    let recipe = format!(
        "v{RECIPE_VERSION}/{}/fragment{}",
        embedder.model_id(),
        settings.index.fragment_max_chars
    );
    if let Some(report) = up_to_date(&options.out, &input_hash, &recipe) {
        return Ok(report);
    }
    let dim = embedder.dim();
    let dataset = finder_eval::Dataset::load(beir, &options.split)
        .map_err(|e| anyhow::anyhow!("{}: {e}", beir.display()))?;

    let out = &options.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let _ = std::fs::remove_file(out.join(dataset::META));
    let create = |name: &str| -> Result<BufWriter<File>> {
        let path = out.join(name);
        let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(BufWriter::with_capacity(1 << 20, file))
    };

    // Corpus: Finder's view of each line (title, fragments) and the raw line side by side.
    let corpus_path = beir.join("corpus.jsonl");
    let total = count_lines(&corpus_path)?;
    let mut raw = BufReader::new(
        File::open(&corpus_path).with_context(|| format!("reading {}", corpus_path.display()))?,
    );
    let mut corpus = create(dataset::CORPUS)?;
    let mut vectors = create(dataset::CORPUS_VECTORS)?;
    let mut window: Vec<String> = Vec::with_capacity(WINDOW);
    let mut progress = Progress::new(options.progress, total, started);
    let mut docs = 0usize;
    let mut multi_fragment = 0usize;
    let mut problems: Vec<String> = Vec::new();
    let mut failure: Option<anyhow::Error> = None;
    let mut line_no = 0usize;
    let mut sink = |item: Result<finder_index::SourceDoc, finder_index::Problem>| {
        if failure.is_some() {
            return;
        }
        let step = || -> Result<()> {
            // Finder reports one item per non-blank line, in file order.
            let line = next_nonblank(&mut raw, &mut line_no)?
                .context("corpus.jsonl ended before Finder's reading of it")?;
            let source = match item {
                Ok(source) => source,
                Err(problem) => {
                    problems.push(problem.to_string());
                    return Ok(());
                }
            };
            let value: Value = serde_json::from_str(&line)
                .with_context(|| format!("corpus.jsonl:{line_no}: not JSON"))?;
            let doc = dataset::Doc {
                id: source.id.clone(),
                title: value["title"].as_str().unwrap_or_default().to_string(),
                text: value["text"].as_str().unwrap_or_default().to_string(),
                links: Vec::new(),
            };
            serde_json::to_writer(&mut corpus, &doc)?;
            corpus.write_all(b"\n")?;
            if source.fragments.len() > 1 {
                multi_fragment += 1;
            }
            window.push(embed_text(&source));
            docs += 1;
            if window.len() == WINDOW {
                embed_window(&embedder, &mut window, &mut vectors, &mut progress)?;
            }
            Ok(())
        };
        if let Err(e) = step() {
            failure = Some(e);
        }
    };
    finder_index::read_input(beir, "bench", &settings.index, &mut sink)
        .map_err(|p| anyhow::anyhow!("{p}"))?;
    if let Some(e) = failure {
        return Err(e);
    }
    embed_window(&embedder, &mut window, &mut vectors, &mut progress)?;
    corpus.flush()?;
    vectors.flush()?;
    progress.done();

    // Queries: the judged ones of the split, embedded as Finder embeds a query (as typed).
    let mut query_lines = create(dataset::QUERIES)?;
    let mut query_vectors = create(dataset::QUERY_VECTORS)?;
    let mut qrels = create(dataset::QRELS)?;
    writeln!(qrels, "{}", dataset::QRELS_HEADER)?;
    let batch = settings.embed.batch_size.max(1);
    for chunk in dataset.queries.chunks(batch) {
        let texts: Vec<&str> = chunk.iter().map(|q| q.text.as_str()).collect();
        let embedded = embedder.embed(&texts)?;
        for (q, v) in chunk.iter().zip(embedded) {
            serde_json::to_writer(
                &mut query_lines,
                &dataset::QueryLine {
                    id: q.id.clone(),
                    text: q.text.clone(),
                },
            )?;
            query_lines.write_all(b"\n")?;
            dataset::write_row(&mut query_vectors, &v)?;
            let mut judged: Vec<(&String, &u32)> = dataset.qrels[&q.id].iter().collect();
            judged.sort();
            for (doc, grade) in judged {
                writeln!(qrels, "{}\t{doc}\t{grade}", q.id)?;
            }
        }
    }
    query_lines.flush()?;
    query_vectors.flush()?;
    qrels.flush()?;

    let name = beir
        .file_name()
        .map_or_else(|| "beir".to_string(), |n| n.to_string_lossy().into_owned());
    Meta {
        name,
        dim,
        docs,
        queries: dataset.queries.len(),
        model: "all-MiniLM-L6-v2".into(),
        generator: Some(json!({
            "kind": "finder-bench embed",
            "source": beir.display().to_string(),
            "split": options.split,
            "corpus_hash": corpus_hash,
            "input_hash": input_hash,
            "recipe": recipe,
            "model_id": embedder.model_id(),
            "multi_fragment_docs": multi_fragment,
            "problems": problems,
        })),
    }
    .write(out)?;
    Ok(EmbedReport {
        docs,
        queries: dataset.queries.len(),
        skipped: false,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The text `build_vectors` embeds for a source's first non-blank fragment.
pub fn embed_text(source: &finder_index::SourceDoc) -> String {
    let title = source.envelope.title.as_str();
    let body = source
        .fragments
        .iter()
        .map(|f| f.text.as_str())
        .find(|t| !t.trim().is_empty())
        .unwrap_or("");
    finder_index::fragment_text_to_embed(title, body)
}

/// A report for an existing dataset made from the same input and recipe, if there is one.
fn up_to_date(out: &Path, input_hash: &str, recipe: &str) -> Option<EmbedReport> {
    let dataset = Dataset::open(out).ok()?;
    let g = dataset.meta.generator.as_ref()?;
    let same = g["input_hash"].as_str() == Some(input_hash) && g["recipe"].as_str() == Some(recipe);
    let complete = [dataset::CORPUS, dataset::QUERIES, dataset::QRELS]
        .iter()
        .all(|f| out.join(f).is_file());
    (same && complete).then_some(EmbedReport {
        docs: dataset.meta.docs,
        queries: dataset.meta.queries,
        skipped: true,
        seconds: 0.0,
    })
}

fn embed_window(
    embedder: &finder_embed::Embedder,
    window: &mut Vec<String>,
    out: &mut impl Write,
    progress: &mut Progress,
) -> Result<()> {
    let mut order: Vec<usize> = (0..window.len()).collect();
    order.sort_by_key(|&i| window[i].len());
    let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); window.len()];
    let batch = Settings::default().embed.batch_size.max(1);
    for chunk in order.chunks(batch) {
        let texts: Vec<&str> = chunk.iter().map(|&i| window[i].as_str()).collect();
        let embedded = embedder.embed(&texts)?;
        if embedded.len() != chunk.len() {
            bail!(
                "the model returned {} vectors for {} texts",
                embedded.len(),
                chunk.len()
            );
        }
        for (&i, v) in chunk.iter().zip(embedded) {
            vectors[i] = v;
        }
        progress.add(chunk.len());
    }
    for v in &vectors {
        dataset::write_row(out, v)?;
    }
    window.clear();
    Ok(())
}

/// The next line that is not blank (as Finder's record reader skips them), BOM removed.
fn next_nonblank(reader: &mut impl BufRead, line_no: &mut usize) -> Result<Option<String>> {
    loop {
        let mut buf = Vec::new();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(None);
        }
        *line_no += 1;
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = if *line_no == 1 {
            line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line)
        } else {
            line
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return Ok(Some(String::from_utf8_lossy(line).into_owned()));
    }
}

fn count_lines(path: &Path) -> Result<usize> {
    let mut reader =
        BufReader::new(File::open(path).with_context(|| format!("reading {}", path.display()))?);
    let mut n = 0;
    let mut line_no = 0;
    while next_nonblank(&mut reader, &mut line_no)?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// blake3 of the files' bytes in order, each preceded by its length.
fn hash_files(paths: &[PathBuf]) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    for path in paths {
        let mut file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
        let len = file.metadata()?.len();
        hasher.update(&len.to_le_bytes());
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
    }
    Ok(hasher.finalize().to_hex().to_string())
}

struct Progress {
    on: bool,
    terminal: bool,
    total: usize,
    done: usize,
    started: Instant,
    last: Instant,
}

impl Progress {
    fn new(on: bool, total: usize, started: Instant) -> Progress {
        Progress {
            on,
            terminal: std::io::stderr().is_terminal(),
            total,
            done: 0,
            started,
            last: Instant::now(),
        }
    }

    fn add(&mut self, n: usize) {
        self.done += n;
        let every = if self.terminal { 0.5 } else { 15.0 };
        if !self.on || self.last.elapsed().as_secs_f64() < every {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64();
        let rate = self.done as f64 / secs.max(1e-9);
        let eta = (self.total.saturating_sub(self.done)) as f64 / rate.max(1e-9);
        let line = format!(
            "embed: {}/{} docs ({rate:.1} docs/s, eta {}:{:02})",
            self.done,
            self.total,
            (eta / 60.0) as u64,
            (eta % 60.0) as u64
        );
        if self.terminal {
            eprint!("\r\x1b[K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    fn done(&mut self) {
        if self.on && self.terminal {
            eprint!("\r\x1b[K");
        }
        if self.on {
            eprintln!(
                "embed: {} docs in {:.1} s",
                self.done,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}
