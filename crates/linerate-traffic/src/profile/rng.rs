//! SplitMix64 (Steele, Lea, Flood 2014): a small seeded generator whose
//! sequence is fixed by its seed on every platform, so a profile's random
//! fields and Poisson gaps are the same from run to run.

/// A seeded 64-bit generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The generator of one part (a field, the gaps) of seed `seed`:
    /// independent sequences for different `part`s.
    pub fn part(seed: u64, part: u64) -> Self {
        let mut s = Self(seed ^ part.wrapping_mul(0xA076_1D64_78BD_642F));
        s.next_u64();
        s
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform below `n` (`n` > 0), without modulo bias (Lemire's
    /// multiply and reject).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in (0, 1]: never 0, so its logarithm is finite.
    pub fn unit_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// An exponential variate of mean `mean`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -self.unit_open().ln() * mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_sequence() {
        // SplitMix64 from seed 0: the published first outputs.
        let mut r = SplitMix::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_covers_the_range_evenly_and_exponential_has_its_mean() {
        let mut r = SplitMix::new(7);
        let mut seen = [0u32; 10];
        for _ in 0..100_000 {
            seen[r.below(10) as usize] += 1;
        }
        for (v, n) in seen.iter().enumerate() {
            assert!((9_500..10_500).contains(n), "{v}: {n}");
        }
        let mean = (0..100_000).map(|_| r.exponential(50.0)).sum::<f64>() / 100_000.0;
        assert!((mean - 50.0).abs() < 1.0, "{mean}");
    }
}
