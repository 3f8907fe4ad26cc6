//! TCP stream workers: senders (one stream, a group sharing a CPU, `-F`
//! a file) and the receiver with its low-water mark.

use super::shared::*;
use linerate_backend::clock;
use linerate_traffic::pacing::Departures;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
