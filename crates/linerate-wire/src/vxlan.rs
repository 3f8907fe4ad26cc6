//! VXLAN (RFC 7348): the 8-byte header a UDP datagram (to port 4789)
//! carries before an encapsulated Ethernet frame: flags (0x08, the I flag:
//! the VNI is valid), 24 reserved bits, the 24-bit VXLAN Network
//! Identifier, 8 reserved bits.

use crate::error::{Layer, need};
use crate::{Error, be32, put32};

/// The header's length.
pub const HEADER_LEN: usize = 8;
/// The IANA port of VXLAN (UDP destination).
pub const PORT: u16 = 4789;
/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;
/// The largest VNI (24 bits).
pub const VNI_MAX: u32 = (1 << 24) - 1;

/// A view of a VXLAN header (and the encapsulated frame after it).
#[derive(Debug, Clone)]
pub struct VxlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanHeader<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        need(Layer::Vxlan, HEADER_LEN, buffer.as_ref().len())?;
        Ok(Self { buffer })
    }

    /// The flags byte (0x08: the I flag).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// The 24 reserved bits after the flags.
    pub fn reserved0(&self) -> u32 {
        be32(self.buffer.as_ref(), 0) & VNI_MAX
    }

    /// The VXLAN Network Identifier (24 bits).
    pub fn vni(&self) -> u32 {
        be32(self.buffer.as_ref(), 4) >> 8
    }

    /// The last 8 reserved bits.
    pub fn reserved1(&self) -> u8 {
        self.buffer.as_ref()[7]
    }

    /// The encapsulated Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VxlanHeader<T> {
    /// Flags and the 24 reserved bits after them (above 24 bits: cut).
    pub fn set_flags(&mut self, flags: u8, reserved0: u32) {
        put32(
            self.buffer.as_mut(),
            0,
            (u32::from(flags) << 24) | (reserved0 & VNI_MAX),
        );
    }

    /// The VNI (above 24 bits: cut) and the last reserved byte.
    pub fn set_vni(&mut self, vni: u32, reserved1: u8) {
        put32(
            self.buffer.as_mut(),
            4,
            ((vni & VNI_MAX) << 8) | u32::from(reserved1),
        );
    }
}

/// A VXLAN header's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanRepr {
    pub flags: u8,
    pub reserved0: u32,
    pub vni: u32,
    pub reserved1: u8,
}

impl VxlanRepr {
    /// The usual header: the I flag, `vni`, reserved bits 0.
    pub fn with_vni(vni: u32) -> Self {
        Self {
            flags: FLAG_I,
            reserved0: 0,
            vni,
            reserved1: 0,
        }
    }

    pub fn parse<T: AsRef<[u8]>>(h: &VxlanHeader<T>) -> Self {
        Self {
            flags: h.flags(),
            reserved0: h.reserved0(),
            vni: h.vni(),
            reserved1: h.reserved1(),
        }
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut VxlanHeader<T>) {
        h.set_flags(self.flags, self.reserved0);
        h.set_vni(self.vni, self.reserved1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_exactly() {
        let mut buf = [0xffu8; 8];
        VxlanRepr::with_vni(1000).emit(&mut VxlanHeader::new_unchecked(&mut buf[..]));
        // Flags 0x08, reserved 0, VNI 1000 = 0x0003e8, reserved 0.
        assert_eq!(buf, [0x08, 0, 0, 0, 0x00, 0x03, 0xe8, 0]);
        let odd = VxlanRepr {
            flags: 0x0c,
            reserved0: 0x12_3456,
            vni: VNI_MAX,
            reserved1: 0x9a,
        };
        odd.emit(&mut VxlanHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x0c, 0x12, 0x34, 0x56, 0xff, 0xff, 0xff, 0x9a]);
        assert_eq!(
            VxlanRepr::parse(&VxlanHeader::new_checked(&buf[..]).unwrap()),
            odd
        );
    }

    #[test]
    fn round_trip_and_bounds() {
        for vni in [0, 1, 4789, 0x80_0000, VNI_MAX] {
            let r = VxlanRepr {
                flags: FLAG_I,
                reserved0: (vni ^ 0x5a_5a5a) & VNI_MAX,
                vni,
                reserved1: vni as u8,
            };
            let mut buf = [0u8; 12];
            r.emit(&mut VxlanHeader::new_unchecked(&mut buf[..]));
            let h = VxlanHeader::new_checked(&buf[..]).unwrap();
            assert_eq!(VxlanRepr::parse(&h), r);
            assert_eq!(h.payload().len(), 4);
        }
        // Values above 24 bits are cut, never spill into the next field.
        let mut buf = [0u8; 8];
        let mut h = VxlanHeader::new_unchecked(&mut buf[..]);
        h.set_vni(0x1ff_ffff, 7);
        h.set_flags(FLAG_I, 0x1ff_ffff);
        assert_eq!(buf, [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 7]);
        assert!(matches!(
            VxlanHeader::new_checked(&buf[..7]),
            Err(Error::Truncated {
                layer: Layer::Vxlan,
                need: 8,
                have: 7
            })
        ));
    }
}
