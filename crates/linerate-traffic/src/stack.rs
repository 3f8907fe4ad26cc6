//! Headers a [`Template`](crate::Template) does not lay: an MPLS label
//! stack after the Ethernet header, GRE (an outer IPv4 or IPv6 header,
//! then the GRE header) before the IP packet, and ICMP or ICMPv6 echo as
//! the transport instead of UDP or TCP (the OTG model's `mpls`, `gre`,
//! `icmp` and `icmpv6` headers, sent by `linerate agent`).
//!
//! The frame is one Ethernet header (an optional 802.1Q tag) carrying the
//! flow's MACs, the label stack, GRE's outer IP header and GRE header,
//! then the IP packet of the flow's addresses, its transport header and
//! linerate's probe (then the framing's payload bytes, then the fixed
//! pattern), as a template's. Each frame is written whole, every checksum
//! summed over its bytes: these frames are for the agent's rates, not the
//! line rate the patched templates reach.
//!
//! Per frame: the flow's fields (MACs, inner addresses, ports, or with
//! ICMP echo its identifier and sequence number, which take the ports'
//! places in the flow), and each label's fields step on their own, frame n
//! carrying value n mod the field's count (the model's patterns).

pub use crate::encap::{Gre, Label, Stack};
use crate::flows::{FlowFields, Range};
use crate::template::{FCS, Framing, TemplateError, emit_l4};
use linerate_wire::{
    EthernetFrame, EthernetRepr, IcmpEchoPacket, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    MacAddr, PROBE_LEN, Probe, VlanRepr, VlanTag, checksum, ip_proto,
};
use std::net::IpAddr;

/// Jumbo frame maximum (FCS included), as the templates'.
const FRAME_MAX: usize = 9216;
/// MPLS's EtherType (unicast).
pub const ETHERTYPE_MPLS: u16 = 0x8847;
/// Most labels a stack holds.
pub const LABELS_MAX: usize = 8;

impl Gre {
    fn header_len(&self) -> usize {
        if self.checksum_present { 8 } else { 4 }
    }

    fn outer_len(&self) -> usize {
        if self.src.is_ipv6() { 40 } else { 20 }
    }
}

/// Value n mod count of `r`, modulo `bits` bits.
#[inline]
fn value(r: &Range, n: u64, bits: u32) -> u32 {
    let d = n % r.count.max(1);
    (r.first.wrapping_add(u128::from(d).wrapping_mul(r.step)) & ((1u128 << bits) - 1)) as u32
}

/// Where a frame's parts start.
struct Offsets {
    /// The label stack (after Ethernet and the tag).
    mpls: usize,
    /// GRE's outer IP header and the GRE header.
    outer: usize,
    gre: usize,
    /// The flow's IP header, its transport header, the probe.
    l3: usize,
    l4: usize,
    probe: usize,
}

impl Stack {
    /// Whether these headers change anything (a stack of nothing frames
    /// as a template does).
    pub fn is_empty(&self) -> bool {
        self.icmp.is_none() && self.mpls.is_empty() && self.gre.is_none()
    }

    fn offsets(&self, framing: &Framing, ipv6: bool) -> Offsets {
        let mpls = 14 + if framing.vlan.is_some() { 4 } else { 0 };
        let outer = mpls + 4 * self.mpls.len();
        let gre = outer + self.gre.as_ref().map_or(0, Gre::outer_len);
        let l3 = gre + self.gre.as_ref().map_or(0, Gre::header_len);
        let l4 = l3 + if ipv6 { 40 } else { 20 };
        let hdr = if framing.tcp_flags.is_some() && self.icmp.is_none() {
            20
        } else {
            8
        };
        Offsets {
            mpls,
            outer,
            gre,
            l3,
            l4,
            probe: l4 + hdr,
        }
    }

    /// The smallest frame (FCS included, at least 64 bytes) that carries
    /// these headers, the probe and the framing's payload bytes.
    pub fn min_frame(&self, framing: &Framing, ipv6: bool) -> usize {
        let o = self.offsets(framing, ipv6);
        let payload = framing.payload.as_ref().map_or(0, |p| p.len());
        (o.probe + PROBE_LEN + payload + FCS).max(64)
    }

    /// Whether a `frame_bytes`-byte frame of `flow` can be built: its
    /// size against the headers, the largest frame and the MTU (what
    /// follows the Ethernet header and tag), the families.
    pub fn check(
        &self,
        frame_bytes: usize,
        flow: &FlowFields,
        framing: &Framing,
    ) -> Result<(), TemplateError> {
        let ipv6 = flow.src_ip.is_ipv6();
        if ipv6 != flow.dst_ip.is_ipv6()
            || self.gre.is_some_and(|g| g.src.is_ipv6() != g.dst.is_ipv6())
        {
            return Err(TemplateError::Family);
        }
        let min = self.min_frame(framing, ipv6);
        if frame_bytes < min {
            return Err(TemplateError::TooSmall {
                size: frame_bytes,
                min,
                what: "the headers, linerate's 18-byte probe and any custom bytes",
            });
        }
        if frame_bytes > FRAME_MAX {
            return Err(TemplateError::TooLarge { size: frame_bytes });
        }
        let after_l2 = frame_bytes - FCS - self.offsets(framing, ipv6).mpls;
        match framing.mtu {
            Some(mtu) if after_l2 > mtu => Err(TemplateError::OverMtu {
                size: frame_bytes,
                mtu,
                ip: after_l2,
            }),
            _ => Ok(()),
        }
    }

    /// Writes frame `n` of a run, `frame_bytes` bytes on the wire (FCS
    /// included; [`check`](Self::check)ed before), into `out`: `flow`'s
    /// fields, the probe (`flow_id`, `seq`, `tx_ns`), every checksum.
    /// Returns the bytes written (the frame without its FCS).
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &self,
        out: &mut [u8],
        frame_bytes: usize,
        framing: &Framing,
        flow: &FlowFields,
        probe: Probe,
        n: u64,
    ) -> usize {
        let ipv6 = flow.src_ip.is_ipv6();
        let o = self.offsets(framing, ipv6);
        let len = frame_bytes - FCS;
        let b = &mut out[..len];
        // Payload: probe, the bytes asked for, then the fixed pattern.
        for (i, x) in b[o.probe + PROBE_LEN..].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        if let Some(p) = &framing.payload {
            let at = o.probe + PROBE_LEN;
            b[at..at + p.len()].copy_from_slice(p);
        }
        probe.emit(&mut b[o.probe..]);
        let family = |v6: bool| if v6 { 0x86dd } else { 0x0800 };
        let ethertype = if !self.mpls.is_empty() {
            ETHERTYPE_MPLS
        } else if let Some(g) = &self.gre {
            family(g.src.is_ipv6())
        } else {
            family(ipv6)
        };
        emit_ethernet(b, (flow.src_mac, flow.dst_mac), framing.vlan, ethertype);
        for (i, l) in self.mpls.iter().enumerate() {
            let last = i + 1 == self.mpls.len();
            let bos = l
                .bottom_of_stack
                .map_or(u32::from(last), |v| u32::from(v & 1));
            let word = value(&l.label, n, 20) << 12
                | value(&l.traffic_class, n, 3) << 9
                | bos << 8
                | value(&l.ttl, n, 8);
            b[o.mpls + 4 * i..o.mpls + 4 * i + 4].copy_from_slice(&word.to_be_bytes());
        }
        self.transport(&mut b[o.l3..], &o, framing, flow);
        if let Some(g) = &self.gre {
            emit_gre(&mut b[o.outer..], g, o.gre - o.outer, family(ipv6));
        }
        len
    }

    /// The flow's IP header and transport header (UDP, TCP or ICMP echo)
    /// over the probe and payload in place (`b` from the IP header on).
    fn transport(&self, b: &mut [u8], o: &Offsets, framing: &Framing, flow: &FlowFields) {
        let l4 = o.l4 - o.l3;
        let l4_len = b.len() - l4;
        let protocol = match (self.icmp, flow.src_ip.is_ipv6()) {
            (Some(_), false) => ip_proto::ICMP,
            (Some(_), true) => ip_proto::ICMPV6,
            (None, _) if framing.tcp_flags.is_some() => ip_proto::TCP,
            (None, _) => ip_proto::UDP,
        };
        let ttl = if framing.ttl == 0 { 64 } else { framing.ttl };
        emit_ip(
            &mut b[..l4],
            (flow.src_ip, flow.dst_ip),
            protocol,
            l4_len,
            (framing.dscp, ttl),
        );
        match self.icmp {
            None => emit_l4(&mut b[l4..], flow, framing, l4_len),
            Some((kind, code)) => {
                let m = &mut b[l4..];
                m[0] = kind;
                m[1] = code;
                m[4..6].copy_from_slice(&flow.src_port.to_be_bytes());
                m[6..8].copy_from_slice(&flow.dst_port.to_be_bytes());
                let v6 = flow.src_ip.is_ipv6().then_some((flow.src_ip, flow.dst_ip));
                IcmpEchoPacket::new_unchecked(m).fill_checksum(v6);
            }
        }
    }

    /// Frames in which every label field has repeated: the least common
    /// multiple of their counts (`None` past 2^32).
    pub fn period(&self) -> Option<u64> {
        self.mpls
            .iter()
            .flat_map(|l| [l.label, l.traffic_class, l.ttl])
            .try_fold(1u64, |p, r| {
                let c = r.count.max(1);
                (p / gcd(p, c)).checked_mul(c).filter(|&p| p <= 1 << 32)
            })
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The Ethernet header (`macs`: source, destination) and the tag, if
/// any, before `ethertype`.
fn emit_ethernet(b: &mut [u8], macs: (MacAddr, MacAddr), vlan: Option<(u16, u8)>, ethertype: u16) {
    EthernetRepr {
        src: macs.0,
        dst: macs.1,
        ethertype: if vlan.is_some() { 0x8100 } else { ethertype },
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
    if let Some((vid, pcp)) = vlan {
        VlanRepr {
            pcp,
            dei: false,
            vid,
            ethertype,
        }
        .emit(&mut VlanTag::new_unchecked(&mut b[14..]));
    }
}

/// An IPv4 (identification 0, DF) or IPv6 header for `payload_len` bytes
/// of `protocol`; `(dscp, ttl)`.
fn emit_ip(
    b: &mut [u8],
    (src, dst): (IpAddr, IpAddr),
    protocol: u8,
    payload_len: usize,
    (dscp, ttl): (u8, u8),
) {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Ipv4Repr {
            src: s,
            dst: d,
            protocol,
            payload_len,
            ttl,
            dscp,
            ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(b)),
        (s, d) => Ipv6Repr {
            src: v6(s),
            dst: v6(d),
            next_header: protocol,
            payload_len,
            hop_limit: ttl,
            traffic_class: dscp << 2,
            flow_label: 0,
        }
        .emit(&mut Ipv6Packet::new_unchecked(b)),
    }
}

fn v6(a: IpAddr) -> std::net::Ipv6Addr {
    match a {
        IpAddr::V4(v) => v.to_ipv6_mapped(),
        IpAddr::V6(v) => v,
    }
}

/// GRE's outer IP header (`gre_at` bytes) and GRE header over the packet
/// in place (`b` from the outer header on; `inner`: the packet's
/// EtherType, the protocol's auto), the GRE checksum summed over the GRE
/// packet.
fn emit_gre(b: &mut [u8], g: &Gre, gre_at: usize, inner: u16) {
    let gre_len = b.len() - gre_at;
    emit_ip(
        &mut b[..gre_at],
        (g.src, g.dst),
        linerate_wire::parse::GRE,
        gre_len,
        (g.dscp, g.ttl),
    );
    let h = &mut b[gre_at..];
    let first =
        u16::from(g.checksum_present) << 15 | (g.reserved0 & 0xfff) << 3 | u16::from(g.version & 7);
    h[..2].copy_from_slice(&first.to_be_bytes());
    h[2..4].copy_from_slice(&g.protocol.unwrap_or(inner).to_be_bytes());
    if g.checksum_present {
        h[4..6].fill(0);
        h[6..8].copy_from_slice(&g.reserved1.to_be_bytes());
        let c = checksum::checksum(h);
        h[4..6].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
#[path = "stack_tests.rs"]
mod tests;
