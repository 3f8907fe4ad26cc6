//! What every sender shares (blast's generator, the trace replay):
//! the configuration, the report and errors, the pacing margin, worker
//! rows. Both senders depend on this module and neither on the other's.

use crate::backend::{BackendError, BackendKind, Capabilities};
use crate::udp::Gso;
use linerate_gen::pacing::Departures;
use linerate_gen::template::Framing;
use linerate_gen::{FlowSpec, SizeSequence, TemplateError};
use linerate_run::{CountedBy, Counts, Interval, Row, Scope};
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

/// How close to a departure a sender stops sleeping and yields instead
/// (the timer slack is lowered to 1 µs while sending).
pub(crate) const SPIN: Duration = Duration::from_micros(7);

/// A sending worker's running totals as a row (sender's count).
pub(crate) fn worker_row(w: usize, packets: u64, bytes: u64, refused: u64) -> Row {
    Row::new(Scope::Worker, w.to_string(), "tx", CountedBy::Sender).with_counts(Counts {
        packets: Some(packets),
        bytes: Some(bytes),
        errors: Some(refused),
        ..Counts::default()
    })
}

/// A target rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Max,
    Pps(u64),
    /// Bits per second on the wire (preamble, SFD and gap included).
    BpsL1(u64),
    /// Bits per second of frames (FCS included).
    BpsL2(u64),
}

#[derive(Debug, Clone)]
pub struct BlastConfig {
    pub iface: String,
    pub flows: FlowSpec,
    pub sizes: SizeSequence,
    pub framing: Framing,
    pub count: Option<u64>,
    pub duration: Duration,
    pub rate: Rate,
    /// Frames sent back to back per pacing decision (1 = evenly spaced;
    /// more trades smoothness for fewer wake-ups).
    pub burst: u32,
    pub backend: BackendKind,
    /// One pinned worker (and backend socket) per core; empty = one unpinned worker.
    pub cores: Vec<usize>,
    /// Replay a trace instead of generating frames.
    pub replay: Option<Replay>,
    /// --src-mac/--dst-mac were given: frames must carry them (no UDP sockets).
    pub macs_given: bool,
    /// UDP GSO on the socket backend's UDP path.
    pub gso: Gso,
    /// Interval reports while sending (`None`: one at the end).
    pub interval: Option<Duration>,
    /// After the last frame, each flow's end marker (its sent count, see
    /// `linerate_wire::END_MARKER`), three times, on a raw socket.
    pub end_markers: bool,
}

#[derive(Debug, Error)]
pub enum BlastError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("frame size {size}: {source}")]
    Template { size: u16, source: TemplateError },
    #[error("sending on {iface}: {source}")]
    Send {
        iface: String,
        source: std::io::Error,
    },
    #[error(
        "{workers} cores need at least as many flows ({flows}), and a power-of-two number of cores above 65536 flows"
    )]
    Cores { workers: usize, flows: u64 },
    #[error("a blast worker failed")]
    Worker,
    #[error("{0}")]
    Pin(String),
    #[error("CPU(s) {0:?} in --cores are not online or not allowed for this process")]
    CpusNotAllowed(Vec<usize>),
    #[error("frame {index} of the trace is {len} bytes: above what the MTU of {mtu} lets out")]
    TraceOverMtu {
        index: usize,
        len: usize,
        mtu: usize,
    },
}

/// What was sent (the sender's count: frames the kernel accepted).
#[derive(Debug, Clone)]
pub struct BlastReport {
    pub backend: &'static str,
    pub note: Option<String>,
    pub packets: u64,
    /// Frame bytes, FCS included.
    pub bytes: u64,
    pub duration_s: f64,
    pub send_calls: u64,
    /// Sends the kernel refused for lack of buffer or ring space, retried.
    pub send_errors: u64,
    pub flows: u64,
    /// Frames sent per probe flow id.
    pub per_flow: BTreeMap<u16, u64>,
    /// Send activity per interval, per worker and summed (sender's count).
    pub intervals: Vec<Interval>,
    /// Each worker's totals (the run's end rows).
    pub worker_rows: Vec<Row>,
    /// Each worker's backend counters (af_xdp: TX ring completions).
    pub backend_stats: Vec<serde_json::Value>,
    /// What the (first worker's) backend can do here.
    pub capabilities: Capabilities,
    /// Paced runs: each worker's measured gaps between send calls, and the
    /// gap its rate asked for per frame (ns).
    pub pacing: Vec<(Departures, f64)>,
    pub workers: usize,
    /// End-marker frames sent after the last frame (three per flow), not
    /// in `packets`; why none were, when asked.
    pub end_marker_frames: u64,
    pub end_marker_note: Option<String>,
}

impl BlastReport {
    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.duration_s.max(1e-9)
    }

    pub fn bps_l2(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.duration_s.max(1e-9)
    }

    pub fn bps_l1(&self) -> f64 {
        (self.bytes + 20 * self.packets) as f64 * 8.0 / self.duration_s.max(1e-9)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "role": "blast",
            "backend": self.backend,
            "backend_note": self.note,
            "counted_by": "sender: frames the kernel accepted",
            "packets": self.packets,
            "bytes": self.bytes,
            "duration_s": self.duration_s,
            "pps": self.pps(),
            "bps_l1": self.bps_l1(),
            "bps_l2": self.bps_l2(),
            "send_calls": self.send_calls,
            "send_errors": self.send_errors,
            "flows": self.flows,
            "workers": self.workers,
            "end_markers": {"frames": self.end_marker_frames, "note": self.end_marker_note},
            "tx_time": format!(
                "per batch: the frames of one send call (up to {}) carry the same send time in their probe",
                self.capabilities.batch
            ),
            "backend_stats": self.backend_stats,
            "backend_capabilities": self.capabilities,
            "pacing": self.pacing.iter().map(|(d, ns)| {
                let per_call = d.units as f64 / d.calls as f64;
                let [p50, p99, p999] = d.percentiles_us();
                serde_json::json!({
                    "measured_by": "sender, gaps between send calls",
                    "calls": d.calls,
                    "frames_per_call": per_call,
                    "target_gap_us": ns * per_call / 1e3,
                    "mean_gap_us": d.mean_gap_ns / 1e3,
                    "stddev_gap_us": d.stddev_gap_ns() / 1e3,
                    "min_gap_us": d.min_gap_ns as f64 / 1e3,
                    "max_gap_us": d.max_gap_ns as f64 / 1e3,
                    "p50_gap_us": p50,
                    "p99_gap_us": p99,
                    "p999_gap_us": p999,
                })
            }).collect::<Vec<_>>(),
            "intervals": self.intervals.iter().map(Interval::json).collect::<Vec<_>>(),
            "per_flow_sent": self.per_flow.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// Frames per second the rate asks for, given the average frame size.
pub(crate) fn target_pps(rate: Rate, avg_frame: f64) -> Option<f64> {
    match rate {
        Rate::Max => None,
        Rate::Pps(p) => Some(p as f64),
        Rate::BpsL1(b) => Some(b as f64 / ((avg_frame + 20.0) * 8.0)),
        Rate::BpsL2(b) => Some(b as f64 / (avg_frame * 8.0)),
    }
}

/// How a trace is replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timing {
    /// As fast as allowed (or at `--rate`).
    Fast,
    /// The capture's own gaps, divided by this factor (1.0 = original).
    Scaled(f64),
}

/// A pcap/pcapng trace to send instead of generated frames.
#[derive(Debug, Clone)]
pub struct Replay {
    pub trace: linerate_gen::pcap::Trace,
    pub rewrite: linerate_gen::pcap::Rewrite,
    /// Times through the trace (0 = until the duration or count ends).
    pub loops: u64,
    pub timing: Timing,
}
