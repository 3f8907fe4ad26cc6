//! IPv4 headers (RFC 791). Options are carried but not interpreted.

use crate::checksum;
use crate::error::{Layer, need};
use crate::{Error, be16, put16};
use core::net::Ipv4Addr;

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: core::ops::Range<usize> = 12..16;
    pub const DST: core::ops::Range<usize> = 16..20;
}

/// Header length without options.
pub const HEADER_LEN: usize = 20;

/// A view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Validates version, header length and total length against the buffer.
    /// The buffer may be longer than the packet (Ethernet padding).
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self { buffer };
        let len = p.buffer.as_ref().len();
        need(Layer::Ipv4, HEADER_LEN, len)?;
        if p.version() != 4 {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "version is not 4",
            });
        }
        let hl = p.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "header length below 20 bytes",
            });
        }
        need(Layer::Ipv4, hl, len)?;
        let total = usize::from(p.total_len());
        if total < hl {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "total length shorter than the header",
            });
        }
        need(Layer::Ipv4, total, len)?;
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 3
    }

    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS_FRAG] & 0x40 != 0
    }

    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS_FRAG] & 0x20 != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLAGS_FRAG) & 0x1fff) * 8
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// True when the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }

    /// The bytes after the header, up to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    pub fn set_header_len(&mut self, bytes: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((bytes / 4) as u8 & 0x0f);
    }

    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = (dscp << 2) | (ecn & 3);
    }

    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::TOTAL_LEN, v);
    }

    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::IDENT, v);
    }

    pub fn set_flags_frag(&mut self, dont_frag: bool, more_frags: bool, offset_bytes: u16) {
        let v = (u16::from(dont_frag) << 14) | (u16::from(more_frags) << 13) | (offset_bytes / 8);
        put16(self.buffer.as_mut(), field::FLAGS_FRAG, v);
    }

    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    pub fn set_src(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    pub fn set_dst(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(c);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[start..end]
    }
}

/// An IPv4 header's content (no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub payload_len: usize,
    pub ttl: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
}

impl Ipv4Repr {
    pub const LEN: usize = HEADER_LEN;

    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Self {
        Self {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            payload_len: usize::from(p.total_len()) - p.header_len(),
            ttl: p.ttl(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        }
    }

    /// Writes a 20-byte header with its checksum. The buffer must hold the
    /// header and `payload_len` bytes after it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4Packet<T>) {
        p.set_header_len(HEADER_LEN);
        p.set_dscp_ecn(self.dscp, self.ecn);
        p.set_total_len((HEADER_LEN + self.payload_len) as u16);
        p.set_ident(self.ident);
        p.set_flags_frag(self.dont_frag, false, 0);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src(self.src);
        p.set_dst(self.dst);
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            protocol: crate::ip_proto::UDP,
            payload_len: 26,
            ttl: 64,
            dscp: 46,
            ecn: 1,
            ident: 0x1234,
            dont_frag: true,
        }
    }

    #[test]
    fn round_trip_with_checksum() {
        let mut buf = [0u8; 46];
        repr().emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), repr());
        assert_eq!(p.payload().len(), 26);
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
    }

    #[test]
    fn rejects_bad_headers() {
        let mut buf = [0u8; 46];
        repr().emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        assert!(matches!(
            Ipv4Packet::new_checked(&buf[..45]),
            Err(Error::Truncated {
                need: 46,
                have: 45,
                ..
            })
        ));
        let mut v6 = buf;
        v6[0] = 0x65;
        assert!(Ipv4Packet::new_checked(&v6[..]).is_err());
        let mut short_ihl = buf;
        short_ihl[0] = 0x44;
        assert!(Ipv4Packet::new_checked(&short_ihl[..]).is_err());
        let mut long_ihl = buf;
        long_ihl[0] = 0x4f;
        assert!(Ipv4Packet::new_checked(&long_ihl[..]).is_err());
        let mut small_total = buf;
        small_total[2..4].copy_from_slice(&10u16.to_be_bytes());
        assert!(Ipv4Packet::new_checked(&small_total[..]).is_err());
        let mut corrupt = buf;
        corrupt[8] ^= 1;
        assert!(
            !Ipv4Packet::new_checked(&corrupt[..])
                .unwrap()
                .verify_checksum()
        );
    }
}
