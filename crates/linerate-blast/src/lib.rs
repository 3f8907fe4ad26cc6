//! `linerate blast` and `linerate sink`: the runners around the generator's
//! data plane (`linerate-gen`) and a backend (`linerate-backend`).
//!
//! Backends today: `socket` (a raw AF_PACKET socket, sendmmsg/recvmmsg,
//! qdisc bypass). `af_packet` (TPACKET_V3 rings) and `af_xdp` are refused
//! with a clear error until they exist; `auto` says what it chose and why.

mod backend;
mod blast;
mod sink;

pub use backend::{BackendError, BackendKind, open};
pub use blast::{BlastConfig, BlastError, BlastReport, Rate, blast};
pub use sink::{SinkConfig, SinkReport, sink};
