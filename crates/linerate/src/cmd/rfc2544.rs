//! `linerate rfc2544`: RFC 2544 through a device under test between two
//! ports: throughput (NDR/PDR search), latency, frame loss rate,
//! back-to-back, per frame size. Each trial is an interval of the run
//! model (rows: sent by the tx port, received by the rx port), so
//! `--json-stream`, `--csv`, `--metrics` and `--live` follow it.

use super::out::{Measured, OutputArgs, Run, drive};
use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::Args;
use linerate_packet::rfc2544::{
    self, DeviceRunner, FrameSize, MaxRate, Settings, Trial, TrialRunner,
};
use linerate_packet::rfc2544_outcome::{RepeatedRate, Rfc2544Outcome, trial_line, trial_rows};
use linerate_packet::rfc2544_progress::{Plan, Progress, bounded_trials};
use linerate_packet::rfc2544_resume::Resumed;
use linerate_run::{Interval, Mode};
use linerate_traffic::FlowSpec;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct Rfc2544Args {
    /// The port that sends into the device.
    #[arg(long, value_name = "IFACE")]
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
    /// error naming its load (no rate is reported from spoiled trials).
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

/// `--max-rate`: frames/s (100kpps) or L1 bit/s (1Gbps), unit written as
/// every rate that can be either kind (a bare 100M is refused).
fn max_rate(spec: &str) -> Result<MaxRate> {
    use linerate_calc::UnitRate;
    match linerate_calc::parse_rate_with_unit("--max-rate", spec).map_err(anyhow::Error::msg)? {
        UnitRate::PerSecond(f) => Ok(MaxRate::Fps(f as f64)),
        UnitRate::Bits(b) => Ok(MaxRate::L1Bps(b as f64)),
    }
}

/// `--max-rate` checked as the command line is read.
fn checked_max_rate(spec: &str) -> Result<String, String> {
    linerate_calc::parse_rate_with_unit("--max-rate", spec).map(|_| spec.to_string())
}

fn port_speed_bps(iface: &str) -> Option<f64> {
    linerate_backend::iface::speed_bps(iface).map(|b| b as f64)
}

pub fn run(a: &Rfc2544Args, c: &Console) -> Result<u8> {
    check_args(a)?;
    let stop = super::stop_flag()?;
    let (runner, sizes, mut config) = match &a.profile {
        Some(path) => profile_runner(a, path, &stop)?,
        None => device_runner(a, &stop)?,
    };
    let max = match (&a.max_rate, port_speed_bps(&a.tx_iface)) {
        (Some(m), _) => max_rate(m)?,
        (None, Some(bps)) => MaxRate::L1Bps(bps),
        (None, None) => bail!(
            "{} does not report its speed (a veth?): give --max-rate",
            a.tx_iface
        ),
    };
    let settings = Settings {
        max_rate: max,
        trial_time: Duration::from_secs_f64(a.trial_time.max(0.1)),
        resolution: a.resolution.max(1e-4),
        offered_min: a.offered_min,
        max_trials: usize::from(a.max_trials),
        pace: rfc2544::Pace {
            catch_up: a.catch_up.into(),
            burst_tolerance: a.burst_tolerance,
            spoiled_max: a.spoiled_max,
        },
    };
    let more = serde_json::json!({
        "tx_iface": a.tx_iface, "rx_iface": a.rx_iface, "sizes": sizes, "tests": a.tests,
        "loss_ratio": a.loss_ratio, "trial_time_s": a.trial_time, "max_rate": a.max_rate,
        "resolution": a.resolution, "backend": a.backend, "bidir": a.bidir,
        "catch_up": linerate_traffic::pacing::CatchUp::from(a.catch_up).name(),
        "burst_tolerance": a.burst_tolerance, "spoiled_max": a.spoiled_max,
        "offered_min": a.offered_min, "max_trials": a.max_trials, "drain_s": a.drain,
        "warmup_s": a.warmup,
    });
    for (k, v) in more.as_object().into_iter().flatten() {
        config[k] = v.clone();
    }
    let resume = resumed(a, &mut config)?;
    let t0 = Instant::now();
    let progress = show_progress(a).then(|| Progress::new(plan(a, &sizes, &settings)));
    let mut session = Session {
        a,
        runner,
        sizes,
        settings,
        log: TrialLog {
            n: 0,
            last_end: 0.0,
            t0,
            human: a.out.human(),
            progress,
        },
        resume,
    };
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
            interrupted = session.runner.interrupted();
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

/// `--resume FILE`: the file's searches, its settings checked against the
/// command's `config` (which then says where it resumed from).
fn resumed(a: &Rfc2544Args, config: &mut serde_json::Value) -> Result<Option<Resumed>> {
    let Some(path) = &a.resume else {
        return Ok(None);
    };
    if a.repeat.asked() {
        bail!(
            "--resume continues one search per frame size and loss ratio: not with --repeat or --ci-target"
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--resume {}", path.display()))?;
    let r = Resumed::parse(&text, config)?;
    config["resumed_from"] = serde_json::json!(path);
    Ok(Some(r))
}

/// What the trials send, and the frame sizes searched: the flows given.
fn device_runner(
    a: &Rfc2544Args,
    stop: &linerate_run::Cancel,
) -> Result<(Box<dyn TrialRunner>, Vec<FrameSize>, serde_json::Value)> {
    let (src_ip, dst_ip) = (
        a.src_ip.as_deref().unwrap_or_default(),
        a.dst_ip.as_deref().unwrap_or_default(),
    );
    let (src_mac, dst_mac) = forward_macs(a, dst_ip)?;
    let flows = FlowSpec::parse(&src_mac, &dst_mac, src_ip, dst_ip, &a.src_port, &a.dst_port)?;
    let runner = DeviceRunner {
        tx_iface: a.tx_iface.clone(),
        rx_iface: a.rx_iface.clone(),
        flows,
        reverse: reverse_flows(a, src_ip, dst_ip)?,
        backend: a.backend,
        wires: Default::default(),
        drain: Duration::from_secs_f64(a.drain.max(0.0)),
        clocks_shared: true,
        stop: stop.shared(),
        warmup: Duration::from_secs_f64(a.warmup.max(0.0)),
    };
    let config = serde_json::json!({"dst_mac": dst_mac, "src_ip": src_ip, "dst_ip": dst_ip});
    Ok((Box::new(runner), a.sizes.clone(), config))
}

/// What the trials send with `--profile`: the profile's streams, scaled;
/// the one "frame size" searched is the profile's (its mean frame).
fn profile_runner(
    a: &Rfc2544Args,
    path: &std::path::Path,
    stop: &linerate_run::Cancel,
) -> Result<(Box<dyn TrialRunner>, Vec<FrameSize>, serde_json::Value)> {
    let backend = a.backend;
    let mut sender =
        super::profile::blast_config(path, &a.tx_iface, backend, a.src_mac.as_deref(), None)?;
    sender.profile = sender.profile.for_trials();
    let (nominal_fps, mean_bytes) = sender.profile.nominal(&sender.rates);
    // The tables' "size": the profile's file name without its extension.
    let name = path.file_stem().map_or_else(
        || "profile".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let config = serde_json::json!({
        "profile": {
            "file": path,
            "streams": sender.stream_settings(),
            "nominal_fps": nominal_fps,
            "mean_frame_bytes": mean_bytes,
            "scale": "each trial's rate over nominal_fps: every stream's rate times it",
        },
    });
    let runner = linerate_packet::profile_trials::ProfileRunner {
        sender,
        nominal_fps,
        rx_iface: a.rx_iface.clone(),
        rx_backend: backend,
        drain: Duration::from_secs_f64(a.drain.max(0.0)),
        clocks_shared: true,
        stop: stop.shared(),
        warmup: Duration::from_secs_f64(a.warmup.max(0.0)),
    };
    let size = FrameSize::Profile { name, mean_bytes };
    Ok((Box::new(runner), vec![size], config))
}

/// The ports exist, are two, and the tests are known ones.
fn check_args(a: &Rfc2544Args) -> Result<()> {
    super::dpdk::port_exists(a.backend, &a.eal, &a.tx_iface)?;
    super::dpdk::port_exists(a.backend, &a.eal, &a.rx_iface)?;
    for t in &a.tests {
        if !["throughput", "latency", "loss", "back-to-back"].contains(&t.as_str()) {
            bail!("--tests: '{t}' is not one of throughput, latency, loss, back-to-back");
        }
    }
    if a.tx_iface == a.rx_iface {
        bail!("--tx-iface and --rx-iface must be two ports with the device between them");
    }
    Ok(())
}

/// The tx side's source and destination MACs (given, or learnt).
fn forward_macs(a: &Rfc2544Args, dst_ip: &str) -> Result<(String, String)> {
    let dst_mac = match (&a.dst_mac, a.dut_ip) {
        (Some(m), _) => m.clone(),
        (None, Some(ip)) => {
            linerate_backend::neigh::resolve(&a.tx_iface, ip, Duration::from_secs(1))
                .map(linerate_backend::iface::format_mac)
                .with_context(|| format!("no MAC for --dut-ip {ip} on {}", a.tx_iface))?
        }
        (None, None) => super::blast::next_hop_mac(&a.tx_iface, dst_ip)?,
    };
    let src_mac = match &a.src_mac {
        Some(m) => m.clone(),
        None => linerate_backend::port::port_mac(a.backend, &Default::default(), &a.tx_iface)
            .map(linerate_backend::iface::format_mac)
            .with_context(|| format!("--tx-iface {}", a.tx_iface))?,
    };
    Ok((src_mac, dst_mac))
}

/// With --bidir, the flows the rx port sends back (addresses and ports
/// swapped).
fn reverse_flows(a: &Rfc2544Args, src_ip: &str, dst_ip: &str) -> Result<Option<FlowSpec>> {
    if !a.bidir {
        if a.reverse_dst_mac.is_some() {
            bail!("--reverse-dst-mac goes with --bidir");
        }
        return Ok(None);
    }
    let dst_mac = match &a.reverse_dst_mac {
        Some(m) => m.clone(),
        None => super::blast::next_hop_mac(&a.rx_iface, src_ip)
            .context("--bidir: the device's MAC on the rx side (--reverse-dst-mac)")?,
    };
    let src_mac = linerate_backend::port::port_mac(a.backend, &Default::default(), &a.rx_iface)
        .map(linerate_backend::iface::format_mac)
        .with_context(|| format!("--rx-iface {}", a.rx_iface))?;
    Ok(Some(FlowSpec::parse(
        &src_mac,
        &dst_mac,
        dst_ip,
        src_ip,
        &a.dst_port,
        &a.src_port,
    )?))
}

/// The error of a campaign a stop (SIGINT, SIGTERM) cut short.
const INTERRUPTED: &str = "interrupted by a stop: every trial finished is kept, the one cut short is marked and not scored";

/// Exit code of a campaign cut short by a stop (128 + SIGINT, as a shell
/// reports it).
const EXIT_INTERRUPTED: u8 = 130;

/// Each trial as an interval of the run (and a line on stderr for people,
/// with the campaign's progress when shown).
struct TrialLog {
    n: usize,
    last_end: f64,
    t0: Instant,
    human: bool,
    progress: Option<Progress>,
}

impl TrialLog {
    fn log(&mut self, t: &Trial, run: &mut Run) {
        self.n += 1;
        let end = self.t0.elapsed().as_secs_f64();
        run.interval(&Interval::new(self.last_end, end, trial_rows(self.n, t)));
        self.last_end = end;
        if self.human {
            eprintln!("linerate: trial {}: {}", self.n, trial_line(t));
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
}

/// Progress is for people: shown on a terminal, or when asked.
fn show_progress(a: &Rfc2544Args) -> bool {
    use std::io::IsTerminal;
    a.progress || std::io::stderr().is_terminal()
}

/// What the campaign will run, for its progress: a search per frame size
/// and loss ratio (throughput), then the other tests' trials at most.
fn plan(a: &Rfc2544Args, sizes: &[FrameSize], settings: &Settings) -> Plan {
    let want = |name: &str| a.tests.iter().any(|t| t == name);
    let searches = if want("throughput") {
        (sizes.iter())
            .flat_map(|s| a.loss_ratio.iter().map(move |_| s.clone()))
            .collect()
    } else {
        Vec::new()
    };
    let latency = if want("latency") {
        sizes.len() * a.latency_load.len()
    } else {
        0
    };
    let others: usize = (sizes.iter())
        .map(|size| {
            let b2b = want("back-to-back").then(|| {
                let max_burst = (settings.max_fps(size) * a.b2b_max).round().max(1.0);
                (max_burst as u64, a.b2b_repeats)
            });
            bounded_trials(want("loss"), b2b)
        })
        .sum();
    Plan {
        searches,
        after: latency + others,
        trial_guess: settings.trial_time
            + Duration::from_secs_f64(a.drain.max(0.0) + a.warmup.max(0.0)),
        settings: settings.clone(),
    }
}

/// The tests asked for, run against the device one after the other.
struct Session<'a> {
    a: &'a Rfc2544Args,
    runner: Box<dyn TrialRunner>,
    /// The frame sizes searched (a profile's one).
    sizes: Vec<FrameSize>,
    settings: Settings,
    log: TrialLog,
    /// `--resume`: the searches of an earlier run, taken as each search
    /// starts.
    resume: Option<Resumed>,
}

impl Session<'_> {
    fn want(&self, name: &str) -> bool {
        self.a.tests.iter().any(|t| t == name)
    }

    /// Every test asked for; the first error stops them (what ran stands),
    /// as does a stop (SIGINT, SIGTERM): every finished trial is kept.
    fn all(&mut self, run: &mut Run, o: &mut Rfc2544Outcome) -> Result<(), String> {
        let r = self.tests(run, o);
        if self.runner.interrupted() {
            return Err(INTERRUPTED.into());
        }
        r
    }

    fn tests(&mut self, run: &mut Run, o: &mut Rfc2544Outcome) -> Result<(), String> {
        if self.want("throughput") {
            self.throughput(run, o)?;
        }
        if let Some(p) = &mut self.log.progress {
            p.searches_done();
        }
        if self.want("latency") {
            o.latency = Some(Vec::new());
            self.latency(run, o)?;
        }
        if self.want("loss") && !self.runner.interrupted() {
            let mut out = Vec::new();
            for size in &self.sizes {
                let (runner, settings, log) = (&mut *self.runner, &self.settings, &mut self.log);
                out.extend(rfc2544::frame_loss(runner, size, settings, &mut |t| {
                    log.log(t, run)
                })?);
            }
            o.frame_loss = Some(out);
        }
        if self.want("back-to-back") && !self.runner.interrupted() {
            let mut out = Vec::new();
            for size in &self.sizes {
                let max_burst = (self.settings.max_fps(size) * self.a.b2b_max)
                    .round()
                    .max(1.0) as u64;
                let (runner, settings, log) = (&mut *self.runner, &self.settings, &mut self.log);
                out.push(rfc2544::back_to_back(
                    runner,
                    size,
                    max_burst,
                    self.a.b2b_repeats,
                    settings,
                    &mut |t| log.log(t, run),
                )?);
            }
            o.back_to_back = Some(out);
        }
        Ok(())
    }

    /// One search per frame size and loss ratio; with --repeat the search
    /// again until the policy stops: the rate is the mean of the runs',
    /// with its confidence interval.
    fn throughput(&mut self, run: &mut Run, o: &mut Rfc2544Outcome) -> Result<(), String> {
        for size in &self.sizes {
            for &ratio in &self.a.loss_ratio {
                if self.runner.interrupted() {
                    return Ok(());
                }
                let prior = (self.resume.as_mut()).map_or_else(Vec::new, |r| r.take(size, ratio));
                if let Some(p) = &mut self.log.progress {
                    p.search_started(&prior);
                }
                let (runner, settings, log) = (&mut *self.runner, &self.settings, &mut self.log);
                let mut r =
                    rfc2544::throughput_resumed(runner, size, ratio, settings, prior, &mut |t| {
                        log.log(t, run)
                    })?;
                let mut search =
                    || rfc2544::throughput(runner, size, ratio, settings, &mut |t| log.log(t, run));
                if r.interrupted {
                    o.throughput.push(r);
                    return Ok(());
                }
                if let Some(policy) = &o.policy {
                    let mut rates = vec![r.rate_fps];
                    let stop = loop {
                        if let Some(s) = policy.stop(&rates) {
                            break s;
                        }
                        let again = search()?;
                        r.trials.extend(again.trials);
                        if again.interrupted {
                            r.interrupted = true;
                            break linerate_run::stats::Stop::Count;
                        }
                        rates.push(again.rate_fps);
                    };
                    let kept = &rates[policy.warmup_runs.min(rates.len())..];
                    if !kept.is_empty() {
                        r.rate_fps = kept.iter().sum::<f64>() / kept.len() as f64;
                        (r.rate_l1_bps, r.rate_l2_bps) = rfc2544::bits(r.rate_fps, size);
                        r.of_max = r.rate_fps / self.settings.max_fps(size);
                    }
                    o.repeats.push(RepeatedRate {
                        frame_size: size.clone(),
                        loss_allowed: ratio,
                        rates,
                        stop,
                    });
                }
                o.throughput.push(r);
            }
        }
        Ok(())
    }

    /// At each load of the throughput found with the least loss allowed
    /// (the NDR when searched), else of the maximum rate.
    fn latency(&mut self, run: &mut Run, o: &mut Rfc2544Outcome) -> Result<(), String> {
        for size in &self.sizes {
            let base = o
                .throughput
                .iter()
                .filter(|t| &t.frame_size == size)
                .min_by(|a, b| a.loss_allowed.total_cmp(&b.loss_allowed))
                .map_or_else(|| self.settings.max_fps(size), |t| t.rate_fps);
            for &load in &self.a.latency_load {
                if self.runner.interrupted() {
                    return Ok(());
                }
                let rate = (base * load).round().max(1.0);
                let spec = rfc2544::TrialSpec {
                    frame_size: size.clone(),
                    rate_fps: rate,
                    duration: Duration::from_secs_f64(self.a.latency_time.max(0.1)),
                    frames: None,
                    pace: self.settings.pace,
                };
                let (log, om) = (&mut self.log, self.settings.offered_min);
                let t = rfc2544::clean_trial(
                    &mut *self.runner,
                    &spec,
                    1.0,
                    om,
                    &|t| rfc2544::skipped_beyond_margin(t, om),
                    &mut |t| log.log(t, run),
                    &mut Vec::new(),
                )?;
                if t.interrupted {
                    return Ok(());
                }
                o.latency
                    .get_or_insert_with(Vec::new)
                    .push(rfc2544::Latency {
                        frame_size: size.clone(),
                        load,
                        rate_fps: rate,
                        trial: t,
                    });
            }
        }
        Ok(())
    }
}
