//! Building the vector layer after a lexical commit: embed the fragments that have no vector
//! for their current text, log them durably as they come, then update the HNSW graph and
//! publish it with its state file.
//!
//! Resumable: the log survives an interrupted build, and the next build embeds only what is
//! missing. A different model id starts a fresh log, so changing the model rebuilds the
//! vectors and nothing else.
//!
//! Changed fragments (a vector for an older text) are embedded and published before the
//! backlog (no vector yet), and a lexical commit during the build starts it over from that
//! commit: an edit saved under `watch` waits for the batch in hand, not for the backlog. A new
//! note or a new passage has no older vector and waits with the backlog.

use std::collections::HashMap;
use std::io::BufWriter;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use finder_core::{Embed, Settings};
use serde::Serialize;
use tantivy::schema::Value;
use tantivy::TantivyDocument;

use super::search::{read_state, VectorState, ANN_FILE, LOG_FILE};
use super::{log, VECTOR_DIR};
use crate::error::{IndexError, Result};
use crate::keys::{part_key, text_hash};
use crate::live::LiveRun;
use crate::stored::{for_each_stored, load_catalog, open_or_create};
use finder_ann::{Hnsw, HnswParams, Rows};

/// What a vector build did.
#[derive(Debug, Clone, Serialize)]
pub struct VectorReport {
    pub model_id: String,
    /// Fragments embedded in this build.
    pub embedded: usize,
    /// Fragments whose vector was already there.
    pub reused: usize,
    /// Graph rows dropped (a fragment's, or one of its windows') because their text changed
    /// or their fragment is gone.
    pub removed: usize,
    /// Fragments with vectors in the published index.
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

/// The name of a vector build's lock and progress files ([`LiveRun`]).
pub(crate) const BUILD_RUN: &str = "build";

/// Embeds what is missing and publishes the vector index, reporting each phase to `progress`.
pub fn build_vectors(
    dir: &Path,
    settings: &Settings,
    embedder: &dyn Embed,
    progress: &mut dyn FnMut(VectorProgress),
) -> Result<VectorReport> {
    // One build at a time per index, across processes (a watch's background build beside a
    // `finder index`, an API write's): a second waits for the first, then finds its work done.
    let vdir = dir.join(VECTOR_DIR);
    std::fs::create_dir_all(&vdir).map_err(|source| IndexError::Io {
        path: vdir.clone(),
        source,
    })?;
    // The lock is `build.lock`; while it is held, `build.json` says how far the build is.
    let mut live = LiveRun::wait(&vdir, BUILD_RUN).map_err(|source| IndexError::Io {
        path: vdir.join(BUILD_RUN),
        source,
    })?;
    crate::tuning::map_large_blocks();
    let started = Instant::now();
    // Passes until one publishes everything: what an earlier pass embedded is in the log, so
    // a later one counts it as reused; the report counts it as embedded.
    let mut earlier = 0;
    let report = loop {
        match build(dir, settings, embedder, &mut live, progress) {
            Ok(Pass::Published { report, rest }) if !rest => {
                let reused = report.reused.saturating_sub(earlier);
                let embedded = report.embedded + (report.reused - reused);
                break Ok(VectorReport {
                    embedded,
                    reused,
                    seconds: started.elapsed().as_secs_f64(),
                    ..report
                });
            }
            Ok(Pass::Published { report, .. }) => earlier += report.embedded,
            Ok(Pass::Superseded { embedded }) => earlier += embedded,
            Err(e) => break Err(e),
        }
    };
    drop(live);
    // everything the build held is dropped by now: hand the freed heap back
    crate::tuning::release_free_memory();
    report
}

/// How one pass of a build ended.
enum Pass {
    /// The vector index was published; `rest` when the backlog is left for the next pass.
    Published { report: VectorReport, rest: bool },
    /// A newer lexical commit came before the pass's fragments were all embedded: nothing was
    /// published, `embedded` vectors were logged.
    Superseded { embedded: usize },
}

/// One pass over the lexical commit it starts on. Changed fragments (a vector for an older
/// text) go first: when there is a backlog too (no vector yet: a first build cut short, a
/// model change), the pass embeds and publishes the changed ones only, so an edit saved under
/// `watch` is searchable before the backlog is done. A newer commit during the pass ends it.
fn build(
    dir: &Path,
    settings: &Settings,
    embedder: &dyn Embed,
    live: &mut LiveRun,
    progress: &mut dyn FnMut(VectorProgress),
) -> Result<Pass> {
    // Fragments are embedded shortest first, so the time left is estimated from the
    // characters embedded (`chars`: done, in all) rather than from the count.
    let chars = std::cell::Cell::new((0u64, 0u64));
    let progress = &mut |p: VectorProgress| {
        match p {
            VectorProgress::Embedding { done, total } => {
                let work = Some(chars.get()).filter(|&(_, all)| all > 0);
                live.report_work("embedding", done as u64, Some(total as u64), work);
            }
            VectorProgress::Graph { done, total } => {
                live.report("graph", done as u64, Some(total as u64))
            }
        }
        progress(p);
    };
    let started = Instant::now();
    let precomputed = settings.embed.backend == finder_core::EmbedBackend::Precomputed;
    let vdir = dir.join(VECTOR_DIR);
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IndexError::Io { path, source }
    };
    std::fs::create_dir_all(&vdir).map_err(io_err(&vdir))?;
    let model_id = embedder.model_id().to_string();
    let dim = embedder.dim();

    // Precomputed vectors were stored with the fragments: nothing to embed, only to check.
    let commit = commit_stamp(dir);
    let (fragments, given) = embed_texts(dir, settings, precomputed, dim)?;
    let log_path = vdir.join(LOG_FILE);
    // A log of first windows only is not one of every window: switching `embed.windows`
    // starts a fresh log (the graph is updated from it as after any change).
    let windows = settings.embed.windows && !precomputed && embedder.reads_in_windows();
    let log_id = if windows {
        format!("{model_id}+windows")
    } else {
        model_id.clone()
    };
    let existing = log::read(&log_path, &log_id, dim).map_err(io_err(&log_path))?;
    if existing.is_none() && std::fs::metadata(&log_path).is_ok_and(|m| m.len() > 0) {
        tracing::warn!(
            log = %log_path.display(),
            vectors = %log_id,
            "the vectors were made by another model, dimension or `embed.windows`: every \
             fragment is embedded again"
        );
    }
    let (mut have, valid_len) = match existing {
        Some(c) => (c.vectors, Some(c.valid_len)),
        None => (HashMap::new(), None),
    };
    let missing = |key: u64, hash: u64| have.get(&key).is_none_or(|(h, _)| *h != hash);

    let mut writer =
        log::LogWriter::open(&log_path, &log_id, dim, valid_len).map_err(io_err(&log_path))?;
    let mut last_sync = Instant::now();
    let batch = settings.embed.batch_size.max(1);
    // The fragments to embed (none with precomputed vectors), similar lengths together: a
    // batch wastes less on padding.
    let mut todo: Vec<&(u64, u64, String)> = if precomputed {
        Vec::new()
    } else {
        fragments
            .iter()
            .filter(|(key, hash, _)| missing(*key, *hash))
            .collect()
    };
    // Changed fragments before the backlog; this pass stops after them when both are there.
    todo.sort_by_key(|(key, _, text)| (!have.contains_key(key), text.len()));
    let changed = todo
        .iter()
        .take_while(|(key, _, _)| have.contains_key(key))
        .count();
    let rest = changed > 0 && changed < todo.len();
    if rest {
        todo.truncate(changed);
    }
    // A vector depends on the text alone: a fragment whose text the log already holds under
    // another key (a renamed or moved note, a repeated passage) takes those vectors.
    let by_text: HashMap<u64, &[f32]> = have
        .values()
        .map(|(hash, v)| (*hash, v.as_slice()))
        .collect();
    let mut copies: Vec<(u64, u64, &[f32])> = Vec::new();
    todo.retain(|(key, hash, _)| match by_text.get(hash) {
        Some(v) => {
            copies.push((*key, *hash, v));
            false
        }
        None => true,
    });
    // The vectors this pass adds, one row per part, in key order once complete.
    let mut fresh = if precomputed {
        let mut rows = given;
        rows.retain(missing);
        rows.normalize();
        Fresh::whole(dim, rows)
    } else {
        Fresh::new(dim, todo.len())
    };
    for &(key, hash, v) in &copies {
        writer.append(key, hash, v).map_err(io_err(&log_path))?;
        fresh.push(key, hash, v);
    }
    let copied = copies.len();
    drop(copies);
    drop(by_text);
    let total = if precomputed {
        fresh.fragments
    } else {
        todo.len()
    };
    let chars_all = todo.iter().map(|(_, _, t)| t.len() as u64).sum();
    chars.set((0, chars_all));
    progress(VectorProgress::Embedding { done: 0, total });
    if precomputed {
        for start in (0..total).step_by(batch) {
            let end = (start + batch).min(total);
            for i in start..end {
                let rows = &fresh.rows;
                let (key, hash) = (rows.keys[i], rows.hashes[i]);
                writer
                    .append(key, hash, rows.row(i))
                    .map_err(io_err(&log_path))?;
            }
            if last_sync.elapsed() > SYNC_EVERY {
                writer.sync().map_err(io_err(&log_path))?;
                last_sync = Instant::now();
            }
            progress(VectorProgress::Embedding { done: end, total });
        }
    } else {
        let mut parts = Vec::new();
        for (i, chunk) in todo.chunks(batch).enumerate() {
            let texts: Vec<&str> = chunk.iter().map(|(_, _, t)| t.as_str()).collect();
            let chunk_chars: u64 = texts.iter().map(|t| t.len() as u64).sum();
            let vectors = if windows {
                embedder.embed_windows(&texts)
            } else {
                embedder
                    .embed(&texts)
                    .map(|vectors| vectors.into_iter().map(|v| vec![v]).collect())
            }
            .map_err(|reason| IndexError::Embedding { reason })?;
            if vectors.len() != texts.len() {
                let reason = format!(
                    "model returned vectors for {} texts, expected {}",
                    vectors.len(),
                    texts.len()
                );
                return Err(IndexError::Embedding { reason });
            }
            for ((key, hash, _), windows) in chunk.iter().zip(vectors) {
                parts.clear();
                for v in &windows {
                    if v.len() != dim {
                        let reason =
                            format!("model returned {} dimensions, expected {dim}", v.len());
                        return Err(IndexError::Embedding { reason });
                    }
                    parts.extend_from_slice(v);
                }
                if parts.is_empty() {
                    let reason = "model returned no vector for a fragment".to_string();
                    return Err(IndexError::Embedding { reason });
                }
                writer
                    .append(*key, *hash, &parts)
                    .map_err(io_err(&log_path))?;
                fresh.push(*key, *hash, &parts);
            }
            if last_sync.elapsed() > SYNC_EVERY {
                writer.sync().map_err(io_err(&log_path))?;
                last_sync = Instant::now();
            }
            let done = ((i + 1) * batch).min(total);
            chars.set((chars.get().0 + chunk_chars, chars_all));
            progress(VectorProgress::Embedding { done, total });
            if done < total && commit_stamp(dir) != commit {
                writer.sync().map_err(io_err(&log_path))?;
                return Ok(Pass::Superseded { embedded: done });
            }
        }
        fresh.rows.sort_by_key();
    }
    writer.sync().map_err(io_err(&log_path))?;
    drop(writer);
    let embedded = fresh.fragments - copied;
    let reused = fragments.len() - embedded;

    // The live set: every current fragment with its current vectors, from the log (`have`,
    // what this build reused) or from this build (`fresh`).
    let live: HashMap<u64, u64> = fragments.iter().map(|(k, h, _)| (*k, *h)).collect();
    let logged = have.len();
    have.retain(|k, (h, _)| live.get(k) == Some(h));
    drop(live);
    let stale = logged - have.len();
    if stale > (have.len() + fresh.fragments) / 5 {
        let fresh_whole = fresh.whole_fragments();
        let mut entries: Vec<(u64, u64, &[f32])> = have
            .iter()
            .map(|(k, (h, v))| (*k, *h, v.as_slice()))
            .chain(fresh_whole.iter().map(|(k, h, v)| (*k, *h, v.as_slice())))
            .collect();
        entries.sort_by_key(|(k, _, _)| *k);
        log::rewrite(&log_path, &log_id, dim, entries.into_iter()).map_err(io_err(&log_path))?;
    }

    // Graph keys: one per part of each fragment's vectors (`part_key`); the later parts are
    // mapped back to their fragment for queries.
    let mut hashes: HashMap<u64, u64> = HashMap::with_capacity(have.len() + fresh.rows.len());
    let mut parts: HashMap<u64, u64> = fresh.later_parts();
    for (key, (hash, v)) in &have {
        for (graph_key, part, _) in graph_rows(*key, v, dim) {
            hashes.insert(graph_key, *hash);
            if part > 0 {
                parts.insert(graph_key, *key);
            }
        }
    }
    hashes.extend(
        fresh
            .rows
            .keys
            .iter()
            .copied()
            .zip(fresh.rows.hashes.iter().copied()),
    );
    let fragments_with_vectors = hashes.len() - parts.len();
    // Update the previous graph when it was built by this model; otherwise start over.
    let previous = read_state(&vdir)
        .ok()
        .flatten()
        .filter(|s| s.model_id == model_id && s.dim == dim);
    let previous = match previous {
        Some(state) => super::search::read_ann(&vdir)
            .ok()
            .map(|g| (g, state.hashes)),
        None => None,
    };
    let mut removed = 0;
    let graph = match previous {
        Some((mut g, old_hashes)) => {
            for (key, old_hash) in &old_hashes {
                if hashes.get(key) != Some(old_hash) && g.remove(*key) {
                    removed += 1;
                }
            }
            // in key order, not the map's: the same update gives the same graph
            let mut changed: Vec<(u64, &[f32])> = have
                .iter()
                .flat_map(|(key, (hash, v))| {
                    graph_rows(*key, v, dim).map(move |(graph_key, _, row)| (graph_key, *hash, row))
                })
                .chain(fresh.rows.iter())
                .filter(|(key, hash, _)| old_hashes.get(key) != Some(hash))
                .map(|(key, _, v)| (key, v))
                .collect();
            changed.sort_unstable_by_key(|(key, _)| *key);
            insert_all(&mut g, &changed, progress);
            if g.tombstones() > g.len() / 4 {
                g.compact()
            } else {
                g
            }
        }
        None => {
            // One array for every live vector, in key order, handed to the graph as its own:
            // the vectors are held once.
            let mut rows = fresh.rows;
            rows.data
                .reserve_exact(hashes.len().saturating_sub(rows.len()) * dim);
            for (key, (hash, v)) in have.drain() {
                for (graph_key, _, row) in graph_rows(key, &v, dim) {
                    rows.push(graph_key, hash, row);
                }
            }
            rows.sort_by_key();
            let total = rows.len();
            progress(VectorProgress::Graph { done: 0, total });
            let mut reported = 0;
            Hnsw::from_rows(
                dim,
                HnswParams::default(),
                rows.keys,
                rows.data,
                &mut |done| {
                    if done >= reported + GRAPH_PROGRESS_EVERY || done == total {
                        reported = done;
                        progress(VectorProgress::Graph { done, total });
                    }
                },
            )
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
        vectors: fragments_with_vectors,
        windows: graph.len(),
        fragments: fragments.len(),
        built_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        hashes,
        parts,
    };
    super::search::write_state(&vdir, &state)?;
    let report = VectorReport {
        model_id,
        embedded,
        reused,
        removed,
        total: fragments_with_vectors,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok(Pass::Published { report, rest })
}

/// The vectors a pass adds: one row per part of each fragment's vectors, keyed by
/// [`part_key`], and what each row of a fragment with several parts is.
struct Fresh {
    rows: Rows,
    dim: usize,
    /// Graph key to (fragment key, part), for fragments with more than one part.
    several: HashMap<u64, (u64, usize)>,
    /// Fragments added.
    fragments: usize,
}

impl Fresh {
    fn new(dim: usize, fragments: usize) -> Fresh {
        Fresh::whole(dim, Rows::with_capacity(dim, fragments))
    }

    /// Rows of one part each, keyed by their fragments.
    fn whole(dim: usize, rows: Rows) -> Fresh {
        Fresh {
            fragments: rows.len(),
            rows,
            dim: dim.max(1),
            several: HashMap::new(),
        }
    }

    /// Adds a fragment's vectors: `parts` holds one vector per part, one after the other.
    fn push(&mut self, key: u64, hash: u64, parts: &[f32]) {
        let several = parts.len() > self.dim;
        for (graph_key, part, row) in graph_rows(key, parts, self.dim) {
            self.rows.push(graph_key, hash, row);
            if several {
                self.several.insert(graph_key, (key, part));
            }
        }
        self.fragments += 1;
    }

    /// Graph key to fragment key of every part after the first.
    fn later_parts(&self) -> HashMap<u64, u64> {
        self.several
            .iter()
            .filter(|(_, (_, part))| *part > 0)
            .map(|(graph_key, (key, _))| (*graph_key, *key))
            .collect()
    }

    /// Each fragment with its hash and every part's vector, one after the other, in key
    /// order.
    fn whole_fragments(&self) -> Vec<(u64, u64, Vec<f32>)> {
        let mut rows: Vec<(u64, usize, usize)> = (0..self.rows.len())
            .map(|i| {
                let graph_key = self.rows.keys[i];
                let (key, part) = self
                    .several
                    .get(&graph_key)
                    .copied()
                    .unwrap_or((graph_key, 0));
                (key, part, i)
            })
            .collect();
        rows.sort_unstable();
        let mut out: Vec<(u64, u64, Vec<f32>)> = Vec::new();
        for (key, _, i) in rows {
            match out.last_mut() {
                Some((last, _, parts)) if *last == key => parts.extend_from_slice(self.rows.row(i)),
                _ => out.push((key, self.rows.hashes[i], self.rows.row(i).to_vec())),
            }
        }
        out
    }
}

/// The graph rows of a fragment's vectors: `(graph key, part, vector)` for each part, keyed
/// by [`part_key`].
fn graph_rows(key: u64, parts: &[f32], dim: usize) -> impl Iterator<Item = (u64, usize, &[f32])> {
    parts
        .chunks_exact(dim)
        .enumerate()
        .map(move |(part, row)| (part_key(key, part), part, row))
}

/// What names the lexical index's last commit: its `meta.json`, which every commit rewrites.
fn commit_stamp(dir: &Path) -> Option<Vec<u8>> {
    std::fs::read(dir.join(crate::files::LEXICAL_DIR).join("meta.json")).ok()
}

/// Inserts `items` into the graph in order, a slice at a time (each slice built on every
/// core, [`Hnsw::insert_batch`]); reports after every slice of [`GRAPH_PROGRESS_EVERY`].
fn insert_all(graph: &mut Hnsw, items: &[(u64, &[f32])], progress: &mut dyn FnMut(VectorProgress)) {
    let total = items.len();
    progress(VectorProgress::Graph { done: 0, total });
    let mut done = 0;
    for slice in items.chunks(GRAPH_PROGRESS_EVERY) {
        graph.insert_batch(slice);
        done += slice.len();
        progress(VectorProgress::Graph { done, total });
    }
}

/// Every live fragment of the lexical index: `(fragment key, text hash, text to embed)`, in
/// key order. The text is the source title, a newline and the fragment. With precomputed
/// vectors the text is left empty (never embedded; a gigabyte at a million fragments), the
/// hash is the vector's, so a changed vector is rebuilt, and the stored vectors come back
/// from the same walk as rows.
type Texts = (Vec<(u64, u64, String)>, Rows);

fn embed_texts(dir: &Path, settings: &Settings, precomputed: bool, dim: usize) -> Result<Texts> {
    let (index, fields) = open_or_create(dir, settings)?;
    let titles: HashMap<String, String> = if precomputed {
        HashMap::new()
    } else {
        load_catalog(&index, fields, dir)?
            .into_iter()
            .map(|(id, r)| (id, r.envelope.title))
            .collect()
    };
    drop(index);
    let mut out = Vec::new();
    let mut vectors = Rows::with_capacity(dim, 0);
    let mut row = Vec::with_capacity(dim);
    for_each_stored(dir, &mut |doc: TantivyDocument| {
        let text = |f| doc.get_first(f).and_then(|v| v.as_str()).unwrap_or("");
        let body = text(fields.body);
        if body.trim().is_empty() {
            return Ok(());
        }
        let key = doc
            .get_first(fields.fragment_key)
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        if !precomputed {
            let title = titles
                .get(text(fields.source_id))
                .map_or("", String::as_str);
            let embed = fragment_text_to_embed(title, body);
            out.push((key, text_hash(&embed), embed));
            return Ok(());
        }
        let Some(bytes) = fields
            .vector
            .and_then(|field| doc.get_first(field))
            .and_then(|v| v.as_bytes())
        else {
            return Ok(());
        };
        if bytes.len() != dim * 4 {
            let reason = format!(
                "fragment {key:016x}: its record's `vector` has {} numbers; embed.dim is {dim}",
                bytes.len() / 4
            );
            return Err(IndexError::Embedding { reason });
        }
        row.clear();
        row.extend(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        let hash = blake3_u64(bytes);
        vectors.push(key, hash, &row);
        out.push((key, hash, String::new()));
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
