//! The sending side of a port: blast's and fwd's frames out of one backend.

use super::*;

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
    /// A TX queue of a DPDK port, frames built in its mbufs.
    #[cfg(feature = "dpdk")]
    Dpdk(crate::dpdk::DpdkTx),
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
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(_) => "dpdk",
        }
    }

    /// Frames per send call that suit the backend.
    pub fn batch(&self) -> usize {
        match self {
            Tx::Socket(..) => crate::raw::RAW_BATCH_MAX,
            Tx::Udp(..) => TX_BATCH_MAX,
            // One kick of the ring sends every queued slot.
            Tx::Ring(r) => r.capacity().min(TX_BATCH_MAX),
            Tx::Xdp(x) => x.capacity().min(TX_BATCH_MAX),
            Tx::Loop(l) => l.slots(),
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(d) => d.batch(),
        }
    }

    /// What this backend can do here.
    pub fn capabilities(&self, iface: &str) -> Capabilities {
        let stack_max = crate::iface::mtu(iface).map_or(1500, |m| m) + 18;
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
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(d) => {
                c.max_frame = d.slot_len();
                c.per_queue = true;
                c.qdisc_bypass = true;
            }
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
            Ok(crate::CopyFrames::new(frames))
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
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(d) => {
                fits()?;
                d.send(frames)
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
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(d) => d.send_with(n, fill),
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
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(d) => d.slot_len(),
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
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(d) => d.slots(),
        }
    }

    /// What the backend itself reports: for af_xdp, the frames the kernel
    /// completed on the TX ring, invalid descriptors and zero-copy or not.
    pub fn stats(&self) -> Option<TxStats> {
        Some(match self {
            Tx::Xdp(x) => TxStats::Xdp {
                xsk_tx_completed: x.completed,
                xsk_tx_invalid_descs: x.stats().map_or(0, |(invalid, _)| invalid),
                zero_copy: x.zero_copy,
                xsk_tx_budget: x.tx_budget,
            },
            Tx::Udp(u) => TxStats::Udp {
                socket_mode: "udp",
                sockets: u.sockets(),
                gso: u.gso,
                gso_note: u.gso_note.clone(),
                udp_datagrams: u.datagrams,
                udp_messages: u.messages,
                udp_gso_messages: u.gso_messages,
                udp_buffers: u.slots(),
            },
            Tx::Socket(..) => TxStats::Raw { socket_mode: "raw" },
            Tx::Ring(_) => return None,
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(_) => return None,
            Tx::Loop(l) => {
                let c = l.wire().counts();
                TxStats::Loop {
                    loopback_port: l.wire().name().to_string(),
                    wire_offered: c.offered,
                    wire_dropped: c.dropped,
                    wire_duplicated: c.duplicated,
                    wire_reordered: c.reordered,
                }
            }
        })
    }

    /// Waits until everything handed over is sent.
    pub fn finish(&mut self) -> io::Result<()> {
        match self {
            Tx::Socket(..) | Tx::Udp(..) | Tx::Loop(_) => Ok(()),
            #[cfg(feature = "dpdk")]
            Tx::Dpdk(_) => Ok(()),
            Tx::Ring(r) => r.flush(),
            Tx::Xdp(x) => x.flush(),
        }
    }
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
    // Frames over one 2048-byte chunk span several (multi-buffer), with
    // fewer buffers so the UMEM stays within 64 MiB.
    let xsk = || {
        let built = max_frame.saturating_sub(4);
        let frames = ((64 << 20) / built.max(2048).next_power_of_two()).min(4096);
        XskTx::open(iface, queue, frames, built).map(Tx::Xdp)
    };
    match kind {
        BackendKind::Dpdk => crate::dpdk::open_tx(iface, queue),
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
        // AF_XDP only when its frames carry the largest asked for (over
        // 2048 bytes only where the kernel takes multi-buffer frames; if
        // not, a 9000-byte frame on a jumbo link goes by af_packet).
        BackendKind::Auto => match xsk().and_then(|x| {
            if x.slot_len() + 4 >= max_frame {
                Ok(x)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "its {}-byte frames do not carry {max_frame}-byte ones",
                        x.slot_len()
                    ),
                ))
            }
        }) {
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
