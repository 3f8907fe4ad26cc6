//! linerate blast vs trafgen, 64-byte frames from one sender core, counted
//! at the receiver's interface.

use super::tools::{need, spawn_pinned};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::{Result, bail};
use linerate_rig::Rig;
use std::time::Duration;

pub const NAME: &str = "blast-udp64";

const SENDER: usize = 0;
const RECEIVER: usize = 1;

fn linerate(rig: &Rig, run_for: Duration, backend: &str) -> Result<Running> {
    linerate_at(rig, run_for, backend, None)
}

/// linerate blast at `rate` (e.g. "300k") or as fast as it can.
fn linerate_at(rig: &Rig, run_for: Duration, backend: &str, rate: Option<&str>) -> Result<Running> {
    let bin = std::env::current_exe()?.with_file_name("linerate");
    if !bin.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p linerate`",
            bin.display()
        );
    }
    let (a, b) = (rig.host(SENDER), rig.host(RECEIVER));
    let secs = run_for.as_secs_f64().to_string();
    let (bin, src, dst) = (
        bin.to_string_lossy().to_string(),
        a.ipv4.to_string(),
        b.ipv4.to_string(),
    );
    let mut argv = vec![
        bin.as_str(),
        "blast",
        "--iface",
        &a.iface,
        "--backend",
        backend,
        "--dst-mac",
        &b.mac,
        "--src-ip",
        &src,
        "--dst-ip",
        &dst,
        "--size",
        "64",
        "--duration",
        &secs,
    ];
    if let Some(r) = rate {
        argv.push("--rate");
        argv.extend(r.split(' '));
    }
    let child = spawn_pinned(rig, SENDER, 0, &argv)?;
    Ok(Running {
        child,
        helpers: vec![],
        restore: vec![],
    })
}

/// The cheapest receiver: an XDP program that drops every frame on the
/// receiving veth (counted in its rx_packets first), so the sender's cost is
/// what is measured.
fn xdp_drop_sink(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    use linerate_backend::xdp;
    let iface = rig.host(RECEIVER).iface.clone();
    let link = rig.run_in(RECEIVER, move || -> std::io::Result<xdp::XdpLink> {
        let idx = linerate_backend::raw::ifindex(&iface)?;
        xdp::attach(&xdp::verdict_program(xdp::XDP_DROP), idx, "lr_drop_sink")
    })??;
    Ok(Box::new(link))
}

fn linerate_socket(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "socket")
}

fn linerate_af_xdp(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "af_xdp")
}

fn linerate_af_packet(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "af_packet")
}

pub fn build() -> Scenario {
    Scenario {
        name: NAME,
        about: "linerate blast (af_xdp copy mode; af_packet TX ring; socket: raw AF_PACKET + sendmmsg) vs trafgen, 64-byte frames, sender pinned to CPU0, XDP drop sink on the receiver",
        receiver: RECEIVER,
        receive_cpu: Some(1),
        metric: Metric::Packets,
        setup: Some(xdp_drop_sink),
        contenders: vec![
            Contender {
                name: "linerate blast af_xdp",
                start: linerate_af_xdp,
            },
            Contender {
                name: "linerate blast af_packet",
                start: linerate_af_packet,
            },
            Contender {
                name: "linerate blast socket",
                start: linerate_socket,
            },
            Contender {
                name: "trafgen",
                start: super::peer_udp64::trafgen,
            },
        ],
        check: || need(&["trafgen", "taskset", "ethtool", "timeout"]),
    }
}

/// The rate for the CPU-cost scenario: below what the rig's receiver can take.
const CPU_RATE_PPS: u64 = 300_000;

fn cpu_af_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_at(rig, d, "af_xdp", Some("300k"))
}
fn cpu_af_packet(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_at(rig, d, "af_packet", Some("300k"))
}
fn cpu_socket(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_at(rig, d, "socket", Some("300k"))
}
fn cpu_af_xdp_burst(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_at(rig, d, "af_xdp", Some("300k --burst 16"))
}
fn cpu_trafgen(rig: &Rig, d: Duration) -> Result<Running> {
    super::peer_udp64::trafgen_at(rig, d, Some(CPU_RATE_PPS))
}

/// Sender CPU time per million packets that arrived, at a fixed rate below
/// the rig's ceiling (the ceiling hides sender cost).
pub fn build_cpu() -> Scenario {
    Scenario {
        name: "blast-cpu64",
        about: "sender CPU per million received 64-byte frames at 300k pps: linerate blast backends vs trafgen (XDP drop sink; iperf3 cannot run its control connection through it)",
        receiver: RECEIVER,
        receive_cpu: Some(1),
        metric: Metric::CpuPerPacket,
        setup: Some(xdp_drop_sink),
        contenders: vec![
            Contender {
                name: "linerate blast af_xdp",
                start: cpu_af_xdp,
            },
            Contender {
                name: "linerate af_xdp --burst 16",
                start: cpu_af_xdp_burst,
            },
            Contender {
                name: "linerate blast af_packet",
                start: cpu_af_packet,
            },
            Contender {
                name: "linerate blast socket",
                start: cpu_socket,
            },
            Contender {
                name: "trafgen",
                start: cpu_trafgen,
            },
        ],
        check: || need(&["trafgen", "taskset", "ethtool", "timeout"]),
    }
}
