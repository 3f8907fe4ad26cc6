//! The scenarios `linerate-bench` knows. Each file builds one or more [`Scenario`]s.

use crate::harness::Scenario;

mod blast_udp64;
mod dpdk;
mod fwd;
mod iperf_client;
mod neper;
mod peer_udp64;
mod rr;
mod rr_tcp;
mod testpmd;
pub mod tools;

/// A scenario's name, one line about it, and how to build it.
pub struct Entry {
    pub name: &'static str,
    pub build: fn() -> Scenario,
}

pub fn all() -> Vec<Entry> {
    vec![
        Entry {
            name: peer_udp64::NAME,
            build: peer_udp64::build,
        },
        Entry {
            name: blast_udp64::NAME,
            build: blast_udp64::build,
        },
        Entry {
            name: "blast-cpu64",
            build: blast_udp64::build_cpu,
        },
        Entry {
            name: "iperf-tcp1",
            build: iperf_client::tcp1,
        },
        Entry {
            name: "iperf-tcp2",
            build: iperf_client::tcp2,
        },
        Entry {
            name: "iperf-udp64",
            build: iperf_client::udp64,
        },
        Entry {
            name: "iperf-udp64-p2",
            build: iperf_client::udp64_p2,
        },
        Entry {
            name: "iperf-udp64-p8",
            build: iperf_client::udp64_p8,
        },
        Entry {
            name: "iperf-udp1470",
            build: iperf_client::udp1470,
        },
        Entry {
            name: "fwd-macswap",
            build: fwd::macswap,
        },
        Entry {
            name: "fwd-macswap-onecore",
            build: fwd::macswap_one_core,
        },
        Entry {
            name: "dpdk-txonly",
            build: dpdk::txonly_scenario,
        },
        Entry {
            name: "dpdk-fwd-macswap",
            build: dpdk::macswap_scenario,
        },
        Entry {
            name: "rr-pingpong",
            build: rr::pingpong,
        },
        Entry {
            name: "rr-load",
            build: rr::load,
        },
        Entry {
            name: "rr-tcp-pingpong",
            build: rr_tcp::pingpong,
        },
        Entry {
            name: "rr-tcp-neper",
            build: neper::rr,
        },
        Entry {
            name: "rr-tcp-neper-100",
            build: neper::rr100,
        },
        Entry {
            name: "rr-tcp-crr",
            build: neper::crr,
        },
        Entry {
            name: "rr-tcp-crr-16",
            build: neper::crr16,
        },
        Entry {
            name: "rr-recipe",
            build: rr::recipe_scenario,
        },
        Entry {
            name: "rr-recipe-rss",
            build: rr::recipe_rss_scenario,
        },
    ]
}

/// Named groups of scenarios.
pub fn group(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "iperf" => Some(&[
            "iperf-tcp1",
            "iperf-tcp2",
            "iperf-udp64",
            "iperf-udp64-p2",
            "iperf-udp64-p8",
            "iperf-udp1470",
        ]),
        "rr" => Some(&["rr-pingpong", "rr-load"]),
        "neper" => Some(&[
            "rr-tcp-neper",
            "rr-tcp-neper-100",
            "rr-tcp-crr",
            "rr-tcp-crr-16",
        ]),
        "fwd" => Some(&["fwd-macswap", "fwd-macswap-onecore"]),
        "dpdk" => Some(&["dpdk-txonly", "dpdk-fwd-macswap"]),
        _ => None,
    }
}
