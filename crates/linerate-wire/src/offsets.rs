//! Where the layers of a frame start: the one walk over Ethernet, VLAN tags,
//! IPv4/IPv6 and IPv6 extension headers that every frame rewriter uses
//! (pcap replay's address rewrite, fwd's swaps) and that
//! [`ParsedFrame`](crate::ParsedFrame) records. Lenient: it checks only that
//! each header it steps over is there, so a forwarder can rewrite frames
//! the strict parser refuses. Never panics.

/// Offsets of one IP packet inside a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpOffsets {
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Start of the IP header.
    pub l3: usize,
    /// Source address; the destination follows it.
    pub src: usize,
    /// 4 or 16.
    pub addr_len: usize,
    /// The IPv4 header checksum (none for IPv6).
    pub header_checksum: Option<usize>,
    /// The transport header, when this frame holds one: the upper-layer
    /// protocol (after any IPv6 extension headers) and where its header
    /// starts. Present in a whole packet and in a first fragment (whose
    /// transport header carries the whole datagram's checksum); absent in
    /// a later fragment.
    pub l4: Option<(u8, usize)>,
}

impl IpOffsets {
    /// Where the transport checksum is, for protocols whose checksum covers
    /// the IP addresses (UDP, TCP, ICMPv6), with whether 0 means "no
    /// checksum" (UDP over IPv4).
    pub fn l4_checksum(&self) -> Option<(usize, bool)> {
        let (proto, at) = self.l4?;
        match proto {
            crate::ip_proto::UDP => Some((at + 6, !self.v6)),
            crate::ip_proto::TCP => Some((at + 16, false)),
            crate::ip_proto::ICMPV6 if self.v6 => Some((at + 2, false)),
            _ => None,
        }
    }
}

/// Extension headers walked over at most (more is not looked into).
const EXT_MAX: usize = 8;

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

/// The IP layer of `frame` (after up to two VLAN tags), if it has one whose
/// fixed header is all there.
pub fn locate(frame: &[u8]) -> Option<IpOffsets> {
    let mut at = 12;
    let mut ethertype = be16(frame, at)?;
    for _ in 0..2 {
        if matches!(ethertype, 0x8100 | 0x88a8) {
            at += 4;
            ethertype = be16(frame, at)?;
        }
    }
    let l3 = at + 2;
    match ethertype {
        0x0800 if frame.len() >= l3 + 20 => {
            let ihl = usize::from(frame[l3] & 0x0f) * 4;
            let frag_offset = be16(frame, l3 + 6)? & 0x1fff;
            let l4 = (ihl >= 20 && frag_offset == 0 && frame.len() >= l3 + ihl)
                .then(|| (frame[l3 + 9], l3 + ihl));
            Some(IpOffsets {
                v6: false,
                l3,
                src: l3 + 12,
                addr_len: 4,
                header_checksum: Some(l3 + 10),
                l4,
            })
        }
        0x86dd if frame.len() >= l3 + 40 => Some(IpOffsets {
            v6: true,
            l3,
            src: l3 + 8,
            addr_len: 16,
            header_checksum: None,
            l4: ipv6_upper(frame, frame[l3 + 6], l3 + 40),
        }),
        _ => None,
    }
}

/// Walks IPv6 extension headers from `at`: the upper-layer protocol and
/// its offset, or none (a later fragment, no next header, a header cut
/// short, too many headers).
fn ipv6_upper(frame: &[u8], mut next: u8, mut at: usize) -> Option<(u8, usize)> {
    for _ in 0..EXT_MAX {
        match next {
            0 | 43 | 60 => {
                let len = (usize::from(*frame.get(at + 1)?) + 1) * 8;
                next = *frame.get(at)?;
                at += len;
            }
            44 => {
                let offset = be16(frame, at + 2)? >> 3;
                next = *frame.get(at)?;
                at += 8;
                if offset != 0 {
                    return None;
                }
            }
            59 => return None,
            proto => return (at <= frame.len()).then_some((proto, at)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6_with_ext() -> [u8; 14 + 40 + 8 + 8] {
        let mut f = [0u8; 14 + 40 + 8 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14 + 6] = 0; // hop-by-hop
        f[54] = 17; // then UDP
        f[55] = 0; // 8 bytes
        f
    }

    #[test]
    fn ipv6_extension_headers_are_stepped_over() {
        let o = locate(&v6_with_ext()).unwrap();
        assert_eq!((o.v6, o.l3, o.src, o.addr_len), (true, 14, 22, 16));
        assert_eq!(o.l4, Some((17, 62)));
        assert_eq!(o.l4_checksum(), Some((68, false)));
    }

    #[test]
    fn fragments_vlans_and_runts() {
        let mut f = [0u8; 18 + 20 + 8];
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[16..18].copy_from_slice(&[0x08, 0x00]);
        f[18] = 0x45;
        f[18 + 9] = 6;
        let o = locate(&f).unwrap();
        assert_eq!(
            (o.l3, o.header_checksum, o.l4),
            (18, Some(28), Some((6, 38)))
        );
        assert_eq!(o.l4_checksum(), Some((54, false)));
        // a later fragment: addresses, no transport header
        f[18 + 7] = 1;
        assert_eq!(locate(&f).unwrap().l4, None);
        // an IPv6 later fragment
        let mut g = v6_with_ext();
        g[14 + 6] = 44;
        g[56..58].copy_from_slice(&(1u16 << 3).to_be_bytes());
        assert_eq!(locate(&g).unwrap().l4, None);
        assert!(locate(&f[..30]).is_none());
        assert!(locate(&[0u8; 5]).is_none());
        let mut arp = [0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(locate(&arp).is_none());
    }

    #[test]
    fn hostile_lengths_never_panic() {
        let mut f = v6_with_ext();
        f[55] = 255;
        let _ = locate(&f);
        for n in 0..f.len() {
            let _ = locate(&f[..n]);
        }
    }
}
