//! A field's values drawn by a seeded generator (the OTG model's `random`
//! pattern): repeatable, the same seed gives the same values on every
//! run and every build, and value `n` is computed directly from `n` (no
//! state to walk, so frame `n` and a receiver that knows `n` agree).
//!
//! The generator is SplitMix64 (Steele, Lea, Flood 2014; the seeding
//! generator of Java's `SplittableRandom` and of xoshiro), written here so
//! its sequence never changes with a crate's version: with `seed` as its
//! starting state, output `n` (0-based) is
//!
//! ```text
//! z = seed + (n + 1) * 0x9E3779B97F4A7C15        (mod 2^64)
//! z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//! z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//! z = z ^ (z >> 31)
//! value n = min + z mod (max - min + 1)
//! ```
//!
//! A field's `count` values are values 0..count; frame `n` carries value
//! `n mod count`. (The remainder's bias is below 2^-32 for the spans the
//! model's random fields have: ports and IPv4 addresses.)

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output `n` (0-based) from starting state `seed`.
#[inline]
pub fn splitmix64(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(GOLDEN));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Values in `min..=min + span - 1` drawn from seed `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Random {
    pub min: u128,
    /// How many values lie between min and max, both counted (1..=2^64;
    /// 0 stands for 2^64).
    pub span: u64,
    pub seed: u64,
}

impl Random {
    /// Values from `min` to `max` (both included), `None` when `max` is
    /// below `min` or the span passes 2^64.
    pub fn new(min: u128, max: u128, seed: u64) -> Option<Self> {
        let span = max.checked_sub(min)?.checked_add(1)?;
        let span = if span == 1 << 64 {
            0
        } else {
            u64::try_from(span).ok()?
        };
        Some(Self { min, span, seed })
    }

    /// Value `n` of the sequence.
    #[inline]
    pub fn value(&self, n: u64) -> u128 {
        let z = splitmix64(self.seed, n);
        let off = if self.span == 0 { z } else { z % self.span };
        self.min + u128::from(off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_is_the_published_generator() {
        // SplitMix64 seeded with 1234567: the first outputs of the
        // reference C code (Vigna's splitmix64.c).
        let want: [u64; 3] = [
            6457827717110365317,
            3203168211198807973,
            9817491932198370423,
        ];
        for (n, w) in want.iter().enumerate() {
            assert_eq!(splitmix64(1234567, n as u64), *w, "output {n}");
        }
    }

    #[test]
    fn values_stay_within_min_and_max_and_repeat() {
        let r = Random::new(1000, 1009, 7).unwrap();
        let a: Vec<u128> = (0..200).map(|n| r.value(n)).collect();
        assert!(a.iter().all(|v| (1000..=1009).contains(v)));
        assert_eq!(a, (0..200).map(|n| r.value(n)).collect::<Vec<_>>());
        let seen: std::collections::HashSet<_> = a.iter().collect();
        assert_eq!(seen.len(), 10, "200 draws reach all 10 values");
        let full = Random::new(0, u128::from(u64::MAX), 1).unwrap();
        assert_eq!(full.span, 0);
        assert_eq!(full.value(0), u128::from(splitmix64(1, 0)));
        assert_eq!(Random::new(5, 4, 1), None);
        assert_eq!(Random::new(0, 1 << 64, 1), None);
    }
}
