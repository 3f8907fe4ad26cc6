//! linerate's reporters: the writers every mode's events reach.
//!
//! The run model and the [`Reporter`](linerate_run::Reporter) contract are
//! in `linerate-run`, which has no output dependencies (the iperf3 protocol
//! crate builds on it); the writers here bring CSV and Prometheus in.

pub mod console;
pub mod files;
pub mod metrics;
pub mod writers;

pub use metrics::{Endpoint, Metrics, MetricsReporter};
pub use writers::{CSV_COLUMNS, Csv, Document, JsonLines, Text};
