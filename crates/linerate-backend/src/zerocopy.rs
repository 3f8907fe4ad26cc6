//! MSG_ZEROCOPY sends for TCP (Linux 4.14+): the kernel sends from the
//! caller's pages instead of copying them, and reports completions on the
//! socket's error queue, which must be drained.
//!
//! linerate's payload buffer never changes while a test runs, so the
//! buffer can be reused before its completion arrives; completions are only
//! drained so the error queue does not fill.

use std::io;
use std::os::fd::AsRawFd;

/// Turns SO_ZEROCOPY on.
pub fn enable(sock: &impl AsRawFd) -> io::Result<()> {
    crate::sockopt::setsockopt_raw(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_ZEROCOPY,
        &1i32.to_ne_bytes(),
    )
}

/// Sends `buf` with MSG_ZEROCOPY; returns the bytes the kernel took.
pub fn send(sock: &impl AsRawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a readable slice of the given length, alive for the
    // call; with MSG_ZEROCOPY the kernel pins its pages until completion,
    // and the caller keeps the buffer alive and unchanged (see module doc).
    let rc = unsafe {
        libc::send(
            sock.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_ZEROCOPY,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Reads every pending completion from the error queue without waiting;
/// returns how many notifications were read.
pub fn drain_completions(sock: &impl AsRawFd) -> usize {
    let mut n = 0;
    let mut control = [0u64; 16];
    loop {
        // SAFETY: msghdr is plain old data; zeroed is valid. It points only
        // at `control`, which lives across the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: valid msghdr with no data iovecs.
        let rc = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            return n;
        }
        n += 1;
        if n > 4096 {
            return n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn zerocopy_bytes_arrive_intact() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        enable(&c).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut sent = 0;
        while sent < data.len() {
            sent += send(&c, &data[sent..]).unwrap();
        }
        let mut got = vec![0u8; data.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, data);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // On loopback the kernel copies and still reports completions.
        assert!(drain_completions(&c) >= 1);
    }
}
