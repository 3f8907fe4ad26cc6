//! An rfc2544 campaign's progress for people: trials done, an estimate of
//! the total (each throughput search's from the bounds its trials set, a
//! search not started as a fresh one, the other tests at their bounds) and
//! the time left at the pace of the trials so far. Computed here, with no
//! clock and no terminal: the command prints it.

use crate::rfc2544::{FrameSize, Settings, Trial, trials_left};
use std::time::Duration;

/// What the campaign will run, as known before it starts.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The throughput searches, in order (frame size, once per loss ratio
    /// and run).
    pub searches: Vec<FrameSize>,
    /// Trials of the tests after the searches (latency, the loss curve and
    /// back-to-back), at most.
    pub after: usize,
    /// The time one trial is expected to take before any has run (its
    /// time, drain and warm-up).
    pub trial_guess: Duration,
    pub settings: Settings,
}

/// Progress through a [`Plan`].
#[derive(Debug, Clone)]
pub struct Progress {
    plan: Plan,
    /// Trials run by this process.
    done: usize,
    /// Searches started (the current one included).
    started: usize,
    /// The current search's trials (an earlier run's too, when resumed).
    current: Vec<Trial>,
    /// Trials run after the searches.
    done_after: usize,
    searching: bool,
}

impl Progress {
    pub fn new(plan: Plan) -> Self {
        Progress {
            plan,
            done: 0,
            started: 0,
            current: Vec::new(),
            done_after: 0,
            searching: false,
        }
    }

    /// The next search starts, from `prior` (a resumed search's trials).
    pub fn search_started(&mut self, prior: &[Trial]) {
        self.started += 1;
        self.current = prior.to_vec();
        self.searching = true;
    }

    /// The searches are over: trials from now on are the other tests'.
    pub fn searches_done(&mut self) {
        self.searching = false;
        self.started = self.plan.searches.len();
    }

    /// A trial ended.
    pub fn trial(&mut self, t: &Trial) {
        self.done += 1;
        if self.searching {
            self.current.push(t.clone());
        } else {
            self.done_after += 1;
        }
    }

    pub fn done(&self) -> usize {
        self.done
    }

    /// Trials still to run, estimated.
    pub fn left(&self) -> usize {
        let s = &self.plan.settings;
        let current = match (self.searching, self.started.checked_sub(1)) {
            (true, Some(i)) => {
                (self.plan.searches.get(i)).map_or(0, |size| trials_left(&self.current, size, s))
            }
            _ => 0,
        };
        let fresh: usize = (self.plan.searches.iter().skip(self.started))
            .map(|size| trials_left(&[], size, s))
            .sum();
        current + fresh + self.plan.after.saturating_sub(self.done_after)
    }

    /// The time left: the trials left at the mean pace of those done in
    /// `elapsed` (the plan's guess before any).
    pub fn eta(&self, elapsed: Duration) -> Duration {
        let per = if self.done == 0 {
            self.plan.trial_guess
        } else {
            elapsed / self.done as u32
        };
        per * self.left() as u32
    }

    /// `trial 7 of ~23 (30%), about 2 min 10 s left`.
    pub fn line(&self, elapsed: Duration) -> String {
        let total = self.done + self.left();
        format!(
            "trial {} of ~{total} ({:.0}%), about {} left",
            self.done,
            100.0 * self.done as f64 / total.max(1) as f64,
            human_duration(self.eta(elapsed))
        )
    }
}

/// `45 s`, `2 min 10 s`, `1 h 05 min`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

/// Trials of the loss curve (at most ten steps) and back-to-back
/// (`repeats` binary searches over burst lengths up to `max_burst`) for
/// one frame size, at most.
pub fn bounded_trials(loss: bool, b2b: Option<(u64, usize)>) -> usize {
    let loss = if loss { 10 } else { 0 };
    let b2b = b2b.map_or(0, |(max_burst, repeats)| {
        let steps = (max_burst as f64 + 1.0).log2().ceil() as usize;
        steps.max(1) * repeats.max(1)
    });
    loss + b2b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc2544::{MaxRate, Pace};

    fn settings() -> Settings {
        Settings {
            max_rate: MaxRate::Fps(100_000.0),
            trial_time: Duration::from_secs(1),
            resolution: 0.01,
            offered_min: 0.99,
            max_trials: 30,
            pace: Pace::default(),
        }
    }

    fn trial(asked: f64, passed: bool) -> Trial {
        Trial {
            frame_size: FrameSize::Fixed(64),
            asked_fps: asked,
            offered_fps: asked,
            forwarded_fps: asked,
            sent: 100,
            received: if passed { 100 } else { 50 },
            sent_bytes: 6400,
            received_bytes: 3200,
            loss_ratio: if passed { 0.0 } else { 0.5 },
            passed,
            reason: (!passed).then(|| "loss".into()),
            held_back: false,
            latency_ns: None,
            rx_iface_packets: None,
            directions: None,
            shape: None,
            spoiled: None,
            interrupted: false,
        }
    }

    /// Two searches and 12 trials after them: a fresh search is 1 + 7
    /// halvings (1% of the maximum: 100 below 2^7); after a failure at
    /// the maximum and a pass at half, the interval 50k..100k needs 7
    /// more; a search that closed needs none; the time left is the trials
    /// left at the pace so far.
    #[test]
    fn the_estimate_follows_the_bounds() {
        let plan = Plan {
            searches: vec![FrameSize::Fixed(64), FrameSize::Fixed(1518)],
            after: 12,
            trial_guess: Duration::from_secs(2),
            settings: Settings {
                max_rate: MaxRate::Fps(100_000.0),
                ..settings()
            },
        };
        let mut p = Progress::new(plan);
        assert_eq!(p.left(), 8 + 8 + 12);
        assert_eq!(p.eta(Duration::ZERO), Duration::from_secs(2 * 28));
        p.search_started(&[]);
        assert_eq!(p.left(), 28);
        p.trial(&trial(100_000.0, false));
        assert_eq!(p.left(), 7 + 8 + 12, "0..100k: 7 halvings");
        p.trial(&trial(50_000.0, true));
        assert_eq!(p.left(), 6 + 8 + 12, "50k..100k within 1% of 100k");
        assert_eq!(p.done(), 2);
        assert_eq!(p.eta(Duration::from_secs(6)), Duration::from_secs(3 * 26));
        assert_eq!(
            p.line(Duration::from_secs(6)),
            "trial 2 of ~28 (7%), about 1 min 18 s left"
        );
        p.search_started(&[trial(100_000.0, true)]);
        assert_eq!(p.left(), 12, "a pass at the maximum ends the search");
        p.searches_done();
        for _ in 0..5 {
            p.trial(&trial(1000.0, true));
        }
        assert_eq!((p.left(), p.done()), (7, 7));
        for _ in 0..9 {
            p.trial(&trial(1000.0, true));
        }
        assert_eq!(p.left(), 0, "never below none");
    }

    #[test]
    fn the_other_tests_are_counted_at_their_bounds() {
        assert_eq!(bounded_trials(true, None), 10);
        // bursts up to 1000 frames: 10 halvings, 5 times
        assert_eq!(bounded_trials(false, Some((1000, 5))), 50);
        assert_eq!(human_duration(Duration::from_secs(59)), "59 s");
        assert_eq!(human_duration(Duration::from_secs(3725)), "1 h 02 min");
    }
}
