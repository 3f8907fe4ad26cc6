//! What the rr client is asked to do, checked before anything starts.

use crate::RrError;
use linerate_wire::RR_HEADER_LEN;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Largest UDP payload over IPv4 (and without jumbograms over IPv6).
pub const DATAGRAM_MAX: usize = 65_507;

/// How requests are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// This many requests in flight per flow at all times.
    Closed { outstanding: usize },
    /// This many transactions per second in all, whatever comes back.
    Open { tps: f64 },
}

/// The client over TCP.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpClient {
    /// Each transaction connects, sends its request, reads the response
    /// and closes (TCP_CRR); otherwise each flow is one persistent
    /// connection (TCP_RR).
    pub connect_per_transaction: bool,
    /// A connection not made within this long is a connect error.
    pub connect_timeout: Duration,
    /// With `connect_per_transaction`: close each connection with a reset
    /// (SO_LINGER 0) instead of a FIN: one segment instead of the FIN
    /// exchange, and no TIME_WAIT left on the client (neper's tcp_crr
    /// closes so by default).
    pub close_reset: bool,
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub server: SocketAddr,
    /// Local address to send from (default: the kernel's choice).
    pub bind: Option<IpAddr>,
    /// One worker pinned to each of these CPUs; empty: `threads` unpinned.
    pub cores: Vec<usize>,
    pub threads: usize,
    /// Flows (connected sockets) per worker.
    pub flows: usize,
    pub load: Load,
    /// Request payload bytes (the 32-byte header included).
    pub request_size: usize,
    /// Response payload bytes asked of the server.
    pub response_size: usize,
    pub duration: Duration,
    /// A request unanswered this long is lost.
    pub timeout: Duration,
    /// Interval reports (None: none).
    pub interval: Option<Duration>,
    /// Spin on the sockets for answers instead of sleeping in the kernel:
    /// no wake-up per transaction, one core busy per worker.
    pub busy_poll: bool,
}

impl ClientConfig {
    /// One worker with one flow to `server` in closed loop, 64 B requests
    /// and `response_size` B answers, 1 s long: the unit tests' client.
    #[cfg(test)]
    pub(crate) fn one_flow_for_test(
        server: std::net::SocketAddr,
        outstanding: usize,
        response_size: usize,
        busy_poll: bool,
    ) -> Self {
        Self {
            server,
            bind: None,
            cores: vec![],
            threads: 1,
            flows: 1,
            load: Load::Closed { outstanding },
            request_size: 64,
            response_size,
            duration: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            interval: None,
            busy_poll,
        }
    }

    /// Checks what cannot work before any traffic.
    pub fn validate(&self) -> Result<(), RrError> {
        self.validate_sizes(DATAGRAM_MAX, "a UDP datagram")
    }

    /// Checks everything, with messages of up to `max` bytes (`holder`
    /// says what holds at most that).
    pub(crate) fn validate_sizes(&self, max: usize, holder: &str) -> Result<(), RrError> {
        let bad = |what: String| Err(RrError::Config(what));
        for (name, v) in [
            ("request size", self.request_size),
            ("response size", self.response_size),
        ] {
            if !(RR_HEADER_LEN..=max).contains(&v) {
                return bad(format!(
                    "{name} {v} is outside {RR_HEADER_LEN}..={max} bytes (the rr header is {RR_HEADER_LEN} bytes; {holder} holds at most {max})"
                ));
            }
        }
        if self.workers() == 0 || self.flows == 0 {
            return bad("at least one worker and one flow per worker are needed".into());
        }
        if self.workers() * self.flows > 65_536 {
            return bad(format!(
                "{} flows in all is more than 65536",
                self.workers() * self.flows
            ));
        }
        match self.load {
            Load::Closed { outstanding } if outstanding == 0 || outstanding > 65_536 => {
                return bad(format!(
                    "outstanding requests per flow must be 1..=65536, not {outstanding}"
                ));
            }
            Load::Open { tps } if !(tps.is_finite() && tps > 0.0) => {
                return bad(format!(
                    "rate {tps} transactions/s is not a positive number"
                ));
            }
            _ => {}
        }
        if self.duration.is_zero() || self.timeout.is_zero() {
            return bad("duration and timeout must be above zero".into());
        }
        crate::check_cores(&self.cores)?;
        if self.server.port() == 0 {
            return bad("the server's port cannot be 0".into());
        }
        Ok(())
    }

    pub(crate) fn workers(&self) -> usize {
        if self.cores.is_empty() {
            self.threads
        } else {
            self.cores.len()
        }
    }
}
