//! One TCP connection of the rr client and its buffers (a request frame
//! queued, what the kernel took written), and how one is made: non-blocking
//! connect, then told made once it polls writable. The persistent client
//! (`links.rs`, `persistent.rs`) and the connection-per-transaction one
//! (`crr.rs`) share them.

use crate::tcp::frame::{FrameReader, put_len};
use linerate_backend::stream::RawStream;
use linerate_wire::RrHeader;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};

/// Request bytes a connection may have waiting for the kernel; beyond it
/// no more are queued on it (counted `send_blocked`).
pub(super) const WR_HIGH: usize = 64 * 1024;

/// One connection and its buffers.
pub(super) struct Conn {
    pub(super) s: Option<TcpStream>,
    pub(super) rd: FrameReader,
    pub(super) wr: Vec<u8>,
    pub(super) wpos: usize,
}

impl Conn {
    pub(super) fn new(max_response: usize) -> Self {
        Self {
            s: None,
            rd: FrameReader::new(max_response),
            wr: Vec::new(),
            wpos: 0,
        }
    }

    pub(super) fn pending(&self) -> usize {
        self.wr.len() - self.wpos
    }

    /// Writes what the kernel takes.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        let Some(s) = self.s.as_mut() else {
            return Ok(());
        };
        while self.wpos < self.wr.len() {
            match RawStream(&*s).write(&self.wr[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wr.len() {
            self.wr.clear();
            self.wpos = 0;
        } else if self.wpos >= WR_HIGH {
            self.wr.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(())
    }

    /// Appends a request frame of `size` bytes with header `h`.
    pub(super) fn queue(&mut self, h: &RrHeader, size: usize) {
        put_len(&mut self.wr, size);
        let at = self.wr.len();
        self.wr.resize(at + size, 0);
        h.emit(&mut self.wr[at..]).expect("requests hold a header");
    }
}

/// Starts a non-blocking connection to the server (the socket made
/// non-blocking by `socket(2)` itself, no `fcntl` pair); `nodelay` sets
/// TCP_NODELAY (a connection that sends one frame of at most
/// [`ONE_SEGMENT`](crate::tcp::frame::ONE_SEGMENT) bytes has no use for it: Nagle's algorithm holds a
/// small segment only while data is unacknowledged).
pub(super) fn start_connect(
    server: SocketAddr,
    bind: Option<std::net::IpAddr>,
    nodelay: bool,
) -> io::Result<TcpStream> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM.nonblocking(),
        None,
    )?;
    if nodelay {
        s.set_tcp_nodelay(true)?;
    }
    if let Some(ip) = bind {
        s.bind(&SocketAddr::new(ip, 0).into())?;
    }
    match s.connect(&server.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(nix::libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from(s))
}

/// Whether a connection that polled writable is made.
pub(super) fn connected(s: &TcpStream) -> bool {
    matches!(s.take_error(), Ok(None)) && s.peer_addr().is_ok()
}

/// Whether a connect whose socket polled with `events` (its first
/// readiness since the connect began) is made: a failed connect raises
/// EPOLLERR (and EPOLLHUP) with the error; a made one only writability
/// (and readability once data came). No system call.
pub(super) fn connect_made(events: nix::sys::epoll::EpollFlags) -> bool {
    use nix::sys::epoll::EpollFlags as F;
    events.contains(F::EPOLLOUT) && !events.intersects(F::EPOLLERR | F::EPOLLHUP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::epoll::EpollFlags as F;

    #[test]
    fn a_connect_is_made_when_writable_without_an_error() {
        assert!(connect_made(F::EPOLLOUT));
        assert!(connect_made(F::EPOLLOUT | F::EPOLLIN));
        // refused or failed: the error and the hang-up come with it
        assert!(!connect_made(F::EPOLLOUT | F::EPOLLERR | F::EPOLLHUP));
        assert!(!connect_made(
            F::EPOLLIN | F::EPOLLERR | F::EPOLLHUP | F::EPOLLRDHUP
        ));
        assert!(!connect_made(F::EPOLLERR));
        // readable alone is no writability
        assert!(!connect_made(F::EPOLLIN));
    }

    #[test]
    fn a_connect_to_a_closed_port_polls_as_failed() {
        use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent};
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let ep = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).unwrap();
        let s = start_connect(port, None, false).unwrap();
        let watch = F::EPOLLIN | F::EPOLLOUT | F::EPOLLET;
        ep.add(&s, EpollEvent::new(watch, 1)).unwrap();
        let mut ev = [EpollEvent::empty(); 1];
        assert_eq!(ep.wait(&mut ev, 2000u16).unwrap(), 1);
        assert!(!connect_made(ev[0].events()), "{:?}", ev[0].events());
        assert!(!connected(&s));
    }
}
