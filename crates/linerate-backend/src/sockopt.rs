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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

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
