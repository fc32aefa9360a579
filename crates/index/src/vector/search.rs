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
    /// Vectors in the graph.
    pub vectors: usize,
    /// Fragments in the lexical index when the graph was built.
    pub fragments: usize,
    pub built_at: u64,
    /// Text hash per fragment key, so the next build knows what changed.
    #[serde(default)]
    pub hashes: HashMap<u64, u64>,
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
        fragments: usize,
        built_at: u64,
    }
    Ok(read_state_as::<Head>(vdir)?.map(|h| VectorState {
        model_id: h.model_id,
        dim: h.dim,
        vectors: h.vectors,
        fragments: h.fragments,
        built_at: h.built_at,
        hashes: HashMap::new(),
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

/// A loaded vector index.
pub(crate) struct VectorIndex {
    graph: Hnsw,
    pub state: VectorState,
}

impl VectorIndex {
    /// Loads the published graph; `None` when no build has finished yet.
    pub fn open(vdir: &Path) -> Result<Option<VectorIndex>> {
        let Some(state) = read_state_head(vdir)? else {
            return Ok(None);
        };
        let mut graph = read_ann(vdir)?;
        if (graph.len() + graph.tombstones()) * graph.dim() <= QUANTIZE_MAX_BYTES {
            graph.quantize();
        }
        Ok(Some(VectorIndex { graph, state }))
    }

    /// The `k` nearest fragments within `max_distance` (cosine distance), best first, as
    /// `(fragment key, cosine similarity)`. The search keeps a window of at least half again
    /// `k` rows: over `i8` codes of the vectors up to [`QUANTIZE_MAX_BYTES`] (every code in
    /// order on a small index, the graph walk above that), over the floats beyond; every row
    /// kept is scored with an exact float32 dot product before the window is cut to `k`.
    pub fn search(&self, query: &[f32], k: usize, ef: usize, max_distance: f32) -> Vec<(u64, f32)> {
        let window = k + k / 2;
        let mut hits: Vec<(u64, f32)> = self
            .graph
            .search(query, window, ef.max(window))
            .into_iter()
            .filter(|(_, sim)| 1.0 - sim <= max_distance)
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(k);
        hits
    }

    pub fn dim(&self) -> usize {
        self.graph.dim()
    }

    /// Live vectors.
    pub fn len(&self) -> usize {
        self.graph.len()
    }

    /// The stored vector of a fragment.
    pub fn vector(&self, key: u64) -> Option<&[f32]> {
        self.graph.get(key)
    }
}
