//! The searches over trials: throughput (a binary search per frame size
//! and loss ratio, resumable from an earlier run's trials, with the count
//! of trials left for the progress), the frame loss rate curve, and
//! back-to-back bursts.

use super::*;

/// The throughput search's outcome for one frame size and loss ratio.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub frame_size: FrameSize,
    /// The mean frame size, bytes (the size itself unless a mix).
    pub mean_frame_size: f64,
    /// Bidirectional: the rates are per direction, both ways at once.
    pub bidirectional: bool,
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
    /// A trial above the rate found was held back without loss: the
    /// device (or a shaper, a paused link, this host) took frames no
    /// faster, and the rate found is what it passed.
    pub held_back: bool,
    /// The search closed in on the rate (its interval within the
    /// resolution) before `max_trials`.
    pub converged: bool,
    /// Trials this host spoiled (in `trials`, flagged, not scored).
    pub spoiled_trials: usize,
    /// A stop cut the search short: the rate is the best passed so far,
    /// a lower bound.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    pub trials: Vec<Trial>,
}

/// L1 and L2 bit/s of `fps` frames of `size` (FCS included; L1 adds
/// preamble, SFD and the inter-frame gap: 20 bytes).
pub fn bits(fps: f64, size: &FrameSize) -> (f64, f64) {
    let m = size.mean();
    (fps * (m + 20.0) * 8.0, fps * m * 8.0)
}

impl Trial {
    /// The rate this trial tested the device at: the lowest of the rates
    /// asked, offered and forwarded (within `offered_min` of the asked
    /// one unless it was held back).
    pub fn tested_fps(&self) -> f64 {
        self.offered_fps.min(self.forwarded_fps).min(self.asked_fps)
    }
}

/// The search's bounds: the highest rate the device passed and the lowest
/// it failed at (or the sender could not offer).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    lo: f64,
    hi: f64,
}

impl Bounds {
    /// Takes a trial asked at `asked`. A trial offered as asked tests the
    /// device at the asked rate; one held back tests it at what it
    /// offered, and tells that the asked rate cannot be offered through
    /// this path (the search asks no higher). Returns whether it passed at
    /// a rate above the best so far.
    /// A trial whose late sender skipped departures offered less than
    /// asked, in stretches at the asked rate: a pass that skipped more than
    /// the offered margin (`skipped_much`) is at what it offered, a
    /// failure at the rate it was asked (the device lost frames in those
    /// stretches).
    fn take(&mut self, t: &Trial, asked: f64, skipped_much: bool) -> bool {
        if t.passed {
            let at = if t.held_back || skipped_much {
                t.tested_fps()
            } else {
                asked
            };
            if t.held_back {
                self.hi = self.hi.min(asked);
            }
            let better = at > self.lo;
            self.lo = self.lo.max(at);
            better
        } else {
            // Lost frames at what it was offered (what came out says
            // nothing of a rate the device fails at). A failure below an
            // earlier pass (a noisy device): the search ends at that pass.
            let at = if t.skipped() > 0 && !t.held_back {
                asked
            } else {
                t.offered_fps.min(asked)
            };
            self.hi = self.hi.min(at).max(self.lo);
            false
        }
    }

    /// The interval is within `resolution` of its upper bound.
    fn closed(&self, resolution: f64) -> bool {
        self.hi - self.lo <= resolution * self.hi || self.hi < 1.0
    }

    /// The next rate to ask: halfway; after a held-back pass just above
    /// what was offered (asking far above it would be held back again).
    fn next(&self, held_back_pass: bool, resolution: f64) -> f64 {
        let mid = (self.lo + self.hi) / 2.0;
        let rate = if held_back_pass {
            mid.min(self.lo * (1.0 + 4.0 * resolution))
        } else {
            mid
        };
        rate.round().max(1.0)
    }
}

/// A throughput search's state: its bounds, the best pass, the trials so
/// far and the rate to ask next.
struct Search {
    bounds: Bounds,
    best: Option<Trial>,
    trials: Vec<Trial>,
    held_back: bool,
    bidirectional: bool,
    rate: f64,
    scored: usize,
}

impl Search {
    fn new(max: f64) -> Self {
        Search {
            bounds: Bounds { lo: 0.0, hi: max },
            best: None,
            trials: Vec::new(),
            held_back: false,
            bidirectional: false,
            rate: max.round().max(1.0),
            scored: 0,
        }
    }

    /// Takes a scored trial asked at `self.rate`: whether the search ends
    /// (converged or not) after it, else the next rate is set.
    fn take(&mut self, t: Trial, s: &Settings) -> Option<bool> {
        self.scored += 1;
        self.bidirectional |= t.directions.is_some();
        let skipped_much = skipped_beyond_margin(&t, s.offered_min).is_some();
        if self.bounds.take(&t, self.rate, skipped_much) {
            self.best = Some(t.clone());
        }
        let held_back_pass = t.passed && t.held_back;
        self.held_back |= held_back_pass;
        self.trials.push(t);
        if self.bounds.closed(s.resolution) {
            return Some(true);
        }
        if self.scored >= s.max_trials.max(1) {
            return Some(false);
        }
        self.rate = self.bounds.next(held_back_pass, s.resolution);
        None
    }

    /// Takes the trials of an earlier run of this search, as they ran
    /// (`--resume`): spoiled ones stand where they ran, the one a stop cut
    /// short is dropped (it runs again), the others are scored at the rate
    /// each was asked. Whether the search ended with them.
    fn replay(&mut self, prior: Vec<Trial>, s: &Settings) -> Option<bool> {
        for t in prior {
            if t.interrupted {
                continue;
            }
            if t.spoiled.is_some() {
                self.trials.push(t);
                continue;
            }
            self.rate = t.asked_fps;
            if let Some(end) = self.take(t, s) {
                return Some(end);
            }
        }
        None
    }

    fn result(
        self,
        size: &FrameSize,
        loss_allowed: f64,
        max: f64,
        (converged, interrupted): (bool, bool),
    ) -> Throughput {
        let rate_fps = self.best.as_ref().map_or(0.0, Trial::tested_fps);
        let (l1, l2) = bits(rate_fps, size);
        Throughput {
            frame_size: size.clone(),
            mean_frame_size: size.mean(),
            bidirectional: self.bidirectional,
            loss_allowed,
            rate_fps,
            rate_l1_bps: l1,
            rate_l2_bps: l2,
            loss_ratio: self.best.as_ref().map_or(1.0, |b| b.loss_ratio),
            of_max: rate_fps / max,
            held_back: self.held_back,
            converged,
            spoiled_trials: self.trials.iter().filter(|t| t.spoiled.is_some()).count(),
            interrupted,
            trials: self.trials,
        }
    }
}

/// Trials a throughput search for `size` still needs after `prior` (its
/// trials so far, in order), estimated from the bounds they set: the
/// halvings from the interval to the resolution, at most what
/// `max_trials` leaves; none when the search has ended.
pub fn trials_left(prior: &[Trial], size: &FrameSize, s: &Settings) -> usize {
    let mut search = Search::new(s.max_fps(size));
    if search.replay(prior.to_vec(), s).is_some() {
        return 0;
    }
    let Bounds { lo, hi } = search.bounds;
    let halvings = if search.scored == 0 {
        // the first trial at the maximum, then the search from 0 to it
        1 + halvings_to(hi, hi, s.resolution)
    } else {
        halvings_to(hi - lo, hi, s.resolution)
    };
    halvings.min(s.max_trials.max(1).saturating_sub(search.scored))
}

/// Halvings of `width` until it is within `resolution` of `hi`.
fn halvings_to(width: f64, hi: f64, resolution: f64) -> usize {
    let floor = (resolution * hi).max(1.0);
    if width <= floor {
        return 1;
    }
    (width / floor).log2().ceil().max(1.0) as usize
}

/// RFC 2544 26.1, binary search: the first trial at the maximum; then
/// halving between the highest pass and the lowest failure until they are
/// within the resolution of the rate (relative to it, not to the
/// maximum), in at most `max_trials`. A trial the device held back
/// without loss passes at the rate it offered. `on_trial` sees each trial
/// as it ends.
pub fn throughput(
    runner: &mut dyn TrialRunner,
    size: &FrameSize,
    loss_allowed: f64,
    s: &Settings,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<Throughput, String> {
    throughput_resumed(runner, size, loss_allowed, s, Vec::new(), on_trial)
}

/// [`throughput`], picked up from the trials an earlier run of the same
/// search finished (`prior`, in the order they ran): they are taken as
/// they were judged, and trials run only where they left the search open
/// (a search that had ended runs none and gives the same result).
pub fn throughput_resumed(
    runner: &mut dyn TrialRunner,
    size: &FrameSize,
    loss_allowed: f64,
    s: &Settings,
    prior: Vec<Trial>,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<Throughput, String> {
    let max = s.max_fps(size);
    let mut search = Search::new(max);
    if let Some(converged) = search.replay(prior, s) {
        return Ok(search.result(size, loss_allowed, max, (converged, false)));
    }
    let mut spoiled = Vec::new();
    let mut interrupted = false;
    let converged = loop {
        if runner.interrupted() {
            interrupted = true;
            break false;
        }
        // A pass whose sender skipped more departures than the offered
        // margin allows tested the rate it offered; one no higher than a
        // rate passed before taught the search nothing: run again.
        let (lo, om) = (search.bounds.lo, s.offered_min);
        let uninformative = |t: &Trial| {
            if !t.passed || t.tested_fps() > lo {
                return None;
            }
            skipped_beyond_margin(t, om).map(|why| {
                format!(
                    "{why}: it passed at {:.0} fps, no higher than the {lo:.0} fps passed before",
                    t.tested_fps()
                )
            })
        };
        let t = clean_trial(
            runner,
            &TrialSpec {
                frame_size: size.clone(),
                rate_fps: search.rate,
                duration: s.trial_time,
                frames: None,
                pace: s.pace,
            },
            loss_allowed,
            s.offered_min,
            &uninformative,
            on_trial,
            &mut spoiled,
        )?;
        // Spoiled trials stand in the list where they ran, not scored.
        search.trials.append(&mut spoiled);
        if t.interrupted {
            search.trials.push(t);
            interrupted = true;
            break false;
        }
        if let Some(converged) = search.take(t, s) {
            break converged;
        }
    };
    Ok(search.result(size, loss_allowed, max, (converged, interrupted)))
}

/// Latency at a rate: one trial of `time`, its latency figures.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub frame_size: FrameSize,
    /// The load: a share of the throughput found (or of the maximum rate).
    pub load: f64,
    pub rate_fps: f64,
    pub trial: Trial,
}

/// One step of the frame loss rate curve.
#[derive(Debug, Clone, Serialize)]
pub struct FrameLossStep {
    pub frame_size: FrameSize,
    /// Share of the maximum rate.
    pub load: f64,
    pub rate_fps: f64,
    pub loss_ratio: f64,
    /// Its sender was held back below the offered-rate margin in every
    /// run ([`set_load_rule`]): the loss is of `trial.offered_fps`, not
    /// of `rate_fps` (in the document only when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub offered_short: bool,
    pub trial: Trial,
}

/// RFC 2544 26.3: loss at 100%, 90%, … of the maximum rate until two
/// successive steps lose nothing.
pub fn frame_loss(
    runner: &mut dyn TrialRunner,
    size: &FrameSize,
    s: &Settings,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<Vec<FrameLossStep>, String> {
    let max = s.max_fps(size);
    let mut out: Vec<FrameLossStep> = Vec::new();
    for tenth in (1..=10).rev() {
        if runner.interrupted() {
            break;
        }
        let load = f64::from(tenth) / 10.0;
        let rate = (max * load).round();
        let t = clean_trial(
            runner,
            &TrialSpec {
                frame_size: size.clone(),
                rate_fps: rate,
                duration: s.trial_time,
                frames: None,
                pace: s.pace,
            },
            1.0,
            s.offered_min,
            &set_load_rule(s.offered_min, s.pace.spoiled_max),
            on_trial,
            &mut Vec::new(),
        )?;
        if t.interrupted {
            break;
        }
        out.push(FrameLossStep {
            frame_size: size.clone(),
            load,
            rate_fps: rate,
            loss_ratio: t.loss_ratio,
            offered_short: held_back_beyond_margin(&t, s.offered_min).is_some(),
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
    pub frame_size: FrameSize,
    pub rate_fps: f64,
    /// The longest lossless burst of each repetition, frames.
    pub bursts: Vec<u64>,
    pub mean_burst: f64,
    pub trials: Vec<Trial>,
}

pub fn back_to_back(
    runner: &mut dyn TrialRunner,
    size: &FrameSize,
    max_burst: u64,
    repeats: usize,
    s: &Settings,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<BackToBack, String> {
    let rate = s.max_fps(size);
    let mut bursts = Vec::new();
    let mut trials = Vec::new();
    for _ in 0..repeats.max(1) {
        let (mut lo, mut hi) = (0u64, max_burst + 1);
        let mut n = max_burst;
        while hi - lo > 1 && !runner.interrupted() {
            let secs = n as f64 / rate;
            let mut spoiled = Vec::new();
            let t = clean_trial(
                runner,
                &TrialSpec {
                    frame_size: size.clone(),
                    rate_fps: rate,
                    duration: Duration::from_secs_f64(secs),
                    frames: Some(n),
                    pace: s.pace,
                },
                0.0,
                0.0,
                &whole_burst_rule(n, s.pace.spoiled_max),
                on_trial,
                &mut spoiled,
            )?;
            trials.append(&mut spoiled);
            if t.interrupted {
                trials.push(t);
                break;
            }
            if t.passed {
                lo = n;
            } else {
                hi = n;
            }
            trials.push(t);
            n = (lo + hi) / 2;
        }
        if runner.interrupted() {
            break;
        }
        bursts.push(lo);
    }
    let mean_burst = bursts.iter().sum::<u64>() as f64 / bursts.len().max(1) as f64;
    Ok(BackToBack {
        frame_size: size.clone(),
        rate_fps: rate,
        bursts,
        mean_burst,
        trials,
    })
}
