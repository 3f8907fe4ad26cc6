//! The receiving side: `sink`, pinned receive workers counting every flow
//! with `linerate-traffic`'s accounting, and what they report.

pub mod checks;
mod sink;

pub use sink::{CaptureConfig, FLOW_ROWS_MAX, SinkConfig, SinkError, SinkReport, flow_rows, sink};
