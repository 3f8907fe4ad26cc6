//! The probe behind VXLAN: `parse_frame` (and so `probe_of`) finds it in
//! a UDP datagram to port 4789 whose payload holds none, one level deep,
//! and leaves every other frame as it was.

use linerate_wire::{
    EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, L4, MacAddr, PROBE_LEN, Probe,
    UdpPacket, UdpRepr, VxlanHeader, VxlanRepr, fast_probe, ip_proto, parse_frame, probe_of,
};
use std::net::Ipv4Addr;

/// An Ethernet/IPv4/UDP frame to `dst_port` carrying `payload`.
fn udp_frame(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 14 + 20 + 8 + payload.len()];
    EthernetRepr {
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        dst: MacAddr([2, 0, 0, 0, 0, 2]),
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
    Ipv4Repr {
        src: Ipv4Addr::new(198, 18, 0, 1),
        dst: Ipv4Addr::new(198, 18, 0, 2),
        protocol: ip_proto::UDP,
        payload_len: 8 + payload.len(),
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: true,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut b[14..]));
    b[42..].copy_from_slice(payload);
    let addrs = Some((
        Ipv4Addr::new(198, 18, 0, 1).into(),
        Ipv4Addr::new(198, 18, 0, 2).into(),
    ));
    UdpRepr {
        src_port: 4789,
        dst_port,
        payload_len: payload.len(),
    }
    .emit(&mut UdpPacket::new_unchecked(&mut b[34..]), addrs);
    b
}

fn probe_payload(seq: u64) -> Vec<u8> {
    let mut p = vec![0u8; PROBE_LEN + 6];
    Probe {
        flow_id: 7,
        seq,
        tx_ns: 1234,
    }
    .emit(&mut p);
    p
}

/// `inner` behind a VXLAN header with `vni`.
fn encapsulated(vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 8 + inner.len()];
    VxlanRepr::with_vni(vni).emit(&mut VxlanHeader::new_unchecked(&mut p[..]));
    p[8..].copy_from_slice(inner);
    p
}

#[test]
fn the_probe_behind_vxlan_is_found_one_level_deep() {
    let inner = udp_frame(9, &probe_payload(42));
    let frame = udp_frame(4789, &encapsulated(1000, &inner));
    let p = parse_frame(&frame).unwrap();
    assert_eq!(p.vxlan.map(|v| v.vni), Some(1000));
    assert_eq!(p.probe.map(|p| (p.flow_id, p.seq)), Some((7, 42)));
    // The layers are the outer frame's.
    let L4::Udp(u) = p.l4 else { panic!() };
    assert_eq!(u.dst_port, 4789);
    assert_eq!(p.payload.len(), 8 + inner.len());
    // The fast path finds none; probe_of answers as parse_frame.
    assert_eq!(fast_probe(&frame), None);
    assert_eq!(probe_of(&frame), p.probe);

    // VXLAN in VXLAN: not looked into again.
    let twice = udp_frame(4789, &encapsulated(2, &frame));
    let p = parse_frame(&twice).unwrap();
    assert_eq!((p.vxlan.map(|v| v.vni), p.probe), (Some(2), None));
    assert_eq!(probe_of(&twice), None);
}

#[test]
fn other_frames_are_left_as_they_were() {
    // Another port: no VXLAN.
    let inner = udp_frame(9, &probe_payload(1));
    let other = udp_frame(4790, &encapsulated(1, &inner));
    let p = parse_frame(&other).unwrap();
    assert_eq!((p.vxlan, p.probe), (None, None));
    // A probe right in a datagram to 4789 is that probe (no VXLAN).
    let direct = udp_frame(4789, &probe_payload(5));
    let p = parse_frame(&direct).unwrap();
    assert_eq!((p.vxlan, p.probe.map(|p| p.seq)), (None, Some(5)));
    assert_eq!(fast_probe(&direct), p.probe);
    // A damaged or short inner frame: the outer frame parses, no probe.
    let whole = encapsulated(3, &inner);
    for cut in [0, 4, 8, 9, 20, 40, whole.len() - 1] {
        let f = udp_frame(4789, &whole[..cut]);
        let p = parse_frame(&f).unwrap();
        assert_eq!(p.vxlan.is_some(), cut >= 8, "cut {cut}");
        assert_eq!(p.probe, None, "cut {cut}");
        assert_eq!(probe_of(&f), None);
    }
}
