//! ARP (RFC 826) for IPv4 over Ethernet: a zero-copy view of the 28-byte
//! packet and its `Repr`. Other hardware or protocol types are refused by
//! `new_checked`.

use crate::error::{Layer, need};
use crate::{Error, MacAddr, be16, put16};
use core::net::Ipv4Addr;

/// An Ethernet/IPv4 ARP packet's length.
pub const LEN: usize = 28;

/// The operations.
pub const REQUEST: u16 = 1;
pub const REPLY: u16 = 2;

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: core::ops::Range<usize> = 8..14;
    pub const SPA: core::ops::Range<usize> = 14..18;
    pub const THA: core::ops::Range<usize> = 18..24;
    pub const TPA: core::ops::Range<usize> = 24..28;
}

/// A view of an ARP packet (the Ethernet payload).
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Checks the length and that it is Ethernet (1) / IPv4 (0x0800) with
    /// lengths 6 and 4.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self { buffer };
        need(Layer::Arp, LEN, p.buffer.as_ref().len())?;
        let b = p.buffer.as_ref();
        if be16(b, field::HTYPE) != 1
            || be16(b, field::PTYPE) != crate::EtherType::IPV4
            || b[field::HLEN] != 6
            || b[field::PLEN] != 4
        {
            return Err(Error::Unsupported {
                layer: Layer::Arp,
                what: "not Ethernet/IPv4 ARP",
            });
        }
        Ok(p)
    }

    pub fn operation(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER)
    }

    fn mac(&self, r: core::ops::Range<usize>) -> MacAddr {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.buffer.as_ref()[r]);
        MacAddr(m)
    }

    fn ip(&self, r: core::ops::Range<usize>) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[r];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn sender_mac(&self) -> MacAddr {
        self.mac(field::SHA)
    }

    pub fn sender_ip(&self) -> Ipv4Addr {
        self.ip(field::SPA)
    }

    pub fn target_mac(&self) -> MacAddr {
        self.mac(field::THA)
    }

    pub fn target_ip(&self) -> Ipv4Addr {
        self.ip(field::TPA)
    }
}

/// An Ethernet/IPv4 ARP packet's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    pub operation: u16,
    pub sender_mac: MacAddr,
    pub sender_ip: Ipv4Addr,
    pub target_mac: MacAddr,
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    pub const LEN: usize = LEN;

    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Self {
        Self {
            operation: p.operation(),
            sender_mac: p.sender_mac(),
            sender_ip: p.sender_ip(),
            target_mac: p.target_mac(),
            target_ip: p.target_ip(),
        }
    }

    /// Writes the packet into the view's first [`LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ArpPacket<T>) {
        let b = p.buffer.as_mut();
        put16(b, field::HTYPE, 1);
        put16(b, field::PTYPE, crate::EtherType::IPV4);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
        put16(b, field::OPER, self.operation);
        b[field::SHA].copy_from_slice(&self.sender_mac.0);
        b[field::SPA].copy_from_slice(&self.sender_ip.octets());
        b[field::THA].copy_from_slice(&self.target_mac.0);
        b[field::TPA].copy_from_slice(&self.target_ip.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_other_kinds_are_refused() {
        let r = ArpRepr {
            operation: REQUEST,
            sender_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            sender_ip: Ipv4Addr::new(198, 18, 1, 2),
            target_mac: MacAddr([0; 6]),
            target_ip: Ipv4Addr::new(198, 18, 1, 1),
        };
        let mut b = [0u8; LEN];
        r.emit(&mut ArpPacket::new_unchecked(&mut b[..]));
        assert_eq!(
            b[..8],
            [0, 1, 8, 0, 6, 4, 0, 1],
            "Ethernet, IPv4, 6, 4, request"
        );
        let p = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p), r);
        assert!(ArpPacket::new_checked(&b[..27]).is_err());
        b[2] = 0x86;
        assert!(ArpPacket::new_checked(&b[..]).is_err());
    }
}
