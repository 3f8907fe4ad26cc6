//! What a flow's frames carry beyond a template's headers, as data: VXLAN's
//! outer headers, an MPLS label stack, GRE, ICMP echo. The frames are
//! written by `vxlan.rs` and `stack.rs`; a template's `Framing` holds these.

use crate::flows::{FlowFields, Range};
use std::net::IpAddr;

/// A flow's outer headers and VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vxlan {
    /// Outer MACs, addresses (both of one family) and UDP ports.
    pub outer: FlowFields,
    /// Outer 802.1Q tag: VLAN id and priority.
    pub vlan: Option<(u16, u8)>,
    pub dscp: u8,
    pub ttl: u8,
    pub flags: u8,
    pub reserved0: u32,
    pub reserved1: u8,
    /// The VNIs: frame n carries value `n mod count` (modulo 2^24).
    pub vni: Range,
}

/// The headers beyond a template's, for a flow's frames.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stack {
    /// ICMP echo (ICMPv6 over IPv6) as the transport, its type and code:
    /// the flow's source port is the identifier, its destination port the
    /// sequence number.
    pub icmp: Option<(u8, u8)>,
    /// The label stack, outermost first.
    pub mpls: Vec<Label>,
    /// GRE's outer IP header and GRE header before the flow's IP packet.
    pub gre: Option<Gre>,
}

/// One MPLS label stack entry: each field's values (frame n carries value
/// n mod count, modulo the field's width).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    pub label: Range,
    pub traffic_class: Range,
    /// `None`: 1 on the last entry, 0 on the others (the model's auto).
    pub bottom_of_stack: Option<u8>,
    pub ttl: Range,
}

/// GRE (RFC 2784) and the outer IP header it follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gre {
    /// Outer addresses (both of one family).
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dscp: u8,
    pub ttl: u8,
    /// The checksum (and the reserved word after it) is present.
    pub checksum_present: bool,
    /// The 12 bits after the C bit, and the version (3 bits).
    pub reserved0: u16,
    pub version: u8,
    /// `None`: the inner packet's EtherType (the model's auto).
    pub protocol: Option<u16>,
    /// The 16 bits after the checksum (with the checksum only).
    pub reserved1: u16,
}
