//! RFC 2544 benchmarks through a device under test: throughput (binary
//! search for the highest rate whose trial loses no more than a ratio: NDR
//! at 0, PDR above), latency at a rate, the frame loss rate curve, and
//! back-to-back bursts.
//!
//! The searches are written against [`TrialRunner`] (one trial: send at a
//! rate for a time, count what came back), so their bookkeeping is tested
//! with a simulated device; [`DeviceRunner`] runs trials with blast on one
//! port and sink on the other.

use crate::blast::{BlastConfig, Rate, blast};
use crate::sink::{SinkConfig, sink};
use linerate_gen::{FlowSpec, SizeSequence};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One trial as it was run and judged.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Trial {
    pub frame_size: u16,
    /// The rate asked for, frames/s.
    pub asked_fps: f64,
    /// The rate actually offered: frames sent / the time sending took.
    pub offered_fps: f64,
    /// Frames sent (sender's count) and received (the receiving port's
    /// count of probe frames).
    pub sent: u64,
    pub received: u64,
    pub loss_ratio: f64,
    pub passed: bool,
    /// Why it failed: "loss", "offered load not reached".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// min, mean, p50, p99, max one-way latency (ns), where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<[f64; 5]>,
    /// Frames the receiving interface counted in the trial (its kernel
    /// counter: every frame, probes or not), to reconcile `received` with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_iface_packets: Option<u64>,
}

/// What a trial is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct TrialSpec {
    pub frame_size: u16,
    pub rate_fps: f64,
    pub duration: Duration,
    /// Back-to-back: send exactly this many frames at `rate_fps`.
    pub frames: Option<u64>,
}

/// What one trial counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialCounts {
    /// Frames sent (the sender's count) and received (the receiving port's).
    pub sent: u64,
    pub received: u64,
    /// The time the sending took, s.
    pub secs: f64,
    /// min, mean, p50, p99, max one-way latency (ns), where measured.
    pub latency_ns: Option<[f64; 5]>,
    /// The receiving interface's own count over the trial.
    pub rx_iface_packets: Option<u64>,
}

/// Runs one trial: sends, counts, reports.
pub trait TrialRunner {
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialCounts, String>;
}

/// The searches' settings.
pub struct Settings {
    /// The highest rate tried (line rate, or --max-rate), frames/s per size.
    pub max_fps: Box<dyn Fn(u16) -> f64 + Send + Sync>,
    pub trial_time: Duration,
    /// Stop when the search interval is narrower than this share of the
    /// maximum rate.
    pub resolution: f64,
    /// A trial whose offered rate is below this share of the asked rate
    /// fails ("offered load not reached").
    pub offered_min: f64,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("trial_time", &self.trial_time)
            .field("resolution", &self.resolution)
            .field("offered_min", &self.offered_min)
            .finish_non_exhaustive()
    }
}

/// Runs and judges one trial.
pub fn trial(
    runner: &mut dyn TrialRunner,
    spec: &TrialSpec,
    loss_allowed: f64,
    offered_min: f64,
) -> Result<Trial, String> {
    let TrialCounts {
        sent,
        received,
        secs,
        latency_ns,
        rx_iface_packets,
    } = runner.run(spec)?;
    let offered_fps = if secs > 0.0 { sent as f64 / secs } else { 0.0 };
    let lost = sent.saturating_sub(received);
    let loss_ratio = if sent > 0 {
        lost as f64 / sent as f64
    } else {
        1.0
    };
    let expected = spec
        .frames
        .unwrap_or_else(|| (spec.rate_fps * spec.duration.as_secs_f64()).round() as u64);
    let reason = if sent < expected || offered_fps < spec.rate_fps * offered_min {
        Some("offered load not reached".to_string())
    } else if loss_ratio > loss_allowed {
        Some("loss".to_string())
    } else {
        None
    };
    Ok(Trial {
        frame_size: spec.frame_size,
        asked_fps: spec.rate_fps,
        offered_fps,
        sent,
        received,
        loss_ratio,
        passed: reason.is_none(),
        reason,
        latency_ns,
        rx_iface_packets,
    })
}

/// The throughput search's outcome for one frame size and loss ratio.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub frame_size: u16,
    /// The loss ratio allowed (0: NDR).
    pub loss_allowed: f64,
    /// The highest rate that passed, frames/s (0 if none did).
    pub rate_fps: f64,
    pub rate_l1_bps: f64,
    pub rate_l2_bps: f64,
    /// Loss of the trial that set the rate.
    pub loss_ratio: f64,
    /// Share of the maximum rate searched.
    pub of_max: f64,
    pub trials: Vec<Trial>,
}

/// L1 and L2 bit/s of `fps` frames of `size` bytes (FCS included; L1 adds
/// preamble, SFD and the inter-frame gap: 20 bytes).
pub fn bits(fps: f64, size: u16) -> (f64, f64) {
    (
        fps * f64::from(size + 20) * 8.0,
        fps * f64::from(size) * 8.0,
    )
}

/// RFC 2544 26.1, binary search: the first trial at the maximum; then
/// halving between the highest pass and the lowest failure until they are
/// closer than the resolution. `on_trial` sees each trial as it ends.
pub fn throughput(
    runner: &mut dyn TrialRunner,
    size: u16,
    loss_allowed: f64,
    s: &Settings,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<Throughput, String> {
    let max = (s.max_fps)(size);
    let step = (max * s.resolution).max(1.0);
    let (mut lo, mut hi) = (0.0f64, max);
    let mut best: Option<Trial> = None;
    let mut trials = Vec::new();
    let mut rate = max;
    loop {
        let t = trial(
            runner,
            &TrialSpec {
                frame_size: size,
                rate_fps: rate,
                duration: s.trial_time,
                frames: None,
            },
            loss_allowed,
            s.offered_min,
        )?;
        on_trial(&t);
        if t.passed {
            lo = rate;
            best = Some(t.clone());
        } else {
            hi = rate;
        }
        trials.push(t);
        if lo >= max || hi - lo <= step {
            break;
        }
        rate = ((lo + hi) / 2.0).round();
    }
    let rate_fps = best
        .as_ref()
        .map_or(0.0, |b| b.offered_fps.min(b.asked_fps));
    let (l1, l2) = bits(rate_fps, size);
    Ok(Throughput {
        frame_size: size,
        loss_allowed,
        rate_fps,
        rate_l1_bps: l1,
        rate_l2_bps: l2,
        loss_ratio: best.as_ref().map_or(1.0, |b| b.loss_ratio),
        of_max: rate_fps / max,
        trials,
    })
}

/// Latency at a rate: one trial of `time`, its latency figures.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub frame_size: u16,
    pub rate_fps: f64,
    pub trial: Trial,
}

/// One step of the frame loss rate curve.
#[derive(Debug, Clone, Serialize)]
pub struct FrameLossStep {
    pub frame_size: u16,
    /// Share of the maximum rate.
    pub load: f64,
    pub rate_fps: f64,
    pub loss_ratio: f64,
    pub trial: Trial,
}

/// RFC 2544 26.3: loss at 100%, 90%, … of the maximum rate until two
/// successive steps lose nothing.
pub fn frame_loss(
    runner: &mut dyn TrialRunner,
    size: u16,
    s: &Settings,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<Vec<FrameLossStep>, String> {
    let max = (s.max_fps)(size);
    let mut out: Vec<FrameLossStep> = Vec::new();
    for tenth in (1..=10).rev() {
        let load = f64::from(tenth) / 10.0;
        let rate = (max * load).round();
        let t = trial(
            runner,
            &TrialSpec {
                frame_size: size,
                rate_fps: rate,
                duration: s.trial_time,
                frames: None,
            },
            1.0,
            s.offered_min,
        )?;
        on_trial(&t);
        out.push(FrameLossStep {
            frame_size: size,
            load,
            rate_fps: rate,
            loss_ratio: t.loss_ratio,
            trial: t,
        });
        let n = out.len();
        if n >= 2 && out[n - 1].loss_ratio == 0.0 && out[n - 2].loss_ratio == 0.0 {
            break;
        }
    }
    Ok(out)
}

/// RFC 2544 26.4: the longest burst at the maximum rate that passes with
/// no loss (binary search on its length), found `repeats` times.
#[derive(Debug, Clone, Serialize)]
pub struct BackToBack {
    pub frame_size: u16,
    pub rate_fps: f64,
    /// The longest lossless burst of each repetition, frames.
    pub bursts: Vec<u64>,
    pub mean_burst: f64,
    pub trials: Vec<Trial>,
}

pub fn back_to_back(
    runner: &mut dyn TrialRunner,
    size: u16,
    max_burst: u64,
    repeats: usize,
    s: &Settings,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<BackToBack, String> {
    let rate = (s.max_fps)(size);
    let mut bursts = Vec::new();
    let mut trials = Vec::new();
    for _ in 0..repeats.max(1) {
        let (mut lo, mut hi) = (0u64, max_burst + 1);
        let mut n = max_burst;
        while hi - lo > 1 {
            let secs = n as f64 / rate;
            let t = trial(
                runner,
                &TrialSpec {
                    frame_size: size,
                    rate_fps: rate,
                    duration: Duration::from_secs_f64(secs),
                    frames: Some(n),
                },
                0.0,
                0.0,
            )?;
            on_trial(&t);
            if t.passed {
                lo = n;
            } else {
                hi = n;
            }
            trials.push(t);
            n = (lo + hi) / 2;
        }
        bursts.push(lo);
    }
    let mean_burst = bursts.iter().sum::<u64>() as f64 / bursts.len() as f64;
    Ok(BackToBack {
        frame_size: size,
        rate_fps: rate,
        bursts,
        mean_burst,
        trials,
    })
}

/// Trials on real ports: sink on `rx_iface` (in a thread), blast on
/// `tx_iface`, a drain wait after the last frame for what the device
/// still holds.
#[derive(Debug, Clone)]
pub struct DeviceRunner {
    pub tx_iface: String,
    pub rx_iface: String,
    pub flows: FlowSpec,
    pub backend: crate::backend::BackendKind,
    pub drain: Duration,
    /// Sender and receiver on one host: latency is measured.
    pub clocks_shared: bool,
    pub stop: std::sync::Arc<AtomicBool>,
    /// Traffic at the trial's rate before each trial, not counted (RFC
    /// 2544's learning / warm-up), followed by the drain wait.
    pub warmup: Duration,
}

fn rx_packets(iface: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/statistics/rx_packets"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl TrialRunner for DeviceRunner {
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialCounts, String> {
        if self.stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let count = spec
            .frames
            .unwrap_or_else(|| (spec.rate_fps * spec.duration.as_secs_f64()).round() as u64)
            .max(1);
        let scfg = SinkConfig {
            iface: self.rx_iface.clone(),
            duration: spec.duration + self.drain + Duration::from_secs(30),
            backend: self.backend,
            clocks_shared: self.clocks_shared,
            until_packets: None,
            capture: None,
            cores: Vec::new(),
            interval: None,
            take: crate::backend::RxFilter::Udp(None),
        };
        let bcfg = BlastConfig {
            iface: self.tx_iface.clone(),
            flows: self.flows.clone(),
            sizes: SizeSequence::list(&[spec.frame_size]),
            framing: linerate_gen::Framing::default(),
            count: Some(count),
            duration: spec.duration + Duration::from_secs(30),
            rate: Rate::Pps(spec.rate_fps.round().max(1.0) as u64),
            burst: 1,
            backend: self.backend,
            cores: Vec::new(),
            replay: None,
            macs_given: true,
            gso: crate::udp::Gso::Off,
            interval: None,
            end_markers: false,
        };
        if !self.warmup.is_zero() {
            let mut w = bcfg.clone();
            w.count = Some((spec.rate_fps * self.warmup.as_secs_f64()).round().max(1.0) as u64);
            blast(&w, &self.stop, &mut |_| {})
                .map_err(|e| format!("warm-up on {}: {e}", self.tx_iface))?;
            std::thread::sleep(self.drain);
        }
        let sink_stop = AtomicBool::new(false);
        let rx_before = rx_packets(&self.rx_iface);
        std::thread::scope(|sc| {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let sink_stop = &sink_stop;
            let scfg = &scfg;
            let h = sc.spawn(move || {
                sink(
                    scfg,
                    sink_stop,
                    &mut |_| {
                        let _ = ready_tx.send(());
                    },
                    &mut |_| {},
                )
            });
            if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
                sink_stop.store(true, Ordering::Relaxed);
                return Err(match h.join() {
                    Ok(Err(e)) => format!("receiving on {}: {e}", self.rx_iface),
                    _ => format!("receiving on {}: not ready in 10 s", self.rx_iface),
                });
            }
            let sent = blast(&bcfg, &self.stop, &mut |_| {});
            std::thread::sleep(self.drain);
            sink_stop.store(true, Ordering::Relaxed);
            let got = h
                .join()
                .map_err(|_| "the receiving thread failed".to_string())?;
            let b = sent.map_err(|e| format!("sending on {}: {e}", self.tx_iface))?;
            let r = got.map_err(|e| format!("receiving on {}: {e}", self.rx_iface))?;
            let lat = r.counts.latency_percentiles().map(|p| {
                let h = &r.counts.latency_ns;
                [
                    h.min() as f64,
                    h.mean(),
                    p[0] as f64,
                    p[2] as f64,
                    p[4] as f64,
                ]
            });
            // The time sending took, from the pacer's own record of its
            // send calls (gaps x calls): the worker's set-up before the
            // first frame is not time at the asked rate.
            let secs = b
                .pacing
                .iter()
                .map(|(d, _)| d.mean_gap_ns * d.calls as f64 / 1e9)
                .fold(0.0, f64::max);
            let secs = if secs > 0.0 { secs } else { b.duration_s };
            let rx_iface_packets = rx_before
                .zip(rx_packets(&self.rx_iface))
                .map(|(a, b)| b.saturating_sub(a));
            Ok(TrialCounts {
                sent: b.packets,
                received: r.counts.packets,
                secs,
                latency_ns: lat,
                rx_iface_packets,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that forwards up to `capacity` frames/s with a queue of
    /// `queue` frames, and a generator that reaches `gen_max` frames/s.
    struct Sim {
        capacity: f64,
        queue: f64,
        gen_max: f64,
        trials: usize,
    }

    impl TrialRunner for Sim {
        fn run(&mut self, s: &TrialSpec) -> Result<TrialCounts, String> {
            self.trials += 1;
            let secs = s.duration.as_secs_f64();
            let want = s.frames.unwrap_or((s.rate_fps * secs).round() as u64);
            let offered = s.rate_fps.min(self.gen_max);
            let took = want as f64 / offered;
            let passed_through = (self.capacity * took + self.queue).min(want as f64);
            Ok(TrialCounts {
                sent: want,
                received: passed_through as u64,
                secs: took,
                latency_ns: None,
                rx_iface_packets: None,
            })
        }
    }

    fn settings(max: f64) -> Settings {
        Settings {
            max_fps: Box::new(move |_| max),
            trial_time: Duration::from_secs(1),
            resolution: 0.01,
            offered_min: 0.99,
        }
    }

    #[test]
    fn the_search_finds_capacity_with_monotone_bounds_in_few_trials() {
        let mut sim = Sim {
            capacity: 41_666.0,
            queue: 0.0,
            gen_max: 1e9,
            trials: 0,
        };
        let s = settings(100_000.0);
        let r = throughput(&mut sim, 64, 0.0, &s, &mut |_| {}).unwrap();
        assert!((r.rate_fps - 41_666.0).abs() <= 1_000.0, "{}", r.rate_fps);
        assert!(r.rate_fps <= 41_666.0, "NDR above capacity: {}", r.rate_fps);
        // Bounds: every pass below every later failure, and vice versa.
        let (mut lo, mut hi) = (0.0f64, f64::MAX);
        for t in &r.trials {
            assert!(
                t.asked_fps > lo && t.asked_fps < hi || t.asked_fps == 100_000.0,
                "{t:?}"
            );
            if t.passed {
                lo = t.asked_fps
            } else {
                hi = t.asked_fps
            }
        }
        let bound = (1.0f64 / 0.01).log2().ceil() as usize + 2;
        assert!(
            r.trials.len() <= bound,
            "{} trials > {bound}",
            r.trials.len()
        );
        assert_eq!(sim.trials, r.trials.len());
        // PDR: a 1% loss allowance moves the target to capacity / 0.99.
        let pdr = throughput(&mut sim, 64, 0.01, &s, &mut |_| {}).unwrap();
        let target = 41_666.0 / 0.99;
        assert!(
            pdr.rate_fps >= r.rate_fps,
            "{} < {}",
            pdr.rate_fps,
            r.rate_fps
        );
        assert!(
            (pdr.rate_fps - target).abs() <= 1_000.0 && pdr.rate_fps <= target,
            "{}",
            pdr.rate_fps
        );
        assert!(pdr.loss_ratio <= 0.01, "{}", pdr.loss_ratio);
    }

    #[test]
    fn a_generator_short_of_the_rate_fails_the_trial() {
        // The device takes everything; the generator reaches 30k fps only.
        let mut sim = Sim {
            capacity: 1e9,
            queue: 0.0,
            gen_max: 30_000.0,
            trials: 0,
        };
        let r = throughput(&mut sim, 64, 0.0, &settings(100_000.0), &mut |_| {}).unwrap();
        assert!(
            r.rate_fps <= 30_000.0 && r.rate_fps > 28_000.0,
            "{}",
            r.rate_fps
        );
        let failed = r.trials.iter().find(|t| !t.passed).unwrap();
        assert_eq!(failed.reason.as_deref(), Some("offered load not reached"));
        assert_eq!(
            failed.loss_ratio, 0.0,
            "it failed for its offered load, not loss"
        );
    }

    #[test]
    fn frame_loss_steps_down_until_two_clean_steps_and_is_monotone() {
        let mut sim = Sim {
            capacity: 55_000.0,
            queue: 0.0,
            gen_max: 1e9,
            trials: 0,
        };
        let steps = frame_loss(&mut sim, 64, &settings(100_000.0), &mut |_| {}).unwrap();
        let loads: Vec<f64> = steps.iter().map(|s| s.load).collect();
        assert_eq!(loads, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]);
        assert!(steps.windows(2).all(|w| w[0].loss_ratio >= w[1].loss_ratio));
        assert!((steps[0].loss_ratio - 0.45).abs() < 1e-3);
    }

    #[test]
    fn back_to_back_finds_the_queue_depth() {
        // At 100k fps into 10k fps capacity, a burst of n frames takes
        // n/100k s; the device passes 10k * that + a 500-frame queue.
        let mut sim = Sim {
            capacity: 10_000.0,
            queue: 500.0,
            gen_max: 1e9,
            trials: 0,
        };
        let b = back_to_back(&mut sim, 64, 10_000, 2, &settings(100_000.0), &mut |_| {}).unwrap();
        // n <= 0.1 n + 500  =>  n <= 555.
        assert_eq!(b.bursts, vec![555, 555]);
        assert_eq!(b.mean_burst, 555.0);
    }
}
