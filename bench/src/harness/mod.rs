//! Alternating A/B runs, receiver-side counting, medians and ratios.

mod counts;
mod figures;
mod measure;
mod process;

pub use counts::*;
use figures::*;
use measure::*;
use process::*;
pub use process::{exit_within, stop_child};

use crate::machine;
use anyhow::{Context, Result};
use linerate_lab::Rig;
use serde_json::json;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// How long a sender runs before the measured window opens.
pub const WARMUP: Duration = Duration::from_millis(700);

#[derive(Debug)]
pub struct Config {
    pub runs: usize,
    pub window: Duration,
    pub out_dir: PathBuf,
}

/// A sender started on the rig. The harness samples the receiver while it
/// runs and then stops it.
pub struct Running {
    pub child: Child,
    /// Helpers to stop afterwards (e.g. a peer's server), by PID.
    pub helpers: Vec<Child>,
    /// What to undo after the run (e.g. a sysctl that was raised).
    pub restore: Vec<Box<dyn FnOnce()>>,
    /// A server whose `-J` report counts what reached its socket: the
    /// harness lets the client end by itself, waits for the server's
    /// report and reads it (see [`ServerReport`]).
    pub report: Option<ServerReport>,
    /// Where the client writes its own end report, and how to read its
    /// claimed transactions per second from it: the harness lets the
    /// client end by itself and prints the claim beside the neutral
    /// count (the claim covers the client's whole run, warm-up included).
    pub claim: Option<Claim>,
}

/// One side of a comparison.
pub struct Contender {
    pub name: &'static str,
    /// Starts the sender; it must run for at least `run_for`.
    pub start: fn(&Rig, Duration) -> Result<Running>,
}

/// A comparison on the rig.
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    /// Host that receives; its interface counters are the measurement.
    pub receiver: usize,
    /// CPU that runs the receiver's NAPI thread (threaded NAPI + GRO on its
    /// veth), so that receive work does not land on the sender's CPU.
    pub receive_cpu: Option<usize>,
    /// Whether `setup` arranges the threaded placement's receive path
    /// (socket UDP through NAPI): skipped in the default placement.
    pub napi_setup: bool,
    /// TX and RX queues of the rig's veths (1: single queue).
    pub queues: u16,
    /// What the ratio compares: packets (small frames) or bytes (bulk).
    pub metric: Metric,
    /// Extra rig set-up (offloads, an XDP drop sink) run once after the
    /// rig is up; what it returns is kept alive until the scenario ends.
    pub setup: Option<Setup>,
    pub contenders: Vec<Contender>,
    /// Checks that the scenario's tools exist; the error says what is missing.
    pub check: fn() -> Result<()>,
}

/// Where the receiver's kernel work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    /// The kernel's default path, as a user's host has it: no threaded
    /// NAPI, GRO as the veth comes; a veth receives on the sender's CPU.
    Default,
    /// The scenario's own: threaded NAPI + GRO on the receiving veth, the
    /// NAPI thread pinned to the receiver's CPU.
    Threaded,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Default => "default",
            Placement::Threaded => "threaded",
        }
    }
}

/// Scenario set-up; the value it returns is dropped when the scenario ends.
pub type Setup = fn(&Rig) -> Result<Box<dyn std::any::Any>>;

/// The received figure a scenario ranks by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Packets,
    Bits,
    /// Sender CPU time per million received packets (lower is better; the
    /// ratio is the last contender's cost over this one's).
    CpuPerPacket,
    /// A counter read from the rig before and after each window (the
    /// packets are still counted and printed beside it).
    Count(Count),
}

/// A counter of the rig that neither tool keeps (e.g. the server
/// namespace's TCP PassiveOpens: connections its kernel accepted), read
/// before and after each window; its rate per second is the figure.
#[derive(Debug, Clone, Copy)]
pub struct Count {
    /// What is counted, where, for the report.
    pub what: &'static str,
    /// The unit of its rate ("connections/s").
    pub unit: &'static str,
    /// Reads the running total.
    pub read: fn(&Rig) -> Result<u64>,
}

/// Two counts are the same count if they say so (function pointers do not
/// compare reliably).
impl PartialEq for Count {
    fn eq(&self, other: &Self) -> bool {
        self.what == other.what && self.unit == other.unit
    }
}

impl Eq for Count {}

#[derive(Debug, Clone, serde::Serialize)]
struct Sample {
    contender: &'static str,
    run: usize,
    rx_packets: u64,
    rx_bytes: u64,
    window_s: f64,
    rx_pps: f64,
    /// L2 bits per second (frames without FCS, as the veth counts them).
    rx_bps_l2: f64,
    /// CPU seconds the sender's process tree used in the window.
    sender_cpu_s: f64,
    /// Sender CPU milliseconds per million packets the receiver counted.
    cpu_ms_per_mpkt: f64,
    /// The receiver's NAPI threads per packet received: ns on a CPU, and
    /// ns waiting on a run queue for one (a spinning receiver on the
    /// same CPU keeps it waiting), from /proc/PID/schedstat.
    napi_run_ns_per_pkt: f64,
    napi_wait_ns_per_pkt: f64,
    /// Sender CPU milliseconds per million frames that left the sender:
    /// those the receiver counted and those its sending veth dropped for
    /// the receiver's full ring (what the sending side paid for, whether
    /// or not the receiver kept up).
    sent_cpu_ms_per_mpkt: f64,
    /// CPU seconds of the helper processes (servers, peers' receivers) in
    /// the window, and per million received packets: each side's own
    /// work plus the kernel's receive work of the other side's packets
    /// where a veth runs it in the sender's context.
    helper_cpu_s: f64,
    helper_cpu_ms_per_mpkt: f64,
    /// Drops the receiver's interface counted in the window.
    rx_dropped: u64,
    /// Frames the sending veth dropped because the receiver's ring was
    /// full (its NAPI thread did not keep up), in the window.
    ring_dropped: u64,
    /// UDP datagrams the receiver's kernel dropped for a full socket
    /// buffer (RcvbufErrors), and all UDP receive errors, in the window.
    udp_rcvbuf_errors: u64,
    udp_in_errors: u64,
    /// What the server read from its socket(s), from its own report.
    socket: Option<SocketCount>,
    /// Datagrams per second and payload bits per second at the socket.
    socket_pps: Option<f64>,
    socket_bps: Option<f64>,
    /// The scenario's count (`Metric::Count`) in the window, and per second.
    count: Option<u64>,
    count_per_s: Option<f64>,
    /// The client's own claim, transactions per second over its whole run.
    claimed_per_s: Option<f64>,
}

/// Whether a contender is linerate's (its failures are errors, and ratios
/// are taken against the others).
fn is_ours(name: &str) -> bool {
    name.starts_with("linerate")
}

/// Runs a scenario in one placement (a scenario without a receive CPU of
/// its own has one placement: the default).
pub fn run(mut sc: Scenario, cfg: &Config, placement: Placement) -> Result<()> {
    (sc.check)()?;
    if placement == Placement::Default {
        sc.receive_cpu = None;
        if sc.napi_setup {
            sc.setup = None;
        }
    }
    let machine = machine::describe();
    let rig = Rig::new(&linerate_lab::RigConfig {
        queues: sc.queues,
        ..Default::default()
    })
    .context("bringing the rig up (needs root and iproute2)")?;
    let _setup_guard = match sc.setup {
        Some(setup) => Some(setup(&rig).context("scenario set-up")?),
        None => None,
    };
    let napi = match sc.receive_cpu {
        Some(cpu) => rig
            .pin_receive_path(sc.receiver, cpu)
            .context("moving the receive path to its own CPU (needs ethtool)")?,
        None => Vec::new(),
    };
    print_header(&sc, cfg, &rig, &machine);
    let samples = collect(&rig, &sc, cfg, &napi)?;
    let median_of = |name: &str, f: fn(&Sample) -> f64| contender_median(&samples, name, f);
    let medians: Vec<(&str, f64, f64)> = sc
        .contenders
        .iter()
        .map(|c| {
            (
                c.name,
                median_of(c.name, |s| s.rx_pps),
                median_of(c.name, |s| s.rx_bps_l2),
            )
        })
        .collect();
    println!(
        "\nmedians, counted at the receiver's interface (L2 = frames without FCS); CPU: user + system time of each process tree from /proc (kernel threads such as NAPI not included):"
    );
    for (name, pps, bps) in &medians {
        println!(
            "  {name:<28} {:>10.3} Mpps  {:>10.1} Mbit/s L2  sender CPU {:>7.0} ms per million packets{}",
            pps / 1e6,
            bps / 1e6,
            median_of(name, |s| s.cpu_ms_per_mpkt),
            match median_of(name, |s| s.helper_cpu_s) {
                h if h > 0.0 => format!(
                    ", server processes' CPU {:.0} ms per million",
                    median_of(name, |s| s.helper_cpu_ms_per_mpkt)
                ),
                _ => String::new(),
            }
        );
    }
    if samples.iter().any(|s| s.napi_run_ns_per_pkt > 0.0) {
        println!(
            "receiver's NAPI thread per packet received (/proc schedstat): ns on its CPU, ns waiting on the run queue for it:"
        );
        for (name, _, _) in &medians {
            println!(
                "  {name:<28} ran {:>7.0} ns, waited {:>7.0} ns",
                median_of(name, |s| s.napi_run_ns_per_pkt),
                median_of(name, |s| s.napi_wait_ns_per_pkt)
            );
        }
    }
    let claimed: Vec<(&str, f64)> = sc
        .contenders
        .iter()
        .filter(|c| {
            samples
                .iter()
                .any(|s| s.contender == c.name && s.claimed_per_s.is_some())
        })
        .map(|c| {
            (
                c.name,
                median_of(c.name, |s| s.claimed_per_s.unwrap_or(0.0)),
            )
        })
        .collect();
    if !claimed.is_empty() {
        println!(
            "\nmedians of each client's own claim (transactions/s over its whole run, warm-up included; not the measurement):"
        );
        for (name, tps) in &claimed {
            println!("  {name:<28} {tps:>12.0} transactions/s");
        }
    }
    // A scenario that ranks by a count of the rig: its medians are the
    // figures the ratios are taken of.
    let ranked = match sc.metric {
        Metric::Count(count) => {
            let counted: Vec<(&str, f64, f64)> = medians
                .iter()
                .map(|(name, _, _)| {
                    let rate = median_of(name, |s| s.count_per_s.unwrap_or(0.0));
                    (*name, rate, 0.0)
                })
                .collect();
            println!("\nmedians, {}:", count.what);
            for ((name, rate, _), (_, pps, _)) in counted.iter().zip(&medians) {
                println!(
                    "  {name:<28} {rate:>12.0} {}  ({:.1} packets at the receiver's interface per one)",
                    count.unit,
                    if *rate > 0.0 { pps / rate } else { 0.0 }
                );
            }
            counted
        }
        _ => medians.clone(),
    };
    let mut all_ratios = ratios(&sc, &ranked, &samples, "");
    let socket_medians: Vec<(&str, f64, f64)> = sc
        .contenders
        .iter()
        .filter(|c| {
            samples
                .iter()
                .any(|s| s.contender == c.name && s.socket.is_some())
        })
        .map(|c| {
            (
                c.name,
                median_of(c.name, |s| s.socket_pps.unwrap_or(0.0)),
                median_of(c.name, |s| s.socket_bps.unwrap_or(0.0)),
            )
        })
        .collect();
    if socket_medians.len() >= 2 {
        println!(
            "\nmedians, counted at the server's socket (the server's own report, payload bits):"
        );
        for (name, pps, bps) in &socket_medians {
            if sc.metric == Metric::Packets {
                println!(
                    "  {name:<28} {:>10.3} M datagrams/s {:>10.1} Mbit/s payload",
                    pps / 1e6,
                    bps / 1e6
                );
            } else {
                println!("  {name:<28} {:>10.1} Mbit/s payload", bps / 1e6);
            }
        }
        all_ratios.extend(ratios(&sc, &socket_medians, &samples, "socket "));
    }
    // Where the receiver's ring overflowed, the received rate hides what
    // the sending side paid for: its cost per frame that left it.
    if sc.metric == Metric::Packets && samples.iter().any(|s| s.ring_dropped > 0) {
        all_ratios.extend(sent_cost_ratios(&sc, &samples));
    }
    let doc = json!({
        "scenario": sc.name,
        "about": sc.about,
        "machine": machine,
        "counted_at": "receiver interface rx_packets (veth), or where more the receiver namespace's IP packets (IpExt In*Pkts: a GSO packet as its segments); socket_* from the server's own -J report where it gives one",
        "receive_cpu": sc.receive_cpu,
        "placement": placement.name(),
        "window_s": cfg.window.as_secs_f64(),
        "runs": cfg.runs,
        "samples": samples,
        "median_socket_datagrams_per_s": socket_medians.iter().map(|(n, p, _)| (n.to_string(), json!(p))).collect::<serde_json::Map<_, _>>(),
        "counted": match sc.metric { Metric::Count(c) => json!(c.what), _ => json!(null) },
        "median_count_per_s": ranked.iter().filter(|_| matches!(sc.metric, Metric::Count(_))).map(|(n, r, _)| (n.to_string(), json!(r))).collect::<serde_json::Map<_, _>>(),
        "median_claimed_per_s": claimed.iter().map(|(n, r)| (n.to_string(), json!(r))).collect::<serde_json::Map<_, _>>(),
        "median_rx_pps": medians.iter().map(|(n, p, _)| (n.to_string(), json!(p))).collect::<serde_json::Map<_, _>>(),
        "median_helper_cpu_ms_per_mpkt": sc.contenders.iter().map(|c| (c.name.to_string(), json!(median_of(c.name, |s| s.helper_cpu_ms_per_mpkt)))).collect::<serde_json::Map<_, _>>(),
        "median_napi_wait_ns_per_pkt": sc.contenders.iter().map(|c| (c.name.to_string(), json!(median_of(c.name, |s| s.napi_wait_ns_per_pkt)))).collect::<serde_json::Map<_, _>>(),
        "median_napi_run_ns_per_pkt": sc.contenders.iter().map(|c| (c.name.to_string(), json!(median_of(c.name, |s| s.napi_run_ns_per_pkt)))).collect::<serde_json::Map<_, _>>(),
        "median_sender_cpu_ms_per_mpkt_sent": sc.contenders.iter().map(|c| (c.name.to_string(), json!(median_of(c.name, |s| s.sent_cpu_ms_per_mpkt)))).collect::<serde_json::Map<_, _>>(),
        "median_sender_cpu_ms_per_mpkt": sc.contenders.iter().map(|c| (c.name.to_string(), json!(median_of(c.name, |s| s.cpu_ms_per_mpkt)))).collect::<serde_json::Map<_, _>>(),
        "median_rx_bps_l2": medians.iter().map(|(n, _, b)| (n.to_string(), json!(b))).collect::<serde_json::Map<_, _>>(),
        "ratios": all_ratios,
    });
    std::fs::create_dir_all(&cfg.out_dir)?;
    let stamp = doc["machine"]["date_utc"]
        .as_str()
        .unwrap_or("now")
        .replace(':', "");
    let path = cfg
        .out_dir
        .join(format!("{}-{}-{stamp}.json", sc.name, placement.name()));
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
    println!("raw results: {}", path.display());
    Ok(())
}

/// What is measured, on what, and how.
fn print_header(sc: &Scenario, cfg: &Config, rig: &Rig, machine: &serde_json::Value) {
    println!(
        "scenario {}: {}\nmachine: {} | kernel {} | {} CPUs ({}) | {} | commit {}",
        sc.name,
        sc.about,
        machine["hostname"].as_str().unwrap_or("?"),
        machine["kernel"].as_str().unwrap_or("?"),
        machine["cpus"],
        machine["cpu"].as_str().unwrap_or("?"),
        machine["date_utc"].as_str().unwrap_or("?"),
        machine["commit"].as_str().unwrap_or("?"),
    );
    println!(
        "counting: rx_packets of the receiver's veth ({} in {}), {:.1} s windows after {:.1} s warm-up, {} alternating runs each",
        rig.host(sc.receiver).iface,
        rig.host(sc.receiver).netns,
        cfg.window.as_secs_f64(),
        WARMUP.as_secs_f64(),
        cfg.runs
    );
    if let Metric::Count(count) = sc.metric {
        println!(
            "ranked by: {}, read before and after each window",
            count.what
        );
    }
    match sc.receive_cpu {
        Some(cpu) => {
            println!(
                "receiver (placement: threaded): threaded NAPI + GRO on its veth, NAPI thread pinned to CPU{cpu}; it takes socket UDP only where the scenario turns rx-udp-gro-forwarding on (the iperf ones), else the veth receives on the sender's CPU; TCP and AF_XDP/AF_PACKET frames always on the sender's CPU"
            )
        }
        None => println!(
            "receiver: the kernel's default path (placement: default; no threaded NAPI, GRO as the veth comes: receive work runs on the sending CPU)"
        ),
    }
}

/// Every contender `cfg.runs` times, alternating.
fn collect(rig: &Rig, sc: &Scenario, cfg: &Config, napi: &[i32]) -> Result<Vec<Sample>> {
    let mut samples = Vec::new();
    for run in 0..cfg.runs {
        for c in &sc.contenders {
            let mut m = measure_once(rig, sc, c, cfg, napi)?;
            if let Some(why) = implausible(&m) {
                // The shared VM was paused or its accounting jumped: the
                // window says nothing about the contender. Once more.
                println!("  run {run} {:<28} measured again: {why}", c.name);
                m = measure_once(rig, sc, c, cfg, napi)?;
                if let Some(why) = implausible(&m) {
                    println!("  run {run} {:<28} kept, though: {why}", c.name);
                }
            }
            let (pkts, bytes, secs, cpu) = (m.pkts, m.bytes, m.secs, m.cpu);
            let per_s = |x: u64, k: f64| {
                m.socket
                    .filter(|s| s.seconds > 0.0)
                    .map(|s| x as f64 * k / s.seconds)
            };
            let s = Sample {
                contender: c.name,
                run,
                rx_packets: pkts,
                rx_bytes: bytes,
                window_s: secs,
                rx_pps: pkts as f64 / secs,
                rx_bps_l2: bytes as f64 * 8.0 / secs,
                sender_cpu_s: cpu,
                cpu_ms_per_mpkt: ms_per_million(cpu, pkts),
                sent_cpu_ms_per_mpkt: ms_per_million(cpu, pkts + m.ring_dropped),
                napi_run_ns_per_pkt: m.napi[0] as f64 / pkts.max(1) as f64,
                napi_wait_ns_per_pkt: m.napi[1] as f64 / pkts.max(1) as f64,
                helper_cpu_s: m.helper_cpu,
                helper_cpu_ms_per_mpkt: ms_per_million(m.helper_cpu, pkts),
                rx_dropped: m.rx_dropped,
                ring_dropped: m.ring_dropped,
                udp_rcvbuf_errors: m.rcvbuf_errors,
                udp_in_errors: m.udp_in_errors,
                socket: m.socket,
                socket_pps: per_s(m.socket.map_or(0, |s| s.datagrams), 1.0),
                socket_bps: per_s(m.socket.map_or(0, |s| s.bytes), 8.0),
                count: m.count,
                count_per_s: m.count.map(|n| n as f64 / secs),
                claimed_per_s: m.claimed,
            };
            println!(
                "  run {run} {:<28} received {:>12} pkts in {:.2} s = {:>12.0} pps {:>10.1} Mbit/s L2, sender CPU {:.2} s = {:.0} ms per million",
                c.name,
                s.rx_packets,
                s.window_s,
                s.rx_pps,
                s.rx_bps_l2 / 1e6,
                s.sender_cpu_s,
                s.cpu_ms_per_mpkt
            );
            if let (Metric::Count(count), Some(n), Some(rate)) = (sc.metric, s.count, s.count_per_s)
            {
                println!("        {}: {n} = {rate:.0} {}", count.what, count.unit);
            }
            if let Some(claimed) = s.claimed_per_s {
                println!("        its own claim: {claimed:.0} transactions/s");
            }
            if let (Some(sock), Some(pps), Some(bps)) = (s.socket, s.socket_pps, s.socket_bps) {
                println!(
                    "        at the server's socket (its report, {:.0} s): {:>12.0} datagrams/s {:>10.1} Mbit/s payload, lost {} (sequence gaps); in the window: receive ring full {} (sender veth tx drops), interface drops {}, socket buffer drops {} (UDP RcvbufErrors: one per GRO batch), UDP InErrors {}",
                    sock.seconds,
                    pps,
                    bps / 1e6,
                    sock.lost,
                    s.ring_dropped,
                    s.rx_dropped,
                    s.udp_rcvbuf_errors,
                    s.udp_in_errors
                );
            }
            samples.push(s);
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::{
        SocketCount, median, parse_ip_received, parse_udp_errors, snmp_value, socket_count,
    };
    use serde_json::json;

    #[test]
    fn the_socket_count_is_the_inner_intervals_of_the_servers_report() {
        let iv = |b: u64, s: f64, lost: u64| json!({"sum": {"bytes": b, "seconds": s, "lost_packets": lost}});
        let report = json!({"intervals": [iv(1800, 1.0, 9), iv(18_000, 1.0, 1), iv(36_000, 1.5, 2), iv(180, 0.2, 7)]});
        assert_eq!(
            socket_count(&report, 18),
            Some(SocketCount {
                bytes: 54_000,
                datagrams: 3_000,
                seconds: 2.5,
                lost: 3
            })
        );
        // TCP: no datagrams, no loss field.
        let tcp = json!({"intervals": [{"sum": {"bytes": 1, "seconds": 1.0}}, {"sum": {"bytes": 5, "seconds": 1.0}}, {"sum": {"bytes": 1, "seconds": 1.0}}]});
        assert_eq!(
            socket_count(&tcp, 0).map(|c| (c.bytes, c.datagrams, c.lost)),
            Some((5, 0, 0))
        );
        // Too short to leave out both ends, or not a report.
        let short = json!({"intervals": [iv(1, 1.0, 0), iv(1, 1.0, 0)]});
        assert_eq!(socket_count(&short, 18), None);
        assert_eq!(socket_count(&json!({"error": "x"}), 18), None);
    }

    #[test]
    fn udp_errors_are_read_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 10 0 7 3 5 0\nUdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdpLite: 0 0 0 0 0 0\n";
        assert_eq!(parse_udp_errors(snmp), Some((5, 7)));
        assert_eq!(parse_udp_errors("Ip: 1\n"), None);
        let netstat = "TcpExt: SyncookiesSent\nTcpExt: 0\nIpExt: InNoRoutes InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts\nIpExt: 9 100 1 20 3\n";
        assert_eq!(parse_ip_received(netstat), Some(124));
        assert_eq!(parse_ip_received(snmp), None);
        let tcp = "Tcp: RtoAlgorithm ActiveOpens PassiveOpens\nTcp: 1 12 345\n";
        assert_eq!(snmp_value(tcp, "Tcp", "PassiveOpens"), Some(345));
        assert_eq!(snmp_value(tcp, "Tcp", "InSegs"), None);
        assert_eq!(snmp_value(snmp, "Tcp", "PassiveOpens"), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
