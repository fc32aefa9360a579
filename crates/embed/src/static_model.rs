//! Static embeddings in the Model2Vec format: one vector per token, a text's vector is the
//! mean of its tokens' vectors. No transformer runs at query or index time, so a core embeds
//! hundreds of thousands of texts per second; `finder model distill` makes such a model from
//! MiniLM (see [`crate::distill`]).
//!
//! A model folder holds `tokenizer.json`, `model.safetensors` with an `embeddings` tensor
//! (`[vocab or rows, dim]`, f32/f16/bf16) and, in vocabulary-quantised models, `mappings`
//! (token id → row) and `weights` (a per-token scale), and an optional `config.json`.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use crate::error::EmbedError;

/// Longest input, in tokens; Model2Vec's own default.
const MAX_TOKENS: usize = 512;

pub struct StaticModel {
    tokenizer: Tokenizer,
    /// Row-major `[rows, dim]`.
    embeddings: Vec<f32>,
    dim: usize,
    /// Token id → row, when the vocabulary was quantised.
    mappings: Option<Vec<usize>>,
    /// Per-token-id scale, when the model has one.
    weights: Option<Vec<f32>>,
    /// Token ids that carry no meaning (unknown, padding).
    skip: Vec<u32>,
    model_id: String,
}

impl StaticModel {
    pub fn load(dir: &Path) -> Result<StaticModel, EmbedError> {
        let file = |name: &str| {
            crate::error::model_file(
                dir,
                name,
                " (a Model2Vec folder; `finder model distill` makes one)",
            )
        };
        let load_err = |message: String| EmbedError::Load {
            path: dir.to_path_buf(),
            message,
        };
        let mut tokenizer = Tokenizer::from_file(file("tokenizer.json")?)
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        let weights_path = file("model.safetensors")?;
        let bytes = std::fs::read(&weights_path).map_err(|source| EmbedError::Io {
            path: weights_path.clone(),
            source,
        })?;
        let digest = Sha256::digest(&bytes);
        let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
            .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        drop(bytes);
        let tensor_err = |name: &str, e: candle_core::Error| {
            load_err(format!("model.safetensors: tensor `{name}`: {e}"))
        };
        let embeddings = tensors
            .get("embeddings")
            .ok_or_else(|| load_err("model.safetensors has no `embeddings` tensor".into()))?;
        let (rows, dim) = embeddings
            .dims2()
            .map_err(|e| tensor_err("embeddings", e))?;
        let embeddings: Vec<f32> = embeddings
            .to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1())
            .map_err(|e| tensor_err("embeddings", e))?;
        let vector =
            |name: &str| -> Result<Option<Tensor>, EmbedError> { Ok(tensors.get(name).cloned()) };
        let mappings = match vector("mappings")? {
            None => None,
            Some(t) => {
                let ids: Vec<i64> = t
                    .to_dtype(DType::I64)
                    .and_then(|t| t.flatten_all())
                    .and_then(|t| t.to_vec1())
                    .map_err(|e| tensor_err("mappings", e))?;
                let rows_ok = ids.iter().all(|&r| r >= 0 && (r as usize) < rows);
                if !rows_ok {
                    return Err(load_err(format!(
                        "model.safetensors: `mappings` points past the {rows} embedding rows"
                    )));
                }
                Some(ids.into_iter().map(|r| r as usize).collect())
            }
        };
        let weights = match vector("weights")? {
            None => None,
            Some(t) => Some(
                t.to_dtype(DType::F32)
                    .and_then(|t| t.flatten_all())
                    .and_then(|t| t.to_vec1())
                    .map_err(|e| tensor_err("weights", e))?,
            ),
        };
        let skip = ["[UNK]", "[PAD]", "<unk>", "<pad>"]
            .iter()
            .filter_map(|t| tokenizer.token_to_id(t))
            .collect();
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        Ok(StaticModel {
            tokenizer,
            embeddings,
            dim,
            mappings,
            weights,
            skip,
            model_id: format!("static/{hex}"),
        })
    }

    /// Names the model by its weights' checksum: a re-distilled model rebuilds the vectors.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if texts.len() < 64 || threads == 1 {
            return texts.iter().map(|t| self.embed_one(t)).collect();
        }
        let chunk = texts.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = texts
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|t| self.embed_one(t))
                            .collect::<Result<Vec<_>, _>>()
                    })
                })
                .collect();
            let mut out = Vec::with_capacity(texts.len());
            for h in handles {
                let part = h
                    .join()
                    .map_err(|_| EmbedError::Inference("an embedding thread panicked".into()))??;
                out.extend(part);
            }
            Ok(out)
        })
    }

    fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| EmbedError::Inference(e.to_string()))?;
        let mut sum = vec![0f32; self.dim];
        let mut count = 0usize;
        for &id in encoding.get_ids().iter().take(MAX_TOKENS) {
            if self.skip.contains(&id) {
                continue;
            }
            let row = match &self.mappings {
                Some(m) => match m.get(id as usize) {
                    Some(&r) => r,
                    None => continue,
                },
                None => id as usize,
            };
            let Some(vector) = self.embeddings.get(row * self.dim..(row + 1) * self.dim) else {
                continue;
            };
            let scale = self
                .weights
                .as_ref()
                .and_then(|w| w.get(id as usize))
                .copied()
                .unwrap_or(1.0);
            for (s, v) in sum.iter_mut().zip(vector) {
                *s += scale * v;
            }
            count += 1;
        }
        // The mean and the sum point the same way; only the direction survives normalising.
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if count > 0 && norm > 1e-12 {
            sum.iter_mut().for_each(|x| *x /= norm);
        }
        Ok(sum)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A Model2Vec folder with a word-level tokenizer and the given tensors.
    fn model(dir: &Path, tensors: HashMap<&str, Tensor>) {
        let tokenizer = serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [],
            "normalizer": { "type": "Lowercase" },
            "pre_tokenizer": { "type": "Whitespace" },
            "post_processor": null,
            "decoder": null,
            "model": {
                "type": "WordLevel",
                "vocab": { "[UNK]": 0, "cat": 1, "dog": 2, "car": 3 },
                "unk_token": "[UNK]"
            }
        });
        std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
        candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
    }

    fn table(rows: &[[f32; 3]]) -> Tensor {
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        Tensor::from_vec(flat, (rows.len(), 3), &Device::Cpu).unwrap()
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn a_text_is_the_normalised_mean_of_its_known_tokens() {
        let tmp = tempfile::tempdir().unwrap();
        let rows = [
            [9.0, 9.0, 9.0],
            [3.0, 0.0, 0.0],
            [0.0, 4.0, 0.0],
            [0.0, 0.0, 1.0],
        ];
        model(tmp.path(), HashMap::from([("embeddings", table(&rows))]));
        let m = StaticModel::load(tmp.path()).unwrap();
        assert_eq!(m.dim(), 3);
        assert!(m.model_id().starts_with("static/"));
        let v = m.embed(&["Cat", "cat dog", "zebra cat", "zebra"]).unwrap();
        assert!(close(&v[0], &[1.0, 0.0, 0.0]));
        assert!(close(&v[1], &[0.6, 0.8, 0.0]), "{:?}", v[1]);
        // The unknown token adds nothing.
        assert!(close(&v[2], &[1.0, 0.0, 0.0]));
        assert!(close(&v[3], &[0.0, 0.0, 0.0]));
        // Batches big enough to split over threads give the same vectors in order.
        let many: Vec<&str> = (0..200)
            .map(|i| if i % 2 == 0 { "dog" } else { "car" })
            .collect();
        let out = m.embed(&many).unwrap();
        assert!(close(&out[0], &[0.0, 1.0, 0.0]) && close(&out[199], &[0.0, 0.0, 1.0]));
    }

    #[test]
    fn quantised_vocabularies_map_tokens_to_rows_and_weight_them() {
        let tmp = tempfile::tempdir().unwrap();
        // Two rows shared by four tokens; `dog` weighs three times `cat`.
        let rows = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
        let mappings = Tensor::from_vec(vec![0i64, 0, 1, 1], 4, &Device::Cpu).unwrap();
        let weights = Tensor::from_vec(vec![1f32, 1.0, 3.0, 1.0], 4, &Device::Cpu).unwrap();
        model(
            tmp.path(),
            HashMap::from([
                ("embeddings", table(&rows)),
                ("mappings", mappings),
                ("weights", weights),
            ]),
        );
        let m = StaticModel::load(tmp.path()).unwrap();
        let v = m.embed(&["cat car"]).unwrap();
        let h = std::f32::consts::FRAC_1_SQRT_2;
        assert!(close(&v[0], &[h, h, 0.0]), "{:?}", v[0]);
        let v = m.embed(&["cat dog"]).unwrap();
        let n = 10f32.sqrt();
        assert!(close(&v[0], &[1.0 / n, 3.0 / n, 0.0]), "{:?}", v[0]);
    }

    #[test]
    fn missing_or_broken_folders_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let err = StaticModel::load(tmp.path()).err().unwrap().to_string();
        assert!(
            err.contains("tokenizer.json") && err.contains("distill"),
            "{err}"
        );
        model(
            tmp.path(),
            HashMap::from([("other", table(&[[1.0, 0.0, 0.0]]))]),
        );
        let err = StaticModel::load(tmp.path()).err().unwrap().to_string();
        assert!(err.contains("no `embeddings` tensor"), "{err}");
        let bad_map = Tensor::from_vec(vec![0i64, 7, 0, 0], 4, &Device::Cpu).unwrap();
        model(
            tmp.path(),
            HashMap::from([
                ("embeddings", table(&[[1.0, 0.0, 0.0]])),
                ("mappings", bad_map),
            ]),
        );
        let err = StaticModel::load(tmp.path()).err().unwrap().to_string();
        assert!(err.contains("mappings"), "{err}");
    }

    #[test]
    fn the_model_id_follows_the_weights() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        model(
            a.path(),
            HashMap::from([("embeddings", table(&[[1.0, 0.0, 0.0]; 4]))]),
        );
        model(
            b.path(),
            HashMap::from([("embeddings", table(&[[0.0, 1.0, 0.0]; 4]))]),
        );
        let (a, b) = (
            StaticModel::load(a.path()).unwrap(),
            StaticModel::load(b.path()).unwrap(),
        );
        assert_ne!(a.model_id(), b.model_id());
    }
}
