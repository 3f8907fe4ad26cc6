//! How evenly a paced sender sent: the gaps between its send calls,
//! measured by the sender itself (Welford's running mean and variance).

use std::time::{Duration, Instant};

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
        }
        self.last = Some(now);
        self.calls += 1;
        self.units += units;
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
