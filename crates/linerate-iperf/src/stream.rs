//! Data-stream workers: one thread per stream, moving bytes as fast as
//! allowed and publishing counters for the reporter to sample.
//!
//! Counters are single-writer: the worker stores, the reporter loads.
//! UDP receivers publish their accounting once per received batch, not per
//! datagram.

use linerate_backend::udp_batch::{BATCH_MAX, Batch, GRO_BUF_BYTES, GroBatch};
use linerate_backend::{clock, sockopt};
use linerate_iperf_proto::udp::{self, UdpReceiver};
use linerate_traffic::pacing::{Departures, wait_until};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a blocked worker looks at its stop flag.
pub const POLL: Duration = Duration::from_millis(50);
/// How often a receiver looks at its flags from the test's scheduled end on.
const END_LOOK: Duration = Duration::from_millis(2);
/// A draining receiver stops after this long without data (timed by
/// poll(2) to the millisecond). Each millisecond here is a millisecond
/// more of every test against a client that does not close its streams
/// at the end (iperf3's), but what the peer sent before TEST_END can sit
/// in the kernel's backlog behind a busy CPU: at 5 ms a loaded CI host
/// counted a UDP datagram of a concurrent test as lost. 20 ms, as before.
const DRAIN_IDLE: Duration = Duration::from_millis(20);
/// Longest drain, for a peer that keeps sending after TEST_END.
pub const DRAIN_MAX: Duration = Duration::from_secs(1);

/// A UDP receiver's published figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpRxCounters {
    pub packet_count: u64,
    pub cnt_error: u64,
    pub out_of_order: u64,
    pub jitter_s: f64,
    pub duplicates: u64,
    pub late: u64,
    pub lost_exact: u64,
}

/// What the reporter reads of a stream.
#[derive(Debug)]
pub struct StreamShared {
    pub id: u32,
    pub sender: bool,
    pub socket: i32,
    /// Bytes moved (sent as accepted by the kernel, or received).
    pub bytes: AtomicU64,
    /// TCP writes/reads, or UDP datagrams sent.
    pub blocks: AtomicU64,
    /// Send calls the kernel refused for lack of buffer (EAGAIN/ENOBUFS).
    pub send_errors: AtomicU64,
    pub udp_rx: Mutex<UdpRxCounters>,
    /// Set by the reporter when the omit period ends (UDP jitter restarts).
    pub omit_over: AtomicBool,
    pub stop: AtomicBool,
    /// Receivers: read what is already queued, then stop (at the latest at
    /// this CLOCK_MONOTONIC time, ns). 0 = not draining.
    pub drain_until_ns: AtomicU64,
    /// A sender's scheduled end (monotonic ns; 0: none, it ends when told).
    pub end_ns: AtomicU64,
    /// A receiver: the test's scheduled end (monotonic ns; 0: none), from
    /// which on it looks at its flags every [`END_LOOK`].
    pub expected_end_ns: AtomicU64,
    /// A receiver: when it last took data (monotonic ns; 0: never).
    pub last_rx_ns: AtomicU64,
    pub finished: AtomicBool,
    pub error: Mutex<Option<String>>,
    /// Paced senders: gaps between send calls (published when the sender stops).
    pub departures: Mutex<Option<Departures>>,
    /// A handle on the TCP socket for TCP_INFO.
    pub tcp: Option<TcpStream>,
    /// Fired when receivers are told to drain or stop: a receiver waiting
    /// for data wakes at once (a read timeout kept the end of the test
    /// waiting up to [`POLL`]).
    pub wake: Option<Arc<Wake>>,
    /// Fired when draining receivers are told to stop.
    pub stop_wake: Option<Arc<Wake>>,
}

/// Wakes the receivers of a test that wait for their socket: fired once,
/// it stays fired (the read end of a pair whose other end was shut is
/// readable for ever), so every receiver sees it, however late it looks.
#[derive(Debug)]
pub struct Wake {
    rx: std::os::unix::net::UnixStream,
    tx: std::os::unix::net::UnixStream,
}

impl Wake {
    pub fn new() -> std::io::Result<Self> {
        let (rx, tx) = std::os::unix::net::UnixStream::pair()?;
        Ok(Self { rx, tx })
    }

    /// Every receiver waiting on this (or that waits later) wakes.
    pub fn fire(&self) {
        let _ = self.tx.shutdown(std::net::Shutdown::Both);
    }
}

/// What a receiver's wait for data ended with.
#[derive(Debug, PartialEq, Eq)]
enum Waited {
    /// The socket is readable (past its receive low-water mark).
    Data,
    /// The wake fired.
    Woken,
    /// Neither, within the wait.
    Nothing,
}

/// Waits up to `d` for `sock` to be readable (honouring its receive
/// low-water mark), or for `wake` to fire. Without `wake`, a plain wait
/// for the socket.
fn wait_data(sock: &impl std::os::fd::AsFd, wake: Option<&Wake>, d: Duration) -> Waited {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let ms = u16::try_from(d.as_millis().max(1)).unwrap_or(u16::MAX);
    let mut fds = vec![PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    if let Some(w) = wake {
        fds.push(PollFd::new(w.rx.as_fd(), PollFlags::POLLIN));
    }
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) if n > 0 => {
            if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                Waited::Data
            } else {
                Waited::Woken
            }
        }
        _ => Waited::Nothing,
    }
}

impl StreamShared {
    pub fn new(id: u32, sender: bool, socket: i32, tcp: Option<TcpStream>) -> Self {
        Self {
            id,
            sender,
            socket,
            bytes: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            udp_rx: Mutex::new(UdpRxCounters::default()),
            omit_over: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            drain_until_ns: AtomicU64::new(0),
            end_ns: AtomicU64::new(0),
            expected_end_ns: AtomicU64::new(0),
            last_rx_ns: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            error: Mutex::new(None),
            departures: Mutex::new(None),
            tcp,
            wake: None,
            stop_wake: None,
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        // Single writer: a plain load + store, no locked instruction.
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    pub(crate) fn fail(&self, msg: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(msg);
        }
    }

    fn publish(&self, d: Departures) {
        if let Ok(mut g) = self.departures.lock() {
            *g = Some(d);
        }
    }

    /// Told to stop, or (a sender) past the test's scheduled end: senders
    /// stop themselves on time, however late the control loop gets to it
    /// (an overloaded host starved it for seconds).
    fn stopped(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        let end = self.end_ns.load(Ordering::Relaxed);
        end != 0 && clock::monotonic_ns() >= end
    }

    /// A sender stops by itself at `end` (the start plus time and omit).
    pub(crate) fn stop_at(&self, end: Instant) {
        let now = Instant::now();
        let ns = clock::monotonic_ns() + end.saturating_duration_since(now).as_nanos() as u64;
        self.end_ns.store(ns.max(1), Ordering::Relaxed);
    }

    /// A receiver: the test is scheduled to end at `end`.
    pub(crate) fn expect_end(&self, end: Instant) {
        let now = Instant::now();
        let ns = clock::monotonic_ns() + end.saturating_duration_since(now).as_nanos() as u64;
        self.expected_end_ns.store(ns.max(1), Ordering::Relaxed);
    }

    /// Whether a receiver's next read of [`POLL`] would end past the
    /// scheduled end.
    fn near_expected_end(&self) -> bool {
        let end = self.expected_end_ns.load(Ordering::Relaxed);
        end != 0 && clock::monotonic_ns() + POLL.as_nanos() as u64 >= end
    }

    /// How long a sender waiting for its next due time may sleep: until
    /// its scheduled end, and [`POLL`] at most (a paced sender slept to its
    /// next block, 250 ms at UDP's default rate, and the end of the test
    /// waited for it).
    fn nap(&self, want: Duration) -> Duration {
        let end = self.end_ns.load(Ordering::Relaxed);
        let to_end = if end == 0 {
            POLL
        } else {
            Duration::from_nanos(end.saturating_sub(clock::monotonic_ns()))
        };
        want.min(POLL).min(to_end)
    }

    /// A receiver told to drain ends at the first read that finds nothing
    /// queued, or at the drain deadline.
    fn drained(&self, idle: bool) -> bool {
        let until = self.drain_until_ns.load(Ordering::Relaxed);
        until != 0 && (idle || clock::monotonic_ns() >= until)
    }
}

/// How a sender paces itself, and how much its side may still send.
#[derive(Debug, Clone)]
pub struct Pacing {
    /// Target bit/s of payload; 0 = as fast as possible.
    pub rate_bps: u64,
    /// Blocks per pacing decision (iperf3's `-b rate/N`).
    pub burst: u32,
    /// `-n` / `-k`, shared by every sending stream of this side.
    pub budget: Arc<Budget>,
}

/// What this side may still send for `-n` bytes or `-k` blocks, counted
/// over all its sending streams after the omit period (as iperf3 counts
/// them). Senders take from it before every write, so the side stops at
/// exactly the amount (iperf3 checks between writes and overshoots by up
/// to a block per stream; a control loop that checks every few ms
/// overshoots by megabytes).
#[derive(Debug)]
pub struct Budget {
    /// TCP: bytes (`-k` blocks of the block size); UDP: datagrams (`-n`
    /// rounded up to whole datagrams); `None`: no limit.
    limit: Option<u64>,
    left: AtomicU64,
}

impl Budget {
    /// The budget of a test with parameters `p` (UDP when `udp`).
    pub fn new(p: &linerate_iperf_proto::Params, udp: bool) -> Self {
        let len = u64::from(p.len.max(1));
        let limit = match (p.num_bytes, p.block_count, udp) {
            (0, 0, _) => None,
            (n, 0, false) => Some(n),
            (n, 0, true) => Some(n.div_ceil(len)),
            (_, k, false) => Some(k * len),
            (_, k, true) => Some(k),
        };
        // During omit nothing counts: the amount starts when omit ends.
        let left = if p.omit_s > 0 {
            u64::MAX
        } else {
            limit.unwrap_or(u64::MAX)
        };
        Budget {
            limit,
            left: AtomicU64::new(left),
        }
    }

    /// The omit period ended: the amount counts from now.
    pub fn restart(&self) {
        if let Some(l) = self.limit {
            self.left.store(l, Ordering::Relaxed);
        }
    }

    /// Takes up to `want` units (TCP bytes, UDP datagrams); returns how many
    /// may go (0: this side has sent its amount).
    pub fn take(&self, want: u64) -> u64 {
        if self.limit.is_none() {
            return want;
        }
        let prev = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                Some(l - l.min(want))
            })
            .unwrap_or(0);
        prev.min(want)
    }

    /// Returns units taken and not sent.
    pub fn give_back(&self, units: u64) {
        if self.limit.is_some() && units > 0 {
            self.left.fetch_add(units, Ordering::Relaxed);
        }
    }
}

/// When the next block may go so that the average stays at the rate.
fn due(start: Instant, sent_bytes: u64, pacing: &Pacing) -> Option<Instant> {
    (pacing.rate_bps > 0)
        .then(|| start + Duration::from_secs_f64(sent_bytes as f64 * 8.0 / pacing.rate_bps as f64))
}

/// The payload iperf3 sends: random bytes, or `0123456789…` repeated.
pub fn payload(len: usize, repeating: bool) -> Vec<u8> {
    if repeating {
        return (0..len).map(|i| b'0' + (i % 10) as u8).collect();
    }
    let mut v = vec![0u8; len];
    let mut x: u64 = clock::monotonic_ns() | 1;
    for b in &mut v {
        // xorshift: content does not matter, only that it is not all zeros.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v
}

/// One TCP sender: the group worker with a group of one.
pub fn tcp_send(s: TcpStream, sh: Arc<StreamShared>, buf: Vec<u8>, pacing: Pacing, zerocopy: bool) {
    tcp_send_group(vec![(s, sh)], buf, pacing, zerocopy);
}

/// One TCP stream of a sending group.
struct TcpSender {
    sock: TcpStream,
    sh: Arc<StreamShared>,
    sent: u64,
    dep: Departures,
    zc: bool,
    calls: u64,
    full: bool,
    done: bool,
    /// Bytes of the block taken from the budget not written yet: a stream
    /// writes whole blocks (an iperf3 3.17+ receiver reads whole blocks and
    /// waits for the rest of a short one).
    owed: usize,
}

impl TcpSender {
    /// Takes a block from the budget when the last one is written, and
    /// writes what it can of it; whether anything was written.
    #[inline]
    fn write_owed(&mut self, buf: &[u8], pacing: &Pacing) -> bool {
        if self.owed == 0 {
            self.owed = pacing.budget.take(buf.len() as u64) as usize;
            if self.owed == 0 {
                // This side has sent its -n / -k amount.
                self.done = true;
                return false;
            }
        }
        let r = if self.zc {
            self.calls += 1;
            if self.calls.is_multiple_of(64) {
                linerate_backend::zerocopy::drain_completions(&self.sock);
            }
            linerate_backend::zerocopy::send(&self.sock, &buf[..self.owed])
        } else {
            (&self.sock).write(&buf[..self.owed])
        };
        match r {
            Ok(n) => {
                self.owed -= n;
                self.full = false;
                self.sent += n as u64;
                if pacing.rate_bps > 0 {
                    self.dep.record(Instant::now(), 1);
                }
                StreamShared::add(&self.sh.bytes, n as u64);
                StreamShared::add(&self.sh.blocks, 1);
                return true;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => self.full = true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if self.zc && e.raw_os_error() == Some(nix::errno::Errno::ENOBUFS as i32) => {
                linerate_backend::zerocopy::drain_completions(&self.sock);
            }
            Err(e) => {
                if !self.sh.stopped() {
                    self.sh
                        .fail(format!("unable to write to stream socket: {e}"));
                }
                pacing.budget.give_back(self.owed as u64);
                self.owed = 0;
                self.done = true;
            }
        }
        false
    }
}

/// TCP senders on one worker thread (one stream, or streams that share a
/// CPU): non-blocking writes round-robin, poll() when every socket is full,
/// as iperf3's single loop does, instead of threads taking turns on a core.
pub fn tcp_send_group(
    streams: Vec<(TcpStream, Arc<StreamShared>)>,
    buf: Vec<u8>,
    pacing: Pacing,
    zerocopy: bool,
) {
    use nix::poll::{PollFd, PollFlags, poll};
    use std::os::fd::AsFd;
    let start = Instant::now();
    let mut ss: Vec<TcpSender> = streams
        .into_iter()
        .map(|(sock, sh)| {
            let _ = sock.set_nonblocking(true);
            let zc = zerocopy && linerate_backend::zerocopy::enable(&sock).is_ok();
            TcpSender {
                sock,
                sh,
                sent: 0,
                dep: Departures::default(),
                zc,
                calls: 0,
                full: false,
                done: false,
                owed: 0,
            }
        })
        .collect();
    while ss.iter().any(|s| !s.done) {
        let mut next_due: Option<Instant> = None;
        let mut wrote = false;
        for s in ss.iter_mut().filter(|s| !s.done) {
            if s.sh.stopped() {
                s.done = true;
                continue;
            }
            if let Some(t) = due(start, s.sent, &pacing)
                && t > Instant::now()
            {
                next_due = Some(next_due.map_or(t, |n: Instant| n.min(t)));
                continue;
            }
            wrote |= s.write_owed(&buf, &pacing);
        }
        // Every stream ended (its scheduled end came): out at once (this
        // slept a whole POLL first, and the end of every test waited on it).
        if wrote || ss.iter().all(|s| s.done) {
            continue;
        }
        // Nothing could be written: wait for space or for the next due time.
        let wait = next_due.map_or(POLL, |t| t.saturating_duration_since(Instant::now()));
        let wait = ss
            .iter()
            .filter(|s| !s.done)
            .map(|s| s.sh.nap(wait))
            .min()
            .unwrap_or(wait);
        let mut fds: Vec<PollFd> = ss
            .iter()
            .filter(|s| !s.done && s.full)
            .map(|s| PollFd::new(s.sock.as_fd(), PollFlags::POLLOUT))
            .collect();
        if fds.is_empty() {
            std::thread::sleep(wait);
            continue;
        }
        let ms = u16::try_from(wait.as_millis().max(1)).unwrap_or(50);
        let _ = poll(&mut fds, ms);
    }
    for s in ss {
        if pacing.rate_bps > 0 {
            s.sh.publish(s.dep);
        }
        s.sh.finished.store(true, Ordering::Release);
    }
}

/// `-F` on a sending side: the file's bytes, read block by block, are the
/// payload (each stream reads the file from its start, as iperf3's); the
/// stream ends at the end of the file, the -n/-k budget, or the test's end.
pub fn tcp_send_file(
    mut s: TcpStream,
    sh: Arc<StreamShared>,
    path: &std::path::Path,
    len: usize,
    pacing: Pacing,
) {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            sh.fail(format!("unable to open -F file {}: {e}", path.display()));
            sh.finished.store(true, Ordering::Release);
            return;
        }
    };
    let _ = s.set_write_timeout(Some(POLL));
    let start = Instant::now();
    let mut buf = vec![0u8; len.max(1)];
    let (mut have, mut at, mut sent) = (0usize, 0usize, 0u64);
    let mut eof = false;
    while !sh.stopped() {
        if at == have {
            if eof {
                break;
            }
            let want = pacing.budget.take(buf.len() as u64) as usize;
            if want == 0 {
                break;
            }
            let n = match file.read(&mut buf[..want]) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => 0,
                Err(e) => {
                    sh.fail(format!("unable to read -F file {}: {e}", path.display()));
                    break;
                }
            };
            pacing.budget.give_back((want - n) as u64);
            if n == 0 {
                eof = true;
                continue;
            }
            (have, at) = (n, 0);
        }
        if let Some(t) = due(start, sent, &pacing) {
            let now = Instant::now();
            if t > now {
                std::thread::sleep(sh.nap(t - now));
                continue;
            }
        }
        match s.write(&buf[at..have]) {
            Ok(n) => {
                at += n;
                sent += n as u64;
                StreamShared::add(&sh.bytes, n as u64);
                StreamShared::add(&sh.blocks, 1);
            }
            Err(e) if idle_error(&e) => {}
            Err(e) => {
                if !sh.stopped() {
                    sh.fail(format!("unable to write to stream socket: {e}"));
                }
                break;
            }
        }
    }
    sh.finished.store(true, Ordering::Release);
}

/// Receives a TCP stream, counting; with `skip` the kernel discards the
/// data without copying it (MSG_TRUNC, `--skip-rx-copy`).
/// With `file` (`-F`) what arrives is written to it.
pub fn tcp_recv(
    mut s: TcpStream,
    sh: Arc<StreamShared>,
    len: usize,
    skip: bool,
    mut file: Option<std::fs::File>,
) {
    let _ = s.set_read_timeout(Some(POLL));
    let len = len.max(1);
    let mut buf = vec![0u8; len.max(LOWAT_BYTES)];
    let mut lowat = Lowat::new(clock::monotonic_ns());
    let mut draining = false;
    while !sh.stopped() {
        if !draining && sh.drain_until_ns.load(Ordering::Relaxed) != 0 {
            draining = true;
            let _ = s.set_read_timeout(Some(DRAIN_IDLE));
            // Whatever is left is read as it comes.
            if lowat.stop() {
                let _ = linerate_backend::sockopt::set_rcvlowat(&s, 1);
            }
        }
        // Wait for data (up to the mark) or for the test's end to wake us;
        // a draining receiver ends after DRAIN_IDLE without data.
        if !draining {
            match wait_data(&s, sh.wake.as_deref(), POLL) {
                Waited::Data => {}
                Waited::Woken => continue,
                Waited::Nothing => {
                    // Less than the mark came in a whole wait (the end of
                    // a -k/-n amount): the mark goes off, what is queued
                    // is read now (a wait honours the mark, a read at its
                    // timeout did not).
                    if lowat.stop() {
                        let _ = linerate_backend::sockopt::set_rcvlowat(&s, 1);
                    }
                    continue;
                }
            }
        }
        if draining {
            match wait_data(&s, sh.stop_wake.as_deref(), DRAIN_IDLE) {
                Waited::Data => {}
                Waited::Woken => continue,
                Waited::Nothing => break,
            }
        }
        // With the mark on, reads take up to the mark's worth at once.
        let want = if lowat.on { buf.len() } else { len };
        let got = if skip {
            linerate_backend::sockopt::recv_discard(&s, want)
        } else {
            s.read(&mut buf[..want])
        };
        let now = clock::monotonic_ns();
        if !draining && let Some(on) = lowat.after_read(*got.as_ref().unwrap_or(&0) as u64, now) {
            let mark = if on { LOWAT_BYTES as u32 } else { 1 };
            let _ = linerate_backend::sockopt::set_rcvlowat(&s, mark);
        }
        match got {
            Ok(0) => break,
            Ok(n) => {
                if let Some(f) = file.as_mut()
                    && let Err(e) = f.write_all(&buf[..n])
                {
                    sh.fail(format!("unable to write to the -F file: {e}"));
                    break;
                }
                StreamShared::add(&sh.bytes, n as u64);
                StreamShared::add(&sh.blocks, 1);
                sh.last_rx_ns.store(now, Ordering::Relaxed);
                if sh.drained(false) {
                    break;
                }
            }
            Err(e) if idle_error(&e) => {
                if sh.drained(draining) {
                    break;
                }
            }
            Err(e) => {
                if !sh.stopped() && !draining {
                    sh.fail(format!("unable to read from stream socket: {e}"));
                }
                break;
            }
        }
    }
    sh.finished.store(true, Ordering::Release);
}

/// The receive low-water mark of a fast TCP stream. A reader woken for
/// every arriving segment costs the CPU that processes the stream's packets
/// a wake-up each time (on veth: the sender's CPU; on a NIC: the receive
/// queue's): iperf3 3.12's server, slower per read, was woken less often
/// and let its sender run 25% faster on the rig. With SO_RCVLOWAT the
/// reader sleeps until this much is queued.
const LOWAT_BYTES: usize = 256 * 1024;
/// A stream turns the mark on while it moves more than this per
/// [`LOWAT_PERIOD_NS`] (about 400 Mbit/s: the mark then holds data back
/// for at most ~5 ms) and off when it falls below a quarter of it; a slow
/// stream is read as it arrives (a read's timeout bounds the wait either
/// way).
const LOWAT_FROM: u64 = 5 << 20;
const LOWAT_PERIOD_NS: u64 = 100_000_000;

/// When a TCP receiver turns its low-water mark on and off.
#[derive(Debug)]
struct Lowat {
    on: bool,
    since_ns: u64,
    bytes: u64,
}

impl Lowat {
    fn new(now_ns: u64) -> Self {
        Self {
            on: false,
            since_ns: now_ns,
            bytes: 0,
        }
    }

    /// Turns the mark off (for good at the end of the test; a stream that
    /// is fast again turns it on again); whether it was on.
    fn stop(&mut self) -> bool {
        std::mem::replace(&mut self.on, false)
    }

    /// After a read of `n` bytes: `Some(on)` when the mark should change.
    fn after_read(&mut self, n: u64, now_ns: u64) -> Option<bool> {
        self.bytes += n;
        if now_ns.saturating_sub(self.since_ns) < LOWAT_PERIOD_NS {
            return None;
        }
        let fast = self.bytes >= LOWAT_FROM;
        let slow = self.bytes < LOWAT_FROM / 4;
        self.since_ns = now_ns;
        self.bytes = 0;
        match (self.on, fast, slow) {
            (false, true, _) => {
                self.on = true;
                Some(true)
            }
            (true, _, true) => {
                self.on = false;
                Some(false)
            }
            _ => None,
        }
    }
}

/// A read or write that found nothing to do before its timeout.
fn idle_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Datagrams per GSO message at most: the kernel takes 128 segments per
/// send since Linux 6.14 (UDP_MAX_SEGMENTS; iperf3 3.21's `--gsro` sends
/// 128 of 18 bytes per call), 64 before, and 64 KiB on every version; a
/// kernel that refuses 128 gets [`GSO_SEGMENTS_OLD`].
const GSO_SEGMENTS_MAX: usize = 128;
/// UDP_MAX_SEGMENTS of the kernels before 6.14.
const GSO_SEGMENTS_OLD: usize = 64;
/// Messages per sendmmsg when each carries many GSO segments.
const GSO_MESSAGES: usize = 8;

/// Send buffers laid out for `segs` datagrams of `len` bytes per message.
struct TxBufs {
    segs: usize,
    msgs: Vec<Vec<u8>>,
}

impl TxBufs {
    fn new(template: &[u8], segs: usize, msgs: usize) -> Self {
        let one: Vec<u8> = template
            .iter()
            .copied()
            .cycle()
            .take(template.len() * segs)
            .collect();
        Self {
            segs,
            msgs: vec![one; msgs],
        }
    }

    fn capacity(&self) -> usize {
        self.segs * self.msgs.len()
    }
}

pub fn udp_send(
    s: UdpSocket,
    sh: Arc<StreamShared>,
    template: Vec<u8>,
    pacing: Pacing,
    c64: bool,
    gso: bool,
) {
    let len = template.len();
    let gso_segs = (65507 / len.max(1)).min(GSO_SEGMENTS_MAX);
    let use_gso = gso
        && gso_segs > 1
        && u16::try_from(len).is_ok_and(|l| sockopt::set_udp_segment(&s, l).is_ok());
    let mut tx = if use_gso {
        TxBufs::new(&template, gso_segs, GSO_MESSAGES)
    } else {
        TxBufs::new(&template, 1, BATCH_MAX)
    };
    let mut batch = Batch::new();
    let start = Instant::now();
    let mut seq: u64 = 1;
    let mut sent_bytes = 0u64;
    let burst = pacing.burst.max(1) as usize;
    let mut dep = Departures::default();
    let _ = s.set_write_timeout(Some(POLL));
    while !sh.stopped() {
        let cap = tx.capacity();
        let Some(n) = udp_how_many(&sh, &pacing, (start, sent_bytes), len, burst.min(cap), cap)
        else {
            continue;
        };
        let n = pacing.budget.take(n as u64) as usize;
        if n == 0 {
            // This side has sent its -n / -k amount.
            break;
        }
        stamp_headers(&mut tx, n, len, seq, c64);
        let full = n / tx.segs;
        let rest = n % tx.segs;
        // The messages' slices on the stack: nothing allocated per send.
        let mut slices: [&[u8]; BATCH_MAX] = [&[]; BATCH_MAX];
        for (r, m) in slices.iter_mut().zip(&tx.msgs[..full]) {
            *r = m;
        }
        let mut m = full;
        if rest > 0 {
            slices[full] = &tx.msgs[full][..rest * len];
            m += 1;
        }
        let refs = &slices[..m];
        match batch.send(&s, refs) {
            Ok(k) => {
                let dgrams: usize = refs[..k].iter().map(|r| r.len() / len).sum();
                pacing.budget.give_back((n - dgrams) as u64);
                if pacing.rate_bps > 0 {
                    dep.record(Instant::now(), dgrams as u64);
                }
                seq += dgrams as u64;
                sent_bytes += (dgrams * len) as u64;
                StreamShared::add(&sh.bytes, (dgrams * len) as u64);
                StreamShared::add(&sh.blocks, dgrams as u64);
            }
            Err(e)
                if idle_error(&e)
                    || e.raw_os_error() == Some(nix::errno::Errno::ENOBUFS as i32) =>
            {
                pacing.budget.give_back(n as u64);
                StreamShared::add(&sh.send_errors, 1);
                std::thread::yield_now();
            }
            // The peer's socket is gone (ICMP unreachable): normal at the end.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                pacing.budget.give_back(n as u64);
                std::thread::sleep(Duration::from_millis(1));
            }
            // A kernel that takes 64 segments a send, not 128.
            Err(e) if tx.segs > GSO_SEGMENTS_OLD && e.raw_os_error() == Some(22) => {
                pacing.budget.give_back(n as u64);
                tx = TxBufs::new(&template, GSO_SEGMENTS_OLD, GSO_MESSAGES);
            }
            // A device or path that cannot take GSO: fall back to one datagram per message.
            Err(e) if tx.segs > 1 && matches!(e.raw_os_error(), Some(5 | 22 | 95)) => {
                pacing.budget.give_back(n as u64);
                let _ = sockopt::set_udp_segment(&s, 0);
                tx = TxBufs::new(&template, 1, BATCH_MAX);
            }
            Err(e) => {
                if !sh.stopped() {
                    sh.fail(format!("unable to write to stream socket: {e}"));
                }
                break;
            }
        }
    }
    if pacing.rate_bps > 0 {
        sh.publish(dep);
    }
    sh.finished.store(true, Ordering::Release);
}

/// How many datagrams a UDP sender hands the kernel now (`burst` at the
/// least, `cap` at most); `None` when it napped towards its next
/// departure and looks at its flags first (the stop flag every POLL).
fn udp_how_many(
    sh: &StreamShared,
    pacing: &Pacing,
    (start, sent_bytes): (Instant, u64),
    len: usize,
    burst: usize,
    cap: usize,
) -> Option<usize> {
    if pacing.rate_bps == 0 {
        return Some(cap);
    }
    let allowed = (pacing.rate_bps as f64 * start.elapsed().as_secs_f64() / 8.0) as u64;
    if allowed >= sent_bytes + len as u64 {
        return Some((((allowed - sent_bytes) / len as u64) as usize).clamp(burst, cap));
    }
    if let Some(t) = due(start, sent_bytes, pacing) {
        // Not past the scheduled end.
        let now = Instant::now();
        let by = now + sh.nap(t.saturating_duration_since(now));
        wait_until(by, Duration::from_micros(100));
        if by < t {
            return None;
        }
    }
    Some(burst)
}

/// Writes the headers of the next `n` datagrams (sequence numbers from
/// `seq`, one send time) into the send buffers.
fn stamp_headers(tx: &mut TxBufs, n: usize, len: usize, seq: u64, c64: bool) {
    let (sec, nsec) = clock::monotonic();
    for d in 0..n {
        let (m, k) = (d / tx.segs, d % tx.segs);
        udp::write_header(
            &mut tx.msgs[m][k * len..],
            sec as u32,
            nsec / 1000,
            seq + d as u64,
            c64,
        );
    }
}

pub fn udp_recv(s: UdpSocket, sh: Arc<StreamShared>, len: usize, c64: bool, skip: bool) {
    let _ = s.set_read_timeout(Some(POLL));
    let (mut batch, mut store) = udp_rx_buffers(&s, len, c64, skip);
    let mut lens = [0usize; BATCH_MAX];
    let mut segs = [0usize; BATCH_MAX];
    let mut rx = UdpReceiver::default();
    let mut draining = false;
    let mut near_end = false;
    while !sh.stopped() {
        if !draining && sh.drain_until_ns.load(Ordering::Relaxed) != 0 {
            draining = true;
        }
        near_end = near_end || sh.near_expected_end();
        match udp_rx_wait(&s, &sh, draining, near_end) {
            Waited::Data => {}
            Waited::Woken => continue,
            Waited::Nothing => break,
        }
        if sh.drained(false) {
            break;
        }
        match batch.recv(&s, &mut store, &mut lens, &mut segs) {
            Ok(n) => {
                let got = UdpBatch {
                    store: &store,
                    lens: &lens[..n],
                    segs: &segs[..n],
                };
                count_udp_batch(&sh, &mut rx, &got, c64, skip);
            }
            Err(e) if idle_error(&e) => {
                if sh.drained(draining) {
                    break;
                }
            }
            // A reverse-mode peer that went away shows as refused; keep listening until stopped.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                if draining {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => {
                if !sh.stopped() {
                    sh.fail(format!("unable to read from stream socket: {e}"));
                }
                break;
            }
        }
    }
    sh.finished.store(true, Ordering::Release);
}

/// A UDP receiver's batch and buffers. With UDP GRO the kernel hands over
/// up to 64 KiB of one flow's datagrams per buffer; without it, one
/// datagram per buffer. With `skip` (--skip-rx-copy) only each datagram's
/// header is copied.
fn udp_rx_buffers(s: &UdpSocket, len: usize, c64: bool, skip: bool) -> (GroBatch, Vec<Vec<u8>>) {
    let gro = !skip && GroBatch::enable(s).is_ok();
    let (count, size) = if gro {
        (16, GRO_BUF_BYTES)
    } else if skip {
        (BATCH_MAX, udp::header_len(c64))
    } else {
        (BATCH_MAX, len.max(1))
    };
    let store = (0..count).map(|_| vec![0u8; size]).collect();
    let batch = if skip {
        GroBatch::truncating()
    } else {
        GroBatch::new()
    };
    (batch, store)
}

/// Whether a UDP receiver reads now (`Data`), looks at its flags again
/// (`Woken`) or has drained (`Nothing`). From the scheduled end on, the
/// wait for data ends soon to look at the flags (a read of POLL kept the
/// end of the test waiting for it), and a draining receiver ends after
/// DRAIN_IDLE without data, both timed by poll(2) to the millisecond (a
/// read's timeout goes by the kernel's tick); before the end, reads block
/// as long as POLL (a wait on a wake as well cost the overloaded host its
/// control loop's time).
fn udp_rx_wait(s: &UdpSocket, sh: &StreamShared, draining: bool, near_end: bool) -> Waited {
    if draining {
        wait_data(s, sh.stop_wake.as_deref(), DRAIN_IDLE)
    } else if near_end && wait_data(s, None, END_LOOK) != Waited::Data {
        Waited::Woken
    } else {
        Waited::Data
    }
}

/// One received batch: the buffers, each one's length and GRO segment
/// size.
struct UdpBatch<'a> {
    store: &'a [Vec<u8>],
    lens: &'a [usize],
    segs: &'a [usize],
}

/// Counts a received batch into the receiver's accounting and the
/// stream's shared counters.
fn count_udp_batch(
    sh: &StreamShared,
    rx: &mut UdpReceiver,
    got: &UdpBatch<'_>,
    c64: bool,
    skip: bool,
) {
    if sh.omit_over.swap(false, Ordering::Relaxed) {
        rx.reset_after_omit();
    }
    let (sec, nsec) = clock::monotonic();
    let arrival = sec as f64 + f64::from(nsec / 1000) / 1e6;
    let mut bytes = 0u64;
    let mut datagrams = 0u64;
    let mut take = |head: &[u8], whole: usize| {
        // A repeated hello (4 bytes) or other runt is not a datagram of
        // the test.
        if let Some((ts, tus, seq)) = udp::read_header(head, c64) {
            datagrams += 1;
            let sent = f64::from(ts) + f64::from(tus) / 1e6;
            rx.on_datagram(seq, whole, sent, arrival);
            bytes += whole as u64;
        }
    };
    for (i, &len) in got.lens.iter().enumerate() {
        let buf = &got.store[i];
        if skip {
            // Truncated: the buffer holds the header, `len` is the
            // datagram's whole length.
            take(&buf[..len.min(buf.len())], len);
            continue;
        }
        for d in buf[..len].chunks(got.segs[i].max(1)) {
            take(d, d.len());
        }
    }
    StreamShared::add(&sh.bytes, bytes);
    StreamShared::add(&sh.blocks, datagrams);
    sh.last_rx_ns
        .store(clock::monotonic_ns(), Ordering::Relaxed);
    if let Ok(mut c) = sh.udp_rx.lock() {
        *c = UdpRxCounters {
            packet_count: rx.packet_count,
            cnt_error: rx.cnt_error,
            out_of_order: rx.out_of_order,
            jitter_s: rx.jitter_s,
            duplicates: rx.duplicates,
            late: rx.late,
            lost_exact: rx.lost_exact(),
        };
    }
}

/// TCP_INFO of a stream, if it is TCP.
pub fn tcp_info(sh: &StreamShared) -> Option<sockopt::TcpInfo> {
    sh.tcp.as_ref().and_then(|t| sockopt::tcp_info(t).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_iperf_proto::Params;

    fn params(n: u64, k: u64, len: u32, omit: u32) -> Params {
        Params {
            num_bytes: n,
            block_count: k,
            len,
            omit_s: omit,
            ..Params::default()
        }
    }

    #[test]
    fn a_tcp_byte_budget_ends_at_exactly_n_with_a_short_last_write() {
        let b = Budget::new(&params(300, 0, 128, 0), false);
        assert_eq!(b.take(128), 128);
        assert_eq!(b.take(128), 128);
        assert_eq!(b.take(128), 44, "the last write is cut to what is left");
        assert_eq!(b.take(128), 0);
        // A write that took 44 and wrote 10 gives 34 back.
        b.give_back(34);
        assert_eq!(b.take(128), 34);
    }

    #[test]
    fn blocks_and_udp_bytes_count_whole_units() {
        // -k 3 over TCP: 3 blocks of the block size, in bytes.
        let b = Budget::new(&params(0, 3, 100, 0), false);
        assert_eq!((b.take(250), b.take(250), b.take(1)), (250, 50, 0));
        // UDP -n 1000 with 300-byte datagrams: 4 datagrams.
        let b = Budget::new(&params(1000, 0, 300, 0), true);
        assert_eq!((b.take(3), b.take(3), b.take(3)), (3, 1, 0));
        // UDP -k 5: 5 datagrams.
        let b = Budget::new(&params(0, 5, 300, 0), true);
        assert_eq!((b.take(8), b.take(8)), (5, 0));
        // No limit.
        assert_eq!(Budget::new(&params(0, 0, 1, 0), true).take(99), 99);
    }

    #[test]
    fn the_low_water_mark_follows_the_streams_rate() {
        const P: u64 = LOWAT_PERIOD_NS;
        let mut l = Lowat::new(0);
        // Fast, but the period has not passed: no change yet.
        assert_eq!(l.after_read(LOWAT_FROM, P / 2), None);
        assert_eq!(l.after_read(0, P), Some(true));
        assert!(l.on);
        // Between a quarter and the whole: stays on.
        assert_eq!(l.after_read(LOWAT_FROM / 2, 2 * P), None);
        // Below a quarter: off; a slow stream stays off.
        assert_eq!(l.after_read(LOWAT_FROM / 4 - 1, 3 * P), Some(false));
        assert_eq!(l.after_read(LOWAT_FROM - 1, 4 * P), None);
        assert!(!l.on);
        // The end of the test turns it off, once.
        assert_eq!(l.after_read(LOWAT_FROM, 5 * P), Some(true));
        assert!(l.stop());
        assert!(!l.stop());
    }

    #[test]
    fn omit_sends_freely_and_the_amount_counts_from_its_end() {
        let b = Budget::new(&params(100, 0, 64, 2), false);
        assert_eq!(b.take(1 << 30), 1 << 30);
        b.restart();
        assert_eq!((b.take(64), b.take(64), b.take(64)), (64, 36, 0));
    }
}
