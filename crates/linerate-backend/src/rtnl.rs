//! rtnetlink on a raw socket: the socket and one request (shared with the
//! neighbour table's dump), and the XDP program attached to an interface
//! (RTM_GETLINK, IFLA_XDP): a receiver that listens with af_packet is
//! blind to the frames an AF_XDP socket behind such a program takes first.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub(crate) const NLMSG_HDRLEN: usize = 16;
pub(crate) const NLMSG_DONE: u16 = 3;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLM_F_REQUEST: u16 = 1;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
/// struct ifinfomsg: family, pad, type, index, flags, change.
const IFINFOMSG_LEN: usize = 16;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_PROG_ID: u16 = 4;

/// A NETLINK_ROUTE socket whose receives time out after a second.
pub(crate) fn socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the result is checked and
    // owned at once.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new, valid descriptor owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval of the size passed.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
    }
    Ok(sock)
}

/// Sends one request: a header of `kind` and `flags` (sequence 1), then
/// `body`.
pub(crate) fn send(sock: &OwnedFd, kind: u16, flags: u16, body: &[u8]) -> io::Result<()> {
    let mut req = vec![0u8; NLMSG_HDRLEN + body.len()];
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&kind.to_ne_bytes());
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[NLMSG_HDRLEN..].copy_from_slice(body);
    // SAFETY: sending from a buffer of the length passed.
    let n = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one datagram into `buf`: its length.
pub(crate) fn recv(sock: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: receiving into a buffer of the length passed.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// An XDP program attached to an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpProgram {
    /// The kernel's id of the program (`bpftool prog show id N`).
    pub id: u32,
    /// How it is attached: driver, generic (skb), offloaded, several.
    pub mode: &'static str,
}

/// The XDP program attached to `iface` (of this thread's network
/// namespace), if any.
pub fn xdp_program(iface: &str) -> io::Result<Option<XdpProgram>> {
    let index = crate::iface::index(iface)?;
    let sock = socket()?;
    let mut body = [0u8; IFINFOMSG_LEN];
    body[4..8].copy_from_slice(&index.to_ne_bytes());
    send(&sock, RTM_GETLINK, NLM_F_REQUEST, &body)?;
    let mut buf = vec![0u8; 64 * 1024];
    // The answer is one message; a few datagrams at most before it.
    for _ in 0..8 {
        let n = recv(&sock, &mut buf)?;
        if let Some(found) = parse_link_xdp(&buf[..n])? {
            return Ok(found);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "no RTM_NEWLINK answer",
    ))
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The attributes in `a` as (type without its flags, value), each bounded
/// by the buffer; a malformed one ends the walk.
fn attributes(mut a: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if a.len() < 4 {
            return None;
        }
        let len = u16_at(a, 0) as usize;
        let kind = u16_at(a, 2) & 0x3fff;
        if len < 4 || len > a.len() {
            return None;
        }
        let v = &a[4..len];
        a = &a[((len + 3) & !3).min(a.len())..];
        Some((kind, v))
    })
}

/// One datagram of the answer to RTM_GETLINK: `Some` with the program (or
/// none) once the link message is in it; an error answer as its error.
fn parse_link_xdp(mut b: &[u8]) -> io::Result<Option<Option<XdpProgram>>> {
    while b.len() >= NLMSG_HDRLEN {
        let len = u32_at(b, 0) as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            return Ok(None);
        }
        match u16_at(b, 4) {
            NLMSG_ERROR if len >= NLMSG_HDRLEN + 4 => {
                let errno = i32::from_ne_bytes([b[16], b[17], b[18], b[19]]);
                return Err(io::Error::from_raw_os_error(-errno));
            }
            RTM_NEWLINK if len >= NLMSG_HDRLEN + IFINFOMSG_LEN => {
                let attrs = &b[NLMSG_HDRLEN + IFINFOMSG_LEN..len];
                let xdp = attributes(attrs).find(|(k, _)| *k == IFLA_XDP);
                return Ok(Some(xdp.and_then(|(_, v)| xdp_of(v))));
            }
            _ => {}
        }
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    Ok(None)
}

/// The program an IFLA_XDP nest says is attached.
fn xdp_of(nest: &[u8]) -> Option<XdpProgram> {
    let (mut mode, mut id) = (0u8, 0u32);
    for (k, v) in attributes(nest) {
        match (k, v.len()) {
            (IFLA_XDP_ATTACHED, 1..) => mode = v[0],
            (IFLA_XDP_PROG_ID, 4..) => id = u32_at(v, 0),
            _ => {}
        }
    }
    let mode = match mode {
        0 => return None,
        1 => "driver",
        2 => "generic (skb)",
        3 => "offloaded",
        _ => "several modes",
    };
    Some(XdpProgram { id, mode })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, v: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(v);
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a
    }

    fn link(attrs: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
        m.extend_from_slice(attrs);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
        m
    }

    /// A link message with an IFLA_XDP nest (after another attribute, the
    /// nest flag set on its type) says the program and its mode; one
    /// whose nest says none attached, or without the nest, says none; a
    /// truncated one is no answer; an error answer is its errno.
    #[test]
    fn the_link_message_says_the_attached_program() {
        let nest = [
            attr(IFLA_XDP_ATTACHED, &[1]),
            attr(IFLA_XDP_PROG_ID, &77u32.to_ne_bytes()),
        ]
        .concat();
        let with = [attr(3, b"veth0\0"), attr(IFLA_XDP | 0x8000, &nest)].concat();
        assert_eq!(
            parse_link_xdp(&link(&with)).unwrap(),
            Some(Some(XdpProgram {
                id: 77,
                mode: "driver"
            }))
        );
        let none = attr(IFLA_XDP | 0x8000, &attr(IFLA_XDP_ATTACHED, &[0]));
        assert_eq!(parse_link_xdp(&link(&none)).unwrap(), Some(None));
        assert_eq!(
            parse_link_xdp(&link(&attr(3, b"lo\0"))).unwrap(),
            Some(None)
        );
        let whole = link(&with);
        assert_eq!(parse_link_xdp(&whole[..whole.len() - 4]).unwrap(), None);
        let mut err = vec![0u8; NLMSG_HDRLEN + 4];
        err[0..4].copy_from_slice(&(NLMSG_HDRLEN as u32 + 4).to_ne_bytes());
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err[16..20].copy_from_slice(&(-19i32).to_ne_bytes());
        assert_eq!(parse_link_xdp(&err).unwrap_err().raw_os_error(), Some(19));
    }

    /// Loopback, in any namespace, has no XDP program.
    #[test]
    fn loopback_has_no_xdp_program() {
        assert_eq!(xdp_program("lo").unwrap(), None);
    }
}
