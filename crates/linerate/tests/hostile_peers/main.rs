//! Faults a careless or hostile peer could cause (issue 12): each test
//! reproduces one, against the real binary, with fake peers written here
//! where a real iperf3 would not misbehave.

#[path = "../support/mod.rs"]
mod support;

mod client;
mod peers;
mod server;
