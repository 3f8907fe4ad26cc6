//! Rewriting frames in place, for every tool that does it (pcap replay's
//! MAC/IP rewrite, fwd's modes): the layers are found once by
//! [`linerate_wire::locate`] (VLAN tags and IPv6 extension headers
//! included), and checksums are updated incrementally (RFC 1624), never
//! recomputed over the payload.

use linerate_wire::{IpOffsets, MacAddr, checksum, locate};
use std::net::IpAddr;

/// Addresses to put into frames (tcprewrite's --enet-*/--srcipmap style).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rewrite {
    pub src_mac: Option<MacAddr>,
    pub dst_mac: Option<MacAddr>,
    pub src_ip: Option<IpAddr>,
    pub dst_ip: Option<IpAddr>,
}

/// Swaps `f[a..a+n]` with `f[b..b+n]` (a + n <= b).
fn swap(f: &mut [u8], a: usize, b: usize, n: usize) {
    let (lo, hi) = f.split_at_mut(b);
    lo[a..a + n].swap_with_slice(&mut hi[..n]);
}

/// Updates the 16-bit checksum at `at` for a change of the summed bytes
/// from `old` to `new`; a UDP/IPv4 checksum of 0 (none) stays 0.
fn fix(frame: &mut [u8], at: usize, zero_means_none: bool, old: u32, new: u32) {
    if at + 2 > frame.len() {
        return;
    }
    let c = u16::from_be_bytes([frame[at], frame[at + 1]]);
    if zero_means_none && c == 0 {
        return;
    }
    let n = checksum::update(c, old, new);
    let n = if zero_means_none {
        checksum::udp_nonzero(n)
    } else {
        n
    };
    frame[at..at + 2].copy_from_slice(&n.to_be_bytes());
}

/// Rewrites one frame in place: MACs, and IP addresses in frames of the
/// same family, with the IPv4 header checksum and the UDP/TCP/ICMPv6
/// checksum (found past any IPv6 extension headers) updated.
pub fn rewrite(frame: &mut [u8], rw: &Rewrite) {
    if frame.len() < 14 {
        return;
    }
    if let Some(m) = rw.dst_mac {
        frame[0..6].copy_from_slice(&m.0);
    }
    if let Some(m) = rw.src_mac {
        frame[6..12].copy_from_slice(&m.0);
    }
    if rw.src_ip.is_none() && rw.dst_ip.is_none() {
        return;
    }
    let Some(ip) = locate(frame) else {
        return;
    };
    let span = ip.src..ip.src + 2 * ip.addr_len;
    let old = checksum::sum(&frame[span.clone()], 0);
    for (addr, off) in [(rw.src_ip, 0), (rw.dst_ip, ip.addr_len)] {
        let at = ip.src + off;
        match addr {
            Some(IpAddr::V4(a)) if !ip.v6 => frame[at..at + 4].copy_from_slice(&a.octets()),
            Some(IpAddr::V6(a)) if ip.v6 => frame[at..at + 16].copy_from_slice(&a.octets()),
            _ => {}
        }
    }
    let new = checksum::sum(&frame[span], 0);
    fix_checksums(frame, &ip, old, new);
}

fn fix_checksums(frame: &mut [u8], ip: &IpOffsets, old: u32, new: u32) {
    if let Some(at) = ip.header_checksum {
        fix(frame, at, false, old, new);
    }
    if let Some((at, zero_means_none)) = ip.l4_checksum() {
        fix(frame, at, zero_means_none, old, new);
    }
}

/// Where a frame's linerate probe is, as a sink finds it: the probe's
/// offset, and the transport checksum that covers it (with whether 0
/// means "none", UDP over IPv4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSpot {
    pub at: usize,
    pub checksum: Option<(usize, bool)>,
}

/// The probe of a frame (UDP, TCP or ICMP echo payload, past VLAN tags and
/// IPv6 extension headers), if it carries one.
pub fn probe_spot(frame: &[u8]) -> Option<ProbeSpot> {
    let parsed = linerate_wire::parse_frame(frame).ok()?;
    parsed.probe?;
    if parsed.vxlan.is_some() {
        // The probe is the encapsulated frame's: not restamped (its
        // checksums are the inner frame's and the outer datagram's).
        return None;
    }
    let at = (parsed.payload.as_ptr() as usize).checked_sub(frame.as_ptr() as usize)?;
    let ip = locate(frame)?;
    let checksum = ip.l4_checksum().or(match ip.l4 {
        // ICMPv4's checksum covers its message, not the addresses.
        Some((linerate_wire::ip_proto::ICMP, l4)) if !ip.v6 => Some((l4 + 2, false)),
        _ => None,
    });
    (at + linerate_wire::PROBE_LEN <= frame.len()).then_some(ProbeSpot { at, checksum })
}

/// Writes `tx_ns` as the send time of the probe at `spot` (its sequence
/// and flow kept), with the transport checksum updated incrementally: a
/// replayed probe says when it was sent, not when it was captured.
pub fn restamp(frame: &mut [u8], spot: ProbeSpot, tx_ns: u64) {
    let Some(b) = frame.get_mut(spot.at..spot.at + linerate_wire::PROBE_LEN) else {
        return;
    };
    let mut probe = linerate_wire::ProbeView::new_unchecked(b);
    let seq = probe.seq();
    let (old, new) = probe.patch(seq, tx_ns);
    if let Some((at, zero_means_none)) = spot.checksum {
        fix(frame, at, zero_means_none, old, new);
    }
}

/// fwd's 5tswap past the MACs: swaps the IP addresses and, where the frame
/// holds the transport header, the UDP/TCP ports. Checksums stay valid
/// unchanged (a swap keeps every sum). Returns false when the frame has no
/// IP header.
pub fn swap_addresses_and_ports(frame: &mut [u8]) -> bool {
    let Some(ip) = locate(frame) else {
        return false;
    };
    swap_located(frame, &ip);
    true
}

/// [`swap_addresses_and_ports`] for a frame whose layers `ip` already
/// found.
#[inline]
pub fn swap_located(frame: &mut [u8], ip: &IpOffsets) {
    swap(frame, ip.src, ip.src + ip.addr_len, ip.addr_len);
    if let Some((6 | 17, at)) = ip.l4
        && frame.len() >= at + 4
    {
        swap(frame, at, at + 2, 2);
    }
}

/// Swaps the frame's MACs; a frame sent to a group address (broadcast,
/// multicast) goes back from `own` (the port's MAC): a group address is
/// never a source.
#[inline(always)]
pub fn swap_macs_unicast(f: &mut [u8], own: [u8; 6]) {
    swap_macs(f);
    if f.len() >= 12 && f[6] & 1 != 0 {
        f[6..12].copy_from_slice(&own);
    }
}

/// Swaps the source and destination MACs.
#[inline]
pub fn swap_macs(frame: &mut [u8]) {
    if let Some(m) = frame.first_chunk_mut::<12>() {
        // Two overlapping loads (bytes 0..8 and 4..12) and two stores,
        // rather than six byte swaps: the source (bytes 6..12) then the
        // destination's first two bytes, then its last four.
        let a = u64::from_le_bytes(*m.first_chunk::<8>().expect("12 bytes"));
        let b = u64::from_le_bytes(*m.last_chunk::<8>().expect("12 bytes"));
        m[..8].copy_from_slice(&((b >> 16) | (a << 48)).to_le_bytes());
        m[8..].copy_from_slice(&((a >> 16) as u32).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapped_macs_trade_places_and_nothing_else_moves() {
        let orig: Vec<u8> = (1..=20).collect();
        let mut f = orig.clone();
        swap_macs(&mut f);
        assert_eq!(&f[..6], &orig[6..12]);
        assert_eq!(&f[6..12], &orig[..6]);
        assert_eq!(&f[12..], &orig[12..]);
        swap_macs(&mut f);
        assert_eq!(f, orig);
        // Shorter than two MACs: left alone.
        let mut short = orig[..11].to_vec();
        swap_macs(&mut short);
        assert_eq!(short, &orig[..11]);
    }
    use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

    /// An IPv6 UDP frame with a hop-by-hop and a destination-options header.
    fn v6_ext_udp() -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb])
            .ipv6(
                "2001:db8::1"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .octets(),
                "2001:db8::2"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .octets(),
                64,
            )
            .udp(1000, 2000);
        let payload = [0x5au8; 21];
        let mut f = Vec::new();
        b.write(&mut f, &payload).unwrap();
        // Insert the extension headers between the IPv6 header and UDP.
        let ext = [
            60u8, 0, 1, 4, 0, 0, 0, 0, // hop-by-hop -> dest opts, PadN
            17, 0, 1, 4, 0, 0, 0, 0, // dest opts -> UDP, PadN
        ];
        f.splice(54..54, ext);
        f[20] = 0; // next header: hop-by-hop
        let plen = u16::from_be_bytes([f[18], f[19]]) + 16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f
    }

    fn udp_checksum_ok(f: &[u8]) -> bool {
        let p = SlicedPacket::from_ethernet(f).unwrap();
        let Some(NetSlice::Ipv6(ip)) = &p.net else {
            panic!("not IPv6: {p:?}");
        };
        assert_eq!(
            ip.extensions().first_header(),
            Some(etherparse::IpNumber(0))
        );
        let h = ip.header().to_header();
        let Some(TransportSlice::Udp(u)) = p.transport else {
            panic!("no UDP: {p:?}");
        };
        let want = u.to_header().calc_checksum_ipv6(&h, u.payload()).unwrap();
        want == u.checksum()
    }

    #[test]
    fn ipv6_rewrite_past_extension_headers_keeps_the_udp_checksum_valid() {
        let mut f = v6_ext_udp();
        // The frame is valid before: the checksum was computed without the
        // extension headers, which the pseudo-header does not include.
        assert!(udp_checksum_ok(&f));
        rewrite(
            &mut f,
            &Rewrite {
                src_ip: Some("2001:db8::a".parse().unwrap()),
                dst_ip: Some("2001:db8:1::77".parse().unwrap()),
                ..Rewrite::default()
            },
        );
        assert_eq!(
            &f[38..54],
            &"2001:db8:1::77"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
        assert!(udp_checksum_ok(&f), "UDP checksum after the rewrite");
    }

    #[test]
    fn five_tuple_swap_past_extension_headers() {
        let mut f = v6_ext_udp();
        assert!(swap_addresses_and_ports(&mut f));
        assert_eq!(&f[70..74], &[0x07, 0xd0, 0x03, 0xe8]);
        assert!(udp_checksum_ok(&f));
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!swap_addresses_and_ports(&mut arp));
    }

    /// A probe payload: flow 7, sequence 42, sent at `tx_ns`, padded.
    fn probe_payload(tx_ns: u64) -> Vec<u8> {
        let mut p = vec![0x33u8; 30];
        linerate_wire::Probe {
            flow_id: 7,
            seq: 42,
            tx_ns,
        }
        .emit(&mut p)
        .unwrap();
        p
    }

    fn sent_at(f: &[u8]) -> linerate_wire::Probe {
        linerate_wire::parse_frame(f).unwrap().probe.unwrap()
    }

    /// Checks the transport checksum of an IPv4 UDP or TCP frame.
    fn v4_checksum_ok(f: &[u8]) -> bool {
        let p = SlicedPacket::from_ethernet(f).unwrap();
        let Some(NetSlice::Ipv4(ip)) = &p.net else {
            panic!("not IPv4: {p:?}");
        };
        let h = ip.header().to_header();
        match p.transport {
            Some(TransportSlice::Udp(u)) => {
                u.to_header().calc_checksum_ipv4(&h, u.payload()).unwrap() == u.checksum()
            }
            Some(TransportSlice::Tcp(t)) => {
                t.to_header().calc_checksum_ipv4(&h, t.payload()).unwrap() == t.checksum()
            }
            other => panic!("no UDP/TCP: {other:?}"),
        }
    }

    #[test]
    fn a_replayed_probe_is_stamped_with_its_send_time_and_its_checksums_stay_valid() {
        // Captured a minute before it is replayed.
        let captured = 1_000_000_000_000u64;
        let now = captured + 56_000_000_000;
        let b = || PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let mut udp = Vec::new();
        b().ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(9, 9)
            .write(&mut udp, &probe_payload(captured))
            .unwrap();
        let mut tcp = Vec::new();
        b().ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .tcp(9, 9, 1, 1000)
            .write(&mut tcp, &probe_payload(captured))
            .unwrap();
        let mut tagged = Vec::new();
        b().single_vlan(5.try_into().unwrap())
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(9, 9)
            .write(&mut tagged, &probe_payload(captured))
            .unwrap();
        let mut v6 = v6_ext_udp();
        let at = v6.len() - 21;
        v6.truncate(at);
        v6.extend_from_slice(&probe_payload(captured)[..21]);
        // Payload changed: put the checksum right before restamping.
        let plen = (v6.len() - 54) as u16;
        v6[18..20].copy_from_slice(&plen.to_be_bytes());
        let ulen = (v6.len() - 70) as u16;
        v6[74..76].copy_from_slice(&ulen.to_be_bytes());
        v6[76..78].copy_from_slice(&[0, 0]);
        let c = {
            let p = SlicedPacket::from_ethernet(&v6).unwrap();
            let Some(NetSlice::Ipv6(ip)) = &p.net else {
                panic!()
            };
            let Some(TransportSlice::Udp(u)) = p.transport else {
                panic!()
            };
            u.to_header()
                .calc_checksum_ipv6(&ip.header().to_header(), u.payload())
                .unwrap()
        };
        v6[76..78].copy_from_slice(&c.to_be_bytes());
        assert!(udp_checksum_ok(&v6));
        for (name, f) in [
            ("udp", &mut udp),
            ("tcp", &mut tcp),
            ("vlan", &mut tagged),
            ("v6", &mut v6),
        ] {
            assert_eq!(sent_at(f).tx_ns, captured, "{name}");
            let spot = probe_spot(f).unwrap_or_else(|| panic!("{name}: no probe found"));
            restamp(f, spot, now);
            let p = sent_at(f);
            assert_eq!(
                (p.flow_id, p.seq, p.tx_ns),
                (7, 42, now & ((1 << 48) - 1)),
                "{name}: the send time is the replay's, flow and sequence kept"
            );
            if name == "v6" {
                assert!(udp_checksum_ok(f), "{name}");
            } else {
                assert!(v4_checksum_ok(f), "{name}: checksum after restamping");
            }
        }
    }

    #[test]
    fn frames_without_a_probe_are_not_restamped() {
        let mut f = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(9, 9)
            .write(&mut f, &[0x5a; 30])
            .unwrap();
        assert_eq!(probe_spot(&f), None);
        assert_eq!(probe_spot(&v6_ext_udp()), None);
        assert_eq!(probe_spot(&[0u8; 10]), None);
    }
}
