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
//! Reporters take the events ([`Reporter`]); the writers (human text, the
//! final JSON document, JSON lines, CSV, metrics) are in `linerate-report`.

pub mod advice;
pub mod drive;
pub mod event;
pub mod outcome;
pub mod report;
pub mod sample;
pub mod stats;

pub use drive::{
    Ended, EngineEnd, Measured, Repetition, Run, drive, drive_engine, drive_planned, repeat,
    without_repeats,
};
pub use event::{
    CountedBy, Counts, End, Event, Gauges, Host, Interval, Mode, Row, RowDoc, Scope, Start, sums,
};
pub use outcome::{Failed, Figure, Outcome, SharedOutcome, Written};
pub use report::{Fanout, Reporter, Shared, SharedReporter};
pub use sample::{Cancel, Sampler, Throttle};
