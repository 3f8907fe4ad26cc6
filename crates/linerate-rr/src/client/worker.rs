//! One rr client worker: its flows, the closed- or open-loop schedule, and
//! matching every answer to its request.

use super::config::{ClientConfig, DATAGRAM_MAX, Load};
use super::report::{Counts, Roundtrip, RoundtripKind, Sample};
use super::{DRAIN_MAX, new_hist, recv_slot};
use crate::spin::Spin;
use crate::track::{Answer, Outstanding};
use hdrhistogram::Histogram;
use linerate_backend::epoll::EpollSet;
use linerate_backend::udp_batch::{self, BATCH_MAX, Batch, GRO_BUF_BYTES, GroBatch};
use linerate_wire::{RrHeader, RrKind};
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One worker's open-loop schedule: request k is due at `start + k / tps`.
pub(super) struct OpenLoop {
    pub(super) start: u64,
    pub(super) tps: f64,
    pub(super) issued: u64,
    /// The flow the next batch goes on (round robin).
    pub(super) flow: usize,
}

impl OpenLoop {
    pub(super) fn at(&self, k: u64) -> u64 {
        self.start + (k as f64 * 1e9 / self.tps) as u64
    }

    /// Sends every request due by `now` (a batch per flow in turn) with
    /// its scheduled time as its stamp; returns when the next one is due.
    fn send_due(&mut self, w: &mut Worker<'_>, socks: &[UdpSocket], now: u64) -> u64 {
        let due = ((now - self.start) as f64 * self.tps / 1e9) as u64 + 1;
        let real_now = w.now_ns();
        let behind = due.saturating_sub(self.issued + 1);
        w.counts.behind_max = w.counts.behind_max.max(behind);
        while self.issued < due {
            let f = self.flow;
            let base = self.issued;
            let mut stamp = |k: usize| self.at(base + k as u64);
            let went = w.send(&socks[f], f, &mut stamp, (due - base) as usize);
            if went == 0 {
                break;
            }
            for k in 0..went as u64 {
                w.lag
                    .saturating_record(real_now.saturating_sub(self.at(base + k)));
            }
            self.issued += went as u64;
            self.flow = (self.flow + 1) % socks.len();
        }
        self.at(self.issued)
    }
}

/// How a worker waits for answers: its flows' epoll set, or where it
/// could not be made, ppoll on every flow's socket.
type Waits<'w, 'f> = (Option<&'w mut EpollSet>, &'w mut [PollFd<'f>]);

pub(super) struct Worker<'a> {
    pub(super) cfg: &'a ClientConfig,
    pub(super) base_flow: u32,
    pub(super) out: Vec<Outstanding>,
    /// Requests owed per flow (closed loop): answered or lost, not yet replaced.
    pub(super) owed: Vec<usize>,
    pub(super) epoch: Instant,
    pub(super) tx: mpsc::Sender<Sample>,
    pub(super) batch: Batch,
    /// Room for a batch of requests laid end to end.
    pub(super) req: Vec<u8>,
    /// A batch of requests on a flow goes as one UDP GSO message
    /// (UDP_SEGMENT on every flow's socket: the kernel cuts it into
    /// datagrams of `request_size`).
    pub(super) segmented: bool,
    pub(super) resp: Vec<Vec<u8>>,
    pub(super) lens: Vec<usize>,
    /// The size of the answers in each received buffer (its length where
    /// it holds one).
    pub(super) segs: Vec<usize>,
    /// Answers come coalesced (UDP_GRO on every flow's socket): a buffer
    /// may hold several of one flow, received through `gro`.
    pub(super) coalesced: bool,
    pub(super) gro: GroBatch,
    pub(super) counts: Counts,
    pub(super) hist: Histogram<u64>,
    pub(super) iv_hist: Histogram<u64>,
    /// Open loop: each request's lateness against its schedule, ns.
    pub(super) lag: Histogram<u64>,
    pub(super) iv_index: usize,
    pub(super) iv_completed: u64,
    pub(super) iv_lost: u64,
    /// The first `keep` answers one by one, in arrival order (a tool that
    /// lists round trips: pScheduler's rtt); 0 keeps none.
    pub(super) keep: usize,
    pub(super) answers: Vec<Roundtrip>,
}

impl<'a> Worker<'a> {
    pub(super) fn new(
        cfg: &'a ClientConfig,
        index: usize,
        n: usize,
        epoch: Instant,
        tx: mpsc::Sender<Sample>,
    ) -> Self {
        let window = match cfg.load {
            Load::Closed { outstanding } => outstanding * 4,
            Load::Open { tps } => {
                let per_flow = tps / (cfg.workers() * cfg.flows) as f64;
                (per_flow * cfg.timeout.as_secs_f64() * 1.25) as usize
            }
        };
        Self {
            cfg,
            base_flow: (index * cfg.flows) as u32,
            out: (0..n).map(|_| Outstanding::new(window)).collect(),
            owed: vec![
                match cfg.load {
                    Load::Closed { outstanding } => outstanding,
                    Load::Open { .. } => 0,
                };
                n
            ],
            epoch,
            tx,
            batch: Batch::new(),
            req: vec![0u8; cfg.request_size * BATCH_MAX],
            segmented: false,
            resp: vec![vec![0u8; recv_slot(cfg)]; BATCH_MAX],
            lens: vec![0; BATCH_MAX],
            segs: vec![0; BATCH_MAX],
            coalesced: false,
            gro: GroBatch::new(),
            counts: Counts::default(),
            hist: new_hist(),
            iv_hist: new_hist(),
            lag: new_hist(),
            iv_index: 0,
            iv_completed: 0,
            iv_lost: 0,
            keep: 0,
            answers: Vec::new(),
        }
    }

    pub(super) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Sends up to `n` requests on flow `f` stamped `stamp_ns` (each its
    /// own in open loop: `stamps` gives them); returns how many went.
    fn send(
        &mut self,
        sock: &UdpSocket,
        f: usize,
        stamps: &mut dyn FnMut(usize) -> u64,
        n: usize,
    ) -> usize {
        let size = self.cfg.request_size;
        let n = n.min(if self.segmented {
            gso_requests_max(size)
        } else {
            BATCH_MAX
        });
        let first = self.out[f].next_seq();
        let reply_len = self.cfg.response_size as u32;
        for k in 0..n {
            let h = RrHeader {
                kind: RrKind::Request,
                flow: self.base_flow + f as u32,
                reply_len,
                seq: first + k as u64,
                stamp_ns: stamps(k),
            };
            h.emit(&mut self.req[k * size..(k + 1) * size])
                .expect("request buffers hold a header");
        }
        let sent = if n == 1 {
            // one request: sendto, no message header (a ping-pong's)
            udp_batch::send_one(sock, &self.req[..size]).map(|_| 1)
        } else if self.segmented {
            self.send_segmented(sock, n)
        } else {
            self.send_each(sock, n)
        };
        let went = match sent {
            Ok(m) => m,
            Err(e) => {
                self.send_error(&e);
                0
            }
        };
        for k in 0..went {
            if self.out[f].send(stamps(k)).is_none() {
                // A flow with 16M requests in flight: the rest count lost.
                self.counts.lost += (went - k) as u64;
                break;
            }
        }
        self.counts.sent += went as u64;
        went
    }

    /// The first `n` requests by sendmmsg, one message each.
    fn send_each(&mut self, sock: &UdpSocket, n: usize) -> io::Result<usize> {
        let size = self.cfg.request_size;
        self.batch.send_split(sock, &self.req[..n * size], size)
    }

    /// The first `n` requests as one UDP GSO message, all or none; where
    /// the path refuses GSO (no checksum offload: EIO; a request over the
    /// MTU: EINVAL), one message each from then on.
    fn send_segmented(&mut self, sock: &UdpSocket, n: usize) -> io::Result<usize> {
        let size = self.cfg.request_size;
        match linerate_backend::udp_tx::send_segmented(sock, &self.req[..n * size], size as u16) {
            Ok(_) => Ok(n),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(nix::libc::EIO | nix::libc::EINVAL | nix::libc::EMSGSIZE)
                ) =>
            {
                self.segmented = false;
                self.send_each(sock, n)
            }
            Err(e) => Err(e),
        }
    }

    fn send_error(&mut self, e: &io::Error) {
        match e.raw_os_error() {
            Some(nix::libc::EAGAIN | nix::libc::ENOBUFS) => self.counts.send_blocked += 1,
            Some(nix::libc::ECONNREFUSED) => self.counts.refused += 1,
            _ => self.counts.send_errors += 1,
        }
    }

    /// Reads everything queued on flow `f` and matches it (a batch that
    /// is not full means the socket is empty, or held no more than was
    /// in flight: the next poll takes a late duplicate).
    fn receive(&mut self, sock: &UdpSocket, f: usize) {
        loop {
            let want = recv_slots(self.out[f].in_flight());
            let n = match self.recv_batch(sock, want) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(nix::libc::ECONNREFUSED) => {
                    self.counts.refused += 1;
                    continue;
                }
                Err(_) => {
                    self.counts.send_errors += 1;
                    return;
                }
            };
            let now = self.now_ns();
            for i in 0..n {
                // One datagram, or (coalesced) several of `segs[i]` bytes
                // each, the last one maybe shorter: each checked alone.
                let (len, seg) = (self.lens[i], self.segs[i]);
                let mut at = 0;
                loop {
                    let end = if seg == 0 { len } else { (at + seg).min(len) };
                    let flow = self.base_flow + f as u32;
                    match answer_of(&self.resp[i][at..end], self.cfg.response_size, flow) {
                        Some(seq) => {
                            let a = self.out[f].answer(seq, now);
                            self.record(f, seq, a);
                        }
                        None => self.counts.malformed += 1,
                    }
                    at = end;
                    if at >= len {
                        break;
                    }
                }
            }
            if n < BATCH_MAX {
                return;
            }
        }
    }

    /// One receive of up to `want` datagrams into `resp` (their lengths
    /// in `lens`): one alone by `recvfrom`, with no headers to set up here
    /// or to copy in for the kernel.
    #[inline]
    fn recv_batch(&mut self, sock: &UdpSocket, want: usize) -> io::Result<usize> {
        if self.coalesced {
            // the answers' size in each buffer comes in a control message
            let (bufs, lens) = (&mut self.resp[..want], &mut self.lens);
            return self.gro.recv(sock, bufs, lens, &mut self.segs);
        }
        if want == 1 {
            let len = udp_batch::recv_one(sock, &mut self.resp[0])?;
            self.lens[0] = len;
            self.segs[0] = len;
            return Ok(1);
        }
        let mut bufs: [&mut [u8]; BATCH_MAX] = {
            let mut it = self.resp.iter_mut();
            std::array::from_fn(|_| it.next().expect("BATCH_MAX buffers").as_mut_slice())
        };
        let n = self.batch.recv(sock, &mut bufs[..want], &mut self.lens)?;
        self.segs[..n].copy_from_slice(&self.lens[..n]);
        Ok(n)
    }

    /// Sends each flow's batches of requests as UDP GSO messages from now
    /// on (a UDP_SEGMENT control message of `request_size` on each batch's
    /// send, not the socket option: a socket with the option builds even a
    /// lone datagram in page fragments, which costs a request sent alone,
    /// 0.84x sockperf in a ping-pong on 2026-11-30). A batch then goes down
    /// the stack (and through a veth, into the server's namespace up to its
    /// socket, where it is cut into the datagrams) as one packet: a third
    /// of the client's CPU a transaction at 8 flows of 16 requests in
    /// flight. What leaves is the same datagrams: a NIC (or the kernel
    /// before a driver without UDP segmentation) cuts it; a veth's
    /// counters count it as one. Not for a ping-pong (one request in
    /// flight a flow never makes a batch). A path that refuses a GSO
    /// message turns it off at its first batch (`send_segmented`).
    pub(super) fn segment(&mut self) {
        if matches!(self.cfg.load, Load::Closed { outstanding: 1 }) {
            return;
        }
        self.segmented = u16::try_from(self.cfg.request_size).is_ok();
    }

    /// Turns UDP_GRO on for every flow's socket where answers can come
    /// several at a time (not one request in flight per flow: a
    /// ping-pong's answer comes alone, and `recvfrom` takes it cheapest):
    /// a server's GSO answers to a flow then come as one buffer (the veth
    /// and loopback pass them whole) instead of being cut into datagrams
    /// at this socket, and the threaded path's NAPI coalesces answers
    /// too. All or none: a socket left without it where others have it
    /// is turned back off.
    pub(super) fn coalesce(&mut self, socks: &[UdpSocket]) {
        if matches!(self.cfg.load, Load::Closed { outstanding: 1 }) {
            return;
        }
        if !socks.iter().all(|s| GroBatch::enable(s).is_ok()) {
            for s in socks {
                GroBatch::set(s, false).ok();
            }
            return;
        }
        self.coalesced = true;
        // Room for a whole GSO message in every buffer (touched only as
        // far as answers fill it).
        self.resp = (0..BATCH_MAX).map(|_| vec![0u8; GRO_BUF_BYTES]).collect();
    }

    /// Counts what an answer on flow `f` turned out to be.
    pub(super) fn record(&mut self, f: usize, seq: u64, a: Answer) {
        if self.answers.len() < self.keep {
            let rtt_ns = match a {
                Answer::Completed(ns) => Some(ns),
                _ => None,
            };
            self.answers.push(Roundtrip {
                flow: self.base_flow + f as u32,
                seq,
                rtt_ns,
                answer: match a {
                    Answer::Completed(_) => RoundtripKind::Answered,
                    Answer::Duplicate => RoundtripKind::Duplicate,
                    Answer::Late => RoundtripKind::Late,
                    Answer::Unknown => RoundtripKind::Unknown,
                },
            });
        }
        match a {
            Answer::Completed(ns) => {
                self.completed(ns);
                self.owed[f] += 1;
            }
            Answer::Duplicate => self.counts.duplicate += 1,
            Answer::Late => self.counts.late += 1,
            Answer::Unknown => self.counts.unknown += 1,
        }
    }

    /// Counts a transaction completed after `ns`.
    pub(super) fn completed(&mut self, ns: u64) {
        self.counts.completed += 1;
        self.iv_completed += 1;
        self.hist.saturating_record(ns.max(1));
        self.iv_hist.saturating_record(ns.max(1));
    }

    pub(super) fn expire(&mut self, now: u64) {
        let before = now.saturating_sub(self.cfg.timeout.as_nanos() as u64);
        for f in 0..self.out.len() {
            let lost = self.out[f].expire(before);
            self.counts.lost += lost;
            self.iv_lost += lost;
            self.owed[f] += lost as usize;
        }
    }

    /// Sends the current interval's counts to the collector; `until` is
    /// set for the last one (when this worker stopped sending).
    pub(super) fn flush_interval(&mut self, until: Option<Duration>) {
        let hist = std::mem::replace(&mut self.iv_hist, new_hist());
        self.tx
            .send(Sample {
                index: self.iv_index,
                completed: std::mem::take(&mut self.iv_completed),
                lost: std::mem::take(&mut self.iv_lost),
                hist,
                until,
            })
            .ok();
        self.iv_index += 1;
    }

    /// The next interval boundary (monotonic ns) at which an interval is
    /// flushed: none without intervals, and none when the test ends less
    /// than a millisecond after it (that sliver joins the last interval,
    /// which is flushed after the drain with every answer and loss in it).
    pub(super) fn next_boundary(&self, start: u64, end: u64) -> Option<u64> {
        let iv = self.cfg.interval?.as_nanos() as u64;
        let b = start + (self.iv_index as u64 + 1) * iv;
        (b + 1_000_000 < end).then_some(b)
    }

    /// Sends for the test's duration, then waits for answers still due.
    /// Returns how long it sent for.
    /// Closed loop: sends every flow the requests it is owed (one per
    /// answer or loss), as far as the sockets take them.
    fn send_owed(&mut self, socks: &[UdpSocket], now: u64) {
        for (f, sock) in socks.iter().enumerate() {
            while self.owed[f] > 0 {
                let went = self.send(sock, f, &mut |_| now, self.owed[f]);
                self.owed[f] -= went;
                if went == 0 {
                    break;
                }
            }
        }
    }

    /// Waits until `wake` (monotonic ns) and receives from every flow that
    /// has answers: on the flows' epoll set (a wait costs what is ready),
    /// or where it could not be made, in ppoll on every flow.
    fn wait_and_receive(&mut self, socks: &[UdpSocket], waits: Waits<'_, '_>, wake: u64) {
        let wait = Duration::from_nanos(wake.saturating_sub(self.now_ns()));
        let fds = match waits {
            (Some(set), _) => {
                let n = set.wait(wait);
                for k in 0..n {
                    let f = set.index(k);
                    self.receive(&socks[f], f);
                }
                return;
            }
            (None, fds) => fds,
        };
        let ts = TimeSpec::from_duration(wait);
        if let Ok(n) = ppoll(fds, Some(ts), None)
            && n > 0
        {
            for f in 0..fds.len() {
                if fds[f].revents().is_some_and(|r| !r.is_empty()) {
                    self.receive(&socks[f], f);
                }
            }
        }
    }

    /// This worker's open-loop schedule from `start` (and a timer slack
    /// of a microsecond, to wake for each departure in time).
    pub(super) fn open_loop(&self, start: u64) -> OpenLoop {
        if matches!(self.cfg.load, Load::Open { .. }) {
            linerate_backend::clock::set_timer_slack_ns(1_000).ok();
        }
        OpenLoop {
            start,
            tps: match self.cfg.load {
                Load::Open { tps } => tps / self.cfg.workers() as f64,
                Load::Closed { .. } => 0.0,
            },
            issued: 0,
            flow: 0,
        }
    }

    pub(super) fn run(&mut self, socks: &[UdpSocket], stop: &AtomicBool) -> Duration {
        let start = self.now_ns();
        let end = start + self.cfg.duration.as_nanos() as u64;
        let mut open = self.open_loop(start);
        let mut last_expire = start;
        let blocking = self.receive_blocking(socks);
        self.coalesce(socks);
        self.segment();
        // Busy polling: where to yield (see `spin`), by the interface the
        // answers come in on.
        let mut spin = Spin::for_local(
            socks
                .first()
                .and_then(|s| s.local_addr().ok())
                .map(|a| a.ip()),
        );
        // Only a worker that waits in epoll registers its flows there: a
        // registration hangs an entry on each socket's wait queue, and the
        // kernel then takes the queue's lock and runs epoll's callback for
        // every answer received and every request sent (2.7% of a spinning
        // ping-pong pair's CPU, on the round trip's path: bench/HISTORY.md,
        // session 37).
        let mut set = (!self.cfg.busy_poll && !blocking)
            .then(|| EpollSet::new(socks).ok())
            .flatten();
        let mut fds: Vec<PollFd> = socks
            .iter()
            .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN))
            .collect();
        let mut sending = true;
        let mut sent_for = Duration::ZERO;
        loop {
            let now = self.now_ns();
            if sending && (now >= end || stop.load(Ordering::Relaxed)) {
                if now >= end && matches!(self.cfg.load, Load::Open { .. }) {
                    // Requests scheduled before the end go, even if this
                    // wake-up came late.
                    open.send_due(self, socks, end - 1);
                }
                sending = false;
                sent_for = Duration::from_nanos(now - start);
            }
            if !sending && self.drained(start, sent_for, now) {
                break;
            }
            if sending && self.next_boundary(start, end).is_some_and(|b| now >= b) {
                self.flush_interval(None);
            }
            if now.saturating_sub(last_expire) >= 1_000_000 {
                self.expire(now);
                last_expire = now;
            }
            // Send what is due.
            let mut next_due = now + 10_000_000;
            if sending {
                match self.cfg.load {
                    Load::Closed { .. } => self.send_owed(socks, now),
                    Load::Open { .. } => next_due = open.send_due(self, socks, now),
                }
            }
            // Wait for answers until the next send, interval or expiry.
            let mut wake = next_due.min(last_expire + 1_000_000);
            if sending {
                wake = wake.min(end);
                if let Some(b) = self.next_boundary(start, end) {
                    wake = wake.min(b);
                }
            }
            let waits = (set.as_mut(), fds.as_mut_slice());
            self.await_answers(socks, (waits, &mut spin), blocking, wake);
        }
        self.finish(sent_for);
        sent_for
    }

    /// Whether to wait in the receive call itself: one flow in closed
    /// loop with fewer than a batch in flight (a blocking socket with a
    /// 1 ms timeout, the expiry tick) rather than in ppoll and then
    /// receive: one system call fewer per transaction.
    fn receive_blocking(&self, socks: &[UdpSocket]) -> bool {
        !self.cfg.busy_poll
            && socks.len() == 1
            && matches!(self.cfg.load, Load::Closed { outstanding } if outstanding < BATCH_MAX)
            && socks[0].set_nonblocking(false).is_ok()
            && socks[0]
                .set_read_timeout(Some(Duration::from_millis(1)))
                .is_ok()
    }

    /// After sending stopped (`sent_for` after `start`): whether nothing
    /// is in flight any more, or the drain is over.
    #[inline]
    pub(super) fn drained(&self, start: u64, sent_for: Duration, now: u64) -> bool {
        let in_flight: usize = self.out.iter().map(Outstanding::in_flight).sum();
        let drain_end =
            start + sent_for.as_nanos() as u64 + self.cfg.timeout.min(DRAIN_MAX).as_nanos() as u64;
        in_flight == 0 || now >= drain_end
    }

    /// Takes the answers that came, waiting for them until `wake` unless busy
    /// polling (or in the blocking receive's own timeout).
    #[inline]
    fn await_answers(
        &mut self,
        socks: &[UdpSocket],
        (waits, spin): (Waits<'_, '_>, &mut Spin),
        blocking: bool,
        wake: u64,
    ) {
        if self.cfg.busy_poll {
            // Spin: ask every flow's (non-blocking) socket again at once.
            let before = self.counts.completed;
            for (f, s) in socks.iter().enumerate() {
                self.receive(s, f);
            }
            if self.counts.completed == before {
                // Nothing came: the CPU to a NAPI thread that may deliver
                // the answer here, where the interface has one (`spin`).
                spin.idle();
            } else {
                spin.got();
            }
        } else if blocking {
            self.receive(&socks[0], 0);
        } else {
            self.wait_and_receive(socks, waits, wake);
        }
    }

    /// Counts what is still unanswered as lost, and flushes the last
    /// interval (sending lasted `sent_for`).
    pub(super) fn finish(&mut self, sent_for: Duration) {
        let lost = self
            .out
            .iter_mut()
            .map(Outstanding::expire_all)
            .sum::<u64>();
        self.counts.lost += lost;
        if self.cfg.interval.is_some() {
            // The last interval holds the answers and losses of the drain,
            // so the intervals add up to the totals.
            self.iv_lost += lost;
            self.flush_interval(Some(sent_for));
        }
    }
}

/// Most requests of `size` bytes one GSO message holds: a batch, within a
/// datagram's 65,507 bytes.
fn gso_requests_max(size: usize) -> usize {
    (DATAGRAM_MAX / size.max(1)).clamp(1, BATCH_MAX)
}

/// The sequence number of `bytes` if they are an answer of `len` bytes on
/// `flow`, else None (malformed).
#[inline]
fn answer_of(bytes: &[u8], len: usize, flow: u32) -> Option<u64> {
    match RrHeader::parse(bytes) {
        Ok(h) if h.kind == RrKind::Response && bytes.len() == len && h.flow == flow => Some(h.seq),
        _ => None,
    }
}

/// Datagrams one receive asks for on a flow with `in_flight` requests
/// unanswered: no more than can come (with one in flight, a receive of
/// one returns with it, where a batch would look for a second and find
/// the socket empty), at least one (a late answer), at most a batch.
fn recv_slots(in_flight: usize) -> usize {
    in_flight.clamp(1, BATCH_MAX)
}

#[cfg(test)]
mod recv_slots_tests {
    use super::*;

    #[test]
    fn a_receive_asks_for_what_is_in_flight() {
        assert_eq!(recv_slots(0), 1);
        assert_eq!(recv_slots(1), 1);
        assert_eq!(recv_slots(16), 16);
        assert_eq!(recv_slots(BATCH_MAX), BATCH_MAX);
        assert_eq!(recv_slots(10 * BATCH_MAX), BATCH_MAX);
    }
}

#[cfg(test)]
mod coalesced_tests {
    use super::*;
    use linerate_backend::sockopt::set_udp_segment;

    fn cfg(server: std::net::SocketAddr, outstanding: usize) -> ClientConfig {
        ClientConfig::one_flow_for_test(server, outstanding, 100, false)
    }

    /// The test's server: a loopback socket whose reads wait 2 s at most.
    fn server_socket() -> UdpSocket {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        server
    }

    fn client_of(cfg: &ClientConfig) -> [UdpSocket; 1] {
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(cfg.server).unwrap();
        client.set_nonblocking(true).unwrap();
        [client]
    }

    #[test]
    fn answers_in_one_gso_message_are_each_counted_and_timed() {
        let server = server_socket();
        let cfg = cfg(server.local_addr().unwrap(), 16);
        let socks = client_of(&cfg);
        let (tx, _rx) = mpsc::channel();
        let mut w = Worker::new(&cfg, 0, 1, Instant::now(), tx);
        w.coalesce(&socks);
        assert!(w.coalesced, "UDP_GRO on the flow's socket");
        let sent_at = w.now_ns();
        w.send_owed(&socks, sent_at);
        assert_eq!((w.counts.sent, w.owed[0]), (16, 0));
        // The server: all 16 answers in one GSO message of 100-byte
        // datagrams, and a short one of 40 bytes at its end.
        let mut msg = Vec::new();
        let mut buf = [0u8; 256];
        for _ in 0..16 {
            let (n, from) = server.recv_from(&mut buf).unwrap();
            server.connect(from).unwrap();
            let h = RrHeader::parse(&buf[..n]).unwrap();
            let mut a = vec![0u8; 100];
            RrHeader {
                kind: RrKind::Response,
                ..h
            }
            .emit(&mut a)
            .unwrap();
            msg.extend_from_slice(&a);
        }
        msg.extend_from_slice(&[7u8; 40]);
        set_udp_segment(&server, 100).unwrap();
        assert_eq!(server.send(&msg).unwrap(), 1640);
        let t = Instant::now();
        while w.counts.completed + w.counts.malformed < 17 && t.elapsed() < Duration::from_secs(2) {
            w.receive(&socks[0], 0);
        }
        let took = w.now_ns() - sent_at;
        assert_eq!(
            (w.lens[0], w.segs[0]),
            (1640, 100),
            "one buffer holding answers of 100 bytes"
        );
        assert_eq!((w.counts.completed, w.counts.malformed), (16, 1));
        assert_eq!(w.counts.duplicate + w.counts.unknown + w.counts.late, 0);
        // each answer timed from its own request, none lost or left over
        assert_eq!(w.hist.len(), 16);
        // (a histogram's max is its bucket's top: 3 significant digits)
        assert!(
            w.hist.max() <= took + took / 500,
            "{} > {took}",
            w.hist.max()
        );
        assert_eq!((w.out[0].in_flight(), w.owed[0]), (0, 16));
    }

    #[test]
    fn a_gso_sent_batch_arrives_as_each_request_counted_and_stamped() {
        let server = server_socket();
        let cfg = cfg(server.local_addr().unwrap(), 16);
        let socks = client_of(&cfg);
        let (tx, _rx) = mpsc::channel();
        let mut w = Worker::new(&cfg, 0, 1, Instant::now(), tx);
        w.segment();
        assert!(w.segmented, "UDP_SEGMENT on the flow's socket");
        w.send_owed(&socks, 777);
        assert_eq!(
            (w.counts.sent, w.owed[0], w.out[0].in_flight()),
            (16, 0, 16)
        );
        let mut buf = [0u8; 256];
        for seq in 0..16 {
            // one datagram a request, in order, each its own header
            let n = server.recv(&mut buf).unwrap();
            let h = RrHeader::parse(&buf[..n]).unwrap();
            assert_eq!(
                (n, h.kind, h.seq, h.stamp_ns),
                (64, RrKind::Request, seq, 777)
            );
            assert_eq!((h.flow, h.reply_len), (0, 100));
        }
        server.set_nonblocking(true).unwrap();
        assert!(server.recv(&mut buf).is_err(), "no 17th datagram");
        assert!(w.segmented, "the path took GSO");
    }

    #[test]
    fn a_ping_pong_keeps_its_one_datagram_receive() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let cfg = cfg(server.local_addr().unwrap(), 1);
        let socks = client_of(&cfg);
        let (tx, _rx) = mpsc::channel();
        let mut w = Worker::new(&cfg, 0, 1, Instant::now(), tx);
        w.coalesce(&socks);
        assert!(!w.coalesced);
        assert_eq!(w.resp[0].len(), recv_slot(&cfg));
        // and sends its lone request without UDP_SEGMENT on the socket
        w.segment();
        assert!(!w.segmented);
    }
}
