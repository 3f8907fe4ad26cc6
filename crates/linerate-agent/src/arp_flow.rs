//! The model's `arp` flows: a packet of `ethernet` then `arp`, each ARP
//! field (hardware and protocol type and length, operation, sender and
//! target hardware and protocol addresses) a `value`, `values`,
//! `increment` or `decrement` stepped on its own per frame as the model
//! says (frame n carries value n mod count of each field), as the
//! Ethernet addresses are.
//!
//! Sending: the frames of one period of the fields' patterns (and of the
//! flow's sizes) are laid out at plan time and sent in turn by the
//! blast's replay of an in-memory trace (`linerate_packet::Replay`), at
//! the flow's rate and count. A frame is 14 bytes of Ethernet header, 28
//! of ARP and zeros to the flow's size (at least 64 with the FCS).
//!
//! Counting: no probe fits in an ARP frame, so a flow's receivers are of
//! their own: on each receive port an AF_PACKET socket (the backend's
//! `RawSocket`, a kernel filter passing ARP only) opened before the first
//! frame, counting the frames whose Ethernet and ARP headers (their
//! first 42 bytes) are those of one of the flow's frames, until every
//! sent frame is counted or the drain ends. Flows whose frames differ in
//! any header byte are told apart exactly, however many share a port; a
//! frame whose headers two running flows both send is counted by each,
//! and a flow's count never exceeds what it sent. No latency is measured
//! (no send time rides in the frame).

use crate::json::{Invalid, Obj, invalid};
use crate::model::{Headers, Kind, Size, body, ethernet_typed, ranged};
use crate::plan::{Options, PlanFlow, PlanPort};
use linerate_packet::{BlastReport, SinkReport};
use linerate_run::Interval;
use linerate_traffic::flows::Range;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// An ARP frame's Ethernet and ARP headers.
pub const HEADER_LEN: usize = 42;
/// The smallest ARP frame with its FCS (60 bytes padded, and 4).
pub const SIZE_MIN: u16 = 64;
/// Most frames in one period of a flow's patterns (laid out ahead).
pub const PERIOD_MAX: u64 = 1 << 16;

/// An `arp` header's fields, each a range walked per frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arp {
    pub hardware_type: Range,
    pub protocol_type: Range,
    pub hardware_length: Range,
    pub protocol_length: Range,
    pub operation: Range,
    pub sender_hardware_addr: Range,
    pub sender_protocol_addr: Range,
    pub target_hardware_addr: Range,
    pub target_protocol_addr: Range,
}

impl Arp {
    /// The fields with their widths in bytes, in frame order.
    fn fields(&self) -> [(Range, usize); 9] {
        [
            (self.hardware_type, 2),
            (self.protocol_type, 2),
            (self.hardware_length, 1),
            (self.protocol_length, 1),
            (self.operation, 2),
            (self.sender_hardware_addr, 6),
            (self.sender_protocol_addr, 4),
            (self.target_hardware_addr, 6),
            (self.target_protocol_addr, 4),
        ]
    }
}

/// Whether a packet's headers are an ARP flow's.
pub fn is_arp(names: &[&str]) -> bool {
    names.contains(&"arp")
}

/// An ARP flow's packet (`hs`: its headers, `path` the packet's path):
/// ethernet then arp, read into [`Headers`] (the IP and port fields
/// unused, one value each).
pub fn headers(path: &str, hs: &[(&str, Obj)]) -> Result<Headers, Invalid> {
    let names: Vec<&str> = hs.iter().map(|(c, _)| *c).collect();
    if names != ["ethernet", "arp"] {
        return Err(invalid(
            path,
            format!(
                "headers [{}]: an arp flow's packet is ethernet then arp (no vlan, nothing after)",
                names.join(", ")
            ),
        ));
    }
    let (eth_src, eth_dst) = ethernet_typed(&body(&hs[0])?, 0x0806)?;
    let a = body(&hs[1])?;
    let arp = Arp {
        hardware_type: ranged(&a, "hardware_type", Kind::Bits(16), 1)?,
        protocol_type: ranged(&a, "protocol_type", Kind::Bits(16), 0x0800)?,
        hardware_length: ranged(&a, "hardware_length", Kind::Bits(8), 6)?,
        protocol_length: ranged(&a, "protocol_length", Kind::Bits(8), 4)?,
        operation: ranged(&a, "operation", Kind::Bits(16), 1)?,
        sender_hardware_addr: ranged(&a, "sender_hardware_addr", Kind::Mac, 0)?,
        sender_protocol_addr: ranged(&a, "sender_protocol_addr", Kind::V4, 0)?,
        target_hardware_addr: ranged(&a, "target_hardware_addr", Kind::Mac, 0)?,
        target_protocol_addr: ranged(&a, "target_protocol_addr", Kind::V4, 0)?,
    };
    a.done()?;
    let zero = Range::single(0);
    Ok(Headers {
        eth_src,
        eth_dst,
        vlan: None,
        ipv6: false,
        ip_src: zero,
        ip_dst: zero,
        ttl: 64,
        dscp: 0,
        tcp_flags: None,
        src_port: zero,
        dst_port: zero,
        random: [None; 4],
        vxlan: None,
        custom: None,
        stack: None,
        arp: Some(Box::new(arp)),
    })
}

/// Value n of range `r` in a field of `bytes` bytes.
fn nth(r: &Range, n: u64, bytes: usize) -> u128 {
    let v = r
        .first
        .wrapping_add(u128::from(n % r.count).wrapping_mul(r.step));
    v & ((1u128 << (8 * bytes)) - 1)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The frames of one period of the flow's patterns and sizes (each
/// without its FCS), from its Ethernet addresses (`dst` resolved).
pub fn frames(
    path: &str,
    arp: &Arp,
    src: &Range,
    dst: &Range,
    sizes: &[u16],
) -> Result<Vec<Vec<u8>>, Invalid> {
    let mut period = 1u64;
    let counts = arp
        .fields()
        .iter()
        .map(|(r, _)| r.count)
        .chain([src.count, dst.count, sizes.len() as u64])
        .collect::<Vec<_>>();
    for c in counts {
        period = period / gcd(period, c) * c;
        if period > PERIOD_MAX {
            return Err(invalid(
                path,
                format!(
                    "the counts of its fields' patterns (and sizes) repeat after more than {PERIOD_MAX} frames: linerate lays an arp flow's frames out ahead, at most {PERIOD_MAX}"
                ),
            ));
        }
    }
    Ok((0..period)
        .map(|n| {
            let size = usize::from(sizes[(n % sizes.len() as u64) as usize]);
            let mut f = Vec::with_capacity(size - 4);
            f.extend_from_slice(&nth(dst, n, 6).to_be_bytes()[10..]);
            f.extend_from_slice(&nth(src, n, 6).to_be_bytes()[10..]);
            f.extend_from_slice(&[0x08, 0x06]);
            for (r, w) in arp.fields() {
                f.extend_from_slice(&nth(&r, n, w).to_be_bytes()[16 - w..]);
            }
            f.resize(size - 4, 0);
            f
        })
        .collect())
}

/// The sizes an ARP flow's frames take in turn, each at least
/// [`SIZE_MIN`].
fn sizes(path: &str, s: &Size) -> Result<Vec<u16>, Invalid> {
    let v: Vec<u16> = match s {
        Size::Fixed(n) => vec![*n],
        Size::Increment { start, end, step } => {
            (*start..=*end).step_by(usize::from(*step)).collect()
        }
        Size::Weights(_) => {
            return Err(invalid(
                path,
                "an arp flow's size is fixed or increment (its frames are laid out ahead)",
            ));
        }
    };
    if let Some(&small) = v.iter().find(|&&n| n < SIZE_MIN) {
        return Err(invalid(
            path,
            format!("{small} bytes: an ARP frame is 60 bytes and its FCS, at least {SIZE_MIN}"),
        ));
    }
    Ok(v)
}

/// The signature of `plan`'s flow planner this wraps.
pub type PlanFlowFn =
    fn(&str, &crate::model::Flow, &[PlanPort], &Options, &mut u32) -> Result<PlanFlow, Invalid>;

/// Plans flow `f` at `path` with `inner` (plan's planner); an ARP flow is
/// planned as a flow of its Ethernet addresses, then sent as a replay of
/// its laid-out frames, counted by [`send_and_count`] (no sinks).
pub fn planned(
    path: &str,
    f: &crate::model::Flow,
    ports: &[PlanPort],
    opts: &Options,
    next_id: &mut u32,
    inner: PlanFlowFn,
) -> Result<PlanFlow, Invalid> {
    let Some(arp) = &f.headers.arp else {
        return inner(path, f, ports, opts, next_id);
    };
    if f.device.is_some() {
        return Err(invalid(
            &format!("{path}.tx_rx"),
            "an arp flow is a port flow (tx_rx.port)",
        ));
    }
    if opts.rx_backend == linerate_packet::BackendKind::Loopback {
        return Err(invalid(
            &format!("{path}.packet"),
            "an arp flow is counted on its receive ports' interfaces: not on loopback ports",
        ));
    }
    if let Some(r) =
        f.rx.iter()
            .find(|r| ports.iter().any(|p| p.name == **r && p.remote.is_some()))
    {
        return Err(invalid(
            &format!("{path}.tx_rx.port.rx_names"),
            format!("port '{r}' is on a peer agent: an arp flow's receive ports are this agent's"),
        ));
    }
    if !f.tags.is_empty() {
        return Err(invalid(
            &format!("{path}.packet"),
            "metric_tags: an arp flow's frames carry no probe to count tags by",
        ));
    }
    let sizes = sizes(&format!("{path}.size"), &f.size)?;
    // Planned as a flow of one size the templates take (its rate and
    // count checks): the frames sent are the ARP ones below.
    let g = crate::model::Flow {
        size: Size::Fixed(128),
        tags: Vec::new(),
        ..f.clone()
    };
    let mut pf = inner(path, &g, ports, opts, next_id)?;
    let frames = frames(
        &format!("{path}.packet"),
        arp,
        &f.headers.eth_src,
        &pf.blast.flows.dst_mac,
        &sizes,
    )?;
    let times = vec![Duration::ZERO; frames.len()];
    pf.blast.replay = Some(linerate_packet::Replay {
        trace: linerate_traffic::pcap::Trace { frames, times },
        rewrite: Default::default(),
        loops: 0,
        timing: linerate_packet::Timing::Fast,
    });
    pf.blast.end_markers = false;
    // The sinks stay as the receive ports' interfaces (what counts is
    // `send_and_count`'s; no sink runs).
    pf.latency = false;
    pf.tags = None;
    Ok(pf)
}

/// Whether a planned flow is an ARP flow (sent as a replay: no other
/// flow of the agent is).
pub fn is_arp_flow(flow: &PlanFlow) -> bool {
    flow.blast.replay.is_some()
}

/// The kernel filter of a counting socket: ARP frames only.
const FILTER: [(u16, u8, u8, u32); 4] = [
    (0x28, 0, 0, 12),          // ldh [12]: the ether type
    (0x15, 0, 1, 0x0806),      // ARP: accept, else drop
    (0x06, 0, 0, 0x0004_0000), // accept
    (0x06, 0, 0, 0),           // drop
];
const POLL: Duration = Duration::from_millis(20);
const BATCH: usize = 16;
const FRAME_MAX: usize = 9216;
/// How often the running counts are published.
const PUBLISH: Duration = Duration::from_millis(100);

/// Sends ARP flow `flow` (its replay) and counts its frames on its
/// receive ports: `on_tx` gets the sender's intervals, `on_rx(k, frames,
/// bytes)` receive port k's counts so far (the last call's are final,
/// at most what was sent).
pub fn send_and_count(
    flow: &PlanFlow,
    stop: &AtomicBool,
    on_tx: &mut dyn FnMut(&Interval),
    on_rx: &(dyn Fn(usize, u64, u64) + Sync),
) -> Result<(BlastReport, Vec<Result<SinkReport, String>>), String> {
    let keys: HashSet<[u8; HEADER_LEN]> = flow
        .blast
        .replay
        .as_ref()
        .map(|r| {
            r.trace
                .frames
                .iter()
                .filter_map(|f| f.get(..HEADER_LEN)?.try_into().ok())
                .collect()
        })
        .unwrap_or_default();
    // Every counting socket open before the first frame.
    let mut socks = Vec::new();
    for s in &flow.sinks {
        let iface = &s.iface;
        socks.push(open(iface).map_err(|e| format!("counting on {iface}: {e}"))?);
    }
    let counted: Vec<std::sync::Mutex<(u64, u64)>> = socks
        .iter()
        .map(|_| std::sync::Mutex::new((0, 0)))
        .collect();
    let sent_frames = std::sync::atomic::AtomicU64::new(u64::MAX);
    let sent = std::thread::scope(|sc| {
        let mut threads = Vec::new();
        for (k, sock) in socks.into_iter().enumerate() {
            let (keys, counted, sent_frames) = (&keys, &counted[k], &sent_frames);
            let (drain, at) = (flow.drain, flow.sink_rx[k]);
            threads.push(sc.spawn(move || {
                count(sock, keys, counted, sent_frames, drain, &|p, b| {
                    on_rx(at, p, b)
                })
            }));
        }
        let r = linerate_packet::blast(&flow.blast, stop, on_tx);
        // Counting goes on until every sent frame is in, or the drain ends.
        let n = r.as_ref().map_or(0, |s| s.packets);
        sent_frames.store(n, Ordering::Relaxed);
        let errs: Vec<String> = threads
            .into_iter()
            .filter_map(|t| t.join().ok().flatten())
            .collect();
        (r, errs)
    });
    let (sent, errs) = sent;
    let sent = sent.map_err(|e| format!("sending on {}: {e}", flow.blast.iface))?;
    for (k, c) in counted.iter().enumerate() {
        let (p, b) = *c.lock().unwrap_or_else(|p| p.into_inner());
        on_rx(flow.sink_rx[k], p.min(sent.packets), b.min(sent.bytes));
    }
    if let Some(e) = errs.into_iter().next() {
        return Err(e);
    }
    Ok((sent, Vec::new()))
}

fn open(iface: &str) -> std::io::Result<linerate_backend::raw::RawSocket> {
    let sock = linerate_backend::raw::RawSocket::open(iface)?;
    sock.attach_filter(&FILTER)?;
    // Frames queued before the filter took: not the flow's (none sent).
    let _ = sock.set_rcvbuf(4 << 20);
    sock.set_read_timeout(POLL)?;
    Ok(sock)
}

/// One receive port's counting: until the sender is done and every sent
/// frame counted, or `drain` after it is done. Returns a receive error.
fn count(
    mut sock: linerate_backend::raw::RawSocket,
    keys: &HashSet<[u8; HEADER_LEN]>,
    counted: &std::sync::Mutex<(u64, u64)>,
    sent: &std::sync::atomic::AtomicU64,
    drain: Duration,
    publish: &dyn Fn(u64, u64),
) -> Option<String> {
    let mut bufs = vec![vec![0u8; FRAME_MAX]; BATCH];
    let mut lens = [0usize; BATCH];
    let mut stamps = [0u64; BATCH];
    let (mut p, mut b) = (0u64, 0u64);
    let mut done_at: Option<Instant> = None;
    let mut published = Instant::now();
    loop {
        let total = sent.load(Ordering::Relaxed);
        if total != u64::MAX {
            let at = *done_at.get_or_insert_with(Instant::now);
            if p >= total || at.elapsed() >= drain {
                break;
            }
        }
        let n = match sock.recv_stamped(&mut bufs, &mut lens, &mut stamps) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                0
            }
            Err(e) => return Some(format!("receiving: {e}")),
        };
        for i in 0..n {
            let f = &bufs[i][..lens[i]];
            if lens[i] >= HEADER_LEN
                && let Ok(h) = <[u8; HEADER_LEN]>::try_from(&f[..HEADER_LEN])
                && keys.contains(&h)
            {
                p += 1;
                b += lens[i] as u64 + 4;
            }
        }
        *counted.lock().unwrap_or_else(|e| e.into_inner()) = (p, b);
        if published.elapsed() >= PUBLISH {
            publish(p, b);
            published = Instant::now();
        }
    }
    *counted.lock().unwrap_or_else(|e| e.into_inner()) = (p, b);
    None
}

#[cfg(test)]
#[path = "arp_flow_tests.rs"]
mod tests;
