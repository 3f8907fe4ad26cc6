//! Whole-frame parsing: Ethernet, up to two VLAN tags, IPv4 or IPv6 (with
//! extension headers skipped), UDP/TCP/ICMP echo, and a probe in the payload
//! or, in a UDP datagram to the VXLAN port, in the encapsulated frame's;
//! behind GRE (IP protocol 47: an inner IPv4 or IPv6 packet, or Ethernet
//! frame) and an MPLS label stack (an IPv4 or IPv6 packet after the
//! bottom label), the probe of the packet carried, one level deep.
//! This is what a receiver and the fuzz target call on untrusted bytes.

use crate::error::Layer;
use crate::icmp::{IcmpEchoPacket, IcmpEchoRepr, IcmpVersion};
use crate::{
    Error, EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    Probe, ProbeView, TcpPacket, TcpRepr, UdpPacket, UdpRepr, VlanRepr, VlanTag, VxlanHeader,
    VxlanRepr, ip_proto,
};

pub use crate::fast_probe::{
    FastLen, FlowWord, SameAs, SameHeader, fast_probe, fast_probe_ipv4, fast_probe_ipv4_header,
    fast_probe_upto,
};

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3 {
    Ipv4(Ipv4Repr),
    Ipv6(Ipv6Repr),
    /// Some other EtherType (ARP, …): not parsed further.
    Other(u16),
}

/// The transport layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    Udp(UdpRepr),
    Tcp(TcpRepr),
    IcmpEcho(IcmpEchoRepr),
    /// A protocol not parsed here, or an IP fragment (first or not).
    Other(u8),
    /// No transport header (non-IP frame, or IPv6 "no next header").
    None,
}

/// A parsed frame. `payload` is the transport payload (empty if none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFrame<'a> {
    pub eth: EthernetRepr,
    pub vlans: [Option<VlanRepr>; 2],
    pub l3: L3,
    pub l4: L4,
    pub payload: &'a [u8],
    /// The probe in the payload; or, where the payload holds none and the
    /// frame is a UDP datagram to the VXLAN port ([`vxlan`](Self::vxlan)),
    /// a GRE packet or an MPLS frame, the probe of the frame or packet it
    /// carries (one level: that one is not looked into again).
    pub probe: Option<Probe>,
    /// The VXLAN header of a UDP datagram to port 4789 whose payload holds
    /// no probe itself (the layers above are the outer frame's).
    pub vxlan: Option<VxlanRepr>,
    /// Where the IP header, its addresses and the transport header are in
    /// the frame (for rewriting in place).
    pub ip: Option<crate::offsets::IpOffsets>,
}

/// IPv6 extension headers walked over; more than this is refused as hostile.
const IPV6_EXT_HEADERS_MAX: usize = 8;

/// Parses an Ethernet frame (without FCS). Never panics.
pub fn parse_frame(bytes: &[u8]) -> Result<ParsedFrame<'_>, Error> {
    let mut out = parse_one(bytes, true)?;
    if out.probe.is_none()
        && let L4::Udp(u) = out.l4
        && u.dst_port == crate::vxlan::PORT
        && let Ok(h) = VxlanHeader::new_checked(out.payload)
    {
        out.vxlan = Some(VxlanRepr::parse(&h));
        // An inner frame that does not parse leaves the outer one as it is.
        out.probe = parse_one(h.payload(), false)
            .ok()
            .and_then(|inner| inner.probe);
    }
    Ok(out)
}

/// One frame's layers, its payload's probe: [`parse_frame`] without
/// looking behind VXLAN; behind GRE and MPLS too when `tunnels`.
fn parse_one(bytes: &[u8], tunnels: bool) -> Result<ParsedFrame<'_>, Error> {
    let frame = EthernetFrame::new_checked(bytes)?;
    let eth = EthernetRepr::parse(&frame);
    let (vlans, ethertype, rest) =
        parse_vlans(eth.ethertype, &bytes[crate::ethernet::HEADER_LEN..])?;
    let mut out = ParsedFrame {
        eth,
        vlans,
        l3: L3::Other(ethertype),
        l4: L4::None,
        payload: &[],
        probe: None,
        vxlan: None,
        ip: None,
    };
    // Offsets come from the walk itself (no second pass over the headers).
    let l3 = bytes.len() - rest.len();
    let next = match ethertype {
        EtherType::IPV4 => parse_ipv4(&mut out, bytes, rest, l3)?,
        EtherType::IPV6 => parse_ipv6(&mut out, bytes, rest, l3)?,
        MPLS | MPLS_MULTICAST if tunnels => {
            out.probe = mpls_probe(rest);
            None
        }
        _ => None,
    };
    let Some((proto, l4_bytes, icmp_version)) = next else {
        return Ok(out);
    };
    parse_l4(&mut out, proto, l4_bytes, icmp_version)?;
    out.probe = ProbeView::new_checked(out.payload)
        .ok()
        .map(|v| Probe::parse(&v));
    if tunnels && proto == GRE && out.probe.is_none() {
        out.probe = gre_probe(l4_bytes);
    }
    Ok(out)
}

/// MPLS's EtherTypes (unicast, multicast).
pub const MPLS: u16 = 0x8847;
pub const MPLS_MULTICAST: u16 = 0x8848;
/// GRE's IP protocol number, and the protocol type of an Ethernet frame
/// in GRE (transparent Ethernet bridging).
pub const GRE: u8 = 47;
pub const GRE_ETHERNET: u16 = 0x6558;
/// MPLS labels walked over; a deeper stack is not looked into.
const MPLS_LABELS_MAX: usize = 8;

/// The probe of the IPv4 or IPv6 packet after an MPLS label stack (`b`
/// from the first label on): the packet's version told by its first
/// nibble, as label switching routers tell it.
fn mpls_probe(b: &[u8]) -> Option<Probe> {
    for i in 0..MPLS_LABELS_MAX {
        let entry = b.get(4 * i..4 * i + 4)?;
        if entry[2] & 1 == 1 {
            let ip = &b[4 * i + 4..];
            let ethertype = match ip.first()? >> 4 {
                4 => EtherType::IPV4,
                6 => EtherType::IPV6,
                _ => return None,
            };
            return ip_probe(ethertype, ip);
        }
    }
    None
}

/// The probe of what a GRE packet (`b`, its header on) carries: an IPv4
/// or IPv6 packet, or an Ethernet frame (not looked behind again).
fn gre_probe(b: &[u8]) -> Option<Probe> {
    let flags = *b.first()?;
    // Checksum (or routing) present: 4 bytes; key, sequence: 4 each.
    let len = 4
        + 4 * usize::from(flags & 0xc0 != 0)
        + 4 * usize::from(flags & 0x20 != 0)
        + 4 * usize::from(flags & 0x10 != 0);
    let protocol = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
    let inner = b.get(len..)?;
    match protocol {
        GRE_ETHERNET => parse_one(inner, false).ok()?.probe,
        p => ip_probe(p, inner),
    }
}

/// The probe of an IP packet of `ethertype` (IPv4 or IPv6) in `b`.
fn ip_probe(ethertype: u16, b: &[u8]) -> Option<Probe> {
    let zero = crate::MacAddr([0; 6]);
    let mut out = ParsedFrame {
        eth: EthernetRepr {
            src: zero,
            dst: zero,
            ethertype,
        },
        vlans: [None; 2],
        l3: L3::Other(ethertype),
        l4: L4::None,
        payload: &[],
        probe: None,
        vxlan: None,
        ip: None,
    };
    let next = match ethertype {
        EtherType::IPV4 => parse_ipv4(&mut out, b, b, 0).ok()?,
        EtherType::IPV6 => parse_ipv6(&mut out, b, b, 0).ok()?,
        _ => None,
    };
    let (proto, l4, icmp_version) = next?;
    parse_l4(&mut out, proto, l4, icmp_version).ok()?;
    ProbeView::new_checked(out.payload)
        .ok()
        .map(|v| Probe::parse(&v))
}

/// A frame's VLAN tags, outer first.
type Vlans = [Option<VlanRepr>; 2];

/// The VLAN tags (at most two) from `rest` on, while `ethertype` says a
/// tag follows: the tags, the EtherType after them, the bytes after them.
#[inline]
fn parse_vlans(mut ethertype: u16, mut rest: &[u8]) -> Result<(Vlans, u16, &[u8]), Error> {
    let mut vlans = [None; 2];
    let mut tags = 0;
    while ethertype == EtherType::VLAN || ethertype == EtherType::QINQ {
        if tags == vlans.len() {
            return Err(Error::Unsupported {
                layer: Layer::Vlan,
                what: "more than two VLAN tags",
            });
        }
        let tag = VlanTag::new_checked(rest)?;
        let repr = VlanRepr::parse(&tag);
        vlans[tags] = Some(repr);
        tags += 1;
        ethertype = repr.ethertype;
        rest = &rest[crate::vlan::TAG_LEN..];
    }
    Ok((vlans, ethertype, rest))
}

/// Where `part` (a slice of `bytes`) starts in `bytes`.
#[inline]
fn offset_of(bytes: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - bytes.as_ptr() as usize
}

/// A transport header to parse: its protocol, its bytes, which ICMP
/// its IP version carries.
type Transport<'a> = Option<(u8, &'a [u8], IcmpVersion)>;

/// The IPv4 header at `rest` (`l3` into `bytes`) into `out`; its
/// transport header, unless a fragment (whose `l4` it sets itself).
#[inline]
fn parse_ipv4<'a>(
    out: &mut ParsedFrame<'a>,
    bytes: &'a [u8],
    rest: &'a [u8],
    l3: usize,
) -> Result<Transport<'a>, Error> {
    let ip = Ipv4Packet::new_checked(rest)?;
    let repr = Ipv4Repr::parse(&ip);
    out.l3 = L3::Ipv4(repr);
    let l4 = &rest[ip.header_len()..usize::from(ip.total_len())];
    out.ip = Some(crate::offsets::IpOffsets {
        v6: false,
        l3,
        src: l3 + 12,
        addr_len: 4,
        header_checksum: Some(l3 + 10),
        // A first fragment carries the transport header too.
        l4: (ip.frag_offset() == 0).then(|| (repr.protocol, offset_of(bytes, l4))),
    });
    if ip.frag_offset() != 0 || ip.more_frags() {
        // A fragment is not a whole segment: its transport header
        // (if any) describes bytes that are not all here.
        out.l4 = L4::Other(repr.protocol);
        return Ok(None);
    }
    Ok(Some((repr.protocol, l4, IcmpVersion::V4)))
}

/// The IPv6 header at `rest` (`l3` into `bytes`) into `out`; its
/// transport header past the extension headers, if there is one.
#[inline]
fn parse_ipv6<'a>(
    out: &mut ParsedFrame<'a>,
    bytes: &'a [u8],
    rest: &'a [u8],
    l3: usize,
) -> Result<Transport<'a>, Error> {
    let ip = Ipv6Packet::new_checked(rest)?;
    let repr = Ipv6Repr::parse(&ip);
    out.l3 = L3::Ipv6(repr);
    out.ip = Some(crate::offsets::IpOffsets {
        v6: true,
        l3,
        src: l3 + 8,
        addr_len: 16,
        header_checksum: None,
        l4: None,
    });
    let (proto, l4) = match skip_ipv6_extensions(repr.next_header, ip_payload(rest, &ip))? {
        Some(x) => x,
        None => return Ok(None),
    };
    if proto == NO_NEXT_HEADER {
        return Ok(None);
    }
    if let Some(o) = out.ip.as_mut() {
        o.l4 = Some((proto, offset_of(bytes, l4)));
    }
    Ok(Some((proto, l4, IcmpVersion::V6)))
}

/// The transport header `proto` at `l4_bytes` into `out`, with its
/// payload.
#[inline]
fn parse_l4<'a>(
    out: &mut ParsedFrame<'a>,
    proto: u8,
    l4_bytes: &'a [u8],
    icmp_version: IcmpVersion,
) -> Result<(), Error> {
    match proto {
        ip_proto::UDP => {
            let udp = UdpPacket::new_checked(l4_bytes)?;
            out.l4 = L4::Udp(UdpRepr::parse(&udp));
            out.payload = &l4_bytes[crate::udp::HEADER_LEN..usize::from(udp.len())];
        }
        ip_proto::TCP => {
            let tcp = TcpPacket::new_checked(l4_bytes)?;
            out.l4 = L4::Tcp(TcpRepr::parse(&tcp));
            out.payload = &l4_bytes[tcp.header_len()..];
        }
        ip_proto::ICMP | ip_proto::ICMPV6
            if (proto == ip_proto::ICMP) == (icmp_version == IcmpVersion::V4) =>
        {
            match IcmpEchoPacket::new_checked(l4_bytes, icmp_version) {
                Ok(p) => {
                    out.l4 = L4::IcmpEcho(IcmpEchoRepr::parse(&p, icmp_version));
                    out.payload = &l4_bytes[crate::icmp::HEADER_LEN..];
                }
                Err(_) => out.l4 = L4::Other(proto),
            }
        }
        other => out.l4 = L4::Other(other),
    }
    Ok(())
}

/// The probe of a frame, as [`parse_frame`] finds it, found in a few
/// loads for what a sender of probes sends: Ethernet (one VLAN tag or
/// none), IPv4 without options or IPv6 without extension headers, UDP. A
/// frame off that path (fragments, options, TCP, anything malformed) goes
/// through [`parse_frame`], so the answer is the same for every frame
/// (a VXLAN frame's probe, behind its outer headers, is found there: the
/// fast path reads the outer UDP payload, which starts with the VXLAN
/// header, and finds none).
#[inline]
pub fn probe_of(bytes: &[u8]) -> Option<Probe> {
    match fast_probe(bytes) {
        Some(p) => Some(p),
        None => parse_frame(bytes).ok()?.probe,
    }
}

fn ip_payload<'a>(rest: &'a [u8], ip: &Ipv6Packet<&'a [u8]>) -> &'a [u8] {
    &rest[crate::ipv6::HEADER_LEN..crate::ipv6::HEADER_LEN + usize::from(ip.payload_len())]
}

const NO_NEXT_HEADER: u8 = 59;

/// Walks hop-by-hop (0), routing (43), fragment (44) and destination
/// options (60) headers. Returns the upper-layer protocol and its bytes, or
/// `None` for a fragment (first or not: it is not a whole segment).
fn skip_ipv6_extensions(mut next: u8, mut bytes: &[u8]) -> Result<Option<(u8, &[u8])>, Error> {
    for _ in 0..IPV6_EXT_HEADERS_MAX {
        match next {
            0 | 43 | 60 => {
                crate::error::need(Layer::Ipv6, 2, bytes.len())?;
                let len = (usize::from(bytes[1]) + 1) * 8;
                crate::error::need(Layer::Ipv6, len, bytes.len())?;
                next = bytes[0];
                bytes = &bytes[len..];
            }
            44 => {
                crate::error::need(Layer::Ipv6, 8, bytes.len())?;
                let offset_and_more = crate::be16(bytes, 2) & 0xfff9;
                next = bytes[0];
                bytes = &bytes[8..];
                if offset_and_more != 0 {
                    return Ok(None);
                }
            }
            _ => return Ok(Some((next, bytes))),
        }
    }
    Err(Error::Unsupported {
        layer: Layer::Ipv6,
        what: "too many extension headers",
    })
}

/// Runs every parser and accessor on `data`; the fuzz target and the seed
/// corpus test call this. Must never panic.
pub fn fuzz_all(data: &[u8]) {
    use crate::icmp::IcmpVersion;
    if let Ok(p) = parse_frame(data) {
        // Touch what a receiver reads.
        let _ = (p.payload.len(), p.probe.map(|x| x.seq));
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = (
            Ipv4Repr::parse(&p),
            p.verify_checksum(),
            p.payload().len(),
            p.frag_offset(),
        );
    }
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let _ = (Ipv6Repr::parse(&p), p.payload().len());
    }
    let v4: core::net::IpAddr = core::net::Ipv4Addr::LOCALHOST.into();
    if let Ok(p) = UdpPacket::new_checked(data) {
        let _ = (
            UdpRepr::parse(&p),
            p.verify_checksum(v4, v4),
            p.payload().len(),
        );
    }
    if let Ok(p) = TcpPacket::new_checked(data) {
        let _ = (
            TcpRepr::parse(&p),
            p.verify_checksum(v4, v4),
            p.options().len(),
        );
    }
    for v in [IcmpVersion::V4, IcmpVersion::V6] {
        if let Ok(p) = IcmpEchoPacket::new_checked(data, v) {
            let _ = (IcmpEchoRepr::parse(&p, v), p.verify_checksum(None));
        }
    }
    if let Ok(p) = ProbeView::new_checked(data) {
        let _ = Probe::parse(&p);
    }
    if let Ok(t) = VlanTag::new_checked(data) {
        let _ = VlanRepr::parse(&t);
    }
    if let Ok(h) = VxlanHeader::new_checked(data) {
        let _ = (VxlanRepr::parse(&h), h.payload().len());
    }
    if let Ok(p) = crate::ArpPacket::new_checked(data) {
        let _ = crate::ArpRepr::parse(&p);
    }
    let v6 = core::net::Ipv6Addr::LOCALHOST;
    if let Ok(n) = crate::NdiscRepr::parse(data) {
        let _ = (n.buffer_len(), crate::ndisc::checksum_ok(data, v6, v6));
    }
}
