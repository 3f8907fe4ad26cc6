//! linerate's wire layer: zero-copy views of packet headers, descriptions
//! (`*Repr`) that parse and emit them, Internet checksums (full and
//! incremental), and the probe header carried in every generated packet.
//!
//! Architecture invariants:
//! - No I/O, no allocation, no `unsafe`: the crate is `no_std`.
//! - `*Packet::new_checked` on arbitrary bytes never panics, and every
//!   accessor on a checked view stays within the buffer. `new_unchecked` is
//!   for templates whose layout the caller built and trusts.
//! - Multi-byte fields are big-endian on the wire and host values in `Repr`s.
#![cfg_attr(not(test), no_std)]

pub mod arp;
pub mod checksum;
mod error;
pub mod ethernet;
mod fast_probe;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod ndisc;
pub mod offsets;
pub mod parse;
pub mod probe;
pub mod rr;
pub mod seq;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

pub use arp::{ArpPacket, ArpRepr};
pub use error::{Error, Layer};
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr};
pub use icmp::{IcmpEchoPacket, IcmpEchoRepr, IcmpVersion};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ndisc::NdiscRepr;
pub use offsets::{IpOffsets, locate};
pub use parse::{
    FastLen, L3, L4, ParsedFrame, SameAs, SameHeader, fast_probe, fast_probe_ipv4,
    fast_probe_ipv4_header, fast_probe_upto, parse_frame, probe_of,
};
pub use probe::{
    END_MARKER, PROBE_LEN, PROBE_MAGIC, PROBE_VERSION, Probe, ProbeView, unwrap_tx_ns,
};
pub use rr::{RR_HEADER_LEN, RR_MAGIC, RrHeader, RrKind};
pub use seq::{Arrival, SeqTracker};
pub use tcp::{TcpFlags, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanRepr, VlanTag};
pub use vxlan::{VxlanHeader, VxlanRepr};

/// IP protocol numbers used here.
pub mod ip_proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
