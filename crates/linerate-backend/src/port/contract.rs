//! What a backend is: [`Backend`] opens its ports, and its ports send
//! ([`TxPort`]), receive ([`RxPort`]) and, where the backend can, forward
//! in place ([`FwdPort`]). Each backend implements these once, in its own
//! file of `port/`; `port/mod.rs` lists the backends and dispatches once
//! per call (a batch), so a frame's work is inlined into the backend's
//! loop as before.

use super::error::BackendError;
use super::udp::{PayloadSource, Traffic};
use crate::loopback::Wires;
use crate::xdp::RxFilter;
use crate::{FrameSink, FrameSource};
use std::io;
use std::time::Duration;

/// How long a receiver lets the kernel gather frames before handing them
/// over, where its backend gathers (af_packet's TPACKET_V3 blocks, which
/// the kernel retires when full or at this timeout). Frames carry the
/// kernel's receive time there, so gathering stretches no latency a
/// counter measures; it only delays when the counter sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxHold {
    /// Every frame on within about a millisecond: a forwarder, whose
    /// frames' next hop measures the time they spent with it.
    Prompt,
    /// Up to a few milliseconds (4), for fewer, fuller hand-overs: a
    /// receiver that counts (its reports are a second apart).
    Gather,
}

impl RxHold {
    /// TPACKET_V3's block timeout, ms.
    pub fn block_timeout_ms(self) -> u32 {
        match self {
            RxHold::Prompt => 1,
            RxHold::Gather => 4,
        }
    }
}

/// Ports opened (one per worker) and the notes saying what they are.
pub type Opened<T> = Result<(Vec<T>, Vec<String>), BackendError>;

/// One backend: how its ports open and what they are.
pub trait Backend: Sized {
    type Tx: TxPort;
    type Rx: RxPort;
    /// Its in-place forwarder ([`Never`] where it has none).
    type Fwd: FwdPort;

    /// Its ports are its own, not kernel interfaces (loopback, DPDK): it
    /// sends blast's crafted frames itself, and its MTU, MAC and link come
    /// from it rather than from the kernel.
    const OWN_PORTS: bool = false;

    /// The backend, opening the ports named in `wires` where its ports
    /// are made by this process (loopback).
    fn new(wires: &Wires) -> Self;

    /// The sender of worker `queue`; the note says what was chosen.
    fn open_tx(
        &self,
        iface: &str,
        max_frame: usize,
        queue: u32,
        traffic: &Traffic,
    ) -> Result<(Self::Tx, Option<String>), BackendError>;

    /// A receiver of the frames `filter` takes, handing them over as
    /// `hold` says.
    fn open_rx(
        &self,
        iface: &str,
        filter: RxFilter,
        hold: RxHold,
    ) -> Result<(Self::Rx, Option<String>), BackendError>;

    /// `workers` receivers sharing the interface's frames, `first` among
    /// them.
    fn share_rx(
        &self,
        first: Self::Rx,
        iface: &str,
        workers: usize,
    ) -> Result<Vec<Self::Rx>, BackendError>;

    /// `workers` forwarders that send what they receive from `rx_iface`
    /// out of `tx_iface` in place, and notes; `None` where this backend
    /// cannot (fwd then copies from a receiver into a sender).
    fn open_fwd(
        &self,
        rx_iface: &str,
        tx_iface: &str,
        workers: usize,
        filter: RxFilter,
    ) -> Option<Opened<Self::Fwd>> {
        let _ = (rx_iface, tx_iface, workers, filter);
        None
    }

    /// The port's MTU.
    fn mtu(&self, iface: &str) -> io::Result<usize> {
        crate::iface::mtu(iface)
    }

    /// The port's MAC.
    fn mac(&self, iface: &str) -> io::Result<[u8; 6]> {
        crate::iface::mac(iface)
    }

    /// Whether the port's link is up (an error: the port is gone).
    fn link_up(&self, iface: &str) -> io::Result<bool> {
        crate::iface::is_up(iface)
    }
}

/// A port's sending side.
pub trait TxPort {
    fn name(&self) -> &'static str;

    /// Frames per send call that suit it.
    fn batch(&self) -> usize;

    /// What it can do here (`base`: the kernel interface's defaults).
    fn capabilities(&self, base: Capabilities) -> Capabilities;

    /// Frames built elsewhere, each at most [`slot_len`](Self::slot_len)
    /// (the caller checks); returns how many it took (0: full, retry).
    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize>;

    /// Builds up to `n` frames in its own buffers and sends them (see
    /// `Tx::send_with`).
    fn send_with<F: FrameSource + PayloadSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)>;

    /// The bytes of each of its buffers.
    fn slot_len(&self) -> usize;

    /// How many buffers it builds in.
    fn slots(&self) -> usize;

    /// What it reports of itself.
    fn stats(&self) -> Option<TxStats> {
        None
    }

    /// Waits until everything handed over is sent.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// The kernel builds and addresses its frames (UDP sockets).
    fn kernel_addressed(&self) -> bool {
        false
    }
}

/// A port's receiving side.
pub trait RxPort {
    fn name(&self) -> &'static str;

    /// It holds its interface's queues (AF_XDP): a sender on the same
    /// interface cannot bind them too.
    fn holds_queue(&self) -> bool {
        false
    }

    fn capabilities(&self) -> RxCapabilities;

    /// Hands each received frame to `f`, waiting up to `wait` for the
    /// first (see `Rx::recv_within`).
    fn recv_within<F: FrameSink>(&mut self, wait: Duration, f: &mut F) -> io::Result<usize>;

    /// Frames dropped before they could be taken, so far.
    fn drops(&mut self) -> u64;
}

/// Forwarding in place: frames received, rewritten in their buffers and
/// sent from there, never copied.
pub trait FwdPort {
    fn name(&self) -> &'static str;

    /// Waits up to `wait` for frames, hands each to `rewrite` (false:
    /// dropped) and sends the rest; returns (received, sent, dropped by
    /// `rewrite` or for want of room).
    fn forward<F: FnMut(&mut [u8]) -> bool>(
        &mut self,
        wait: Duration,
        rewrite: &mut F,
    ) -> io::Result<(u64, u64, u64)>;

    /// Whether this port has [`forward_untouched`](Self::forward_untouched)
    /// of its own (the default is [`forward`](Self::forward)'s path).
    fn can_forward_untouched(&self) -> bool {
        false
    }

    /// Waits up to `wait` for frames and sends them back out as they are,
    /// none read but for its length (fwd's `io` mode): the burst handed
    /// over whole, as testpmd's io forwarding does, but frames longer than
    /// `frame_max`, which are dropped. Returns (received, sent, dropped
    /// (too long or for want of room), too long).
    fn forward_untouched(
        &mut self,
        wait: Duration,
        frame_max: usize,
    ) -> io::Result<(u64, u64, u64, u64)> {
        let mut too_long = 0u64;
        let (rx, sent, dropped) = self.forward(wait, &mut |f: &mut [u8]| {
            let fits = f.len() <= frame_max;
            too_long += u64::from(!fits);
            fits
        })?;
        Ok((rx, sent, dropped, too_long))
    }

    /// Waits until everything sent is gone.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Frames dropped before they could be taken, so far.
    fn drops(&mut self) -> u64;
}

/// What a backend does not have (no in-place forwarder; DPDK's ports in
/// a build without it): no value of it exists.
#[derive(Debug)]
pub enum Never {}

impl TxPort for Never {
    fn name(&self) -> &'static str {
        match *self {}
    }
    fn batch(&self) -> usize {
        match *self {}
    }
    fn capabilities(&self, _: Capabilities) -> Capabilities {
        match *self {}
    }
    fn send(&mut self, _: &[&[u8]]) -> io::Result<usize> {
        match *self {}
    }
    fn send_with<F: FrameSource + PayloadSource>(
        &mut self,
        _: usize,
        _: &mut F,
    ) -> io::Result<(usize, u64)> {
        match *self {}
    }
    fn slot_len(&self) -> usize {
        match *self {}
    }
    fn slots(&self) -> usize {
        match *self {}
    }
}

impl RxPort for Never {
    fn name(&self) -> &'static str {
        match *self {}
    }
    fn capabilities(&self) -> RxCapabilities {
        match *self {}
    }
    fn recv_within<F: FrameSink>(&mut self, _: Duration, _: &mut F) -> io::Result<usize> {
        match *self {}
    }
    fn drops(&mut self) -> u64 {
        match *self {}
    }
}

impl FwdPort for Never {
    fn name(&self) -> &'static str {
        match *self {}
    }
    fn forward<F: FnMut(&mut [u8]) -> bool>(
        &mut self,
        _: Duration,
        _: &mut F,
    ) -> io::Result<(u64, u64, u64)> {
        match *self {}
    }
    fn drops(&mut self) -> u64 {
        match *self {}
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

/// What a sending backend reports of itself, written into blast's result
/// under `backend_stats` (the keys are the JSON's).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum TxStats {
    Xdp {
        xsk_tx_completed: u64,
        xsk_tx_invalid_descs: u64,
        zero_copy: bool,
        xsk_tx_budget: u32,
    },
    Udp {
        socket_mode: &'static str,
        sockets: usize,
        gso: bool,
        gso_note: Option<String>,
        udp_datagrams: u64,
        udp_messages: u64,
        udp_gso_messages: u64,
        udp_buffers: usize,
    },
    Raw {
        socket_mode: &'static str,
    },
    Loop {
        loopback_port: String,
        wire_offered: u64,
        wire_dropped: u64,
        wire_duplicated: u64,
        wire_reordered: u64,
    },
}

/// The PACKET_FANOUT group of this process's receivers sharing an
/// interface (af_packet's rings, socket's raw sockets).
pub(super) fn fanout_group() -> u16 {
    (std::process::id() & 0xffff) as u16
}

/// The largest frames on the kernel's stack paths: the MTU and 18 bytes
/// of Ethernet header and tag.
pub(super) fn stack_max(iface: &str) -> usize {
    crate::iface::mtu(iface).map_or(1500, |m| m) + 18
}

/// Every one of `frames` fits a `room`-byte buffer, or the error saying
/// it does not (the copying sends of the backends with their own buffers).
pub(super) fn fits(frames: &[&[u8]], room: usize) -> io::Result<()> {
    if frames.iter().any(|f| f.len() > room) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame larger than the backend's {room}-byte buffers"),
        ));
    }
    Ok(())
}
