//! Receiving and counting: every frame with a linerate probe is accounted
//! per flow (loss, reordering, duplicates) and its latency recorded.

use crate::pool::{RunClock, Watch, run_pinned};
use linerate_backend::port::{
    BackendError, BackendKind, Rx, RxCapabilities, RxHold, open_rx_workers, recv_idle,
};
use linerate_backend::{FrameSink, Frames, clock};
use linerate_run::{CountedBy, Counts, Interval, Row, Sampler, Scope};
use linerate_traffic::SinkCounts;
use linerate_traffic::accounting::{FrameRun, IntervalLatency};
use linerate_traffic::pcap::CaptureWriter;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Flows with an id below this get a row of their own in intervals and
/// totals; the rest are summed in one row (`id` "4096+"), so a run's rows
/// stay bounded whatever arrives.
pub const FLOW_ROWS_MAX: u16 = 4096;

/// The per-flow rows of `counts` (receiver's count; bytes with FCS, as the
/// report gives them).
pub fn flow_rows(counts: &SinkCounts) -> Vec<Row> {
    let mut folded: BTreeMap<u16, Counts> = BTreeMap::new();
    for (&id, f) in &counts.flows {
        let c = Counts {
            packets: Some(f.seq.received()),
            bytes: Some(f.bytes + 4 * f.seq.received()),
            lost: Some(f.lost()),
            reordered: Some(f.seq.late),
            duplicates: Some(f.seq.duplicates),
            ..Counts::default()
        };
        folded.entry(id.min(FLOW_ROWS_MAX)).or_default().add(&c);
    }
    folded
        .into_iter()
        .map(|(id, c)| {
            if id == FLOW_ROWS_MAX {
                // The folded rest: no one flow's.
                Row::new(
                    Scope::Flow,
                    format!("{FLOW_ROWS_MAX}+"),
                    "rx",
                    CountedBy::Receiver,
                )
                .with_counts(c)
            } else {
                Row::new(Scope::Flow, id.to_string(), "rx", CountedBy::Receiver)
                    .with_counts(c)
                    .with_key(u64::from(id))
            }
        })
        .collect()
}

/// A receive worker's running totals, published when the interval
/// reporter asks (generation `want` reached).
#[derive(Debug, Default)]
struct RunningTotals {
    rows: Mutex<Vec<Row>>,
    generation: AtomicU64,
}

impl RunningTotals {
    /// Publishes this worker's running totals if the reporter asked for
    /// them (a new generation in `want`). (The test inline, once per
    /// turn of the receive loop; the publishing out of line.)
    #[inline(always)]
    fn answer(
        &self,
        want: &AtomicU64,
        published: &mut u64,
        counts: &SinkCounts,
        latency: &mut IntervalLatency,
    ) {
        let g = want.load(Ordering::Relaxed);
        if g != *published {
            self.publish(g, counts, latency);
            *published = g;
        }
    }

    /// This worker's running totals as of generation `g`.
    #[cold]
    #[inline(never)]
    fn publish(&self, g: u64, counts: &SinkCounts, latency: &mut IntervalLatency) {
        let mut rows = flow_rows(counts);
        // Each flow's latency over the interval (its first few flows).
        for (id, p50, p99) in latency.take(counts) {
            if let Some(r) = rows.iter_mut().find(|r| r.id == id.to_string()) {
                r.gauges.latency_p50_ns = Some(p50);
                r.gauges.latency_p99_ns = Some(p99);
            }
        }
        if let Ok(mut l) = self.rows.lock() {
            *l = rows;
        }
        self.generation.store(g, Ordering::Release);
    }
}

/// Asks every worker for its totals as of now (one blocked in a receive
/// call answers within its wait, at most [`PUBLISH_WAIT`]) and merges them.
fn ask_live(want: &AtomicU64, live: &[RunningTotals], running: impl Fn() -> bool) -> Vec<Row> {
    let g = want.fetch_add(1, Ordering::Relaxed) + 1;
    let asked = Instant::now();
    while live
        .iter()
        .any(|l| l.generation.load(Ordering::Acquire) < g)
        && running()
        && asked.elapsed() < PUBLISH_WAIT
    {
        std::thread::sleep(Duration::from_micros(200));
    }
    merge_rows(
        live.iter()
            .flat_map(|l| l.rows.lock().map(|v| v.clone()).unwrap_or_default()),
    )
}

impl WorkerOut {
    /// Where the intervals end, on the summary's time base (the arrivals'
    /// span): the one the first arrival falls in starts there, the last
    /// ends at the last arrival (with -i 0 the one interval is the
    /// summary's span); nothing arrived: the run's `end`.
    fn arrivals_end(&self, clock: RunClock, end: Instant, sampler: &mut Sampler) -> Instant {
        match self.first {
            Some(first) => {
                sampler.begin_at(clock.secs(first));
                clock.instant(self.last)
            }
            None => end,
        }
    }
    /// Every worker's counts in one.
    fn merge(outs: Vec<WorkerOut>) -> WorkerOut {
        let mut outs = outs.into_iter();
        let mut all = outs.next().expect("at least one worker");
        for o in outs {
            all.counts.absorb(&o.counts);
            all.first = match (all.first, o.first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            all.last = all.last.max(o.last);
            all.error = all.error.or(o.error);
            all.stamped += o.stamped;
            all.handover += o.handover;
            all.drops += o.drops;
        }
        all
    }
}

/// Most idle intervals held back after traffic: a run that ends within
/// them has the interval of its last arrival end there and the idle ones
/// left out (the intervals span the summary's time); past them they are
/// shown. One: live readers (`--metrics`, the live view) see the last
/// counts at most two intervals late.
const IDLE_HELD: usize = 1;

/// Longest the interval reporter waits for the workers' totals.
const PUBLISH_WAIT: Duration = Duration::from_millis(60);

/// Adds rows of the same flow together (workers may share a flow).
fn merge_rows(all: impl IntoIterator<Item = Row>) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for r in all {
        match out.iter_mut().find(|o| o.id == r.id) {
            Some(o) => o.counts.add(&r.counts),
            None => out.push(r),
        }
    }
    out
}

#[derive(Debug, Clone)]
pub struct SinkConfig {
    pub iface: String,
    pub duration: Duration,
    pub backend: BackendKind,
    /// The loopback ports `backend` loopback opens (the caller's
    /// registry; empty for kernel interfaces).
    pub wires: linerate_backend::port::Wires,
    /// Sender and receiver read the same clock (same host): latency is valid.
    pub clocks_shared: bool,
    /// Stop once this many probe frames arrived (used with `--count`).
    pub until_packets: Option<u64>,
    /// Write what arrives to a pcap file.
    pub capture: Option<CaptureConfig>,
    /// One pinned receive worker per listed CPU (flows spread over them by
    /// the kernel); empty = one unpinned worker.
    pub cores: Vec<usize>,
    /// Interval reports while receiving (`None`: one at the end).
    pub interval: Option<Duration>,
    /// With AF_XDP, the frames taken from the kernel (default: UDP only, so
    /// ARP, ping and TCP keep working on the interface).
    pub take: linerate_backend::port::RxFilter,
}

/// `sink --write`: every frame that reaches the socket (probe or not), cut
/// to `snaplen`, up to `max_frames`.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    pub path: std::path::PathBuf,
    /// Replace an existing regular file (never a link, never anything else).
    pub overwrite: bool,
    pub snaplen: u32,
    pub max_frames: u64,
}

/// Why the sink could not run.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("capture file: {0}")]
    Capture(#[from] linerate_traffic::pcap::TraceError),
    #[error(
        "--write keeps one capture file in arrival order: it takes one receive worker (drop --cores)"
    )]
    CaptureWorkers,
}

#[derive(Debug)]
pub struct SinkReport {
    pub backend: &'static str,
    pub note: Option<String>,
    pub counts: SinkCounts,
    pub duration_s: f64,
    /// Frames the kernel dropped for this socket (its buffer was full).
    pub kernel_drops: u64,
    /// (path, frames written, snaplen, first write error) of `--write`.
    pub capture: Option<(String, u64, u32, Option<String>)>,
    /// Why receiving stopped early, if it did (the counts up to then stand).
    pub error: Option<String>,
    /// Frames whose arrival time is the kernel's receive stamp, and frames
    /// timed when their batch was handed over (AF_XDP, or no stamp).
    pub arrival_stamped: u64,
    pub arrival_handover: u64,
    /// What the receiving backend can do here.
    pub capabilities: RxCapabilities,
    /// Receive workers (threads, one backend socket or queue set each).
    pub workers: usize,
    /// What arrived per interval, per flow and summed (receiver's count).
    pub intervals: Vec<Interval>,
}

impl SinkReport {
    /// Probe frames received per second (receiver's count).
    pub fn pps(&self) -> f64 {
        self.counts.packets() as f64 / self.duration_s.max(1e-9)
    }

    /// L2 bit/s received: frames with their FCS, which the count leaves out.
    pub fn bps_l2(&self) -> f64 {
        let packets = self.counts.packets();
        (self.counts.bytes() + 4 * packets) as f64 * 8.0 / self.duration_s.max(1e-9)
    }

    /// The receiver's document (`-J`'s, without the doctor's summary).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(crate::outcome::SinkDoc::of(self)).unwrap_or_default()
    }
}

/// With `--count`: how long after the count is reached the sink still
/// waits for end markers (blast sends them right after the last frame).
const MARKER_GRACE: std::time::Duration = std::time::Duration::from_millis(50);

/// How often the sink looks at whether its interface is still up.
const LINK_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// What one receive worker counted.
struct WorkerOut {
    counts: SinkCounts,
    /// When the first and the last probe frames were handed over
    /// (CLOCK_MONOTONIC, ns).
    first: Option<u64>,
    last: u64,
    error: Option<String>,
    stamped: u64,
    handover: u64,
    drops: u64,
}

/// Receives until the duration, the count, `stop`, or the interface going
/// away; calls `on_ready` with the backend's name once every receive socket
/// is open (traffic sent from then on is counted) and `on_interval` with
/// each interval as it ends.
pub fn sink(
    cfg: &SinkConfig,
    stop: &AtomicBool,
    on_ready: &mut dyn FnMut(&str),
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<SinkReport, SinkError> {
    let workers = cfg.cores.len().max(1);
    if workers > 1 && cfg.capture.is_some() {
        return Err(SinkError::CaptureWorkers);
    }
    let mut capture = cfg
        .capture
        .as_ref()
        .map(|c| CaptureWriter::create(&c.path, c.snaplen, c.max_frames, c.overwrite))
        .transpose()?;
    // (A counter: its frames carry the kernel's receive time.)
    let hold = RxHold::Gather;
    let (mut rxs, note) =
        open_rx_workers(cfg.backend, &cfg.wires, &cfg.iface, workers, cfg.take, hold)?;
    let backend = rxs[0].name();
    let mut capabilities = rxs[0].capabilities();
    if let Some(q) = capabilities.queues.as_mut() {
        *q = rxs.iter().filter_map(|r| r.capabilities().queues).sum();
    }
    // Ethernet header, one VLAN tag; a larger frame is several packets in one.
    let frame_max = linerate_backend::port::port_mtu(cfg.backend, &cfg.wires, &cfg.iface)
        .map_or(usize::MAX, |m| m + 18);
    let total = AtomicU64::new(0);
    let live: Vec<RunningTotals> = (0..workers).map(|_| RunningTotals::default()).collect();
    let want = AtomicU64::new(0);
    on_ready(backend);
    let clock = RunClock::now();
    let mut sampler = Sampler::new(clock.start, cfg.interval).hold_idle(IDLE_HELD);
    // The first probe's arrival (monotonic ns; MAX: none yet), for the
    // intervals' time base as the summary's: from the first arrival.
    let first_arrival = AtomicU64::new(u64::MAX);
    let first_seen = || {
        let ns = first_arrival.load(Ordering::Relaxed);
        (ns != u64::MAX).then(|| clock.secs(ns))
    };
    let counted = (&total, &first_arrival);
    let mut intervals = Vec::new();
    // The capture file goes to the one worker there is with --write.
    let mut file = capture.as_mut();
    let items: Vec<_> = (rxs.iter_mut().zip(&live))
        .map(|(rx, live)| (rx, live, file.take()))
        .collect();
    let outs = run_pinned(
        &cfg.cores,
        items,
        |_, (rx, live, capture), pinned| {
            let mut out = receive(rx, cfg, stop, counted, capture, frame_max, (&want, live));
            if let Err(e) = pinned {
                out.error = out.error.or(Some(e));
            }
            out
        },
        Watch {
            sampler: &mut sampler,
            rows: &mut |running| ask_live(&want, &live, running),
            on_interval,
            kept: &mut intervals,
            begin: Some(&first_seen),
        },
    );
    let outs: Vec<WorkerOut> = outs
        .into_iter()
        .map(|o| o.expect("a receive worker panicked"))
        .collect();
    let end = Instant::now();
    let all = WorkerOut::merge(outs);
    // Rates over the time traffic was arriving, not the time spent waiting.
    let duration_s = all
        .first
        .map_or(0.0, |f| all.last.saturating_sub(f) as f64 / 1e9);
    let end = all.arrivals_end(clock, end, &mut sampler);
    for iv in sampler.finish(end, flow_rows(&all.counts)) {
        on_interval(&iv);
        intervals.push(iv);
    }
    let capture = capture.as_mut().zip(cfg.capture.as_ref()).map(|(w, c)| {
        let error = w.finish();
        (c.path.display().to_string(), w.written, c.snaplen, error)
    });
    Ok(SinkReport {
        backend,
        note,
        counts: all.counts,
        duration_s,
        kernel_drops: all.drops,
        capture,
        error: all.error,
        arrival_stamped: all.stamped,
        arrival_handover: all.handover,
        capabilities,
        workers,
        intervals,
    })
}

/// What a receive worker does with each frame its backend hands over:
/// times it, counts it and (with `--write`) captures it. A `FrameSink`
/// whose method is inlined into the backend's receive loop.
struct Taker<'a> {
    /// (Frames longer than one packet makes, GRO batches, are counted
    /// there too, as `oversized`.)
    counts: SinkCounts,
    /// Frames without a kernel receive time (the rest had one).
    handover: u64,
    /// This batch's handover time, read when its first unstamped frame
    /// is handed over (0: not read yet).
    handed: u64,
    /// The capture file (`--write`) and CLOCK_REALTIME - CLOCK_MONOTONIC
    /// for its stamps.
    capture: Option<&'a mut CaptureWriter>,
    wall_offset: i128,
}

impl FrameSink for Taker<'_> {
    #[inline(always)]
    fn frame(&mut self, frame: &[u8], at: u64) {
        self.counts.on_frame(frame, at);
    }

    #[inline(always)]
    fn frames<B: Frames>(&mut self, batch: &mut B) {
        self.counts.on_frames(&mut Batch(batch));
    }

    fn handover_time(&mut self) -> u64 {
        self.handover_time()
    }

    fn handed_over(&mut self, frames: usize) {
        self.handover += frames as u64;
    }
}

/// A backend's batch as the accounting reads it.
struct Batch<'b, B>(&'b mut B);

impl<B: Frames> FrameRun for Batch<'_, B> {
    #[inline(always)]
    fn next_frame(&mut self) -> Option<(&[u8], u64)> {
        self.0.next_frame()
    }
}

/// A [`Taker`] that also writes every frame to its capture file.
struct Capturing<'t, 'a>(&'t mut Taker<'a>);

impl FrameSink for Capturing<'_, '_> {
    #[inline(always)]
    fn frame(&mut self, frame: &[u8], at: u64) {
        self.0.counts.on_frame(frame, at);
        self.0.write(frame, at);
    }

    fn handover_time(&mut self) -> u64 {
        FrameSink::handover_time(self.0)
    }

    fn handed_over(&mut self, frames: usize) {
        FrameSink::handed_over(self.0, frames)
    }
}

impl Taker<'_> {
    /// Takes one batch from `rx` (writing it to the capture file while
    /// that wants more); returns the receive's result and the batch's
    /// time: its handover time if it was read, else a fresh one.
    #[inline(always)]
    fn take_batch(&mut self, rx: &mut Rx) -> (std::io::Result<usize>, u64) {
        self.handed = 0;
        let r = if self.capture.as_ref().is_some_and(|c| c.wants_more()) {
            self.wall_offset = clock::realtime_offset_ns();
            rx.recv(&mut Capturing(self))
        } else {
            rx.recv(self)
        };
        let now = if self.handed != 0 {
            self.handed
        } else {
            clock::monotonic_ns()
        };
        (r, now)
    }

    /// The arrival time of frames the kernel did not stamp (AF_XDP's, a
    /// socket's without a stamp): read once per batch, when the backend
    /// first asks (after its wait, not before it, so latency is not
    /// shortened by the time recv spent blocked).
    fn handover_time(&mut self) -> u64 {
        if self.handed == 0 {
            self.handed = clock::monotonic_ns();
        }
        self.handed
    }

    /// Frames counted but not as probes (markers and others): what a
    /// batch handed over less these is its probe frames.
    fn not_probes(&self) -> u64 {
        self.counts.markers + self.counts.other + self.counts.anomalous
    }

    fn write(&mut self, frame: &[u8], t: u64) {
        if let Some(c) = self.capture.as_mut() {
            // Capture timestamps on the wall clock, as pcap wants.
            c.write(
                u64::try_from(i128::from(t) + self.wall_offset).unwrap_or(0),
                frame,
            );
        }
    }
}

/// Why a receive loop ends before its duration (or `stop`).
enum End {
    /// The interface went down (or away).
    LinkLost(String),
    /// `--count` reached, and the end markers seen or given up on.
    Counted,
}

/// A receive loop's checks of whether it ends early.
struct Ends {
    /// Rings (af_packet, af_xdp) just go quiet when the interface goes
    /// down: it is looked at a few times a second so every backend ends
    /// the same way.
    next_link_check: u64,
    /// When the count was reached.
    count_reached: Option<u64>,
}

impl Ends {
    /// At `now`, before the next batch: whether the loop ends.
    #[inline(always)]
    fn check(
        &mut self,
        now: u64,
        cfg: &SinkConfig,
        total: &AtomicU64,
        counts: &SinkCounts,
    ) -> Option<End> {
        if now >= self.next_link_check {
            self.next_link_check = now + LINK_CHECK.as_nanos() as u64;
            if let Some(why) =
                linerate_backend::port::link_lost(cfg.backend, &cfg.wires, &cfg.iface)
            {
                return Some(End::LinkLost(why));
            }
        }
        if cfg
            .until_packets
            .is_some_and(|n| total.load(Ordering::Relaxed) >= n)
        {
            // The count is reached: the flows' end markers follow their
            // last frames within a few ms; wait a moment for them, so the
            // report can say the tail was counted.
            let since = *self.count_reached.get_or_insert(now);
            let (seen, flows) = counts.markers_seen();
            if seen == flows || now - since >= MARKER_GRACE.as_nanos() as u64 {
                return Some(End::Counted);
            }
        }
        None
    }
}

/// One receive loop: until the duration ends, `stop` is set, `total` (all
/// workers' probe frames) reaches the count, the interface goes down or a
/// receive fails; what was counted is kept in every case. Never inlined:
/// `linerate-bench instr` counts the instructions spent in it.
#[inline(never)]
fn receive(
    rx: &mut Rx,
    cfg: &SinkConfig,
    stop: &AtomicBool,
    (total, first_arrival): (&AtomicU64, &AtomicU64),
    capture: Option<&mut CaptureWriter>,
    frame_max: usize,
    (want, live): (&AtomicU64, &RunningTotals),
) -> WorkerOut {
    let mut published = 0u64;
    let mut interval_latency = IntervalLatency::default();
    let mut t = Taker {
        counts: SinkCounts::new(cfg.clocks_shared).with_frame_max(frame_max),
        handover: 0,
        handed: 0,
        capture,
        wall_offset: 0,
    };
    let mut error: Option<String> = None;
    // One clock read per turn of the loop (CLOCK_MONOTONIC ns, as
    // `Instant`): it times the batch, the duration, the link checks.
    let start = clock::monotonic_ns();
    let end = start.saturating_add(u64::try_from(cfg.duration.as_nanos()).unwrap_or(u64::MAX));
    let mut now = start;
    let mut first: Option<u64> = None;
    let mut last = start;
    let mut ends = Ends {
        next_link_check: start,
        count_reached: None,
    };
    // Frames the backend handed over.
    let mut frames = 0u64;
    let counting = cfg.until_packets.is_some();
    // Frames counted but not as probes so far (as of the last batch).
    let mut before = 0;
    while !stop.load(Ordering::Relaxed) && now < end {
        live.answer(want, &mut published, &t.counts, &mut interval_latency);
        match ends.check(now, cfg, total, &t.counts) {
            Some(End::LinkLost(why)) => {
                error = Some(why);
                break;
            }
            Some(End::Counted) => break,
            None => {}
        }
        let r;
        (r, now) = t.take_batch(rx);
        match r {
            Ok(n) => {
                // Every frame handed over is counted once: a probe, a
                // marker or another (so the probes are counted per batch,
                // not per frame).
                frames += n as u64;
                let after = t.not_probes();
                let probes = (n as u64).saturating_sub(after - before);
                before = after;
                // Rates cover the span over which probe frames arrived;
                // other frames (neighbour discovery, multicast reports) do
                // not open it.
                if probes > 0 {
                    // (All workers' count: read only to stop at `--count`.)
                    if counting {
                        total.fetch_add(probes, Ordering::Relaxed);
                    }
                    last = now;
                    if first.is_none() {
                        first_arrival.fetch_min(last, Ordering::Relaxed);
                    }
                    first.get_or_insert(last);
                }
            }
            Err(e) if recv_idle(&e) => before = t.not_probes(),
            Err(e) => {
                // Keep what was counted: report it with the error.
                error = Some(format!("receiving on {}: {e}", cfg.iface));
                break;
            }
        }
    }
    // (Each frame handed over was counted once: the backends return
    // exactly the frames they handed over.)
    debug_assert_eq!(frames, t.counts.packets() + t.not_probes());
    let stamped = frames.saturating_sub(t.handover);
    WorkerOut {
        counts: t.counts,
        first,
        last,
        error,
        stamped,
        handover: t.handover,
        // The kernel keeps counting until asked: one read after the run.
        drops: rx.drops(),
    }
}
