//! `linerate rfc2544`: RFC 2544 through a device under test between two
//! ports: throughput (NDR/PDR search), latency, frame loss rate,
//! back-to-back, per frame size. Each trial is an interval of the run
//! model (rows: sent by the tx port, received by the rx port), so
//! `--json-stream`, `--csv`, `--metrics` and `--live` follow it.

use super::out::{OutputArgs, Run};
use anyhow::{Context, Result, bail};
use clap::Args;
use linerate_gen::FlowSpec;
use linerate_packet::rfc2544::{self, DeviceRunner, FrameSize, MaxRate, Settings, Trial};
use linerate_run::{CountedBy, Counts, Interval, Mode, Row, Scope};
use std::fmt::Write as _;
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
    #[arg(long)]
    src_ip: String,
    /// Destination IP(s): addresses the device routes to the rx side.
    #[arg(long)]
    dst_ip: String,
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
    /// The highest rate tried: frames/s (100kpps) or L1 bit/s (1G); the
    /// port's speed when the kernel knows it.
    #[arg(long)]
    max_rate: Option<String>,
    /// Stop the search when its interval is narrower than this share of
    /// the maximum rate.
    #[arg(long, default_value = "0.5%", value_parser = super::out::ratio)]
    resolution: f64,
    /// A trial whose offered rate is below this share of the asked rate
    /// fails as "offered load not reached".
    #[arg(long, default_value = "99%", value_parser = super::out::ratio)]
    offered_min: f64,
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
    /// Throughput: repeat each search (per frame size and loss ratio) and
    /// report the rate found as the mean over the runs with its confidence
    /// interval (`--repeat N`, or `--ci-target 2% --max-runs M`).
    #[command(flatten)]
    repeat: super::out::RepeatArgs,
    /// Backend of both ports: af_packet (default), af_xdp, socket.
    #[arg(long, default_value = "af_packet")]
    backend: String,
    #[command(flatten)]
    out: OutputArgs,
}

/// `--max-rate`: frames/s as given (100kpps), bit/s as L1 (1G).
fn max_rate(spec: &str) -> Result<MaxRate> {
    let s = spec.trim().to_ascii_lowercase();
    let rate = if let Some(p) = s.strip_suffix("pps") {
        MaxRate::Fps(
            linerate_iperf_proto::units::parse_suffixed(p, 1000)
                .with_context(|| format!("--max-rate {spec}"))? as f64,
        )
    } else {
        MaxRate::L1Bps(
            linerate_iperf_proto::units::parse_suffixed(s.trim_end_matches("bps"), 1000)
                .with_context(|| format!("--max-rate {spec}: frames/s (100kpps) or bit/s (1G)"))?
                as f64,
        )
    };
    match rate {
        MaxRate::Fps(f) | MaxRate::L1Bps(f) if f > 0.0 => Ok(rate),
        _ => bail!("--max-rate {spec}: above zero"),
    }
}

fn port_speed_bps(iface: &str) -> Option<f64> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|m| *m > 0)
        .map(|m| m as f64 * 1e6)
}

fn trial_rows(n: usize, t: &Trial) -> Vec<Row> {
    let id = format!("{} trial {n}", t.frame_size);
    vec![
        Row::new(Scope::Flow, id.clone(), "tx", CountedBy::Sender).with_counts(Counts {
            packets: Some(t.sent),
            bytes: Some(t.sent_bytes),
            ..Counts::default()
        }),
        Row::new(Scope::Flow, id, "rx", CountedBy::Receiver).with_counts(Counts {
            packets: Some(t.received),
            bytes: Some(t.received_bytes),
            lost: Some(t.sent.saturating_sub(t.received)),
            ..Counts::default()
        }),
    ]
}

fn trial_line(t: &Trial) -> String {
    format!(
        "{:>7}  asked {:>12.0} fps{}  offered {:>12.0} fps  sent {:>10}  received {:>10}  loss {:.6}%  {}",
        t.frame_size.to_string(),
        t.asked_fps,
        if t.directions.is_some() {
            " each way"
        } else {
            ""
        },
        t.offered_fps,
        t.sent,
        t.received,
        t.loss_ratio * 100.0,
        if t.passed {
            "pass".to_string()
        } else {
            format!("fail ({})", t.reason.as_deref().unwrap_or(""))
        }
    )
}

pub fn run(a: &Rfc2544Args) -> Result<u8> {
    for t in &a.tests {
        if !["throughput", "latency", "loss", "back-to-back"].contains(&t.as_str()) {
            bail!("--tests: '{t}' is not one of throughput, latency, loss, back-to-back");
        }
    }
    if a.tx_iface == a.rx_iface {
        bail!("--tx-iface and --rx-iface must be two ports with the device between them");
    }
    let dst_mac = match (&a.dst_mac, a.dut_ip) {
        (Some(m), _) => m.clone(),
        (None, Some(ip)) => {
            linerate_backend::neigh::resolve(&a.tx_iface, ip, Duration::from_secs(1))
                .map(linerate_backend::iface::format_mac)
                .with_context(|| format!("no MAC for --dut-ip {ip} on {}", a.tx_iface))?
        }
        (None, None) => super::blast::next_hop_mac(&a.tx_iface, &a.dst_ip)?,
    };
    let src_mac = match &a.src_mac {
        Some(m) => m.clone(),
        None => linerate_backend::iface::mac(&a.tx_iface)
            .map(linerate_backend::iface::format_mac)
            .with_context(|| format!("--tx-iface {}", a.tx_iface))?,
    };
    let flows = FlowSpec::parse(
        &src_mac,
        &dst_mac,
        &a.src_ip,
        &a.dst_ip,
        &a.src_port,
        &a.dst_port,
    )?;
    let reverse = if a.bidir {
        let dst_mac = match &a.reverse_dst_mac {
            Some(m) => m.clone(),
            None => super::blast::next_hop_mac(&a.rx_iface, &a.src_ip)
                .context("--bidir: the device's MAC on the rx side (--reverse-dst-mac)")?,
        };
        let src_mac = linerate_backend::iface::mac(&a.rx_iface)
            .map(linerate_backend::iface::format_mac)
            .with_context(|| format!("--rx-iface {}", a.rx_iface))?;
        Some(FlowSpec::parse(
            &src_mac,
            &dst_mac,
            &a.dst_ip,
            &a.src_ip,
            &a.dst_port,
            &a.src_port,
        )?)
    } else {
        if a.reverse_dst_mac.is_some() {
            bail!("--reverse-dst-mac goes with --bidir");
        }
        None
    };
    let max = match (&a.max_rate, port_speed_bps(&a.tx_iface)) {
        (Some(m), _) => max_rate(m)?,
        (None, Some(bps)) => MaxRate::L1Bps(bps),
        (None, None) => bail!(
            "{} does not report its speed (a veth?): give --max-rate",
            a.tx_iface
        ),
    };
    let stop = super::stop_flag()?;
    let settings = Settings {
        max_rate: max,
        trial_time: Duration::from_secs_f64(a.trial_time.max(0.1)),
        resolution: a.resolution.max(1e-4),
        offered_min: a.offered_min,
    };
    let mut runner = DeviceRunner {
        tx_iface: a.tx_iface.clone(),
        rx_iface: a.rx_iface.clone(),
        flows,
        reverse,
        backend: linerate_packet::BackendKind::parse(&a.backend)
            .with_context(|| format!("unknown backend '{}'", a.backend))?,
        drain: Duration::from_secs_f64(a.drain.max(0.0)),
        clocks_shared: true,
        stop: stop.shared(),
        warmup: Duration::from_secs_f64(a.warmup.max(0.0)),
    };
    let config = serde_json::json!({
        "tx_iface": a.tx_iface, "rx_iface": a.rx_iface, "dst_mac": dst_mac,
        "src_ip": a.src_ip, "dst_ip": a.dst_ip, "sizes": a.sizes, "tests": a.tests,
        "loss_ratio": a.loss_ratio, "trial_time_s": a.trial_time, "max_rate": a.max_rate,
        "resolution": a.resolution, "backend": a.backend, "bidir": a.bidir,
    });
    let mut run = Run::start(&a.out, Mode::Rfc2544, config.clone(), None)?;
    let t0 = Instant::now();
    let mut n = 0usize;
    let mut last_end = 0.0f64;
    let human = a.out.human();
    let mut log = |t: &Trial, run: &mut Run| {
        n += 1;
        let end = t0.elapsed().as_secs_f64();
        run.interval(&Interval::new(last_end, end, trial_rows(n, t)));
        last_end = end;
        if human {
            eprintln!("linerate: trial {n}: {}", trial_line(t));
        }
    };
    let want = |name: &str| a.tests.iter().any(|t| t == name);
    let mut doc = serde_json::json!({"config": config});
    let mut text = String::new();
    let mut throughput: Vec<rfc2544::Throughput> = Vec::new();
    let mut repeats: Vec<(FrameSize, f64, serde_json::Value)> = Vec::new();
    let outcome: Result<(), String> = (|| {
        if want("throughput") {
            for size in &a.sizes {
                for &ratio in &a.loss_ratio {
                    let mut r =
                        rfc2544::throughput(&mut runner, size, ratio, &settings, &mut |t| {
                            log(t, &mut run)
                        })?;
                    if a.repeat.asked() {
                        // The search again until the policy stops: the rate is
                        // the mean of the runs', with its confidence interval.
                        let policy = a.repeat.policy();
                        let mut rates = vec![r.rate_fps];
                        let stop = loop {
                            if let Some(s) = policy.stop(&rates) {
                                break s;
                            }
                            let again = rfc2544::throughput(
                                &mut runner,
                                size,
                                ratio,
                                &settings,
                                &mut |t| log(t, &mut run),
                            )?;
                            rates.push(again.rate_fps);
                            r.trials.extend(again.trials);
                        };
                        let kept = &rates[policy.warmup_runs.min(rates.len())..];
                        if !kept.is_empty() {
                            r.rate_fps = kept.iter().sum::<f64>() / kept.len() as f64;
                            let (l1, l2) = rfc2544::bits(r.rate_fps, size);
                            (r.rate_l1_bps, r.rate_l2_bps) = (l1, l2);
                            r.of_max = r.rate_fps / settings.max_fps(size);
                        }
                        repeats.push((
                            size.clone(),
                            ratio,
                            policy.report(&rates, stop, "rate_fps"),
                        ));
                    }
                    throughput.push(r);
                }
            }
        }
        if want("latency") {
            let mut out = Vec::new();
            for size in &a.sizes {
                // The throughput found with the least loss allowed (the
                // NDR when searched), else the maximum rate.
                let base = throughput
                    .iter()
                    .filter(|t| &t.frame_size == size)
                    .min_by(|a, b| a.loss_allowed.total_cmp(&b.loss_allowed))
                    .map_or_else(|| settings.max_fps(size), |t| t.rate_fps);
                for &load in &a.latency_load {
                    let rate = (base * load).round().max(1.0);
                    let spec = rfc2544::TrialSpec {
                        frame_size: size.clone(),
                        rate_fps: rate,
                        duration: Duration::from_secs_f64(a.latency_time.max(0.1)),
                        frames: None,
                    };
                    let t = rfc2544::trial(&mut runner, &spec, 1.0, settings.offered_min)?;
                    log(&t, &mut run);
                    out.push(rfc2544::Latency {
                        frame_size: size.clone(),
                        load,
                        rate_fps: rate,
                        trial: t,
                    });
                }
            }
            doc["latency"] = serde_json::to_value(&out).unwrap_or_default();
            let _ = writeln!(
                text,
                "\nLatency (one-way, same-host clock{})\n{:>7} {:>6} {:>14} {:>10} {:>10} {:>10} {:>10} {:>10}",
                if a.bidir { "; tx->rx direction" } else { "" },
                "size",
                "load",
                "rate fps",
                "min us",
                "mean us",
                "p50 us",
                "p99 us",
                "max us"
            );
            for l in &out {
                let v = l.trial.latency_ns.unwrap_or([f64::NAN; 5]);
                let _ = writeln!(
                    text,
                    "{:>7} {:>5.0}% {:>14.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                    size_label(&l.frame_size),
                    l.load * 100.0,
                    l.rate_fps,
                    v[0] / 1e3,
                    v[1] / 1e3,
                    v[2] / 1e3,
                    v[3] / 1e3,
                    v[4] / 1e3
                );
            }
        }
        if want("loss") {
            let mut out = Vec::new();
            for size in &a.sizes {
                out.extend(rfc2544::frame_loss(
                    &mut runner,
                    size,
                    &settings,
                    &mut |t| log(t, &mut run),
                )?);
            }
            let _ = writeln!(
                text,
                "\nFrame loss rate\n{:>7} {:>6} {:>14} {:>12}",
                "size", "load", "rate fps", "loss %"
            );
            for s in &out {
                let _ = writeln!(
                    text,
                    "{:>7} {:>5.0}% {:>14.0} {:>12.6}",
                    size_label(&s.frame_size),
                    s.load * 100.0,
                    s.rate_fps,
                    s.loss_ratio * 100.0
                );
            }
            doc["frame_loss"] = serde_json::to_value(&out).unwrap_or_default();
        }
        if want("back-to-back") {
            let mut out = Vec::new();
            for size in &a.sizes {
                let max_burst = (settings.max_fps(size) * a.b2b_max).round().max(1.0) as u64;
                out.push(rfc2544::back_to_back(
                    &mut runner,
                    size,
                    max_burst,
                    a.b2b_repeats,
                    &settings,
                    &mut |t| log(t, &mut run),
                )?);
            }
            let _ = writeln!(
                text,
                "\nBack-to-back (at the maximum rate)\n{:>7} {:>14} {:>14} bursts",
                "size", "rate fps", "mean burst"
            );
            for b in &out {
                let _ = writeln!(
                    text,
                    "{:>7} {:>14.0} {:>14.1} {:?}",
                    size_label(&b.frame_size),
                    b.rate_fps,
                    b.mean_burst,
                    b.bursts
                );
            }
            doc["back_to_back"] = serde_json::to_value(&out).unwrap_or_default();
        }
        Ok(())
    })();
    if !throughput.is_empty() {
        let mut t = format!(
            "Throughput ({} s trials; rates as offered and received without loss above the allowed ratio{})\n{:>7} {:>9} {:>14} {:>14} {:>14} {:>9} {:>12} {:>7}\n",
            a.trial_time,
            if a.bidir {
                "; per direction, both ways at once"
            } else {
                ""
            },
            "size",
            "loss ok",
            "rate fps",
            "L1 Mbit/s",
            "L2 Mbit/s",
            "% of max",
            "loss %",
            "trials"
        );
        for r in &throughput {
            let _ = writeln!(
                t,
                "{:>7} {:>8}% {:>14.0} {:>14.2} {:>14.2} {:>8.1}% {:>12.6} {:>7}",
                size_label(&r.frame_size),
                r.loss_allowed * 100.0,
                r.rate_fps,
                r.rate_l1_bps / 1e6,
                r.rate_l2_bps / 1e6,
                r.of_max * 100.0,
                r.loss_ratio * 100.0,
                r.trials.len()
            );
        }
        for (size, ratio, rep) in &repeats {
            let s = &rep["statistics"];
            let _ = writeln!(
                t,
                "{:>7} {:>8}% repeated: {} runs, mean {:.0} fps, stdev {:.0}, {:.0}% CI ±{:.0} fps, stopped: {}",
                size_label(size),
                ratio * 100.0,
                rep["values"].as_array().map_or(0, Vec::len),
                s["mean"].as_f64().unwrap_or(f64::NAN),
                s["stdev"].as_f64().unwrap_or(f64::NAN),
                rep["confidence"].as_f64().unwrap_or(0.0) * 100.0,
                s["half_width"].as_f64().unwrap_or(f64::NAN),
                rep["stop"].as_str().unwrap_or("")
            );
        }
        text = t + &text;
        let mut tp = serde_json::to_value(&throughput).unwrap_or_default();
        if let Some(arr) = tp.as_array_mut() {
            for e in arr.iter_mut() {
                let key = (&e["frame_size"], e["loss_allowed"].as_f64());
                if let Some((_, _, rep)) = repeats.iter().find(|(s, r, _)| {
                    (&serde_json::to_value(s).unwrap_or_default(), Some(*r)) == key
                }) {
                    e["repeat"] = rep.clone();
                }
            }
        }
        doc["throughput"] = tp;
    }
    let error = outcome.err();
    if let Some(e) = &error {
        doc["error"] = serde_json::json!(e);
        let _ = writeln!(
            text,
            "linerate: rfc2544 stopped: {e} (the results above stand)"
        );
    }
    let code = run.end(
        t0.elapsed().as_secs_f64(),
        Vec::new(),
        doc,
        text,
        error.as_deref(),
    );
    Ok(code)
}

/// A frame size for the tables: `64`, `imix`.
fn size_label(s: &FrameSize) -> String {
    match s {
        FrameSize::Fixed(n) => n.to_string(),
        FrameSize::Mix { name, .. } => name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trial_log_line_puts_each_figure_in_its_place() {
        let mut t = Trial {
            frame_size: FrameSize::Fixed(64),
            asked_fps: 1000.0,
            offered_fps: 999.0,
            sent: 1000,
            received: 990,
            sent_bytes: 64_000,
            received_bytes: 63_360,
            loss_ratio: 0.01,
            passed: false,
            reason: Some("loss".into()),
            latency_ns: None,
            rx_iface_packets: None,
            directions: None,
        };
        assert_eq!(
            trial_line(&t),
            "   64 B  asked         1000 fps  offered          999 fps  sent       1000  received        990  loss 1.000000%  fail (loss)"
        );
        let d = rfc2544::Direction {
            sent: 500,
            received: 495,
            offered_fps: 999.0,
            loss_ratio: 0.01,
        };
        t.directions = Some([d, d]);
        assert!(
            trial_line(&t).starts_with("   64 B  asked         1000 fps each way  offered "),
            "{}",
            trial_line(&t)
        );
    }
}
