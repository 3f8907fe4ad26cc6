//! Cross-checks the wire layer against etherparse: frames built by etherparse
//! parse to the same fields and re-emit to the same bytes, and mutated or
//! random bytes never panic and never parse differently where both accept.

use etherparse::{NetHeaders, PacketBuilder, PacketHeaders, TransportHeader};
use linerate_wire::icmp::IcmpEchoPacket;
use linerate_wire::{
    EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, L3, L4, TcpPacket,
    TcpRepr, UdpPacket, UdpRepr, VlanTag, parse_frame,
};
use proptest::prelude::*;
use std::net::IpAddr;

#[derive(Debug, Clone)]
enum Transport {
    Udp(u16, u16),
    Tcp(u16, u16, u32, u16),
    Echo(u16, u16),
}

#[derive(Debug, Clone)]
struct Spec {
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    vlans: Vec<u16>,
    v6: bool,
    src4: [u8; 4],
    dst4: [u8; 4],
    src6: [u8; 16],
    dst6: [u8; 16],
    ttl: u8,
    transport: Transport,
    payload: Vec<u8>,
}

fn transport() -> impl Strategy<Value = Transport> {
    prop_oneof![
        (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Transport::Udp(a, b)),
        (any::<u16>(), any::<u16>(), any::<u32>(), any::<u16>())
            .prop_map(|(a, b, s, w)| Transport::Tcp(a, b, s, w)),
        (any::<u16>(), any::<u16>()).prop_map(|(i, s)| Transport::Echo(i, s)),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            prop::collection::vec(0u16..4096, 0..=2),
        ),
        (
            any::<bool>(),
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
        ),
        (
            1u8..=255,
            transport(),
            prop::collection::vec(any::<u8>(), 0..64),
        ),
    )
        .prop_map(
            |(
                (src_mac, dst_mac, vlans),
                (v6, src4, dst4, src6, dst6),
                (ttl, transport, payload),
            )| Spec {
                src_mac,
                dst_mac,
                vlans,
                v6,
                src4,
                dst4,
                src6,
                dst6,
                ttl,
                transport,
                payload,
            },
        )
}

fn build(s: &Spec) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2(s.src_mac, s.dst_mac);
    macro_rules! finish {
        ($ip:expr) => {{
            let mut out = Vec::new();
            match s.transport {
                Transport::Udp(a, b) => $ip.udp(a, b).write(&mut out, &s.payload).unwrap(),
                Transport::Tcp(a, b, seq, w) => $ip
                    .tcp(a, b, seq, w)
                    .ack(7)
                    .psh()
                    .write(&mut out, &s.payload)
                    .unwrap(),
                Transport::Echo(i, q) => {
                    if s.v6 {
                        $ip.icmpv6_echo_request(i, q)
                            .write(&mut out, &s.payload)
                            .unwrap()
                    } else {
                        $ip.icmpv4_echo_request(i, q)
                            .write(&mut out, &s.payload)
                            .unwrap()
                    }
                }
            }
            out
        }};
    }
    macro_rules! ip {
        ($l:expr) => {
            if s.v6 {
                finish!($l.ipv6(s.src6, s.dst6, s.ttl))
            } else {
                finish!($l.ipv4(s.src4, s.dst4, s.ttl))
            }
        };
    }
    match s.vlans.as_slice() {
        [] => ip!(eth),
        [a] => ip!(eth.single_vlan((*a).try_into().unwrap())),
        [a, b, ..] => ip!(eth.double_vlan((*a).try_into().unwrap(), (*b).try_into().unwrap())),
    }
}

/// Emits the parsed frame again with linerate's writers.
fn re_emit(bytes: &[u8]) -> Vec<u8> {
    let p = parse_frame(bytes).unwrap();
    let mut out = vec![0u8; bytes.len()];
    EthernetRepr {
        ethertype: p.eth.ethertype,
        ..p.eth
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    let mut at = 14;
    for v in p.vlans.iter().flatten() {
        v.emit(&mut VlanTag::new_unchecked(&mut out[at..]));
        at += 4;
    }
    let (l4_at, addrs) = match p.l3 {
        L3::Ipv4(r) => {
            r.emit(&mut Ipv4Packet::new_unchecked(&mut out[at..]));
            (at + 20, (IpAddr::from(r.src), IpAddr::from(r.dst)))
        }
        L3::Ipv6(r) => {
            r.emit(&mut Ipv6Packet::new_unchecked(&mut out[at..]));
            (at + 40, (IpAddr::from(r.src), IpAddr::from(r.dst)))
        }
        L3::Other(_) => unreachable!(),
    };
    let end = l4_at
        + match p.l3 {
            L3::Ipv4(r) => r.payload_len,
            L3::Ipv6(r) => r.payload_len,
            L3::Other(_) => 0,
        };
    let seg = &mut out[l4_at..end];
    let hl = match p.l4 {
        L4::Udp(_) => 8,
        L4::Tcp(_) => 20,
        _ => 8,
    };
    seg[hl..].copy_from_slice(p.payload);
    match p.l4 {
        L4::Udp(r) => r.emit(&mut UdpPacket::new_unchecked(seg), Some(addrs)),
        L4::Tcp(r) => r.emit(&mut TcpPacket::new_unchecked(seg), Some(addrs)),
        L4::IcmpEcho(r) => r.emit(&mut IcmpEchoPacket::new_unchecked(seg), Some(addrs)),
        other => panic!("unexpected {other:?}"),
    }
    out
}

fn agree(bytes: &[u8]) {
    let ours = parse_frame(bytes);
    let theirs = PacketHeaders::from_ethernet_slice(bytes);
    let (Ok(ours), Ok(theirs)) = (ours, theirs) else {
        return;
    };
    match (&ours.l3, &theirs.net) {
        (L3::Ipv4(a), Some(NetHeaders::Ipv4(b, _))) => {
            assert_eq!(a.src.octets(), b.source);
            assert_eq!(a.dst.octets(), b.destination);
            assert_eq!(a.ttl, b.time_to_live);
            assert_eq!(a.protocol, b.protocol.0);
        }
        (L3::Ipv6(a), Some(NetHeaders::Ipv6(b, _))) => {
            assert_eq!(a.src.octets(), b.source);
            assert_eq!(a.dst.octets(), b.destination);
            assert_eq!(a.hop_limit, b.hop_limit);
        }
        _ => return,
    }
    match (&ours.l4, &theirs.transport) {
        (L4::Udp(a), Some(TransportHeader::Udp(b))) => {
            assert_eq!(
                (a.src_port, a.dst_port),
                (b.source_port, b.destination_port)
            );
            assert_eq!(a.payload_len + 8, usize::from(b.length));
        }
        (L4::Tcp(a), Some(TransportHeader::Tcp(b))) => {
            assert_eq!(
                (a.src_port, a.dst_port),
                (b.source_port, b.destination_port)
            );
            assert_eq!(
                (a.seq, a.ack, a.window),
                (b.sequence_number, b.acknowledgment_number, b.window_size)
            );
            assert_eq!(a.flags.0 & 0x3f, {
                let mut f = 0u8;
                f |= u8::from(b.fin);
                f |= u8::from(b.syn) << 1;
                f |= u8::from(b.rst) << 2;
                f |= u8::from(b.psh) << 3;
                f |= u8::from(b.ack) << 4;
                f |= u8::from(b.urg) << 5;
                f
            });
            assert_eq!(ours.payload, theirs.payload.slice());
        }
        (L4::Udp(_) | L4::Tcp(_), other) => panic!("we parsed L4, etherparse gave {other:?}"),
        _ => {}
    }
}

/// A fragment, first or not, is not a whole segment: no transport header
/// is read from it (etherparse agrees), so a sink never counts a fragment
/// as a probe frame.
#[test]
fn ipv4_fragments_have_no_transport() {
    let mut out = Vec::new();
    PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(1000, 2000)
        .write(&mut out, &[7; 32])
        .unwrap();
    assert!(matches!(parse_frame(&out).unwrap().l4, L4::Udp(_)));
    for (flags_hi, what) in [(0x20u8, "first fragment (MF)"), (0x00, "offset 8 bytes")] {
        let mut f = out.clone();
        f[20] = flags_hi;
        f[21] = if flags_hi == 0 { 1 } else { 0 };
        let p = parse_frame(&f).unwrap();
        assert_eq!(p.l4, L4::Other(17), "{what}");
        assert!(p.probe.is_none());
        agree(&f);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn etherparse_frames_parse_and_reemit_identically(s in spec()) {
        let bytes = build(&s);
        let p = parse_frame(&bytes).expect("etherparse's frame parses");
        prop_assert_eq!(p.eth.src.0, s.src_mac);
        prop_assert_eq!(p.eth.dst.0, s.dst_mac);
        let vids: Vec<u16> = p.vlans.iter().flatten().map(|v| v.vid).collect();
        prop_assert_eq!(&vids, &s.vlans);
        prop_assert_eq!(p.payload, &s.payload[..]);
        match (&p.l3, s.v6) {
            (L3::Ipv4(r), false) => {
                prop_assert_eq!(r.src.octets(), s.src4);
                prop_assert_eq!(r.ttl, s.ttl);
                let at = 14 + 4 * s.vlans.len();
                prop_assert!(Ipv4Packet::new_checked(&bytes[at..]).unwrap().verify_checksum());
            }
            (L3::Ipv6(r), true) => {
                prop_assert_eq!(r.dst.octets(), s.dst6);
                prop_assert_eq!(r.hop_limit, s.ttl);
            }
            other => prop_assert!(false, "wrong L3 {:?}", other),
        }
        match (&p.l4, &s.transport) {
            (L4::Udp(u), Transport::Udp(a, b)) => prop_assert_eq!((u.src_port, u.dst_port), (*a, *b)),
            (L4::Tcp(t), Transport::Tcp(a, b, seq, w)) => {
                prop_assert_eq!((t.src_port, t.dst_port, t.seq, t.window, t.ack), (*a, *b, *seq, *w, 7));
            }
            (L4::IcmpEcho(e), Transport::Echo(i, q)) => {
                prop_assert_eq!((e.ident, e.seq, e.is_request), (*i, *q, true));
            }
            other => prop_assert!(false, "wrong L4 {:?}", other),
        }
        // Our writers produce etherparse's bytes exactly, checksums included
        // (etherparse sets IPv4 DF and ident 0, which the repr carries over).
        prop_assert_eq!(re_emit(&bytes), bytes.clone());
        agree(&bytes);
        // The offsets the strict parse records are the lenient walk's.
        prop_assert_eq!(p.ip, linerate_wire::locate(&bytes));
        let ip = p.ip.unwrap();
        prop_assert_eq!(ip.l3, 14 + 4 * s.vlans.len());
        prop_assert!(ip.l4.is_some());
    }

    #[test]
    fn mutated_frames_never_panic_and_agree(
        s in spec(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = build(&s);
        for (i, b) in flips {
            let at = i.index(bytes.len());
            bytes[at] = b;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        agree(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_frame(&bytes);
        let _ = UdpPacket::new_checked(&bytes[..]).map(|p| UdpRepr::parse(&p));
        let _ = TcpPacket::new_checked(&bytes[..]).map(|p| TcpRepr::parse(&p));
        let _ = Ipv4Packet::new_checked(&bytes[..]).map(|p| (Ipv4Repr::parse(&p), p.payload().len()));
        let _ = Ipv6Packet::new_checked(&bytes[..]).map(|p| (Ipv6Repr::parse(&p), p.payload().len()));
        agree(&bytes);
    }
}

/// A frame with a probe in its UDP payload, in one of the layouts the
/// fast path takes (VLAN or not, IPv4 or IPv6), with its sizes as given.
fn probe_frame(vlan: bool, v6: bool, extra: usize, seq: u64) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut payload = vec![0u8; linerate_wire::PROBE_LEN + extra];
    linerate_wire::Probe {
        flow_id: 7,
        seq,
        tx_ns: 0x1234_5678_9abc,
    }
    .emit(&mut payload);
    let mut out = Vec::new();
    if v6 {
        b.ipv6(
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            64,
        )
        .udp(9, 9)
        .write(&mut out, &payload)
    } else {
        b.ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(9, 9)
            .write(&mut out, &payload)
    }
    .unwrap();
    if vlan {
        // An 802.1Q tag (VLAN 5) before the ethertype.
        out.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    }
    out
}

/// A frame 65,536 B longer than its IPv4 packet: its lengths, taken
/// modulo 2^16, would say it fills the frame. The fast path leaves frames
/// longer than an IPv4 length can say to the parser, which finds the
/// probe with the rest as trailer.
#[test]
fn a_frame_longer_than_ipv4_can_say_is_left_to_the_parser() {
    let mut f = probe_frame(false, false, 0, 9);
    assert!(linerate_wire::fast_probe(&f).is_some());
    f.resize(f.len() + 0x1_0000, 0);
    assert_eq!(linerate_wire::fast_probe(&f), None);
    let want = parse_frame(&f).ok().and_then(|p| p.probe);
    assert_eq!(want.map(|p| (p.flow_id, p.seq)), Some((7, 9)));
    assert_eq!(linerate_wire::probe_of(&f), want);
}

/// A bounded fast path takes frames up to its bound, exactly, and leaves
/// longer ones (and every frame shorter than the smallest probe frame) to
/// the careful path.
#[test]
fn the_bounded_fast_path_stops_at_its_bound() {
    use linerate_wire::{FastLen, fast_probe_upto};
    // 10 B past the smallest probe frame.
    let f = probe_frame(false, false, 10, 9);
    let len = f.len();
    assert_eq!(len, 70);
    assert!(fast_probe_upto(&f, FastLen::upto(len)).is_some());
    assert!(fast_probe_upto(&f, FastLen::upto(len + 1)).is_some());
    assert_eq!(fast_probe_upto(&f, FastLen::upto(len - 1)), None);
    assert_eq!(fast_probe_upto(&f, FastLen::upto(0)), None);
    assert_eq!(
        fast_probe_upto(&f, FastLen::upto(usize::MAX)),
        linerate_wire::fast_probe(&f)
    );
    assert_eq!(FastLen::upto(usize::MAX), FastLen::ALL);
    // The smallest probe frame (60 B) and one byte less.
    let min = probe_frame(false, false, 0, 9);
    assert!(FastLen::upto(1518).holds(60) && !FastLen::upto(1518).holds(59));
    assert!(FastLen::upto(1518).holds(1518) && !FastLen::upto(1518).holds(1519));
    assert!(fast_probe_upto(&min[..min.len() - 1], FastLen::ALL).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The sink's fast probe locator answers as the full parser does, for
    /// probe frames of every fast layout with any bytes overwritten
    /// (lengths, versions, fragment bits, ethertypes, the probe itself)
    /// and any truncation: never a probe the parser would not find, never
    /// a different one, never a panic.
    #[test]
    fn probe_of_answers_as_parse_frame(vlan in any::<bool>(), v6 in any::<bool>(), extra in 0usize..40,
                                       seq in any::<u64>(),
                                       edits in proptest::collection::vec((0usize..120, any::<u8>()), 0..4),
                                       cut in 0usize..130) {
        let mut f = probe_frame(vlan, v6, extra, seq);
        let clean = linerate_wire::probe_of(&f);
        prop_assert_eq!(clean.map(|p| (p.flow_id, p.seq)), Some((7, seq)));
        // Every fast layout is found on the fast path, not by the parser;
        // untagged IPv4 on its own path too.
        prop_assert_eq!(linerate_wire::fast_probe(&f), clean);
        let all = linerate_wire::FastLen::ALL;
        let v4 = if vlan || v6 { None } else { clean };
        prop_assert_eq!(linerate_wire::fast_probe_ipv4(&f, all), v4);
        for (at, v) in edits {
            if at < f.len() {
                f[at] = v;
            }
        }
        f.truncate(f.len().min(cut.max(f.len() / 2)));
        let want = parse_frame(&f).ok().and_then(|p| p.probe);
        prop_assert_eq!(linerate_wire::probe_of(&f), want);
        // The word-at-a-time locator alone: the same probe or none.
        let fast = linerate_wire::fast_probe(&f);
        prop_assert!(fast.is_none() || fast == want, "{:?} vs {:?}", fast, want);
        let v4 = linerate_wire::fast_probe_ipv4(&f, all);
        prop_assert!(v4.is_none() || v4 == fast, "{:?} vs {:?}", v4, fast);
    }

    /// Random bytes too.
    #[test]
    fn probe_of_answers_as_parse_frame_on_noise(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let want = parse_frame(&bytes).ok().and_then(|p| p.probe);
        prop_assert_eq!(linerate_wire::probe_of(&bytes), want);
        let fast = linerate_wire::fast_probe(&bytes);
        prop_assert!(fast.is_none() || fast == want);
    }
}
