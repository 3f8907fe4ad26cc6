//! The scenarios `linerate-bench` knows. Each file builds one [`Scenario`].

use crate::harness::Scenario;

mod peer_udp64;
pub mod tools;

/// A scenario's name, one line about it, and how to build it.
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    pub build: fn() -> Scenario,
}

pub fn all() -> Vec<Entry> {
    vec![Entry {
        name: peer_udp64::NAME,
        about: peer_udp64::ABOUT,
        build: peer_udp64::build,
    }]
}
