//! `linerate doctor`: what on this host limits network throughput, with the
//! evidence read and the command that fixes it.
//!
//! Every check reads through a [`Source`]: the live host, or a fixture tree
//! that stands in for one in tests. A check that cannot run says why
//! ([`Unchecked`]); it never reports "all good" by default.

pub mod checks;
mod finding;
mod report;
mod source;

pub use finding::{Finding, Outcome, Severity, Unchecked};
pub use report::{Report, run, run_for, summary, test_summary, test_summary_at};
pub use source::{Channels, Fixture, Offloads, Rings, Source, ThisHost};
