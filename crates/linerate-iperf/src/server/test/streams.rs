//! A test's data streams taken as they connect: TCP streams through the
//! accept loop (numbered in accept order once all are in), UDP streams by
//! their first datagram on the test port.

use super::*;

impl TestServer<'_> {
    /// While streams connect: waits up to `wake` for the next one (a TCP
    /// stream through the accept loop, a UDP stream's first datagram on the
    /// test port) or for control bytes, whichever comes first, and reads
    /// the control connection if it has bytes. A stream that connected is
    /// taken at the next turn at once (each waited for the control
    /// connection's read timeout, 20 ms, before).
    pub(super) fn wait_for_streams(
        &mut self,
        buf: &mut [u8],
        wake: Duration,
    ) -> std::io::Result<usize> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let tcp = self
            .params
            .as_ref()
            .is_none_or(|p| p.protocol == Protocol::Tcp);
        let ready = |fd: std::os::fd::BorrowedFd<'_>, ms: u16| {
            let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
            matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0)
        };
        if tcp {
            match self.env.data_rx.recv_timeout(wake) {
                Ok(s) => self.take_tcp_stream(s),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // The accept loop is gone (the server is stopping).
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return net::read_within(&mut self.ctrl, buf, wake);
                }
            }
            if ready(self.ctrl.as_fd(), 0) {
                return self.ctrl.read(buf);
            }
            return Err(ErrorKind::TimedOut.into());
        }
        let ms = u16::try_from(wake.as_millis().max(1)).unwrap_or(u16::MAX);
        let ctrl_ready = match self.udp_listener.as_ref() {
            Some(u) => {
                let mut fds = [
                    PollFd::new(self.ctrl.as_fd(), PollFlags::POLLIN),
                    PollFd::new(u.as_fd(), PollFlags::POLLIN),
                ];
                matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0)
                    && fds[0].revents().is_some_and(|r| !r.is_empty())
            }
            None => ready(self.ctrl.as_fd(), ms),
        };
        if ctrl_ready {
            self.ctrl.read(buf)
        } else {
            Err(ErrorKind::TimedOut.into())
        }
    }

    /// A TCP data connection whose cookie is this test's. The streams are
    /// numbered once all of them are in, in the order they were accepted
    /// (the order the client connected them): their cookies are read on
    /// threads of their own and came in any order, and a --bidir test
    /// whose two streams were swapped sent on both ends of one connection
    /// and read nothing from the other (it hung).
    fn take_tcp_stream(&mut self, c: DataConn) {
        self.arrived.push(c);
        let want = self.params.as_ref().map_or(0, Params::stream_count);
        if self.conns.len() + self.arrived.len() < want {
            return;
        }
        self.arrived.sort_by_key(|(order, _)| *order);
        for (_, s) in std::mem::take(&mut self.arrived) {
            let Some((id, sends)) = self.session.stream_connected() else {
                continue;
            };
            let desc = StreamDesc {
                id,
                socket: s.as_raw_fd(),
                sender: sends,
                local: s.local_addr().unwrap_or(self.peer),
                remote: s.peer_addr().unwrap_or(self.peer),
            };
            let _ = s.set_nonblocking(false);
            self.conns.push((Conn::Tcp(s), desc));
        }
    }

    /// Takes the streams that connected since the last look.
    pub(super) fn accept_streams(&mut self) -> Next {
        // The wait is for the next stream: a client that connects none
        // within the control timeout is dropped, one that keeps connecting
        // (hundreds of UDP streams on a loaded host) is not.
        let seen = self.conns.len() + self.arrived.len();
        if seen != self.streams_seen {
            self.streams_seen = seen;
            self.phase_start = Instant::now();
        }
        if self.phase_start.elapsed() > self.env.opts.control_timeout {
            self.session.fail(IErr(203));
            return Next::Again;
        }
        let tcp = self
            .params
            .as_ref()
            .is_none_or(|p| p.protocol == Protocol::Tcp);
        if tcp {
            while let Ok(s) = self.env.data_rx.try_recv() {
                self.take_tcp_stream(s);
            }
        } else {
            self.accept_udp();
        }
        Next::Go
    }

    /// A UDP stream's first datagram: the listening socket becomes that
    /// stream's (connected to the sender, answered with the connect reply)
    /// and a new one waits for the next stream.
    fn accept_udp(&mut self) {
        // Every stream that is knocking (each wait is the listener's 10 ms
        // read timeout): one per turn of the control loop took ~30 ms a
        // stream, seconds for -P 128.
        let want = self.params.as_ref().map_or(0, Params::stream_count);
        while self.conns.len() < want && self.session.accepting_streams() {
            // Only a datagram that is there: the wait is the control
            // loop's, on this socket and the control connection at once.
            let knocking = self.udp_listener.as_ref().is_some_and(|u| {
                use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
                use std::os::fd::AsFd;
                let mut fds = [PollFd::new(u.as_fd(), PollFlags::POLLIN)];
                matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
            });
            if !knocking || !self.accept_one_udp() {
                break;
            }
        }
    }

    /// One UDP stream's first datagram, if one comes within the listener's
    /// read timeout; false if none came.
    fn accept_one_udp(&mut self) -> bool {
        let Some(u) = self.udp_listener.as_ref() else {
            return false;
        };
        let mut b = [0u8; 64];
        let Ok((_, from)) = u.recv_from(&mut b) else {
            return false;
        };
        let conn = self.udp_listener.take().filter(|u| u.connect(from).is_ok());
        match (conn, self.udp_port()) {
            (Some(c), Ok(next)) => {
                self.udp_listener = Some(next);
                let _ = c.set_read_timeout(None);
                let _ = c.send(&udp_connect::REPLY);
                if let Some((id, sends)) = self.session.stream_connected() {
                    let desc = StreamDesc {
                        id,
                        socket: c.as_raw_fd(),
                        sender: sends,
                        local: c.local_addr().unwrap_or(self.peer),
                        remote: from,
                    };
                    self.conns.push((Conn::Udp(c), desc));
                }
                true
            }
            _ => {
                self.session.fail(IErr(203));
                false
            }
        }
    }
}
