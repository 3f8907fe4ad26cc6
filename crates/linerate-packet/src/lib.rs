//! The data plane: `linerate blast`, `linerate sink` and `linerate fwd`,
//! the runners between the traffic (`linerate-traffic`: flows, templates,
//! sizes, traces, accounting) and a backend (`linerate-backend`). Sending
//! in `tx` (blast, replay), receiving in `rx` (sink), forwarding in `fwd`;
//! `pair` runs a sender against counting receivers, `rfc2544` the
//! benchmark's trials on that.
//!
//! Backends today: for sending `af_xdp` (UMEM + TX ring, copy or
//! zero-copy), `af_packet` (TPACKET_V3 TX ring, qdisc bypass) and `socket`
//! (UDP sockets with sendmmsg and UDP GSO where the kernel can build the
//! traffic, a raw AF_PACKET socket with sendmmsg where frames are crafted);
//! for receiving `af_xdp` (one socket per RX queue behind an XSKMAP redirect
//! program), `af_packet` (TPACKET_V3 RX ring, per-frame kernel receive
//! stamps) and `socket` (recvmmsg, SO_TIMESTAMPNS). `auto` takes the fastest
//! that opens and says what it chose and why.

mod fwd;
mod outcome;
pub mod pair;
mod pool;
pub mod profile_trials;
pub mod rfc2544;
pub mod rfc2544_campaign;
pub mod rfc2544_outcome;
pub mod rfc2544_progress;
pub mod rfc2544_resume;
pub mod rfc2544_setup;
mod rx;
pub mod sending;
mod settings;
pub mod setup;
mod tx;

pub use fwd::{
    FwdConfig, FwdCounts, FwdError, FwdMode, FwdOutcome, FwdReport, FwdStart, Noisy, apply, fwd,
};
pub use linerate_backend::port::{
    BackendError, BackendKind, Capabilities, Gso, Rx, RxCapabilities, RxFilter, RxHold, Traffic,
    Tx, UDP_SOCKETS_MAX, open_rx, open_rx_workers, open_tx,
};
pub use outcome::{BlastOutcome, HistWritten, SinkOutcome};
pub use rx::checks::{
    SINK_UNTIL_STOPPED_S, SinkStart, sink_measured, sink_ready_line, write_hist, xdp_holder,
};
pub use rx::{CaptureConfig, FLOW_ROWS_MAX, SinkConfig, SinkError, SinkReport, flow_rows, sink};
pub use settings::StreamSettings;
pub use tx::{
    BlastConfig, BlastError, BlastReport, ProfileConfig, Rate, Replay, StreamSent, Timing, blast,
    blast_profile, traffic,
};
