//! Frame templates: an Ethernet (+802.1Q) + IPv4/IPv6 + UDP frame with a
//! probe header, built once with full checksums; per packet only the flow
//! fields and the probe change, and the checksums are updated incrementally
//! (RFC 1624) from sums taken once at build time.

use crate::FlowFields;
pub use crate::wire_flow::WireFlow;
use crate::wire_flow::{words32, words64, words128};
use linerate_wire::checksum;
use linerate_wire::{
    EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, PROBE_LEN,
    Probe, TcpFlags, TcpPacket, TcpRepr, UdpPacket, UdpRepr, VlanRepr, VlanTag, ip_proto,
};
use std::net::IpAddr;
use thiserror::Error;

/// Ethernet FCS, added by the NIC: not part of the bytes we hand over.
pub(crate) const FCS: usize = 4;
/// Jumbo frame maximum (FCS included), as linerate calc uses.
const FRAME_MAX: usize = 9216;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TemplateError {
    #[error("a {size}-byte frame cannot carry {what} (needs at least {min} bytes)")]
    TooSmall {
        size: usize,
        min: usize,
        what: &'static str,
    },
    #[error("a {size}-byte frame is above the {FRAME_MAX}-byte jumbo maximum")]
    TooLarge { size: usize },
    #[error("a {size}-byte frame does not fit an MTU of {mtu} (IP packet of {ip} bytes)")]
    OverMtu { size: usize, mtu: usize, ip: usize },
    #[error("source and destination must both be IPv4 or both IPv6")]
    Family,
}

/// TCP flags from their letters (`SA`: SYN and ACK; F S R P A U E C).
pub fn tcp_flags(s: &str) -> Result<u8, String> {
    let mut f = 0u8;
    for c in s.chars() {
        f |= match c.to_ascii_uppercase() {
            'F' => 0x01,
            'S' => 0x02,
            'R' => 0x04,
            'P' => 0x08,
            'A' => 0x10,
            'U' => 0x20,
            'E' => 0x40,
            'C' => 0x80,
            _ => return Err(format!("unknown TCP flag '{c}' (use F S R P A U E C)")),
        };
    }
    if f == 0 {
        Err("give at least one TCP flag".into())
    } else {
        Ok(f)
    }
}

/// How frames are framed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Framing {
    /// 802.1Q tag: VLAN id and priority.
    pub vlan: Option<(u16, u8)>,
    pub dscp: u8,
    pub ttl: u8,
    /// The interface MTU, to refuse frames that cannot leave it.
    pub mtu: Option<usize>,
    /// Send TCP segments with these flags instead of UDP datagrams.
    pub tcp_flags: Option<u8>,
    /// Encapsulate each frame in VXLAN: the fields above are then the
    /// inner frame's (the one that carries the probe), `mtu` the outer
    /// frame's ([`crate::vxlan`]).
    pub vxlan: Option<crate::encap::Vxlan>,
    /// Bytes every frame carries right after its probe (the OTG model's
    /// `custom` header after the transport header): the rest of the
    /// payload is linerate's fixed pattern, as without them.
    pub payload: Option<std::sync::Arc<[u8]>>,
    /// Headers a template does not lay (MPLS labels, GRE, ICMP echo):
    /// each frame is then written whole by [`crate::stack`] (the fields
    /// above are the flow's IP packet's; `vxlan` is then none).
    pub stack: Option<crate::encap::Stack>,
}

/// A prebuilt frame of one size.
#[derive(Debug, Clone)]
pub struct Template {
    bytes: Vec<u8>,
    l3: usize,
    l4: usize,
    ipv6: bool,
    /// Checksum of the transport header (UDP or TCP) in the template.
    udp_csum: u16,
    /// Transport header length (8 for UDP, 20 for TCP) and checksum offset.
    l4_hdr: usize,
    csum_off: usize,
    tcp: bool,
    ip_csum: u16,
    /// Sum of the template's variable bytes covered by the UDP checksum.
    base_udp_sum: u32,
    /// Sum of the template's addresses (IPv4 header checksum).
    base_ip_sum: u32,
    /// `checksum::update_base` of the transport and IPv4 checksums: the
    /// per-template half of each packet's incremental update.
    udp_base: u32,
    ip_base: u32,
}

pub use crate::residue::{csum_of_folded, folded_of_csum, next_csum};

/// A send time as the probe carries it (its low 48 bits) and their
/// checksum words: taken once per batch of frames.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    hi: [u8; 4],
    lo: [u8; 2],
    sum: u32,
}

impl Stamp {
    /// The probe's time field: its first four bytes, and its last two.
    #[inline(always)]
    pub fn hi(&self) -> [u8; 4] {
        self.hi
    }

    #[inline(always)]
    pub fn lo(&self) -> [u8; 2] {
        self.lo
    }

    /// The sum of the time's words under the transport checksum, reduced
    /// modulo 0xffff (see [`Template::seq_sum_base`]).
    #[inline]
    pub fn residue(&self) -> u16 {
        (self.sum % 0xffff) as u16
    }

    pub fn new(tx_ns: u64) -> Self {
        let ts = tx_ns & ((1 << 48) - 1);
        Stamp {
            hi: ((ts >> 16) as u32).to_be_bytes(),
            lo: (ts as u16).to_be_bytes(),
            sum: words64(ts),
        }
    }
}

fn ip_bytes(ip: IpAddr, out: &mut [u8; 16]) -> usize {
    match ip {
        IpAddr::V4(v) => {
            out[..4].copy_from_slice(&v.octets());
            4
        }
        IpAddr::V6(v) => {
            out.copy_from_slice(&v.octets());
            16
        }
    }
}

/// Calls `$f::<VLAN, V6, TCP>` for the template's layout.
#[macro_export]
macro_rules! by_layout {
    ($t:ident, $f:ident, $($a:expr),*) => {
        match $t.layout() {
            (false, false, false) => $t.$f::<false, false, false>($($a),*),
            (false, false, true) => $t.$f::<false, false, true>($($a),*),
            (false, true, false) => $t.$f::<false, true, false>($($a),*),
            (false, true, true) => $t.$f::<false, true, true>($($a),*),
            (true, false, false) => $t.$f::<true, false, false>($($a),*),
            (true, false, true) => $t.$f::<true, false, true>($($a),*),
            (true, true, false) => $t.$f::<true, true, false>($($a),*),
            (true, true, true) => $t.$f::<true, true, true>($($a),*),
        }
    };
}

impl Template {
    /// Builds a `frame_bytes`-byte frame (FCS included, as on the wire) for `flow`.
    pub fn new(
        frame_bytes: usize,
        flow: &FlowFields,
        framing: &Framing,
    ) -> Result<Self, TemplateError> {
        let ipv6 = flow.src_ip.is_ipv6();
        if ipv6 != flow.dst_ip.is_ipv6() {
            return Err(TemplateError::Family);
        }
        let tcp = framing.tcp_flags.is_some();
        let (l3, l4, l4_hdr) = layout(frame_bytes, framing, ipv6, tcp)?;
        let len = frame_bytes - FCS;
        let mut b = vec![0u8; len];
        emit_l2(&mut b, flow, framing, ipv6);
        // Payload: probe (sequence 0), the bytes asked for, then a fixed
        // pattern.
        for (i, x) in b[l4 + l4_hdr + PROBE_LEN..].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        if let Some(p) = &framing.payload {
            let at = l4 + l4_hdr + PROBE_LEN;
            b[at..at + p.len()].copy_from_slice(p);
        }
        Probe {
            flow_id: 0,
            seq: 0,
            tx_ns: 0,
        }
        .emit(&mut b[l4 + l4_hdr..]);
        emit_l3(&mut b[l3..], flow, framing, len - l4)?;
        emit_l4(&mut b[l4..], flow, framing, len - l4);
        let csum_off = if tcp { 16 } else { 6 };
        let mut t = Self {
            udp_csum: u16::from_be_bytes([b[l4 + csum_off], b[l4 + csum_off + 1]]),
            l4_hdr,
            csum_off,
            tcp,
            ip_csum: if ipv6 {
                0
            } else {
                u16::from_be_bytes([b[l3 + 10], b[l3 + 11]])
            },
            bytes: b,
            l3,
            l4,
            ipv6,
            base_udp_sum: 0,
            base_ip_sum: 0,
            udp_base: 0,
            ip_base: 0,
        };
        t.base_ip_sum = t.addr_sum(&t.bytes);
        t.base_udp_sum = t.udp_sum(&t.bytes);
        t.udp_base = checksum::update_base(t.udp_csum, t.base_udp_sum);
        t.ip_base = checksum::update_base(t.ip_csum, t.base_ip_sum);
        Ok(t)
    }

    /// The transport payload (probe, then the fixed pattern): what a UDP
    /// socket sends for this frame, the kernel building the headers.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.bytes[self.l4 + self.l4_hdr..]
    }

    /// Bytes handed to the NIC (the frame without its FCS).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn addr_range(&self) -> std::ops::Range<usize> {
        if self.ipv6 {
            self.l3 + 8..self.l3 + 40
        } else {
            self.l3 + 12..self.l3 + 20
        }
    }

    fn addr_sum(&self, b: &[u8]) -> u32 {
        checksum::sum(&b[self.addr_range()], 0)
    }

    /// Sum of what changes per packet under the UDP checksum: addresses
    /// (pseudo-header), ports, and the probe's flow id, sequence and time.
    fn udp_sum(&self, b: &[u8]) -> u32 {
        let p = self.l4 + self.l4_hdr;
        let acc = checksum::sum(&b[self.addr_range()], 0);
        let acc = checksum::sum(&b[self.l4..self.l4 + 4], acc);
        checksum::sum(&b[p + 2..p + PROBE_LEN], acc)
    }

    /// Lays the template into `out` (at least [`len`](Self::len) bytes):
    /// the first step of a frame built in place; [`put_flow`](Self::put_flow)
    /// and [`put_seq`](Self::put_seq) then write what differs.
    #[inline]
    pub fn lay(&self, out: &mut [u8]) {
        out[..self.bytes.len()].copy_from_slice(&self.bytes);
    }

    /// Writes a flow's fields (MACs, addresses, ports, probe flow id) over
    /// a laid frame of this template, and the IPv4 header checksum they
    /// give. The flow is of the template's address family (blast builds
    /// its templates from the flows it sends).
    /// Whether the frame has a VLAN tag, is IPv6, carries TCP: the
    /// constants of [`put_flow_at`](Self::put_flow_at) and
    /// [`put_seq_at`](Self::put_seq_at).
    pub fn layout(&self) -> (bool, bool, bool) {
        (self.l3 != 14, self.ipv6, self.tcp)
    }

    #[inline]
    pub fn put_flow(&self, out: &mut [u8], w: &WireFlow, flow_id: u16) {
        by_layout!(self, put_flow_at, out, w, flow_id)
    }

    /// Writes the probe's sequence and send time and the transport
    /// checksum over a frame that carries flow `w` with `flow_id` (laid and
    /// put before).
    #[inline]
    pub fn put_seq(&self, out: &mut [u8], w: &WireFlow, flow_id: u16, seq: u64, stamp: &Stamp) {
        by_layout!(self, put_seq_at, out, w, flow_id, seq, stamp)
    }

    /// [`put_flow`](Self::put_flow) for one layout: the VLAN tag, the
    /// address family and the transport are constants here, so every
    /// offset is, and one bounds check covers every write. The constants
    /// must be the template's [`layout`](Self::layout) (checked in debug
    /// builds).
    #[inline(always)]
    pub fn put_flow_at<const VLAN: bool, const V6: bool, const TCP: bool>(
        &self,
        out: &mut [u8],
        w: &WireFlow,
        flow_id: u16,
    ) {
        debug_assert_eq!(self.layout(), (VLAN, V6, TCP));
        let l3 = if VLAN { 18 } else { 14 };
        let l4 = l3 + if V6 { 40 } else { 20 };
        let probe = l4 + if TCP { 20 } else { 8 };
        let out = &mut out[..probe + 4];
        out[..12].copy_from_slice(&w.macs);
        if V6 {
            out[l3 + 8..l3 + 40].copy_from_slice(&w.addrs);
        } else {
            out[l3 + 12..l3 + 20].copy_from_slice(&w.addrs[..8]);
            // The base and the addresses' words stay below 2^20: two folds.
            let acc = self.ip_base + w.addr_sum;
            let acc = (acc & 0xffff) + (acc >> 16);
            let acc = (acc & 0xffff) + (acc >> 16);
            out[l3 + 10..l3 + 12].copy_from_slice(&(!(acc as u16)).to_be_bytes());
        }
        out[l4..l4 + 2].copy_from_slice(&w.ports[0].to_be_bytes());
        out[l4 + 2..l4 + 4].copy_from_slice(&w.ports[1].to_be_bytes());
        out[probe + 2..probe + 4].copy_from_slice(&flow_id.to_be_bytes());
    }

    /// [`put_seq`](Self::put_seq) for one layout (constant offsets, one
    /// bounds check).
    #[inline(always)]
    pub fn put_seq_at<const VLAN: bool, const V6: bool, const TCP: bool>(
        &self,
        out: &mut [u8],
        w: &WireFlow,
        flow_id: u16,
        seq: u64,
        stamp: &Stamp,
    ) {
        debug_assert_eq!(self.layout(), (VLAN, V6, TCP));
        let l4 = if VLAN { 18 } else { 14 } + if V6 { 40 } else { 20 };
        let csum = l4 + if TCP { 16 } else { 6 };
        let probe = l4 + if TCP { 20 } else { 8 };
        let out = &mut out[..probe + PROBE_LEN];
        // One fold (`update_from` with the fold of the new sum moved into
        // this one). The sequence enters as its two 32-bit halves: 2^32 and
        // 2^16 are both 1 modulo 0xffff, so they sum to what its four
        // 16-bit words do. The sum stays below 2^34 (two halves below 2^32,
        // and some twenty 16-bit words), which three 16-bit folds take.
        let acc = u64::from(self.udp_base + w.l4_sum + u32::from(flow_id) + stamp.sum)
            + (seq >> 32)
            + (seq & 0xffff_ffff);
        let acc = (acc & 0xffff) + (acc >> 16);
        let acc = (acc & 0xffff) + (acc >> 16);
        let acc = (acc & 0xffff) + (acc >> 16);
        let c = !(acc as u16);
        // UDP sends a computed zero as all ones; TCP has no such rule.
        let c = if c == 0 && !TCP { 0xffff } else { c };
        out[csum..csum + 2].copy_from_slice(&c.to_be_bytes());
        out[probe + 4..probe + 12].copy_from_slice(&seq.to_be_bytes());
        out[probe + 12..probe + 16].copy_from_slice(&stamp.hi);
        out[probe + 16..probe + 18].copy_from_slice(&stamp.lo);
    }

    /// The transport checksum's sum for flow `w` with `flow_id` and
    /// `stamp`, less the sequence's words, reduced modulo 0xffff: with a
    /// sequence `seq` the frame's sum is congruent to this plus `seq`
    /// (2^16 and 2^32 are both 1 modulo 0xffff). A sender whose sequence
    /// moves by one per frame keeps the sum up to date with an increment
    /// (see [`put_seq_folded_at`](Self::put_seq_folded_at)).
    #[inline]
    pub fn seq_sum_base(&self, w: &WireFlow, flow_id: u16, stamp: &Stamp) -> u16 {
        ((self.udp_base + w.l4_sum + u32::from(flow_id) + stamp.sum) % 0xffff) as u16
    }

    /// [`put_seq_at`](Self::put_seq_at) with the sum already reduced:
    /// `folded` (below 0xffff) is congruent modulo 0xffff to
    /// [`seq_sum_base`](Self::seq_sum_base) plus `seq`, for the flow the
    /// frame carries (laid and put before). The same bytes as
    /// `put_seq_at` writes, without folding the sum per frame.
    #[inline(always)]
    pub fn put_seq_folded_at<const VLAN: bool, const V6: bool, const TCP: bool>(
        &self,
        out: &mut [u8],
        seq: u64,
        folded: u16,
        stamp: &Stamp,
    ) {
        debug_assert!(folded < 0xffff);
        self.put_seq_csum_at::<VLAN, V6, TCP>(out, seq, csum_of_folded::<TCP>(folded), stamp);
    }

    /// [`put_seq_folded_at`](Self::put_seq_folded_at) with the transport
    /// checksum given as it is written ([`csum_of_folded`]): a run of one
    /// flow's frames moves it with [`next_csum`], one compare a frame.
    #[inline(always)]
    pub fn put_seq_csum_at<const VLAN: bool, const V6: bool, const TCP: bool>(
        &self,
        out: &mut [u8],
        seq: u64,
        c: u16,
        stamp: &Stamp,
    ) {
        debug_assert_eq!(self.layout(), (VLAN, V6, TCP));
        let l4 = if VLAN { 18 } else { 14 } + if V6 { 40 } else { 20 };
        let csum = l4 + if TCP { 16 } else { 6 };
        let probe = l4 + if TCP { 20 } else { 8 };
        let out = &mut out[..probe + PROBE_LEN];
        out[csum..csum + 2].copy_from_slice(&c.to_be_bytes());
        out[probe + 4..probe + 12].copy_from_slice(&seq.to_be_bytes());
        out[probe + 12..probe + 16].copy_from_slice(&stamp.hi);
        out[probe + 16..probe + 18].copy_from_slice(&stamp.lo);
    }

    /// Writes one packet into `out` (at least [`len`](Self::len) bytes):
    /// the template with `flow`'s fields and a probe, checksums updated.
    ///
    /// Per packet nothing is summed over bytes: the new sums come from the
    /// values themselves (their 16-bit words), and the checksums are
    /// updated from the template's (RFC 1624).
    pub fn write(&self, out: &mut [u8], flow: &FlowFields, flow_id: u16, seq: u64, tx_ns: u64) {
        let out = &mut out[..self.bytes.len()];
        out.copy_from_slice(&self.bytes);
        out[0..6].copy_from_slice(&flow.dst_mac.0);
        out[6..12].copy_from_slice(&flow.src_mac.0);
        let at = self.addr_range().start;
        let addr_sum = match (flow.src_ip, flow.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) if !self.ipv6 => {
                let (s, d) = (s.to_bits(), d.to_bits());
                out[at..at + 4].copy_from_slice(&s.to_be_bytes());
                out[at + 4..at + 8].copy_from_slice(&d.to_be_bytes());
                words32(s) + words32(d)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) if self.ipv6 => {
                let (s, d) = (s.to_bits(), d.to_bits());
                out[at..at + 16].copy_from_slice(&s.to_be_bytes());
                out[at + 16..at + 32].copy_from_slice(&d.to_be_bytes());
                words128(s) + words128(d)
            }
            // A flow of the other family than the template: summed over
            // the bytes as written.
            _ => {
                let mut a = [0u8; 16];
                let r = self.addr_range();
                let n = ip_bytes(flow.src_ip, &mut a);
                out[r.start..r.start + n].copy_from_slice(&a[..n]);
                let n = ip_bytes(flow.dst_ip, &mut a);
                out[r.start + n..r.end].copy_from_slice(&a[..n]);
                self.addr_sum(out)
            }
        };
        out[self.l4..self.l4 + 2].copy_from_slice(&flow.src_port.to_be_bytes());
        out[self.l4 + 2..self.l4 + 4].copy_from_slice(&flow.dst_port.to_be_bytes());
        let p = self.l4 + self.l4_hdr;
        Probe {
            flow_id,
            seq,
            tx_ns,
        }
        .emit(&mut out[p..]);
        // The words the UDP sum covers and the packet changes: addresses
        // (pseudo-header), ports, and the probe past its magic and version
        // (flow id, sequence, the 48-bit time).
        let ts = tx_ns & ((1 << 48) - 1);
        let udp_sum = addr_sum
            + u32::from(flow.src_port)
            + u32::from(flow.dst_port)
            + u32::from(flow_id)
            + words64(seq)
            + words64(ts);
        let c = checksum::update_from(self.udp_base, udp_sum);
        // UDP sends a computed zero as all ones; TCP has no such rule.
        let c = if self.tcp {
            c
        } else {
            checksum::udp_nonzero(c)
        };
        out[self.l4 + self.csum_off..self.l4 + self.csum_off + 2].copy_from_slice(&c.to_be_bytes());
        if !self.ipv6 {
            let ip = checksum::update_from(self.ip_base, addr_sum);
            out[self.l3 + 10..self.l3 + 12].copy_from_slice(&ip.to_be_bytes());
        }
    }
}

/// The smallest frame (FCS included, at least 64 bytes) that carries these
/// headers, linerate's probe and the framing's payload bytes: 64 for UDP
/// over IPv4, 84 over IPv6.
pub fn min_frame(framing: &Framing, ipv6: bool, tcp: bool) -> usize {
    let l3 = 14 + if framing.vlan.is_some() { 4 } else { 0 };
    let l4 = l3 + if ipv6 { 40 } else { 20 };
    let l4_hdr = if tcp { 20 } else { 8 };
    let payload = framing.payload.as_ref().map_or(0, |p| p.len());
    (l4 + l4_hdr + PROBE_LEN + payload + FCS).max(64)
}

/// Where L3 and L4 start and how long the L4 header is, once the frame size
/// is checked against the headers, the probe, the largest frame and the MTU.
fn layout(
    frame_bytes: usize,
    framing: &Framing,
    ipv6: bool,
    tcp: bool,
) -> Result<(usize, usize, usize), TemplateError> {
    let l3 = 14 + if framing.vlan.is_some() { 4 } else { 0 };
    let l4 = l3 + if ipv6 { 40 } else { 20 };
    let l4_hdr = if tcp { 20 } else { 8 };
    let min = min_frame(framing, ipv6, tcp);
    if frame_bytes < min {
        return Err(TemplateError::TooSmall {
            size: frame_bytes,
            min,
            what: if framing.payload.is_some() {
                "the headers, linerate's 18-byte probe and the custom bytes"
            } else {
                "the headers and linerate's 18-byte probe"
            },
        });
    }
    if frame_bytes > FRAME_MAX {
        return Err(TemplateError::TooLarge { size: frame_bytes });
    }
    let ip_total = frame_bytes - FCS - l3;
    if let Some(mtu) = framing.mtu
        && ip_total > mtu
    {
        return Err(TemplateError::OverMtu {
            size: frame_bytes,
            mtu,
            ip: ip_total,
        });
    }
    Ok((l3, l4, l4_hdr))
}

/// The Ethernet header and the VLAN tag, if any.
pub(crate) fn emit_l2(b: &mut [u8], flow: &FlowFields, framing: &Framing, ipv6: bool) {
    let ethertype = if ipv6 {
        EtherType::IPV6
    } else {
        EtherType::IPV4
    };
    EthernetRepr {
        src: flow.src_mac,
        dst: flow.dst_mac,
        ethertype: if framing.vlan.is_some() {
            EtherType::VLAN
        } else {
            ethertype
        },
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
    if let Some((vid, pcp)) = framing.vlan {
        VlanRepr {
            pcp,
            dei: false,
            vid,
            ethertype,
        }
        .emit(&mut VlanTag::new_unchecked(&mut b[14..]));
    }
}

/// The IPv4 or IPv6 header for `l4_len` bytes of transport.
pub(crate) fn emit_l3(
    b: &mut [u8],
    flow: &FlowFields,
    framing: &Framing,
    l4_len: usize,
) -> Result<(), TemplateError> {
    let protocol = if framing.tcp_flags.is_some() {
        ip_proto::TCP
    } else {
        ip_proto::UDP
    };
    let ttl = if framing.ttl == 0 { 64 } else { framing.ttl };
    match (flow.src_ip, flow.dst_ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Ipv4Repr {
            src: s,
            dst: d,
            protocol,
            payload_len: l4_len,
            ttl,
            dscp: framing.dscp,
            ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(b)),
        (IpAddr::V6(s), IpAddr::V6(d)) => Ipv6Repr {
            src: s,
            dst: d,
            next_header: protocol,
            payload_len: l4_len,
            hop_limit: ttl,
            traffic_class: framing.dscp << 2,
            flow_label: 0,
        }
        .emit(&mut Ipv6Packet::new_unchecked(b)),
        _ => return Err(TemplateError::Family),
    }
    Ok(())
}

/// The UDP header, or the TCP header with the asked flags, checksummed
/// over the payload already in place.
pub(crate) fn emit_l4(b: &mut [u8], flow: &FlowFields, framing: &Framing, l4_len: usize) {
    let addrs = Some((flow.src_ip, flow.dst_ip));
    match framing.tcp_flags {
        Some(flags) => TcpRepr {
            src_port: flow.src_port,
            dst_port: flow.dst_port,
            seq: 1,
            ack: 0,
            flags: TcpFlags(flags),
            window: 65535,
            urgent: 0,
            payload_len: l4_len - 20,
        }
        .emit(&mut TcpPacket::new_unchecked(b), addrs),
        None => UdpRepr {
            src_port: flow.src_port,
            dst_port: flow.dst_port,
            payload_len: l4_len - 8,
        }
        .emit(&mut UdpPacket::new_unchecked(b), addrs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::FlowSpec;
    use linerate_wire::{L3, L4, parse_frame};
    use proptest::prelude::*;

    fn spec(v6: bool) -> FlowSpec {
        if v6 {
            FlowSpec::parse(
                "02:00:00:00:00:01-02:00:00:00:00:04",
                "02:00:00:00:00:0b",
                "2001:db8::1-2001:db8::100",
                "2001:db8:1::1",
                "1000-1100",
                "9-12",
            )
            .unwrap()
        } else {
            FlowSpec::parse(
                "02:00:00:00:00:01-02:00:00:00:00:04",
                "02:00:00:00:00:0b",
                "198.18.0.1-198.18.3.255",
                "198.19.0.1",
                "1000-1100",
                "9-12",
            )
            .unwrap()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Every patched packet parses back to its flow and probe, with
        /// valid checksums, exactly as if built from scratch.
        #[test]
        fn patched_packets_are_valid(v6 in any::<bool>(), i in any::<u64>(), seq in any::<u64>(), ts in any::<u64>(),
                                     size in 64usize..1600, vlan in proptest::option::of(0u16..4095)) {
            let s = spec(v6);
            let framing = Framing { vlan: vlan.map(|v| (v, 3)), dscp: 10, ..Framing::default() };
            let size = size.max(if v6 { 86 } else { 66 } + if vlan.is_some() { 4 } else { 0 });
            let t = Template::new(size, &s.flow(0), &framing).unwrap();
            let f = s.flow(i);
            let mut buf = vec![0u8; 2048];
            t.write(&mut buf, &f, (i % 65536) as u16, seq, ts);
            let frame = &buf[..t.len()];
            prop_assert_eq!(frame.len() + 4, size);
            let p = parse_frame(frame).unwrap();
            prop_assert_eq!(p.eth.src, f.src_mac);
            prop_assert_eq!(p.eth.dst, f.dst_mac);
            prop_assert_eq!(p.vlans[0].map(|v| v.vid), vlan);
            let (src, dst): (IpAddr, IpAddr) = match p.l3 {
                L3::Ipv4(r) => {
                    let at = 14 + if vlan.is_some() { 4 } else { 0 };
                    prop_assert!(Ipv4Packet::new_checked(&frame[at..]).unwrap().verify_checksum());
                    prop_assert_eq!(r.dscp, 10);
                    (r.src.into(), r.dst.into())
                }
                L3::Ipv6(r) => (r.src.into(), r.dst.into()),
                L3::Other(_) => { prop_assert!(false); unreachable!() }
            };
            prop_assert_eq!((src, dst), (f.src_ip, f.dst_ip));
            let L4::Udp(u) = p.l4 else { prop_assert!(false); unreachable!() };
            prop_assert_eq!((u.src_port, u.dst_port), (f.src_port, f.dst_port));
            let at = frame.len() - u.payload_len - 8;
            prop_assert!(UdpPacket::new_checked(&frame[at..]).unwrap().verify_checksum(src, dst));
            let probe = p.probe.unwrap();
            prop_assert_eq!((probe.flow_id, probe.seq, probe.tx_ns), ((i % 65536) as u16, seq, ts & ((1 << 48) - 1)));
            // Same bytes as a template built for this flow from scratch, but for the probe and checksums.
            let fresh = Template::new(size, &f, &framing).unwrap();
            let mut b2 = vec![0u8; 2048];
            fresh.write(&mut b2, &f, (i % 65536) as u16, seq, ts);
            prop_assert_eq!(&b2[..t.len()], frame);
        }

        /// Built in place (laid once, then flow and sequence put over
        /// whatever frame the slot held before) gives the same bytes as
        /// `write`, which the test above checks against etherparse and a
        /// template built from scratch.
        #[test]
        fn in_place_frames_equal_written_ones(v6 in any::<bool>(), i in any::<u64>(), j in any::<u64>(),
                                               seq in any::<u64>(), ts in any::<u64>(), size in 64usize..1600,
                                               tcp in any::<bool>(), vlan in proptest::option::of(0u16..4095)) {
            let s = spec(v6);
            let framing = Framing { tcp_flags: tcp.then_some(TcpFlags::ACK), vlan: vlan.map(|v| (v, 5)), ..Framing::default() };
            let size = size.max(if v6 { 86 } else { 66 } + if tcp { 12 } else { 0 } + if vlan.is_some() { 4 } else { 0 });
            let t = Template::new(size, &s.flow(0), &framing).unwrap();
            let mut want = vec![0u8; 2048];
            t.write(&mut want, &s.flow(i), i as u16, seq, ts);
            let mut slot = vec![0u8; 2048];
            // The slot held another flow's frame with another sequence first.
            t.lay(&mut slot);
            t.put_flow(&mut slot, &WireFlow::new(&s.flow(j)), j as u16);
            t.put_seq(&mut slot, &WireFlow::new(&s.flow(j)), j as u16, seq ^ 1, &Stamp::new(ts ^ 7));
            let w = WireFlow::new(&s.flow(i));
            t.put_flow(&mut slot, &w, i as u16);
            t.put_seq(&mut slot, &w, i as u16, seq, &Stamp::new(ts));
            prop_assert_eq!(&slot[..t.len()], &want[..t.len()]);
        }

        /// The sum kept modulo 0xffff and moved by one per frame (as
        /// blast's one-flow path keeps it) writes the bytes `put_seq`
        /// does, over runs of sequences, one of them through residue 0
        /// (a checksum of 0, or all ones).
        #[test]
        fn folded_sums_equal_put_seq(v6 in any::<bool>(), i in any::<u64>(), seq in any::<u64>(),
                                     ts in any::<u64>(), tcp in any::<bool>(), vlan in any::<bool>()) {
            let s = spec(v6);
            let framing = Framing { tcp_flags: tcp.then_some(TcpFlags::ACK), vlan: vlan.then_some((7, 1)), ..Framing::default() };
            let t = Template::new(128, &s.flow(0), &framing).unwrap();
            let w = WireFlow::new(&s.flow(i));
            let stamp = Stamp::new(ts);
            let (mut a, mut b) = (vec![0u8; 2048], vec![0u8; 2048]);
            t.lay(&mut a);
            t.put_flow(&mut a, &w, i as u16);
            b.copy_from_slice(&a);
            let base = u64::from(t.seq_sum_base(&w, i as u16, &stamp));
            let residue = |seq: u64| ((base + seq % 0xffff) % 0xffff) as u16;
            // From `seq`, and from where the residue is 150 short of
            // wrapping to 0.
            let near_zero = seq.wrapping_add((2 * 0xffff - 150 - u64::from(residue(seq))) % 0xffff);
            for start in [seq, near_zero] {
                let (mut seq, mut folded) = (start, residue(start));
                for _ in 0..300 {
                    t.put_seq(&mut a, &w, i as u16, seq, &stamp);
                    by_layout!(t, put_seq_folded_at, &mut b, seq, folded, &stamp);
                    prop_assert_eq!(&a[..t.len()], &b[..t.len()], "seq {}", seq);
                    seq = seq.wrapping_add(1);
                    // (past u64::MAX the residue starts again from the value)
                    folded = if seq == 0 { residue(0) } else if folded == 0xfffe { 0 } else { folded + 1 };
                }
            }
        }
    }

    #[test]
    fn tcp_flagged_frames() {
        let s = spec(false);
        let framing = Framing {
            tcp_flags: Some(TcpFlags::SYN),
            ..Framing::default()
        };
        assert!(matches!(
            Template::new(64, &s.flow(0), &framing),
            Err(TemplateError::TooSmall { min: 76, .. })
        ));
        let t = Template::new(76, &s.flow(0), &framing).unwrap();
        for i in 0..200u64 {
            let f = s.flow(i * 7);
            let mut buf = vec![0u8; 76];
            t.write(&mut buf, &f, i as u16, i + 1, i * 1000);
            let frame = &buf[..t.len()];
            let p = parse_frame(frame).unwrap();
            let L4::Tcp(tcp) = p.l4 else {
                panic!("not TCP: {:?}", p.l4)
            };
            assert!(tcp.flags.has(TcpFlags::SYN));
            assert_eq!((tcp.src_port, tcp.dst_port), (f.src_port, f.dst_port));
            assert_eq!(p.probe.unwrap().seq, i + 1);
            assert!(
                TcpPacket::new_checked(&frame[34..])
                    .unwrap()
                    .verify_checksum(f.src_ip, f.dst_ip)
            );
        }
        assert!(matches!(
            Template::new(64, &spec(true).flow(0), &framing),
            Err(TemplateError::TooSmall { min: 96, .. })
        ));
    }

    #[test]
    fn sizes_that_cannot_be_built() {
        let s = spec(false);
        let f = s.flow(0);
        assert!(matches!(
            Template::new(60, &f, &Framing::default()),
            Err(TemplateError::TooSmall { min: 64, .. })
        ));
        assert!(matches!(
            Template::new(9217, &f, &Framing::default()),
            Err(TemplateError::TooLarge { .. })
        ));
        let mtu = Framing {
            mtu: Some(1500),
            ..Framing::default()
        };
        assert!(Template::new(1518, &f, &mtu).is_ok());
        assert!(matches!(
            Template::new(1519, &f, &mtu),
            Err(TemplateError::OverMtu { ip: 1501, .. })
        ));
        let v6 = spec(true).flow(0);
        assert!(matches!(
            Template::new(64, &v6, &Framing::default()),
            Err(TemplateError::TooSmall { min: 84, .. })
        ));
        assert_eq!(
            Template::new(84, &v6, &Framing::default()).unwrap().len(),
            80
        );
        let mixed = FlowFields {
            dst_ip: v6.dst_ip,
            ..f
        };
        assert_eq!(
            Template::new(128, &mixed, &Framing::default()).unwrap_err(),
            TemplateError::Family
        );
    }
}
