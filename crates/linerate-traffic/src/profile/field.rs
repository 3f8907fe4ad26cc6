//! A header field (or the frame size) that varies per frame: fixed,
//! stepping up or down through a range, random in a range (seeded), or
//! taken from a list in turn. Values are held as integers (addresses,
//! MACs, ports, VLAN ids, sizes).

use super::rng::SplitMix;

/// How a ranged field moves from frame to frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// first, first + step, … up to last, then first again.
    Increment,
    /// last, last - step, … down to first, then last again.
    Decrement,
    /// Uniform in first..=last (on the step's grid), from the seed.
    Random,
}

/// A field's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Fixed(u128),
    Range {
        first: u128,
        last: u128,
        step: u128,
        mode: Mode,
    },
    List(Vec<u128>),
}

impl Field {
    /// The smallest and largest value the field takes.
    pub fn bounds(&self) -> (u128, u128) {
        match self {
            Field::Fixed(v) => (*v, *v),
            Field::Range { first, last, .. } => (*first, *last),
            Field::List(l) => (
                l.iter().copied().min().unwrap_or(0),
                l.iter().copied().max().unwrap_or(0),
            ),
        }
    }

    /// The mean of its values over a cycle (of a range: the middle of the
    /// values on its grid).
    pub fn mean(&self) -> f64 {
        match self {
            Field::Fixed(v) => *v as f64,
            Field::List(l) => l.iter().map(|&v| v as f64).sum::<f64>() / l.len().max(1) as f64,
            Field::Range {
                first, last, step, ..
            } => {
                let top = first + (last - first) / step * step;
                (*first as f64 + top as f64) / 2.0
            }
        }
    }

    /// Every value the field can take, if there are at most `max`.
    pub fn values(&self, max: usize) -> Option<Vec<u128>> {
        match self {
            Field::Fixed(v) => Some(vec![*v]),
            Field::List(l) => Some(l.clone()),
            Field::Range {
                first, last, step, ..
            } => {
                let n = (last - first) / step + 1;
                (n <= max as u128).then(|| (0..n).map(|k| first + k * step).collect())
            }
        }
    }

    /// Its generator, seeded with `seed` (used by random ranges only).
    pub fn values_from(&self, seed: u64) -> FieldGen {
        FieldGen {
            field: self.clone(),
            n: 0,
            rng: SplitMix::new(seed),
        }
    }
}

/// A field's values frame after frame.
#[derive(Debug, Clone)]
pub struct FieldGen {
    field: Field,
    /// Frames so far.
    n: u64,
    rng: SplitMix,
}

impl FieldGen {
    /// The next frame's value.
    pub fn next_value(&mut self) -> u128 {
        let n = self.n;
        self.n += 1;
        match &self.field {
            Field::Fixed(v) => *v,
            Field::List(l) => l[(n % l.len() as u64) as usize],
            Field::Range {
                first,
                last,
                step,
                mode,
            } => {
                let count = (last - first) / step + 1;
                let k = match mode {
                    Mode::Increment | Mode::Decrement => u128::from(n) % count,
                    Mode::Random => {
                        u128::from(self.rng.below(u64::try_from(count).unwrap_or(u64::MAX)))
                    }
                };
                match mode {
                    Mode::Decrement => last - k * step,
                    _ => first + k * step,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(f: &Field, seed: u64, n: usize) -> Vec<u128> {
        let mut g = f.values_from(seed);
        (0..n).map(|_| g.next_value()).collect()
    }

    #[test]
    fn ranges_step_up_down_and_wrap() {
        let r = |mode| Field::Range {
            first: 10,
            last: 16,
            step: 3,
            mode,
        };
        assert_eq!(take(&r(Mode::Increment), 0, 5), [10, 13, 16, 10, 13]);
        assert_eq!(take(&r(Mode::Decrement), 0, 5), [16, 13, 10, 16, 13]);
        assert_eq!(take(&Field::List(vec![5, 1]), 0, 3), [5, 1, 5]);
        assert_eq!(take(&Field::Fixed(4), 0, 2), [4, 4]);
    }

    #[test]
    fn random_ranges_stay_on_the_grid_and_follow_the_seed() {
        let f = Field::Range {
            first: 100,
            last: 200,
            step: 10,
            mode: Mode::Random,
        };
        let a = take(&f, 1, 200);
        assert!(a.iter().all(|v| (100..=200).contains(v) && v % 10 == 0));
        assert_eq!(a, take(&f, 1, 200), "same seed, same values");
        assert_ne!(a, take(&f, 2, 200), "another seed, other values");
        // Every value of the grid comes up in 200 draws of 11.
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert_eq!(distinct.len(), 11);
    }
}
