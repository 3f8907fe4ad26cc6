//! The socket backend: UDP sockets where the kernel can build the traffic
//! (`udp.rs`), raw AF_PACKET frames otherwise (`crate::raw`), sendmmsg and
//! recvmmsg; receivers sharing an interface through a PACKET_FANOUT group.

use super::contract::{
    Backend, Capabilities, Never, RxCapabilities, RxHold, RxPort, TxPort, TxStats,
};
use super::error::{BackendError, open_err};
use super::udp::{PayloadSource, TX_BATCH_MAX, Traffic, UdpTx};
use crate::raw::{RAW_BATCH_MAX, RawSocket, RawTx};
use crate::xdp::RxFilter;
use crate::{FrameSink, FrameSource};
use std::io;
use std::time::Duration;

/// Which of its two paths the socket backend takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Socket {
    /// UDP sockets where the kernel can build the traffic, raw frames
    /// otherwise.
    Auto,
    /// UDP sockets only (sends only).
    Udp,
    /// Raw AF_PACKET frames only.
    Raw,
}

/// A socket backend's sender.
#[derive(Debug)]
pub enum SocketTx {
    /// Raw AF_PACKET socket, sendmmsg (frames built in its staging buffers).
    Raw(RawTx),
    /// UDP sockets (one per source endpoint), sendmmsg + GSO.
    Udp(Box<UdpTx>),
}

/// A raw socket receiver: frames copied into its buffers, the kernel's
/// drop count so far, the receive timeout now set.
#[derive(Debug)]
pub struct SocketRx {
    sock: RawSocket,
    store: Vec<Vec<u8>>,
    drops: u64,
    timeout: Duration,
}

/// How long the raw socket receiver waits (its SO_RCVTIMEO as opened).
const SOCKET_WAIT: Duration = Duration::from_millis(50);

impl Socket {
    /// The raw sender: as deep as the rings (4096 slots), within 16 MiB
    /// of buffers.
    fn raw(iface: &str, max_frame: usize) -> Result<SocketTx, BackendError> {
        let mut s = RawSocket::open(iface).map_err(open_err(iface))?;
        let _ = s.bypass_qdisc();
        let slots = (16 << 20) / max_frame.max(64);
        Ok(SocketTx::Raw(RawTx::new(s, slots.min(4096), max_frame)))
    }

    fn udp_note(u: &UdpTx) -> String {
        match &u.gso_note {
            Some(g) => format!("socket: {} UDP socket(s), sendmmsg; {g}", u.sockets()),
            None => format!("socket: {} UDP socket(s), sendmmsg + UDP GSO", u.sockets()),
        }
    }

    /// UDP sockets where the kernel can build the traffic, raw frames
    /// otherwise; the note says which.
    pub(super) fn auto_tx(
        iface: &str,
        max_frame: usize,
        traffic: &Traffic,
    ) -> Result<(SocketTx, String), BackendError> {
        match UdpTx::open(iface, traffic, max_frame) {
            Ok(u) => {
                let note = Self::udp_note(&u);
                Ok((SocketTx::Udp(Box::new(u)), note))
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok((
                Self::raw(iface, max_frame)?,
                format!("socket: raw AF_PACKET frames, sendmmsg ({e})"),
            )),
            Err(e) => Err(open_err(iface)(e)),
        }
    }

    /// The raw socket receiver: a large buffer, a 50 ms wait, kernel stamps.
    pub(super) fn open_raw_rx(iface: &str) -> Result<SocketRx, BackendError> {
        let s = RawSocket::open(iface).map_err(open_err(iface))?;
        let _ = s.set_rcvbuf(64 << 20);
        let _ = s.set_read_timeout(SOCKET_WAIT);
        let _ = s.enable_rx_timestamps();
        let _ = s.stats();
        Ok(SocketRx {
            sock: s,
            store: (0..RAW_BATCH_MAX).map(|_| vec![0u8; 9216]).collect(),
            drops: 0,
            timeout: SOCKET_WAIT,
        })
    }
}

impl Backend for Socket {
    type Tx = SocketTx;
    type Rx = SocketRx;
    type Fwd = Never;

    fn new(_: &crate::loopback::Wires) -> Self {
        Socket::Auto
    }

    fn open_tx(
        &self,
        iface: &str,
        max_frame: usize,
        _: u32,
        traffic: &Traffic,
    ) -> Result<(SocketTx, Option<String>), BackendError> {
        match self {
            Socket::Auto => Self::auto_tx(iface, max_frame, traffic).map(|(t, n)| (t, Some(n))),
            Socket::Udp => {
                let u = UdpTx::open(iface, traffic, max_frame).map_err(|e| BackendError::Open {
                    iface: iface.to_string(),
                    source: io::Error::new(e.kind(), format!("UDP sockets: {e}")),
                })?;
                let note = Self::udp_note(&u);
                Ok((SocketTx::Udp(Box::new(u)), Some(note)))
            }
            Socket::Raw => Ok((Self::raw(iface, max_frame)?, None)),
        }
    }

    fn open_rx(
        &self,
        iface: &str,
        _: RxFilter,
        _: RxHold,
    ) -> Result<(SocketRx, Option<String>), BackendError> {
        match self {
            Socket::Udp => Err(BackendError::SendOnly("socket:udp")),
            Socket::Auto | Socket::Raw => Ok((Self::open_raw_rx(iface)?, None)),
        }
    }

    fn share_rx(
        &self,
        first: SocketRx,
        iface: &str,
        workers: usize,
    ) -> Result<Vec<SocketRx>, BackendError> {
        let group = super::contract::fanout_group();
        first.sock.join_fanout(group).map_err(open_err(iface))?;
        let mut out = vec![first];
        for _ in 1..workers {
            let mut rx = Self::open_raw_rx(iface)?;
            rx.sock.join_fanout_late(group).map_err(open_err(iface))?;
            out.push(rx);
        }
        Ok(out)
    }
}

impl TxPort for SocketTx {
    fn name(&self) -> &'static str {
        "socket"
    }

    fn batch(&self) -> usize {
        match self {
            SocketTx::Raw(_) => RAW_BATCH_MAX,
            SocketTx::Udp(_) => TX_BATCH_MAX,
        }
    }

    fn capabilities(&self, mut c: Capabilities) -> Capabilities {
        match self {
            SocketTx::Raw(s) => c.qdisc_bypass = s.sock.qdisc_bypassed(),
            SocketTx::Udp(u) => {
                c.crafted_frames = false;
                c.gso = u.gso;
            }
        }
        c
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        match self {
            SocketTx::Raw(s) => s.sock.send(frames),
            SocketTx::Udp(u) => u.send(frames),
        }
    }

    /// The raw socket sends what a refused call left built before building
    /// more; the UDP path asks `fill` for the datagrams' payloads.
    #[inline]
    fn send_with<F: FrameSource + PayloadSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        match self {
            SocketTx::Raw(s) => s.send_with(n, fill),
            SocketTx::Udp(u) => u.send_built(n, fill),
        }
    }

    fn slot_len(&self) -> usize {
        match self {
            SocketTx::Raw(s) => s.slot_len(),
            SocketTx::Udp(u) => u.slot_len(),
        }
    }

    fn slots(&self) -> usize {
        match self {
            SocketTx::Raw(s) => s.slots(),
            SocketTx::Udp(u) => u.slots(),
        }
    }

    fn stats(&self) -> Option<TxStats> {
        Some(match self {
            SocketTx::Udp(u) => TxStats::Udp {
                socket_mode: "udp",
                sockets: u.sockets(),
                gso: u.gso,
                gso_note: u.gso_note.clone(),
                udp_datagrams: u.datagrams,
                udp_messages: u.messages,
                udp_gso_messages: u.gso_messages,
                udp_buffers: u.slots(),
            },
            SocketTx::Raw(_) => TxStats::Raw { socket_mode: "raw" },
        })
    }

    fn kernel_addressed(&self) -> bool {
        matches!(self, SocketTx::Udp(_))
    }
}

impl RxPort for SocketRx {
    fn name(&self) -> &'static str {
        "socket"
    }

    fn capabilities(&self) -> RxCapabilities {
        RxCapabilities {
            batch: self.store.len(),
            max_frame: self.store.first().map_or(0, Vec::len),
            queues: None,
            zero_copy: false,
            kernel_receive_stamps: true,
        }
    }

    /// The wait is set per call (SO_RCVTIMEO, only when it changes: zero
    /// would mean forever); frames this host sent are not handed over.
    #[inline]
    fn recv_within<F: FrameSink>(&mut self, wait: Duration, f: &mut F) -> io::Result<usize> {
        let wait = wait.max(Duration::from_micros(1));
        if wait != self.timeout {
            self.sock.set_read_timeout(wait)?;
            self.timeout = wait;
        }
        let mut lens = [0usize; RAW_BATCH_MAX];
        let mut stamps = [0u64; RAW_BATCH_MAX];
        let n = self
            .sock
            .recv_stamped(&mut self.store, &mut lens, &mut stamps)?;
        // The kernel's receive stamps are on the wall clock; probes
        // carry the monotonic one.
        let offset = crate::clock::realtime_offset_ns();
        let (mut handed, mut unstamped) = (0, 0);
        for ((b, &l), &st) in self.store.iter().zip(&lens).zip(&stamps).take(n) {
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

    /// PACKET_STATISTICS resets on every read: accumulated.
    fn drops(&mut self) -> u64 {
        self.drops += self.sock.stats().map_or(0, |(_, d)| u64::from(d));
        self.drops
    }
}
