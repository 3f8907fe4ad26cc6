//! The forwarding modes: how each frame is rewritten (io, mac, macswap,
//! 5tswap), through linerate-traffic's frame rewriter.

use super::FwdMode;

pub use linerate_traffic::rewrite::swap_macs_unicast;

/// Rewrites one frame in place (through linerate-traffic's frame rewriter).
/// Returns false when `5tswap` found no IP header (its MACs are swapped all
/// the same).
pub fn apply(mode: FwdMode, src_mac: [u8; 6], f: &mut [u8]) -> bool {
    use linerate_traffic::rewrite::swap_addresses_and_ports;
    if f.len() < 14 {
        return true;
    }
    match mode {
        FwdMode::Io => true,
        FwdMode::Mac { dst } => {
            f[0..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&src_mac);
            true
        }
        FwdMode::MacSwap => {
            swap_macs_unicast(f, src_mac);
            true
        }
        FwdMode::FiveTupleSwap => {
            swap_macs_unicast(f, src_mac);
            swap_addresses_and_ports(f)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0xb]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xa]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f
    }

    #[test]
    fn modes_rewrite_what_they_say() {
        let me = [2, 0, 0, 0, 0, 0xf];
        let orig = udp4();
        let mut f = orig.clone();
        assert!(apply(FwdMode::Io, me, &mut f));
        assert_eq!(f, orig);
        let mut f = orig.clone();
        apply(
            FwdMode::Mac {
                dst: [2, 0, 0, 0, 0, 0xc],
            },
            me,
            &mut f,
        );
        assert_eq!(&f[0..12], &[2, 0, 0, 0, 0, 0xc, 2, 0, 0, 0, 0, 0xf]);
        assert_eq!(&f[12..], &orig[12..]);
        let mut f = orig.clone();
        apply(FwdMode::MacSwap, me, &mut f);
        assert_eq!(&f[0..6], &orig[6..12]);
        assert_eq!(&f[6..12], &orig[0..6]);
        assert_eq!(&f[12..], &orig[12..]);
        let mut f = orig.clone();
        assert!(apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert_eq!(&f[26..30], &[198, 18, 0, 2]);
        assert_eq!(&f[30..34], &[198, 18, 0, 1]);
        assert_eq!(&f[34..36], &2000u16.to_be_bytes());
        assert_eq!(&f[36..38], &1000u16.to_be_bytes());
        // twice is the identity
        apply(FwdMode::FiveTupleSwap, me, &mut f);
        assert_eq!(f, orig);
        // A broadcast or multicast goes back from the port's own MAC.
        for group in [
            [0xff; 6],
            [0x01, 0x00, 0x5e, 0, 0, 1],
            [0x33, 0x33, 0, 0, 0, 1],
        ] {
            for mode in [FwdMode::MacSwap, FwdMode::FiveTupleSwap] {
                let mut f = orig.clone();
                f[0..6].copy_from_slice(&group);
                apply(mode, me, &mut f);
                assert_eq!(&f[0..6], &orig[6..12], "{group:?}");
                assert_eq!(&f[6..12], &me, "{group:?}: never a group source");
            }
        }
    }

    #[test]
    fn five_tuple_swap_handles_vlan_ipv6_fragments_and_non_ip() {
        let me = [0; 6];
        // VLAN-tagged IPv4
        let mut f = udp4();
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert!(apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert_eq!(&f[30..34], &[198, 18, 0, 2]);
        assert_eq!(&f[38..40], &2000u16.to_be_bytes());
        // a later IPv4 fragment: addresses swapped, no ports to swap
        let mut f = udp4();
        f[20] = 0x00;
        f[21] = 0x10;
        apply(FwdMode::FiveTupleSwap, me, &mut f);
        assert_eq!(&f[26..30], &[198, 18, 0, 2]);
        assert_eq!(&f[34..36], &1000u16.to_be_bytes());
        // IPv6 UDP
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14 + 6] = 17;
        f[14 + 8..14 + 24].fill(1);
        f[14 + 24..14 + 40].fill(2);
        f[54..56].copy_from_slice(&[0, 7]);
        f[56..58].copy_from_slice(&[0, 9]);
        assert!(apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert!(f[22..38].iter().all(|&b| b == 2) && f[38..54].iter().all(|&b| b == 1));
        assert_eq!(&f[54..58], &[0, 9, 0, 7]);
        // ARP: only the MACs
        let mut f = udp4();
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = f.clone();
        assert!(!apply(FwdMode::FiveTupleSwap, me, &mut f));
        assert_eq!(&f[12..], &before[12..]);
        // runts are left alone
        let mut tiny = vec![1u8; 10];
        apply(FwdMode::FiveTupleSwap, me, &mut tiny);
        assert_eq!(tiny, vec![1u8; 10]);
    }

    #[test]
    fn a_swap_keeps_the_udp_and_ip_checksums_valid() {
        use linerate_wire::UdpPacket;
        use linerate_wire::checksum::{checksum, fold, pseudo_v4, sum};
        use std::net::Ipv4Addr;
        let mut f = udp4();
        f[16..18].copy_from_slice(&46u16.to_be_bytes()); // IP total length
        f[38..40].copy_from_slice(&26u16.to_be_bytes()); // UDP length
        f[42..60].fill(0x5a);
        let ip_sum = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&ip_sum.to_be_bytes());
        let ip = |f: &[u8], at: usize| Ipv4Addr::new(f[at], f[at + 1], f[at + 2], f[at + 3]);
        let ps = pseudo_v4(ip(&f, 26), ip(&f, 30), 17, 26);
        let udp_sum = !fold(sum(&f[34..60], ps));
        f[40..42].copy_from_slice(&udp_sum.to_be_bytes());
        let verify = |f: &[u8]| {
            UdpPacket::new_checked(&f[34..60])
                .unwrap()
                .verify_checksum(ip(f, 26).into(), ip(f, 30).into())
                && checksum(&f[14..34]) == 0
        };
        assert!(verify(&f));
        apply(FwdMode::FiveTupleSwap, [0; 6], &mut f);
        assert_eq!(ip(&f, 26), Ipv4Addr::new(198, 18, 0, 2));
        assert!(verify(&f), "checksums after the swap");
    }
}
