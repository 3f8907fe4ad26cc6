//! linerate client vs iperf3 client against the same iperf3 server on the
//! rig: TCP one stream, TCP -P 2, UDP 64-byte frames at -b 0, UDP 1470-byte
//! datagrams at -b 0. Sender pinned to CPU0; server and receive path on CPU1.

use super::tools::{linerate_bin, need, spawn_pinned};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::{Result, bail};
use linerate_rig::Rig;
use std::time::Duration;

const SENDER: usize = 0;
const RECEIVER: usize = 1;

fn run(rig: &Rig, run_for: Duration, program: &str, extra: &[&str]) -> Result<Running> {
    let server_ip = rig.host(RECEIVER).ipv4.to_string();
    let server = spawn_pinned(rig, RECEIVER, 1, &["iperf3", "-s", "-1", "-B", &server_ip])?;
    super::tools::wait_tcp_listen(rig, RECEIVER, 5201)?;
    let secs = run_for.as_secs().max(1).to_string();
    let mut argv = vec![program, "-c", &server_ip, "-t", &secs];
    argv.extend_from_slice(extra);
    let child = spawn_pinned(rig, SENDER, 0, &argv)?;
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
    })
}

/// A veth passes UDP GSO super-packets through whole, which no physical
/// link does: make the sender's veth segment them (as a NIC without USO
/// would) so the receiver's interface counts real frames.
fn segment_before_the_wire(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    let out = rig
        .command(SENDER, "ethtool")
        .args(["-K", &rig.host(SENDER).iface, "tx-udp-segmentation", "off"])
        .output()?;
    if !out.status.success() {
        bail!(
            "ethtool -K tx-udp-segmentation off: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(Box::new(()))
}

macro_rules! case {
    ($fn_lr:ident, $fn_i3:ident, $args:expr) => {
        fn $fn_lr(rig: &Rig, d: Duration) -> Result<Running> {
            let bin = linerate_bin()?;
            run(rig, d, &bin.to_string_lossy(), $args)
        }
        fn $fn_i3(rig: &Rig, d: Duration) -> Result<Running> {
            run(rig, d, "iperf3", $args)
        }
    };
}

case!(tcp1_lr, tcp1_i3, &[]);
case!(tcp2_lr, tcp2_i3, &["-P", "2"]);
case!(udp64_lr, udp64_i3, &["-u", "-b", "0", "-l", "18"]);
case!(udp1470_lr, udp1470_i3, &["-u", "-b", "0", "-l", "1470"]);

fn scenario(
    name: &'static str,
    about: &'static str,
    metric: Metric,
    lr: fn(&Rig, Duration) -> Result<Running>,
    i3: fn(&Rig, Duration) -> Result<Running>,
) -> Scenario {
    Scenario {
        name,
        about,
        receiver: RECEIVER,
        receive_cpu: Some(1),
        metric,
        setup: Some(segment_before_the_wire),
        contenders: vec![
            Contender {
                name: "linerate client",
                start: lr,
            },
            Contender {
                name: "iperf3 client",
                start: i3,
            },
        ],
        check: || {
            need(&["iperf3", "taskset", "ethtool", "ss"])?;
            linerate_bin().map(|_| ())
        },
    }
}

pub fn tcp1() -> Scenario {
    scenario(
        "iperf-tcp1",
        "TCP, 1 stream, to an iperf3 server: linerate client vs iperf3 client",
        Metric::Bits,
        tcp1_lr,
        tcp1_i3,
    )
}

pub fn tcp2() -> Scenario {
    scenario(
        "iperf-tcp2",
        "TCP, -P 2, to an iperf3 server: linerate client vs iperf3 client",
        Metric::Bits,
        tcp2_lr,
        tcp2_i3,
    )
}

pub fn udp64() -> Scenario {
    scenario(
        "iperf-udp64",
        "UDP -b 0 -l 18 (64-byte frames), to an iperf3 server: linerate client vs iperf3 client",
        Metric::Packets,
        udp64_lr,
        udp64_i3,
    )
}

pub fn udp1470() -> Scenario {
    scenario(
        "iperf-udp1470",
        "UDP -b 0 -l 1470, to an iperf3 server: linerate client vs iperf3 client",
        Metric::Bits,
        udp1470_lr,
        udp1470_i3,
    )
}
