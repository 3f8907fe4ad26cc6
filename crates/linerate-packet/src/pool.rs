//! The pinned worker pool blast, the sink and fwd run on: one thread per
//! item, each pinned to its CPU of `--cores` (in order; none left: not
//! pinned), while the calling thread closes an interval each time one is
//! due from the workers' published totals.

use linerate_run::{Interval, Row, Sampler};
use std::time::Instant;

/// How the pool reports while its workers run: the sampler, the live rows
/// (asked with a test of whether any worker still runs, for the sink's
/// hand-shake with its workers), and where each closed interval goes.
pub(crate) struct Watch<'a> {
    pub sampler: &'a mut Sampler,
    pub rows: &'a mut dyn FnMut(&dyn Fn() -> bool) -> Vec<Row>,
    pub on_interval: &'a mut dyn FnMut(&Interval),
    pub kept: &'a mut Vec<Interval>,
    /// When the counted activity began (s from the sampler's start), once
    /// it has: the interval it falls in starts there (blast's first frame).
    pub begin: Option<&'a dyn Fn() -> Option<f64>>,
}

/// A run's start on both clocks: `Instant` (the sampler's) and the
/// monotonic ns the workers stamp their first and last frames with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunClock {
    pub start: Instant,
    start_ns: u64,
}

impl RunClock {
    pub fn now() -> Self {
        RunClock {
            start: Instant::now(),
            start_ns: linerate_backend::clock::monotonic_ns(),
        }
    }

    /// Seconds from the start to monotonic `ns`.
    pub fn secs(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    /// Monotonic `ns` as an `Instant`.
    pub fn instant(&self, ns: u64) -> Instant {
        self.start + std::time::Duration::from_nanos(ns.saturating_sub(self.start_ns))
    }
}

/// Runs `work(index, item, pinned)` on a thread of its own for each item,
/// pinned to `cores[index]` where there is one (`pinned` says whether that
/// worked; each mode decides what a worker that could not be pinned does),
/// and watches them until all have finished. Returns each worker's
/// output in item order, `None` for a worker that panicked.
pub(crate) fn run_pinned<T: Send, R: Send>(
    cores: &[usize],
    items: Vec<T>,
    work: impl Fn(usize, T, Result<(), String>) -> R + Sync,
    watch: Watch<'_>,
) -> Vec<Option<R>> {
    std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let cpu = cores.get(i).copied();
                s.spawn(move || {
                    let pinned = cpu.map_or(Ok(()), linerate_backend::cpu::pin_worker);
                    work(i, item, pinned)
                })
            })
            .collect();
        let running = || handles.iter().any(|h| !h.is_finished());
        watch.sampler.watch(
            running,
            || (watch.rows)(&running),
            watch.begin,
            watch.on_interval,
            watch.kept,
        );
        handles.into_iter().map(|h| h.join().ok()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_run::{CountedBy, Counts, Scope};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn every_item_runs_once_in_order_and_intervals_follow_the_totals() {
        let done: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
        let start = Instant::now();
        let mut sampler = Sampler::new(start, Some(Duration::from_millis(50)));
        let mut kept = Vec::new();
        let mut seen = 0;
        let totals = || {
            let packets = done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
            vec![
                Row::new(Scope::Sum, "all", "tx", CountedBy::Sender).with_counts(Counts {
                    packets: Some(packets),
                    ..Counts::default()
                }),
            ]
        };
        let out = run_pinned(
            &[],
            vec![10u64, 20, 30],
            |i, n, pinned| {
                assert_eq!(pinned, Ok(()), "no cores: not pinned, no error");
                for _ in 0..n {
                    done[i].fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
                (i, n * 2)
            },
            Watch {
                sampler: &mut sampler,
                rows: &mut |_running| totals(),
                on_interval: &mut |_| seen += 1,
                kept: &mut kept,
                begin: None,
            },
        );
        assert_eq!(out, vec![Some((0, 20)), Some((1, 40)), Some((2, 60))]);
        assert_eq!(seen, kept.len());
        assert!(!kept.is_empty(), "150 ms of work at 50 ms intervals");
        // With the last interval closed on the final totals, the
        // intervals add up to exactly what the workers did.
        kept.extend(sampler.finish(Instant::now(), totals()));
        let counted: u64 = kept
            .iter()
            .map(|iv| iv.rows[0].counts.packets.unwrap())
            .sum();
        assert_eq!(counted, 60, "intervals count what was done");
    }

    #[test]
    fn a_worker_that_panics_is_none_and_the_rest_finish() {
        let mut sampler = Sampler::new(Instant::now(), None);
        let out = run_pinned(
            &[],
            vec![1, 2],
            |_, n, _| {
                assert!(n != 2, "worker 2 fails");
                n
            },
            Watch {
                sampler: &mut sampler,
                rows: &mut |_| Vec::new(),
                on_interval: &mut |_| {},
                kept: &mut Vec::new(),
                begin: None,
            },
        );
        assert_eq!(out, vec![Some(1), None]);
    }

    #[test]
    fn a_cpu_that_does_not_exist_is_told_to_the_worker() {
        let mut sampler = Sampler::new(Instant::now(), None);
        let out = run_pinned(
            &[1 << 20],
            vec![()],
            |_, (), pinned| pinned,
            Watch {
                sampler: &mut sampler,
                rows: &mut |_| Vec::new(),
                on_interval: &mut |_| {},
                kept: &mut Vec::new(),
                begin: None,
            },
        );
        let err = out[0].clone().unwrap().unwrap_err();
        assert!(err.contains("CPU 1048576"), "{err}");
    }
}
