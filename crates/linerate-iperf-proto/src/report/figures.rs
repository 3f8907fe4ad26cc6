//! The figures a test hands the report: what is known at its start, each
//! interval's samples, each stream's end. Plain data, filled in by the
//! I/O layer; the report turns them into iperf3's text and `-J` document.

use crate::Params;
use std::net::SocketAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// How output is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputMode {
    /// `-J`: one JSON document at the end.
    pub json: bool,
    /// `--json-stream`: one JSON event per line.
    pub json_stream: bool,
    /// `--json-stream-full-output`: with `--json-stream`, the whole `-J`
    /// document follows the events (iperf3 3.21).
    pub json_stream_full: bool,
    /// `-f`: fixed unit letter.
    pub format: Option<char>,
    /// `-V`: iperf3's verbose lines (cookie, MSS, "Starting Test", "Test
    /// Complete", "CPU Utilization", the congestion algorithms).
    pub verbose: bool,
}

impl OutputMode {
    /// Human text (neither -J nor --json-stream).
    pub fn human(&self) -> bool {
        !self.json && !self.json_stream
    }
}

/// A connected data stream.
#[derive(Debug, Clone)]
pub struct StreamDesc {
    pub id: u32,
    /// The socket's fd number: iperf3's `[  5]` and the JSON `socket`.
    pub socket: i32,
    /// Whether this host sends on it.
    pub sender: bool,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// What is known when the test starts.
#[derive(Debug, Clone)]
pub struct StartInfo {
    pub role: Role,
    pub params: Params,
    pub cookie: String,
    pub system_info: String,
    pub timestamp_secs: u64,
    /// Client: the host as typed and the port; server: the client's address.
    pub peer_host: String,
    pub peer_port: u16,
    pub tcp_mss_default: u32,
    pub sndbuf_actual: u64,
    pub rcvbuf_actual: u64,
    pub interval_s: f64,
    /// This side sends UDP with GSO / asks for GRO on its UDP receivers
    /// (iperf3 3.21's `test_start.gso` / `gro`).
    pub gso: bool,
    pub gro: bool,
    pub streams: Vec<StreamDesc>,
    /// Facts about this host for the run-model start event (read by the
    /// I/O layer: this crate reads nothing).
    pub host: linerate_run::Host,
}

/// TCP_INFO figures of a sending stream in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpSample {
    pub retransmits: u64,
    /// Reorderings the sender's TCP saw in the interval (tcpi_reord_seen).
    pub reorder: u64,
    pub snd_cwnd: u64,
    pub snd_wnd: u64,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub pmtu: u32,
}

/// A UDP receiver's figures in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpRxSample {
    pub jitter_ms: f64,
    pub lost: u64,
    pub packets: u64,
}

/// One stream over one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalSample {
    pub id: u32,
    pub socket: i32,
    pub sender: bool,
    pub start: f64,
    pub end: f64,
    pub bytes: u64,
    pub omitted: bool,
    pub tcp: Option<TcpSample>,
    /// UDP sender: datagrams sent in the interval.
    pub udp_tx_packets: Option<u64>,
    pub udp_rx: Option<UdpRxSample>,
}

/// End-of-test TCP figures of a sending stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpFinal {
    pub retransmits: u64,
    /// Reorderings seen over the test (tcpi_reord_seen).
    pub reorder: u64,
    pub max_snd_cwnd: u64,
    pub max_snd_wnd: u64,
    pub max_rtt: u32,
    pub min_rtt: u32,
    pub mean_rtt: u32,
}

/// One stream's own figures at the end (after the omit period).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamFinal {
    pub id: u32,
    pub socket: i32,
    pub sender: bool,
    pub bytes: u64,
    pub seconds: f64,
    /// Sender: datagrams sent (cumulative); receiver: highest sequence seen.
    pub packets: u64,
    pub omitted_packets: u64,
    /// Receiver: lost, cumulative (iperf3's count).
    pub errors: u64,
    pub omitted_errors: u64,
    pub out_of_order: u64,
    pub jitter_s: f64,
    pub tcp: Option<TcpFinal>,
    /// linerate's exact UDP counts (receiver): duplicates, late, lost.
    pub exact: Option<(u64, u64, u64)>,
    /// Send calls refused by the kernel (EAGAIN/ENOBUFS), sender.
    pub send_errors: u64,
    pub congestion: Option<String>,
    /// Paced senders: measured gaps between send calls.
    pub departures: Option<DepartureStats>,
}

/// How evenly a paced sender sent: gaps between its send calls, measured
/// by the sender itself (each call hands `units_per_call` datagrams or
/// blocks to the kernel).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DepartureStats {
    pub calls: u64,
    pub units_per_call: f64,
    pub target_gap_us: f64,
    pub mean_gap_us: f64,
    pub stddev_gap_us: f64,
    pub min_gap_us: f64,
    pub max_gap_us: f64,
    /// p50, p99 and p99.9 of the gaps.
    pub gap_percentiles_us: [f64; 3],
}

/// CPU use of one side, percent of wall time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cpu {
    pub total: f64,
    pub user: f64,
    pub system: f64,
}

impl IntervalSample {
    /// Sums streams of one direction (times from the first stream).
    pub fn sum(streams: &[&IntervalSample]) -> Option<IntervalSample> {
        let first = streams.first()?;
        let mut s = IntervalSample {
            id: 0,
            socket: 0,
            sender: first.sender,
            start: first.start,
            end: first.end,
            omitted: first.omitted,
            ..Default::default()
        };
        for x in streams {
            s.bytes += x.bytes;
            if let Some(t) = &x.tcp {
                s.tcp.get_or_insert_with(TcpSample::default).retransmits += t.retransmits;
            }
            if let Some(n) = x.udp_tx_packets {
                *s.udp_tx_packets.get_or_insert(0) += n;
            }
            if let Some(rx) = &x.udp_rx {
                let acc = s.udp_rx.get_or_insert_with(UdpRxSample::default);
                acc.lost += rx.lost;
                acc.packets += rx.packets;
                acc.jitter_ms += rx.jitter_ms / streams.len() as f64;
            }
        }
        Some(s)
    }
}

/// Seconds to the microsecond, as iperf3 writes times.
pub(crate) fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Bits per second of `b` bytes over `s` seconds (0 over no time).
pub(crate) fn bps(b: u64, s: f64) -> f64 {
    if s > 0.0 { b as f64 * 8.0 / s } else { 0.0 }
}

/// A percentage of `part` in `whole` (0 of nothing).
pub(crate) fn percent(part: u64, whole: u64) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}

/// iperf3's percentage of a `-F` file a stream moved (100 for an empty
/// file).
pub(crate) fn diskfile_percent(moved: u64, size: u64) -> u64 {
    if size == 0 {
        100
    } else {
        (moved as f64 / size as f64 * 100.0) as u64
    }
}

/// An address's host as iperf3 writes it (an IPv4-mapped IPv6 address as
/// IPv4).
pub(crate) fn addr_host(a: &SocketAddr) -> String {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.ip().to_string(),
        },
        SocketAddr::V4(v4) => v4.ip().to_string(),
    }
}
