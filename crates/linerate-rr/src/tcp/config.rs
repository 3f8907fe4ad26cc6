//! The rr server over TCP: what it is asked ([`TcpServerConfig`], checked
//! before anything is bound) and what it counts ([`TcpServerCounts`]).

use super::frame::TCP_MESSAGE_MAX;
use crate::server::Tally;
use crate::{Prefix, RrError};
use linerate_wire::RR_HEADER_LEN;
use std::net::SocketAddr;
use std::time::Duration;

/// Answers a connection may have waiting for the kernel before the server
/// stops reading its requests (TCP pushes back on the client from there).
pub const OUT_HIGH: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct TcpServerConfig {
    pub bind: SocketAddr,
    /// One worker pinned to each of these CPUs; empty: `workers` unpinned.
    pub cores: Vec<usize>,
    pub workers: usize,
    pub pin: bool,
    pub duration: Option<Duration>,
    pub interval: Option<Duration>,
    /// Largest response an `allow`ed source may ask for; every other
    /// source gets at most its request's size (as over UDP).
    pub max_response: usize,
    pub allow: Vec<Prefix>,
    /// Largest request message (header and payload) accepted; a longer
    /// frame closes its connection.
    pub max_message: usize,
    /// Connections open at once, in all and per source address.
    pub max_conns: usize,
    pub max_per_source: usize,
    /// A connection that moves no byte for this long is closed.
    pub idle_timeout: Duration,
    /// Workers spin on epoll without sleeping.
    pub spin: bool,
    /// SO_BUSY_POLL microseconds on each connection (0: off).
    pub busy_poll_us: u32,
    /// Intervals kept for the end document (as the UDP server's
    /// [`crate::ServerConfig::intervals_kept`]).
    pub intervals_kept: usize,
}

impl TcpServerConfig {
    pub(super) fn worker_count(&self) -> usize {
        if self.cores.is_empty() {
            self.workers
        } else {
            self.cores.len()
        }
    }

    pub(super) fn validate(&self) -> Result<(), RrError> {
        let bad = |s: String| Err(RrError::Config(s));
        if self.worker_count() == 0 || self.max_conns == 0 || self.max_per_source == 0 {
            return bad("a TCP server needs a worker and room for a connection".into());
        }
        if self.max_response > 0 && self.allow.is_empty() {
            return bad("a response larger than its request goes only to sources given with --allow: give --allow PREFIX with --max-response".into());
        }
        for (what, v) in [
            ("largest response", self.max_response),
            ("largest message", self.max_message),
        ] {
            if v != 0 && !(RR_HEADER_LEN..=TCP_MESSAGE_MAX).contains(&v) {
                return bad(format!(
                    "the {what} must be {RR_HEADER_LEN}..={TCP_MESSAGE_MAX} bytes, not {v}"
                ));
            }
        }
        if self.idle_timeout.is_zero() {
            return bad("the idle timeout must be above zero".into());
        }
        crate::check_cores(&self.cores)
    }
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct TcpServerCounts {
    /// Well-formed requests received.
    pub requests: u64,
    /// Answers queued on their connections.
    pub answered: u64,
    /// Frames that were not a request (a length below the header, not rr,
    /// a response); each closes its connection.
    pub malformed: u64,
    /// Frames longer than the largest message; each closes its connection.
    pub oversized: u64,
    /// Requests asking for a response above what their source may get
    /// (not answered).
    pub too_large: u64,
    /// rr message bytes received, and answered (queued; what never left
    /// is also in `unsent_bytes`, with its length prefixes); the 4-byte
    /// length prefixes not counted.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Connections accepted, and closed (by either side, for any reason).
    pub accepted: u64,
    pub closed: u64,
    /// Connections the peer reset (or that failed) rather than closed.
    pub resets: u64,
    /// Connections closed for moving no byte within the idle timeout.
    pub idle_closed: u64,
    /// Connections refused (closed at once) by the limit in all, and by
    /// the per-source limit.
    pub refused_total: u64,
    pub refused_source: u64,
    /// accept(2) failures (out of file descriptors and the like).
    pub accept_errors: u64,
    /// Answer bytes never written (their connection closed first).
    pub unsent_bytes: u64,
}

impl Tally for TcpServerCounts {
    fn absorb(&mut self, o: &Self) {
        self.zip(o, |a, b| a + b);
    }
    fn since(&self, earlier: &Self) -> Self {
        let mut d = *self;
        d.zip(earlier, |a, b| a - b);
        d
    }
    fn requests(&self) -> u64 {
        self.requests
    }
}

impl TcpServerCounts {
    fn zip(&mut self, o: &Self, f: impl Fn(u64, u64) -> u64) {
        macro_rules! each {
            ($($f:ident),*) => { $( self.$f = f(self.$f, o.$f); )* };
        }
        each!(
            requests,
            answered,
            malformed,
            oversized,
            too_large,
            bytes_in,
            bytes_out,
            accepted,
            closed,
            resets,
            idle_closed,
            refused_total,
            refused_source,
            accept_errors,
            unsent_bytes
        );
    }
}
