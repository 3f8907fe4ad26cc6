//! The sending side: blast's generator (`blast`), the trace replay
//! (`replay`), and what both share (`send`: configuration, report,
//! errors, pacing margin).

mod blast;
mod filler;
mod flow_table;
mod profile;
mod replay;
mod send;
mod stack_fill;

pub use blast::blast;
pub use profile::{ProfileConfig, blast_profile};
pub use send::{BlastConfig, BlastError, BlastReport, Rate, Replay, StreamSent, Timing, traffic};
