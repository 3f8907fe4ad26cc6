//! The rr client: pinned worker threads, each with its own flows (one
//! connected UDP socket per flow, so the server and the NIC see distinct
//! 5-tuples), matching every response to its request by sequence number.
//!
//! Closed loop keeps `outstanding` requests in flight per flow and sends
//! the next one when one is answered or declared lost. Open loop sends at
//! a fixed transaction rate whatever comes back, and measures each
//! latency from the request's *scheduled* send time, so a client that
//! falls behind shows it in the latency instead of hiding it
//! (coordinated omission).

use crate::track::{Answer, Outstanding};
use crate::{LATENCY_MAX_NS, Latency, RrError, pin};
use hdrhistogram::Histogram;
use linerate_backend::udp_batch::{BATCH_MAX, Batch};
use linerate_wire::{RR_HEADER_LEN, RrHeader, RrKind};
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use serde_json::{Value, json};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
}

impl ClientConfig {
    /// Checks what cannot work before any traffic.
    pub fn validate(&self) -> Result<(), RrError> {
        let bad = |what: String| Err(RrError::Config(what));
        for (name, v) in [
            ("request size", self.request_size),
            ("response size", self.response_size),
        ] {
            if !(RR_HEADER_LEN..=DATAGRAM_MAX).contains(&v) {
                return bad(format!(
                    "{name} {v} is outside {RR_HEADER_LEN}..={DATAGRAM_MAX} bytes (the rr header is {RR_HEADER_LEN} bytes; a UDP datagram holds at most {DATAGRAM_MAX})"
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

    fn workers(&self) -> usize {
        if self.cores.is_empty() {
            self.threads
        } else {
            self.cores.len()
        }
    }
}

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
}

impl Counts {
    fn absorb(&mut self, o: &Counts) {
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
    }
}

/// One interval of one worker (sent to the collecting thread).
#[derive(Debug)]
struct Sample {
    index: usize,
    completed: u64,
    lost: u64,
    hist: Histogram<u64>,
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

    pub fn json(&self) -> Value {
        json!({
            "start": self.start.as_secs_f64(),
            "end": self.end.as_secs_f64(),
            "completed": self.completed,
            "transactions_per_s": self.tps(),
            "lost": self.lost,
            "latency_us": self.latency.as_ref().map(Latency::json),
        })
    }
}

#[derive(Debug)]
pub struct WorkerReport {
    pub cpu: Option<usize>,
    pub counts: Counts,
    pub local: Vec<SocketAddr>,
}

#[derive(Debug)]
pub struct ClientReport {
    pub config: ClientConfig,
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
}

impl ClientReport {
    pub fn tps(&self) -> f64 {
        self.total.completed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The local address of the first flow (for the doctor summary).
    pub fn local_ip(&self) -> Option<IpAddr> {
        self.workers.first()?.local.first().map(SocketAddr::ip)
    }

    pub fn json(&self) -> Value {
        let c = &self.config;
        let (mode, load) = match c.load {
            Load::Closed { outstanding } => (
                "closed loop",
                json!({ "outstanding_per_flow": outstanding }),
            ),
            Load::Open { tps } => ("open loop", json!({ "rate_tps": tps })),
        };
        json!({
            "server": c.server.to_string(),
            "mode": mode,
            "load": load,
            "workers": self.workers.iter().map(|w| json!({
                "cpu": w.cpu,
                "flows": w.local.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "counts": w.counts,
            })).collect::<Vec<_>>(),
            "flows": self.workers.iter().map(|w| w.local.len()).sum::<usize>(),
            "request_bytes": c.request_size,
            "response_bytes": c.response_size,
            "bytes_are": "UDP payload (the 32-byte rr header included)",
            "duration_s": self.elapsed.as_secs_f64(),
            "interrupted": self.interrupted,
            "timeout_ms": c.timeout.as_secs_f64() * 1e3,
            "counts": self.total,
            "counted_by": "client: each response matched to its request by flow and sequence number; sent = completed + lost",
            "transactions_per_s": self.tps(),
            "latency_us": self.latency.as_ref().map(Latency::json),
            "send_lag_us": self.send_lag.as_ref().map(Latency::json),
            "send_lag_is": "open loop: how late each request left against its schedule (client clock); null in closed loop",
            "latency_from": match c.load {
                Load::Closed { .. } => "the request's send time to its response's receipt (client clock)",
                Load::Open { .. } => "the request's scheduled send time to its response's receipt (client clock; includes the client's own delays)",
            },
            "intervals": self.intervals.iter().map(Interval::json).collect::<Vec<_>>(),
        })
    }
}

/// Longest the client waits, after sending ends, for answers still due.
const DRAIN_MAX: Duration = Duration::from_secs(2);

/// An interval some workers have reported.
#[derive(Debug)]
struct Pending {
    iv: Interval,
    hist: Histogram<u64>,
    reported: usize,
}

/// Runs the client until the duration ends or `stop` is set; calls
/// `on_interval` as each interval completes on every worker.
pub fn run_client(
    cfg: &ClientConfig,
    stop: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
) -> Result<ClientReport, RrError> {
    cfg.validate()?;
    let workers = cfg.workers();
    // Sockets are opened here so that an unusable address fails before
    // any thread starts.
    let mut sockets = Vec::with_capacity(workers);
    for _ in 0..workers {
        let mut flows = Vec::with_capacity(cfg.flows);
        for _ in 0..cfg.flows {
            flows.push(open_flow(cfg).map_err(|e| RrError::Socket {
                what: format!("open a flow to {}", cfg.server),
                source: e,
            })?);
        }
        sockets.push(flows);
    }
    let epoch = Instant::now();
    let (tx, rx) = mpsc::channel::<Sample>();
    let mut pending: std::collections::BTreeMap<usize, Pending> = Default::default();
    let mut intervals = Vec::new();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .into_iter()
            .enumerate()
            .map(|(w, socks)| {
                let tx = tx.clone();
                let cpu = cfg.cores.get(w).copied();
                s.spawn(move || {
                    if let Some(c) = cpu {
                        pin(c);
                    }
                    let local = socks.iter().filter_map(|s| s.local_addr().ok()).collect();
                    let mut wk = Worker::new(cfg, w, socks.len(), epoch, tx);
                    let sent_for = wk.run(&socks, stop);
                    (wk.counts, wk.hist, wk.lag, local, cpu, sent_for)
                })
            })
            .collect();
        drop(tx);
        let d = cfg.interval.unwrap_or(Duration::MAX);
        for smp in rx.iter() {
            let p = pending.entry(smp.index).or_insert_with(|| Pending {
                iv: Interval {
                    start: d * smp.index as u32,
                    end: (d * (smp.index as u32 + 1)).min(cfg.duration),
                    completed: 0,
                    lost: 0,
                    latency: None,
                },
                hist: new_hist(),
                reported: 0,
            });
            p.iv.completed += smp.completed;
            p.iv.lost += smp.lost;
            p.hist.add(&smp.hist).ok();
            p.reported += 1;
            if p.reported == workers {
                let mut p = pending.remove(&smp.index).expect("just found");
                p.iv.latency = Latency::of(&p.hist);
                on_interval(&p.iv);
                intervals.push(p.iv);
            }
        }
        // Intervals not every worker reached (one stopped just before a
        // boundary) are reported with what arrived.
        for (_, mut p) in std::mem::take(&mut pending) {
            p.iv.latency = Latency::of(&p.hist);
            on_interval(&p.iv);
            intervals.push(p.iv);
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("rr worker panicked"))
            .collect::<Vec<_>>()
    });
    let mut report = ClientReport {
        config: cfg.clone(),
        workers: Vec::new(),
        total: Counts::default(),
        elapsed: Duration::ZERO,
        latency: None,
        send_lag: None,
        intervals,
        interrupted: stop.load(Ordering::Relaxed),
    };
    let mut hist = new_hist();
    let mut lag = new_hist();
    for (counts, h, l, local, cpu, sent_for) in results {
        report.total.absorb(&counts);
        hist.add(&h).ok();
        lag.add(&l).ok();
        report.elapsed = report.elapsed.max(sent_for);
        report.workers.push(WorkerReport { cpu, counts, local });
    }
    report.latency = Latency::of(&hist);
    report.send_lag = Latency::of(&lag);
    if report.total.completed == 0 {
        return Err(RrError::NoAnswer {
            server: cfg.server,
            sent: report.total.sent,
            refused: report.total.refused,
            report: Box::new(report.json()),
        });
    }
    Ok(report)
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("constant bounds are valid")
}

fn open_flow(cfg: &ClientConfig) -> io::Result<UdpSocket> {
    let local: SocketAddr = match (cfg.bind, cfg.server) {
        (Some(ip), _) => SocketAddr::new(ip, 0),
        (None, SocketAddr::V4(_)) => "0.0.0.0:0".parse().expect("literal"),
        (None, SocketAddr::V6(_)) => "[::]:0".parse().expect("literal"),
    };
    let s = UdpSocket::bind(local)?;
    s.connect(cfg.server)?;
    s.set_nonblocking(true)?;
    let sock = socket2::SockRef::from(&s);
    // Room for a full window of answers; the kernel caps it at rmem_max.
    sock.set_recv_buffer_size(4 << 20).ok();
    sock.set_send_buffer_size(4 << 20).ok();
    Ok(s)
}

/// The slot a received datagram lands in: room for the expected answer
/// and a bit more, so a longer one is seen as longer (and malformed).
fn recv_slot(cfg: &ClientConfig) -> usize {
    (cfg.response_size + 64).min(DATAGRAM_MAX + 1)
}

/// One worker's open-loop schedule: request k is due at `start + k / tps`.
struct OpenLoop {
    start: u64,
    tps: f64,
    issued: u64,
    /// The flow the next batch goes on (round robin).
    flow: usize,
}

impl OpenLoop {
    fn at(&self, k: u64) -> u64 {
        self.start + (k as f64 * 1e9 / self.tps) as u64
    }

    /// Sends every request due by `now` (a batch per flow in turn) with
    /// its scheduled time as its stamp; returns when the next one is due.
    fn send_due(&mut self, w: &mut Worker<'_>, socks: &[UdpSocket], now: u64) -> u64 {
        let due = ((now - self.start) as f64 * self.tps / 1e9) as u64 + 1;
        let real_now = w.now_ns();
        let behind = due.saturating_sub(self.issued + 1);
        w.counts.behind_max = w.counts.behind_max.max(behind);
        while self.issued < due {
            let f = self.flow;
            let base = self.issued;
            let mut stamp = |k: usize| self.at(base + k as u64);
            let went = w.send(&socks[f], f, &mut stamp, (due - base) as usize);
            if went == 0 {
                break;
            }
            for k in 0..went as u64 {
                w.lag
                    .saturating_record(real_now.saturating_sub(self.at(base + k)));
            }
            self.issued += went as u64;
            self.flow = (self.flow + 1) % socks.len();
        }
        self.at(self.issued)
    }
}

struct Worker<'a> {
    cfg: &'a ClientConfig,
    base_flow: u32,
    out: Vec<Outstanding>,
    /// Requests owed per flow (closed loop): answered or lost, not yet replaced.
    owed: Vec<usize>,
    epoch: Instant,
    tx: mpsc::Sender<Sample>,
    batch: Batch,
    req: Vec<Vec<u8>>,
    resp: Vec<Vec<u8>>,
    lens: Vec<usize>,
    counts: Counts,
    hist: Histogram<u64>,
    iv_hist: Histogram<u64>,
    /// Open loop: each request's lateness against its schedule, ns.
    lag: Histogram<u64>,
    iv_index: usize,
    iv_completed: u64,
    iv_lost: u64,
}

impl<'a> Worker<'a> {
    fn new(
        cfg: &'a ClientConfig,
        index: usize,
        n: usize,
        epoch: Instant,
        tx: mpsc::Sender<Sample>,
    ) -> Self {
        let window = match cfg.load {
            Load::Closed { outstanding } => outstanding * 4,
            Load::Open { tps } => {
                let per_flow = tps / (cfg.workers() * cfg.flows) as f64;
                (per_flow * cfg.timeout.as_secs_f64() * 1.25) as usize
            }
        };
        Self {
            cfg,
            base_flow: (index * cfg.flows) as u32,
            out: (0..n).map(|_| Outstanding::new(window)).collect(),
            owed: vec![
                match cfg.load {
                    Load::Closed { outstanding } => outstanding,
                    Load::Open { .. } => 0,
                };
                n
            ],
            epoch,
            tx,
            batch: Batch::new(),
            req: vec![vec![0u8; cfg.request_size]; BATCH_MAX],
            resp: vec![vec![0u8; recv_slot(cfg)]; BATCH_MAX],
            lens: vec![0; BATCH_MAX],
            counts: Counts::default(),
            hist: new_hist(),
            iv_hist: new_hist(),
            lag: new_hist(),
            iv_index: 0,
            iv_completed: 0,
            iv_lost: 0,
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Sends up to `n` requests on flow `f` stamped `stamp_ns` (each its
    /// own in open loop: `stamps` gives them); returns how many went.
    fn send(
        &mut self,
        sock: &UdpSocket,
        f: usize,
        stamps: &mut dyn FnMut(usize) -> u64,
        n: usize,
    ) -> usize {
        let n = n.min(BATCH_MAX);
        let first = self.out[f].next_seq();
        let reply_len = self.cfg.response_size as u32;
        for k in 0..n {
            let h = RrHeader {
                kind: RrKind::Request,
                flow: self.base_flow + f as u32,
                reply_len,
                seq: first + k as u64,
                stamp_ns: stamps(k),
            };
            h.emit(&mut self.req[k])
                .expect("request buffers hold a header");
        }
        let bufs: [&[u8]; BATCH_MAX] = std::array::from_fn(|k| self.req[k].as_slice());
        let went = match self.batch.send(sock, &bufs[..n]) {
            Ok(m) => m,
            Err(e) => {
                self.send_error(&e);
                0
            }
        };
        for k in 0..went {
            if self.out[f].send(stamps(k)).is_none() {
                // A flow with 16M requests in flight: the rest count lost.
                self.counts.lost += (went - k) as u64;
                break;
            }
        }
        self.counts.sent += went as u64;
        went
    }

    fn send_error(&mut self, e: &io::Error) {
        match e.raw_os_error() {
            Some(nix::libc::EAGAIN | nix::libc::ENOBUFS) => self.counts.send_blocked += 1,
            Some(nix::libc::ECONNREFUSED) => self.counts.refused += 1,
            _ => self.counts.send_errors += 1,
        }
    }

    /// Reads everything queued on flow `f` and matches it.
    fn receive(&mut self, sock: &UdpSocket, f: usize) {
        loop {
            let mut bufs: [&mut [u8]; BATCH_MAX] = {
                let mut it = self.resp.iter_mut();
                std::array::from_fn(|_| it.next().expect("BATCH_MAX buffers").as_mut_slice())
            };
            let n = match self.batch.recv(sock, &mut bufs, &mut self.lens) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(nix::libc::ECONNREFUSED) => {
                    self.counts.refused += 1;
                    continue;
                }
                Err(_) => {
                    self.counts.send_errors += 1;
                    return;
                }
            };
            let now = self.now_ns();
            for i in 0..n {
                let len = self.lens[i];
                let h = match RrHeader::parse(&self.resp[i][..len]) {
                    Ok(h)
                        if h.kind == RrKind::Response
                            && len == self.cfg.response_size
                            && h.flow == self.base_flow + f as u32 =>
                    {
                        h
                    }
                    _ => {
                        self.counts.malformed += 1;
                        continue;
                    }
                };
                match self.out[f].answer(h.seq, now) {
                    Answer::Completed(ns) => {
                        self.counts.completed += 1;
                        self.iv_completed += 1;
                        self.hist.saturating_record(ns.max(1));
                        self.iv_hist.saturating_record(ns.max(1));
                        self.owed[f] += 1;
                    }
                    Answer::Duplicate => self.counts.duplicate += 1,
                    Answer::Late => self.counts.late += 1,
                    Answer::Unknown => self.counts.unknown += 1,
                }
            }
            if n < BATCH_MAX {
                return;
            }
        }
    }

    fn expire(&mut self, now: u64) {
        let before = now.saturating_sub(self.cfg.timeout.as_nanos() as u64);
        for f in 0..self.out.len() {
            let lost = self.out[f].expire(before);
            self.counts.lost += lost;
            self.iv_lost += lost;
            self.owed[f] += lost as usize;
        }
    }

    fn flush_interval(&mut self, index: usize) {
        let hist = std::mem::replace(&mut self.iv_hist, new_hist());
        self.tx
            .send(Sample {
                index,
                completed: std::mem::take(&mut self.iv_completed),
                lost: std::mem::take(&mut self.iv_lost),
                hist,
            })
            .ok();
    }

    /// Sends for the test's duration, then waits for answers still due.
    /// Returns how long it sent for.
    fn run(&mut self, socks: &[UdpSocket], stop: &AtomicBool) -> Duration {
        let start = self.now_ns();
        let end = start + self.cfg.duration.as_nanos() as u64;
        let iv_ns = self.cfg.interval.map(|d| d.as_nanos() as u64);
        if matches!(self.cfg.load, Load::Open { .. }) {
            // Wake for each departure within a microsecond, not the default 50.
            linerate_backend::clock::set_timer_slack_ns(1_000).ok();
        }
        let mut open = OpenLoop {
            start,
            tps: match self.cfg.load {
                Load::Open { tps } => tps / self.cfg.workers() as f64,
                Load::Closed { .. } => 0.0,
            },
            issued: 0,
            flow: 0,
        };
        let mut last_expire = start;
        // One flow in closed loop with fewer than a batch in flight: wait
        // in the receive call itself (a blocking socket with a 1 ms
        // timeout, the expiry tick) rather than in ppoll and then receive:
        // one system call fewer per transaction.
        let blocking = socks.len() == 1
            && matches!(self.cfg.load, Load::Closed { outstanding } if outstanding < BATCH_MAX)
            && socks[0].set_nonblocking(false).is_ok()
            && socks[0]
                .set_read_timeout(Some(Duration::from_millis(1)))
                .is_ok();
        let mut fds: Vec<PollFd> = socks
            .iter()
            .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN))
            .collect();
        let mut sending = true;
        let mut sent_for = Duration::ZERO;
        loop {
            let now = self.now_ns();
            if sending && (now >= end || stop.load(Ordering::Relaxed)) {
                if now >= end && matches!(self.cfg.load, Load::Open { .. }) {
                    // Requests scheduled before the end go, even if this
                    // wake-up came late.
                    open.send_due(self, socks, end - 1);
                }
                sending = false;
                sent_for = Duration::from_nanos(now - start);
                if let Some(iv) = iv_ns
                    && now > start + self.iv_index as u64 * iv + 1_000_000
                {
                    // the last, partial interval
                    self.flush_interval(self.iv_index);
                }
            }
            if !sending {
                let in_flight: usize = self.out.iter().map(Outstanding::in_flight).sum();
                let drain_end = start
                    + sent_for.as_nanos() as u64
                    + self.cfg.timeout.min(DRAIN_MAX).as_nanos() as u64;
                if in_flight == 0 || now >= drain_end {
                    break;
                }
            }
            if let Some(iv) = iv_ns
                && sending
                && now >= start + (self.iv_index as u64 + 1) * iv
            {
                self.flush_interval(self.iv_index);
                self.iv_index += 1;
            }
            if now.saturating_sub(last_expire) >= 1_000_000 {
                self.expire(now);
                last_expire = now;
            }
            // Send what is due.
            let mut next_due = now + 10_000_000;
            if sending {
                match self.cfg.load {
                    Load::Closed { .. } => {
                        for (f, sock) in socks.iter().enumerate() {
                            while self.owed[f] > 0 {
                                let went = self.send(sock, f, &mut |_| now, self.owed[f]);
                                self.owed[f] -= went;
                                if went == 0 {
                                    break;
                                }
                            }
                        }
                    }
                    Load::Open { .. } => {
                        next_due = open.send_due(self, socks, now);
                    }
                }
            }
            // Wait for answers until the next send, interval or expiry.
            let mut wake = next_due.min(last_expire + 1_000_000);
            if let Some(iv) = iv_ns {
                wake = wake.min(start + (self.iv_index as u64 + 1) * iv);
            }
            if sending {
                wake = wake.min(end);
            }
            if blocking {
                self.receive(&socks[0], 0);
                continue;
            }
            let wait = wake.saturating_sub(self.now_ns());
            let ts = TimeSpec::from_duration(Duration::from_nanos(wait));
            match ppoll(&mut fds, Some(ts), None) {
                Ok(0) | Err(_) => {}
                Ok(_) => {
                    for f in 0..fds.len() {
                        if fds[f].revents().is_some_and(|r| !r.is_empty()) {
                            self.receive(&socks[f], f);
                        }
                    }
                }
            }
        }
        let lost = self
            .out
            .iter_mut()
            .map(Outstanding::expire_all)
            .sum::<u64>();
        self.counts.lost += lost;
        sent_for
    }
}
