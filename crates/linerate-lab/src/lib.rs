//! Network namespace labs on one machine: the topologies of `linerate lab`
//! (`up`, `down`, `status`: a pair of hosts, or a generator with a device
//! under test that routes, shapes or runs `linerate fwd`), and the
//! namespace rig of the tests, both addressed from the benchmarking
//! ranges 198.18.0.0/15 and 2001:db8::/32.
//!
//! The namespace rig (`Rig`): N test hosts in their own network
//! namespaces, joined by veth pairs, with static neighbour entries so no
//! ARP/ND traffic disturbs a measurement; used by integration tests and by
//! `bench/`. Every rig deletes its namespaces when dropped, also while a
//! panicking test unwinds; a rig left behind by a killed process is swept by
//! the next rig made on the machine.
//!
//! Tests that need root or a peer program skip through `linerate-testkit`
//! (a skip is a failure under `LINERATE_STRICT=1`).

mod command;
mod error;
mod napi;
mod netns;
mod topology;

pub use command::ip_text;
pub use error::RigError;
pub use napi::napi_threads;
pub use netns::{Host, IfaceStats, Rig, RigConfig};
pub use topology::{
    LabError, Up, down, down_text, status, status_text, suggested_commands, up, valid_prefix,
};
