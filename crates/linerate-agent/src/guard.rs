//! What keeps the agent serving honest clients under slow, half-open and
//! guessing ones: the connection slots ([`Slots`]: a bound in all and per
//! source address; a connection that has not sent its whole request head
//! is the one that gives way when a new one needs a slot), and failed
//! authentication slowed per source and logged ([`Failures`]). Of the
//! connections still waiting for their head, the one that gives way is
//! the one whose last byte is oldest: a client sending its request makes
//! progress every few milliseconds, a slow one every few seconds.
//!
//! No I/O but the shutdown of an evicted connection's socket; no clock
//! but the `now` given.

use std::collections::HashMap;
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections held at once, in all.
pub const CONNECTIONS_MAX: usize = 32;
/// Connections held at once from one source address.
pub const PER_SOURCE_MAX: usize = 8;
/// New connections a second one source address may open that do not
/// bring an authenticated request (after a burst of [`NEW_BURST`]): a
/// TLS handshake costs the agent CPU, so a source that reconnects as fast
/// as it is closed cannot starve the others. A connection that brings an
/// authenticated request gives its token back: an honest client, however
/// often it asks, is never held back.
pub const NEW_PER_SECOND: f64 = 2.0;
pub const NEW_BURST: f64 = 16.0;

/// One connection's hold on a slot, shared by the accept loop and the
/// connection's thread.
#[derive(Debug)]
pub struct Held {
    id: u64,
    src: IpAddr,
    since: Instant,
    /// When a byte last arrived, nanoseconds after `since`.
    progress_ns: std::sync::atomic::AtomicU64,
    /// Its whole request head arrived (an honest client's does at once).
    head_done: AtomicBool,
    /// Given way to a newer connection: its thread ends.
    evicted: AtomicBool,
    /// A handle to the socket, shut down on eviction (a blocked read
    /// returns at once).
    sock: Option<TcpStream>,
}

impl Held {
    pub fn evicted(&self) -> bool {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Bytes arrived at `now`.
    pub fn progressed(&self, now: Instant) {
        let ns = now.saturating_duration_since(self.since).as_nanos();
        self.progress_ns
            .store(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn last_progress(&self) -> Instant {
        self.since + Duration::from_nanos(self.progress_ns.load(Ordering::Relaxed))
    }

    /// Its request head is in: it no longer gives way.
    pub fn head_done(&self) {
        self.head_done.store(true, Ordering::Relaxed);
    }

    /// Between requests again (a connection that carries one after
    /// another, as gRPC's does): it gives way to a new connection as one
    /// waiting for its head does.
    pub fn waiting_again(&self) {
        self.head_done.store(false, Ordering::Relaxed);
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Relaxed);
        if let Some(s) = &self.sock {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The slots: who holds one, since when, and whether it could give way.
#[derive(Debug, Default)]
pub struct Slots {
    held: Mutex<Vec<Arc<Held>>>,
    next: std::sync::atomic::AtomicU64,
    /// Each source's bucket of new connections: (tokens, when filled).
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

/// Why a connection got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its source holds its share, every one of them busy with a request.
    SourceFull,
    /// Every slot is busy with a request.
    Full,
    /// Its source opens connections faster than [`NEW_PER_SECOND`].
    TooFast,
}

impl Slots {
    /// A slot for a connection from `src` at `now`: free, or taken from
    /// the connection waiting for its request head whose last byte is
    /// oldest (of
    /// this source when it holds its share, else of the source that holds
    /// most), which is shut down. `sock`: a handle to shut it down in
    /// turn.
    pub fn admit(
        &self,
        src: IpAddr,
        sock: Option<TcpStream>,
        now: Instant,
    ) -> Result<Arc<Held>, Refused> {
        self.take_token(src, now)?;
        let mut held = lock(&self.held);
        let mine = held.iter().filter(|h| h.src == src).count();
        if mine >= PER_SOURCE_MAX {
            let k = oldest_waiting(&held, |h| h.src == src).ok_or(Refused::SourceFull)?;
            held.swap_remove(k).evict();
        } else if held.len() >= CONNECTIONS_MAX {
            let most = busiest(&held);
            let k = oldest_waiting(&held, |h| h.src == most)
                .or_else(|| oldest_waiting(&held, |_| true))
                .ok_or(Refused::Full)?;
            held.swap_remove(k).evict();
        }
        let h = Arc::new(Held {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            src,
            since: now,
            progress_ns: std::sync::atomic::AtomicU64::new(0),
            head_done: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            sock,
        });
        held.push(h.clone());
        Ok(h)
    }

    /// One of `src`'s new-connection tokens, if it has one.
    fn take_token(&self, src: IpAddr, now: Instant) -> Result<(), Refused> {
        let mut b = lock(&self.buckets);
        if b.len() >= SOURCES_MAX && !b.contains_key(&src) {
            // Full buckets are forgotten first: they are the defaults.
            b.retain(|_, (t, at)| {
                *t + now.saturating_duration_since(*at).as_secs_f64() * NEW_PER_SECOND < NEW_BURST
            });
            if b.len() >= SOURCES_MAX {
                b.clear();
            }
        }
        let (tokens, at) = b.entry(src).or_insert((NEW_BURST, now));
        *tokens = (*tokens + now.saturating_duration_since(*at).as_secs_f64() * NEW_PER_SECOND)
            .min(NEW_BURST);
        *at = now;
        if *tokens < 1.0 {
            return Err(Refused::TooFast);
        }
        *tokens -= 1.0;
        Ok(())
    }

    /// The connection brought an authenticated request: its source gets
    /// back the token it took.
    pub fn authenticated(&self, h: &Held) {
        if let Some((t, _)) = lock(&self.buckets).get_mut(&h.src) {
            *t = (*t + 1.0).min(NEW_BURST);
        }
    }

    /// The connection ended: its slot is free.
    pub fn release(&self, h: &Held) {
        lock(&self.held).retain(|x| x.id != h.id);
    }

    pub fn len(&self) -> usize {
        lock(&self.held).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Of the connections matching `which` still waiting for their request
/// head, the one whose last byte is oldest.
fn oldest_waiting(held: &[Arc<Held>], which: impl Fn(&Held) -> bool) -> Option<usize> {
    held.iter()
        .enumerate()
        .filter(|(_, h)| which(h) && !h.head_done.load(Ordering::Relaxed))
        .min_by_key(|(_, h)| h.last_progress())
        .map(|(k, _)| k)
}

/// The source holding most slots.
fn busiest(held: &[Arc<Held>]) -> IpAddr {
    let mut n: HashMap<IpAddr, usize> = HashMap::new();
    for h in held {
        *n.entry(h.src).or_default() += 1;
    }
    n.into_iter()
        .max_by_key(|(_, c)| *c)
        .map_or(IpAddr::from([0u8; 4]), |(a, _)| a)
}

/// Failed authentication per source: each failure within
/// [`FAILURES_KEPT`] of the last makes the next answer to that source
/// wait longer (none for the first [`FREE_FAILURES`], then doubling from
/// 50 ms to [`DELAY_MAX`]); logged with the source, once a second at most
/// per source with the count since.
#[derive(Debug, Default)]
pub struct Failures {
    by_source: Mutex<HashMap<IpAddr, Record>>,
}

#[derive(Debug, Clone, Copy)]
struct Record {
    count: u32,
    last: Instant,
    logged: Option<Instant>,
    unlogged: u32,
}

pub const FREE_FAILURES: u32 = 3;
pub const DELAY_MAX: Duration = Duration::from_secs(5);
pub const FAILURES_KEPT: Duration = Duration::from_secs(60);
/// Sources remembered at most (the oldest forgotten first).
const SOURCES_MAX: usize = 4096;

/// What to do with a failed authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// How long the answer waits.
    pub delay: Duration,
    /// A line to log now, if one is due.
    pub log: Option<String>,
}

impl Failures {
    /// A failed authentication from `src` at `now` (`why`: what was
    /// wrong): the delay of its answer and the line to log.
    pub fn failed(&self, src: IpAddr, why: &str, now: Instant) -> Verdict {
        let mut m = lock(&self.by_source);
        if m.len() >= SOURCES_MAX && !m.contains_key(&src) {
            m.retain(|_, r| now.duration_since(r.last) < FAILURES_KEPT);
            if m.len() >= SOURCES_MAX
                && let Some(old) = m.iter().min_by_key(|(_, r)| r.last).map(|(a, _)| *a)
            {
                m.remove(&old);
            }
        }
        let r = m.entry(src).or_insert(Record {
            count: 0,
            last: now,
            logged: None,
            unlogged: 0,
        });
        if now.duration_since(r.last) >= FAILURES_KEPT {
            r.count = 0;
        }
        r.count = r.count.saturating_add(1);
        r.last = now;
        r.unlogged += 1;
        let delay = delay_after(r.count);
        let log = match r.logged {
            Some(t) if now.duration_since(t) < Duration::from_secs(1) => None,
            _ => {
                let line = format!(
                    "linerate agent: refused {} request{} from {src}: {why} ({} failed in a row from it; its answers now wait {} ms)",
                    r.unlogged,
                    if r.unlogged == 1 { "" } else { "s" },
                    r.count,
                    delay.as_millis()
                );
                r.logged = Some(now);
                r.unlogged = 0;
                Some(line)
            }
        };
        Verdict { delay, log }
    }

    /// An authenticated request from `src`: its failures are forgotten.
    pub fn succeeded(&self, src: IpAddr) {
        lock(&self.by_source).remove(&src);
    }
}

/// The wait after the `n`th failure in a row.
pub fn delay_after(n: u32) -> Duration {
    if n <= FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = (n - FREE_FAILURES - 1).min(16);
    (Duration::from_millis(50) * (1u32 << doublings)).min(DELAY_MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([198, 18, 0, last])
    }

    #[test]
    fn a_full_source_gives_way_from_its_oldest_waiting_connection() {
        let s = Slots::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut a: Vec<Arc<Held>> = (0..PER_SOURCE_MAX as u64)
            .map(|k| s.admit(ip(1), None, at(k)).unwrap())
            .collect();
        // The oldest has its head; the second sent a byte lately: the
        // third, silent longest, gives way.
        a[0].head_done();
        a[1].progressed(at(90));
        let n = s.admit(ip(1), None, at(100)).unwrap();
        assert!(!a[0].evicted() && !a[1].evicted() && a[2].evicted());
        assert_eq!(s.len(), PER_SOURCE_MAX);
        // Every one busy with a request: the source is refused.
        for h in a.iter().skip(1).chain([&n]) {
            h.head_done();
        }
        assert_eq!(
            s.admit(ip(1), None, at(200)).unwrap_err(),
            Refused::SourceFull
        );
        // Another source still gets a slot.
        assert!(s.admit(ip(2), None, at(300)).is_ok());
        a.drain(..).for_each(|h| s.release(&h));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn a_full_house_takes_the_slot_from_the_busiest_source() {
        let s = Slots::default();
        let t0 = Instant::now();
        let mut k = 0u64;
        let mut admit = |src: IpAddr| {
            k += 1;
            s.admit(src, None, t0 + Duration::from_millis(k)).unwrap()
        };
        // Four sources of 8, 8, 8 and 8: full.
        let all: Vec<_> = (0..CONNECTIONS_MAX)
            .map(|i| admit(ip(1 + (i / PER_SOURCE_MAX) as u8)))
            .collect();
        // Source 1 is done with its heads; the others wait.
        for h in &all[..PER_SOURCE_MAX] {
            h.head_done();
        }
        let honest = admit(ip(9));
        // A waiting one gave way, never one busy with its request.
        let gone: Vec<_> = all.iter().filter(|h| h.evicted()).collect();
        assert_eq!(gone.len(), 1);
        assert!(all[..PER_SOURCE_MAX].iter().all(|h| !h.evicted()));
        assert_eq!(s.len(), CONNECTIONS_MAX);
        for h in all.iter().chain([&honest]) {
            h.head_done();
        }
        assert_eq!(
            s.admit(ip(10), None, t0 + Duration::from_secs(1))
                .unwrap_err(),
            Refused::Full
        );
    }

    #[test]
    fn a_source_that_reconnects_too_fast_is_refused_at_accept() {
        let s = Slots::default();
        let t0 = Instant::now();
        for k in 0..NEW_BURST as u64 {
            let h = s
                .admit(ip(1), None, t0)
                .unwrap_or_else(|e| panic!("{k}: {e:?}"));
            s.release(&h);
        }
        assert_eq!(s.admit(ip(1), None, t0).unwrap_err(), Refused::TooFast);
        // Another source is not.
        assert!(s.admit(ip(2), None, t0).is_ok());
        // A second later, two more.
        let later = t0 + Duration::from_secs(1);
        for _ in 0..NEW_PER_SECOND as u64 {
            let h = s.admit(ip(1), None, later).unwrap();
            s.release(&h);
        }
        assert_eq!(s.admit(ip(1), None, later).unwrap_err(), Refused::TooFast);
        // An honest client's connections give their tokens back: it is
        // never held back, however often it asks.
        for _ in 0..1000 {
            let h = s.admit(ip(3), None, later).unwrap();
            s.authenticated(&h);
            s.release(&h);
        }
    }

    #[test]
    fn failures_slow_their_source_and_are_logged_once_a_second() {
        assert_eq!(delay_after(3), Duration::ZERO);
        assert_eq!(delay_after(4), Duration::from_millis(50));
        assert_eq!(delay_after(5), Duration::from_millis(100));
        assert_eq!(delay_after(40), DELAY_MAX);
        let f = Failures::default();
        let t0 = Instant::now();
        let v: Vec<Verdict> = (0..10)
            .map(|k| f.failed(ip(1), "a wrong token", t0 + Duration::from_millis(10 * k)))
            .collect();
        assert_eq!(v[0].delay, Duration::ZERO);
        assert_eq!(v[9].delay, Duration::from_millis(50 << 6));
        let logged: Vec<_> = v.iter().filter_map(|v| v.log.clone()).collect();
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert!(
            logged[0].contains("from 198.18.0.1: a wrong token"),
            "{}",
            logged[0]
        );
        // A second on: one line with the count since.
        let later = f.failed(ip(1), "a wrong token", t0 + Duration::from_secs(2));
        assert!(
            later
                .log
                .unwrap()
                .starts_with("linerate agent: refused 10 requests")
        );
        // Another source is not slowed; a success forgets.
        assert_eq!(f.failed(ip(2), "no token", t0).delay, Duration::ZERO);
        f.succeeded(ip(1));
        assert_eq!(
            f.failed(ip(1), "x", t0 + Duration::from_secs(3)).delay,
            Duration::ZERO
        );
        // A minute quiet: forgotten too.
        for k in 0..6 {
            f.failed(ip(3), "x", t0 + Duration::from_millis(k));
        }
        assert_eq!(
            f.failed(ip(3), "x", t0 + Duration::from_secs(61)).delay,
            Duration::ZERO
        );
    }
}
