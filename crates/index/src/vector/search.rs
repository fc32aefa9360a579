//! The query side of the vector layer: the published graph and its state, loaded once per
//! opened index, and nearest-neighbour search with an exact reorder of the ANN window.

use std::collections::HashMap;
use std::io::BufReader;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{IndexError, Result};
use finder_ann::Hnsw;

pub(crate) const LOG_FILE: &str = "vectors.log";
pub(crate) const ANN_FILE: &str = "ann.bin";
pub(crate) const STATE_FILE: &str = "state.json";

/// What the published vector index holds. Written after `ann.bin`, so a state file always
/// describes a complete graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorState {
    pub model_id: String,
    pub dim: usize,
    /// Fragments with vectors in the graph.
    pub vectors: usize,
    /// Vectors in the graph: one per part of a fragment's vectors (a window the model read).
    #[serde(default)]
    pub windows: usize,
    /// Fragments in the lexical index when the graph was built.
    pub fragments: usize,
    pub built_at: u64,
    /// Text hash per graph key (a fragment's key, or a later part's), so the next build knows
    /// what changed.
    #[serde(default)]
    pub hashes: HashMap<u64, u64>,
    /// The fragment of each graph key past a fragment's first part (`keys::part_key`).
    #[serde(default)]
    pub parts: HashMap<u64, u64>,
}

pub(crate) fn read_state(vdir: &Path) -> Result<Option<VectorState>> {
    read_state_as::<VectorState>(vdir)
}

/// [`read_state`] without the per-fragment hashes (a million entries at a million
/// fragments), which only the next build needs: for queries and status.
pub(crate) fn read_state_head(vdir: &Path) -> Result<Option<VectorState>> {
    /// The state's fields but the hashes, which the parse skips.
    #[derive(Deserialize)]
    struct Head {
        model_id: String,
        dim: usize,
        vectors: usize,
        #[serde(default)]
        windows: usize,
        fragments: usize,
        built_at: u64,
        #[serde(default)]
        parts: HashMap<u64, u64>,
    }
    Ok(read_state_as::<Head>(vdir)?.map(|h| VectorState {
        model_id: h.model_id,
        dim: h.dim,
        vectors: h.vectors,
        windows: h.windows,
        fragments: h.fragments,
        built_at: h.built_at,
        hashes: HashMap::new(),
        parts: h.parts,
    }))
}

fn read_state_as<T: serde::de::DeserializeOwned>(vdir: &Path) -> Result<Option<T>> {
    let path = vdir.join(STATE_FILE);
    match std::fs::File::open(&path) {
        Ok(file) => serde_json::from_reader(BufReader::with_capacity(1 << 16, file))
            .map(Some)
            .map_err(|e| IndexError::Corrupt {
                path,
                reason: format!("vector state: {e}"),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(IndexError::Io { path, source }),
    }
}

pub(crate) fn write_state(vdir: &Path, state: &VectorState) -> Result<()> {
    let path = vdir.join(STATE_FILE);
    let tmp = vdir.join("state.json.tmp");
    let text = serde_json::to_string(state).expect("state serialises");
    let write = || -> std::io::Result<()> {
        std::fs::write(&tmp, text)?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|source| IndexError::Io {
        path: path.clone(),
        source,
    })
}

pub(crate) fn read_ann(vdir: &Path) -> Result<Hnsw> {
    let path = vdir.join(ANN_FILE);
    let file = std::fs::File::open(&path).map_err(|source| IndexError::Io {
        path: path.clone(),
        source,
    })?;
    let size = file.metadata().map_err(|source| IndexError::Io {
        path: path.clone(),
        source,
    })?;
    Hnsw::read_from_sized(&mut BufReader::with_capacity(1 << 20, file), size.len()).map_err(|e| {
        IndexError::Corrupt {
            path,
            reason: e.to_string(),
        }
    })
}

/// The largest index, in bytes of `i8` codes (one per dimension per vector), whose search
/// runs over codes ([`Hnsw::quantize`]): 128 MiB, about 350,000 vectors of 384 dimensions.
///
/// The codes make the vector list 30–40% faster at every size measured (10k to 1M vectors),
/// but they are held beside the `f32` rows, which the re-score of each query's window needs:
/// at a million 384-dimensional vectors they are 366 MiB more, and the process would pass the
/// 2.5 GB it is meant to stay within at that size. Reading only the re-scored rows from the
/// file instead was measured too: through a memory map, the pages a million rows' queries
/// touch become resident anyway (1.5 GB after 600 queries), and through positioned reads the
/// 300 reads cost about 0.3 ms a query, more than the codes save. Larger indexes walk over
/// the floats as before.
pub(crate) const QUANTIZE_MAX_BYTES: usize = 128 << 20;

/// What a vector search keeps and how it scores a fragment of several parts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SearchLimits {
    /// Hits farther than this cosine distance are dropped.
    pub max_distance: f32,
    /// `vector.window_weight`.
    pub window_weight: f32,
}

/// A loaded vector index.
pub(crate) struct VectorIndex {
    graph: Hnsw,
    pub state: VectorState,
}

impl VectorIndex {
    /// Loads the published graph; `None` when no build has finished yet. A build publishes
    /// `ann.bin` before `state.json`, so an open between the two finds a graph of another
    /// size than the state says and reads both again.
    pub fn open(vdir: &Path) -> Result<Option<VectorIndex>> {
        let mut tries = 0;
        let (state, mut graph) = loop {
            let Some(state) = read_state_head(vdir)? else {
                return Ok(None);
            };
            let graph = read_ann(vdir)?;
            // `windows` is 0 in states written before it was kept
            let same = state.windows == 0 || state.windows == graph.len();
            tries += 1;
            if same || tries == 3 {
                break (state, graph);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        if (graph.len() + graph.tombstones()) * graph.dim() <= QUANTIZE_MAX_BYTES {
            graph.quantize();
        }
        Ok(Some(VectorIndex { graph, state }))
    }

    /// The `k` nearest fragments within `max_distance` (cosine distance), best first, as
    /// `(fragment key, cosine similarity)`. A fragment embedded in several parts scores as its
    /// first part plus `window_weight` times what its best part adds to that. The search
    /// keeps a window of at least half again `k` rows (more by the share of later parts, at
    /// most twice that, and wider again while its rows hold fewer than `k` fragments): over
    /// `i8` codes of the vectors up to [`QUANTIZE_MAX_BYTES`] (every code in order on a small
    /// index, the graph walk above that), over the floats beyond; every row kept is scored
    /// with an exact float32 dot product before the window is cut to `k` fragments.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        limits: SearchLimits,
    ) -> Vec<(u64, f32)> {
        let parts = &self.state.parts;
        let fragments = self.graph.len().saturating_sub(parts.len()).max(1);
        let window = k + k / 2;
        let mut window = (window + window * parts.len() / fragments).min(2 * window);
        let mut hits = loop {
            let mut hits: Vec<(u64, f32)> = self
                .graph
                .search(query, window, ef.max(window))
                .into_iter()
                .map(|(key, sim)| match parts.get(&key) {
                    Some(fragment) => (*fragment, sim),
                    None => (key, sim),
                })
                .collect();
            if parts.is_empty() {
                break hits;
            }
            // Best part first, then one entry per fragment.
            hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let mut seen = std::collections::HashSet::with_capacity(hits.len());
            hits.retain(|(key, _)| seen.insert(*key));
            if hits.len() >= k.min(fragments) || window >= self.graph.len() {
                break hits;
            }
            window = (2 * window).min(self.graph.len());
        };
        if !parts.is_empty() {
            for (key, sim) in &mut hits {
                let Some(first) = self.graph.get(*key) else {
                    continue;
                };
                // the walk may have missed the first part and found only a later one
                let first = finder_ann::distance::dot(first, query);
                *sim = first + limits.window_weight * (sim.max(first) - first);
            }
        }
        hits.retain(|(_, sim)| 1.0 - sim <= limits.max_distance);
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(k);
        hits
    }

    pub fn dim(&self) -> usize {
        self.graph.dim()
    }

    /// Live vectors, every part of every fragment.
    pub fn len(&self) -> usize {
        self.graph.len()
    }

    /// The stored vector of a fragment (its first part).
    pub fn vector(&self, key: u64) -> Option<&[f32]> {
        self.graph.get(key)
    }
}
