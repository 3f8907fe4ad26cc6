//! `linerate blast` and `linerate sink`: the runners around the generator's
//! data plane (`linerate-gen`) and a backend (`linerate-backend`).
//!
//! Backends today: `af_packet` for sending (TPACKET_V3 TX ring, qdisc
//! bypass) and `socket` (a raw AF_PACKET socket, sendmmsg/recvmmsg) for
//! sending and receiving. `af_xdp` is refused with a clear error until it
//! exists; `auto` says what it chose and why.

mod backend;
mod blast;
mod sink;

pub use backend::{BackendError, BackendKind, Tx, open_rx, open_tx};
pub use blast::{BlastConfig, BlastError, BlastReport, Rate, Replay, Timing, blast};
pub use sink::{SinkConfig, SinkReport, sink};
