//! A spinning UDP worker's connected sockets: one per client it serves,
//! up to a bound, besides the group's socket it shares the port with.
//!
//! A request to the group's (unconnected) socket costs the kernel two
//! route lookups: the input route of the request (the socket is found
//! only after it) and the output route of the answer (`sendto` with an
//! address). A socket bound to the same address and port and connected
//! to the client is found by the kernel's early demultiplexing before the
//! input route, with the route cached on the socket for the way in and
//! for the way out; the kernel prefers it to the group's for that
//! client's datagrams (an exact match scores higher). On the two-namespace
//! rig that is 11-16% more ping-pong transactions a second, in both
//! placements (bench/HISTORY.md, session 37).
//!
//! The worker polls its sockets in turn ([`Clients::next`]): again the one
//! that just gave datagrams (a ping-pong client's next request comes to
//! the same socket), at most [`STAY_MAX`] times in a row; the group's
//! socket at least once every [`LISTENER_EVERY`] polls (every other poll
//! while it is busy), so a new client's first request waits a few empty
//! polls at most. A client silent for [`IDLE_NS`] loses its socket
//! ([`Clients::sweep`]), so a departed client's socket is not polled for
//! ever and its slot goes to the next client.

use linerate_backend::clock::coarse_ns;
use std::net::{SocketAddr, UdpSocket};

/// Connected sockets a spinning worker opens by default.
pub const CLIENT_SOCKETS: usize = 16;
/// The most a worker may open (`--client-sockets`): descriptors are bounded.
pub const CLIENT_SOCKETS_MAX: usize = 1024;
/// Polls between two of the group's socket while it is quiet.
pub const LISTENER_EVERY: u32 = 16;
/// Polls in a row on a client's socket that keeps giving datagrams.
pub const STAY_MAX: u32 = 8;
/// A client's socket with no datagram for this long is closed.
pub const IDLE_NS: u64 = 1_000_000_000;
/// Polls (empty or not) between two looks for idle sockets (one coarse
/// clock read).
const SWEEP_EVERY: u32 = 1 << 14;

/// One client's connected socket.
#[derive(Debug)]
struct Conn {
    sock: UdpSocket,
    peer: SocketAddr,
    /// Coarse monotonic ns of its last datagram (or of its opening).
    last_ns: u64,
}

/// Which socket the last poll read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cur {
    Listener,
    Conn(usize),
}

/// Opens a socket for a client: bound where the group's socket is (with
/// SO_REUSEPORT, as it), set up as it is, then connected to `peer`.
pub type Opener<'a> = dyn Fn(SocketAddr) -> std::io::Result<UdpSocket> + 'a;

/// A worker's connected sockets and the turn of its polls.
#[derive(Debug)]
pub struct Clients {
    max: usize,
    conns: Vec<Conn>,
    cur: Cur,
    /// Polls since the group's socket was last read.
    since_listener: u32,
    /// Whether the group's socket gave datagrams at its last poll.
    listener_busy: bool,
    /// Polls in a row on the current client's socket that gave datagrams.
    stay: u32,
    /// The next client's socket in the turn.
    next_conn: usize,
    polls: u32,
    /// Sockets opened for clients, closed as idle, and not opened (the
    /// kernel refused: descriptors, memory).
    pub opened: u64,
    pub closed: u64,
    pub refused: u64,
}

impl Clients {
    /// Up to `max` connected sockets (0: none, every datagram on the
    /// group's socket).
    pub fn new(max: usize) -> Self {
        Self {
            max,
            conns: Vec::with_capacity(max),
            cur: Cur::Listener,
            since_listener: 0,
            listener_busy: false,
            stay: 0,
            next_conn: 0,
            polls: 0,
            opened: 0,
            closed: 0,
            refused: 0,
        }
    }

    /// How many clients have a socket now.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Chooses the socket the next receive reads and returns it; every
    /// [`SWEEP_EVERY`] polls, first closes the sockets of clients silent
    /// for [`IDLE_NS`].
    pub fn next<'a>(&'a mut self, listener: &'a UdpSocket) -> &'a UdpSocket {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(SWEEP_EVERY) && !self.conns.is_empty() {
            self.sweep(coarse_ns());
        }
        let every = if self.listener_busy {
            2
        } else {
            LISTENER_EVERY
        };
        self.since_listener += 1;
        self.cur = if self.conns.is_empty() || self.since_listener >= every {
            Cur::Listener
        } else {
            match self.cur {
                Cur::Conn(i) if self.stay > 0 && self.stay < STAY_MAX => Cur::Conn(i),
                _ => {
                    self.stay = 0;
                    let i = self.next_conn % self.conns.len();
                    self.next_conn = i + 1;
                    Cur::Conn(i)
                }
            }
        };
        match self.cur {
            Cur::Listener => {
                self.since_listener = 0;
                listener
            }
            Cur::Conn(i) => &self.conns[i].sock,
        }
    }

    /// The last receive got datagrams.
    pub fn got(&mut self) {
        match self.cur {
            Cur::Listener => self.listener_busy = true,
            Cur::Conn(i) => {
                self.stay += 1;
                self.conns[i].last_ns = coarse_ns();
            }
        }
    }

    /// The last receive found nothing.
    pub fn empty(&mut self) {
        match self.cur {
            Cur::Listener => self.listener_busy = false,
            Cur::Conn(_) => self.stay = 0,
        }
    }

    /// Closes the sockets whose client sent nothing since `now_ns - IDLE_NS`.
    pub fn sweep(&mut self, now_ns: u64) {
        let before = self.conns.len();
        self.conns
            .retain(|c| now_ns.saturating_sub(c.last_ns) < IDLE_NS);
        if self.conns.len() < before {
            self.closed += (before - self.conns.len()) as u64;
            // the turn restarts: the sockets' places moved
            self.cur = Cur::Listener;
            self.stay = 0;
            self.next_conn = 0;
        }
    }

    /// The socket the last [`next`](Self::next) chose (to answer on it).
    pub fn current<'a>(&'a self, listener: &'a UdpSocket) -> &'a UdpSocket {
        match self.cur {
            Cur::Listener => listener,
            Cur::Conn(i) => &self.conns[i].sock,
        }
    }

    /// Whether the last receive read the group's socket and a client
    /// without a socket may still get one ([`offer`](Self::offer)).
    pub fn has_room(&self) -> bool {
        self.cur == Cur::Listener && self.conns.len() < self.max
    }

    /// The client the last receive's socket is connected to (None: the
    /// group's socket). An answer to it goes without an address, by the
    /// socket's cached route.
    pub fn peer(&self) -> Option<SocketAddr> {
        match self.cur {
            Cur::Listener => None,
            Cur::Conn(i) => Some(self.conns[i].peer),
        }
    }

    /// A request from `peer` came to the group's socket: opens it a
    /// connected socket if there is room and it has none.
    pub fn offer(&mut self, peer: SocketAddr, open: &Opener<'_>) {
        if !self.has_room() || self.conns.iter().any(|c| same(c.peer, peer)) {
            return;
        }
        match open(peer) {
            Ok(sock) => {
                self.conns.push(Conn {
                    sock,
                    peer,
                    last_ns: coarse_ns(),
                });
                self.opened += 1;
            }
            Err(_) => {
                // Descriptors or memory are short: no more tries this run
                // (each would cost a request its system calls for nothing).
                self.refused += 1;
                self.max = self.conns.len();
            }
        }
    }
}

/// Whether two addresses name one client (address and port; an IPv6
/// flow label or scope may differ between its datagrams).
pub fn same(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip() == b.ip() && a.port() == b.port()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socks(n: usize) -> Vec<UdpSocket> {
        (0..n)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect()
    }

    fn port(s: &UdpSocket) -> u16 {
        s.local_addr().unwrap().port()
    }

    /// An opener that hands out fresh loopback sockets (the turn is what
    /// is under test here; the kernel's part is in the rig tests).
    fn opener() -> impl Fn(SocketAddr) -> std::io::Result<UdpSocket> {
        |_| UdpSocket::bind("127.0.0.1:0")
    }

    fn client(p: u16) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, 1], p))
    }

    #[test]
    fn without_clients_every_poll_reads_the_group_socket() {
        let l = &socks(1)[0];
        let mut c = Clients::new(4);
        for _ in 0..100 {
            assert_eq!(port(c.next(l)), port(l));
            c.empty();
        }
    }

    #[test]
    fn a_client_gets_one_socket_and_only_from_the_group_socket() {
        let l = &socks(1)[0];
        let mut c = Clients::new(4);
        c.next(l);
        c.got();
        c.offer(client(1000), &opener());
        c.offer(client(1000), &opener());
        assert_eq!((c.len(), c.opened), (1, 1));
        // a datagram read on the client's own socket offers nothing
        c.next(l);
        assert!(c.peer().is_some());
        c.offer(client(1001), &opener());
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn the_bound_holds_and_a_refusal_is_counted() {
        let l = &socks(1)[0];
        let mut c = Clients::new(2);
        for p in 0..5 {
            c.next(l);
            while c.peer().is_some() {
                c.next(l);
            }
            c.offer(client(2000 + p), &opener());
        }
        assert_eq!((c.len(), c.opened, c.refused), (2, 2, 0));
        // after a refusal, no more tries
        let mut d = Clients::new(2);
        let tries = std::cell::Cell::new(0);
        let refuse = |_| {
            tries.set(tries.get() + 1);
            Err(std::io::Error::other("EMFILE"))
        };
        for p in 0..3 {
            while d.next(l).local_addr().unwrap() != l.local_addr().unwrap() {}
            d.offer(client(p), &refuse);
        }
        assert_eq!((d.len(), d.refused, tries.get()), (0, 1, 1));
        assert!(!d.has_room());
    }

    /// Which socket each of `n` polls reads, by its port; `got(port)`
    /// says whether that poll found datagrams.
    fn turns(c: &mut Clients, l: &UdpSocket, n: usize, got: impl Fn(u16) -> bool) -> Vec<u16> {
        (0..n)
            .map(|_| {
                let p = port(c.next(l));
                if got(p) {
                    c.got();
                } else {
                    c.empty();
                }
                p
            })
            .collect()
    }

    fn with_clients(n: u16, l: &UdpSocket) -> Clients {
        let mut c = Clients::new(4);
        for p in 0..n {
            while port(c.next(l)) != port(l) {
                c.empty();
            }
            c.offer(client(p + 1), &opener());
            c.empty();
        }
        assert_eq!(c.len(), usize::from(n));
        c
    }

    #[test]
    fn a_quiet_group_socket_is_read_once_every_listener_every_polls() {
        let l = &socks(1)[0];
        let mut c = with_clients(1, l);
        let lp = port(l);
        let t = turns(&mut c, l, 10 * LISTENER_EVERY as usize, |_| false);
        assert_eq!(t.iter().filter(|&&p| p == lp).count(), 10, "{t:?}");
        // between two reads of the group's socket, the client's 15 times
        let first = t.iter().position(|&p| p == lp).unwrap();
        let every = LISTENER_EVERY as usize;
        assert!(!t[first + 1..first + every].contains(&lp), "{t:?}");
        assert_eq!(t[first + every], lp);
    }

    #[test]
    fn a_busy_group_socket_is_read_every_other_poll() {
        let l = &socks(1)[0];
        let mut c = with_clients(1, l);
        let lp = port(l);
        // the group's socket always has datagrams, the client's never:
        // once the group's socket is read and busy, every other poll
        let t = turns(&mut c, l, 60, |p| p == lp);
        let first = t.iter().position(|&p| p == lp).unwrap();
        assert_eq!(first, LISTENER_EVERY as usize - 1, "{t:?}");
        let busy = &t[first..];
        assert!(busy.windows(2).all(|w| w[0] != w[1]), "{t:?}");
    }

    #[test]
    fn a_client_that_keeps_sending_is_read_at_most_stay_max_times_in_a_row() {
        let l = &socks(1)[0];
        let mut c = with_clients(2, l);
        let lp = port(l);
        // the clients' sockets always have datagrams, the group's never
        let t = turns(&mut c, l, 200, |p| p != lp);
        let (mut run, mut longest) = (1, 1);
        for w in t.windows(2) {
            run = if w[0] == w[1] { run + 1 } else { 1 };
            longest = longest.max(run);
        }
        assert_eq!(longest, STAY_MAX, "{t:?}");
        let ports: std::collections::BTreeSet<u16> = t.iter().copied().collect();
        assert_eq!(ports.len(), 3, "both clients and the group's socket: {t:?}");
        assert!(t.iter().filter(|&&p| p == lp).count() >= 200 / LISTENER_EVERY as usize);
    }

    #[test]
    fn a_silent_client_loses_its_socket_and_its_slot_is_free() {
        let l = &socks(1)[0];
        let mut c = Clients::new(1);
        c.next(l);
        c.offer(client(1), &opener());
        let t0 = c.conns[0].last_ns;
        c.sweep(t0 + IDLE_NS - 1);
        assert_eq!(c.len(), 1, "not yet idle");
        c.sweep(t0 + IDLE_NS);
        assert_eq!((c.len(), c.closed), (0, 1));
        c.next(l);
        c.offer(client(2), &opener());
        assert_eq!((c.len(), c.opened), (1, 2));
    }

    #[test]
    fn the_polls_themselves_close_a_silent_clients_socket() {
        let l = &socks(1)[0];
        let mut c = with_clients(1, l);
        // as if its last datagram came long ago; the client's socket keeps
        // giving nothing, the group's socket is busy: no empty poll there
        c.conns[0].last_ns = 0;
        let lp = port(l);
        let t = turns(&mut c, l, SWEEP_EVERY as usize, |p| p == lp);
        assert_eq!(
            (c.len(), c.closed),
            (0, 1),
            "closed within {} polls",
            t.len()
        );
    }

    #[test]
    fn one_client_is_its_address_and_port() {
        let a: SocketAddr = "[2001:db8::1]:5".parse().unwrap();
        let b = SocketAddr::V6(std::net::SocketAddrV6::new(
            "2001:db8::1".parse().unwrap(),
            5,
            77,
            0,
        ));
        assert!(same(a, b));
        assert!(!same(a, "[2001:db8::1]:6".parse().unwrap()));
        assert!(!same(a, "[2001:db8::2]:5".parse().unwrap()));
    }
}
