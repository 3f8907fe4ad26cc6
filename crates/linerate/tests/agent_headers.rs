//! `linerate agent` sends flows with the OTG model's `gre`, `mpls`,
//! `icmp` and `icmpv6` headers, driven by snappi
//! (tests/snappi/agent_headers.py) over HTTP and over gRPC on a veth pair: each flow's 20 frames
//! are sent and counted by the receiver (frames_tx = frames_rx, bytes
//! too), and the receive port's capture shows every frame, decoded here
//! field by field: frame n carries what the model gives frame n (labels,
//! ports, identifiers and sequence numbers stepped on their own), every
//! checksum right, linerate's probe found behind the headers.
//!
//! Needs root (namespaces), `ip` and a Python with snappi
//! (`target/snappi-venv`, or `LINERATE_SNAPPI_PYTHON`).

mod support;

use linerate_wire::{IcmpEchoPacket, IcmpVersion, Ipv4Packet, UdpPacket, checksum, probe_of};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const FRAMES: usize = 20;

#[test]
fn gre_mpls_and_icmp_flows_over_http_are_counted_and_captured_as_the_model_says() {
    headers_flows(
        "gre_mpls_and_icmp_flows_over_http_are_counted_and_captured_as_the_model_says",
        false,
    );
}

#[test]
fn gre_mpls_and_icmp_flows_over_grpc_are_counted_and_captured_as_the_model_says() {
    headers_flows(
        "gre_mpls_and_icmp_flows_over_grpc_are_counted_and_captured_as_the_model_says",
        true,
    );
}

fn headers_flows(test: &str, grpc: bool) {
    let Some(doc) = support::snappi_on_looped_agent(test, "agent_headers.py", grpc) else {
        return;
    };
    // Each flow's tuples (the least common multiple of its IP packet's
    // fields' counts): frame n is tuple n mod that, with a probe flow id of
    // its own, and that tuple's sequence n / that + 1.
    for (name, check, tuples) in [
        ("gre", gre as fn(usize, &[u8]), 4),
        ("mpls", mpls, 2),
        ("icmp", icmp, 6),
        ("icmpv6", icmpv6, 4),
    ] {
        let mut first_id = None;
        for (n, f) in frames(&doc[name], name).iter().enumerate() {
            // (the capture keeps a frame's 128 bytes, its FCS's 4 too)
            assert_eq!(f.len(), 128, "{name} frame {n}");
            let f = &f[..124];
            assert_eq!(&f[..12], &mac_pair(), "{name} frame {n}");
            let p = probe_of(f).unwrap_or_else(|| panic!("{name} frame {n}: no probe"));
            let id0 = *first_id.get_or_insert(p.flow_id);
            assert_eq!(
                (p.flow_id, p.seq),
                (id0 + (n % tuples) as u16, (n / tuples) as u64 + 1),
                "{name} frame {n}"
            );
            check(n, f);
        }
    }
}

fn mac_pair() -> [u8; 12] {
    [2, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 1]
}

/// A flow's captured frames, its counts checked: 20 sent, 20 received,
/// the bytes alike, every frame captured.
fn frames(doc: &Value, name: &str) -> Vec<Vec<u8>> {
    assert_eq!(doc["transmit"], "stopped", "{name}: {doc}");
    assert_eq!(
        (doc["frames_tx"].as_u64(), doc["frames_rx"].as_u64()),
        (Some(FRAMES as u64), Some(FRAMES as u64)),
        "{name}: {doc}"
    );
    assert_eq!(doc["bytes_tx"], doc["bytes_rx"], "{name}: {doc}");
    assert_eq!(
        doc["bytes_tx"].as_u64(),
        Some(FRAMES as u64 * 128),
        "{name}: {doc}"
    );
    let frames: Vec<Vec<u8>> = doc["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| unhex(h.as_str().unwrap()))
        .collect();
    assert_eq!(frames.len(), FRAMES, "{name}: every frame captured: {doc}");
    frames
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// An IPv4 header at `at` of protocol `proto` from `src` to `dst`, its
/// total length the rest of the frame, its checksum right.
fn ipv4_at(f: &[u8], at: usize, proto: u8, src: [u8; 4], dst: [u8; 4]) {
    let ip = Ipv4Packet::new_checked(&f[at..]).unwrap();
    assert!(ip.verify_checksum(), "IPv4 checksum at {at}");
    assert_eq!(usize::from(be16(f, at + 2)), f.len() - at);
    assert_eq!(
        (f[at + 9], &f[at + 12..at + 16], &f[at + 16..at + 20]),
        (proto, &src[..], &dst[..])
    );
}

fn udp_at(f: &[u8], at: usize, src: [u8; 4], dst: [u8; 4], ports: (u16, u16)) {
    let (s, d) = (
        IpAddr::V4(Ipv4Addr::from(src)),
        IpAddr::V4(Ipv4Addr::from(dst)),
    );
    assert!(
        UdpPacket::new_checked(&f[at..])
            .unwrap()
            .verify_checksum(s, d),
        "UDP checksum"
    );
    assert_eq!((be16(f, at), be16(f, at + 2)), ports);
    assert_eq!(usize::from(be16(f, at + 4)), f.len() - at);
}

/// Ethernet, IPv4 198.18.1.1 to 198.18.2.1 (GRE), GRE with its checksum,
/// IPv4 198.18.3.1 to 198.18.4.1, UDP 5000 to 6000 + n mod 4.
fn gre(n: usize, f: &[u8]) {
    assert_eq!(be16(f, 12), 0x0800);
    ipv4_at(f, 14, 47, [198, 18, 1, 1], [198, 18, 2, 1]);
    assert_eq!((be16(f, 34), be16(f, 36), be16(f, 40)), (0x8000, 0x0800, 0));
    assert_eq!(
        checksum::fold(checksum::sum(&f[34..], 0)),
        0xffff,
        "GRE checksum"
    );
    ipv4_at(f, 42, 17, [198, 18, 3, 1], [198, 18, 4, 1]);
    udp_at(
        f,
        62,
        [198, 18, 3, 1],
        [198, 18, 4, 1],
        (5000, 6000 + (n % 4) as u16),
    );
}

/// Ethernet (MPLS), label 100 + n mod 5 (ttl 32), label 200 (traffic
/// class 5, bottom of stack), IPv4 198.18.1.2 to 198.18.2.1, UDP
/// 7000/7002 in turn to 6000.
fn mpls(n: usize, f: &[u8]) {
    assert_eq!(be16(f, 12), 0x8847);
    let word = |at: usize| u32::from_be_bytes(f[at..at + 4].try_into().unwrap());
    let fields = |w: u32| (w >> 12, w >> 9 & 7, w >> 8 & 1, w & 0xff);
    assert_eq!(
        fields(word(14)),
        (100 + (n % 5) as u32, 0, 0, 32),
        "frame {n}"
    );
    assert_eq!(fields(word(18)), (200, 5, 1, 64), "frame {n}");
    ipv4_at(f, 22, 17, [198, 18, 1, 2], [198, 18, 2, 1]);
    udp_at(
        f,
        42,
        [198, 18, 1, 2],
        [198, 18, 2, 1],
        (7000 + 2 * (n % 2) as u16, 6000),
    );
}

/// Ethernet, IPv4 198.18.1.3 to 198.18.2.1, ICMP echo request, identifier
/// 1 + n mod 3, sequence number 10 and 20 in turn.
fn icmp(n: usize, f: &[u8]) {
    assert_eq!(be16(f, 12), 0x0800);
    ipv4_at(f, 14, 1, [198, 18, 1, 3], [198, 18, 2, 1]);
    let m = IcmpEchoPacket::new_checked(&f[34..], IcmpVersion::V4).unwrap();
    assert!(m.verify_checksum(None), "ICMP checksum");
    assert_eq!((m.msg_type(), m.code()), (8, 0));
    assert_eq!(
        (m.ident(), m.seq()),
        (1 + (n % 3) as u16, [10, 20][n % 2]),
        "frame {n}"
    );
}

/// Ethernet, IPv6 2001:db8::1 to 2001:db8::2, ICMPv6 echo request,
/// identifier 0x1234, sequence number 100 down by 2, 4 values.
fn icmpv6(n: usize, f: &[u8]) {
    assert_eq!(be16(f, 12), 0x86dd);
    let (s, d): (Ipv6Addr, Ipv6Addr) = (
        "2001:db8::1".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
    );
    assert_eq!(
        (f[20], &f[22..38], &f[38..54]),
        (58, &s.octets()[..], &d.octets()[..])
    );
    assert_eq!(usize::from(be16(f, 18)), f.len() - 54);
    let m = IcmpEchoPacket::new_checked(&f[54..], IcmpVersion::V6).unwrap();
    assert!(
        m.verify_checksum(Some((s.into(), d.into()))),
        "ICMPv6 checksum"
    );
    assert_eq!((m.msg_type(), m.code()), (128, 0));
    assert_eq!(
        (m.ident(), m.seq()),
        (0x1234, 100 - 2 * (n % 4) as u16),
        "frame {n}"
    );
}
