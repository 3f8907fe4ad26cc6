//! The rr server and client as runs of the run model: each reports its
//! intervals into the [`Run`] and ends with what it measured (its rows and
//! its typed outcome).

use crate::{
    ClientConfig, ClientReport, Interval, RrClientOutcome, RrError, RrServerOutcome,
    RrTcpServerOutcome, Server, ServerInterval, TcpClient, TcpServer, client_row, server_row,
};
use linerate_run::{Counts, Measured, Run};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// An rr server bound to its port, over UDP or TCP (`--tcp`).
#[derive(Debug)]
pub enum Bound {
    Udp(Server),
    Tcp(TcpServer),
}

impl Bound {
    /// The server `flags` ask for, bound.
    pub fn bind(flags: &crate::ServerFlags, tcp: bool) -> Result<Bound, RrError> {
        Ok(if tcp {
            Bound::Tcp(TcpServer::bind(&flags.tcp_config()?)?)
        } else {
            Bound::Udp(Server::bind(&flags.udp_config()?)?)
        })
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        match self {
            Bound::Udp(s) => s.local_addr(),
            Bound::Tcp(s) => s.local_addr(),
        }
    }

    /// The run's `Start` settings.
    pub fn start(&self, flags: &crate::ServerFlags) -> Value {
        match self {
            Bound::Udp(s) => flags.udp_start(s.local_addr()),
            Bound::Tcp(s) => flags.tcp_start(s.local_addr()),
        }
    }

    /// The line saying where it listens: for people on standard output
    /// (with its workers' CPUs), else on stderr for whoever waits to send
    /// (standard output carries the document).
    pub fn listening_line(&self, human: bool, cores: &[usize]) -> String {
        let (at, tcp) = (self.local_addr(), matches!(self, Bound::Tcp(_)));
        let transport = if tcp { "TCP" } else { "UDP" };
        if let Bound::Udp(s) = self
            && let Some((iface, n)) = s.af_xdp()
        {
            let line = format!("rr server listening on {at} (UDP over AF_XDP on {iface})");
            return match human {
                true => format!(
                    "{line}, {n} workers on CPUs {:?}",
                    &cores[..n.min(cores.len())]
                ),
                false => format!("linerate: {line}"),
            };
        }
        match (human, tcp) {
            (true, _) => format!(
                "rr server listening on {at} ({transport}), {} workers on CPUs {cores:?}",
                cores.len()
            ),
            (false, true) => format!("linerate: rr server listening on {at} (TCP)"),
            (false, false) => format!("linerate: rr server listening on {at}"),
        }
    }

    /// Serves until `stop` (or the configured time).
    pub fn serve(self, stop: &AtomicBool, run: &mut Run, doctor: Value) -> Measured {
        match self {
            Bound::Udp(s) => serve_udp(s, stop, run, doctor),
            Bound::Tcp(s) => serve_tcp(s, stop, run, doctor),
        }
    }
}

/// Serves UDP until `stop` (or the configured time); `doctor`: the host's
/// summary for the document.
pub fn serve_udp(server: Server, stop: &AtomicBool, run: &mut Run, doctor: Value) -> Measured {
    let r = server.run(stop, |iv: &ServerInterval| {
        run.interval(&crate::server_interval(iv));
    });
    let rows = (r.workers.iter().enumerate())
        .map(|(w, (_, c))| server_row(w, Some(c.requests), Some(c)))
        .collect();
    Measured {
        duration_s: r.elapsed.as_secs_f64(),
        rows,
        error: None,
        outcome: Arc::new(RrServerOutcome { report: r, doctor }),
    }
}

/// Serves TCP until `stop` (or the configured time).
pub fn serve_tcp(server: TcpServer, stop: &AtomicBool, run: &mut Run, doctor: Value) -> Measured {
    let r = server.run(stop, |iv| run.interval(&crate::server_interval(iv)));
    let rows = (r.workers.iter().enumerate())
        .map(|(w, (_, c))| {
            server_row(w, Some(c.requests), None).with_counts(Counts {
                packets: Some(c.requests),
                bytes: Some(c.bytes_in),
                errors: Some(c.malformed + c.oversized + c.too_large),
                ..Counts::default()
            })
        })
        .collect();
    Measured {
        duration_s: r.elapsed.as_secs_f64(),
        rows,
        error: None,
        outcome: Arc::new(RrTcpServerOutcome { report: r, doctor }),
    }
}

/// Runs the client (over TCP with `tcp`) until its time or `stop`;
/// `timeout_ms` as given, for the document. With no answer at all, what
/// was measured before the error, with the error.
pub fn run_client(
    cfg: &ClientConfig,
    tcp: Option<&TcpClient>,
    stop: &AtomicBool,
    run: &mut Run,
    timeout_ms: f64,
) -> Result<Measured, RrError> {
    let on_interval = |iv: &Interval| {
        let rows = vec![client_row(
            "all",
            iv.completed,
            iv.lost,
            iv.latency.as_ref(),
        )];
        run.interval(&linerate_run::Interval::new(
            iv.start.as_secs_f64(),
            iv.end.as_secs_f64(),
            rows,
        ));
    };
    let result = match tcp {
        Some(t) => crate::run_tcp_client(cfg, t, stop, on_interval),
        None => crate::run_client(cfg, stop, on_interval),
    };
    client_measured(result, cfg, timeout_ms)
}

/// What an rr client run measured: its report, or with no answer at all
/// what was measured before the error.
fn client_measured(
    result: Result<ClientReport, RrError>,
    cfg: &ClientConfig,
    timeout_ms: f64,
) -> Result<Measured, RrError> {
    let load = cfg.load;
    Ok(match result {
        Ok(r) => Measured {
            duration_s: r.elapsed.as_secs_f64(),
            rows: r.rows(),
            error: None,
            outcome: Arc::new(RrClientOutcome {
                doctor: Some(linerate_doctor::test_summary_at(r.local_ip(), &cfg.cores)),
                report: r,
                load,
                timeout_ms,
            }),
        },
        Err(e) => {
            let msg = e.to_string();
            let RrError::NoAnswer { report, .. } = e else {
                return Err(e);
            };
            Measured {
                duration_s: 0.0,
                rows: Vec::new(),
                error: Some(msg),
                outcome: Arc::new(RrClientOutcome {
                    report: *report,
                    doctor: None,
                    load,
                    timeout_ms,
                }),
            }
        }
    })
}
