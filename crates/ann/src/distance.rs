//! Distance kernels for L2-normalised `f32` vectors: dot product, normalisation and cosine
//! distance; and for their `i8` codes, the quantisation and the integer dot product.
//!
//! Every vector the index stores is normalised, so cosine similarity is the plain dot product
//! and `cosine_distance = 1 - dot`. The dot product is the hot loop of the ANN index. It keeps
//! sixteen independent accumulators — two chunks of eight — so that the compiler turns it
//! into SIMD multiply-adds without `unsafe` or target-specific code: a single running sum
//! would not vectorise, because float addition is not associative and the compiler must keep
//! the sequential order unless the code itself spreads the sum over independent lanes.
//! Sixteen rather than eight lanes gives four independent SSE registers (two AVX ones), so
//! the additions do not wait on each other's latency.
//!
//! The lanes are written out rather than looped over, and the slices are indexed rather than
//! zipped: the release code is the same, but the crate's tests run unoptimised, where each
//! iterator step is a function call, and this form is about six times faster there.
//!
//! The build targets baseline x86-64, whose SIMD registers hold four floats. Where the CPU
//! has AVX2 (checked once per call, a cached flag), the same loop runs compiled for it, eight
//! floats to a register: each lane still adds its own products in the same order, with no
//! fused multiply-add, so the result is the same to the bit on either path (tested) and an
//! index built on one machine ranks the same on another.

/// Floats per block: two chunks of eight.
const LANES: usize = 16;

/// The dot product of two vectors of equal length.
///
/// Extra elements of the longer slice are ignored (a debug build asserts the lengths match).
/// The summation order differs from a naive loop, so results can differ from it in the last
/// bits.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, as just checked.
            return unsafe { dot_avx2(a, b) };
        }
    }
    dot_lanes(a, b)
}

/// [`dot_lanes`] compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes(a, b)
}

/// The dot product over sixteen lanes, for whatever instruction set it is compiled into.
#[inline(always)]
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len(), "dot of vectors of different lengths");
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let mut i = 0;
    while i + LANES <= n {
        let (x, y) = (&a[i..i + LANES], &b[i..i + LANES]);
        acc[0] += x[0] * y[0];
        acc[1] += x[1] * y[1];
        acc[2] += x[2] * y[2];
        acc[3] += x[3] * y[3];
        acc[4] += x[4] * y[4];
        acc[5] += x[5] * y[5];
        acc[6] += x[6] * y[6];
        acc[7] += x[7] * y[7];
        acc[8] += x[8] * y[8];
        acc[9] += x[9] * y[9];
        acc[10] += x[10] * y[10];
        acc[11] += x[11] * y[11];
        acc[12] += x[12] * y[12];
        acc[13] += x[13] * y[13];
        acc[14] += x[14] * y[14];
        acc[15] += x[15] * y[15];
        i += LANES;
    }
    // Summing the lanes in order (not as a tree) lets the compiler keep `acc` in whole
    // registers; a tree that pairs lanes makes it shuffle lanes inside the loop instead.
    let mut sum = 0.0;
    let mut lane = 0;
    while lane < LANES {
        sum += acc[lane];
        lane += 1;
    }
    while i < n {
        sum += a[i] * b[i];
        i += 1;
    }
    sum
}

/// The dot product of two equal-length `i8` code vectors (see [`quantize`]), summed exactly
/// in `i32`: with codes in `-127..=127` a product is at most 16,129 in magnitude, so a sum
/// overflows only past 133,000 dimensions.
///
/// This scores the graph walk over quantised rows, where a vector is a quarter of its
/// `f32` size: the walk is bound by memory, not arithmetic. Integer sums are exact, so the
/// AVX2 and portable paths agree to the bit without further care.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, as just checked.
            return unsafe { dot_i8_avx2(a, b) };
        }
    }
    dot_i8_lanes(a, b)
}

/// [`dot_i8`] with the sum of `a`'s codes given (`a_sum`, see [`code_sum`]): where the CPU has
/// AVX-512 VNNI, one multiply-add instruction takes 64 codes of each side (the AVX2 path
/// widens them to 16-bit lanes first). A code scan scores every row of an index under 10,000
/// vectors this way for each query, and walks score thousands.
#[inline]
pub fn dot_i8_summed(a: &[i8], a_sum: i32, b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        if vnni_available() {
            // SAFETY: the CPU supports AVX-512 F, BW and VNNI, as just checked.
            return unsafe { dot_i8_vnni(a, a_sum, b) };
        }
    }
    let _ = a_sum;
    dot_i8(a, b)
}

/// The sum of the codes of `a`: what [`dot_i8_summed`] takes with them.
pub fn code_sum(a: &[i8]) -> i32 {
    a.iter().map(|&x| i32::from(x)).sum()
}

#[cfg(target_arch = "x86_64")]
fn vnni_available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// The exact `i8` dot product with AVX-512 VNNI. Its multiply-add (`vpdpbusd`) takes one side
/// unsigned: `b`'s codes are moved to `0..=255` by flipping their sign bit (`b + 128`), and
/// the surplus, `128·Σa` over the same codes, is taken off at the end. Integers are exact,
/// so this equals the portable sum to the bit.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn dot_i8_vnni(a: &[i8], a_sum: i32, b: &[i8]) -> i32 {
    use std::arch::x86_64::{
        _mm512_dpbusd_epi32, _mm512_loadu_si512, _mm512_reduce_add_epi32, _mm512_set1_epi8,
        _mm512_setzero_si512, _mm512_xor_si512,
    };
    const WIDE: usize = 64;
    debug_assert_eq!(a.len(), b.len(), "dot of codes of different lengths");
    let n = a.len().min(b.len());
    let whole = n - n % WIDE;
    let flip = _mm512_set1_epi8(i8::MIN);
    let mut acc = _mm512_setzero_si512();
    for at in (0..whole).step_by(WIDE) {
        // SAFETY: `at + WIDE <= whole <= n`, within both slices; unaligned loads.
        let (x, y) = unsafe {
            (
                _mm512_loadu_si512(b.as_ptr().add(at).cast()),
                _mm512_loadu_si512(a.as_ptr().add(at).cast()),
            )
        };
        acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(x, flip), y);
    }
    let mut sum = _mm512_reduce_add_epi32(acc);
    let mut tail_sum = 0i32;
    for i in whole..n {
        sum += i32::from(a[i]) * i32::from(b[i]);
        tail_sum += i32::from(a[i]);
    }
    sum - 128 * (a_sum - tail_sum)
}

/// [`dot_i8_lanes`] compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    dot_i8_lanes(a, b)
}

/// The `i8` dot product over thirty-two `i32` lanes; widening products summed in lanes is
/// the shape the compiler turns into multiply-add-pairs instructions.
#[inline(always)]
fn dot_i8_lanes(a: &[i8], b: &[i8]) -> i32 {
    const WIDE: usize = 32;
    debug_assert_eq!(a.len(), b.len(), "dot of codes of different lengths");
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0i32; WIDE];
    let mut chunks = a.chunks_exact(WIDE).zip(b.chunks_exact(WIDE));
    for (x, y) in &mut chunks {
        for lane in 0..WIDE {
            acc[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    let tail = n - n % WIDE;
    let mut sum: i32 = acc.iter().sum();
    for i in tail..n {
        sum += i32::from(a[i]) * i32::from(b[i]);
    }
    sum
}

/// Codes a vector as `i8`s with one scale: `x ≈ scale · code`, `scale = max|x| / 127`, each
/// code rounded to the nearest step. Returns the scale (0 for a zero vector, whose codes are
/// all 0). A normalised vector's components are far from uniform, so a per-vector scale
/// keeps more precision than one fixed range for all of them.
pub fn quantize(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if !(max > 0.0 && max.is_finite()) {
        codes.extend(std::iter::repeat_n(0, v.len()));
        return 0.0;
    }
    let scale = max / 127.0;
    let inv = 127.0 / max;
    codes.extend(
        v.iter()
            .map(|x| (x * inv).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// Scales `v` to unit length in place (cosine is then a dot product); a zero vector stays zero.
pub fn scale_to_unit(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// [`scale_to_unit`] of an owned vector.
pub fn unit(mut v: Vec<f32>) -> Vec<f32> {
    scale_to_unit(&mut v);
    v
}

/// Cosine distance `1 - cos(a, b)` of two normalised vectors: 0 for the same direction, 1 for
/// orthogonal, 2 for opposite.
#[inline]
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    1.0 - dot(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64, enough randomness for test vectors without a dependency.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn random_vec(state: &mut u64, len: usize) -> Vec<f32> {
        (0..len)
            .map(|_| (next(state) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0)
            .collect()
    }

    fn naive_dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum()
    }

    #[test]
    fn dot_matches_a_naive_loop_on_random_and_odd_lengths() {
        let mut state = 7;
        for len in (0..=40).chain([63, 64, 65, 127, 383, 384, 385, 1000, 1536]) {
            let a = random_vec(&mut state, len);
            let b = random_vec(&mut state, len);
            let want = naive_dot(&a, &b);
            let got = f64::from(dot(&a, &b));
            // Each product is below 1 in magnitude, so the error bound grows with the length.
            let tol = 1e-6 * (len as f64 + 1.0);
            assert!(
                (got - want).abs() <= tol,
                "len {len}: got {got}, want {want}"
            );
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_dot_is_the_portable_dot_to_the_bit() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            println!("no AVX2 on this CPU: only the portable path runs");
            return;
        }
        let mut state = 13;
        for len in (0..=40).chain([63, 64, 65, 127, 383, 384, 385, 1000, 1536]) {
            for scale in [1.0f32, 1e-20, 3e18] {
                let a: Vec<f32> = random_vec(&mut state, len)
                    .iter()
                    .map(|x| x * scale)
                    .collect();
                let b = random_vec(&mut state, len);
                // SAFETY: AVX2 is available, checked above.
                let fast = unsafe { dot_avx2(&a, &b) };
                assert_eq!(fast.to_bits(), dot_lanes(&a, &b).to_bits(), "len {len}");
            }
        }
    }

    #[test]
    fn the_code_dot_is_the_exact_integer_sum_on_any_length() {
        let mut state = 17;
        for len in (0..=70).chain([127, 383, 384, 385, 1536]) {
            let a: Vec<i8> = (0..len).map(|_| (next(&mut state) % 255) as i8).collect();
            let b: Vec<i8> = (0..len).map(|_| (next(&mut state) % 255) as i8).collect();
            let want: i64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i64::from(*x) * i64::from(*y))
                .sum();
            assert_eq!(i64::from(dot_i8(&a, &b)), want, "len {len}");
            assert_eq!(dot_i8_lanes(&a, &b), dot_i8(&a, &b), "len {len}");
            // The VNNI path where the CPU has it (the portable one elsewhere).
            assert_eq!(
                i64::from(dot_i8_summed(&a, code_sum(&a), &b)),
                want,
                "len {len}"
            );
        }
    }

    #[test]
    fn the_vnni_code_dot_is_exact_at_the_extremes() {
        // -128 never comes out of `quantize`, but the identity holds for it too.
        for (x, y) in [
            (-128i8, -128i8),
            (-128, 127),
            (127, -128),
            (127, 127),
            (-127, -127),
        ] {
            for len in [1usize, 64, 65, 384] {
                let (a, b) = (vec![x; len], vec![y; len]);
                let want = len as i32 * i32::from(x) * i32::from(y);
                assert_eq!(dot_i8_summed(&a, code_sum(&a), &b), want, "{x}·{y} × {len}");
            }
        }
    }

    #[test]
    fn quantized_dots_stay_close_to_the_float_dots() {
        let mut state = 19;
        for len in [3, 64, 384] {
            for _ in 0..50 {
                let mut a = random_vec(&mut state, len);
                let mut b = random_vec(&mut state, len);
                scale_to_unit(&mut a);
                scale_to_unit(&mut b);
                let (mut ca, mut cb) = (Vec::new(), Vec::new());
                let (sa, sb) = (quantize(&a, &mut ca), quantize(&b, &mut cb));
                assert_eq!((ca.len(), cb.len()), (len, len));
                // each code is within half a step of its float
                for (x, c) in a.iter().zip(&ca) {
                    assert!((x - sa * f32::from(*c)).abs() <= sa * 0.5 + 1e-7);
                }
                let approx = sa * sb * dot_i8(&ca, &cb) as f32;
                // error per term below max|a|·step(b)/2 + max|b|·step(a)/2 + step²/4
                let bound = len as f32 * (sa * sb * 127.0 + sa * sb / 4.0) + 1e-5;
                assert!(
                    (approx - dot(&a, &b)).abs() <= bound,
                    "len {len}: {approx} vs {}",
                    dot(&a, &b)
                );
            }
        }
    }

    #[test]
    fn a_zero_infinite_or_empty_vector_quantizes_to_zeros() {
        for v in [vec![0.0f32; 4], vec![f32::INFINITY, 0.5], vec![]] {
            let mut codes = Vec::new();
            assert_eq!(quantize(&v, &mut codes), 0.0);
            assert_eq!(codes, vec![0; v.len()]);
        }
    }

    #[test]
    fn dot_of_empty_vectors_is_zero() {
        assert_eq!(dot(&[], &[]), 0.0);
    }

    #[test]
    fn normalize_gives_unit_length_and_keeps_direction() {
        let mut state = 11;
        for len in [1, 3, 8, 9, 384] {
            let orig = random_vec(&mut state, len);
            let mut v = orig.clone();
            scale_to_unit(&mut v);
            assert!((dot(&v, &v) - 1.0).abs() < 1e-5, "len {len}");
            let norm = naive_dot(&orig, &orig).sqrt();
            for (x, o) in v.iter().zip(&orig) {
                assert!((f64::from(*x) - f64::from(*o) / norm).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn normalize_leaves_a_zero_vector_alone() {
        let mut v = vec![0.0f32; 5];
        scale_to_unit(&mut v);
        assert_eq!(v, vec![0.0; 5]);
    }

    #[test]
    fn cosine_distance_spans_zero_to_two() {
        let a = [1.0, 0.0, 0.0];
        let b = [0.0, 1.0, 0.0];
        let c = [-1.0, 0.0, 0.0];
        assert!(cosine_distance(&a, &a).abs() < 1e-7);
        assert!((cosine_distance(&a, &b) - 1.0).abs() < 1e-7);
        assert!((cosine_distance(&a, &c) - 2.0).abs() < 1e-7);
    }
}
