//! The packet generator's data plane, without I/O: flows with address and
//! port ranges, frame templates built once and patched per packet (flow
//! fields, probe header, checksums updated incrementally), and frame-size
//! sequences (single size, list, IMIX) that meet their proportions exactly
//! per cycle. Backends (sockets, AF_PACKET, AF_XDP) only move the bytes.

pub mod flows;
pub mod pacing;
pub mod pcap;
pub mod rewrite;
pub mod sink;
pub mod sizes;
pub mod template;

pub use flows::{FlowCursor, FlowError, FlowFields, FlowSpec, ProbeIds, WireCursor};
pub use sink::SinkCounts;
pub use sizes::SizeSequence;
pub use template::{Framing, Stamp, Template, TemplateError, WireFlow};
