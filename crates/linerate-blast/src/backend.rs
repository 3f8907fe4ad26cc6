//! Choosing a backend, with the reason when `auto` falls back.

use linerate_backend::raw::RawSocket;
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
        "backend {0} is not available in this build of linerate yet; use --backend socket (or auto)"
    )]
    NotBuilt(&'static str),
    #[error("interface {iface}: {source}")]
    Open {
        iface: String,
        source: std::io::Error,
    },
}

/// Opens the backend on `iface`. Returns the socket, the backend's name and,
/// for `auto`, the one-line reason for the choice.
pub fn open(
    kind: BackendKind,
    iface: &str,
) -> Result<(RawSocket, &'static str, Option<String>), BackendError> {
    let note = match kind {
        BackendKind::AfPacket => {
            return Err(BackendError::NotBuilt("af_packet (TPACKET_V3 rings)"));
        }
        BackendKind::AfXdp => return Err(BackendError::NotBuilt("af_xdp")),
        BackendKind::Auto => Some(format!(
            "af_xdp and af_packet rings are not built yet: using socket (raw AF_PACKET, sendmmsg) on {iface}"
        )),
        BackendKind::Socket => None,
    };
    let sock = RawSocket::open(iface).map_err(|source| BackendError::Open {
        iface: iface.to_string(),
        source,
    })?;
    Ok((sock, "socket", note))
}
