//! iperf3's `end` object: each stream's totals from this side's figures and
//! the peer's results, the sums per direction, CPU use and congestion
//! control, with iperf3 3.21's keys, types and units.

use crate::report::figures::{
    Cpu, Role, StreamFinal, TcpFinal, bps, diskfile_percent, percent, round6,
};
use crate::{Params, PeerResults, Protocol, StreamResult, TestMode};
use serde::Serialize;

/// `end`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndDoc {
    pub streams: Vec<StreamEnd>,
    /// UDP: the legacy `sum` (the sender's figures with the receiver's loss).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<SumDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent: Option<SumDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received: Option<SumDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_bidir_reverse: Option<SumDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent_bidir_reverse: Option<SumDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received_bidir_reverse: Option<SumDoc>,
    pub cpu_utilization_percent: CpuDoc,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_tcp_congestion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_tcp_congestion: Option<String>,
}

/// One stream's `end.streams[]`: `udp`, or TCP's `sender` and `receiver`
/// halves; `diskfile` with `-F`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamEnd {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpStreamEnd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<TcpSenderEnd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<TcpReceiverEnd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diskfile: Option<Diskfile>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UdpStreamEnd {
    pub socket: i32,
    /// Always 0 (an integer, as iperf3 writes it).
    pub start: u8,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub jitter_ms: f64,
    pub lost_packets: u64,
    pub packets: u64,
    pub lost_percent: f64,
    pub out_of_order: u64,
    pub sender: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpSenderEnd {
    pub socket: i32,
    pub start: u8,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// With the sending side's retransmits known (see [`TcpSenderInfo`]).
    #[serde(flatten)]
    pub info: Option<TcpSenderInfo>,
    pub sender: bool,
}

/// The sender's retransmits and TCP_INFO over the test: iperf3 3.21 writes
/// them when the sending side's retransmits are known (always for this
/// side's senders, for the peer's once its results came, never on a
/// server for what the client sent); zeros where the sender is the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TcpSenderInfo {
    pub retransmits: u64,
    pub reorder: u64,
    pub max_snd_cwnd: u64,
    pub max_snd_wnd: u64,
    pub max_rtt: u32,
    pub min_rtt: u32,
    pub mean_rtt: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpReceiverEnd {
    pub socket: i32,
    pub start: u8,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub sender: bool,
}

/// `-F`: how much of the file a stream moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diskfile {
    pub sent: u64,
    pub received: u64,
    pub size: u64,
    pub percent_sent: u64,
    pub percent_received: u64,
    pub filename: String,
}

/// A direction's `sum_sent`, `sum_received` or (UDP) `sum`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SumDoc {
    pub start: u8,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    #[serde(flatten)]
    pub udp: Option<UdpSum>,
    pub sender: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UdpSum {
    pub jitter_ms: f64,
    pub lost_packets: u64,
    pub packets: u64,
    pub lost_percent: f64,
}

/// `cpu_utilization_percent`: this host's and the peer's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuDoc {
    pub host_total: f64,
    pub host_user: f64,
    pub host_system: f64,
    pub remote_total: f64,
    pub remote_user: f64,
    pub remote_system: f64,
}

/// One direction's figures summed over its streams.
#[derive(Default, Clone, Copy)]
struct Acc {
    sent: u64,
    recv: u64,
    sent_s: f64,
    recv_s: f64,
    retrans: Option<u64>,
    packets: u64,
    lost: u64,
    jitter: f64,
    n: usize,
    ooo: u64,
}

/// What the end is made from besides the streams' figures.
#[derive(Debug)]
pub struct EndInput<'a> {
    pub role: Role,
    pub params: &'a Params,
    pub cpu: Cpu,
    pub peer: Option<&'a PeerResults>,
    /// `-F`: the file's name and size.
    pub diskfile: Option<&'a (String, u64)>,
}

impl EndDoc {
    /// The end, and the receiver's rate (both directions with `--bidir`):
    /// what a repetition measures, as `sum_received` (+ `_bidir_reverse`)
    /// say.
    pub fn new(finals: &[StreamFinal], x: &EndInput) -> (Self, f64) {
        let p = x.params;
        let udp = p.protocol == Protocol::Udp;
        let client = x.role == Role::Client;
        let (mut fwd, mut rev) = (Acc::default(), Acc::default());
        let streams = finals
            .iter()
            .map(|f| {
                // A client's sending streams carry data client → server.
                let acc = if f.sender == client {
                    &mut fwd
                } else {
                    &mut rev
                };
                let pr = x.peer.and_then(|r| r.stream(f.id));
                let mut s = stream_end(f, pr, acc, udp);
                s.diskfile = x.diskfile.map(|d| s.diskfile(d));
                s
            })
            .collect();
        let received_bps = match (rev.n > 0, p.mode == TestMode::Bidir) {
            (true, true) => bps(fwd.recv, fwd.recv_s) + bps(rev.recv, rev.recv_s),
            (true, false) => bps(rev.recv, rev.recv_s),
            (false, _) => bps(fwd.recv, fwd.recv_s),
        };
        let remote = x.peer.map_or(Cpu::default(), |r| Cpu {
            total: r.cpu_util_total,
            user: r.cpu_util_user,
            system: r.cpu_util_system,
        });
        let mut end = Self {
            streams,
            sum: None,
            sum_sent: None,
            sum_received: None,
            sum_bidir_reverse: None,
            sum_sent_bidir_reverse: None,
            sum_received_bidir_reverse: None,
            cpu_utilization_percent: CpuDoc {
                host_total: x.cpu.total,
                host_user: x.cpu.user,
                host_system: x.cpu.system,
                remote_total: remote.total,
                remote_user: remote.user,
                remote_system: remote.system,
            },
            sender_tcp_congestion: None,
            receiver_tcp_congestion: None,
        };
        if fwd.n > 0 || rev.n == 0 {
            let (s, r, l) = sums(&fwd, client, udp);
            (end.sum, end.sum_sent, end.sum_received) = (l, Some(s), Some(r));
        }
        if rev.n > 0 {
            let (s, r, l) = sums(&rev, !client, udp);
            if p.mode == TestMode::Bidir {
                end.sum_bidir_reverse = l;
                end.sum_sent_bidir_reverse = Some(s);
                end.sum_received_bidir_reverse = Some(r);
            } else {
                (end.sum, end.sum_sent, end.sum_received) = (l, Some(s), Some(r));
            }
        }
        if !udp {
            (end.sender_tcp_congestion, end.receiver_tcp_congestion) = congestion(finals, x.peer);
        }
        (end, received_bps)
    }
}

impl StreamEnd {
    /// `-F`'s figures for this stream (a UDP stream moves no file: 0s).
    fn diskfile(&self, (name, size): &(String, u64)) -> Diskfile {
        let sent = self.sender.as_ref().map_or(0, |s| s.bytes);
        let received = self.receiver.as_ref().map_or(0, |r| r.bytes);
        let pct = |moved| diskfile_percent(moved, *size);
        Diskfile {
            sent,
            received,
            size: *size,
            percent_sent: pct(sent),
            percent_received: pct(received),
            filename: name.clone(),
        }
    }
}

/// One stream's end, from this side's figures and the peer's; its
/// figures are added to `acc`.
fn stream_end(f: &StreamFinal, pr: Option<&StreamResult>, acc: &mut Acc, udp: bool) -> StreamEnd {
    // The peer's duration, or this side's where the peer's is not known:
    // iperf3's fallback (its server writes its document before the
    // client's results arrive, so its peer half has the server's own
    // seconds, never 0).
    let peer_s = pr
        .map(|r| r.end_time - r.start_time)
        .filter(|&s| s > 0.0)
        .unwrap_or(f.seconds);
    let (sent, sent_s, recv, recv_s) = if f.sender {
        (f.bytes, f.seconds, pr.map_or(0, |r| r.bytes), peer_s)
    } else {
        (pr.map_or(0, |r| r.bytes), peer_s, f.bytes, f.seconds)
    };
    acc.sent += sent;
    acc.recv += recv;
    acc.sent_s = acc.sent_s.max(sent_s);
    acc.recv_s = acc.recv_s.max(recv_s);
    acc.n += 1;
    if udp {
        StreamEnd {
            udp: Some(udp_stream_end(f, pr, acc, (sent, sent_s))),
            sender: None,
            receiver: None,
            diskfile: None,
        }
    } else {
        StreamEnd {
            udp: None,
            sender: Some(tcp_sender_end(f, pr, acc, (sent, sent_s))),
            receiver: Some(TcpReceiverEnd {
                socket: f.socket,
                start: 0,
                end: round6(recv_s),
                seconds: round6(f.seconds),
                bytes: recv,
                bits_per_second: bps(recv, recv_s),
                sender: f.sender,
            }),
            diskfile: None,
        }
    }
}

fn udp_stream_end(
    f: &StreamFinal,
    pr: Option<&StreamResult>,
    acc: &mut Acc,
    (sent, sent_s): (u64, f64),
) -> UdpStreamEnd {
    let omitted = |x: u64, o: u64| x.saturating_sub(o);
    // Sender's count of datagrams if known, receiver's loss/jitter.
    let (packets, o_packets, lost, jitter_s, ooo) = if f.sender {
        let r = pr.cloned().unwrap_or_default();
        (
            f.packets,
            f.omitted_packets,
            omitted(r.errors, r.omitted_errors),
            r.jitter_s,
            0,
        )
    } else {
        let (pk, opk) = pr.map_or((f.packets, f.omitted_packets), |r| {
            (r.packets, r.omitted_packets)
        });
        (
            pk,
            opk,
            omitted(f.errors, f.omitted_errors),
            f.jitter_s,
            f.out_of_order,
        )
    };
    let packets = omitted(packets, o_packets);
    acc.packets += packets;
    acc.lost += lost;
    acc.jitter += jitter_s * 1000.0;
    acc.ooo += ooo;
    UdpStreamEnd {
        socket: f.socket,
        start: 0,
        end: round6(sent_s),
        seconds: round6(sent_s),
        bytes: sent,
        bits_per_second: bps(sent, sent_s),
        jitter_ms: crate::udp::jitter_ms(jitter_s),
        lost_packets: lost,
        packets,
        lost_percent: percent(lost, packets),
        out_of_order: ooo,
        sender: f.sender,
    }
}

fn tcp_sender_end(
    f: &StreamFinal,
    pr: Option<&StreamResult>,
    acc: &mut Acc,
    (sent, sent_s): (u64, f64),
) -> TcpSenderEnd {
    let retrans = if f.sender {
        f.tcp.map(|t| t.retransmits)
    } else {
        pr.and_then(|r| u64::try_from(r.retransmits).ok())
    };
    let info = retrans.map(|r| {
        *acc.retrans.get_or_insert(0) += r;
        let t = if f.sender {
            f.tcp.unwrap_or_default()
        } else {
            TcpFinal::default()
        };
        TcpSenderInfo {
            retransmits: r,
            reorder: t.reorder,
            max_snd_cwnd: t.max_snd_cwnd,
            max_snd_wnd: t.max_snd_wnd,
            max_rtt: t.max_rtt,
            min_rtt: t.min_rtt,
            mean_rtt: t.mean_rtt,
        }
    });
    TcpSenderEnd {
        socket: f.socket,
        start: 0,
        end: round6(sent_s),
        seconds: round6(sent_s),
        bytes: sent,
        bits_per_second: bps(sent, sent_s),
        info,
        sender: f.sender,
    }
}

/// A direction's `sum_sent`, `sum_received` and (UDP) legacy `sum`.
fn sums(a: &Acc, sends: bool, udp: bool) -> (SumDoc, SumDoc, Option<SumDoc>) {
    let sum = |bytes: u64, s: f64, sender: bool, udp: Option<UdpSum>| SumDoc {
        start: 0,
        end: round6(s),
        seconds: round6(s),
        bytes,
        bits_per_second: bps(bytes, s),
        retransmits: None,
        udp,
        sender,
    };
    if !udp {
        let sent = SumDoc {
            retransmits: a.retrans,
            ..sum(a.sent, a.sent_s, sends, None)
        };
        return (sent, sum(a.recv, a.recv_s, sends, None), None);
    }
    let jitter = if a.n > 0 { a.jitter / a.n as f64 } else { 0.0 };
    let loss = UdpSum {
        jitter_ms: crate::udp::jitter_ms(jitter / 1000.0),
        lost_packets: a.lost,
        packets: a.packets,
        lost_percent: percent(a.lost, a.packets),
    };
    let none_lost = UdpSum {
        jitter_ms: 0.0,
        lost_packets: 0,
        packets: a.packets,
        lost_percent: 0.0,
    };
    (
        sum(a.sent, a.sent_s, true, Some(none_lost)),
        sum(a.recv, a.recv_s, false, Some(loss)),
        Some(sum(a.sent, a.sent_s, sends, Some(loss))),
    )
}

/// `sender_tcp_congestion` / `receiver_tcp_congestion`.
fn congestion(
    finals: &[StreamFinal],
    peer: Option<&PeerResults>,
) -> (Option<String>, Option<String>) {
    let local = finals.iter().find_map(|f| f.congestion.clone());
    let remote = peer.and_then(|r| r.congestion_used.clone());
    if finals.iter().any(|f| f.sender) {
        (local, remote)
    } else {
        (remote, local)
    }
}
