//! linerate vs iperf3, client and server, on the rig: TCP one stream, TCP -P 2,
//! UDP 64-byte frames at -b 0 (one stream and -P 2), UDP 1470-byte
//! datagrams at -b 0. The
//! contenders: linerate, Debian's iperf3 3.12, the newest iperf3 3.21
//! (multi-threaded streams) and, for UDP, iperf3 3.21 with `--gsro` (UDP
//! GSO/GRO); each tool end to end: linerate's client to linerate's server,
//! 3.12's to 3.12's, 3.21's to 3.21's (with `--gsro` the server turns UDP
//! GRO on for the test too).
//! Sender pinned to CPU0; server and receive path on CPU1. Counted twice:
//! at the server's interface (frames) and at its socket (the server's own
//! `-J` report, inner intervals: what the receiving program read).

use super::tools::{linerate_bin, need, spawn_pinned, spawn_pinned_out};
use crate::harness::{Contender, Metric, Running, Scenario, ServerReport};
use anyhow::{Result, bail};
use linerate_lab::Rig;
use std::time::Duration;

const SENDER: usize = 0;
const RECEIVER: usize = 1;

fn run(rig: &Rig, run_for: Duration, program: &str, extra: &[&str]) -> Result<Running> {
    run_with(rig, run_for, "iperf3", program, extra)
}

/// The datagram length of a UDP test's arguments (`-u ... -l N`), 0 for TCP.
fn datagram_len(args: &[&str]) -> usize {
    if !args.contains(&"-u") {
        return 0;
    }
    args.windows(2)
        .find(|w| w[0] == "-l")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(0)
}

/// The newest iperf3 (static binary; `$LINERATE_IPERF3_321`).
fn i321() -> Result<String> {
    linerate_testkit::iperf3_321()
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
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "linerate-bench-server-{}-{}.json",
        std::process::id(),
        RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let out = std::fs::File::create(&path)?;
    // -J: the server's report is the count at its socket.
    let server = spawn_pinned_out(
        rig,
        RECEIVER,
        1,
        &[server_program, "-s", "-1", "-J", "-B", &server_ip],
        out,
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
        report: Some(ServerReport {
            path,
            datagram_len: datagram_len(extra),
        }),
        claim: None,
    })
}

/// A veth passes UDP GSO super-packets through whole, which no physical
/// link does: make the sender's veth segment them (as a NIC without USO
/// would) so the receiver's interface counts real frames. And make the
/// receiver take socket UDP in its own NAPI thread (on CPU1, as the
/// harness pins it), with GRO, as a NIC's receive queue would: without
/// it the veth receives every datagram on the sender's CPU.
fn segment_before_the_wire(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    rig.udp_through_napi(RECEIVER)?;
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
            let bin = bin.to_string_lossy();
            run_with(rig, d, &bin, &bin, $args)
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
    udp64p2_lr,
    udp64p2_i3,
    udp64p2_321,
    udp64p2_gsro,
    &["-u", "-b", "0", "-l", "18", "-P", "2"]
);
case!(
    udp64p8_lr,
    udp64p8_i3,
    udp64p8_321,
    udp64p8_gsro,
    &["-u", "-b", "0", "-l", "18", "-P", "8"]
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
            name: "linerate",
            start: lr,
        },
        Contender {
            name: "iperf3 3.12",
            start: i3,
        },
        Contender {
            name: "iperf3 3.21",
            start: v321,
        },
    ];
    if let Some(g) = gsro {
        contenders.push(Contender {
            name: "iperf3 3.21 --gsro",
            start: g,
        });
    }
    Scenario {
        name,
        about,
        receiver: RECEIVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
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
        "TCP, 1 stream: linerate vs iperf3 3.12 and 3.21, each tool client and server",
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
        "TCP, -P 2: linerate vs iperf3 3.12 and 3.21, each tool client and server",
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
        "UDP -b 0 -l 18 (64-byte frames): linerate vs iperf3 3.12, 3.21 and 3.21 --gsro, each tool client and server",
        Metric::Packets,
        udp64_lr,
        udp64_i3,
        udp64_321,
        Some(udp64_gsro),
    )
}

pub fn udp64_p2() -> Scenario {
    scenario(
        "iperf-udp64-p2",
        "UDP -b 0 -l 18 -P 2 (64-byte frames, two streams): linerate vs iperf3 3.12, 3.21 and 3.21 --gsro, each tool client and server",
        Metric::Packets,
        udp64p2_lr,
        udp64p2_i3,
        udp64p2_321,
        Some(udp64p2_gsro),
    )
}

pub fn udp64_p8() -> Scenario {
    scenario(
        "iperf-udp64-p8",
        "UDP -b 0 -l 18 -P 8 (64-byte frames, eight streams): linerate vs iperf3 3.12, 3.21 and 3.21 --gsro, each tool client and server",
        Metric::Packets,
        udp64p8_lr,
        udp64p8_i3,
        udp64p8_321,
        Some(udp64p8_gsro),
    )
}

pub fn udp1470() -> Scenario {
    scenario(
        "iperf-udp1470",
        "UDP -b 0 -l 1470: linerate vs iperf3 3.12, 3.21 and 3.21 --gsro, each tool client and server",
        Metric::Bits,
        udp1470_lr,
        udp1470_i3,
        udp1470_321,
        Some(udp1470_gsro),
    )
}

#[cfg(test)]
mod tests {
    use super::datagram_len;

    #[test]
    fn the_datagram_length_comes_from_a_udp_tests_arguments() {
        assert_eq!(datagram_len(&["-u", "-b", "0", "-l", "18", "-P", "2"]), 18);
        assert_eq!(datagram_len(&["-u", "-l", "1470"]), 1470);
        assert_eq!(datagram_len(&["-l", "128K"]), 0, "TCP");
        assert_eq!(datagram_len(&["-P", "2"]), 0);
    }
}
