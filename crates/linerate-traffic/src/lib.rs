//! What traffic is, without I/O: flows with address and port ranges, frame
//! templates built once and patched per packet (flow fields, probe header,
//! checksums updated incrementally), frame-size sequences (single size,
//! list, IMIX) that meet their proportions exactly per cycle, pcap traces
//! and their rewrite, departure pacing, and the receiver's per-flow
//! accounting of what arrives (`accounting`: loss, order, latency; used by
//! `linerate-packet`'s receive side and by the agent). Backends (sockets,
//! AF_PACKET, AF_XDP) only move the bytes.

pub mod accounting;
pub mod dscp;
pub mod encap;
pub mod flows;
pub mod pacing;
pub mod pcap;
pub mod profile;
pub mod random;
pub mod residue;
pub mod rewrite;
pub mod sizes;
pub mod stack;
pub mod template;
pub mod vxlan;
pub mod wire_flow;

pub use accounting::SinkCounts;
pub use flows::{FlowCursor, FlowError, FlowFields, FlowSpec, ProbeIds, WireCursor};
pub use sizes::SizeSequence;
pub use template::{Framing, Stamp, Template, TemplateError, WireFlow, min_frame};
