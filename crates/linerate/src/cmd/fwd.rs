//! `linerate fwd`: a reflector / forwarder that can act like a loaded server.

use super::out::{OutputArgs, drive};
use super::stop_flag;
use crate::output::Console;
use anyhow::Result;
use clap::Args;
use linerate_packet::{BackendKind, FwdConfig, FwdMode, FwdOutcome, FwdStart, Noisy};
use linerate_run::Mode;
use std::time::Duration;

/// Receive frames and send them back (or on), rewritten by mode.
#[derive(Debug, Args)]
pub struct FwdArgs {
    /// Interface to receive on.
    #[arg(long)]
    iface: String,
    /// Interface to send on (default: back out of --iface).
    #[arg(long = "tx-iface", alias = "out-iface", value_name = "IFACE")]
    out_iface: Option<String>,
    /// AF_XDP: take every frame of the interface's queues from the kernel
    /// (ARP, ping, SSH and all); by default only linerate's probe frames
    /// are taken (other UDP goes to the kernel: --udp-ports takes UDP to
    /// those ports, whatever it carries).
    #[arg(long)]
    take_queue: bool,
    /// AF_XDP: take only UDP to these destination ports (9, or 1000-1999).
    #[arg(long, value_name = "PORTS", conflicts_with = "take_queue", value_parser = super::RxFilter::port_range)]
    udp_ports: Option<(u16, u16)>,
    /// io (unchanged), mac (source: the sending interface's MAC,
    /// destination: --dst-mac), macswap, 5tswap (MACs, IP addresses and
    /// UDP/TCP ports swapped).
    #[arg(long, default_value = "macswap")]
    mode: String,
    /// Destination MAC for --mode mac.
    #[arg(long)]
    dst_mac: Option<String>,
    /// The backend (socket: raw frames; socket:udp cannot forward).
    #[arg(long, default_value = "auto", value_parser = super::BackendArg)]
    backend: BackendKind,
    #[command(flatten)]
    eal: super::dpdk::EalArgs,
    /// Seconds to run.
    #[arg(
        short = 't',
        long = "time",
        visible_alias = "duration",
        default_value_t = 10.0
    )]
    duration: f64,
    /// Stop once this many frames were forwarded.
    #[arg(long)]
    count: Option<u64>,
    /// One pinned forwarding worker per listed CPU (0,1), each with its own
    /// sockets; the kernel spreads frames over them (RX queue, or
    /// PACKET_FANOUT by flow).
    #[arg(long, value_name = "CPUS", value_parser = super::cpu_list)]
    cores: Option<super::CpuList>,
    /// Loaded-server simulation: hold up to this many frames in a FIFO…
    #[arg(long, default_value_t = 0)]
    fifo: usize,
    /// …and send them when it is full or its oldest frame has waited this
    /// many microseconds.
    #[arg(long, default_value_t = 0)]
    flush_us: u64,
    /// Memory area (MiB) for the per-frame random reads and writes.
    #[arg(long, default_value_t = 0)]
    mem_mb: usize,
    /// Random reads per frame in the memory area.
    #[arg(long, default_value_t = 0)]
    reads: u32,
    /// Random writes per frame.
    #[arg(long, default_value_t = 0)]
    writes: u32,
    /// Random read-modify-writes per frame.
    #[arg(long, default_value_t = 0)]
    read_writes: u32,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: &FwdArgs, c: &Console) -> Result<u8> {
    let cfg = fwd_config(a)?;
    let stop = stop_flag()?;
    let doc = linerate_doctor::test_summary(Some(&a.iface), &cfg.cores);
    let config = serde_json::to_value(FwdStart {
        iface: &a.iface,
        out_iface: a.out_iface.as_deref(),
        mode: &a.mode,
        backend: a.backend,
        duration_s: a.duration,
        count: a.count,
        cores: &cfg.cores,
        fifo: a.fifo,
        flush_us: a.flush_us,
    })?;
    // On stderr, so scripts (and `lab up --dut fwd`) can start their
    // traffic once it is forwarded.
    let tx_iface = a.out_iface.as_deref().unwrap_or(&a.iface);
    let mut ready = |rx: &str, tx: &str| {
        eprintln!(
            "linerate: fwd forwarding {} ({rx}) -> {tx_iface} ({tx})",
            a.iface
        );
    };
    let planned = (config, Some(a.duration));
    let ended = drive(
        (&a.out, c),
        false,
        Mode::Fwd,
        planned,
        Some(doc.clone()),
        |run| {
            let r =
                linerate_packet::fwd(&cfg, stop.flag(), &mut ready, &mut |iv| run.interval(iv))?;
            Ok(FwdOutcome::measured(r, doc, a.fifo > 0))
        },
    )?;
    if let Some(e) = &ended.error {
        eprint!("{}", linerate_run::advice::error_lines(e));
    }
    Ok(ended.exit_code)
}

/// The forwarder the flags ask for (checked).
fn fwd_config(a: &FwdArgs) -> Result<FwdConfig> {
    super::dpdk::port_exists(a.backend, &a.eal, &a.iface)?;
    if let Some(o) = &a.out_iface {
        super::dpdk::port_exists(a.backend, &a.eal, o)?;
    }
    let mode = FwdMode::from_flags(&a.mode, a.dst_mac.as_deref())?;
    let cfg = FwdConfig {
        rx_iface: a.iface.clone(),
        tx_iface: a.out_iface.clone(),
        mode,
        backend: a.backend,
        wires: Default::default(),
        // Not a number of seconds above zero: zero, refused by `checked`.
        duration: Duration::try_from_secs_f64(a.duration).unwrap_or_default(),
        count: a.count,
        noisy: Noisy {
            fifo: a.fifo,
            flush: Duration::from_micros(a.flush_us),
            mem_bytes: a.mem_mb << 20,
            reads: a.reads,
            writes: a.writes,
            read_writes: a.read_writes,
        },
        cores: a.cores.clone().map(|c| c.0).unwrap_or_default(),
        interval: None,
        take: super::RxFilter::from_flags(a.take_queue, a.udp_ports),
    }
    .checked()?;
    Ok(FwdConfig {
        interval: a.out.interval()?,
        ..cfg
    })
}
