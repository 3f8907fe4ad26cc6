//! ICMP (RFC 792) and ICMPv6 (RFC 4443) echo request/reply messages.

use crate::checksum;
use crate::error::{Layer, need};
use crate::udp::pseudo;
use crate::{Error, be16, ip_proto, put16};
use core::net::IpAddr;

/// Echo header length: type, code, checksum, identifier, sequence.
pub const HEADER_LEN: usize = 8;

/// ICMP for IPv4 or ICMPv6: they differ in type numbers and checksum scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpVersion {
    V4,
    V6,
}

impl IcmpVersion {
    pub fn echo_request(self) -> u8 {
        match self {
            IcmpVersion::V4 => 8,
            IcmpVersion::V6 => 128,
        }
    }

    pub fn echo_reply(self) -> u8 {
        match self {
            IcmpVersion::V4 => 0,
            IcmpVersion::V6 => 129,
        }
    }
}

/// A view of an echo message; the buffer is the whole ICMP message.
#[derive(Debug, Clone)]
pub struct IcmpEchoPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpEchoPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Checks the length and that the type is an echo request or reply.
    pub fn new_checked(buffer: T, version: IcmpVersion) -> Result<Self, Error> {
        let p = Self { buffer };
        need(Layer::Icmp, HEADER_LEN, p.buffer.as_ref().len())?;
        let t = p.msg_type();
        if t != version.echo_request() && t != version.echo_reply() {
            return Err(Error::Unsupported {
                layer: Layer::Icmp,
                what: "not an echo request or reply",
            });
        }
        Ok(p)
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    pub fn seq(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// ICMPv4 sums the message; ICMPv6 also the pseudo-header (`addrs`).
    pub fn verify_checksum(&self, addrs: Option<(IpAddr, IpAddr)>) -> bool {
        let b = self.buffer.as_ref();
        let acc = match addrs {
            Some((s, d)) => pseudo(s, d, ip_proto::ICMPV6, b.len()),
            None => 0,
        };
        checksum::fold(checksum::sum(b, acc)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpEchoPacket<T> {
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    pub fn fill_checksum(&mut self, addrs: Option<(IpAddr, IpAddr)>) {
        put16(self.buffer.as_mut(), 2, 0);
        let b = self.buffer.as_ref();
        let acc = match addrs {
            Some((s, d)) => pseudo(s, d, ip_proto::ICMPV6, b.len()),
            None => 0,
        };
        let c = !checksum::fold(checksum::sum(b, acc));
        put16(self.buffer.as_mut(), 2, c);
    }
}

/// An echo message's header content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpEchoRepr {
    pub version: IcmpVersion,
    pub is_request: bool,
    pub ident: u16,
    pub seq: u16,
    pub data_len: usize,
}

impl IcmpEchoRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &IcmpEchoPacket<T>, version: IcmpVersion) -> Self {
        Self {
            version,
            is_request: p.msg_type() == version.echo_request(),
            ident: p.ident(),
            seq: p.seq(),
            data_len: p.data().len(),
        }
    }

    /// Writes the header and checksum; the data must already be in place.
    /// For ICMPv6 `v6_addrs` gives the pseudo-header's addresses.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut IcmpEchoPacket<T>,
        v6_addrs: Option<(IpAddr, IpAddr)>,
    ) {
        let b = p.buffer.as_mut();
        b[0] = if self.is_request {
            self.version.echo_request()
        } else {
            self.version.echo_reply()
        };
        b[1] = 0;
        put16(b, 4, self.ident);
        put16(b, 6, self.seq);
        p.fill_checksum(match self.version {
            IcmpVersion::V4 => None,
            IcmpVersion::V6 => v6_addrs,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_both_versions() {
        for (version, addrs) in [
            (IcmpVersion::V4, None),
            (
                IcmpVersion::V6,
                Some((
                    "2001:db8::1".parse().unwrap(),
                    "2001:db8::2".parse().unwrap(),
                )),
            ),
        ] {
            let repr = IcmpEchoRepr {
                version,
                is_request: true,
                ident: 0x4c52,
                seq: 3,
                data_len: 4,
            };
            let mut buf = [0u8; 12];
            buf[8..].copy_from_slice(b"ping");
            repr.emit(&mut IcmpEchoPacket::new_unchecked(&mut buf[..]), addrs);
            let p = IcmpEchoPacket::new_checked(&buf[..], version).unwrap();
            assert_eq!(IcmpEchoRepr::parse(&p, version), repr);
            assert!(p.verify_checksum(addrs));
            assert_eq!(p.data(), b"ping");
        }
        let mut unreachable = [3u8, 3, 0, 0, 0, 0, 0, 0];
        assert!(IcmpEchoPacket::new_checked(&mut unreachable[..], IcmpVersion::V4).is_err());
    }
}
