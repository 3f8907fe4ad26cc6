//! 802.1Q VLAN tags: the 4 bytes after the MAC addresses whose TPID is
//! 0x8100 (or 0x88a8 for the outer tag of QinQ). The view starts at the TCI:
//! the TPID is the enclosing header's EtherType.

use crate::error::{Layer, need};
use crate::{Error, be16, put16};

/// Bytes of a tag after the TPID: TCI + inner EtherType.
pub const TAG_LEN: usize = 4;

/// A view of a VLAN tag, starting at its TCI.
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        need(Layer::Vlan, TAG_LEN, buffer.as_ref().len())?;
        Ok(Self { buffer })
    }

    fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// Priority code point (0..=7).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (0..=4095).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The EtherType of what follows the tag.
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[TAG_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = (u16::from(pcp & 7) << 13) | (u16::from(dei) << 12) | (vid & 0x0fff);
        put16(self.buffer.as_mut(), 0, tci);
    }

    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), 2, t);
    }
}

/// A tag's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanRepr {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
    pub ethertype: u16,
}

impl VlanRepr {
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Self {
        Self {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        }
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut VlanTag<T>) {
        tag.set_tci(self.pcp, self.dei, self.vid);
        tag.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = VlanRepr {
            pcp: 5,
            dei: true,
            vid: 4094,
            ethertype: crate::EtherType::IPV6,
        };
        let mut buf = [0u8; 4];
        repr.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0xbf, 0xfe, 0x86, 0xdd]);
        assert_eq!(
            VlanRepr::parse(&VlanTag::new_checked(&buf[..]).unwrap()),
            repr
        );
        assert!(VlanTag::new_checked(&buf[..3]).is_err());
    }
}
