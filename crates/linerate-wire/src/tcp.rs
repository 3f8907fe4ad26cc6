//! TCP headers (RFC 9293). Options are carried but not interpreted; linerate
//! emits TCP-flagged test frames without options.

use crate::checksum;
use crate::error::{Layer, need};
use crate::udp::pseudo;
use crate::{Error, be16, be32, ip_proto, put16, put32};
use core::net::IpAddr;

/// Header length without options.
pub const HEADER_LEN: usize = 20;

/// The TCP flag bits (low byte of the flags field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// A view of a TCP segment. The buffer is the whole segment (IP payload).
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self { buffer };
        let len = p.buffer.as_ref().len();
        need(Layer::Tcp, HEADER_LEN, len)?;
        let hl = p.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Tcp,
                what: "data offset below 5 words",
            });
        }
        need(Layer::Tcp, hl, len)?;
        Ok(p)
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    pub fn seq(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    pub fn ack(&self) -> u32 {
        be32(self.buffer.as_ref(), 8)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[12] >> 4) * 4
    }

    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[13])
    }

    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), 14)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 16)
    }

    pub fn urgent(&self) -> u16 {
        be16(self.buffer.as_ref(), 18)
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        let b = self.buffer.as_ref();
        let acc = pseudo(src, dst, ip_proto::TCP, b.len());
        checksum::fold(checksum::sum(b, acc)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 0, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v);
    }

    pub fn set_seq(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 4, v);
    }

    pub fn set_ack(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 8, v);
    }

    pub fn set_header_len(&mut self, bytes: usize) {
        self.buffer.as_mut()[12] = ((bytes / 4) as u8) << 4;
    }

    pub fn set_flags(&mut self, f: TcpFlags) {
        self.buffer.as_mut()[13] = f.0;
    }

    pub fn set_window(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 14, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 16, v);
    }

    pub fn set_urgent(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 18, v);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }

    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let acc = pseudo(src, dst, ip_proto::TCP, b.len());
        let c = !checksum::fold(checksum::sum(b, acc));
        self.set_checksum(c);
    }
}

/// A TCP header's content (no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub urgent: u16,
    pub payload_len: usize,
}

impl TcpRepr {
    pub const LEN: usize = HEADER_LEN;

    pub fn parse<T: AsRef<[u8]>>(p: &TcpPacket<T>) -> Self {
        Self {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq(),
            ack: p.ack(),
            flags: p.flags(),
            window: p.window(),
            urgent: p.urgent(),
            payload_len: p.payload().len(),
        }
    }

    /// Writes a 20-byte header. The buffer must be exactly header + payload,
    /// with the payload in place when `checksum_addrs` is given.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut TcpPacket<T>,
        checksum_addrs: Option<(IpAddr, IpAddr)>,
    ) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq(self.seq);
        p.set_ack(self.ack);
        p.set_header_len(HEADER_LEN);
        p.set_flags(self.flags);
        p.set_window(self.window);
        p.set_urgent(self.urgent);
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
    fn round_trip() {
        let repr = TcpRepr {
            src_port: 40000,
            dst_port: 5201,
            seq: 0xdead_beef,
            ack: 7,
            flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK),
            window: 65535,
            urgent: 0,
            payload_len: 4,
        };
        let (s, d): (IpAddr, IpAddr) =
            ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap());
        let mut buf = [0u8; 24];
        buf[20..].copy_from_slice(b"data");
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), Some((s, d)));
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p), repr);
        assert!(p.verify_checksum(s, d));
        assert!(p.flags().has(TcpFlags::SYN) && !p.flags().has(TcpFlags::FIN));
        assert!(p.options().is_empty());
        let mut bad_off = buf;
        bad_off[12] = 0x40;
        assert!(TcpPacket::new_checked(&bad_off[..]).is_err());
        bad_off[12] = 0x70;
        assert!(TcpPacket::new_checked(&bad_off[..]).is_err());
    }
}
