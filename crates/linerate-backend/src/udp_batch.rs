//! Batched UDP: many datagrams per syscall with sendmmsg(2) / recvmmsg(2)
//! on a connected socket. Buffers are lent by the caller and reused; nothing
//! here allocates per datagram.

use std::io;
use std::os::fd::AsRawFd;

/// Most datagrams per call.
pub const BATCH_MAX: usize = 64;

/// Reusable syscall descriptors for up to [`BATCH_MAX`] datagrams.
#[derive(Debug)]
pub struct Batch {
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in iovec/mmsghdr are rewritten before every call
// from the buffers borrowed for that call; nothing refers across threads.
unsafe impl Send for Batch {}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

/// One `sendmmsg(2)` sending each buffer as one message on a connected or
/// bound socket, through the caller's reusable descriptors (`iov` and
/// `hdrs` of equal length; at most that many buffers go). Returns how many
/// the kernel took.
pub(crate) fn send_each(
    fd: i32,
    iov: &mut [libc::iovec],
    hdrs: &mut [libc::mmsghdr],
    bufs: &[&[u8]],
) -> io::Result<usize> {
    let n = bufs.len().min(iov.len()).min(hdrs.len());
    for (i, b) in bufs[..n].iter().enumerate() {
        iov[i] = libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        };
        // SAFETY: zeroed mmsghdr is valid; we then point it at one iovec.
        hdrs[i] = unsafe { std::mem::zeroed() };
        hdrs[i].msg_hdr.msg_iov = &mut iov[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    // hdrs[..n] point to iovecs that point into `bufs`, all alive for the call.
    send_prepared(fd, &mut hdrs[..n])
}

/// One `sendmmsg(2)` of headers the caller has filled in. Every header must
/// point at buffers (and addresses, control data) alive for the call.
/// Returns how many messages the kernel took.
pub(crate) fn send_prepared(fd: i32, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    // SAFETY: the caller's headers point at live buffers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sendmmsg,
            fd,
            hdrs.as_mut_ptr(),
            hdrs.len() as libc::c_uint,
            0 as libc::c_int,
        )
    };
    done(rc)
}

/// A system call's return as a count, or the error it set. The calls here
/// go by `syscall(2)` rather than the C library's wrappers: those are
/// pthread cancellation points, and in a process with more than one thread
/// each wraps the call in two atomic updates of the thread's cancel state
/// (about 45 ns a call on the rig's VM, a fifth of an empty receive), for
/// a cancellation nothing here uses (`stream`'s calls return through it too).
pub(crate) fn done(rc: libc::c_long) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// One `recvfrom(2)` of a single datagram into `buf` on a connected (or
/// bound) socket, waiting as the socket's timeout (or O_NONBLOCK) allows:
/// no message header to copy in and no batch to look further into, the
/// cheapest receive where at most one datagram is due (a ping-pong's
/// answer). Returns its length, cut to `buf`.
pub fn recv_one(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is live and writable for its length; no address asked.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            sock.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
            0 as libc::c_int,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    done(rc)
}

/// One `sendto(2)` of `buf` as one datagram on a connected socket (the
/// single-message counterpart of [`Batch::send`]). Returns the bytes sent.
pub fn send_one(sock: &impl AsRawFd, buf: &[u8]) -> io::Result<usize> {
    send_to_raw(sock.as_raw_fd(), buf, std::ptr::null(), 0)
}

/// One `sendto(2)` of `buf` to `name` (`len` bytes of it; null and 0 on a
/// connected socket). `name` must point at a live socket address.
pub(crate) fn send_to_raw(
    fd: i32,
    buf: &[u8],
    name: *const libc::sockaddr_storage,
    len: libc::socklen_t,
) -> io::Result<usize> {
    // SAFETY: `buf` is live for its length; `name` is the caller's.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            0 as libc::c_int,
            name,
            len,
        )
    };
    done(rc)
}

/// One `recvmmsg(2)` into `hdrs`, waiting (as the socket's timeout allows)
/// for the first message only. Every header must point at buffers that
/// stay alive and writable for the call. Returns how many were filled.
pub(crate) fn recv_each(fd: i32, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    recv_each_with(fd, hdrs, 0)
}

/// [`recv_each`] with `flags` added to MSG_WAITFORONE (MSG_TRUNC).
fn recv_each_with(fd: i32, hdrs: &mut [libc::mmsghdr], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: the caller's headers point at live, writable buffers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_recvmmsg,
            fd,
            hdrs.as_mut_ptr(),
            hdrs.len() as libc::c_uint,
            libc::MSG_WAITFORONE | flags,
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
    done(rc)
}

impl Batch {
    pub fn new() -> Self {
        let iov = vec![
            libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            BATCH_MAX
        ];
        // SAFETY: mmsghdr is plain old data; all-zero is a valid (empty) header.
        let hdrs = vec![unsafe { std::mem::zeroed::<libc::mmsghdr>() }; BATCH_MAX];
        Self { iov, hdrs }
    }

    /// Sends each buffer as one datagram on a connected socket. Returns how
    /// many were sent (a prefix of `bufs`); `WouldBlock`/`ENOBUFS` come back
    /// as errors for the caller to count and retry.
    pub fn send(&mut self, sock: &impl AsRawFd, bufs: &[&[u8]]) -> io::Result<usize> {
        send_each(sock.as_raw_fd(), &mut self.iov, &mut self.hdrs, bufs)
    }

    /// Sends `bytes` cut into datagrams of `size` bytes (the last one
    /// shorter where they do not divide), at most [`BATCH_MAX`], on a
    /// connected socket: no list of buffers made by the caller. Returns
    /// how many went, as [`send`](Self::send).
    pub fn send_split(
        &mut self,
        sock: &impl AsRawFd,
        bytes: &[u8],
        size: usize,
    ) -> io::Result<usize> {
        let mut n = 0;
        for (i, b) in bytes.chunks(size.max(1)).take(BATCH_MAX).enumerate() {
            self.iov[i] = libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            };
            // SAFETY: zeroed mmsghdr is valid; we then point it at one iovec.
            self.hdrs[i] = unsafe { std::mem::zeroed() };
            self.hdrs[i].msg_hdr.msg_iov = &mut self.iov[i];
            self.hdrs[i].msg_hdr.msg_iovlen = 1;
            n = i + 1;
        }
        // hdrs[..n] point to iovecs that point into `bytes`, alive for the call.
        send_prepared(sock.as_raw_fd(), &mut self.hdrs[..n])
    }

    /// Receives up to `bufs.len()` datagrams; `lens[i]` gets datagram i's
    /// length. Waits for the first datagram as the socket's timeout allows,
    /// then takes what is queued without waiting.
    pub fn recv(
        &mut self,
        sock: &impl AsRawFd,
        bufs: &mut [&mut [u8]],
        lens: &mut [usize],
    ) -> io::Result<usize> {
        let n = bufs.len().min(BATCH_MAX).min(lens.len());
        for (i, b) in bufs[..n].iter_mut().enumerate() {
            self.iov[i] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            // SAFETY: zeroed mmsghdr is valid; we then point it at one iovec.
            self.hdrs[i] = unsafe { std::mem::zeroed() };
            self.hdrs[i].msg_hdr.msg_iov = &mut self.iov[i];
            self.hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        // hdrs[..n] point to iovecs that point into writable `bufs`.
        let rc = recv_each(sock.as_raw_fd(), &mut self.hdrs[..n])?;
        for (i, len) in lens.iter_mut().enumerate().take(rc) {
            *len = self.hdrs[i].msg_len as usize;
        }
        Ok(rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    #[test]
    fn one_datagram_each_way_by_sendto_and_recvfrom() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        assert_eq!(send_one(&a, &[5u8; 30]).unwrap(), 30);
        let mut buf = [0u8; 64];
        assert_eq!(recv_one(&b, &mut buf).unwrap(), 30);
        assert_eq!(&buf[..30], &[5u8; 30]);
        // cut to the buffer, as a batch's receive is
        send_one(&a, &[6u8; 100]).unwrap();
        assert_eq!(recv_one(&b, &mut buf).unwrap(), 64);
        // nothing queued: the socket's timeout, as an error
        let e = recv_one(&b, &mut buf).unwrap_err();
        assert!(matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
    }

    #[test]
    fn a_split_send_cuts_its_bytes_into_datagrams() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let bytes: Vec<u8> = (0..250u32).map(|i| (i / 100) as u8).collect();
        assert_eq!(Batch::new().send_split(&a, &bytes, 100).unwrap(), 3);
        let mut buf = [0u8; 512];
        for (len, fill) in [(100, 0u8), (100, 1), (50, 2)] {
            assert_eq!(b.recv(&mut buf).unwrap(), len);
            assert!(buf[..len].iter().all(|&x| x == fill));
        }
        // at most a batch
        let many = vec![0u8; 10 * BATCH_MAX];
        assert_eq!(Batch::new().send_split(&a, &many, 1).unwrap(), BATCH_MAX);
    }

    #[test]
    fn batch_round_trip() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let payloads: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 20 + usize::from(i)]).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let mut tx = Batch::new();
        assert_eq!(tx.send(&a, &refs).unwrap(), 10);
        let mut store = vec![[0u8; 64]; 16];
        let mut bufs: Vec<&mut [u8]> = store.iter_mut().map(|b| &mut b[..]).collect();
        let mut lens = [0usize; 16];
        let mut rx = Batch::new();
        let mut got = 0;
        while got < 10 {
            let n = rx.recv(&b, &mut bufs[got..], &mut lens[got..]).unwrap();
            got += n;
        }
        for i in 0..10 {
            assert_eq!(lens[i], 20 + i);
            assert!(bufs[i][..lens[i]].iter().all(|&x| x == i as u8));
        }
    }
}

#[cfg(test)]
mod gso_tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    #[test]
    fn a_truncating_receive_gives_whole_lengths_in_small_buffers() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        for (i, n) in [1000usize, 1470, 30].into_iter().enumerate() {
            a.send(&vec![i as u8 + 1; n]).unwrap();
        }
        let mut store = [[0u8; 16]; 4];
        let mut bufs: Vec<&mut [u8]> = store.iter_mut().map(|b| &mut b[..]).collect();
        let (mut lens, mut segs) = ([0usize; 4], [0usize; 4]);
        let mut rx = GroBatch::truncating();
        let mut got = 0;
        while got < 3 {
            got += rx
                .recv(&b, &mut bufs[got..], &mut lens[got..], &mut segs[got..])
                .unwrap();
        }
        assert_eq!(&lens[..3], &[1000, 1470, 30]);
        assert_eq!([store[0][15], store[1][0], store[2][3]], [1, 2, 3]);
    }

    #[test]
    fn gso_send_arrives_as_separate_datagrams() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        crate::sockopt::set_udp_segment(&a, 100).unwrap();
        let mut one = vec![0u8; 300];
        for (i, chunk) in one.chunks_mut(100).enumerate() {
            chunk.fill(i as u8 + 1);
        }
        let two = vec![9u8; 100];
        let mut tx = Batch::new();
        assert_eq!(tx.send(&a, &[&one, &two]).unwrap(), 2);
        let mut got = Vec::new();
        let mut buf = [0u8; 1000];
        for _ in 0..4 {
            let n = b.recv(&mut buf).unwrap();
            got.push((n, buf[0]));
        }
        assert_eq!(got, vec![(100, 1), (100, 2), (100, 3), (100, 9)]);
    }
}

/// Receiving with UDP GRO (Linux 5.0+): the kernel hands over several
/// datagrams of one flow in one buffer, with their size in a control
/// message. [`GroBatch::recv`] returns, per buffer, its length and the size
/// of the datagrams in it (the last one may be shorter).
#[derive(Debug)]
pub struct GroBatch {
    inner: Batch,
    control: Vec<[u64; 8]>,
    /// MSG_TRUNC: buffers take only the start of each datagram, `lens`
    /// still the whole length (a counting receiver that reads headers only).
    truncate: bool,
}

// SAFETY: as for Batch: pointers are rewritten before each call.
unsafe impl Send for GroBatch {}

/// Largest buffer a GRO receive fills.
pub const GRO_BUF_BYTES: usize = 65535;

impl Default for GroBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl GroBatch {
    pub fn new() -> Self {
        Self {
            inner: Batch::new(),
            control: vec![[0u64; 8]; BATCH_MAX],
            truncate: false,
        }
    }

    /// Receives only as much of each datagram as the buffers hold (the
    /// rest is discarded by the kernel without a copy); `lens` gives each
    /// datagram's whole length.
    pub fn truncating() -> Self {
        Self {
            truncate: true,
            ..Self::new()
        }
    }

    /// Turns UDP_GRO on for the socket.
    pub fn enable(sock: &impl AsRawFd) -> io::Result<()> {
        Self::set(sock, true)
    }

    /// Turns UDP_GRO on or off for the socket.
    pub fn set(sock: &impl AsRawFd, on: bool) -> io::Result<()> {
        crate::sockopt::setsockopt_raw(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_GRO,
            &i32::from(on).to_ne_bytes(),
        )
    }

    /// Like [`Batch::recv`]; `segs[i]` gets the datagram size inside
    /// buffer i (equal to `lens[i]` when the kernel did not coalesce).
    /// The buffers are anything that lends its bytes (`&mut [u8]`,
    /// `Vec<u8>`), so a caller keeps them across calls without a list of
    /// borrows made per call.
    pub fn recv<B: AsMut<[u8]>>(
        &mut self,
        sock: &impl AsRawFd,
        bufs: &mut [B],
        lens: &mut [usize],
        segs: &mut [usize],
    ) -> io::Result<usize> {
        let n = bufs.len().min(BATCH_MAX).min(lens.len()).min(segs.len());
        for (i, b) in bufs[..n].iter_mut().enumerate() {
            let b = b.as_mut();
            self.inner.iov[i] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            // SAFETY: zeroed mmsghdr is valid; we then point it at one iovec
            // and one control buffer, both alive across the call.
            self.inner.hdrs[i] = unsafe { std::mem::zeroed() };
            let h = &mut self.inner.hdrs[i].msg_hdr;
            h.msg_iov = &mut self.inner.iov[i];
            h.msg_iovlen = 1;
            h.msg_control = self.control[i].as_mut_ptr().cast();
            h.msg_controllen = std::mem::size_of::<[u64; 8]>() as _;
        }
        // headers point into `bufs` and `self.control`, alive for the call.
        let flags = if self.truncate { libc::MSG_TRUNC } else { 0 };
        let rc = recv_each_with(sock.as_raw_fd(), &mut self.inner.hdrs[..n], flags)?;
        for i in 0..rc {
            lens[i] = self.inner.hdrs[i].msg_len as usize;
            segs[i] = lens[i];
            let h = &self.inner.hdrs[i].msg_hdr;
            // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_*
            // walk only within that buffer.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(h);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                        let size =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                        if size > 0 {
                            segs[i] = size as usize;
                        }
                    }
                    c = libc::CMSG_NXTHDR(h, c);
                }
            }
        }
        Ok(rc)
    }
}

#[cfg(test)]
mod gro_tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    #[test]
    fn gro_receive_reports_segment_sizes() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        GroBatch::enable(&b).unwrap();
        // A GSO send of 5 x 200 bytes may arrive as one GRO buffer (loopback
        // keeps the GSO packet whole) or as separate datagrams.
        crate::sockopt::set_udp_segment(&a, 200).unwrap();
        let payload: Vec<u8> = (0..1000u32).map(|i| (i / 200) as u8).collect();
        Batch::new().send(&a, &[&payload]).unwrap();
        let mut store = vec![vec![0u8; GRO_BUF_BYTES]; 8];
        let mut bufs: Vec<&mut [u8]> = store.iter_mut().map(|v| v.as_mut_slice()).collect();
        let (mut lens, mut segs) = ([0usize; 8], [0usize; 8]);
        let mut rx = GroBatch::new();
        let mut total = 0;
        let mut datagrams = 0;
        while total < 1000 {
            let n = rx.recv(&b, &mut bufs[..], &mut lens, &mut segs).unwrap();
            for i in 0..n {
                assert_eq!(segs[i], 200);
                total += lens[i];
                datagrams += lens[i].div_ceil(segs[i]);
            }
        }
        assert_eq!((total, datagrams), (1000, 5));
    }
}
