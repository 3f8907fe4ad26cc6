//! The port layer: every backend behind one sending type ([`Tx`]) and one
//! receiving type ([`Rx`]), chosen by [`BackendKind`] and opened by
//! [`open_tx`] / [`open_rx`] / [`open_rx_workers`], saying why when `auto`
//! falls back. A port is a kernel interface (af_xdp, af_packet, the raw or
//! UDP sockets of `socket`) or an in-memory [`loopback`](crate::loopback)
//! port. Adding a backend is one module here plus an arm in each match of
//! this module's `tx.rs`, `rx.rs` and [`BackendKind::parse`].

mod rx;
mod tx;
mod udp;

pub use crate::xdp::RxFilter;
pub use rx::{Rx, open_rx, open_rx_workers};
pub use tx::{Tx, TxStats, open_tx};
pub use udp::{
    Endpoints, Gso, PayloadSource, Span, TX_BATCH_MAX, Traffic, UDP_SOCKETS_MAX, UdpFlows, UdpTx,
};

use crate::loopback::{self, LoopRx, LoopTx};
use crate::packet_ring::{RxRing, TxRing};
use crate::raw::{RawSocket, RawTx};
use crate::xsk::{XskRx, XskTx};
use crate::{FrameSink, FrameSource};
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Auto,
    /// UDP sockets where the kernel can build the traffic, raw frames otherwise.
    Socket,
    /// The socket backend forced onto UDP sockets.
    Udp,
    /// The socket backend forced onto raw AF_PACKET frames.
    Raw,
    AfPacket,
    AfXdp,
    /// An in-memory port of this process (`crate::loopback`),
    /// with fault injection: blast, sink, fwd and rfc2544 in unit tests.
    Loopback,
    /// A DPDK port (`crate::dpdk`; built with the `dpdk` feature).
    Dpdk,
}

impl BackendKind {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => Self::Auto,
            "socket" => Self::Socket,
            "socket:udp" | "udp" => Self::Udp,
            "socket:raw" | "raw" => Self::Raw,
            "af_packet" => Self::AfPacket,
            "af_xdp" => Self::AfXdp,
            "loopback" => Self::Loopback,
            "dpdk" => Self::Dpdk,
            _ => return None,
        })
    }

    /// The kind that sends a few crafted frames on the same port whatever
    /// carried the traffic (blast's end markers): a loopback port's own
    /// wire, else a raw AF_PACKET socket.
    pub fn crafted_sender(self) -> Self {
        match self {
            Self::Loopback => Self::Loopback,
            Self::Dpdk => Self::Dpdk,
            _ => Self::Raw,
        }
    }
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

fn open_err(iface: &str) -> impl FnOnce(io::Error) -> BackendError + '_ {
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

/// What a sending backend can do, recorded with every result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Capabilities {
    /// Frames per send call that suit it.
    pub batch: usize,
    /// Largest frame it carries (bytes without FCS; the MTU and 18 bytes of
    /// Ethernet header and tag for the socket paths).
    pub max_frame: usize,
    /// Sends whole frames as written (false: the kernel builds the Ethernet
    /// and IP headers again from a socket's addresses).
    pub crafted_frames: bool,
    /// The NIC reads the frames from our buffers (AF_XDP zero-copy).
    pub zero_copy: bool,
    /// Binds one socket per TX queue (--cores gives each worker its own).
    pub per_queue: bool,
    /// Many datagrams per trip through the stack (UDP GSO).
    pub gso: bool,
    /// Frames skip the qdisc layer.
    pub qdisc_bypass: bool,
}

/// What a receiving backend can do, recorded with the sink's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RxCapabilities {
    /// Frames handed over per receive call at most.
    pub batch: usize,
    /// Largest frame kept whole (bytes without FCS).
    pub max_frame: usize,
    /// RX queues read, one socket each (AF_XDP); None: every queue through
    /// one socket.
    pub queues: Option<usize>,
    /// The NIC writes frames into our buffers (AF_XDP zero-copy).
    pub zero_copy: bool,
    /// Frames carry the kernel's receive time (latency is not stretched by
    /// the sink's own wake-up).
    pub kernel_receive_stamps: bool,
}

/// TPACKET_V3 receive ring: blocks of 256 KiB (128 frame slots), 256 of
/// them (64 MiB). The kernel closes a block after 1 ms at the latest, so at
/// low rates each block holds about a millisecond: many small blocks let a
/// receive worker that stalls (a busy host) fall ~256 ms behind before the
/// kernel drops, where 64 blocks of 1 MiB gave it 64 ms.
const RX_BLOCK: usize = 1 << 18;
const RX_BLOCKS: usize = 256;
/// One receive ring's memory.
pub const RX_RING_BYTES: usize = RX_BLOCK * RX_BLOCKS;

/// Why receiving on `iface` cannot go on, if it cannot: the interface went
/// down or away. (Rings just go quiet when that happens, so the loops look
/// a few times a second and every backend ends the same way.)
pub fn link_lost(kind: BackendKind, iface: &str) -> Option<String> {
    let up = match kind {
        BackendKind::Loopback => loopback::open(iface).map(|w| w.is_up()),
        BackendKind::Dpdk => crate::dpdk::link_up(iface),
        _ => crate::iface::is_up(iface),
    };
    let why = match up {
        Ok(true) => return None,
        Ok(false) => "the interface went down".to_string(),
        Err(e) => format!("the interface is gone ({e})"),
    };
    Some(format!("receiving on {iface}: {why}"))
}

/// The MTU of port `iface` as `kind` opens it: a loopback port's, else
/// the kernel interface's.
pub fn port_mtu(kind: BackendKind, iface: &str) -> io::Result<usize> {
    match kind {
        BackendKind::Loopback => loopback::open(iface).map(|w| w.mtu()),
        BackendKind::Dpdk => crate::dpdk::mtu(iface),
        _ => crate::iface::mtu(iface),
    }
}

/// The MAC of port `iface` as `kind` opens it.
pub fn port_mac(kind: BackendKind, iface: &str) -> io::Result<[u8; 6]> {
    match kind {
        BackendKind::Loopback => loopback::open(iface).map(|w| w.mac()),
        BackendKind::Dpdk => crate::dpdk::mac(iface),
        _ => crate::iface::mac(iface),
    }
}
