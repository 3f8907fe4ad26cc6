//! IPv6 neighbour discovery (RFC 4861): neighbour solicitations and
//! advertisements with their link-layer address options, the
//! solicited-node multicast address and its Ethernet address (RFC 2464),
//! and the ICMPv6 checksum over the pseudo-header.

use crate::checksum;
use crate::error::{Layer, need};
use crate::{Error, MacAddr, be16, ip_proto, put16};
use core::net::Ipv6Addr;

/// ICMPv6 types.
pub const SOLICIT: u8 = 135;
pub const ADVERT: u8 = 136;

/// Advertisement flags (the first byte after the checksum).
pub const FLAG_ROUTER: u8 = 0x80;
pub const FLAG_SOLICITED: u8 = 0x40;
pub const FLAG_OVERRIDE: u8 = 0x20;

/// Type, code, checksum, reserved or flags, target.
pub const HEADER_LEN: usize = 24;
/// A link-layer address option for Ethernet: type, length 1, the MAC.
pub const LLADDR_OPT_LEN: usize = 8;
/// The option types.
const OPT_SOURCE_LLADDR: u8 = 1;
const OPT_TARGET_LLADDR: u8 = 2;
/// Most options walked in one message.
const OPTIONS_MAX: usize = 16;

/// A solicitation or an advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdiscRepr {
    /// [`SOLICIT`] or [`ADVERT`].
    pub kind: u8,
    /// An advertisement's R, S and O flags (0 in a solicitation).
    pub flags: u8,
    pub target: Ipv6Addr,
    /// The source (solicitation) or target (advertisement) link-layer
    /// address option.
    pub lladdr: Option<MacAddr>,
}

impl NdiscRepr {
    /// Reads an ICMPv6 message (`msg`, the whole of it) that is a
    /// solicitation or advertisement of code 0; options other than the
    /// link-layer address are skipped; the checksum is not checked here
    /// ([`checksum_ok`]).
    pub fn parse(msg: &[u8]) -> Result<Self, Error> {
        need(Layer::Ndisc, HEADER_LEN, msg.len())?;
        let kind = msg[0];
        if (kind != SOLICIT && kind != ADVERT) || msg[1] != 0 {
            return Err(Error::Unsupported {
                layer: Layer::Ndisc,
                what: "not a neighbour solicitation or advertisement",
            });
        }
        let mut t = [0u8; 16];
        t.copy_from_slice(&msg[8..24]);
        let want = if kind == SOLICIT {
            OPT_SOURCE_LLADDR
        } else {
            OPT_TARGET_LLADDR
        };
        let mut lladdr = None;
        let mut at = HEADER_LEN;
        for _ in 0..OPTIONS_MAX {
            if at >= msg.len() {
                break;
            }
            need(Layer::Ndisc, at + 2, msg.len())?;
            let len = usize::from(msg[at + 1]) * 8;
            if len == 0 {
                return Err(Error::Malformed {
                    layer: Layer::Ndisc,
                    what: "an option of length 0",
                });
            }
            need(Layer::Ndisc, at + len, msg.len())?;
            if msg[at] == want && len == LLADDR_OPT_LEN {
                let mut m = [0u8; 6];
                m.copy_from_slice(&msg[at + 2..at + 8]);
                lladdr = Some(MacAddr(m));
            }
            at += len;
        }
        Ok(Self {
            kind,
            flags: if kind == ADVERT { msg[4] & 0xe0 } else { 0 },
            target: Ipv6Addr::from(t),
            lladdr,
        })
    }

    /// The message's length.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + if self.lladdr.is_some() {
                LLADDR_OPT_LEN
            } else {
                0
            }
    }

    /// Writes the message into `msg` (at least [`buffer_len`](Self::buffer_len)
    /// bytes) with its checksum for an IPv6 header from `src` to `dst`.
    pub fn emit(&self, msg: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
        let n = self.buffer_len();
        let msg = &mut msg[..n];
        msg.fill(0);
        msg[0] = self.kind;
        if self.kind == ADVERT {
            msg[4] = self.flags & 0xe0;
        }
        msg[8..24].copy_from_slice(&self.target.octets());
        if let Some(m) = self.lladdr {
            msg[24] = if self.kind == SOLICIT {
                OPT_SOURCE_LLADDR
            } else {
                OPT_TARGET_LLADDR
            };
            msg[25] = 1;
            msg[26..32].copy_from_slice(&m.0);
        }
        let c = icmpv6_checksum(msg, src, dst);
        put16(msg, 2, c);
    }
}

/// The checksum field value for ICMPv6 message `msg` (its own checksum
/// field taken as 0) between `src` and `dst`.
pub fn icmpv6_checksum(msg: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> u16 {
    let acc = checksum::pseudo_v6(src, dst, ip_proto::ICMPV6, msg.len() as u32);
    let acc = checksum::sum(msg, acc);
    // The field's own value summed in is taken out again.
    let field = if msg.len() >= 4 { be16(msg, 2) } else { 0 };
    let acc = acc + u32::from(!field);
    !checksum::fold(acc)
}

/// Whether ICMPv6 message `msg` carries a good checksum between `src`
/// and `dst`.
pub fn checksum_ok(msg: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> bool {
    let acc = checksum::pseudo_v6(src, dst, ip_proto::ICMPV6, msg.len() as u32);
    msg.len() >= 4 && checksum::fold(checksum::sum(msg, acc)) == 0xffff
}

/// `a`'s solicited-node multicast address, ff02::1:ffXX:XXXX.
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    let mut m = [0u8; 16];
    m[0] = 0xff;
    m[1] = 0x02;
    m[11] = 0x01;
    m[12] = 0xff;
    m[13..].copy_from_slice(&o[13..]);
    Ipv6Addr::from(m)
}

/// The Ethernet address IPv6 multicast address `a` is sent to:
/// 33:33 and its last four bytes.
pub fn multicast_mac(a: Ipv6Addr) -> MacAddr {
    let o = a.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_solicitation_round_trips_with_a_good_checksum() {
        let src: Ipv6Addr = "2001:db8:1::2".parse().unwrap();
        let target: Ipv6Addr = "2001:db8:1::1".parse().unwrap();
        let dst = solicited_node(target);
        assert_eq!(dst, "ff02::1:ff00:1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(multicast_mac(dst), MacAddr([0x33, 0x33, 0xff, 0, 0, 1]));
        let r = NdiscRepr {
            kind: SOLICIT,
            flags: 0,
            target,
            lladdr: Some(MacAddr([2, 0, 0, 0, 1, 2])),
        };
        let mut b = [0u8; 32];
        r.emit(&mut b, src, dst);
        assert!(checksum_ok(&b, src, dst));
        assert!(!checksum_ok(&b, src, target), "the pseudo-header counts");
        assert_eq!(icmpv6_checksum(&b, src, dst), be16(&b, 2));
        assert_eq!(NdiscRepr::parse(&b).unwrap(), r);
        assert_eq!(b[24..26], [1, 1], "source link-layer address option");
        // Truncated options, a zero-length option, another type.
        assert!(NdiscRepr::parse(&b[..30]).is_err());
        let mut z = b;
        z[25] = 0;
        assert!(NdiscRepr::parse(&z).is_err());
        z[0] = 128;
        assert!(NdiscRepr::parse(&z).is_err());
    }

    #[test]
    fn an_advertisement_keeps_its_flags_and_target_address() {
        let r = NdiscRepr {
            kind: ADVERT,
            flags: FLAG_SOLICITED | FLAG_OVERRIDE,
            target: "2001:db8:2::2".parse().unwrap(),
            lladdr: Some(MacAddr([2, 0, 0, 0, 2, 2])),
        };
        let mut b = [0u8; 32];
        let (s, d) = (
            "2001:db8:2::2".parse().unwrap(),
            "2001:db8:2::1".parse().unwrap(),
        );
        r.emit(&mut b, s, d);
        assert_eq!(b[4], 0x60);
        assert_eq!(b[24], 2, "target link-layer address option");
        assert_eq!(NdiscRepr::parse(&b).unwrap(), r);
        assert!(checksum_ok(&b, s, d));
    }
}
