//! linerate's DPDK backend (a `linerate` built with `--features dpdk`)
//! against dpdk-testpmd on the same DPDK port of the rig's veth
//! (net_af_packet, net_af_xdp; no hugepages, no PCI), side by side:
//!
//! - `dpdk-txonly`: linerate blast --backend dpdk vs testpmd txonly,
//!   64-byte frames from CPU0, counted at the receiver's veth, where an XDP
//!   program drops them (as blast-udp64);
//! - `dpdk-fwd-macswap`: linerate fwd --backend dpdk --mode macswap vs
//!   testpmd macswap on host 1 (CPU1), loaded by linerate blast af_xdp
//!   from host 0, what comes back counted at host 0's veth (as
//!   fwd-macswap); in the threaded placement host 0's veth receives what
//!   comes back in a NAPI thread on CPU0, off the forwarder's CPU.
//!
//! A DPDK process takes a second or more to set up its EAL (it loads every
//! driver of the plugin directory): each contender is handed to the
//! harness once its frames flow, then the warm-up and window follow.

use super::testpmd::{Lcores, Pmd, vdev};
use super::tools::{linerate_bin, need, spawn_pinned};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::{Result, bail};
use linerate_lab::Rig;
use std::time::{Duration, Instant};

const SENDER: usize = 0;
const RECEIVER: usize = 1;
/// fwd-macswap's hosts: the load's and the forwarder's.
const GEN: usize = 0;
const FWD: usize = 1;

/// Longest a DPDK process may take to start sending.
const STARTUP: Duration = Duration::from_secs(15);

/// linerate's EAL: one lcore on `cpu`, no hugepages, PCI or shared files,
/// 256 MB as testpmd's.
fn eal(cpu: usize, vdev: &str) -> String {
    format!("-l {cpu} --no-huge -m 256 --no-pci --no-shconf --vdev {vdev}")
}

/// Returns `running` once host `host` sends frames steadily (its veth's
/// tx_packets grows by 1000 in 100 ms); stops it (its own child, by PID)
/// if that does not happen within [`STARTUP`].
fn when_flowing(rig: &Rig, host: usize, mut running: Running) -> Result<Running> {
    let end = Instant::now() + STARTUP;
    let mut last = rig.stats(host)?.tx_packets;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        if let Ok(Some(status)) = running.child.try_wait() {
            bail!("it exited before sending ({status})");
        }
        let now = rig.stats(host)?.tx_packets;
        if now >= last + 1000 {
            return Ok(running);
        }
        last = now;
    }
    for c in std::iter::once(&mut running.child).chain(&mut running.helpers) {
        let _ = c.kill();
        let _ = c.wait();
    }
    for undo in running.restore.drain(..) {
        undo();
    }
    bail!("no steady frames from host {host} within {STARTUP:?}")
}

fn started(child: std::process::Child) -> Running {
    Running {
        child,
        helpers: vec![],
        restore: vec![],
        report: None,
        claim: None,
    }
}

fn blast(rig: &Rig, run_for: Duration, pmd: Pmd) -> Result<Running> {
    let bin = linerate_bin()?.to_string_lossy().to_string();
    let (a, b) = (rig.host(SENDER), rig.host(RECEIVER));
    let vdev = vdev(pmd, &a.iface);
    let port = vdev.split(',').next().unwrap_or_default().to_string();
    let secs = (run_for + STARTUP).as_secs_f64().to_string();
    let (src, dst, eal) = (a.ipv4.to_string(), b.ipv4.to_string(), eal(0, &vdev));
    let child = spawn_pinned(
        rig,
        SENDER,
        0,
        &[
            &bin,
            "blast",
            "--backend",
            "dpdk",
            "--eal",
            &eal,
            "--iface",
            &port,
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
    )?;
    when_flowing(rig, SENDER, started(child))
}

fn txonly(rig: &Rig, run_for: Duration, pmd: Pmd) -> Result<Running> {
    let r = super::testpmd::start(rig, run_for + STARTUP, pmd)?;
    when_flowing(rig, SENDER, r)
}

fn fwd(rig: &Rig, run_for: Duration, pmd: Pmd) -> Result<Running> {
    let bin = linerate_bin()?.to_string_lossy().to_string();
    let vdev = vdev(pmd, &rig.host(FWD).iface);
    let port = vdev.split(',').next().unwrap_or_default().to_string();
    let secs = (run_for + STARTUP).as_secs_f64().to_string();
    let eal = eal(1, &vdev);
    let child = spawn_pinned(
        rig,
        FWD,
        1,
        &[
            &bin,
            "fwd",
            "--backend",
            "dpdk",
            "--eal",
            &eal,
            "--iface",
            &port,
            "--mode",
            "macswap",
            "--cores",
            "1",
            "--duration",
            &secs,
        ],
    )?;
    let mut r = started(child);
    r.helpers
        .push(super::fwd::generator(rig, run_for + STARTUP)?);
    when_flowing(rig, FWD, r)
}

fn macswap_testpmd(rig: &Rig, run_for: Duration, pmd: Pmd) -> Result<Running> {
    let mut r = super::testpmd::run(
        rig,
        FWD,
        run_for + STARTUP,
        pmd,
        Lcores {
            forward: 1,
            main: 0,
        },
        &["--forward-mode=macswap"],
    )?;
    r.helpers
        .push(super::fwd::generator(rig, run_for + STARTUP)?);
    when_flowing(rig, FWD, r)
}

fn lr_tx_packet(rig: &Rig, d: Duration) -> Result<Running> {
    blast(rig, d, Pmd::AfPacket)
}
fn tp_tx_packet(rig: &Rig, d: Duration) -> Result<Running> {
    txonly(rig, d, Pmd::AfPacket)
}
fn lr_tx_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    blast(rig, d, Pmd::AfXdp)
}
fn tp_tx_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    txonly(rig, d, Pmd::AfXdp)
}
fn lr_fwd_packet(rig: &Rig, d: Duration) -> Result<Running> {
    fwd(rig, d, Pmd::AfPacket)
}
fn tp_fwd_packet(rig: &Rig, d: Duration) -> Result<Running> {
    macswap_testpmd(rig, d, Pmd::AfPacket)
}
fn lr_fwd_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    fwd(rig, d, Pmd::AfXdp)
}
fn tp_fwd_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    macswap_testpmd(rig, d, Pmd::AfXdp)
}

/// The tools, and a linerate built with the dpdk feature.
fn check() -> Result<()> {
    need(&["dpdk-testpmd", "taskset", "ethtool", "timeout"])?;
    let bin = linerate_bin()?;
    let out = std::process::Command::new(&bin)
        .args(["blast", "--backend", "dpdk", "--iface", "lr-bench-none"])
        .args(["--eal", "--no-huge -m 64 --no-pci --no-shconf -l 0"])
        .args(["--src-ip", "198.18.0.1", "--dst-ip", "198.18.0.2"])
        .args(["--dst-mac", "02:00:00:00:00:02"])
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("without the dpdk feature") {
        bail!(
            "{} was built without the dpdk feature: cargo build --release -p linerate --features dpdk",
            bin.display()
        );
    }
    Ok(())
}

pub fn txonly_scenario() -> Scenario {
    Scenario {
        name: "dpdk-txonly",
        about: "linerate blast --backend dpdk vs dpdk-testpmd txonly on the same DPDK port (net_af_packet, net_af_xdp on the sender's veth; --no-huge), 64-byte frames from CPU0, XDP UDP sink on the receiver",
        receiver: RECEIVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: Some(|rig| super::blast_udp64::xdp_udp_sink_on(rig, SENDER, RECEIVER)),
        contenders: vec![
            Contender {
                name: "linerate dpdk net_af_packet",
                start: lr_tx_packet,
            },
            Contender {
                name: "testpmd txonly net_af_packet",
                start: tp_tx_packet,
            },
            Contender {
                name: "linerate dpdk net_af_xdp",
                start: lr_tx_xdp,
            },
            Contender {
                name: "testpmd txonly net_af_xdp",
                start: tp_tx_xdp,
            },
        ],
        check,
    }
}

pub fn macswap_scenario() -> Scenario {
    Scenario {
        name: "dpdk-fwd-macswap",
        about: "linerate fwd --backend dpdk --mode macswap vs dpdk-testpmd macswap on the same DPDK port (net_af_packet, net_af_xdp on host 1's veth; --no-huge), CPU1, loaded by linerate blast af_xdp from host 0 (CPU0), frames back at host 0's veth per second; threaded placement: host 0's veth receives the frames back in a NAPI thread on CPU0, not in the forwarder's transmit on CPU1",
        receiver: GEN,
        // The forwarder sends the frames counted, from CPU1: in the
        // threaded placement their receive leaves its CPU for the
        // generator's (CPU0), as txonly's leaves the sender's.
        receive_cpu: Some(0),
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: Some(super::fwd::set_up),
        contenders: vec![
            Contender {
                name: "linerate fwd dpdk net_af_packet",
                start: lr_fwd_packet,
            },
            Contender {
                name: "testpmd macswap net_af_packet",
                start: tp_fwd_packet,
            },
            Contender {
                name: "linerate fwd dpdk net_af_xdp",
                start: lr_fwd_xdp,
            },
            Contender {
                name: "testpmd macswap net_af_xdp",
                start: tp_fwd_xdp,
            },
        ],
        check,
    }
}
