//! Choosing a backend, saying why when `auto` falls back.

use crate::udp::{PayloadSource, Traffic, UdpTx};
use linerate_backend::FrameSink;
use linerate_backend::FrameSource;
use linerate_backend::loopback::{self, LoopRx, LoopTx};
use linerate_backend::packet_ring::{RxRing, TxRing};
use linerate_backend::raw::{RawSocket, RawTx};
pub use linerate_backend::xdp::RxFilter;
use linerate_backend::xsk::{XskRx, XskTx};
use std::io;
use thiserror::Error;

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
    /// An in-memory port of this process (`linerate_backend::loopback`),
    /// with fault injection: blast, sink, fwd and rfc2544 in unit tests.
    Loopback,
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
            _ => return None,
        })
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
    #[error("capture file: {0}")]
    Capture(#[from] linerate_gen::pcap::TraceError),
}

fn open_err(iface: &str) -> impl FnOnce(io::Error) -> BackendError + '_ {
    move |source| BackendError::Open {
        iface: iface.to_string(),
        source,
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

pub use crate::udp::TX_BATCH_MAX;

/// TPACKET_V3 receive ring: blocks of 256 KiB (128 frame slots), 256 of
/// them (64 MiB). The kernel closes a block after 1 ms at the latest, so at
/// low rates each block holds about a millisecond: many small blocks let a
/// receive worker that stalls (a busy host) fall ~256 ms behind before the
/// kernel drops, where 64 blocks of 1 MiB gave it 64 ms.
const RX_BLOCK: usize = 1 << 18;
const RX_BLOCKS: usize = 256;

/// Why receiving on `iface` cannot go on, if it cannot: the interface went
/// down or away. (Rings just go quiet when that happens, so the loops look
/// a few times a second and every backend ends the same way.)
pub(crate) fn link_lost(kind: BackendKind, iface: &str) -> Option<String> {
    let up = match kind {
        BackendKind::Loopback => loopback::open(iface).map(|w| w.is_up()),
        _ => linerate_backend::iface::is_up(iface),
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
        _ => linerate_backend::iface::mtu(iface),
    }
}

/// The MAC of port `iface` as `kind` opens it.
pub fn port_mac(kind: BackendKind, iface: &str) -> io::Result<[u8; 6]> {
    match kind {
        BackendKind::Loopback => loopback::open(iface).map(|w| w.mac()),
        _ => linerate_backend::iface::mac(iface),
    }
}

/// Where blast's frames go.
#[derive(Debug)]
pub enum Tx {
    /// Raw AF_PACKET socket, sendmmsg (frames built in its staging buffers).
    Socket(RawTx),
    /// UDP sockets (one per source endpoint), sendmmsg + GSO.
    Udp(Box<UdpTx>),
    /// AF_PACKET TPACKET_V3 TX ring.
    Ring(TxRing),
    /// AF_XDP socket on the worker's TX queue, copy or zero-copy.
    Xdp(XskTx),
    /// An in-memory loopback port.
    Loop(LoopTx),
}

impl Tx {
    /// The kernel builds and addresses this backend's frames (UDP
    /// sockets): a crafted frame beside them would not be addressed alike.
    pub fn kernel_addressed(&self) -> bool {
        matches!(self, Tx::Udp(..))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Tx::Socket(..) | Tx::Udp(..) => "socket",
            Tx::Ring(_) => "af_packet",
            Tx::Xdp(_) => "af_xdp",
            Tx::Loop(_) => "loopback",
        }
    }

    /// Frames per send call that suit the backend.
    pub fn batch(&self) -> usize {
        match self {
            Tx::Socket(..) => linerate_backend::raw::RAW_BATCH_MAX,
            Tx::Udp(..) => TX_BATCH_MAX,
            // One kick of the ring sends every queued slot.
            Tx::Ring(r) => r.capacity().min(TX_BATCH_MAX),
            Tx::Xdp(x) => x.capacity().min(TX_BATCH_MAX),
            Tx::Loop(l) => l.slots(),
        }
    }

    /// What this backend can do here.
    pub fn capabilities(&self, iface: &str) -> Capabilities {
        let stack_max = linerate_backend::iface::mtu(iface).map_or(1500, |m| m) + 18;
        let mut c = Capabilities {
            batch: self.batch(),
            max_frame: stack_max,
            crafted_frames: true,
            zero_copy: false,
            per_queue: false,
            gso: false,
            qdisc_bypass: false,
        };
        match self {
            Tx::Socket(s) => c.qdisc_bypass = s.sock.qdisc_bypassed(),
            Tx::Udp(u) => {
                c.crafted_frames = false;
                c.gso = u.gso;
            }
            Tx::Ring(r) => {
                c.max_frame = r.max_frame();
                c.qdisc_bypass = true;
            }
            Tx::Xdp(x) => {
                c.max_frame = x.max_frame();
                c.zero_copy = x.zero_copy;
                c.per_queue = true;
                c.qdisc_bypass = true;
            }
            Tx::Loop(l) => c.max_frame = l.slot_len(),
        }
        c
    }

    /// Hands frames built elsewhere to the kernel; returns how many it took
    /// (0: full, retry). The ring backends copy them into their buffers
    /// through [`send_with`](Self::send_with).
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let room = self.slot_len();
        let fits = || {
            if frames.iter().any(|f| f.len() > room) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("frame larger than the backend's {room}-byte buffers"),
                ));
            }
            Ok(linerate_backend::CopyFrames::new(frames))
        };
        match self {
            Tx::Socket(s) => s.sock.send(frames),
            Tx::Udp(u) => u.send(frames),
            Tx::Ring(r) => r.send_with(frames.len(), &mut fits()?).map(|(n, _)| n),
            Tx::Xdp(x) => x.send_with(frames.len(), &mut fits()?).map(|(n, _)| n),
            Tx::Loop(l) => {
                fits()?;
                l.send(frames)
            }
        }
    }

    /// Builds up to `n` frames in place and hands them to the kernel:
    /// `fill.build(buffer, slot)` writes a frame into the buffer and returns its
    /// length. The buffer is the backend's own (a UMEM frame, a TX ring
    /// slot, a staging buffer of sendmmsg), `slot` (below
    /// [`slots`](Self::slots)) names it, and it still holds the last frame
    /// built there, so a caller that remembers what each slot holds writes
    /// only what differs. The UDP path asks `fill.payload` for the
    /// datagrams' payloads instead (the kernel builds the headers). Returns
    /// the frames handed over and their bytes (0 frames: full, try again).
    /// The raw socket sends what a refused call left built before building
    /// more.
    #[inline]
    pub fn send_with<F: FrameSource + PayloadSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        match self {
            Tx::Xdp(x) => x.send_with(n, fill),
            Tx::Ring(r) => r.send_with(n, fill),
            Tx::Socket(s) => s.send_with(n, fill),
            Tx::Udp(u) => u.send_built(n, fill),
            Tx::Loop(l) => l.send_with(n, fill),
        }
    }

    /// The bytes of each buffer [`send_with`](Self::send_with) hands out
    /// (the largest frame it can build, FCS excluded).
    pub fn slot_len(&self) -> usize {
        match self {
            Tx::Xdp(x) => x.max_frame(),
            Tx::Ring(r) => r.max_frame(),
            Tx::Socket(s) => s.slot_len(),
            Tx::Udp(u) => u.slot_len(),
            Tx::Loop(l) => l.slot_len(),
        }
    }

    /// How many distinct buffers [`send_with`](Self::send_with) hands out.
    pub fn slots(&self) -> usize {
        match self {
            Tx::Xdp(x) => x.capacity(),
            Tx::Ring(r) => r.slots(),
            Tx::Socket(s) => s.slots(),
            Tx::Udp(u) => u.slots(),
            Tx::Loop(l) => l.slots(),
        }
    }

    /// What the backend itself reports: for af_xdp, the frames the kernel
    /// completed on the TX ring, invalid descriptors and zero-copy or not.
    pub fn stats(&self) -> Option<serde_json::Value> {
        match self {
            Tx::Xdp(x) => {
                let (invalid, _) = x.stats().unwrap_or((0, 0));
                Some(serde_json::json!({
                    "xsk_tx_completed": x.completed,
                    "xsk_tx_invalid_descs": invalid,
                    "zero_copy": x.zero_copy,
                    "xsk_tx_budget": x.tx_budget,
                }))
            }
            Tx::Udp(u) => Some(serde_json::json!({
                "socket_mode": "udp",
                "sockets": u.sockets(),
                "gso": u.gso,
                "gso_note": u.gso_note,
                "udp_datagrams": u.datagrams,
                "udp_messages": u.messages,
                "udp_gso_messages": u.gso_messages,
                "udp_buffers": u.slots(),
            })),
            Tx::Socket(..) => Some(serde_json::json!({ "socket_mode": "raw" })),
            Tx::Ring(_) => None,
            Tx::Loop(l) => {
                let c = l.wire().counts();
                Some(serde_json::json!({
                    "loopback_port": l.wire().name(),
                    "wire_offered": c.offered, "wire_dropped": c.dropped,
                    "wire_duplicated": c.duplicated, "wire_reordered": c.reordered,
                }))
            }
        }
    }

    /// Waits until everything handed over is sent.
    pub fn finish(&mut self) -> io::Result<()> {
        match self {
            Tx::Socket(..) | Tx::Udp(..) | Tx::Loop(_) => Ok(()),
            Tx::Ring(r) => r.flush(),
            Tx::Xdp(x) => x.flush(),
        }
    }
}

/// Opens the sending backend for worker `queue` (AF_XDP binds one socket
/// per TX queue; the other backends let the kernel pick the queue of the
/// worker's CPU). The note says what `auto` (or `socket`) chose and why.
pub fn open_tx(
    kind: BackendKind,
    iface: &str,
    max_frame: usize,
    queue: u32,
    traffic: &Traffic,
) -> Result<(Tx, Option<String>), BackendError> {
    let raw = || -> Result<Tx, BackendError> {
        let mut s = RawSocket::open(iface).map_err(open_err(iface))?;
        let _ = s.bypass_qdisc();
        // As deep as the rings (4096 slots), within 16 MiB of buffers.
        let slots = (16 << 20) / max_frame.max(64);
        Ok(Tx::Socket(RawTx::new(s, slots.min(4096), max_frame)))
    };
    let udp_note = |u: &UdpTx| match &u.gso_note {
        Some(g) => format!("socket: {} UDP socket(s), sendmmsg; {g}", u.sockets()),
        None => format!("socket: {} UDP socket(s), sendmmsg + UDP GSO", u.sockets()),
    };
    // UDP sockets where the kernel can build the traffic, raw frames otherwise.
    let socket = || -> Result<(Tx, String), BackendError> {
        match UdpTx::open(iface, traffic, max_frame) {
            Ok(u) => {
                let note = udp_note(&u);
                Ok((Tx::Udp(Box::new(u)), note))
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok((
                raw()?,
                format!("socket: raw AF_PACKET frames, sendmmsg ({e})"),
            )),
            Err(e) => Err(open_err(iface)(e)),
        }
    };
    let ring = || TxRing::open(iface, max_frame, 4096).map(Tx::Ring);
    let xsk = || XskTx::open(iface, queue, 4096).map(Tx::Xdp);
    match kind {
        BackendKind::Loopback => Ok((
            Tx::Loop(LoopTx::open(iface, max_frame, TX_BATCH_MAX).map_err(open_err(iface))?),
            None,
        )),
        BackendKind::AfXdp => Ok((xsk().map_err(open_err(iface))?, None)),
        BackendKind::Socket => socket().map(|(t, n)| (t, Some(n))),
        BackendKind::Udp => {
            let u = UdpTx::open(iface, traffic, max_frame).map_err(|e| BackendError::Open {
                iface: iface.to_string(),
                source: io::Error::new(e.kind(), format!("UDP sockets: {e}")),
            })?;
            let note = udp_note(&u);
            Ok((Tx::Udp(Box::new(u)), Some(note)))
        }
        BackendKind::Raw => Ok((raw()?, None)),
        BackendKind::AfPacket => Ok((ring().map_err(open_err(iface))?, None)),
        BackendKind::Auto => match xsk() {
            Ok(x) => Ok((x, Some(format!("af_xdp on {iface} queue {queue}")))),
            Err(xe) => match ring() {
                Ok(r) => Ok((
                    r,
                    Some(format!(
                        "af_xdp: {xe}, using af_packet (TPACKET_V3 TX ring) on {iface}"
                    )),
                )),
                Err(re) => {
                    let (t, n) = socket()?;
                    Ok((t, Some(format!("af_xdp: {xe}; af_packet: {re}; using {n}"))))
                }
            },
        },
    }
}

/// Where the sink's frames come from.
#[derive(Debug)]
pub enum Rx {
    /// Raw AF_PACKET socket, recvmmsg (frames copied into these buffers;
    /// the kernel's drop count so far; the receive timeout now set).
    Socket(RawSocket, Vec<Vec<u8>>, u64, std::time::Duration),
    /// AF_XDP, one socket per RX queue, with the redirect program attached.
    Xdp(XskRx),
    /// AF_PACKET TPACKET_V3 RX ring (and the kernel's drop count so far).
    Ring(RxRing, u64),
    /// An in-memory loopback port.
    Loop(LoopRx),
}

impl Rx {
    pub fn name(&self) -> &'static str {
        match self {
            Rx::Socket(..) => "socket",
            Rx::Xdp(_) => "af_xdp",
            Rx::Ring(..) => "af_packet",
            Rx::Loop(_) => "loopback",
        }
    }

    /// What this receiving backend can do here.
    pub fn capabilities(&self) -> RxCapabilities {
        match self {
            Rx::Socket(_, store, ..) => RxCapabilities {
                batch: store.len(),
                max_frame: store.first().map_or(0, Vec::len),
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: true,
            },
            Rx::Xdp(x) => RxCapabilities {
                batch: 256,
                max_frame: x.max_frame(),
                queues: Some(x.queues()),
                zero_copy: x.zero_copy,
                kernel_receive_stamps: false,
            },
            Rx::Ring(r, _) => RxCapabilities {
                batch: r.frames_per_block(),
                max_frame: r.max_frame(),
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: true,
            },
            Rx::Loop(l) => RxCapabilities {
                batch: LOOP_RX_BATCH,
                max_frame: l.wire().mtu() + 18,
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: false,
            },
        }
    }

    /// Hands each received frame (without FCS) to `f`; waits up to 50 ms
    /// for the first. Frames this host sent itself are skipped. Each
    /// comes with its arrival time: the kernel's receive time where the
    /// backend has one (the af_packet ring, the raw socket's
    /// SO_TIMESTAMPNS), else the batch's handover time (AF_XDP). Returns
    /// exactly the frames handed to `f` (the sink counts its probes per
    /// batch from it).
    #[inline]
    pub fn recv<F: FrameSink + ?Sized>(&mut self, f: &mut F) -> io::Result<usize> {
        self.recv_within(std::time::Duration::from_millis(50), f)
    }

    /// [`Rx::recv`], waiting at most `wait` for the first frame (to the
    /// millisecond on the rings; the raw socket's wait is set per call).
    #[inline]
    pub fn recv_within<F: FrameSink + ?Sized>(
        &mut self,
        wait: std::time::Duration,
        f: &mut F,
    ) -> io::Result<usize> {
        match self {
            Rx::Socket(sock, store, _, timeout) => {
                // SO_RCVTIMEO, set only when it changes (zero would mean forever)
                let wait = wait.max(std::time::Duration::from_micros(1));
                if wait != *timeout {
                    sock.set_read_timeout(wait)?;
                    *timeout = wait;
                }
                let mut lens = [0usize; linerate_backend::raw::RAW_BATCH_MAX];
                let mut stamps = [0u64; linerate_backend::raw::RAW_BATCH_MAX];
                let n = sock.recv_stamped(store, &mut lens, &mut stamps)?;
                // The kernel's receive stamps are on the wall clock; probes
                // carry the monotonic one.
                let offset = linerate_backend::clock::realtime_offset_ns();
                let (mut handed, mut unstamped) = (0, 0);
                for ((b, &l), &st) in store.iter().zip(&lens).zip(&stamps).take(n) {
                    // (0: a frame this host sent, not handed over.)
                    if l > 0 {
                        handed += 1;
                        let at = match (st > 0)
                            .then(|| u64::try_from(i128::from(st) - offset).ok())
                            .flatten()
                        {
                            Some(at) => at,
                            None => {
                                unstamped += 1;
                                f.handover_time()
                            }
                        };
                        f.frame(&b[..l], at);
                    }
                }
                if unstamped > 0 {
                    f.handed_over(unstamped);
                }
                Ok(handed)
            }
            Rx::Xdp(x) => x.recv(256, wait, f),
            Rx::Ring(r, _) => r.recv(wait.as_millis().min(1000) as i32, f),
            Rx::Loop(l) => Ok(l.recv(LOOP_RX_BATCH, wait, f)),
        }
    }

    /// Frames the kernel dropped before the sink could take them, so far.
    pub fn drops(&mut self) -> u64 {
        match self {
            // PACKET_STATISTICS resets on every read: accumulate.
            Rx::Socket(sock, _, acc, _) => {
                *acc += sock.stats().map_or(0, |(_, d)| u64::from(d));
                *acc
            }
            Rx::Xdp(x) => x.stats().map_or(0, |(d, full, _)| d + full),
            Rx::Ring(r, acc) => {
                *acc += u64::from(r.drops().unwrap_or(0));
                *acc
            }
            // The wire's own drops are faults injected, not the receiver's.
            Rx::Loop(_) => 0,
        }
    }
}

/// Frames a loopback receiver takes per call at most.
const LOOP_RX_BATCH: usize = 256;

/// How long the raw socket receiver waits (its SO_RCVTIMEO as opened).
const SOCKET_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// The raw socket receiver: a large buffer, a 50 ms wait, kernel stamps.
fn socket_rx(iface: &str) -> Result<Rx, BackendError> {
    let s = RawSocket::open(iface).map_err(open_err(iface))?;
    let _ = s.set_rcvbuf(64 << 20);
    let _ = s.set_read_timeout(SOCKET_WAIT);
    let _ = s.enable_rx_timestamps();
    let _ = s.stats();
    Ok(Rx::Socket(
        s,
        (0..linerate_backend::raw::RAW_BATCH_MAX)
            .map(|_| vec![0u8; 9216])
            .collect(),
        0,
        SOCKET_WAIT,
    ))
}

/// Opens `workers` receivers that share the interface's frames, one per
/// receive thread: AF_XDP splits its RX queues between them (at least one
/// queue each), af_packet and socket join a PACKET_FANOUT group that keeps
/// each flow on one of them. `auto` falls back from AF_XDP to af_packet when
/// there are fewer queues than workers.
pub fn open_rx_workers(
    kind: BackendKind,
    iface: &str,
    workers: usize,
    filter: RxFilter,
) -> Result<(Vec<Rx>, Option<String>), BackendError> {
    let (first, mut note) = open_rx(kind, iface, filter)?;
    if workers <= 1 {
        return Ok((vec![first], note));
    }
    let first = match first {
        Rx::Xdp(x) if kind == BackendKind::Auto && x.queues() < workers => {
            let queues = x.queues();
            drop(x);
            note = Some(format!(
                "af_xdp: {queues} RX queue(s) for {workers} workers, receiving with af_packet (TPACKET_V3 RX rings, PACKET_FANOUT by flow) on {iface}"
            ));
            Rx::Ring(
                RxRing::open(iface, RX_BLOCK, RX_BLOCKS).map_err(open_err(iface))?,
                0,
            )
        }
        other => other,
    };
    // One fanout group per process and interface.
    let group = (std::process::id() & 0xffff) as u16;
    let mut out = Vec::with_capacity(workers);
    match first {
        // Every receiver of a loopback port takes from the one wire.
        Rx::Loop(l) => {
            out.push(Rx::Loop(l));
            for _ in 1..workers {
                out.push(Rx::Loop(LoopRx::open(iface).map_err(open_err(iface))?));
            }
        }
        Rx::Xdp(x) => out.extend(
            x.split(workers)
                .map_err(open_err(iface))?
                .into_iter()
                .map(Rx::Xdp),
        ),
        Rx::Ring(mut r, _) => {
            r.join_fanout(group).map_err(open_err(iface))?;
            out.push(Rx::Ring(r, 0));
            for _ in 1..workers {
                let mut r = RxRing::open(iface, RX_BLOCK, RX_BLOCKS).map_err(open_err(iface))?;
                r.join_fanout_late(group).map_err(open_err(iface))?;
                out.push(Rx::Ring(r, 0));
            }
        }
        Rx::Socket(s, bufs, n, wait) => {
            s.join_fanout(group).map_err(open_err(iface))?;
            out.push(Rx::Socket(s, bufs, n, wait));
            for _ in 1..workers {
                let mut rx = socket_rx(iface)?;
                if let Rx::Socket(s, ..) = &mut rx {
                    s.join_fanout_late(group).map_err(open_err(iface))?;
                }
                out.push(rx);
            }
        }
    }
    Ok((out, note))
}

/// Opens the receiving backend; the note says what `auto` chose and why.
/// With AF_XDP only the frames `filter` takes leave the kernel.
pub fn open_rx(
    kind: BackendKind,
    iface: &str,
    filter: RxFilter,
) -> Result<(Rx, Option<String>), BackendError> {
    let ring = || RxRing::open(iface, RX_BLOCK, RX_BLOCKS);
    let socket = || socket_rx(iface);
    match kind {
        BackendKind::Loopback => Ok((
            Rx::Loop(LoopRx::open(iface).map_err(open_err(iface))?),
            None,
        )),
        BackendKind::AfXdp => Ok((
            Rx::Xdp(XskRx::open(iface, 4096, filter).map_err(open_err(iface))?),
            None,
        )),
        BackendKind::Socket | BackendKind::Raw => Ok((socket()?, None)),
        BackendKind::Udp => Err(BackendError::SendOnly("socket:udp")),
        BackendKind::AfPacket => Ok((Rx::Ring(ring().map_err(open_err(iface))?, 0), None)),
        BackendKind::Auto => match XskRx::open(iface, 4096, filter) {
            Ok(x) => {
                let note = format!(
                    "af_xdp on {iface}, {} RX queue(s), one socket each (redirect program attached, taking {})",
                    x.queues(),
                    filter.describe()
                );
                Ok((Rx::Xdp(x), Some(note)))
            }
            Err(xe) => match ring() {
                Ok(r) => Ok((
                    Rx::Ring(r, 0),
                    Some(format!(
                        "af_xdp: {xe}, receiving with af_packet (TPACKET_V3 RX ring) on {iface}"
                    )),
                )),
                Err(re) => Ok((
                    socket()?,
                    Some(format!(
                        "af_xdp: {xe}; af_packet: {re}; receiving with socket on {iface}"
                    )),
                )),
            },
        },
    }
}
