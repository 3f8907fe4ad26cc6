//! `linerate pscheduler <method>`: each method fed the JSON pScheduler
//! sends (fixtures under tests/fixtures/pscheduler, written from
//! perfsonar/pscheduler's source: see the comment at each use and the
//! fixtures' README), exact where the output is exact; real runs on
//! 127.0.0.1 through `run` (two participants, TCP, UDP, reverse; loopback;
//! rtt through rr) whose merged figures are checked against the -J
//! documents the runs kept in their diags.

#[path = "../support/mod.rs"]
mod support;

mod common;
mod exact;
mod runs;
