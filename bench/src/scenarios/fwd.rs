//! Forwarding on the rig: linerate blast on host 0 (CPU0, af_xdp, as fast
//! as it goes) sends 64-byte frames to host 1, where the forwarder under
//! test (pinned to CPU1) swaps the MACs and sends them back; what returns
//! is counted at host 0's interface, where an XDP program drops it. The
//! figure is the forwarder's rate; the generator is the same for all.
//!
//! Contenders: linerate fwd macswap over af_packet, socket and af_xdp (one
//! socket per queue, frames sent back in place), and dpdk-testpmd
//! --forward-mode=macswap over net_af_packet and net_af_xdp.

use super::testpmd::{Lcores, Pmd};
use super::tools::{linerate_bin, need, spawn_pinned};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::Result;
use linerate_lab::Rig;
use std::time::Duration;

const GEN: usize = 0;
const FWD: usize = 1;

/// The load: linerate blast af_xdp, 64-byte frames, host 0 -> host 1.
pub(super) fn generator(rig: &Rig, run_for: Duration) -> Result<std::process::Child> {
    let bin = linerate_bin()?.to_string_lossy().to_string();
    let (a, b) = (rig.host(GEN), rig.host(FWD));
    let secs = (run_for.as_secs_f64() + 1.0).to_string();
    let (src, dst) = (a.ipv4.to_string(), b.ipv4.to_string());
    spawn_pinned(
        rig,
        GEN,
        0,
        &[
            &bin,
            "blast",
            "--iface",
            &a.iface,
            "--backend",
            "af_xdp",
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
        ],
    )
}

/// Starts the forwarder, then the load behind it.
fn with_load(rig: &Rig, run_for: Duration, mut fwd: Running) -> Result<Running> {
    std::thread::sleep(Duration::from_millis(300));
    fwd.helpers.push(generator(rig, run_for)?);
    Ok(fwd)
}

fn linerate(rig: &Rig, run_for: Duration, backend: &str) -> Result<Running> {
    let bin = linerate_bin()?.to_string_lossy().to_string();
    let secs = (run_for.as_secs_f64() + 1.0).to_string();
    let iface = rig.host(FWD).iface.clone();
    let child = spawn_pinned(
        rig,
        FWD,
        1,
        &[
            &bin,
            "fwd",
            "--iface",
            &iface,
            "--backend",
            backend,
            "--mode",
            "macswap",
            "--cores",
            "1",
            "--duration",
            &secs,
        ],
    )?;
    let fwd = Running {
        child,
        helpers: vec![],
        restore: vec![],
        report: None,
        claim: None,
    };
    with_load(rig, run_for, fwd)
}

fn testpmd(rig: &Rig, run_for: Duration, pmd: Pmd) -> Result<Running> {
    let secs = run_for + Duration::from_secs(1);
    let fwd = super::testpmd::run(
        rig,
        FWD,
        secs,
        pmd,
        Lcores {
            forward: 1,
            main: 0,
        },
        &["--forward-mode=macswap"],
    )?;
    with_load(rig, run_for, fwd)
}

fn lr_af_packet(rig: &Rig, d: Duration) -> Result<Running> {
    linerate(rig, d, "af_packet")
}
fn lr_socket(rig: &Rig, d: Duration) -> Result<Running> {
    linerate(rig, d, "socket")
}
fn lr_af_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    linerate(rig, d, "af_xdp")
}
fn tp_af_packet(rig: &Rig, d: Duration) -> Result<Running> {
    testpmd(rig, d, Pmd::AfPacket)
}
fn tp_af_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    testpmd(rig, d, Pmd::AfXdp)
}

/// What comes back to host 0 is dropped by XDP as it is counted. Host 1's
/// receive work runs where the kernel puts it: on the generator's CPU0 (a
/// veth receives in its sender's context), so the forwarder's CPU does only
/// the forwarder's own work, as with a NIC whose interrupts go to another core.
pub(super) fn set_up(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    super::blast_udp64::xdp_udp_sink_on(rig, FWD, GEN)
}

/// As [`set_up`], but host 1's receive path runs on the forwarder's CPU1
/// (threaded NAPI pinned there): one core for the whole forwarding host.
fn set_up_one_core(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    rig.pin_receive_path(FWD, 1)?;
    set_up(rig)
}

pub fn macswap() -> Scenario {
    scenario(
        "fwd-macswap",
        "64-byte frames from linerate blast af_xdp (host 0, CPU0) reflected by the forwarder on host 1 (CPU1; host 1's receive work on CPU0): linerate fwd macswap vs dpdk-testpmd --forward-mode=macswap (frames back at host 0's veth per second)",
        set_up,
    )
}

pub fn macswap_one_core() -> Scenario {
    scenario(
        "fwd-macswap-onecore",
        "as fwd-macswap, but host 1's receive path (threaded NAPI) shares CPU1 with the forwarder",
        set_up_one_core,
    )
}

fn scenario(name: &'static str, about: &'static str, setup: crate::harness::Setup) -> Scenario {
    Scenario {
        name,
        about,
        receiver: GEN,
        receive_cpu: None,
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: Some(setup),
        contenders: vec![
            Contender {
                name: "linerate fwd af_packet",
                start: lr_af_packet,
            },
            Contender {
                name: "linerate fwd af_xdp (in place)",
                start: lr_af_xdp,
            },
            Contender {
                name: "linerate fwd socket",
                start: lr_socket,
            },
            Contender {
                name: "dpdk-testpmd net_af_packet",
                start: tp_af_packet,
            },
            Contender {
                name: "dpdk-testpmd net_af_xdp",
                start: tp_af_xdp,
            },
        ],
        check: || {
            need(&["dpdk-testpmd", "taskset", "ethtool", "timeout"])?;
            linerate_bin().map(|_| ())
        },
    }
}
