//! Choosing a backend, saying why when `auto` falls back.

use linerate_backend::packet_ring::TxRing;
use linerate_backend::raw::RawSocket;
use linerate_backend::xsk::XskTx;
use std::io;
use thiserror::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Auto,
    Socket,
    AfPacket,
    AfXdp,
}

impl BackendKind {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => Self::Auto,
            "socket" => Self::Socket,
            "af_packet" => Self::AfPacket,
            "af_xdp" => Self::AfXdp,
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
    #[error("interface {iface}: {source}")]
    Open { iface: String, source: io::Error },
}

fn open_err(iface: &str) -> impl FnOnce(io::Error) -> BackendError + '_ {
    move |source| BackendError::Open {
        iface: iface.to_string(),
        source,
    }
}

/// Where blast's frames go.
#[derive(Debug)]
pub enum Tx {
    /// Raw AF_PACKET socket, sendmmsg.
    Socket(RawSocket),
    /// AF_PACKET TPACKET_V3 TX ring.
    Ring(TxRing),
    /// AF_XDP socket (queue 0), copy or zero-copy.
    Xdp(XskTx),
}

impl Tx {
    pub fn name(&self) -> &'static str {
        match self {
            Tx::Socket(_) => "socket",
            Tx::Ring(_) => "af_packet",
            Tx::Xdp(_) => "af_xdp",
        }
    }

    /// Frames per send call that suit the backend.
    pub fn batch(&self) -> usize {
        match self {
            Tx::Socket(_) => linerate_backend::raw::RAW_BATCH_MAX,
            // One kick of the ring sends every queued slot.
            Tx::Ring(r) => r.capacity().min(256),
            Tx::Xdp(x) => x.capacity().min(256),
        }
    }

    /// Hands frames to the kernel; returns how many it took (0: full, retry).
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        match self {
            Tx::Socket(s) => s.send(frames),
            Tx::Ring(r) => r.send(frames),
            Tx::Xdp(x) => x.send(frames),
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
                }))
            }
            _ => None,
        }
    }

    /// Waits until everything handed over is sent.
    pub fn finish(&mut self) -> io::Result<()> {
        match self {
            Tx::Socket(_) => Ok(()),
            Tx::Ring(r) => r.flush(),
            Tx::Xdp(x) => x.flush(),
        }
    }
}

/// Opens the sending backend; the note says what `auto` chose and why.
pub fn open_tx(
    kind: BackendKind,
    iface: &str,
    max_frame: usize,
) -> Result<(Tx, Option<String>), BackendError> {
    let socket = || -> Result<Tx, BackendError> {
        let s = RawSocket::open(iface).map_err(open_err(iface))?;
        let _ = s.bypass_qdisc();
        Ok(Tx::Socket(s))
    };
    let ring = || TxRing::open(iface, max_frame, 4096).map(Tx::Ring);
    let xsk = || XskTx::open(iface, 0, 4096).map(Tx::Xdp);
    match kind {
        BackendKind::AfXdp => Ok((xsk().map_err(open_err(iface))?, None)),
        BackendKind::Socket => Ok((socket()?, None)),
        BackendKind::AfPacket => Ok((ring().map_err(open_err(iface))?, None)),
        BackendKind::Auto => match xsk() {
            Ok(x) => Ok((x, Some(format!("af_xdp on {iface} queue 0")))),
            Err(xe) => match ring() {
                Ok(r) => Ok((
                    r,
                    Some(format!(
                        "af_xdp: {xe}, using af_packet (TPACKET_V3 TX ring) on {iface}"
                    )),
                )),
                Err(re) => Ok((
                    socket()?,
                    Some(format!(
                        "af_xdp: {xe}; af_packet: {re}; using socket (raw AF_PACKET, sendmmsg) on {iface}"
                    )),
                )),
            },
        },
    }
}

/// Opens the receiving backend (raw socket today); the note says so when
/// another backend was asked for.
pub fn open_rx(
    kind: BackendKind,
    iface: &str,
) -> Result<(RawSocket, &'static str, Option<String>), BackendError> {
    let note = match kind {
        BackendKind::AfXdp => return Err(BackendError::NotBuilt("af_xdp for receiving")),
        BackendKind::AfPacket => Some(
            "af_packet: RX ring not built yet, receiving with socket (raw AF_PACKET, recvmmsg)"
                .to_string(),
        ),
        BackendKind::Auto => Some(format!(
            "af_xdp and the af_packet RX ring are not built yet: receiving with socket on {iface}"
        )),
        BackendKind::Socket => None,
    };
    let s = RawSocket::open(iface).map_err(open_err(iface))?;
    Ok((s, "socket", note))
}
