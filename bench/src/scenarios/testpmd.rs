//! dpdk-testpmd txonly over DPDK's kernel-socket PMDs (net_af_xdp,
//! net_af_packet): the peer that shows what a kernel-bypass framework gets
//! from the same interface without taking the NIC away from the kernel.

use super::tools::spawn_pinned;
use crate::harness::Running;
use anyhow::Result;
use linerate_lab::Rig;
use std::time::Duration;

const SENDER: usize = 0;
const RECEIVER: usize = 1;

/// Which DPDK PMD carries the frames.
#[derive(Debug, Clone, Copy)]
pub enum Pmd {
    AfXdp,
    AfPacket,
}

/// testpmd's run-time files go under /var/run/dpdk/<prefix>; removed after.
fn prefix() -> String {
    format!("linerate-bench-{}", std::process::id())
}

/// 60-byte frames (64 with FCS; 18-byte UDP payload as the others send),
/// 198.18.0.1 -> 198.18.0.2 UDP 9 -> 9 (testpmd's txonly defaults are in
/// RFC 2544's range). One forwarding lcore on CPU0; the main lcore only
/// prints statistics once a second.
pub fn start(rig: &Rig, run_for: Duration, pmd: Pmd) -> Result<Running> {
    let (a, b) = (rig.host(SENDER), rig.host(RECEIVER));
    let peer = format!("0,{}", b.mac);
    let tx_ip = format!("{},{}", a.ipv4, b.ipv4);
    run(
        rig,
        SENDER,
        run_for,
        pmd,
        Lcores {
            forward: 0,
            main: 1,
        },
        &[
            "--forward-mode=txonly",
            "--txpkts=60",
            "--tx-ip",
            &tx_ip,
            "--eth-peer",
            &peer,
        ],
    )
}

/// Which CPU runs testpmd's forwarding lcore and which its main lcore.
#[derive(Debug, Clone, Copy)]
pub struct Lcores {
    pub forward: usize,
    pub main: usize,
}

/// The DPDK port of `pmd` on interface `iface` (one queue pair).
pub fn vdev(pmd: Pmd, iface: &str) -> String {
    match pmd {
        Pmd::AfXdp => format!("net_af_xdp0,iface={iface},start_queue=0,queue_count=1"),
        Pmd::AfPacket => format!("net_af_packet0,iface={iface},qpairs=1,qdisc_bypass=1"),
    }
}

/// testpmd on `host`'s rig interface with one forwarding lcore and these
/// forwarding arguments.
pub fn run(
    rig: &Rig,
    host: usize,
    run_for: Duration,
    pmd: Pmd,
    lcores: Lcores,
    forwarding: &[&str],
) -> Result<Running> {
    let vdev = vdev(pmd, &rig.host(host).iface);
    let secs = run_for.as_secs().max(1).to_string();
    let prefix = prefix();
    let list = format!("{},{}", lcores.forward, lcores.main);
    let main = lcores.main.to_string();
    let mut argv = vec![
        "timeout",
        "-s",
        "INT",
        &secs,
        "dpdk-testpmd",
        "-l",
        &list,
        "--main-lcore",
        &main,
        "--file-prefix",
        &prefix,
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--vdev",
        &vdev,
        "--",
    ];
    argv.extend_from_slice(forwarding);
    argv.extend_from_slice(&[
        "--nb-cores=1",
        "--total-num-mbufs=8192",
        "--stats-period",
        "1",
    ]);
    let child = spawn_pinned(rig, host, lcores.forward, &argv)?;
    Ok(Running {
        child,
        helpers: vec![],
        restore: vec![Box::new(move || {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
        })],
        report: None,
        claim: None,
    })
}

pub fn af_xdp(rig: &Rig, run_for: Duration) -> Result<Running> {
    start(rig, run_for, Pmd::AfXdp)
}

pub fn af_packet(rig: &Rig, run_for: Duration) -> Result<Running> {
    start(rig, run_for, Pmd::AfPacket)
}
