//! What goes wrong opening or using a port, and the two questions every
//! sending and receiving loop asks of an error. A leaf: the backends'
//! own modules (`packet_ring`, `dpdk`) use it without the port layer.

use std::io;
use thiserror::Error;

/// A send the backend refused for now (its ring or the socket's buffer is
/// full, the device queue is full: ENOBUFS, or a signal interrupted it):
/// nothing is lost, the caller tries again. Every sending loop asks this
/// one function.
pub fn send_refused(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// A receive that found nothing in its wait (a timeout, or a signal): the
/// receiving loops go round again.
pub fn recv_idle(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

#[derive(Debug, Error)]
pub enum BackendError {
    #[error(
        "backend {0} is not available in this build of linerate yet; use --backend af_packet, socket or auto"
    )]
    NotBuilt(&'static str),
    #[error(
        "backend {0} only sends (the sink reads whole frames): use --backend socket, af_packet, af_xdp or auto"
    )]
    SendOnly(&'static str),
    #[error("{0}")]
    Unsupported(String),
    #[error("interface {iface}: {source}")]
    Open { iface: String, source: io::Error },
}

/// What a user can do about a refused raw socket, AF_PACKET ring or
/// AF_XDP socket.
pub const NEEDS_PRIVILEGE: &str = "raw sockets, AF_PACKET rings and AF_XDP need root or CAP_NET_RAW (and CAP_NET_ADMIN, CAP_BPF for AF_XDP): run as root, or `setcap cap_net_raw,cap_net_admin,cap_bpf+ep $(command -v linerate)`";

/// An opening error on `iface`, said with what would allow it.
pub fn open_err(iface: &str) -> impl FnOnce(io::Error) -> BackendError + '_ {
    move |source| BackendError::Open {
        iface: iface.to_string(),
        source: with_privilege_hint(source),
    }
}

/// An EPERM or EACCES said with what would allow it.
pub fn with_privilege_hint(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::PermissionDenied {
        io::Error::new(e.kind(), format!("{e}: {NEEDS_PRIVILEGE}"))
    } else {
        e
    }
}
