//! When each stream's frames leave: a [`Pacer`] per stream gives its
//! frames' departure times (ns from the run's start) from its rate, its
//! pattern, its start delay and its end, and a [`Schedule`] merges the
//! streams in time order (ties by stream), so one sender walks every
//! stream's departures in the order they fall due.

use super::frames::part_seed;
use super::rng::SplitMix;
use super::{Pattern, Rate, Stream};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One stream's departure times.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: Rate,
    pattern: Pattern,
    start_ns: f64,
    /// No departure at or after this (start delay + duration).
    end_ns: Option<f64>,
    count: Option<u64>,
    /// The stream's own time: the gaps of the frames paced so far (the
    /// time it spent sending, off periods left out).
    clock_ns: f64,
    /// Where the current burst started, on `clock_ns`.
    burst_at_ns: f64,
    paced: u64,
    rng: SplitMix,
}

impl Pacer {
    /// The pacer of `s` at `rate` times `scale` (RFC 2544's trials scale
    /// every stream by one factor).
    pub fn new(s: &Stream, rate: Rate, scale: f64) -> Self {
        let start_ns = s.start_delay.as_nanos() as f64;
        Self {
            rate: rate.scaled(scale),
            pattern: s.pattern,
            start_ns,
            end_ns: s.duration.map(|d| start_ns + d.as_nanos() as f64),
            count: s.count,
            clock_ns: 0.0,
            burst_at_ns: 0.0,
            paced: 0,
            rng: SplitMix::new(part_seed(s.seed, 8)),
        }
    }

    /// The departure (ns from the run's start) of the stream's next frame,
    /// `size` bytes long (FCS included); `None`: the stream has ended.
    pub fn next(&mut self, size: u16) -> Option<u64> {
        if self.count.is_some_and(|c| self.paced >= c) {
            return None;
        }
        let gap = self.rate.gap_ns(size);
        let at = match self.pattern {
            Pattern::Fixed => {
                let at = self.clock_ns;
                self.clock_ns += gap;
                at
            }
            Pattern::Burst { frames } => {
                if self.paced.is_multiple_of(u64::from(frames.max(1))) {
                    self.burst_at_ns = self.clock_ns;
                }
                self.clock_ns += gap;
                self.burst_at_ns
            }
            Pattern::OnOff { on, off } => {
                let (on, off) = (on.as_nanos() as f64, off.as_nanos() as f64);
                let a = self.clock_ns;
                self.clock_ns += gap;
                (a / on).floor() * (on + off) + a % on
            }
            Pattern::Poisson => {
                let at = self.clock_ns;
                self.clock_ns += self.rng.exponential(gap);
                at
            }
        } + self.start_ns;
        if self.end_ns.is_some_and(|end| at >= end) {
            return None;
        }
        self.paced += 1;
        Some(at as u64)
    }
}

/// The next frame to leave: which stream, when (ns from the run's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub at_ns: u64,
    pub stream: usize,
}

/// Every stream's next departure, earliest first.
#[derive(Debug, Clone)]
pub struct Schedule {
    pacers: Vec<Pacer>,
    due: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Schedule {
    /// The streams' pacers, with the size of each one's first frame.
    pub fn new(mut pacers: Vec<Pacer>, first_size: impl Fn(usize) -> u16) -> Self {
        let due = (pacers.iter_mut().enumerate())
            .filter_map(|(i, p)| p.next(first_size(i)).map(|at| Reverse((at, i))))
            .collect();
        Self { pacers, due }
    }

    /// The earliest departure; `None`: every stream has ended.
    pub fn peek(&self) -> Option<Departure> {
        self.due.peek().map(|Reverse((at_ns, stream))| Departure {
            at_ns: *at_ns,
            stream: *stream,
        })
    }

    /// The earliest departure has been sent: its stream's next frame is
    /// `next_size` bytes.
    pub fn advance(&mut self, next_size: u16) {
        if let Some(Reverse((_, i))) = self.due.pop()
            && let Some(at) = self.pacers[i].next(next_size)
        {
            self.due.push(Reverse((at, i)));
        }
    }
}
