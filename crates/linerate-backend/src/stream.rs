//! Reads and writes on a connected stream socket by `syscall(2)`, not
//! through the C library's `read`/`send` wrappers: those are pthread
//! cancellation points, which in a process with more than one thread wrap
//! each call in two atomic updates of the thread's cancel state (see
//! `udp_batch`). The rr TCP workers read and write one small frame per
//! transaction, and a spinning one reads an empty socket between them:
//! these calls are most of their work.

use crate::udp_batch::done;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;

/// A borrowed stream socket read and written by raw system calls.
#[derive(Debug)]
pub struct RawStream<'a, S: AsRawFd>(pub &'a S);

impl<S: AsRawFd> Read for RawStream<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is live and writable for its length.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_read,
                self.0.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        done(rc)
    }
}

impl<S: AsRawFd> Write for RawStream<'_, S> {
    /// A `sendto(2)` without address, with MSG_NOSIGNAL (a closed peer is
    /// an EPIPE error, not a signal), as the standard library's write.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `buf` is live for its length; no address.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sendto,
                self.0.as_raw_fd(),
                buf.as_ptr(),
                buf.len(),
                libc::MSG_NOSIGNAL,
                std::ptr::null::<libc::sockaddr>(),
                0 as libc::socklen_t,
            )
        };
        done(rc)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn bytes_go_both_ways_and_a_closed_peer_is_an_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        assert_eq!(RawStream(&a).write(b"ping").unwrap(), 4);
        let mut got = [0u8; 8];
        assert_eq!(RawStream(&b).read(&mut got).unwrap(), 4);
        assert_eq!(&got[..4], b"ping");
        b.set_nonblocking(true).unwrap();
        let e = RawStream(&b).read(&mut got).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop(b);
        // the peer is gone: a write fails (EPIPE or ECONNRESET), no signal
        let mut failed = false;
        for _ in 0..100 {
            if RawStream(&a).write(&[0u8; 1024]).is_err() {
                failed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(failed);
    }
}
