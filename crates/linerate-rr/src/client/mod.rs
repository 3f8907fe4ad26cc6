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

mod config;
mod conn;
mod crr;
mod links;
mod persistent;
mod report;
mod worker;

pub use config::{ClientConfig, DATAGRAM_MAX, Load, TcpClient};
use report::Sample;
pub use report::{ClientReport, Counts, Interval, Roundtrip, RoundtripKind, WorkerReport};
use worker::Worker;

use crate::{LATENCY_MAX_NS, Latency, RrError, pin};
use hdrhistogram::Histogram;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest the client waits, after sending ends, for answers still due.
pub(super) const DRAIN_MAX: Duration = Duration::from_secs(2);

/// An interval some workers have reported.
#[derive(Debug)]
struct Pending {
    iv: Interval,
    hist: Histogram<u64>,
    reported: usize,
}

/// What a worker thread hands back: its counts, latency and send-lag
/// histograms, its sockets' local addresses, its CPU, how long it sent.
type WorkerResult = (
    Counts,
    Histogram<u64>,
    Histogram<u64>,
    Vec<SocketAddr>,
    Option<usize>,
    Duration,
    Vec<Roundtrip>,
);

/// Runs the client until the duration ends or `stop` is set; calls
/// `on_interval` as each interval completes on every worker.
pub fn run_client(
    cfg: &ClientConfig,
    stop: &AtomicBool,
    on_interval: impl FnMut(&Interval),
) -> Result<ClientReport, RrError> {
    run_client_keeping(cfg, 0, stop, on_interval)
}

/// [`run_client`], keeping the first `keep` answers of each worker one by
/// one (`ClientReport::roundtrips`): for a tool that lists round trips.
pub fn run_client_keeping(
    cfg: &ClientConfig,
    keep: usize,
    stop: &AtomicBool,
    on_interval: impl FnMut(&Interval),
) -> Result<ClientReport, RrError> {
    cfg.validate()?;
    // Sockets are opened here so that an unusable address fails before
    // any thread starts.
    let sockets = open_sockets(cfg, cfg.workers())?;
    run_workers(
        cfg,
        (None, keep),
        sockets,
        stop,
        on_interval,
        |wk, socks| {
            let local = socks.iter().filter_map(|s| s.local_addr().ok()).collect();
            (local, wk.run(&socks, stop))
        },
    )
}

/// Runs the client over TCP: `cfg.flows` persistent connections per
/// worker, or with `tcp.connect_per_transaction` a new connection for
/// each transaction (`cfg.flows` at once per worker).
pub fn run_tcp_client(
    cfg: &ClientConfig,
    tcp: &TcpClient,
    stop: &AtomicBool,
    on_interval: impl FnMut(&Interval),
) -> Result<ClientReport, RrError> {
    cfg.validate_sizes(crate::tcp::TCP_MESSAGE_MAX, "a TCP rr message")?;
    if tcp.connect_timeout.is_zero() {
        return Err(RrError::Config(
            "the connect timeout must be above zero".into(),
        ));
    }
    crate::tcp::raise_nofile(cfg.workers() * cfg.flows);
    let slots = vec![(); cfg.workers()];
    run_workers(cfg, (Some(*tcp), 0), slots, stop, on_interval, |wk, ()| {
        if tcp.connect_per_transaction {
            crr::run(wk, tcp, stop)
        } else {
            persistent::run(wk, tcp, stop)
        }
    })
}

/// Starts one pinned worker per item of `per_worker`, each running `body`
/// (which says its flows' local addresses and how long it sent), gathers
/// the intervals and the workers' results into the report.
fn run_workers<T: Send>(
    cfg: &ClientConfig,
    (tcp, keep): (Option<TcpClient>, usize),
    per_worker: Vec<T>,
    stop: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
    body: impl Fn(&mut Worker<'_>, T) -> (Vec<SocketAddr>, Duration) + Sync,
) -> Result<ClientReport, RrError> {
    let workers = per_worker.len();
    let epoch = Instant::now();
    let (tx, rx) = mpsc::channel::<Sample>();
    let warnings = std::sync::Mutex::new(Vec::new());
    let (intervals, results) = std::thread::scope(|s| {
        let handles: Vec<_> = (per_worker.into_iter().enumerate())
            .map(|(w, item)| {
                let tx = tx.clone();
                let cpu = cfg.cores.get(w).copied();
                let (warnings, body) = (&warnings, &body);
                s.spawn(move || {
                    if let Some(c) = cpu {
                        pin(c, warnings);
                    }
                    let mut wk = Worker::new(cfg, w, cfg.flows, epoch, tx);
                    wk.keep = keep;
                    let (local, sent_for) = body(&mut wk, item);
                    let answers = std::mem::take(&mut wk.answers);
                    (wk.counts, wk.hist, wk.lag, local, cpu, sent_for, answers)
                })
            })
            .collect();
        drop(tx);
        let intervals = gather_intervals(cfg, workers, &rx, &mut on_interval);
        let results = handles
            .into_iter()
            .map(|h| h.join().expect("rr worker panicked"))
            .collect::<Vec<WorkerResult>>();
        (intervals, results)
    });
    let report = ClientReport {
        config: cfg.clone(),
        tcp,
        workers: Vec::new(),
        total: Counts::default(),
        elapsed: Duration::ZERO,
        latency: None,
        send_lag: None,
        intervals,
        interrupted: stop.load(Ordering::Relaxed),
        warnings: warnings.into_inner().unwrap_or_default(),
        roundtrips: Vec::new(),
    };
    let report = absorb_workers(report, results);
    if report.total.completed == 0 {
        return Err(RrError::NoAnswer {
            server: cfg.server,
            sent: report.total.sent,
            refused: report.total.refused + report.total.connect_errors,
            report: Box::new(report),
        });
    }
    Ok(report)
}

/// Each worker's `cfg.flows` sockets.
fn open_sockets(cfg: &ClientConfig, workers: usize) -> Result<Vec<Vec<UdpSocket>>, RrError> {
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
    Ok(sockets)
}

/// The workers' samples merged into intervals until every worker has
/// hung up, each passed to `on_interval` as it completes.
fn gather_intervals(
    cfg: &ClientConfig,
    workers: usize,
    rx: &mpsc::Receiver<Sample>,
    on_interval: &mut impl FnMut(&Interval),
) -> Vec<Interval> {
    let mut pending: std::collections::BTreeMap<usize, Pending> = Default::default();
    let mut intervals = Vec::new();
    let d = cfg.interval.unwrap_or(Duration::MAX);
    for smp in rx.iter() {
        let p = pending.entry(smp.index).or_insert_with(|| Pending {
            iv: Interval {
                start: d * smp.index as u32,
                end: d * smp.index as u32,
                completed: 0,
                lost: 0,
                latency: None,
            },
            hist: new_hist(),
            reported: 0,
        });
        // An interval ends at its boundary, or for a worker's last one
        // when that worker stopped sending (the test's end, or earlier
        // when stopped from outside); the latest of its workers' ends.
        let end = match smp.until {
            Some(until) => until,
            None => d * (smp.index as u32 + 1),
        };
        p.iv.end = p.iv.end.max(end.min(cfg.duration));
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
    intervals
}

/// `report` with the workers' results added: totals, latency, send lag,
/// elapsed, one row per worker.
fn absorb_workers(mut report: ClientReport, results: Vec<WorkerResult>) -> ClientReport {
    let mut hist = new_hist();
    let mut lag = new_hist();
    for (counts, h, l, local, cpu, sent_for, answers) in results {
        report.roundtrips.extend(answers);
        report.total.absorb(&counts);
        hist.add(&h).ok();
        lag.add(&l).ok();
        report.elapsed = report.elapsed.max(sent_for);
        report.workers.push(WorkerReport { cpu, counts, local });
    }
    report.latency = Latency::of(&hist);
    report.send_lag = Latency::of(&lag);
    report
}

pub(super) fn new_hist() -> Histogram<u64> {
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
pub(super) fn recv_slot(cfg: &ClientConfig) -> usize {
    (cfg.response_size + 64).min(DATAGRAM_MAX + 1)
}
