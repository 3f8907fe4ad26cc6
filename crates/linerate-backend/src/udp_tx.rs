//! Unconnected UDP sockets for crafted traffic the kernel can still build:
//! one socket per source endpoint, bound to the interface, each
//! `sendmmsg(2)` carrying datagrams to many destinations, and runs of
//! equal-sized datagrams to one destination sent as a single UDP GSO
//! message (`UDP_SEGMENT` control message, Linux 4.18+): one trip through
//! the stack for up to [`GSO_SEGMENTS_MAX`] datagrams.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};

/// Most datagrams in one GSO message (the kernel's UDP_MAX_SEGMENTS is 64
/// on older kernels, 128 on newer ones).
pub const GSO_SEGMENTS_MAX: usize = 64;
/// Most payload bytes in one GSO message (an IP packet's 64 KiB, less headers).
pub const GSO_BYTES_MAX: usize = 65_000;

/// One message of a [`UdpSender::send`] call: `count` payloads from
/// `first` on, to `dst`. With `count > 1` they must all be the same length
/// and leave as that many datagrams (UDP GSO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutMsg {
    pub dst: SocketAddr,
    pub first: usize,
    pub count: usize,
}

/// Socket options every sending socket gets.
#[derive(Debug, Clone, Copy, Default)]
pub struct UdpTxOptions {
    /// IPv4 TOS / IPv6 traffic class byte (DSCP << 2).
    pub tos: u8,
    /// Time to live / hop limit (0: the system default).
    pub ttl: u8,
    /// Send buffer to ask for (SO_SNDBUFFORCE, else SO_SNDBUF), bytes.
    pub sndbuf: usize,
}

/// A UDP socket bound to `src` and to `iface` (SO_BINDTODEVICE), with DF
/// set (never fragmented locally), blocking (a full send buffer waits
/// rather than drops). SO_REUSEPORT lets several senders (one per worker)
/// share a source endpoint.
pub fn open_bound(iface: &str, src: SocketAddr, opt: &UdpTxOptions) -> io::Result<UdpSocket> {
    let domain = if src.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: plain socket(2).
    let raw = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own from here on.
    let sock = UdpSocket::from(unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) });
    let fd = sock.as_raw_fd();
    crate::sockopt::setsockopt_raw(
        fd,
        libc::SOL_SOCKET,
        libc::SO_REUSEPORT,
        &1i32.to_ne_bytes(),
    )?;
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = sockaddr(src, &mut name);
    // SAFETY: `name` holds a valid address of `len` bytes.
    if unsafe { libc::bind(fd, (&name as *const libc::sockaddr_storage).cast(), len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    crate::sockopt::setsockopt_raw(
        fd,
        libc::SOL_SOCKET,
        libc::SO_BINDTODEVICE,
        iface.as_bytes(),
    )
    .map_err(|e| io::Error::new(e.kind(), format!("SO_BINDTODEVICE {iface}: {e}")))?;
    let int = |v: i32| v.to_ne_bytes();
    let (level, tos, ttl, mtu, pmtu_do) = if src.is_ipv6() {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            libc::IPV6_UNICAST_HOPS,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_TOS,
            libc::IP_TTL,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
    };
    crate::sockopt::setsockopt_raw(fd, level, tos, &int(i32::from(opt.tos)))?;
    if opt.ttl > 0 {
        crate::sockopt::setsockopt_raw(fd, level, ttl, &int(i32::from(opt.ttl)))?;
    }
    crate::sockopt::setsockopt_raw(fd, level, mtu, &int(pmtu_do))?;
    if opt.sndbuf > 0 {
        let want = int(i32::try_from(opt.sndbuf).unwrap_or(i32::MAX));
        if crate::sockopt::setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &want)
            .is_err()
        {
            let _ = crate::sockopt::setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &want);
        }
    }
    Ok(sock)
}

fn family_err() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "destination of the other address family",
    )
}

/// `CMSG_SPACE(sizeof(u16))` rounded up to whole u64s.
pub(crate) const CMSG_WORDS: usize = 4;

/// Reusable `sendmmsg(2)` descriptors for [`OutMsg`] batches.
pub struct UdpSender {
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    names: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<[u64; CMSG_WORDS]>,
}

impl std::fmt::Debug for UdpSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSender")
            .field("max_bufs", &self.iov.len())
            .field("max_msgs", &self.hdrs.len())
            .finish()
    }
}

// SAFETY: the raw pointers in the descriptors are rewritten before every
// call from the buffers borrowed for that call; nothing refers across threads.
unsafe impl Send for UdpSender {}

fn sockaddr(dst: SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    // SAFETY: sockaddr_storage is large and aligned enough for either address
    // type; the writes below stay inside it.
    unsafe {
        match dst {
            SocketAddr::V4(a) => {
                let p = (out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                p.write(libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                });
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
            }
            SocketAddr::V6(a) => {
                let p = (out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                p.write(libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                });
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
            }
        }
    }
}

impl UdpSender {
    /// Room for `max_msgs` messages of `max_bufs` payloads in all per call.
    pub fn new(max_msgs: usize, max_bufs: usize) -> Self {
        let iov = vec![
            libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            max_bufs.max(1)
        ];
        // SAFETY: these are plain old data; all-zero is a valid empty value.
        let (hdrs, names) = unsafe {
            (
                vec![std::mem::zeroed::<libc::mmsghdr>(); max_msgs.max(1)],
                vec![std::mem::zeroed::<libc::sockaddr_storage>(); max_msgs.max(1)],
            )
        };
        Self {
            iov,
            hdrs,
            names,
            cmsgs: vec![[0u64; CMSG_WORDS]; max_msgs.max(1)],
        }
    }

    /// Sends `msgs` (payloads taken from `bufs`) on `sock` with one
    /// `sendmmsg(2)`; returns how many messages the kernel took (a prefix).
    /// A message of several payloads goes as one GSO send of
    /// equal-length datagrams.
    pub fn send(
        &mut self,
        sock: &impl AsRawFd,
        bufs: &[&[u8]],
        msgs: &[OutMsg],
    ) -> io::Result<usize> {
        let n = msgs.len().min(self.hdrs.len());
        let mut used = 0usize;
        let mut take = 0usize;
        for (i, m) in msgs[..n].iter().enumerate() {
            let segs = &bufs[m.first..m.first + m.count];
            if used + segs.len() > self.iov.len() || segs.is_empty() {
                break;
            }
            for (k, b) in segs.iter().enumerate() {
                self.iov[used + k] = libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                };
            }
            let namelen = sockaddr(m.dst, &mut self.names[i]);
            // SAFETY: a zeroed mmsghdr is valid; it is then pointed at this
            // call's iovecs, address and control buffer, which outlive the call.
            unsafe {
                let h = &mut self.hdrs[i];
                *h = std::mem::zeroed();
                h.msg_hdr.msg_iov = self.iov.as_mut_ptr().add(used);
                h.msg_hdr.msg_iovlen = segs.len();
                h.msg_hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
                h.msg_hdr.msg_namelen = namelen;
                if segs.len() > 1 {
                    let seg = u16::try_from(segs[0].len()).map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidInput, "GSO segment over 65535 bytes")
                    })?;
                    set_segment(&mut h.msg_hdr, &mut self.cmsgs[i], seg);
                }
            }
            used += segs.len();
            take = i + 1;
        }
        if take == 0 {
            return Ok(0);
        }
        // hdrs[..take] point into `bufs`, `names`, `cmsgs` and `iov`, all
        // alive and unmoved for the call.
        crate::udp_batch::send_prepared(sock.as_raw_fd(), &mut self.hdrs[..take])
    }
}

/// One `sendmsg(2)` of `buf` on a connected socket as one UDP GSO message
/// of `seg`-byte datagrams (the last may be shorter): the UDP_SEGMENT
/// control message rides on this call only, so the socket's other sends
/// stay plain datagrams (a socket with the UDP_SEGMENT option builds even a
/// lone datagram in page fragments). Returns the bytes sent.
pub fn send_segmented(sock: &impl AsRawFd, buf: &[u8], seg: u16) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr().cast_mut().cast(),
        iov_len: buf.len(),
    };
    let mut ctl = [0u64; CMSG_WORDS];
    // SAFETY: an all-zero msghdr is a valid empty message header.
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    set_segment(&mut h, &mut ctl, seg);
    // SAFETY: `h` points at `iov` (which describes `buf`, read only by the
    // kernel) and at `ctl`, all live for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sendmsg,
            sock.as_raw_fd(),
            &h as *const libc::msghdr,
            0 as libc::c_int,
        )
    };
    crate::udp_batch::done(rc)
}

/// Points `h` at `ctl` holding one UDP_SEGMENT control message: the
/// message's datagrams are `seg` bytes each (the last may be shorter), sent
/// as one GSO batch. `ctl` must outlive the send that uses `h`.
pub(crate) fn set_segment(h: &mut libc::msghdr, ctl: &mut [u64; CMSG_WORDS], seg: u16) {
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(2) } as usize;
    debug_assert!(space <= CMSG_WORDS * 8);
    *ctl = [0; CMSG_WORDS];
    h.msg_control = ctl.as_mut_ptr().cast();
    h.msg_controllen = space;
    // SAFETY: the control buffer holds CMSG_SPACE(2) bytes, zeroed, and
    // msg_control/msg_controllen describe it, so CMSG_FIRSTHDR is inside.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(h);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(2) as usize;
        libc::CMSG_DATA(c).cast::<u16>().write_unaligned(seg);
    }
}

/// Datagram buffers written in place, one per slot, each with its
/// destination kept as a ready socket address of the sender's family
/// (only address and port rewritten when the slot's destination changes),
/// sent with `sendmmsg(2)`: a run of equal-length datagrams to one
/// destination as one UDP GSO message. The kernel builds every header; the
/// caller writes payloads only.
pub struct UdpSlots {
    bufs: Vec<Vec<u8>>,
    /// Each buffer's length.
    len: usize,
    /// Each slot's destination: a sockaddr_in6, or a sockaddr_in in its
    /// first bytes (`namelen` says which).
    names: Vec<libc::sockaddr_in6>,
    namelen: libc::socklen_t,
    v6: bool,
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    cmsgs: Vec<[u64; CMSG_WORDS]>,
    /// Datagrams of each message of the last call.
    counts: Vec<u32>,
    /// One message per slot, made once: slot k's buffer to slot k's
    /// destination (only the payload length changes from call to call).
    own_iov: Vec<libc::iovec>,
    own_hdrs: Vec<libc::mmsghdr>,
}

/// Sets a slot's destination (see [`UdpSlots::set_dst`]).
#[inline]
fn put_dst(name: &mut libc::sockaddr_in6, v6: bool, addr: &[u8], port: u16) -> io::Result<()> {
    if v6 {
        name.sin6_addr.s6_addr = addr.try_into().map_err(|_| family_err())?;
    } else {
        let a: [u8; 4] = addr.try_into().map_err(|_| family_err())?;
        // sockaddr_in: port, then the address, where sockaddr_in6 has
        // its port and flow info.
        name.sin6_flowinfo = u32::from_ne_bytes(a);
    }
    name.sin6_port = port.to_be();
    Ok(())
}

/// A run of [`UdpSlots`] for one batch of datagrams to the slots' own
/// destinations (one socket, no GSO): each payload's length goes in its
/// slot's own message, and the slot's destination when its flow changed;
/// a destination refused (another family) ends the batch.
pub struct SlotRun<'a> {
    bufs: std::slice::IterMut<'a, Vec<u8>>,
    iov: std::slice::IterMut<'a, libc::iovec>,
    /// Every slot's destination.
    names: &'a mut [libc::sockaddr_in6],
    /// The slot of the next buffer handed out.
    slot: usize,
    len: usize,
    v6: bool,
    /// Why the batch ended early.
    pub err: Option<io::Error>,
}

impl std::fmt::Debug for SlotRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotRun").field("slot", &self.slot).finish()
    }
}

impl crate::port::PayloadBufs for SlotRun<'_> {
    #[inline(always)]
    fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
        let b = self.bufs.next()?;
        self.slot += 1;
        Some((&mut b[..], self.slot - 1))
    }

    #[inline(always)]
    fn built(&mut self, len: usize, ends: Option<crate::port::Endpoints<'_>>) {
        // (one message a buffer: as many as the buffers handed out)
        if let Some(v) = self.iov.next() {
            v.iov_len = len.min(self.len);
        }
        if let Some(e) = ends
            && let Err(x) = put_dst(
                &mut self.names[self.slot - 1],
                self.v6,
                e.dst_addr(),
                e.ports[1],
            )
        {
            self.err = Some(x);
            self.bufs = Default::default();
        }
    }
}

impl std::fmt::Debug for UdpSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSlots")
            .field("slots", &self.bufs.len())
            .field("v6", &self.v6)
            .finish()
    }
}

// SAFETY: the raw pointers in the descriptors point into buffers this
// value owns (heap blocks that never move); nothing refers across threads.
unsafe impl Send for UdpSlots {}

impl UdpSlots {
    /// `slots` buffers of `len` bytes, zeroed, for destinations of one
    /// family (IPv6 with `v6`).
    pub fn new(slots: usize, len: usize, v6: bool) -> Self {
        let slots = slots.max(1);
        // SAFETY: plain old data; all-zero is a valid empty value.
        let (zero_name, zero_hdr) = unsafe {
            (
                std::mem::zeroed::<libc::sockaddr_in6>(),
                std::mem::zeroed::<libc::mmsghdr>(),
            )
        };
        let mut names = vec![zero_name; slots];
        let namelen = if v6 {
            for n in &mut names {
                n.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            }
            std::mem::size_of::<libc::sockaddr_in6>()
        } else {
            for n in &mut names {
                // sockaddr_in's family sits where sockaddr_in6's does.
                n.sin6_family = libc::AF_INET as libc::sa_family_t;
            }
            std::mem::size_of::<libc::sockaddr_in>()
        } as libc::socklen_t;
        let mut bufs: Vec<Vec<u8>> = (0..slots).map(|_| vec![0u8; len]).collect();
        let mut own_iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: 0,
            })
            .collect();
        let mut own_hdrs = vec![zero_hdr; slots];
        // The heap blocks of `bufs`, `names` and `own_iov` never move (the
        // vectors are never resized): the headers may point into them.
        for (k, h) in own_hdrs.iter_mut().enumerate() {
            h.msg_hdr.msg_name = (&mut names[k] as *mut libc::sockaddr_in6).cast();
            h.msg_hdr.msg_namelen = namelen;
            h.msg_hdr.msg_iov = &mut own_iov[k];
            h.msg_hdr.msg_iovlen = 1;
        }
        Self {
            bufs,
            len,
            names,
            namelen,
            v6,
            own_iov,
            own_hdrs,
            iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                };
                slots
            ],
            hdrs: vec![zero_hdr; slots],
            cmsgs: vec![[0u64; CMSG_WORDS]; slots],
            counts: vec![0; slots],
        }
    }

    pub fn slots(&self) -> usize {
        self.bufs.len()
    }

    pub fn buf_len(&self) -> usize {
        self.len
    }

    /// Slot `slot`'s buffer, holding what was last written there.
    #[inline(always)]
    pub fn buf_mut(&mut self, slot: usize) -> &mut [u8] {
        &mut self.bufs[slot]
    }

    /// Sets slot `slot`'s destination: `addr` is the address's bytes (4
    /// for IPv4, 16 for IPv6: the family given at [`new`](Self::new);
    /// another length is refused), `port` in host order.
    #[inline(always)]
    pub fn set_dst(&mut self, slot: usize, addr: &[u8], port: u16) -> io::Result<()> {
        put_dst(&mut self.names[slot], self.v6, addr, port)
    }

    /// Slots `first..first + n` as one batch's buffers for a
    /// [`PayloadSource`](crate::port::PayloadSource) (see [`SlotRun`]).
    pub fn run(&mut self, first: usize, n: usize) -> SlotRun<'_> {
        let run = first..first + n;
        SlotRun {
            bufs: self.bufs[run.clone()].iter_mut(),
            iov: self.own_iov[run.clone()].iter_mut(),
            names: &mut self.names[..],
            slot: first,
            len: self.len,
            v6: self.v6,
            err: None,
        }
    }

    /// Whether slots `a` and `b` go to the same destination.
    #[inline]
    fn same_dst(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.names[a], &self.names[b]);
        x.sin6_port == y.sin6_port
            && x.sin6_flowinfo == y.sin6_flowinfo
            && (!self.v6 || x.sin6_addr.s6_addr == y.sin6_addr.s6_addr)
    }

    /// Sets slot `slot`'s payload length for
    /// [`send_in_order`](Self::send_in_order) (at most the buffer's length).
    #[inline(always)]
    pub fn set_len(&mut self, slot: usize, len: usize) {
        self.own_iov[slot].iov_len = len.min(self.len);
    }

    /// Sends slots `first..first + n` in slot order, one datagram each
    /// (payload lengths as last [`set_len`](Self::set_len)), with one
    /// `sendmmsg(2)` of the messages made once per slot. Returns how many
    /// the kernel took (a prefix).
    #[inline]
    pub fn send_in_order(
        &mut self,
        sock: &impl AsRawFd,
        first: usize,
        n: usize,
    ) -> io::Result<usize> {
        let n = n.min(self.own_hdrs.len().saturating_sub(first));
        if n == 0 {
            return Ok(0);
        }
        // own_hdrs point into `bufs`, `names` and `own_iov`, owned by
        // `self` and never moved; no iov_len exceeds its buffer.
        crate::udp_batch::send_prepared(sock.as_raw_fd(), &mut self.own_hdrs[first..first + n])
    }

    /// Sends the datagrams of slots `order` (slot, payload length), in that
    /// order, on `sock` with one `sendmmsg(2)`; with `gso`, a run of
    /// equal-length datagrams to one destination (up to
    /// [`GSO_SEGMENTS_MAX`], [`GSO_BYTES_MAX`] bytes) goes as one message.
    /// Returns how many datagrams the kernel took (a prefix of `order`),
    /// in how many messages, how many of them GSO sends.
    pub fn send(
        &mut self,
        sock: &impl AsRawFd,
        order: &[(u16, u16)],
        gso: bool,
    ) -> io::Result<(usize, usize, usize)> {
        let n = order.len().min(self.iov.len());
        let mut msgs = 0usize;
        let mut k = 0usize;
        while k < n {
            let (first, len) = (usize::from(order[k].0), order[k].1);
            let mut end = k + 1;
            if gso {
                while end < n
                    && end - k < GSO_SEGMENTS_MAX
                    && (end - k + 1) * usize::from(len) <= GSO_BYTES_MAX
                    && order[end].1 == len
                    && self.same_dst(first, usize::from(order[end].0))
                {
                    end += 1;
                }
            }
            for (io, &(s, l)) in self.iov[k..end].iter_mut().zip(&order[k..end]) {
                *io = libc::iovec {
                    iov_base: self.bufs[usize::from(s)].as_mut_ptr().cast(),
                    iov_len: usize::from(l),
                };
            }
            let h = &mut self.hdrs[msgs].msg_hdr;
            h.msg_name = (&mut self.names[first] as *mut libc::sockaddr_in6).cast();
            h.msg_namelen = self.namelen;
            // SAFETY: `k < n <= iov.len()`: inside the iovec array.
            h.msg_iov = unsafe { self.iov.as_mut_ptr().add(k) };
            h.msg_iovlen = end - k;
            if end - k > 1 {
                set_segment(h, &mut self.cmsgs[msgs], len);
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            self.counts[msgs] = (end - k) as u32;
            msgs += 1;
            k = end;
        }
        if msgs == 0 {
            return Ok((0, 0, 0));
        }
        // hdrs[..msgs] point into `bufs`, `names`, `cmsgs` and `iov`, all
        // owned by `self`, unmoved for the call.
        let took = crate::udp_batch::send_prepared(sock.as_raw_fd(), &mut self.hdrs[..msgs])?;
        let counts = &self.counts[..took.min(msgs)];
        let datagrams = counts.iter().map(|&c| c as usize).sum();
        let gso_msgs = counts.iter().filter(|&&c| c > 1).count();
        Ok((datagrams, took, gso_msgs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn receiver() -> UdpSocket {
        let r = UdpSocket::bind("127.0.0.1:0").unwrap();
        r.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        r
    }

    /// One call's segment size: its bytes arrive as datagrams of it, and
    /// the socket's next send is one datagram again.
    #[test]
    fn a_segmented_send_arrives_as_its_datagrams_and_leaves_the_socket_plain() {
        let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), receiver());
        a.connect(b.local_addr().unwrap()).unwrap();
        let bytes: Vec<u8> = (0..250u32).map(|i| (i / 100) as u8).collect();
        assert_eq!(send_segmented(&a, &bytes, 100).unwrap(), 250);
        let mut buf = [0u8; 512];
        for (len, fill) in [(100, 0u8), (100, 1), (50, 2)] {
            assert_eq!(b.recv(&mut buf).unwrap(), len);
            assert!(buf[..len].iter().all(|&x| x == fill));
        }
        // the segment size was this call's: the next send is one datagram
        crate::udp_batch::send_one(&a, &[7u8; 250]).unwrap();
        assert_eq!(b.recv(&mut buf).unwrap(), 250);
    }

    /// Payloads written in place in their slots reach each slot's
    /// destination: in slot order through the messages made once, and
    /// through the general path, where a run of equal payloads to one
    /// destination goes as one GSO message. A destination of the other
    /// family is refused.
    #[test]
    fn slots_send_in_place_to_their_own_destinations() {
        let Some(tx) = bound_or_skip() else {
            return;
        };
        let (r1, r2) = (receiver(), receiver());
        let port = |r: &UdpSocket| r.local_addr().unwrap().port();
        let mut s = UdpSlots::new(8, 256, false);
        assert!(s.set_dst(0, &[0; 16], 1).is_err(), "IPv6 in IPv4 slots");
        for k in 0..8usize {
            s.buf_mut(k)[..4].copy_from_slice(&[k as u8; 4]);
            let r = if k % 3 == 2 { &r2 } else { &r1 };
            s.set_dst(k, &[127, 0, 0, 1], port(r)).unwrap();
        }
        let lens = [4u16, 4, 4, 4, 3, 4, 4, 4];
        for (k, &l) in lens.iter().enumerate() {
            s.set_len(k, usize::from(l));
        }
        assert_eq!(s.send_in_order(&tx, 0, 8).unwrap(), 8);
        let mut buf = [0u8; 512];
        let mut recv = |r: &UdpSocket| {
            let n = r.recv(&mut buf).unwrap();
            buf[..n].to_vec()
        };
        for k in [0usize, 1, 3, 4, 6, 7] {
            let want = vec![k as u8; usize::from(lens[k])];
            assert_eq!(recv(&r1), want, "slot {k}");
        }
        for k in [2usize, 5] {
            assert_eq!(recv(&r2), vec![k as u8; 4], "slot {k}");
        }
        // Slots 0, 1, 3 to r1 with equal payloads: one GSO message; then
        // slot 2 to r2, slot 4 to r1 (another length): three messages.
        let order = [(0u16, 4u16), (1, 4), (3, 4), (2, 4), (4, 3)];
        let (datagrams, messages, gso) = s.send(&tx, &order, true).unwrap();
        assert_eq!((datagrams, messages, gso), (5, 3, 1));
        for k in [0u8, 1, 3] {
            assert_eq!(recv(&r1), vec![k; 4]);
        }
        assert_eq!(recv(&r2), vec![2u8; 4]);
        assert_eq!(recv(&r1), vec![4u8; 3]);
        // Without GSO: one message each.
        assert_eq!(s.send(&tx, &order[..2], false).unwrap(), (2, 2, 0));
        assert_eq!((recv(&r1), recv(&r1)), (vec![0u8; 4], vec![1u8; 4]));
    }

    /// A sending socket bound to lo, or None (skip) without CAP_NET_RAW.
    fn bound_or_skip() -> Option<UdpSocket> {
        match open_bound(
            "lo",
            "127.0.0.1:0".parse().unwrap(),
            &UdpTxOptions::default(),
        ) {
            Ok(t) => Some(t),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                assert!(
                    std::env::var("LINERATE_STRICT").as_deref() != Ok("1"),
                    "LINERATE_STRICT=1: SO_BINDTODEVICE needs CAP_NET_RAW"
                );
                eprintln!("SKIP: SO_BINDTODEVICE needs CAP_NET_RAW");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn messages_reach_their_own_destinations_and_gso_splits_equal_payloads() {
        let (r1, r2) = (receiver(), receiver());
        let tx = open_bound(
            "lo",
            "127.0.0.1:0".parse().unwrap(),
            &UdpTxOptions {
                tos: 0x10,
                ttl: 7,
                sndbuf: 1 << 20,
            },
        );
        let tx = match tx {
            Ok(t) => t,
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                assert!(
                    std::env::var("LINERATE_STRICT").as_deref() != Ok("1"),
                    "LINERATE_STRICT=1: SO_BINDTODEVICE needs CAP_NET_RAW"
                );
                eprintln!("SKIP: SO_BINDTODEVICE needs CAP_NET_RAW");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let p: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100]).collect();
        let odd = vec![9u8; 33];
        let bufs: Vec<&[u8]> = p.iter().map(|v| &v[..]).chain([&odd[..]]).collect();
        let msgs = [
            // Three equal payloads as one GSO message to r1.
            OutMsg {
                dst: r1.local_addr().unwrap(),
                first: 0,
                count: 3,
            },
            OutMsg {
                dst: r2.local_addr().unwrap(),
                first: 3,
                count: 1,
            },
            OutMsg {
                dst: r1.local_addr().unwrap(),
                first: 4,
                count: 2,
            },
        ];
        let mut s = UdpSender::new(8, 16);
        // The last message mixes lengths (100 then 33): GSO sends the
        // short one as the tail segment, as the kernel allows.
        assert_eq!(s.send(&tx, &bufs, &msgs).unwrap(), 3);
        let mut buf = [0u8; 2000];
        let mut got1 = Vec::new();
        for _ in 0..5 {
            let n = r1.recv(&mut buf).unwrap();
            got1.push(buf[..n].to_vec());
        }
        assert_eq!(
            got1[..3],
            p[..3],
            "GSO message split into its datagrams, in order"
        );
        assert_eq!(got1[3], p[4]);
        assert_eq!(got1[4], odd, "short tail segment");
        let n = r2.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], &p[3][..]);
        // Room is bounded by the descriptors: one message of 3 payloads
        // does not fit 2 iovecs, so nothing is taken.
        let mut small = UdpSender::new(1, 2);
        assert_eq!(small.send(&tx, &bufs, &msgs[..1]).unwrap(), 0);
    }
}
