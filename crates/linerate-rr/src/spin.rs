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
}
