//! One worker of the rr server over TCP: its listener and connections on
//! one epoll set. It reads whole frames, answers each in the connection's
//! bounded output buffer and writes what the kernel takes; connections in
//! all and per source address are limited ([`Limits`], shared by the
//! workers), idle ones closed, a frame above the largest message closes
//! its connection, never the server.

use super::config::{OUT_HIGH, TcpServerConfig, TcpServerCounts};
use super::frame::{FrameError, FrameReader, ONE_SEGMENT, TCP_MESSAGE_MAX, put_len};
use crate::Prefix;
use crate::spin::SPARE_EVERY;
use linerate_backend::stream::RawStream;
use linerate_wire::{RR_HEADER_LEN, RrHeader};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Connections open in all and per source, shared by the workers (taken
/// only on accept and close).
#[derive(Debug, Default)]
pub(super) struct Limits {
    total: AtomicUsize,
    per_source: Mutex<HashMap<IpAddr, usize>>,
}

enum Refusal {
    Total,
    Source,
}

impl Limits {
    fn admit(&self, ip: IpAddr, cfg: &TcpServerConfig) -> Result<(), Refusal> {
        if self.total.fetch_add(1, Ordering::Relaxed) >= cfg.max_conns {
            self.total.fetch_sub(1, Ordering::Relaxed);
            return Err(Refusal::Total);
        }
        let mut m = self.per_source.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= cfg.max_per_source {
            drop(m);
            self.total.fetch_sub(1, Ordering::Relaxed);
            return Err(Refusal::Source);
        }
        *n += 1;
        Ok(())
    }

    fn release(&self, ip: IpAddr) {
        self.total.fetch_sub(1, Ordering::Relaxed);
        let mut m = self.per_source.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
    }
}

/// One accepted connection.
struct Conn {
    s: TcpStream,
    peer: IpAddr,
    rd: FrameReader,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    wpos: usize,
    last: Instant,
    interest: EpollFlags,
    /// Read by the spinning worker's loop itself, not in its epoll set.
    direct: bool,
    /// TCP_NODELAY set: from the connection's second write on, or for a
    /// first longer than [`ONE_SEGMENT`] (before, Nagle's algorithm
    /// holds nothing back; a connection per transaction never needs it).
    nodelay: bool,
    /// Something was written on the connection.
    wrote: bool,
}

impl Conn {
    fn pending(&self) -> usize {
        self.out.len() - self.wpos
    }

    /// Writes what the kernel takes; Err when the connection failed.
    fn flush(&mut self, now: Instant) -> io::Result<()> {
        if !self.nodelay
            && self.wpos < self.out.len()
            && (self.wrote || self.pending() > ONE_SEGMENT)
        {
            self.s.set_nodelay(true)?;
            self.nodelay = true;
        }
        while self.wpos < self.out.len() {
            match RawStream(&self.s).write(&self.out[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wpos += n;
                    self.last = now;
                    self.wrote = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.out.len() {
            self.out.clear();
            self.wpos = 0;
            if self.out.capacity() > 2 * OUT_HIGH {
                self.out = Vec::new();
            }
        } else if self.wpos >= OUT_HIGH {
            self.out.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(())
    }
}

/// Why a connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// The peer closed (end of stream).
    Eof,
    Reset,
    Idle,
    /// A frame broke the rules (counted where it was found).
    Broken,
    /// The server stops.
    End,
}

const LISTEN: u64 = u64::MAX;

/// Reads per connection per wake-up, so one busy peer cannot starve the rest.
const READS_PER_WAKE: usize = 8;

/// Connections a spinning worker reads itself on every turn (a read that
/// finds nothing each), outside its epoll set: a socket in an epoll set
/// has the kernel add it to the set's ready list, under the set's lock,
/// as each segment arrives (on the sender's CPU, for TCP over a veth),
/// while the spinning worker takes that lock in every `epoll_wait`. More
/// connections than this wait in the epoll set.
const DIRECT_MAX: usize = 4;

/// Whether a turn of the worker's loop waits on (or, spinning, looks at)
/// its epoll set. A spinning worker whose connections are all read
/// directly has only the listener there: it looks once every
/// [`SPARE_EVERY`] turns (a new connection waits some microseconds more),
/// not an `epoll_wait` system call per turn beside each direct read.
fn polls_set(spin: bool, in_set: usize, turn: u32) -> bool {
    !spin || in_set > 0 || turn.is_multiple_of(SPARE_EVERY)
}

pub(super) struct Worker<'a> {
    cfg: &'a TcpServerConfig,
    listener: &'a TcpListener,
    limits: &'a Limits,
    ep: Epoll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// The connections read directly (spinning only; at most DIRECT_MAX).
    direct: Vec<usize>,
    c: TcpServerCounts,
    now: Instant,
}

impl<'a> Worker<'a> {
    pub(super) fn new(
        cfg: &'a TcpServerConfig,
        listener: &'a TcpListener,
        limits: &'a Limits,
    ) -> io::Result<Self> {
        let ep = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        ep.add(listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTEN))?;
        Ok(Self {
            cfg,
            listener,
            limits,
            ep,
            conns: Vec::new(),
            free: Vec::new(),
            direct: Vec::new(),
            c: TcpServerCounts::default(),
            now: Instant::now(),
        })
    }

    pub(super) fn serve(&mut self, sh: &Mutex<TcpServerCounts>, end: &AtomicBool) {
        const SPIN_PUBLISH: Duration = Duration::from_millis(1);
        let mut events = vec![EpollEvent::empty(); 256];
        let timeout = if self.cfg.spin {
            EpollTimeout::ZERO
        } else {
            EpollTimeout::from(20u8)
        };
        let mut last_sweep = Instant::now();
        let mut published = last_sweep;
        let mut turn = 0u32;
        while !end.load(Ordering::Relaxed) {
            let in_set = (self.conns.len() - self.free.len()).saturating_sub(self.direct.len());
            let mut n = if polls_set(self.cfg.spin, in_set, turn) {
                self.ep.wait(&mut events, timeout).unwrap_or(0)
            } else {
                0
            };
            turn = turn.wrapping_add(1);
            self.now = Instant::now();
            for ev in &events[..n] {
                match ev.data() {
                    LISTEN => self.accept_one(),
                    i => {
                        self.service(i as usize);
                    }
                }
            }
            for k in 0..self.direct.len() {
                if let Some(&i) = self.direct.get(k) {
                    n += usize::from(self.service(i));
                }
            }
            if self.now.duration_since(last_sweep) >= Duration::from_millis(50) {
                self.sweep_idle();
                last_sweep = self.now;
            }
            // The counts for the sampler: after work, and while spinning
            // idle at most every millisecond (not a lock per empty turn).
            if n > 0 || (self.cfg.spin && self.now.duration_since(published) >= SPIN_PUBLISH) {
                *sh.lock().unwrap_or_else(|e| e.into_inner()) = self.c;
                published = self.now;
            }
        }
        for i in 0..self.conns.len() {
            if let Some(conn) = self.conns[i].take() {
                self.close(i, conn, Close::End);
            }
        }
        *sh.lock().unwrap_or_else(|e| e.into_inner()) = self.c;
    }

    /// Takes one connection waiting on the listener, refusing it if it is
    /// over the limits. One per wake-up: the listener waits
    /// level-triggered, so another one waiting makes the next wait return
    /// at once, while an accept that finds none costs nearly what one that
    /// finds one does (the kernel makes the socket and its file before it
    /// looks, then frees them): accepting until EAGAIN paid that for every
    /// wake-up, a connection's worth per connection under TCP_CRR.
    fn accept_one(&mut self) {
        let (s, peer) = loop {
            // Made non-blocking by accept4 itself (no ioctl after).
            let flags = nix::libc::SOCK_NONBLOCK | nix::libc::SOCK_CLOEXEC;
            match socket2::SockRef::from(&self.listener).accept4(flags) {
                Ok((s, a)) => match a.as_socket() {
                    Some(peer) => break (TcpStream::from(s), peer),
                    None => {
                        self.c.accept_errors += 1;
                        return;
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.c.accept_errors += 1;
                    return;
                }
            }
        };
        match self.limits.admit(peer.ip(), self.cfg) {
            Err(Refusal::Total) => self.c.refused_total += 1,
            Err(Refusal::Source) => self.c.refused_source += 1,
            Ok(()) => self.adopt(s, peer.ip()),
        }
    }

    fn adopt(&mut self, s: TcpStream, peer: IpAddr) {
        if self.cfg.busy_poll_us > 0 {
            linerate_backend::sockopt::set_busy_poll(&s, self.cfg.busy_poll_us).ok();
        }
        let i = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let direct = self.cfg.spin && self.direct.len() < DIRECT_MAX;
        let ready = if direct {
            self.direct.push(i);
            Ok(())
        } else {
            self.ep
                .add(&s, EpollEvent::new(EpollFlags::EPOLLIN, i as u64))
        };
        self.c.accepted += 1;
        let conn = Conn {
            s,
            peer,
            rd: FrameReader::new(if self.cfg.max_message == 0 {
                TCP_MESSAGE_MAX
            } else {
                self.cfg.max_message
            }),
            out: Vec::new(),
            wpos: 0,
            last: self.now,
            interest: EpollFlags::EPOLLIN,
            direct,
            nodelay: false,
            wrote: false,
        };
        if ready.is_err() {
            self.close(i, conn, Close::Reset);
        } else {
            self.conns[i] = Some(conn);
        }
    }

    fn close(&mut self, i: usize, conn: Conn, why: Close) {
        if conn.direct {
            self.direct.retain(|&d| d != i);
        }
        // (An epoll set forgets a socket when its last descriptor closes,
        // as `conn` does at the end of this call: no EPOLL_CTL_DEL.)
        self.limits.release(conn.peer);
        self.c.closed += 1;
        self.c.unsent_bytes += conn.pending() as u64;
        match why {
            Close::Reset => self.c.resets += 1,
            Close::Idle => self.c.idle_closed += 1,
            Close::Eof | Close::Broken | Close::End => {}
        }
        self.free.push(i);
    }

    fn sweep_idle(&mut self) {
        for i in 0..self.conns.len() {
            let idle = self.conns[i]
                .as_ref()
                .is_some_and(|c| self.now.duration_since(c.last) >= self.cfg.idle_timeout);
            if idle && let Some(conn) = self.conns[i].take() {
                self.close(i, conn, Close::Idle);
            }
        }
    }

    /// Everything connection `i` is ready for: write what waits, answer
    /// the frames buffered, read more while there is room for answers.
    /// Returns whether it answered anything.
    fn service(&mut self, i: usize) -> bool {
        let Some(mut conn) = self.conns.get_mut(i).and_then(Option::take) else {
            return false;
        };
        let answered = self.c.answered;
        match self.pump(&mut conn) {
            Ok(()) if conn.direct => self.conns[i] = Some(conn),
            Ok(()) => {
                let want = if conn.pending() >= OUT_HIGH {
                    EpollFlags::EPOLLOUT
                } else if conn.pending() > 0 {
                    EpollFlags::EPOLLIN | EpollFlags::EPOLLOUT
                } else {
                    EpollFlags::EPOLLIN
                };
                if want != conn.interest {
                    conn.interest = want;
                    let mut ev = EpollEvent::new(want, i as u64);
                    if self.ep.modify(&conn.s, &mut ev).is_err() {
                        self.close(i, conn, Close::Reset);
                        return self.c.answered != answered;
                    }
                }
                self.conns[i] = Some(conn);
            }
            Err(why) => self.close(i, conn, why),
        }
        self.c.answered != answered
    }

    fn pump(&mut self, conn: &mut Conn) -> Result<(), Close> {
        let failed = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof => Close::Eof,
            _ => Close::Reset,
        };
        conn.flush(self.now).map_err(failed)?;
        let mut reads = 0;
        loop {
            self.answer_frames(conn)?;
            if conn.pending() >= OUT_HIGH || reads == READS_PER_WAKE {
                break;
            }
            reads += 1;
            match conn.rd.fill(&mut RawStream(&conn.s)) {
                Ok(0) => {
                    // The peer is done sending: what it asked is answered
                    // as far as the kernel takes it now, then closed.
                    conn.flush(self.now).ok();
                    return Err(Close::Eof);
                }
                Ok(_) => {
                    conn.last = self.now;
                    if conn.rd.last_read_short() {
                        // The socket is empty: answer and go (a read to
                        // hear EAGAIN cost a system call per request).
                        self.answer_frames(conn)?;
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(failed(e)),
            }
        }
        conn.flush(self.now).map_err(failed)
    }

    /// Answers the whole frames buffered on `conn` while its output has room.
    fn answer_frames(&mut self, conn: &mut Conn) -> Result<(), Close> {
        while conn.pending() < OUT_HIGH {
            let msg = match conn.rd.next_frame() {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(()),
                Err(FrameError::TooLong(_)) => {
                    self.c.oversized += 1;
                    return Err(Close::Broken);
                }
                Err(FrameError::TooShort(_)) => {
                    self.c.malformed += 1;
                    return Err(Close::Broken);
                }
            };
            let len = msg.len();
            let Ok(h) = RrHeader::make_response(msg) else {
                self.c.malformed += 1;
                return Err(Close::Broken);
            };
            let out = match answer_len(
                h.reply_len,
                len,
                conn.peer,
                &self.cfg.allow,
                self.cfg.max_response,
            ) {
                Some(out) => out,
                None => {
                    self.c.too_large += 1;
                    continue;
                }
            };
            self.c.requests += 1;
            self.c.answered += 1;
            self.c.bytes_in += len as u64;
            self.c.bytes_out += out as u64;
            put_len(&mut conn.out, out);
            conn.out.extend_from_slice(&msg[..len.min(out)]);
            conn.out.resize(conn.out.len() + out.saturating_sub(len), 0);
        }
        Ok(())
    }
}

/// The size of the answer to a `len`-byte request asking for `asked`
/// (0: its own size), or None when `peer` may not have it: never larger
/// than the request unless the peer is in `allow`, then up to
/// `max_response`.
pub fn answer_len(
    asked: u32,
    len: usize,
    peer: IpAddr,
    allow: &[Prefix],
    max_response: usize,
) -> Option<usize> {
    let out = if asked == 0 { len } else { asked as usize };
    if !(RR_HEADER_LEN..=TCP_MESSAGE_MAX).contains(&out) {
        return None;
    }
    let limit = if out > len && allow.iter().any(|p| p.contains(peer)) {
        max_response
    } else {
        len
    };
    (out <= limit).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_worker_looks_at_its_set_only_when_it_must() {
        // blocking: every turn waits in epoll
        assert!((0..200).all(|t| polls_set(false, 0, t)));
        // connections in the set: every turn
        assert!((0..200).all(|t| polls_set(true, 1, t)));
        // only the listener: once every SPARE_EVERY turns
        let looks = (0..4 * SPARE_EVERY).filter(|&t| polls_set(true, 0, t));
        assert_eq!(
            looks.collect::<Vec<_>>(),
            [0, 1, 2, 3].map(|k| k * SPARE_EVERY)
        );
    }

    /// A connected pair's accepted end as the server keeps it.
    fn accepted_conn() -> (Conn, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let conn = Conn {
            s,
            peer: peer.ip(),
            rd: FrameReader::new(TCP_MESSAGE_MAX),
            out: Vec::new(),
            wpos: 0,
            last: Instant::now(),
            interest: EpollFlags::EPOLLIN,
            direct: false,
            nodelay: false,
            wrote: false,
        };
        (conn, client)
    }

    #[test]
    fn nodelay_is_set_from_the_second_write_or_for_a_long_first() {
        let (mut c, _client) = accepted_conn();
        // nothing to write: nothing set
        c.flush(Instant::now()).unwrap();
        assert!(!c.nodelay && !c.s.nodelay().unwrap());
        // a first write of one segment: Nagle holds nothing back, not set
        c.out.extend_from_slice(&[7u8; ONE_SEGMENT]);
        c.flush(Instant::now()).unwrap();
        assert!(c.wrote && !c.nodelay && !c.s.nodelay().unwrap());
        // the second write: set on the socket before it goes
        c.out.extend_from_slice(&[7u8; 10]);
        c.flush(Instant::now()).unwrap();
        assert!(c.nodelay && c.s.nodelay().unwrap());
        // a first write longer than a segment: set before it goes
        let (mut c, _client) = accepted_conn();
        c.out.extend_from_slice(&[7u8; ONE_SEGMENT + 1]);
        c.flush(Instant::now()).unwrap();
        assert!(c.nodelay && c.s.nodelay().unwrap());
    }

    #[test]
    fn answers_are_no_larger_than_requests_unless_allowed() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "192.0.2.1".parse().unwrap();
        let allow = [Prefix::parse("127.0.0.0/8").unwrap()];
        assert_eq!(answer_len(0, 100, other, &[], 0), Some(100));
        assert_eq!(answer_len(64, 100, other, &[], 0), Some(64));
        assert_eq!(answer_len(512, 100, other, &allow, 4096), None);
        assert_eq!(answer_len(512, 100, lo, &allow, 4096), Some(512));
        assert_eq!(answer_len(8192, 100, lo, &allow, 4096), None);
        assert_eq!(answer_len(31, 100, lo, &allow, 4096), None);
        assert_eq!(answer_len(u32::MAX, 100, lo, &allow, usize::MAX), None);
    }
}
