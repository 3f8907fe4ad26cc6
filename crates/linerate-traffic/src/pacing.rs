//! How evenly a paced sender sent: the gaps between its send calls,
//! measured by the sender itself (Welford's running mean and variance, and
//! a log-linear histogram for percentiles); the schedule a paced sender
//! keeps and what it does when it wakes late ([`Schedule`], [`CatchUp`],
//! [`Shape`]).

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
    wait(t, margin, std::thread::yield_now);
}

/// [`wait_until`], spinning through the last stretch instead of yielding:
/// a yield on a CPU shared with a busy task hands that task a whole time
/// slice (milliseconds), and the departure leaves that late. For a paced
/// sender whose departures are its measurement (blast, rfc2544's trials);
/// the spin is at most `margin` per departure.
pub fn spin_until(t: Instant, margin: Duration) {
    wait(t, margin, std::hint::spin_loop);
}

fn wait(t: Instant, margin: Duration, idle: fn()) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > margin * 2 {
            std::thread::sleep(left - margin);
        } else {
            idle();
        }
    }
}

/// What a paced sender does with the departures it finds overdue when it
/// wakes from a wait later than one frame time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatchUp {
    /// The schedule is absolute: every departure that fell due is sent at
    /// once, back to back (the average rate holds; the burst is
    /// reported). blast's default: what a user asking for a rate expects
    /// over the run.
    #[default]
    Burst,
    /// At most `tolerance` departures beyond the schedule's burst are sent
    /// at once; the rest of those that fell due while the sender was late
    /// are skipped: never sent, counted as not offered (the shape holds,
    /// the offered rate drops by what was skipped). rfc2544's default: a
    /// trial tests the device at a rate in its shape, and a burst the
    /// schedule did not ask for would be scored as the device's loss.
    Skip,
}

impl CatchUp {
    pub fn name(self) -> &'static str {
        match self {
            CatchUp::Burst => "burst",
            CatchUp::Skip => "skip",
        }
    }
}

/// How a paced sender kept its schedule (its own clock): the wake-ups from
/// a wait that found more than one burst due, and what came of them.
/// A sender that never waits (the rate is beyond what it can send) is not
/// late but held back: that shows as its offered rate, not here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// Wake-ups that found more departures due than the schedule's burst.
    pub late_wakeups: u64,
    /// The worst of them: how long the oldest due departure had been due, ns.
    pub max_late_ns: u64,
    /// The most frames sent back to back beyond the schedule's burst
    /// after a late wake-up (at most the tolerance under [`CatchUp::Skip`]).
    pub max_burst: u64,
    /// Departures skipped ([`CatchUp::Skip`]): never sent, not offered.
    pub skipped: u64,
}

impl Shape {
    /// Two workers' (or trials') shapes as one: the worst of each extreme,
    /// the counts added.
    pub fn merge(&mut self, o: &Shape) {
        self.late_wakeups += o.late_wakeups;
        self.max_late_ns = self.max_late_ns.max(o.max_late_ns);
        self.max_burst = self.max_burst.max(o.max_burst);
        self.skipped += o.skipped;
    }
}

/// A paced sender's schedule: departure k (from 0) is due `k x gap` after
/// the start, `burst` of them at a time. It says how many frames may go
/// now, or when to wait until, and keeps the [`Shape`] of what was sent.
/// Departures are slots: sent or (under [`CatchUp::Skip`]) skipped, either
/// way used up, so a counted run ends after its count of slots.
#[derive(Debug, Clone)]
pub struct Schedule {
    gap_ns: f64,
    burst: u64,
    catch_up: CatchUp,
    tolerance: u64,
    /// Departures used up: sent or skipped.
    slots: u64,
    /// The last call waited: the next one that finds frames due is a
    /// wake-up.
    waited: bool,
    shape: Shape,
}

/// What a [`Schedule`] says at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Send this many frames now (then [`Schedule::sent`]).
    Send(u64),
    /// Nothing due yet: wait until this many ns after the start.
    WaitUntil(u64),
}

impl Schedule {
    /// `gap_ns` between departures, `burst` frames per departure time (1:
    /// evenly spaced), `tolerance` frames beyond a burst that a late
    /// wake-up may still send at once under [`CatchUp::Skip`].
    pub fn new(gap_ns: f64, burst: u64, catch_up: CatchUp, tolerance: u64) -> Schedule {
        Schedule {
            gap_ns: gap_ns.max(0.0),
            burst: burst.max(1),
            catch_up,
            tolerance,
            slots: 0,
            waited: false,
            shape: Shape::default(),
        }
    }

    /// At `elapsed_ns` after the start, with room for `batch` frames in a
    /// send call: how many to send now, or until when to wait (for a whole
    /// burst to be due). Under [`CatchUp::Skip`] a late wake-up skips the
    /// departures beyond `burst + tolerance` here.
    pub fn due(&mut self, elapsed_ns: u64, batch: u64) -> Due {
        let burst = self.burst.min(batch.max(1));
        let allowed = (elapsed_ns as f64 / self.gap_ns) as u64 + 1;
        if allowed < self.slots + burst {
            self.waited = true;
            let at = ((self.slots + burst - 1) as f64 * self.gap_ns) as u64;
            return Due::WaitUntil(at);
        }
        let mut due = allowed - self.slots;
        if std::mem::take(&mut self.waited) && due > burst {
            // Woke late: the oldest due departure was due this long ago.
            let oldest = (self.slots as f64 * self.gap_ns) as u64;
            self.shape.late_wakeups += 1;
            self.shape.max_late_ns = self
                .shape
                .max_late_ns
                .max(elapsed_ns.saturating_sub(oldest));
            if self.catch_up == CatchUp::Skip && due > burst + self.tolerance {
                let skip = due - burst - self.tolerance;
                self.shape.skipped += skip;
                self.slots += skip;
                due -= skip;
            }
            self.shape.max_burst = self.shape.max_burst.max(due.min(batch) - burst);
        }
        Due::Send(due.min(batch))
    }

    /// `n` departures were used up by sending.
    pub fn sent(&mut self, n: u64) {
        self.slots += n;
    }

    /// Departures used up so far (sent or skipped).
    pub fn slots(&self) -> u64 {
        self.slots
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks a schedule as a sender would: at each moment, what it says.
    fn sends_at(s: &mut Schedule, t_ns: u64) -> Option<u64> {
        match s.due(t_ns, 64) {
            Due::Send(n) => {
                s.sent(n);
                Some(n)
            }
            Due::WaitUntil(_) => None,
        }
    }

    #[test]
    fn a_schedule_on_time_sends_one_burst_per_due_time_and_says_when_next() {
        let mut s = Schedule::new(1_000.0, 1, CatchUp::Skip, 0);
        assert_eq!(sends_at(&mut s, 0), Some(1));
        assert_eq!(s.due(10, 64), Due::WaitUntil(1_000));
        assert_eq!(sends_at(&mut s, 1_000), Some(1));
        assert_eq!(sends_at(&mut s, 2_100), Some(1));
        assert_eq!(s.slots(), 3);
        assert_eq!(s.shape(), Shape::default());
        // Bursts of 4: wait for the fourth departure's time, send 4.
        let mut b = Schedule::new(1_000.0, 4, CatchUp::Burst, 0);
        assert_eq!(sends_at(&mut b, 0), None);
        assert_eq!(b.due(0, 64), Due::WaitUntil(3_000));
        assert_eq!(sends_at(&mut b, 3_000), Some(4));
        assert_eq!(b.shape(), Shape::default());
    }

    #[test]
    fn a_late_wake_up_bursts_or_skips_and_the_shape_says_so() {
        // Burst: woke 10.5 frame times late, every due departure goes.
        let mut b = Schedule::new(1_000.0, 1, CatchUp::Burst, 2);
        assert_eq!(sends_at(&mut b, 0), Some(1));
        assert_eq!(sends_at(&mut b, 500), None);
        assert_eq!(sends_at(&mut b, 11_500), Some(11));
        assert_eq!(
            b.shape(),
            Shape {
                late_wakeups: 1,
                max_late_ns: 10_500,
                max_burst: 10,
                skipped: 0
            }
        );
        assert_eq!(b.slots(), 12);
        // Skip with a tolerance of 2: three go (one burst and two more),
        // eight are skipped, the schedule goes on where it was.
        let mut k = Schedule::new(1_000.0, 1, CatchUp::Skip, 2);
        assert_eq!(sends_at(&mut k, 0), Some(1));
        assert_eq!(sends_at(&mut k, 500), None);
        assert_eq!(sends_at(&mut k, 11_500), Some(3));
        assert_eq!(
            k.shape(),
            Shape {
                late_wakeups: 1,
                max_late_ns: 10_500,
                max_burst: 2,
                skipped: 8
            }
        );
        assert_eq!(k.slots(), 12);
        assert_eq!(k.due(11_600, 64), Due::WaitUntil(12_000));
        // A sender that never waited (busy, behind its schedule) is held
        // back, not late: nothing skipped, the shape untouched.
        let mut busy = Schedule::new(1_000.0, 1, CatchUp::Skip, 0);
        assert_eq!(sends_at(&mut busy, 0), Some(1));
        assert_eq!(sends_at(&mut busy, 5_000), Some(5));
        assert_eq!(busy.shape(), Shape::default());
        // Shapes merge by their worst and their sums.
        let mut m = b.shape();
        m.merge(&k.shape());
        assert_eq!(
            m,
            Shape {
                late_wakeups: 2,
                max_late_ns: 10_500,
                max_burst: 10,
                skipped: 8
            }
        );
    }

    #[test]
    fn wait_until_never_returns_early() {
        for (ahead, margin) in [(0, 5), (30, 7), (3_000, 100), (3_000, 7)] {
            let t = Instant::now() + Duration::from_micros(ahead);
            wait_until(t, Duration::from_micros(margin));
            assert!(Instant::now() >= t, "{ahead} µs ahead, margin {margin}");
            let t = Instant::now() + Duration::from_micros(ahead);
            spin_until(t, Duration::from_micros(margin));
            assert!(
                Instant::now() >= t,
                "spin: {ahead} µs ahead, margin {margin}"
            );
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
