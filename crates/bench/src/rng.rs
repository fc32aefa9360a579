//! A small deterministic PRNG (splitmix64) and the distributions the generator draws from.
//!
//! Hand-written so that a seed means the same bytes forever: no crate upgrade can change the
//! stream. Each document draws from its own stream (`Rng::stream(seed, tag, index)`), so a
//! document's content depends only on the seed and its number, never on what came before.

/// splitmix64: one 64-bit state, full period, good enough statistics for synthetic data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An independent stream for item `index` of kind `tag` under `seed`.
    pub fn stream(seed: u64, tag: u64, index: u64) -> Rng {
        Rng(mix(mix(seed ^ tag.rotate_left(32)) ^ index))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0), by multiply-shift (no modulo bias worth mentioning).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    /// Standard normal, by Box–Muller (one of the pair is discarded: callers need few).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f64(); // (0, 1]: ln is finite
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Fills `out` with a random direction, unit length. Components are uniform rather than
    /// Gaussian: in hundreds of dimensions the direction is as good as uniform, and two
    /// components per draw keep a million documents cheap.
    pub fn unit_vector(&mut self, out: &mut [f32]) {
        let mut i = 0;
        while i < out.len() {
            let r = self.next_u64();
            out[i] = to_centered(r as u32);
            if i + 1 < out.len() {
                out[i + 1] = to_centered((r >> 32) as u32);
            }
            i += 2;
        }
        normalize(out);
    }
}

/// splitmix64's finaliser: a bijective mix of 64 bits.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 32-bit draw as a value in [-1, 1).
fn to_centered(x: u32) -> f32 {
    (x as f32 / 2_147_483_648.0) - 1.0
}

/// Scales `v` to unit length in place; a zero vector stays zero.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Walker's alias table: O(1) draws from a fixed discrete distribution.
#[derive(Debug, Clone)]
pub struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    /// A table for `weights` (non-negative, not all zero).
    pub fn new(weights: &[f64]) -> Alias {
        let n = weights.len();
        assert!(n > 0, "an alias table needs at least one weight");
        let total: f64 = weights.iter().sum();
        let mut prob: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias = vec![0u32; n];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| prob[i] < 1.0);
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            alias[s] = l as u32;
            prob[l] -= 1.0 - prob[s];
            if prob[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Leftovers are 1 up to rounding.
        for i in small.into_iter().chain(large) {
            prob[i] = 1.0;
        }
        Alias { prob, alias }
    }

    /// Zipf–Mandelbrot weights `1 / (rank + q)^s` over `n` ranks.
    pub fn zipf(n: usize, s: f64, q: f64) -> Alias {
        let weights: Vec<f64> = (0..n).map(|r| 1.0 / (r as f64 + q).powf(s)).collect();
        Alias::new(&weights)
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let i = rng.below(self.prob.len() as u64) as usize;
        if rng.f64() < self.prob[i] {
            i
        } else {
            self.alias[i] as usize
        }
    }

    pub fn len(&self) -> usize {
        self.prob.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prob.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::stream(1, 2, 3).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::stream(1, 2, 3).next_u64(),
            Rng::stream(1, 2, 4).next_u64()
        );
        assert_ne!(
            Rng::stream(1, 2, 3).next_u64(),
            Rng::stream(1, 3, 3).next_u64()
        );
    }

    #[test]
    fn alias_matches_its_weights() {
        let table = Alias::new(&[1.0, 2.0, 7.0, 0.0]);
        let mut rng = Rng::new(7);
        let mut counts = [0usize; 4];
        let n = 200_000;
        for _ in 0..n {
            counts[table.sample(&mut rng)] += 1;
        }
        assert_eq!(counts[3], 0);
        for (i, w) in [0.1, 0.2, 0.7].iter().enumerate() {
            let got = counts[i] as f64 / n as f64;
            assert!((got - w).abs() < 0.01, "bucket {i}: {got} vs {w}");
        }
    }

    #[test]
    fn draws_stay_in_range() {
        let mut rng = Rng::new(3);
        for _ in 0..10_000 {
            let x = rng.f64();
            assert!((0.0..1.0).contains(&x));
            assert!(rng.below(5) < 5);
            let r = rng.range(2, 6);
            assert!((2..=6).contains(&r));
            assert!(rng.normal().is_finite());
        }
        let mut v = vec![0f32; 7];
        rng.unit_vector(&mut v);
        let norm: f32 = v.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
    }
}
