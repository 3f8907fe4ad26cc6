//! linerate blast vs trafgen, 64-byte frames from one sender core, counted
//! at the receiver's interface.

use super::tools::{need, spawn_pinned};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::{Result, bail};
use linerate_lab::Rig;
use std::time::Duration;

pub const NAME: &str = "blast-udp64";

const SENDER: usize = 0;
const RECEIVER: usize = 1;

fn linerate(rig: &Rig, run_for: Duration, backend: &str) -> Result<Running> {
    linerate_at(rig, run_for, backend, None)
}

/// linerate blast at `rate` (e.g. "300k") or as fast as it can.
fn linerate_at(rig: &Rig, run_for: Duration, backend: &str, rate: Option<&str>) -> Result<Running> {
    let bin = super::tools::linerate_bin()?;
    let (a, b) = (rig.host(SENDER), rig.host(RECEIVER));
    let secs = run_for.as_secs_f64().to_string();
    let (bin, src, dst) = (
        bin.to_string_lossy().to_string(),
        a.ipv4.to_string(),
        b.ipv4.to_string(),
    );
    // "socket:udp --gso on": the backend, then extra blast arguments.
    let mut words = backend.split_whitespace();
    let backend = words.next().unwrap_or("auto");
    let mut argv = vec![
        bin.as_str(),
        "blast",
        "--iface",
        &a.iface,
        "--backend",
        backend,
    ];
    argv.extend(words);
    // UDP sockets leave the Ethernet header to the kernel (static neighbour
    // entries on the rig); every other backend writes it.
    if backend != "socket:udp" {
        argv.extend(["--dst-mac", &b.mac]);
    }
    argv.extend([
        "--src-ip",
        &src,
        "--dst-ip",
        &dst,
        "--size",
        "64",
        "--duration",
        &secs,
    ]);
    if let Some(r) = rate {
        argv.push("--pps");
        argv.extend(r.split(' '));
    }
    let child = spawn_pinned(rig, SENDER, 0, &argv)?;
    Ok(Running {
        child,
        helpers: vec![],
        restore: vec![],
        report: None,
        claim: None,
    })
}

/// The cheapest receiver: an XDP program on the receiving veth (counted in
/// its rx_packets first) drops every UDP datagram with more than 4 bytes of
/// payload, so the sender's cost is what is measured; ARP, TCP (iperf3's
/// control connection) and iperf3's 4-byte UDP connect message still reach
/// the stack.
fn xdp_udp_sink(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    xdp_udp_sink_on(rig, SENDER, RECEIVER)
}

/// [`xdp_udp_sink`] on host `receiver`, `sender` being the other host.
pub fn xdp_udp_sink_on(
    rig: &Rig,
    sender: usize,
    receiver: usize,
) -> Result<Box<dyn std::any::Any>> {
    use linerate_backend::xdp;
    // The sender's veth splits UDP GSO batches (else one batch would reach
    // the receiver, and its counter, as one packet).
    let seg = rig
        .command(sender, "ethtool")
        .args(["-K", &rig.host(sender).iface, "tx-udp-segmentation", "off"])
        .status()?;
    if !seg.success() {
        bail!("ethtool -K tx-udp-segmentation off failed");
    }
    let iface = rig.host(receiver).iface.clone();
    let link = rig.run_in(receiver, move || -> std::io::Result<xdp::XdpLink> {
        let idx = linerate_backend::iface::index(&iface)?;
        xdp::attach(&xdp::udp_payload_drop_program(4), idx, "lr_udp_sink")
    })??;
    Ok(Box::new(link))
}

fn linerate_socket(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "socket:raw")
}

fn linerate_udp(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "socket:udp --gso off")
}

fn linerate_udp_gso(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "socket:udp --gso on --burst 64")
}

fn linerate_af_xdp(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "af_xdp")
}

fn linerate_af_packet(rig: &Rig, run_for: Duration) -> Result<Running> {
    linerate(rig, run_for, "af_packet")
}

/// The peer tools and programs both scenarios drive.
fn check_peers() -> Result<()> {
    need(&[
        "trafgen",
        "dpdk-testpmd",
        "iperf3",
        "ss",
        "taskset",
        "ethtool",
        "timeout",
    ])
}

pub fn build() -> Scenario {
    Scenario {
        name: NAME,
        about: "linerate blast (af_xdp copy mode; af_packet TX ring; socket) vs dpdk-testpmd txonly (net_af_xdp, net_af_packet), iperf3 -u and trafgen, 64-byte frames, sender pinned to CPU0, XDP UDP sink on the receiver",
        receiver: RECEIVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: Some(xdp_udp_sink),
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
                name: "linerate blast socket:raw",
                start: linerate_socket,
            },
            Contender {
                name: "linerate blast socket:udp",
                start: linerate_udp,
            },
            Contender {
                name: "linerate socket:udp GSO",
                start: linerate_udp_gso,
            },
            Contender {
                name: "dpdk-testpmd net_af_xdp",
                start: super::testpmd::af_xdp,
            },
            Contender {
                name: "dpdk-testpmd net_af_packet",
                start: super::testpmd::af_packet,
            },
            Contender {
                name: "iperf3 -u -l 18",
                start: super::peer_udp64::iperf3,
            },
            Contender {
                name: "trafgen",
                start: super::peer_udp64::trafgen,
            },
        ],
        check: check_peers,
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
    linerate_at(rig, d, "socket:raw", Some("300k"))
}
fn cpu_udp(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_at(rig, d, "socket:udp --gso off", Some("300k"))
}
fn cpu_udp_gso(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_at(rig, d, "socket:udp --gso on", Some("300k --burst 16"))
}
fn cpu_af_xdp_burst(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_at(rig, d, "af_xdp", Some("300k --burst 16"))
}
fn cpu_trafgen(rig: &Rig, d: Duration) -> Result<Running> {
    super::peer_udp64::trafgen_at(rig, d, Some(CPU_RATE_PPS))
}
fn cpu_iperf3(rig: &Rig, d: Duration) -> Result<Running> {
    // iperf3's -b counts UDP payload bits: 18 bytes per datagram.
    let bps = (CPU_RATE_PPS * 18 * 8).to_string();
    super::peer_udp64::iperf3_at(rig, d, Some(&bps))
}

/// Sender CPU time per million packets that arrived, at a fixed rate below
/// the rig's ceiling (the ceiling hides sender cost).
pub fn build_cpu() -> Scenario {
    Scenario {
        name: "blast-cpu64",
        about: "sender CPU per million received 64-byte frames at 300k pps: linerate blast backends vs trafgen and iperf3 -u at the same rate, and dpdk-testpmd (no rate limit in txonly: it polls a whole core, measured at its own maximum), XDP UDP sink on the receiver",
        receiver: RECEIVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
        metric: Metric::CpuPerPacket,
        setup: Some(xdp_udp_sink),
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
                name: "linerate blast socket:raw",
                start: cpu_socket,
            },
            Contender {
                name: "linerate blast socket:udp",
                start: cpu_udp,
            },
            Contender {
                name: "linerate udp GSO --burst 16",
                start: cpu_udp_gso,
            },
            Contender {
                name: "dpdk-testpmd net_af_xdp (max rate)",
                start: super::testpmd::af_xdp,
            },
            Contender {
                name: "iperf3 -u -l 18",
                start: cpu_iperf3,
            },
            Contender {
                name: "trafgen",
                start: cpu_trafgen,
            },
        ],
        check: check_peers,
    }
}
