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

/// The smallest frame a probe fits in: Ethernet, IPv4, UDP, probe.
const PROBE_FRAME_MIN: usize = 14 + 20 + 8 + crate::PROBE_LEN;
/// The longest frame on the fast path: an untagged IPv4 packet of the
/// longest total length (longer frames, jumbo GRO aggregates, go through
/// the careful path).
const FAST_FRAME_MAX: usize = 14 + 0xffff;

/// The probe of a frame on the fast path of [`probe_of`] (Ethernet with
/// one VLAN tag or none, IPv4 without options or IPv6 without extension
/// headers, UDP; untagged IPv4 only where its lengths fill the frame, as a
/// probe frame's do), `None` for every other frame. Where it finds a probe,
/// [`parse_frame`] finds the same one; where it finds none, the frame may
/// still hold one ([`probe_of`] asks the full parser then). Header fields
/// are checked a word at a time.
#[inline(always)]
pub fn fast_probe(b: &[u8]) -> Option<Probe> {
    fast_probe_upto(b, FastLen::ALL)
}

/// The frame lengths [`fast_probe_upto`] takes: from the smallest frame a
/// probe fits in up to a bound (at most the longest an IPv4 length field
/// can say), kept as the span above the smallest so that a length is
/// checked against both ends in one compare. (A `u16`: the compiler then
/// knows a length that passes is at least the smallest probe frame, and
/// checks none of the fixed offsets read after.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastLen(u16);

const _: () = assert!(FAST_FRAME_MAX - PROBE_FRAME_MIN <= u16::MAX as usize);

impl FastLen {
    /// Every length the fast path can take.
    pub const ALL: FastLen = FastLen((FAST_FRAME_MAX - PROBE_FRAME_MIN) as u16);

    /// Frames up to `max` bytes (past the fast path's longest: that;
    /// below the smallest probe frame: that one length).
    pub const fn upto(max: usize) -> Self {
        let max = if max < FAST_FRAME_MAX {
            max
        } else {
            FAST_FRAME_MAX
        };
        FastLen(max.saturating_sub(PROBE_FRAME_MIN) as u16)
    }

    /// Whether a frame of `len` bytes is inside the bounds.
    #[inline(always)]
    pub const fn holds(self, len: usize) -> bool {
        len.wrapping_sub(PROBE_FRAME_MIN) <= self.0 as usize
    }
}

/// [`fast_probe`] for frames whose length `within` holds; `None` for the
/// others (whose probe, if any, [`parse_frame`] still finds): a receiver
/// that treats long frames apart (GRO aggregates) bounds the fast path in
/// the compare it makes anyway.
#[inline(always)]
pub fn fast_probe_upto(b: &[u8], within: FastLen) -> Option<Probe> {
    match untagged_ipv4(b, within) {
        Layout::Ipv4(p) => p,
        Layout::Other => {
            let l4 = slow_layouts(b)?;
            read_probe(b.get(l4 + 8..l4 + 8 + crate::PROBE_LEN)?)
        }
    }
}

/// [`fast_probe_upto`] for untagged IPv4 frames only (what a sender of
/// probes sends most): `None` for every other frame, whose probe, if any,
/// [`fast_probe_upto`] or [`parse_frame`] finds. A receiver that takes
/// this layout first reads its probe straight through, with no path
/// shared with the other layouts'.
#[inline(always)]
pub fn fast_probe_ipv4(b: &[u8], within: FastLen) -> Option<Probe> {
    match untagged_ipv4(b, within) {
        Layout::Ipv4(p) => p,
        Layout::Other => None,
    }
}

/// The header of the last untagged IPv4 probe frame a receiver took, as
/// far as [`fast_probe_ipv4`] reads it: the frame's length, EtherType,
/// version and header length, IP total length, fragment bits, protocol,
/// UDP length, probe magic and version, and flow id (the fields that vary
/// from frame to frame, the IP identification, TTL, checksums, left
/// out). A frame whose header matches it is one `fast_probe_ipv4` takes,
/// with the same answer, in a few word compares rather than a check per
/// field (so a receiver counting a run of one flow's frames of one size
/// checks each against the run's first). Made by
/// [`fast_probe_ipv4_header`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SameHeader {
    /// The frame's length less the smallest probe frame's (a `u16`, so
    /// that a frame of the length is known to hold every fixed offset).
    excess: u16,
    /// Bytes 16..24 under `m16`.
    w16: u64,
    /// Bytes 38..46 under `m38`.
    w38: u64,
    /// The masks as values (a compare against memory, not a 64-bit
    /// constant made again for every frame): [`SameHeader::M16`],
    /// [`SameHeader::M38`], and `M38` without the flow id.
    m16: u64,
    m38: u64,
    m38_other: u64,
}

/// The words of a [`SameHeader`] that hold the flow id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowWord(u64);

/// What [`SameHeader::probe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameAs {
    /// The header's own flow: the probe's sequence number and stamp.
    Flow { seq: u64, tx_ns: u64 },
    /// The same header but for the flow id: the whole probe, and what
    /// makes the header this flow's ([`SameHeader::set_flow`]).
    OtherFlow(Probe, FlowWord),
    /// Another header: ask [`fast_probe_ipv4`].
    No,
}

impl SameHeader {
    /// Bytes 16..24 compared: total length, flags and fragment offset (DF
    /// left out), protocol.
    const M16: u64 = u64::from_le_bytes([0xff, 0xff, 0, 0, 0x3f, 0xff, 0, 0xff]);
    /// Bytes 38..46 compared: UDP length, probe magic, version, flow id.
    const M38: u64 = u64::from_le_bytes([0xff, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    /// The flow id's bits in bytes 38..46.
    const FLOW: u64 = 0xffff << 48;

    /// Matches no frame (its words are no frame's under the masks).
    pub const NONE: SameHeader = SameHeader {
        excess: 0,
        w16: u64::MAX,
        w38: u64::MAX,
        m16: Self::M16,
        m38: Self::M38,
        m38_other: Self::M38 & !Self::FLOW,
    };

    /// The length of the frames with this header.
    pub fn frame_len(&self) -> usize {
        PROBE_FRAME_MIN + usize::from(self.excess)
    }

    /// The probe of `b` if its header is this one but for (at most) the
    /// flow id: then [`fast_probe_ipv4`] takes `b` and finds that probe.
    #[inline(always)]
    pub fn probe(&self, b: &[u8]) -> SameAs {
        let Some(b) = self.same_but_flow(b) else {
            return SameAs::No;
        };
        let seq = le64(b, 46).swap_bytes();
        let tx_ns = le64(b, 52).swap_bytes() & ((1 << 48) - 1);
        let w38 = le64(b, 38);
        if (w38 ^ self.w38) & self.m38 == 0 {
            return SameAs::Flow { seq, tx_ns };
        }
        if (w38 ^ self.w38) & self.m38_other != 0 {
            return SameAs::No;
        }
        let p = Probe {
            flow_id: le16(b, 44).swap_bytes(),
            seq,
            tx_ns,
        };
        SameAs::OtherFlow(p, FlowWord(w38 & self.m38))
    }

    /// [`probe`](Self::probe)'s [`SameAs::Flow`] alone: the sequence
    /// number and stamp of `b` if its header is this one, flow id
    /// included.
    #[inline(always)]
    pub fn flow_probe(&self, b: &[u8]) -> Option<(u64, u64)> {
        let b = self.same_but_flow(b)?;
        if (le64(b, 38) ^ self.w38) & self.m38 != 0 {
            return None;
        }
        let seq = le64(b, 46).swap_bytes();
        Some((seq, le64(b, 52).swap_bytes() & ((1 << 48) - 1)))
    }

    /// `b`'s bytes up to its probe's end, if its header up to the UDP
    /// header is this one's.
    #[inline(always)]
    fn same_but_flow<'b>(&self, b: &'b [u8]) -> Option<&'b [u8; PROBE_FRAME_MIN]> {
        // The same length (at least the smallest probe frame's).
        if b.len() != self.frame_len() {
            return None;
        }
        let b = b.first_chunk::<PROBE_FRAME_MIN>()?;
        // Bytes 12..15: EtherType and version/IHL, as the fast path's.
        if le16(b, 12) != 0x0008 || b[14] != 0x45 || le64(b, 16) & self.m16 != self.w16 {
            return None;
        }
        Some(b)
    }

    /// Makes this the header of the flow of a frame it found to be
    /// [`SameAs::OtherFlow`].
    #[inline(always)]
    pub fn set_flow(&mut self, w: FlowWord) {
        self.w38 = w.0;
    }
}

/// [`fast_probe_ipv4`], and where it finds a probe, the frame's
/// [`SameHeader`].
#[inline(always)]
pub fn fast_probe_ipv4_header(b: &[u8], within: FastLen) -> Option<(Probe, SameHeader)> {
    let p = fast_probe_ipv4(b, within)?;
    // (fast_probe_ipv4 found a probe: the frame holds every fixed offset.)
    let h = SameHeader {
        excess: (b.len() - PROBE_FRAME_MIN) as u16,
        w16: le64(b, 16) & SameHeader::M16,
        w38: le64(b, 38) & SameHeader::M38,
        ..SameHeader::NONE
    };
    Some((p, h))
}

/// An untagged IPv4 frame's probe (or none), or another layout.
enum Layout {
    Ipv4(Option<Probe>),
    Other,
}

#[inline(always)]
fn untagged_ipv4(b: &[u8], within: FastLen) -> Layout {
    // Shorter than the smallest frame with a probe, or longer than the
    // bound (at most what an IPv4 packet's length field can say): the
    // careful path. (In one compare.)
    if !within.holds(b.len()) {
        return Layout::Ipv4(None);
    }
    // Bytes 12..15: EtherType, then (untagged IPv4) version/IHL.
    if le16(b, 12) == 0x0008 && b[14] == 0x45 {
        // Lengths that fill the frame exactly, as a probe frame's do: the
        // IP total is the frame after Ethernet, UDP's the total after IP
        // (both at least a probe's, as the frame is). A frame with bytes
        // past the IP packet (Ethernet padding, a trailer) or a UDP length
        // short of it is left to the careful path.
        // (The frame's lengths fit in 16 bits, checked above: compared as
        // loaded, big-endian.)
        let ip_len = ((b.len() - 14) as u16).swap_bytes();
        let udp_len = ((b.len() - 34) as u16).swap_bytes();
        // Bytes 16..24: total length (the frame's), identification (any),
        // flags/fragment offset (DF at most), TTL (any), protocol (UDP);
        // then UDP's length. (Each a compare against memory.)
        if le16(b, 16) != ip_len
            || le16(b, 20) & 0xff3f != 0
            || b[23] != 17
            || le16(b, 38) != udp_len
        {
            return Layout::Ipv4(None);
        }
        // The probe at a constant offset, inside the length checked above.
        Layout::Ipv4(read_probe(&b[42..PROBE_FRAME_MIN]))
    } else {
        Layout::Other
    }
}

/// The probe at the start of `p` (its length checked by the caller),
/// if it has linerate's magic and version.
#[inline(always)]
fn read_probe(p: &[u8]) -> Option<Probe> {
    if le16(p, 0) != u16::from_le_bytes([crate::PROBE_MAGIC, crate::PROBE_VERSION]) {
        return None;
    }
    Some(Probe {
        flow_id: le16(p, 2).swap_bytes(),
        seq: le64(p, 4).swap_bytes(),
        // Bytes 10..18 big-endian: the low 48 bits are the stamp.
        tx_ns: le64(p, 10).swap_bytes() & ((1 << 48) - 1),
    })
}

/// Little-endian words at `at` (the caller has checked the length).
#[inline(always)]
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
#[inline(always)]
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
#[inline(always)]
fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

/// An IPv4 header without options at `l3` (version/IHL checked by the
/// caller; `total_le` holds its total length field as loaded, byte-swapped
/// in its low 16 bits): not a fragment, UDP, the total length within the
/// frame and covering UDP header and probe, the UDP length within it.
/// Where the UDP header starts.
#[inline(always)]
fn ipv4_udp(b: &[u8], l3: usize, total_le: u64) -> Option<usize> {
    // Bytes 6..10: flags/fragment offset, TTL, protocol.
    if le32(b, l3 + 6) & 0xff00_ff3f != 0x1100_0000 {
        return None;
    }
    let total = usize::from((total_le as u16).swap_bytes());
    if total < 20 + 8 + crate::PROBE_LEN || l3 + total > b.len() {
        return None;
    }
    let udp = usize::from(le16(b, l3 + 24).swap_bytes());
    if udp < 8 + crate::PROBE_LEN || udp > total - 20 {
        return None;
    }
    Some(l3 + 20)
}

/// The fast path's other layouts: VLAN-tagged IPv4, IPv6 with or without
/// a tag.
#[inline(never)]
fn slow_layouts(b: &[u8]) -> Option<usize> {
    let be16 = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let (l3, ethertype) = match be16(12) {
        0x8100 => (18, be16(16)),
        t => (14, t),
    };
    match ethertype {
        0x0800 if b[l3] == 0x45 => ipv4_udp(b, l3, u64::from(le16(b, l3 + 2))),
        // Version 6, UDP next; the payload within the frame and covering
        // the UDP header and the probe.
        0x86dd if b[l3] >> 4 == 6 && b[l3 + 6] == 17 => {
            let payload = usize::from(be16(l3 + 4));
            if payload < 8 + crate::PROBE_LEN || l3 + 40 + payload > b.len() {
                return None;
            }
            let udp = usize::from(be16(l3 + 44));
            if udp < 8 + crate::PROBE_LEN || udp > payload {
                return None;
            }
            Some(l3 + 40)
        }
        _ => None,
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
