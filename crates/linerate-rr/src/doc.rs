//! rr's `-J` documents, derived: each struct's fields are the document's
//! keys in its order, borrowed from the typed reports.

use crate::client::{Counts, Interval, WorkerReport};
use crate::server::{ServerInterval, Steering, Tally};
use crate::tcp::config::OUT_HIGH;
use crate::{ClientReport, Latency, Load, ServerReport, TcpClient, TcpServerReport};
use serde::Serialize;
use std::time::Duration;

/// Latency in microseconds, to 3 decimals.
#[derive(Debug, Serialize)]
pub struct LatencyDoc {
    count: u64,
    min: f64,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    #[serde(rename = "p99.9")]
    p999: f64,
    #[serde(rename = "p99.99")]
    p9999: f64,
    max: f64,
}

impl LatencyDoc {
    pub fn of(l: &Latency) -> Self {
        let us = |ns: u64| (ns as f64 / 1e3 * 1e3).round() / 1e3;
        LatencyDoc {
            count: l.count,
            min: us(l.min),
            mean: (l.mean / 1e3 * 1e3).round() / 1e3,
            p50: us(l.p50),
            p90: us(l.p90),
            p99: us(l.p99),
            p999: us(l.p999),
            p9999: us(l.p9999),
            max: us(l.max),
        }
    }
}

fn per_s(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// What both servers' documents share: each worker's counts, the total,
/// the duration, the request rate and the intervals.
#[derive(Debug, Serialize)]
pub(crate) struct ServerCountsDoc<'a, C> {
    workers: Vec<ServerWorkerDoc<'a, C>>,
    counts: &'a C,
    duration_s: f64,
    requests_per_s: f64,
    intervals: Vec<ServerIntervalDoc<'a, C>>,
    /// Intervals older than the last ones kept, not listed (a server
    /// keeps at most [`crate::INTERVALS_KEPT`]).
    intervals_dropped: u64,
}

#[derive(Debug, Serialize)]
struct ServerWorkerDoc<'a, C> {
    cpu: Option<usize>,
    counts: &'a C,
}

#[derive(Debug, Serialize)]
struct ServerIntervalDoc<'a, C> {
    start: f64,
    end: f64,
    counts: &'a C,
    requests_per_s: f64,
    per_worker_requests: &'a [u64],
}

impl<'a, C: Tally> ServerCountsDoc<'a, C> {
    pub(crate) fn of(
        workers: &'a [(Option<usize>, C)],
        total: &'a C,
        elapsed: Duration,
        (intervals, intervals_dropped): (&'a [ServerInterval<C>], u64),
    ) -> Self {
        ServerCountsDoc {
            workers: (workers.iter())
                .map(|(cpu, counts)| ServerWorkerDoc { cpu: *cpu, counts })
                .collect(),
            counts: total,
            duration_s: elapsed.as_secs_f64(),
            requests_per_s: per_s(total.requests(), elapsed),
            intervals: (intervals.iter())
                .map(|i| ServerIntervalDoc {
                    start: i.start.as_secs_f64(),
                    end: i.end.as_secs_f64(),
                    counts: &i.total,
                    requests_per_s: per_s(i.total.requests(), i.end - i.start),
                    per_worker_requests: &i.per_worker,
                })
                .collect(),
            intervals_dropped,
        }
    }
}

/// The UDP server's document (server's count).
#[derive(Debug, Serialize)]
pub struct ServerDoc<'a> {
    listen: String,
    steering: &'static str,
    recipe: UdpRecipe,
    steering_note: &'a Option<String>,
    warnings: &'a [String],
    counted_by: &'static str,
    #[serde(flatten)]
    shared: ServerCountsDoc<'a, crate::ServerCounts>,
}

#[derive(Debug, Serialize)]
struct UdpRecipe {
    reuseport: bool,
    pinned: bool,
    batch: usize,
    busy_poll_us: u32,
    gso: bool,
    spin: bool,
    coalesce_us: u64,
    client_sockets: usize,
    /// The interface answered on over AF_XDP (null: the sockets).
    af_xdp: Option<String>,
}

impl<'a> ServerDoc<'a> {
    pub fn of(r: &'a ServerReport) -> Self {
        let c = &r.config;
        ServerDoc {
            listen: r.local.to_string(),
            steering: match (c.reuseport, c.steering, &r.steering_note) {
                _ if c.af_xdp.is_some() => {
                    "queues: an XDP program takes UDP to the port from each receive queue to the AF_XDP socket of that queue's worker"
                }
                (false, ..) => "none: one socket shared by every worker (no SO_REUSEPORT)",
                (true, Steering::Cpu, None) => {
                    "cpu: a classic BPF program on the SO_REUSEPORT group hands each request to the socket of the CPU it was processed on"
                }
                _ => "hash: the kernel's SO_REUSEPORT hash of the 4-tuple",
            },
            recipe: UdpRecipe {
                reuseport: c.reuseport,
                pinned: c.pin && !c.cores.is_empty(),
                batch: c.batch,
                busy_poll_us: c.busy_poll_us,
                gso: c.gso,
                spin: c.spin,
                coalesce_us: u64::try_from(c.coalesce.as_micros()).unwrap_or(u64::MAX),
                client_sockets: c.client_sockets,
                af_xdp: c.af_xdp.clone(),
            },
            steering_note: &r.steering_note,
            warnings: &r.warnings,
            counted_by: match c.af_xdp {
                Some(_) => {
                    "server: request frames taken from its AF_XDP sockets' receive rings and answers posted on their send rings"
                }
                None => "server: datagrams received and answered on its sockets",
            },
            shared: ServerCountsDoc::of(
                &r.workers,
                &r.total,
                r.elapsed,
                (&r.intervals, r.intervals_dropped),
            ),
        }
    }
}

/// The TCP server's document (server's count).
#[derive(Debug, Serialize)]
pub struct TcpServerDoc<'a> {
    listen: String,
    transport: &'static str,
    framing: &'static str,
    limits: Limits,
    recipe: TcpRecipe,
    warnings: &'a [String],
    counted_by: &'static str,
    #[serde(flatten)]
    shared: ServerCountsDoc<'a, crate::TcpServerCounts>,
}

#[derive(Debug, Serialize)]
struct Limits {
    max_conns: usize,
    max_per_source: usize,
    idle_timeout_s: f64,
    max_message: usize,
    max_response: usize,
    out_buffer: usize,
}

#[derive(Debug, Serialize)]
struct TcpRecipe {
    reuseport: bool,
    pinned: bool,
    busy_poll_us: u32,
    spin: bool,
}

impl<'a> TcpServerDoc<'a> {
    pub fn of(r: &'a TcpServerReport) -> Self {
        let c = &r.config;
        TcpServerDoc {
            listen: r.local.to_string(),
            transport: "tcp",
            framing: "each rr message preceded by its length (u32, big-endian)",
            limits: Limits {
                max_conns: c.max_conns,
                max_per_source: c.max_per_source,
                idle_timeout_s: c.idle_timeout.as_secs_f64(),
                max_message: c.max_message,
                max_response: c.max_response,
                out_buffer: OUT_HIGH,
            },
            recipe: TcpRecipe {
                reuseport: true,
                pinned: c.pin && !c.cores.is_empty(),
                busy_poll_us: c.busy_poll_us,
                spin: c.spin,
            },
            warnings: &r.warnings,
            counted_by: "server: frames received and answered on its connections",
            shared: ServerCountsDoc::of(
                &r.workers,
                &r.total,
                r.elapsed,
                (&r.intervals, r.intervals_dropped),
            ),
        }
    }
}

/// The load a client offered.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum LoadDoc {
    Closed { outstanding_per_flow: usize },
    Open { rate_tps: f64 },
}

#[derive(Debug, Serialize)]
struct ClientWorkerDoc<'a> {
    cpu: Option<usize>,
    flows: Vec<String>,
    counts: &'a Counts,
}

#[derive(Debug, Serialize)]
struct ClientIntervalDoc {
    start: f64,
    end: f64,
    completed: u64,
    transactions_per_s: f64,
    lost: u64,
    latency_us: Option<LatencyDoc>,
}

impl ClientIntervalDoc {
    fn of(i: &Interval) -> Self {
        ClientIntervalDoc {
            start: i.start.as_secs_f64(),
            end: i.end.as_secs_f64(),
            completed: i.completed,
            transactions_per_s: i.tps(),
            lost: i.lost,
            latency_us: i.latency.as_ref().map(LatencyDoc::of),
        }
    }
}

/// The client's document (client's count).
#[derive(Debug, Serialize)]
pub struct ClientDoc<'a> {
    server: String,
    mode: &'static str,
    load: LoadDoc,
    workers: Vec<ClientWorkerDoc<'a>>,
    flows: usize,
    request_bytes: usize,
    response_bytes: usize,
    transport: &'static str,
    connect_timeout_ms: Option<f64>,
    close: Option<&'static str>,
    bytes_are: &'static str,
    duration_s: f64,
    interrupted: bool,
    warnings: &'a [String],
    timeout_ms: f64,
    busy_poll: bool,
    counts: &'a Counts,
    counted_by: &'static str,
    transactions_per_s: f64,
    latency_us: Option<LatencyDoc>,
    send_lag_us: Option<LatencyDoc>,
    send_lag_is: &'static str,
    latency_from: &'static str,
    intervals: Vec<ClientIntervalDoc>,
}

impl<'a> ClientDoc<'a> {
    pub fn of(r: &'a ClientReport) -> Self {
        let c = &r.config;
        let (mode, load) = match c.load {
            Load::Closed { outstanding } => (
                "closed loop",
                LoadDoc::Closed {
                    outstanding_per_flow: outstanding,
                },
            ),
            Load::Open { tps } => ("open loop", LoadDoc::Open { rate_tps: tps }),
        };
        let worker = |w: &'a WorkerReport| ClientWorkerDoc {
            cpu: w.cpu,
            flows: w.local.iter().map(ToString::to_string).collect(),
            counts: &w.counts,
        };
        ClientDoc {
            server: c.server.to_string(),
            mode,
            load,
            workers: r.workers.iter().map(worker).collect(),
            flows: r.workers.iter().map(|w| w.local.len()).sum(),
            request_bytes: c.request_size,
            response_bytes: c.response_size,
            transport: match r.tcp {
                None => "udp",
                Some(TcpClient {
                    connect_per_transaction: false,
                    ..
                }) => "tcp",
                Some(TcpClient {
                    connect_per_transaction: true,
                    ..
                }) => "tcp, a connection per transaction",
            },
            connect_timeout_ms: r.tcp.map(|t| t.connect_timeout.as_secs_f64() * 1e3),
            close: match r.tcp {
                Some(TcpClient {
                    connect_per_transaction: true,
                    close_reset: true,
                    ..
                }) => Some("reset"),
                Some(TcpClient {
                    connect_per_transaction: true,
                    ..
                }) => Some("fin"),
                _ => None,
            },
            bytes_are: match r.tcp {
                None => "UDP payload (the 32-byte rr header included)",
                Some(_) => {
                    "rr message (the 32-byte rr header included; the 4-byte TCP frame length not)"
                }
            },
            duration_s: r.elapsed.as_secs_f64(),
            interrupted: r.interrupted,
            warnings: &r.warnings,
            timeout_ms: c.timeout.as_secs_f64() * 1e3,
            busy_poll: c.busy_poll,
            counts: &r.total,
            counted_by: "client: each response matched to its request by flow and sequence number; sent = completed + lost",
            transactions_per_s: r.tps(),
            latency_us: r.latency.as_ref().map(LatencyDoc::of),
            send_lag_us: r.send_lag.as_ref().map(LatencyDoc::of),
            send_lag_is: "open loop: how late each request left against its schedule (client clock); null in closed loop",
            latency_from: match c.load {
                Load::Closed { .. } => {
                    "the request's send time to its response's receipt (client clock)"
                }
                Load::Open { .. } => {
                    "the request's scheduled send time to its response's receipt (client clock; includes the client's own delays)"
                }
            },
            intervals: r.intervals.iter().map(ClientIntervalDoc::of).collect(),
        }
    }
}

impl ServerReport {
    /// The server's document (`-J`'s, without the doctor's summary).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(ServerDoc::of(self)).unwrap_or_default()
    }
}

impl TcpServerReport {
    /// The server's document (`-J`'s, without the doctor's summary).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(TcpServerDoc::of(self)).unwrap_or_default()
    }
}
