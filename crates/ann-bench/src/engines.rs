//! The three HNSW implementations behind one small interface: build over the dataset's rows,
//! set the beam width, answer a query by its number.
//!
//! Every engine scores with the same kernel, `finder_ann::distance::dot` (cosine over unit
//! vectors): `instant-distance` has no distance of its own, and `hnsw_rs` is given the same
//! one, so the figures compare graph code, not dot-product loops.

use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use finder_ann::distance::dot;
use serde::{Deserialize, Serialize};

use crate::Dataset;

/// The dataset, for `instant-distance`, whose points score themselves without any context
/// (see [`Row`]). `main` sets it once, before any build.
pub static DATA: OnceLock<Dataset> = OnceLock::new();

/// The engines compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// Finder's own HNSW (`finder-ann`).
    #[value(name = "finder-ann")]
    Finder,
    /// `hnsw_rs` (crates.io).
    #[value(name = "hnsw_rs")]
    HnswRs,
    /// `instant-distance` (crates.io).
    #[value(name = "instant-distance")]
    Instant,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Finder => "finder-ann",
            Engine::HnswRs => "hnsw_rs",
            Engine::Instant => "instant-distance",
        }
    }
}

/// Build parameters shared by every engine.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub m: usize,
    pub ef_construction: usize,
    pub seed: u64,
    /// A peer's build still running after this long stops (see [`Build::capped`]); Finder's
    /// own, the baseline, always runs to the end.
    pub cap: Duration,
}

/// A built index, ready to answer queries.
pub enum Index {
    Finder {
        index: finder_ann::Hnsw,
        ef: usize,
    },
    HnswRs {
        index: Box<hnsw_rs::hnsw::Hnsw<'static, f32, Cosine>>,
        ef: usize,
    },
    Instant {
        index: instant_distance::Hnsw<Row>,
        search: instant_distance::Search,
    },
}

/// What a build produced.
pub struct Build {
    /// `None` when a build was given up before it finished and its thread still runs
    /// (`instant-distance` cannot be stopped part way): the process must exit after reporting.
    pub index: Option<Index>,
    pub seconds: f64,
    /// Rows in the index when the build ended.
    pub rows: usize,
    /// Whether the build hit [`Params::cap`] before indexing every row.
    pub capped: bool,
}

/// Rows per call of the chunked builds (a multiple of `finder-ann`'s batch of 256, so the
/// chunks build the graph one `insert_batch` of every row would); the cap is checked between
/// chunks.
const CHUNK: usize = 256 * 40;

/// Builds `engine` over the dataset's rows on every core.
pub fn build(engine: Engine, data: &'static Dataset, p: Params) -> Result<Build> {
    match engine {
        Engine::Finder => Ok(build_finder(
            data,
            Params {
                cap: Duration::MAX,
                ..p
            },
        )),
        Engine::HnswRs => Ok(build_hnsw_rs(data, p)),
        Engine::Instant => build_instant(data, p),
    }
}

/// Inserts the rows a chunk at a time with `insert`, until done or past the cap.
fn chunked(data: &Dataset, p: Params, mut insert: impl FnMut(usize, usize)) -> (f64, usize, bool) {
    let start = Instant::now();
    let mut done = 0;
    while done < data.n {
        let end = (done + CHUNK).min(data.n);
        insert(done, end);
        done = end;
        crate::progress(done, data.n, start);
        if done < data.n && start.elapsed() > p.cap {
            return (start.elapsed().as_secs_f64(), done, true);
        }
    }
    (start.elapsed().as_secs_f64(), done, false)
}

fn build_finder(data: &Dataset, p: Params) -> Build {
    let params = finder_ann::HnswParams {
        m: p.m,
        ef_construction: p.ef_construction,
        seed: p.seed,
    };
    let mut index = finder_ann::Hnsw::new(data.dim, params);
    index.reserve(data.n);
    let (seconds, rows, capped) = chunked(data, p, |from, to| {
        let items: Vec<(u64, &[f32])> = (from..to).map(|i| (i as u64, data.row(i))).collect();
        index.insert_batch(&items);
    });
    Build {
        index: Some(Index::Finder { index, ef: 0 }),
        seconds,
        rows,
        capped,
    }
}

/// Cosine distance for `hnsw_rs` with Finder's dot product.
pub struct Cosine;

impl hnsw_rs::prelude::Distance<f32> for Cosine {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        1.0 - dot(a, b)
    }
}

fn build_hnsw_rs(data: &Dataset, p: Params) -> Build {
    // `hnsw_rs` keeps `m` links on the upper layers and `2m` on layer 0, as Finder does.
    const MAX_LAYERS: usize = 16;
    let index = hnsw_rs::hnsw::Hnsw::new(p.m, data.n, MAX_LAYERS, p.ef_construction, Cosine);
    let (seconds, rows, capped) = chunked(data, p, |from, to| {
        let items: Vec<(&[f32], usize)> = (from..to).map(|i| (data.row(i), i)).collect();
        index.parallel_insert_slice(&items);
    });
    let mut index = Box::new(index);
    index.set_searching_mode(true);
    Build {
        index: Some(Index::HnswRs { index, ef: 0 }),
        seconds,
        rows,
        capped,
    }
}

/// A point of `instant-distance`: a row number into [`DATA`] (rows at or past `n` are the
/// queries). The crate's points must score themselves, and a number instead of a copy of the
/// vector also makes its graph cheap to serialise, which [`retune`] needs.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Row(u32);

impl Row {
    fn vector(self) -> &'static [f32] {
        let data = DATA.get().expect("DATA is set before any build");
        let i = self.0 as usize;
        if i < data.n {
            data.row(i)
        } else {
            data.query(i - data.n)
        }
    }
}

impl instant_distance::Point for Row {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - dot(self.vector(), other.vector())
    }
}

fn build_instant(data: &'static Dataset, p: Params) -> Result<Build> {
    // `instant-distance` fixes m at 32 (64 links on layer 0) and builds in one call, so the
    // build runs on its own thread and a hidden progress bar says how far it got.
    let bar = indicatif::ProgressBar::hidden();
    let builder = instant_distance::Builder::default()
        .ef_construction(p.ef_construction)
        .seed(p.seed)
        .progress(bar.clone());
    let points: Vec<Row> = (0..data.n as u32).map(Row).collect();
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let (index, _ids) = builder.build_hnsw(points);
        // The receiver is gone only when the build was given up.
        let _ = tx.send(index);
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(index) => {
                return Ok(Build {
                    index: Some(Index::Instant {
                        index,
                        search: instant_distance::Search::default(),
                    }),
                    seconds: start.elapsed().as_secs_f64(),
                    rows: data.n,
                    capped: false,
                })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let rows = bar.position() as usize;
                crate::progress(rows, data.n, start);
                if start.elapsed() > p.cap {
                    return Ok(Build {
                        index: None,
                        seconds: start.elapsed().as_secs_f64(),
                        rows,
                        capped: true,
                    });
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the instant-distance build thread panicked")
            }
        }
    }
}

/// `instant-distance` takes the beam width (`ef_search`) at build time and keeps it in a
/// private field. To search one graph at several widths, the graph goes through the crate's
/// own serde support with that field changed: `{"ef_search":N,...` is how its JSON starts.
fn retune(index: &instant_distance::Hnsw<Row>, ef: usize) -> Result<instant_distance::Hnsw<Row>> {
    let json = serde_json::to_vec(index).context("serialising the instant-distance graph")?;
    let prefix = br#"{"ef_search":"#;
    ensure!(
        json.starts_with(prefix),
        "instant-distance's serialised graph no longer starts with ef_search"
    );
    let rest = &json[prefix.len()..];
    let comma = rest
        .iter()
        .position(|&b| b == b',')
        .context("a serialised instant-distance graph without fields after ef_search")?;
    let mut patched = Vec::with_capacity(json.len());
    patched.extend_from_slice(prefix);
    patched.extend_from_slice(ef.to_string().as_bytes());
    patched.extend_from_slice(&rest[comma..]);
    drop(json);
    serde_json::from_slice(&patched).context("reading back the retuned instant-distance graph")
}

impl Index {
    /// Sets the beam width of the searches that follow (untimed).
    pub fn set_ef(&mut self, ef: usize) -> Result<()> {
        match self {
            Index::Finder { ef: current, .. } | Index::HnswRs { ef: current, .. } => *current = ef,
            Index::Instant { index, .. } => *index = retune(index, ef)?,
        }
        Ok(())
    }

    /// The approximate `k` nearest rows to query `q`, best first, at the beam width last set.
    pub fn search(&mut self, data: &Dataset, q: usize, k: usize) -> Vec<u64> {
        match self {
            Index::Finder { index, ef } => index
                .search(data.query(q), k, *ef)
                .into_iter()
                .map(|(key, _)| key)
                .collect(),
            Index::HnswRs { index, ef } => index
                .search(data.query(q), k, *ef)
                .into_iter()
                .map(|n| n.d_id as u64)
                .collect(),
            Index::Instant { index, search } => index
                .search(&Row((data.n + q) as u32), search)
                .take(k)
                .map(|item| u64::from(item.point.0))
                .collect(),
        }
    }
}
