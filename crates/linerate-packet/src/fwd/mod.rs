//! `linerate fwd`: receive frames on one interface and send them out of
//! the same one (a reflector) or another (a forwarder), rewritten by mode:
//! `io` (as they came), `mac` (this interface's MAC as source, a given
//! peer MAC as destination), `macswap` (source and destination MAC
//! swapped), `5tswap` (MACs, IP addresses and UDP/TCP ports swapped; the
//! checksums stay valid because a swap does not change a one's-complement
//! sum).
//!
//! It can stand in for a loaded server (DPDK testpmd's noisy VNF): frames
//! wait in a FIFO that is flushed when full or when its oldest frame has
//! waited the flush time, and each frame costs a number of random reads
//! and writes in a memory area of a given size.

mod load;
mod modes;
mod outcome;
mod worker;

pub use modes::apply;

use crate::pool::{Watch, run_pinned};
use linerate_backend::port::Traffic;
use linerate_backend::port::{
    BackendError, BackendKind, Rx, RxHold, Tx, open_fwd, open_rx_workers, open_tx,
};
use linerate_run::{CountedBy, Counts, Interval, Row, Sampler, Scope};
pub use outcome::{FwdOutcome, FwdStart};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;
use worker::{Job, WorkerOut, forward, forward_in_place};

/// How each frame is rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FwdMode {
    Io,
    /// Source MAC: the sending interface's; destination: this one.
    Mac {
        dst: [u8; 6],
    },
    MacSwap,
    FiveTupleSwap,
}

impl FwdMode {
    pub fn name(&self) -> &'static str {
        match self {
            FwdMode::Io => "io",
            FwdMode::Mac { .. } => "mac",
            FwdMode::MacSwap => "macswap",
            FwdMode::FiveTupleSwap => "5tswap",
        }
    }

    /// `--mode` (with `--dst-mac` for mac, and only then).
    pub fn from_flags(mode: &str, dst_mac: Option<&str>) -> Result<Self, FwdError> {
        let bad = |s: String| Err(FwdError::Config(s));
        let m = match mode {
            "io" => FwdMode::Io,
            "mac" => {
                let Some(s) = dst_mac else {
                    return bad("--mode mac needs --dst-mac (the next hop's MAC)".into());
                };
                let Some(m) = linerate_wire::MacAddr::parse(s) else {
                    return bad(format!("'{s}' is not a MAC address"));
                };
                FwdMode::Mac { dst: m.0 }
            }
            "macswap" => FwdMode::MacSwap,
            "5tswap" => FwdMode::FiveTupleSwap,
            other => {
                return bad(format!(
                    "--mode is io, mac, macswap or 5tswap, not '{other}'"
                ));
            }
        };
        if dst_mac.is_some() && !matches!(m, FwdMode::Mac { .. }) {
            return bad("--dst-mac only goes with --mode mac".into());
        }
        Ok(m)
    }
}

/// A loaded server's behaviour (all zero: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Noisy {
    /// Frames held before sending (0: sent as each batch arrives).
    pub fifo: usize,
    /// Longest a frame waits in the FIFO.
    pub flush: Duration,
    /// Size of the memory area the per-frame reads and writes land in.
    pub mem_bytes: usize,
    pub reads: u32,
    pub writes: u32,
    /// Read-modify-writes.
    pub read_writes: u32,
}

#[derive(Debug, Clone)]
pub struct FwdConfig {
    pub rx_iface: String,
    /// None: send back out of `rx_iface`.
    pub tx_iface: Option<String>,
    pub mode: FwdMode,
    pub backend: BackendKind,
    /// The loopback ports `backend` loopback opens (the caller's
    /// registry; empty for kernel interfaces).
    pub wires: linerate_backend::port::Wires,
    pub duration: Duration,
    /// Stop once this many frames were forwarded.
    pub count: Option<u64>,
    pub noisy: Noisy,
    /// One pinned forwarding worker per listed CPU, each with its own
    /// receiving and sending socket (the kernel spreads frames over them by
    /// queue or PACKET_FANOUT hash); empty: one unpinned worker.
    pub cores: Vec<usize>,
    /// Interval reports while forwarding (`None`: one at the end).
    pub interval: Option<Duration>,
    /// With AF_XDP, the frames taken from the kernel to forward (default:
    /// UDP only, so ARP, ping and TCP to this host keep working).
    pub take: linerate_backend::port::RxFilter,
}

impl FwdConfig {
    /// The configuration, its loaded-server flags checked (a zero
    /// duration: one that was not a number of seconds above zero).
    pub fn checked(self) -> Result<Self, FwdError> {
        let bad = |s: &str| Err(FwdError::Config(s.into()));
        if self.duration.is_zero() {
            return bad("--duration must be a number of seconds above zero");
        }
        let n = &self.noisy;
        if n.reads + n.writes + n.read_writes > 0 && n.mem_bytes == 0 {
            return bad("--reads/--writes/--read-writes need a memory area (--mem-mb)");
        }
        if n.fifo > 0 && n.flush.is_zero() {
            return bad("--fifo needs --flush-us (how long a frame may wait)");
        }
        Ok(self)
    }
}

#[derive(Debug, Error)]
pub enum FwdError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{0}")]
    Config(String),
    #[error("interface {iface}: {source}")]
    Iface { iface: String, source: io::Error },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FwdCounts {
    /// Frames received (this host's own transmissions excluded).
    pub rx: u64,
    /// Frames the sending backend took.
    pub tx: u64,
    /// Frames dropped because the sending backend stayed full or refused them.
    pub tx_dropped: u64,
    /// Frames longer than the sending interface's MTU allows (dropped).
    pub too_long: u64,
    /// 5tswap: frames that were not IPv4/IPv6 (only their MACs swapped).
    pub not_ip: u64,
    /// Most frames the FIFO held at once.
    pub fifo_peak: u64,
}

#[derive(Debug)]
pub struct FwdReport {
    pub rx_backend: &'static str,
    pub tx_backend: &'static str,
    pub notes: Vec<String>,
    pub mode: FwdMode,
    pub noisy: Noisy,
    pub counts: FwdCounts,
    /// Frames the kernel dropped before the receiving socket took them.
    pub kernel_drops: u64,
    pub duration_s: f64,
    /// Received and sent per interval, per worker and summed.
    pub intervals: Vec<Interval>,
    /// Why forwarding stopped early (the counts up to then stand).
    pub error: Option<String>,
    /// The sum the per-frame memory reads produced (printed so the work
    /// cannot be optimised away).
    pub mem_sum: u64,
    pub rx_iface: String,
    pub tx_iface: String,
    /// Forwarding workers, and each one's counts.
    pub workers: Vec<FwdCounts>,
}

impl FwdReport {
    /// Each worker's totals as the run's end rows.
    pub fn rows(&self) -> Vec<Row> {
        self.workers
            .iter()
            .enumerate()
            .flat_map(|(w, c)| worker_rows(w, c))
            .collect()
    }

    /// The forwarder's document (`-J`'s, without the doctor's summary).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(outcome::FwdDoc::of(self)).unwrap_or_default()
    }
}

impl FwdCounts {
    fn absorb(&mut self, o: &FwdCounts) {
        self.rx += o.rx;
        self.tx += o.tx;
        self.tx_dropped += o.tx_dropped;
        self.too_long += o.too_long;
        self.not_ip += o.not_ip;
        self.fifo_peak = self.fifo_peak.max(o.fifo_peak);
    }
}

/// A worker's figures as rows: what it received and what it sent on.
fn worker_rows(w: usize, c: &FwdCounts) -> [Row; 2] {
    [
        Row::new(Scope::Worker, w.to_string(), "rx", CountedBy::Forwarder).with_counts(Counts {
            packets: Some(c.rx),
            errors: Some(c.too_long),
            ..Counts::default()
        }),
        Row::new(Scope::Worker, w.to_string(), "tx", CountedBy::Forwarder).with_counts(Counts {
            packets: Some(c.tx),
            errors: Some(c.tx_dropped),
            ..Counts::default()
        }),
    ]
}

/// A worker's running totals, published as it goes (single writer).
#[derive(Debug, Default)]
pub(super) struct RunningTotals {
    rx: AtomicU64,
    tx: AtomicU64,
    tx_dropped: AtomicU64,
    too_long: AtomicU64,
}

impl RunningTotals {
    pub(super) fn publish(&self, c: &FwdCounts) {
        self.rx.store(c.rx, Ordering::Relaxed);
        self.tx.store(c.tx, Ordering::Relaxed);
        self.tx_dropped.store(c.tx_dropped, Ordering::Relaxed);
        self.too_long.store(c.too_long, Ordering::Relaxed);
    }

    fn counts(&self) -> FwdCounts {
        FwdCounts {
            rx: self.rx.load(Ordering::Relaxed),
            tx: self.tx.load(Ordering::Relaxed),
            tx_dropped: self.tx_dropped.load(Ordering::Relaxed),
            too_long: self.too_long.load(Ordering::Relaxed),
            ..FwdCounts::default()
        }
    }
}

/// Forwards until the duration ends, `count` frames went, `stop` is set or
/// the receiving interface goes away; calls `on_ready` with the receiving
/// and sending backends' names once every socket is open (frames sent from
/// then on are forwarded) and `on_interval` with each interval as it ends.
pub fn fwd(
    cfg: &FwdConfig,
    stop: &AtomicBool,
    on_ready: &mut dyn FnMut(&str, &str),
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<FwdReport, FwdError> {
    let tx_iface = cfg.tx_iface.clone().unwrap_or_else(|| cfg.rx_iface.clone());
    let iface_err = |iface: &str| {
        let iface = iface.to_string();
        move |source| FwdError::Iface { iface, source }
    };
    let src_mac = linerate_backend::port::port_mac(cfg.backend, &cfg.wires, &tx_iface)
        .map_err(iface_err(&tx_iface))?;
    let mtu = linerate_backend::port::port_mtu(cfg.backend, &cfg.wires, &tx_iface)
        .map_err(iface_err(&tx_iface))?;
    // Ethernet header and two VLAN tags on top of the MTU.
    let frame_max = mtu + 14 + 8;
    let one_iface = tx_iface == cfg.rx_iface;
    check(cfg, one_iface)?;
    let workers = cfg.cores.len().max(1);
    let start = Instant::now();
    let total_tx = AtomicU64::new(0);
    let live: Vec<RunningTotals> = (0..workers).map(|_| RunningTotals::default()).collect();
    let job = Job {
        cfg,
        src_mac,
        frame_max,
        stop,
        total_tx: &total_tx,
        start,
        live: &live,
    };
    // Where the backend can (AF_XDP on one interface, DPDK), frames are
    // forwarded in place: received, rewritten and sent from one buffer.
    let mut fallback_note = None;
    if cfg.noisy.fifo == 0
        && let Some(opened) = open_fwd(
            cfg.backend,
            &cfg.wires,
            &cfg.rx_iface,
            &tx_iface,
            workers,
            cfg.take,
        )
    {
        match opened {
            Ok((parts, notes)) => {
                let name = parts[0].name();
                on_ready(name, name);
                let (outs, ivs) = run_workers(&job, parts, on_interval, forward_in_place);
                return Ok(report(&job, (name, name), notes, (outs, ivs), tx_iface));
            }
            Err(e) if cfg.backend != BackendKind::Auto => return Err(FwdError::Backend(e)),
            Err(e) => fallback_note = Some(format!("af_xdp in place: {}", in_place_why(e))),
        }
    }
    // (Each frame on at once: the next hop measures its time here.)
    let hold = RxHold::Prompt;
    let (rxs, mut notes) = open_rx_workers(
        cfg.backend,
        &cfg.wires,
        &cfg.rx_iface,
        workers,
        cfg.take,
        hold,
    )
    .map(|(r, n)| (r, fallback_note.into_iter().chain(n).collect::<Vec<_>>()))?;
    let txs = open_senders(cfg, rxs[0].holds_queue(), &tx_iface, frame_max, &mut notes)?;
    let rx_name = rxs[0].name();
    let tx_name = txs[0].name();
    let pairs: Vec<(Rx, Tx)> = rxs.into_iter().zip(txs).collect();
    on_ready(rx_name, tx_name);
    let (outs, ivs) = run_workers(&job, pairs, on_interval, |job, w, (rx, tx)| {
        forward(job, w, rx, tx)
    });
    Ok(report(
        &job,
        (rx_name, tx_name),
        notes,
        (outs, ivs),
        tx_iface,
    ))
}

/// Why forwarding in place did not open, without the interface the
/// fallback note names anyway.
fn in_place_why(e: BackendError) -> String {
    match e {
        BackendError::Open { source, .. } => source.to_string(),
        e => e.to_string(),
    }
}

/// Refuses what cannot work before anything is opened.
fn check(cfg: &FwdConfig, one_iface: bool) -> Result<(), FwdError> {
    let off = linerate_backend::cpu::not_allowed(&cfg.cores);
    if !off.is_empty() {
        return Err(FwdError::Config(format!(
            "CPU(s) {off:?} in --cores are not online or not allowed for this process"
        )));
    }
    if cfg.noisy.fifo > 1 << 20 {
        return Err(FwdError::Config(format!(
            "a FIFO of {} frames is more than 1048576",
            cfg.noisy.fifo
        )));
    }
    if cfg.noisy.mem_bytes > 1 << 34 {
        return Err(FwdError::Config(
            "the memory area is limited to 16 GiB".into(),
        ));
    }
    if cfg.noisy.fifo > 0 && cfg.noisy.flush.is_zero() {
        return Err(FwdError::Config(
            "a FIFO needs a flush time above zero (--flush-us)".into(),
        ));
    }
    if cfg.backend == BackendKind::AfXdp && one_iface && cfg.noisy.fifo > 0 {
        return Err(FwdError::Backend(BackendError::Unsupported(
            "af_xdp on one interface forwards each frame in place as it arrives and cannot hold frames in a FIFO: use --backend auto (AF_XDP in, af_packet out) or af_packet with --fifo".into(),
        )));
    }
    if cfg.backend == BackendKind::Udp {
        return Err(FwdError::Backend(BackendError::Unsupported(
            "socket:udp cannot forward frames as they are: use socket (raw frames), af_packet or af_xdp".into(),
        )));
    }
    Ok(())
}

/// One sending backend per worker on `tx_iface`; the first one's note is
/// added to `notes`.
fn open_senders(
    cfg: &FwdConfig,
    rx_holds_queue: bool,
    tx_iface: &str,
    frame_max: usize,
    notes: &mut Vec<String>,
) -> Result<Vec<Tx>, FwdError> {
    let tx_kind = match cfg.backend {
        BackendKind::Socket => BackendKind::Raw,
        // The receiving AF_XDP socket holds the queue: send with a ring.
        BackendKind::Auto if rx_holds_queue && tx_iface == cfg.rx_iface => BackendKind::AfPacket,
        k => k,
    };
    let traffic = Traffic::raw("fwd sends the frames it received");
    let workers = cfg.cores.len().max(1);
    let mut txs = Vec::with_capacity(workers);
    for queue in 0..workers {
        let (tx, note) = open_tx(
            tx_kind,
            &cfg.wires,
            tx_iface,
            frame_max,
            queue as u32,
            &traffic,
        )?;
        if queue == 0 {
            notes.extend(note);
        }
        txs.push(tx);
    }
    Ok(txs)
}

/// Runs one worker per item, each pinned to its CPU of `cfg.cores`, and
/// reports intervals from their published totals while they run.
fn run_workers<T: Send>(
    job: &Job<'_>,
    items: Vec<T>,
    on_interval: &mut dyn FnMut(&Interval),
    work: impl Fn(&Job<'_>, usize, T) -> WorkerOut + Sync,
) -> (Vec<WorkerOut>, Vec<Interval>) {
    let cfg = job.cfg;
    let mut sampler = Sampler::new(job.start, cfg.interval);
    let mut intervals = Vec::new();
    let outs = run_pinned(
        &cfg.cores,
        items,
        |i, item, pinned| {
            let mut out = work(job, i, item);
            if let Err(e) = pinned {
                out.error = out.error.or(Some(e));
            }
            out
        },
        Watch {
            sampler: &mut sampler,
            rows: &mut |_| {
                (job.live.iter().enumerate())
                    .flat_map(|(w, l)| worker_rows(w, &l.counts()))
                    .collect()
            },
            on_interval,
            kept: &mut intervals,
            begin: None,
        },
    );
    let outs: Vec<WorkerOut> = outs
        .into_iter()
        .map(|o| o.expect("fwd worker panicked"))
        .collect();
    let rows = (outs.iter().enumerate())
        .flat_map(|(w, o)| worker_rows(w, &o.counts))
        .collect();
    for iv in sampler.finish(Instant::now(), rows) {
        on_interval(&iv);
        intervals.push(iv);
    }
    (outs, intervals)
}

/// Merges the workers' results.
fn report(
    job: &Job<'_>,
    (rx_backend, tx_backend): (&'static str, &'static str),
    notes: Vec<String>,
    (outs, intervals): (Vec<WorkerOut>, Vec<Interval>),
    tx_iface: String,
) -> FwdReport {
    let cfg = job.cfg;
    let mut counts = FwdCounts::default();
    let (mut kernel_drops, mut mem_sum, mut error) = (0, 0u64, None);
    for o in &outs {
        counts.absorb(&o.counts);
        kernel_drops += o.kernel_drops;
        mem_sum = mem_sum.wrapping_add(o.mem_sum);
        if error.is_none() {
            error.clone_from(&o.error);
        }
    }
    FwdReport {
        rx_backend,
        tx_backend,
        notes,
        mode: cfg.mode,
        noisy: cfg.noisy,
        counts,
        kernel_drops,
        duration_s: job.start.elapsed().as_secs_f64(),
        intervals,
        error,
        mem_sum,
        rx_iface: cfg.rx_iface.clone(),
        tx_iface,
        workers: outs.iter().map(|o| o.counts).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said<T: std::fmt::Debug>(r: Result<T, FwdError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn the_mode_takes_a_mac_only_when_it_is_mac() {
        assert_eq!(
            FwdMode::from_flags("5tswap", None).unwrap(),
            FwdMode::FiveTupleSwap
        );
        assert_eq!(
            FwdMode::from_flags("mac", Some("02:00:00:00:00:01")).unwrap(),
            FwdMode::Mac {
                dst: [2, 0, 0, 0, 0, 1]
            }
        );
        assert_eq!(
            said(FwdMode::from_flags("mac", None)),
            "--mode mac needs --dst-mac (the next hop's MAC)"
        );
        assert_eq!(
            said(FwdMode::from_flags("io", Some("02:00:00:00:00:01"))),
            "--dst-mac only goes with --mode mac"
        );
        assert_eq!(
            said(FwdMode::from_flags("swap", None)),
            "--mode is io, mac, macswap or 5tswap, not 'swap'"
        );
    }

    #[test]
    fn a_loaded_server_needs_its_memory_and_flush_time() {
        let cfg = FwdConfig {
            rx_iface: "lo".into(),
            tx_iface: None,
            mode: FwdMode::Io,
            backend: BackendKind::Auto,
            wires: Default::default(),
            duration: Duration::from_secs(1),
            count: None,
            noisy: Noisy::default(),
            cores: Vec::new(),
            interval: None,
            take: linerate_backend::port::RxFilter::Probes,
        };
        assert!(cfg.clone().checked().is_ok());
        let zero = FwdConfig {
            duration: Duration::ZERO,
            ..cfg.clone()
        };
        assert_eq!(
            said(zero.checked()),
            "--duration must be a number of seconds above zero"
        );
        let reads = FwdConfig {
            noisy: Noisy {
                reads: 1,
                ..Noisy::default()
            },
            ..cfg.clone()
        };
        assert!(said(reads.checked()).starts_with("--reads/--writes/--read-writes need"));
        let fifo = FwdConfig {
            noisy: Noisy {
                fifo: 8,
                ..Noisy::default()
            },
            ..cfg
        };
        assert_eq!(
            said(fifo.checked()),
            "--fifo needs --flush-us (how long a frame may wait)"
        );
    }
}
