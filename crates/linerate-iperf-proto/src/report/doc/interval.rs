//! iperf3's `intervals[]`: each stream's figures over one interval and
//! their sums, with iperf3's keys, types and units.

use crate::report::figures::{IntervalSample, percent, round6};
use serde::Serialize;

/// One interval: its streams, their sum and (`--bidir`) the reverse
/// direction's sum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalSet {
    pub streams: Vec<IntervalDoc>,
    pub sum: Sum,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_bidir_reverse: Option<IntervalDoc>,
}

/// An interval's `sum`: `{}` when it had no stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Sum {
    Of(IntervalDoc),
    Empty {},
}

/// One stream's (or a sum's) figures over one interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalDoc {
    /// A stream's socket (sums have none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<i32>,
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// A TCP sender's retransmits (streams and sums).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// A TCP sending stream's TCP_INFO.
    #[serde(flatten)]
    pub tcp_info: Option<TcpInfo>,
    /// A UDP sender's datagrams.
    #[serde(rename = "packets", skip_serializing_if = "Option::is_none")]
    pub sent_packets: Option<u64>,
    #[serde(flatten)]
    pub udp_rx: Option<UdpRx>,
    pub omitted: bool,
    pub sender: bool,
}

/// TCP_INFO of a sending stream at the interval's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TcpInfo {
    pub snd_cwnd: u64,
    pub snd_wnd: u64,
    pub rtt: u32,
    pub rttvar: u32,
    pub pmtu: u32,
    pub reorder: u64,
}

/// A UDP receiver's figures over the interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UdpRx {
    pub jitter_ms: f64,
    pub lost_packets: u64,
    /// Written here unless the sender's count took the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    pub lost_percent: f64,
}

impl IntervalDoc {
    /// A stream's object (`with_socket`) or a sum's.
    pub fn new(s: &IntervalSample, with_socket: bool) -> Self {
        let secs = s.end - s.start;
        let udp_rx = s.udp_rx.map(|rx| UdpRx {
            jitter_ms: crate::udp::jitter_ms(rx.jitter_ms / 1000.0),
            lost_packets: rx.lost,
            packets: s.udp_tx_packets.is_none().then_some(rx.packets),
            lost_percent: percent(rx.lost, rx.packets),
        });
        Self {
            socket: with_socket.then_some(s.socket),
            start: round6(s.start),
            end: round6(s.end),
            seconds: round6(secs),
            bytes: s.bytes,
            bits_per_second: if secs > 0.0 {
                s.bytes as f64 * 8.0 / secs
            } else {
                0.0
            },
            retransmits: s.tcp.map(|t| t.retransmits),
            tcp_info: s.tcp.filter(|_| with_socket).map(|t| TcpInfo {
                snd_cwnd: t.snd_cwnd,
                snd_wnd: t.snd_wnd,
                rtt: t.rtt_us,
                rttvar: t.rttvar_us,
                pmtu: t.pmtu,
                reorder: t.reorder,
            }),
            // One `packets` key: a sample with both a sender's and a
            // receiver's count writes the receiver's, in the sender's place.
            sent_packets: s
                .udp_tx_packets
                .map(|n| s.udp_rx.map_or(n, |rx| rx.packets)),
            udp_rx,
            omitted: s.omitted,
            sender: s.sender,
        }
    }
}
