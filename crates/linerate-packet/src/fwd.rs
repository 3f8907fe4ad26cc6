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

use crate::backend::{BackendError, BackendKind, Rx, Tx, open_rx_workers, open_tx};
use crate::blast::pin;
use crate::udp::{Gso, Traffic};
use linerate_backend::clock;
use linerate_backend::xsk::XskFwd;
use linerate_gen::template::Framing;
use linerate_run::{CountedBy, Counts, Interval, Row, Sampler, Scope};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;

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

    pub fn json(&self) -> serde_json::Value {
        let n = &self.noisy;
        serde_json::json!({
            "role": "fwd",
            "mode": self.mode.name(),
            "rx_iface": self.rx_iface,
            "tx_iface": self.tx_iface,
            "rx_backend": self.rx_backend,
            "tx_backend": self.tx_backend,
            "backend_notes": self.notes,
            "counted_by": "forwarder: frames its receiving socket took and its sending backend accepted",
            "counts": self.counts,
            "kernel_drops": self.kernel_drops,
            "duration_s": self.duration_s,
            "rx_pps": self.counts.rx as f64 / self.duration_s.max(1e-9),
            "tx_pps": self.counts.tx as f64 / self.duration_s.max(1e-9),
            "intervals": self.intervals.iter().map(Interval::json).collect::<Vec<_>>(),
            "noisy": {
                "fifo_frames": n.fifo,
                "flush_us": n.flush.as_micros() as u64,
                "mem_bytes": n.mem_bytes,
                "reads_per_frame": n.reads,
                "writes_per_frame": n.writes,
                "read_writes_per_frame": n.read_writes,
            },
            "mem_sum": self.mem_sum,
            "workers": self.workers,
            "error": self.error,
        })
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

/// Rewrites one frame in place (through linerate-gen's frame rewriter).
/// Returns false when `5tswap` found no IP header (its MACs are swapped all
/// the same).
pub fn apply(mode: FwdMode, src_mac: [u8; 6], f: &mut [u8]) -> bool {
    use linerate_gen::rewrite::{swap_addresses_and_ports, swap_macs};
    if f.len() < 14 {
        return true;
    }
    match mode {
        FwdMode::Io => true,
        FwdMode::Mac { dst } => {
            f[0..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&src_mac);
            true
        }
        FwdMode::MacSwap => {
            swap_macs(f);
            true
        }
        FwdMode::FiveTupleSwap => {
            swap_macs(f);
            swap_addresses_and_ports(f)
        }
    }
}

/// Per-frame memory work: random reads, writes and read-modify-writes in
/// an area touched once at set-up.
struct MemLoad {
    area: Vec<u64>,
    rng: u64,
    sum: u64,
    reads: u32,
    writes: u32,
    read_writes: u32,
}

impl MemLoad {
    fn new(n: &Noisy) -> Self {
        let words = (n.mem_bytes / 8).max(1);
        Self {
            area: (0..words as u64).collect(),
            rng: 0x9E37_79B9_7F4A_7C15,
            sum: 0,
            reads: n.reads,
            writes: n.writes,
            read_writes: n.read_writes,
        }
    }

    fn next(&mut self) -> usize {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % self.area.len() as u64) as usize
    }

    fn per_frame(&mut self) {
        for _ in 0..self.reads {
            let i = self.next();
            self.sum = self.sum.wrapping_add(self.area[i]);
        }
        for _ in 0..self.writes {
            let i = self.next();
            self.area[i] = self.sum;
        }
        for _ in 0..self.read_writes {
            let i = self.next();
            self.area[i] = self.area[i].wrapping_add(1);
        }
    }
}

/// Frames waiting to be sent: copies in preallocated slots, oldest first.
struct Fifo {
    slots: Vec<Vec<u8>>,
    lens: Vec<usize>,
    /// When each slot's frame arrived (monotonic ns).
    at: Vec<u64>,
    head: usize,
    len: usize,
}

impl Fifo {
    fn new(cap: usize, frame: usize) -> Self {
        Self {
            slots: vec![vec![0u8; frame]; cap],
            lens: vec![0; cap],
            at: vec![0; cap],
            head: 0,
            len: 0,
        }
    }

    fn full(&self) -> bool {
        self.len == self.slots.len()
    }

    fn oldest(&self) -> Option<u64> {
        (self.len > 0).then(|| self.at[self.head])
    }

    /// Copies a frame in (the caller makes room first); returns its slot.
    fn push(&mut self, frame: &[u8], now: u64) -> &mut [u8] {
        let i = (self.head + self.len) % self.slots.len();
        self.slots[i][..frame.len()].copy_from_slice(frame);
        self.lens[i] = frame.len();
        self.at[i] = now;
        self.len += 1;
        &mut self.slots[i][..frame.len()]
    }

    /// Sends up to `n` of the oldest frames; returns (sent, dropped).
    fn send(&mut self, tx: &mut Tx, n: usize) -> (u64, u64) {
        let mut sent = 0u64;
        let mut dropped = 0u64;
        let mut left = n.min(self.len);
        let cap = self.slots.len();
        while left > 0 {
            // a contiguous run from head, at most one backend batch
            let run = left.min(cap - self.head).min(tx.batch()).min(BATCH);
            let frames: [&[u8]; BATCH] = std::array::from_fn(|k| {
                if k < run {
                    &self.slots[self.head + k][..self.lens[self.head + k]]
                } else {
                    &[]
                }
            });
            let (s, d) = send_all(tx, &frames[..run]);
            sent += s;
            dropped += d;
            self.head = (self.head + run) % cap;
            self.len -= run;
            left -= run;
        }
        (sent, dropped)
    }
}

/// Largest run handed to the backend in one call.
const BATCH: usize = 256;
/// Times a full sending backend is retried before the frames are dropped.
const SEND_RETRIES: usize = 200;

/// Hands `frames` to the backend, retrying while it is full for a while;
/// returns (sent, dropped).
fn send_all(tx: &mut Tx, frames: &[&[u8]]) -> (u64, u64) {
    let mut done = 0;
    let mut tries = 0;
    while done < frames.len() && tries < SEND_RETRIES {
        match tx.send(&frames[done..]) {
            Ok(0) => {
                tries += 1;
                std::thread::yield_now();
            }
            Ok(n) => done += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) || e.raw_os_error() == Some(105) =>
            {
                // ENOBUFS (105): the device queue is full
                tries += 1;
                std::thread::yield_now();
            }
            // a frame the backend refuses: count it and go on
            Err(_) => {
                done += 1;
                return (done as u64 - 1, (frames.len() - done + 1) as u64);
            }
        }
    }
    (done as u64, (frames.len() - done) as u64)
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
struct Live {
    rx: AtomicU64,
    tx: AtomicU64,
    tx_dropped: AtomicU64,
    too_long: AtomicU64,
}

impl Live {
    fn publish(&self, c: &FwdCounts) {
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
/// the receiving interface goes away; calls `on_interval` with each
/// interval as it ends.
pub fn fwd(
    cfg: &FwdConfig,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<FwdReport, FwdError> {
    let tx_iface = cfg.tx_iface.clone().unwrap_or_else(|| cfg.rx_iface.clone());
    let iface_err = |iface: &str| {
        let iface = iface.to_string();
        move |source| FwdError::Iface { iface, source }
    };
    let src_mac = linerate_backend::iface::mac(&tx_iface).map_err(iface_err(&tx_iface))?;
    let mtu = linerate_backend::iface::mtu(&tx_iface).map_err(iface_err(&tx_iface))?;
    // Ethernet header and two VLAN tags on top of the MTU.
    let frame_max = mtu + 14 + 8;
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
    let one_iface = tx_iface == cfg.rx_iface;
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
    let workers = cfg.cores.len().max(1);
    let start = Instant::now();
    let total_tx = AtomicU64::new(0);
    let live: Vec<Live> = (0..workers).map(|_| Live::default()).collect();
    let job = Job {
        cfg,
        src_mac,
        frame_max,
        stop,
        total_tx: &total_tx,
        start,
        live: &live,
    };
    // On one interface, AF_XDP forwards in place: one socket per queue
    // receives and sends over one UMEM.
    let mut fallback_note = None;
    if one_iface
        && cfg.noisy.fifo == 0
        && matches!(cfg.backend, BackendKind::AfXdp | BackendKind::Auto)
    {
        let opened = XskFwd::open(&cfg.rx_iface, 4096).and_then(|x| {
            if workers > 1 {
                x.split(workers)
            } else {
                Ok(vec![x])
            }
        });
        match opened {
            Ok(parts) => {
                let zc = parts[0].zero_copy;
                let (outs, ivs) = run_workers(&job, parts, on_interval, forward_in_place);
                let note = format!(
                    "af_xdp on {}: one socket per queue receives and sends back in place over one UMEM ({} mode)",
                    cfg.rx_iface,
                    if zc { "zero-copy" } else { "copy" }
                );
                return Ok(report(
                    &job,
                    ("af_xdp", "af_xdp"),
                    vec![note],
                    (outs, ivs),
                    tx_iface,
                ));
            }
            Err(e) if cfg.backend == BackendKind::AfXdp => {
                return Err(FwdError::Backend(BackendError::Open {
                    iface: cfg.rx_iface.clone(),
                    source: e,
                }));
            }
            Err(e) => fallback_note = Some(format!("af_xdp in place: {e}")),
        }
    }
    let (rxs, rx_note) = open_rx_workers(cfg.backend, &cfg.rx_iface, workers)?;
    let rx_name = rxs[0].name();
    let tx_kind = match cfg.backend {
        BackendKind::Socket => BackendKind::Raw,
        // The receiving AF_XDP socket holds the queue: send with a ring.
        BackendKind::Auto if rx_name == "af_xdp" && tx_iface == cfg.rx_iface => {
            BackendKind::AfPacket
        }
        k => k,
    };
    let traffic = Traffic {
        flows: None,
        framing: Framing::default(),
        macs_given: true,
        gso: Gso::Off,
    };
    let mut notes: Vec<String> = fallback_note.into_iter().chain(rx_note).collect();
    let mut txs = Vec::with_capacity(workers);
    for queue in 0..workers {
        let (tx, note) = open_tx(tx_kind, &tx_iface, frame_max, queue as u32, &traffic)?;
        if queue == 0 {
            notes.extend(note);
        }
        txs.push(tx);
    }
    let tx_name = txs[0].name();
    let pairs: Vec<(Rx, Tx)> = rxs.into_iter().zip(txs).collect();
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
    let outs: Vec<WorkerOut> = std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                s.spawn(move || {
                    if let Some(&c) = cfg.cores.get(i) {
                        pin(c);
                    }
                    work(job, i, item)
                })
            })
            .collect();
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(sampler.wait(Instant::now(), Duration::from_millis(20)));
            let now = Instant::now();
            if sampler.due(now) {
                let rows = (job.live.iter().enumerate())
                    .flat_map(|(w, l)| worker_rows(w, &l.counts()))
                    .collect();
                if let Some(iv) = sampler.sample(now, rows) {
                    on_interval(&iv);
                    intervals.push(iv);
                }
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("fwd worker panicked"))
            .collect()
    });
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

/// Why a worker should stop now, if it should: the caller's stop, the
/// duration, `count`, or the receiving interface gone down or away (an
/// error, checked every 100 ms).
fn should_stop(job: &Job<'_>, next_link_check: &mut Instant) -> Option<Option<String>> {
    let cfg = job.cfg;
    if job.stop.load(Ordering::Relaxed)
        || job.start.elapsed() >= cfg.duration
        || cfg
            .count
            .is_some_and(|n| job.total_tx.load(Ordering::Relaxed) >= n)
    {
        return Some(None);
    }
    if Instant::now() >= *next_link_check {
        *next_link_check = Instant::now() + Duration::from_millis(100);
        let down = match linerate_backend::iface::is_up(&cfg.rx_iface) {
            Ok(true) => None,
            Ok(false) => Some("the interface went down".to_string()),
            Err(e) => Some(format!("the interface is gone ({e})")),
        };
        if let Some(why) = down {
            return Some(Some(format!("receiving on {}: {why}", cfg.rx_iface)));
        }
    }
    None
}

/// One worker forwarding in place through AF_XDP.
fn forward_in_place(job: &Job<'_>, w: usize, mut x: XskFwd) -> WorkerOut {
    let cfg = job.cfg;
    let (src_mac, frame_max) = (job.src_mac, job.frame_max);
    let mut mem = (cfg.noisy.reads + cfg.noisy.writes + cfg.noisy.read_writes > 0)
        .then(|| MemLoad::new(&cfg.noisy));
    let mut c = FwdCounts::default();
    let live = &job.live[w];
    let mut next_link_check = Instant::now();
    let error;
    loop {
        if let Some(e) = should_stop(job, &mut next_link_check) {
            error = e;
            break;
        }
        let (mut too_long, mut not_ip) = (0u64, 0u64);
        let r = x.forward(RECV_WAIT, &mut |frame| {
            if frame.len() > frame_max {
                too_long += 1;
                return false;
            }
            if !apply(cfg.mode, src_mac, frame) {
                not_ip += 1;
            }
            if let Some(m) = mem.as_mut() {
                m.per_frame();
            }
            true
        });
        match r {
            Ok((rx, tx, dropped)) => {
                c.rx += rx;
                c.tx += tx;
                c.too_long += too_long;
                c.not_ip += not_ip;
                c.tx_dropped += dropped - too_long;
                job.total_tx.fetch_add(tx, Ordering::Relaxed);
            }
            Err(e) => {
                error = Some(format!("forwarding on {}: {e}", cfg.rx_iface));
                break;
            }
        }
        live.publish(&c);
    }
    let _ = x.flush();
    let kernel_drops = x.stats().map_or(0, |(d, full, _)| d + full);
    WorkerOut {
        counts: c,
        error,
        kernel_drops,
        mem_sum: std::hint::black_box(mem.map_or(0, |m| m.sum)),
    }
}

/// What every worker shares.
struct Job<'a> {
    cfg: &'a FwdConfig,
    src_mac: [u8; 6],
    frame_max: usize,
    stop: &'a AtomicBool,
    /// Frames sent by all workers (for `count`).
    total_tx: &'a AtomicU64,
    start: Instant,
    /// Each worker's published totals.
    live: &'a [Live],
}

struct WorkerOut {
    counts: FwdCounts,
    error: Option<String>,
    kernel_drops: u64,
    mem_sum: u64,
}

/// Longest a receive call waits for frames.
const RECV_WAIT: Duration = Duration::from_millis(50);

/// One worker's loop: receive, rewrite, hold or send.
fn forward(job: &Job<'_>, w: usize, mut rx: Rx, mut tx: Tx) -> WorkerOut {
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
    let mut next_link_check = Instant::now();
    let mut published = 0u64;
    loop {
        if let Some(e) = should_stop(job, &mut next_link_check) {
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
        let r = rx.recv_within(wait, &mut |frame, _| {
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
            && !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0xb]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xa]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f
    }

    #[test]
    fn modes_rewrite_what_they_say() {
        let me = [2, 0, 0, 0, 0, 0xf];
        let orig = udp4();
        let mut f = orig.clone();
        assert!(apply(FwdMode::Io, me, &mut f));
        assert_eq!(f, orig);
        let mut f = orig.clone();
        apply(
            FwdMode::Mac {
                dst: [2, 0, 0, 0, 0, 0xc],
            },
            me,
            &mut f,
        );
        assert_eq!(&f[0..12], &[2, 0, 0, 0, 0, 0xc, 2, 0, 0, 0, 0, 0xf]);
        assert_eq!(&f[12..], &orig[12..]);
        let mut f = orig.clone();
        apply(FwdMode::MacSwap, me, &mut f);
        assert_eq!(&f[0..6], &orig[6..12]);
        assert_eq!(&f[6..12], &orig[0..6]);
        assert_eq!(&f[12..], &orig[12..]);
        let mut f = orig.clone();
        assert!(apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert_eq!(&f[26..30], &[198, 18, 0, 2]);
        assert_eq!(&f[30..34], &[198, 18, 0, 1]);
        assert_eq!(&f[34..36], &2000u16.to_be_bytes());
        assert_eq!(&f[36..38], &1000u16.to_be_bytes());
        // twice is the identity
        apply(FwdMode::FiveTupleSwap, me, &mut f);
        assert_eq!(f, orig);
    }

    #[test]
    fn five_tuple_swap_handles_vlan_ipv6_fragments_and_non_ip() {
        let me = [0; 6];
        // VLAN-tagged IPv4
        let mut f = udp4();
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert!(apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert_eq!(&f[30..34], &[198, 18, 0, 2]);
        assert_eq!(&f[38..40], &2000u16.to_be_bytes());
        // a later IPv4 fragment: addresses swapped, no ports to swap
        let mut f = udp4();
        f[20] = 0x00;
        f[21] = 0x10;
        apply(FwdMode::FiveTupleSwap, me, &mut f);
        assert_eq!(&f[26..30], &[198, 18, 0, 2]);
        assert_eq!(&f[34..36], &1000u16.to_be_bytes());
        // IPv6 UDP
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14 + 6] = 17;
        f[14 + 8..14 + 24].fill(1);
        f[14 + 24..14 + 40].fill(2);
        f[54..56].copy_from_slice(&[0, 7]);
        f[56..58].copy_from_slice(&[0, 9]);
        assert!(apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert!(f[22..38].iter().all(|&b| b == 2) && f[38..54].iter().all(|&b| b == 1));
        assert_eq!(&f[54..58], &[0, 9, 0, 7]);
        // ARP: only the MACs
        let mut f = udp4();
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = f.clone();
        assert!(!apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert_eq!(&f[12..], &before[12..]);
        // runts are left alone
        let mut tiny = vec![1u8; 10];
        apply(FwdMode::FiveTupleSwap, me, &mut tiny);
        assert_eq!(tiny, vec![1u8; 10]);
    }

    #[test]
    fn a_swap_keeps_the_udp_and_ip_checksums_valid() {
        use linerate_wire::UdpPacket;
        use linerate_wire::checksum::{checksum, fold, pseudo_v4, sum};
        use std::net::Ipv4Addr;
        let mut f = udp4();
        f[16..18].copy_from_slice(&46u16.to_be_bytes()); // IP total length
        f[38..40].copy_from_slice(&26u16.to_be_bytes()); // UDP length
        f[42..60].fill(0x5a);
        let ip_sum = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&ip_sum.to_be_bytes());
        let ip = |f: &[u8], at: usize| Ipv4Addr::new(f[at], f[at + 1], f[at + 2], f[at + 3]);
        let ps = pseudo_v4(ip(&f, 26), ip(&f, 30), 17, 26);
        let udp_sum = !fold(sum(&f[34..60], ps));
        f[40..42].copy_from_slice(&udp_sum.to_be_bytes());
        let verify = |f: &[u8]| {
            UdpPacket::new_checked(&f[34..60])
                .unwrap()
                .verify_checksum(ip(f, 26).into(), ip(f, 30).into())
                && checksum(&f[14..34]) == 0
        };
        assert!(verify(&f));
        apply(FwdMode::FiveTupleSwap, [0; 6], &mut f);
        assert_eq!(ip(&f, 26), Ipv4Addr::new(198, 18, 0, 2));
        assert!(verify(&f), "checksums after the swap");
    }

    #[test]
    fn memory_load_touches_the_area() {
        let mut m = MemLoad::new(&Noisy {
            mem_bytes: 4096,
            reads: 4,
            writes: 2,
            read_writes: 1,
            ..Noisy::default()
        });
        for _ in 0..100 {
            m.per_frame();
        }
        assert_eq!(m.area.len(), 512);
        assert_ne!(m.sum, 0);
    }
}
