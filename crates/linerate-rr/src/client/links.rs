//! A worker's persistent connections on one epoll set, each registered
//! (level-triggered) with its flow's index: a wait costs what is ready,
//! not the number of connections. A connection the server closes or
//! resets is counted and made again after a back-off: 10 ms after a
//! connection that had answers, doubling up to 1 s while connects fail or
//! connections end before their first answer (a server refusing over its
//! per-source limit accepts, then closes).

use super::conn::{Conn, connected, start_connect};
use super::worker::Worker;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::time::TimeSpec;
use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

/// The first wait before a connection is made again, ns.
pub const BACKOFF_MIN_NS: u64 = 10_000_000;
/// The longest, ns.
pub const BACKOFF_MAX_NS: u64 = 1_000_000_000;

/// Where a flow's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Up,
    /// A connect under way since this time (ns).
    Connecting(u64),
    /// No connection; the next attempt at this time (ns).
    Down(u64),
}

/// One flow's connection.
pub(super) struct Link {
    pub(super) conn: Conn,
    pub(super) state: State,
    /// The wait before the next attempt after this connection fails or
    /// breaks, ns.
    backoff: u64,
    interest: EpollFlags,
    /// Was up once: the next connect is a reconnect.
    was_up: bool,
}

/// A worker's connections, one per flow, on one epoll set.
pub(super) struct Links {
    pub(super) list: Vec<Link>,
    ep: Epoll,
    pub(super) events: Vec<EpollEvent>,
    /// The flows not up (down or connecting), looked at by [`Links::tend`].
    waiting: Vec<usize>,
    /// Flows to look at for sending this turn (each once), and the mark.
    pub(super) touched: Vec<usize>,
    marked: Vec<bool>,
    /// A connection that comes up waits in blocking reads (one flow in
    /// closed loop: one system call fewer per transaction).
    pub(super) blocking: bool,
    /// The one flow is read directly while it is up (in a blocking read,
    /// or spinning on its socket), never through the epoll set: its
    /// connection leaves the set once made. A socket in a set has the
    /// kernel put it on the set's ready list, under the set's lock, as
    /// each segment arrives; over a veth that runs in the server's send,
    /// on the server's CPU, while the client's read waits on the socket's
    /// lock it holds: a cost on every round trip for an event no one reads.
    pub(super) direct: bool,
    connect_timeout_ns: u64,
}

impl Links {
    /// `flows` flows, none connected yet.
    pub(super) fn new(
        flows: usize,
        response_size: usize,
        connect_timeout: Duration,
    ) -> io::Result<Self> {
        Ok(Self {
            list: (0..flows)
                .map(|_| Link {
                    conn: Conn::new(response_size),
                    state: State::Down(0),
                    backoff: BACKOFF_MIN_NS,
                    interest: EpollFlags::empty(),
                    was_up: false,
                })
                .collect(),
            ep: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
            events: vec![EpollEvent::empty(); flows.clamp(1, 1024)],
            waiting: (0..flows).collect(),
            touched: Vec::with_capacity(flows),
            marked: vec![false; flows],
            blocking: false,
            direct: false,
            connect_timeout_ns: connect_timeout.as_nanos() as u64,
        })
    }

    pub(super) fn up(&self, f: usize) -> bool {
        self.list[f].state == State::Up
    }

    pub(super) fn any_up(&self) -> bool {
        self.waiting.len() < self.list.len()
    }

    /// Flow `f` is looked at for sending this turn.
    pub(super) fn mark(&mut self, f: usize) {
        if !self.marked[f] {
            self.marked[f] = true;
            self.touched.push(f);
        }
    }

    /// The flows marked this turn, the marks cleared.
    pub(super) fn take_touched(&mut self) -> Vec<usize> {
        for f in &self.touched {
            self.marked[*f] = false;
        }
        std::mem::take(&mut self.touched)
    }

    /// Gives back the list [`Links::take_touched`] took (its room kept).
    pub(super) fn give_back(&mut self, mut v: Vec<usize>) {
        v.clear();
        self.touched = v;
    }

    /// Starts connecting flow `f`.
    pub(super) fn connect(&mut self, w: &mut Worker<'_>, f: usize, now: u64) {
        w.counts.connects += 1;
        if self.list[f].was_up {
            w.counts.reconnects += 1;
        }
        let made = start_connect(w.cfg.server, w.cfg.bind, true).and_then(|s| {
            self.ep
                .add(&s, EpollEvent::new(EpollFlags::EPOLLOUT, f as u64))?;
            Ok(s)
        });
        match made {
            Ok(s) => {
                let l = &mut self.list[f];
                l.conn.s = Some(s);
                l.state = State::Connecting(now);
                l.interest = EpollFlags::EPOLLOUT;
            }
            Err(_) => self.failed(w, f, now),
        }
    }

    /// Flow `f` could not connect: counted, tried again after its back-off.
    pub(super) fn failed(&mut self, w: &mut Worker<'_>, f: usize, now: u64) {
        w.counts.connect_errors += 1;
        let l = &mut self.list[f];
        if let Some(s) = l.conn.s.take() {
            self.ep.delete(&s).ok();
        }
        l.state = State::Down(now + l.backoff);
        l.backoff = (l.backoff * 2).min(BACKOFF_MAX_NS);
    }

    /// Flow `f`'s connection that polled writable while connecting: up,
    /// or failed.
    pub(super) fn connected(&mut self, w: &mut Worker<'_>, f: usize, now: u64) {
        let l = &mut self.list[f];
        if !l.conn.s.as_ref().is_some_and(connected) {
            return self.failed(w, f, now);
        }
        l.state = State::Up;
        l.was_up = true;
        self.waiting.retain(|x| *x != f);
        if self.blocking {
            let s = l.conn.s.as_ref().expect("connected");
            let blocking = s.set_nonblocking(false).is_ok()
                && s.set_read_timeout(Some(Duration::from_millis(1))).is_ok();
            if !blocking {
                return self.broken(w, f, now);
            }
        }
        if self.direct {
            let s = l.conn.s.as_ref().expect("connected");
            if self.ep.delete(s).is_err() {
                return self.broken(w, f, now);
            }
            l.interest = EpollFlags::empty();
        }
        self.set_interest(w, f, now);
        self.mark(f);
    }

    /// Flow `f`'s connection broke (the server closed or reset it, or it
    /// failed): counted; its requests in flight expire as lost; made again
    /// after the back-off.
    pub(super) fn broken(&mut self, w: &mut Worker<'_>, f: usize, now: u64) {
        let l = &mut self.list[f];
        let Some(s) = l.conn.s.take() else { return };
        self.ep.delete(&s).ok();
        w.counts.resets += 1;
        l.conn = Conn::new(w.cfg.response_size);
        l.state = State::Down(now + l.backoff);
        l.backoff = (l.backoff * 2).min(BACKOFF_MAX_NS);
        self.waiting.push(f);
    }

    /// Flow `f`'s connection brought answers: the next wait after it
    /// breaks is the shortest again.
    pub(super) fn answered(&mut self, f: usize) {
        self.list[f].backoff = BACKOFF_MIN_NS;
    }

    /// Watches flow `f` for reading, and for writing while it has bytes
    /// waiting (not a flow read directly: it is out of the set while up).
    pub(super) fn set_interest(&mut self, w: &mut Worker<'_>, f: usize, now: u64) {
        if self.direct {
            return;
        }
        let l = &mut self.list[f];
        let want = match l.state {
            State::Up if l.conn.pending() > 0 => EpollFlags::EPOLLIN | EpollFlags::EPOLLOUT,
            State::Up => EpollFlags::EPOLLIN,
            _ => return,
        };
        if want != l.interest {
            l.interest = want;
            let s = l.conn.s.as_ref().expect("up");
            if self
                .ep
                .modify(s, &mut EpollEvent::new(want, f as u64))
                .is_err()
            {
                self.broken(w, f, now);
            }
        }
    }

    /// Makes the connections whose back-off is over, and fails those
    /// connecting beyond the connect timeout; returns when to look again
    /// (monotonic ns; u64::MAX: nothing waits).
    pub(super) fn tend(&mut self, w: &mut Worker<'_>, now: u64) -> u64 {
        let mut next = u64::MAX;
        for k in 0..self.waiting.len() {
            let f = self.waiting[k];
            match self.list[f].state {
                State::Down(at) if now >= at => self.connect(w, f, now),
                State::Connecting(since) if now >= since + self.connect_timeout_ns => {
                    self.failed(w, f, now)
                }
                _ => {}
            }
            next = next.min(match self.list[f].state {
                State::Down(at) => at,
                State::Connecting(since) => since + self.connect_timeout_ns,
                State::Up => u64::MAX,
            });
        }
        next
    }

    /// Waits for readiness until `wake` (monotonic ns; not at all when
    /// `spin`); the number of events in `events`.
    pub(super) fn wait(&mut self, now: u64, wake: u64, spin: bool) -> usize {
        wait_ready(&self.ep, &mut self.events, now, wake, spin)
    }
}

/// Waits on `ep` until `wake` (monotonic ns; not at all when `spin`); the
/// number of events put in `events`. What is ready already is taken at
/// once; epoll_wait counts in milliseconds, so a wait under one looks
/// without waiting first, then goes through ppoll on the epoll descriptor
/// (nanoseconds), then takes the events.
pub(super) fn wait_ready(
    ep: &Epoll,
    events: &mut [EpollEvent],
    now: u64,
    wake: u64,
    spin: bool,
) -> usize {
    let left = wake.saturating_sub(now);
    if left >= 1_000_000 && !spin {
        // A wait with a timeout returns what is ready already at once:
        // no zero-timeout look first (a system call a wake-up).
        let ms = (left / 1_000_000).min(u64::from(u16::MAX)) as u16;
        return ep.wait(events, ms).unwrap_or(0);
    }
    let n = ep.wait(events, EpollTimeout::ZERO).unwrap_or(0);
    if n > 0 || spin || left == 0 {
        return n;
    }
    let mut fd = [PollFd::new(ep.0.as_fd(), PollFlags::POLLIN)];
    let ts = TimeSpec::from_duration(Duration::from_nanos(left));
    if ppoll(&mut fd, Some(ts), None).unwrap_or(0) > 0 {
        ep.wait(events, EpollTimeout::ZERO).unwrap_or(0)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::config::ClientConfig;
    use std::net::{SocketAddr, TcpListener};
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    /// The sockets registered in `ep` (its `fdinfo`'s `tfd:` lines).
    fn registered(ep: &Epoll) -> usize {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", ep.0.as_raw_fd()));
        info.unwrap()
            .lines()
            .filter(|l| l.starts_with("tfd:"))
            .count()
    }

    fn one_flow(server: SocketAddr) -> ClientConfig {
        ClientConfig::one_flow_for_test(server, 1, 64, true)
    }

    #[test]
    fn a_flow_read_directly_leaves_the_epoll_set_once_made() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let cfg = one_flow(l.local_addr().unwrap());
        for direct in [false, true] {
            let (tx, _rx) = std::sync::mpsc::channel();
            let mut w = Worker::new(&cfg, 0, 1, Instant::now(), tx);
            let mut links = Links::new(1, 64, Duration::from_secs(2)).unwrap();
            links.direct = direct;
            links.connect(&mut w, 0, 0);
            // connecting: in the set, to hear the connect made
            assert_eq!(registered(&links.ep), 1);
            assert_eq!(links.wait(0, 2_000_000_000, false), 1);
            links.connected(&mut w, 0, 0);
            assert!(links.up(0), "direct {direct}");
            assert_eq!(
                registered(&links.ep),
                usize::from(!direct),
                "direct {direct}"
            );
            // bytes waiting: watched for writing in the set, not when direct
            links.list[0].conn.wr.push(0);
            links.set_interest(&mut w, 0, 0);
            assert!(links.up(0), "direct {direct}");
            assert_eq!(
                registered(&links.ep),
                usize::from(!direct),
                "direct {direct}"
            );
            // broken: made again later, in the set while it connects
            links.broken(&mut w, 0, 0);
            assert_eq!((registered(&links.ep), w.counts.resets), (0, 1));
            links.connect(&mut w, 0, 0);
            assert_eq!(registered(&links.ep), 1);
        }
    }
}
