//! What every sender shares (blast's generator, the trace replay):
//! the configuration, the report and errors, the pacing margin, worker
//! rows. Both senders depend on this module and neither on the other's.

use linerate_backend::port::{
    BackendError, BackendKind, Capabilities, Gso, Span, Traffic, TxStats, UdpFlows,
};
use linerate_run::{CountedBy, Counts, Interval, Row, Scope};
use linerate_traffic::pacing::{CatchUp, Departures, Shape};
use linerate_traffic::template::Framing;
use linerate_traffic::{FlowSpec, SizeSequence, TemplateError};
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

/// What generated traffic needs from a port: UDP sockets send it when
/// the kernel can build its frames (no chosen MACs, tags or TCP flags),
/// raw frames otherwise, and the reason says why.
pub fn traffic(flows: &FlowSpec, framing: &Framing, macs_given: bool, gso: Gso) -> Traffic {
    let crafted = if framing.vxlan.is_some() {
        Some("VXLAN frames are crafted")
    } else if framing.stack.is_some() {
        Some("MPLS, GRE and ICMP frames are crafted")
    } else if framing.tcp_flags.is_some() {
        Some("TCP-flagged frames are crafted")
    } else if framing.vlan.is_some() {
        Some("802.1Q tags are crafted")
    } else if macs_given {
        Some("--src-mac/--dst-mac choose the Ethernet addresses")
    } else {
        None
    };
    let span = |r: &linerate_traffic::flows::Range| Span {
        first: r.first,
        step: r.step,
        count: r.count,
    };
    Traffic {
        udp: match crafted {
            Some(why) => Err(why.to_string()),
            None => Ok(UdpFlows {
                src_ip: span(&flows.src_ip),
                src_port: span(&flows.src_port),
                v6: flows.ipv6,
                tos: framing.dscp << 2,
                ttl: framing.ttl,
            }),
        },
        gso,
    }
}

/// A target rate (`"max"`, `{"pps": N}`, `{"bps_l1": N}`, `{"bps_l2": N}`
/// as JSON).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
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
    /// What a paced sender does with departures that fell due while it
    /// was late: send them at once (blast) or skip them (rfc2544's trials).
    pub catch_up: CatchUp,
    /// Frames beyond `burst` a late wake-up may still send at once under
    /// [`CatchUp::Skip`].
    pub burst_tolerance: u32,
    pub backend: BackendKind,
    /// The loopback ports `backend` loopback opens (the caller's
    /// registry; empty for kernel interfaces).
    pub wires: linerate_backend::port::Wires,
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

/// What `duration_s` spans when frames were sent: from the first send
/// call to the last one's return (set-up and the backend's finish left out).
pub const SENDING_SPAN: &str = "sending span: the first send call to the last";
/// What `duration_s` spans when nothing was sent: the whole run.
pub const WHOLE_RUN: &str = "the whole run (nothing was sent)";

/// What was sent (the sender's count: frames the kernel accepted).
#[derive(Debug, Clone)]
pub struct BlastReport {
    pub backend: &'static str,
    pub note: Option<String>,
    pub packets: u64,
    /// Frame bytes, FCS included.
    pub bytes: u64,
    pub duration_s: f64,
    /// What `duration_s` spans (the rates are over it).
    pub duration_from: &'static str,
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
    pub backend_stats: Vec<TxStats>,
    /// What the (first worker's) backend can do here.
    pub capabilities: Capabilities,
    /// Paced runs: each worker's measured gaps between send calls, and the
    /// gap its rate asked for per frame (ns).
    pub pacing: Vec<(Departures, f64)>,
    /// Paced runs: how the workers kept their schedule (late wake-ups,
    /// catch-up bursts, skipped departures), merged.
    pub shape: Option<Shape>,
    /// The catch-up rule the workers followed.
    pub catch_up: CatchUp,
    pub workers: usize,
    /// End-marker frames sent after the last frame (three per flow), not
    /// in `packets`; why none were, when asked.
    pub end_marker_frames: u64,
    pub end_marker_note: Option<String>,
    /// Why the run sent fewer frames than its `--count` asked, when the
    /// duration cut it short (`-t` bounds a count).
    pub count_note: Option<String>,
    /// A profile's streams (`blast --profile`): what each sent.
    pub streams: Vec<StreamSent>,
}

impl BlastReport {
    /// What the run has to say beside its figures, in order: the
    /// backend's note, a count the duration cut short, the end markers'.
    pub fn notes(&self) -> impl Iterator<Item = &String> {
        [&self.note, &self.count_note, &self.end_marker_note]
            .into_iter()
            .flatten()
    }

    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.duration_s.max(1e-9)
    }

    pub fn bps_l2(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.duration_s.max(1e-9)
    }

    pub fn bps_l1(&self) -> f64 {
        (self.bytes + 20 * self.packets) as f64 * 8.0 / self.duration_s.max(1e-9)
    }

    /// The sender's document (`-J`'s, without the doctor's summary).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(crate::outcome::BlastDoc::of(self)).unwrap_or_default()
    }
}

/// What one stream sent (sender's count).
#[derive(Debug, Clone)]
pub struct StreamSent {
    pub name: String,
    pub id: u16,
    pub packets: u64,
    /// Frame bytes, FCS included.
    pub bytes: u64,
    /// The gaps between the stream's frames as they were handed to the
    /// backend (sender's clock).
    pub departures: Departures,
}

/// Sends `frames` three times 1 ms apart (end markers: a lost one only
/// leaves the tail uncounted); returns the frames sent. A full ring or
/// buffer is retried for up to a second per chunk.
pub(crate) fn send_thrice(
    sock: &mut linerate_backend::port::Tx,
    frames: &[Vec<u8>],
    iface: &str,
) -> Result<u64, BlastError> {
    let mut sent = 0u64;
    for round in 0..3 {
        if round > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        for chunk in frames.chunks(64) {
            let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
            let mut done = 0;
            let give_up = std::time::Instant::now() + Duration::from_secs(1);
            while done < refs.len() && std::time::Instant::now() < give_up {
                match sock.send(&refs[done..]) {
                    Ok(k) => {
                        done += k;
                        sent += k as u64;
                    }
                    Err(e) if linerate_backend::port::send_refused(&e) => std::thread::yield_now(),
                    Err(source) => {
                        return Err(BlastError::Send {
                            iface: iface.to_string(),
                            source,
                        });
                    }
                }
            }
        }
    }
    Ok(sent)
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
    pub trace: linerate_traffic::pcap::Trace,
    pub rewrite: linerate_traffic::pcap::Rewrite,
    /// Times through the trace (0 = until the duration or count ends).
    pub loops: u64,
    pub timing: Timing,
}

/// What a blast worker sends from (`blast::send_all`): a frame builder
/// with the batch's send time, and its count of frames per probe flow id.
pub(super) trait Fill:
    linerate_backend::FrameSource + linerate_backend::port::PayloadSource
{
    fn set_stamp(&mut self, tx_ns: u64);
    fn per_flow(&self) -> Vec<(u16, u64)>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src_ip: &str, src_port: &str) -> FlowSpec {
        FlowSpec::parse(
            "02:00:00:00:00:01",
            "02:00:00:00:00:02",
            src_ip,
            "198.18.0.2",
            src_port,
            "9",
        )
        .unwrap()
    }

    #[test]
    fn traffic_names_what_needs_raw_frames() {
        let s = spec("198.18.0.1", "9");
        let plain = Framing::default();
        let t = traffic(&s, &plain, false, Gso::Auto);
        assert_eq!(t.udp_refusal(), None);
        let f = t.udp.unwrap();
        assert_eq!((f.src_ip.first, f.src_ip.count), (0xc612_0001, 1));
        assert_eq!((f.src_port.first, f.tos, f.v6), (9, 0, false));
        let why = |framing: &Framing, macs| traffic(&s, framing, macs, Gso::Auto).udp_refusal();
        assert!(why(&plain, true).unwrap().contains("--dst-mac"));
        let tagged = Framing {
            vlan: Some((5, 0)),
            ..Framing::default()
        };
        assert!(why(&tagged, false).unwrap().contains("802.1Q"));
        let syn = Framing {
            tcp_flags: Some(2),
            ..Framing::default()
        };
        assert!(why(&syn, false).unwrap().contains("TCP"));
        let dscp = Framing {
            dscp: 46,
            ..Framing::default()
        };
        assert_eq!(traffic(&s, &dscp, false, Gso::Auto).udp.unwrap().tos, 184);
        let wide = spec("198.18.0.1-198.18.0.4", "1000-1256");
        let refusal = traffic(&wide, &plain, false, Gso::Auto)
            .udp_refusal()
            .unwrap();
        assert!(refusal.contains("1028 source endpoints"), "{refusal}");
    }
}
