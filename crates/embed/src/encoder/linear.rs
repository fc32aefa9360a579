//! Linear layers in integers: weights quantized once per output column to ±1,023,
//! activations per row (token) to 16-bit integers as they arrive, products summed exactly in
//! `i32`.
//!
//! Three kernels compute the same integers: one with AVX-512 VNNI (`vpdpwssd`, 32 products an
//! instruction, twice an f32 FMA's), one with AVX2 (`vpmaddwd`, 16) and a portable one. The
//! float epilogue is the same sequence of operations in all three, so a vector does not depend
//! on which kernel ran.
//!
//! Both operands are symmetric (`x ≈ s·q`). A row's integer range is as wide as the layer
//! allows without any sum overflowing `i32` (`k · 1023 · range < 2³¹`): ±1,366 for a
//! 1,536-input layer, ±5,466 for 384 inputs. That split of the 31 bits between weights and
//! activations kept the vectors closest to f32; eight-bit activations (`vpdpbusd`, twice the
//! products) lost too much on BERT's outlier dimensions. docs/perf/int16-encoder.md has the
//! measurements.

/// Output columns a packed block holds: one 512-bit register of `i32` sums (two 256-bit ones
/// for AVX2).
pub(crate) const LANES: usize = 16;
/// Inputs one `vpdpwssd` lane sums.
const GROUP: usize = 2;
/// The weights' integer range.
const WEIGHT_MAX: i32 = 1023;

/// Which integer kernel runs; chosen once from the CPU's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    Vnni,
    Avx2,
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub(crate) fn detect() -> Kernel {
        [Kernel::Vnni, Kernel::Avx2]
            .into_iter()
            .find(|k| k.runs_here())
            .unwrap_or(Kernel::Portable)
    }

    /// Whether this CPU has the features the kernel needs (the standard library caches the
    /// answers, so asking costs a load).
    pub(crate) fn runs_here(self) -> bool {
        match self {
            Kernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// `y = x Wᵀ + b` with `W` (`n × k`) quantized.
pub(crate) struct QLinear {
    n: usize,
    /// Inputs as given (before the padding below).
    inputs: usize,
    /// `k` rounded up to a multiple of [`GROUP`]; the padding holds zero weights.
    k: usize,
    /// The activations' integer range for this `k`.
    range: f32,
    /// Blocks of [`LANES`] output columns, each `[k / GROUP][LANES][GROUP]`: one load feeds
    /// one `vpdpwssd` for 16 columns.
    packed: Vec<i16>,
    /// Per output column: the dequantizing scale.
    scales: Vec<f32>,
    bias: Vec<f32>,
}

impl QLinear {
    /// Quantizes `weight` (`n` rows of `k`, row-major, as PyTorch stores a linear layer).
    pub(crate) fn new(weight: &[f32], bias: &[f32], n: usize, k: usize) -> QLinear {
        assert_eq!(weight.len(), n * k, "weight is n × k");
        assert_eq!(bias.len(), n, "one bias per output");
        let kp = k.div_ceil(GROUP) * GROUP;
        let np = n.div_ceil(LANES) * LANES;
        let mut packed = vec![0i16; np * kp];
        let mut scales = vec![1f32; np];
        for (j, row) in weight.chunks_exact(k).enumerate() {
            let max = row.iter().fold(0f32, |m, &w| m.max(w.abs()));
            let scale = if max > 0.0 {
                max / WEIGHT_MAX as f32
            } else {
                1.0
            };
            let (block, lane) = (j / LANES, j % LANES);
            for (i, &w) in row.iter().enumerate() {
                let q = (w / scale)
                    .round()
                    .clamp(-WEIGHT_MAX as f32, WEIGHT_MAX as f32);
                let at =
                    block * LANES * kp + (i / GROUP) * LANES * GROUP + lane * GROUP + i % GROUP;
                packed[at] = q as i16;
            }
            scales[j] = scale;
        }
        let mut padded_bias = bias.to_vec();
        padded_bias.resize(np, 0.0);
        let range = (i32::MAX / (kp.max(1) as i32 * WEIGHT_MAX)).min(i16::MAX as i32);
        QLinear {
            n,
            inputs: k,
            k: kp,
            range: range as f32,
            packed,
            scales,
            bias: padded_bias,
        }
    }

    pub(crate) fn outputs(&self) -> usize {
        self.n
    }

    /// `out` (`rows × n`) = `x` (`rows × inputs`) through the layer.
    #[inline(always)]
    pub(crate) fn forward(
        &self,
        kernel: Kernel,
        x: &[f32],
        inputs: usize,
        q: &mut Quantized,
        out: &mut Vec<f32>,
    ) {
        assert_eq!(
            inputs, self.inputs,
            "a {}-input layer given rows of {inputs}",
            self.inputs
        );
        q.quantize(x, inputs, self.k, self.range);
        let rows = q.scales.len();
        let np = self.scales.len();
        out.clear();
        out.resize(rows * np, 0.0);
        match kernel {
            #[cfg(target_arch = "x86_64")]
            // Safety: the CPU's features are checked here.
            Kernel::Vnni if kernel.runs_here() => unsafe { vnni::gemm(self, q, out) },
            #[cfg(target_arch = "x86_64")]
            // Safety: as above.
            Kernel::Avx2 if kernel.runs_here() => unsafe { avx2::gemm(self, q, out) },
            _ => portable_gemm(self, q, out),
        }
        if np != self.n {
            // Drop the padding columns, row by row.
            for r in 0..rows {
                out.copy_within(r * np..r * np + self.n, r * self.n);
            }
            out.truncate(rows * self.n);
        }
    }

    /// The float result of one output from its integer sum: the same operations in every
    /// kernel.
    #[inline(always)]
    fn dequantize(&self, sum: i32, row_scale: f32, j: usize) -> f32 {
        sum as f32 * row_scale * self.scales[j] + self.bias[j]
    }
}

/// Activations of one call, quantized per row.
#[derive(Default)]
pub(crate) struct Quantized {
    /// `rows × k` integers; the padding past the inputs is 0.
    data: Vec<i16>,
    scales: Vec<f32>,
}

impl Quantized {
    #[inline(always)]
    fn quantize(&mut self, x: &[f32], inputs: usize, k: usize, range: f32) {
        let rows = x.len() / inputs;
        self.data.clear();
        self.data.resize(rows * k, 0);
        self.scales.clear();
        for (r, row) in x.chunks_exact(inputs).enumerate() {
            let max = super::float::max_abs(row);
            let scale = if max > 0.0 { max / range } else { 1.0 };
            let inv = 1.0 / scale;
            for (d, &v) in self.data[r * k..r * k + inputs].iter_mut().zip(row) {
                *d = round_i16((v * inv).clamp(-range, range));
            }
            self.scales.push(scale);
        }
    }
}

/// `round(x)` for |x| ≤ 32,767, half to even: adding 1.5 × 2²³ leaves the rounded integer in
/// the low mantissa bits. Integer operations only, so it vectorises (a float-to-int cast does
/// not, for its saturation).
#[inline(always)]
fn round_i16(x: f32) -> i16 {
    const MAGIC: f32 = 12_582_912.0;
    ((x + MAGIC).to_bits().wrapping_sub(MAGIC.to_bits())) as i16
}

fn portable_gemm(w: &QLinear, q: &Quantized, out: &mut [f32]) {
    let (k, np) = (w.k, w.scales.len());
    for (r, &row_scale) in q.scales.iter().enumerate() {
        let a = &q.data[r * k..(r + 1) * k];
        for (block, b) in w.packed.chunks_exact(LANES * k).enumerate() {
            let mut acc = [0i32; LANES];
            for (av, bv) in a.chunks_exact(GROUP).zip(b.chunks_exact(LANES * GROUP)) {
                for (sum, wv) in acc.iter_mut().zip(bv.chunks_exact(GROUP)) {
                    // The sums cannot overflow (`QLinear::new` sizes the range for it); wrapping
                    // operations let the loop vectorise where overflow checks are on.
                    for (&x, &y) in av.iter().zip(wv) {
                        *sum = sum.wrapping_add(i32::from(x).wrapping_mul(i32::from(y)));
                    }
                }
            }
            for (lane, &sum) in acc.iter().enumerate() {
                let j = block * LANES + lane;
                out[r * np + j] = w.dequantize(sum, row_scale, j);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::*;

    use super::{QLinear, Quantized, GROUP, LANES};

    /// Rows a tile computes at once, and blocks of 16 columns: 6 × 4 accumulators.
    const ROWS: usize = 6;
    const BLOCKS: usize = 4;

    /// # Safety
    /// The CPU must have AVX-512F and AVX-512 VNNI.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn gemm(w: &QLinear, q: &Quantized, out: &mut [f32]) {
        let blocks = w.scales.len() / LANES;
        let rows = q.scales.len();
        let mut b0 = 0;
        while b0 < blocks {
            let nb = (blocks - b0).min(BLOCKS);
            let mut r0 = 0;
            while r0 < rows {
                let nr = (rows - r0).min(ROWS);
                // Const shapes keep the accumulators in registers.
                match (nr, nb) {
                    (ROWS, BLOCKS) => tile::<ROWS, BLOCKS>(w, q, out, r0, b0),
                    (_, BLOCKS) => edge_rows::<BLOCKS>(w, q, out, r0, nr, b0),
                    (_, 3) => edge_rows::<3>(w, q, out, r0, nr, b0),
                    (_, 2) => edge_rows::<2>(w, q, out, r0, nr, b0),
                    _ => edge_rows::<1>(w, q, out, r0, nr, b0),
                }
                r0 += nr;
            }
            b0 += nb;
        }
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn edge_rows<const C: usize>(
        w: &QLinear,
        q: &Quantized,
        out: &mut [f32],
        r0: usize,
        nr: usize,
        b0: usize,
    ) {
        match nr {
            6 => tile::<6, C>(w, q, out, r0, b0),
            5 => tile::<5, C>(w, q, out, r0, b0),
            4 => tile::<4, C>(w, q, out, r0, b0),
            3 => tile::<3, C>(w, q, out, r0, b0),
            2 => tile::<2, C>(w, q, out, r0, b0),
            _ => tile::<1, C>(w, q, out, r0, b0),
        }
    }

    /// Rows `r0..r0 + R` × column blocks `b0..b0 + C`.
    #[target_feature(enable = "avx512f,avx512vnni")]
    #[inline]
    unsafe fn tile<const R: usize, const C: usize>(
        w: &QLinear,
        q: &Quantized,
        out: &mut [f32],
        r0: usize,
        b0: usize,
    ) {
        let k = w.k;
        let steps = k / GROUP;
        let block_len = LANES * k;
        let a = q.data.as_ptr().add(r0 * k);
        let b = w.packed.as_ptr().add(b0 * block_len);
        let mut acc = [[_mm512_setzero_si512(); C]; R];
        for s in 0..steps {
            let mut bv = [_mm512_setzero_si512(); C];
            for (c, v) in bv.iter_mut().enumerate() {
                *v = _mm512_loadu_si512(b.add(c * block_len + s * LANES * GROUP).cast());
            }
            for (r, row) in acc.iter_mut().enumerate() {
                // Two consecutive activations, broadcast to every lane.
                let pair = (a.add(r * k + s * GROUP) as *const i32).read_unaligned();
                let av = _mm512_set1_epi32(pair);
                for (c, sum) in row.iter_mut().enumerate() {
                    *sum = _mm512_dpwssd_epi32(*sum, av, bv[c]);
                }
            }
        }
        // The same operations as `QLinear::dequantize`, 16 columns at a time.
        let np = w.scales.len();
        for (r, row) in acc.iter().enumerate() {
            let row_scale = _mm512_set1_ps(q.scales[r0 + r]);
            for (c, sum) in row.iter().enumerate() {
                let j = (b0 + c) * LANES;
                let x = _mm512_mul_ps(_mm512_cvtepi32_ps(*sum), row_scale);
                let x = _mm512_mul_ps(x, _mm512_loadu_ps(w.scales.as_ptr().add(j)));
                let y = _mm512_add_ps(x, _mm512_loadu_ps(w.bias.as_ptr().add(j)));
                _mm512_storeu_ps(out.as_mut_ptr().add((r0 + r) * np + j), y);
            }
        }
    }
}

/// The same integers with AVX2's `vpmaddwd`: two products summed into each `i32` lane, then
/// added to the sum; a block of 16 columns is two 256-bit registers.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{QLinear, Quantized, GROUP, LANES};

    // A step reads one `i32` pair of activations and two registers of weights.
    const _: () = assert!(GROUP == 2 && LANES == 16);

    /// Rows a tile computes at once against one block of 16 columns: 12 accumulators, two
    /// weight registers and the broadcast activations fill AVX2's 16.
    const ROWS: usize = 6;

    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gemm(w: &QLinear, q: &Quantized, out: &mut [f32]) {
        let blocks = w.scales.len() / LANES;
        let rows = q.scales.len();
        for block in 0..blocks {
            let mut r0 = 0;
            while r0 < rows {
                let nr = (rows - r0).min(ROWS);
                // Const shapes keep the accumulators in registers.
                match nr {
                    6 => tile::<6>(w, q, out, r0, block),
                    5 => tile::<5>(w, q, out, r0, block),
                    4 => tile::<4>(w, q, out, r0, block),
                    3 => tile::<3>(w, q, out, r0, block),
                    2 => tile::<2>(w, q, out, r0, block),
                    _ => tile::<1>(w, q, out, r0, block),
                }
                r0 += nr;
            }
        }
    }

    /// Rows `r0..r0 + R` × the 16 columns of `block`.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn tile<const R: usize>(
        w: &QLinear,
        q: &Quantized,
        out: &mut [f32],
        r0: usize,
        block: usize,
    ) {
        let k = w.k;
        let steps = k / GROUP;
        let a = q.data.as_ptr().add(r0 * k);
        let b = w.packed.as_ptr().add(block * LANES * k);
        let mut acc = [[_mm256_setzero_si256(); 2]; R];
        for s in 0..steps {
            let step = b.add(s * LANES * GROUP);
            let lo = _mm256_loadu_si256(step.cast());
            let hi = _mm256_loadu_si256(step.add(LANES).cast());
            for (r, sum) in acc.iter_mut().enumerate() {
                // Two consecutive activations, broadcast to every lane.
                let pair = (a.add(r * k + s * GROUP) as *const i32).read_unaligned();
                let av = _mm256_set1_epi32(pair);
                sum[0] = _mm256_add_epi32(sum[0], _mm256_madd_epi16(av, lo));
                sum[1] = _mm256_add_epi32(sum[1], _mm256_madd_epi16(av, hi));
            }
        }
        // The same operations as `QLinear::dequantize`, 8 columns at a time.
        let np = w.scales.len();
        for (r, sum) in acc.iter().enumerate() {
            let row_scale = _mm256_set1_ps(q.scales[r0 + r]);
            for (half, &sum) in sum.iter().enumerate() {
                let j = block * LANES + half * (LANES / 2);
                let x = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), row_scale);
                let x = _mm256_mul_ps(x, _mm256_loadu_ps(w.scales.as_ptr().add(j)));
                let y = _mm256_add_ps(x, _mm256_loadu_ps(w.bias.as_ptr().add(j)));
                _mm256_storeu_ps(out.as_mut_ptr().add((r0 + r) * np + j), y);
            }
        }
    }
}

/// Multiply-adds per second of the kernel this CPU runs, on `threads` threads for about
/// `seconds`: one MiniLM feed-forward product (256 tokens × 384 inputs × 1,536 outputs) again
/// and again, quantization and epilogue included. The ceiling `finder-bench embed-speed`
/// reports the encoder against.
pub fn kernel_rate(threads: usize, seconds: f64) -> f64 {
    let (rows, k, n) = (256, 384, 1536);
    let weight: Vec<f32> = (0..n * k)
        .map(|i| ((i * 7919) % 997) as f32 / 997.0 - 0.5)
        .collect();
    let x: Vec<f32> = (0..rows * k)
        .map(|i| ((i * 104_729) % 991) as f32 / 991.0 - 0.5)
        .collect();
    let layer = QLinear::new(&weight, &vec![0.0; n], n, k);
    let kernel = Kernel::detect();
    let started = std::time::Instant::now();
    let calls: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let (mut q, mut out) = (Quantized::default(), Vec::new());
                    let mut calls = 0;
                    while started.elapsed().as_secs_f64() < seconds {
                        layer.forward(kernel, &x, k, &mut q, &mut out);
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    (calls * rows * k * n) as f64 / started.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(n: usize, k: usize, seed: u32) -> (Vec<f32>, Vec<f32>) {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        let w: Vec<f32> = (0..n * k).map(|_| next()).collect();
        let b: Vec<f32> = (0..n).map(|_| next()).collect();
        (w, b)
    }

    fn reference(w: &[f32], b: &[f32], x: &[f32], n: usize, k: usize) -> Vec<f32> {
        x.chunks_exact(k)
            .flat_map(|row| {
                (0..n).map(move |j| {
                    row.iter()
                        .zip(&w[j * k..(j + 1) * k])
                        .map(|(a, w)| a * w)
                        .sum::<f32>()
                        + b[j]
                })
            })
            .collect()
    }

    /// Odd shapes (padding in both dimensions, edge tiles) against f32 arithmetic, within the
    /// error the weights' quantization allows.
    #[test]
    fn close_to_float_on_odd_shapes() {
        for (rows, n, k) in [(1, 16, 2), (7, 40, 31), (13, 70, 385), (6, 64, 1536)] {
            let (w, b) = layer(n, k, 7);
            let (x, _) = layer(rows, k, 11);
            let lin = QLinear::new(&w, &b, n, k);
            let mut out = Vec::new();
            lin.forward(Kernel::Portable, &x, k, &mut Quantized::default(), &mut out);
            let want = reference(&w, &b, &x, n, k);
            assert_eq!(out.len(), want.len());
            // Each operand is off by at most half its step (both at most 0.5 here), so a
            // product by at most 0.5 × half a step of the other.
            let step = 0.5 / WEIGHT_MAX as f32 + 0.5 / lin.range;
            let bound = (k as f32).sqrt() * 0.5 * step * 3.0 + 1e-4;
            for (got, want) in out.iter().zip(&want) {
                assert!(
                    (got - want).abs() < bound,
                    "{got} vs {want} ({rows}×{n}×{k})"
                );
            }
        }
    }

    /// The kernels this CPU runs.
    fn kernels() -> Vec<Kernel> {
        [Kernel::Vnni, Kernel::Avx2, Kernel::Portable]
            .into_iter()
            .filter(|k| k.runs_here())
            .collect()
    }

    /// The widest activations and weights of the widest layer do not overflow a sum, in any
    /// kernel this CPU runs.
    #[test]
    fn extreme_values_do_not_overflow() {
        let (n, k) = (16, 1536);
        let w = vec![-1.0f32; n * k];
        let x = vec![-3.0f32; 2 * k];
        let lin = QLinear::new(&w, &vec![0.0; n], n, k);
        for kernel in kernels() {
            let mut out = Vec::new();
            lin.forward(kernel, &x, k, &mut Quantized::default(), &mut out);
            for v in out {
                assert!(
                    (v - 3.0 * k as f32).abs() < 1e-2 * k as f32,
                    "{kernel:?}: {v}"
                );
            }
        }
    }

    /// The kernels this CPU runs give the same bits as the portable one, for every height of
    /// a tile (1 to 6 rows, and more than one tile).
    #[test]
    fn kernels_agree_exactly() {
        let fast: Vec<Kernel> = kernels()
            .into_iter()
            .filter(|k| *k != Kernel::Portable)
            .collect();
        if fast.is_empty() {
            eprintln!("skipping: this CPU has neither AVX-512 VNNI nor AVX2");
            return;
        }
        let shapes = [(1, 16, 2), (5, 40, 31), (13, 70, 385), (37, 1536, 384)]
            .into_iter()
            .chain([2, 3, 4, 6, 7, 8, 9, 10, 11, 12].map(|rows| (rows, 40, 31)));
        for kernel in fast {
            for (rows, n, k) in shapes.clone() {
                let (w, b) = layer(n, k, 3);
                let (x, _) = layer(rows, k, 5);
                let lin = QLinear::new(&w, &b, n, k);
                let (mut got, mut want) = (Vec::new(), Vec::new());
                let mut q = Quantized::default();
                lin.forward(kernel, &x, k, &mut q, &mut got);
                lin.forward(Kernel::Portable, &x, k, &mut q, &mut want);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{kernel:?} differs from portable at {rows}×{n}×{k}");
            }
        }
    }
}
