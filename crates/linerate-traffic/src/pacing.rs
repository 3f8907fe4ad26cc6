//! How evenly a paced sender sent: the gaps between its send calls,
//! measured by the sender itself (Welford's running mean and variance, and
//! a log-linear histogram for percentiles).

use std::time::{Duration, Instant};

/// Sub-buckets per power of two: percentiles within 1/16 (6%) of the gap.
const SUB: usize = 8;
/// Gaps up to 2^44 ns (about 4.9 hours); longer ones land in the last bucket.
const BUCKETS: usize = SUB + (44 - 3) * SUB;

/// Counts of gaps in log-linear buckets: exact below 8 ns, then 8 buckets
/// per power of two. Fixed size and `Copy`, so a sender can publish it
/// without allocating.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GapHistogram {
    counts: [u64; BUCKETS],
    total: u64,
}

impl Default for GapHistogram {
    fn default() -> Self {
        Self {
            counts: [0; BUCKETS],
            total: 0,
        }
    }
}

impl GapHistogram {
    fn bucket(ns: u64) -> usize {
        if ns < SUB as u64 {
            return ns as usize;
        }
        let octave = 63 - ns.leading_zeros() as usize; // >= 3
        let sub = ((ns >> (octave - 3)) & (SUB as u64 - 1)) as usize;
        (SUB + (octave - 3) * SUB + sub).min(BUCKETS - 1)
    }

    /// The middle of bucket `b`'s range of gaps.
    fn middle(b: usize) -> u64 {
        if b < SUB {
            return b as u64;
        }
        let (octave, sub) = ((b - SUB) / SUB + 3, ((b - SUB) % SUB) as u64);
        let low = (SUB as u64 + sub) << (octave - 3);
        let width = 1u64 << (octave - 3);
        low + width / 2
    }

    pub fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.total += 1;
    }

    /// The gap (ns) at quantile `q` (0..=1), within 1/16 of it; None if empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let want = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(Self::middle(b));
            }
        }
        None
    }
}

/// Measured gaps between a paced sender's send calls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Departures {
    pub calls: u64,
    /// Datagrams or blocks handed to the kernel.
    pub units: u64,
    pub mean_gap_ns: f64,
    m2: f64,
    pub min_gap_ns: u64,
    pub max_gap_ns: u64,
    /// Every gap, for percentiles.
    pub gaps: GapHistogram,
    last: Option<Instant>,
}

impl Departures {
    /// One send call of `units` datagrams/blocks at `now` (Welford's running variance).
    pub fn record(&mut self, now: Instant, units: u64) {
        if let Some(last) = self.last {
            let gap = now.duration_since(last).as_nanos() as u64;
            let k = self.calls as f64;
            let d = gap as f64 - self.mean_gap_ns;
            self.mean_gap_ns += d / k;
            self.m2 += d * (gap as f64 - self.mean_gap_ns);
            self.min_gap_ns = if self.calls == 1 {
                gap
            } else {
                self.min_gap_ns.min(gap)
            };
            self.max_gap_ns = self.max_gap_ns.max(gap);
            self.gaps.record(gap);
        }
        self.last = Some(now);
        self.calls += 1;
        self.units += units;
    }

    /// The gaps' p50, p99 and p99.9 in microseconds (0 before two calls).
    pub fn percentiles_us(&self) -> [f64; 3] {
        [0.5, 0.99, 0.999].map(|q| self.gaps.quantile(q).unwrap_or(0) as f64 / 1e3)
    }

    pub fn stddev_gap_ns(&self) -> f64 {
        if self.calls > 2 {
            (self.m2 / (self.calls - 2) as f64).sqrt()
        } else {
            0.0
        }
    }
}

/// Waits until `t`: sleeps through all but `margin` of the wait (when more
/// than twice `margin` is left), then yields until the deadline. Callers
/// lower the timer slack so the sleep ends close to where it was asked to.
pub fn wait_until(t: Instant, margin: Duration) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > margin * 2 {
            std::thread::sleep(left - margin);
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_never_returns_early() {
        for (ahead, margin) in [(0, 5), (30, 7), (3_000, 100), (3_000, 7)] {
            let t = Instant::now() + Duration::from_micros(ahead);
            wait_until(t, Duration::from_micros(margin));
            assert!(Instant::now() >= t, "{ahead} µs ahead, margin {margin}");
        }
    }

    #[test]
    fn gap_percentiles_are_within_a_sixteenth() {
        let mut h = GapHistogram::default();
        assert_eq!(h.quantile(0.5), None);
        // 1..=1000 µs, once each.
        for us in 1..=1000u64 {
            h.record(us * 1000);
        }
        for (q, exact) in [
            (0.5, 500_000u64),
            (0.9, 900_000),
            (0.99, 990_000),
            (1.0, 1_000_000),
        ] {
            let got = h.quantile(q).unwrap() as f64;
            assert!(
                (got - exact as f64).abs() <= exact as f64 / 16.0,
                "q{q}: {got} vs {exact}"
            );
        }
        // Tiny gaps are exact; huge ones do not overflow the buckets.
        let mut t = GapHistogram::default();
        t.record(3);
        t.record(u64::MAX);
        assert_eq!(t.quantile(0.5), Some(3));
        assert!(t.quantile(1.0).unwrap() > 1 << 43);
        // Every bucket's middle falls back into that bucket.
        for b in 0..BUCKETS - 1 {
            assert_eq!(
                GapHistogram::bucket(GapHistogram::middle(b)),
                b,
                "bucket {b}"
            );
        }
    }

    #[test]
    fn gaps_mean_spread_and_extremes() {
        let t0 = Instant::now();
        let mut d = Departures::default();
        for (i, gap_us) in [0u64, 100, 100, 300, 100]
            .iter()
            .scan(0u64, |acc, g| {
                *acc += g;
                Some(*acc)
            })
            .enumerate()
        {
            d.record(t0 + Duration::from_micros(gap_us), 1 + (i as u64 % 2));
        }
        assert_eq!(d.calls, 5);
        assert_eq!(d.units, 7);
        assert!((d.mean_gap_ns - 150_000.0).abs() < 1.0, "{}", d.mean_gap_ns);
        assert_eq!((d.min_gap_ns, d.max_gap_ns), (100_000, 300_000));
        assert!(
            (d.stddev_gap_ns() - 100_000.0).abs() < 1.0,
            "{}",
            d.stddev_gap_ns()
        );
    }
}
