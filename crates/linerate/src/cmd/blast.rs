//! `linerate blast` and `linerate sink`.

use super::out::{Ended, Measured, OutputArgs, Run, drive};
use super::stop_flag;
use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::Args;
use linerate_calc::{Imix, parse_bps, parse_pps};
use linerate_packet::{BackendKind, BlastConfig, CaptureConfig, Gso, Rate, SinkConfig};
use linerate_packet::{BlastOutcome, SinkOutcome};
use linerate_run::Mode;
use linerate_traffic::template::Framing;
use linerate_traffic::{FlowSpec, SizeSequence};
use std::sync::Arc;
use std::time::Duration;

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
    /// IPv6).
    #[arg(long, group = "sz")]
    size: Option<u16>,
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
    #[arg(long, value_parser = parse_tcp_flags)]
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
    /// with tx-udp-segmentation on, which would pass a GSO batch to its
    /// peer as one packet), on or off.
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
    #[arg(long, value_name = "PORTS", conflicts_with = "take_queue", value_parser = super::port_range)]
    udp_ports: Option<(u16, u16)>,
    /// The traffic profile the sender sends (blast --profile): the counts
    /// reported per stream, by name (a stream is its probe flow id).
    #[arg(long, value_name = "FILE")]
    profile: Option<std::path::PathBuf>,
    #[command(flatten)]
    out: OutputArgs,
}

fn parse_tcp_flags(s: &str) -> Result<u8, String> {
    linerate_traffic::template::tcp_flags(s)
}

fn gso(s: &str) -> Result<Gso> {
    Ok(match s {
        "auto" => Gso::Auto,
        "on" => Gso::On,
        "off" => Gso::Off,
        _ => bail!("--gso takes auto, on or off"),
    })
}

fn duration(s: f64) -> Result<Duration> {
    if !(0.01..=86400.0).contains(&s) {
        bail!("--duration must be between 0.01 and 86400 seconds");
    }
    Ok(Duration::from_secs_f64(s))
}

/// The target rate from `--pps`, `--bitrate` or `--rate` (which must say
/// its unit: a packet rate and a bit rate are never guessed).
fn rate(a: &BlastArgs) -> Result<Rate> {
    let bits = |s: &str| -> Result<Rate> {
        let b = parse_bps(s).map_err(anyhow::Error::msg)?;
        Ok(if a.rate_l2 {
            Rate::BpsL2(b)
        } else {
            Rate::BpsL1(b)
        })
    };
    if let Some(p) = &a.pps {
        return Ok(Rate::Pps(parse_pps(p).map_err(anyhow::Error::msg)?));
    }
    if let Some(b) = &a.bitrate {
        return bits(b);
    }
    let Some(s) = a.rate.as_deref() else {
        return Ok(Rate::Max);
    };
    let lower = s.to_ascii_lowercase();
    if lower.ends_with("pps") {
        return Ok(Rate::Pps(parse_pps(s).map_err(anyhow::Error::msg)?));
    }
    if lower.ends_with("bps") || lower.ends_with("bit") || lower.ends_with("b/s") {
        return bits(s);
    }
    bail!(
        "--rate {s} is ambiguous: write --pps {s} (packets/s), --bitrate {s} (bits/s), or the unit (--rate {s}pps, --rate {s}bps)"
    )
}

fn replay_config(a: &BlastArgs, path: &std::path::Path) -> Result<linerate_packet::Replay> {
    use linerate_traffic::pcap::{Rewrite, Trace};
    let mac = |m: &Option<String>| -> Result<Option<linerate_wire::MacAddr>> {
        m.as_deref()
            .map(|s| {
                linerate_wire::MacAddr::parse(s)
                    .with_context(|| format!("'{s}' is not a MAC address"))
            })
            .transpose()
    };
    let ip = |m: &Option<String>| -> Result<Option<std::net::IpAddr>> {
        m.as_deref()
            .map(|s| {
                s.parse().with_context(|| {
                    format!("'{s}' is not an IP address (a trace takes one address, not a range)")
                })
            })
            .transpose()
    };
    let timing = match a.pcap_timing.as_str() {
        "fast" => linerate_packet::Timing::Fast,
        "original" => linerate_packet::Timing::Scaled(1.0),
        x => match x.parse::<f64>() {
            Ok(k) if k > 0.0 && k.is_finite() => linerate_packet::Timing::Scaled(k),
            _ => bail!("--pcap-timing takes original, fast or a speed-up factor > 0"),
        },
    };
    Ok(linerate_packet::Replay {
        trace: Trace::load(path)?,
        rewrite: Rewrite {
            src_mac: mac(&a.src_mac)?,
            dst_mac: mac(&a.dst_mac)?,
            src_ip: ip(&a.src_ip)?,
            dst_ip: ip(&a.dst_ip)?,
        },
        loops: a.loops,
        timing,
    })
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
    if let Some(path) = &a.pcap {
        return blast_run(
            a,
            &Sending::Flows(Box::new(replay_blast_config(a, path)?)),
            hold,
            c,
        );
    }
    if let Some(path) = &a.profile {
        let cfg = super::profile::blast_config(
            path,
            &a.iface,
            a.backend,
            a.src_mac.as_deref(),
            a.cores.as_ref().map(|c| c.0.as_slice()),
        )?;
        let cfg = linerate_packet::ProfileConfig {
            duration: duration(a.duration)?,
            interval: a.out.interval()?,
            end_markers: !a.no_end_marker,
            ..cfg
        };
        return blast_run(a, &Sending::Profile(cfg), hold, c);
    }
    let dst_ip = a.dst_ip.clone().context("--dst-ip is required")?;
    let (src_ip, src_mac) = source_addrs(a, dst_ip.contains(':'))?;
    let kind = a.backend;
    // Flags are checked before the neighbour is looked up.
    let offered = rate(a)?;
    let dst_mac = match &a.dst_mac {
        Some(m) => m.clone(),
        // The kernel's UDP socket addresses its own frames.
        None if kind == BackendKind::Udp => "00:00:00:00:00:00".into(),
        None => next_hop_mac(&a.iface, &dst_ip)?,
    };
    if matches!(offered, Rate::Max) {
        eprintln!(
            "linerate: blast: no --pps or --bitrate: sending {} as fast as {} allows",
            a.count
                .map_or("until --time ends".to_string(), |n| format!("{n} frames")),
            a.iface
        );
    }
    let flows = FlowSpec::parse(
        &src_mac,
        &dst_mac,
        &src_ip,
        &dst_ip,
        &a.src_port,
        &a.dst_port,
    )?;
    let framing = framing(a)?;
    // No size given: the smallest frame that carries these headers and
    // the probe (64 bytes, 84 over IPv6).
    let smallest =
        || linerate_traffic::min_frame(&framing, flows.ipv6, framing.tcp_flags.is_some()) as u16;
    let sizes = match (&a.size, &a.sizes, &a.imix) {
        (_, Some(list), _) => SizeSequence::list(list),
        (_, _, Some(spec)) => SizeSequence::from_mix(&Imix::parse(spec)?),
        (s, ..) => SizeSequence::list(&[s.unwrap_or_else(smallest)]),
    };
    if sizes.cycle().is_empty() {
        bail!("--sizes needs at least one size");
    }
    let cfg = BlastConfig {
        iface: a.iface.clone(),
        flows,
        sizes,
        framing,
        count: a.count,
        duration: duration(a.duration)?,
        rate: rate(a)?,
        burst: a.burst,
        catch_up: a.catch_up.into(),
        burst_tolerance: a.burst_tolerance,
        backend: a.backend,
        wires: Default::default(),
        cores: a.cores.clone().map(|c| c.0).unwrap_or_default(),
        replay: None,
        macs_given: a.src_mac.is_some() || a.dst_mac.is_some(),
        gso: gso(&a.gso)?,
        interval: a.out.interval()?,
        end_markers: !a.no_end_marker,
    };
    blast_run(a, &Sending::Flows(Box::new(cfg)), hold, c)
}

/// The blast of `--pcap` `path`: its frames as they are, the flow flags
/// unused.
fn replay_blast_config(a: &BlastArgs, path: &std::path::Path) -> Result<BlastConfig> {
    Ok(BlastConfig {
        iface: a.iface.clone(),
        flows: FlowSpec::parse(
            "00:00:00:00:00:00",
            "00:00:00:00:00:00",
            "0.0.0.0",
            "0.0.0.0",
            "0",
            "0",
        )?,
        sizes: SizeSequence::list(&[64]),
        framing: Framing::default(),
        count: a.count,
        duration: duration(a.duration)?,
        rate: rate(a)?,
        burst: a.burst,
        catch_up: a.catch_up.into(),
        burst_tolerance: a.burst_tolerance,
        backend: a.backend,
        wires: Default::default(),
        cores: vec![],
        replay: Some(replay_config(a, path)?),
        macs_given: true,
        gso: gso(&a.gso)?,
        interval: a.out.interval()?,
        end_markers: false,
    })
}

/// The source address (of the IP version `v6` says) and MAC: given, or
/// the interface's.
fn source_addrs(a: &BlastArgs, v6: bool) -> Result<(String, String)> {
    let src_ip = match &a.src_ip {
        Some(s) => s.clone(),
        None => linerate_backend::iface::addr(&a.iface, v6)
            .with_context(|| {
                format!(
                    "{} has no {} address: give --src-ip",
                    a.iface,
                    if v6 { "IPv6" } else { "IPv4" }
                )
            })?
            .to_string(),
    };
    let src_mac = match &a.src_mac {
        Some(m) => m.clone(),
        None => linerate_backend::port::port_mac(a.backend, &Default::default(), &a.iface)
            .map(linerate_backend::iface::format_mac)
            .with_context(|| format!("interface {} does not exist", a.iface))?,
    };
    Ok((src_ip, src_mac))
}

/// The frames' VLAN tag, DSCP and TCP flags from the flags (checked).
fn framing(a: &BlastArgs) -> Result<Framing> {
    if a.dscp > 63 {
        bail!("--dscp must be 0..63");
    }
    if a.vlan.is_some_and(|v| v > 4094) {
        bail!("--vlan must be 0..4094");
    }
    Ok(Framing {
        vlan: a.vlan.map(|v| (v, 0)),
        dscp: a.dscp,
        ttl: 64,
        mtu: None,
        tcp_flags: a.tcp_flags,
        vxlan: None,
        payload: None,
        stack: None,
    })
}

/// Without --dst-mac, frames go to the next hop's MAC from the kernel's
/// neighbour table (resolved by the kernel if missing), never to broadcast:
/// on a real switch broadcast floods every port.
pub(crate) fn next_hop_mac(iface: &str, dst_ip: &str) -> Result<String> {
    // An interface without a link-layer address (loopback) has no
    // neighbours: its frames carry zeros.
    if linerate_backend::iface::mac(iface).is_ok_and(|m| m == [0; 6]) {
        return Ok("00:00:00:00:00:00".into());
    }
    let first = dst_ip.split(['-', '@']).next().unwrap_or(dst_ip).trim();
    let ip: std::net::IpAddr = first
        .parse()
        .with_context(|| format!("'{first}' is not an IP address"))?;
    let mac = linerate_backend::neigh::resolve(iface, ip, std::time::Duration::from_secs(1))
        .with_context(|| {
            format!("no destination MAC for {ip}: give --dst-mac (ff:ff:ff:ff:ff:ff for broadcast, if that is really meant)")
        })?;
    if dst_ip.contains('-') && linerate_backend::neigh::next_hop(iface, ip) == ip {
        eprintln!(
            "linerate: blast: every frame goes to {} ({first}'s MAC); give --dst-mac to address the rest of the range",
            linerate_backend::iface::format_mac(mac)
        );
    }
    Ok(linerate_backend::iface::format_mac(mac))
}

/// What blast sends: flows (or a trace), or a profile's streams.
enum Sending {
    Flows(Box<BlastConfig>),
    Profile(linerate_packet::ProfileConfig),
}

impl Sending {
    fn send(
        &self,
        stop: &std::sync::atomic::AtomicBool,
        on_interval: &mut dyn FnMut(&linerate_run::Interval),
    ) -> Result<linerate_packet::BlastReport, linerate_packet::BlastError> {
        match self {
            Sending::Flows(cfg) => linerate_packet::blast(cfg, stop, on_interval),
            Sending::Profile(cfg) => linerate_packet::blast_profile(cfg, stop, on_interval),
        }
    }

    fn cores(&self) -> Vec<usize> {
        match self {
            Sending::Flows(cfg) => cfg.cores.clone(),
            Sending::Profile(cfg) => cfg.core.into_iter().collect(),
        }
    }

    fn duration(&self) -> Duration {
        match self {
            Sending::Flows(cfg) => cfg.duration,
            Sending::Profile(cfg) => cfg.duration,
        }
    }

    /// The run's settings, as `Start` reports them.
    fn config(&self, a: &BlastArgs) -> serde_json::Value {
        let sending = match self {
            Sending::Flows(cfg) => SendingSettings::Flows {
                dst_ip: a.dst_ip.as_deref(),
                pcap: a.pcap.as_deref(),
                flows: cfg.flows.count(),
                rate: cfg.rate,
            },
            Sending::Profile(cfg) => SendingSettings::Profile {
                profile: &cfg.profile.file,
                streams: cfg.stream_settings(),
            },
        };
        serde_json::to_value(BlastSettings {
            iface: &a.iface,
            count: a.count,
            duration_s: a.duration,
            burst: a.burst,
            backend: a.backend,
            cores: self.cores(),
            sending,
        })
        .unwrap_or_default()
    }
}

/// blast's settings as its `Start` states them.
#[derive(Debug, serde::Serialize)]
struct BlastSettings<'a> {
    iface: &'a str,
    count: Option<u64>,
    duration_s: f64,
    burst: u32,
    backend: BackendKind,
    cores: Vec<usize>,
    #[serde(flatten)]
    sending: SendingSettings<'a>,
}

/// What blast sends: flows (or a trace), or a profile's streams.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
enum SendingSettings<'a> {
    Flows {
        dst_ip: Option<&'a str>,
        pcap: Option<&'a std::path::Path>,
        flows: u64,
        /// As every rate in a document: `"max"`, `{"pps": N}`,
        /// `{"bps_l1": N}` or `{"bps_l2": N}`.
        rate: linerate_packet::Rate,
    },
    Profile {
        profile: &'a std::path::Path,
        streams: Vec<linerate_packet::StreamSettings<'a>>,
    },
}

/// Runs blast through the shared run model.
fn blast_run(a: &BlastArgs, sending: &Sending, hold: bool, c: &Console) -> Result<Ended> {
    let stop = stop_flag()?;
    let doc = doctor(&a.iface, &sending.cores());
    let config = sending.config(a);
    drive(
        (&a.out, c),
        hold,
        Mode::Blast,
        (config, Some(a.duration)),
        Some(doc.clone()),
        |run| {
            let (r, rx) = match &a.rx_iface {
                None => (sending.send(stop.flag(), &mut |iv| run.interval(iv))?, None),
                Some(rx) => {
                    let (r, s) = blast_and_count(a, rx, sending, stop.flag(), run)?;
                    (r, Some((rx.clone(), s)))
                }
            };
            for n in [&r.note, &r.end_marker_note].into_iter().flatten() {
                if a.out.human() {
                    eprintln!("linerate: {n}");
                }
            }
            let mut rows = r.worker_rows.clone();
            let mut error = None;
            if let Some((iface, s)) = &rx {
                rows.extend(linerate_packet::flow_rows(&s.counts));
                error = s.error.as_ref().map(|e| {
                    format!("receiving on {iface}: {e} (the counts are what arrived before it)")
                });
            }
            Ok(Measured {
                duration_s: r.duration_s,
                rows,
                error,
                outcome: Arc::new(BlastOutcome {
                    report: r,
                    doctor: doc,
                    receiver: rx,
                    streams: match sending {
                        Sending::Profile(cfg) => super::profile::names(&cfg.profile),
                        Sending::Flows(_) => Vec::new(),
                    },
                }),
            })
        },
    )
}

/// blast with a receiver on another interface of this host: the sink is
/// counting before the first frame leaves, and stops a drain wait after
/// the last.
fn blast_and_count(
    a: &BlastArgs,
    rx: &str,
    sending: &Sending,
    stop: &std::sync::atomic::AtomicBool,
    run: &mut Run,
) -> Result<(linerate_packet::BlastReport, linerate_packet::SinkReport)> {
    if rx == a.iface {
        bail!(
            "--rx-iface must be another interface than --iface (the sink of the same port is `linerate sink`)"
        );
    }
    if !(0.0..=60.0).contains(&a.drain) {
        bail!("--drain must be between 0 and 60 seconds");
    }
    let drain = Duration::from_secs_f64(a.drain);
    let scfg = SinkConfig {
        iface: rx.to_string(),
        // Bounded in any case: the sender's time, the drain, and slack.
        duration: sending.duration() + drain + Duration::from_secs(30),
        backend: a.rx_backend,
        wires: Default::default(),
        clocks_shared: true,
        until_packets: None,
        capture: None,
        cores: Vec::new(),
        interval: None,
        take: linerate_packet::RxFilter::Probes,
    };
    let (sent, mut got) = linerate_packet::pair::while_counting(
        std::slice::from_ref(&scfg),
        drain,
        || sending.send(stop, &mut |iv| run.interval(iv)),
        Result::is_ok,
    )
    .map_err(anyhow::Error::msg)?;
    let b = sent?;
    let s = got.remove(0).map_err(anyhow::Error::msg)?;
    Ok((b, s))
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
        duration: duration(a.duration.unwrap_or(SINK_UNTIL_STOPPED_S))?,
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
        take: super::rx_filter(a.take_queue, a.udp_ports),
    })
}

/// A sink given no time listens until stopped, a day at most.
const SINK_UNTIL_STOPPED_S: f64 = 86_400.0;

pub fn run_sink(a: &SinkArgs, c: &Console) -> Result<u8> {
    super::dpdk::port_exists(a.backend, &a.eal, &a.iface)?;
    let streams = match &a.profile {
        Some(p) => super::profile::names(&linerate_traffic::profile::Profile::load(p)?),
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
    let config = serde_json::json!({
        "iface": a.iface,
        "duration_s": a.duration.unwrap_or(SINK_UNTIL_STOPPED_S),
        "count": a.count,
        "backend": a.backend,
        "cores": pinned,
        "write": a.write,
    });
    // On stderr, so scripts (and tests) can start their traffic once the
    // sink counts it.
    let until = match (a.duration, a.count) {
        (Some(_), _) => "",
        (None, Some(_)) => ", until --count or Ctrl-C",
        (None, None) => ", until Ctrl-C (-t sets a time)",
    };
    let ready = |backend: &str| {
        eprintln!("linerate: sink receiving on {} ({backend}){until}", a.iface);
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
                holder = xdp_holder(&a.iface, backend);
                if let Some(h) = &holder {
                    eprintln!("linerate: warning: {h}: this sink fails if it counts nothing");
                }
                ready(backend);
            };
            let r = linerate_packet::sink(&cfg, stop.flag(), &mut on_ready, &mut |iv| {
                run.interval(iv)
            })?;
            let hist = (a.hist.as_ref().zip(hist_file.take()))
                .map(|(path, f)| (path.clone(), write_hist(&r, f)));
            let hist_error = hist.as_ref().and_then(|(p, w)| {
                w.as_ref().err().map(|e| {
                    format!(
                        "--hist {}: {e} (the histograms were not saved)",
                        p.display()
                    )
                })
            });
            let rows = linerate_packet::flow_rows(&r.counts);
            // A capture that could not be written fails the run (the counts stand).
            let capture_error = r.capture.as_ref().and_then(|(_, frames, _, e)| {
                e.as_ref().map(|e| {
                    format!("capture failed after {frames} frames: {e} (the counts are complete)")
                })
            });
            let error = r
                .error
                .as_ref()
                .map(|e| format!("{e} (the counts are what arrived before it)"))
                .or(capture_error)
                .or(hist_error)
                .or_else(|| blind(&r))
                .or_else(|| held_elsewhere(&r, holder.as_deref()));
            Ok(Measured {
                duration_s: r.duration_s,
                rows,
                error,
                outcome: Arc::new(SinkOutcome {
                    report: r,
                    doctor: doc,
                    iface: a.iface.clone(),
                    hist,
                    streams: streams.clone(),
                }),
            })
        },
    )?;
    if let Some(e) = &ended.error {
        eprintln!("linerate: error: {e}");
    }
    Ok(ended.exit_code)
}

/// A sink that counted no probe frame while the sender's end markers say
/// it sent some: it saw the markers, not the frames (another program
/// took them, or a filter): said, and the run fails.
fn blind(r: &linerate_packet::SinkReport) -> Option<String> {
    let sent: u64 = r.counts.flows.values().filter_map(|f| f.sent_marker).sum();
    (sent > 0 && r.counts.flows.values().all(|f| f.seq.received() == 0)).then(|| {
        format!(
            "the sender's end markers say {sent} frames were sent and this sink counted none of them: something else takes them before it (another receiver's XDP program, a filter)"
        )
    })
}

/// Why an af_packet sink on `iface` may be blind: an XDP program is
/// attached there (another receiver's, whose AF_XDP socket takes the
/// frames before af_packet sees them).
fn xdp_holder(iface: &str, backend: &str) -> Option<String> {
    if backend != "af_packet" {
        return None;
    }
    let p = linerate_backend::rtnl::xdp_program(iface).ok().flatten()?;
    Some(format!(
        "an XDP program (id {}, {} mode) is attached to {iface}: an AF_XDP socket behind it (another receiver's) takes frames before af_packet sees them",
        p.id, p.mode
    ))
}

/// A sink that counted no frame at all while an XDP program held its
/// interface (`holder`): it was blind, not idle; the run fails.
fn held_elsewhere(r: &linerate_packet::SinkReport, holder: Option<&str>) -> Option<String> {
    let h = holder?;
    (r.counts.flows.values().all(|f| f.seq.received() == 0)).then(|| {
        format!(
            "this sink counted nothing, and {h}: stop the other receiver, or receive with --backend af_xdp on a queue of its own"
        )
    })
}

/// `sink --hist`: the latency histogram log, written whole.
fn write_hist(r: &linerate_packet::SinkReport, f: std::fs::File) -> Result<(), String> {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        - r.duration_s;
    let mut w = std::io::BufWriter::new(f);
    r.counts
        .write_histogram_log(&mut w, started, r.duration_s)
        .and_then(|()| std::io::Write::flush(&mut w))
        .and_then(|()| w.get_ref().sync_all())
        .map_err(|e| e.to_string())
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
