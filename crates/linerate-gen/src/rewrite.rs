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

/// fwd's 5tswap past the MACs: swaps the IP addresses and, where the frame
/// holds the transport header, the UDP/TCP ports. Checksums stay valid
/// unchanged (a swap keeps every sum). Returns false when the frame has no
/// IP header.
pub fn swap_addresses_and_ports(frame: &mut [u8]) -> bool {
    let Some(ip) = locate(frame) else {
        return false;
    };
    swap(frame, ip.src, ip.src + ip.addr_len, ip.addr_len);
    if let Some((6 | 17, at)) = ip.l4
        && frame.len() >= at + 4
    {
        swap(frame, at, at + 2, 2);
    }
    true
}

/// Swaps the source and destination MACs.
#[inline]
pub fn swap_macs(frame: &mut [u8]) {
    if let Some(m) = frame.first_chunk_mut::<12>() {
        let (dst, src) = m.split_at_mut(6);
        dst.swap_with_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
