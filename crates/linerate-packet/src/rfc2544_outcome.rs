//! rfc2544's typed outcome: every test's results as the searches typed
//! them, the `-J` document and the tables written from them.

use crate::rfc2544::{BackToBack, FrameLossStep, FrameSize, Latency, Throughput, Trial};
use linerate_run::Outcome;
use linerate_run::stats::{Policy, Stop, summarize};
use linerate_run::{CountedBy, Counts, Row, Scope};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// A throughput search repeated until the policy stopped.
#[derive(Debug, Clone)]
pub struct RepeatedRate {
    pub frame_size: FrameSize,
    pub loss_allowed: f64,
    /// Each search's rate, frames/s (warm-up runs first).
    pub rates: Vec<f64>,
    pub stop: Stop,
}

/// An rfc2544 run: the results of each test asked for (None: not asked).
#[derive(Debug, Clone)]
pub struct Rfc2544Outcome {
    pub config: Value,
    pub trial_time_s: f64,
    pub bidir: bool,
    /// `--repeat`/`--ci-target` for the throughput searches.
    pub policy: Option<Policy>,
    pub throughput: Vec<Throughput>,
    pub repeats: Vec<RepeatedRate>,
    pub latency: Option<Vec<Latency>>,
    pub frame_loss: Option<Vec<FrameLossStep>>,
    pub back_to_back: Option<Vec<BackToBack>>,
    /// What stopped the tests, if anything did (the results before it stand).
    pub error: Option<String>,
}

impl Rfc2544Outcome {
    /// The repetition of the search for `t`, if repeated.
    fn repeat_of(&self, t: &Throughput) -> Option<(&RepeatedRate, &Policy)> {
        let p = self.policy.as_ref()?;
        self.repeats
            .iter()
            .find(|r| r.frame_size == t.frame_size && r.loss_allowed == t.loss_allowed)
            .map(|r| (r, p))
    }

    fn throughput_text(&self, t: &mut String) {
        let _ = writeln!(
            t,
            "Throughput ({} s trials; rates as offered and received without loss above the allowed ratio{})\n{:>7} {:>9} {:>14} {:>14} {:>14} {:>9} {:>12} {:>7}",
            self.trial_time_s,
            if self.bidir {
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
        for r in &self.throughput {
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
        for r in &self.throughput {
            let label = size_label(&r.frame_size);
            if r.held_back {
                let _ = writeln!(
                    t,
                    "{label:>7}: trials asked above {:.0} fps were held back without loss (the device took or forwarded frames no faster: a shaper's back-pressure or queue, a paused link, or this host sending no faster); judged at the rate they reached",
                    r.rate_fps
                );
            }
            if r.interrupted {
                let _ = writeln!(
                    t,
                    "{label:>7}: interrupted after {} trial(s): the rate is the best passed so far, a lower bound",
                    r.trials.iter().filter(|t| !t.interrupted).count()
                );
            } else if !r.converged {
                let _ = writeln!(
                    t,
                    "{label:>7}: the search stopped at --max-trials ({}) before closing in to --resolution",
                    r.trials.len() - r.spoiled_trials
                );
            }
            if r.spoiled_trials > 0 {
                let worst = r
                    .trials
                    .iter()
                    .filter(|t| t.spoiled.is_some())
                    .filter_map(|t| t.shape)
                    .map(|s| s.max_late_us)
                    .fold(0.0, f64::max);
                let _ = writeln!(
                    t,
                    "{label:>7}: {} trial(s) spoiled by this host's load (its sender woke up to {:.1} ms late and broke the trial's shape) were run again, not scored",
                    r.spoiled_trials,
                    worst / 1e3
                );
            }
        }
        let Some(policy) = &self.policy else { return };
        for r in &self.repeats {
            let kept = &r.rates[policy.warmup_runs.min(r.rates.len())..];
            let s = summarize(kept, policy.confidence);
            let f = |g: fn(&linerate_run::stats::Summary) -> f64| s.as_ref().map_or(f64::NAN, g);
            let _ = writeln!(
                t,
                "{:>7} {:>8}% repeated: {} runs, mean {:.0} fps, stdev {:.0}, {:.0}% CI ±{:.0} fps, stopped: {}",
                size_label(&r.frame_size),
                r.loss_allowed * 100.0,
                kept.len(),
                f(|s| s.mean),
                f(|s| s.stdev),
                policy.confidence * 100.0,
                f(|s| s.half_width),
                r.stop.name()
            );
        }
    }

    fn latency_text(&self, text: &mut String, out: &[Latency]) {
        let _ = writeln!(
            text,
            "\nLatency (one-way, same-host clock{})\n{:>7} {:>6} {:>14} {:>10} {:>10} {:>10} {:>10} {:>10}",
            if self.bidir { "; tx->rx direction" } else { "" },
            "size",
            "load",
            "rate fps",
            "min us",
            "mean us",
            "p50 us",
            "p99 us",
            "max us"
        );
        for l in out {
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
}

/// rfc2544's `-J`: the settings, then each test asked for.
#[derive(Debug, Serialize)]
struct Rfc2544Doc<'a> {
    config: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency: Option<&'a [Latency]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frame_loss: Option<&'a [FrameLossStep]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    back_to_back: Option<&'a [BackToBack]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    throughput: Vec<ThroughputDoc<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// A throughput search, with its repetition when repeated.
#[derive(Debug, Serialize)]
struct ThroughputDoc<'a> {
    #[serde(flatten)]
    search: &'a Throughput,
    #[serde(skip_serializing_if = "Option::is_none")]
    repeat: Option<linerate_run::stats::Report<'a>>,
}

impl Outcome for Rfc2544Outcome {
    fn document(&self) -> Value {
        serde_json::to_value(Rfc2544Doc {
            config: &self.config,
            latency: self.latency.as_deref(),
            frame_loss: self.frame_loss.as_deref(),
            back_to_back: self.back_to_back.as_deref(),
            throughput: (self.throughput.iter())
                .map(|t| ThroughputDoc {
                    search: t,
                    repeat: (self.repeat_of(t))
                        .map(|(r, p)| p.report_of(&r.rates, r.stop.into(), "rate_fps")),
                })
                .collect(),
            error: self.error.as_deref(),
        })
        .unwrap_or_default()
    }

    fn text(&self) -> String {
        let mut text = String::new();
        if !self.throughput.is_empty() {
            self.throughput_text(&mut text);
        }
        if let Some(l) = &self.latency {
            self.latency_text(&mut text, l);
        }
        if let Some(out) = &self.frame_loss {
            let _ = writeln!(
                text,
                "\nFrame loss rate\n{:>7} {:>6} {:>14} {:>12}",
                "size", "load", "rate fps", "loss %"
            );
            for s in out {
                // A step kept though its sender was held back says what
                // it offered (the loss is of that load).
                let held = if s.offered_short {
                    format!("  held back: offered {:.0} fps", s.trial.offered_fps)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    text,
                    "{:>7} {:>5.0}% {:>14.0} {:>12.6}{held}",
                    size_label(&s.frame_size),
                    s.load * 100.0,
                    s.rate_fps,
                    s.loss_ratio * 100.0
                );
            }
        }
        if let Some(out) = &self.back_to_back {
            let _ = writeln!(
                text,
                "\nBack-to-back (at the maximum rate)\n{:>7} {:>14} {:>14} bursts",
                "size", "rate fps", "mean burst"
            );
            for b in out {
                let _ = writeln!(
                    text,
                    "{:>7} {:>14.0} {:>14.1} {:?}",
                    size_label(&b.frame_size),
                    b.rate_fps,
                    b.mean_burst,
                    b.bursts
                );
            }
        }
        if let Some(e) = &self.error {
            let _ = writeln!(
                text,
                "linerate: rfc2544 stopped: {e} (the results above stand)"
            );
        }
        text
    }
}

/// A frame size for the tables: `64`, `imix`.
pub fn size_label(s: &FrameSize) -> String {
    match s {
        FrameSize::Fixed(n) => n.to_string(),
        FrameSize::Mix { name, .. } | FrameSize::Profile { name, .. } => name.clone(),
    }
}

/// A trial as the run's rows: sent by the tx port, received by the rx port.
pub fn trial_rows(n: usize, t: &Trial) -> Vec<Row> {
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

/// A trial's log line for people.
pub fn trial_line(t: &Trial) -> String {
    let late = match t.shape {
        Some(s) if s.late_wakeups > 0 => format!(
            "  late {}x (worst {:.1} ms, burst {}, skipped {})",
            s.late_wakeups,
            s.max_late_us / 1e3,
            s.max_burst,
            s.skipped
        ),
        _ => String::new(),
    };
    format!(
        "{:>7}  asked {:>12.0} fps{}  offered {:>12.0} fps  sent {:>10}  received {:>10}  loss {:.6}%  {}{late}",
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
        match (t.passed, t.held_back) {
            // The rate the result is made of, on the line it came from.
            (true, false) => format!("pass at {:.0} fps", t.tested_fps()),
            (true, true) => format!(
                "pass at {:.0} fps (held back: forwarded {:.0} fps)",
                t.tested_fps(),
                t.forwarded_fps
            ),
            (false, _) if t.interrupted =>
                "interrupted (cut short by a stop: not scored)".to_string(),
            (false, _) if t.spoiled.is_some() => "spoiled by this host: run again".to_string(),
            (false, _) => format!("fail ({})", t.reason.as_deref().unwrap_or("")),
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc2544;
    use serde_json::json;

    #[test]
    fn the_document_and_tables_come_from_the_typed_results() {
        let t = Throughput {
            frame_size: FrameSize::Fixed(64),
            mean_frame_size: 64.0,
            bidirectional: false,
            loss_allowed: 0.0,
            rate_fps: 1000.0,
            rate_l1_bps: rfc2544::bits(1000.0, &FrameSize::Fixed(64)).0,
            rate_l2_bps: rfc2544::bits(1000.0, &FrameSize::Fixed(64)).1,
            loss_ratio: 0.0,
            of_max: 0.5,
            held_back: true,
            converged: false,
            spoiled_trials: 0,
            interrupted: false,
            trials: Vec::new(),
        };
        let policy = Policy {
            runs: Some(2),
            confidence: 0.95,
            ci_target: None,
            max_runs: 20,
            warmup_runs: 0,
        };
        let o = Rfc2544Outcome {
            config: json!({"sizes": [64]}),
            trial_time_s: 2.0,
            bidir: false,
            policy: Some(policy),
            throughput: vec![t],
            repeats: vec![RepeatedRate {
                frame_size: FrameSize::Fixed(64),
                loss_allowed: 0.0,
                rates: vec![900.0, 1100.0],
                stop: Stop::Count,
            }],
            latency: None,
            frame_loss: None,
            back_to_back: None,
            error: Some("the link went down".into()),
        };
        let d = o.document();
        assert_eq!(d["throughput"][0]["rate_fps"], 1000.0);
        assert_eq!(
            d["throughput"][0]["repeat"]["values"],
            json!([900.0, 1100.0])
        );
        assert_eq!(d["throughput"][0]["repeat"]["statistics"]["mean"], 1000.0);
        assert_eq!(d["error"], "the link went down");
        assert!(d.get("latency").is_none());
        let text = o.text();
        assert!(text.contains("     64        0%           1000"), "{text}");
        assert!(
            text.contains("     64: trials asked above 1000 fps were held back without loss"),
            "{text}"
        );
        assert!(
            text.contains("     64: the search stopped at --max-trials (0)"),
            "{text}"
        );
        assert_eq!(d["throughput"][0]["held_back"], true);
        assert_eq!(d["throughput"][0]["converged"], false);
        assert!(
            text.contains(
                "repeated: 2 runs, mean 1000 fps, stdev 141, 95% CI ±1271 fps, stopped: count"
            ),
            "{text}"
        );
        assert!(text.ends_with(
            "linerate: rfc2544 stopped: the link went down (the results above stand)\n"
        ));
    }

    /// A failed trial of 64 B at 1000 fps asked: 999 offered, 1% lost.
    fn lossy_trial() -> Trial {
        Trial {
            frame_size: FrameSize::Fixed(64),
            asked_fps: 1000.0,
            offered_fps: 999.0,
            forwarded_fps: 990.0,
            sent: 1000,
            received: 990,
            sent_bytes: 64_000,
            received_bytes: 63_360,
            loss_ratio: 0.01,
            passed: false,
            reason: Some("loss".into()),
            held_back: false,
            latency_ns: None,
            rx_iface_packets: None,
            directions: None,
            shape: None,
            spoiled: None,
            interrupted: false,
        }
    }

    /// A frame-loss step kept though its sender was held back says what
    /// it offered; one offered in full says nothing more.
    #[test]
    fn a_held_back_frame_loss_step_says_what_it_offered() {
        let step = |load: f64, offered_fps: f64| rfc2544::FrameLossStep {
            frame_size: FrameSize::Fixed(64),
            load,
            rate_fps: 1000.0 * load,
            loss_ratio: 0.01,
            offered_short: offered_fps < 990.0 * load,
            trial: Trial {
                offered_fps,
                asked_fps: 1000.0 * load,
                ..lossy_trial()
            },
        };
        let o = Rfc2544Outcome {
            config: json!({"sizes": [64]}),
            trial_time_s: 1.0,
            bidir: false,
            policy: None,
            throughput: Vec::new(),
            repeats: Vec::new(),
            latency: None,
            frame_loss: Some(vec![step(1.0, 850.0), step(0.9, 899.0)]),
            back_to_back: None,
            error: None,
        };
        let text = o.text();
        let rows: Vec<&str> = text.lines().filter(|l| l.contains("1.000000")).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(
            rows[0].ends_with("1.000000  held back: offered 850 fps"),
            "{text}"
        );
        assert!(rows[1].ends_with("1.000000"), "{text}");
    }

    #[test]
    fn the_trial_log_line_puts_each_figure_in_its_place() {
        let mut t = lossy_trial();
        assert_eq!(
            trial_line(&t),
            "   64 B  asked         1000 fps  offered          999 fps  sent       1000  received        990  loss 1.000000%  fail (loss)"
        );
        let d = rfc2544::Direction {
            sent: 500,
            received: 495,
            offered_fps: 999.0,
            forwarded_fps: 990.0,
            loss_ratio: 0.01,
        };
        let (mut held, mut asked_more) = (t.clone(), t.clone());
        (held.passed, held.held_back, held.reason) = (true, true, None);
        held.offered_fps = 900.0;
        assert!(
            trial_line(&held).ends_with("pass at 900 fps (held back: forwarded 990 fps)"),
            "{}",
            trial_line(&held)
        );
        (asked_more.passed, asked_more.reason) = (true, None);
        // Issue 43 item 8: a pass says the rate the result takes from it
        // (the lowest of asked, offered and forwarded: 990 here).
        assert!(
            trial_line(&asked_more).ends_with("loss 1.000000%  pass at 990 fps"),
            "{}",
            trial_line(&asked_more)
        );
        t.directions = Some([d, d]);
        assert!(
            trial_line(&t).starts_with("   64 B  asked         1000 fps each way  offered "),
            "{}",
            trial_line(&t)
        );
    }
}
