//! Socket options not covered by std or socket2.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// The TCP_INFO fields iperf3 reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// RTT variance, µs.
    pub rttvar_us: u32,
    /// Congestion window in bytes (segments × MSS).
    pub snd_cwnd_bytes: u64,
    /// Sender MSS.
    pub snd_mss: u32,
    /// Path MTU.
    pub pmtu: u32,
    /// Retransmitted segments over the connection's life.
    pub total_retrans: u32,
    /// Peer's advertised receive window, bytes (kernel 5.19+, else 0).
    pub snd_wnd: u32,
    /// Reordering seen.
    pub reordering: u32,
    /// Reordering events seen (tcpi_reord_seen, kernel 4.19+, else 0).
    pub reord_seen: u32,
}

fn getsockopt_raw<T>(fd: RawFd, level: i32, name: i32, val: &mut T) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` points to a writable T of `len` bytes; the kernel writes at most `len`.
    let rc = unsafe { libc::getsockopt(fd, level, name, (val as *mut T).cast(), &mut len) };
    if rc == 0 {
        Ok(len as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(crate) fn setsockopt_raw(fd: RawFd, level: i32, name: i32, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is a readable buffer of the given length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads TCP_INFO of a TCP socket.
pub fn tcp_info(sock: &impl AsRawFd) -> io::Result<TcpInfo> {
    // Linux struct tcp_info, read as 4-byte words: the layout is stable ABI.
    let mut words = [0u32; 64];
    let len = getsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_INFO,
        &mut words,
    )?;
    let w = |i: usize| if (i + 1) * 4 <= len { words[i] } else { 0 };
    // Offsets in u32 words of Linux struct tcp_info: eight u8 fields fill
    // words 0-1, then tcpi_rto (2), ato, snd_mss (4), rcv_mss, unacked,
    // sacked, lost, retrans, fackets, four last_* times, pmtu (15),
    // rcv_ssthresh, rtt (17), rttvar (18), snd_ssthresh, snd_cwnd (20),
    // advmss, reordering (22), rcv_rtt, rcv_space, total_retrans (25); after
    // the 64-bit rate and byte counters, snd_wnd is word 57 (kernel 5.19+).
    let snd_mss = w(4);
    let pmtu = w(15);
    let rtt_us = w(17);
    let rttvar_us = w(18);
    let snd_cwnd = w(20);
    let reordering = w(22);
    let total_retrans = w(25);
    let snd_wnd = w(57);
    let reord_seen = w(55);
    Ok(TcpInfo {
        rtt_us,
        rttvar_us,
        snd_cwnd_bytes: u64::from(snd_cwnd) * u64::from(snd_mss),
        snd_mss,
        pmtu,
        total_retrans,
        snd_wnd,
        reordering,
        reord_seen,
    })
}

/// TCP_CONGESTION of a socket.
pub fn congestion(sock: &impl AsRawFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let len = getsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        &mut buf,
    )?;
    let s = &buf[..len.min(16)];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Ok(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// Sets TCP_CONGESTION (e.g. "cubic", "bbr").
pub fn set_congestion(sock: &impl AsRawFd, name: &str) -> io::Result<()> {
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        name.as_bytes(),
    )
}

/// Sets SO_MAX_PACING_RATE (bytes per second).
pub fn set_max_pacing_rate(sock: &impl AsRawFd, bytes_per_s: u64) -> io::Result<()> {
    let v = bytes_per_s.min(u64::from(u32::MAX)) as u32;
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        &v.to_ne_bytes(),
    )
}

/// Sets TCP_MAXSEG.
pub fn set_mss(sock: &impl AsRawFd, mss: u32) -> io::Result<()> {
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_MAXSEG,
        &(mss as i32).to_ne_bytes(),
    )
}

/// TCP_MAXSEG of a connected socket.
pub fn mss(sock: &impl AsRawFd) -> io::Result<u32> {
    let mut v: i32 = 0;
    getsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_MAXSEG,
        &mut v,
    )?;
    Ok(v.max(0) as u32)
}

/// Enables UDP generic segmentation offload (UDP_SEGMENT, Linux 4.18+):
/// every send on the socket of more than `segment` bytes is split by the
/// kernel into datagrams of `segment` bytes, after one trip through the
/// stack. `segment` 0 turns it off.
pub fn set_udp_segment(sock: &impl AsRawFd, segment: u16) -> io::Result<()> {
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::SOL_UDP,
        libc::UDP_SEGMENT,
        &i32::from(segment).to_ne_bytes(),
    )
}

/// Sets IP_MTU_DISCOVER to "do" (DF on every datagram), IPv4.
pub fn set_dont_fragment(sock: &impl AsRawFd) -> io::Result<()> {
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        &libc::IP_PMTUDISC_DO.to_ne_bytes(),
    )
}

/// Receives up to `max` bytes of a TCP stream without copying them
/// (recv with MSG_TRUNC: the kernel discards the data and returns how much
/// it took; iperf3's `--skip-rx-copy`). 0 at end of stream.
pub fn recv_discard(sock: &impl AsRawFd, max: usize) -> io::Result<usize> {
    let mut scratch = [0u8; 1];
    // SAFETY: with MSG_TRUNC on TCP the kernel writes nothing to the
    // buffer; it is a valid one-byte buffer regardless.
    let rc = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            scratch.as_mut_ptr().cast(),
            max,
            libc::MSG_TRUNC,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// IPPROTO_MPTCP (Linux 5.6+).
pub const IPPROTO_MPTCP: i32 = 262;
const SOL_MPTCP: i32 = 284;
const MPTCP_INFO: i32 = 1;

/// Whether a connected socket is speaking Multipath TCP (an MPTCP socket
/// whose peer did not take MPTCP falls back to plain TCP: then false).
pub fn is_mptcp(sock: &impl AsRawFd) -> bool {
    let mut info = [0u8; 256];
    getsockopt_raw(sock.as_raw_fd(), SOL_MPTCP, MPTCP_INFO, &mut info).is_ok()
}

/// Linux `struct in6_flowlabel_req` (linux/in6.h).
#[repr(C)]
struct FlowLabelReq {
    dst: libc::in6_addr,
    label: u32,
    action: u8,
    share: u8,
    flags: u16,
    expires: u16,
    linger: u16,
    pad: u32,
}

const IPV6_FLOWLABEL_MGR: i32 = 32;
const IPV6_FLOWINFO_SEND: i32 = 33;
const IPV6_FL_A_GET: u8 = 0;
const IPV6_FL_S_ANY: u8 = 255;
const IPV6_FL_F_CREATE: u16 = 1;

/// Asks the kernel for IPv6 flow label `label` (20 bits) towards `dst` and
/// turns on sending flow info from the socket's connect address; connect
/// with `sin6_flowinfo` = the label afterwards (iperf3's `-L`).
pub fn set_flow_label(sock: &impl AsRawFd, dst: std::net::Ipv6Addr, label: u32) -> io::Result<()> {
    if label > 0xF_FFFF {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an IPv6 flow label has 20 bits (at most 0xFFFFF)",
        ));
    }
    let req = FlowLabelReq {
        dst: libc::in6_addr {
            s6_addr: dst.octets(),
        },
        label: label.to_be(),
        action: IPV6_FL_A_GET,
        share: IPV6_FL_S_ANY,
        flags: IPV6_FL_F_CREATE,
        expires: 0,
        linger: 0,
        pad: 0,
    };
    // SAFETY: FlowLabelReq is repr(C) plain data; viewed as its bytes.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (&req as *const FlowLabelReq).cast::<u8>(),
            std::mem::size_of::<FlowLabelReq>(),
        )
    };
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_IPV6,
        IPV6_FLOWLABEL_MGR,
        bytes,
    )?;
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::IPPROTO_IPV6,
        IPV6_FLOWINFO_SEND,
        &1i32.to_ne_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn recv_discard_takes_bytes_without_copying() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 50_000]).unwrap();
        drop(c);
        let mut total = 0;
        loop {
            let n = recv_discard(&s, 8192).unwrap();
            assert!(n <= 8192);
            if n == 0 {
                break;
            }
            total += n;
        }
        assert_eq!(total, 50_000);
    }

    /// An MPTCP pair speaks MPTCP; an MPTCP socket to a plain TCP listener
    /// falls back, and says so.
    #[test]
    fn mptcp_and_its_fallback_are_told_apart() {
        let enabled =
            std::fs::read_to_string("/proc/sys/net/mptcp/enabled").is_ok_and(|s| s.trim() == "1");
        if !enabled {
            assert!(
                std::env::var("LINERATE_STRICT").is_err(),
                "MPTCP is not enabled on this kernel (net.mptcp.enabled)"
            );
            eprintln!("skipped: MPTCP is not enabled on this kernel");
            return;
        }
        use socket2::{Domain, Protocol, Socket, Type};
        let mptcp = || {
            Socket::new(
                Domain::IPV4,
                Type::STREAM,
                Some(Protocol::from(IPPROTO_MPTCP)),
            )
            .unwrap()
        };
        for (listener_mptcp, want) in [(true, true), (false, false)] {
            let l = if listener_mptcp {
                mptcp()
            } else {
                Socket::new(Domain::IPV4, Type::STREAM, None).unwrap()
            };
            l.bind(
                &"127.0.0.1:0"
                    .parse::<std::net::SocketAddr>()
                    .unwrap()
                    .into(),
            )
            .unwrap();
            l.listen(4).unwrap();
            let c = mptcp();
            c.connect(&l.local_addr().unwrap()).unwrap();
            let (a, _) = l.accept().unwrap();
            let mut cs: TcpStream = c.into();
            cs.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            let mut at: TcpStream = a.into();
            at.read_exact(&mut b).unwrap();
            assert_eq!((is_mptcp(&cs), is_mptcp(&at)), (want, want));
        }
    }

    #[test]
    fn tcp_info_of_a_loopback_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[0u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        let info = tcp_info(&c).unwrap();
        assert!(info.snd_mss > 0 && info.snd_mss <= 65535, "{info:?}");
        assert!(info.snd_cwnd_bytes >= u64::from(info.snd_mss), "{info:?}");
        assert!(info.pmtu >= 1280, "{info:?}");
        assert!(info.rtt_us > 0 && info.rtt_us < 1_000_000, "{info:?}");
        assert!(info.snd_wnd > 0, "{info:?}");
        assert!(!congestion(&c).unwrap().is_empty());
        assert!(set_congestion(&c, "no-such-cc").is_err());
        set_max_pacing_rate(&c, 1_000_000).unwrap();
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_udp_segment(&u, 1000).unwrap();
        assert!(
            set_udp_segment(&c, 1000).is_err(),
            "UDP_SEGMENT on a TCP socket"
        );
        assert!(mss(&c).unwrap() > 0);
    }
}

/// SO_BUSY_POLL: the socket's receive calls spin on the device queue for up
/// to `us` microseconds before sleeping (a CPU spent for latency; setting
/// it above the `net.core.busy_read` sysctl needs CAP_NET_ADMIN).
pub fn set_busy_poll(sock: &impl AsRawFd, us: u32) -> io::Result<()> {
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_BUSY_POLL,
        &us.to_ne_bytes(),
    )
}

/// SO_RCVLOWAT: a blocking receive returns (and the reader is woken) only
/// once `bytes` are queued, or its timeout passes, or the peer ends the
/// stream (then with what there is).
pub fn set_rcvlowat(sock: &impl AsRawFd, bytes: u32) -> io::Result<()> {
    let v = i32::try_from(bytes).unwrap_or(i32::MAX);
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVLOWAT,
        &v.to_ne_bytes(),
    )
}

/// Asks for a receive buffer of `bytes`: SO_RCVBUFFORCE (CAP_NET_ADMIN,
/// past `net.core.rmem_max`), else SO_RCVBUF (capped by rmem_max). The
/// kernel doubles the figure for its bookkeeping.
pub fn set_rcvbuf_force(sock: &impl AsRawFd, bytes: u32) -> io::Result<()> {
    let v = i32::try_from(bytes).unwrap_or(i32::MAX).to_ne_bytes();
    let fd = sock.as_raw_fd();
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &v)
        .or_else(|_| setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &v))
}

/// The socket's SO_BUSY_POLL, microseconds.
pub fn busy_poll(sock: &impl AsRawFd) -> io::Result<u32> {
    let mut v = 0u32;
    getsockopt_raw(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_BUSY_POLL,
        &mut v,
    )?;
    Ok(v)
}

#[cfg(test)]
mod busy_poll_tests {
    #[test]
    fn busy_poll_is_set_on_the_socket() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(super::busy_poll(&s).unwrap(), 0);
        match super::set_busy_poll(&s, 50) {
            Ok(()) => assert_eq!(super::busy_poll(&s).unwrap(), 50),
            // Without CAP_NET_ADMIN the kernel refuses raising it.
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied),
        }
    }
}
