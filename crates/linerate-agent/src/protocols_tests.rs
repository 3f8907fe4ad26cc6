//! The responder's decisions in memory: which frames it answers (and
//! with what), which it ignores, what it learns, when it asks.

use super::*;
use crate::devices::{Address, Ethernet};

const D1: MacAddr = MacAddr([2, 0, 0, 0, 1, 2]);
const ROUTER: MacAddr = MacAddr([2, 0, 0, 0, 0xee, 1]);
const OTHER: MacAddr = MacAddr([2, 0, 0, 0, 0x99, 9]);

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn eth() -> Ethernet {
    let a = |name: &str, ip: &str, gw: &str, prefix| Address {
        name: name.into(),
        ip: ip.parse().unwrap(),
        prefix,
        gateway: gw.parse().unwrap(),
        gateway_mac: None,
    };
    Ethernet {
        name: "d1.eth".into(),
        port: "p1".into(),
        mac: D1,
        mtu: 1500,
        addresses: vec![
            a("d1.ipv4", "198.18.1.2", "198.18.1.1", 24),
            a("d1.ipv6", "2001:db8:1::2", "2001:db8:1::1", 64),
        ],
    }
}

/// d1's responder resolving its two gateways, first requests due at `t0`.
fn responder(t0: Instant) -> Responder {
    let e = eth();
    let wants = [
        (
            e.name.clone(),
            "198.18.1.1".parse().unwrap(),
            "198.18.1.2".parse().unwrap(),
            None,
        ),
        (
            e.name.clone(),
            "2001:db8:1::1".parse().unwrap(),
            "2001:db8:1::2".parse().unwrap(),
            None,
        ),
    ];
    Responder::new(&[&e], &wants, t0)
}

fn arp_from(op: u16, smac: MacAddr, sip: &str, tip: &str, dst: MacAddr) -> Vec<u8> {
    let mut b = vec![0u8; 60];
    arp_frame(
        &mut b,
        dst,
        ArpRepr {
            operation: op,
            sender_mac: smac,
            sender_ip: v4(sip),
            target_mac: MacAddr([0; 6]),
            target_ip: v4(tip),
        },
    );
    b
}

/// An ICMPv4 echo request of `data` bytes of payload.
fn ping4(dst_mac: MacAddr, src: &str, dst: &str, data: usize) -> Vec<u8> {
    let n = 14 + 20 + 8 + data;
    let mut b = vec![0u8; n];
    write_eth(&mut b, ROUTER, dst_mac, EtherType::IPV4);
    let icmp = &mut b[34..];
    icmp[0] = 8;
    icmp[4..8].copy_from_slice(&[0x12, 0x34, 0, 1]);
    for (i, x) in icmp[8..].iter_mut().enumerate() {
        *x = i as u8;
    }
    let c = checksum::checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Ipv4Repr {
        src: v4(src),
        dst: v4(dst),
        protocol: ip_proto::ICMP,
        payload_len: 8 + data,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 7,
        dont_frag: false,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut b[14..n]));
    b
}

/// An ICMPv6 message `msg` in a frame.
fn icmp6(dst_mac: MacAddr, src: &str, dst: &str, hop_limit: u8, msg: &[u8]) -> Vec<u8> {
    let n = 14 + 40 + msg.len();
    let mut b = vec![0u8; n];
    write_eth(&mut b, ROUTER, dst_mac, EtherType::IPV6);
    write_ipv6(&mut b, v6(src), v6(dst), msg.len(), hop_limit);
    b[54..].copy_from_slice(msg);
    let c = ndisc::icmpv6_checksum(&b[54..], v6(src), v6(dst));
    b[56..58].copy_from_slice(&c.to_be_bytes());
    b
}

fn ns(target: &str, lladdr: Option<MacAddr>) -> Vec<u8> {
    let r = NdiscRepr {
        kind: ndisc::SOLICIT,
        flags: 0,
        target: v6(target),
        lladdr,
    };
    let mut m = vec![0u8; r.buffer_len()];
    r.emit(&mut m, v6("::1"), v6("::1"));
    m
}

fn answer(r: &mut Responder, frame: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0u8; 9216];
    match r.handle_frame(frame, &mut out) {
        Verdict::Answer(n) => Some(out[..n].to_vec()),
        _ => None,
    }
}

#[test]
fn an_arp_request_for_a_device_is_answered_from_its_mac() {
    let mut r = responder(Instant::now());
    let req = arp_from(
        arp::REQUEST,
        ROUTER,
        "198.18.1.1",
        "198.18.1.2",
        MacAddr::BROADCAST,
    );
    let a = answer(&mut r, &req).expect("answered");
    assert_eq!(a.len(), 60, "padded to the shortest frame");
    let e = EthernetRepr::parse(&EthernetFrame::new_checked(&a[..]).unwrap());
    assert_eq!((e.src, e.dst, e.ethertype), (D1, ROUTER, EtherType::ARP));
    let p = ArpRepr::parse(&ArpPacket::new_checked(&a[14..]).unwrap());
    assert_eq!(
        p,
        ArpRepr {
            operation: arp::REPLY,
            sender_mac: D1,
            sender_ip: v4("198.18.1.2"),
            target_mac: ROUTER,
            target_ip: v4("198.18.1.1"),
        }
    );
    // The gateway asked: its MAC is learnt on the way.
    assert_eq!(
        r.resolved("d1.eth", "198.18.1.1".parse().unwrap()),
        Some(ROUTER)
    );
    // Sent to the device's own MAC (a unicast refresh): answered too.
    let uni = arp_from(arp::REQUEST, ROUTER, "198.18.1.1", "198.18.1.2", D1);
    assert!(answer(&mut r, &uni).is_some());
}

#[test]
fn arp_for_other_addresses_and_odd_arp_frames_are_ignored() {
    let mut r = responder(Instant::now());
    let cases = [
        // Another address on the link.
        arp_from(
            arp::REQUEST,
            ROUTER,
            "198.18.1.1",
            "198.18.1.9",
            MacAddr::BROADCAST,
        ),
        // Sent to another host's MAC.
        arp_from(arp::REQUEST, ROUTER, "198.18.1.1", "198.18.1.2", OTHER),
        // A probe (sender 0.0.0.0).
        arp_from(
            arp::REQUEST,
            ROUTER,
            "0.0.0.0",
            "198.18.1.2",
            MacAddr::BROADCAST,
        ),
        // From a multicast source.
        arp_from(
            arp::REQUEST,
            MacAddr::BROADCAST,
            "198.18.1.1",
            "198.18.1.2",
            MacAddr::BROADCAST,
        ),
    ];
    for (i, f) in cases.iter().enumerate() {
        let mut out = vec![0u8; 9216];
        assert_eq!(r.handle_frame(f, &mut out), Verdict::Ignored, "case {i}");
    }
    // The sender's MAC in the packet differs from the frame's.
    let mut lie = arp_from(
        arp::REQUEST,
        ROUTER,
        "198.18.1.1",
        "198.18.1.2",
        MacAddr::BROADCAST,
    );
    lie[6..12].copy_from_slice(&OTHER.0);
    assert_eq!(r.handle_frame(&lie, &mut [0u8; 100]), Verdict::Ignored);
    // A VLAN-tagged request, a truncated one.
    let mut tagged = vec![0u8; 64];
    tagged[..12].copy_from_slice(
        &arp_from(
            arp::REQUEST,
            ROUTER,
            "198.18.1.1",
            "198.18.1.2",
            MacAddr::BROADCAST,
        )[..12],
    );
    tagged[12..14].copy_from_slice(&EtherType::VLAN.to_be_bytes());
    assert_eq!(r.handle_frame(&tagged, &mut [0u8; 100]), Verdict::Ignored);
    let req = arp_from(
        arp::REQUEST,
        ROUTER,
        "198.18.1.1",
        "198.18.1.2",
        MacAddr::BROADCAST,
    );
    assert_eq!(
        r.handle_frame(&req[..30], &mut [0u8; 100]),
        Verdict::Ignored
    );
    // Nothing was learnt from any of them.
    assert_eq!(r.resolved("d1.eth", "198.18.1.1".parse().unwrap()), None);
}

#[test]
fn gateways_are_asked_from_the_devices_address_with_a_bounded_backoff() {
    let t0 = Instant::now();
    let mut r = responder(t0);
    let mut out = vec![0u8; 9216];
    // Both due at once: an ARP request and a solicitation.
    let n = r.poll_transmit(t0, &mut out).expect("the ARP request");
    let e = EthernetRepr::parse(&EthernetFrame::new_checked(&out[..n]).unwrap());
    assert_eq!((e.src, e.dst), (D1, MacAddr::BROADCAST));
    let p = ArpRepr::parse(&ArpPacket::new_checked(&out[14..n]).unwrap());
    assert_eq!(
        (p.operation, p.sender_ip, p.target_ip),
        (arp::REQUEST, v4("198.18.1.2"), v4("198.18.1.1"))
    );
    let n = r.poll_transmit(t0, &mut out).expect("the solicitation");
    assert_eq!(out[..6], [0x33, 0x33, 0xff, 0, 0, 1]);
    let ip = Ipv6Packet::new_checked(&out[14..n]).unwrap();
    assert_eq!(
        (ip.src(), ip.dst(), ip.hop_limit()),
        (v6("2001:db8:1::2"), v6("ff02::1:ff00:1"), 255)
    );
    assert!(ndisc::checksum_ok(ip.payload(), ip.src(), ip.dst()));
    let nd = NdiscRepr::parse(ip.payload()).unwrap();
    assert_eq!((nd.target, nd.lladdr), (v6("2001:db8:1::1"), Some(D1)));
    // Nothing more until the retry: 250 ms, then doubled up to 4 s.
    assert_eq!(r.poll_transmit(t0, &mut out), None);
    assert_eq!(r.poll_at(), Some(t0 + RETRY_FIRST));
    let mut sent = 2;
    let mut t = t0;
    while let Some(at) = r.poll_at() {
        t = at;
        while r.poll_transmit(t, &mut out).is_some() {
            sent += 1;
        }
    }
    assert_eq!(
        sent,
        2 * TRIES_MAX,
        "each neighbour asked {TRIES_MAX} times, then no more"
    );
    assert_eq!(
        t - t0,
        Duration::from_millis(250 + 500 + 1000 + 2000) + RETRY_MAX * 5
    );
    // An answer still comes in: learnt.
    let reply = arp_from(arp::REPLY, ROUTER, "198.18.1.1", "198.18.1.2", D1);
    assert_eq!(r.handle_frame(&reply, &mut out), Verdict::Learnt);
    assert_eq!(
        r.resolved("d1.eth", "198.18.1.1".parse().unwrap()),
        Some(ROUTER)
    );
}

#[test]
fn only_answers_from_wanted_neighbours_to_the_device_are_learnt() {
    let t0 = Instant::now();
    let mut r = responder(t0);
    let mut out = vec![0u8; 9216];
    // A reply from an address the responder did not ask about.
    let stranger = arp_from(arp::REPLY, OTHER, "198.18.1.50", "198.18.1.2", D1);
    assert_eq!(r.handle_frame(&stranger, &mut out), Verdict::Ignored);
    // The gateway's reply to another host.
    let elsewhere = arp_from(arp::REPLY, ROUTER, "198.18.1.1", "198.18.1.9", OTHER);
    assert_eq!(r.handle_frame(&elsewhere, &mut out), Verdict::Ignored);
    assert_eq!(r.neighbors().len(), 2, "the table holds what it was given");
    assert!(r.neighbors().iter().all(|n| n.mac.is_none()));
    // Once resolved, no request is due again.
    let reply = arp_from(arp::REPLY, ROUTER, "198.18.1.1", "198.18.1.2", D1);
    assert_eq!(r.handle_frame(&reply, &mut out), Verdict::Learnt);
    // The IPv6 gateway's advertisement (solicited, with its MAC).
    let na = NdiscRepr {
        kind: ndisc::ADVERT,
        flags: ndisc::FLAG_SOLICITED | ndisc::FLAG_ROUTER,
        target: v6("2001:db8:1::1"),
        lladdr: Some(ROUTER),
    };
    let mut m = vec![0u8; na.buffer_len()];
    na.emit(&mut m, v6("::1"), v6("::1"));
    let f = icmp6(D1, "2001:db8:1::1", "2001:db8:1::2", 255, &m);
    assert_eq!(r.handle_frame(&f, &mut out), Verdict::Learnt);
    assert_eq!(
        r.resolved("d1.eth", "2001:db8:1::1".parse().unwrap()),
        Some(ROUTER)
    );
    assert_eq!(r.poll_at(), None);
    assert_eq!(
        r.poll_transmit(t0 + Duration::from_secs(60), &mut out),
        None
    );
}

#[test]
fn a_solicitation_for_a_device_is_advertised_back() {
    let mut r = responder(Instant::now());
    let m = ns("2001:db8:1::2", Some(ROUTER));
    let group = ndisc::solicited_node(v6("2001:db8:1::2"));
    let f = icmp6(
        ndisc::multicast_mac(group),
        "2001:db8:1::1",
        &group.to_string(),
        255,
        &m,
    );
    let a = answer(&mut r, &f).expect("advertised");
    let e = EthernetRepr::parse(&EthernetFrame::new_checked(&a[..]).unwrap());
    assert_eq!((e.src, e.dst), (D1, ROUTER));
    let ip = Ipv6Packet::new_checked(&a[14..]).unwrap();
    assert_eq!(
        (ip.src(), ip.dst(), ip.hop_limit()),
        (v6("2001:db8:1::2"), v6("2001:db8:1::1"), 255)
    );
    assert!(ndisc::checksum_ok(ip.payload(), ip.src(), ip.dst()));
    let na = NdiscRepr::parse(ip.payload()).unwrap();
    assert_eq!(
        na,
        NdiscRepr {
            kind: ndisc::ADVERT,
            flags: ndisc::FLAG_SOLICITED | ndisc::FLAG_OVERRIDE,
            target: v6("2001:db8:1::2"),
            lladdr: Some(D1),
        }
    );
    // The soliciting gateway was learnt from its option.
    assert_eq!(
        r.resolved("d1.eth", "2001:db8:1::1".parse().unwrap()),
        Some(ROUTER)
    );
    // Sent to the address itself (a unicast check): answered too.
    let f = icmp6(D1, "2001:db8:1::1", "2001:db8:1::2", 255, &m);
    assert!(answer(&mut r, &f).is_some());
}

#[test]
fn other_solicitations_are_ignored() {
    let mut r = responder(Instant::now());
    let group = ndisc::solicited_node(v6("2001:db8:1::2"));
    let gmac = ndisc::multicast_mac(group);
    let g = group.to_string();
    let good = ns("2001:db8:1::2", Some(ROUTER));
    let mut bad_sum = icmp6(gmac, "2001:db8:1::1", &g, 255, &good);
    bad_sum[60] ^= 1;
    let cases = [
        // Another target.
        icmp6(
            ndisc::multicast_mac(ndisc::solicited_node(v6("2001:db8:1::9"))),
            "2001:db8:1::1",
            &ndisc::solicited_node(v6("2001:db8:1::9")).to_string(),
            255,
            &ns("2001:db8:1::9", Some(ROUTER)),
        ),
        // Routed (hop limit below 255).
        icmp6(gmac, "2001:db8:1::1", &g, 64, &good),
        // Duplicate address detection (from ::).
        icmp6(gmac, "::", &g, 255, &ns("2001:db8:1::2", None)),
        // To another group than the target's.
        icmp6(gmac, "2001:db8:1::1", "ff02::1", 255, &good),
        // A bad checksum.
        bad_sum,
    ];
    for (i, f) in cases.iter().enumerate() {
        let mut out = vec![0u8; 9216];
        assert_eq!(r.handle_frame(f, &mut out), Verdict::Ignored, "case {i}");
    }
}

#[test]
fn pings_to_a_device_are_answered_as_long_as_asked() {
    let mut r = responder(Instant::now());
    let req = ping4(D1, "198.18.2.1", "198.18.1.2", 56);
    let a = answer(&mut r, &req).expect("echoed");
    assert_eq!(a.len(), req.len());
    let ip = Ipv4Packet::new_checked(&a[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(
        (ip.src(), ip.dst(), ip.protocol()),
        (v4("198.18.1.2"), v4("198.18.2.1"), ip_proto::ICMP)
    );
    let icmp = ip.payload();
    assert_eq!(
        (icmp[0], checksum::checksum(icmp)),
        (0, 0),
        "an echo reply, good sum"
    );
    assert_eq!(icmp[4..], req[38..], "identifier, sequence and data echoed");
    // IPv6.
    let mut m = vec![128u8, 0, 0, 0, 0xab, 0xcd, 0, 3];
    m.extend(0..40u8);
    let req = icmp6(D1, "2001:db8:2::1", "2001:db8:1::2", 63, &m);
    let a = answer(&mut r, &req).expect("echoed");
    assert_eq!(a.len(), req.len());
    let ip = Ipv6Packet::new_checked(&a[14..]).unwrap();
    assert_eq!(
        (ip.src(), ip.dst()),
        (v6("2001:db8:1::2"), v6("2001:db8:2::1"))
    );
    assert!(ndisc::checksum_ok(ip.payload(), ip.src(), ip.dst()));
    assert_eq!(ip.payload()[0], 129);
    assert_eq!(ip.payload()[4..], m[4..]);
}

#[test]
fn other_pings_and_other_traffic_are_ignored() {
    let mut r = responder(Instant::now());
    let mut frag = ping4(D1, "198.18.2.1", "198.18.1.2", 56);
    frag[20] = 0x20; // more fragments
    let mut fix = Ipv4Packet::new_unchecked(&mut frag[14..]);
    fix.fill_checksum();
    let mut bad_sum = ping4(D1, "198.18.2.1", "198.18.1.2", 56);
    bad_sum[40] ^= 1;
    let mut reply = ping4(D1, "198.18.2.1", "198.18.1.2", 8);
    reply[34] = 0; // an echo reply, not a request
    let mut udp = ping4(D1, "198.18.2.1", "198.18.1.2", 56);
    udp[23] = ip_proto::UDP;
    Ipv4Packet::new_unchecked(&mut udp[14..]).fill_checksum();
    let cases = [
        ping4(D1, "198.18.2.1", "198.18.1.9", 56), // not a device's address
        ping4(OTHER, "198.18.2.1", "198.18.1.2", 56), // to another MAC
        ping4(MacAddr::BROADCAST, "198.18.2.1", "198.18.1.2", 56),
        frag,
        bad_sum,
        reply,
        udp, // a flow's frame
    ];
    for (i, f) in cases.iter().enumerate() {
        let mut out = vec![0u8; 9216];
        assert_eq!(r.handle_frame(f, &mut out), Verdict::Ignored, "case {i}");
    }
    // An answer that would not fit the buffer is not written.
    let big = ping4(D1, "198.18.2.1", "198.18.1.2", 1400);
    assert_eq!(r.handle_frame(&big, &mut [0u8; 1000]), Verdict::Ignored);
    let bare = icmp6(
        D1,
        "2001:db8:1::1",
        "2001:db8:1::2",
        255,
        &ns("2001:db8:1::2", None),
    );
    assert_eq!(bare.len(), 78, "a solicitation without its option");
    assert_eq!(r.handle_frame(&bare, &mut [0u8; 85]), Verdict::Ignored);
    assert_eq!(r.handle_frame(&bare, &mut [0u8; 86]), Verdict::Answer(86));
    assert_eq!(r.poll_transmit(Instant::now(), &mut [0u8; 85]), None);
}

#[test]
fn arbitrary_bytes_are_never_answered_for_others_nor_panicked_on() {
    let mut r = responder(Instant::now());
    let mut out = vec![0u8; 9216];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let seeds = [
        arp_from(
            arp::REQUEST,
            ROUTER,
            "198.18.1.1",
            "198.18.1.2",
            MacAddr::BROADCAST,
        ),
        ping4(D1, "198.18.2.1", "198.18.1.2", 20),
        icmp6(
            D1,
            "2001:db8:1::1",
            "2001:db8:1::2",
            255,
            &ns("2001:db8:1::2", Some(ROUTER)),
        ),
    ];
    for i in 0..20_000 {
        let mut f = seeds[i % 3].clone();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x as usize) % f.len();
            f[at] = (x >> 32) as u8;
        }
        f.truncate(((x >> 40) as usize) % (f.len() + 1));
        if let Verdict::Answer(n) = r.handle_frame(&f, &mut out) {
            assert!(n <= f.len().max(ANSWER_MAX));
            assert_eq!(out[6..12], D1.0, "answers come from the device's MAC");
        }
    }
}

/// An echo reply (ICMP type 0 or ICMPv6 129) from ROUTER to D1, with
/// `ident` and `seq`.
fn echo_reply(src: &str, dst: &str, ident: u16, seq: u16) -> Vec<u8> {
    let mut msg = vec![0u8; 8 + 56];
    msg[4..6].copy_from_slice(&ident.to_be_bytes());
    msg[6..8].copy_from_slice(&seq.to_be_bytes());
    if src.contains(':') {
        msg[0] = 129;
        return icmp6(D1, src, dst, 64, &msg);
    }
    let n = 14 + 20 + msg.len();
    let mut b = vec![0u8; n];
    write_eth(&mut b, ROUTER, D1, EtherType::IPV4);
    let c = checksum::checksum(&msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    b[34..].copy_from_slice(&msg);
    Ipv4Repr {
        src: v4(src),
        dst: v4(dst),
        protocol: ip_proto::ICMP,
        payload_len: msg.len(),
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 9,
        dont_frag: false,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut b[14..n]));
    b
}

#[test]
fn a_ping_resolves_its_next_hop_sends_its_echo_and_takes_only_its_reply() {
    let t0 = Instant::now();
    let e = eth();
    let mut r = Responder::new(&[&e], &[], t0);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let (from, dst) = (ip("198.18.1.2"), ip("198.18.1.7"));
    assert!(!r.ping("other.eth", (from, dst, dst, None), (5, 0), t0));
    assert!(r.ping("d1.eth", (from, dst, dst, None), (5, 0), t0));
    let mut out = vec![0u8; 9216];
    // The destination is on link: asked for first, nothing sent to it
    // before its answer.
    let n = r.poll_transmit(t0, &mut out).expect("the ARP request");
    let p = ArpRepr::parse(&ArpPacket::new_checked(&out[14..n]).unwrap());
    assert_eq!(
        (p.sender_ip, p.target_ip),
        (v4("198.18.1.2"), v4("198.18.1.7"))
    );
    assert_eq!(r.poll_transmit(t0, &mut out), None);
    let reply = arp_from(arp::REPLY, ROUTER, "198.18.1.7", "198.18.1.2", D1);
    assert_eq!(r.handle_frame(&reply, &mut out), Verdict::Learnt);
    let n = r.poll_transmit(t0, &mut out).expect("the echo request");
    assert_eq!(n, 14 + 20 + 8 + 56);
    let f = EthernetRepr::parse(&EthernetFrame::new_checked(&out[..n]).unwrap());
    assert_eq!((f.src, f.dst, f.ethertype), (D1, ROUTER, EtherType::IPV4));
    let p = Ipv4Packet::new_checked(&out[14..n]).unwrap();
    assert!(p.verify_checksum());
    assert_eq!(
        (p.src(), p.dst(), p.protocol()),
        (v4("198.18.1.2"), v4("198.18.1.7"), ip_proto::ICMP)
    );
    let m = p.payload();
    assert_eq!(&m[..2], &[8, 0]);
    assert_eq!(
        &m[4..8],
        &[0, 5, 0, 0],
        "its identifier and sequence number"
    );
    assert_eq!(checksum::checksum(m), 0);
    // Not again before PING_EVERY.
    assert_eq!(r.poll_transmit(t0, &mut out), None);
    assert_eq!(r.poll_at(), Some(t0 + PING_EVERY));
    // Replies of another identifier, sequence or source are not its own.
    for (src, id, seq) in [
        ("198.18.1.7", 6, 0),
        ("198.18.1.7", 5, 1),
        ("198.18.1.8", 5, 0),
    ] {
        let b = echo_reply(src, "198.18.1.2", id, seq);
        assert_eq!(
            r.handle_frame(&b, &mut out),
            Verdict::Ignored,
            "{src} {id} {seq}"
        );
    }
    assert!(!r.pings()[0].replied);
    let b = echo_reply("198.18.1.7", "198.18.1.2", 5, 0);
    assert_eq!(r.handle_frame(&b, &mut out), Verdict::Learnt);
    assert!(r.pings()[0].replied);
    assert_eq!(
        r.poll_transmit(t0 + PING_EVERY * 3, &mut out),
        None,
        "answered: not sent again"
    );
    let got = r.take_pings(5);
    assert_eq!((got.len(), got[0].replied), (1, true));
    assert!(r.pings().is_empty());
    assert!(
        r.neighbors().is_empty(),
        "the destination asked for the ping alone is forgotten"
    );
}

#[test]
fn an_ipv6_ping_goes_through_its_gateway_and_is_sent_again_until_answered() {
    let t0 = Instant::now();
    let e = eth();
    let mut r = Responder::new(&[&e], &[], t0);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let (from, dst, gw) = (
        ip("2001:db8:1::2"),
        ip("2001:db8:9::9"),
        ip("2001:db8:1::1"),
    );
    assert!(r.ping("d1.eth", (from, dst, gw, Some(ROUTER)), (7, 3), t0));
    let mut out = vec![0u8; 9216];
    let mut sent = 0;
    for k in 0..3 {
        let t = t0 + PING_EVERY * k;
        let n = r
            .poll_transmit(t, &mut out)
            .expect("an echo request each second");
        sent += 1;
        assert_eq!(
            &out[..12],
            &[ROUTER.0, D1.0].concat()[..],
            "to the gateway's MAC"
        );
        let p = Ipv6Packet::new_checked(&out[14..n]).unwrap();
        assert_eq!(
            (p.src(), p.dst()),
            (v6("2001:db8:1::2"), v6("2001:db8:9::9"))
        );
        assert!(ndisc::checksum_ok(p.payload(), p.src(), p.dst()));
        assert_eq!(
            &p.payload()[..8],
            &[128, 0, p.payload()[2], p.payload()[3], 0, 7, 0, 3]
        );
        assert_eq!(r.poll_transmit(t, &mut out), None);
    }
    assert_eq!(sent, 3);
    let b = echo_reply("2001:db8:9::9", "2001:db8:1::2", 7, 3);
    assert_eq!(r.handle_frame(&b, &mut out), Verdict::Learnt);
    assert!(r.take_pings(7)[0].replied);
    assert!(r.neighbors().is_empty());
}
