//! The namespace test rig: N test hosts in their own network namespaces,
//! joined by veth pairs, addressed from the benchmarking ranges
//! 198.18.0.0/15 and 2001:db8::/32, with static neighbour entries so no
//! ARP/ND traffic disturbs a measurement.
//!
//! Used by integration tests and by `bench/`. Every rig deletes its
//! namespaces when dropped, also while a panicking test unwinds; a rig left
//! behind by a killed process is swept by the next rig made on the machine.
//!
//! Tests that need root or a peer program call [`require`]: it skips with a
//! printed reason, unless `LINERATE_STRICT=1` (CI) where a skip is a failure.

mod netns;
mod skip;

pub use netns::{Host, IfaceStats, Rig, RigConfig, RigError, ip_text, napi_threads};
pub use skip::{
    Requirement, iperf3_321, require_iperf3_321, require_program, require_root, should_skip, strict,
};
