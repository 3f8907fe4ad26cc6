//! How a spinning worker (the UDP server's `--spin`, the client's
//! `--busy-poll`) spends a poll that found nothing.
//!
//! Where the socket's interface receives in a NAPI kernel thread
//! (`/sys/class/net/IF/threaded`), that thread may share the worker's CPU
//! and delivers the next packet only when it runs: the worker yields the
//! CPU after every empty poll. On the kernel's default path there is no
//! such thread: a veth (or a NIC's interrupt) processes a packet in the
//! softirq of the CPU that sent (or took the interrupt), so a yield
//! there is one more system call per empty poll and nothing else. The
//! worker then yields only once every [`SPARE_EVERY`] empty polls, so that
//! another thread made ready on its CPU still gets it soon.

use std::net::IpAddr;

/// Empty polls between two yields where no NAPI thread needs the CPU.
pub const SPARE_EVERY: u32 = 64;

/// A spinning worker's yield policy and its count of empty polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spin {
    /// Yield once every `every` empty polls (1: after each).
    every: u32,
    empty: u32,
}

impl Spin {
    /// The policy for a receive path with (Some(true)) or without threaded
    /// NAPI; not known (None): without, the kernel's default.
    pub fn new(threaded: Option<bool>) -> Self {
        Spin {
            every: if threaded == Some(true) {
                1
            } else {
                SPARE_EVERY
            },
            empty: 0,
        }
    }

    /// The policy for a socket whose local address is `local`: threaded
    /// when the interface that holds it has threaded NAPI, or, bound to
    /// every address, when any interface has.
    pub fn for_local(local: Option<IpAddr>) -> Self {
        use linerate_backend::iface;
        let threaded = match local {
            Some(ip) if !ip.is_unspecified() => {
                iface::of_addr(ip).and_then(|i| iface::threaded_napi(&i))
            }
            _ => Some(iface::any_threaded_napi()),
        };
        Self::new(threaded)
    }

    /// Whether this policy yields after every empty poll.
    pub fn yields_always(&self) -> bool {
        self.every == 1
    }

    /// A poll found nothing: whether to yield the CPU now.
    #[inline]
    pub fn empty(&mut self) -> bool {
        self.empty += 1;
        if self.empty >= self.every {
            self.empty = 0;
            true
        } else {
            false
        }
    }

    /// A poll found something: the count of empty polls starts again.
    #[inline]
    pub fn got(&mut self) {
        self.empty = 0;
    }

    /// Counts an empty poll and yields when the policy says so.
    #[inline]
    pub fn idle(&mut self) {
        if self.empty() {
            std::thread::yield_now();
        }
    }
}

/// How many datagrams a worker's next receive asks for. A blocking
/// worker asks for its whole batch each time. A spinning one starts at
/// one, which costs the least (`recvfrom`, see
/// `Reflector::recv_upto`): a ping-pong's request comes alone, and a
/// batch's receive would look for a second behind it. It doubles its ask
/// after two receives in a row that came back full (requests queue
/// faster than it takes them: a load), up to the batch, and drops back to
/// what came when a receive was not full, to one after an empty poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    want: usize,
    max: usize,
    adapt: bool,
    /// The last receive came back full.
    full: bool,
}

impl Fill {
    /// A spinning worker's (`spin`) or a blocking one's ask, with a batch
    /// of `max`.
    pub fn new(spin: bool, max: usize) -> Self {
        let max = max.max(1);
        Fill {
            want: if spin { 1 } else { max },
            max,
            adapt: spin,
            full: false,
        }
    }

    /// Datagrams to ask for now.
    #[inline]
    pub fn want(&self) -> usize {
        self.want
    }

    /// A receive that asked for [`want`](Self::want) got `n` (at least one).
    #[inline]
    pub fn got(&mut self, n: usize) {
        if !self.adapt {
            return;
        }
        let full = n >= self.want;
        self.want = if full && self.full {
            (self.want * 2).min(self.max)
        } else if full {
            self.want
        } else {
            n.max(1)
        };
        self.full = full;
    }

    /// A receive found nothing.
    #[inline]
    pub fn empty(&mut self) {
        if self.adapt {
            self.want = 1;
            self.full = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yields(s: &mut Spin, polls: u32) -> u32 {
        (0..polls).filter(|_| s.empty()).count() as u32
    }

    #[test]
    fn threaded_napi_yields_after_every_empty_poll() {
        let mut s = Spin::new(Some(true));
        assert!(s.yields_always());
        assert_eq!(yields(&mut s, 10), 10);
    }

    #[test]
    fn default_path_yields_once_every_spare_polls() {
        for threaded in [Some(false), None] {
            let mut s = Spin::new(threaded);
            assert!(!s.yields_always());
            assert_eq!(yields(&mut s, SPARE_EVERY - 1), 0);
            assert!(s.empty());
            assert_eq!(yields(&mut s, 3 * SPARE_EVERY), 3);
        }
    }

    #[test]
    fn a_poll_that_got_something_restarts_the_count() {
        let mut s = Spin::new(Some(false));
        assert_eq!(yields(&mut s, SPARE_EVERY - 1), 0);
        s.got();
        assert_eq!(yields(&mut s, SPARE_EVERY - 1), 0);
        assert!(s.empty());
    }

    #[test]
    fn loopback_is_the_default_path() {
        // lo has no NAPI thread: its `threaded` reads 0 or is absent.
        let s = Spin::for_local(Some(IpAddr::from([127, 0, 0, 1])));
        assert!(!s.yields_always());
    }

    #[test]
    fn a_blocking_worker_always_asks_for_its_batch() {
        let mut f = Fill::new(false, 64);
        assert_eq!(f.want(), 64);
        f.got(1);
        f.empty();
        assert_eq!(f.want(), 64);
    }

    #[test]
    fn a_ping_pong_asks_for_one_datagram_at_a_time() {
        let mut f = Fill::new(true, 64);
        for _ in 0..5 {
            assert_eq!(f.want(), 1);
            f.got(1);
            assert_eq!(f.want(), 1, "one full receive is not a load");
            f.empty();
        }
    }

    #[test]
    fn a_load_doubles_the_ask_up_to_the_batch_and_an_empty_poll_ends_it() {
        let mut f = Fill::new(true, 64);
        let mut asks = vec![];
        for _ in 0..9 {
            asks.push(f.want());
            f.got(f.want());
        }
        assert_eq!(asks, [1, 1, 2, 4, 8, 16, 32, 64, 64]);
        f.got(10);
        assert_eq!(f.want(), 10, "a receive not full: what came");
        f.got(10);
        assert_eq!(f.want(), 10, "full once more: not yet doubled");
        f.got(10);
        assert_eq!(f.want(), 20);
        f.empty();
        assert_eq!(f.want(), 1);
    }
}
