//! Building the vector layer after a lexical commit: embed the fragments that have no vector
//! for their current text, log them durably as they come, then update the HNSW graph and
//! publish it with its state file.
//!
//! Resumable: the log survives an interrupted build, and the next build embeds only what is
//! missing. A different model id starts a fresh log, so changing the model rebuilds the
//! vectors and nothing else.

use std::collections::HashMap;
use std::io::BufWriter;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use finder_core::{Embed, Settings};
use serde::Serialize;
use tantivy::schema::Value;

use super::ann::{Hnsw, HnswParams};
use super::search::{read_state, VectorState, ANN_FILE, LOG_FILE};
use super::{log, VECTOR_DIR};
use crate::error::{IndexError, Result};
use crate::keys::text_hash;
use crate::writer::{for_each_stored, load_catalog, open_or_create};

/// What a vector build did.
#[derive(Debug, Clone, Serialize)]
pub struct VectorReport {
    pub model_id: String,
    /// Fragments embedded in this build.
    pub embedded: usize,
    /// Fragments whose vector was already there.
    pub reused: usize,
    /// Vectors dropped because their fragment is gone.
    pub removed: usize,
    /// Vectors in the published index.
    pub total: usize,
    pub seconds: f64,
}

/// How often the log is made durable during a build.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Where a vector build is, for a progress display: first the fragments to embed (or, with
/// precomputed vectors, to check), then the vectors going into the ANN graph — at a million
/// fragments the graph is the long part (minutes), so it reports too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorProgress {
    /// `done` of the `total` fragments this build embeds.
    Embedding { done: usize, total: usize },
    /// `done` of the `total` vectors this build puts into the graph.
    Graph { done: usize, total: usize },
}

/// How many graph insertions between two [`VectorProgress::Graph`] reports (a multiple of
/// the graph's batch, so the batches stay full).
const GRAPH_PROGRESS_EVERY: usize = 4096;

/// Embeds what is missing and publishes the vector index, reporting each phase to `progress`.
pub fn build_vectors(
    dir: &Path,
    settings: &Settings,
    embedder: &dyn Embed,
    progress: &mut dyn FnMut(VectorProgress),
) -> Result<VectorReport> {
    let started = Instant::now();
    let vdir = dir.join(VECTOR_DIR);
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IndexError::Io { path, source }
    };
    std::fs::create_dir_all(&vdir).map_err(io_err(&vdir))?;
    let model_id = embedder.model_id().to_string();
    let dim = embedder.dim();

    let precomputed = settings.embed.backend == finder_core::EmbedBackend::Precomputed;
    // Precomputed vectors were stored with the fragments: nothing to embed, only to check.
    let (fragments, mut given) = embed_texts(dir, settings, precomputed)?;
    let log_path = vdir.join(LOG_FILE);
    let existing = log::read(&log_path, &model_id, dim).map_err(io_err(&log_path))?;
    let (mut have, valid_len) = match existing {
        Some(c) => (c.vectors, Some(c.valid_len)),
        None => (HashMap::new(), None),
    };
    let mut todo: Vec<&(u64, u64, String)> = fragments
        .iter()
        .filter(|(key, hash, _)| have.get(key).is_none_or(|(h, _)| h != hash))
        .collect();
    if precomputed {
        todo.retain(|(key, _, _)| given.contains_key(key));
    }
    // Similar lengths in a batch waste less on padding.
    todo.sort_by_key(|(_, _, text)| text.len());
    let reused = fragments.len() - todo.len();

    let mut writer =
        log::LogWriter::open(&log_path, &model_id, dim, valid_len).map_err(io_err(&log_path))?;
    let mut last_sync = Instant::now();
    let batch = settings.embed.batch_size.max(1);
    let total = todo.len();
    progress(VectorProgress::Embedding { done: 0, total });
    for (i, chunk) in todo.chunks(batch).enumerate() {
        let vectors = if precomputed {
            chunk
                .iter()
                .map(|(key, _, _)| unit(given.remove(key).unwrap_or_default()))
                .collect()
        } else {
            let texts: Vec<&str> = chunk.iter().map(|(_, _, t)| t.as_str()).collect();
            embedder
                .embed(&texts)
                .map_err(|reason| IndexError::Embedding { reason })?
        };
        for ((key, hash, _), v) in chunk.iter().zip(vectors) {
            if v.len() != dim {
                let reason = if precomputed {
                    format!(
                        "fragment {key:016x}: its record's `vector` has {} numbers; embed.dim is {dim}",
                        v.len()
                    )
                } else {
                    format!("model returned {} dimensions, expected {dim}", v.len())
                };
                return Err(IndexError::Embedding { reason });
            }
            writer.append(*key, *hash, &v).map_err(io_err(&log_path))?;
            have.insert(*key, (*hash, v));
        }
        if last_sync.elapsed() > SYNC_EVERY {
            writer.sync().map_err(io_err(&log_path))?;
            last_sync = Instant::now();
        }
        let done = ((i + 1) * batch).min(total);
        progress(VectorProgress::Embedding { done, total });
    }
    writer.sync().map_err(io_err(&log_path))?;
    drop(writer);

    // The live set: every current fragment with its current vector.
    let live: HashMap<u64, u64> = fragments.iter().map(|(k, h, _)| (*k, *h)).collect();
    let stale = have.len() - have.keys().filter(|k| live.contains_key(k)).count();
    have.retain(|k, _| live.contains_key(k));
    if stale > have.len() / 5 {
        let mut entries: Vec<(&u64, &(u64, Vec<f32>))> = have.iter().collect();
        entries.sort_by_key(|(k, _)| **k);
        log::rewrite(
            &log_path,
            &model_id,
            dim,
            entries
                .into_iter()
                .map(|(k, (h, v))| (*k, *h, v.as_slice())),
        )
        .map_err(io_err(&log_path))?;
    }

    let hashes: HashMap<u64, u64> = have.iter().map(|(k, (h, _))| (*k, *h)).collect();
    // Update the previous graph when it was built by this model; otherwise start over. Each
    // vector moves out of `have` as the graph takes its copy, so they are held once, not twice.
    let previous = read_state(&vdir)
        .ok()
        .flatten()
        .filter(|s| s.model_id == model_id && s.dim == dim);
    let mut graph = match previous {
        Some(state) => super::search::read_ann(&vdir)
            .ok()
            .map(|g| (g, state.hashes)),
        None => None,
    };
    let mut removed = 0;
    let graph = match graph.take() {
        Some((mut g, old_hashes)) => {
            for (key, old_hash) in &old_hashes {
                if live.get(key) != Some(old_hash) && g.remove(*key) {
                    removed += 1;
                }
            }
            let mut changed: Vec<u64> = have
                .iter()
                .filter(|(key, (hash, _))| old_hashes.get(key) != Some(hash))
                .map(|(key, _)| *key)
                .collect();
            // in key order, not the map's: the same update gives the same graph
            changed.sort_unstable();
            insert_all(&mut g, &mut have, changed, progress);
            if g.tombstones() > g.len() / 4 {
                g.compact()
            } else {
                g
            }
        }
        None => {
            let mut g = Hnsw::new(dim, HnswParams::default());
            let mut keys: Vec<u64> = have.keys().copied().collect();
            keys.sort_unstable();
            g.reserve(keys.len());
            insert_all(&mut g, &mut have, keys, progress);
            g
        }
    };

    let ann_path = vdir.join(ANN_FILE);
    let tmp = vdir.join("ann.bin.tmp");
    {
        let file = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        graph.write_to(&mut w).map_err(io_err(&tmp))?;
        let file = w.into_inner().map_err(|e| IndexError::Io {
            path: tmp.clone(),
            source: e.into_error(),
        })?;
        file.sync_all().map_err(io_err(&tmp))?;
    }
    std::fs::rename(&tmp, &ann_path).map_err(io_err(&ann_path))?;
    let state = VectorState {
        model_id: model_id.clone(),
        dim,
        vectors: graph.len(),
        fragments: fragments.len(),
        built_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        hashes,
    };
    super::search::write_state(&vdir, &state)?;
    Ok(VectorReport {
        model_id,
        embedded: todo.len(),
        reused,
        removed,
        total: graph.len(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Moves the vectors of `keys` out of `have` into the graph, in order and a slice at a time
/// (each slice built on every core, [`Hnsw::insert_batch`]), so each vector is held once;
/// reports after every slice of [`GRAPH_PROGRESS_EVERY`].
fn insert_all(
    graph: &mut Hnsw,
    have: &mut HashMap<u64, (u64, Vec<f32>)>,
    keys: Vec<u64>,
    progress: &mut dyn FnMut(VectorProgress),
) {
    let total = keys.len();
    progress(VectorProgress::Graph { done: 0, total });
    let mut done = 0;
    for slice in keys.chunks(GRAPH_PROGRESS_EVERY) {
        let owned: Vec<(u64, Vec<f32>)> = slice
            .iter()
            .filter_map(|key| have.remove(key).map(|(_, v)| (*key, v)))
            .collect();
        let items: Vec<(u64, &[f32])> = owned.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        graph.insert_batch(&items);
        done += slice.len();
        progress(VectorProgress::Graph { done, total });
    }
    if total == 0 {
        progress(VectorProgress::Graph { done: 0, total });
    }
}

/// Every live fragment of the lexical index: `(fragment key, text hash, text to embed)`.
/// The text is the source title, the heading and the fragment, as the lexical field has it.
/// With precomputed vectors the hash is the vector's, so a changed vector is rebuilt, and the
/// stored vectors come back by fragment key from the same walk.
type Texts = (Vec<(u64, u64, String)>, HashMap<u64, Vec<f32>>);

fn embed_texts(dir: &Path, settings: &Settings, precomputed: bool) -> Result<Texts> {
    let (index, fields) = open_or_create(dir, settings)?;
    let titles: HashMap<String, String> = load_catalog(&index, fields, dir)?
        .into_iter()
        .map(|(id, r)| (id, r.envelope.title))
        .collect();
    let mut out = Vec::new();
    let mut vectors = HashMap::new();
    for_each_stored(dir, &index, &mut |doc| {
        let text = |f| {
            doc.get_first(f)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        let body = text(fields.body);
        if body.trim().is_empty() {
            return Ok(());
        }
        let key = doc
            .get_first(fields.fragment_key)
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        let title = titles
            .get(&text(fields.source_id))
            .map_or("", String::as_str);
        // With precomputed vectors the text is never embedded: not kept (a gigabyte at 1M).
        let embed = if precomputed {
            String::new()
        } else {
            fragment_text_to_embed(title, &body)
        };
        let hash = match (precomputed, fields.vector) {
            (true, Some(field)) => match doc.get_first(field).and_then(|v| v.as_bytes()) {
                Some(bytes) => {
                    let vector = bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    vectors.insert(key, vector);
                    blake3_u64(bytes)
                }
                None => return Ok(()),
            },
            _ => text_hash(&embed),
        };
        out.push((key, hash, embed));
        Ok(())
    })?;
    out.sort_by_key(|(k, _, _)| *k);
    Ok((out, vectors))
}

/// The text a fragment is embedded as, by every store and tool: its source's title, a
/// newline, then the fragment (the fragment alone when the title is empty).
pub fn fragment_text_to_embed(title: &str, fragment: &str) -> String {
    if title.is_empty() {
        fragment.to_string()
    } else {
        format!("{title}\n{fragment}")
    }
}

fn blake3_u64(bytes: &[u8]) -> u64 {
    let hash = blake3::hash(bytes);
    let mut head = [0u8; 8];
    head.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(head)
}

/// Scales a vector to unit length (cosine is a dot product downstream); zero stays zero.
pub(crate) fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}
