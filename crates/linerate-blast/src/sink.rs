//! Receiving and counting: every frame with a linerate probe is accounted
//! per flow (loss, reordering, duplicates) and its latency recorded.

use crate::backend::{BackendError, BackendKind, Rx, RxCapabilities, open_rx_workers};
use crate::blast::pin;
use linerate_backend::clock;
use linerate_gen::SinkCounts;
use linerate_gen::pcap::CaptureWriter;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SinkConfig {
    pub iface: String,
    pub duration: Duration,
    pub backend: BackendKind,
    /// Sender and receiver read the same clock (same host): latency is valid.
    pub clocks_shared: bool,
    /// Stop once this many probe frames arrived (used with `--count`).
    pub until_packets: Option<u64>,
    /// Write what arrives to a pcap file.
    pub capture: Option<CaptureConfig>,
    /// One pinned receive worker per listed CPU (flows spread over them by
    /// the kernel); empty = one unpinned worker.
    pub cores: Vec<usize>,
}

/// `sink --write`: every frame that reaches the socket (probe or not), cut
/// to `snaplen`, up to `max_frames`.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    pub path: std::path::PathBuf,
    pub snaplen: u32,
    pub max_frames: u64,
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
    /// Frames longer than the interface's MTU allows: GSO/GRO batches
    /// handed over whole (e.g. by a veth whose sender left
    /// tx-udp-segmentation on). Only their first datagram is counted.
    pub oversized: u64,
    /// What the receiving backend can do here.
    pub capabilities: RxCapabilities,
    /// Receive workers (threads, one backend socket or queue set each).
    pub workers: usize,
}

impl SinkReport {
    pub fn json(&self) -> serde_json::Value {
        let c = &self.counts;
        let d = self.duration_s.max(1e-9);
        // Bytes counted without FCS; add it back for L2, and 20 B per frame for L1.
        let l2 = (c.bytes + 4 * c.packets) as f64 * 8.0;
        let latency = c.latency_percentiles().map(|p| {
            serde_json::json!({"p50": p[0], "p90": p[1], "p99": p[2], "p999": p[3], "max": p[4]})
        });
        serde_json::json!({
            "role": "sink",
            "backend": self.backend,
            "backend_note": self.note,
            "counted_by": "receiver: frames with a linerate probe that reached the socket",
            "packets": c.packets,
            "bytes": c.bytes + 4 * c.packets,
            "duration_s": self.duration_s,
            "pps": c.packets as f64 / d,
            "bps_l2": l2 / d,
            "bps_l1": l2 / d + (20 * 8 * c.packets) as f64 / d,
            "lost": c.lost(),
            "reordered": c.reordered(),
            "duplicates": c.duplicates(),
            "other_frames": c.other,
            "oversized_frames": self.oversized,
            "backend_capabilities": self.capabilities,
            "workers": self.workers,
            "kernel_drops": self.kernel_drops,
            "error": self.error,
            "capture": self.capture.as_ref().map(|(path, frames, snaplen, error)| serde_json::json!({
                "path": path, "frames": frames, "snaplen": snaplen, "error": error,
            })),
            "latency_ns": latency,
            "latency_arrival": {
                "kernel_receive_stamp": self.arrival_stamped,
                "batch_handover": self.arrival_handover,
            },
            "latency_clock": if c.clocks_shared() { "shared (same host): one-way latency is valid" } else { "not shared: latency not measured" },
            "flows": c.flows.iter().map(|(id, f)| serde_json::json!({
                "flow": id, "packets": f.seq.received, "bytes": f.bytes, "lost": f.seq.lost(),
                "reordered": f.seq.late, "duplicates": f.seq.duplicates,
            })).collect::<Vec<_>>(),
        })
    }
}

/// How often the sink looks at whether its interface is still up.
const LINK_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// What one receive worker counted.
struct WorkerOut {
    counts: SinkCounts,
    /// When the first and the last probe frames were handed over.
    first: Option<Instant>,
    last: Instant,
    error: Option<String>,
    stamped: u64,
    handover: u64,
    oversized: u64,
    drops: u64,
}

pub fn sink(cfg: &SinkConfig, stop: &AtomicBool) -> Result<SinkReport, BackendError> {
    let workers = cfg.cores.len().max(1);
    if workers > 1 && cfg.capture.is_some() {
        return Err(BackendError::Unsupported(
            "--write keeps one capture file in arrival order: it takes one receive worker (drop --cores)".into(),
        ));
    }
    let mut capture = cfg
        .capture
        .as_ref()
        .map(|c| CaptureWriter::create(&c.path, c.snaplen, c.max_frames))
        .transpose()?;
    let (mut rxs, note) = open_rx_workers(cfg.backend, &cfg.iface, workers)?;
    let backend = rxs[0].name();
    let mut capabilities = rxs[0].capabilities();
    if let Some(q) = capabilities.queues.as_mut() {
        *q = rxs.iter().filter_map(|r| r.capabilities().queues).sum();
    }
    // Ethernet header, one VLAN tag; a larger frame is several packets in one.
    let frame_max = linerate_backend::raw::iface_mtu(&cfg.iface).map_or(usize::MAX, |m| m + 18);
    let total = AtomicU64::new(0);
    let outs: Vec<WorkerOut> = if workers == 1 {
        if let Some(&cpu) = cfg.cores.first() {
            pin(cpu);
        }
        vec![receive(
            &mut rxs[0],
            cfg,
            stop,
            &total,
            capture.as_mut(),
            frame_max,
        )]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = rxs
                .iter_mut()
                .zip(&cfg.cores)
                .map(|(rx, &cpu)| {
                    let total = &total;
                    s.spawn(move || {
                        pin(cpu);
                        receive(rx, cfg, stop, total, None, frame_max)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a receive worker panicked"))
                .collect()
        })
    };
    // Every worker's counts into one report.
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
        all.oversized += o.oversized;
        all.drops += o.drops;
    }
    // Rates over the time traffic was arriving, not the time spent waiting.
    let duration_s = all
        .first
        .map_or(0.0, |f| all.last.duration_since(f).as_secs_f64());
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
        oversized: all.oversized,
        capabilities,
        workers,
    })
}

/// One receive loop: until the duration ends, `stop` is set, `total` (all
/// workers' probe frames) reaches the count, the interface goes down or a
/// receive fails; what was counted is kept in every case.
fn receive(
    rx: &mut Rx,
    cfg: &SinkConfig,
    stop: &AtomicBool,
    total: &AtomicU64,
    mut capture: Option<&mut CaptureWriter>,
    frame_max: usize,
) -> WorkerOut {
    let mut counts = SinkCounts::new(cfg.clocks_shared);
    let mut error: Option<String> = None;
    let start = Instant::now();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    // Rings (af_packet, af_xdp) just go quiet when the interface goes down:
    // look at it a few times a second so every backend ends the same way.
    let mut next_link_check = Instant::now();
    let (mut stamped, mut handover, mut oversized) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) && start.elapsed() < cfg.duration {
        if Instant::now() >= next_link_check {
            next_link_check = Instant::now() + LINK_CHECK;
            let down = match linerate_backend::raw::iface_up(&cfg.iface) {
                Ok(true) => None,
                Ok(false) => Some("the interface went down".to_string()),
                Err(e) => Some(format!("the interface is gone ({e})")),
            };
            if let Some(why) = down {
                error = Some(format!("receiving on {}: {why}", cfg.iface));
                break;
            }
        }
        if cfg
            .until_packets
            .is_some_and(|n| total.load(Ordering::Relaxed) >= n)
        {
            break;
        }
        // Arrival time: the kernel's receive time where the backend has one
        // (af_packet ring, raw socket); otherwise read once per batch, when
        // its first frame is handed over (after the wait, not before it), so
        // latency is not shortened by the time recv spent blocked.
        let mut now = 0u64;
        let before = counts.packets;
        let mut arrival = |at: Option<u64>| match at {
            Some(t) => {
                stamped += 1;
                t
            }
            None => {
                handover += 1;
                if now == 0 {
                    now = clock::monotonic_ns();
                }
                now
            }
        };
        let r = match capture.as_deref_mut().filter(|c| c.wants_more()) {
            None => rx.recv(&mut |frame, at| {
                oversized += u64::from(frame.len() > frame_max);
                counts.on_frame(frame, arrival(at))
            }),
            Some(c) => {
                // Capture timestamps on the wall clock, as pcap wants.
                let wall_offset = clock::realtime_offset_ns();
                rx.recv(&mut |frame, at| {
                    oversized += u64::from(frame.len() > frame_max);
                    let t = arrival(at);
                    counts.on_frame(frame, t);
                    c.write(
                        u64::try_from(i128::from(t) + wall_offset).unwrap_or(0),
                        frame,
                    );
                })
            }
        };
        match r {
            // Rates cover the span over which probe frames arrived; other
            // frames (neighbour discovery, multicast reports) do not open it.
            Ok(_) if counts.packets > before => {
                total.fetch_add(counts.packets - before, Ordering::Relaxed);
                last = Instant::now();
                first.get_or_insert(last);
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                // Keep what was counted: report it with the error.
                error = Some(format!("receiving on {}: {e}", cfg.iface));
                break;
            }
        }
    }
    WorkerOut {
        counts,
        first,
        last,
        error,
        stamped,
        handover,
        oversized,
        // The kernel keeps counting until asked: one read after the run.
        drops: rx.drops(),
    }
}
