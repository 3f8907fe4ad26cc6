//! Frame-size sequences: one size, a list, or weighted (IMIX). A weighted
//! sequence is interleaved smoothly (weighted round-robin) and meets its
//! weights exactly in every cycle of `sum(weights)` frames.

use linerate_calc::Imix;

#[derive(Debug, Clone)]
pub struct SizeSequence {
    /// The frame sizes of one cycle, in sending order.
    cycle: Vec<u16>,
}

impl SizeSequence {
    /// Interleaves a mix: 7:4:1 becomes e.g. 64 594 64 1518 64 594 … rather
    /// than seven 64s in a row.
    pub fn from_mix(mix: &Imix) -> Self {
        let entries = mix.entries();
        let total: i64 = entries.iter().map(|e| e.weight as i64).sum();
        let mut current = vec![0i64; entries.len()];
        let mut cycle = Vec::with_capacity(total as usize);
        for _ in 0..total {
            for (c, e) in current.iter_mut().zip(entries) {
                *c += e.weight as i64;
            }
            let (best, _) = current
                .iter()
                .enumerate()
                .max_by_key(|(i, c)| (**c, std::cmp::Reverse(*i)))
                .unwrap_or((0, &0));
            current[best] -= total;
            cycle.push(entries[best].frame_bytes as u16);
        }
        Self { cycle }
    }

    /// Sizes in turn, one each.
    pub fn list(sizes: &[u16]) -> Self {
        Self {
            cycle: sizes.to_vec(),
        }
    }

    /// The size of frame number `n`.
    pub fn nth(&self, n: u64) -> u16 {
        self.cycle[(n % self.cycle.len() as u64) as usize]
    }

    pub fn cycle(&self) -> &[u16] {
        &self.cycle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_is_exact_per_cycle_and_interleaved() {
        let s = SizeSequence::from_mix(&Imix::simple());
        let c = s.cycle();
        assert_eq!(c.len(), 12);
        assert_eq!(c.iter().filter(|&&x| x == 64).count(), 7);
        assert_eq!(c.iter().filter(|&&x| x == 594).count(), 4);
        assert_eq!(c.iter().filter(|&&x| x == 1518).count(), 1);
        let longest_run = c.windows(3).filter(|w| w.iter().all(|&x| x == 64)).count();
        assert!(longest_run <= 1, "spread out: {c:?}");
        // Over any number of frames the proportions stay within one cycle.
        let n = 100_003u64;
        let small = (0..n).filter(|&i| s.nth(i) == 64).count() as f64 / n as f64;
        assert!((small - 7.0 / 12.0).abs() < 0.01);
    }

    #[test]
    fn lists_cycle() {
        let s = SizeSequence::list(&[64, 128]);
        assert_eq!((s.nth(0), s.nth(1), s.nth(2)), (64, 128, 64));
    }
}
