//! The UDP server over AF_XDP (`rr server --af-xdp IFACE`): an XDP
//! program takes UDP datagrams to the server's port from the interface's
//! queues (every other frame goes on to the kernel), and a spinning
//! worker per queue turns each request frame into its answer frame in
//! place and sends it back out of the interface. A request then costs no
//! trip through the kernel's IP and UDP receive, no socket lookup and no
//! receive system call; the answer is one send on the socket's TX ring
//! (a wake-up system call in copy mode).
//!
//! An answer goes back the way its request came: MAC addresses, IP
//! addresses and UDP ports swapped, VLAN tags kept, the hop limit set
//! anew, the lengths and checksums written for the answer's size. The
//! request's own UDP checksum is not checked (a veth hands on a locally
//! sent frame with its checksum only begun); the answer's is computed
//! whole.

use crate::answer::{Decision, ServerCounts, decide, publish};
use crate::{Prefix, spin::Spin};
use linerate_backend::xsk::XskFwd;
use linerate_traffic::rewrite::{swap_located, swap_macs_unicast};
use linerate_wire::checksum::{fold, pseudo_v4, pseudo_v6, sum};
use linerate_wire::{RR_HEADER_LEN, RrHeader, locate};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why a frame got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not an rr request to this server (not UDP to its port, a fragment,
    /// lengths that do not add up, not a request).
    Malformed,
    /// The answer would be larger than this source may get, or than one
    /// frame of the interface can carry.
    TooLarge,
}

/// An answer made in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// The answer frame's length.
    pub frame: usize,
    /// UDP payload bytes of the request and of the answer.
    pub request: usize,
    pub answer: usize,
}

/// What every answer of a server is made by.
#[derive(Debug, Clone)]
pub struct Rules<'a> {
    /// The server's UDP port.
    pub port: u16,
    /// The interface's own MAC: the answer's source when the request was
    /// sent to a group address (never a source).
    pub own_mac: [u8; 6],
    /// The interface's MTU: the most an answer's IP packet may be.
    pub mtu: usize,
    pub max_response: usize,
    pub allow: &'a [Prefix],
}

/// Hop limit of an answer.
const HOP_LIMIT: u8 = 64;

fn be16(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([b[at], b[at + 1]]))
}

/// Turns the request frame in `buf[..len]` into its answer in place
/// (`buf` runs to the end of the frame's buffer: an answer may be longer
/// than its request where `rules` allow it).
pub fn answer_frame(buf: &mut [u8], len: usize, rules: &Rules<'_>) -> Result<Answered, Refused> {
    let len = len.min(buf.len());
    let ip = locate(&buf[..len]).ok_or(Refused::Malformed)?;
    let Some((17, udp)) = ip.l4 else {
        return Err(Refused::Malformed);
    };
    if udp + 8 > len || be16(buf, udp + 2) != usize::from(rules.port) {
        return Err(Refused::Malformed);
    }
    // IPv4: a fragment's datagram is not all here.
    if !ip.v6 && (buf[ip.l3 + 6] & 0x3f != 0 || buf[ip.l3 + 7] != 0) {
        return Err(Refused::Malformed);
    }
    let ulen = be16(buf, udp + 4);
    if ulen < 8 + RR_HEADER_LEN || udp + ulen > len {
        return Err(Refused::Malformed);
    }
    let request = ulen - 8;
    let payload = udp + 8;
    // The most one IP packet of the interface carries, and the most this
    // buffer holds.
    let cap = (ip.l3 + rules.mtu).min(buf.len()).saturating_sub(payload);
    let asked = RrHeader::parse(&buf[payload..payload + request])
        .map_err(|_| Refused::Malformed)?
        .reply_len as usize;
    if asked > cap {
        return Err(Refused::TooLarge);
    }
    // The source matters only to a request asking for more than it
    // carried, and only where some sources may have it.
    let source = (!rules.allow.is_empty())
        .then(|| SocketAddr::new(source_ip(buf, ip.src, ip.v6), be16(buf, udp) as u16));
    let answer = match decide(
        &mut buf[payload..payload + cap],
        request,
        source,
        rules.allow,
        rules.max_response,
    ) {
        Decision::Answer(n) => n,
        Decision::Malformed => return Err(Refused::Malformed),
        Decision::TooLarge => return Err(Refused::TooLarge),
    };
    swap_macs_unicast(buf, rules.own_mac);
    swap_located(buf, &ip);
    let l4_len = 8 + answer;
    buf[udp + 4..udp + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    let ip_len = udp + l4_len - ip.l3;
    let pseudo = if ip.v6 {
        buf[ip.l3 + 4..ip.l3 + 6].copy_from_slice(&((ip_len - 40) as u16).to_be_bytes());
        buf[ip.l3 + 7] = HOP_LIMIT;
        let (s, d) = (v6_at(buf, ip.src), v6_at(buf, ip.src + 16));
        pseudo_v6(s, d, 17, l4_len as u32)
    } else {
        let ihl = usize::from(buf[ip.l3] & 0x0f) * 4;
        buf[ip.l3 + 2..ip.l3 + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        buf[ip.l3 + 8] = HOP_LIMIT;
        buf[ip.l3 + 10..ip.l3 + 12].fill(0);
        let c = !fold(sum(&buf[ip.l3..ip.l3 + ihl], 0));
        buf[ip.l3 + 10..ip.l3 + 12].copy_from_slice(&c.to_be_bytes());
        let (s, d) = (v4_at(buf, ip.src), v4_at(buf, ip.src + 4));
        pseudo_v4(s, d, 17, l4_len as u16)
    };
    buf[udp + 6..udp + 8].fill(0);
    let c = !fold(sum(&buf[udp..udp + l4_len], pseudo));
    // A computed 0 goes as 0xffff (0 would mean "none" over IPv4).
    let c = if c == 0 { 0xffff } else { c };
    buf[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
    Ok(Answered {
        frame: udp + l4_len,
        request,
        answer,
    })
}

fn v4_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

fn v6_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(o)
}

fn source_ip(b: &[u8], at: usize, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(v6_at(b, at))
    } else {
        IpAddr::V4(v4_at(b, at))
    }
}

/// One AF_XDP worker's loop: answers the requests of its queues until
/// `end`, spinning (yielding its CPU as `spin` says between empty polls),
/// its counts published to `sh` after each batch. Returns a warning when
/// the kernel dropped requests before they reached the worker's rings.
pub(crate) fn serve(
    mut x: XskFwd,
    (sh, mut spin): (&Mutex<ServerCounts>, Spin),
    rules: &Rules<'_>,
    end: &AtomicBool,
) -> Option<String> {
    let mut c = ServerCounts::default();
    while !end.load(Ordering::Relaxed) {
        let mut refused = 0u64;
        let (rx, sent, dropped) = x.answer(&mut |buf: &mut [u8], len: usize| match answer_frame(
            buf, len, rules,
        ) {
            Ok(a) => {
                c.requests += 1;
                c.bytes_in += a.request as u64;
                c.bytes_out += a.answer as u64;
                a.frame
            }
            Err(why) => {
                refused += 1;
                match why {
                    Refused::Malformed => c.malformed += 1,
                    Refused::TooLarge => c.too_large += 1,
                }
                0
            }
        });
        if rx == 0 {
            spin.idle();
            continue;
        }
        spin.got();
        c.batches += 1;
        c.answered += sent;
        c.reply_messages += sent;
        // Answers the TX ring had no room for.
        c.reply_errors += dropped.saturating_sub(refused);
        publish(sh, &c);
    }
    publish(sh, &c);
    let _ = x.flush();
    match x.stats() {
        Ok((0, 0, _)) => None,
        Ok((dropped, full, _)) => Some(format!(
            "AF_XDP: the kernel dropped {} requests before this worker's rings ({full} with the \
             receive ring full)",
            dropped + full
        )),
        Err(e) => Some(format!("AF_XDP: no drop counts from the kernel ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::{RrKind, UdpPacket, checksum::checksum};

    const OWN: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 0xa];

    fn rules(allow: &[Prefix], max_response: usize) -> Rules<'_> {
        Rules {
            port: 5300,
            own_mac: OWN,
            mtu: 1500,
            max_response,
            allow,
        }
    }

    fn request(reply_len: u32, payload: usize) -> Vec<u8> {
        let mut p = vec![0x5au8; payload];
        RrHeader {
            kind: RrKind::Request,
            flow: 3,
            reply_len,
            seq: 77,
            stamp_ns: 123,
        }
        .emit(&mut p)
        .unwrap();
        p
    }

    /// An IPv4 frame (one VLAN tag with `vlan`) from 198.18.0.1:4000 to
    /// 198.18.0.2:5300 holding `payload`, in a 2048-byte buffer.
    fn frame_v4(payload: &[u8], vlan: bool) -> (Vec<u8>, usize) {
        let mut f = vec![0u8; 2048];
        f[0..6].copy_from_slice(&OWN);
        f[6..12].copy_from_slice(&PEER);
        let mut at = 12;
        if vlan {
            f[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x07]);
            at = 16;
        }
        f[at..at + 2].copy_from_slice(&[0x08, 0x00]);
        let l3 = at + 2;
        f[l3] = 0x45;
        let total = 20 + 8 + payload.len();
        f[l3 + 2..l3 + 4].copy_from_slice(&(total as u16).to_be_bytes());
        f[l3 + 8] = 61;
        f[l3 + 9] = 17;
        f[l3 + 12..l3 + 16].copy_from_slice(&[198, 18, 0, 1]);
        f[l3 + 16..l3 + 20].copy_from_slice(&[198, 18, 0, 2]);
        let u = l3 + 20;
        f[u..u + 2].copy_from_slice(&4000u16.to_be_bytes());
        f[u + 2..u + 4].copy_from_slice(&5300u16.to_be_bytes());
        f[u + 4..u + 6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        // the checksum only begun, as a veth hands it on
        f[u + 6..u + 8].copy_from_slice(&[0x12, 0x34]);
        f[u + 8..u + 8 + payload.len()].copy_from_slice(payload);
        (f, u + 8 + payload.len())
    }

    fn frame_v6(payload: &[u8]) -> (Vec<u8>, usize) {
        let mut f = vec![0u8; 2048];
        f[0..6].copy_from_slice(&OWN);
        f[6..12].copy_from_slice(&PEER);
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f[20] = 17;
        f[21] = 9;
        f[22..38].copy_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        f[38..54].copy_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
        f[54..56].copy_from_slice(&4000u16.to_be_bytes());
        f[56..58].copy_from_slice(&5300u16.to_be_bytes());
        f[58..60].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f[62..62 + payload.len()].copy_from_slice(payload);
        (f, 62 + payload.len())
    }

    fn check_v4(f: &[u8], l3: usize, payload_len: usize) {
        assert_eq!(&f[0..6], &PEER);
        assert_eq!(&f[6..12], &OWN);
        assert_eq!(&f[l3 + 12..l3 + 16], &[198, 18, 0, 2]);
        assert_eq!(&f[l3 + 16..l3 + 20], &[198, 18, 0, 1]);
        assert_eq!(f[l3 + 8], HOP_LIMIT);
        assert_eq!(be16(f, l3 + 2), 28 + payload_len);
        assert_eq!(checksum(&f[l3..l3 + 20]), 0, "IPv4 header checksum");
        let u = l3 + 20;
        assert_eq!(be16(f, u), 5300);
        assert_eq!(be16(f, u + 2), 4000);
        let udp = UdpPacket::new_checked(&f[u..u + 8 + payload_len]).unwrap();
        assert!(udp.verify_checksum(
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))
        ));
        let h = RrHeader::parse(&f[u + 8..u + 8 + payload_len]).unwrap();
        assert_eq!((h.kind, h.seq, h.flow), (RrKind::Response, 77, 3));
    }

    #[test]
    fn a_request_frame_becomes_its_answer_with_valid_checksums() {
        for vlan in [false, true] {
            let (mut f, len) = frame_v4(&request(0, 64), vlan);
            let a = answer_frame(&mut f, len, &rules(&[], 0)).unwrap();
            assert_eq!(
                a,
                Answered {
                    frame: len,
                    request: 64,
                    answer: 64
                }
            );
            let l3 = if vlan { 18 } else { 14 };
            check_v4(&f, l3, 64);
            assert!(
                f[l3 + 28 + RR_HEADER_LEN..l3 + 28 + 64]
                    .iter()
                    .all(|&b| b == 0x5a)
            );
        }
        let (mut f, len) = frame_v6(&request(0, 100));
        let a = answer_frame(&mut f, len, &rules(&[], 0)).unwrap();
        assert_eq!(a.frame, len);
        assert_eq!(
            &f[22..38],
            &"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets()
        );
        assert_eq!(f[21], HOP_LIMIT);
        let udp = UdpPacket::new_checked(&f[54..54 + 108]).unwrap();
        assert!(udp.verify_checksum(
            "2001:db8::2".parse::<IpAddr>().unwrap(),
            "2001:db8::1".parse::<IpAddr>().unwrap()
        ));
    }

    #[test]
    fn answers_take_the_asked_size_only_within_the_limits() {
        // Shorter: lengths and checksums follow, the frame ends there.
        let (mut f, len) = frame_v4(&request(40, 200), false);
        let a = answer_frame(&mut f, len, &rules(&[], 0)).unwrap();
        assert_eq!((a.frame, a.request, a.answer), (42 + 40, 200, 40));
        check_v4(&f, 14, 40);
        // Longer: refused unless the source is allowed, then zeros past
        // the request (never an earlier frame's bytes).
        let (mut f, len) = frame_v4(&request(300, 64), false);
        f[len..].fill(0xee);
        assert_eq!(
            answer_frame(&mut f.clone(), len, &rules(&[], 0)),
            Err(Refused::TooLarge)
        );
        let allow = [Prefix::parse("198.18.0.0/15").unwrap()];
        let a = answer_frame(&mut f, len, &rules(&allow, 1000)).unwrap();
        assert_eq!((a.frame, a.answer), (42 + 300, 300));
        check_v4(&f, 14, 300);
        assert!(f[42 + 64..42 + 300].iter().all(|&b| b == 0));
        // Beyond one frame of the interface: too large, whoever asks.
        let (mut f, len) = frame_v4(&request(1500, 64), false);
        assert_eq!(
            answer_frame(&mut f, len, &rules(&allow, 9000)),
            Err(Refused::TooLarge)
        );
    }

    #[test]
    fn frames_that_are_no_request_get_no_answer() {
        let r = rules(&[], 0);
        let bad = |mutate: &dyn Fn(&mut Vec<u8>) -> usize| {
            let (mut f, len) = frame_v4(&request(0, 64), false);
            let len = mutate(&mut f).min(len);
            let before = f.clone();
            let got = answer_frame(&mut f, len, &r);
            assert_eq!(got, Err(Refused::Malformed));
            assert_eq!(f, before, "a refused frame is left as it came");
        };
        bad(&|f| {
            f[36..38].copy_from_slice(&53u16.to_be_bytes()); // another port
            usize::MAX
        });
        bad(&|f| {
            f[20] = 0x20; // more fragments
            usize::MAX
        });
        bad(&|f| {
            f[38..40].copy_from_slice(&200u16.to_be_bytes()); // UDP longer than the frame
            usize::MAX
        });
        bad(&|f| {
            f[47] = 1; // a response, not a request
            usize::MAX
        });
        bad(&|f| {
            f[42] = b'X'; // not rr
            usize::MAX
        });
        bad(&|f| {
            f[23] = 6; // TCP
            usize::MAX
        });
        bad(&|_| 40); // cut short
    }

    #[test]
    fn a_request_to_a_group_address_is_answered_from_the_own_mac() {
        let (mut f, len) = frame_v4(&request(0, 64), false);
        f[0..6].copy_from_slice(&[0xff; 6]);
        answer_frame(&mut f, len, &rules(&[], 0)).unwrap();
        assert_eq!(&f[0..6], &PEER);
        assert_eq!(&f[6..12], &OWN);
    }
}
