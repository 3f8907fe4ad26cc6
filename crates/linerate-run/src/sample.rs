//! Turning running totals into intervals, and stopping a run from outside.

use crate::event::{Interval, Row, sums};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Shortest last interval reported on its own: a shorter tail is folded
/// into the interval before it (no sub-millisecond interval with an
/// absurd rate).
pub const MIN_TAIL: Duration = Duration::from_millis(50);

/// Makes intervals out of cumulative rows (totals since the start, as
/// workers publish them): each interval is the difference between two
/// snapshots, so the intervals of a run add up exactly to its last snapshot.
#[derive(Debug)]
pub struct Sampler {
    start: Instant,
    every: Option<Duration>,
    next: Option<Instant>,
    /// The snapshot the last interval ended at.
    last: Vec<Row>,
    last_s: f64,
    /// An interval held back until the next one shows whether the run ends
    /// within [`MIN_TAIL`] of it.
    held: Option<Interval>,
    /// When the counted activity began (s from `start`; a sender's first
    /// frame): the interval it falls in starts there, as the run's
    /// summary's span does, so the two agree on the time.
    begin_s: Option<f64>,
    /// Most idle intervals held back after a counted one (0: none held).
    hold_idle: usize,
    /// Idle intervals (nothing counted) after the held one: reported when
    /// counting resumes, dropped when the run ends without more.
    idle: Vec<Interval>,
}

impl Sampler {
    /// Intervals every `every` from `start` (`None`: a single interval at
    /// the end).
    pub fn new(start: Instant, every: Option<Duration>) -> Self {
        let every = every.filter(|d| !d.is_zero());
        Sampler {
            start,
            every,
            next: every.map(|d| start + d),
            last: Vec::new(),
            last_s: 0.0,
            held: None,
            begin_s: None,
            hold_idle: 0,
            idle: Vec::new(),
        }
    }

    /// For a receiver whose activity ends when the last frame arrives: up
    /// to `max` idle intervals after a counted one are held back (shown
    /// once counting resumes, or once more than `max` are held), and at
    /// the end, given the last arrival, the interval it falls in ends
    /// there and the idle ones after it are left out (they lie after the
    /// activity the summary spans), as the interval the first arrival
    /// falls in starts there.
    pub fn hold_idle(mut self, max: usize) -> Self {
        self.hold_idle = max;
        self
    }

    /// The counted activity began `begin_s` after the start (a sender's
    /// first frame): the interval it falls in is reported from there, not
    /// from the start (set-up is not counted time). The earliest told
    /// holds.
    pub fn begin_at(&mut self, begin_s: f64) {
        self.begin_s = Some(self.begin_s.map_or(begin_s, |b| b.min(begin_s)));
    }

    /// An interval as handed out: its start moved to the activity's
    /// begin where that falls inside it.
    fn clipped(&self, mut iv: Interval) -> Interval {
        if let Some(b) = self.begin_s
            && iv.start_s < b
            && b < iv.end_s
        {
            iv.start_s = b;
        }
        iv
    }

    /// When the next interval is due (`None`: only at the end).
    pub fn next_due(&self) -> Option<Instant> {
        self.next
    }

    /// Whether an interval is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.next.is_some_and(|n| now >= n)
    }

    /// How long to wait for the next interval, at most `cap`.
    pub fn wait(&self, now: Instant, cap: Duration) -> Duration {
        self.next
            .map_or(cap, |n| n.saturating_duration_since(now).min(cap))
    }

    /// While `running()`: sleeps until the next interval is due (checking
    /// `running` every 20 ms), closes it with the snapshot `rows()` and
    /// hands the interval before it to `on` (and keeps it in `kept`).
    pub fn watch(
        &mut self,
        running: impl Fn() -> bool,
        mut rows: impl FnMut() -> Vec<Row>,
        begin: Option<&dyn Fn() -> Option<f64>>,
        on: &mut dyn FnMut(&Interval),
        kept: &mut Vec<Interval>,
    ) {
        while running() {
            if let Some(b) = begin.and_then(|b| b()) {
                self.begin_at(b);
            }
            std::thread::sleep(self.wait(Instant::now(), Duration::from_millis(20)));
            let now = Instant::now();
            if self.due(now) {
                for iv in self.sample_all(now, rows()) {
                    on(&iv);
                    kept.push(iv);
                }
            }
        }
    }

    /// Closes the interval due now with the snapshot `rows`; returns the
    /// interval before it, which is final once this one exists (for a
    /// sampler that holds no idle intervals: see [`Sampler::sample_all`]).
    pub fn sample(&mut self, now: Instant, rows: Vec<Row>) -> Option<Interval> {
        debug_assert_eq!(self.hold_idle, 0, "sample_all releases several");
        self.sample_all(now, rows).pop()
    }

    /// Closes the interval due now with the snapshot `rows`; returns the
    /// intervals that are final now (the one before it, and idle ones
    /// held back once counting resumes).
    pub fn sample_all(&mut self, now: Instant, rows: Vec<Row>) -> Vec<Interval> {
        let end_s = now.duration_since(self.start).as_secs_f64();
        if let (Some(n), Some(d)) = (self.next.as_mut(), self.every) {
            while *n <= now {
                *n += d;
            }
        }
        let iv = self.diff(end_s, rows);
        let held_counted = self.held.as_ref().is_some_and(|h| !idle(h));
        if self.hold_idle > 0 && held_counted && idle(&iv) {
            self.idle.push(iv);
            if self.idle.len() <= self.hold_idle {
                return Vec::new();
            }
            // Idle for long: show it after all.
            let last = self.idle.pop();
            let mut out: Vec<Interval> = self.held.take().into_iter().collect();
            out.append(&mut self.idle);
            self.held = last;
            return out.into_iter().map(|i| self.clipped(i)).collect();
        }
        let mut out: Vec<Interval> = self.held.replace(iv).into_iter().collect();
        out.append(&mut self.idle);
        out.into_iter().map(|i| self.clipped(i)).collect()
    }

    /// The run ended at `now` (or its counted activity: a sender's last
    /// frame, a receiver's last arrival) with the final totals `rows`: the
    /// interval(s) still to report. A tail shorter than [`MIN_TAIL`] joins
    /// the interval before it.
    pub fn finish(&mut self, now: Instant, rows: Vec<Row>) -> Vec<Interval> {
        // Not before the last interval's end (an end at the activity's
        // last frame may come before it: the tail is then empty).
        let end_s = now
            .duration_since(self.start)
            .as_secs_f64()
            .max(self.last_s);
        let tail = self.diff(end_s, rows);
        if self.hold_idle > 0
            && idle(&tail)
            && let Some(mut h) = self.held.take_if(|h| !idle(h))
        {
            // Nothing after the held interval: the activity ended in it,
            // at `now`; the idle ones after it are left out. (Totals are
            // published late: an arrival counted in it may lie before its
            // start; it then keeps MIN_TAIL.)
            self.idle.clear();
            let at = now.duration_since(self.start).as_secs_f64();
            let at = if at > h.start_s {
                at
            } else {
                h.start_s + MIN_TAIL.as_secs_f64()
            };
            h.end_s = at.min(h.end_s);
            return vec![self.clipped(h)];
        }
        let mut out: Vec<Interval> = Vec::new();
        if !self.idle.is_empty() {
            // Counting resumed after idle intervals: they stand.
            out.extend(self.held.take().map(|h| self.clipped(h)));
            let idle = std::mem::take(&mut self.idle);
            out.extend(idle.into_iter().map(|i| self.clipped(i)));
            self.held = out.pop();
        }
        out.extend(self.finish_tail(tail));
        out
    }

    /// The held interval and the tail, a short tail joined to it.
    fn finish_tail(&mut self, tail: Interval) -> Vec<Interval> {
        match self.held.take() {
            Some(mut h) if tail.seconds() < MIN_TAIL.as_secs_f64() => {
                h.end_s = tail.end_s;
                merge(&mut h.rows, &tail.rows);
                h.sums = sums(&h.rows);
                vec![self.clipped(h)]
            }
            Some(h) => vec![self.clipped(h), self.clipped(tail)],
            None => vec![self.clipped(tail)],
        }
    }

    fn diff(&mut self, end_s: f64, rows: Vec<Row>) -> Interval {
        let out: Vec<Row> = rows
            .iter()
            .map(|r| {
                let mut d = r.clone();
                if let Some(prev) = self
                    .last
                    .iter()
                    .find(|p| p.scope == r.scope && p.id == r.id && p.role == r.role)
                {
                    d.counts = r.counts.since(&prev.counts);
                }
                d
            })
            .collect();
        let iv = Interval::new(self.last_s, end_s, out);
        self.last = rows;
        self.last_s = end_s;
        iv
    }
}

/// Whether an interval counted nothing (no packet, no byte in any row).
fn idle(iv: &Interval) -> bool {
    iv.rows
        .iter()
        .all(|r| r.counts.packets.unwrap_or(0) == 0 && r.counts.bytes.unwrap_or(0) == 0)
}

/// Adds `more` into `rows`, row by row (same scope, id and role).
fn merge(rows: &mut Vec<Row>, more: &[Row]) {
    for m in more {
        match rows
            .iter_mut()
            .find(|r| r.scope == m.scope && r.id == m.id && r.role == m.role)
        {
            Some(r) => {
                r.counts.add(&m.counts);
                r.gauges = m.gauges;
            }
            None => rows.push(m.clone()),
        }
    }
}

/// Stops a run from outside (a signal handler, a live view's `q`, a test):
/// the run ends as soon as it sees it and still reports what it measured.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Cancel::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The flag itself, for loops that poll an `AtomicBool`.
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }

    /// The shared flag (for signal handlers that set it).
    pub fn shared(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

/// `-i` out of bounds: 0 (none) or 0.1 to 3600 seconds.
#[derive(Debug)]
pub struct IntervalError(pub f64);

impl std::fmt::Display for IntervalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0;
        write!(
            f,
            "--interval must be 0 (none) or between 0.1 and 3600 seconds, not {s}"
        )
    }
}

impl std::error::Error for IntervalError {}

/// `-i` checked: 0 = no intervals, else between 0.1 and 3600 seconds.
pub fn interval(s: f64) -> Result<Option<Duration>, IntervalError> {
    if s == 0.0 {
        return Ok(None);
    }
    if !(0.1..=3600.0).contains(&s) {
        return Err(IntervalError(s));
    }
    Ok(Some(Duration::from_secs_f64(s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CountedBy, Counts, Scope};

    fn snap(a: u64, b: u64) -> Vec<Row> {
        [("0", a), ("1", b)]
            .iter()
            .map(|(id, n)| {
                Row::new(Scope::Worker, *id, "tx", CountedBy::Sender).with_counts(Counts {
                    packets: Some(*n),
                    bytes: Some(*n * 64),
                    ..Counts::default()
                })
            })
            .collect()
    }

    #[test]
    fn intervals_add_up_to_the_last_snapshot() {
        let t0 = Instant::now();
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1)));
        assert!(s.due(t0 + Duration::from_secs(1)));
        assert!(s.sample(t0 + Duration::from_secs(1), snap(10, 5)).is_none());
        let first = s.sample(t0 + Duration::from_secs(2), snap(25, 9)).unwrap();
        assert_eq!(first.sums[0].counts.packets, Some(15));
        assert_eq!(s.next_due(), Some(t0 + Duration::from_secs(3)));
        let rest = s.finish(t0 + Duration::from_millis(2500), snap(31, 9));
        assert_eq!(rest.len(), 2);
        let all: u64 = std::iter::once(&first)
            .chain(&rest)
            .map(|i| i.sums[0].counts.packets.unwrap())
            .sum();
        assert_eq!(all, 40);
        assert_eq!(rest[1].rows[0].counts.packets, Some(6));
        assert_eq!((rest[1].start_s, rest[1].end_s), (2.0, 2.5));
    }

    /// Issue 43 item 8: the interval the activity begins in starts at its
    /// begin (set-up is not counted time); the others keep their span.
    #[test]
    fn the_interval_the_activity_begins_in_starts_there() {
        let t0 = Instant::now();
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1)));
        assert!(s.sample(t0 + Duration::from_secs(1), snap(10, 5)).is_none());
        s.begin_at(0.25);
        s.begin_at(0.5);
        let first = s.sample(t0 + Duration::from_secs(2), snap(20, 5)).unwrap();
        assert_eq!((first.start_s, first.end_s), (0.25, 1.0));
        let rest = s.finish(t0 + Duration::from_millis(2500), snap(20, 5));
        assert_eq!((rest[0].start_s, rest[0].end_s), (1.0, 2.0));
        // One interval at the end only: it too starts at the begin.
        let mut s = Sampler::new(t0, None);
        s.begin_at(0.1);
        let only = s.finish(t0 + Duration::from_millis(1100), snap(3, 4));
        assert_eq!((only[0].start_s, only[0].end_s), (0.1, 1.1));
        assert_eq!(only[0].seconds(), 1.0);
        // An activity that ended before the last interval did: no interval
        // runs backwards, the last one keeps its end.
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1)));
        assert!(s.sample(t0 + Duration::from_secs(1), snap(10, 5)).is_none());
        let rest = s.finish(t0 + Duration::from_millis(700), snap(10, 5));
        assert_eq!(rest.len(), 1);
        assert_eq!((rest[0].start_s, rest[0].end_s), (0.0, 1.0));
    }

    /// Issue 43: a receiver's intervals span its summary's time: the
    /// interval of the last arrival ends there, idle ones after it are
    /// left out; idle ones between traffic stand, shown once it resumes.
    #[test]
    fn a_receivers_last_interval_ends_at_its_last_arrival() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1))).hold_idle(10);
        assert!(s.sample_all(at(1000), snap(1000, 0)).is_empty());
        let first = s.sample_all(at(2000), snap(1209, 0));
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].start_s, first[0].end_s), (0.0, 1.0));
        // Idle from here: nothing is shown while it lasts.
        assert!(s.sample_all(at(3000), snap(1209, 0)).is_empty());
        assert!(s.sample_all(at(4000), snap(1209, 0)).is_empty());
        let rest = s.finish(at(1210), snap(1209, 0));
        assert_eq!(rest.len(), 1);
        assert_eq!((rest[0].start_s, rest[0].end_s), (1.0, 1.21));
        assert_eq!(rest[0].sums[0].counts.packets, Some(209));
        // Traffic that resumes after a pause: the idle intervals stand.
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1))).hold_idle(10);
        assert!(s.sample_all(at(1000), snap(10, 0)).is_empty());
        assert!(s.sample_all(at(2000), snap(10, 0)).is_empty());
        let resumed = s.sample_all(at(3000), snap(15, 0));
        let spans: Vec<(f64, f64)> = resumed.iter().map(|i| (i.start_s, i.end_s)).collect();
        assert_eq!(spans, [(0.0, 1.0), (1.0, 2.0)]);
        let rest = s.finish(at(3500), snap(15, 0));
        assert_eq!((rest[0].start_s, rest[0].end_s), (2.0, 3.0));
        let total: u64 = resumed
            .iter()
            .chain(&rest)
            .map(|i| i.sums[0].counts.packets.unwrap())
            .sum();
        assert_eq!(total, 15);
        // Idle longer than the bound: shown after all, then as usual.
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1))).hold_idle(2);
        assert!(s.sample_all(at(1000), snap(5, 0)).is_empty());
        assert!(s.sample_all(at(2000), snap(5, 0)).is_empty());
        assert!(s.sample_all(at(3000), snap(5, 0)).is_empty());
        assert_eq!(s.sample_all(at(4000), snap(5, 0)).len(), 3);
        let rest = s.finish(at(4200), snap(5, 0));
        let spans: Vec<(f64, f64)> = rest.iter().map(|i| (i.start_s, i.end_s)).collect();
        assert_eq!(spans, [(3.0, 4.0), (4.0, 4.2)]);
        // An arrival published after its interval began: no interval
        // shorter than MIN_TAIL.
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1))).hold_idle(10);
        assert!(s.sample_all(at(1000), snap(5, 0)).is_empty());
        assert_eq!(s.sample_all(at(2000), snap(6, 0)).len(), 1);
        let rest = s.finish(at(990), snap(6, 0));
        assert_eq!((rest[0].start_s, rest[0].end_s), (1.0, 1.05));
    }

    #[test]
    fn a_short_tail_joins_the_interval_before() {
        let t0 = Instant::now();
        let mut s = Sampler::new(t0, Some(Duration::from_secs(1)));
        assert!(s.sample(t0 + Duration::from_secs(1), snap(10, 0)).is_none());
        let rest = s.finish(t0 + Duration::from_millis(1010), snap(11, 2));
        assert_eq!(rest.len(), 1);
        assert_eq!((rest[0].start_s, rest[0].end_s), (0.0, 1.01));
        assert_eq!(rest[0].sums[0].counts.packets, Some(13));
    }

    #[test]
    fn no_interval_asked_is_one_interval_at_the_end() {
        let t0 = Instant::now();
        let mut s = Sampler::new(t0, None);
        assert!(!s.due(t0 + Duration::from_secs(100)));
        let rest = s.finish(t0 + Duration::from_secs(3), snap(7, 1));
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].sums[0].counts.bytes, Some(8 * 64));
    }

    #[test]
    fn cancel_is_seen_through_clones() {
        let c = Cancel::new();
        let d = c.clone();
        d.cancel();
        assert!(c.is_cancelled() && c.flag().load(Ordering::Relaxed));
    }
}

/// A repeated event said at most once a second: [`note`](Throttle::note)
/// gives the count since the last time it was said, when it is due.
#[derive(Debug, Clone, Copy, Default)]
pub struct Throttle {
    last: Option<Instant>,
    since: u64,
}

impl Throttle {
    /// The event happened at `now`: `Some(count)` when it should be said
    /// (the first time, and then once a second with how many since).
    pub fn note(&mut self, now: Instant) -> Option<u64> {
        self.since += 1;
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

#[cfg(test)]
mod throttle_tests {
    use super::*;

    #[test]
    fn said_once_a_second_with_the_count_since() {
        let mut t = Throttle::default();
        let t0 = Instant::now();
        let said: Vec<(u64, u64)> = (0..2500u64)
            .filter_map(|ms| t.note(t0 + Duration::from_millis(ms)).map(|n| (ms, n)))
            .collect();
        assert_eq!(said, [(0, 1), (1000, 1000), (2000, 1000)]);
    }
}
