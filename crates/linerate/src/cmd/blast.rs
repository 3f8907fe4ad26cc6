//! `linerate blast` and `linerate sink`.

use super::out::{Ended, OutputArgs, drive};
use super::stop_flag;
use crate::output::Console;
use anyhow::Result;
use clap::Args;
use linerate_packet::sending::{Sending, Stated};
use linerate_packet::setup::{self, BlastFlags};
use linerate_packet::sink_ready_line;
use linerate_packet::{BackendKind, CaptureConfig, SINK_UNTIL_STOPPED_S, SinkConfig, SinkStart};
use linerate_run::Mode;

/// Send crafted UDP frames (with linerate's probe) as fast as asked.
#[derive(Debug, Args)]
pub struct BlastArgs {
    /// Interface to send on.
    #[arg(long)]
    iface: String,
    /// Destination IP or range (198.18.0.2-198.18.0.9, or …@STEP for every
    /// STEP-th); with --pcap, the address every replayed frame gets.
    #[arg(long, required_unless_present_any = ["pcap", "profile"])]
    dst_ip: Option<String>,
    /// Source IP or range [default: the interface's address].
    #[arg(long)]
    src_ip: Option<String>,
    /// Destination MAC or range [default: the next hop's, from the kernel's
    /// neighbour table; broadcast only when given].
    #[arg(long)]
    dst_mac: Option<String>,
    /// Source MAC or range [default: the interface's].
    #[arg(long)]
    src_mac: Option<String>,
    /// Source UDP port or range (1000-1999, 1000-1999@10).
    #[arg(long, default_value = "9")]
    src_port: String,
    /// Destination UDP port or range.
    #[arg(long, default_value = "9")]
    dst_port: String,
    /// Frame size on the wire, FCS included (64..=9216; default: the
    /// smallest that carries the headers and the probe, 64, or 84 over
    /// IPv6). Not iperf3's -l, a payload length.
    #[arg(long, group = "sz")]
    size: Option<u16>,
    /// iperf3's -l (a payload length): refused, naming --size.
    #[arg(short = 'l', long = "length", hide = true, value_parser = not_a_frame_size)]
    #[allow(dead_code)]
    length: Option<u16>,
    /// Frame sizes sent in turn (64,594,1518).
    #[arg(long, group = "sz", value_delimiter = ',')]
    sizes: Option<Vec<u16>>,
    /// IMIX: "simple" (7:4:1 of 64/594/1518) or SIZE:WEIGHT,...
    #[arg(long, group = "sz", num_args = 0..=1, default_missing_value = "simple")]
    imix: Option<String>,
    /// Replay this pcap/pcapng file instead of generating frames (MACs and
    /// IPs rewritten when --dst-mac/--src-mac/--src-ip/--dst-ip are given).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["size", "sizes", "imix", "src_port", "dst_port", "vlan"])]
    pcap: Option<std::path::PathBuf>,
    /// Send the streams of this traffic profile (TOML: headers, sizes,
    /// rates and patterns per stream; docs/profiles.md) instead of the
    /// flow flags; -t still bounds the run.
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "pcap", "dst_ip", "src_ip", "dst_mac", "src_port", "dst_port", "size", "sizes", "imix",
        "count", "pps", "bitrate", "rate", "burst", "rate_l2", "vlan", "tcp_flags", "dscp", "gso",
    ])]
    profile: Option<std::path::PathBuf>,
    /// Times through the trace (0: until --duration or --count).
    #[arg(long = "loop", default_value_t = 1, requires = "pcap")]
    loops: u64,
    /// Trace timing: "original", "fast" (or --rate), or a speed-up factor such as 2.
    #[arg(long, default_value = "fast", requires = "pcap")]
    pcap_timing: String,
    /// Seconds to send (upper bound with --count).
    #[arg(
        short = 't',
        long = "time",
        visible_alias = "duration",
        default_value_t = 3.0
    )]
    duration: f64,
    /// Frames to send.
    #[arg(long)]
    count: Option<u64>,
    /// Target packet rate, packets/s (1M, 500k, 14.88M).
    #[arg(long, value_name = "PPS", conflicts_with_all = ["bitrate", "rate"])]
    pps: Option<String>,
    /// Target bit rate, bits/s with iperf3's suffixes (2G, 100M): on the
    /// wire (L1), or of frames with --rate-l2.
    #[arg(short = 'b', long, value_name = "BPS", conflicts_with = "rate")]
    bitrate: Option<String>,
    /// Target rate with its unit: 1Mpps or 2Gbps / 100Mbit (a bare 10M is
    /// refused: write --pps or --bitrate).
    #[arg(long)]
    rate: Option<String>,
    /// Frames sent back to back per pacing decision (1: evenly spaced).
    #[arg(long, default_value_t = 1)]
    burst: u32,
    /// A paced sender that wakes late: `burst` sends every departure that
    /// fell due at once (the schedule is absolute, the rate holds over the
    /// run); `skip` sends at most --burst-tolerance frames beyond the
    /// burst and skips the rest (never sent, reported as skipped). -J's
    /// `shape` says what happened either way.
    #[arg(long, value_enum, default_value = "burst")]
    catch_up: CatchUpArg,
    /// --catch-up skip: frames beyond the burst a late wake-up may still send.
    #[arg(long, default_value_t = 0, value_name = "FRAMES")]
    burst_tolerance: u32,
    /// After the last frame, each flow's end marker (its sent count, three
    /// times) lets a sink in another process or on another host count the
    /// frames lost after the flow's last arrival: sent by default (not on
    /// the UDP socket path, which says so); --no-end-marker leaves them out.
    #[arg(long, hide = true)]
    end_marker: bool,
    /// Send no end markers (a device or counter that must see only the
    /// frames asked for).
    #[arg(long, conflicts_with = "end_marker")]
    no_end_marker: bool,
    /// Bit rates count frames only (L2) instead of the wire (L1).
    #[arg(long)]
    rate_l2: bool,
    /// 802.1Q VLAN id.
    #[arg(long)]
    vlan: Option<u16>,
    /// Send TCP segments with these flags instead of UDP (S, SA, R, F, P, A, U).
    #[arg(long, value_parser = linerate_traffic::template::tcp_flags)]
    tcp_flags: Option<u8>,
    /// DSCP: 0..63 or a name (ef, af41, cs5).
    #[arg(long, default_value = "0", value_parser = super::dscp)]
    dscp: u8,
    /// The backend (socket: UDP sockets where the kernel can build the
    /// traffic, raw frames otherwise; socket:udp, socket:raw: one of them).
    #[arg(long, default_value = "auto", value_parser = super::BackendArg)]
    backend: BackendKind,
    #[command(flatten)]
    eal: super::dpdk::EalArgs,
    /// UDP GSO on the socket backend's UDP path: auto (on, except on a veth
    /// or a loopback with tx-udp-segmentation on: a veth passes a GSO
    /// batch to its peer as one packet, a loopback to a packet socket), on
    /// or off.
    #[arg(long, default_value = "auto")]
    gso: String,
    /// One pinned sending worker per listed core (0,1), each with its own
    /// socket; flows are split between them.
    #[arg(long, value_name = "CPUS", value_parser = super::cpu_list)]
    cores: Option<super::CpuList>,
    /// Also count what arrives on this interface of the same host (the
    /// second port, after a device under test or a loop): the receiver's
    /// count per flow (loss, reordering, duplicates, one-way latency) in
    /// this run's report, beside the sender's.
    #[arg(long, value_name = "IFACE", conflicts_with = "pcap")]
    rx_iface: Option<String>,
    /// Backend of --rx-iface.
    #[arg(long, default_value = "auto", requires = "rx_iface", value_parser = super::BackendArg)]
    rx_backend: BackendKind,
    /// With --rx-iface: seconds to wait after the last frame for frames
    /// still on their way.
    #[arg(long, default_value_t = 0.5, requires = "rx_iface")]
    drain: f64,
    #[command(flatten)]
    repeat: super::out::RepeatArgs,
    #[command(flatten)]
    out: OutputArgs,
}

/// Count what arrives: per-flow loss, reordering, duplicates, latency.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Interface to receive on.
    #[arg(long)]
    iface: String,
    /// Seconds to listen (default: until Ctrl-C or --count, at most a
    /// day).
    #[arg(short = 't', long = "time", visible_alias = "duration")]
    duration: Option<f64>,
    /// Stop once this many probe frames arrived.
    #[arg(long)]
    count: Option<u64>,
    /// The sender is on another host: do not report one-way latency.
    #[arg(long)]
    remote_sender: bool,
    /// The backend (socket:udp only sends).
    #[arg(long, default_value = "auto", value_parser = super::BackendArg)]
    backend: BackendKind,
    #[command(flatten)]
    eal: super::dpdk::EalArgs,
    /// One pinned receive worker per listed core (0,1): af_xdp gives each
    /// its share of the RX queues, af_packet and socket a PACKET_FANOUT
    /// share by flow; counts are merged.
    #[arg(long, value_name = "CPUS", value_parser = super::cpu_list)]
    cores: Option<super::CpuList>,
    /// Also write every frame that arrives (probe or not) to this pcap file
    /// (nanosecond timestamps).
    #[arg(long, value_name = "FILE")]
    write: Option<std::path::PathBuf>,
    /// Bytes kept of each written frame.
    #[arg(long, default_value_t = 65535, value_parser = clap::value_parser!(u32).range(64..=262144))]
    snaplen: u32,
    /// Most frames written to --write (the count goes on after it).
    #[arg(long, default_value_t = 1_000_000)]
    write_count: u64,
    /// AF_XDP: take every frame of the interface's queues from the kernel
    /// (ARP, ping, SSH and all); by default only linerate's probe frames
    /// are taken (other UDP goes to the kernel: --udp-ports takes UDP to
    /// those ports, whatever it carries).
    #[arg(long)]
    take_queue: bool,
    /// Write the latency histograms (per flow, tag flow=ID, and all) to
    /// FILE in HdrHistogram's interval log format (values in ns).
    #[arg(long, value_name = "FILE")]
    hist: Option<std::path::PathBuf>,
    /// AF_XDP: take only UDP to these destination ports (9, or 1000-1999).
    #[arg(long, value_name = "PORTS", conflicts_with = "take_queue", value_parser = super::RxFilter::port_range)]
    udp_ports: Option<(u16, u16)>,
    /// The traffic profile the sender sends (blast --profile): the counts
    /// reported per stream, by name (a stream is its probe flow id).
    #[arg(long, value_name = "FILE")]
    profile: Option<std::path::PathBuf>,
    #[command(flatten)]
    out: OutputArgs,
}

/// The flags as `linerate_packet::setup` reads them.
fn flags(a: &BlastArgs) -> Result<BlastFlags<'_>> {
    Ok(BlastFlags {
        iface: &a.iface,
        dst_ip: a.dst_ip.as_deref(),
        src_ip: a.src_ip.as_deref(),
        dst_mac: a.dst_mac.as_deref(),
        src_mac: a.src_mac.as_deref(),
        src_port: &a.src_port,
        dst_port: &a.dst_port,
        size: a.size,
        sizes: a.sizes.as_deref(),
        imix: a.imix.as_deref(),
        loops: a.loops,
        pcap_timing: &a.pcap_timing,
        duration: a.duration,
        count: a.count,
        pps: a.pps.as_deref(),
        bitrate: a.bitrate.as_deref(),
        rate: a.rate.as_deref(),
        rate_l2: a.rate_l2,
        burst: a.burst,
        catch_up: a.catch_up.into(),
        burst_tolerance: a.burst_tolerance,
        end_markers: !a.no_end_marker,
        vlan: a.vlan,
        tcp_flags: a.tcp_flags,
        dscp: a.dscp,
        backend: a.backend,
        gso: &a.gso,
        cores: a.cores.as_ref().map_or(&[], |c| c.0.as_slice()),
        interval: a.out.interval()?,
    })
}

/// A warning of the flags' setup, said on stderr.
fn warn(w: &str) {
    eprintln!("linerate: {w}");
}

/// blast's `-l`: refused with the spelling blast takes.
fn not_a_frame_size(_: &str) -> Result<u16, String> {
    Err(linerate_packet::setup::NOT_A_FRAME_SIZE.into())
}

pub fn run_blast(a: &BlastArgs, c: &Console) -> Result<u8> {
    super::dpdk::port_exists(a.backend, &a.eal, &a.iface)?;
    if a.repeat.asked() {
        return a
            .repeat
            .run((&a.out).into(), c, &mut |hold| run_blast_once(a, hold, c));
    }
    Ok(run_blast_once(a, false, c)?.exit_code)
}

fn run_blast_once(a: &BlastArgs, hold: bool, c: &Console) -> Result<Ended> {
    let sending = if let Some(path) = &a.pcap {
        Sending::Flows(Box::new(flags(a)?.replay_config(path)?))
    } else if let Some(path) = &a.profile {
        let cfg = setup::profile_config(
            path,
            &a.iface,
            a.backend,
            a.src_mac.as_deref(),
            a.cores.as_ref().map(|c| c.0.as_slice()),
        )?;
        Sending::Profile(linerate_packet::ProfileConfig {
            duration: setup::duration(a.duration)?,
            interval: a.out.interval()?,
            end_markers: !a.no_end_marker,
            ..cfg
        })
    } else {
        Sending::Flows(Box::new(flags(a)?.flows_config(&mut warn)?))
    };
    blast_run(a, &sending, hold, c)
}

/// Runs blast through the shared run model.
fn blast_run(a: &BlastArgs, sending: &Sending, hold: bool, c: &Console) -> Result<Ended> {
    let stop = stop_flag()?;
    let doc = doctor(&a.iface, &sending.cores());
    let config = sending.config(&Stated {
        iface: &a.iface,
        count: a.count,
        duration_s: a.duration,
        burst: a.burst,
        backend: a.backend,
        dst_ip: a.dst_ip.as_deref(),
        pcap: a.pcap.as_deref(),
    });
    drive(
        (&a.out, c),
        hold,
        Mode::Blast,
        (config, Some(a.duration)),
        Some(doc.clone()),
        |run| {
            let mut on_interval = |iv: &linerate_run::Interval| run.interval(iv);
            let (r, rx) = match &a.rx_iface {
                None => (sending.send(stop.flag(), &mut on_interval)?, None),
                Some(rx) => {
                    let ports = (a.iface.as_str(), rx.as_str(), a.rx_backend);
                    let (r, s) =
                        sending.blast_and_count(ports, a.drain, stop.flag(), &mut on_interval)?;
                    (r, Some((rx.clone(), s)))
                }
            };
            for n in r.notes() {
                if a.out.human() {
                    eprintln!("linerate: {n}");
                }
            }
            Ok(linerate_packet::sending::blast_measured(
                r,
                rx,
                doc,
                sending.streams(),
            ))
        },
    )
}

/// The doctor's short summary for the interface a test used and the CPUs
/// its workers were pinned to.
fn doctor(iface: &str, pinned: &[usize]) -> serde_json::Value {
    linerate_doctor::test_summary(Some(iface), pinned)
}

/// What `sink`'s flags ask of the receiver.
fn sink_config(a: &SinkArgs) -> Result<SinkConfig> {
    Ok(SinkConfig {
        iface: a.iface.clone(),
        duration: setup::duration(a.duration.unwrap_or(SINK_UNTIL_STOPPED_S))?,
        backend: a.backend,
        wires: Default::default(),
        clocks_shared: !a.remote_sender,
        until_packets: a.count,
        capture: a.write.as_ref().map(|path| CaptureConfig {
            path: path.clone(),
            overwrite: a.out.force,
            snaplen: a.snaplen,
            max_frames: a.write_count,
        }),
        cores: a.cores.clone().map(|c| c.0).unwrap_or_default(),
        interval: a.out.interval()?,
        take: super::RxFilter::from_flags(a.take_queue, a.udp_ports),
    })
}

pub fn run_sink(a: &SinkArgs, c: &Console) -> Result<u8> {
    super::dpdk::port_exists(a.backend, &a.eal, &a.iface)?;
    let streams = match &a.profile {
        Some(p) => setup::stream_names(&linerate_traffic::profile::Profile::load(p)?),
        None => Vec::new(),
    };
    let cfg = sink_config(a)?;
    let stop = stop_flag()?;
    // Created now, written at the end: refused before the run, not after.
    let mut hist_file = (a.hist.as_ref())
        .map(|p| crate::output::create_new(p, a.out.force, "--hist"))
        .transpose()?;
    let pinned = a.cores.clone().map(|c| c.0).unwrap_or_default();
    let doc = doctor(&a.iface, &pinned);
    let config = serde_json::to_value(SinkStart {
        iface: &a.iface,
        duration_s: a.duration.unwrap_or(SINK_UNTIL_STOPPED_S),
        count: a.count,
        backend: a.backend,
        cores: &pinned,
        write: a.write.as_deref(),
    })?;
    // On stderr, so scripts (and tests) can start their traffic once the
    // sink counts it.
    let ready = |backend: &str| {
        let line = sink_ready_line(&a.iface, backend, a.duration.is_some(), a.count.is_some());
        eprintln!("{line}");
    };
    let ended = drive(
        (&a.out, c),
        false,
        Mode::Sink,
        (config, Some(a.duration.unwrap_or(SINK_UNTIL_STOPPED_S))),
        Some(doc.clone()),
        |run| {
            // Said before the ready line, and kept to judge a run that
            // counted nothing.
            let mut holder = None;
            let mut on_ready = |backend: &str| {
                holder = linerate_packet::xdp_holder(&a.iface, backend);
                if let Some(h) = &holder {
                    eprintln!("linerate: warning: {h}: this sink fails if it counts nothing");
                }
                ready(backend);
            };
            let r = linerate_packet::sink(&cfg, stop.flag(), &mut on_ready, &mut |iv| {
                run.interval(iv)
            })?;
            let hist = (a.hist.as_ref().zip(hist_file.take()))
                .map(|(path, f)| (path.clone(), linerate_packet::write_hist(&r, f)));
            Ok(linerate_packet::sink_measured(
                r,
                hist,
                holder.as_deref(),
                doc,
                (a.iface.clone(), streams.clone()),
            ))
        },
    )?;
    if let Some(e) = &ended.error {
        eprint!("{}", linerate_run::advice::error_lines(e));
    }
    Ok(ended.exit_code)
}

/// `--catch-up`: what a late paced sender does with the departures that
/// fell due (docs/blast.md, "Pacing").
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CatchUpArg {
    Burst,
    Skip,
}

impl From<CatchUpArg> for linerate_traffic::pacing::CatchUp {
    fn from(c: CatchUpArg) -> Self {
        match c {
            CatchUpArg::Burst => Self::Burst,
            CatchUpArg::Skip => Self::Skip,
        }
    }
}
