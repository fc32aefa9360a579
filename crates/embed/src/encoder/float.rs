//! The float parts of a BERT layer: layer norm, GELU, and attention over one sequence.
//!
//! Written as plain loops over independent outputs, so the compiler vectorises them without
//! reordering any sum, and with fused multiply-adds only where `mul_add` says so (exactly
//! rounded everywhere, in hardware or not): a result has the same bits on every CPU.

/// `x ← (x − mean) / √(var + eps) · gamma + beta`, per row of `gamma.len()` values.
#[inline(always)]
pub(crate) fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = gamma.len();
    for row in x.chunks_exact_mut(width) {
        let mean = sum(row) / width as f32;
        for v in row.iter_mut() {
            *v -= mean;
        }
        let var = sum_squares(row) / width as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = *v * inv * g + b;
        }
    }
}

/// Lanes of the partial sums and maxima below: wide enough for a 512-bit register, and a
/// fixed order of additions on every CPU.
const LANES: usize = 16;

/// Folds `x` with `step` into [`LANES`] interleaved accumulators started at `init`, merges
/// them in order, then merges in the fold of the tail: one fixed order on every CPU.
#[inline(always)]
fn fold_lanes(
    x: &[f32],
    init: f32,
    step: impl Fn(f32, f32) -> f32,
    merge: impl Fn(f32, f32) -> f32,
) -> f32 {
    let mut lanes = [init; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l = step(*l, v);
        }
    }
    let head = lanes.into_iter().fold(init, &merge);
    merge(head, tail.iter().fold(init, |a, &v| step(a, v)))
}

/// `Σ x`.
#[inline(always)]
pub(crate) fn sum(x: &[f32]) -> f32 {
    fold_lanes(x, 0.0, |a, v| a + v, |a, b| a + b)
}

/// `Σ x²`.
#[inline(always)]
pub(crate) fn sum_squares(x: &[f32]) -> f32 {
    fold_lanes(x, 0.0, |a, v| a + v * v, |a, b| a + b)
}

/// `max |x|` (0 for an empty slice).
#[inline(always)]
pub(crate) fn max_abs(x: &[f32]) -> f32 {
    fold_lanes(x, 0.0, |a, v| a.max(v.abs()), f32::max)
}

/// `max x` (−∞ for an empty slice).
#[inline(always)]
fn max(x: &[f32]) -> f32 {
    fold_lanes(x, f32::NEG_INFINITY, f32::max, f32::max)
}

/// `x ← x + y`.
#[inline(always)]
pub(crate) fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// BERT's exact GELU, `x/2 · (1 + erf(x/√2))`, with an erf good to 1.5e-7.
#[inline(always)]
pub(crate) fn gelu(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Abramowitz and Stegun 7.1.26, branch-free.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// `e^x` for x ≤ 0 (softmax after subtracting the maximum, erf's Gaussian): a Cody–Waite
/// split and a degree-6 polynomial, good to a few ulps; `x < −87` is taken as −87 (e⁻⁸⁷ ≈ 1.6e−38).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 × 2²³: adding it rounds to an integer
    let x = x.max(-87.0);
    let n = (x * std::f32::consts::LOG2_E + MAGIC) - MAGIC;
    let r = (x - n * 0.693_145_75) - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (0.166_666_67
                    + r * (0.041_666_668 + r * (0.008_333_334 + r * 0.001_388_889)))));
    // `n + MAGIC` holds n in its low mantissa bits: 2ⁿ from integer operations alone, which
    // vectorise (a float-to-int cast does not, for its saturation).
    let n_bits = (n + MAGIC).to_bits().wrapping_sub(MAGIC.to_bits());
    let scale = f32::from_bits(n_bits.wrapping_add(127) << 23);
    p * scale
}

/// Head widths the attention is compiled for (BERT small and MiniLM: 32; base: 64).
pub(crate) const HEAD_DIMS: [usize; 2] = [32, 64];

/// Scratch of one sequence's attention.
#[derive(Default)]
pub(crate) struct Attention {
    /// One head's keys in blocks of [`LANES`] tokens, each block `head_dim × LANES`
    /// (transposed), zeros past the sequence.
    keys: Vec<f32>,
    /// One head's values, `len × head_dim`.
    values: Vec<f32>,
    scores: Vec<f32>,
}

impl Attention {
    /// Multi-head self-attention over `len` tokens with no mask (a sequence is never padded).
    /// `qkv` is `len × 3·width` (queries, keys, values side by side); `out` becomes
    /// `len × width`, the heads side by side. The head width must be one of [`HEAD_DIMS`].
    #[inline(always)]
    pub(crate) fn run(
        &mut self,
        qkv: &[f32],
        len: usize,
        width: usize,
        heads: usize,
        out: &mut Vec<f32>,
    ) {
        out.clear();
        out.resize(len * width, 0.0);
        match width / heads {
            32 => self.heads::<32>(qkv, len, width, heads, out),
            64 => self.heads::<64>(qkv, len, width, heads, out),
            hd => unreachable!("head width {hd} is checked at load"),
        }
    }

    #[inline(always)]
    fn heads<const HD: usize>(
        &mut self,
        qkv: &[f32],
        len: usize,
        width: usize,
        heads: usize,
        out: &mut [f32],
    ) {
        let stride = 3 * width;
        let scale = 1.0 / (HD as f32).sqrt();
        let blocks = len.div_ceil(LANES);
        self.keys.clear();
        self.keys.resize(blocks * HD * LANES, 0.0);
        self.values.clear();
        self.values.resize(len * HD, 0.0);
        self.scores.clear();
        self.scores.resize(blocks * LANES, 0.0);
        for h in 0..heads {
            let (q0, k0, v0) = (h * HD, width + h * HD, 2 * width + h * HD);
            for (t, token) in qkv.chunks_exact(stride).enumerate() {
                let (b, lane) = (t / LANES, t % LANES);
                let block = &mut self.keys[b * HD * LANES..(b + 1) * HD * LANES];
                for (d, &k) in token[k0..k0 + HD].iter().enumerate() {
                    block[d * LANES + lane] = k;
                }
                self.values[t * HD..(t + 1) * HD].copy_from_slice(&token[v0..v0 + HD]);
            }
            for (i, token) in qkv.chunks_exact(stride).enumerate() {
                let q: &[f32; HD] = token[q0..q0 + HD].try_into().expect("HD wide");
                // A block of keys at a time, its sums held in registers.
                let blocks = self.keys.chunks_exact(HD * LANES);
                for (block, scores) in blocks.zip(self.scores.chunks_exact_mut(LANES)) {
                    let mut acc = [0f32; LANES];
                    for (&qd, keys) in q.iter().zip(block.chunks_exact(LANES)) {
                        for (a, &k) in acc.iter_mut().zip(keys) {
                            *a = qd.mul_add(k, *a);
                        }
                    }
                    scores.copy_from_slice(&acc);
                }
                let scores = &mut self.scores[..len];
                let top = max(scores);
                for s in scores.iter_mut() {
                    *s = exp((*s - top) * scale);
                }
                let inv = 1.0 / sum(scores);
                let mut acc = [0f32; HD];
                for (&p, v) in scores.iter().zip(self.values.chunks_exact(HD)) {
                    for (a, &x) in acc.iter_mut().zip(v) {
                        *a = p.mul_add(x, *a);
                    }
                }
                let ctx = &mut out[i * width + h * HD..i * width + (h + 1) * HD];
                for (c, a) in ctx.iter_mut().zip(acc) {
                    *c = a * inv;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_match_the_library() {
        for i in 0..=2000 {
            let x = -i as f32 * 0.05;
            let (got, want) = (exp(x), x.exp());
            assert!(
                (got - want).abs() <= want * 4e-7 + 1e-37,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert_eq!(exp(-100.0), exp(-87.0));
        // erf against its series at small x and known values elsewhere.
        for (x, want) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (-1.0, -0.842_700_8),
        ] {
            assert!((erf(x) - want).abs() < 3e-7, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn attention_of_one_token_is_its_value() {
        // One token attends only to itself: the output is its value vector.
        let width = 64;
        let qkv: Vec<f32> = (0..3 * width).map(|i| i as f32 * 0.01).collect();
        let mut out = Vec::new();
        Attention::default().run(&qkv, 1, width, 2, &mut out);
        for (a, b) in out.iter().zip(&qkv[2 * width..]) {
            assert!((a - b).abs() < 1e-6, "{out:?}");
        }
    }

    #[test]
    fn layer_norm_centres_and_scales() {
        let mut x = [1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut x, &[1.0; 4], &[0.0; 4], 1e-12);
        let mean: f32 = x.iter().sum::<f32>() / 4.0;
        let var: f32 = x.iter().map(|v| v * v).sum::<f32>() / 4.0;
        assert!(mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-5, "{x:?}");
    }
}
