//! Exact frames of each header (bytes written out, by header), and every
//! checksum checked by decoding the frames with etherparse.

use super::*;
use crate::FlowSpec;

fn hex(s: &str) -> Vec<u8> {
    let d: Vec<u8> = s
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_digit(16).unwrap() as u8)
        .collect();
    d.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
}

fn flow(v6: bool) -> FlowFields {
    let (s, d): (IpAddr, IpAddr) = if v6 {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    } else {
        ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
    };
    FlowFields {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: s,
        dst_ip: d,
        src_port: 0x1234,
        dst_port: 7,
    }
}

const PROBE: Probe = Probe {
    flow_id: 3,
    seq: 1,
    tx_ns: 0x0102_0304_0506,
};

fn frame(stack: Stack, framing: Framing, size: usize, f: &FlowFields, n: u64) -> Vec<u8> {
    let framing = Framing {
        stack: Some(stack.clone()),
        ..framing
    };
    stack.check(size, f, &framing).unwrap();
    let mut b = vec![0xeeu8; 9216];
    let len = stack.write(&mut b, size, &framing, f, PROBE, n);
    b.truncate(len);
    b
}

fn icmp(kind: u8) -> Stack {
    Stack {
        icmp: Some((kind, 0)),
        ..Stack::default()
    }
}

fn one_label(label: Range) -> Stack {
    Stack {
        mpls: vec![Label {
            label,
            traffic_class: Range::single(5),
            bottom_of_stack: None,
            ttl: Range::single(64),
        }],
        ..Stack::default()
    }
}

fn gre(checksum_present: bool) -> Stack {
    Stack {
        gre: Some(Gre {
            src: "198.18.1.1".parse().unwrap(),
            dst: "198.18.1.2".parse().unwrap(),
            dscp: 0,
            ttl: 64,
            checksum_present,
            reserved0: 0,
            version: 0,
            protocol: None,
            reserved1: 0,
        }),
        ..Stack::default()
    }
}

/// Checks every checksum of `frame` by decoding it with etherparse (the
/// IP packet after `l3`), and gives its transport payload.
fn decoded(frame: &[u8], l3: usize) -> Vec<u8> {
    let p = etherparse::SlicedPacket::from_ip(&frame[l3..]).expect("an IP packet");
    let payload = match (&p.net, &p.transport) {
        (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Icmpv4(i))) => {
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum());
            let want = i.header().icmp_type.calc_checksum(i.payload());
            assert_eq!(i.checksum(), want, "ICMP checksum");
            i.payload().to_vec()
        }
        (Some(etherparse::NetSlice::Ipv6(ip)), Some(etherparse::TransportSlice::Icmpv6(i))) => {
            let h = ip.header().to_header();
            let want = i
                .header()
                .icmp_type
                .calc_checksum(h.source, h.destination, i.payload())
                .unwrap();
            assert_eq!(i.checksum(), want, "ICMPv6 checksum");
            i.payload().to_vec()
        }
        (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Udp(u))) => {
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum());
            let want = u.to_header().calc_checksum_ipv4(&h, u.payload()).unwrap();
            assert_eq!(u.checksum(), want, "UDP checksum");
            u.payload().to_vec()
        }
        other => panic!("not the transport expected: {other:?}"),
    };
    assert_eq!(
        linerate_wire::probe_of(frame),
        Some(Probe {
            tx_ns: PROBE.tx_ns,
            ..PROBE
        })
    );
    payload
}

#[test]
fn icmp_echo_over_ipv4_exact_bytes() {
    let b = frame(icmp(8), Framing::default(), 64, &flow(false), 0);
    let want = hex("020000000002 020000000001 0800
         45 00 002e 0000 4000 40 01 aea7 c6120001 c6120002
         08 00 33b3 1234 0007
         a901 0003 0000000000000001 010203040506");
    assert_eq!(b, want);
    assert_eq!(decoded(&b, 14).len(), PROBE_LEN);
}

#[test]
fn icmpv6_echo_exact_bytes() {
    let b = frame(icmp(128), Framing::default(), 86, &flow(true), 0);
    let want = hex("020000000002 020000000001 86dd
         60000000 001c 3a 40 20010db8000000000000000000000001 20010db8000000000000000000000002
         80 00 5fe6 1234 0007
         a901 0003 0000000000000001 010203040506 0001");
    assert_eq!(b, want);
    assert_eq!(decoded(&b, 14).len(), PROBE_LEN + 2);
}

#[test]
fn mpls_labels_exact_bytes_and_stepping() {
    // Label 16, 17, 18 over frames 0, 1, 2 (increment of 3, then again).
    let labels = Range {
        first: 16,
        count: 3,
        step: 1,
    };
    let f = flow(false);
    let b = frame(one_label(labels), Framing::default(), 68, &f, 0);
    let want = hex("020000000002 020000000001 8847
         00010b40
         45 00 002e 0000 4000 40 11 ae97 c6120001 c6120002
         1234 0007 001a af45
         a901 0003 0000000000000001 010203040506");
    assert_eq!(b, want);
    decoded(&b, 18);
    for (n, label) in [(1, 17u32), (2, 18), (3, 16), (5, 18)] {
        let b = frame(one_label(labels), Framing::default(), 68, &f, n);
        let word = u32::from_be_bytes(b[14..18].try_into().unwrap());
        assert_eq!(
            (word >> 12, word >> 9 & 7, word >> 8 & 1, word & 0xff),
            (label, 5, 1, 64)
        );
    }
    // Two labels: bottom of stack on the last only (auto); a decrement.
    let mut two = one_label(Range::single(100));
    two.mpls.push(Label {
        label: Range {
            first: 200,
            count: 2,
            step: (1 << 20) - 10,
        },
        traffic_class: Range::single(0),
        bottom_of_stack: None,
        ttl: Range::single(1),
    });
    assert_eq!(two.period(), Some(2));
    let b = frame(two.clone(), Framing::default(), 72, &f, 1);
    assert_eq!(&b[14..22], &hex("00064a40 000be101")[..]);
    decoded(&b, 22);
}

#[test]
fn gre_exact_bytes_with_and_without_its_checksum() {
    let f = flow(false);
    let b = frame(gre(false), Framing::default(), 88, &f, 0);
    let want = hex("020000000002 020000000001 0800
         45 00 0046 0000 4000 40 2f ac61 c6120101 c6120102
         0000 0800
         45 00 002e 0000 4000 40 11 ae97 c6120001 c6120002
         1234 0007 001a af45
         a901 0003 0000000000000001 010203040506");
    assert_eq!(b, want);
    decoded(&b, 38);
    // The C bit and the checksum over the GRE packet; etherparse checks
    // the outer header's.
    let b = frame(gre(true), Framing::default(), 92, &f, 0);
    assert_eq!(&b[34..42], &hex("8000 0800 0453 0000")[..]);
    assert_eq!(
        checksum::fold(checksum::sum(&b[34..], 0)),
        0xffff,
        "GRE checksum"
    );
    let outer = etherparse::Ipv4HeaderSlice::from_slice(&b[14..])
        .unwrap()
        .to_header();
    assert_eq!(outer.header_checksum, outer.calc_header_checksum());
    assert_eq!(usize::from(outer.total_len), b.len() - 14);
    decoded(&b, 42);
}

#[test]
fn sizes_that_cannot_be_built_are_refused() {
    let f = flow(false);
    let s = gre(true);
    let framing = Framing {
        mtu: Some(100),
        ..Framing::default()
    };
    assert_eq!(s.min_frame(&framing, false), 14 + 20 + 8 + 20 + 8 + 18 + 4);
    assert!(matches!(
        s.check(91, &f, &framing),
        Err(TemplateError::TooSmall { min: 92, .. })
    ));
    assert!(s.check(118, &f, &framing).is_ok());
    assert!(matches!(
        s.check(119, &f, &framing),
        Err(TemplateError::OverMtu { ip: 101, .. })
    ));
    let mixed = FlowFields {
        dst_ip: flow(true).dst_ip,
        ..f
    };
    assert_eq!(s.check(128, &mixed, &framing), Err(TemplateError::Family));
    // A spec's flows through the stack: each frame's probe is found.
    let spec = FlowSpec::parse(
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "198.18.0.1-198.18.0.9",
        "198.18.0.20",
        "1-3",
        "9",
    )
    .unwrap();
    for i in 0..20 {
        let b = frame(
            one_label(Range::single(16)),
            Framing::default(),
            100,
            &spec.flow(i),
            i,
        );
        assert!(linerate_wire::probe_of(&b).is_some());
    }
}
