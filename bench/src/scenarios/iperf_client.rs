//! linerate client vs iperf3 clients on the rig: TCP one stream, TCP -P 2,
//! UDP 64-byte frames at -b 0, UDP 1470-byte datagrams at -b 0. The
//! contenders: linerate, Debian's iperf3 3.12, the newest iperf3 3.21
//! (multi-threaded streams) and, for UDP, iperf3 3.21 with `--gsro` (UDP
//! GSO/GRO); each 3.21 client talks to a 3.21 server, the others to 3.12's.
//! Sender pinned to CPU0; server and receive path on CPU1.

use super::tools::{linerate_bin, need, spawn_pinned};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::{Result, bail};
use linerate_rig::Rig;
use std::time::Duration;

const SENDER: usize = 0;
const RECEIVER: usize = 1;

fn run(rig: &Rig, run_for: Duration, program: &str, extra: &[&str]) -> Result<Running> {
    run_with(rig, run_for, "iperf3", program, extra)
}

/// The newest iperf3 (static binary; `$LINERATE_IPERF3_321`).
fn i321() -> Result<String> {
    linerate_rig::iperf3_321()
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(anyhow::Error::msg)
}

fn run_with(
    rig: &Rig,
    run_for: Duration,
    server_program: &str,
    program: &str,
    extra: &[&str],
) -> Result<Running> {
    let server_ip = rig.host(RECEIVER).ipv4.to_string();
    let server = spawn_pinned(
        rig,
        RECEIVER,
        1,
        &[server_program, "-s", "-1", "-B", &server_ip],
    )?;
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
    ($fn_lr:ident, $fn_i3:ident, $fn_321:ident, $fn_gsro:ident, $args:expr) => {
        fn $fn_lr(rig: &Rig, d: Duration) -> Result<Running> {
            let bin = linerate_bin()?;
            run(rig, d, &bin.to_string_lossy(), $args)
        }
        fn $fn_i3(rig: &Rig, d: Duration) -> Result<Running> {
            run(rig, d, "iperf3", $args)
        }
        fn $fn_321(rig: &Rig, d: Duration) -> Result<Running> {
            let p = i321()?;
            run_with(rig, d, &p, &p, $args)
        }
        fn $fn_gsro(rig: &Rig, d: Duration) -> Result<Running> {
            let p = i321()?;
            let mut a: Vec<&str> = $args.to_vec();
            a.push("--gsro");
            run_with(rig, d, &p, &p, &a)
        }
    };
}

case!(tcp1_lr, tcp1_i3, tcp1_321, _tcp1_gsro, &[]);
case!(tcp2_lr, tcp2_i3, tcp2_321, _tcp2_gsro, &["-P", "2"]);
case!(
    udp64_lr,
    udp64_i3,
    udp64_321,
    udp64_gsro,
    &["-u", "-b", "0", "-l", "18"]
);
case!(
    udp1470_lr,
    udp1470_i3,
    udp1470_321,
    udp1470_gsro,
    &["-u", "-b", "0", "-l", "1470"]
);

type Start = fn(&Rig, Duration) -> Result<Running>;

fn scenario(
    name: &'static str,
    about: &'static str,
    metric: Metric,
    lr: Start,
    i3: Start,
    v321: Start,
    gsro: Option<Start>,
) -> Scenario {
    let mut contenders = vec![
        Contender {
            name: "linerate client",
            start: lr,
        },
        Contender {
            name: "iperf3 3.12 client",
            start: i3,
        },
        Contender {
            name: "iperf3 3.21 client",
            start: v321,
        },
    ];
    if let Some(g) = gsro {
        contenders.push(Contender {
            name: "iperf3 3.21 --gsro client",
            start: g,
        });
    }
    Scenario {
        name,
        about,
        receiver: RECEIVER,
        receive_cpu: Some(1),
        metric,
        setup: Some(segment_before_the_wire),
        contenders,
        check: || {
            need(&["iperf3", "taskset", "ethtool", "ss"])?;
            i321()?;
            linerate_bin().map(|_| ())
        },
    }
}

pub fn tcp1() -> Scenario {
    scenario(
        "iperf-tcp1",
        "TCP, 1 stream: linerate client vs iperf3 3.12 and 3.21 clients",
        Metric::Bits,
        tcp1_lr,
        tcp1_i3,
        tcp1_321,
        None,
    )
}

pub fn tcp2() -> Scenario {
    scenario(
        "iperf-tcp2",
        "TCP, -P 2: linerate client vs iperf3 3.12 and 3.21 clients",
        Metric::Bits,
        tcp2_lr,
        tcp2_i3,
        tcp2_321,
        None,
    )
}

pub fn udp64() -> Scenario {
    scenario(
        "iperf-udp64",
        "UDP -b 0 -l 18 (64-byte frames): linerate client vs iperf3 3.12, 3.21 and 3.21 --gsro clients",
        Metric::Packets,
        udp64_lr,
        udp64_i3,
        udp64_321,
        Some(udp64_gsro),
    )
}

pub fn udp1470() -> Scenario {
    scenario(
        "iperf-udp1470",
        "UDP -b 0 -l 1470: linerate client vs iperf3 3.12, 3.21 and 3.21 --gsro clients",
        Metric::Bits,
        udp1470_lr,
        udp1470_i3,
        udp1470_321,
        Some(udp1470_gsro),
    )
}
