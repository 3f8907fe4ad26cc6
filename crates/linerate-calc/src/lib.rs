//! Line-rate arithmetic as network engineers do it.
//!
//! Everything here is pure: no I/O, no clock. The binary's `calc` subcommand,
//! the packet generator's rate limiter and the reporters all use these
//! functions, so a figure printed anywhere in linerate is computed one way.
//!
//! Terms (units go last in names):
//! - **frame**: an Ethernet frame from destination MAC to FCS inclusive
//!   (64 bytes minimum, the size RFC 2544 talks about).
//! - **L2** figures count frame bytes (with FCS).
//! - **L1** figures add the 20 bytes every frame costs on the wire:
//!   7 preamble + 1 start-of-frame delimiter + 12 inter-frame gap.

mod explain;
mod frame;
mod imix;
mod rate;
mod units;

pub use explain::{Query, QueryError, Size, explain};
pub use frame::{Frame, FrameError, FrameSpec, Header, Payload};
pub use imix::{Imix, ImixEntry, ImixError};
pub use rate::{LineRate, RateReport, line_rate, rate_at_pps};
pub use units::{
    UnitError, UnitRate, format_bps, format_count, parse_bps, parse_pps, parse_rate_with_unit,
    ratio, share,
};

/// Preamble (7) + start-of-frame delimiter (1) + inter-frame gap (12).
pub const L1_OVERHEAD_BYTES: u64 = 20;
/// Ethernet frame check sequence.
pub const FCS_BYTES: u64 = 4;
/// Destination MAC + source MAC + EtherType.
pub const ETH_HEADER_BYTES: u64 = 14;
/// One 802.1Q tag.
pub const VLAN_TAG_BYTES: u64 = 4;
/// IPv4 header without options.
pub const IPV4_HEADER_BYTES: u64 = 20;
/// IPv6 fixed header.
pub const IPV6_HEADER_BYTES: u64 = 40;
/// UDP header.
pub const UDP_HEADER_BYTES: u64 = 8;
/// TCP header without options.
pub const TCP_HEADER_BYTES: u64 = 20;
/// Smallest legal Ethernet frame, FCS included.
pub const FRAME_MIN_BYTES: u64 = 64;
/// Largest frame linerate accepts: a 9000-byte jumbo MTU with headroom, as
/// most switches define "jumbo" (9216 bytes, FCS included).
pub const FRAME_MAX_BYTES: u64 = 9216;
