//! The responder's pings (`/control/action`): echo requests sent from a
//! device's address through a next hop, their replies matched by
//! identifier, sequence number and addresses.

use super::{
    EtherType, Instant, IpAddr, Ipv4Packet, Ipv4Repr, MacAddr, Neighbor, PING_DATA, PING_EVERY,
    Responder, TRIES_MAX, TTL, Verdict, checksum, ip_proto, ndisc, pad, write_eth, write_ipv6,
};
use linerate_wire::Ipv6Repr;

/// An echo request of [`Responder::ping`] and whether it was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    pub iface: usize,
    pub from: IpAddr,
    pub dst: IpAddr,
    /// The neighbour the request goes to (`dst` on link, else a gateway).
    pub hop: IpAddr,
    pub ident: u16,
    pub seq: u16,
    pub replied: bool,
    /// When its echo request is next sent (once the next hop is known).
    pub(super) due: Instant,
}

impl Responder {
    pub(super) fn resolved_at(&self, iface: usize, ip: IpAddr) -> Option<MacAddr> {
        self.neighbors
            .iter()
            .find(|n| n.iface == iface && n.ip == ip)
            .and_then(|n| n.mac)
    }

    /// A ping from `from` (an address of ethernet `eth`) to `dst` through
    /// neighbour `hop` (its MAC when given), its first request due at
    /// `now`: false when `eth` is not this responder's. A neighbour not
    /// in the table is asked for (and forgotten with the ping); one given
    /// up on is asked for again.
    pub fn ping(
        &mut self,
        eth: &str,
        (from, dst, hop, hop_mac): (IpAddr, IpAddr, IpAddr, Option<MacAddr>),
        (ident, seq): (u16, u16),
        now: Instant,
    ) -> bool {
        let Some(iface) = self.ifaces.iter().position(|i| i.name == eth) else {
            return false;
        };
        match self
            .neighbors
            .iter_mut()
            .find(|n| n.iface == iface && n.ip == hop)
        {
            Some(n) if n.mac.is_none() && n.tries >= TRIES_MAX => {
                n.tries = 0;
                n.next_at = now;
            }
            Some(_) => {}
            None => self.neighbors.push(Neighbor {
                iface,
                ip: hop,
                from,
                mac: hop_mac,
                tries: 0,
                next_at: now,
                for_ping: true,
            }),
        }
        self.pings.push(Ping {
            iface,
            from,
            dst,
            hop,
            ident,
            seq,
            replied: false,
            due: now,
        });
        true
    }

    /// The pings of `ident`, taken out (with the neighbours asked for
    /// them alone).
    pub fn take_pings(&mut self, ident: u16) -> Vec<Ping> {
        let (mine, rest) = std::mem::take(&mut self.pings)
            .into_iter()
            .partition(|p| p.ident == ident);
        self.pings = rest;
        let pings = &self.pings;
        self.neighbors
            .retain(|n| !n.for_ping || pings.iter().any(|p| p.iface == n.iface && p.hop == n.ip));
        mine
    }

    pub fn pings(&self) -> &[Ping] {
        &self.pings
    }

    /// An echo request due at `now` (its next hop resolved, not answered,
    /// its last request sent [`PING_EVERY`] ago or more), written into `out`: its length.
    pub(super) fn poll_ping(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        let k = self.pings.iter().position(|p| {
            !p.replied && p.due <= now && self.resolved_at(p.iface, p.hop).is_some()
        })?;
        let p = &mut self.pings[k];
        p.due = now + PING_EVERY;
        let p = p.clone();
        let hop = self.resolved_at(p.iface, p.hop)?;
        let mac = self.ifaces[p.iface].mac;
        echo_request(out, (mac, hop), &p)
    }

    /// An echo reply from `src` to `dst` (an address of ethernet `iface`).
    pub(super) fn replied(
        &mut self,
        iface: usize,
        (src, dst): (IpAddr, IpAddr),
        msg: &[u8],
    ) -> Verdict {
        let (ident, seq) = (
            u16::from_be_bytes([msg[4], msg[5]]),
            u16::from_be_bytes([msg[6], msg[7]]),
        );
        let mut hit = false;
        for p in self.pings.iter_mut().filter(|p| {
            p.iface == iface && p.from == dst && p.dst == src && (p.ident, p.seq) == (ident, seq)
        }) {
            p.replied = true;
            hit = true;
        }
        if hit {
            Verdict::Learnt
        } else {
            Verdict::Ignored
        }
    }
}

/// Ping `p`'s echo request from `smac` to `dmac` (ICMP or ICMPv6, its
/// data the bytes 0, 1, 2, …): its length.
fn echo_request(out: &mut [u8], (smac, dmac): (MacAddr, MacAddr), p: &Ping) -> Option<usize> {
    let h = linerate_wire::ethernet::HEADER_LEN;
    let msg_len = 8 + PING_DATA;
    let fill = |icmp: &mut [u8], kind: u8| {
        icmp[0] = kind;
        icmp[1..4].fill(0);
        icmp[4..6].copy_from_slice(&p.ident.to_be_bytes());
        icmp[6..8].copy_from_slice(&p.seq.to_be_bytes());
        for (k, b) in icmp[8..].iter_mut().enumerate() {
            *b = k as u8;
        }
    };
    match (p.from, p.dst) {
        (IpAddr::V4(from), IpAddr::V4(dst)) => {
            let len = h + Ipv4Repr::LEN + msg_len;
            write_eth(out, smac, dmac, EtherType::IPV4);
            let icmp = &mut out[h + Ipv4Repr::LEN..len];
            fill(icmp, 8);
            let c = checksum::checksum(icmp);
            icmp[2..4].copy_from_slice(&c.to_be_bytes());
            Ipv4Repr {
                src: from,
                dst,
                protocol: ip_proto::ICMP,
                payload_len: msg_len,
                ttl: TTL,
                dscp: 0,
                ecn: 0,
                ident: p.seq,
                dont_frag: true,
            }
            .emit(&mut Ipv4Packet::new_unchecked(&mut out[h..len]));
            Some(pad(out, len))
        }
        (IpAddr::V6(from), IpAddr::V6(dst)) => {
            let h6 = h + Ipv6Repr::LEN;
            write_eth(out, smac, dmac, EtherType::IPV6);
            write_ipv6(out, from, dst, msg_len, TTL);
            let icmp = &mut out[h6..h6 + msg_len];
            fill(icmp, 128);
            let c = ndisc::icmpv6_checksum(icmp, from, dst);
            icmp[2..4].copy_from_slice(&c.to_be_bytes());
            Some(pad(out, h6 + msg_len))
        }
        _ => None,
    }
}
