//! The rr server: one SO_REUSEPORT socket per worker on one port, each
//! worker pinned to its CPU, and (by default) a classic BPF program on the
//! group that picks the socket of the CPU a request was processed on. A
//! worker receives a batch with `recvmmsg(2)`, turns each request into its
//! response in the same buffer and answers the batch with one
//! `sendmmsg(2)`. Anything that is not a request is counted and dropped;
//! the server never stops for a client's bytes.

use crate::answer::publish;
pub use crate::answer::{Decision, ServerCounts, decide};
use crate::client::DATAGRAM_MAX;
use crate::clients::{Clients, Opener};
use crate::spin::{Fill, Spin};
use crate::{Prefix, RrError, pin};
use linerate_backend::udp_rr::{Reflector, attach_cpu_select};
use linerate_backend::xsk::XskFwd;
use linerate_wire::RR_HEADER_LEN;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How requests are spread over the workers' sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steering {
    /// The socket of the CPU the request was processed on (CBPF program).
    Cpu,
    /// The kernel's default: a hash of the 4-tuple.
    Hash,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    /// One worker pinned to each of these CPUs; empty: `workers` unpinned.
    pub cores: Vec<usize>,
    pub workers: usize,
    pub steering: Steering,
    /// Stop after this long (None: until stopped).
    pub duration: Option<Duration>,
    pub interval: Option<Duration>,
    /// Datagrams per receive call.
    pub batch: usize,
    /// Largest response a request from an `allow`ed source may ask for
    /// (bytes of UDP payload). Any other source gets at most the size of
    /// its own request: a spoofed request cannot make this server send
    /// more than it carried (no amplification).
    pub max_response: usize,
    /// Sources (address prefixes) that may ask for responses larger than
    /// their requests, up to `max_response`.
    pub allow: Vec<Prefix>,
    /// The recipe's switches, to measure each part: SO_REUSEPORT (false:
    /// every worker on one shared socket, the naive multi-threaded
    /// server), pinning workers to `cores`, SO_BUSY_POLL microseconds
    /// (0: off), and answers of one length to one client sent as one UDP
    /// GSO message (`gso`).
    pub reuseport: bool,
    pub pin: bool,
    pub busy_poll_us: u32,
    pub gso: bool,
    /// Workers spin on non-blocking sockets (each keeps a core busy and
    /// never sleeps in the kernel: the lowest latency a socket gives, as
    /// sockperf's `--nonblocked`).
    pub spin: bool,
    /// `--coalesce`: how long a worker sleeps after a receive that
    /// drained its socket, before the next ([`nap_after`]; zero: never).
    pub coalesce: Duration,
    /// Intervals kept for the end document: the last this many (0: none,
    /// when no document that lists them is wanted); older ones are
    /// dropped and counted, so a server that runs for days holds a
    /// bounded memory.
    pub intervals_kept: usize,
    /// Connected sockets a spinning worker opens, one per client, besides
    /// the group's socket (0: none; only with `spin` and `reuseport`):
    /// [`crate::clients`].
    pub client_sockets: usize,
    /// Answer over AF_XDP on this interface ([`crate::xdp`]): spinning
    /// workers, one per queue at most; the sockets only hold the port.
    pub af_xdp: Option<String>,
}

/// How many intervals a server keeps for its end document when one is
/// wanted: an hour of one-second intervals.
pub const INTERVALS_KEPT: usize = 3600;

impl ServerConfig {
    fn worker_count(&self) -> usize {
        if self.cores.is_empty() {
            self.workers
        } else {
            self.cores.len()
        }
    }
}

/// One worker's counters as the reporting thread sees them: the worker
/// publishes its own copy once per received batch (an uncontended lock).
type Shared = Mutex<ServerCounts>;

impl ServerCounts {
    fn read(s: &Shared) -> Self {
        <Self as Tally>::read(s)
    }

    fn absorb(&mut self, o: &Self) {
        self.requests += o.requests;
        self.answered += o.answered;
        self.malformed += o.malformed;
        self.too_large += o.too_large;
        self.reply_errors += o.reply_errors;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.batches += o.batches;
        self.reply_messages += o.reply_messages;
        self.client_sockets += o.client_sockets;
        self.requests_on_client_sockets += o.requests_on_client_sockets;
    }
}

/// A server interval: totals over all workers and each worker's requests.
#[derive(Debug, Clone)]
pub struct ServerInterval<C = ServerCounts> {
    pub start: Duration,
    pub end: Duration,
    pub total: C,
    pub per_worker: Vec<u64>,
}

#[derive(Debug)]
pub struct ServerReport {
    pub config: ServerConfig,
    pub local: SocketAddr,
    pub workers: Vec<(Option<usize>, ServerCounts)>,
    pub total: ServerCounts,
    pub elapsed: Duration,
    /// Why CPU steering is off, when it was asked for and could not be had.
    pub steering_note: Option<String>,
    /// The last `intervals_kept` intervals, oldest first.
    pub intervals: Vec<ServerInterval>,
    /// Intervals reported but not kept (over `intervals_kept`).
    pub intervals_dropped: u64,
    /// What went wrong without stopping the run (a worker that could not be
    /// pinned).
    pub warnings: Vec<String>,
}

/// A bound server, ready to run: the sockets exist (so the port is taken
/// and clients may start) before [`Server::run`] is called.
#[derive(Debug)]
pub struct Server {
    cfg: ServerConfig,
    socks: Vec<UdpSocket>,
    local: SocketAddr,
    steering_note: Option<String>,
    xdp: Option<XdpPort>,
}

/// The interface an AF_XDP server answers on, and its workers' sockets.
#[derive(Debug)]
struct XdpPort {
    iface: String,
    mac: [u8; 6],
    mtu: usize,
    /// One forwarder a worker (each holding one or more queues' sockets).
    workers: Vec<XskFwd>,
}

/// Opens AF_XDP on `iface` for UDP to `port`, split between at most
/// `workers` workers (no more than the interface has queues); says so
/// when there are fewer queues than workers asked.
fn open_xdp(iface: &str, port: u16, workers: usize) -> Result<(XdpPort, Option<String>), RrError> {
    let err = |what: String| move |e| RrError::Socket { what, source: e };
    linerate_backend::iface::exists(iface).map_err(|e| RrError::Config(e.to_string()))?;
    let mac = linerate_backend::iface::mac(iface).map_err(err(format!("read {iface}'s MAC")))?;
    let mtu = linerate_backend::iface::mtu(iface).map_err(err(format!("read {iface}'s MTU")))?;
    let filter = linerate_backend::xdp::RxFilter::Udp(Some((port, port)));
    let x = XskFwd::open(iface, 4096, filter)
        .map_err(err(format!("open AF_XDP sockets on {iface}")))?;
    let queues = x.queues();
    let n = workers.clamp(1, queues.max(1));
    let note = (n < workers).then(|| {
        format!("{iface} has {queues} receive queue(s): {n} AF_XDP worker(s), not {workers}")
    });
    let workers = x.split(n).map_err(err(format!("share {iface}'s queues")))?;
    let port = XdpPort {
        iface: iface.to_string(),
        mac,
        mtu,
        workers,
    };
    Ok((port, note))
}

impl Server {
    /// Opens the group: one socket per worker, joined in worker order so
    /// socket i is worker i's; then the steering program.
    pub fn bind(cfg: &ServerConfig) -> Result<Self, RrError> {
        let n = cfg.worker_count();
        if n == 0 || cfg.batch == 0 {
            return Err(RrError::Config(
                "a server needs at least one worker and a batch of at least one".into(),
            ));
        }
        if cfg.max_response > 0 && cfg.allow.is_empty() {
            return Err(RrError::Config(
                "a response larger than its request goes only to sources given with --allow (a spoofed request must not make this server an amplifier): give --allow PREFIX with --max-response".into(),
            ));
        }
        if cfg.max_response != 0 && !(RR_HEADER_LEN..=DATAGRAM_MAX).contains(&cfg.max_response) {
            return Err(RrError::Config(format!(
                "the largest response must be {RR_HEADER_LEN}..={DATAGRAM_MAX} bytes, not {}",
                cfg.max_response
            )));
        }
        crate::check_cores(&cfg.cores)?;
        let sock_err = |what: String| move |e| RrError::Socket { what, source: e };
        let mut socks = Vec::with_capacity(n);
        let mut addr = cfg.bind;
        // The XDP program goes on before the port is bound (when the port is
        // given): once the port is seen held, requests reach the rings.
        let early_xdp = match &cfg.af_xdp {
            Some(iface) if cfg.bind.port() != 0 => Some(open_xdp(iface, cfg.bind.port(), n)?),
            _ => None,
        };
        // Without SO_REUSEPORT: one socket, every worker receiving from it;
        // over AF_XDP one socket holds the port.
        let opened = if cfg.reuseport && cfg.af_xdp.is_none() {
            n
        } else {
            1
        };
        for i in 0..opened {
            let s = open_socket(addr, cfg)?;
            if i == 0 {
                // Port 0: the kernel's choice, then every other socket joins it.
                addr = s
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_socket())
                    .unwrap_or(addr);
            }
            socks.push(UdpSocket::from(s));
        }
        if let Some(iface) = &cfg.af_xdp {
            let (xdp, note) = match early_xdp {
                Some(x) => x,
                None => open_xdp(iface, addr.port(), n)?,
            };
            return Ok(Self {
                cfg: cfg.clone(),
                socks,
                local: addr,
                steering_note: note,
                xdp: Some(xdp),
            });
        }
        while socks.len() < n {
            let dup = socks[0]
                .try_clone()
                .map_err(sock_err("share the socket".into()))?;
            socks.push(dup);
        }
        let mut steering_note = None;
        if !cfg.reuseport {
            steering_note = Some(
                "no SO_REUSEPORT: every worker receives from one shared socket, nothing to steer"
                    .into(),
            );
        } else if cfg.steering == Steering::Cpu {
            let cpus: Vec<usize> = if cfg.cores.is_empty() {
                (0..n).collect()
            } else {
                cfg.cores.clone()
            };
            if let Err(e) = attach_cpu_select(&socks[0], &cpus) {
                steering_note = Some(format!(
                    "the CPU-steering program was refused ({e}); requests are spread by the kernel's hash"
                ));
            } else if cfg.cores.is_empty() {
                steering_note = Some(
                    "workers are not pinned (no --cores): socket i takes CPU i's requests, but worker i may run anywhere".into(),
                );
            }
        }
        Ok(Self {
            cfg: cfg.clone(),
            socks,
            local: addr,
            steering_note,
            xdp: None,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Over AF_XDP: the interface and how many workers answer on it.
    pub fn af_xdp(&self) -> Option<(&str, usize)> {
        self.xdp
            .as_ref()
            .map(|x| (x.iface.as_str(), x.workers.len()))
    }

    /// Serves until `stop` is set or the duration ends; calls
    /// `on_interval` at each interval.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        mut on_interval: impl FnMut(&ServerInterval),
    ) -> ServerReport {
        let xdp = self.xdp.take();
        let n = xdp.as_ref().map_or(self.socks.len(), |x| x.workers.len());
        let shared: Vec<Arc<Shared>> = (0..n).map(|_| Arc::default()).collect();
        let start = Instant::now();
        let end_flag = AtomicBool::new(false);
        let warnings = std::sync::Mutex::new(Vec::new());
        let cfg = &self.cfg;
        let mut intervals = IntervalLog::new(cfg.intervals_kept);
        std::thread::scope(|s| {
            let ends = (&end_flag, &warnings);
            let handles = match xdp {
                Some(x) => spawn_xdp(s, cfg, x, &shared, ends),
                None => self.spawn_socket_workers(s, &shared, ends),
            };
            let clock = Clock {
                start,
                duration: cfg.duration,
                interval: cfg.interval,
                intervals_kept: cfg.intervals_kept,
            };
            intervals = supervise(&clock, stop, &end_flag, handles, &shared, &mut on_interval);
        });
        let workers: Vec<(Option<usize>, ServerCounts)> = shared
            .iter()
            .enumerate()
            .map(|(i, s)| (cfg.cores.get(i).copied(), ServerCounts::read(s)))
            .collect();
        let mut total = ServerCounts::default();
        workers.iter().for_each(|(_, c)| total.absorb(c));
        ServerReport {
            config: self.cfg.clone(),
            local: self.local,
            workers,
            total,
            elapsed: start.elapsed(),
            steering_note: self.steering_note,
            intervals_dropped: intervals.dropped,
            intervals: intervals.kept.into(),
            warnings: warnings.into_inner().unwrap_or_default(),
        }
    }

    /// Starts one socket worker per socket.
    fn spawn_socket_workers<'s>(
        &'s self,
        s: &'s std::thread::Scope<'s, '_>,
        shared: &[Arc<Shared>],
        (end_flag, warnings): Ends<'s>,
    ) -> Vec<std::thread::ScopedJoinHandle<'s, ()>> {
        let cfg = &self.cfg;
        // A spinning worker yields after each empty poll only where a NAPI
        // thread may need its CPU (see `spin`); a blocking one's receive
        // fails only on its timeout or a signal, and it yields after each.
        // Only a spinning worker polls more than one socket; the sockets
        // share the port by SO_REUSEPORT.
        let client_sockets = if cfg.spin && cfg.reuseport {
            cfg.client_sockets
        } else {
            0
        };
        let spin = if cfg.spin {
            Spin::for_local(Some(self.local_addr().ip()))
        } else {
            Spin::new(Some(true))
        };
        let local = self.local;
        let mut handles = Vec::with_capacity(self.socks.len());
        for (i, sock) in self.socks.iter().enumerate() {
            let sh = shared[i].clone();
            let cpu = cfg.cores.get(i).copied();
            let batch = (cfg.batch, cfg.gso, cfg.coalesce);
            let max_response = cfg.max_response;
            let allow = cfg.allow.clone();
            handles.push(s.spawn(move || {
                if let Some(c) = cpu.filter(|_| cfg.pin) {
                    pin(c, warnings);
                }
                let open = |peer| client_socket(local, cfg, peer);
                serve(
                    sock,
                    (&sh, spin, Fill::new(cfg.spin, cfg.batch)),
                    batch,
                    (max_response, &allow),
                    (end_flag, warnings),
                    (Clients::new(client_sockets), &open),
                );
            }));
        }
        handles
    }
}

/// The flag that ends the workers, and their warnings.
type Ends<'a> = (&'a AtomicBool, &'a std::sync::Mutex<Vec<String>>);

/// Starts one AF_XDP worker per forwarder of `x`, pinned to the
/// configuration's CPUs in order.
fn spawn_xdp<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    cfg: &'s ServerConfig,
    x: XdpPort,
    shared: &[Arc<Shared>],
    (end_flag, warnings): Ends<'s>,
) -> Vec<std::thread::ScopedJoinHandle<'s, ()>> {
    let spin = Spin::new(linerate_backend::iface::threaded_napi(&x.iface));
    let (mac, mtu) = (x.mac, x.mtu);
    let mut handles = Vec::with_capacity(x.workers.len());
    for (i, fwd) in x.workers.into_iter().enumerate() {
        let sh = shared[i].clone();
        let cpu = cfg.cores.get(i).copied();
        handles.push(s.spawn(move || {
            if let Some(c) = cpu.filter(|_| cfg.pin) {
                pin(c, warnings);
            }
            let rules = crate::xdp::Rules {
                port: cfg.bind.port(),
                own_mac: mac,
                mtu,
                max_response: cfg.max_response,
                allow: &cfg.allow,
            };
            if let Some(w) = crate::xdp::serve(fwd, (&sh, spin), &rules, end_flag) {
                warnings.lock().unwrap_or_else(|e| e.into_inner()).push(w);
            }
        }));
    }
    handles
}

/// A server's counters, as the supervising thread adds them up.
pub(crate) trait Tally: Copy + Default + Send {
    fn read(s: &Mutex<Self>) -> Self {
        *s.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn absorb(&mut self, o: &Self);
    /// What was counted since `earlier`.
    fn since(&self, earlier: &Self) -> Self;
    fn requests(&self) -> u64;
}

impl Tally for ServerCounts {
    fn absorb(&mut self, o: &Self) {
        ServerCounts::absorb(self, o);
    }
    fn since(&self, earlier: &Self) -> Self {
        diff(self, earlier)
    }
    fn requests(&self) -> u64 {
        self.requests
    }
}

/// When a server stops and reports.
pub(crate) struct Clock {
    pub(crate) start: Instant,
    pub(crate) duration: Option<Duration>,
    pub(crate) interval: Option<Duration>,
    pub(crate) intervals_kept: usize,
}

/// A server's intervals for its end document: the last `cap` of them,
/// and how many older ones were dropped.
#[derive(Debug)]
pub(crate) struct IntervalLog<C> {
    pub(crate) kept: std::collections::VecDeque<ServerInterval<C>>,
    cap: usize,
    pub(crate) dropped: u64,
}

impl<C> IntervalLog<C> {
    pub(crate) fn new(cap: usize) -> Self {
        IntervalLog {
            kept: std::collections::VecDeque::with_capacity(cap.min(64)),
            cap,
            dropped: 0,
        }
    }

    fn push(&mut self, iv: ServerInterval<C>) {
        if self.cap == 0 {
            self.dropped += 1;
            return;
        }
        if self.kept.len() == self.cap {
            self.kept.pop_front();
            self.dropped += 1;
        }
        self.kept.push_back(iv);
    }
}

/// The supervising thread of a server: reports each interval from the
/// workers' published counters until `stop` or the duration, then stops
/// the workers (`end`) and joins them, so the last interval holds every
/// request they answered and the intervals add up to the totals. Keeps
/// the last `clock.intervals_kept` of them for the end document.
pub(crate) fn supervise<C: Tally>(
    clock: &Clock,
    stop: &AtomicBool,
    end: &AtomicBool,
    mut handles: Vec<std::thread::ScopedJoinHandle<'_, ()>>,
    shared: &[Arc<Mutex<C>>],
    on_interval: &mut impl FnMut(&ServerInterval<C>),
) -> IntervalLog<C> {
    let mut intervals = IntervalLog::new(clock.intervals_kept);
    let tick = clock.interval.unwrap_or(Duration::from_secs(3600));
    let mut last = C::default();
    let mut last_per: Vec<u64> = vec![0; shared.len()];
    let mut next = tick;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let el = clock.start.elapsed();
        let done = stop.load(Ordering::Relaxed) || clock.duration.is_some_and(|d| el >= d);
        if done {
            end.store(true, Ordering::Relaxed);
            for h in std::mem::take(&mut handles) {
                h.join().expect("rr server worker panicked");
            }
        }
        if clock.interval.is_some() && (el >= next || (done && el > next - tick)) {
            let per: Vec<C> = shared.iter().map(|s| C::read(s)).collect();
            let mut tot = C::default();
            per.iter().for_each(|c| tot.absorb(c));
            let iv = ServerInterval {
                start: next - tick,
                end: el.min(next),
                total: tot.since(&last),
                per_worker: per
                    .iter()
                    .zip(&last_per)
                    .map(|(c, l)| c.requests() - l)
                    .collect(),
            };
            on_interval(&iv);
            intervals.push(iv);
            last = tot;
            last_per = per.iter().map(|c| c.requests()).collect();
            next += tick;
        }
        if done {
            return intervals;
        }
    }
}

fn diff(a: &ServerCounts, b: &ServerCounts) -> ServerCounts {
    ServerCounts {
        requests: a.requests - b.requests,
        answered: a.answered - b.answered,
        malformed: a.malformed - b.malformed,
        too_large: a.too_large - b.too_large,
        reply_errors: a.reply_errors - b.reply_errors,
        bytes_in: a.bytes_in - b.bytes_in,
        bytes_out: a.bytes_out - b.bytes_out,
        batches: a.batches - b.batches,
        reply_messages: a.reply_messages - b.reply_messages,
        client_sockets: a.client_sockets - b.client_sockets,
        requests_on_client_sockets: a.requests_on_client_sockets - b.requests_on_client_sockets,
    }
}

/// One worker's loop. Never inlined: `linerate-bench instr` counts the
/// instructions spent in it.
#[inline(never)]
fn serve(
    sock: &UdpSocket,
    (sh, mut spin, mut fill): (&Shared, Spin, Fill),
    (batch, mut gso, coalesce): (usize, bool, Duration),
    (max_response, allow): (usize, &[Prefix]),
    (end, warnings): (&AtomicBool, &std::sync::Mutex<Vec<String>>),
    (mut clients, open): (Clients, &Opener<'_>),
) {
    let mut r = Reflector::new(batch, DATAGRAM_MAX + 1);
    r.set_gso(gso);
    let mut answers = Vec::with_capacity(r.capacity());
    let mut c = ServerCounts::default();
    let warn = |w: String| warnings.lock().unwrap_or_else(|e| e.into_inner()).push(w);
    while !end.load(Ordering::Relaxed) {
        let want = fill.want();
        let n = match r.recv_upto(clients.next(sock), want) {
            Ok(n) => {
                clients.got();
                spin.got();
                fill.got(n);
                n
            }
            // Nothing yet (a spinning worker asks again at once, after
            // yielding its CPU where a NAPI thread delivering the next
            // request may need it: `spin`), the timeout (to look at
            // `end`), EINTR, ICMP errors.
            Err(_) => {
                clients.empty();
                spin.idle();
                fill.empty();
                continue;
            }
        };
        c.batches += 1;
        answers.clear();
        // only an --allow list needs the source (to grant a larger answer)
        let sources = !allow.is_empty();
        let before = c.requests;
        answer_all(
            &mut r,
            n,
            (sources, allow, max_response),
            &mut answers,
            &mut c,
        );
        let peer = clients.peer();
        if peer.is_some() {
            c.requests_on_client_sockets += c.requests - before;
        }
        send_all(&mut r, clients.current(sock), peer, &mut answers, &mut c);
        if clients.has_room() {
            let refused = clients.refused;
            for &(i, _) in &answers {
                if let Some(peer) = r.source(i) {
                    clients.offer(peer, open);
                }
            }
            if clients.refused > 0 && refused == 0 {
                warn(
                    "the kernel refused a socket for a client (descriptors or memory): \
                      its requests are answered on the group's socket"
                        .into(),
                );
            }
            c.client_sockets = clients.opened;
        }
        if gso && !r.gso() {
            gso = false;
            warn(
                "the kernel refused a UDP GSO answer (path MTU below the answer, or no \
                 checksum offload): this worker answers one datagram per message"
                    .into(),
            );
        }
        publish(sh, &c);
        if let Some(nap) = nap_after(n, want, coalesce) {
            std::thread::sleep(nap);
        }
    }
    publish(sh, &c);
}

/// Turns the `n` datagrams of the last receive into answers in place,
/// counting each; `answers` gets `(datagram, answer length)` of those
/// to send.
fn answer_all(
    r: &mut Reflector,
    n: usize,
    (sources, allow, max_response): (bool, &[Prefix], usize),
    answers: &mut Vec<(usize, usize)>,
    c: &mut ServerCounts,
) {
    for i in 0..n {
        let len = r.datagram(i).len();
        if r.truncated(i) {
            c.malformed += 1;
            continue;
        }
        let source = if sources { r.source(i) } else { None };
        let out = match decide(r.slot_mut(i), len, source, allow, max_response) {
            Decision::Answer(out) => out,
            Decision::Malformed => {
                c.malformed += 1;
                continue;
            }
            Decision::TooLarge => {
                c.too_large += 1;
                continue;
            }
        };
        c.requests += 1;
        c.bytes_in += len as u64;
        answers.push((i, out));
    }
}

/// Sends `answers` on `sock` (connected to `peer`, if it is a client's),
/// skipping an answer the kernel refuses, and counts them.
fn send_all(
    r: &mut Reflector,
    sock: &UdpSocket,
    peer: Option<SocketAddr>,
    answers: &mut [(usize, usize)],
    c: &mut ServerCounts,
) {
    let mut done = 0;
    while done < answers.len() {
        match r.reply(sock, &mut answers[done..], peer) {
            Ok(0) => break,
            Ok(m) => {
                c.answered += m as u64;
                c.bytes_out += answers[done..done + m]
                    .iter()
                    .map(|a| a.1 as u64)
                    .sum::<u64>();
                done += m;
                c.reply_messages = r.messages();
            }
            Err(_) => {
                // the first message of the rest was refused: skip it
                c.reply_errors += 1;
                done += 1;
            }
        }
    }
}

/// One of the server's sockets, bound to `addr` and set up as `cfg`
/// says (SO_REUSEPORT, buffers, non-blocking or a receive timeout,
/// SO_BUSY_POLL).
fn open_socket(addr: SocketAddr, cfg: &ServerConfig) -> Result<socket2::Socket, RrError> {
    let sock_err = |what: String| move |e| RrError::Socket { what, source: e };
    let domain = socket2::Domain::for_address(addr);
    let s = socket2::Socket::new(domain, socket2::Type::DGRAM, None)
        .map_err(sock_err("open a UDP socket".into()))?;
    if cfg.reuseport {
        s.set_reuse_port(true)
            .map_err(sock_err("set SO_REUSEPORT".into()))?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(false).ok();
    }
    s.bind(&addr.into())
        .map_err(sock_err(format!("bind {addr}")))?;
    s.set_recv_buffer_size(4 << 20).ok();
    s.set_send_buffer_size(4 << 20).ok();
    if cfg.spin {
        s.set_nonblocking(true)
            .map_err(sock_err("set O_NONBLOCK".into()))?;
    } else {
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(sock_err("set a receive timeout".into()))?;
    }
    if cfg.busy_poll_us > 0 {
        linerate_backend::sockopt::set_busy_poll(&s, cfg.busy_poll_us).map_err(sock_err(
            format!("set SO_BUSY_POLL {} us", cfg.busy_poll_us),
        ))?;
    }
    Ok(s)
}

/// A socket for the client at `peer`: bound where the group's sockets
/// are (`local`, with SO_REUSEPORT) and connected to the client
/// ([`crate::clients`]).
fn client_socket(
    local: SocketAddr,
    cfg: &ServerConfig,
    peer: SocketAddr,
) -> std::io::Result<UdpSocket> {
    let s = open_socket(local, cfg).map_err(std::io::Error::other)?;
    s.connect(&peer.into())?;
    Ok(UdpSocket::from(s))
}

/// How long a worker sleeps after a receive that took `got` datagrams
/// of the `asked` it asked for, its requests answered (`--coalesce`):
/// `coalesce` when the receive drained the socket (fewer than asked),
/// so the requests that come meanwhile gather into the next batch and
/// are queued without waking the worker; none after a full receive (more
/// may be waiting) or without `--coalesce`.
fn nap_after(got: usize, asked: usize, coalesce: Duration) -> Option<Duration> {
    (got < asked && !coalesce.is_zero()).then_some(coalesce)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_naps_only_after_draining_its_socket_with_coalesce() {
        let us = Duration::from_micros;
        assert_eq!(nap_after(3, 64, us(100)), Some(us(100)));
        assert_eq!(nap_after(1, 64, us(100)), Some(us(100)));
        // a full receive: more may be waiting, ask again at once
        assert_eq!(nap_after(64, 64, us(100)), None);
        assert_eq!(nap_after(3, 64, Duration::ZERO), None);
    }
}
