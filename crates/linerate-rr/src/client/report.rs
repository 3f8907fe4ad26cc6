//! What the rr client counted: per worker, per interval and in total, and
//! its JSON.

use super::config::{ClientConfig, TcpClient};
use crate::Latency;
use hdrhistogram::Histogram;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// What one worker counted.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Counts {
    /// Requests the kernel took.
    pub sent: u64,
    /// Requests answered (first answer).
    pub completed: u64,
    /// Requests unanswered within the timeout (or at the end).
    pub lost: u64,
    /// Answers to requests already counted lost.
    pub late: u64,
    /// Second and later answers to one request.
    pub duplicate: u64,
    /// Answers matching no request this flow has in its window.
    pub unknown: u64,
    /// Datagrams that are not a well-formed response of the asked size.
    pub malformed: u64,
    /// ICMP errors reported on the flows (port unreachable and the like).
    pub refused: u64,
    /// Sends that failed with an error other than a full buffer.
    pub send_errors: u64,
    /// Times a send found the socket buffer full (retried).
    pub send_blocked: u64,
    /// Open loop: most requests a worker found overdue at once, beyond the
    /// one just due (0: it kept to the schedule).
    pub behind_max: u64,
    /// TCP: connections attempted (one per transaction with
    /// --connect-per-transaction, one per flow otherwise).
    pub connects: u64,
    /// TCP: connections refused, failed or not made within the timeout.
    pub connect_errors: u64,
    /// TCP: connections reset or closed by the server while in use.
    pub resets: u64,
    /// TCP, persistent connections: connections made again after one was
    /// lost (each also in `connects`).
    pub reconnects: u64,
}

impl Counts {
    pub(super) fn absorb(&mut self, o: &Counts) {
        self.sent += o.sent;
        self.completed += o.completed;
        self.lost += o.lost;
        self.late += o.late;
        self.duplicate += o.duplicate;
        self.unknown += o.unknown;
        self.malformed += o.malformed;
        self.refused += o.refused;
        self.send_errors += o.send_errors;
        self.send_blocked += o.send_blocked;
        self.behind_max = self.behind_max.max(o.behind_max);
        self.connects += o.connects;
        self.connect_errors += o.connect_errors;
        self.resets += o.resets;
        self.reconnects += o.reconnects;
    }
}

/// One interval of one worker (sent to the collecting thread).
#[derive(Debug)]
pub(super) struct Sample {
    pub(super) index: usize,
    pub(super) completed: u64,
    pub(super) lost: u64,
    pub(super) hist: Histogram<u64>,
    /// For the last interval: how long this worker sent for.
    pub(super) until: Option<Duration>,
}

/// One interval of all workers.
#[derive(Debug, Clone)]
pub struct Interval {
    pub start: Duration,
    pub end: Duration,
    pub completed: u64,
    pub lost: u64,
    pub latency: Option<Latency>,
}

impl Interval {
    pub fn tps(&self) -> f64 {
        self.completed as f64 / (self.end - self.start).as_secs_f64().max(1e-9)
    }
}

#[derive(Debug)]
pub struct WorkerReport {
    pub cpu: Option<usize>,
    pub counts: Counts,
    pub local: Vec<SocketAddr>,
}

/// One answer as it arrived (`run_client_keeping`): which request, what
/// it turned out to be, its round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roundtrip {
    pub flow: u32,
    /// The request's sequence number in its flow (from 0).
    pub seq: u64,
    /// Request sent to this answer, ns (answered in time only).
    pub rtt_ns: Option<u64>,
    pub answer: RoundtripKind,
}

/// What an answer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundtripKind {
    /// The first answer to a request in flight.
    Answered,
    /// A second answer to a request already answered.
    Duplicate,
    /// An answer to a request already counted lost (after the timeout).
    Late,
    /// An answer to no request of this flow's window.
    Unknown,
}

#[derive(Debug)]
pub struct ClientReport {
    pub config: ClientConfig,
    /// Over TCP: how (None: UDP).
    pub tcp: Option<TcpClient>,
    pub workers: Vec<WorkerReport>,
    pub total: Counts,
    /// From the first request to the end of sending.
    pub elapsed: Duration,
    pub latency: Option<Latency>,
    /// Open loop: how late each request left against its schedule.
    pub send_lag: Option<Latency>,
    pub intervals: Vec<Interval>,
    /// Stopped by the caller (a signal) before the duration ended.
    pub interrupted: bool,
    /// What went wrong without stopping the run (a worker that could not be
    /// pinned).
    pub warnings: Vec<String>,
    /// The answers kept one by one (`run_client_keeping`), worker by
    /// worker, each in arrival order.
    pub roundtrips: Vec<Roundtrip>,
}

impl ClientReport {
    pub fn tps(&self) -> f64 {
        self.total.completed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The local address of the first flow (for the doctor summary).
    pub fn local_ip(&self) -> Option<IpAddr> {
        self.workers.first()?.local.first().map(SocketAddr::ip)
    }

    /// The client's document (`-J`'s, without the doctor's summary).
    pub fn json(&self) -> Value {
        serde_json::to_value(crate::doc::ClientDoc::of(self)).unwrap_or_default()
    }
}
