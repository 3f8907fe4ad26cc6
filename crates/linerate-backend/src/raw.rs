//! Crafted frames through a raw AF_PACKET socket bound to one interface:
//! many frames per sendmmsg/recvmmsg call, optionally bypassing the qdisc.
//! (The mmap TPACKET_V3 ring backend and AF_XDP build on the same frames.)

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Most frames per call.
pub const RAW_BATCH_MAX: usize = 64;

fn setsockopt_int(fd: i32, level: i32, name: i32, v: i32) -> io::Result<()> {
    crate::sockopt::setsockopt_raw(fd, level, name, &v.to_ne_bytes())
}

/// A raw packet socket on one interface.
#[derive(Debug)]
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    addrs: Vec<libc::sockaddr_ll>,
    qdisc_bypass: bool,
    /// Control buffers for SCM_TIMESTAMPNS, one per message.
    cmsgs: Vec<[u64; 8]>,
}

// SAFETY: the pointers in iov/hdrs are rewritten before every call from
// buffers borrowed for that call.
unsafe impl Send for RawSocket {}

/// ETH_P_ALL in network byte order, as `socket(2)` and `sockaddr_ll` take it.
pub(crate) const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// A new AF_PACKET raw socket: receiving every protocol (`ETH_P_ALL`), or
/// nothing (protocol 0: a socket that only sends).
pub(crate) fn packet_socket(receive_all: bool) -> io::Result<OwnedFd> {
    let proto = if receive_all {
        i32::from(ETH_P_ALL_BE)
    } else {
        0
    };
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// PACKET_STATISTICS: packets, drops and (TPACKET_V3 only, else 0) queue
/// freezes since the last read (reading resets them).
pub(crate) fn packet_statistics(fd: i32) -> io::Result<[u32; 3]> {
    let mut st = [0u32; 3];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: a buffer big enough for struct tpacket_stats_v3 (the kernel
    // writes the smaller tpacket_stats for other versions).
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            st.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Binds an AF_PACKET socket to one interface, all protocols.
/// Joins packet socket `fd` (bound already) to fanout group `group` in hash
/// mode: the kernel spreads frames over the group's sockets by flow, so
/// each flow is read by one of them.
pub(crate) fn join_fanout(fd: i32, group: u16) -> io::Result<()> {
    join_fanout_with(fd, group, 0)
}

/// linux/if_packet.h: the group's members are not given the frames this
/// host sends (a socket's own PACKET_IGNORE_OUTGOING does not hold once
/// it is in a group: the group's hook takes the frames).
pub(crate) const PACKET_FANOUT_FLAG_IGNORE_OUTGOING: u32 = 0x4000;

/// [`join_fanout`] with fanout flags (every member of a group must give
/// the same).
pub(crate) fn join_fanout_with(fd: i32, group: u16, flags: u32) -> io::Result<()> {
    let arg = u32::from(group) | ((libc::PACKET_FANOUT_HASH | flags) << 16);
    setsockopt_int(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, arg as i32)
        .map_err(|e| io::Error::new(e.kind(), format!("PACKET_FANOUT: {e}")))
}

/// Attaches a classic BPF filter that drops every frame (`on`), or
/// detaches it: a socket that joins a fanout group late holds its frames
/// back meanwhile (see [`RawSocket::join_fanout_late`]).
pub(crate) fn drop_all(fd: i32, on: bool) -> io::Result<()> {
    let rc = if on {
        // One instruction: BPF_RET | BPF_K, 0 (keep 0 bytes: drop).
        let mut prog = [libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        }];
        let fprog = libc::sock_fprog {
            len: 1,
            filter: prog.as_mut_ptr(),
        };
        // SAFETY: `fprog` points at `prog`, alive for the call; the kernel copies it.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&fprog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        }
    } else {
        let zero: i32 = 0;
        // SAFETY: SO_DETACH_FILTER takes (and ignores) an int.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_DETACH_FILTER,
                (&zero as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(crate) fn bind_to(fd: i32, ifindex: i32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; zeroed is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL_BE;
    sll.sll_ifindex = ifindex;
    // SAFETY: valid sockaddr_ll of the size given.
    let rc = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A raw socket that sends frames built in place in its own staging
/// buffers, with sendmmsg: the message headers point at the buffers once,
/// so per frame only its length is written. What a refused call did not
/// send is sent before anything new is built.
#[derive(Debug)]
pub struct RawTx {
    pub sock: RawSocket,
    bufs: Vec<Box<[u8]>>,
    /// `iov[i]` covers `bufs[i]`; `hdrs[i]` points at `iov[i]`.
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// `bufs[sent..filled]` are built and not yet sent; the next run is
    /// built from `head` on (the buffers are used in turn, as a ring).
    sent: usize,
    filled: usize,
    head: usize,
}

// SAFETY: the pointers in iov/hdrs point into heap memory this value owns
// (the boxes and the iov vector, never resized), which moves with it.
unsafe impl Send for RawTx {}

impl RawTx {
    /// `slots` staging buffers of `len` bytes, used in turn (as deep as
    /// a TX ring, so a buffer comes back to the same flow as often as a
    /// ring slot does); each sendmmsg takes at most [`RAW_BATCH_MAX`].
    pub fn new(sock: RawSocket, slots: usize, len: usize) -> Self {
        let slots = slots.max(1);
        let mut bufs: Vec<Box<[u8]>> = (0..slots)
            .map(|_| vec![0u8; len].into_boxed_slice())
            .collect();
        let mut iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: 0,
            })
            .collect();
        let hdrs = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: a zeroed mmsghdr is valid; it then names one iovec.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = v;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        Self {
            sock,
            bufs,
            iov,
            hdrs,
            sent: 0,
            filled: 0,
            head: 0,
        }
    }

    pub fn slots(&self) -> usize {
        self.bufs.len()
    }

    pub fn slot_len(&self) -> usize {
        self.bufs.first().map_or(0, |b| b.len())
    }

    /// Builds up to `n` frames in the staging buffers (one
    /// `fill.build_each` over a run of them, each holding what was last
    /// built there) and sends them; returns the frames the kernel took
    /// and their bytes. Frames a full socket refused stay and go first on
    /// the next call.
    #[inline]
    pub fn send_with<F: crate::FrameSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        if self.sent == self.filled {
            // A run of buffers in a row (their headers are one array slice).
            let start = self.head;
            let n = n.min(RAW_BATCH_MAX).min(self.bufs.len() - start);
            let run = start..start + n;
            let len = self.slot_len();
            fill.build_each(&mut StagedBufs {
                bufs: self.bufs[run.clone()].iter_mut(),
                iov: self.iov[run].iter_mut(),
                slot: start,
                len,
            });
            self.sent = start;
            self.filled = start + n;
            self.head = if start + n == self.bufs.len() {
                0
            } else {
                start + n
            };
        }
        if self.sent == self.filled {
            return Ok((0, 0));
        }
        let fd = self.sock.fd.as_raw_fd();
        // hdrs point at iovs that point at this value's buffers.
        let k = crate::udp_batch::send_prepared(fd, &mut self.hdrs[self.sent..self.filled])?;
        let bytes = self.iov[self.sent..self.sent + k]
            .iter()
            .map(|v| v.iov_len as u64)
            .sum();
        self.sent += k;
        Ok((k, bytes))
    }
}

/// A run of [`RawTx`]'s staging buffers for one batch (see
/// [`FrameSource::build_each`](crate::FrameSource::build_each)): each
/// frame's length goes in its buffer's iovec, cut to the buffer.
struct StagedBufs<'a> {
    bufs: std::slice::IterMut<'a, Box<[u8]>>,
    iov: std::slice::IterMut<'a, libc::iovec>,
    /// The slot of the next buffer handed out.
    slot: usize,
    /// Every buffer's length.
    len: usize,
}

impl crate::Buffers for StagedBufs<'_> {
    #[inline(always)]
    fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
        let b = self.bufs.next()?;
        self.slot += 1;
        Some((&mut b[..], self.slot - 1))
    }

    #[inline(always)]
    fn built(&mut self, len: usize) {
        // (one iovec a buffer: as many as the buffers handed out)
        if let Some(v) = self.iov.next() {
            v.iov_len = len.min(self.len);
        }
    }
}

impl RawSocket {
    /// Opens and binds an AF_PACKET socket to `iface` (needs CAP_NET_RAW).
    pub fn open(iface: &str) -> io::Result<Self> {
        let ifindex = crate::iface::index(iface)?;
        // No protocol until the bind names the interface (opened for
        // every protocol, it would take every interface's frames until
        // then).
        let fd = packet_socket(false)?;
        bind_to(fd.as_raw_fd(), ifindex)?;
        let iov = vec![
            libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0
            };
            RAW_BATCH_MAX
        ];
        // SAFETY: zeroed mmsghdr / sockaddr_ll are valid values.
        let hdrs = vec![unsafe { std::mem::zeroed::<libc::mmsghdr>() }; RAW_BATCH_MAX];
        // SAFETY: as above.
        let addrs = vec![unsafe { std::mem::zeroed::<libc::sockaddr_ll>() }; RAW_BATCH_MAX];
        Ok(Self {
            fd,
            ifindex,
            iov,
            hdrs,
            addrs,
            qdisc_bypass: false,
            cmsgs: vec![[0u64; 8]; RAW_BATCH_MAX],
        })
    }

    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// PACKET_QDISC_BYPASS: frames go to the driver without the qdisc.
    pub fn bypass_qdisc(&mut self) -> io::Result<()> {
        setsockopt_int(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            1,
        )?;
        self.qdisc_bypass = true;
        Ok(())
    }

    /// Whether [`bypass_qdisc`](Self::bypass_qdisc) took effect.
    pub fn qdisc_bypassed(&self) -> bool {
        self.qdisc_bypass
    }

    /// Socket receive buffer (SO_RCVBUFFORCE as root, else SO_RCVBUF).
    pub fn set_rcvbuf(&self, bytes: i32) -> io::Result<()> {
        setsockopt_int(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            bytes,
        )
        .or_else(|_| {
            setsockopt_int(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                bytes,
            )
        })
    }

    pub fn set_read_timeout(&self, d: Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: d.as_secs() as _,
            tv_usec: d.subsec_micros() as _,
        };
        // SAFETY: valid timeval of the size given.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Sends each buffer as one frame; returns how many the kernel took.
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        crate::udp_batch::send_each(self.fd.as_raw_fd(), &mut self.iov, &mut self.hdrs, frames)
    }

    /// Shares the interface's frames with the other sockets of fanout
    /// group `group`, by flow (PACKET_FANOUT_HASH).
    pub fn join_fanout(&self, group: u16) -> io::Result<()> {
        join_fanout(self.fd.as_raw_fd(), group)
    }

    /// Joins fanout group `group` that other sockets already serve, without
    /// counting a frame twice: until it is in the group this socket also
    /// got every frame on its own (the members got them too), so it stops
    /// taking frames (a drop-all filter), throws away what it queued, joins,
    /// and takes its share from then on.
    pub fn join_fanout_late(&mut self, group: u16) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        drop_all(fd, true)?;
        let mut buf = [0u8; 64];
        // SAFETY: recv into a stack buffer of its length; MSG_DONTWAIT.
        while unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) } >= 0
        {
        }
        join_fanout(fd, group)?;
        drop_all(fd, false)
    }

    /// Attaches a classic BPF program (each instruction as `(code, jt,
    /// jf, k)`, at most 64): the socket takes only the frames it keeps.
    /// Frames queued before the call may still be read.
    pub fn attach_filter(&self, prog: &[(u16, u8, u8, u32)]) -> io::Result<()> {
        if prog.is_empty() || prog.len() > 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a filter has 1 to 64 instructions",
            ));
        }
        let mut ins: Vec<libc::sock_filter> = prog
            .iter()
            .map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k })
            .collect();
        let fprog = libc::sock_fprog {
            len: ins.len() as u16,
            filter: ins.as_mut_ptr(),
        };
        // SAFETY: `fprog` points at `ins`, alive for the call; the kernel
        // copies and checks the program.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&fprog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Has the kernel stamp every received frame with its receive time
    /// (SO_TIMESTAMPNS, CLOCK_REALTIME), read by [`recv_stamped`](Self::recv_stamped).
    pub fn enable_rx_timestamps(&self) -> io::Result<()> {
        setsockopt_int(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            1,
        )
    }

    /// Receives up to `bufs.len()` frames; `lens[i]` is frame i's length,
    /// 0 for frames this host sent (PACKET_OUTGOING), which are not counted.
    pub fn recv(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        self.recv_inner(bufs, lens, None)
    }

    /// As [`recv`](Self::recv), and `stamps[i]` gets frame i's kernel
    /// receive time (CLOCK_REALTIME ns; 0 without one), once
    /// [`enable_rx_timestamps`](Self::enable_rx_timestamps) was called.
    /// The buffers may be anything that lends a byte slice (`Vec<u8>`
    /// kept by the caller: no slice list to build per call).
    pub fn recv_stamped<B: AsMut<[u8]>>(
        &mut self,
        bufs: &mut [B],
        lens: &mut [usize],
        stamps: &mut [u64],
    ) -> io::Result<usize> {
        self.recv_inner(bufs, lens, Some(stamps))
    }

    fn recv_inner<B: AsMut<[u8]>>(
        &mut self,
        bufs: &mut [B],
        lens: &mut [usize],
        mut stamps: Option<&mut [u64]>,
    ) -> io::Result<usize> {
        let mut n = bufs.len().min(RAW_BATCH_MAX).min(lens.len());
        if let Some(s) = &stamps {
            n = n.min(s.len());
        }
        for (i, b) in bufs[..n].iter_mut().enumerate() {
            let b = b.as_mut();
            self.iov[i] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            // SAFETY: zeroed mmsghdr is valid; it then points at one iovec and one address.
            self.hdrs[i] = unsafe { std::mem::zeroed() };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_iov = &mut self.iov[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_ll).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            if stamps.is_some() {
                h.msg_control = self.cmsgs[i].as_mut_ptr().cast();
                h.msg_controllen = std::mem::size_of::<[u64; 8]>();
            }
        }
        // Headers point into `bufs`, `self.addrs` and `self.cmsgs`, alive for the call.
        let rc = crate::udp_batch::recv_each(self.fd.as_raw_fd(), &mut self.hdrs[..n])?;
        for (i, len) in lens.iter_mut().enumerate().take(rc) {
            let outgoing = self.addrs[i].sll_pkttype == libc::PACKET_OUTGOING;
            *len = if outgoing {
                0
            } else {
                self.hdrs[i].msg_len as usize
            };
        }
        if let Some(stamps) = stamps.as_mut() {
            for (i, st) in stamps.iter_mut().enumerate().take(rc) {
                *st = 0;
                let h = &self.hdrs[i].msg_hdr;
                // SAFETY: the kernel filled `msg_controllen` bytes of our
                // control buffer with well-formed cmsgs; CMSG_* walk them.
                unsafe {
                    let mut c = libc::CMSG_FIRSTHDR(h);
                    while !c.is_null() {
                        if (*c).cmsg_level == libc::SOL_SOCKET
                            && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
                        {
                            let ts = libc::CMSG_DATA(c).cast::<libc::timespec>().read_unaligned();
                            *st = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                        }
                        c = libc::CMSG_NXTHDR(h, c);
                    }
                }
            }
        }
        Ok(rc)
    }

    /// Frames the kernel delivered to and dropped for this socket since the
    /// last call (PACKET_STATISTICS resets on read).
    pub fn stats(&self) -> io::Result<(u32, u32)> {
        let st = packet_statistics(self.fd.as_raw_fd())?;
        Ok((st[0], st[1]))
    }
}

/// poll(2) on `pfds` for up to `ms`, its result left unread (the caller
/// looks at its rings: AF_XDP's, AF_PACKET's). The system call itself,
/// not libc's `poll`: that one is a cancellation point (two calls around
/// the wait, some 30 instructions of a light load's wake-up), and nothing
/// here cancels threads; on x86-64 not through libc's `syscall` either
/// (its shuffle of seven registers, a wake-up's 11 instructions).
#[inline(always)]
pub(crate) fn poll(pfds: &mut [libc::pollfd], ms: i32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: poll reads and writes `pfds.len()` pollfds at `pfds`, valid
    // and writable for the call; the kernel clobbers rcx and r11 only.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_poll => _,
            in("rdi") pfds.as_mut_ptr(),
            in("rsi") pfds.len(),
            in("rdx") ms as isize,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above, through libc's system call wrapper.
    unsafe {
        libc::syscall(
            libc::SYS_poll,
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            ms as libc::c_int,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_interface_is_a_clear_error() {
        let e = RawSocket::open("no-such-if0").unwrap_err();
        assert!(e.to_string().contains("no-such-if0"));
    }
}
