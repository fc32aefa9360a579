//! all-MiniLM-L6-v2 in pure Rust (candle): batched, padded to the longest text of each batch,
//! mean-pooled over real tokens only, L2-normalised.
//!
//! The model's `tokenizer.json` pads every input to 128 tokens; pooling over that padding
//! would pollute every vector, so padding is switched to longest-in-batch and the attention
//! mask weights the mean.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::error::EmbedError;

pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    dim: usize,
    model_id: String,
}

impl MiniLm {
    /// Loads `model.safetensors`, `config.json` and `tokenizer.json` from `dir`; texts are
    /// truncated to `max_tokens` word pieces (the model was trained with 256).
    pub fn load(dir: &Path, max_tokens: usize) -> Result<MiniLm, EmbedError> {
        let file = |name: &str| crate::error::model_file(dir, name, "");
        let load_err = |message: String| EmbedError::Load {
            path: dir.to_path_buf(),
            message,
        };
        let config_text =
            std::fs::read_to_string(file("config.json")?).map_err(|source| EmbedError::Io {
                path: dir.join("config.json"),
                source,
            })?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| load_err(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(file("tokenizer.json")?)
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| load_err(format!("truncation: {e}")))?;
        let weights = file("model.safetensors")?;
        // Safety: the weights file is memory-mapped read-only; Finder never writes to it while
        // the model is loaded (installation writes a new folder and renames it into place).
        let vb =
            unsafe { VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, &Device::Cpu) }
                .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        let dim = config.hidden_size;
        Ok(MiniLm {
            model,
            tokenizer,
            dim,
            model_id: format!("minilm-l6-v2/{max_tokens}"),
        })
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let fail = |e: &dyn std::fmt::Display| EmbedError::Inference(e.to_string());
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| fail(&e))?;
        let rows = encodings.len();
        let cols = encodings[0].get_ids().len();
        let mut ids = Vec::with_capacity(rows * cols);
        let mut mask = Vec::with_capacity(rows * cols);
        for e in &encodings {
            ids.extend(e.get_ids().iter().map(|&x| x as i64));
            mask.extend(e.get_attention_mask().iter().map(|&x| x as i64));
        }
        self.forward(ids, mask, rows, cols)
    }

    /// Embeds sequences of token ids given as they are (no special tokens added), all of the
    /// same length: what distillation feeds the model one vocabulary entry at a time.
    pub(crate) fn embed_ids(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let rows = sequences.len();
        let Some(cols) = sequences.first().map(Vec::len) else {
            return Ok(Vec::new());
        };
        if sequences.iter().any(|s| s.len() != cols) {
            return Err(EmbedError::Inference(
                "token sequences of one batch must have one length".into(),
            ));
        }
        let ids = sequences.iter().flatten().map(|&x| x as i64).collect();
        self.forward(ids, vec![1; rows * cols], rows, cols)
    }

    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Runs the transformer over a `rows × cols` batch and mean-pools over the mask.
    fn forward(
        &self,
        ids: Vec<i64>,
        mask: Vec<i64>,
        rows: usize,
        cols: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let fail = |e: &dyn std::fmt::Display| EmbedError::Inference(e.to_string());
        let device = Device::Cpu;
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (rows, cols), &device)?;
            let mask = Tensor::from_vec(mask, (rows, cols), &device)?;
            let types = ids.zeros_like()?;
            let hidden = self.model.forward(&ids, &types, Some(&mask))?;
            let mask_f = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask_f)?.sum(1)?;
            let counts = mask_f.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        run().map_err(|e| fail(&e))
    }
}
