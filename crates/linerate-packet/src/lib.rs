//! `linerate blast`, `linerate sink` and `linerate fwd`: the runners around
//! the generator's data plane (`linerate-traffic`) and a backend
//! (`linerate-backend`).
//!
//! Backends today: for sending `af_xdp` (UMEM + TX ring, copy or
//! zero-copy), `af_packet` (TPACKET_V3 TX ring, qdisc bypass) and `socket`
//! (UDP sockets with sendmmsg and UDP GSO where the kernel can build the
//! traffic, a raw AF_PACKET socket with sendmmsg where frames are crafted);
//! for receiving `af_xdp` (one socket per RX queue behind an XSKMAP redirect
//! program), `af_packet` (TPACKET_V3 RX ring, per-frame kernel receive
//! stamps) and `socket` (recvmmsg, SO_TIMESTAMPNS). `auto` takes the fastest
//! that opens and says what it chose and why.

mod blast;
mod fwd;
pub mod pair;
mod pool;
mod replay;
mod send;
mod sink;

pub use blast::blast;
pub use fwd::{FwdConfig, FwdCounts, FwdError, FwdMode, FwdReport, Noisy, apply, fwd};
pub use linerate_backend::port::{
    BackendError, BackendKind, Capabilities, Gso, Rx, RxCapabilities, RxFilter, Traffic, Tx,
    UDP_SOCKETS_MAX, open_rx, open_rx_workers, open_tx,
};
pub use send::{BlastConfig, BlastError, BlastReport, Rate, traffic};
pub use send::{Replay, Timing};
pub use sink::{CaptureConfig, FLOW_ROWS_MAX, SinkConfig, SinkError, SinkReport, flow_rows, sink};
pub mod rfc2544;
