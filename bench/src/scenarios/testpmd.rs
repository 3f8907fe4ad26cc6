//! dpdk-testpmd txonly over DPDK's kernel-socket PMDs (net_af_xdp,
//! net_af_packet): the peer that shows what a kernel-bypass framework gets
//! from the same interface without taking the NIC away from the kernel.

use super::tools::spawn_pinned;
use crate::harness::Running;
use anyhow::Result;
use linerate_rig::Rig;
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
    let vdev = match pmd {
        Pmd::AfXdp => format!("net_af_xdp0,iface={},start_queue=0,queue_count=1", a.iface),
        Pmd::AfPacket => format!("net_af_packet0,iface={},qpairs=1,qdisc_bypass=1", a.iface),
    };
    let peer = format!("0,{}", b.mac);
    let (src, dst) = (a.ipv4.to_string(), b.ipv4.to_string());
    let tx_ip = format!("{src},{dst}");
    let secs = run_for.as_secs().max(1).to_string();
    let prefix = prefix();
    let argv = [
        "timeout",
        "-s",
        "INT",
        &secs,
        "dpdk-testpmd",
        "-l",
        "0,1",
        "--main-lcore",
        "1",
        "--file-prefix",
        &prefix,
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--vdev",
        &vdev,
        "--",
        "--forward-mode=txonly",
        "--txpkts=60",
        "--tx-ip",
        &tx_ip,
        "--eth-peer",
        &peer,
        "--nb-cores=1",
        "--total-num-mbufs=8192",
        "--stats-period",
        "1",
    ];
    let child = spawn_pinned(rig, SENDER, 0, &argv)?;
    Ok(Running {
        child,
        helpers: vec![],
        restore: vec![Box::new(move || {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
        })],
    })
}

pub fn af_xdp(rig: &Rig, run_for: Duration) -> Result<Running> {
    start(rig, run_for, Pmd::AfXdp)
}

pub fn af_packet(rig: &Rig, run_for: Duration) -> Result<Running> {
    start(rig, run_for, Pmd::AfPacket)
}
