//! RFC 2544 benchmarks through a device under test: throughput (binary
//! search for the highest rate whose trial loses no more than a ratio: NDR
//! at 0, PDR above), latency at a rate, the frame loss rate curve, and
//! back-to-back bursts.
//!
//! The searches are written against [`TrialRunner`] (one trial: send at a
//! rate for a time, count what came back), so their bookkeeping is tested
//! with a simulated device; [`DeviceRunner`] runs trials with blast on one
//! port and sink on the other (and, with `reverse`, the same the other
//! way at once: RFC 2544's bidirectional test).

use crate::blast;
use crate::{BlastConfig, Rate};
use crate::{SinkConfig, SinkReport};
use linerate_calc::Imix;
use linerate_traffic::pacing::{CatchUp, Shape};
use linerate_traffic::{FlowSpec, SizeSequence};
use serde::{Deserialize, Serialize, Serializer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod device;
mod search;

pub use device::DeviceRunner;
pub(crate) use device::{rx_packets, trial_sink};
pub use search::{
    BackToBack, FrameLossStep, Latency, Throughput, back_to_back, bits, frame_loss, throughput,
    throughput_resumed, trials_left,
};

/// A test's frame size, FCS included: one size, or a mix (IMIX) whose
/// sizes are sent interleaved; in JSON a number, or the mix's name.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameSize {
    Fixed(u16),
    Mix {
        name: String,
        mix: Imix,
    },
    /// A traffic profile's frames (`rfc2544 --profile`): their mean size
    /// at the profile's own rates.
    Profile {
        name: String,
        mean_bytes: f64,
    },
}

impl FrameSize {
    /// `64`, `imix` (7:4:1 of 64/594/1518), or `imix:64:7/594:4/1518:1`.
    pub fn parse(s: &str) -> Result<FrameSize, String> {
        let s = s.trim();
        let lower = s.to_ascii_lowercase();
        if lower == "imix" {
            return Ok(FrameSize::Mix {
                name: "imix".into(),
                mix: Imix::simple(),
            });
        }
        if let Some(spec) = lower.strip_prefix("imix:") {
            let mix = Imix::parse(&spec.replace('/', ",")).map_err(|e| format!("{s}: {e}"))?;
            return Ok(FrameSize::Mix {
                name: lower.clone(),
                mix,
            });
        }
        match s.parse::<u16>() {
            Ok(n) if (64..=9216).contains(&n) => Ok(FrameSize::Fixed(n)),
            _ => Err(format!(
                "'{s}' is not a frame size (64 to 9216, imix, or imix:64:7/594:4/1518:1)"
            )),
        }
    }

    /// The mean frame size, bytes (L2 with FCS).
    pub fn mean(&self) -> f64 {
        match self {
            FrameSize::Fixed(n) => f64::from(*n),
            FrameSize::Mix { mix, .. } => mix.average_frame_bytes(),
            FrameSize::Profile { mean_bytes, .. } => *mean_bytes,
        }
    }

    /// The sizes blast sends in turn (a profile's: its mean, which only
    /// its own runner's trials send).
    pub fn sequence(&self) -> SizeSequence {
        match self {
            FrameSize::Fixed(n) => SizeSequence::list(&[*n]),
            FrameSize::Mix { mix, .. } => SizeSequence::from_mix(mix),
            FrameSize::Profile { mean_bytes, .. } => {
                SizeSequence::list(&[mean_bytes.round().clamp(64.0, 9216.0) as u16])
            }
        }
    }
}

impl FrameSize {
    /// A trial read back from a document before its size is given.
    fn unnamed() -> FrameSize {
        FrameSize::Fixed(0)
    }
}

impl std::fmt::Display for FrameSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameSize::Fixed(n) => write!(f, "{n} B"),
            FrameSize::Mix { name, .. } | FrameSize::Profile { name, .. } => f.write_str(name),
        }
    }
}

impl From<u16> for FrameSize {
    fn from(n: u16) -> Self {
        FrameSize::Fixed(n)
    }
}

impl Serialize for FrameSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FrameSize::Fixed(n) => s.serialize_u16(*n),
            FrameSize::Mix { name, .. } | FrameSize::Profile { name, .. } => s.serialize_str(name),
        }
    }
}

/// The highest rate a search tries: frames/s, or an L1 bit rate (the
/// port's speed, or --max-rate in bit/s) that depends on the frame size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxRate {
    Fps(f64),
    L1Bps(f64),
}

impl MaxRate {
    /// Frames/s for this frame size.
    pub fn fps(&self, size: &FrameSize) -> f64 {
        match *self {
            MaxRate::Fps(f) => f,
            MaxRate::L1Bps(b) => b / (8.0 * (size.mean() + 20.0)),
        }
    }
}

/// One direction of a bidirectional trial.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Direction {
    pub sent: u64,
    pub received: u64,
    pub offered_fps: f64,
    /// The rate frames came out of the device: received over the time
    /// they arrived in (the offered rate where unknown).
    pub forwarded_fps: f64,
    pub loss_ratio: f64,
}

/// One trial as it was run and judged (read back from a document by
/// `--resume`, which gives it its frame size: a document has the size's
/// name only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Trial {
    #[serde(skip_deserializing, default = "FrameSize::unnamed")]
    pub frame_size: FrameSize,
    /// The rate asked for, frames/s.
    pub asked_fps: f64,
    /// The rate actually offered: frames sent / the time sending took.
    pub offered_fps: f64,
    /// The rate the device forwarded: frames received / the time they
    /// arrived in, first to last (a device that queues what it cannot
    /// forward spreads them over more time than they were sent in).
    pub forwarded_fps: f64,
    /// Frames sent (sender's count) and received (the receiving port's
    /// count of probe frames), both directions together when
    /// bidirectional; bytes likewise (L2, FCS included).
    pub sent: u64,
    pub received: u64,
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// The loss ratio judged: the worse direction's when bidirectional.
    pub loss_ratio: f64,
    pub passed: bool,
    /// Why it failed: "loss", or for a back-to-back burst "offered load
    /// not reached" (the burst was not sent whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The sender offered, or the device forwarded, less than asked
    /// (below `offered_min` of it): the device, or a shaper or paused link
    /// on the way, took frames no faster (or queued what it could not
    /// forward), or this host could not send faster. A pass is judged at
    /// the lower of the two rates: without loss the device passed that.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_back: bool,
    /// min, mean, p50, p99, max one-way latency (ns), where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<[f64; 5]>,
    /// Frames the receiving interface counted in the trial (its kernel
    /// counter: every frame, probes or not), to reconcile `received` with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_iface_packets: Option<u64>,
    /// Bidirectional: each direction's counts (tx->rx first). The rates
    /// asked and offered are per direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directions: Option<[Direction; 2]>,
    /// How the sender kept the trial's schedule (its own clock; both
    /// directions merged): late wake-ups, catch-up bursts, skipped
    /// departures. `None`: not measured (an unpaced or profile sender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<TrialShape>,
    /// This host spoiled the trial (its departures broke their shape by
    /// more than the bound): why. Such a trial says nothing of the device:
    /// it is not scored, and the search runs it again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoiled: Option<String>,
    /// Cut short by a stop (SIGINT, SIGTERM): what it counted says nothing
    /// of the device; not scored, and the campaign ends after it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// A trial's [`Shape`] as `-J` has it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct TrialShape {
    pub measured_by: &'static str,
    pub catch_up: &'static str,
    pub late_wakeups: u64,
    pub max_late_us: f64,
    /// Frames sent back to back beyond the schedule after a late wake-up.
    pub max_burst: u64,
    /// Departures a late sender skipped: not offered, not in `sent`.
    pub skipped: u64,
    /// The bound: frames beyond the schedule's burst a trial may send at once.
    pub burst_tolerance: u32,
}

/// The one `measured_by` a trial's shape has.
const SHAPE_MEASURED_BY: &str = "sender, its own clock against its schedule";

/// A [`TrialShape`] as a document has it (read back by `--resume`).
#[derive(Deserialize)]
struct TrialShapeIn {
    measured_by: String,
    catch_up: String,
    late_wakeups: u64,
    max_late_us: f64,
    max_burst: u64,
    skipped: u64,
    burst_tolerance: u32,
}

impl TryFrom<TrialShapeIn> for TrialShape {
    type Error = String;

    fn try_from(s: TrialShapeIn) -> Result<Self, String> {
        Ok(TrialShape {
            measured_by: one_of(&s.measured_by, &[SHAPE_MEASURED_BY])?,
            catch_up: one_of(&s.catch_up, &[CatchUp::Skip.name(), CatchUp::Burst.name()])?,
            late_wakeups: s.late_wakeups,
            max_late_us: s.max_late_us,
            max_burst: s.max_burst,
            skipped: s.skipped,
            burst_tolerance: s.burst_tolerance,
        })
    }
}

impl<'de> Deserialize<'de> for TrialShape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        TrialShapeIn::deserialize(d)?
            .try_into()
            .map_err(serde::de::Error::custom)
    }
}

/// `s`, which must be one of `known` (as the `'static` one).
fn one_of(s: &str, known: &[&'static str]) -> Result<&'static str, String> {
    (known.iter().find(|k| **k == s).copied())
        .ok_or_else(|| format!("'{s}' is not one of {known:?}"))
}

impl TrialShape {
    fn of(s: &Shape, pace: &Pace, size: &FrameSize) -> TrialShape {
        TrialShape {
            measured_by: SHAPE_MEASURED_BY,
            catch_up: pace.catch_up.name(),
            late_wakeups: s.late_wakeups,
            max_late_us: s.max_late_ns as f64 / 1e3,
            max_burst: s.max_burst,
            skipped: s.skipped,
            burst_tolerance: pace.tolerance(size),
        }
    }
}

/// How a trial's sender keeps its schedule and what spoils a trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// What a late sender does with the departures that fell due.
    pub catch_up: CatchUp,
    /// Frames beyond the schedule's burst (one frame) that a late wake-up
    /// may send at once: the bound on a trial's shape. Under `Burst` a
    /// bigger catch-up spoils the trial; under `Skip` the rest are skipped.
    /// `None`: [`Pace::tolerance`]'s default for the frame size.
    pub burst_tolerance: Option<u32>,
    /// Trials in a row this host may spoil before the search gives up
    /// with an error naming the host's load.
    pub spoiled_max: u32,
}

impl Default for Pace {
    /// rfc2544's: skip what a late sender missed, a burst of at most
    /// [`TOLERANCE_BYTES`] beyond the schedule, 5 spoiled trials in a row
    /// at most.
    fn default() -> Self {
        Pace {
            catch_up: CatchUp::Skip,
            burst_tolerance: None,
            spoiled_max: 5,
        }
    }
}

/// The default bound on a catch-up burst, in bytes: four full-size
/// Ethernet frames (6 KB; a device's buffer is counted in bytes, and any
/// device holds this much), at least 4 frames of any size.
pub const TOLERANCE_BYTES: f64 = 4.0 * 1518.0;

impl Pace {
    /// The bound in frames for `size`: the one given, else as many frames
    /// as fit in [`TOLERANCE_BYTES`] (4 of 1518 B, 94 of 64 B), at least 4.
    pub fn tolerance(&self, size: &FrameSize) -> u32 {
        self.burst_tolerance
            .unwrap_or_else(|| ((TOLERANCE_BYTES / size.mean().max(1.0)).floor() as u32).max(4))
    }
}

/// What a trial is asked to do.
#[derive(Debug, Clone)]
pub struct TrialSpec {
    pub frame_size: FrameSize,
    pub rate_fps: f64,
    pub duration: Duration,
    /// Back-to-back: send exactly this many frames at `rate_fps`.
    pub frames: Option<u64>,
    /// How the sender keeps the schedule, and what spoils the trial.
    pub pace: Pace,
}

/// What one trial counted (one direction; `reverse` the other when
/// bidirectional).
#[derive(Debug, Clone, PartialEq)]
pub struct TrialCounts {
    /// Frames sent (the sender's count) and received (the receiving port's).
    pub sent: u64,
    pub received: u64,
    /// Their bytes, L2 with FCS.
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// The time the sending took, s.
    pub secs: f64,
    /// The time the frames arrived in, first to last, s (0: unknown).
    pub rx_secs: f64,
    /// min, mean, p50, p99, max one-way latency (ns), where measured.
    pub latency_ns: Option<[f64; 5]>,
    /// The receiving interface's own count over the trial.
    pub rx_iface_packets: Option<u64>,
    /// Bidirectional: the other direction's counts.
    pub reverse: Option<Box<TrialCounts>>,
    /// How the sender kept its schedule (`None`: not measured).
    pub shape: Option<Shape>,
}

/// Runs one trial: sends, counts, reports.
pub trait TrialRunner {
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialCounts, String>;
    /// A stop (SIGINT, SIGTERM) was asked: the trial that ran last was
    /// cut short, and no more should run.
    fn interrupted(&self) -> bool {
        false
    }
}

/// The searches' settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The highest rate tried (line rate, or --max-rate).
    pub max_rate: MaxRate,
    pub trial_time: Duration,
    /// Stop when the search interval is narrower than this share of its
    /// upper bound (of the rate found, as the search closes in).
    pub resolution: f64,
    /// A trial whose offered rate is below this share of the asked rate
    /// was held back ([`Trial::held_back`]): judged at what it offered.
    pub offered_min: f64,
    /// Most trials one throughput search runs (it reports whether it
    /// closed in on the rate before; spoiled trials are not counted).
    pub max_trials: usize,
    /// The trials' pacing and what spoils one.
    pub pace: Pace,
}

impl Settings {
    /// The highest rate tried for a frame size, frames/s.
    pub fn max_fps(&self, size: &FrameSize) -> f64 {
        self.max_rate.fps(size)
    }
}

/// Runs and judges one trial.
pub fn trial(
    runner: &mut dyn TrialRunner,
    spec: &TrialSpec,
    loss_allowed: f64,
    offered_min: f64,
) -> Result<Trial, String> {
    let c = runner.run(spec)?;
    let direction = |c: &TrialCounts| {
        let offered_fps = if c.secs > 0.0 {
            c.sent as f64 / c.secs
        } else {
            0.0
        };
        let loss_ratio = if c.sent > 0 {
            c.sent.saturating_sub(c.received) as f64 / c.sent as f64
        } else {
            1.0
        };
        let forwarded_fps = if c.rx_secs > 0.0 && c.received > 1 {
            c.received as f64 / c.rx_secs
        } else {
            offered_fps
        };
        Direction {
            sent: c.sent,
            received: c.received,
            offered_fps,
            forwarded_fps,
            loss_ratio,
        }
    };
    let fwd = direction(&c);
    let rev = c.reverse.as_deref().map(direction);
    let both: Vec<Direction> = std::iter::once(fwd).chain(rev).collect();
    // Judged by the weaker direction: the lower offered rate, the higher loss.
    let offered_fps = both.iter().map(|d| d.offered_fps).fold(f64::MAX, f64::min);
    let forwarded_fps = both
        .iter()
        .map(|d| d.forwarded_fps)
        .fold(f64::MAX, f64::min);
    let loss_ratio = both.iter().map(|d| d.loss_ratio).fold(0.0, f64::max);
    let expected = spec
        .frames
        .unwrap_or_else(|| (spec.rate_fps * spec.duration.as_secs_f64()).round() as u64);
    // Departures a late sender skipped are this host's doing, not the
    // device's: they are not offered, and not a sign of being held back.
    let mut shape = c.shape;
    if let (Some(s), Some(r)) = (shape.as_mut(), c.reverse.as_deref().and_then(|r| r.shape)) {
        s.merge(&r);
    }
    let dirs: Vec<&TrialCounts> = std::iter::once(&c).chain(c.reverse.as_deref()).collect();
    let (short, kept_pace) = schedule_kept(&dirs, &both, expected);
    let held_back = short
        || kept_pace < spec.rate_fps * offered_min
        || forwarded_fps < offered_fps * offered_min;
    let tolerance = spec.pace.tolerance(&spec.frame_size);
    let spoiled = shape.and_then(|s| broke_shape(&s, tolerance, spec.frames.is_some()));
    let reason = if let Some(why) = &spoiled {
        Some(format!("spoiled by this host: {why}"))
    } else if spec.frames.is_some() && short {
        // A back-to-back burst is its length: one not sent whole says
        // nothing of the device.
        Some("offered load not reached".to_string())
    } else if loss_ratio > loss_allowed {
        Some("loss".to_string())
    } else {
        None
    };
    let r = c.reverse.as_deref();
    Ok(Trial {
        frame_size: spec.frame_size.clone(),
        asked_fps: spec.rate_fps,
        offered_fps,
        forwarded_fps,
        sent: both.iter().map(|d| d.sent).sum(),
        received: both.iter().map(|d| d.received).sum(),
        sent_bytes: c.sent_bytes + r.map_or(0, |r| r.sent_bytes),
        received_bytes: c.received_bytes + r.map_or(0, |r| r.received_bytes),
        loss_ratio,
        passed: reason.is_none(),
        reason,
        held_back,
        latency_ns: c.latency_ns,
        rx_iface_packets: c
            .rx_iface_packets
            .map(|n| n + r.and_then(|r| r.rx_iface_packets).unwrap_or(0)),
        directions: rev.map(|r| [fwd, r]),
        shape: shape.map(|s| TrialShape::of(&s, &spec.pace, &spec.frame_size)),
        spoiled,
        interrupted: false,
    })
}

/// Whether any direction fell short of its `expected` departures (sent
/// or skipped), and the slowest rate a direction's schedule ran at
/// (departures sent or skipped over the sending time): skipped departures
/// are the sender's lateness, not the device holding it back.
fn schedule_kept(dirs: &[&TrialCounts], both: &[Direction], expected: u64) -> (bool, f64) {
    let skipped = |c: &TrialCounts| c.shape.map_or(0, |s| s.skipped);
    let short = dirs
        .iter()
        .zip(both)
        .any(|(c, d)| d.sent + skipped(c) < expected);
    let pace = dirs
        .iter()
        .zip(both)
        .map(|(c, d)| {
            if c.secs > 0.0 {
                (d.sent + skipped(c)) as f64 / c.secs
            } else {
                d.offered_fps
            }
        })
        .fold(f64::MAX, f64::min);
    (short, pace)
}

/// How late the sender was, for a spoiled trial's reason.
fn lateness(s: &Shape) -> String {
    format!(
        "the sender woke late {} times, the worst {:.1} ms",
        s.late_wakeups,
        s.max_late_ns as f64 / 1e6
    )
}

/// Why a trial's departures broke their shape by more than its bound, if
/// they did: a catch-up burst beyond the tolerance, or (a back-to-back
/// burst, judged whole) any departure skipped.
fn broke_shape(s: &Shape, tolerance: u32, whole: bool) -> Option<String> {
    if s.max_burst > u64::from(tolerance) {
        return Some(format!(
            "{}, and sent {} frames back to back beyond its schedule (bound {tolerance})",
            lateness(s),
            s.max_burst,
        ));
    }
    if whole && s.skipped > 0 {
        return Some(format!(
            "{}, and skipped {} departures of a burst judged whole",
            lateness(s),
            s.skipped
        ));
    }
    None
}

/// Whether a trial at a set load skipped more departures than the
/// offered-rate margin allows (the load it tested is not the one asked):
/// a part of the latency and frame-loss trials' rule ([`set_load_rule`]).
pub fn skipped_beyond_margin(t: &Trial, offered_min: f64) -> Option<String> {
    let s = t.shape?;
    let expected = t.sent + s.skipped;
    let allowed = ((1.0 - offered_min).max(0.0) * expected as f64).floor() as u64;
    (s.skipped > allowed).then(|| {
        format!(
            "the sender woke late {} times, the worst {:.1} ms, and skipped {} of {expected} departures (more than the {allowed} the offered-rate margin allows)",
            s.late_wakeups,
            s.max_late_us / 1e3,
            s.skipped
        )
    })
}

/// Whether a trial at a set load offered less of the rate asked than the
/// margin allows, counting its departures (sent or skipped) over its
/// sending time: the sender was held back (its ring or socket buffer
/// full, refusing frames) and the load it tested is not the one asked.
pub fn held_back_beyond_margin(t: &Trial, offered_min: f64) -> Option<String> {
    if t.sent == 0 || t.asked_fps <= 0.0 {
        return None;
    }
    let pace = t.offered_fps * (t.sent + t.skipped()) as f64 / t.sent as f64;
    (pace < t.asked_fps * offered_min).then(|| {
        format!(
            "the sender was held back (its ring or socket buffer refused frames): it offered {pace:.0} of the {:.0} frames/s asked, below the {:.1}% margin",
            t.asked_fps,
            offered_min * 100.0
        )
    })
}

/// A rule that runs a trial again while `held` says its sender was held
/// back, up to `spoiled_max - 1` times; then the trial is kept: what
/// pushes back that long (flow control, a link slower than the rate
/// asked) is the path's, not a moment of this host's load, and is
/// reported, not refused.
fn retry_held_back(
    spoiled_max: u32,
    held: impl Fn(&Trial) -> Option<String>,
) -> impl Fn(&Trial) -> Option<String> {
    let runs = std::cell::Cell::new(0u32);
    move |t: &Trial| {
        let why = held(t)?;
        runs.set(runs.get() + 1);
        (runs.get() < spoiled_max.max(1)).then_some(why)
    }
}

/// The rule of a trial at a set load (latency, a frame-loss step): run
/// again when its sender skipped more departures than the margin allows
/// or was held back ([`retry_held_back`]: one held back every time is
/// kept at the rate it offered, `offered_fps`, `held_back`).
pub fn set_load_rule(offered_min: f64, spoiled_max: u32) -> impl Fn(&Trial) -> Option<String> {
    let held = retry_held_back(spoiled_max, move |t| {
        held_back_beyond_margin(t, offered_min)
    });
    move |t: &Trial| skipped_beyond_margin(t, offered_min).or_else(|| held(t))
}

/// Back-to-back's rule: a burst its sender could not send whole (its
/// ring or socket buffer refused frames: fewer sent or skipped than the
/// burst's `frames`) says nothing of the device: run again
/// ([`retry_held_back`]); one never sent whole is kept, failed ("offered
/// load not reached").
pub fn whole_burst_rule(frames: u64, spoiled_max: u32) -> impl Fn(&Trial) -> Option<String> {
    retry_held_back(spoiled_max, move |t| {
        let departed = t.sent + t.skipped();
        (departed < frames).then(|| {
            format!(
                "the sender was held back (its ring or socket buffer refused frames): it sent {departed} of the burst's {frames} frames"
            )
        })
    })
}

impl Trial {
    /// Departures the sender skipped (late), not offered.
    pub fn skipped(&self) -> u64 {
        self.shape.map_or(0, |s| s.skipped)
    }

    /// Marks the trial spoiled by this host: not scored.
    fn spoil(&mut self, why: String) {
        self.reason = Some(format!("spoiled by this host: {why}"));
        self.passed = false;
        self.spoiled = Some(why);
    }
}

/// Runs a trial until one is not spoiled by this host (each spoiled one
/// is seen by `on_trial` and kept in `spoiled`), at most
/// `pace.spoiled_max` in a row; then an error naming the host's load.
/// `also` is the caller's own rule (a search's: a trial that skipped
/// departures and so taught it nothing).
pub fn clean_trial(
    runner: &mut dyn TrialRunner,
    spec: &TrialSpec,
    loss_allowed: f64,
    offered_min: f64,
    also: &dyn Fn(&Trial) -> Option<String>,
    on_trial: &mut dyn FnMut(&Trial),
    spoiled: &mut Vec<Trial>,
) -> Result<Trial, String> {
    let mut in_a_row = 0;
    loop {
        let mut t = trial(runner, spec, loss_allowed, offered_min)?;
        if runner.interrupted() {
            // What a trial cut short counted is no verdict on the device.
            (t.interrupted, t.passed, t.spoiled) = (true, false, None);
            t.reason = Some("interrupted".into());
            on_trial(&t);
            return Ok(t);
        }
        if t.spoiled.is_none()
            && let Some(why) = also(&t)
        {
            t.spoil(why);
        }
        on_trial(&t);
        let Some(why) = &t.spoiled else {
            return Ok(t);
        };
        in_a_row += 1;
        if in_a_row >= spec.pace.spoiled_max.max(1) {
            return Err(format!(
                "{} at {:.0} frames/s: {in_a_row} trials in a row spoiled by this host's load ({why}): \
                 no rate is reported, since frames the schedule did not ask for would be scored as the \
                 device's loss; stop what else runs on the sender's CPU, pin it (taskset), or allow \
                 more with --burst-tolerance or --spoiled-max",
                spec.frame_size, spec.rate_fps
            ));
        }
        spoiled.push(t);
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
        /// Bidirectional: the reverse direction's capacity.
        reverse: Option<f64>,
        /// The sender's shape in the next trials (popped from the end).
        shapes: Vec<Shape>,
        /// When `shapes` is empty: this share of every trial's departures
        /// skipped by a late sender.
        skip_share: f64,
        /// A stop arrives during this trial (1-based; 0: never).
        stop_in: usize,
        /// 0: the generator reaches `gen_max` at most and sends every
        /// departure, late. Otherwise `gen_max` is back-pressure (a timed
        /// trial offered at it, a burst refused part way), gone after
        /// this many trials (`usize::MAX`: never gone).
        recovers_after: usize,
    }

    impl Sim {
        /// One direction of `capacity` fps with a `queue` of frames, from a
        /// generator that reaches `gen_max` fps.
        fn new(capacity: f64, queue: f64, gen_max: f64) -> Sim {
            Sim {
                capacity,
                queue,
                gen_max,
                trials: 0,
                reverse: None,
                shapes: Vec::new(),
                skip_share: 0.0,
                stop_in: 0,
                recovers_after: 0,
            }
        }
    }

    impl TrialRunner for Sim {
        fn interrupted(&self) -> bool {
            self.stop_in > 0 && self.trials >= self.stop_in
        }

        fn run(&mut self, s: &TrialSpec) -> Result<TrialCounts, String> {
            self.trials += 1;
            let secs = s.duration.as_secs_f64();
            let due = s.frames.unwrap_or((s.rate_fps * secs).round() as u64);
            let shape = self.shapes.pop().or_else(|| {
                (self.skip_share > 0.0).then_some(Shape {
                    late_wakeups: 10,
                    max_late_ns: 2_000_000,
                    max_burst: 4,
                    skipped: (due as f64 * self.skip_share) as u64,
                })
            });
            // A late sender's skipped departures are not sent; a catch-up
            // burst beyond 4 frames overflows the device (5 lost).
            let skipped = shape.map_or(0, |s| s.skipped);
            let burst_lost = shape.map_or(0.0, |s| if s.max_burst > 4 { 5.0 } else { 0.0 });
            let mut want = due - skipped;
            let recovered = self.recovers_after > 0 && self.trials > self.recovers_after;
            let offered = if recovered {
                s.rate_fps
            } else {
                s.rate_fps.min(self.gen_max)
            };
            if s.frames.is_some() && self.recovers_after > 0 && !recovered {
                // A burst refused part way: what the ring took by then.
                want = (want as f64 * offered / s.rate_fps) as u64;
            }
            let took = due as f64 / offered;
            let passed_through =
                ((self.capacity * took + self.queue).min(want as f64) - burst_lost).max(0.0);
            // Above its capacity the device forwards at its capacity, the
            // queue drained after the sender stops.
            let rx_secs = |cap: f64, through: f64| {
                if offered <= cap { took } else { through / cap }
            };
            let reverse = self.reverse.map(|cap| {
                let through = (cap * took + self.queue).min(want as f64) as u64;
                Box::new(TrialCounts {
                    sent: want,
                    received: through,
                    sent_bytes: want * 64,
                    received_bytes: through * 64,
                    secs: took,
                    rx_secs: rx_secs(cap, through as f64),
                    latency_ns: None,
                    rx_iface_packets: None,
                    reverse: None,
                    shape: None,
                })
            });
            Ok(TrialCounts {
                sent: want,
                received: passed_through as u64,
                sent_bytes: want * 64,
                received_bytes: passed_through as u64 * 64,
                secs: took,
                rx_secs: rx_secs(self.capacity, passed_through),
                latency_ns: None,
                rx_iface_packets: None,
                reverse,
                shape,
            })
        }
    }

    fn settings(max: f64) -> Settings {
        Settings {
            max_rate: MaxRate::Fps(max),
            trial_time: Duration::from_secs(1),
            resolution: 0.01,
            offered_min: 0.99,
            max_trials: 40,
            pace: Pace::default(),
        }
    }

    /// `--resume`: a search cut short at its fourth trial, written as its
    /// document and read back, goes on from its three finished trials to
    /// the result an uninterrupted search finds, running only the trials
    /// that one ran after them (the cut one again); a finished search read
    /// back runs none and gives the same result; a file of other settings
    /// is refused naming the field.
    #[test]
    fn a_resumed_search_ends_where_an_uninterrupted_one_does() {
        use crate::rfc2544_resume::{ResumeError, Resumed};
        let s = settings(100_000.0);
        let size = FrameSize::Fixed(64);
        let whole = throughput(
            &mut Sim::new(60_000.0, 0.0, 1e9),
            &size,
            0.0,
            &s,
            &mut |_| {},
        )
        .unwrap();
        let mut cut_sim = Sim::new(60_000.0, 0.0, 1e9);
        cut_sim.stop_in = 4;
        let cut = throughput(&mut cut_sim, &size, 0.0, &s, &mut |_| {}).unwrap();
        assert!(cut.interrupted);
        let config = serde_json::json!({"sizes": [64], "trial_time_s": 1.0});
        let doc =
            |t: &Throughput| serde_json::json!({"config": config, "throughput": [t]}).to_string();
        let mut resumed = Resumed::parse(&doc(&cut), &config).unwrap();
        assert_eq!(resumed.trials(), 4);
        let mut sim = Sim::new(60_000.0, 0.0, 1e9);
        let prior = resumed.take(&size, 0.0);
        let r = throughput_resumed(&mut sim, &size, 0.0, &s, prior, &mut |_| {}).unwrap();
        assert!(!r.interrupted && r.converged, "{r:?}");
        assert_eq!(r.rate_fps, whole.rate_fps);
        assert_eq!(
            r.trials, whole.trials,
            "the same trials, as they were judged"
        );
        assert_eq!(sim.trials, whole.trials.len() - 3);
        let mut again = Resumed::parse(&doc(&r), &config).unwrap();
        let mut idle = Sim::new(1.0, 0.0, 1.0);
        let prior = again.take(&size, 0.0);
        let same = throughput_resumed(&mut idle, &size, 0.0, &s, prior, &mut |_| {}).unwrap();
        assert_eq!((idle.trials, same.rate_fps), (0, whole.rate_fps));
        assert!(same.converged);
        let other = serde_json::json!({"sizes": [64], "trial_time_s": 2.0});
        match Resumed::parse(&doc(&cut), &other) {
            Err(
                e @ ResumeError::Differs {
                    field: "trial_time_s",
                    ..
                },
            ) => {
                assert!(e.to_string().contains("trial_time_s is 1.0"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        let lines = format!(
            "{{\"event\":\"start\"}}\n{}\n",
            serde_json::json!({
                "event": "end", "data": {"result": serde_json::from_str::<serde_json::Value>(&doc(&cut)).unwrap()}
            })
        );
        assert_eq!(Resumed::parse(&lines, &config).unwrap().trials(), 4);
        assert!(matches!(
            Resumed::parse("not json", &config),
            Err(ResumeError::NotAResult(_))
        ));
    }

    /// A stop during the fourth trial: the three before it stand, the
    /// fourth is marked interrupted and not scored, and the rate is the
    /// best passed so far; the other searches stop at once too.
    #[test]
    fn a_stop_keeps_every_finished_trial_and_marks_the_cut_one() {
        let mut sim = Sim::new(60_000.0, 0.0, 1e9);
        sim.stop_in = 4;
        let s = settings(100_000.0);
        let mut seen = Vec::new();
        let r = throughput(&mut sim, &FrameSize::Fixed(64), 0.0, &s, &mut |t| {
            seen.push(t.clone());
        })
        .unwrap();
        assert!(r.interrupted && !r.converged);
        assert_eq!(r.trials.len(), 4);
        assert_eq!(seen.len(), 4, "each trial said as it ended");
        let cut = &r.trials[3];
        assert!(cut.interrupted && !cut.passed, "{cut:?}");
        assert_eq!(cut.reason.as_deref(), Some("interrupted"));
        assert!(r.trials[..3].iter().all(|t| !t.interrupted));
        let best = r.trials[..3]
            .iter()
            .filter(|t| t.passed)
            .map(Trial::tested_fps)
            .fold(0.0, f64::max);
        assert_eq!(r.rate_fps, best);
        assert_eq!(sim.trials, 4, "no trial after the stop");
        assert!(
            frame_loss(&mut sim, &FrameSize::Fixed(64), &s, &mut |_| {})
                .unwrap()
                .is_empty()
        );
        let b = back_to_back(&mut sim, &FrameSize::Fixed(64), 1000, 2, &s, &mut |_| {}).unwrap();
        assert!(b.trials.is_empty() && b.bursts.is_empty());
        assert_eq!(sim.trials, 4);
    }

    #[test]
    fn the_search_finds_capacity_with_monotone_bounds_in_few_trials() {
        let mut sim = Sim::new(41_666.0, 0.0, 1e9);
        let s = settings(100_000.0);
        let r = throughput(&mut sim, &64.into(), 0.0, &s, &mut |_| {}).unwrap();
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
        let pdr = throughput(&mut sim, &64.into(), 0.01, &s, &mut |_| {}).unwrap();
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

    /// A late wake-up's shape: woke `late_ms` late, sent `burst` frames
    /// beyond the schedule, skipped `skipped` departures.
    fn late(late_ms: u64, burst: u64, skipped: u64) -> Shape {
        Shape {
            late_wakeups: 1,
            max_late_ns: late_ms * 1_000_000,
            max_burst: burst,
            skipped,
        }
    }

    /// The searches' settings with a catch-up bound of 4 frames.
    fn bound4(max: f64) -> Settings {
        Settings {
            pace: Pace {
                burst_tolerance: Some(4),
                ..Pace::default()
            },
            ..settings(max)
        }
    }

    #[test]
    fn the_default_bound_is_six_kilobytes_of_frames_and_at_least_four() {
        let p = Pace::default();
        assert_eq!(p.tolerance(&64.into()), 94);
        assert_eq!(p.tolerance(&1518.into()), 4);
        assert_eq!(p.tolerance(&9000.into()), 4);
        assert_eq!(p.tolerance(&FrameSize::parse("imix").unwrap()), 16);
        let given = Pace {
            burst_tolerance: Some(7),
            ..p
        };
        assert_eq!(given.tolerance(&64.into()), 7);
    }

    #[test]
    fn a_trial_this_host_spoiled_is_run_again_and_not_scored() {
        let s = bound4(100_000.0);
        let clean = throughput(
            &mut Sim::new(41_666.0, 0.0, 1e9),
            &64.into(),
            0.0,
            &s,
            &mut |_| {},
        )
        .unwrap();
        // The same device; the host spoils the 2nd and 3rd trials with a
        // catch-up burst of 9 frames (which the device would have dropped
        // frames of, at a rate it passes).
        let mut sim = Sim::new(41_666.0, 0.0, 1e9);
        sim.shapes = vec![Shape::default(); 40];
        sim.shapes
            .extend([late(7, 9, 0), late(7, 9, 0), Shape::default()]);
        let mut seen = Vec::new();
        let r = throughput(&mut sim, &64.into(), 0.0, &s, &mut |t| seen.push(t.clone())).unwrap();
        assert_eq!(r.rate_fps, clean.rate_fps);
        assert_eq!(r.spoiled_trials, 2);
        assert_eq!(sim.trials, clean.trials.len() + 2);
        assert_eq!(r.trials, seen, "every trial listed, in the order run");
        let spoiled: Vec<&Trial> = r.trials.iter().filter(|t| t.spoiled.is_some()).collect();
        assert_eq!(spoiled.len(), 2);
        for t in spoiled {
            assert!(!t.passed);
            let why = t.reason.as_deref().unwrap();
            assert!(
                why.starts_with("spoiled by this host: the sender woke late 1 times, the worst 7.0 ms, and sent 9 frames back to back beyond its schedule (bound 4)"),
                "{why}"
            );
            assert_eq!(t.shape.unwrap().max_burst, 9);
            // Run again at the same rate.
            assert_eq!(t.asked_fps, r.trials[1].asked_fps);
        }
        // The clean trials are the clean search's, one for one.
        let scored: Vec<f64> = r
            .trials
            .iter()
            .filter(|t| t.spoiled.is_none())
            .map(|t| t.asked_fps)
            .collect();
        let want: Vec<f64> = clean.trials.iter().map(|t| t.asked_fps).collect();
        assert_eq!(scored, want);
    }

    #[test]
    fn a_host_that_spoils_every_trial_ends_the_search_with_an_error_naming_its_load() {
        let mut sim = Sim::new(41_666.0, 0.0, 1e9);
        sim.shapes = vec![late(12, 20, 0); 10];
        let mut seen = 0;
        let e = throughput(&mut sim, &64.into(), 0.0, &bound4(100_000.0), &mut |_| {
            seen += 1
        })
        .unwrap_err();
        assert_eq!((sim.trials, seen), (5, 5));
        assert!(
            e.starts_with("64 B at 100000 frames/s: 5 trials in a row spoiled by this host's load (the sender woke late 1 times, the worst 12.0 ms, and sent 20 frames back to back beyond its schedule (bound 4)): no rate is reported"),
            "{e}"
        );
    }

    #[test]
    fn departures_a_late_sender_skipped_are_not_offered_and_not_the_device_holding_back() {
        // 100k fps asked for 1 s, the device passes everything: 300
        // departures skipped (0.3%) pass at the rate offered, not held
        // back; 2,000 (2%) are beyond the margin a trial at a set load
        // (latency, frame loss) may miss.
        let spec = TrialSpec {
            frame_size: 64.into(),
            rate_fps: 100_000.0,
            duration: Duration::from_secs(1),
            frames: None,
            pace: Pace::default(),
        };
        let mut sim = Sim::new(1e9, 0.0, 1e9);
        sim.shapes = vec![late(3, 4, 300)];
        let t = trial(&mut sim, &spec, 0.0, 0.99).unwrap();
        assert!(t.passed && !t.held_back && t.spoiled.is_none(), "{t:?}");
        assert_eq!((t.sent, t.received, t.skipped()), (99_700, 99_700, 300));
        assert!(
            (t.tested_fps() - 99_700.0).abs() < 1.0,
            "{}",
            t.tested_fps()
        );
        assert_eq!(skipped_beyond_margin(&t, 0.99), None);
        sim.shapes = vec![late(25, 4, 2_000)];
        let t = trial(&mut sim, &spec, 0.0, 0.99).unwrap();
        assert!(t.passed && !t.held_back, "{t:?}");
        assert!(
            skipped_beyond_margin(&t, 0.99).unwrap().ends_with(
                "and skipped 2000 of 100000 departures (more than the 1000 the offered-rate margin allows)"
            ),
            "{t:?}"
        );
        // A back-to-back burst is judged whole: one skipped departure
        // spoils it.
        let b2b = TrialSpec {
            frames: Some(1_000),
            duration: Duration::from_millis(10),
            ..spec.clone()
        };
        sim.shapes = vec![late(1, 2, 1)];
        let t = trial(&mut sim, &b2b, 0.0, 0.0).unwrap();
        assert!(
            t.spoiled
                .as_deref()
                .unwrap()
                .ends_with("and skipped 1 departures of a burst judged whole"),
            "{t:?}"
        );
        // A device that held the sender back without any skip still is.
        let mut held = Sim::new(1e9, 0.0, 90_000.0);
        let t = trial(&mut held, &spec, 0.0, 0.99).unwrap();
        assert!(t.passed && t.held_back && t.shape.is_none(), "{t:?}");
    }

    #[test]
    fn a_search_whose_sender_skips_judges_passes_at_what_was_offered_and_reruns_the_useless() {
        let s = settings(100_000.0);
        // 0.3% of every trial's departures skipped: a failure counts at the
        // rate asked (the device lost frames in stretches at that rate), a
        // pass at what it offered; the rate found is the device's within
        // the resolution and the skip, never above it.
        let mut sim = Sim::new(41_666.0, 0.0, 1e9);
        sim.skip_share = 0.003;
        let r = throughput(&mut sim, &64.into(), 0.0, &s, &mut |_| {}).unwrap();
        assert!(r.converged, "{r:?}");
        assert!(
            r.rate_fps <= 41_666.0 && r.rate_fps >= 41_666.0 * 0.98,
            "{}",
            r.rate_fps
        );
        let passes: Vec<&Trial> = r.trials.iter().filter(|t| t.passed).collect();
        assert!(!passes.is_empty());
        for t in &passes {
            assert!(
                (t.tested_fps() - t.asked_fps * 0.997).abs() < 2.0,
                "a skipping pass is judged at what it offered: {t:?}"
            );
        }
        let best = passes.iter().map(|t| t.tested_fps()).fold(0.0, f64::max);
        assert_eq!(r.rate_fps, best);
        // 5% skipped (a loaded host): passes land 5% below what they
        // asked, below the best so far as the search closes in; such a
        // pass taught it nothing and is run again, until the search gives
        // up naming the host's load.
        let mut loaded = Sim::new(41_666.0, 0.0, 1e9);
        loaded.skip_share = 0.05;
        let mut seen = Vec::new();
        let e = throughput(&mut loaded, &64.into(), 0.0, &s, &mut |t| {
            seen.push(t.clone())
        })
        .unwrap_err();
        assert!(
            e.contains("5 trials in a row spoiled by this host's load"),
            "{e}"
        );
        assert!(e.contains("no higher than the"), "{e}");
        let last5 = &seen[seen.len() - 5..];
        assert!(last5.iter().all(|t| t.spoiled.is_some()), "{last5:?}");
    }

    #[test]
    fn a_sender_held_back_without_loss_passes_at_what_it_offered() {
        // The device takes everything it is offered, but no faster than
        // 30k fps (a shaper that back-pressures, or the generator's own
        // limit): every trial above is held back to 30k, without loss.
        let mut sim = Sim::new(1e9, 0.0, 30_000.0);
        let r = throughput(&mut sim, &64.into(), 0.0, &settings(100_000.0), &mut |_| {}).unwrap();
        assert!(r.held_back && r.converged, "{r:?}");
        assert!(
            r.rate_fps <= 30_000.0 && r.rate_fps > 29_700.0,
            "{}",
            r.rate_fps
        );
        let first = &r.trials[0];
        assert!(first.passed && first.held_back && first.reason.is_none());
        assert_eq!(first.loss_ratio, 0.0);
        assert!(r.trials.len() <= 5, "{} trials", r.trials.len());
    }

    #[test]
    fn a_device_far_below_the_maximum_is_found_to_the_resolution_of_its_rate() {
        // 64 B through 50 Mbit/s (104,167 fps) from a 10 Gbit/s port
        // (14.88 M fps): the resolution is 0.5% of the rate found, not of
        // the port's maximum (74k fps, more than half the answer).
        for (capacity, gen_max) in [(104_167.0, 1e9), (104_167.0, 104_167.0)] {
            let mut sim = Sim::new(capacity, 0.0, gen_max);
            let s = Settings {
                resolution: 0.005,
                ..settings(14_880_952.0)
            };
            let r = throughput(&mut sim, &64.into(), 0.0, &s, &mut |_| {}).unwrap();
            let err = (capacity - r.rate_fps) / capacity;
            assert!((0.0..=0.01).contains(&err), "{} ({err})", r.rate_fps);
            assert!(
                r.converged && r.trials.len() <= 20,
                "{} trials",
                r.trials.len()
            );
            assert_eq!(r.held_back, gen_max < 1e9);
        }
    }

    #[test]
    fn a_device_that_queues_what_it_cannot_forward_is_found_at_its_rate() {
        // 20 Mbit/s TBF with `latency 50ms`: 2,083 frames of queue, 5% of
        // a 1 s trial at 41,666 fps. Judged by what was offered only, a
        // trial 5% above the rate loses nothing; what came out of the
        // device came out at its rate, over a longer time.
        let mut sim = Sim::new(41_666.0, 2_083.0, 1e9);
        let s = Settings {
            resolution: 0.005,
            ..settings(14_880_952.0)
        };
        let r = throughput(&mut sim, &64.into(), 0.0, &s, &mut |_| {}).unwrap();
        // Within the resolution and the 1% a trial may fall short of its
        // rate and still count as offered (`offered_min`).
        let err = (r.rate_fps - 41_666.0).abs() / 41_666.0;
        assert!(err <= 0.015, "{} ({err})", r.rate_fps);
        assert!(
            r.converged && r.trials.len() <= 25,
            "{} trials",
            r.trials.len()
        );
        let queued = r.trials.iter().find(|t| t.passed && t.held_back).unwrap();
        assert!(queued.offered_fps > 41_666.0 * 1.01, "{queued:?}");
        assert!((queued.forwarded_fps - 41_666.0).abs() < 1.0, "{queued:?}");
    }

    #[test]
    fn the_search_stops_at_its_trial_limit_and_says_so() {
        let mut sim = Sim::new(1.0, 0.0, 1e9);
        let s = Settings {
            max_trials: 6,
            ..settings(14_880_952.0)
        };
        let r = throughput(&mut sim, &64.into(), 0.0, &s, &mut |_| {}).unwrap();
        assert_eq!((r.trials.len(), r.converged, r.rate_fps), (6, false, 0.0));
    }

    #[test]
    fn frame_loss_steps_down_until_two_clean_steps_and_is_monotone() {
        let mut sim = Sim::new(55_000.0, 0.0, 1e9);
        let steps = frame_loss(&mut sim, &64.into(), &settings(100_000.0), &mut |_| {}).unwrap();
        let loads: Vec<f64> = steps.iter().map(|s| s.load).collect();
        assert_eq!(loads, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]);
        assert!(steps.windows(2).all(|w| w[0].loss_ratio >= w[1].loss_ratio));
        assert!((steps[0].loss_ratio - 0.45).abs() < 1e-3);
    }

    /// A frame-loss step whose sender was held back a moment (its ring
    /// full: it offered 80% of the rate) is run again, the held-back trial
    /// seen and not kept; a sender held back in every run keeps its step
    /// after `spoiled_max - 1` runs again, at the rate it offered.
    #[test]
    fn a_held_back_frame_loss_step_runs_again_then_keeps_what_it_offered() {
        let mut sim = Sim::new(55_000.0, 0.0, 80_000.0);
        sim.recovers_after = 1;
        let mut seen = Vec::new();
        let steps = frame_loss(&mut sim, &64.into(), &settings(100_000.0), &mut |t| {
            seen.push(t.spoiled.clone())
        })
        .unwrap();
        assert_eq!(sim.trials, steps.len() + 1);
        let why = seen[0].as_deref().unwrap();
        assert!(
            why.starts_with("the sender was held back") && why.contains("80000 of the 100000"),
            "{why}"
        );
        assert!(seen[1..].iter().all(Option::is_none), "{seen:?}");
        assert!((steps[0].loss_ratio - 0.45).abs() < 1e-3);
        assert!(steps[0].trial.offered_fps > 99_000.0);
        assert!(steps.iter().all(|s| !s.offered_short));
        // Held back in every run: five runs of each step above 80k fps (the
        // default spoiled_max), the fifth kept at its 80k fps (the first
        // step's loss 31%).
        let mut sim = Sim::new(55_000.0, 0.0, 80_000.0);
        let steps = frame_loss(&mut sim, &64.into(), &settings(100_000.0), &mut |_| {}).unwrap();
        assert_eq!(steps.len(), 7);
        assert_eq!(sim.trials, steps.len() + 2 * 4);
        assert!((steps[0].trial.offered_fps - 80_000.0).abs() < 1.0);
        assert!(steps[0].trial.held_back && steps[0].trial.spoiled.is_none());
        let short: Vec<bool> = steps.iter().map(|s| s.offered_short).collect();
        assert_eq!(short, [true, true, false, false, false, false, false]);
        assert!(
            (steps[0].loss_ratio - 0.3125).abs() < 1e-3,
            "{}",
            steps[0].loss_ratio
        );
    }

    /// A burst its sender could not send whole (refused part way) is run
    /// again, not failed: the same queue depth found as with a sender
    /// that keeps up; refused in every run, it fails.
    #[test]
    fn a_burst_not_sent_whole_runs_again() {
        // A sender at half the rate, recovered after `recovers_after` trials.
        let b2b = |recovers_after: usize, max_burst: u64| {
            let mut sim = Sim::new(10_000.0, 500.0, 50_000.0);
            sim.recovers_after = recovers_after;
            let s = settings(100_000.0);
            back_to_back(&mut sim, &64.into(), max_burst, 1, &s, &mut |_| {}).unwrap()
        };
        let b = b2b(1, 10_000);
        assert_eq!(b.bursts, vec![555]);
        let spoiled: Vec<&Trial> = b.trials.iter().filter(|t| t.spoiled.is_some()).collect();
        assert_eq!(spoiled.len(), 1, "{:?}", b.trials);
        let why = spoiled[0].spoiled.as_deref().unwrap();
        assert!(
            why.ends_with("it sent 5000 of the burst's 10000 frames"),
            "{why}"
        );
        // Never whole: each length runs five times (the default
        // spoiled_max), the fifth kept and failed.
        let b = b2b(usize::MAX, 1_000);
        assert_eq!(b.bursts, vec![0]);
        let kept = b.trials.iter().filter(|t| t.spoiled.is_none()).count();
        assert_eq!(b.trials.len(), 5 * kept);
        assert!(b.trials.iter().all(|t| !t.passed));
    }

    #[test]
    fn back_to_back_finds_the_queue_depth() {
        // At 100k fps into 10k fps capacity, a burst of n frames takes
        // n/100k s; the device passes 10k * that + a 500-frame queue.
        let mut sim = Sim::new(10_000.0, 500.0, 1e9);
        let b = back_to_back(
            &mut sim,
            &64.into(),
            10_000,
            2,
            &settings(100_000.0),
            &mut |_| {},
        )
        .unwrap();
        // n <= 0.1 n + 500  =>  n <= 555.
        assert_eq!(b.bursts, vec![555, 555]);
        assert_eq!(b.mean_burst, 555.0);
    }

    #[test]
    fn bidirectional_trials_are_judged_by_the_weaker_direction() {
        // Forward takes 80k fps, the way back 41,666: NDR is the latter,
        // per direction; each trial keeps both directions' counts.
        let mut sim = Sim {
            capacity: 80_000.0,
            queue: 0.0,
            gen_max: 1e9,
            trials: 0,
            reverse: Some(41_666.0),
            shapes: Vec::new(),
            skip_share: 0.0,
            stop_in: 0,
            recovers_after: 0,
        };
        let r = throughput(&mut sim, &64.into(), 0.0, &settings(100_000.0), &mut |_| {}).unwrap();
        assert!(r.bidirectional);
        assert!(
            r.rate_fps <= 41_666.0 && r.rate_fps > 40_000.0,
            "{}",
            r.rate_fps
        );
        for t in &r.trials {
            let [f, b] = t.directions.expect("both directions");
            assert_eq!(t.sent, f.sent + b.sent);
            assert_eq!(t.received, f.received + b.received);
            assert_eq!(t.loss_ratio, f.loss_ratio.max(b.loss_ratio));
            // Between the two capacities only the way back loses.
            if t.asked_fps > 41_666.0 && t.asked_fps < 80_000.0 {
                assert_eq!(f.loss_ratio, 0.0, "{t:?}");
                assert!(!t.passed && b.loss_ratio > 0.0, "{t:?}");
            }
        }
    }

    #[test]
    fn frame_sizes_parse_fixed_and_mixes() {
        assert_eq!(FrameSize::parse("64"), Ok(FrameSize::Fixed(64)));
        let imix = FrameSize::parse("IMIX").unwrap();
        // 7 x 64 + 4 x 594 + 1 x 1518 over 12 frames.
        assert_eq!(imix.mean(), (7.0 * 64.0 + 4.0 * 594.0 + 1518.0) / 12.0);
        assert_eq!(imix.sequence().cycle().len(), 12);
        assert_eq!(
            serde_json::to_value(&imix).unwrap(),
            serde_json::json!("imix")
        );
        let custom = FrameSize::parse("imix:64:3/1518:1").unwrap();
        assert_eq!(custom.mean(), (3.0 * 64.0 + 1518.0) / 4.0);
        assert_eq!(
            serde_json::to_value(&custom).unwrap(),
            serde_json::json!("imix:64:3/1518:1")
        );
        for bad in ["63", "9217", "imix:64:0", "imix:", "big"] {
            assert!(FrameSize::parse(bad).is_err(), "{bad}");
        }
        // Bits of a mix: its mean size.
        let (l1, l2) = bits(1000.0, &custom);
        assert_eq!(
            (l1, l2),
            (
                1000.0 * (custom.mean() + 20.0) * 8.0,
                1000.0 * custom.mean() * 8.0
            )
        );
        assert_eq!(
            MaxRate::L1Bps(1e9).fps(&custom),
            1e9 / (8.0 * (custom.mean() + 20.0))
        );
    }
}
