//! The vector layer: fragment vectors kept beside the lexical index, an HNSW graph over them,
//! and the build that fills both after a lexical commit.
//!
//! Files under `<index>/vectors/`: `vectors.log` (append-only records, the resumable part of a
//! build), `ann.bin` (the HNSW graph with its vectors, replaced atomically) and `state.json`
//! (what `ann.bin` holds, written last); while a build runs, `build.lock` is held and
//! `build.json` says how far it is (`crate::live`).

mod build;
mod log;
mod search;

pub(crate) use build::BUILD_RUN;
pub use build::{build_vectors, fragment_text_to_embed, VectorProgress, VectorReport};
pub use search::VectorState;
pub(crate) use search::{
    read_state, read_state_head, SearchLimits, VectorIndex, LOG_FILE, STATE_FILE,
};

/// Sub-folder of the index folder that holds the vector layer.
pub(crate) const VECTOR_DIR: &str = "vectors";
