//! UDP request/response serving: a group of SO_REUSEPORT sockets on one
//! port with a classic BPF program that hands each datagram to the socket
//! of the CPU it arrived on, and a reflector batch that receives requests
//! with their senders' addresses (`recvmmsg(2)`) and answers them from the
//! same buffers (`sendmmsg(2)`), with no copy and no allocation per
//! datagram.

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
}

impl std::fmt::Debug for Reflector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("batch", &self.rx.len())
            .field("slot", &self.slot)
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

    /// Receives up to the batch size; waits for the first datagram as the
    /// socket's timeout (or O_NONBLOCK) allows. A datagram longer than the
    /// slot is cut to it; [`Reflector::truncated`] says so.
    pub fn recv(&mut self, sock: &impl AsRawFd) -> io::Result<usize> {
        for h in &mut self.rx {
            h.msg_hdr.msg_namelen =
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // The headers point at this struct's slots, iovecs and addresses.
        crate::udp_batch::recv_each(sock.as_raw_fd(), &mut self.rx)
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

    /// Sends answers with one `sendmmsg(2)`: for each `(i, len)`, the first
    /// `len` bytes of slot `i` back to datagram `i`'s sender. Returns how
    /// many the kernel took (a prefix).
    pub fn reply(&mut self, sock: &impl AsRawFd, answers: &[(usize, usize)]) -> io::Result<usize> {
        let n = answers.len().min(self.tx.len());
        if n == 0 {
            return Ok(0);
        }
        let base = self.data.as_mut_ptr();
        for (k, &(i, len)) in answers[..n].iter().enumerate() {
            assert!(
                i < self.rx.len() && len <= self.slot,
                "answer outside its slot"
            );
            // slot i lies inside `data` and `len` fits in it
            self.tx_iov[k] = libc::iovec {
                iov_base: base.wrapping_add(i * self.slot).cast(),
                iov_len: len,
            };
            // SAFETY: a zeroed header is valid; it is pointed at this
            // answer's iovec and at the address the request came from.
            self.tx[k] = unsafe { std::mem::zeroed() };
            self.tx[k].msg_hdr.msg_iov = &mut self.tx_iov[k];
            self.tx[k].msg_hdr.msg_iovlen = 1;
            self.tx[k].msg_hdr.msg_name =
                (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
            self.tx[k].msg_hdr.msg_namelen = self.rx[i].msg_hdr.msg_namelen;
        }
        // tx[..n] point at live iovecs, buffers and addresses.
        crate::udp_batch::send_prepared(sock.as_raw_fd(), &mut self.tx[..n])
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

    #[test]
    fn reflector_answers_each_sender_from_its_own_buffer() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let to = server.local_addr().unwrap();
        let clients: Vec<UdpSocket> = (0..3)
            .map(|_| {
                let c = UdpSocket::bind("127.0.0.1:0").unwrap();
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                c
            })
            .collect();
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
            assert_eq!(r.reply(&server, &answers).unwrap(), answers.len());
            got += answers.len();
            answers.clear();
        }
        for (k, c) in clients.iter().enumerate() {
            let mut b = [0u8; 64];
            let n = c.recv(&mut b).unwrap();
            assert_eq!(&b[..n], &[k as u8 + 100; 12]);
        }
    }
}
