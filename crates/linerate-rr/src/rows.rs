//! rr's rows for the run's reporters (server workers' requests, client
//! workers' transactions) and the client's banner.

use crate::{ClientConfig, ClientReport, Latency, Load, ServerCounts, ServerInterval, TcpClient};
use linerate_run::{CountedBy, Counts, Gauges, Row, Scope};

/// An rr server interval (either transport) for the run's reporters: a
/// row per worker with its requests.
pub fn server_interval<C>(iv: &ServerInterval<C>) -> linerate_run::Interval {
    let rows: Vec<Row> = (iv.per_worker.iter().enumerate())
        .map(|(w, n)| server_row(w, Some(*n), None))
        .collect();
    linerate_run::Interval::new(iv.start.as_secs_f64(), iv.end.as_secs_f64(), rows)
}

/// An rr server worker's row: requests it received (server's count).
pub fn server_row(w: usize, requests: Option<u64>, c: Option<&ServerCounts>) -> Row {
    Row::new(Scope::Worker, w.to_string(), "requests", CountedBy::Server).with_counts(Counts {
        packets: requests,
        bytes: c.map(|c| c.bytes_in),
        errors: c.map(|c| c.malformed + c.too_large),
        ..Counts::default()
    })
}

/// An rr client row: transactions completed (client's count), latency.
pub fn client_row(id: &str, completed: u64, lost: u64, l: Option<&Latency>) -> Row {
    let mut r =
        Row::new(Scope::Worker, id, "transactions", CountedBy::Client).with_counts(Counts {
            packets: Some(completed),
            lost: Some(lost),
            ..Counts::default()
        });
    if let Some(l) = l {
        r.gauges = Gauges {
            latency_p50_ns: Some(l.p50),
            latency_p99_ns: Some(l.p99),
            latency_max_ns: Some(l.max),
            jitter_ms: None,
        };
    }
    r
}

impl ClientReport {
    /// Each worker's totals as the run's end rows (over TCP, connect
    /// errors and resets as its errors, in every reporter's rows).
    pub fn rows(&self) -> Vec<Row> {
        (self.workers.iter().enumerate())
            .map(|(w, wr)| {
                let mut row = client_row(&w.to_string(), wr.counts.completed, wr.counts.lost, None);
                if self.tcp.is_some() {
                    row.counts.errors = Some(wr.counts.connect_errors + wr.counts.resets);
                }
                row
            })
            .collect()
    }
}

impl ClientConfig {
    /// The rr client's first line for people: what it is about to do.
    pub fn banner(&self, tcp: Option<&TcpClient>) -> String {
        let cfg = self;
        let workers = if cfg.cores.is_empty() {
            cfg.threads
        } else {
            cfg.cores.len()
        };
        let n = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        format!(
            "rr client to {}{}: {} x {}, {}, {} B requests, {} B responses{}",
            cfg.server,
            match tcp {
                None => "",
                Some(t) if t.connect_per_transaction => " over TCP, a connection per transaction",
                Some(_) => " over TCP, persistent connections",
            },
            n(workers, "worker"),
            n(cfg.flows, "flow"),
            match cfg.load {
                Load::Closed { outstanding } =>
                    format!("closed loop, {outstanding} in flight per flow"),
                Load::Open { tps } => format!("open loop at {tps:.0} transactions/s"),
            },
            cfg.request_size,
            cfg.response_size,
            if cfg.busy_poll {
                ", busy polling (a core spins per worker)"
            } else {
                ""
            }
        )
    }
}
