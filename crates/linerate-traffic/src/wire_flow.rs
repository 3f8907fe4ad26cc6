//! One flow's header fields as they go on the wire, with their words under
//! the checksums, kept up to date as a cursor steps from flow to flow.

use std::net::IpAddr;

/// One flow's header fields as they go on the wire, with what they add to
/// the checksums: kept by `WireCursor` as it steps,
/// so a packet only stores them. The probe's flow id is not here: it is
/// the flow index mod 65536, which the caller has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireFlow {
    /// Destination then source MAC.
    pub macs: [u8; 12],
    /// Source then destination address (4 + 4 or 16 + 16 bytes).
    pub addrs: [u8; 32],
    /// Source then destination port (host order).
    pub ports: [u16; 2],
    /// Sum of the addresses' 16-bit words (IPv4 header, pseudo-header).
    pub addr_sum: u32,
    /// The addresses' and ports' words under the transport checksum.
    pub l4_sum: u32,
}

impl WireFlow {
    /// New addresses (both of one family).
    #[inline]
    pub fn set_addrs(&mut self, src: IpAddr, dst: IpAddr) {
        self.addr_sum = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let (s, d) = (s.to_bits(), d.to_bits());
                self.addrs[..4].copy_from_slice(&s.to_be_bytes());
                self.addrs[4..8].copy_from_slice(&d.to_be_bytes());
                words32(s) + words32(d)
            }
            (s, d) => {
                let (s, d) = (v6_bits(s), v6_bits(d));
                self.addrs[..16].copy_from_slice(&s.to_be_bytes());
                self.addrs[16..].copy_from_slice(&d.to_be_bytes());
                words128(s) + words128(d)
            }
        };
        self.resum();
    }

    /// New ports.
    #[inline]
    pub fn set_ports(&mut self, src: u16, dst: u16) {
        self.ports = [src, dst];
        self.resum();
    }

    /// Port `which` (0 source, 1 destination) moves up by `step` without
    /// wrapping: the common step of a walk over flows.
    #[inline]
    pub fn step_port(&mut self, which: usize, step: u16) {
        self.ports[which & 1] += step;
        self.l4_sum += u32::from(step);
    }

    /// New MACs.
    #[inline]
    pub fn set_macs(&mut self, src: [u8; 6], dst: [u8; 6]) {
        self.macs[..6].copy_from_slice(&dst);
        self.macs[6..].copy_from_slice(&src);
    }

    #[inline]
    fn resum(&mut self) {
        self.l4_sum = self.addr_sum + u32::from(self.ports[0]) + u32::from(self.ports[1]);
    }
}

fn v6_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => v.to_ipv6_mapped().to_bits(),
        IpAddr::V6(v) => v.to_bits(),
    }
}

/// The sum of a value's big-endian 16-bit words.
#[inline]
pub(crate) fn words32(x: u32) -> u32 {
    (x >> 16) + (x & 0xffff)
}

#[inline]
pub(crate) fn words64(x: u64) -> u32 {
    ((x >> 48) + ((x >> 32) & 0xffff) + ((x >> 16) & 0xffff) + (x & 0xffff)) as u32
}

#[inline]
pub(crate) fn words128(x: u128) -> u32 {
    words64((x >> 64) as u64) + words64(x as u64)
}
