//! IPv6 fixed headers (RFC 8200). Extension headers are walked by
//! [`crate::parse`], not here.

use crate::error::{Layer, need};
use crate::{Error, be16, be32, put16, put32};
use core::net::Ipv6Addr;

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: core::ops::Range<usize> = 8..24;
    pub const DST: core::ops::Range<usize> = 24..40;
}

/// Fixed header length.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Validates the version and that the declared payload fits the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self { buffer };
        let len = p.buffer.as_ref().len();
        need(Layer::Ipv6, HEADER_LEN, len)?;
        if p.version() != 6 {
            return Err(Error::Malformed {
                layer: Layer::Ipv6,
                what: "version is not 6",
            });
        }
        need(Layer::Ipv6, HEADER_LEN + usize::from(p.payload_len()), len)?;
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        (be16(self.buffer.as_ref(), field::VER_TC_FLOW) >> 4) as u8
    }

    pub fn flow_label(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::SRC])
    }

    pub fn dst(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::DST])
    }

    /// The bytes after the fixed header, up to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let v = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        put32(self.buffer.as_mut(), field::VER_TC_FLOW, v);
    }

    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PAYLOAD_LEN, v);
    }

    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }

    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    pub fn set_src(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    pub fn set_dst(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// An IPv6 fixed header's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: u8,
    pub payload_len: usize,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
}

impl Ipv6Repr {
    pub const LEN: usize = HEADER_LEN;

    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Self {
        Self {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            payload_len: usize::from(p.payload_len()),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        }
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv6Packet<T>) {
        p.set_version_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(self.payload_len as u16);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src(self.src);
        p.set_dst(self.dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = Ipv6Repr {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            next_header: crate::ip_proto::UDP,
            payload_len: 8,
            hop_limit: 64,
            traffic_class: 0xb8,
            flow_label: 0xabcde,
        };
        let mut buf = [0u8; 48];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
        let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p), repr);
        assert_eq!(p.payload().len(), 8);
        assert!(Ipv6Packet::new_checked(&buf[..47]).is_err());
        let mut v4 = buf;
        v4[0] = 0x45;
        assert!(Ipv6Packet::new_checked(&v4[..]).is_err());
    }
}
