//! `linerate rr`: UDP request/response transactions (DNS- or RADIUS-sized).
//!
//! The server ([`server`]) is a group of SO_REUSEPORT sockets on one port,
//! one per pinned worker thread, with a classic BPF program that hands each
//! request to the socket of the CPU the kernel processed it on, so a
//! request is received and answered on the CPU its interrupt landed on.
//! The client ([`client`]) runs pinned workers with many flows each, closed
//! loop (N requests in flight per flow) or open loop (a fixed rate), and
//! accounts for every request: answered once, lost, late, duplicated or
//! unknown, with latency percentiles overall and per interval.

mod answer;
pub mod client;
pub mod clients;
mod doc;
pub mod flags;
pub mod mode;
mod outcome;
mod prefix;
mod rows;
pub mod server;
pub mod spin;
pub mod tcp;
pub mod track;
pub mod xdp;

pub use client::{
    ClientConfig, ClientReport, Interval, Load, TcpClient, run_client, run_tcp_client,
};
pub use flags::{ClientFlags, ServerFlags};
pub use outcome::{RrClientOutcome, RrServerOutcome, RrTcpServerOutcome};
pub use prefix::Prefix;
pub use rows::{client_row, server_interval, server_row};
pub use server::{
    INTERVALS_KEPT, Server, ServerConfig, ServerCounts, ServerInterval, ServerReport, Steering,
};
pub use tcp::{TcpServer, TcpServerConfig, TcpServerCounts, TcpServerReport};

use hdrhistogram::Histogram;
use serde_json::Value;
use std::net::SocketAddr;

/// The rr port when none is given (client and server).
pub const DEFAULT_PORT: u16 = 5300;

/// Latencies above this (a minute) are recorded as this.
pub const LATENCY_MAX_NS: u64 = 60_000_000_000;

#[derive(Debug, thiserror::Error)]
pub enum RrError {
    #[error("{0}")]
    Config(String),
    #[error("cannot {what}: {source}")]
    Socket {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no answer from {server}: {sent} requests sent, {refused} ICMP errors back (is a linerate rr server listening there?)"
    )]
    NoAnswer {
        server: SocketAddr,
        sent: u64,
        refused: u64,
        /// What was measured anyway.
        report: Box<client::ClientReport>,
    },
}

/// Latency percentiles of a set of transactions, ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    /// Standard deviation, ns (the histogram's: values at its 3
    /// significant digits).
    pub stddev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
}

impl Latency {
    /// None for an empty histogram.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| Self {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            stddev: h.stdev(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
        })
    }

    /// Microseconds, to 3 decimals.
    pub fn json(&self) -> Value {
        serde_json::to_value(doc::LatencyDoc::of(self)).unwrap_or_default()
    }
}

/// Checks that every CPU in `cores` is one this process may run on.
pub fn check_cores(cores: &[usize]) -> Result<(), RrError> {
    let bad = linerate_backend::cpu::not_allowed(cores);
    if bad.is_empty() {
        Ok(())
    } else {
        Err(RrError::Config(format!(
            "CPU(s) {bad:?} in --cores are not online or not allowed for this process"
        )))
    }
}

/// Pins the calling worker; a failure is kept for the report's `warnings`.
pub(crate) fn pin(cpu: usize, warnings: &std::sync::Mutex<Vec<String>>) {
    if let Err(e) = linerate_backend::cpu::pin_worker(cpu)
        && let Ok(mut w) = warnings.lock()
    {
        w.push(e);
    }
}
