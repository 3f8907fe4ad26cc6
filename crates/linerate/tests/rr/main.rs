//! `linerate rr` end to end: across the rig's namespaces (IPv4 and IPv6,
//! both sides' counts and their doctor summaries) and on loopback (bad
//! input on the command line, a server that is not there).

#[path = "../support/mod.rs"]
mod support;

mod loopback;
mod tcp;
mod udp_rig;
