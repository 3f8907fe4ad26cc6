//! The probe behind GRE and MPLS: `parse_frame` (and so `probe_of`) finds
//! the probe of the IPv4 or IPv6 packet (or, GRE's 0x6558, Ethernet
//! frame) they carry, one level deep; damaged or cut ones leave the frame
//! without a probe, never a panic.

use linerate_wire::{
    EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, L3, L4, MacAddr, PROBE_LEN,
    Probe, UdpPacket, UdpRepr, ip_proto, parse_frame, probe_of,
};
use std::net::Ipv4Addr;

/// An IPv4 packet of `protocol` carrying `payload`.
fn ipv4(protocol: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 20 + payload.len()];
    Ipv4Repr {
        src: Ipv4Addr::new(198, 18, 0, 1),
        dst: Ipv4Addr::new(198, 18, 0, 2),
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: true,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut b[..]));
    b[20..].copy_from_slice(payload);
    b
}

/// An IPv4/UDP packet whose payload is a probe with `seq`.
fn probe_packet(seq: u64) -> Vec<u8> {
    let mut p = vec![0u8; 8 + PROBE_LEN + 6];
    Probe {
        flow_id: 7,
        seq,
        tx_ns: 1234,
    }
    .emit(&mut p[8..]);
    UdpRepr {
        src_port: 1000,
        dst_port: 2000,
        payload_len: PROBE_LEN + 6,
    }
    .emit(&mut UdpPacket::new_unchecked(&mut p[..]), None);
    ipv4(ip_proto::UDP, &p)
}

fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 14 + payload.len()];
    EthernetRepr {
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        dst: MacAddr([2, 0, 0, 0, 0, 2]),
        ethertype,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
    b[14..].copy_from_slice(payload);
    b
}

fn seq(frame: &[u8]) -> Option<u64> {
    assert_eq!(
        probe_of(frame),
        parse_frame(frame).ok().and_then(|p| p.probe)
    );
    parse_frame(frame).ok()?.probe.map(|p| p.seq)
}

#[test]
fn the_probe_behind_gre_is_found() {
    // Plain GRE, then with the checksum word (C bit), carrying IPv4.
    for (head, s) in [
        (vec![0u8, 0, 0x08, 0x00], 41),
        (vec![0x80, 0, 0x08, 0x00, 0, 0, 0, 0], 42),
    ] {
        let mut gre = head;
        gre.extend(probe_packet(s));
        let frame = ethernet(EtherType::IPV4, &ipv4(47, &gre));
        let p = parse_frame(&frame).unwrap();
        assert_eq!(p.l4, L4::Other(47), "the layers are the outer packet's");
        assert_eq!(seq(&frame), Some(s));
    }
    // An Ethernet frame in GRE (0x6558).
    let mut gre = vec![0u8, 0, 0x65, 0x58];
    gre.extend(ethernet(EtherType::IPV4, &probe_packet(43)));
    let frame = ethernet(EtherType::IPV4, &ipv4(47, &gre));
    assert_eq!(seq(&frame), Some(43));
    // GRE in GRE: not looked into again.
    let mut twice = vec![0u8, 0, 0x08, 0x00];
    twice.extend(ipv4(
        47,
        &[&[0u8, 0, 0x08, 0x00][..], &probe_packet(44)].concat(),
    ));
    let frame = ethernet(EtherType::IPV4, &ipv4(47, &twice));
    assert_eq!(seq(&frame), None);
    // An unknown protocol, and every cut: no probe, no panic.
    let mut other = vec![0u8, 0, 0x88, 0x0b];
    other.extend(probe_packet(45));
    assert_eq!(seq(&ethernet(EtherType::IPV4, &ipv4(47, &other))), None);
    let whole = [&[0u8, 0, 0x08, 0x00][..], &probe_packet(46)].concat();
    for cut in 0..whole.len() {
        let frame = ethernet(EtherType::IPV4, &ipv4(47, &whole[..cut]));
        assert_eq!(seq(&frame), None, "cut {cut}");
    }
}

#[test]
fn the_probe_behind_an_mpls_label_stack_is_found() {
    // One label (bottom of stack), then three.
    let one = [0x00, 0x01, 0x01, 0x40];
    let frame = ethernet(0x8847, &[&one[..], &probe_packet(51)].concat());
    let p = parse_frame(&frame).unwrap();
    assert_eq!(p.l3, L3::Other(0x8847));
    assert_eq!(seq(&frame), Some(51));
    let three = [
        0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x00, 0x40, 0x00, 0x03, 0x01, 0x40,
    ];
    let frame = ethernet(0x8847, &[&three[..], &probe_packet(52)].concat());
    assert_eq!(seq(&frame), Some(52));
    // No bottom of stack within 8 labels, a payload that is not IP, cuts.
    let deep = [0x00, 0x01, 0x00, 0x40].repeat(9);
    assert_eq!(
        seq(&ethernet(0x8847, &[&deep[..], &probe_packet(53)].concat())),
        None
    );
    let whole = [&one[..], &probe_packet(54)].concat();
    for cut in 0..whole.len() {
        assert_eq!(seq(&ethernet(0x8847, &whole[..cut])), None, "cut {cut}");
    }
    let mut not_ip = whole.clone();
    not_ip[4] = 0x00;
    assert_eq!(seq(&ethernet(0x8847, &not_ip)), None);
}
