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
    let bin = std::env::current_exe()?.with_file_name("linerate");
    if !bin.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p linerate`",
            bin.display()
        );
    }
    let (a, b) = (rig.host(SENDER), rig.host(RECEIVER));
    let secs = run_for.as_secs_f64().to_string();
    let child = spawn_pinned(
        rig,
        SENDER,
        0,
        &[
            &bin.to_string_lossy(),
            "blast",
            "--iface",
            &a.iface,
            "--backend",
            backend,
            "--dst-mac",
            &b.mac,
            "--src-ip",
            &a.ipv4.to_string(),
            "--dst-ip",
            &b.ipv4.to_string(),
            "--size",
            "64",
            "--duration",
            &secs,
        ],
    )?;
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
