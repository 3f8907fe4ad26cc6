//! A client's data streams set up: each connected (TCP, or UDP with
//! iperf3's hello), its cookie sent, its socket options set.

use super::*;

pub(super) fn buf_size(conns: &[(Conn, StreamDesc)], recv: bool) -> u64 {
    conns.first().map_or(0, |(c, _)| {
        let s = match c {
            Conn::Tcp(t) => socket2::SockRef::from(t),
            Conn::Udp(u) => socket2::SockRef::from(u),
        };
        let v = if recv {
            s.recv_buffer_size()
        } else {
            s.send_buffer_size()
        };
        v.unwrap_or(0) as u64
    })
}

pub(super) fn create_stream(
    p: &Params,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    cookie: &[u8],
    opts: &ClientOptions,
) -> std::io::Result<Conn> {
    match p.protocol {
        Protocol::Tcp => {
            let mut t = net::tcp_connect(
                peer,
                local,
                Some(p),
                opts.connect_timeout,
                opts.bind_dev.as_deref(),
            )?;
            if let Some(d) = opts.snd_timeout {
                net::set_snd_timeout(&t, d)?;
            }
            net::write_within(&mut t, cookie, opts.control_timeout)?;
            Ok(Conn::Tcp(t))
        }
        Protocol::Udp => {
            let bind = local.unwrap_or_else(|| {
                net::server_addr(
                    None,
                    if peer.is_ipv4() {
                        Family::V4
                    } else {
                        Family::V6
                    },
                    0,
                )
            });
            let family = if bind.is_ipv4() {
                Family::V4
            } else {
                Family::V6
            };
            let u = net::udp_bound(bind, family, opts.bind_dev.as_deref())?;
            let peer = net::with_flow_label(&u, peer, p.flowlabel)?;
            u.connect(peer)?;
            udp_hello(&u, p, opts.control_timeout)?;
            Ok(Conn::Udp(u))
        }
    }
}

/// iperf3's UDP "connect": the hello sent, the server's reply awaited.
/// The whole wait is bounded: datagrams that are not a reply do not
/// restart it. The hello is a datagram and may be lost: it is sent again
/// after 1 s, 2 s, 4 s, ... without an answer (a server that took the
/// first one ignores a repeat as a runt).
fn udp_hello(u: &std::net::UdpSocket, p: &Params, within: Duration) -> std::io::Result<()> {
    u.send(&udp_connect::CONNECT)?;
    let mut reply = vec![0u8; 4 + 2 * p.len as usize];
    let deadline = Instant::now() + within;
    let mut gap = Duration::from_secs(1);
    let mut again = Instant::now() + gap;
    loop {
        let now = Instant::now();
        if now >= again {
            u.send(&udp_connect::CONNECT)?;
            gap *= 2;
            again = now + gap;
        }
        let left = deadline.saturating_duration_since(now).min(
            again
                .saturating_duration_since(now)
                .max(Duration::from_millis(1)),
        );
        if deadline <= now {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                format!(
                    "no UDP connect reply from the server within {} ms",
                    within.as_millis()
                ),
            ));
        }
        u.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        let n = match u.recv(&mut reply) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                continue;
            }
            Err(e) => return Err(e),
        };
        if n == 4
            && udp_connect::REPLIES_ACCEPTED
                .iter()
                .any(|r| r[..] == reply[..4])
        {
            return Ok(());
        }
        if n != 4 {
            // Data that raced ahead of the reply (reverse mode): keep waiting.
            continue;
        }
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            "unexpected UDP connect reply",
        ));
    }
}
