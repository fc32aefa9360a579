//! `finder model distill`: a static (Model2Vec-format) model made from the MiniLM folder.
//!
//! Every vocabulary entry is run through the transformer on its own (`[CLS] token [SEP]`,
//! mean-pooled), the token vectors are centred and projected on their principal components
//! (which also drops the direction every token shares), and each token is scaled down by how
//! common it is (smooth inverse frequency with Zipf's law over the vocabulary order standing
//! in for counts). The result is written next to a copy of the tokenizer, staged in a
//! temporary folder and renamed into place, so a half-written model is never loaded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};

use crate::error::EmbedError;
use crate::minilm::MiniLm;

/// Dimensions kept by default (Model2Vec's default).
pub const DEFAULT_DISTILL_DIMS: usize = 256;
/// Smooth-inverse-frequency constant: a token of probability `p` is scaled by `a / (a + p)`.
const SIF_COEFFICIENT: f64 = 1e-4;
/// Vocabulary entries per transformer batch.
const BATCH: usize = 512;

/// What a distillation produced.
#[derive(Debug, Clone)]
pub struct DistillReport {
    pub dir: PathBuf,
    pub tokens: usize,
    pub dims: usize,
    /// Share of the token vectors' variance the kept dimensions hold.
    pub explained_variance: f64,
    pub seconds: f64,
}

/// Distils the MiniLM model in `from` into a static model in `to`, keeping `dims` dimensions.
/// `progress(done, total)` counts vocabulary entries.
pub fn distill(
    from: &Path,
    to: &Path,
    dims: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<DistillReport, EmbedError> {
    let started = std::time::Instant::now();
    let model = MiniLm::load(from, 16)?;
    let tokenizer = model.tokenizer();
    let dim = model.dim();
    if dims == 0 || dims > dim {
        return Err(EmbedError::Inference(format!(
            "--dims {dims} is out of range; allowed: 1–{dim} (the model's width)"
        )));
    }
    let special = |name: &str| {
        tokenizer.token_to_id(name).ok_or_else(|| EmbedError::Load {
            path: from.to_path_buf(),
            message: format!("tokenizer.json has no {name} token"),
        })
    };
    let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
    let vocab = tokenizer.get_vocab_size(true);

    // 1. One vector per vocabulary entry.
    let mut vectors: Vec<Vec<f32>> = Vec::with_capacity(vocab);
    let ids: Vec<u32> = (0..vocab as u32).collect();
    progress(0, vocab);
    for chunk in ids.chunks(BATCH) {
        let batch: Vec<Vec<u32>> = chunk.iter().map(|&id| vec![cls, id, sep]).collect();
        vectors.extend(model.embed_ids(&batch)?);
        progress(vectors.len(), vocab);
    }

    // 2. Principal components of the centred token vectors.
    let (projection, explained_variance) = principal_components(&vectors, dim, dims);
    let mean = column_mean(&vectors, dim);

    // 3. Project, then weight by smooth inverse frequency (Zipf over vocabulary order).
    let ranks: f64 = (0..vocab).map(|r| 1.0 / (r as f64 + 2.0)).sum();
    let mut table = Vec::with_capacity(vocab * dims);
    for (rank, v) in vectors.iter().enumerate() {
        let p = 1.0 / (rank as f64 + 2.0) / ranks;
        let weight = SIF_COEFFICIENT / (SIF_COEFFICIENT + p);
        for component in &projection {
            let dot: f64 = v
                .iter()
                .zip(&mean)
                .zip(component)
                .map(|((&x, &m), &c)| (x as f64 - m) * c)
                .sum();
            table.push((dot * weight) as f32);
        }
    }

    // 4. Stage the folder, then move it into place.
    let staging = to.with_extension("distill-tmp");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EmbedError::Io { path, source }
    };
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    let tensor = Tensor::from_vec(table, (vocab, dims), &Device::Cpu)
        .map_err(|e| EmbedError::Inference(e.to_string()))?;
    let weights = staging.join("model.safetensors");
    candle_core::safetensors::save(&HashMap::from([("embeddings", tensor)]), &weights)
        .map_err(|e| EmbedError::Inference(format!("{}: {e}", weights.display())))?;
    std::fs::copy(from.join("tokenizer.json"), staging.join("tokenizer.json"))
        .map_err(io(&from.join("tokenizer.json")))?;
    let config = serde_json::json!({
        "model_type": "model2vec",
        "normalize": true,
        "hidden_dim": dims,
        "apply_pca": dims,
        "sif_coefficient": SIF_COEFFICIENT,
        "distilled_from": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)",
    });
    std::fs::write(
        staging.join("config.json"),
        serde_json::to_string_pretty(&config).unwrap_or_default(),
    )
    .map_err(io(&staging))?;
    std::fs::write(
        staging.join("NOTICE"),
        "Derived by `finder model distill` from all-MiniLM-L6-v2 \
         (sentence-transformers, Apache License 2.0).\n",
    )
    .map_err(io(&staging))?;
    if to.exists() {
        std::fs::remove_dir_all(to).map_err(io(to))?;
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::rename(&staging, to).map_err(io(to))?;
    Ok(DistillReport {
        dir: to.to_path_buf(),
        tokens: vocab,
        dims,
        explained_variance,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn column_mean(rows: &[Vec<f32>], dim: usize) -> Vec<f64> {
    let mut mean = vec![0f64; dim];
    for r in rows {
        for (m, &x) in mean.iter_mut().zip(r) {
            *m += x as f64;
        }
    }
    let n = rows.len().max(1) as f64;
    mean.iter_mut().for_each(|m| *m /= n);
    mean
}

/// The `keep` leading principal axes of `rows` (unit vectors, largest variance first) and
/// the share of the variance they hold.
fn principal_components(rows: &[Vec<f32>], dim: usize, keep: usize) -> (Vec<Vec<f64>>, f64) {
    let mean = column_mean(rows, dim);
    let mut cov = vec![0f64; dim * dim];
    let mut centred = vec![0f64; dim];
    for r in rows {
        for ((c, &x), m) in centred.iter_mut().zip(r).zip(&mean) {
            *c = x as f64 - m;
        }
        for i in 0..dim {
            let ci = centred[i];
            let row = &mut cov[i * dim..(i + 1) * dim];
            for (j, cell) in row.iter_mut().enumerate().skip(i) {
                *cell += ci * centred[j];
            }
        }
    }
    for i in 0..dim {
        for j in 0..i {
            cov[i * dim + j] = cov[j * dim + i];
        }
    }
    let (values, vectors) = symmetric_eigen(cov, dim);
    let mut order: Vec<usize> = (0..dim).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let total: f64 = values.iter().map(|v| v.max(0.0)).sum();
    let kept: f64 = order.iter().take(keep).map(|&i| values[i].max(0.0)).sum();
    let axes = order
        .iter()
        .take(keep)
        .map(|&i| (0..dim).map(|r| vectors[r * dim + i]).collect())
        .collect();
    (axes, if total > 0.0 { kept / total } else { 0.0 })
}

/// Eigenvalues and eigenvectors (as columns of a row-major matrix) of a symmetric matrix, by
/// cyclic Jacobi rotations: slow for big matrices, exact enough and dependency-free for the
/// few hundred dimensions of an embedding model.
pub(crate) fn symmetric_eigen(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..50 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum();
        let diag: f64 = (0..n).map(|i| a[i * n + i] * a[i * n + i]).sum();
        if off <= 1e-22 * diag.max(1e-300) {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k * n + p];
                    let akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[p * n + k];
                    let aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let vkp = v[k * n + p];
                    let vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jacobi_recovers_eigenpairs_of_a_known_matrix() {
        // A = Q diag(5, 2, 0.5) Qᵀ with Q a rotation.
        let (c, s) = (0.6f64, 0.8f64);
        let q = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]];
        let d = [5.0, 2.0, 0.5];
        let mut a = vec![0f64; 9];
        for i in 0..3 {
            for j in 0..3 {
                a[i * 3 + j] = (0..3).map(|k| q[i][k] * d[k] * q[j][k]).sum();
            }
        }
        let (values, vectors) = symmetric_eigen(a.clone(), 3);
        let mut sorted = values.clone();
        sorted.sort_by(|x, y| y.total_cmp(x));
        for (got, want) in sorted.iter().zip(d) {
            assert!((got - want).abs() < 1e-9, "{sorted:?}");
        }
        // A v = λ v for every pair.
        for (col, &lambda) in values.iter().enumerate() {
            for i in 0..3 {
                let av: f64 = (0..3).map(|k| a[i * 3 + k] * vectors[k * 3 + col]).sum();
                assert!((av - lambda * vectors[i * 3 + col]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn principal_axis_of_points_on_a_line_is_the_line() {
        let rows: Vec<Vec<f32>> = (0..50)
            .map(|i| {
                let t = i as f32 / 10.0;
                vec![3.0 * t + 1.0, 4.0 * t - 2.0, 0.0]
            })
            .collect();
        let (axes, share) = principal_components(&rows, 3, 1);
        let axis = &axes[0];
        assert!((axis[0].abs() - 0.6).abs() < 1e-6 && (axis[1].abs() - 0.8).abs() < 1e-6);
        assert!(share > 0.999_999);
    }
}
