//! linerate's run model, shared by every mode.
//!
//! A run is configured, started, and emits [`Event`]s in order: one
//! [`Event::Start`] (configuration, host facts, the doctor's summary), any
//! number of [`Event::Interval`]s (rows per stream / flow / worker, plus a sum
//! per role, each row saying who counted it), at most one [`Event::Error`],
//! and always one [`Event::End`] that keeps what was measured. A [`Cancel`]
//! handle stops it from outside. Modes publish running totals; a [`Sampler`]
//! turns them into intervals that add up exactly to the totals.
//!
//! Reporters ([`report`]) are written once and fed by the events: human
//! text, the final JSON document, JSON lines and CSV.

pub mod event;
pub mod metrics;
pub mod report;
pub mod sample;
pub mod stats;

pub use event::{
    CountedBy, Counts, End, Event, Gauges, Host, Interval, Mode, Row, Scope, Start, sums,
};
pub use metrics::{Endpoint, Metrics, MetricsReporter};
pub use report::{Csv, Document, Fanout, JsonLines, Reporter, Shared, SharedReporter, Text};
pub use sample::{Cancel, Sampler};
