//! A framing's `payload` (the OTG model's `custom` header): the bytes sit
//! right after the probe in every frame, the rest of the payload is the
//! fixed pattern, and the checksums stay right as frames are patched.

use linerate_traffic::vxlan::{Vxlan, templates};
use linerate_traffic::{FlowFields, FlowSpec, Framing, Template, TemplateError};
use linerate_wire::{Ipv4Packet, L4, MacAddr, TcpPacket, UdpPacket, parse_frame};
use std::net::IpAddr;
use std::sync::Arc;

const CUSTOM: &[u8] = b"..QUICKSTART SNAPPI..";

fn spec() -> FlowSpec {
    let mut s = FlowSpec::parse(
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "198.18.1.1-198.18.1.4",
        "198.18.2.1",
        "5010-5030",
        "6010",
    )
    .unwrap();
    s.lockstep = true;
    s
}

fn framing(tcp: Option<u8>) -> Framing {
    Framing {
        tcp_flags: tcp,
        payload: Some(Arc::from(CUSTOM)),
        ..Framing::default()
    }
}

/// Frame `n` of `spec()` written from a template of `size` bytes.
fn frame(t: &Template, n: u64) -> (Vec<u8>, FlowFields) {
    let f = spec().flow(n);
    let mut b = vec![0u8; 2048];
    t.write(&mut b, &f, 7, n, 1000 + n);
    b.truncate(t.len());
    (b, f)
}

#[test]
fn udp_frames_carry_the_bytes_after_the_probe_with_right_checksums() {
    let t = Template::new(128, &spec().flow(0), &framing(None)).unwrap();
    assert_eq!(t.len(), 124);
    for n in [0u64, 1, 5, 77] {
        let (b, f) = frame(&t, n);
        // Ethernet 14, IPv4 20, UDP 8, probe 18: the bytes at 60.
        assert_eq!(&b[60..81], CUSTOM, "frame {n}");
        // Then the fixed pattern, counted from the probe's end.
        assert_eq!(b[81], 21);
        assert_eq!(b[123], 63);
        assert!(Ipv4Packet::new_checked(&b[14..]).unwrap().verify_checksum());
        assert!(
            UdpPacket::new_checked(&b[34..])
                .unwrap()
                .verify_checksum(f.src_ip, f.dst_ip)
        );
        let p = parse_frame(&b).unwrap();
        let probe = p.probe.expect("the probe is found before the bytes");
        assert_eq!((probe.flow_id, probe.seq), (7, n));
        let L4::Udp(u) = p.l4 else { panic!("udp") };
        assert_eq!((u.src_port, u.payload_len), (f.src_port, 124 - 42));
    }
}

#[test]
fn tcp_frames_carry_the_bytes_after_the_probe() {
    let t = Template::new(128, &spec().flow(0), &framing(Some(0x18))).unwrap();
    let (b, f) = frame(&t, 3);
    // Ethernet 14, IPv4 20, TCP 20, probe 18: the bytes at 72.
    assert_eq!(&b[72..93], CUSTOM);
    assert!(
        TcpPacket::new_checked(&b[34..])
            .unwrap()
            .verify_checksum(f.src_ip, f.dst_ip)
    );
    assert!(Ipv4Packet::new_checked(&b[14..]).unwrap().verify_checksum());
}

#[test]
fn a_frame_too_small_for_the_bytes_is_refused() {
    // 42 header bytes, 18 of probe, 21 custom, 4 of FCS: 85.
    let e = Template::new(84, &spec().flow(0), &framing(None)).unwrap_err();
    assert!(
        matches!(
            e,
            TemplateError::TooSmall {
                size: 84,
                min: 85,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("custom bytes"), "{e}");
    Template::new(85, &spec().flow(0), &framing(None)).unwrap();
}

#[test]
fn vxlan_inner_frames_carry_the_bytes() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let vx = Vxlan {
        outer: FlowFields {
            src_mac: MacAddr([2, 0, 0, 0, 1, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 1, 2]),
            src_ip: ip("198.18.9.1"),
            dst_ip: ip("198.18.9.2"),
            src_port: 4789,
            dst_port: 4789,
        },
        vlan: None,
        dscp: 0,
        ttl: 64,
        flags: 8,
        reserved0: 0,
        reserved1: 0,
        vni: linerate_traffic::flows::Range::single(100),
    };
    let framing = Framing {
        vxlan: Some(vx),
        ..framing(None)
    };
    let f = spec().flow(2);
    let (inner, encap) = templates(256, &f, &framing).unwrap();
    let mut b = vec![0u8; 2048];
    encap.write(&mut b, &inner, &f, 7, 2, 0, 100);
    // Outer 14 + 20 + 8 + 8 = 50, then the inner frame: its bytes at
    // 50 + 60.
    assert_eq!(encap.prefix_len(), 50);
    assert_eq!(&b[110..131], CUSTOM);
    assert!(
        UdpPacket::new_checked(&b[50 + 34..])
            .unwrap()
            .verify_checksum(f.src_ip, f.dst_ip)
    );
    // The outer checksum, updated per frame, covers them too.
    assert!(
        UdpPacket::new_checked(&b[34..encap.len()])
            .unwrap()
            .verify_checksum(ip("198.18.9.1"), ip("198.18.9.2"))
    );
}
