//! Ethernet II frames (without the FCS, which the NIC adds and strips).

use crate::error::{Layer, need};
use crate::{Error, be16, put16};
use core::fmt;

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// The address as a 48-bit number (for ranges and steps).
    pub fn to_u64(self) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.0);
        u64::from_be_bytes(b)
    }

    /// The low 48 bits of `v` as an address.
    pub fn from_u64(v: u64) -> Self {
        let b = v.to_be_bytes();
        let mut m = [0u8; 6];
        m.copy_from_slice(&b[2..]);
        MacAddr(m)
    }

    /// Parses `02:00:00:00:00:0a` (also with `-`).
    pub fn parse(s: &str) -> Option<Self> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for b in &mut out {
            let p = parts.next()?;
            if p.is_empty() || p.len() > 2 {
                return None;
            }
            *b = u8::from_str_radix(p, 16).ok()?;
        }
        parts.next().is_none().then_some(MacAddr(out))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// EtherType values linerate knows.
#[derive(Debug)]
pub struct EtherType;

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
}

mod field {
    pub const DST: core::ops::Range<usize> = 0..6;
    pub const SRC: core::ops::Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// Header length.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        need(Layer::Ethernet, HEADER_LEN, buffer.as_ref().len())?;
        Ok(Self { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        MacAddr(m)
    }

    pub fn src(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        MacAddr(m)
    }

    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst(&mut self, m: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&m.0);
    }

    pub fn set_src(&mut self, m: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&m.0);
    }

    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), field::ETHERTYPE, t);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// An Ethernet header's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    pub src: MacAddr,
    pub dst: MacAddr,
    pub ethertype: u16,
}

impl EthernetRepr {
    pub const LEN: usize = HEADER_LEN;

    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Self {
        Self {
            src: frame.src(),
            dst: frame.dst(),
            ethertype: frame.ethertype(),
        }
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst(self.dst);
        frame.set_src(self.src);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = EthernetRepr {
            src: MacAddr([2, 0, 0, 0, 0, 0xa]),
            dst: MacAddr([2, 0, 0, 0, 0, 0xb]),
            ethertype: EtherType::IPV4,
        };
        let mut buf = [0u8; 20];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&f), repr);
        assert_eq!(f.payload().len(), 6);
        assert!(EthernetFrame::new_checked(&buf[..13]).is_err());
    }

    #[test]
    fn mac_text_and_numbers() {
        let m = MacAddr::parse("02:00:00:00:00:0a").unwrap();
        assert_eq!(m.to_string(), "02:00:00:00:00:0a");
        assert_eq!(MacAddr::parse("02-00-00-00-00-0A"), Some(m));
        assert_eq!(MacAddr::from_u64(m.to_u64() + 1).0[5], 0x0b);
        assert_eq!(MacAddr::parse("02:00:00:00:00"), None);
        assert_eq!(MacAddr::parse("02:00:00:00:00:0a:01"), None);
        assert_eq!(MacAddr::parse("02:00:00:00:00:zz"), None);
        assert_eq!(MacAddr::parse("002:00:00:00:00:01"), None);
        assert!(MacAddr::BROADCAST.is_multicast());
    }
}
