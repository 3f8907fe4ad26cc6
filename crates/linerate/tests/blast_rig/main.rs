//! `linerate blast` and `linerate sink` on the namespace rig: exact counts,
//! ranges that reach every value, IMIX proportions, and bad input refused
//! before any traffic.

#[path = "../support/mod.rs"]
mod support;

mod counts;
mod frames;
mod pcap;
mod rig;
mod sink;
mod socket_backend;
