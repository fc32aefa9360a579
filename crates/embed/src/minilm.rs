//! all-MiniLM-L6-v2 in pure Rust: each text tokenized and encoded alone (no padding), by
//! Finder's integer encoder (`crate::encoder`), texts spread over the CPU's cores;
//! mean-pooled, L2-normalised.
//!
//! [`CandleMiniLm`] is the same model in f32 through candle's `BertModel`, batched and padded
//! to the longest text of each batch, kept as the reference the encoder is measured against
//! (`finder-bench embed-speed`, the tests).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::encoder::{Encoder, Scratch, Shape};
use crate::error::EmbedError;

/// Overrides how many threads embed a batch (default: every core).
pub const EMBED_THREADS_ENV: &str = "FINDER_EMBED_THREADS";

/// A window overlaps the one before it by its word pieces (`max_tokens` less `[CLS]` and
/// `[SEP]`) divided by this: a sentence cut at a window's end is read again in the next.
const WINDOW_OVERLAP_DIVISOR: usize = 8;

/// The most windows one text is embedded as; the rest of a longer text is not read. At the
/// default 256 tokens a window, 8 cover about 1,800 word pieces, more than a fragment of the
/// default 3,200 characters holds (a larger `index.fragment_max_chars` can pass it).
pub const MAX_WINDOWS: usize = 8;

/// The model folder's files, read and checked.
struct ModelFiles {
    config: Config,
    tokenizer: Tokenizer,
    weights: PathBuf,
}

impl ModelFiles {
    fn open(dir: &Path, max_tokens: usize) -> Result<ModelFiles, EmbedError> {
        let file = |name: &str| crate::error::model_file(dir, name, "");
        let config_text =
            std::fs::read_to_string(file("config.json")?).map_err(|source| EmbedError::Io {
                path: dir.join("config.json"),
                source,
            })?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| load_error(dir, format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(file("tokenizer.json")?)
            .map_err(|e| load_error(dir, format!("tokenizer.json: {e}")))?;
        // The file pads every input to 128 tokens; texts are encoded alone here (and padded
        // per batch by the reference), so padding is off and the truncation is Finder's.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| load_error(dir, format!("truncation: {e}")))?;
        Ok(ModelFiles {
            config,
            tokenizer,
            weights: file("model.safetensors")?,
        })
    }
}

fn load_error(dir: &Path, message: String) -> EmbedError {
    EmbedError::Load {
        path: dir.to_path_buf(),
        message,
    }
}

pub struct MiniLm {
    encoder: Encoder,
    tokenizer: Tokenizer,
    /// The same tokenizer without truncation, for [`MiniLm::embed_windows`]: tokenizers
    /// 0.23 stops tokenizing at the truncation length, so its overflowing windows end there
    /// too and cannot serve.
    whole: Tokenizer,
    max_tokens: usize,
    dim: usize,
    model_id: String,
    threads: usize,
}

impl MiniLm {
    /// Loads `model.safetensors`, `config.json` and `tokenizer.json` from `dir`; texts are
    /// truncated to `max_tokens` word pieces (the model was trained with 256).
    pub fn load(dir: &Path, max_tokens: usize) -> Result<MiniLm, EmbedError> {
        let files = ModelFiles::open(dir, max_tokens)?;
        let shape = Shape::from(&files.config);
        let encoder = Encoder::load(&files.weights, shape).map_err(|m| load_error(dir, m))?;
        if max_tokens > encoder.max_len() {
            return Err(load_error(
                dir,
                format!(
                    "embed.max_tokens = {max_tokens}; the model takes at most {}",
                    encoder.max_len()
                ),
            ));
        }
        let threads = std::env::var(EMBED_THREADS_ENV)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let mut whole = files.tokenizer.clone();
        whole
            .with_truncation(None)
            .map_err(|e| load_error(dir, format!("truncation: {e}")))?;
        Ok(MiniLm {
            encoder,
            tokenizer: files.tokenizer,
            whole,
            max_tokens,
            dim: shape.hidden,
            model_id: format!("minilm-l6-v2-i16/{max_tokens}"),
            threads,
        })
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Longest first, so the threads finish together.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        self.run(&order, |i| {
            let encoding = self
                .tokenizer
                .encode(texts[i], true)
                .map_err(|e| e.to_string())?;
            Ok(encoding.get_ids().to_vec())
        })
    }

    /// Embeds every window of each text: the first window is the text as [`MiniLm::embed`]
    /// reads it, each later one starts an eighth of a window before the one before it ends,
    /// and the last one ends with the text (a full window, not a scrap of its tail). Past
    /// [`MAX_WINDOWS`] the rest of the text is not read. One list of vectors per text, first
    /// window first.
    pub fn embed_windows(&self, texts: &[&str]) -> Result<Vec<Vec<Vec<f32>>>, EmbedError> {
        // Each window is `[CLS]`, a stretch of the text's word pieces, `[SEP]`.
        let span = self.max_tokens.saturating_sub(2).max(1);
        let overlap = span / WINDOW_OVERLAP_DIVISOR;
        let mut windows: Vec<(usize, Vec<u32>)> = Vec::new();
        for (t, text) in texts.iter().enumerate() {
            let encoding = self
                .whole
                .encode(*text, true)
                .map_err(|e| EmbedError::Inference(e.to_string()))?;
            let ids = encoding.get_ids();
            let [open, words @ .., close] = ids else {
                windows.push((t, ids.to_vec()));
                continue;
            };
            let mut start = 0;
            for _ in 0..MAX_WINDOWS {
                let end = (start + span).min(words.len());
                let mut window = Vec::with_capacity(end - start + 2);
                window.push(*open);
                window.extend_from_slice(&words[start..end]);
                window.push(*close);
                windows.push((t, window));
                if end == words.len() {
                    break;
                }
                start = (end - overlap).min(words.len().saturating_sub(span));
            }
        }
        // Longest first, so the threads finish together.
        let mut order: Vec<usize> = (0..windows.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(windows[i].1.len()));
        let vectors = self.run(&order, |i| Ok(windows[i].1.clone()))?;
        let mut out: Vec<Vec<Vec<f32>>> = vec![Vec::new(); texts.len()];
        for ((t, _), v) in windows.iter().zip(vectors) {
            out[*t].push(v);
        }
        Ok(out)
    }

    /// Embeds sequences of token ids given as they are (no special tokens added): what
    /// distillation feeds the model one vocabulary entry at a time.
    pub(crate) fn embed_ids(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let order: Vec<usize> = (0..sequences.len()).collect();
        self.run(&order, |i| Ok(sequences[i].clone()))
    }

    /// Token counts of `texts` as the model sees them (after truncation).
    pub fn tokens(&self, texts: &[&str]) -> Result<usize, EmbedError> {
        let mut n = 0;
        for t in texts {
            let e = self
                .tokenizer
                .encode(*t, true)
                .map_err(|e| EmbedError::Inference(e.to_string()))?;
            n += e.get_attention_mask().iter().filter(|&&m| m == 1).count();
        }
        Ok(n)
    }

    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Encodes item `order[n]` for every `n`, on up to `self.threads` threads that take the
    /// next item as they finish one; the vectors come back in item order.
    fn run(
        &self,
        order: &[usize],
        ids: impl Fn(usize) -> Result<Vec<u32>, String> + Sync,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let next = AtomicUsize::new(0);
        let work = || {
            let mut scratch = Scratch::default();
            let mut done = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(n) else { break };
                let vector = ids(i).and_then(|ids| self.encoder.embed(&ids, &mut scratch));
                done.push((i, vector));
            }
            done
        };
        let threads = self.threads.min(order.len()).max(1);
        let mut done = if threads == 1 {
            work()
        } else {
            std::thread::scope(|scope| {
                let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
                let mut done = work();
                for helper in helpers {
                    done.extend(helper.join().expect("an embedding thread panicked"));
                }
                done
            })
        };
        done.sort_unstable_by_key(|(i, _)| *i);
        done.into_iter()
            .map(|(_, v)| v.map_err(EmbedError::Inference))
            .collect()
    }
}

/// all-MiniLM-L6-v2 in f32 through candle's `BertModel`: the reference for [`MiniLm`].
pub struct CandleMiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
}

impl CandleMiniLm {
    pub fn load(dir: &Path, max_tokens: usize) -> Result<CandleMiniLm, EmbedError> {
        let ModelFiles {
            config,
            mut tokenizer,
            weights,
        } = ModelFiles::open(dir, max_tokens)?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        // Safety: the weights file is memory-mapped read-only; Finder never writes to it while
        // the model is loaded (installation writes a new folder and renames it into place).
        let vb =
            unsafe { VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, &Device::Cpu) }
                .map_err(|e| load_error(dir, format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| load_error(dir, format!("model.safetensors: {e}")))?;
        Ok(CandleMiniLm { model, tokenizer })
    }

    /// One padded batch through the model; the mask keeps padding out of the mean.
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
