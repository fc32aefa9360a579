//! The benchmark's dataset folder, shared by every system under test: `meta.json`,
//! `corpus.jsonl` + `corpus.f32`, `queries.jsonl` + `queries.f32`, `qrels.tsv`.
//!
//! Vectors are raw little-endian `f32` rows, row `i` belonging to line `i` of the matching
//! JSON Lines file. The corpus is read as a stream (a million documents with their vectors do
//! not need to be in memory at once); queries and judgments are small and loaded whole.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub const META: &str = "meta.json";
pub const CORPUS: &str = "corpus.jsonl";
pub const CORPUS_VECTORS: &str = "corpus.f32";
pub const QUERIES: &str = "queries.jsonl";
pub const QUERY_VECTORS: &str = "queries.f32";
pub const QRELS: &str = "qrels.tsv";
pub const QRELS_HEADER: &str = "query-id\tcorpus-id\tscore";

/// `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub name: String,
    pub dim: usize,
    pub docs: usize,
    pub queries: usize,
    /// `all-MiniLM-L6-v2` or `synthetic`.
    pub model: String,
    /// How the data was made (generator parameters, input hashes); free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<serde_json::Value>,
}

impl Meta {
    pub fn read(dir: &Path) -> Result<Meta> {
        let path = dir.join(META);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(META);
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// One line of `corpus.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Doc {
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

/// One line of `queries.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryLine {
    pub id: String,
    pub text: String,
}

/// A query with its vector and its judgments (doc id → grade > 0).
#[derive(Debug, Clone)]
pub struct Query {
    pub id: String,
    pub text: String,
    pub vector: Vec<f32>,
    pub relevant: HashMap<String, u32>,
}

/// A dataset folder, checked against its `meta.json`.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub dir: PathBuf,
    pub meta: Meta,
}

impl Dataset {
    /// Opens `dir` and checks that the vector files have the sizes `meta.json` promises.
    pub fn open(dir: &Path) -> Result<Dataset> {
        let meta = Meta::read(dir)?;
        if meta.dim == 0 {
            bail!("{}: `dim` is 0", dir.join(META).display());
        }
        for (file, rows) in [(CORPUS_VECTORS, meta.docs), (QUERY_VECTORS, meta.queries)] {
            let path = dir.join(file);
            let len = std::fs::metadata(&path)
                .with_context(|| format!("reading {}", path.display()))?
                .len();
            let want = (rows * meta.dim * 4) as u64;
            if len != want {
                bail!(
                    "{}: {len} bytes, expected {rows} rows × {} dims × 4 = {want}",
                    path.display(),
                    meta.dim
                );
            }
        }
        Ok(Dataset {
            dir: dir.to_path_buf(),
            meta,
        })
    }

    /// Streams `(doc, vector)` pairs in file order. The vector buffer is reused: copy it if
    /// it must outlive the call.
    pub fn for_each_doc(&self, mut f: impl FnMut(Doc, &[f32]) -> Result<()>) -> Result<usize> {
        let path = self.dir.join(CORPUS);
        let lines = BufReader::with_capacity(
            1 << 20,
            File::open(&path).with_context(|| format!("reading {}", path.display()))?,
        );
        let mut vectors = VectorReader::open(&self.dir.join(CORPUS_VECTORS), self.meta.dim)?;
        let mut n = 0usize;
        for (i, line) in lines.lines().enumerate() {
            let line = line.with_context(|| format!("reading {}", path.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let doc: Doc = serde_json::from_str(&line)
                .with_context(|| format!("{}:{}: not a corpus line", path.display(), i + 1))?;
            let Some(v) = vectors.next_row()? else {
                bail!(
                    "{}: fewer rows than {} has lines",
                    CORPUS_VECTORS,
                    path.display()
                );
            };
            f(doc, v)?;
            n += 1;
        }
        if n != self.meta.docs {
            bail!(
                "{}: {n} documents, meta.json says {}",
                path.display(),
                self.meta.docs
            );
        }
        Ok(n)
    }

    /// Every query, in file order, with its vector and judgments.
    pub fn queries(&self) -> Result<Vec<Query>> {
        let path = self.dir.join(QUERIES);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut vectors = VectorReader::open(&self.dir.join(QUERY_VECTORS), self.meta.dim)?;
        let mut qrels = read_qrels(&self.dir.join(QRELS))?;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let q: QueryLine = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a query line", path.display(), i + 1))?;
            let vector = vectors
                .next_row()?
                .with_context(|| format!("{QUERY_VECTORS}: fewer rows than queries"))?
                .to_vec();
            out.push(Query {
                relevant: qrels.remove(&q.id).unwrap_or_default(),
                id: q.id,
                text: q.text,
                vector,
            });
        }
        if out.len() != self.meta.queries {
            bail!(
                "{}: {} queries, meta.json says {}",
                path.display(),
                out.len(),
                self.meta.queries
            );
        }
        Ok(out)
    }
}

/// `qrels.tsv` as query id → doc id → grade, keeping only grades above 0.
pub fn read_qrels(path: &Path) -> Result<HashMap<String, HashMap<String, u32>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out: HashMap<String, HashMap<String, u32>> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || (i == 0 && line.starts_with("query-id")) {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let [q, d, score] = cols[..] else {
            bail!(
                "{}:{}: expected 3 tab-separated columns",
                path.display(),
                i + 1
            );
        };
        let score: f64 = score
            .trim()
            .parse()
            .with_context(|| format!("{}:{}: score `{score}`", path.display(), i + 1))?;
        if score > 0.0 {
            let grade = (score.round() as u32).max(1);
            out.entry(q.to_string())
                .or_default()
                .insert(d.to_string(), grade);
        }
    }
    Ok(out)
}

/// Reads fixed-size little-endian `f32` rows from a vector file.
pub struct VectorReader {
    reader: BufReader<File>,
    bytes: Vec<u8>,
    row: Vec<f32>,
}

impl VectorReader {
    pub fn open(path: &Path, dim: usize) -> Result<VectorReader> {
        let file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(VectorReader {
            reader: BufReader::with_capacity(1 << 20, file),
            bytes: vec![0; dim * 4],
            row: vec![0.0; dim],
        })
    }

    /// The next row, or `None` at the end of the file.
    pub fn next_row(&mut self) -> Result<Option<&[f32]>> {
        match self.reader.read_exact(&mut self.bytes) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        for (x, b) in self.row.iter_mut().zip(self.bytes.chunks_exact(4)) {
            *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(Some(&self.row))
    }
}

/// Appends one vector as little-endian `f32`.
pub fn write_row(out: &mut impl Write, v: &[f32]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(v.len() * 4);
    for x in v {
        buf.extend_from_slice(&x.to_le_bytes());
    }
    out.write_all(&buf)
}
