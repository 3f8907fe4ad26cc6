//! The `-J` documents of blast, sink and their streams, derived: each
//! struct's fields are the document's keys in its order, borrowed from
//! the typed reports.

use crate::{BlastReport, SinkReport, StreamSent};
use linerate_backend::port::{Capabilities, RxCapabilities, TxStats};
use linerate_run::Interval;
use linerate_traffic::accounting::FlowCounts;
use linerate_traffic::pacing::{CatchUp, Departures, Shape};
use serde::Serialize;
use std::collections::BTreeMap;

/// blast's document (sender's count).
#[derive(Debug, Serialize)]
pub struct BlastDoc<'a> {
    role: &'static str,
    backend: &'static str,
    backend_note: &'a Option<String>,
    counted_by: &'static str,
    packets: u64,
    bytes: u64,
    duration_s: f64,
    duration_from: &'static str,
    pps: f64,
    bps_l1: f64,
    bps_l2: f64,
    send_calls: u64,
    send_errors: u64,
    flows: u64,
    workers: usize,
    end_markers: MarkersSent<'a>,
    /// Why fewer frames went than `--count` asked (the duration ended
    /// the run first); absent when the count was reached or not asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    count_note: &'a Option<String>,
    tx_time: String,
    backend_stats: &'a [TxStats],
    backend_capabilities: &'a Capabilities,
    pacing: Vec<PacingDoc>,
    shape: Option<ShapeDoc>,
    intervals: &'a [Interval],
    streams: Vec<StreamSentDoc<'a>>,
    per_flow_sent: &'a BTreeMap<u16, u64>,
}

#[derive(Debug, Serialize)]
struct MarkersSent<'a> {
    frames: u64,
    note: &'a Option<String>,
}

/// A paced worker's measured gaps between send calls.
#[derive(Debug, Serialize)]
struct PacingDoc {
    measured_by: &'static str,
    calls: u64,
    frames_per_call: f64,
    target_gap_us: f64,
    mean_gap_us: f64,
    stddev_gap_us: f64,
    min_gap_us: f64,
    max_gap_us: f64,
    p50_gap_us: f64,
    p99_gap_us: f64,
    p999_gap_us: f64,
}

impl PacingDoc {
    fn of(d: &Departures, target_ns: f64) -> Self {
        let per_call = d.units as f64 / d.calls as f64;
        let [p50, p99, p999] = d.percentiles_us();
        PacingDoc {
            measured_by: "sender, gaps between send calls",
            calls: d.calls,
            frames_per_call: per_call,
            target_gap_us: target_ns * per_call / 1e3,
            mean_gap_us: d.mean_gap_ns / 1e3,
            stddev_gap_us: d.stddev_gap_ns() / 1e3,
            min_gap_us: d.min_gap_ns as f64 / 1e3,
            max_gap_us: d.max_gap_ns as f64 / 1e3,
            p50_gap_us: p50,
            p99_gap_us: p99,
            p999_gap_us: p999,
        }
    }
}

/// A paced sender's shape (sender's clock).
#[derive(Debug, Serialize)]
pub struct ShapeDoc {
    measured_by: &'static str,
    catch_up: &'static str,
    late_wakeups: u64,
    max_late_us: f64,
    max_burst: u64,
    skipped: u64,
}

impl ShapeDoc {
    pub fn of(s: &Shape, catch_up: CatchUp) -> Self {
        ShapeDoc {
            measured_by: "sender, its own clock against its schedule",
            catch_up: catch_up.name(),
            late_wakeups: s.late_wakeups,
            max_late_us: s.max_late_ns as f64 / 1e3,
            max_burst: s.max_burst,
            skipped: s.skipped,
        }
    }
}

/// What one stream sent (sender's count).
#[derive(Debug, Serialize)]
struct StreamSentDoc<'a> {
    name: &'a str,
    id: u16,
    packets: u64,
    bytes: u64,
    gaps: GapsDoc,
}

#[derive(Debug, Serialize)]
struct GapsDoc {
    measured_by: &'static str,
    mean_us: f64,
    stddev_us: f64,
    min_us: f64,
    max_us: f64,
}

impl<'a> StreamSentDoc<'a> {
    fn of(s: &'a StreamSent) -> Self {
        let d = &s.departures;
        StreamSentDoc {
            name: &s.name,
            id: s.id,
            packets: s.packets,
            bytes: s.bytes,
            gaps: GapsDoc {
                measured_by: "sender, per frame as handed to the backend",
                mean_us: d.mean_gap_ns / 1e3,
                stddev_us: d.stddev_gap_ns() / 1e3,
                min_us: d.min_gap_ns as f64 / 1e3,
                max_us: d.max_gap_ns as f64 / 1e3,
            },
        }
    }
}

/// What a sender's count is, by backend (the document's `counted_by`; the
/// text says it after "sender's count: "): the frames the kernel took,
/// or on DPDK those its port's `tx_burst` took (no kernel in the way).
pub(crate) fn sender_counted(backend: &str) -> &'static str {
    match backend {
        "dpdk" => "sender: frames the DPDK port took",
        _ => "sender: frames the kernel accepted",
    }
}

impl<'a> BlastDoc<'a> {
    pub fn of(r: &'a BlastReport) -> Self {
        BlastDoc {
            role: "blast",
            backend: r.backend,
            backend_note: &r.note,
            counted_by: sender_counted(r.backend),
            packets: r.packets,
            bytes: r.bytes,
            duration_s: r.duration_s,
            duration_from: r.duration_from,
            pps: r.pps(),
            bps_l1: r.bps_l1(),
            bps_l2: r.bps_l2(),
            send_calls: r.send_calls,
            send_errors: r.send_errors,
            flows: r.flows,
            workers: r.workers,
            end_markers: MarkersSent {
                frames: r.end_marker_frames,
                note: &r.end_marker_note,
            },
            count_note: &r.count_note,
            tx_time: format!(
                "per batch: the frames of one send call (up to {}) carry the same send time in their probe",
                r.capabilities.batch
            ),
            backend_stats: &r.backend_stats,
            backend_capabilities: &r.capabilities,
            pacing: r
                .pacing
                .iter()
                .map(|(d, ns)| PacingDoc::of(d, *ns))
                .collect(),
            shape: r.shape.map(|s| ShapeDoc::of(&s, r.catch_up)),
            intervals: &r.intervals,
            streams: r.streams.iter().map(StreamSentDoc::of).collect(),
            per_flow_sent: &r.per_flow,
        }
    }
}

/// sink's document (receiver's count).
#[derive(Debug, Serialize)]
pub struct SinkDoc<'a> {
    role: &'static str,
    backend: &'static str,
    backend_note: &'a Option<String>,
    counted_by: &'static str,
    packets: u64,
    bytes: u64,
    duration_s: f64,
    pps: f64,
    bps_l2: f64,
    bps_l1: f64,
    lost: u64,
    end_markers: MarkersReceived,
    reordered: u64,
    duplicates: u64,
    anomalies: u64,
    other_frames: u64,
    oversized_frames: u64,
    backend_capabilities: &'a RxCapabilities,
    workers: usize,
    kernel_drops: u64,
    error: &'a Option<String>,
    capture: Option<CaptureDoc<'a>>,
    latency_ns: Option<Percentiles>,
    latency_arrival: Arrival,
    latency_clock: &'static str,
    intervals: &'a [Interval],
    flows: Vec<FlowDoc>,
}

#[derive(Debug, Serialize)]
struct MarkersReceived {
    flows_with_marker: usize,
    flows: usize,
    frames: u64,
    lost_counts_the_tail: bool,
}

#[derive(Debug, Serialize)]
struct CaptureDoc<'a> {
    path: &'a str,
    frames: u64,
    snaplen: u32,
    error: &'a Option<String>,
}

/// All flows' one-way latency, ns.
#[derive(Debug, Serialize)]
struct Percentiles {
    p50: u64,
    p90: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

#[derive(Debug, Serialize)]
struct Arrival {
    kernel_receive_stamp: u64,
    batch_handover: u64,
}

/// One flow's or stream's one-way latency, ns.
#[derive(Debug, Serialize)]
pub struct LatencySummary {
    min: f64,
    mean: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

impl LatencySummary {
    pub fn of(r: &SinkReport, f: &FlowCounts) -> Option<Self> {
        r.counts.latency_summary(f).map(|l| LatencySummary {
            min: l[0],
            mean: l[1],
            p50: l[2],
            p99: l[3],
            p999: l[4],
            max: l[5],
        })
    }
}

/// One flow (receiver's count; bytes without FCS).
#[derive(Debug, Serialize)]
struct FlowDoc {
    flow: u16,
    packets: u64,
    bytes: u64,
    lost: u64,
    sent_by_marker: Option<u64>,
    reordered: u64,
    duplicates: u64,
    anomalies: u64,
    jitter_ns: f64,
    latency_ns: Option<LatencySummary>,
}

impl<'a> SinkDoc<'a> {
    pub fn of(r: &'a SinkReport) -> Self {
        let c = &r.counts;
        let d = r.duration_s.max(1e-9);
        // Bytes counted without FCS; add it back for L2, and 20 B per frame for L1.
        let packets = c.packets();
        let (seen, flows) = c.markers_seen();
        SinkDoc {
            role: "sink",
            backend: r.backend,
            backend_note: &r.note,
            counted_by: "receiver: frames with a linerate probe that reached the socket",
            packets,
            bytes: c.bytes() + 4 * packets,
            duration_s: r.duration_s,
            pps: r.pps(),
            bps_l2: r.bps_l2(),
            bps_l1: r.bps_l2() + (20 * 8 * packets) as f64 / d,
            lost: c.lost(),
            end_markers: MarkersReceived {
                flows_with_marker: seen,
                flows,
                frames: c.markers,
                lost_counts_the_tail: seen == flows && flows > 0,
            },
            reordered: c.reordered(),
            duplicates: c.duplicates(),
            anomalies: c.anomalies(),
            other_frames: c.other,
            oversized_frames: c.oversized,
            backend_capabilities: &r.capabilities,
            workers: r.workers,
            kernel_drops: r.kernel_drops,
            error: &r.error,
            capture: r
                .capture
                .as_ref()
                .map(|(path, frames, snaplen, error)| CaptureDoc {
                    path,
                    frames: *frames,
                    snaplen: *snaplen,
                    error,
                }),
            latency_ns: c.latency_percentiles().map(|p| Percentiles {
                p50: p[0],
                p90: p[1],
                p99: p[2],
                p999: p[3],
                max: p[4],
            }),
            latency_arrival: Arrival {
                kernel_receive_stamp: r.arrival_stamped,
                batch_handover: r.arrival_handover,
            },
            latency_clock: if c.clocks_shared() {
                "shared (same host): one-way latency is valid"
            } else {
                "not shared: latency not measured"
            },
            intervals: &r.intervals,
            flows: c
                .flows
                .iter()
                .map(|(id, f)| FlowDoc {
                    flow: *id,
                    packets: f.seq.received(),
                    bytes: f.bytes,
                    lost: f.lost(),
                    sent_by_marker: f.sent_marker,
                    reordered: f.seq.late,
                    duplicates: f.seq.duplicates,
                    anomalies: f.seq.anomalies,
                    jitter_ns: f.jitter_ns(),
                    latency_ns: LatencySummary::of(r, f),
                })
                .collect(),
        }
    }
}

/// A stream the receiver counted by its probe flow id: nothing arrived,
/// or its loss, reordering, duplicates, jitter and one-way latency.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum StreamDoc<'a> {
    Missing {
        name: &'a str,
        id: u16,
        packets: u64,
    },
    Received {
        name: &'a str,
        id: u16,
        counted_by: &'static str,
        packets: u64,
        bytes: u64,
        lost: u64,
        sent_by_marker: Option<u64>,
        reordered: u64,
        duplicates: u64,
        jitter_ns: f64,
        latency_ns: Option<LatencySummary>,
    },
}

impl<'a> StreamDoc<'a> {
    /// Every stream of `streams` (name, probe flow id) as `r` counted it.
    pub fn all(r: &SinkReport, streams: &'a [(String, u16)]) -> Vec<Self> {
        streams
            .iter()
            .map(|(name, id)| match r.counts.flows.get(id) {
                None => StreamDoc::Missing {
                    name,
                    id: *id,
                    packets: 0,
                },
                Some(f) => StreamDoc::Received {
                    name,
                    id: *id,
                    counted_by: "receiver: the stream's probe flow id",
                    packets: f.seq.received(),
                    bytes: f.bytes + 4 * f.seq.received(),
                    lost: f.lost(),
                    sent_by_marker: f.sent_marker,
                    reordered: f.seq.late,
                    duplicates: f.seq.duplicates,
                    jitter_ns: f.jitter_ns(),
                    latency_ns: LatencySummary::of(r, f),
                },
            })
            .collect()
    }
}
