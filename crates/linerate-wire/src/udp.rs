//! UDP headers (RFC 768) with checksums over the IPv4 or IPv6 pseudo-header.

use crate::checksum;
use crate::error::{Layer, need};
use crate::{Error, be16, ip_proto, put16};
use core::net::IpAddr;

/// Header length.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Sum of the pseudo-header of an L4 segment between `src` and `dst`.
/// Mixed address families make no pseudo-header; the caller never mixes them.
pub(crate) fn pseudo(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> u32 {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => checksum::pseudo_v4(s, d, proto, len as u16),
        (IpAddr::V6(s), IpAddr::V6(d)) => checksum::pseudo_v6(s, d, proto, len as u32),
        _ => 0,
    }
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Validates the length field against the buffer (which may be longer).
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self { buffer };
        let have = p.buffer.as_ref().len();
        need(Layer::Udp, HEADER_LEN, have)?;
        let len = usize::from(p.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Udp,
                what: "length below 8 bytes",
            });
        }
        need(Layer::Udp, len, have)?;
        Ok(p)
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Header + payload length, as the header says.
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// True if the checksum is right, or absent (zero, legal over IPv4 only).
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        if self.checksum() == 0 {
            return src.is_ipv4();
        }
        let len = usize::from(self.len());
        let acc = pseudo(src, dst, ip_proto::UDP, len);
        checksum::fold(checksum::sum(&self.buffer.as_ref()[..len], acc)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 0, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v);
    }

    pub fn set_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 4, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 6, v);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..len]
    }

    /// Computes and stores the checksum over pseudo-header, header and payload.
    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) {
        self.set_checksum(0);
        let len = usize::from(self.len());
        let acc = pseudo(src, dst, ip_proto::UDP, len);
        let c = !checksum::fold(checksum::sum(&self.buffer.as_ref()[..len], acc));
        self.set_checksum(checksum::udp_nonzero(c));
    }
}

/// A UDP header's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

impl UdpRepr {
    pub const LEN: usize = HEADER_LEN;

    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Self {
        Self {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()) - HEADER_LEN,
        }
    }

    /// Writes the header. The payload must already be in place if
    /// `checksum_addrs` is given, since the checksum covers it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut UdpPacket<T>,
        checksum_addrs: Option<(IpAddr, IpAddr)>,
    ) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len((HEADER_LEN + self.payload_len) as u16);
        match checksum_addrs {
            Some((s, d)) => p.fill_checksum(s, d),
            None => p.set_checksum(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_v4_and_v6() {
        let repr = UdpRepr {
            src_port: 9,
            dst_port: 5201,
            payload_len: 5,
        };
        for (s, d) in [("198.18.0.1", "198.18.0.2"), ("2001:db8::1", "2001:db8::2")] {
            let (s, d): (IpAddr, IpAddr) = (s.parse().unwrap(), d.parse().unwrap());
            let mut buf = [0u8; 13];
            buf[8..].copy_from_slice(b"hello");
            repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), Some((s, d)));
            let p = UdpPacket::new_checked(&buf[..]).unwrap();
            assert_eq!(UdpRepr::parse(&p), repr);
            assert!(p.verify_checksum(s, d));
            assert_eq!(p.payload(), b"hello");
            let mut bad = buf;
            bad[9] ^= 0x40;
            assert!(
                !UdpPacket::new_checked(&bad[..])
                    .unwrap()
                    .verify_checksum(s, d)
            );
        }
    }

    #[test]
    fn zero_checksum_only_for_ipv4() {
        let mut buf = [0u8; 8];
        UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload_len: 0,
        }
        .emit(&mut UdpPacket::new_unchecked(&mut buf[..]), None);
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap()));
        assert!(!p.verify_checksum(
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap()
        ));
    }

    #[test]
    fn rejects_bad_lengths() {
        let mut buf = [0u8; 8];
        buf[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert!(UdpPacket::new_checked(&buf[..]).is_err());
        buf[4..6].copy_from_slice(&9u16.to_be_bytes());
        assert!(UdpPacket::new_checked(&buf[..]).is_err());
        assert!(UdpPacket::new_checked(&buf[..7]).is_err());
    }
}
