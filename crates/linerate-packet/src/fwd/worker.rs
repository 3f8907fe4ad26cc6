//! One forwarding worker: receive, rewrite, hold or send, until told to
//! stop; its running totals published for the interval reports.

use super::load::{BATCH, Fifo, MemLoad};
use super::{FwdConfig, FwdCounts, FwdMode, RunningTotals, modes::apply};
use linerate_backend::clock;
use linerate_backend::port::{Fwd, Rx, Tx, recv_idle};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A worker's ends in time: the end of the run's duration and the next
/// look at the receiving interface (CLOCK_MONOTONIC_COARSE ns: a compare
/// per burst, no `Instant` arithmetic, and no time counter read; a run
/// ends at most a tick late).
pub(super) struct Ends {
    end_ns: u64,
    next_link_check: u64,
}

impl Ends {
    pub(super) fn new(job: &Job<'_>) -> Self {
        let now = clock::coarse_ns();
        let left = job.cfg.duration.saturating_sub(job.start.elapsed());
        Ends {
            end_ns: now.saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)),
            next_link_check: now,
        }
    }
}

/// How often a worker looks at whether the receiving interface is up.
const LINK_CHECK_NS: u64 = 100_000_000;

/// Why a worker should stop now, if it should: the caller's stop, the
/// duration, `count`, or the receiving interface gone down or away (an
/// error, checked every 100 ms).
pub(super) fn should_stop(job: &Job<'_>, ends: &mut Ends) -> Option<Option<String>> {
    let cfg = job.cfg;
    // One read of the coarse clock a burst: the deadlines here need no
    // better than a tick.
    let now = clock::coarse_ns();
    if job.stop.load(Ordering::Relaxed)
        || now >= ends.end_ns
        || cfg
            .count
            .is_some_and(|n| job.total_tx.load(Ordering::Relaxed) >= n)
    {
        return Some(None);
    }
    if now >= ends.next_link_check {
        ends.next_link_check = now + LINK_CHECK_NS;
        if let Some(why) = linerate_backend::port::link_lost(cfg.backend, &cfg.wires, &cfg.rx_iface)
        {
            return Some(Some(why));
        }
    }
    None
}

/// One worker forwarding in place (AF_XDP, DPDK): the mode chosen once,
/// so each frame's rewrite is inlined into the receive loop. Never inlined
/// itself: `linerate-bench instr` counts the instructions spent in it.
#[inline(never)]
pub(super) fn forward_in_place(job: &Job<'_>, w: usize, x: Fwd) -> WorkerOut {
    let n = &job.cfg.noisy;
    if n.reads + n.writes + n.read_writes > 0 {
        let mut m = MemLoad::new(n);
        let mut out = by_mode(job, w, x, || m.per_frame());
        out.mem_sum = std::hint::black_box(m.sum);
        out
    } else if job.cfg.mode == FwdMode::Io && x.can_forward_untouched() {
        // io with nothing to do a frame but check its length: each burst
        // handed back whole.
        let frame_max = job.frame_max;
        forward_bursts(job, w, x, |x| {
            match x.forward_untouched(RECV_WAIT, frame_max) {
                Ok((rx, tx, dropped, too_long)) => (Ok((rx, tx, dropped)), too_long, 0),
                Err(e) => (Err(e), 0, 0),
            }
        })
    } else {
        by_mode(job, w, x, || {})
    }
}

/// [`forward_with`] with the mode's rewrite and `load` (the loaded-server
/// simulation's memory work, or nothing) after each frame.
#[inline(always)]
fn by_mode(job: &Job<'_>, w: usize, x: Fwd, load: impl FnMut()) -> WorkerOut {
    let src_mac = job.src_mac;
    match job.cfg.mode {
        FwdMode::MacSwap => forward_with(job, w, x, load, move |f: &mut [u8]| {
            super::modes::swap_macs_unicast(f, src_mac);
            true
        }),
        FwdMode::Io => forward_with(job, w, x, load, |_: &mut [u8]| true),
        mode => forward_with(job, w, x, load, move |f: &mut [u8]| apply(mode, src_mac, f)),
    }
}

/// [`forward_in_place`] with the rewrite `rewrite` (false: no IP header
/// found), and `load` after each frame.
#[inline(always)]
fn forward_with(
    job: &Job<'_>,
    w: usize,
    x: Fwd,
    mut load: impl FnMut(),
    rewrite: impl Fn(&mut [u8]) -> bool,
) -> WorkerOut {
    let frame_max = job.frame_max;
    forward_bursts(job, w, x, |x| {
        let (mut too_long, mut not_ip) = (0u64, 0u64);
        let r = x.forward(RECV_WAIT, &mut |frame| {
            if frame.len() > frame_max {
                too_long += 1;
                return false;
            }
            if !rewrite(frame) {
                not_ip += 1;
            }
            load();
            true
        });
        (r, too_long, not_ip)
    })
}

/// The worker's loop over bursts until it should stop: `burst` forwards
/// one and returns (received, sent, dropped) with the frames of them
/// too long and without an IP header.
#[inline(always)]
fn forward_bursts(
    job: &Job<'_>,
    w: usize,
    mut x: Fwd,
    mut burst: impl FnMut(&mut Fwd) -> (std::io::Result<(u64, u64, u64)>, u64, u64),
) -> WorkerOut {
    let cfg = job.cfg;
    let mut c = FwdCounts::default();
    let live = &job.live[w];
    let mut ends = Ends::new(job);
    let error;
    loop {
        if let Some(e) = should_stop(job, &mut ends) {
            error = e;
            break;
        }
        let (r, too_long, not_ip) = burst(&mut x);
        match r {
            Ok((rx, tx, dropped)) => {
                c.rx += rx;
                c.tx += tx;
                c.too_long += too_long;
                c.not_ip += not_ip;
                c.tx_dropped += dropped - too_long;
                // (the workers' sum is read for `count` alone: no shared
                // read-modify-write a burst without one)
                if cfg.count.is_some() {
                    job.total_tx.fetch_add(tx, Ordering::Relaxed);
                }
            }
            Err(e) => {
                error = Some(format!("forwarding on {}: {e}", cfg.rx_iface));
                break;
            }
        }
        live.publish(&c);
    }
    let _ = x.finish();
    let kernel_drops = x.drops();
    WorkerOut {
        counts: c,
        error,
        kernel_drops,
        mem_sum: 0,
    }
}

/// What every worker shares.
pub(super) struct Job<'a> {
    pub(super) cfg: &'a FwdConfig,
    pub(super) src_mac: [u8; 6],
    pub(super) frame_max: usize,
    pub(super) stop: &'a AtomicBool,
    /// Frames sent by all workers (for `count`).
    pub(super) total_tx: &'a AtomicU64,
    pub(super) start: Instant,
    /// Each worker's published totals.
    pub(super) live: &'a [RunningTotals],
}

pub(super) struct WorkerOut {
    pub(super) counts: FwdCounts,
    pub(super) error: Option<String>,
    pub(super) kernel_drops: u64,
    pub(super) mem_sum: u64,
}

/// Longest a receive call waits for frames.
const RECV_WAIT: Duration = Duration::from_millis(50);

/// One worker's loop: receive, rewrite, hold or send.
pub(super) fn forward(job: &Job<'_>, w: usize, mut rx: Rx, mut tx: Tx) -> WorkerOut {
    let cfg = job.cfg;
    let (src_mac, frame_max) = (job.src_mac, job.frame_max);
    let mut fifo = Fifo::new(cfg.noisy.fifo.max(BATCH), frame_max);
    let noisy_fifo = cfg.noisy.fifo > 0;
    let mut mem = (cfg.noisy.reads + cfg.noisy.writes + cfg.noisy.read_writes > 0)
        .then(|| MemLoad::new(&cfg.noisy));
    let flush_ns = cfg.noisy.flush.as_nanos() as u64;
    let mut c = FwdCounts::default();
    let live = &job.live[w];
    let error;
    let mut ends = Ends::new(job);
    let mut published = 0u64;
    loop {
        if let Some(e) = should_stop(job, &mut ends) {
            error = e;
            break;
        }
        // Wait no longer than the oldest held frame may still wait.
        let now = clock::monotonic_ns();
        let wait = match fifo.oldest() {
            Some(t) if noisy_fifo => {
                Duration::from_nanos((t + flush_ns).saturating_sub(now)).min(RECV_WAIT)
            }
            _ => RECV_WAIT,
        };
        let r = rx.recv_within(wait, &mut |frame: &[u8], _| {
            c.rx += 1;
            if frame.len() > frame_max {
                c.too_long += 1;
                return;
            }
            if fifo.full() {
                // the oldest burst goes to make room
                let burst = tx.batch().min(BATCH);
                let (s, d) = fifo.send(&mut tx, burst);
                c.tx += s;
                c.tx_dropped += d;
            }
            let slot = fifo.push(frame, now);
            if !apply(cfg.mode, src_mac, slot) {
                c.not_ip += 1;
            }
            if let Some(m) = mem.as_mut() {
                m.per_frame();
            }
            c.fifo_peak = c.fifo_peak.max(fifo.len as u64);
        });
        if let Err(e) = r
            && !recv_idle(&e)
        {
            error = Some(format!("receiving on {}: {e}", cfg.rx_iface));
            break;
        }
        let due = !noisy_fifo
            || fifo
                .oldest()
                .is_some_and(|t| clock::monotonic_ns().saturating_sub(t) >= flush_ns);
        if due {
            let (s, d) = fifo.send(&mut tx, fifo.len);
            c.tx += s;
            c.tx_dropped += d;
        }
        job.total_tx.fetch_add(c.tx - published, Ordering::Relaxed);
        published = c.tx;
        live.publish(&c);
    }
    // What is still held goes out before the end.
    let (s, d) = fifo.send(&mut tx, fifo.len);
    c.tx += s;
    c.tx_dropped += d;
    let _ = tx.finish();
    WorkerOut {
        counts: c,
        error,
        kernel_drops: rx.drops(),
        mem_sum: std::hint::black_box(mem.map_or(0, |m| m.sum)),
    }
}
