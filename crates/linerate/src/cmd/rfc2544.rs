//! `linerate rfc2544`: RFC 2544 through a device under test between two
//! ports: throughput (NDR/PDR search), latency, frame loss rate,
//! back-to-back, per frame size. Each trial is an interval of the run
//! model (rows: sent by the tx port, received by the rx port), so
//! `--json-stream`, `--csv`, `--metrics` and `--live` follow it.

use super::out::{Measured, OutputArgs, drive};
use crate::output::Console;
use anyhow::Result;
use clap::Args;
use linerate_packet::rfc2544::{self, FrameSize, Trial};
use linerate_packet::rfc2544_campaign::{Campaign, Session, Watcher, plan};
use linerate_packet::rfc2544_outcome::{Rfc2544Outcome, trial_line};
use linerate_packet::rfc2544_progress::Progress;
use linerate_packet::rfc2544_setup as setup;
use linerate_run::Mode;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct Rfc2544Args {
    /// The port that sends into the device (`--iface`, as blast's).
    #[arg(long, visible_alias = "iface", value_name = "IFACE")]
    tx_iface: String,
    /// The port that receives what the device forwards.
    #[arg(long, value_name = "IFACE")]
    rx_iface: String,
    /// Both ways at once: tx->rx and rx->tx, each at the trial's rate
    /// (rates in the results are per direction; a trial passes when both
    /// directions do).
    #[arg(long)]
    bidir: bool,
    /// --bidir: the device's MAC on the rx side (default: the next hop
    /// from --rx-iface towards --src-ip, from the neighbour table).
    #[arg(long)]
    reverse_dst_mac: Option<String>,
    /// The device's MAC on the tx side (default: --dut-ip's, or the next
    /// hop towards --dst-ip, from the kernel's neighbour table).
    #[arg(long)]
    dst_mac: Option<String>,
    /// The device's address on the tx side, to learn its MAC from.
    #[arg(long)]
    dut_ip: Option<std::net::IpAddr>,
    /// Source MAC (default: the tx port's).
    #[arg(long)]
    src_mac: Option<String>,
    /// Source IP(s) of the frames (ranges as blast: 198.18.0.1-198.18.0.9).
    #[arg(long, required_unless_present = "profile")]
    src_ip: Option<String>,
    /// Destination IP(s): addresses the device routes to the rx side.
    #[arg(long, required_unless_present = "profile")]
    dst_ip: Option<String>,
    /// Send this traffic profile's streams (docs/profiles.md) instead of
    /// one flow spec and frame size: each trial sends every stream for the
    /// trial's time, all their rates scaled by the one factor the search
    /// moves (the trial's rate over the profile's own).
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "src_ip", "dst_ip", "src_port", "dst_port", "sizes", "bidir", "reverse_dst_mac", "dst_mac", "dut_ip",
    ])]
    profile: Option<std::path::PathBuf>,
    #[arg(long, default_value = "1024")]
    src_port: String,
    #[arg(long, default_value = "9")]
    dst_port: String,
    /// Frame sizes, FCS included (RFC 2544's defaults); `imix` (7:4:1 of
    /// 64/594/1518) or `imix:64:7/594:4/1518:1` for a mix.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1280,1518",
        value_parser = FrameSize::parse
    )]
    sizes: Vec<FrameSize>,
    /// throughput, latency, loss, back-to-back (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "throughput")]
    tests: Vec<String>,
    /// Loss ratios the throughput search allows: 0 is NDR; several find
    /// NDR and PDRs in one run (0,0.001% or 0,0.00001).
    #[arg(long, value_delimiter = ',', default_value = "0", value_parser = super::out::ratio)]
    loss_ratio: Vec<f64>,
    /// Seconds per trial (RFC 2544 asks 60 for throughput).
    #[arg(long, default_value_t = 10.0)]
    trial_time: f64,
    /// The highest rate tried, with its unit: frames/s (100kpps) or L1
    /// bit/s (1Gbps); the port's speed when the kernel knows it.
    #[arg(long, value_parser = checked_max_rate)]
    max_rate: Option<String>,
    /// Stop the search when its interval is narrower than this share of
    /// the rate it closes in on.
    #[arg(long, default_value = "0.5%", value_parser = super::out::ratio)]
    resolution: f64,
    /// A trial whose offered rate is below this share of the asked rate
    /// was held back (a shaper or a paused link back-pressured the
    /// sender, or this host could not send faster): it is judged at the
    /// rate it offered, and without loss the device passed that.
    #[arg(long, default_value = "99%", value_parser = super::out::ratio)]
    offered_min: f64,
    /// Most trials of one throughput search (per frame size and loss
    /// ratio); the result says whether it closed in on the rate first.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u16).range(1..))]
    max_trials: u16,
    /// A trial's sender that wakes late (this host was busy): `skip` sends
    /// at most --burst-tolerance frames beyond its schedule and skips the
    /// rest (not offered); `burst` sends every departure that fell due at
    /// once. Either way a trial whose departures broke their shape by more
    /// than the bound is spoiled: run again, not scored (docs/rfc2544.md).
    #[arg(long, value_enum, default_value = "skip")]
    catch_up: super::blast::CatchUpArg,
    /// The bound on a trial's shape: frames a late sender may send back
    /// to back beyond its schedule (default: as many as fit in 6 KB, four
    /// full-size frames, at least 4: 94 of 64 B; any device's buffer
    /// holds that much, and a hardware tester sends none).
    #[arg(long, value_name = "FRAMES")]
    burst_tolerance: Option<u32>,
    /// Trials in a row this host may spoil before the search ends with an
    /// error (a set load's held-back trial is then kept at what it offered).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    spoiled_max: u32,
    /// Latency test: seconds (RFC 2544 asks 120) and the loads as shares of
    /// the throughput found (or of the maximum rate): 100%, or 10%,50%,90%.
    #[arg(long, default_value_t = 10.0)]
    latency_time: f64,
    #[arg(long, value_delimiter = ',', default_value = "100%", value_parser = super::out::ratio)]
    latency_load: Vec<f64>,
    /// Back-to-back: repetitions (RFC 2544 asks 50) and the longest burst
    /// tried, in seconds of frames at the maximum rate.
    #[arg(long, default_value_t = 5)]
    b2b_repeats: usize,
    #[arg(long, default_value_t = 2.0)]
    b2b_max: f64,
    /// Wait after each trial's last frame for what the device still holds.
    #[arg(long, default_value_t = 0.5)]
    drain: f64,
    /// Seconds of traffic at the trial's rate before each trial, not
    /// counted (the device learns addresses, fills caches).
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Continue from FILE, the `-J` document (or `--json-stream` output)
    /// of an interrupted run with the same settings: its finished searches
    /// are taken as done, the one cut short goes on from its finished
    /// trials; the output is the whole campaign's result. Throughput
    /// searches only are taken back; latency, loss and back-to-back run
    /// again in full.
    #[arg(long, value_name = "FILE")]
    resume: Option<std::path::PathBuf>,
    /// Show progress on stderr after each trial (trials done of the
    /// estimated total, the time left) even when stderr is not a terminal
    /// (on a terminal it is shown unasked).
    #[arg(long)]
    progress: bool,
    /// Throughput: repeat each search (per frame size and loss ratio) and
    /// report the rate found as the mean over the runs with its confidence
    /// interval (`--repeat N`, or `--ci-target 2% --max-runs M`).
    #[command(flatten)]
    repeat: super::out::RepeatArgs,
    /// Backend of both ports.
    #[arg(long, default_value = "af_packet", value_parser = super::BackendArg)]
    backend: linerate_packet::BackendKind,
    #[command(flatten)]
    eal: super::dpdk::EalArgs,
    #[command(flatten)]
    out: OutputArgs,
}

/// `--max-rate` checked as the command line is read.
fn checked_max_rate(spec: &str) -> Result<String, String> {
    linerate_calc::parse_rate_with_unit("--max-rate", spec).map(|_| spec.to_string())
}

pub fn run(a: &Rfc2544Args, c: &Console) -> Result<u8> {
    super::dpdk::port_exists(a.backend, &a.eal, &a.tx_iface)?;
    super::dpdk::port_exists(a.backend, &a.eal, &a.rx_iface)?;
    let stop = super::stop_flag()?;
    let warn = &mut |w: &str| eprintln!("linerate: {w}");
    let s = setup::setup(flags(a, &stop), warn)?;
    let t0 = Instant::now();
    let mut people = People {
        t0,
        human: a.out.human(),
        progress: show_progress(a).then(|| Progress::new(plan(&s.campaign, &s.sizes, &s.settings))),
    };
    let config = serde_json::to_value(&s.config)?;
    let mut session = Session::new(
        &s.campaign,
        (s.runner, s.sizes),
        s.settings,
        s.resume,
        (t0, &mut people),
    );
    let mut interrupted = false;
    let ended = drive(
        (&a.out, c),
        false,
        Mode::Rfc2544,
        (config.clone(), None),
        None,
        |run| {
            let mut o = Rfc2544Outcome {
                config,
                trial_time_s: a.trial_time,
                bidir: a.bidir,
                policy: a.repeat.asked().then(|| a.repeat.policy()),
                throughput: Vec::new(),
                repeats: Vec::new(),
                latency: None,
                frame_loss: None,
                back_to_back: None,
                error: None,
            };
            o.error = session.all(run, &mut o).err();
            interrupted = session.interrupted();
            Ok(Measured {
                duration_s: t0.elapsed().as_secs_f64(),
                rows: Vec::new(),
                error: o.error.clone(),
                outcome: Arc::new(o),
            })
        },
    )?;
    if interrupted {
        return Ok(EXIT_INTERRUPTED);
    }
    Ok(ended.exit_code)
}

/// The flags as `linerate_packet::rfc2544_setup` reads them.
fn flags<'a>(a: &'a Rfc2544Args, stop: &linerate_run::Cancel) -> setup::Flags<'a> {
    setup::Flags {
        ports: setup::Ports {
            tx_iface: &a.tx_iface,
            rx_iface: &a.rx_iface,
            backend: a.backend,
            drain: a.drain,
            warmup: a.warmup,
            stop: stop.shared(),
        },
        device: setup::DeviceFlags {
            src_ip: a.src_ip.as_deref().unwrap_or_default(),
            dst_ip: a.dst_ip.as_deref().unwrap_or_default(),
            src_port: &a.src_port,
            dst_port: &a.dst_port,
            src_mac: a.src_mac.as_deref(),
            dst_mac: a.dst_mac.as_deref(),
            dut_ip: a.dut_ip,
            bidir: a.bidir,
            reverse_dst_mac: a.reverse_dst_mac.as_deref(),
        },
        profile: a.profile.as_deref(),
        sizes: &a.sizes,
        campaign: Campaign {
            tests: a.tests.clone(),
            loss_ratio: a.loss_ratio.clone(),
            latency_time: a.latency_time,
            latency_load: a.latency_load.clone(),
            b2b_repeats: a.b2b_repeats,
            b2b_max: a.b2b_max,
            drain: a.drain,
            warmup: a.warmup,
        },
        trial_time: a.trial_time,
        max_rate: a.max_rate.as_deref(),
        resolution: a.resolution,
        offered_min: a.offered_min,
        max_trials: a.max_trials,
        pace: rfc2544::Pace {
            catch_up: a.catch_up.into(),
            burst_tolerance: a.burst_tolerance,
            spoiled_max: a.spoiled_max,
        },
        resume: a.resume.as_deref(),
        repeated: a.repeat.asked(),
    }
}

/// Exit code of a campaign cut short by a stop (128 + SIGINT, as a shell
/// reports it).
const EXIT_INTERRUPTED: u8 = 130;

/// Each trial as a line on stderr for people, with the campaign's
/// progress when shown.
struct People {
    t0: Instant,
    human: bool,
    progress: Option<Progress>,
}

impl Watcher for People {
    fn trial(&mut self, n: usize, t: &Trial) {
        if self.human {
            eprintln!("linerate: trial {n}: {}", trial_line(t));
        }
        if let Some(p) = &mut self.progress {
            p.trial(t);
            // On a terminal, over the run's one-line progress, if drawn.
            let clear = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                "\r\x1b[K"
            } else {
                ""
            };
            eprintln!("{clear}linerate: progress: {}", p.line(self.t0.elapsed()));
        }
    }

    fn search_started(&mut self, prior: &[Trial]) {
        if let Some(p) = &mut self.progress {
            p.search_started(prior);
        }
    }

    fn searches_done(&mut self) {
        if let Some(p) = &mut self.progress {
            p.searches_done();
        }
    }
}

/// Progress is for people: shown on a terminal, or when asked.
fn show_progress(a: &Rfc2544Args) -> bool {
    use std::io::IsTerminal;
    a.progress || std::io::stderr().is_terminal()
}
