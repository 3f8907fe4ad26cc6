//! Choosing a backend, saying why when `auto` falls back.

use linerate_backend::packet_ring::TxRing;
use linerate_backend::raw::RawSocket;
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
}

impl Tx {
    pub fn name(&self) -> &'static str {
        match self {
            Tx::Socket(_) => "socket",
            Tx::Ring(_) => "af_packet",
        }
    }

    /// Frames per send call that suit the backend.
    pub fn batch(&self) -> usize {
        match self {
            Tx::Socket(_) => linerate_backend::raw::RAW_BATCH_MAX,
            // One kick of the ring sends every queued slot.
            Tx::Ring(r) => r.capacity().min(256),
        }
    }

    /// Hands frames to the kernel; returns how many it took (0: full, retry).
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        match self {
            Tx::Socket(s) => s.send(frames),
            Tx::Ring(r) => r.send(frames),
        }
    }

    /// Waits until everything handed over is sent.
    pub fn finish(&mut self) -> io::Result<()> {
        match self {
            Tx::Socket(_) => Ok(()),
            Tx::Ring(r) => r.flush(),
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
    match kind {
        BackendKind::AfXdp => Err(BackendError::NotBuilt("af_xdp")),
        BackendKind::Socket => Ok((socket()?, None)),
        BackendKind::AfPacket => Ok((
            Tx::Ring(TxRing::open(iface, max_frame, 4096).map_err(open_err(iface))?),
            None,
        )),
        BackendKind::Auto => match TxRing::open(iface, max_frame, 4096) {
            Ok(r) => Ok((
                Tx::Ring(r),
                Some(format!(
                    "af_xdp: not built yet, using af_packet (TPACKET_V3 TX ring) on {iface}"
                )),
            )),
            Err(e) => Ok((
                socket()?,
                Some(format!(
                    "af_packet: TX ring refused ({e}), using socket (raw AF_PACKET, sendmmsg) on {iface}"
                )),
            )),
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
        BackendKind::AfXdp => return Err(BackendError::NotBuilt("af_xdp")),
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
