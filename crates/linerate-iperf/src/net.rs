//! Socket set-up shared by server and client: dual-stack listeners,
//! per-stream options (-w, -M, -N, -C, -S, --fq-rate), addresses.

use linerate_backend::sockopt;
use linerate_iperf_proto::Params;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

/// `-4` / `-6` / either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

/// The address a server listens on: `-B`, or `[::]` dual stack, or
/// `0.0.0.0` with `-4`.
pub fn server_addr(bind: Option<IpAddr>, family: Family, port: u16) -> SocketAddr {
    match (bind, family) {
        (Some(ip), _) => SocketAddr::new(ip, port),
        (None, Family::V4) => SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), port),
        (None, _) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
    }
}

fn socket_for(
    addr: &SocketAddr,
    ty: Type,
    proto: Protocol,
    v6only: bool,
    dev: Option<&str>,
) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(*addr), ty, Some(proto))?;
    if addr.is_ipv6() {
        s.set_only_v6(v6only)?;
    }
    // Only for a port asked by number (the server's, or --cport): two
    // SO_REUSEADDR UDP sockets bound to port 0 can be given the same
    // ephemeral port (256 binds drew 2 repeats here), and then the second
    // stream's hello lands on the first stream's connected socket at the
    // server and is never answered.
    if addr.port() != 0 {
        s.set_reuse_address(true)?;
    }
    bind_device(&s, dev)?;
    Ok(s)
}

/// `--snd-timeout`: how long unacknowledged data may wait before the
/// connection fails (TCP_USER_TIMEOUT).
pub fn set_snd_timeout(t: &TcpStream, d: Duration) -> io::Result<()> {
    socket2::SockRef::from(t).set_tcp_user_timeout(Some(d))
}

/// TCP keepalive on a control connection: idle time, interval (s) and
/// probe count; 0 keeps the system's setting for that part.
pub fn keepalive(t: &TcpStream, (idle, intv, cnt): (u32, u32, u32)) -> io::Result<()> {
    let mut ka = socket2::TcpKeepalive::new();
    if idle > 0 {
        ka = ka.with_time(Duration::from_secs(u64::from(idle)));
    }
    if intv > 0 {
        ka = ka.with_interval(Duration::from_secs(u64::from(intv)));
    }
    if cnt > 0 {
        ka = ka.with_retries(cnt);
    }
    socket2::SockRef::from(t).set_tcp_keepalive(&ka)
}

/// `--bind-dev` / `-B host%dev`: the socket sends and receives only
/// through that interface (SO_BINDTODEVICE).
fn bind_device(s: &Socket, dev: Option<&str>) -> io::Result<()> {
    match dev {
        Some(d) => s
            .bind_device(Some(d.as_bytes()))
            .map_err(|e| io::Error::new(e.kind(), format!("unable to bind to device {d}: {e}"))),
        None => Ok(()),
    }
}

pub fn tcp_listener(
    addr: SocketAddr,
    family: Family,
    dev: Option<&str>,
    mptcp: bool,
) -> io::Result<TcpListener> {
    let proto = if mptcp {
        Protocol::from(linerate_backend::sockopt::IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    let s = socket_for(&addr, Type::STREAM, proto, family == Family::V6, dev)
        .map_err(|e| mptcp_error(mptcp, e))?;
    s.bind(&addr.into())?;
    s.listen(128)?;
    Ok(s.into())
}

/// A UDP socket bound to the server's port, reusable for the next stream.
pub fn udp_bound(addr: SocketAddr, family: Family, dev: Option<&str>) -> io::Result<UdpSocket> {
    let s = socket_for(&addr, Type::DGRAM, Protocol::UDP, family == Family::V6, dev)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Resolves `host:port` for the client, honouring -4/-6.
pub fn resolve(host: &str, port: u16, family: Family) -> io::Result<SocketAddr> {
    let addrs = (host, port).to_socket_addrs()?;
    addrs
        .into_iter()
        .find(|a| match family {
            Family::Any => true,
            Family::V4 => a.is_ipv4(),
            Family::V6 => a.is_ipv6(),
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no address of the requested family for {host}"),
            )
        })
}

/// Local address to bind a client socket to: `-B`, with `--cport` + index.
pub fn client_bind(
    bind: Option<IpAddr>,
    port: Option<u16>,
    peer: &SocketAddr,
) -> Option<SocketAddr> {
    if bind.is_none() && port.is_none() {
        return None;
    }
    let ip = bind.unwrap_or(if peer.is_ipv4() {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    });
    Some(SocketAddr::new(ip, port.unwrap_or(0)))
}

pub fn tcp_connect(
    peer: SocketAddr,
    local: Option<SocketAddr>,
    p: Option<&Params>,
    timeout: Duration,
    dev: Option<&str>,
) -> io::Result<TcpStream> {
    let proto = if p.is_some_and(|p| p.mptcp) {
        Protocol::from(linerate_backend::sockopt::IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    let s = Socket::new(Domain::for_address(peer), Type::STREAM, Some(proto))
        .map_err(|e| mptcp_error(p.is_some_and(|p| p.mptcp), e))?;
    bind_device(&s, dev)?;
    if let Some(l) = local {
        if l.port() != 0 {
            s.set_reuse_address(true)?;
        }
        s.bind(&l.into())?;
    }
    let mut peer = peer;
    if let Some(p) = p {
        apply_before_connect(&s, p, &peer)?;
        peer = with_flow_label(&s, peer, p.flowlabel)?;
    }
    s.connect_timeout(&SockAddr::from(peer), timeout)?;
    let t: TcpStream = s.into();
    t.set_nodelay(p.is_none_or(|p| p.nodelay) || p.is_none())?;
    Ok(t)
}

/// `-L`: asks for the IPv6 flow label and returns the address to connect
/// to with it (the kernel takes the label from `sin6_flowinfo`). 0: none.
pub fn with_flow_label(
    s: &impl std::os::fd::AsRawFd,
    peer: SocketAddr,
    label: u32,
) -> io::Result<SocketAddr> {
    if label == 0 {
        return Ok(peer);
    }
    let SocketAddr::V6(v6) = peer else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "unable to set IPv6 flow label: the server's address is not IPv6 (use -6)",
        ));
    };
    linerate_backend::sockopt::set_flow_label(s, *v6.ip(), label)
        .map_err(|e| io::Error::new(e.kind(), format!("unable to set IPv6 flow label: {e}")))?;
    Ok(SocketAddr::V6(std::net::SocketAddrV6::new(
        *v6.ip(),
        v6.port(),
        label.to_be(),
        v6.scope_id(),
    )))
}

/// A socket() failure explained when MPTCP was asked for: the kernel lacks
/// it (EPROTONOSUPPORT, EINVAL) or has it turned off (ENOPROTOOPT).
fn mptcp_error(mptcp: bool, e: io::Error) -> io::Error {
    if !mptcp {
        return e;
    }
    io::Error::new(
        e.kind(),
        format!(
            "MPTCP is not available on this host ({e}); it needs Linux 5.6+ with net.mptcp.enabled=1"
        ),
    )
}

fn apply_before_connect(s: &Socket, p: &Params, peer: &SocketAddr) -> io::Result<()> {
    if p.window > 0 {
        s.set_send_buffer_size(p.window as usize)?;
        s.set_recv_buffer_size(p.window as usize)?;
    }
    if p.mss > 0 {
        sockopt::set_mss(s, p.mss)?;
    }
    set_tos(s, p.tos, peer.is_ipv6())?;
    Ok(())
}

fn set_tos(s: &Socket, tos: u32, v6: bool) -> io::Result<()> {
    if tos == 0 {
        return Ok(());
    }
    if v6 {
        s.set_tclass_v6(tos)
    } else {
        s.set_tos_v4(tos)
    }
}

/// Options both sides apply to a connected TCP data stream.
pub fn apply_tcp(t: &TcpStream, p: &Params, sending: bool) -> io::Result<()> {
    let s = socket2::SockRef::from(t);
    if p.window > 0 {
        s.set_send_buffer_size(p.window as usize)?;
        s.set_recv_buffer_size(p.window as usize)?;
    }
    if p.nodelay {
        t.set_nodelay(true)?;
    }
    if sending && p.fq_rate_bps > 0 {
        sockopt::set_max_pacing_rate(t, p.fq_rate_bps / 8)?;
    }
    let v6 = t.peer_addr().is_ok_and(|a| {
        a.is_ipv6() && !matches!(a.ip(), IpAddr::V6(v) if v.to_ipv4_mapped().is_some())
    });
    set_tos(&s, p.tos, v6)?;
    match &p.congestion {
        // An unknown algorithm fails the test, as iperf3's IESETCONGESTION.
        Some(cc) if sockopt::set_congestion(t, cc).is_err() => Err(io::Error::other(
            "unable to set TCP_CONGESTION: Supplied congestion control algorithm not supported on this host",
        )),
        _ => Ok(()),
    }
}

/// Receive buffer a UDP receiving stream asks for without -w (4 MiB).
pub const UDP_RCVBUF_DEFAULT: u32 = 4 << 20;

/// Options for a connected UDP data stream.
pub fn apply_udp(u: &UdpSocket, p: &Params, sending: bool) -> io::Result<()> {
    let s = socket2::SockRef::from(u);
    if p.window > 0 {
        // -w: the buffers are what it says (iperf3 sets both to it).
        s.set_send_buffer_size(p.window as usize)?;
        s.set_recv_buffer_size(p.window as usize)?;
        return udp_options(u, &s, p, sending);
    }
    // A datagram must fit.
    let want = p.len as usize + 1024;
    if s.send_buffer_size()? < want {
        s.set_send_buffer_size(want.max(4 << 20))?;
    }
    if s.recv_buffer_size()? < want {
        s.set_recv_buffer_size(want.max(4 << 20))?;
    }
    if !sending {
        // The default buffer (208 KiB) is a few milliseconds of small
        // datagrams at Mpps rates: a receiver that is scheduled out for
        // longer (it shares its CPU with the kernel's receive work) loses
        // the rest in the socket buffer. Ask for UDP_RCVBUF_DEFAULT; -w
        // sets it instead.
        let _ = sockopt::set_rcvbuf_force(u, UDP_RCVBUF_DEFAULT);
    }
    udp_options(u, &s, p, sending)
}

/// A UDP stream's options other than its buffers.
fn udp_options(u: &UdpSocket, s: &socket2::SockRef, p: &Params, sending: bool) -> io::Result<()> {
    if sending && p.fq_rate_bps > 0 {
        sockopt::set_max_pacing_rate(u, p.fq_rate_bps / 8)?;
    }
    let v6 = u.peer_addr().is_ok_and(|a| a.is_ipv6());
    set_tos(s, p.tos, v6)?;
    if p.dont_fragment && !v6 {
        sockopt::set_dont_fragment(u)?;
    }
    Ok(())
}

/// iperf3's `system_info`: a uname line.
pub fn system_info() -> String {
    match nix::sys::utsname::uname() {
        Ok(u) => format!(
            "{} {} {} {} {}",
            u.sysname().to_string_lossy(),
            u.nodename().to_string_lossy(),
            u.release().to_string_lossy(),
            u.version().to_string_lossy(),
            u.machine().to_string_lossy()
        ),
        Err(_) => "Linux".into(),
    }
}

/// 36 random bytes for a cookie.
pub fn random_bytes() -> [u8; 36] {
    use std::io::Read;
    let mut b = [0u8; 36];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let mut x = linerate_backend::clock::monotonic_ns() | 1;
        for v in &mut b {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x as u8;
        }
    }
    b
}

/// Host part of an address as iperf3 prints it (IPv4-mapped shown as IPv4).
pub fn host_of(a: &SocketAddr) -> String {
    match a.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.to_string(), |v4| v4.to_string()),
        ip => ip.to_string(),
    }
}

/// Process CPU use since `start`, percent of wall time.
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    wall: std::time::Instant,
    user: f64,
    system: f64,
}

impl CpuMeter {
    pub fn start() -> Self {
        let (user, system) = linerate_backend::clock::process_cpu_s();
        Self {
            wall: std::time::Instant::now(),
            user,
            system,
        }
    }

    pub fn read(&self) -> linerate_iperf_proto::report::Cpu {
        let (u, s) = linerate_backend::clock::process_cpu_s();
        let wall = self.wall.elapsed().as_secs_f64().max(1e-9);
        let user = (u - self.user) / wall * 100.0;
        let system = (s - self.system) / wall * 100.0;
        linerate_iperf_proto::report::Cpu {
            total: user + system,
            user,
            system,
        }
    }
}

/// Reads from a control connection, waiting at most `wake` (to the
/// millisecond, see [`wait_readable`]); a wait that ends with nothing to
/// read is `TimedOut`. SO_RCVTIMEO is set too, as a backstop.
pub fn read_within(
    ctrl: &mut std::net::TcpStream,
    buf: &mut [u8],
    wake: std::time::Duration,
) -> std::io::Result<usize> {
    use std::io::Read;
    let _ = ctrl.set_read_timeout(Some(wake));
    if wait_readable(ctrl, wake) {
        ctrl.read(buf)
    } else {
        Err(std::io::ErrorKind::TimedOut.into())
    }
}

/// Waits up to `d` for `sock` to be readable (or at end of file, or in
/// error): poll(2) with millisecond resolution, where SO_RCVTIMEO rounds up
/// to the kernel's tick (4 ms at HZ=250).
pub fn wait_readable(sock: &impl std::os::fd::AsFd, d: std::time::Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let ms = u16::try_from(d.as_millis().max(1)).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0)
}

/// Writes all of `bytes` to a control connection within `limit` for the
/// whole message (not per byte): a peer that stops reading cannot hold the
/// writer longer than that. A message cut short is `TimedOut`.
pub fn write_within(
    ctrl: &mut std::net::TcpStream,
    mut bytes: &[u8],
    limit: std::time::Duration,
) -> std::io::Result<()> {
    use std::io::Write;
    let deadline = std::time::Instant::now() + limit;
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the peer did not read a control message in time",
            ));
        }
        ctrl.set_write_timeout(Some(left.max(std::time::Duration::from_millis(1))))?;
        match ctrl.write(bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The interface UDP datagrams to `host:port` leave by, when it is a veth
/// that hands a GSO batch to its peer whole (its datagrams would be
/// counted and never cross as datagrams).
pub fn veth_passing_gso_whole(host: &str, port: u16) -> Option<String> {
    use std::net::ToSocketAddrs;
    let dst = (host, port).to_socket_addrs().ok()?.next()?;
    linerate_backend::ethtool::udp_egress(dst)
        .filter(|i| linerate_backend::ethtool::gso_batches_pass_whole(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiving UDP stream asks for 4 MiB (granted past rmem_max to
    /// root, else capped by it; the kernel doubles the figure); -w sets the
    /// buffer to exactly its value; a sending stream keeps the default.
    #[test]
    fn a_receiving_udp_stream_gets_a_large_buffer_unless_w_says() {
        // Effective uid 0 (the second figure of /proc's Uid line).
        let root = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
            .unwrap();
        let sock = || UdpSocket::bind("127.0.0.1:0").unwrap();
        let rcvbuf = |u: &UdpSocket| socket2::SockRef::from(u).recv_buffer_size().unwrap();
        let default = rcvbuf(&sock());
        let r = sock();
        apply_udp(&r, &Params::default(), false).unwrap();
        let granted = if root {
            UDP_RCVBUF_DEFAULT as usize
        } else {
            let max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            max.min(UDP_RCVBUF_DEFAULT as usize)
        };
        assert_eq!(rcvbuf(&r), (2 * granted).max(default));
        let s = sock();
        apply_udp(&s, &Params::default(), true).unwrap();
        assert_eq!(rcvbuf(&s), default, "a sender's receive buffer is left");
        let w = sock();
        let p = Params {
            window: 64 * 1024,
            ..Params::default()
        };
        apply_udp(&w, &p, false).unwrap();
        assert_eq!(rcvbuf(&w), 2 * 64 * 1024, "-w wins");
    }

    /// Client stream sockets bound to port 0 each get a port of their own
    /// (with SO_REUSEADDR, 256 binds drew the same port twice, and a -P 64
    /// --bidir UDP test lost a stream's hello to another stream).
    #[test]
    fn ephemeral_udp_binds_never_share_a_port() {
        let any = SocketAddr::from(([0, 0, 0, 0], 0));
        let socks: Vec<UdpSocket> = (0..1000)
            .map(|_| udp_bound(any, Family::V4, None).unwrap())
            .collect();
        let mut ports: Vec<u16> = socks
            .iter()
            .map(|s| s.local_addr().unwrap().port())
            .collect();
        ports.sort_unstable();
        let n = ports.len();
        ports.dedup();
        assert_eq!(ports.len(), n, "{} ports drawn twice", n - ports.len());
    }

    #[test]
    fn a_write_to_a_peer_that_does_not_read_ends_at_the_deadline() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.set_recv_buffer_size(2048).unwrap();
        s.connect(&l.local_addr().unwrap().into()).unwrap();
        let (mut server_side, _) = l.accept().unwrap();
        server_side.set_nodelay(true).unwrap();
        let big = vec![7u8; 64 << 20];
        let t0 = std::time::Instant::now();
        let r = write_within(&mut server_side, &big, Duration::from_millis(300));
        let took = t0.elapsed();
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
        drop(s);
    }

    #[test]
    fn snd_timeout_sets_tcp_user_timeout() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_snd_timeout(&c, Duration::from_millis(2500)).unwrap();
        assert_eq!(
            socket2::SockRef::from(&c).tcp_user_timeout().unwrap(),
            Some(Duration::from_millis(2500))
        );
    }

    #[test]
    fn a_write_to_a_reading_peer_completes() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut server_side, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut c, &mut v).unwrap();
            v.len()
        });
        write_within(
            &mut server_side,
            &vec![1u8; 8 << 20],
            Duration::from_secs(10),
        )
        .unwrap();
        drop(server_side);
        assert_eq!(reader.join().unwrap(), 8 << 20);
    }
}
