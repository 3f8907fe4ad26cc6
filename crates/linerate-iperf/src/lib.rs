//! The iperf3-compatible server and client: sockets, one thread per data
//! stream, timers and output around the sans-IO protocol of `linerate-iperf-proto`.

pub mod client;
pub mod credentials;
pub mod driven;
pub mod flags;
pub mod getopt;
mod meter;
pub mod net;
pub mod output;
pub mod pidfile;
pub mod selftest;
pub mod server;
mod set;
mod stream;

pub use client::{ClientAuth, ClientFailure, ClientOptions};
pub use driven::{ClientEnd, run_client};
pub use net::Family;
pub use server::{Limits, ServerAuth, ServerOptions};
