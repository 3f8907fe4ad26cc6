//! RFC 2544 through a device under test whose capacity is known
//! independently: a namespace that routes between two veths, with a TBF
//! qdisc on its egress (TBF counts L2 bytes without FCS, so the expected
//! NDR is rate / (8 x (frame size - 4)) frames/s).

#[path = "../support/mod.rs"]
mod support;

mod campaign;
mod lab;
mod latency;
mod throughput;
