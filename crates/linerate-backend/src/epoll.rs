//! A fixed set of descriptors waited on together: one epoll set, each
//! descriptor registered once (level-triggered, readable) with its index,
//! so a wait costs what is ready rather than a poll of every descriptor
//! with its wait-queue entries put up and taken down each time (ppoll's
//! way). The wait's timeout is in nanoseconds through epoll_pwait2
//! (Linux 5.11); before it, a wait under a millisecond (epoll_wait counts
//! in milliseconds) looks without waiting, then waits in ppoll on the
//! epoll descriptor, then takes the events.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Descriptors waited on together; each ready one given back by its index.
#[derive(Debug)]
pub struct EpollSet {
    ep: OwnedFd,
    events: Vec<libc::epoll_event>,
    /// epoll_pwait2 is there (until a call says ENOSYS).
    pwait2: bool,
}

impl EpollSet {
    /// A set of `fds`, each waited on for input, known by its index.
    pub fn new(fds: &[impl AsRawFd]) -> io::Result<Self> {
        // SAFETY: a plain system call; the descriptor it returns is ours.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ep` is a fresh descriptor nothing else owns.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        for (i, fd) in fds.iter().enumerate() {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: i as u64,
            };
            // SAFETY: `ev` is live for the call; both descriptors are open.
            let rc = unsafe {
                libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev)
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Self {
            ep,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; fds.len().max(1)],
            pwait2: true,
        })
    }

    /// Waits at most `timeout` for input on any descriptor (what is ready
    /// already comes back at once); how many are ready (0: none in time,
    /// or interrupted). [`index`](Self::index) names each.
    pub fn wait(&mut self, timeout: Duration) -> usize {
        if self.pwait2 {
            match self.pwait2(timeout) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => self.pwait2 = false,
                r => return r.unwrap_or(0),
            }
        }
        self.wait_ms(timeout)
    }

    /// The index of the `k`-th descriptor the last wait found ready.
    #[inline]
    pub fn index(&self, k: usize) -> usize {
        let e = self.events[k];
        e.u64 as usize
    }

    fn pwait2(&mut self, timeout: Duration) -> io::Result<usize> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: `events` is live and writable for its length, `ts` for the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.ep.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        crate::udp_batch::done(rc)
    }

    /// epoll_wait with a timeout in milliseconds.
    fn epoll_wait(&mut self, ms: libc::c_int) -> usize {
        // SAFETY: `events` is live and writable for its length.
        let rc = unsafe {
            libc::epoll_wait(
                self.ep.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                ms,
            )
        };
        rc.max(0) as usize
    }

    /// The wait where epoll_pwait2 is missing.
    fn wait_ms(&mut self, timeout: Duration) -> usize {
        if timeout >= Duration::from_millis(1) {
            return self.epoll_wait(timeout.as_millis().min(i32::MAX as u128) as libc::c_int);
        }
        let n = self.epoll_wait(0);
        if n > 0 || timeout.is_zero() {
            return n;
        }
        let mut pfd = libc::pollfd {
            fd: self.ep.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: `pfd` and `ts` are live for the call.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc > 0 { self.epoll_wait(0) } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Instant;

    fn ready(set: &EpollSet, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).map(|k| set.index(k)).collect();
        v.sort();
        v
    }

    #[test]
    fn names_the_ready_descriptors_by_index_and_waits_out_its_timeout() {
        let socks: Vec<UdpSocket> = (0..4)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut set = EpollSet::new(&socks).unwrap();
        let t = Instant::now();
        assert_eq!(set.wait(Duration::from_micros(300)), 0);
        assert!(t.elapsed() >= Duration::from_micros(300));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in [1, 3] {
            tx.send_to(b"x", socks[i].local_addr().unwrap()).unwrap();
        }
        let n = set.wait(Duration::from_secs(2));
        assert_eq!(ready(&set, n), [1, 3]);
        // level-triggered: still there until read
        let n = set.wait(Duration::ZERO);
        assert_eq!(ready(&set, n), [1, 3]);
        let mut buf = [0u8; 8];
        socks[1].recv(&mut buf).unwrap();
        let n = set.wait(Duration::ZERO);
        assert_eq!(ready(&set, n), [3]);
    }

    #[test]
    fn without_epoll_pwait2_sub_millisecond_waits_still_wait_and_see() {
        let socks = [UdpSocket::bind("127.0.0.1:0").unwrap()];
        let mut set = EpollSet::new(&socks).unwrap();
        set.pwait2 = false;
        let t = Instant::now();
        assert_eq!(set.wait(Duration::from_micros(500)), 0);
        assert!(t.elapsed() >= Duration::from_micros(500));
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .send_to(b"x", socks[0].local_addr().unwrap())
            .unwrap();
        assert_eq!(set.wait(Duration::from_micros(500)), 1);
        assert_eq!(set.index(0), 0);
    }
}
