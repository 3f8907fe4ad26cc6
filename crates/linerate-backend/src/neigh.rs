//! The destination MAC for frames built by hand: the next hop toward an
//! address (the kernel's routing table) and that hop's link-layer address
//! (the kernel's neighbour table, read over rtnetlink). A missing entry is
//! resolved by the kernel itself: one empty UDP datagram to the address
//! makes it send ARP or neighbour solicitation, and the table is read again
//! for a short while.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// The gateway a route of `iface` gives for `dst`, or `dst` itself when it
/// is on the link (longest prefix wins; no route on `iface`: `dst`).
pub fn next_hop(iface: &str, dst: IpAddr) -> IpAddr {
    let best = match dst {
        IpAddr::V4(d) => routes_v4(iface)
            .into_iter()
            .filter(|(net, len, _)| prefix_v4(d, *len) == *net)
            .max_by_key(|(_, len, _)| *len)
            .and_then(|(_, _, gw)| gw.map(IpAddr::V4)),
        IpAddr::V6(d) => routes_v6(iface)
            .into_iter()
            .filter(|(net, len, _)| prefix_v6(d, *len) == *net)
            .max_by_key(|(_, len, _)| *len)
            .and_then(|(_, _, gw)| gw.map(IpAddr::V6)),
    };
    best.unwrap_or(dst)
}

fn prefix_v4(a: Ipv4Addr, len: u8) -> Ipv4Addr {
    let bits = u32::from(a);
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    };
    Ipv4Addr::from(bits & mask)
}

fn prefix_v6(a: Ipv6Addr, len: u8) -> Ipv6Addr {
    let bits = u128::from(a);
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    };
    Ipv6Addr::from(bits & mask)
}

/// IPv4 routes of `iface` from /proc/net/route: (network, prefix length,
/// gateway).
fn routes_v4(iface: &str) -> Vec<(Ipv4Addr, u8, Option<Ipv4Addr>)> {
    let text = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    parse_routes_v4(&text, iface)
}

fn parse_routes_v4(text: &str, iface: &str) -> Vec<(Ipv4Addr, u8, Option<Ipv4Addr>)> {
    // Fields are little-endian hex of network-order addresses.
    let addr = |h: &str| {
        u32::from_str_radix(h, 16)
            .ok()
            .map(|v| Ipv4Addr::from(v.swap_bytes()))
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 || f[0] != iface {
                return None;
            }
            let (net, gw, mask) = (addr(f[1])?, addr(f[2])?, addr(f[7])?);
            let len = u32::from(mask).count_ones() as u8;
            Some((net, len, (!gw.is_unspecified()).then_some(gw)))
        })
        .collect()
}

/// IPv6 routes of `iface` from /proc/net/ipv6_route.
fn routes_v6(iface: &str) -> Vec<(Ipv6Addr, u8, Option<Ipv6Addr>)> {
    let text = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    parse_routes_v6(&text, iface)
}

fn parse_routes_v6(text: &str, iface: &str) -> Vec<(Ipv6Addr, u8, Option<Ipv6Addr>)> {
    let addr = |h: &str| u128::from_str_radix(h, 16).ok().map(Ipv6Addr::from);
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 || f[9] != iface {
                return None;
            }
            let net = addr(f[0])?;
            let len = u8::from_str_radix(f[1], 16).ok()?;
            let gw = addr(f[4])?;
            Some((net, len, (!gw.is_unspecified()).then_some(gw)))
        })
        .collect()
}

/// The neighbour table's link-layer address for `ip` on `iface`, if the
/// entry is usable (reachable, stale, delay, probe or permanent).
pub fn lookup(iface: &str, ip: IpAddr) -> io::Result<Option<[u8; 6]>> {
    let ifindex = crate::iface::index(iface)?;
    Ok(dump(ip.is_ipv6())?
        .into_iter()
        .find(|n| n.ifindex == ifindex && n.ip == ip && n.usable())
        .map(|n| n.mac))
}

/// The MAC for frames to `dst` out of `iface`: the next hop's, from the
/// neighbour table, resolved by the kernel when missing (waiting up to
/// `wait`). An error says which hop did not answer.
pub fn resolve(iface: &str, dst: IpAddr, wait: Duration) -> io::Result<[u8; 6]> {
    let hop = next_hop(iface, dst);
    if let Some(mac) = lookup(iface, hop)? {
        return Ok(mac);
    }
    // One empty datagram to the discard port, sent out of this interface:
    // the kernel resolves the hop to send it.
    let bind: SocketAddr = if hop.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let u = UdpSocket::bind(bind)?;
    let _ = nix::sys::socket::setsockopt(
        &u,
        nix::sys::socket::sockopt::BindToDevice,
        &std::ffi::OsString::from(iface),
    );
    let scope = if let IpAddr::V6(v6) = hop
        && (v6.segments()[0] & 0xffc0) == 0xfe80
    {
        crate::iface::index(iface)? as u32
    } else {
        0
    };
    let to: SocketAddr = match hop {
        IpAddr::V4(v4) => (v4, 9).into(),
        IpAddr::V6(v6) => std::net::SocketAddrV6::new(v6, 9, 0, scope).into(),
    };
    let _ = u.send_to(&[], to);
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(mac) = lookup(iface, hop)? {
            return Ok(mac);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "no link-layer address for {hop} on {iface} (the next hop toward {dst}) within {} ms",
            wait.as_millis()
        ),
    ))
}

/// One neighbour table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Neighbour {
    ifindex: i32,
    ip: IpAddr,
    mac: [u8; 6],
    state: u16,
}

impl Neighbour {
    fn usable(&self) -> bool {
        // NUD_INCOMPLETE 0x01, NUD_FAILED 0x20, NUD_NOARP 0x40: no address.
        const USABLE: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x80; // reachable stale delay probe permanent
        self.state & USABLE != 0 && self.mac != [0; 6]
    }
}

use crate::rtnl::{NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN};
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NLM_F_DUMP: u16 = 0x300;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;

/// The kernel's neighbour table for one family, over rtnetlink.
fn dump(v6: bool) -> io::Result<Vec<Neighbour>> {
    let sock = crate::rtnl::socket()?;
    let mut body = [0u8; 12];
    body[0] = if v6 { libc::AF_INET6 } else { libc::AF_INET } as u8;
    crate::rtnl::send(&sock, RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, &body)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = crate::rtnl::recv(&sock, &mut buf)?;
        if n == 0 {
            break;
        }
        if parse_dump(&buf[..n], &mut out)? {
            break;
        }
    }
    Ok(out)
}

/// Parses one datagram of an RTM_GETNEIGH dump into `out`; true at the end
/// of the dump. Malformed messages end the parse of this datagram.
fn parse_dump(mut b: &[u8], out: &mut Vec<Neighbour>) -> io::Result<bool> {
    let u16_at = |b: &[u8], i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    while b.len() >= NLMSG_HDRLEN {
        let len = u32_at(b, 0) as usize;
        let kind = u16_at(b, 4);
        if len < NLMSG_HDRLEN || len > b.len() {
            return Ok(false);
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = if len >= NLMSG_HDRLEN + 4 {
                    i32::from_ne_bytes([b[16], b[17], b[18], b[19]])
                } else {
                    0
                };
                if errno == 0 {
                    return Ok(true);
                }
                return Err(io::Error::from_raw_os_error(-errno));
            }
            RTM_NEWNEIGH if len >= NLMSG_HDRLEN + 12 => {
                let m = &b[NLMSG_HDRLEN..len];
                let family = m[0];
                let ifindex = i32::from_ne_bytes([m[4], m[5], m[6], m[7]]);
                let state = u16::from_ne_bytes([m[8], m[9]]);
                let (mut ip, mut mac) = (None, None);
                let mut a = &m[12..];
                while a.len() >= 4 {
                    let alen = u16_at(a, 0) as usize;
                    let atype = u16_at(a, 2) & 0x3fff;
                    if alen < 4 || alen > a.len() {
                        break;
                    }
                    let v = &a[4..alen];
                    match (atype, family as i32, v.len()) {
                        (NDA_DST, libc::AF_INET, 4) => {
                            ip = Some(IpAddr::from(<[u8; 4]>::try_from(v).unwrap_or_default()));
                        }
                        (NDA_DST, libc::AF_INET6, 16) => {
                            ip = Some(IpAddr::from(<[u8; 16]>::try_from(v).unwrap_or_default()));
                        }
                        (NDA_LLADDR, _, 6) => mac = <[u8; 6]>::try_from(v).ok(),
                        _ => {}
                    }
                    let step = (alen + 3) & !3;
                    a = &a[step.min(a.len())..];
                }
                if let (Some(ip), Some(mac)) = (ip, mac) {
                    out.push(Neighbour {
                        ifindex,
                        ip,
                        mac,
                        state,
                    });
                }
            }
            _ => {}
        }
        let step = (len + 3) & !3;
        b = &b[step.min(b.len())..];
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_give_the_gateway_or_the_address_itself() {
        let v4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  eth0\t00000000\t010012C6\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                  eth0\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                  eth1\t000013C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let r = parse_routes_v4(v4, "eth0");
        assert_eq!(
            r,
            vec![
                (Ipv4Addr::UNSPECIFIED, 0, Some(Ipv4Addr::new(198, 18, 0, 1))),
                (Ipv4Addr::new(198, 18, 0, 0), 24, None),
            ]
        );
        let v6 = "20010db8000000000000000000000000 20 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth0\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 20010db8000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n";
        let r6 = parse_routes_v6(v6, "eth0");
        assert_eq!(r6.len(), 2);
        assert_eq!(r6[1].2, Some("2001:db8::1".parse().unwrap()));
        assert_eq!(
            prefix_v4(Ipv4Addr::new(198, 18, 0, 77), 24),
            Ipv4Addr::new(198, 18, 0, 0)
        );
        assert_eq!(
            prefix_v4(Ipv4Addr::new(198, 18, 0, 77), 0),
            Ipv4Addr::UNSPECIFIED
        );
    }

    #[test]
    fn a_neighbour_dump_is_parsed_and_damage_is_survived() {
        // One RTM_NEWNEIGH for 198.18.0.2 -> 02:00:00:00:00:0b (reachable)
        // on ifindex 5, then NLMSG_DONE.
        let mut m = Vec::new();
        let body_len = 12 + 8 + 12;
        m.extend_from_slice(&((NLMSG_HDRLEN + body_len) as u32).to_ne_bytes());
        m.extend_from_slice(&RTM_NEWNEIGH.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0]);
        m.extend_from_slice(&5i32.to_ne_bytes());
        m.extend_from_slice(&0x02u16.to_ne_bytes());
        m.extend_from_slice(&[0, 0]);
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&NDA_DST.to_ne_bytes());
        m.extend_from_slice(&[198, 18, 0, 2]);
        m.extend_from_slice(&10u16.to_ne_bytes());
        m.extend_from_slice(&NDA_LLADDR.to_ne_bytes());
        m.extend_from_slice(&[2, 0, 0, 0, 0, 0x0b, 0, 0]);
        let mut done = vec![0u8; NLMSG_HDRLEN];
        done[0..4].copy_from_slice(&(NLMSG_HDRLEN as u32).to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        let mut all = m.clone();
        all.extend_from_slice(&done);
        let mut out = Vec::new();
        assert!(parse_dump(&all, &mut out).unwrap());
        assert_eq!(
            out,
            vec![Neighbour {
                ifindex: 5,
                ip: "198.18.0.2".parse().unwrap(),
                mac: [2, 0, 0, 0, 0, 0x0b],
                state: 2
            }]
        );
        assert!(out[0].usable());
        // Every truncation of it parses without a panic.
        for cut in 0..all.len() {
            let _ = parse_dump(&all[..cut], &mut Vec::new());
        }
    }

    #[test]
    fn the_kernel_table_can_be_read() {
        // Loopback has no neighbours, but the dump itself must work.
        let v4 = dump(false).unwrap();
        assert!(v4.iter().all(|n| n.ip.is_ipv4()));
        assert!(dump(true).is_ok());
    }
}
