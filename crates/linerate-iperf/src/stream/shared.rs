//! What the TCP and UDP workers share: the counters a reporter samples
//! (`StreamShared`), the receivers' wake-up, the sender's pacing and its
//! `-n`/`-k` budget, the payload.

use linerate_backend::{clock, sockopt};
use linerate_traffic::pacing::Departures;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a blocked worker looks at its stop flag.
pub const POLL: Duration = Duration::from_millis(50);
/// How often a receiver looks at its flags from the test's scheduled end on.
pub(super) const END_LOOK: Duration = Duration::from_millis(2);
/// A draining receiver stops after this long without data (timed by
/// poll(2) to the millisecond). Each millisecond here is a millisecond
/// more of every test against a client that does not close its streams
/// at the end (iperf3's), but what the peer sent before TEST_END can sit
/// in the kernel's backlog behind a busy CPU: at 5 ms a loaded CI host
/// counted a UDP datagram of a concurrent test as lost. 20 ms, as before.
pub(super) const DRAIN_IDLE: Duration = Duration::from_millis(20);
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
pub(super) enum Waited {
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
pub(super) fn wait_data(sock: &impl std::os::fd::AsFd, wake: Option<&Wake>, d: Duration) -> Waited {
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

    pub(super) fn add(counter: &AtomicU64, n: u64) {
        // Single writer: a plain load + store, no locked instruction.
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    pub(crate) fn fail(&self, msg: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(msg);
        }
    }

    pub(super) fn publish(&self, d: Departures) {
        if let Ok(mut g) = self.departures.lock() {
            *g = Some(d);
        }
    }

    /// Told to stop, or (a sender) past the test's scheduled end: senders
    /// stop themselves on time, however late the control loop gets to it
    /// (an overloaded host starved it for seconds).
    pub(super) fn stopped(&self) -> bool {
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
    pub(super) fn near_expected_end(&self) -> bool {
        let end = self.expected_end_ns.load(Ordering::Relaxed);
        end != 0 && clock::monotonic_ns() + POLL.as_nanos() as u64 >= end
    }

    /// How long a sender waiting for its next due time may sleep: until
    /// its scheduled end, and [`POLL`] at most (a paced sender slept to its
    /// next block, 250 ms at UDP's default rate, and the end of the test
    /// waited for it).
    pub(super) fn nap(&self, want: Duration) -> Duration {
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
    pub(super) fn drained(&self, idle: bool) -> bool {
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
pub(super) fn due(start: Instant, sent_bytes: u64, pacing: &Pacing) -> Option<Instant> {
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

/// A read or write that found nothing to do before its timeout.
pub(super) fn idle_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// TCP_INFO of a stream, if it is TCP.
pub fn tcp_info(sh: &StreamShared) -> Option<sockopt::TcpInfo> {
    sh.tcp.as_ref().and_then(|t| sockopt::tcp_info(t).ok())
}
