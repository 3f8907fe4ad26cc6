//! UDP request/response serving: a group of SO_REUSEPORT sockets on one
//! port with a classic BPF program that hands each datagram to the socket
//! of the CPU it arrived on, and a reflector batch that receives requests
//! with their senders' addresses (`recvmmsg(2)`) and answers them from the
//! same buffers (`sendmmsg(2)`), with no copy and no allocation per
//! datagram; answers of one length to one sender leave as one UDP GSO
//! message (the kernel, or a NIC with USO, cuts it into datagrams).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic/socket.h; not in `libc` for Linux).
const SO_ATTACH_REUSEPORT_CBPF: i32 = 51;
/// The kernel's limit on a classic BPF program (BPF_MAXINSNS).
const CBPF_MAX_INSNS: usize = 4096;

fn insn(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The classic BPF program that picks, for a datagram processed on CPU
/// `c`, the socket `i` with `cpus[i] == c` (sockets are numbered in the
/// order they joined the group). A CPU not in the list goes to socket
/// `c % cpus.len()`.
///
/// ```text
/// ld  #cpu
/// jeq #cpus[0], 0, 1 ; ret #0
/// jeq #cpus[1], 0, 1 ; ret #1   ...
/// mod #len
/// ret a
/// ```
pub fn cpu_select_program(cpus: &[usize]) -> io::Result<Vec<libc::sock_filter>> {
    if cpus.is_empty() || 2 * cpus.len() + 3 > CBPF_MAX_INSNS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a CPU-select program needs 1 to {} CPUs, not {}",
                (CBPF_MAX_INSNS - 3) / 2,
                cpus.len()
            ),
        ));
    }
    let mut p = Vec::with_capacity(2 * cpus.len() + 3);
    p.push(insn(
        libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
        0,
        0,
        (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32,
    ));
    for (i, &c) in cpus.iter().enumerate() {
        p.push(insn(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            1,
            c as u32,
        ));
        p.push(insn(libc::BPF_RET | libc::BPF_K, 0, 0, i as u32));
    }
    p.push(insn(
        libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K,
        0,
        0,
        cpus.len() as u32,
    ));
    p.push(insn(libc::BPF_RET | libc::BPF_A, 0, 0, 0));
    Ok(p)
}

/// Runs a CPU-select program the way the kernel would for a datagram
/// processed on `cpu` (only the instructions [`cpu_select_program`] emits),
/// so the program's choices can be checked without traffic.
pub fn cpu_select_eval(prog: &[libc::sock_filter], cpu: u32) -> Option<u32> {
    let (mut a, mut pc) = (0u32, 0usize);
    while let Some(i) = prog.get(pc) {
        let code = u32::from(i.code);
        pc += 1;
        if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
            a = cpu;
        } else if code == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K {
            pc += usize::from(if a == i.k { i.jt } else { i.jf });
        } else if code == libc::BPF_RET | libc::BPF_K {
            return Some(i.k);
        } else if code == libc::BPF_RET | libc::BPF_A {
            return Some(a);
        } else if code == libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K {
            a = a.checked_rem(i.k)?;
        } else {
            return None;
        }
    }
    None
}

/// Attaches a CPU-select program to the reuseport group `sock` belongs to
/// (any member; it applies to the whole group).
pub fn attach_cpu_select(sock: &impl AsRawFd, cpus: &[usize]) -> io::Result<()> {
    let mut prog = cpu_select_program(cpus)?;
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `prog`, alive for the call; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
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

/// Most datagrams in one GSO answer (the kernel's UDP_MAX_SEGMENTS is 64
/// or, since 6.5, 128).
const GSO_SEGS_MAX: usize = 64;
/// Longest answer sent in a GSO group: each datagram must fit the path's
/// MTU (1,500-byte Ethernet less IPv6 and UDP headers); longer ones go
/// alone.
const GSO_SEG_MAX: usize = 1452;
/// Most bytes of payload in one GSO message (one UDP datagram's worth).
const GSO_BYTES_MAX: usize = 65_000;

/// Buffers and descriptors to receive up to `batch` datagrams with their
/// senders' addresses and send answers back from the same buffers.
pub struct Reflector {
    slot: usize,
    data: Vec<u8>,
    iov: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    rx: Vec<libc::mmsghdr>,
    tx: Vec<libc::mmsghdr>,
    tx_iov: Vec<libc::iovec>,
    /// Answers of one length to one sender go as one GSO message.
    gso: bool,
    /// Each message's UDP_SEGMENT control message.
    ctl: Vec<[u64; crate::udp_tx::CMSG_WORDS]>,
    /// How many answers each message of the last send carried.
    groups: Vec<usize>,
    /// Scratch: the groups of the answers being sent.
    heads: Vec<Group>,
    /// Scratch: each answer's group.
    gid: Vec<usize>,
    /// Scratch: where each group goes in the grouped order.
    start: Vec<usize>,
    /// Scratch: the answers in grouped order.
    grouped: Vec<(usize, usize)>,
    /// Messages the kernel took, since the start.
    messages: u64,
    /// How many receive headers the kernel may have written since they
    /// were last reset.
    dirty: usize,
}

/// How many of the groups opened last an answer may join (bounds the work
/// per answer when a batch holds many clients).
const OPEN_GROUPS: usize = 16;

/// Answers that go as one message.
#[derive(Debug, Clone, Copy)]
struct Group {
    /// Where they go and their length ([`Reflector::key`]); None: alone.
    key: Option<u64>,
    /// The slot of the first, whose address the message is sent to.
    first: usize,
    count: usize,
    /// Most answers the group may take.
    cap: usize,
}

impl std::fmt::Debug for Reflector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("batch", &self.rx.len())
            .field("slot", &self.slot)
            .field("gso", &self.gso)
            .finish()
    }
}

// SAFETY: the raw pointers in the descriptors point into this struct's own
// heap buffers and are rewritten before every call.
unsafe impl Send for Reflector {}

impl Reflector {
    /// Room for `batch` datagrams of up to `slot` bytes each.
    pub fn new(batch: usize, slot: usize) -> Self {
        let batch = batch.max(1);
        let slot = slot.max(1);
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        // SAFETY: plain old data; all-zero is a valid empty value.
        let (rx, tx, names) = unsafe {
            (
                vec![std::mem::zeroed::<libc::mmsghdr>(); batch],
                vec![std::mem::zeroed::<libc::mmsghdr>(); batch],
                vec![std::mem::zeroed::<libc::sockaddr_storage>(); batch],
            )
        };
        let mut r = Self {
            slot,
            data: vec![0; batch * slot],
            iov: vec![empty; batch],
            names,
            rx,
            tx,
            tx_iov: vec![empty; batch],
            gso: false,
            ctl: vec![[0; crate::udp_tx::CMSG_WORDS]; batch],
            groups: Vec::with_capacity(batch),
            heads: Vec::with_capacity(batch),
            gid: Vec::with_capacity(batch),
            start: Vec::with_capacity(batch),
            grouped: Vec::with_capacity(batch),
            messages: 0,
            dirty: batch,
        };
        // The receive headers point at heap buffers that never move: set
        // them up once; each receive only resets what the kernel writes.
        let base = r.data.as_mut_ptr();
        for i in 0..batch {
            // slot i lies inside `data`
            r.iov[i] = libc::iovec {
                iov_base: base.wrapping_add(i * slot).cast(),
                iov_len: slot,
            };
            r.rx[i].msg_hdr.msg_iov = &mut r.iov[i];
            r.rx[i].msg_hdr.msg_iovlen = 1;
            r.rx[i].msg_hdr.msg_name = (&mut r.names[i] as *mut libc::sockaddr_storage).cast();
        }
        r
    }

    /// How many datagrams one call can take.
    pub fn capacity(&self) -> usize {
        self.rx.len()
    }

    /// Sends answers of one length to one sender as one UDP GSO message
    /// (`on`), or each as its own message.
    pub fn set_gso(&mut self, on: bool) {
        self.gso = on;
    }

    /// Whether answers are grouped into GSO messages (turned off by itself
    /// when the kernel refuses one).
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// How many messages the kernel took since the start (a GSO message
    /// carries several answers).
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// A 64-bit key of where the answer in slot `i` goes and its length
    /// (`len`, at most [`GSO_SEG_MAX`]): exact for IPv4, a fold of the
    /// address for IPv6 (confirmed by [`same_dest`](Self::same_dest)).
    /// None: never grouped.
    #[inline]
    fn key(&self, i: usize, len: usize) -> Option<u64> {
        if len == 0 || len > GSO_SEG_MAX {
            return None;
        }
        let s = &self.names[i];
        match i32::from(s.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let a =
                    unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
                Some(u64::from(a.sin_addr.s_addr) << 32 | u64::from(a.sin_port) << 16 | len as u64)
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let a =
                    unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
                let x = u128::from_ne_bytes(a.sin6_addr.s6_addr);
                let fold = (x as u64) ^ ((x >> 64) as u64).rotate_left(17);
                Some(fold ^ (u64::from(a.sin6_port) << 16 | len as u64) ^ 1)
            }
            _ => None,
        }
    }

    /// Whether slots `a` and `b`, whose keys are equal, came from the same
    /// address: the same family, and for IPv6 the same address, port and
    /// scope (IPv4 keys are exact).
    fn same_dest(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.names[a], &self.names[b]);
        if x.ss_family != y.ss_family {
            return false;
        }
        if i32::from(x.ss_family) != libc::AF_INET6 {
            return true;
        }
        // SAFETY: both hold a sockaddr_in6 (the family says so).
        let (x, y) = unsafe {
            (
                &*(x as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>(),
                &*(y as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>(),
            )
        };
        x.sin6_addr.s6_addr == y.sin6_addr.s6_addr
            && x.sin6_port == y.sin6_port
            && x.sin6_scope_id == y.sin6_scope_id
    }

    /// Puts answers that can share a GSO message next to each other (in
    /// their order within a group; groups in the order of their first
    /// answer) and records each group's size in `groups`. An answer joins
    /// one of the last [`OPEN_GROUPS`] groups opened, so the work per
    /// answer is bounded whatever the batch holds.
    fn group(&mut self, answers: &mut [(usize, usize)]) {
        self.groups.clear();
        if !self.gso || answers.len() < 2 {
            self.groups.extend(std::iter::repeat_n(1, answers.len()));
            return;
        }
        // each answer's group
        let mut heads = std::mem::take(&mut self.heads);
        heads.clear();
        self.gid.clear();
        let mut in_order = true;
        // the previous answer's group: most often this one's too
        let mut prev = usize::MAX;
        for &(i, len) in answers.iter() {
            let key = self.key(i, len);
            let fits = |h: &Group| {
                key.is_some() && h.key == key && h.count < h.cap && self.same_dest(h.first, i)
            };
            let found = if heads.get(prev).is_some_and(fits) {
                Some(prev)
            } else {
                let lo = heads.len().saturating_sub(OPEN_GROUPS);
                heads[lo..].iter().rposition(fits).map(|g| g + lo)
            };
            let g = match found {
                Some(g) => {
                    heads[g].count += 1;
                    g
                }
                None => {
                    heads.push(Group {
                        key,
                        first: i,
                        count: 1,
                        cap: GSO_SEGS_MAX.min((GSO_BYTES_MAX / len.max(1)).max(1)),
                    });
                    heads.len() - 1
                }
            };
            in_order &= prev == usize::MAX || g >= prev;
            prev = g;
            self.gid.push(g);
        }
        self.groups.extend(heads.iter().map(|h| h.count));
        self.heads = heads;
        if in_order {
            return;
        }
        // counting sort by group, stable
        let mut start = std::mem::take(&mut self.start);
        start.clear();
        let mut at = 0;
        for &n in &self.groups {
            start.push(at);
            at += n;
        }
        self.grouped.clear();
        self.grouped.resize(answers.len(), (0, 0));
        for (&a, &g) in answers.iter().zip(&self.gid) {
            self.grouped[start[g]] = a;
            start[g] += 1;
        }
        answers.copy_from_slice(&self.grouped);
        self.start = start;
    }

    /// Receives up to the batch size; waits for the first datagram as the
    /// socket's timeout (or O_NONBLOCK) allows. A datagram longer than the
    /// slot is cut to it; [`Reflector::truncated`] says so.
    pub fn recv(&mut self, sock: &impl AsRawFd) -> io::Result<usize> {
        self.recv_upto(sock, self.rx.len())
    }

    /// Receives up to `want` datagrams (1 to the batch size), as
    /// [`recv`](Self::recv). One comes by `recvfrom(2)`, with no message
    /// headers to copy in and no look for a second datagram that is not
    /// there (what a batch of one or more costs `recvmmsg`).
    pub fn recv_upto(&mut self, sock: &impl AsRawFd, want: usize) -> io::Result<usize> {
        let want = want.clamp(1, self.rx.len());
        // Only the headers the kernel wrote last time need resetting.
        for h in &mut self.rx[..self.dirty] {
            h.msg_hdr.msg_namelen =
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        let r = if want == 1 {
            self.recv_one(sock.as_raw_fd())
        } else {
            // The headers point at this struct's slots, iovecs and addresses.
            crate::udp_batch::recv_each(sock.as_raw_fd(), &mut self.rx[..want])
        };
        // after an error, assume the worst
        self.dirty = *r.as_ref().unwrap_or(&want);
        r
    }

    /// One datagram into slot 0 by `recvfrom(2)`, its sender, length and
    /// truncation written into receive header 0 as `recvmmsg` would.
    fn recv_one(&mut self, fd: i32) -> io::Result<usize> {
        let h = &mut self.rx[0];
        // MSG_TRUNC: the datagram's whole length, to tell a cut one.
        // SAFETY: slot 0 is `self.slot` writable bytes inside `data`; the
        // address and its length are this struct's.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                fd,
                self.data.as_mut_ptr(),
                self.slot,
                libc::MSG_TRUNC,
                h.msg_hdr.msg_name,
                &mut h.msg_hdr.msg_namelen as *mut libc::socklen_t,
            )
        };
        let whole = crate::udp_batch::done(rc)?;
        if whole > self.slot {
            h.msg_hdr.msg_flags = libc::MSG_TRUNC;
        }
        h.msg_len = whole.min(self.slot) as libc::c_uint;
        Ok(1)
    }

    /// Datagram `i` of the last receive, as received.
    pub fn datagram(&self, i: usize) -> &[u8] {
        let len = (self.rx[i].msg_len as usize).min(self.slot);
        &self.data[i * self.slot..i * self.slot + len]
    }

    /// Whether datagram `i` was longer than the slot (and cut).
    pub fn truncated(&self, i: usize) -> bool {
        self.rx[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0
    }

    /// The whole slot of datagram `i`, to write its answer into.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * self.slot..(i + 1) * self.slot]
    }

    /// The sender of datagram `i` of the last receive.
    pub fn source(&self, i: usize) -> Option<SocketAddr> {
        let s = &self.names[i];
        match i32::from(s.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let a =
                    unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let a =
                    unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    /// Whether datagram `i` came from `peer` (its address and port).
    fn from(&self, i: usize, peer: Option<SocketAddr>) -> bool {
        peer.is_some_and(|p| {
            self.source(i)
                .is_some_and(|s| s.ip() == p.ip() && s.port() == p.port())
        })
    }

    /// Sends answers with one `sendmmsg(2)`: for each `(i, len)`, the first
    /// `len` bytes of slot `i` back to datagram `i`'s sender. With GSO on,
    /// `answers` is first reordered so that answers of one length to one
    /// sender are next to each other (each sender's in their order), and
    /// each such run goes as one message. Returns how many answers the
    /// kernel took: a prefix of the (reordered) `answers`. If the kernel
    /// refuses a GSO message (a path whose MTU is smaller than an answer,
    /// no checksum offload), GSO is turned off and the answers are sent
    /// one per message. On a socket connected to `peer`, an answer to
    /// `peer` goes without an address (by the route the socket caches;
    /// an address makes the kernel look the route up again).
    pub fn reply(
        &mut self,
        sock: &impl AsRawFd,
        answers: &mut [(usize, usize)],
        peer: Option<SocketAddr>,
    ) -> io::Result<usize> {
        let n = answers.len().min(self.tx.len());
        if n == 0 {
            return Ok(0);
        }
        let answers = &mut answers[..n];
        self.group(answers);
        if self.groups.len() == 1 && self.groups[0] == 1 {
            // One answer: `sendto(2)`, no message header to copy in.
            let (i, len) = answers[0];
            let (name, namelen) = if self.from(i, peer) {
                (std::ptr::null(), 0)
            } else {
                (
                    &self.names[i] as *const libc::sockaddr_storage,
                    self.rx[i].msg_hdr.msg_namelen,
                )
            };
            let at = i * self.slot;
            let buf = &self.data[at..at + len];
            crate::udp_batch::send_to_raw(sock.as_raw_fd(), buf, name, namelen)?;
            self.messages += 1;
            return Ok(1);
        }
        let base = self.data.as_mut_ptr();
        for (k, &(i, len)) in answers.iter().enumerate() {
            assert!(
                i < self.rx.len() && len <= self.slot,
                "answer outside its slot"
            );
            // slot i lies inside `data` and `len` fits in it
            self.tx_iov[k] = libc::iovec {
                iov_base: base.wrapping_add(i * self.slot).cast(),
                iov_len: len,
            };
        }
        let mut first = 0;
        for (m, &g) in self.groups.iter().enumerate() {
            let (i, len) = answers[first];
            let named = !self.from(i, peer);
            // SAFETY: a zeroed header is valid; it is pointed at this
            // group's iovecs and at the address its requests came from
            // (none for the connected peer).
            self.tx[m] = unsafe { std::mem::zeroed() };
            let h = &mut self.tx[m].msg_hdr;
            h.msg_iov = &mut self.tx_iov[first];
            h.msg_iovlen = g;
            if named {
                h.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
                h.msg_namelen = self.rx[i].msg_hdr.msg_namelen;
            }
            if g > 1 {
                // every answer in a group has this length (<= GSO_SEG_MAX)
                crate::udp_tx::set_segment(h, &mut self.ctl[m], len as u16);
            }
            first += g;
        }
        let msgs = self.groups.len();
        // tx[..msgs] point at live iovecs, buffers, control messages and
        // addresses.
        match crate::udp_batch::send_prepared(sock.as_raw_fd(), &mut self.tx[..msgs]) {
            Ok(sent) => {
                self.messages += sent as u64;
                Ok(self.groups[..sent].iter().sum())
            }
            Err(e)
                if self.groups[0] > 1
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EINVAL | libc::EIO | libc::EMSGSIZE | libc::ENOPROTOOPT)
                    ) =>
            {
                self.gso = false;
                self.reply(sock, answers, peer)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    #[test]
    fn program_maps_each_listed_cpu_to_its_socket() {
        let p = cpu_select_program(&[3, 1, 7]).unwrap();
        assert_eq!(cpu_select_eval(&p, 3), Some(0));
        assert_eq!(cpu_select_eval(&p, 1), Some(1));
        assert_eq!(cpu_select_eval(&p, 7), Some(2));
        // unlisted CPUs spread by modulo
        assert_eq!(cpu_select_eval(&p, 4), Some(1));
        assert_eq!(cpu_select_eval(&p, 0), Some(0));
        assert!(cpu_select_program(&[]).is_err());
        assert!(cpu_select_program(&vec![0; 3000]).is_err());
    }

    #[test]
    fn kernel_accepts_the_program_on_a_reuseport_group() {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        s.set_reuse_port(true).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        attach_cpu_select(&s, &[0, 1]).unwrap();
    }

    /// A server socket on `local`, its address, and `n` client sockets on
    /// the same loopback, every one with a 2 s receive timeout.
    fn server_and_clients(local: &str, n: usize) -> (UdpSocket, SocketAddr, Vec<UdpSocket>) {
        let bind = || {
            let s = UdpSocket::bind(local).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            s
        };
        let server = bind();
        let to = server.local_addr().unwrap();
        (server, to, (0..n).map(|_| bind()).collect())
    }

    #[test]
    fn reflector_answers_each_sender_from_its_own_buffer() {
        let (server, to, clients) = server_and_clients("127.0.0.1:0", 3);
        for (k, c) in clients.iter().enumerate() {
            c.send_to(&[k as u8; 10], to).unwrap();
        }
        let mut r = Reflector::new(8, 16);
        let mut got = 0;
        let mut answers = Vec::new();
        while got < 3 {
            let n = r.recv(&server).unwrap();
            for i in 0..n {
                let src = r.source(i).unwrap();
                assert!(clients.iter().any(|c| c.local_addr().unwrap() == src));
                assert_eq!(r.datagram(i).len(), 10);
                let first = r.datagram(i)[0];
                r.slot_mut(i)[..12].fill(first + 100);
                answers.push((i, 12));
            }
            assert_eq!(r.reply(&server, &mut answers, None).unwrap(), answers.len());
            got += answers.len();
            answers.clear();
        }
        for (k, c) in clients.iter().enumerate() {
            let mut b = [0u8; 64];
            let n = c.recv(&mut b).unwrap();
            assert_eq!(&b[..n], &[k as u8 + 100; 12]);
        }
    }

    #[test]
    fn an_answer_to_the_connected_peer_goes_without_an_address() {
        let (server, to, clients) = server_and_clients("127.0.0.1:0", 2);
        let mut r = Reflector::new(4, 16);
        // unconnected: without an address the kernel has nowhere to send,
        // which shows that none was given for the peer's answer
        clients[0].send_to(&[1u8; 10], to).unwrap();
        assert_eq!(r.recv_upto(&server, 1).unwrap(), 1);
        let peer = clients[0].local_addr().ok();
        let e = r.reply(&server, &mut [(0, 10)], peer).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EDESTADDRREQ), "{e}");
        // a datagram from another sender (queued before the connect) is
        // answered at its own address, the peer's by the connection
        clients[1].send_to(&[2u8; 10], to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        server.connect(peer.unwrap()).unwrap();
        clients[0].send_to(&[3u8; 10], to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..2 {
            assert_eq!(r.recv_upto(&server, 1).unwrap(), 1);
            let first = r.datagram(0)[0];
            r.slot_mut(0)[..10].fill(first + 100);
            assert_eq!(r.reply(&server, &mut [(0, 10)], peer).unwrap(), 1);
        }
        // and in a batch of two messages
        clients[0].send_to(&[4u8; 10], to).unwrap();
        clients[0].send_to(&[5u8; 12], to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(r.recv_upto(&server, 4).unwrap(), 2);
        r.slot_mut(0)[..10].fill(104);
        r.slot_mut(1)[..12].fill(105);
        assert_eq!(r.reply(&server, &mut [(0, 10), (1, 12)], peer).unwrap(), 2);
        let mut b = [0u8; 64];
        for (c, want) in [(0, 103u8), (0, 104), (0, 105), (1, 102)] {
            clients[c]
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let n = clients[c].recv(&mut b).unwrap();
            assert!(
                b[..n].iter().all(|&x| x == want),
                "client {c}: {:?}",
                &b[..n]
            );
        }
    }

    #[test]
    fn a_receive_of_one_gives_its_sender_length_and_truncation() {
        let (server, to, clients) = server_and_clients("127.0.0.1:0", 2);
        clients[0].send_to(&[7u8; 10], to).unwrap();
        clients[1].send_to(&[9u8; 40], to).unwrap();
        let mut r = Reflector::new(4, 16);
        assert_eq!(r.recv_upto(&server, 1).unwrap(), 1);
        assert_eq!(r.source(0), Some(clients[0].local_addr().unwrap()));
        assert_eq!(r.datagram(0), &[7u8; 10]);
        assert!(!r.truncated(0));
        r.slot_mut(0)[..10].fill(17);
        assert_eq!(r.reply(&server, &mut [(0, 10)], None).unwrap(), 1);
        assert_eq!(r.messages(), 1);
        let mut b = [0u8; 64];
        assert_eq!(clients[0].recv(&mut b).unwrap(), 10);
        assert_eq!(&b[..10], &[17u8; 10]);
        // longer than the slot: cut to it, and said so
        assert_eq!(r.recv_upto(&server, 1).unwrap(), 1);
        assert_eq!(r.source(0), Some(clients[1].local_addr().unwrap()));
        assert_eq!(r.datagram(0), &[9u8; 16]);
        assert!(r.truncated(0));
        // nothing more: a receive of one times out as a batch does
        server
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        assert!(r.recv_upto(&server, 1).is_err());
        // then a batch after a receive of one starts clean
        clients[0].send_to(&[1u8; 3], to).unwrap();
        clients[0].send_to(&[2u8; 4], to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(r.recv_upto(&server, 4).unwrap(), 2);
        assert_eq!(
            (r.datagram(0), r.datagram(1)),
            (&[1u8; 3][..], &[2u8; 4][..])
        );
        assert!(!r.truncated(0) && !r.truncated(1));
    }

    /// Three clients' requests, interleaved, answered in one batch with
    /// GSO on (`no_check`: the server socket sends without UDP checksums,
    /// which the kernel refuses for GSO): every client gets each of its
    /// answers once, in its order; with GSO working, one message per
    /// client (and one more for an answer of another length).
    fn grouped_answers(no_check: bool, local: &str) {
        let (server, to, clients) = server_and_clients(local, 3);
        if no_check {
            crate::sockopt::setsockopt_raw(
                server.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_NO_CHECK,
                &1i32.to_ne_bytes(),
            )
            .unwrap();
        }
        // 4 rounds: client k sends [k, round]; client 2's last is longer
        for round in 0..4u8 {
            for (k, c) in clients.iter().enumerate() {
                let len = if k == 2 && round == 3 { 20 } else { 10 };
                let mut d = vec![k as u8; len];
                d[1] = round;
                c.send_to(&d, to).unwrap();
            }
        }
        let mut r = Reflector::new(16, 32);
        r.set_gso(true);
        assert_eq!(r.recv(&server).unwrap(), 12, "one batch");
        let mut answers: Vec<(usize, usize)> = (0..12).map(|i| (i, r.datagram(i).len())).collect();
        for &(i, len) in &answers {
            // the answer: the request with 100 added to every byte
            let d: Vec<u8> = r.datagram(i).iter().map(|b| b + 100).collect();
            r.slot_mut(i)[..len].copy_from_slice(&d);
        }
        assert_eq!(r.reply(&server, &mut answers, None).unwrap(), 12);
        let mut sorted = answers.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..12)
                .map(|i| (i, if i == 11 { 20 } else { 10 }))
                .collect::<Vec<_>>()
        );
        if no_check {
            assert!(!r.gso(), "the kernel refused GSO: turned off");
            assert_eq!(r.messages(), 12);
        } else {
            assert!(r.gso());
            assert_eq!(r.messages(), 4, "one per client, one for the longer answer");
        }
        for (k, c) in clients.iter().enumerate() {
            for round in 0..4u8 {
                let mut b = [0u8; 64];
                let n = c.recv(&mut b).unwrap();
                let len = if k == 2 && round == 3 { 20 } else { 10 };
                assert_eq!(n, len, "client {k} round {round}");
                assert_eq!(b[0], k as u8 + 100);
                assert_eq!(b[1], round + 100, "client {k}: answers in order");
            }
            c.set_nonblocking(true).unwrap();
            assert!(c.recv(&mut [0u8; 64]).is_err(), "client {k}: nothing more");
        }
    }

    #[test]
    fn answers_to_one_client_share_a_gso_message() {
        grouped_answers(false, "127.0.0.1:0");
        if UdpSocket::bind("[::1]:0").is_ok() {
            grouped_answers(false, "[::1]:0");
        } else {
            eprintln!("no IPv6 loopback: the IPv6 grouping is not checked");
        }
    }

    #[test]
    fn a_refused_gso_message_falls_back_to_one_per_answer() {
        grouped_answers(true, "127.0.0.1:0");
    }

    /// Clients' requests interleaved in one batch, three each: with fewer
    /// clients than the groups an answer may join, one message per
    /// client; with more, each answer's group is out of reach and every
    /// answer goes alone. Either way each goes once, to its client, in
    /// its client's order.
    #[test]
    fn many_clients_in_one_batch() {
        interleaved_clients(10, 10);
        interleaved_clients(40, 120);
    }

    fn interleaved_clients(n: usize, messages: u64) {
        let (server, to, clients) = server_and_clients("127.0.0.1:0", n);
        for round in 0..3u8 {
            for (k, c) in clients.iter().enumerate() {
                c.send_to(&[k as u8, round, 0, 0], to).unwrap();
            }
        }
        let mut r = Reflector::new(128, 16);
        r.set_gso(true);
        assert_eq!(r.recv(&server).unwrap(), 3 * n, "one batch");
        let mut answers: Vec<(usize, usize)> = (0..3 * n).map(|i| (i, 4)).collect();
        assert_eq!(r.reply(&server, &mut answers, None).unwrap(), 3 * n);
        assert!(r.gso());
        assert_eq!(r.messages(), messages, "{n} clients");
        for (k, c) in clients.iter().enumerate() {
            for round in 0..3u8 {
                let mut b = [0u8; 16];
                let n = c.recv(&mut b).unwrap();
                assert_eq!(&b[..n], &[k as u8, round, 0, 0], "client {k}");
            }
        }
    }
}
