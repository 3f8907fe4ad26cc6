//! The `socket` backend's UDP path: blast writes only its datagrams'
//! payloads, in place in the path's own buffers ([`PayloadSource`],
//! [`UdpTx::send_built`]), and the kernel builds the headers: one socket
//! per source endpoint, sendmmsg to many destinations, and runs of equal
//! datagrams to one destination as one UDP GSO send. Frames built
//! elsewhere (replay) are parsed back to payloads ([`UdpTx::send`]).
//! Only traffic the kernel can build this way takes this path; the rest
//! (chosen MACs, VLAN tags, TCP flags, replayed frames) goes raw.

use crate::udp_tx::{
    GSO_BYTES_MAX, GSO_SEGMENTS_MAX, OutMsg, UdpSender, UdpSlots, UdpTxOptions, open_bound,
};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// Most frames handed to any sending backend in one call (`Tx::batch` is
/// at most this); the UDP path's own batch sets it.
pub const TX_BATCH_MAX: usize = 256;

/// Most source endpoints (source IPs x source ports), one socket each.
pub const UDP_SOCKETS_MAX: u64 = 1024;

pub use super::gso::Gso;

/// A range of addresses or ports: `count` values from `first`, `step`
/// apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: u128,
    pub step: u128,
    pub count: u64,
}

impl Span {
    fn at(&self, i: u64) -> u128 {
        self.first + u128::from(i) * self.step
    }
}

/// Traffic as UDP sockets send it: the source endpoints (source IPs x
/// source ports, one socket each) and the IP header fields a socket sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFlows {
    pub src_ip: Span,
    pub src_port: Span,
    pub v6: bool,
    /// The IP TOS / traffic class byte.
    pub tos: u8,
    /// The IP TTL / hop limit (0: 64).
    pub ttl: u8,
}

/// What the traffic needs from a backend, for choosing UDP sockets or raw
/// frames.
#[derive(Debug, Clone)]
pub struct Traffic {
    /// The traffic as UDP sockets would send it, or why they cannot (the
    /// frames are crafted: chosen MACs, tags, TCP flags, a replay).
    pub udp: Result<UdpFlows, String>,
    pub gso: Gso,
}

impl Traffic {
    /// Traffic that only goes raw (fwd's frames, a replay): `why` says so.
    pub fn raw(why: &str) -> Self {
        Self {
            udp: Err(why.to_string()),
            gso: Gso::Off,
        }
    }

    /// Why UDP sockets cannot send this traffic, if they cannot.
    pub fn udp_refusal(&self) -> Option<String> {
        let flows = match &self.udp {
            Ok(f) => f,
            Err(why) => return Some(why.clone()),
        };
        let endpoints = flows.src_ip.count.saturating_mul(flows.src_port.count);
        if endpoints > UDP_SOCKETS_MAX {
            return Some(format!(
                "{endpoints} source endpoints (IPs x ports) would need as many sockets (at most {UDP_SOCKETS_MAX})"
            ));
        }
        None
    }
}

/// A datagram's source endpoint (it picks the socket) and destination,
/// as on the wire: source then destination address (4 + 4 bytes, or
/// 16 + 16 with `v6`), source then destination port (host order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints<'a> {
    pub addrs: &'a [u8; 32],
    pub ports: [u16; 2],
    pub v6: bool,
}

impl Endpoints<'_> {
    /// The source address.
    fn src(&self) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(&self.addrs[..16]).expect("16 bytes"),
            ))
        } else {
            IpAddr::V4(Ipv4Addr::from(
                <[u8; 4]>::try_from(&self.addrs[..4]).expect("4 bytes"),
            ))
        }
    }

    /// The destination address's bytes.
    pub(crate) fn dst_addr(&self) -> &[u8] {
        if self.v6 {
            &self.addrs[16..32]
        } else {
            &self.addrs[4..8]
        }
    }
}

/// What writes datagram payloads in the UDP path's own buffers (blast's
/// frame builder): a trait so its method is inlined into the send loop.
pub trait PayloadSource {
    /// Writes the next datagram's payload into `buf`, which holds what was
    /// last written for `slot`; returns the payload's length, the length
    /// of its frame on the wire (L2, FCS excluded: what blast counts), and
    /// the endpoints of its flow when the slot's flow is not the one it
    /// held (`None`: the same as before).
    fn payload(&mut self, buf: &mut [u8], slot: usize) -> (usize, usize, Option<Endpoints<'_>>);

    /// Writes a payload in each buffer `bufs` hands out, in order, and
    /// tells it each one's length and new endpoints; returns their
    /// frames' bytes on the wire. The batch is one call, as
    /// [`FrameSource::build_each`](crate::FrameSource::build_each): a
    /// source overrides it to keep its per-datagram state in locals.
    #[inline(always)]
    fn payload_each<B: PayloadBufs>(&mut self, bufs: &mut B) -> u64
    where
        Self: Sized,
    {
        payload_each_by_one(self, bufs)
    }
}

/// [`PayloadSource::payload_each`] one [`payload`](PayloadSource::payload)
/// at a time (the default, and an override's path for what it does not
/// specialise).
#[inline(always)]
pub fn payload_each_by_one<S: PayloadSource, B: PayloadBufs>(source: &mut S, bufs: &mut B) -> u64 {
    let mut bytes = 0u64;
    while let Some((buf, slot)) = bufs.next_buf() {
        let (len, wire, ends) = source.payload(buf, slot);
        bufs.built(len, ends);
        bytes += wire as u64;
    }
    bytes
}

/// The UDP path's free buffers for one batch, handed out in order (see
/// [`PayloadSource::payload_each`]).
pub trait PayloadBufs {
    /// The next buffer to write a payload in and its slot; `None` when
    /// the batch is full (or a slot's new flow was refused).
    fn next_buf(&mut self) -> Option<(&mut [u8], usize)>;
    /// The payload just written in the last buffer handed out is `len`
    /// bytes; `ends`: its flow's endpoints, when the slot held another.
    fn built(&mut self, len: usize, ends: Option<Endpoints<'_>>);
}

/// Sends blast's datagrams through UDP sockets.
#[derive(Debug)]
pub struct UdpTx {
    socks: Vec<UdpSocket>,
    flows: UdpFlows,
    sender: UdpSender,
    pub gso: bool,
    /// Why GSO is off (auto on veth, refused by the kernel), if it is.
    pub gso_note: Option<String>,
    msgs: Vec<OutMsg>,
    /// Frame indices grouped by socket (counting sort scratch).
    order: Vec<u16>,
    starts: Vec<u32>,
    fill: Vec<u32>,
    pub datagrams: u64,
    pub messages: u64,
    pub gso_messages: u64,
    /// The in-place path's buffers, the socket of each slot's flow, and
    /// the order of one call's datagrams (slot, length), sorted by socket.
    slots: UdpSlots,
    slot_sock: Vec<u16>,
    built: Vec<(u16, u16)>,
    sorted: Vec<(u16, u16)>,
    /// The slot the next call starts at (the slots are used in turn).
    next_slot: usize,
}

/// Most bytes of buffers [`UdpTx::keep_flows`] gives a sender.
const KEPT_SLOTS_BYTES_MAX: usize = 32 << 20;

/// Sends `order` (slot, length) on `sock` until the kernel took it all
/// (a blocking socket takes at least one message per call), falling back
/// to single datagrams when the kernel refuses GSO.
fn send_run(
    slots: &mut UdpSlots,
    sock: &UdpSocket,
    order: &[(u16, u16)],
    (gso, gso_note): (&mut bool, &mut Option<String>),
    (messages, gso_messages): (&mut u64, &mut u64),
) -> io::Result<()> {
    send_all(order.len(), |done| {
        let (d, m, g) = match slots.send(sock, &order[done..], *gso) {
            // No checksum offload under the socket: the kernel refuses GSO
            // (EIO). Single datagrams from here on.
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EIO as i32) && *gso => {
                *gso = false;
                *gso_note = Some(format!("GSO refused by the kernel ({e}); off"));
                slots.send(sock, &order[done..], false)?
            }
            r => r?,
        };
        *messages += m as u64;
        *gso_messages += g as u64;
        Ok(d)
    })
}

/// Calls `send(done)` until it has taken `total` datagrams: it returns how
/// many it took (a blocking socket takes at least one per call, so none is
/// an error); an interrupted call is made again.
fn send_all(total: usize, mut send: impl FnMut(usize) -> io::Result<usize>) -> io::Result<()> {
    let mut done = 0;
    while done < total {
        match send(done) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "sendmmsg took no message",
                ));
            }
            Ok(k) => done += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Frame fields the UDP path needs: source endpoint, destination and payload.
fn parse(frame: &[u8], ipv6: bool) -> Option<(IpAddr, u16, SocketAddr, &[u8])> {
    let (src, dst, l4) = if ipv6 {
        let s: [u8; 16] = frame.get(22..38)?.try_into().ok()?;
        let d: [u8; 16] = frame.get(38..54)?.try_into().ok()?;
        (
            IpAddr::V6(Ipv6Addr::from(s)),
            IpAddr::V6(Ipv6Addr::from(d)),
            54,
        )
    } else {
        let s: [u8; 4] = frame.get(26..30)?.try_into().ok()?;
        let d: [u8; 4] = frame.get(30..34)?.try_into().ok()?;
        (
            IpAddr::V4(Ipv4Addr::from(s)),
            IpAddr::V4(Ipv4Addr::from(d)),
            34,
        )
    };
    let h = frame.get(l4..l4 + 8)?;
    let sport = u16::from_be_bytes([h[0], h[1]]);
    let dport = u16::from_be_bytes([h[2], h[3]]);
    let ulen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let payload = frame.get(l4 + 8..l4 + ulen.max(8))?;
    Some((src, sport, SocketAddr::new(dst, dport), payload))
}

fn ip_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl UdpTx {
    /// One socket per source endpoint of `traffic`, bound to `iface`; fails
    /// (before anything is sent) when the traffic needs raw frames or a
    /// source address is not on this host.
    /// `max_frame` bounds the payloads written in place.
    pub fn open(iface: &str, traffic: &Traffic, max_frame: usize) -> io::Result<Self> {
        let unsupported = |why: String| io::Error::new(io::ErrorKind::Unsupported, why);
        if let Some(why) = traffic.udp_refusal() {
            return Err(unsupported(why));
        }
        let spec = *traffic.udp.as_ref().expect("udp_refusal checked");
        let opt = UdpTxOptions {
            tos: spec.tos,
            ttl: if spec.ttl == 0 { 64 } else { spec.ttl },
            sndbuf: 4 << 20,
        };
        let mut socks = Vec::new();
        for i in 0..spec.src_ip.count {
            let ip = spec.src_ip.at(i);
            let ip = if spec.v6 {
                IpAddr::V6(Ipv6Addr::from(ip))
            } else {
                IpAddr::V4(Ipv4Addr::from(ip as u32))
            };
            for j in 0..spec.src_port.count {
                let port = spec.src_port.at(j) as u16;
                let ep = SocketAddr::new(ip, port);
                let s = open_bound(iface, ep, &opt).map_err(|e| {
                    use nix::errno::Errno;
                    match e.raw_os_error() {
                        Some(c) if c == Errno::EADDRNOTAVAIL as i32 => {
                            unsupported(format!("source address {ip} is not on this host"))
                        }
                        // An IPv6 link-local source needs a scope a
                        // socket address does not carry here.
                        Some(c) if c == Errno::EINVAL as i32 => {
                            unsupported(format!("source address {ip} cannot be bound ({e})"))
                        }
                        Some(c) if c == Errno::EACCES as i32 && port < 1024 => io::Error::new(
                            e.kind(),
                            format!(
                                "UDP socket {ep}: {e}: source port {port} is below 1024, which only root or CAP_NET_BIND_SERVICE may bind; give --src-port 1024 or above"
                            ),
                        ),
                        _ => io::Error::new(e.kind(), format!("UDP socket {ep}: {e}")),
                    }
                })?;
                socks.push(s);
            }
        }
        let (gso, gso_note) = super::gso::choice(iface, traffic.gso);
        let n = socks.len();
        let v6 = spec.v6;
        Ok(Self {
            socks,
            flows: spec,
            sender: UdpSender::new(TX_BATCH_MAX, TX_BATCH_MAX),
            gso,
            gso_note,
            msgs: Vec::with_capacity(TX_BATCH_MAX),
            order: Vec::with_capacity(TX_BATCH_MAX),
            starts: vec![0; n + 1],
            fill: vec![0; n + 1],
            datagrams: 0,
            messages: 0,
            gso_messages: 0,
            slots: UdpSlots::new(TX_BATCH_MAX, max_frame, v6),
            slot_sock: vec![0; TX_BATCH_MAX],
            built: vec![(0, 0); TX_BATCH_MAX],
            sorted: Vec::with_capacity(TX_BATCH_MAX),
            next_slot: 0,
        })
    }

    /// The frames a [`PayloadSource`] makes repeat their flow and size
    /// every `period` frames (flows x sizes): with a multiple of that many
    /// buffers, used in turn, each buffer keeps one flow and size, and a
    /// frame's destination and flow fields are written once instead of per
    /// frame (4,096 flows over 256 buffers changed every buffer's flow every
    /// frame). Keeps the buffers as they are when the batch is already a
    /// multiple of the period, or more would take over 32 MiB.
    pub fn keep_flows(&mut self, period: usize) {
        let batch = TX_BATCH_MAX;
        if period <= 1 || batch.is_multiple_of(period) {
            return;
        }
        let slots = period.saturating_mul(batch.div_ceil(period));
        let len = self.slots.buf_len();
        if slots > usize::from(u16::MAX) || slots.saturating_mul(len) > KEPT_SLOTS_BYTES_MAX {
            return;
        }
        self.slots = UdpSlots::new(slots, len, self.flows.v6);
        self.slot_sock = vec![0; slots];
        self.next_slot = 0;
    }

    /// Buffers [`send_built`](Self::send_built) hands out, and their bytes.
    pub fn slots(&self) -> usize {
        self.slots.slots()
    }

    pub fn slot_len(&self) -> usize {
        self.slots.buf_len()
    }

    /// Writes up to `n` payloads in place (`src.payload(buffer, slot)`)
    /// and sends them, each flow's in order (the flows of different
    /// sockets may be reordered within the call). Returns the datagrams
    /// sent and their frames' bytes (L2, FCS excluded).
    #[inline]
    pub fn send_built<P: PayloadSource>(
        &mut self,
        n: usize,
        src: &mut P,
    ) -> io::Result<(usize, u64)> {
        // The slots are used in turn, a call's run never wrapping.
        let first = self.next_slot;
        let n = n.min(self.slots.slots() - first).min(self.built.len());
        self.next_slot = if first + n == self.slots.slots() {
            0
        } else {
            first + n
        };
        if self.socks.len() == 1 && !self.gso {
            // Slot k's message to slot k's destination, made once: only
            // its length is written.
            // (one socket: no slot's socket to set for a new flow)
            let mut run = self.slots.run(first, n);
            let bytes = src.payload_each(&mut run);
            if let Some(e) = run.err {
                return Err(e);
            }
            let (slots, sock) = (&mut self.slots, &self.socks[0]);
            let messages = &mut self.messages;
            send_all(n, |done| {
                let k = slots.send_in_order(sock, first + done, n - done)?;
                *messages += k as u64;
                Ok(k)
            })?;
            self.datagrams += n as u64;
            return Ok((n, bytes));
        }
        let mut bytes = 0u64;
        for k in 0..n {
            let i = first + k;
            let (len, wire, ends) = src.payload(self.slots.buf_mut(i), i);
            if let Some(e) = ends {
                self.new_flow(i, &e)?;
            }
            bytes += wire as u64;
            self.built[k] = (i as u16, len as u16);
        }
        // (slot, length) of each datagram built, written as it was.
        let built = &self.built[..n];
        if self.socks.len() == 1 {
            send_run(
                &mut self.slots,
                &self.socks[0],
                built,
                (&mut self.gso, &mut self.gso_note),
                (&mut self.messages, &mut self.gso_messages),
            )?;
        } else {
            // Counting sort by socket: stable, so each flow keeps its order.
            self.starts.iter_mut().for_each(|s| *s = 0);
            for &(slot, _) in built {
                self.starts[usize::from(self.slot_sock[usize::from(slot)]) + 1] += 1;
            }
            for k in 1..self.starts.len() {
                self.starts[k] += self.starts[k - 1];
            }
            self.fill.copy_from_slice(&self.starts);
            self.sorted.clear();
            self.sorted.resize(n, (0, 0));
            for &b in built {
                let s = usize::from(self.slot_sock[usize::from(b.0)]);
                self.sorted[self.fill[s] as usize] = b;
                self.fill[s] += 1;
            }
            for s in 0..self.socks.len() {
                let (lo, hi) = (self.starts[s] as usize, self.starts[s + 1] as usize);
                if lo < hi {
                    send_run(
                        &mut self.slots,
                        &self.socks[s],
                        &self.sorted[lo..hi],
                        (&mut self.gso, &mut self.gso_note),
                        (&mut self.messages, &mut self.gso_messages),
                    )?;
                }
            }
        }
        self.datagrams += n as u64;
        Ok((n, bytes))
    }

    /// A slot's flow changed: its socket and destination.
    #[inline(always)]
    fn new_flow(&mut self, slot: usize, e: &Endpoints) -> io::Result<()> {
        if self.socks.len() > 1 {
            let s = self.socket_of(e.src(), e.ports[0]).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}:{} is no socket's source", e.src(), e.ports[0]),
                )
            })?;
            self.slot_sock[slot] = s as u16;
        }
        self.slots.set_dst(slot, e.dst_addr(), e.ports[1])
    }

    pub fn sockets(&self) -> usize {
        self.socks.len()
    }

    /// The socket of a frame's source endpoint.
    fn socket_of(&self, src: IpAddr, port: u16) -> Option<usize> {
        let (ip, ports) = (&self.flows.src_ip, &self.flows.src_port);
        // (Steps of 1, the usual ranges, need no 128-bit division.)
        let div = |d: u128, step: u128| if step == 1 { d } else { d / step };
        let i = div(ip_u128(src).checked_sub(ip.first)?, ip.step) as u64;
        let j = div(u128::from(port).checked_sub(ports.first)?, ports.step) as u64;
        (i < ip.count && j < ports.count).then(|| (i * ports.count + j) as usize)
    }

    /// Sends every frame's payload; frames of one source endpoint keep
    /// their order (frames of different endpoints may be reordered within
    /// the call). Returns `frames.len()` or an error.
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame is not Ethernet + IP + UDP",
            )
        };
        let n = frames.len().min(TX_BATCH_MAX);
        let mut parsed: [(u16, SocketAddr, &[u8]); TX_BATCH_MAX] =
            [(0, SocketAddr::from(([0, 0, 0, 0], 0)), &[]); TX_BATCH_MAX];
        // Counting sort by socket: stable, so each endpoint's order is kept.
        self.starts.iter_mut().for_each(|s| *s = 0);
        for (slot, f) in parsed.iter_mut().zip(&frames[..n]) {
            let (src, sport, dst, payload) = parse(f, self.flows.v6).ok_or_else(bad)?;
            let s = self.socket_of(src, sport).ok_or_else(bad)?;
            *slot = (s as u16, dst, payload);
            self.starts[s + 1] += 1;
        }
        for k in 1..self.starts.len() {
            self.starts[k] += self.starts[k - 1];
        }
        self.order.clear();
        self.order.resize(n, 0);
        self.fill.copy_from_slice(&self.starts);
        for (i, p) in parsed[..n].iter().enumerate() {
            let s = usize::from(p.0);
            self.order[self.fill[s] as usize] = i as u16;
            self.fill[s] += 1;
        }
        let mut bufs: [&[u8]; TX_BATCH_MAX] = [&[]; TX_BATCH_MAX];
        for (b, &i) in bufs.iter_mut().zip(&self.order) {
            *b = parsed[usize::from(i)].2;
        }
        for s in 0..self.socks.len() {
            let (lo, hi) = (self.starts[s] as usize, self.starts[s + 1] as usize);
            if lo == hi {
                continue;
            }
            self.send_group(s, &bufs, &parsed, lo, hi)?;
        }
        self.datagrams += n as u64;
        Ok(n)
    }

    /// Sends the (ordered) frames `lo..hi`, all of socket `s`, as messages:
    /// runs of equal-length payloads to one destination become GSO sends.
    fn send_group(
        &mut self,
        s: usize,
        bufs: &[&[u8]],
        parsed: &[(u16, SocketAddr, &[u8])],
        lo: usize,
        hi: usize,
    ) -> io::Result<()> {
        self.msgs.clear();
        let dst_of = |k: usize, order: &[u16]| parsed[usize::from(order[k])].1;
        let mut k = lo;
        while k < hi {
            let dst = dst_of(k, &self.order);
            let len = bufs[k].len();
            let mut end = k + 1;
            if self.gso {
                while end < hi
                    && end - k < GSO_SEGMENTS_MAX
                    && (end - k + 1) * len <= GSO_BYTES_MAX
                    && bufs[end].len() == len
                    && dst_of(end, &self.order) == dst
                {
                    end += 1;
                }
            }
            self.msgs.push(OutMsg {
                dst,
                first: k,
                count: end - k,
            });
            k = end;
        }
        let mut done = 0;
        while done < self.msgs.len() {
            match self.sender.send(&self.socks[s], bufs, &self.msgs[done..]) {
                // A blocking sendmmsg takes at least one message or fails;
                // never spin on nothing.
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "sendmmsg took no message",
                    ));
                }
                Ok(m) => {
                    self.gso_messages += self.msgs[done..done + m]
                        .iter()
                        .filter(|m| m.count > 1)
                        .count() as u64;
                    self.messages += m as u64;
                    done += m;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // No checksum offload under the socket: the kernel refuses
                // GSO (EIO). Split the rest into single datagrams.
                Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EIO as i32) && self.gso => {
                    self.gso = false;
                    self.gso_note = Some(format!("GSO refused by the kernel ({e}); off"));
                    let rest: Vec<OutMsg> = self.msgs[done..]
                        .iter()
                        .flat_map(|m| {
                            (m.first..m.first + m.count).map(move |f| OutMsg {
                                dst: m.dst,
                                first: f,
                                count: 1,
                            })
                        })
                        .collect();
                    self.msgs.truncate(done);
                    self.msgs.extend(rest);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(ips: u64, ports: u64) -> Traffic {
        let span = |first, count| Span {
            first,
            step: 1,
            count,
        };
        Traffic {
            udp: Ok(UdpFlows {
                src_ip: span(0xc612_0001, ips),
                src_port: span(1000, ports),
                v6: false,
                tos: 0,
                ttl: 0,
            }),
            gso: Gso::Auto,
        }
    }

    #[test]
    fn refusals_say_why_sockets_cannot_send() {
        assert_eq!(flows(4, 256).udp_refusal(), None);
        let wide = flows(4, 257).udp_refusal().unwrap();
        assert!(wide.contains("1028 source endpoints"), "{wide}");
        let raw = Traffic::raw("a pcap replay sends the captured frames as they are");
        assert!(raw.udp_refusal().unwrap().contains("pcap"));
    }

    #[test]
    fn frames_parse_to_endpoint_destination_and_payload() {
        // Ethernet + IPv4 198.18.0.1 -> 198.18.0.2 + UDP 7 -> 9, 54-byte
        // payload: a 96-byte frame without FCS.
        let mut f = vec![0u8; 96];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 0, 2]);
        f[34..36].copy_from_slice(&7u16.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&62u16.to_be_bytes());
        for (i, b) in f[42..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let (src, sport, dst, payload) = parse(&f, false).unwrap();
        assert_eq!(src, "198.18.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(sport, 7);
        assert_eq!(dst, "198.18.0.2:9".parse().unwrap());
        assert_eq!(payload.len(), 54);
        assert_eq!(payload, &f[42..96]);
        assert!(parse(&f[..40], false).is_none(), "truncated");
    }
}
