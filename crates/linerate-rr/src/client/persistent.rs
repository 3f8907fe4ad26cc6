//! The rr client over TCP with persistent connections (TCP_RR): each flow
//! is one connection, requests pipelined on it (closed loop: N in flight;
//! open loop: on schedule, each stamped with its scheduled time), every
//! answer matched by sequence as over UDP. The connections wait on one
//! epoll set ([`super::links`]): a turn looks at the flows that are ready
//! or owed requests, not at every flow. A connection the server closes or
//! resets is counted and made again after a bounded back-off; its requests
//! in flight are lost at their timeout.

use super::config::{Load, TcpClient};
use super::conn::{Conn, WR_HIGH};
use super::links::{Links, State};
use super::worker::{OpenLoop, Worker};
use linerate_backend::stream::RawStream;
use linerate_wire::{RrHeader, RrKind};
use nix::sys::epoll::EpollFlags;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Connects every flow at once and waits up to the connect timeout for
/// them; a flow not made is counted and tried again later (after its
/// back-off) in the run.
fn connect_all(w: &mut Worker<'_>, links: &mut Links, tcp: &TcpClient) {
    let now = w.now_ns();
    for f in 0..links.list.len() {
        links.connect(w, f, now);
    }
    let deadline = now + tcp.connect_timeout.as_nanos() as u64;
    loop {
        let now = w.now_ns();
        let connecting = (links.list.iter()).any(|l| matches!(l.state, State::Connecting(_)));
        if !connecting || now >= deadline {
            break;
        }
        let n = links.wait(now, deadline, false);
        let now = w.now_ns();
        for k in 0..n {
            let f = links.events[k].data() as usize;
            if matches!(links.list[f].state, State::Connecting(_)) {
                links.connected(w, f, now);
            }
        }
    }
    let now = w.now_ns();
    for f in 0..links.list.len() {
        if matches!(links.list[f].state, State::Connecting(_)) {
            links.failed(w, f, now);
        }
    }
}

/// Queues a request on flow `f` stamped `stamp`; false when the flow's
/// connection is not up or full.
fn enqueue(w: &mut Worker<'_>, links: &mut Links, f: usize, stamp: u64) -> bool {
    if !links.up(f) || links.list[f].conn.pending() >= WR_HIGH {
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
    links.list[f].conn.queue(&h, w.cfg.request_size);
    w.counts.sent += 1;
    true
}

/// Writes what flow `f` has waiting (a failure breaks its connection).
fn flush(w: &mut Worker<'_>, links: &mut Links, f: usize, now: u64) {
    if links.list[f].conn.flush().is_err() {
        links.broken(w, f, now);
    } else {
        links.set_interest(w, f, now);
    }
}

/// Closed loop: queues the requests owed to the flows touched this turn
/// (answered, connected; every flow with `all`) and writes them.
fn send_owed(w: &mut Worker<'_>, links: &mut Links, all: bool, now: u64) {
    let touched = links.take_touched();
    let one = |w: &mut Worker<'_>, links: &mut Links, f: usize| {
        while w.owed[f] > 0 && enqueue(w, links, f, now) {
            w.owed[f] -= 1;
        }
        if w.owed[f] > 0 && links.up(f) {
            w.counts.send_blocked += 1;
        }
        if links.list[f].conn.pending() > 0 {
            flush(w, links, f, now);
        }
    };
    if all {
        (0..links.list.len()).for_each(|f| one(w, links, f));
    } else {
        touched.iter().for_each(|f| one(w, links, *f));
    }
    links.give_back(touched);
}

/// Open loop: queues every request due by `now` (flows in turn, each
/// stamped with its scheduled time; a flow whose connection is down is
/// passed over); returns when the next is due.
fn send_due(o: &mut OpenLoop, w: &mut Worker<'_>, links: &mut Links, now: u64) -> u64 {
    let due = ((now - o.start) as f64 * o.tps / 1e9) as u64 + 1;
    let real_now = w.now_ns();
    w.counts.behind_max = w.counts.behind_max.max(due.saturating_sub(o.issued + 1));
    let flows = links.list.len();
    let mut refused = 0;
    while o.issued < due && refused < flows {
        let f = o.flow;
        o.flow = (f + 1) % flows;
        let at = o.at(o.issued);
        if enqueue(w, links, f, at) {
            w.lag.saturating_record(real_now.saturating_sub(at));
            o.issued += 1;
            refused = 0;
            links.mark(f);
        } else {
            refused += 1;
        }
    }
    if refused > 0 {
        w.counts.send_blocked += 1;
    }
    let touched = links.take_touched();
    for f in &touched {
        flush(w, links, *f, real_now);
    }
    links.give_back(touched);
    o.at(o.issued)
}

/// Reads what flow `f`'s connection has and matches every answer; with
/// `once`, returns as soon as a read brought answers (a blocking socket
/// would otherwise wait for more). The answers taken; None when the
/// connection broke.
fn receive(w: &mut Worker<'_>, conn: &mut Conn, f: usize, once: bool) -> Option<usize> {
    // The clock is read when an answer is there to stamp, not on each
    // spin that finds the socket empty.
    let mut now = None;
    let mut took = 0;
    // The last read emptied the socket: what it brought is taken, and no
    // read is needed to hear EAGAIN (a system call per answer, on a
    // ping-pong's path; a level-triggered wait or the next spin says when
    // more comes).
    let mut emptied = false;
    loop {
        loop {
            let m = match conn.rd.next_frame() {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(_) => {
                    w.counts.malformed += 1;
                    return None;
                }
            };
            match RrHeader::parse(m) {
                Ok(h)
                    if h.kind == RrKind::Response
                        && m.len() == w.cfg.response_size
                        && h.flow == w.base_flow + f as u32 =>
                {
                    let t = *now.get_or_insert_with(|| w.now_ns());
                    let a = w.out[f].answer(h.seq, t);
                    w.record(f, h.seq, a);
                    took += 1;
                }
                _ => w.counts.malformed += 1,
            }
        }
        let s = conn.s.as_mut()?;
        if emptied || (once && took > 0) {
            return Some(took);
        }
        match conn.rd.fill(&mut RawStream(&*s)) {
            Ok(0) => return None,
            Ok(_) => {
                now = None;
                emptied = conn.rd.last_read_short();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(took),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Takes the answers that came on the connections that are ready, waiting
/// until `wake` (monotonic ns) unless busy polling; makes the connections
/// under way; writes what waits. Each flow that read is touched.
fn await_answers(w: &mut Worker<'_>, links: &mut Links, wake: u64) {
    if links.direct && links.up(0) {
        // One flow: wait in (or spin on) the read itself, one system call
        // fewer per transaction than epoll and then read.
        let took = receive(w, &mut links.list[0].conn, 0, links.blocking);
        return took_or_broken(w, links, 0, took, None);
    }
    let n = links.wait(w.now_ns(), wake, w.cfg.busy_poll);
    let now = w.now_ns();
    for k in 0..n {
        let ev = links.events[k];
        let f = ev.data() as usize;
        match links.list[f].state {
            State::Connecting(_) => links.connected(w, f, now),
            State::Up => {
                if ev.events().contains(EpollFlags::EPOLLOUT) {
                    flush(w, links, f, now);
                }
                if links.up(f) {
                    let took = receive(w, &mut links.list[f].conn, f, false);
                    took_or_broken(w, links, f, took, Some(now));
                }
            }
            State::Down(_) => {}
        }
    }
}

/// After flow `f` read: looked at for sending if it took answers (which
/// also shortens its next back-off) or still waits; broken otherwise.
/// `now`: the time if the caller has it (read here only for a broken one).
fn took_or_broken(
    w: &mut Worker<'_>,
    links: &mut Links,
    f: usize,
    took: Option<usize>,
    now: Option<u64>,
) {
    match took {
        Some(n) => {
            if n > 0 {
                links.answered(f);
            }
            links.mark(f);
        }
        None => {
            let now = now.unwrap_or_else(|| w.now_ns());
            links.broken(w, f, now);
        }
    }
}

/// Whether to wait in the read itself: one connection in closed loop (a
/// blocking socket with a 1 ms timeout, the expiry tick) rather than in
/// epoll and then read: one system call fewer per transaction.
fn receive_blocking(w: &Worker<'_>) -> bool {
    w.cfg.flows == 1 && !w.cfg.busy_poll && matches!(w.cfg.load, Load::Closed { .. })
}

/// Runs one worker's persistent connections for the test's duration,
/// then waits for the answers still due. Returns the connections' local
/// addresses and how long it sent.
pub(super) fn run(
    w: &mut Worker<'_>,
    tcp: &TcpClient,
    stop: &AtomicBool,
) -> (Vec<SocketAddr>, Duration) {
    let Ok(mut links) = Links::new(w.cfg.flows, w.cfg.response_size, tcp.connect_timeout) else {
        w.counts.connect_errors += w.cfg.flows as u64;
        w.finish(Duration::ZERO);
        return (Vec::new(), Duration::ZERO);
    };
    links.blocking = receive_blocking(w);
    links.direct = w.cfg.flows == 1 && (links.blocking || w.cfg.busy_poll);
    connect_all(w, &mut links, tcp);
    let local = (links.list.iter())
        .filter_map(|l| l.conn.s.as_ref()?.local_addr().ok())
        .collect();
    // No connection made at all: nothing to run.
    let dead = !links.any_up();
    let start = w.now_ns();
    let end = start + w.cfg.duration.as_nanos() as u64;
    let mut open = w.open_loop(start);
    let mut last_expire = start;
    let (mut sending, mut all) = (!dead, true);
    let mut sent_for = Duration::ZERO;
    loop {
        let now = w.now_ns();
        if sending && (now >= end || stop.load(Ordering::Relaxed)) {
            if now >= end && matches!(w.cfg.load, Load::Open { .. }) {
                send_due(&mut open, w, &mut links, end - 1);
            }
            sending = false;
            sent_for = Duration::from_nanos(now - start);
        }
        if !sending && (dead || w.drained(start, sent_for, now)) {
            break;
        }
        if sending && w.next_boundary(start, end).is_some_and(|b| now >= b) {
            w.flush_interval(None);
        }
        if now.saturating_sub(last_expire) >= 1_000_000 {
            w.expire(now);
            last_expire = now;
            all = true;
        }
        let mut wake = (now + 10_000_000).min(last_expire + 1_000_000);
        if sending {
            wake = wake.min(links.tend(w, now));
            match w.cfg.load {
                Load::Closed { .. } => send_owed(w, &mut links, all, now),
                Load::Open { .. } => wake = wake.min(send_due(&mut open, w, &mut links, now)),
            }
            all = false;
            wake = wake.min(end);
            if let Some(b) = w.next_boundary(start, end) {
                wake = wake.min(b);
            }
        }
        await_answers(w, &mut links, wake);
    }
    w.finish(sent_for);
    (local, sent_for)
}
