//! The rr client with a connection per transaction (TCP_CRR): each
//! transaction connects, sends its request, reads the response and
//! closes, and its latency runs from its start (closed loop) or its
//! scheduled time (open loop) to the response, handshake included. A
//! worker keeps up to `flows` transactions at once. Every transaction
//! started ends as exactly one of: completed, lost (no response within
//! the timeout, or by the end of the drain), a connect error (refused,
//! failed or not made within the connect timeout), a reset (closed or
//! reset before the response) or malformed (a wrong response).
//!
//! The transactions' sockets wait on one epoll set, each added
//! edge-triggered for reading and writing with its slot's index when its
//! connect starts (one epoll_ctl per transaction; closing the socket
//! takes it out), so a wait costs what is ready, not the slots in use.

use super::DRAIN_MAX;
use super::config::{Load, TcpClient};
use super::conn::{Conn, connect_made, start_connect};
use super::links::wait_ready;
use super::worker::{OpenLoop, Worker};
use crate::tcp::frame::{LEN_PREFIX, ONE_SEGMENT};
use linerate_wire::{RrHeader, RrKind};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Connecting,
    Waiting,
}

/// One transaction at a time.
struct Slot {
    conn: Conn,
    phase: Phase,
    /// When the transaction started (or was scheduled), ns.
    started: u64,
    seq: u64,
}

/// How a transaction ended.
enum End {
    Completed(u64),
    ConnectError,
    Reset,
    Malformed,
    Lost,
}

fn end(w: &mut Worker<'_>, slot: &mut Slot, how: End) {
    match how {
        End::Completed(ns) => w.completed(ns),
        End::ConnectError => w.counts.connect_errors += 1,
        End::Reset => w.counts.resets += 1,
        End::Malformed => w.counts.malformed += 1,
        End::Lost => {
            w.counts.lost += 1;
            w.iv_lost += 1;
        }
    }
    // Closing the socket sends the FIN (the client closes first), or a
    // reset with `close_reset`, and takes it out of the epoll set.
    slot.conn.s = None;
    slot.conn.wr.clear();
    slot.conn.wpos = 0;
    slot.conn.rd = crate::tcp::FrameReader::new(w.cfg.response_size);
    slot.phase = Phase::Idle;
}

/// A worker's slots (one transaction at a time each), the idle ones, and
/// the epoll set their sockets wait on.
struct Slots {
    list: Vec<Slot>,
    /// The idle slots (each once), taken by the next transactions.
    idle: Vec<usize>,
    /// Room for the next turn's idle list (swapped, never reallocated).
    spare: Vec<usize>,
    ep: Epoll,
    events: Vec<EpollEvent>,
    /// Close each connection with a reset (SO_LINGER 0).
    close_reset: bool,
}

impl Slots {
    fn new(flows: usize, response_size: usize, close_reset: bool) -> io::Result<Self> {
        Ok(Self {
            list: (0..flows)
                .map(|_| Slot {
                    conn: Conn::new(response_size),
                    phase: Phase::Idle,
                    started: 0,
                    seq: 0,
                })
                .collect(),
            idle: (0..flows).rev().collect(),
            spare: Vec::with_capacity(flows),
            ep: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
            events: vec![EpollEvent::empty(); flows.clamp(1, 1024)],
            close_reset,
        })
    }

    fn busy(&self) -> bool {
        self.idle.len() < self.list.len()
    }

    /// Starts a transaction on idle slot `i`, stamped `stamp`; a connect
    /// that fails at once ends it as a connect error, the slot idle again.
    fn start(&mut self, w: &mut Worker<'_>, i: usize, stamp: u64) {
        let slot = &mut self.list[i];
        w.counts.connects += 1;
        slot.started = stamp;
        slot.seq += 1;
        let watch = EpollFlags::EPOLLIN | EpollFlags::EPOLLOUT | EpollFlags::EPOLLET;
        // One request a connection: TCP_NODELAY only where it is more
        // than one segment (the tail could wait for the head's ACK).
        let nodelay = LEN_PREFIX + w.cfg.request_size > ONE_SEGMENT;
        let made = start_connect(w.cfg.server, w.cfg.bind, nodelay).and_then(|s| {
            if self.close_reset {
                // Closing it sends a reset, not a FIN.
                socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO))?;
            }
            self.ep.add(&s, EpollEvent::new(watch, i as u64))?;
            Ok(s)
        });
        match made {
            Ok(s) => {
                slot.conn.s = Some(s);
                slot.phase = Phase::Connecting;
            }
            Err(_) => {
                w.counts.connect_errors += 1;
                self.idle.push(i);
            }
        }
    }

    /// Closed loop: a transaction on every idle slot.
    fn start_idle(&mut self, w: &mut Worker<'_>, now: u64) {
        std::mem::swap(&mut self.idle, &mut self.spare);
        while let Some(i) = self.spare.pop() {
            self.start(w, i, now);
        }
    }

    /// Ends slot `i`'s transaction (`how`); the slot is idle again.
    fn end(&mut self, w: &mut Worker<'_>, i: usize, how: End) {
        end(w, &mut self.list[i], how);
        self.idle.push(i);
    }

    /// Moves slot `i` on (its socket polled `events`); idle again if its
    /// transaction ended.
    fn advance(&mut self, w: &mut Worker<'_>, i: usize, events: EpollFlags) {
        if self.list[i].phase == Phase::Idle {
            return;
        }
        advance(w, i, &mut self.list[i], events);
        if self.list[i].phase == Phase::Idle {
            self.idle.push(i);
        }
    }
}

/// Moves a slot whose socket polled `events` on (as far as it goes: the
/// socket waits edge-triggered).
fn advance(w: &mut Worker<'_>, f: usize, slot: &mut Slot, events: EpollFlags) {
    let mut just_sent = false;
    if slot.phase == Phase::Connecting {
        // The socket's first readiness since its connect began says
        // whether it was made (no SO_ERROR or getpeername to ask).
        if !connect_made(events) {
            return end(w, slot, End::ConnectError);
        }
        let h = RrHeader {
            kind: RrKind::Request,
            flow: w.base_flow + f as u32,
            reply_len: w.cfg.response_size as u32,
            seq: slot.seq,
            stamp_ns: slot.started,
        };
        slot.conn.queue(&h, w.cfg.request_size);
        w.counts.sent += 1;
        slot.phase = Phase::Waiting;
        just_sent = true;
    }
    if slot.conn.flush().is_err() {
        return end(w, slot, End::Reset);
    }
    if just_sent {
        // No answer before the server has read the request: the socket
        // (edge-triggered) says when one comes, without a read here to
        // hear EAGAIN first.
        return;
    }
    loop {
        match slot.conn.rd.next_frame() {
            Ok(Some(m)) => {
                let ok = RrHeader::parse(m).is_ok_and(|h| {
                    h.kind == RrKind::Response
                        && h.seq == slot.seq
                        && h.flow == w.base_flow + f as u32
                }) && m.len() == w.cfg.response_size;
                let how = if ok {
                    End::Completed(w.now_ns().saturating_sub(slot.started))
                } else {
                    End::Malformed
                };
                return end(w, slot, how);
            }
            Ok(None) => {}
            Err(_) => return end(w, slot, End::Malformed),
        }
        let s = slot.conn.s.as_mut().expect("waiting");
        match slot.conn.rd.fill(s) {
            Ok(0) => return end(w, slot, End::Reset),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return end(w, slot, End::Reset),
        }
    }
}

/// Ends the transactions older than the timeout (connect timeout while
/// connecting, the request timeout after).
fn expire(w: &mut Worker<'_>, slots: &mut Slots, tcp: &TcpClient, now: u64) {
    for i in 0..slots.list.len() {
        let age = now.saturating_sub(slots.list[i].started);
        match slots.list[i].phase {
            Phase::Connecting if age >= tcp.connect_timeout.as_nanos() as u64 => {
                slots.end(w, i, End::ConnectError)
            }
            Phase::Waiting if age >= w.cfg.timeout.as_nanos() as u64 => slots.end(w, i, End::Lost),
            _ => {}
        }
    }
}

/// Open loop: starts every transaction due by `now` on an idle slot, with
/// its scheduled time as its start; returns when the next is due.
fn start_due(o: &mut OpenLoop, w: &mut Worker<'_>, slots: &mut Slots, now: u64) -> u64 {
    let due = ((now - o.start) as f64 * o.tps / 1e9) as u64 + 1;
    let real_now = w.now_ns();
    w.counts.behind_max = w.counts.behind_max.max(due.saturating_sub(o.issued + 1));
    while o.issued < due {
        let Some(i) = slots.idle.pop() else {
            // Every slot busy: the rest wait, and their latency shows it.
            w.counts.send_blocked += 1;
            break;
        };
        let at = o.at(o.issued);
        slots.start(w, i, at);
        w.lag.saturating_record(real_now.saturating_sub(at));
        o.issued += 1;
    }
    o.at(o.issued)
}

/// Waits until `wake` (`coarse`: at least a millisecond) for any slot's
/// socket, and moves those ready on.
fn await_ready(w: &mut Worker<'_>, slots: &mut Slots, wake: u64, coarse: bool) {
    let now = w.now_ns();
    let wake = if coarse {
        wake.max(now + 1_000_000)
    } else {
        wake
    };
    let n = wait_ready(&slots.ep, &mut slots.events, now, wake, w.cfg.busy_poll);
    for k in 0..n {
        let (i, events) = (slots.events[k].data() as usize, slots.events[k].events());
        slots.advance(w, i, events);
    }
}

/// Runs one worker's transactions for the test's duration, then waits
/// for those still under way. Returns no local addresses (each
/// transaction has its own) and how long it started transactions.
pub(super) fn run(
    w: &mut Worker<'_>,
    tcp: &TcpClient,
    stop: &AtomicBool,
) -> (Vec<SocketAddr>, Duration) {
    let Ok(mut slots) = Slots::new(w.cfg.flows, w.cfg.response_size, tcp.close_reset) else {
        w.counts.connect_errors += 1;
        w.finish(Duration::ZERO);
        return (Vec::new(), Duration::ZERO);
    };
    let t0 = w.now_ns();
    let end_at = t0 + w.cfg.duration.as_nanos() as u64;
    let mut open = w.open_loop(t0);
    let mut last_expire = t0;
    let mut sending = true;
    let mut sent_for = Duration::ZERO;
    loop {
        let now = w.now_ns();
        if sending && (now >= end_at || stop.load(Ordering::Relaxed)) {
            if now >= end_at && matches!(w.cfg.load, Load::Open { .. }) {
                // Transactions scheduled before the end start, even if
                // this wake-up came late.
                start_due(&mut open, w, &mut slots, end_at - 1);
            }
            sending = false;
            sent_for = Duration::from_nanos(now - t0);
        }
        let busy = slots.busy();
        let drain = w.cfg.timeout.max(tcp.connect_timeout).min(DRAIN_MAX);
        if !sending && (!busy || now >= t0 + (sent_for + drain).as_nanos() as u64) {
            break;
        }
        if sending && w.next_boundary(t0, end_at).is_some_and(|b| now >= b) {
            w.flush_interval(None);
        }
        if now.saturating_sub(last_expire) >= 1_000_000 {
            expire(w, &mut slots, tcp, now);
            last_expire = now;
        }
        let mut wake = now + 10_000_000;
        if sending {
            match w.cfg.load {
                Load::Closed { .. } => slots.start_idle(w, now),
                Load::Open { .. } => wake = start_due(&mut open, w, &mut slots, now),
            }
            wake = wake.min(end_at);
            if let Some(b) = w.next_boundary(t0, end_at) {
                wake = wake.min(b);
            }
        }
        // Closed loop, no deadline needs a finer wake-up than the
        // millisecond (the expiry sweep, the interval, the end; the
        // transactions wake the wait themselves): a wait of whole
        // milliseconds is one epoll_wait, a finer one a ppoll on the epoll
        // set and an epoll_wait more, nearly every transaction.
        let coarse = matches!(w.cfg.load, Load::Closed { .. });
        await_ready(w, &mut slots, wake.min(last_expire + 1_000_000), coarse);
    }
    for s in slots.list.iter_mut() {
        match s.phase {
            Phase::Connecting => end(w, s, End::ConnectError),
            Phase::Waiting => end(w, s, End::Lost),
            Phase::Idle => {}
        }
    }
    w.finish(sent_for);
    (Vec::new(), sent_for)
}
