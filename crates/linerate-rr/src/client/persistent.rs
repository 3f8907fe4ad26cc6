//! The rr client over TCP with persistent connections (TCP_RR): each flow
//! is one connection, requests pipelined on it (closed loop: N in flight;
//! open loop: on schedule, each stamped with its scheduled time), every
//! answer matched by sequence as over UDP. A connection the server closes
//! or resets is counted and not used again; its requests in flight are
//! lost at their timeout.

use super::config::{Load, TcpClient};
use super::worker::{OpenLoop, Worker};
use crate::tcp::frame::{FrameReader, put_len};
use linerate_wire::{RrHeader, RrKind};
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Request bytes a connection may have waiting for the kernel; beyond it
/// no more are queued on it (counted `send_blocked`).
const WR_HIGH: usize = 64 * 1024;

/// One connection and its buffers.
pub(super) struct Conn {
    pub(super) s: Option<TcpStream>,
    pub(super) rd: FrameReader,
    pub(super) wr: Vec<u8>,
    pub(super) wpos: usize,
}

impl Conn {
    pub(super) fn new(max_response: usize) -> Self {
        Self {
            s: None,
            rd: FrameReader::new(max_response),
            wr: Vec::new(),
            wpos: 0,
        }
    }

    pub(super) fn pending(&self) -> usize {
        self.wr.len() - self.wpos
    }

    /// Writes what the kernel takes.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        let Some(s) = self.s.as_mut() else {
            return Ok(());
        };
        while self.wpos < self.wr.len() {
            match s.write(&self.wr[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wr.len() {
            self.wr.clear();
            self.wpos = 0;
        } else if self.wpos >= WR_HIGH {
            self.wr.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(())
    }

    /// Appends a request frame of `size` bytes with header `h`.
    pub(super) fn queue(&mut self, h: &RrHeader, size: usize) {
        put_len(&mut self.wr, size);
        let at = self.wr.len();
        self.wr.resize(at + size, 0);
        h.emit(&mut self.wr[at..]).expect("requests hold a header");
    }
}

/// Starts a non-blocking connection to the server.
pub(super) fn start_connect(
    server: SocketAddr,
    bind: Option<std::net::IpAddr>,
) -> io::Result<TcpStream> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        None,
    )?;
    s.set_nonblocking(true)?;
    s.set_tcp_nodelay(true)?;
    if let Some(ip) = bind {
        s.bind(&SocketAddr::new(ip, 0).into())?;
    }
    match s.connect(&server.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(nix::libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from(s))
}

/// Whether a connection that polled writable is made.
pub(super) fn connected(s: &TcpStream) -> bool {
    matches!(s.take_error(), Ok(None)) && s.peer_addr().is_ok()
}

/// Connects every flow at once, waiting up to the connect timeout; the
/// ones not made are counted and left out.
fn connect_all(w: &mut Worker<'_>, tcp: &TcpClient) -> Vec<Conn> {
    let cfg = w.cfg;
    let mut conns: Vec<Conn> = (0..cfg.flows)
        .map(|_| Conn::new(cfg.response_size))
        .collect();
    for c in conns.iter_mut() {
        w.counts.connects += 1;
        match start_connect(cfg.server, cfg.bind) {
            Ok(s) => c.s = Some(s),
            Err(_) => w.counts.connect_errors += 1,
        }
    }
    let deadline = w.now_ns() + tcp.connect_timeout.as_nanos() as u64;
    let mut waiting: Vec<usize> = (0..conns.len()).filter(|f| conns[*f].s.is_some()).collect();
    while !waiting.is_empty() {
        let now = w.now_ns();
        if now >= deadline {
            break;
        }
        let ready: Vec<usize> = {
            let mut fds: Vec<PollFd> = (waiting.iter())
                .map(|f| {
                    PollFd::new(
                        conns[*f].s.as_ref().expect("waiting").as_fd(),
                        PollFlags::POLLOUT,
                    )
                })
                .collect();
            let ts = TimeSpec::from_duration(Duration::from_nanos(deadline - now));
            ppoll(&mut fds, Some(ts), None).ok();
            (fds.iter().zip(&waiting))
                .filter(|(p, _)| p.revents().is_some_and(|r| !r.is_empty()))
                .map(|(_, f)| *f)
                .collect()
        };
        for f in ready {
            if !connected(conns[f].s.as_ref().expect("waiting")) {
                w.counts.connect_errors += 1;
                conns[f].s = None;
            }
            waiting.retain(|x| *x != f);
        }
    }
    for f in waiting {
        w.counts.connect_errors += 1;
        conns[f].s = None;
    }
    conns
}

/// Queues a request on flow `f` stamped `stamp`; false when the flow's
/// connection is gone or full.
fn enqueue(w: &mut Worker<'_>, conn: &mut Conn, f: usize, stamp: u64) -> bool {
    if conn.s.is_none() || conn.pending() >= WR_HIGH {
        return false;
    }
    let Some(seq) = w.out[f].send(stamp) else {
        return false;
    };
    let h = RrHeader {
        kind: RrKind::Request,
        flow: w.base_flow + f as u32,
        reply_len: w.cfg.response_size as u32,
        seq,
        stamp_ns: stamp,
    };
    conn.queue(&h, w.cfg.request_size);
    w.counts.sent += 1;
    true
}

/// Drops a broken connection (its requests in flight expire as lost).
fn broken(w: &mut Worker<'_>, conn: &mut Conn) {
    if conn.s.take().is_some() {
        w.counts.resets += 1;
    }
}

fn flush(w: &mut Worker<'_>, conn: &mut Conn) {
    if conn.flush().is_err() {
        broken(w, conn);
    }
}

/// Closed loop: queues every flow the requests it is owed and writes them.
fn send_owed(w: &mut Worker<'_>, conns: &mut [Conn], now: u64) {
    for (f, conn) in conns.iter_mut().enumerate() {
        while w.owed[f] > 0 && enqueue(w, conn, f, now) {
            w.owed[f] -= 1;
        }
        if w.owed[f] > 0 && conn.s.is_some() {
            w.counts.send_blocked += 1;
        }
        flush(w, conn);
    }
}

/// Open loop: queues every request due by `now` (flows in turn, each
/// stamped with its scheduled time); returns when the next is due.
fn send_due(o: &mut OpenLoop, w: &mut Worker<'_>, conns: &mut [Conn], now: u64) -> u64 {
    let due = ((now - o.start) as f64 * o.tps / 1e9) as u64 + 1;
    let real_now = w.now_ns();
    w.counts.behind_max = w.counts.behind_max.max(due.saturating_sub(o.issued + 1));
    let mut refused = 0;
    while o.issued < due && refused < conns.len() {
        let f = o.flow;
        o.flow = (f + 1) % conns.len();
        let at = o.at(o.issued);
        if enqueue(w, &mut conns[f], f, at) {
            w.lag.saturating_record(real_now.saturating_sub(at));
            o.issued += 1;
            refused = 0;
        } else {
            refused += 1;
        }
    }
    if refused > 0 {
        w.counts.send_blocked += 1;
    }
    for conn in conns.iter_mut().filter(|c| c.pending() > 0) {
        flush(w, conn);
    }
    o.at(o.issued)
}

/// Reads what flow `f`'s connection has and matches every answer; with
/// `once`, returns as soon as a read brought answers (a blocking socket
/// would otherwise wait for more).
fn receive(w: &mut Worker<'_>, conn: &mut Conn, f: usize, once: bool) {
    let mut now = w.now_ns();
    let mut took = 0;
    loop {
        loop {
            let m = match conn.rd.next_frame() {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(_) => {
                    w.counts.malformed += 1;
                    return broken(w, conn);
                }
            };
            match RrHeader::parse(m) {
                Ok(h)
                    if h.kind == RrKind::Response
                        && m.len() == w.cfg.response_size
                        && h.flow == w.base_flow + f as u32 =>
                {
                    let a = w.out[f].answer(h.seq, now);
                    w.record(f, a);
                    took += 1;
                }
                _ => w.counts.malformed += 1,
            }
        }
        let Some(s) = conn.s.as_mut() else { return };
        if once && took > 0 {
            return;
        }
        match conn.rd.fill(s) {
            Ok(0) => return broken(w, conn),
            Ok(_) => now = w.now_ns(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return broken(w, conn),
        }
    }
}

/// Takes the answers that came on any connection, waiting until `wake`
/// (monotonic ns) unless busy polling; writes what waits.
fn await_answers(w: &mut Worker<'_>, conns: &mut [Conn], blocking: bool, wake: u64) {
    if w.cfg.busy_poll || blocking {
        for (f, conn) in conns.iter_mut().enumerate() {
            receive(w, conn, f, blocking);
        }
        return;
    }
    let ready: Vec<(usize, bool)> = {
        let live: Vec<usize> = (0..conns.len()).filter(|f| conns[*f].s.is_some()).collect();
        let mut fds: Vec<PollFd> = (live.iter())
            .map(|f| {
                let c = &conns[*f];
                let mut ev = PollFlags::POLLIN;
                if c.pending() > 0 {
                    ev |= PollFlags::POLLOUT;
                }
                PollFd::new(c.s.as_ref().expect("live").as_fd(), ev)
            })
            .collect();
        let ts = TimeSpec::from_duration(Duration::from_nanos(wake.saturating_sub(w.now_ns())));
        if ppoll(&mut fds, Some(ts), None).unwrap_or(0) == 0 {
            return;
        }
        (fds.iter().zip(&live))
            .filter_map(|(p, f)| {
                let r = p.revents()?;
                (!r.is_empty()).then_some((*f, r.contains(PollFlags::POLLOUT)))
            })
            .collect()
    };
    for (f, writable) in ready {
        if writable {
            flush(w, &mut conns[f]);
        }
        receive(w, &mut conns[f], f, false);
    }
}

/// Whether to wait in the read itself: one connection in closed loop (a
/// blocking socket with a 1 ms timeout, the expiry tick) rather than in
/// ppoll and then read: one system call fewer per transaction.
fn receive_blocking(w: &Worker<'_>, conns: &[Conn]) -> bool {
    let one = match conns {
        [Conn { s: Some(s), .. }] => s,
        _ => return false,
    };
    !w.cfg.busy_poll
        && matches!(w.cfg.load, Load::Closed { .. })
        && one.set_nonblocking(false).is_ok()
        && one.set_read_timeout(Some(Duration::from_millis(1))).is_ok()
}

/// Runs one worker's persistent connections for the test's duration,
/// then waits for the answers still due. Returns the connections' local
/// addresses and how long it sent.
pub(super) fn run(
    w: &mut Worker<'_>,
    tcp: &TcpClient,
    stop: &AtomicBool,
) -> (Vec<SocketAddr>, Duration) {
    let mut conns = connect_all(w, tcp);
    let local = (conns.iter())
        .filter_map(|c| c.s.as_ref()?.local_addr().ok())
        .collect();
    let start = w.now_ns();
    let end = start + w.cfg.duration.as_nanos() as u64;
    let mut open = w.open_loop(start);
    let blocking = receive_blocking(w, &conns);
    let mut last_expire = start;
    let mut sending = true;
    let mut sent_for = Duration::ZERO;
    loop {
        let now = w.now_ns();
        let dead = conns.iter().all(|c| c.s.is_none());
        if sending && (now >= end || stop.load(Ordering::Relaxed) || dead) {
            if now >= end && matches!(w.cfg.load, Load::Open { .. }) {
                send_due(&mut open, w, &mut conns, end - 1);
            }
            sending = false;
            sent_for = Duration::from_nanos(now - start);
        }
        if !sending && (w.drained(start, sent_for, now) || dead) {
            break;
        }
        if sending && w.next_boundary(start, end).is_some_and(|b| now >= b) {
            w.flush_interval(None);
        }
        if now.saturating_sub(last_expire) >= 1_000_000 {
            w.expire(now);
            last_expire = now;
        }
        let mut wake = now + 10_000_000;
        if sending {
            match w.cfg.load {
                Load::Closed { .. } => send_owed(w, &mut conns, now),
                Load::Open { .. } => wake = send_due(&mut open, w, &mut conns, now),
            }
            wake = wake.min(end);
            if let Some(b) = w.next_boundary(start, end) {
                wake = wake.min(b);
            }
        }
        wake = wake.min(last_expire + 1_000_000);
        await_answers(w, &mut conns, blocking, wake);
    }
    w.finish(sent_for);
    (local, sent_for)
}
