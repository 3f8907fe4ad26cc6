//! An RFC 2544 campaign: the tests asked for ([`Campaign`]), run against
//! the device one after the other ([`Session`]): throughput searches per
//! frame size and loss ratio (repeated under a policy, or resumed from an
//! earlier run's), latency at loads of the rate found, frame loss,
//! back-to-back. Each trial becomes an interval of the run (rows: sent by
//! the tx port, received by the rx port) and goes to a [`Watcher`] (the
//! command's lines for people); [`plan`] is what the campaign will run, for
//! its progress.

use crate::rfc2544::{self, FrameSize, Settings, Trial, TrialRunner};
use crate::rfc2544_outcome::{RepeatedRate, Rfc2544Outcome, trial_rows};
use crate::rfc2544_progress::{Plan, bounded_trials};
use crate::rfc2544_resume::Resumed;
use linerate_run::{Interval, Run};
use std::time::{Duration, Instant};

/// The tests a campaign knows.
pub const TESTS: [&str; 4] = ["throughput", "latency", "loss", "back-to-back"];

/// The error of a campaign a stop (SIGINT, SIGTERM) cut short.
pub const INTERRUPTED: &str = "interrupted by a stop: every trial finished is kept, the one cut short is marked and not scored";

/// What the campaign runs, as the command's flags say.
#[derive(Debug, Clone)]
pub struct Campaign {
    /// throughput, latency, loss, back-to-back.
    pub tests: Vec<String>,
    /// Loss ratios each throughput search allows.
    pub loss_ratio: Vec<f64>,
    /// Latency: seconds per trial, and its loads as shares of the
    /// throughput found.
    pub latency_time: f64,
    pub latency_load: Vec<f64>,
    /// Back-to-back: repetitions, and the longest burst in seconds of
    /// frames at the maximum rate.
    pub b2b_repeats: usize,
    pub b2b_max: f64,
    /// Seconds after each trial's last frame, and of warm-up before it.
    pub drain: f64,
    pub warmup: f64,
}

impl Campaign {
    fn want(&self, name: &str) -> bool {
        self.tests.iter().any(|t| t == name)
    }

    /// The longest back-to-back burst tried at `size`.
    fn max_burst(&self, settings: &Settings, size: &FrameSize) -> u64 {
        (settings.max_fps(size) * self.b2b_max).round().max(1.0) as u64
    }
}

/// What the campaign will run, for its progress: a search per frame size
/// and loss ratio (throughput), then the other tests' trials at most.
pub fn plan(c: &Campaign, sizes: &[FrameSize], settings: &Settings) -> Plan {
    let searches = if c.want("throughput") {
        (sizes.iter())
            .flat_map(|s| c.loss_ratio.iter().map(move |_| s.clone()))
            .collect()
    } else {
        Vec::new()
    };
    let latency = if c.want("latency") {
        sizes.len() * c.latency_load.len()
    } else {
        0
    };
    let others: usize = (sizes.iter())
        .map(|size| {
            let b2b =
                (c.want("back-to-back")).then(|| (c.max_burst(settings, size), c.b2b_repeats));
            bounded_trials(c.want("loss"), b2b)
        })
        .sum();
    Plan {
        searches,
        after: latency + others,
        trial_guess: settings.trial_time
            + Duration::from_secs_f64(c.drain.max(0.0) + c.warmup.max(0.0)),
        settings: settings.clone(),
    }
}

/// Who follows the campaign trial by trial (the command, for people).
pub trait Watcher {
    /// Trial number `n` (from 1) ended.
    fn trial(&mut self, n: usize, t: &Trial);
    /// A throughput search starts, with the trials of an earlier run it
    /// resumes from.
    fn search_started(&mut self, _prior: &[Trial]) {}
    /// The throughput searches are over.
    fn searches_done(&mut self) {}
}

/// Each trial as an interval of the run, and to the watcher.
struct TrialLog<'w> {
    n: usize,
    last_end: f64,
    t0: Instant,
    watcher: &'w mut dyn Watcher,
}

impl TrialLog<'_> {
    fn log(&mut self, t: &Trial, run: &mut Run) {
        self.n += 1;
        let end = self.t0.elapsed().as_secs_f64();
        run.interval(&Interval::new(self.last_end, end, trial_rows(self.n, t)));
        self.last_end = end;
        self.watcher.trial(self.n, t);
    }
}

/// The tests asked for, run against the device one after the other.
pub struct Session<'a> {
    campaign: &'a Campaign,
    runner: Box<dyn TrialRunner>,
    /// The frame sizes searched (a profile's one).
    sizes: Vec<FrameSize>,
    settings: Settings,
    log: TrialLog<'a>,
    /// `--resume`: the searches of an earlier run, taken as each search
    /// starts.
    resume: Option<Resumed>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("campaign", &self.campaign)
            .field("sizes", &self.sizes)
            .field("trials", &self.log.n)
            .finish_non_exhaustive()
    }
}

impl<'a> Session<'a> {
    /// A session whose run started at `t0` (its trials' intervals count
    /// from there).
    pub fn new(
        campaign: &'a Campaign,
        (runner, sizes): (Box<dyn TrialRunner>, Vec<FrameSize>),
        settings: Settings,
        resume: Option<Resumed>,
        (t0, watcher): (Instant, &'a mut dyn Watcher),
    ) -> Self {
        Session {
            campaign,
            runner,
            sizes,
            settings,
            log: TrialLog {
                n: 0,
                last_end: 0.0,
                t0,
                watcher,
            },
            resume,
        }
    }

    /// Whether a stop cut the campaign short.
    pub fn interrupted(&self) -> bool {
        self.runner.interrupted()
    }

    fn want(&self, name: &str) -> bool {
        self.campaign.want(name)
    }

    /// Every test asked for; the first error stops them (what ran stands),
    /// as does a stop (SIGINT, SIGTERM): every finished trial is kept.
    pub fn all(&mut self, run: &mut Run, o: &mut Rfc2544Outcome) -> Result<(), String> {
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
        self.log.watcher.searches_done();
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
                let max_burst = self.campaign.max_burst(&self.settings, size);
                let (runner, settings, log) = (&mut *self.runner, &self.settings, &mut self.log);
                out.push(rfc2544::back_to_back(
                    runner,
                    size,
                    max_burst,
                    self.campaign.b2b_repeats,
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
            for &ratio in &self.campaign.loss_ratio {
                if self.runner.interrupted() {
                    return Ok(());
                }
                let prior = (self.resume.as_mut()).map_or_else(Vec::new, |r| r.take(size, ratio));
                self.log.watcher.search_started(&prior);
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
            for &load in &self.campaign.latency_load {
                if self.runner.interrupted() {
                    return Ok(());
                }
                let rate = (base * load).round().max(1.0);
                let spec = rfc2544::TrialSpec {
                    frame_size: size.clone(),
                    rate_fps: rate,
                    duration: Duration::from_secs_f64(self.campaign.latency_time.max(0.1)),
                    frames: None,
                    pace: self.settings.pace,
                };
                let (log, om) = (&mut self.log, self.settings.offered_min);
                let t = rfc2544::clean_trial(
                    &mut *self.runner,
                    &spec,
                    1.0,
                    om,
                    &rfc2544::set_load_rule(om, spec.pace.spoiled_max),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc2544::{MaxRate, Pace};

    #[test]
    fn the_plan_is_a_search_per_size_and_ratio_then_the_other_tests() {
        let settings = Settings {
            max_rate: MaxRate::Fps(100_000.0),
            trial_time: Duration::from_secs(2),
            resolution: 0.01,
            offered_min: 0.99,
            max_trials: 30,
            pace: Pace::default(),
        };
        let sizes = [FrameSize::Fixed(64), FrameSize::Fixed(1518)];
        let mut c = Campaign {
            tests: vec!["throughput".into()],
            loss_ratio: vec![0.0, 0.001],
            latency_time: 1.0,
            latency_load: vec![0.5, 0.9, 1.0],
            b2b_repeats: 2,
            b2b_max: 0.001,
            drain: 0.5,
            warmup: 0.25,
        };
        let p = plan(&c, &sizes, &settings);
        assert_eq!(
            p.searches,
            [&sizes[0], &sizes[0], &sizes[1], &sizes[1]].map(Clone::clone)
        );
        assert_eq!(p.after, 0);
        assert_eq!(p.trial_guess, Duration::from_millis(2750));
        c.tests = vec!["latency".into()];
        let p = plan(&c, &sizes, &settings);
        assert!(p.searches.is_empty());
        assert_eq!(p.after, 6, "three loads for each of two sizes");
        assert_eq!(c.max_burst(&settings, &sizes[0]), 100, "1 ms at 100 kfps");
    }
}
