//! The protocol responder of one port with devices, without I/O: frames
//! in (`handle_frame`), answers and neighbour requests out
//! (`poll_transmit`), time passed in, nothing read from the clock.
//!
//! It answers ARP requests, IPv6 neighbour solicitations (to the address
//! or its solicited-node multicast group) and ICMP/ICMPv6 echo requests
//! addressed to the devices' own addresses on this port, and nothing
//! else: a frame for any other address, of any other kind, malformed,
//! with a bad checksum, fragmented or VLAN-tagged is ignored. An echo
//! reply is as long as its request; an ARP or neighbour answer is one
//! short frame ([`ANSWER_MAX`] bytes at most). It resolves the neighbours it is
//! given (each address's gateway, a flow's on-link destination) by ARP
//! or neighbour solicitation from the device's own MAC and address,
//! retried with a backoff at most [`TRIES_MAX`] times, and learns their
//! MACs only from answers to, or requests for, the devices' addresses:
//! the table holds the neighbours it was given and nothing more.
//!
//! It pings for `/control/action` ([`Responder::ping`]): an ICMP or
//! ICMPv6 echo request from a device's address to a destination, through
//! the next hop it is given (resolved as the other neighbours are, and
//! forgotten with the ping), sent again every [`PING_EVERY`] until an
//! echo reply with its identifier and sequence number comes back.

use crate::devices::Ethernet;
use linerate_wire::ndisc::{self, NdiscRepr};
use linerate_wire::{
    ArpPacket, ArpRepr, EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet,
    Ipv6Repr, MacAddr, arp, checksum, ip_proto,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// Requests sent for one neighbour before the responder gives up asking
/// (it still learns the neighbour from a request of its own).
pub const TRIES_MAX: u32 = 10;
/// The first wait between two requests, doubled after each up to
/// [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_millis(250);
pub const RETRY_MAX: Duration = Duration::from_secs(4);
/// The shortest frame put on the wire (without FCS): answers are padded.
const FRAME_MIN: usize = 60;
/// The longest ARP or neighbour discovery frame the responder writes (an
/// advertisement with its link-layer option), and the least room it
/// needs for one.
pub const ANSWER_MAX: usize = 14 + 40 + ndisc::HEADER_LEN + ndisc::LLADDR_OPT_LEN;
/// The hop limit of echo answers.
const TTL: u8 = 64;
/// How often a ping's echo request is sent while it has no reply.
pub const PING_EVERY: Duration = Duration::from_secs(1);
/// The bytes an echo request carries after its ICMP header.
const PING_DATA: usize = 56;

/// A device ethernet on this port as the responder sees it.
#[derive(Debug, Clone)]
pub struct Iface {
    pub name: String,
    pub mac: MacAddr,
    pub v4: Vec<Ipv4Addr>,
    pub v6: Vec<Ipv6Addr>,
}

/// A neighbour the responder resolves and reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    /// The ethernet it is resolved for (an index into the ifaces).
    pub iface: usize,
    pub ip: IpAddr,
    /// The device's own address the requests come from.
    pub from: IpAddr,
    pub mac: Option<MacAddr>,
    tries: u32,
    next_at: Instant,
    /// Asked for a ping only: forgotten with it.
    for_ping: bool,
}

/// A neighbour to resolve: (ethernet name, its address, the ethernet's
/// own address to ask from, its MAC when given rather than resolved).
pub type Want = (String, IpAddr, IpAddr, Option<MacAddr>);

#[derive(Debug, Clone, Default)]
pub struct Responder {
    ifaces: Vec<Iface>,
    neighbors: Vec<Neighbor>,
    pings: Vec<Ping>,
}

/// What a frame was, as far as the responder is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not for the devices: ignored.
    Ignored,
    /// A neighbour's MAC learnt (or learnt again); nothing to send.
    Learnt,
    /// An answer of this many bytes was written.
    Answer(usize),
}

impl Responder {
    /// The responder of a port's `ethernets`, resolving `wants`: (ethernet
    /// name, neighbour, the ethernet's own address to ask from, the MAC
    /// when it is given rather than resolved), the first requests due at
    /// `now`. Duplicates are kept once.
    pub fn new(ethernets: &[&Ethernet], wants: &[Want], now: Instant) -> Self {
        let ifaces: Vec<Iface> = ethernets
            .iter()
            .map(|e| Iface {
                name: e.name.clone(),
                mac: e.mac,
                v4: e
                    .addresses
                    .iter()
                    .filter_map(|a| match a.ip {
                        IpAddr::V4(x) => Some(x),
                        IpAddr::V6(_) => None,
                    })
                    .collect(),
                v6: e
                    .addresses
                    .iter()
                    .filter_map(|a| match a.ip {
                        IpAddr::V6(x) => Some(x),
                        IpAddr::V4(_) => None,
                    })
                    .collect(),
            })
            .collect();
        let mut neighbors: Vec<Neighbor> = Vec::new();
        for (eth, ip, from, mac) in wants {
            let Some(iface) = ifaces.iter().position(|i| &i.name == eth) else {
                continue;
            };
            if neighbors.iter().any(|n| n.iface == iface && n.ip == *ip) {
                continue;
            }
            neighbors.push(Neighbor {
                iface,
                ip: *ip,
                from: *from,
                mac: *mac,
                tries: 0,
                next_at: now,
                for_ping: false,
            });
        }
        Self {
            ifaces,
            neighbors,
            pings: Vec::new(),
        }
    }

    pub fn ifaces(&self) -> &[Iface] {
        &self.ifaces
    }

    pub fn neighbors(&self) -> &[Neighbor] {
        &self.neighbors
    }

    /// The MAC of neighbour `ip` of ethernet `eth`, once resolved.
    pub fn resolved(&self, eth: &str, ip: IpAddr) -> Option<MacAddr> {
        self.neighbors
            .iter()
            .find(|n| self.ifaces[n.iface].name == eth && n.ip == ip)
            .and_then(|n| n.mac)
    }

    /// When [`poll_transmit`](Self::poll_transmit) next has a request to
    /// send (`None`: none ever, unless a neighbour is forgotten).
    pub fn poll_at(&self) -> Option<Instant> {
        let pings = self
            .pings
            .iter()
            .filter(|p| !p.replied && self.resolved_at(p.iface, p.hop).is_some())
            .map(|p| p.due);
        self.neighbors
            .iter()
            .filter(|n| n.mac.is_none() && n.tries < TRIES_MAX)
            .map(|n| n.next_at)
            .chain(pings)
            .min()
    }

    /// A neighbour request due at `now`, written into `out` (at least
    /// [`ANSWER_MAX`] bytes, else none is): its length.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        if out.len() < ANSWER_MAX.max(FRAME_MIN + 48 + PING_DATA) {
            return None;
        }
        let Some(n) = self
            .neighbors
            .iter_mut()
            .find(|n| n.mac.is_none() && n.tries < TRIES_MAX && n.next_at <= now)
        else {
            return self.poll_ping(now, out);
        };
        let wait = RETRY_FIRST
            .saturating_mul(1 << n.tries.min(8))
            .min(RETRY_MAX);
        n.tries += 1;
        n.next_at = now + wait;
        let mac = self.ifaces[n.iface].mac;
        match (n.from, n.ip) {
            (IpAddr::V4(from), IpAddr::V4(to)) => Some(arp_frame(
                out,
                MacAddr::BROADCAST,
                ArpRepr {
                    operation: arp::REQUEST,
                    sender_mac: mac,
                    sender_ip: from,
                    target_mac: MacAddr([0; 6]),
                    target_ip: to,
                },
            )),
            (IpAddr::V6(from), IpAddr::V6(to)) => {
                let group = ndisc::solicited_node(to);
                let ns = NdiscRepr {
                    kind: ndisc::SOLICIT,
                    flags: 0,
                    target: to,
                    lladdr: Some(mac),
                };
                Some(ndisc_frame(
                    out,
                    (mac, ndisc::multicast_mac(group)),
                    (from, group),
                    ns,
                ))
            }
            _ => None,
        }
    }

    /// One received frame: an answer written into `out` (which must hold
    /// the frame and [`ANSWER_MAX`] bytes, else nothing is answered), a
    /// neighbour learnt, or nothing.
    pub fn handle_frame(&mut self, frame: &[u8], out: &mut [u8]) -> Verdict {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return Verdict::Ignored;
        };
        let eth = EthernetRepr::parse(&eth);
        let payload = &frame[linerate_wire::ethernet::HEADER_LEN..];
        if eth.src.is_multicast() || out.len() < frame.len().max(ANSWER_MAX) {
            return Verdict::Ignored;
        }
        match eth.ethertype {
            EtherType::ARP => self.arp(&eth, payload, out),
            EtherType::IPV4 => self.ipv4(&eth, payload, out),
            EtherType::IPV6 => self.ipv6(&eth, payload, out),
            _ => Verdict::Ignored,
        }
    }

    /// The ethernet (index) that owns `ip` and takes a frame sent to `dst`
    /// (its MAC, or `group` when a multicast group is allowed).
    fn owner(&self, ip: IpAddr, dst: MacAddr, group: Option<MacAddr>) -> Option<usize> {
        self.ifaces.iter().position(|i| {
            let has = match ip {
                IpAddr::V4(x) => i.v4.contains(&x),
                IpAddr::V6(x) => i.v6.contains(&x),
            };
            has && (dst == i.mac || Some(dst) == group)
        })
    }

    /// Learns `mac` for neighbour `ip` of ethernet `iface`, when it is one
    /// the responder was given.
    fn learn(&mut self, iface: usize, ip: IpAddr, mac: MacAddr) -> bool {
        if mac.is_multicast() || mac.0 == [0; 6] {
            return false;
        }
        match self
            .neighbors
            .iter_mut()
            .find(|n| n.iface == iface && n.ip == ip)
        {
            Some(n) => {
                n.mac = Some(mac);
                true
            }
            None => false,
        }
    }

    fn arp(&mut self, eth: &EthernetRepr, payload: &[u8], out: &mut [u8]) -> Verdict {
        let Ok(p) = ArpPacket::new_checked(payload) else {
            return Verdict::Ignored;
        };
        let r = ArpRepr::parse(&p);
        let target = IpAddr::V4(r.target_ip);
        let group = (r.operation == arp::REQUEST).then_some(MacAddr::BROADCAST);
        let Some(i) = self.owner(target, eth.dst, group) else {
            return Verdict::Ignored;
        };
        if r.sender_ip.is_unspecified() || r.sender_mac != eth.src {
            // A probe (RFC 5227) or a frame that lies about its sender.
            return Verdict::Ignored;
        }
        let learnt = self.learn(i, IpAddr::V4(r.sender_ip), r.sender_mac);
        if r.operation != arp::REQUEST {
            return if learnt {
                Verdict::Learnt
            } else {
                Verdict::Ignored
            };
        }
        let mac = self.ifaces[i].mac;
        Verdict::Answer(arp_frame(
            out,
            r.sender_mac,
            ArpRepr {
                operation: arp::REPLY,
                sender_mac: mac,
                sender_ip: r.target_ip,
                target_mac: r.sender_mac,
                target_ip: r.sender_ip,
            },
        ))
    }

    fn ipv4(&mut self, eth: &EthernetRepr, payload: &[u8], out: &mut [u8]) -> Verdict {
        let Ok(p) = Ipv4Packet::new_checked(payload) else {
            return Verdict::Ignored;
        };
        if p.protocol() != ip_proto::ICMP
            || !p.verify_checksum()
            || p.more_frags()
            || p.frag_offset() != 0
        {
            return Verdict::Ignored;
        }
        let Some(i) = self.owner(IpAddr::V4(p.dst()), eth.dst, None) else {
            return Verdict::Ignored;
        };
        let msg = p.payload();
        if msg.len() < 8 || msg[1] != 0 || checksum::checksum(msg) != 0 {
            return Verdict::Ignored;
        }
        if msg[0] == 0 {
            return self.replied(i, (IpAddr::V4(p.src()), IpAddr::V4(p.dst())), msg);
        }
        if msg[0] != 8 {
            return Verdict::Ignored;
        }
        let h = linerate_wire::ethernet::HEADER_LEN;
        let len = h + Ipv4Repr::LEN + msg.len();
        write_eth(out, self.ifaces[i].mac, eth.src, EtherType::IPV4);
        let icmp = &mut out[h + Ipv4Repr::LEN..len];
        icmp.copy_from_slice(msg);
        icmp[0] = 0;
        icmp[2..4].fill(0);
        let c = checksum::checksum(icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        Ipv4Repr {
            src: p.dst(),
            dst: p.src(),
            protocol: ip_proto::ICMP,
            payload_len: msg.len(),
            ttl: TTL,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut out[h..len]));
        Verdict::Answer(pad(out, len))
    }

    fn ipv6(&mut self, eth: &EthernetRepr, payload: &[u8], out: &mut [u8]) -> Verdict {
        let Ok(p) = Ipv6Packet::new_checked(payload) else {
            return Verdict::Ignored;
        };
        let (src, dst, msg) = (p.src(), p.dst(), p.payload());
        if p.next_header() != ip_proto::ICMPV6
            || msg.len() < 8
            || msg[1] != 0
            || !ndisc::checksum_ok(msg, src, dst)
        {
            return Verdict::Ignored;
        }
        match msg[0] {
            128 => self.echo6(eth, (src, dst), msg, out),
            129 => match self.owner(IpAddr::V6(dst), eth.dst, None) {
                Some(i) => self.replied(i, (IpAddr::V6(src), IpAddr::V6(dst)), msg),
                None => Verdict::Ignored,
            },
            ndisc::SOLICIT | ndisc::ADVERT if p.hop_limit() == 255 => {
                self.ndisc(eth, (src, dst), msg, out)
            }
            _ => Verdict::Ignored,
        }
    }

    fn echo6(
        &mut self,
        eth: &EthernetRepr,
        (src, dst): (Ipv6Addr, Ipv6Addr),
        msg: &[u8],
        out: &mut [u8],
    ) -> Verdict {
        let Some(i) = self.owner(IpAddr::V6(dst), eth.dst, None) else {
            return Verdict::Ignored;
        };
        if src.is_multicast() || src.is_unspecified() {
            return Verdict::Ignored;
        }
        let h = linerate_wire::ethernet::HEADER_LEN + Ipv6Repr::LEN;
        let len = h + msg.len();
        write_eth(out, self.ifaces[i].mac, eth.src, EtherType::IPV6);
        write_ipv6(out, dst, src, msg.len(), TTL);
        let icmp = &mut out[h..len];
        icmp.copy_from_slice(msg);
        icmp[0] = 129;
        let c = ndisc::icmpv6_checksum(icmp, dst, src);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        Verdict::Answer(pad(out, len))
    }

    fn ndisc(
        &mut self,
        eth: &EthernetRepr,
        (src, dst): (Ipv6Addr, Ipv6Addr),
        msg: &[u8],
        out: &mut [u8],
    ) -> Verdict {
        let Ok(nd) = NdiscRepr::parse(msg) else {
            return Verdict::Ignored;
        };
        if nd.kind == ndisc::ADVERT {
            // An answer to one of the devices (or to all nodes).
            let all = "ff02::1".parse::<Ipv6Addr>().expect("an address");
            let owner = if dst == all {
                self.ifaces
                    .iter()
                    .position(|i| eth.dst == ndisc::multicast_mac(all) && !i.v6.is_empty())
            } else {
                self.owner(IpAddr::V6(dst), eth.dst, None)
            };
            let learnt = owner.is_some_and(|i| {
                self.learn(i, IpAddr::V6(nd.target), nd.lladdr.unwrap_or(eth.src))
            });
            return if learnt {
                Verdict::Learnt
            } else {
                Verdict::Ignored
            };
        }
        let group = ndisc::solicited_node(nd.target);
        if dst != nd.target && dst != group {
            return Verdict::Ignored;
        }
        let mcast = ndisc::multicast_mac(group);
        let Some(i) = self.owner(IpAddr::V6(nd.target), eth.dst, Some(mcast)) else {
            return Verdict::Ignored;
        };
        if src.is_unspecified() || src.is_multicast() {
            // Duplicate address detection: not answered.
            return Verdict::Ignored;
        }
        let to = nd.lladdr.unwrap_or(eth.src);
        self.learn(i, IpAddr::V6(src), to);
        let mac = self.ifaces[i].mac;
        let na = NdiscRepr {
            kind: ndisc::ADVERT,
            flags: ndisc::FLAG_SOLICITED | ndisc::FLAG_OVERRIDE,
            target: nd.target,
            lladdr: Some(mac),
        };
        Verdict::Answer(ndisc_frame(out, (mac, to), (nd.target, src), na))
    }
}

fn write_eth(out: &mut [u8], src: MacAddr, dst: MacAddr, ethertype: u16) {
    EthernetRepr {
        src,
        dst,
        ethertype,
    }
    .emit(&mut EthernetFrame::new_unchecked(out));
}

fn write_ipv6(out: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, payload_len: usize, hop_limit: u8) {
    let h = linerate_wire::ethernet::HEADER_LEN;
    Ipv6Repr {
        src,
        dst,
        next_header: ip_proto::ICMPV6,
        payload_len,
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut Ipv6Packet::new_unchecked(
        &mut out[h..h + Ipv6Repr::LEN],
    ));
}

/// `len` bytes, padded with zeros to the shortest frame.
fn pad(out: &mut [u8], len: usize) -> usize {
    if len < FRAME_MIN {
        out[len..FRAME_MIN].fill(0);
        FRAME_MIN
    } else {
        len
    }
}

fn arp_frame(out: &mut [u8], dst: MacAddr, r: ArpRepr) -> usize {
    write_eth(out, r.sender_mac, dst, EtherType::ARP);
    let h = linerate_wire::ethernet::HEADER_LEN;
    r.emit(&mut ArpPacket::new_unchecked(&mut out[h..h + arp::LEN]));
    pad(out, h + arp::LEN)
}

/// A neighbour discovery frame: (source, destination) MACs and IPv6
/// addresses, hop limit 255.
fn ndisc_frame(
    out: &mut [u8],
    (smac, dmac): (MacAddr, MacAddr),
    (src, dst): (Ipv6Addr, Ipv6Addr),
    nd: NdiscRepr,
) -> usize {
    let h = linerate_wire::ethernet::HEADER_LEN + Ipv6Repr::LEN;
    let n = nd.buffer_len();
    write_eth(out, smac, dmac, EtherType::IPV6);
    write_ipv6(out, src, dst, n, 255);
    nd.emit(&mut out[h..h + n], src, dst);
    pad(out, h + n)
}

#[path = "protocols_ping.rs"]
mod ping;
pub use ping::Ping;

#[cfg(test)]
#[path = "protocols_tests.rs"]
mod tests;
