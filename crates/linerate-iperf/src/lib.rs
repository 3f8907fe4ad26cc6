//! The iperf3-compatible server and client: sockets, one thread per data
//! stream, timers and output around the sans-IO protocol of `linerate-iperf-proto`.

pub mod client;
mod meter;
pub mod net;
pub mod server;
mod set;
mod stream;

pub use client::{ClientAuth, ClientFailure, ClientOptions};
pub use net::Family;
pub use server::{Limits, ServerAuth, ServerOptions};
