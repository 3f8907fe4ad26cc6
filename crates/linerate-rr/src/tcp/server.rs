//! The rr server over TCP: one SO_REUSEPORT listener per worker on one
//! port (the kernel spreads connections over them), each worker pinned to
//! its CPU and polling its own listener and connections with epoll
//! ([`super::worker`]), supervised for intervals and the end report here.

use super::config::{TcpServerConfig, TcpServerCounts};
use super::worker::{Limits, Worker};
use crate::server::{Clock, ServerInterval, Tally, supervise};
use crate::{RrError, pin};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A bound TCP server: the listeners exist before [`TcpServer::run`].
#[derive(Debug)]
pub struct TcpServer {
    cfg: TcpServerConfig,
    listeners: Vec<TcpListener>,
    local: SocketAddr,
    warnings: Vec<String>,
}

#[derive(Debug)]
pub struct TcpServerReport {
    pub config: TcpServerConfig,
    pub local: SocketAddr,
    pub workers: Vec<(Option<usize>, TcpServerCounts)>,
    pub total: TcpServerCounts,
    pub elapsed: Duration,
    /// The last `intervals_kept` intervals, oldest first.
    pub intervals: Vec<ServerInterval<TcpServerCounts>>,
    /// Intervals reported but not kept.
    pub intervals_dropped: u64,
    pub warnings: Vec<String>,
}

/// Raises the open-file limit to its hard limit; a warning when it still
/// cannot hold `want` descriptors.
pub(crate) fn raise_nofile(want: usize) -> Option<String> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok();
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    (soft < want as u64 + 64).then(|| {
        format!("the open-file limit ({soft}) is below --max-conns ({want}): accepts beyond it fail and are counted accept_errors")
    })
}

impl TcpServer {
    /// One listener per worker, all on one port (SO_REUSEPORT).
    pub fn bind(cfg: &TcpServerConfig) -> Result<Self, RrError> {
        cfg.validate()?;
        let sock_err = |what: String| move |e| RrError::Socket { what, source: e };
        let mut addr = cfg.bind;
        let mut listeners = Vec::new();
        for i in 0..cfg.worker_count() {
            let s = socket2::Socket::new(
                socket2::Domain::for_address(addr),
                socket2::Type::STREAM,
                None,
            )
            .map_err(sock_err("open a TCP socket".into()))?;
            s.set_reuse_port(true)
                .map_err(sock_err("set SO_REUSEPORT".into()))?;
            s.set_reuse_address(true).ok();
            if addr.is_ipv6() {
                s.set_only_v6(false).ok();
            }
            s.bind(&addr.into())
                .map_err(sock_err(format!("bind {addr} (TCP)")))?;
            s.listen(4096).map_err(sock_err("listen".into()))?;
            // Connections accepted here start in delayed-ACK mode (each
            // is a copy of its listener): a request is acknowledged by its
            // answer, not first by a segment of its own, as a new
            // connection's first data is otherwise; one segment fewer per
            // connection of one transaction. After a connection's first
            // exchange the kernel is in that mode anyway.
            s.set_tcp_quickack(false)
                .map_err(sock_err("set TCP_QUICKACK off".into()))?;
            s.set_nonblocking(true)
                .map_err(sock_err("set O_NONBLOCK".into()))?;
            if i == 0 {
                addr = s
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_socket())
                    .unwrap_or(addr);
            }
            listeners.push(TcpListener::from(s));
        }
        Ok(Self {
            cfg: cfg.clone(),
            listeners,
            local: addr,
            warnings: raise_nofile(cfg.max_conns).into_iter().collect(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until `stop` is set or the duration ends.
    pub fn run(
        self,
        stop: &AtomicBool,
        mut on_interval: impl FnMut(&ServerInterval<TcpServerCounts>),
    ) -> TcpServerReport {
        let cfg = &self.cfg;
        let shared: Vec<Arc<Mutex<TcpServerCounts>>> =
            self.listeners.iter().map(|_| Arc::default()).collect();
        let limits = Limits::default();
        let end = AtomicBool::new(false);
        let warnings = Mutex::new(self.warnings.clone());
        let start = Instant::now();
        let intervals = std::thread::scope(|s| {
            let handles = (self.listeners.iter().enumerate())
                .map(|(i, l)| {
                    let (sh, cpu) = (shared[i].clone(), cfg.cores.get(i).copied());
                    let (limits, end, warnings) = (&limits, &end, &warnings);
                    s.spawn(move || {
                        if let Some(c) = cpu.filter(|_| cfg.pin) {
                            pin(c, warnings);
                        }
                        match Worker::new(cfg, l, limits) {
                            Ok(mut w) => w.serve(&sh, end),
                            Err(e) => warnings
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(format!("a worker could not start: {e}")),
                        }
                    })
                })
                .collect();
            let clock = Clock {
                start,
                duration: cfg.duration,
                interval: cfg.interval,
                intervals_kept: cfg.intervals_kept,
            };
            supervise(&clock, stop, &end, handles, &shared, &mut on_interval)
        });
        let workers: Vec<_> = (shared.iter().enumerate())
            .map(|(i, s)| (cfg.cores.get(i).copied(), TcpServerCounts::read(s)))
            .collect();
        let mut total = TcpServerCounts::default();
        workers.iter().for_each(|(_, c)| total.absorb(c));
        TcpServerReport {
            config: self.cfg.clone(),
            local: self.local,
            workers,
            total,
            elapsed: start.elapsed(),
            intervals_dropped: intervals.dropped,
            intervals: intervals.kept.into(),
            warnings: warnings.into_inner().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn loopback() -> TcpServerConfig {
        TcpServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            cores: vec![],
            workers: 1,
            pin: false,
            duration: None,
            interval: None,
            max_response: 0,
            allow: vec![],
            max_message: 0,
            max_conns: 16,
            max_per_source: 16,
            idle_timeout: Duration::from_secs(10),
            spin: false,
            busy_poll_us: 0,
            intervals_kept: 1,
        }
    }

    /// The accepted end of a connection to `l`.
    fn accepted(l: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let t0 = Instant::now();
        loop {
            match l.accept() {
                Ok((s, _)) => return (s, client),
                Err(e) if t0.elapsed() >= Duration::from_secs(2) => panic!("accept: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    #[test]
    fn accepted_connections_acknowledge_requests_with_their_answers() {
        // TCP_QUICKACK reads 0 while a socket is in delayed-ACK mode.
        let quickack = |s: &TcpStream| socket2::SockRef::from(s).tcp_quickack().unwrap();
        let srv = TcpServer::bind(&loopback()).unwrap();
        let (s, _client) = accepted(&srv.listeners[0]);
        assert!(!quickack(&s));
        // The kernel's default, for comparison: quick ACKs at first.
        let plain = TcpListener::bind("127.0.0.1:0").unwrap();
        plain.set_nonblocking(true).unwrap();
        let (s, _client) = accepted(&plain);
        assert!(quickack(&s));
    }
}
