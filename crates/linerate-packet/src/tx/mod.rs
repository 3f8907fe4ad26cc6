//! The sending side: blast's generator (`blast`), the trace replay
//! (`replay`), and what both share (`send`: configuration, report,
//! errors, pacing margin).

mod blast;
mod replay;
mod send;

pub use blast::blast;
pub use send::{BlastConfig, BlastError, BlastReport, Rate, Replay, Timing, traffic};
