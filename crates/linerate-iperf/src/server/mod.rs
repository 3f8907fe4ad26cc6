//! The server: accepts tests from iperf3 clients (or `linerate client`),
//! one at a time as iperf3 does; a connection arriving while a test runs
//! gets ACCESS_DENIED, and the server goes on serving.

use crate::meter::{Meter, until_due};
use crate::net::{self, CpuMeter};
use crate::set::{Conn, Running, StreamOpts, forward_events, spawn_streams};
use linerate_iperf_proto::report::{Report, Role, StartInfo, StreamDesc, peer_results};
use linerate_iperf_proto::server::{ServerEvent, ServerSession};
use linerate_iperf_proto::{
    COOKIE_LEN, Cookie, IErr, Params, Protocol, cookie_str, state, udp_connect,
};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod options;
mod test;
pub use options::{AMOUNT_TEST_MAX, Limits, ServerAuth, ServerOptions};
use test::{Shared, serve_test};

/// Where the server writes its output.
pub type Out = Arc<Mutex<dyn Write + Send>>;

fn say(out: &Out, text: &str) {
    if let Ok(mut o) = out.lock() {
        let _ = o.write_all(text.as_bytes());
        let _ = o.flush();
    }
}

struct Active {
    cookie: Cookie,
    source: IpAddr,
    data: Sender<DataConn>,
    accepting: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    /// Set when the test was refused for its credentials: with `-1` that
    /// does not use up the one test (iperf3's rule).
    refused: Arc<AtomicBool>,
    /// Set when the test was cut for moving more than the rate limit.
    rate_cut: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<()>,
}

/// Serves until `shutdown` is set (or after one test with `-1`).
pub fn run(opts: &ServerOptions, out: Out, shutdown: Arc<AtomicBool>) -> std::io::Result<()> {
    let addr = net::server_addr(opts.bind, opts.family, opts.port);
    let listener = net::tcp_listener(addr, opts.family, opts.bind_dev.as_deref(), opts.mptcp)?;
    serve(listener, opts, out, shutdown)
}

/// A connection whose cookie was read (or not), with its place in the
/// accept order.
type CookieRead = (TcpStream, SocketAddr, std::io::Result<Cookie>, u64);

/// A test's data connection and its place in the accept order: cookies are
/// read on threads of their own and can come in any order, the streams'
/// ids go by the order the client connected them (iperf3's server reads
/// each cookie as it accepts).
type DataConn = (u64, TcpStream);

/// The accept loop's state: tests running, cookies being read.
struct Acceptor<'a> {
    opts: &'a ServerOptions,
    out: Out,
    shutdown: Arc<AtomicBool>,
    port: u16,
    human: bool,
    cookie_tx: mpsc::Sender<CookieRead>,
    /// Wakes the accept loop: a cookie was read, a test ended.
    wake: Arc<Wake>,
    active: Vec<Active>,
    /// Connections whose cookie is still being read, oldest first.
    pending: Arc<Mutex<Vec<Pending>>>,
    /// Sources whose last test was cut for its rate, and until when their
    /// next is refused.
    cooling: HashMap<IpAddr, Instant>,
    next_pending: u64,
    udp_setup: Arc<Mutex<()>>,
    test_no: usize,
    /// New tests that found the limits taken, held for a moment in case a
    /// test that is ending frees its place (the client of the last test
    /// has its results and starts the next before that test's thread has
    /// closed it: iperf3's one-loop server never says busy then).
    held: Vec<Held>,
}

/// A new test held back by the limits, until `until`.
struct Held {
    ctrl: TcpStream,
    peer: SocketAddr,
    cookie: Cookie,
    until: Instant,
}

/// How long a new test waits for a place before it is denied.
const HOLD_FOR_A_PLACE: Duration = Duration::from_millis(250);
/// Most new tests held at once (more are denied at once).
const HELD_MAX: usize = 8;

impl Acceptor<'_> {
    fn banner(&self) {
        if self.human {
            say(
                &self.out,
                &format!(
                    "-----------------------------------------------------------\nServer listening on {} (test #{})\n-----------------------------------------------------------\n",
                    self.port, self.test_no
                ),
            );
        }
    }

    /// A new connection: its cookie is read on a thread of its own, with a
    /// deadline. Waiting connections are bounded (PENDING_MAX, and
    /// --max-pending-per-source for one source) by shedding, not by
    /// refusing newcomers: a source at its share loses its own oldest
    /// waiting connection, and when all slots are taken the source holding
    /// the most loses its oldest. So idle connections from many sources
    /// cannot lock honest clients out; only a newcomer whose own source
    /// holds as many as any other is refused.
    fn on_connection(&mut self, mut s: TcpStream, peer: SocketAddr) {
        let source = peer.ip().to_canonical();
        let per_source = self.opts.limits.max_pending_per_source.max(1);
        let Ok(mut list) = self.pending.lock() else {
            return;
        };
        let mine = list.iter().filter(|p| p.source == source).count();
        let shed_from = if mine >= per_source {
            Some(source)
        } else if list.len() >= PENDING_MAX {
            let mut counts: HashMap<IpAddr, usize> = HashMap::new();
            for p in list.iter() {
                *counts.entry(p.source).or_default() += 1;
            }
            let (top, n) = counts
                .into_iter()
                .max_by_key(|&(_, n)| n)
                .expect("the list is full");
            if n <= mine + 1 {
                drop(list);
                let _ = s.set_nonblocking(false);
                let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
                let _ = s.write_all(&[state::ACCESS_DENIED]);
                say(
                    &self.out,
                    &format!(
                        "linerate: refused {peer}: {PENDING_MAX} connections wait for their cookie and its source holds as many as any\n"
                    ),
                );
                return;
            }
            Some(top)
        } else {
            None
        };
        if let Some(from) = shed_from
            && let Some(at) = list.iter().position(|p| p.source == from)
        {
            let old = list.remove(at);
            old.shed.store(true, Ordering::Release);
            let _ = old.stream.shutdown(std::net::Shutdown::Both);
        }
        let Ok(clone) = s.try_clone() else {
            return;
        };
        let (id, shed) = (self.next_pending, Arc::new(AtomicBool::new(false)));
        self.next_pending += 1;
        list.push(Pending {
            id,
            source,
            stream: clone,
            shed: shed.clone(),
        });
        drop(list);
        let tx = self.cookie_tx.clone();
        let wake = self.wake.clone();
        let timeout = self.opts.control_timeout;
        let pending = self.pending.clone();
        std::thread::spawn(move || {
            let mut s = s;
            let _ = s.set_nonblocking(false);
            let mut r = read_cookie(&mut s, timeout);
            if let Ok(mut l) = pending.lock() {
                l.retain(|p| p.id != id);
            }
            if r.is_err() && shed.load(Ordering::Acquire) {
                r = Err(std::io::Error::new(
                    ErrorKind::ConnectionAborted,
                    "shed for a newer connection: its source held the most connections waiting",
                ));
            }
            let _ = tx.send((s, peer, r, id));
            wake.ring();
        });
    }

    /// A cookie arrived: a running test's data connection, a new test, or
    /// one too many.
    fn on_cookie(&mut self, (mut s, peer, cookie, order): CookieRead) {
        let cookie = match cookie {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::ConnectionAborted => {
                if self.human {
                    say(
                        &self.out,
                        &format!("linerate: closed {peer} before its cookie: {e}\n"),
                    );
                }
                return;
            }
            Err(e) => {
                // iperf3 3.21: SERVER_ERROR + IERECVCOOKIE to a silent peer.
                let mut msg = vec![state::SERVER_ERROR];
                msg.extend_from_slice(&IErr::RECV_COOKIE.0.to_be_bytes());
                msg.extend_from_slice(&0i32.to_be_bytes());
                let _ = s.write_all(&msg);
                say(
                    &self.out,
                    &format!("linerate: no cookie from {peer} ({e}); closed it\n"),
                );
                return;
            }
        };
        let source = peer.ip().to_canonical();
        let now = Instant::now();
        self.cooling.retain(|_, until| *until > now);
        let cooling = self.cooling.get(&source).map(|u| u.duration_since(now));
        if let Some(a) = self.active.iter().find(|a| a.cookie == cookie) {
            if a.accepting.load(Ordering::Acquire) {
                let _ = a.data.send((order, s));
            } else {
                let _ = s.write_all(&[state::ACCESS_DENIED]);
            }
        } else if let Some(left) = cooling {
            // Its last test was cut for moving more than the rate limit.
            let mut msg = vec![state::SERVER_ERROR];
            msg.extend_from_slice(&IErr::TOTAL_RATE.0.to_be_bytes());
            msg.extend_from_slice(&0i32.to_be_bytes());
            let _ = s.write_all(&msg);
            say(
                &self.out,
                &format!(
                    "linerate: refused {peer}: its last test moved more than --server-bitrate-limit; {:.1} s of its cool-down left\n",
                    left.as_secs_f64()
                ),
            );
        } else if self.no_place_for(peer) {
            // With `-1` too: the test in the place may be one refused for
            // its credentials, which leaves the place to the next (iperf3's
            // one-loop server reads the next connection only after it).
            if self.held.len() < HELD_MAX {
                self.held.push(Held {
                    ctrl: s,
                    peer,
                    cookie,
                    until: now + HOLD_FOR_A_PLACE,
                });
            } else {
                self.deny_busy(s, peer);
            }
        } else {
            self.start_test(s, peer, cookie);
        }
    }

    /// Whether the limits leave no place for a new test from `peer`.
    fn no_place_for(&self, peer: SocketAddr) -> bool {
        let source = peer.ip().to_canonical();
        self.active.len() >= self.opts.limits.max_tests.max(1)
            || self.active.iter().filter(|a| a.source == source).count()
                >= self.opts.limits.max_tests_per_source.max(1)
    }

    /// ACCESS_DENIED ("the server is busy") to a new test.
    fn deny_busy(&self, mut s: TcpStream, peer: SocketAddr) {
        let _ = s.write_all(&[state::ACCESS_DENIED]);
        if self.human {
            say(
                &self.out,
                &format!(
                    "linerate: denied {peer}: {} test(s) running (--max-tests {}, --max-tests-per-source {})\n",
                    self.active.len(),
                    self.opts.limits.max_tests.max(1),
                    self.opts.limits.max_tests_per_source.max(1)
                ),
            );
        }
    }

    /// The held tests: started where a place came free, denied once their
    /// time is up, in the order they came.
    fn place_held(&mut self) {
        let now = Instant::now();
        for h in std::mem::take(&mut self.held) {
            if !self.no_place_for(h.peer) {
                self.start_test(h.ctrl, h.peer, h.cookie);
            } else if now >= h.until {
                self.deny_busy(h.ctrl, h.peer);
            } else {
                self.held.push(h);
            }
        }
    }

    /// A new test on a thread of its own.
    fn start_test(&mut self, s: TcpStream, peer: SocketAddr, cookie: Cookie) {
        let (data_tx, data_rx) = mpsc::channel();
        let accepting = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicBool::new(false));
        let rf = refused.clone();
        let rate_cut = Arc::new(AtomicBool::new(false));
        let rc = rate_cut.clone();
        let wake = self.wake.clone();
        let (o, acc, dn, sd, op, us, port) = (
            self.out.clone(),
            accepting.clone(),
            done.clone(),
            self.shutdown.clone(),
            self.opts.clone(),
            self.udp_setup.clone(),
            self.port,
        );
        let handle = std::thread::spawn(move || {
            let shared = Shared {
                accepting: &acc,
                shutdown: &sd,
                udp_setup: &us,
                refused: &rf,
                rate_cut: &rc,
            };
            serve_test(s, peer, cookie, port, &data_rx, &op, &o, &shared);
            acc.store(false, Ordering::Release);
            dn.store(true, Ordering::Release);
            wake.ring();
        });
        self.active.push(Active {
            cookie,
            source: peer.ip().to_canonical(),
            data: data_tx,
            accepting,
            done,
            refused,
            rate_cut,
            handle,
        });
    }

    /// Joins the tests that ended; returns how many did (tests refused for
    /// their credentials not counted).
    fn reap(&mut self) -> usize {
        let mut finished = 0;
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].done.load(Ordering::Acquire) {
                let a = self.active.swap_remove(i);
                let _ = a.handle.join();
                if a.rate_cut.load(Ordering::Acquire) {
                    let until = Instant::now() + self.opts.limits.rate_cooldown();
                    self.cooling.insert(a.source, until);
                }
                if !a.refused.load(Ordering::Acquire) {
                    finished += 1;
                }
            } else {
                i += 1;
            }
        }
        finished
    }

    fn join_all(&mut self) {
        for a in self.active.drain(..) {
            let _ = a.handle.join();
        }
    }
}

/// Serves on `listener` until `shutdown` is set (or after one test with
/// `-1`).
pub fn serve(
    listener: TcpListener,
    opts: &ServerOptions,
    out: Out,
    shutdown: Arc<AtomicBool>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let (cookie_tx, cookie_rx) = mpsc::channel::<CookieRead>();
    let mut acc = Acceptor {
        opts,
        human: !opts.output.json && !opts.output.json_stream,
        port: listener.local_addr()?.port(),
        out,
        shutdown,
        cookie_tx,
        wake: Arc::new(Wake::new()?),
        active: Vec::new(),
        pending: Arc::new(Mutex::new(Vec::new())),
        next_pending: 0,
        cooling: HashMap::new(),
        udp_setup: Arc::new(Mutex::new(())),
        test_no: 1,
        held: Vec::new(),
    };
    acc.banner();
    let mut listener = listener;
    let mut idle_since = Instant::now();
    let mut accept_errors = linerate_run::Throttle::default();
    loop {
        if acc.shutdown.load(Ordering::Relaxed) {
            acc.join_all();
            return Ok(());
        }
        if !acc.active.is_empty() || acc.pending.lock().is_ok_and(|l| !l.is_empty()) {
            idle_since = Instant::now();
        } else if let Some(limit) = opts.idle_timeout
            && idle_since.elapsed() >= limit
        {
            if opts.one_off {
                return Ok(());
            }
            // iperf3's idle restart: a fresh listening socket, in case
            // the old one got stuck.
            let addr = listener.local_addr()?;
            drop(listener);
            listener = net::tcp_listener(addr, opts.family, opts.bind_dev.as_deref(), opts.mptcp)?;
            listener.set_nonblocking(true)?;
            idle_since = Instant::now();
            acc.banner();
        }
        // A connection, a cookie read or a test that ended wakes the loop
        // at once (it looked every 5 ms: up to 5 ms more for each of a
        // test's connections); the 5 ms bound the looks at the shutdown
        // flag and the idle timer.
        acc.wake.wait(&listener, Duration::from_millis(5));
        match listener.accept() {
            Ok((s, peer)) => {
                idle_since = Instant::now();
                acc.on_connection(s, peer);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            // Out of descriptors (EMFILE) or the like: the listener stays
            // readable, so the loop backs off, and says so once a second.
            Err(e) => {
                if let Some(n) = accept_errors.note(Instant::now()) {
                    let times = if n == 1 {
                        String::new()
                    } else {
                        format!(" ({n} times in the last second)")
                    };
                    say(
                        &acc.out,
                        &format!("linerate: accept failed: {e}{times}; going on\n"),
                    );
                }
                std::thread::sleep(ACCEPT_BACKOFF);
            }
        }
        while let Ok(c) = cookie_rx.try_recv() {
            acc.on_cookie(c);
        }
        let finished = acc.reap();
        if finished > 0 && opts.one_off {
            // The one test is done: those waiting for its place are busy.
            for h in std::mem::take(&mut acc.held) {
                acc.deny_busy(h.ctrl, h.peer);
            }
            acc.join_all();
            return Ok(());
        }
        acc.place_held();
        if finished > 0 {
            acc.test_no += finished;
            if acc.active.is_empty() {
                acc.banner();
            }
        }
    }
}

/// How long the accept loop pauses after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// Connections whose cookie is still being read, at most.
const PENDING_MAX: usize = 64;

/// What wakes the accept loop besides a connection: a datagram on a pair
/// of sockets, one rung by whoever has news for the loop.
struct Wake {
    rx: std::os::unix::net::UnixDatagram,
    tx: std::os::unix::net::UnixDatagram,
}

impl Wake {
    fn new() -> std::io::Result<Self> {
        let (rx, tx) = std::os::unix::net::UnixDatagram::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok(Self { rx, tx })
    }

    /// Wakes the loop (a full queue already will).
    fn ring(&self) {
        let _ = self.tx.send(&[0]);
    }

    /// Waits up to `d` for a connection on `listener` or a ring; takes the
    /// rings.
    fn wait(&self, listener: &TcpListener, d: Duration) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let ms = u16::try_from(d.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.rx.as_fd(), PollFlags::POLLIN),
        ];
        let _ = poll(&mut fds, PollTimeout::from(ms));
        let mut b = [0u8; 64];
        while self.rx.recv(&mut b).is_ok() {}
    }
}

/// A connection whose cookie is still being read: its source, and a handle
/// to shut it when it is shed.
struct Pending {
    id: u64,
    source: IpAddr,
    stream: TcpStream,
    shed: Arc<AtomicBool>,
}

/// Reads a cookie within `limit` for all of it (a peer trickling a byte at
/// a time gains nothing).
fn read_cookie(s: &mut TcpStream, limit: Duration) -> std::io::Result<Cookie> {
    let deadline = Instant::now() + limit;
    let mut c = [0u8; COOKIE_LEN];
    let mut got = 0;
    while got < COOKIE_LEN {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                format!(
                    "{got} of {COOKIE_LEN} cookie bytes in {} ms",
                    limit.as_millis()
                ),
            ));
        }
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        match s.read(&mut c[got..]) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(c)
}

fn check_limits(p: &Params, l: &Limits) -> Result<(), IErr> {
    // A test that ends by amount (no -t) is accepted and cut at the limit.
    if let Some(max) = l.max_duration_s
        && p.time_s > 0
        && p.time_s.saturating_add(p.omit_s) > max
    {
        return Err(IErr::MAX_DURATION);
    }
    if let Some(max) = l.max_streams
        && p.stream_count() as u32 > max
    {
        return Err(IErr::NUM_STREAMS);
    }
    if let Some(max) = l.max_rate_bps
        && (p.bandwidth_bps == 0 || p.bandwidth_bps.saturating_mul(p.stream_count() as u64) > max)
    {
        return Err(IErr::TOTAL_RATE);
    }
    Ok(())
}
