//! A BERT encoder for sentence embeddings on the CPU: integer linear layers, float
//! attention and norms, one sequence at a time with no padding, sequences spread over
//! threads.
//!
//! Why not candle's `BertModel`: see docs/perf/int16-encoder.md. The f32 reference stays as
//! `CandleMiniLm`, for the tests and the benchmark that compare the two.

mod float;
mod linear;

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use float::Attention;
pub use linear::kernel_rate;
use linear::{Kernel, QLinear, Quantized};

/// The BERT shape this encoder runs (from `config.json`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub hidden: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub eps: f32,
}

impl From<&candle_transformers::models::bert::Config> for Shape {
    fn from(c: &candle_transformers::models::bert::Config) -> Shape {
        Shape {
            hidden: c.hidden_size,
            heads: c.num_attention_heads,
            intermediate: c.intermediate_size,
            layers: c.num_hidden_layers,
            eps: c.layer_norm_eps as f32,
        }
    }
}

struct Layer {
    /// Queries, keys and values in one product: `3·hidden` outputs.
    qkv: QLinear,
    attn_out: QLinear,
    attn_norm: (Vec<f32>, Vec<f32>),
    up: QLinear,
    down: QLinear,
    out_norm: (Vec<f32>, Vec<f32>),
}

pub(crate) struct Encoder {
    shape: Shape,
    words: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embed_norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
    kernel: Kernel,
}

/// Buffers one thread reuses from sequence to sequence.
#[derive(Default)]
pub(crate) struct Scratch {
    x: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    up: Vec<f32>,
    q: Quantized,
    attention: Attention,
}

impl Encoder {
    /// Builds the encoder from a BERT checkpoint's tensors (names as Hugging Face writes
    /// them, with or without a `bert.` prefix).
    pub(crate) fn from_tensors(
        tensors: &HashMap<String, Tensor>,
        shape: Shape,
    ) -> Result<Encoder, String> {
        let head = (shape.heads > 0 && shape.hidden.is_multiple_of(shape.heads))
            .then(|| shape.hidden / shape.heads)
            .filter(|hd| float::HEAD_DIMS.contains(hd));
        if head.is_none() {
            return Err(format!(
                "config.json: hidden_size / num_attention_heads must be one of {:?}; the \
                 encoder is built for those head widths",
                float::HEAD_DIMS
            ));
        }
        let get = |name: &str| -> Result<Vec<f32>, String> {
            let t = tensors
                .get(name)
                .or_else(|| tensors.get(&format!("bert.{name}")))
                .ok_or_else(|| format!("no tensor {name}"))?;
            t.to_dtype(candle_core::DType::F32)
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| format!("{name}: {e}"))
        };
        let h = shape.hidden;
        let sized = |name: &str, len: usize| -> Result<Vec<f32>, String> {
            let v = get(name)?;
            if v.len() == len {
                Ok(v)
            } else {
                Err(format!("{name} has {} values, expected {len}", v.len()))
            }
        };
        let linear = |name: &str, n: usize, k: usize| -> Result<QLinear, String> {
            let w = sized(&format!("{name}.weight"), n * k)?;
            let b = sized(&format!("{name}.bias"), n)?;
            Ok(QLinear::new(&w, &b, n, k))
        };
        let norm = |name: &str| -> Result<(Vec<f32>, Vec<f32>), String> {
            Ok((
                sized(&format!("{name}.weight"), h)?,
                sized(&format!("{name}.bias"), h)?,
            ))
        };
        let mut layers = Vec::with_capacity(shape.layers);
        for i in 0..shape.layers {
            let p = format!("encoder.layer.{i}");
            let mut w = Vec::with_capacity(3 * h * h);
            let mut b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                w.extend(sized(&format!("{p}.attention.self.{part}.weight"), h * h)?);
                b.extend(sized(&format!("{p}.attention.self.{part}.bias"), h)?);
            }
            layers.push(Layer {
                qkv: QLinear::new(&w, &b, 3 * h, h),
                attn_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                attn_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                up: linear(&format!("{p}.intermediate.dense"), shape.intermediate, h)?,
                down: linear(&format!("{p}.output.dense"), h, shape.intermediate)?,
                out_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        let words = get("embeddings.word_embeddings.weight")?;
        let positions = get("embeddings.position_embeddings.weight")?;
        if words.len() % h != 0 || positions.len() % h != 0 {
            return Err("embedding tables are not a multiple of hidden_size wide".into());
        }
        Ok(Encoder {
            shape,
            words,
            positions,
            token_type: sized("embeddings.token_type_embeddings.weight", 2 * h)?,
            embed_norm: norm("embeddings.LayerNorm")?,
            layers,
            kernel: Kernel::detect(),
        })
    }

    /// Loads `model.safetensors`.
    pub(crate) fn load(weights: &std::path::Path, shape: Shape) -> Result<Encoder, String> {
        let tensors = candle_core::safetensors::load(weights, &Device::Cpu)
            .map_err(|e| format!("model.safetensors: {e}"))?;
        Encoder::from_tensors(&tensors, shape)
    }

    /// The longest sequence the position table allows.
    pub(crate) fn max_len(&self) -> usize {
        self.positions.len() / self.shape.hidden
    }

    /// The mean of the last layer's token vectors, L2-normalised.
    pub(crate) fn embed(&self, ids: &[u32], scratch: &mut Scratch) -> Result<Vec<f32>, String> {
        match self.kernel {
            #[cfg(target_arch = "x86_64")]
            // Safety: `Kernel::Vnni` is chosen only when the CPU has these features.
            Kernel::Vnni => unsafe { self.embed_avx512(ids, scratch) },
            #[cfg(target_arch = "x86_64")]
            // Safety: checked here.
            Kernel::Avx2 | Kernel::Portable
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma") =>
            unsafe { self.embed_avx2(ids, scratch) },
            _ => self.embed_in(ids, scratch),
        }
    }

    /// The same code compiled for AVX-512, so the float loops use its registers too.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vnni,avx2,fma")]
    unsafe fn embed_avx512(&self, ids: &[u32], scratch: &mut Scratch) -> Result<Vec<f32>, String> {
        self.embed_in(ids, scratch)
    }

    /// The same code for CPUs with AVX2 and FMA but no VNNI.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn embed_avx2(&self, ids: &[u32], scratch: &mut Scratch) -> Result<Vec<f32>, String> {
        self.embed_in(ids, scratch)
    }

    #[inline(always)]
    fn embed_in(&self, ids: &[u32], s: &mut Scratch) -> Result<Vec<f32>, String> {
        let Shape {
            hidden: h,
            heads,
            eps,
            ..
        } = self.shape;
        let len = ids.len();
        if len == 0 {
            return Err("no tokens to embed".into());
        }
        if len > self.max_len() {
            return Err(format!(
                "{len} tokens; the model takes at most {}",
                self.max_len()
            ));
        }
        let vocab = self.words.len() / h;
        s.x.clear();
        for (t, &id) in ids.iter().enumerate() {
            let id = id as usize;
            if id >= vocab {
                return Err(format!("token id {id} is outside the vocabulary ({vocab})"));
            }
            let word = &self.words[id * h..(id + 1) * h];
            let pos = &self.positions[t * h..(t + 1) * h];
            s.x.extend(
                word.iter()
                    .zip(pos)
                    .zip(&self.token_type[..h])
                    .map(|((w, p), y)| w + p + y),
            );
        }
        float::layer_norm(&mut s.x, &self.embed_norm.0, &self.embed_norm.1, eps);
        for layer in &self.layers {
            layer
                .qkv
                .forward(self.kernel, &s.x, h, &mut s.q, &mut s.qkv);
            s.attention.run(&s.qkv, len, h, heads, &mut s.ctx);
            layer
                .attn_out
                .forward(self.kernel, &s.ctx, h, &mut s.q, &mut s.tmp);
            float::add(&mut s.x, &s.tmp);
            float::layer_norm(&mut s.x, &layer.attn_norm.0, &layer.attn_norm.1, eps);
            layer.up.forward(self.kernel, &s.x, h, &mut s.q, &mut s.up);
            float::gelu(&mut s.up);
            let inner = layer.up.outputs();
            layer
                .down
                .forward(self.kernel, &s.up, inner, &mut s.q, &mut s.tmp);
            float::add(&mut s.x, &s.tmp);
            float::layer_norm(&mut s.x, &layer.out_norm.0, &layer.out_norm.1, eps);
        }
        let mut mean = vec![0f32; h];
        for row in s.x.chunks_exact(h) {
            float::add(&mut mean, row);
        }
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        for v in &mut mean {
            *v /= norm;
        }
        Ok(mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code path (the detected kernel: VNNI with AVX-512 floats, or AVX2 with AVX2 floats
    /// (baseline floats without FMA); the portable kernel with AVX2 floats; the portable kernel
    /// with baseline floats) gives the same bits on the real model.
    #[test]
    fn every_path_gives_the_same_vector() {
        let dir = crate::default_model_dir();
        if crate::verify_minilm(&dir).is_err() {
            eprintln!("skipping: the model is not installed");
            return;
        }
        let config: candle_transformers::models::bert::Config =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let mut encoder =
            Encoder::load(&dir.join("model.safetensors"), Shape::from(&config)).unwrap();
        // [CLS] then a run of ordinary word pieces, then [SEP]: 40 tokens (more than one
        // block of keys, not a whole number of them).
        let ids: Vec<u32> = std::iter::once(101)
            .chain((0..38).map(|i| 2000 + i * 37))
            .chain(std::iter::once(102))
            .collect();
        let mut scratch = Scratch::default();
        let detected = encoder.embed(&ids, &mut scratch).unwrap();
        encoder.kernel = Kernel::Portable;
        let portable = encoder.embed(&ids, &mut scratch).unwrap();
        let baseline = encoder.embed_in(&ids, &mut scratch).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&detected),
            bits(&portable),
            "the detected kernel and the portable one differ"
        );
        assert_eq!(
            bits(&portable),
            bits(&baseline),
            "AVX2 and baseline floats differ"
        );
    }
}
