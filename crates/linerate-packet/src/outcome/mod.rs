//! blast's and sink's typed outcomes: the reports as the packet crate
//! counted them, their `-J` documents and summaries written from the
//! typed figures, and the figure a repetition measures.

mod doc;

pub use doc::{BlastDoc, SinkDoc, StreamDoc};

use crate::{BlastReport, SinkReport};
use linerate_run::{Figure, Outcome};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A blast run: the sender's report and, with `--rx-iface`, the receiver's
/// on the other port.
#[derive(Debug)]
pub struct BlastOutcome {
    pub report: BlastReport,
    pub doctor: Value,
    /// (the receiving interface, the sink's report)
    pub receiver: Option<(String, SinkReport)>,
    /// A profile's streams (name, probe flow id): the receiver's counts
    /// per stream.
    pub streams: Vec<(String, u16)>,
}

/// blast's `-J`: the sender's document, the doctor's summary, and with
/// `--rx-iface` the receiver's.
#[derive(Debug, Serialize)]
struct BlastOutcomeDoc<'a> {
    #[serde(flatten)]
    report: BlastDoc<'a>,
    doctor: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    receiver: Option<ReceiverDoc<'a>>,
}

/// `blast --rx-iface`'s receiver: the sink's document, its interface, the
/// frames sent that it did not count, a profile's streams.
#[derive(Debug, Serialize)]
struct ReceiverDoc<'a> {
    #[serde(flatten)]
    report: SinkDoc<'a>,
    iface: &'a str,
    /// Frames the sender counted that never reached the receiver: the
    /// difference of the two counts, beside the per-flow sequence loss.
    not_received: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    streams: Vec<StreamDoc<'a>>,
}

impl Outcome for BlastOutcome {
    fn document(&self) -> Value {
        let r = &self.report;
        serde_json::to_value(BlastOutcomeDoc {
            report: BlastDoc::of(r),
            doctor: &self.doctor,
            receiver: self.receiver.as_ref().map(|(iface, s)| ReceiverDoc {
                report: SinkDoc::of(s),
                iface,
                not_received: r.packets.saturating_sub(s.counts.packets()),
                streams: StreamDoc::all(s, &self.streams),
            }),
        })
        .unwrap_or_default()
    }

    fn text(&self) -> String {
        let r = &self.report;
        let mut text = format!(
            "sent {} frames ({} bytes) in {:.3} s: {:.0} pps, {} L1, {} L2 (sender's count: {}; backend {}; {} {}; {} send calls, {} refused and retried)\n",
            r.packets,
            r.bytes,
            r.duration_s,
            r.pps(),
            linerate_calc::format_bps(r.bps_l1()),
            linerate_calc::format_bps(r.bps_l2()),
            doc::sender_counted(r.backend).trim_start_matches("sender: "),
            r.backend,
            r.flows,
            match (r.streams.is_empty(), r.flows == 1) {
                (true, true) => "flow",
                (true, false) => "flows",
                (false, true) => "stream",
                (false, false) => "streams",
            },
            r.send_calls,
            r.send_errors
        );
        if let Some(sh) = r.shape.filter(|s| s.late_wakeups > 0) {
            text += &format!(
                "  pacing: woke late {} times (worst {:.1} ms); {} (sender's clock)\n",
                sh.late_wakeups,
                sh.max_late_ns as f64 / 1e6,
                match r.catch_up {
                    linerate_traffic::pacing::CatchUp::Burst => format!(
                        "caught up in bursts of up to {} frames beyond the schedule (--catch-up burst)",
                        sh.max_burst
                    ),
                    linerate_traffic::pacing::CatchUp::Skip => format!(
                        "{} departures skipped, not sent; bursts of up to {} frames beyond the schedule (--catch-up skip)",
                        sh.skipped, sh.max_burst
                    ),
                }
            );
        }
        for s in &r.streams {
            let d = &s.departures;
            text += &format!(
                "  stream {} (id {}): sent {} frames, {} bytes; gaps mean {:.1} µs, stddev {:.1} µs (sender's clock)\n",
                s.name,
                s.id,
                s.packets,
                s.bytes,
                d.mean_gap_ns / 1e3,
                d.stddev_gap_ns() / 1e3
            );
        }
        if let Some((iface, s)) = &self.receiver {
            text += &sink_text(s, iface, Some(r.packets), self.streams.is_empty());
            text += &streams_text(s, &self.streams);
        }
        text
    }

    /// With `--rx-iface` the receiver's frames per second, else the sender's.
    fn figure(&self) -> Option<Figure> {
        Some(match &self.receiver {
            Some((_, s)) => Figure {
                name: "receiver pps",
                unit: "frames/s",
                value: s.pps(),
            },
            None => Figure {
                name: "sender pps",
                unit: "frames/s",
                value: self.report.pps(),
            },
        })
    }
}

/// Where `sink --hist` went: the path and, if writing failed, why.
pub type HistWritten = (PathBuf, Result<(), String>);

/// A sink run.
#[derive(Debug)]
pub struct SinkOutcome {
    pub report: SinkReport,
    pub doctor: Value,
    pub iface: String,
    pub hist: Option<HistWritten>,
    /// `sink --profile`: the streams (name, probe flow id) to report.
    pub streams: Vec<(String, u16)>,
}

/// sink's `-J`: its document, the doctor's summary, a profile's streams,
/// where `--hist` went.
#[derive(Debug, Serialize)]
struct SinkOutcomeDoc<'a> {
    #[serde(flatten)]
    report: SinkDoc<'a>,
    doctor: &'a Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    streams: Vec<StreamDoc<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hist: Option<HistDoc<'a>>,
}

/// `sink --hist`: the file written, or why it was not.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum HistDoc<'a> {
    Written {
        path: &'a Path,
        format: &'static str,
    },
    Failed {
        path: &'a Path,
        error: &'a str,
    },
}

impl Outcome for SinkOutcome {
    fn document(&self) -> Value {
        serde_json::to_value(SinkOutcomeDoc {
            report: SinkDoc::of(&self.report),
            doctor: &self.doctor,
            streams: StreamDoc::all(&self.report, &self.streams),
            hist: self.hist.as_ref().map(|(path, written)| match written {
                Ok(()) => HistDoc::Written {
                    path,
                    format: "HdrHistogram interval log V2, ns",
                },
                Err(error) => HistDoc::Failed { path, error },
            }),
        })
        .unwrap_or_default()
    }

    fn text(&self) -> String {
        sink_text(&self.report, &self.iface, None, self.streams.is_empty())
            + &streams_text(&self.report, &self.streams)
    }

    fn figure(&self) -> Option<Figure> {
        Some(Figure {
            name: "receiver pps",
            unit: "frames/s",
            value: self.report.pps(),
        })
    }
}

/// The receiver's counts of each stream (its probe flow id's): `None`
/// for a stream none of whose frames arrived.
fn stream_counts<'a>(
    r: &'a SinkReport,
    streams: &'a [(String, u16)],
) -> impl Iterator<
    Item = (
        &'a str,
        u16,
        Option<&'a linerate_traffic::accounting::FlowCounts>,
    ),
> {
    streams
        .iter()
        .map(|(name, id)| (name.as_str(), *id, r.counts.flows.get(id)))
}

/// One line per stream (receiver's count).
fn streams_text(r: &SinkReport, streams: &[(String, u16)]) -> String {
    use std::fmt::Write;
    let mut t = String::new();
    for (name, id, f) in stream_counts(r, streams) {
        let _ = match f {
            None => writeln!(t, "  stream {name} (id {id}): nothing received"),
            Some(f) => {
                let lat = r.counts.latency_summary(f).map_or(String::new(), |l| {
                    format!(
                        ", latency p50 {:.0} / p99 {:.0} / max {:.0} ns",
                        l[2], l[3], l[5]
                    )
                });
                writeln!(
                    t,
                    "  stream {name} (id {id}): received {}, lost {}, reordered {}, duplicates {}, jitter {:.0} ns{lat}",
                    f.seq.received(),
                    f.lost(),
                    f.seq.late,
                    f.seq.duplicates,
                    f.jitter_ns()
                )
            }
        };
    }
    t
}

/// The sink's summary lines; `sent`: the sender's count, when the sender
/// ran in this process (blast --rx-iface); `per_flow`: a line per flow
/// (when there are 2 to 16 and no streams are named).
fn sink_text(r: &SinkReport, iface: &str, sent: Option<u64>, per_flow: bool) -> String {
    use std::fmt::Write;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "received {} probe frames in {:.3} s: {:.0} pps, {} L2 (receiver's count, backend {}); lost {}, reordered {}, duplicates {}, kernel drops {}",
        r.counts.packets(),
        r.duration_s,
        r.pps(),
        linerate_calc::format_bps(r.bps_l2()),
        r.backend,
        r.counts.lost(),
        r.counts.reordered(),
        r.counts.duplicates(),
        r.kernel_drops
    );
    let anomalies = r.counts.anomalies();
    if anomalies > 0 {
        let _ = writeln!(
            t,
            "anomalies: {anomalies} probe(s) with a sequence jump or sender's count no flow could have (forged or corrupt): left out of the counts above"
        );
    }
    if let Some(p) = r.counts.latency_percentiles() {
        let _ = writeln!(
            t,
            "one-way latency (same-host clock): p50 {} ns, p99 {} ns, max {} ns",
            p[0], p[2], p[4]
        );
    }
    let (seen, flows) = r.counts.markers_seen();
    if let Some(sent) = sent {
        let _ = writeln!(
            t,
            "not received: {} of {sent} frames sent (the sender's count less the receiver's, the tail included)",
            sent.saturating_sub(r.counts.packets())
        );
    } else if flows > 0 {
        let _ = if seen == flows {
            writeln!(
                t,
                "end markers from the sender for {}: loss includes frames lost after each flow's last arrival",
                if flows == 1 {
                    "its flow".to_string()
                } else {
                    format!("all {flows} flows")
                }
            )
        } else if seen == 0 {
            writeln!(
                t,
                "no end marker from the sender (blast --no-end-marker, or its UDP socket path): frames lost after each flow's last arrival are not counted"
            )
        } else {
            writeln!(
                t,
                "end markers for {seen} of {flows} flows: the others' tail loss is not counted"
            )
        };
    }
    // Per flow, for a readable number of flows (all of them are in -J).
    if per_flow && (2..=16).contains(&r.counts.flows.len()) {
        for (id, f) in &r.counts.flows {
            let lat = r.counts.latency_summary(f).map_or(String::new(), |l| {
                format!(
                    ", latency min {:.0} / p50 {:.0} / p99 {:.0} / max {:.0} ns",
                    l[0], l[2], l[3], l[5]
                )
            });
            let _ = writeln!(
                t,
                "  flow {id}: {} packets, lost {}, jitter {:.0} ns (RFC 3550){lat}",
                f.seq.received(),
                f.lost(),
                f.jitter_ns()
            );
        }
    }
    if r.counts.oversized > 0 {
        let _ = writeln!(
            t,
            "{} frames were longer than {iface}'s MTU allows: GSO/GRO batches handed over whole, of which only the first datagram counts (a veth sender: `ethtool -K IF tx-udp-segmentation off`)",
            r.counts.oversized
        );
    }
    if let Some((path, frames, snaplen, error)) = &r.capture {
        let _ = match error {
            None => writeln!(t, "wrote {frames} frames to {path} (snaplen {snaplen})"),
            Some(e) => writeln!(t, "capture stopped after {frames} frames: {e}"),
        };
    }
    t
}

#[cfg(test)]
mod tests;
