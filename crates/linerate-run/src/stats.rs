//! Repeat until confident: the statistics of a figure over repeated runs
//! (mean, sample standard deviation, the confidence interval of the mean
//! with Student's t for small samples) and the rule that says when to
//! stop (`--repeat N`, or `--confidence C --ci-target T --max-runs M`).

use serde::Serialize;

/// ln Γ(x), Lanczos (g = 7, n = 9): |error| < 1e-13 for x > 0.
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let mut a = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    let tiny = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// Student's t distribution function with `df` degrees of freedom.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * beta_inc(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The two-sided critical value: P(|T| <= t) = `confidence` (0.95 gives
/// 12.706 for one degree of freedom, 2.776 for four, 1.96 at infinity).
pub fn t_quantile(confidence: f64, df: f64) -> f64 {
    let p = 0.5 + confidence / 2.0;
    let (mut lo, mut hi) = (0.0f64, 1e6f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// A figure over repeated runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1).
    pub stdev: f64,
    pub confidence: f64,
    /// Student's t for n - 1 degrees of freedom.
    pub t: f64,
    /// Half-width of the confidence interval of the mean, and as a share
    /// of the mean.
    pub half_width: f64,
    pub half_width_ratio: f64,
    pub low: f64,
    pub high: f64,
}

/// The statistics of `values` at `confidence` (two or more values).
pub fn summarize(values: &[f64], confidence: f64) -> Option<Summary> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let stdev = var.sqrt();
    let t = t_quantile(confidence, (n - 1) as f64);
    let half_width = t * stdev / (n as f64).sqrt();
    Some(Summary {
        n,
        mean,
        stdev,
        confidence,
        t,
        half_width,
        half_width_ratio: if mean != 0.0 {
            half_width / mean.abs()
        } else {
            f64::INFINITY
        },
        low: mean - half_width,
        high: mean + half_width,
    })
}

/// When to stop repeating.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// `--repeat N`: exactly N runs (after the warm-up runs).
    pub runs: Option<usize>,
    pub confidence: f64,
    /// `--ci-target`: stop once the half-width is within this share of the
    /// mean (at least 3 runs).
    pub ci_target: Option<f64>,
    pub max_runs: usize,
    /// Runs made first and left out of the statistics.
    pub warmup_runs: usize,
}

/// Why the repetition stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The number of runs asked for.
    Count,
    /// The confidence interval is within the target.
    Confident,
    /// `--max-runs` reached before the target.
    MaxRuns,
}

impl Stop {
    /// Its name in a repetition's report (`stop`).
    pub fn name(self) -> &'static str {
        match self {
            Stop::Count => "count",
            Stop::Confident => "confident",
            Stop::MaxRuns => "max_runs",
        }
    }
}

impl Policy {
    /// Whether to stop after these runs (warm-up runs included in `all`).
    pub fn stop(&self, all: &[f64]) -> Option<Stop> {
        let kept = all.get(self.warmup_runs..).unwrap_or(&[]);
        if let Some(n) = self.runs {
            return (kept.len() >= n).then_some(Stop::Count);
        }
        if let (Some(target), Some(s)) = (self.ci_target, summarize(kept, self.confidence))
            && kept.len() >= 3
            && s.half_width_ratio <= target
        {
            return Some(Stop::Confident);
        }
        (all.len() >= self.max_runs.max(1)).then_some(Stop::MaxRuns)
    }

    /// The report of a finished repetition: per-run values, warm-up runs,
    /// the statistics, the stop reason.
    pub fn report(&self, all: &[f64], stop: Stop, figure: &str) -> serde_json::Value {
        serde_json::to_value(self.report_of(all, stop.into(), figure)).unwrap_or_default()
    }

    /// [`report`](Self::report), typed.
    pub fn report_of<'a>(&self, all: &'a [f64], stop: Ending, figure: &'a str) -> Report<'a> {
        let kept = all.get(self.warmup_runs..).unwrap_or(&[]);
        Report {
            figure,
            values: kept,
            warmup_values: &all[..self.warmup_runs.min(all.len())],
            statistics: summarize(kept, self.confidence),
            stop,
            confidence: self.confidence,
            ci_target: self.ci_target,
            max_runs: self.max_runs,
        }
    }
}

/// How a repetition ended, as its report says: why it stopped, or that a
/// run failed (the runs before it stand).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Ending {
    Stopped(Stop),
    Failed(&'static str),
}

impl Ending {
    /// A run failed: the repetition stopped there.
    pub const RUN_FAILED: Ending = Ending::Failed("a run failed");
}

impl From<Stop> for Ending {
    fn from(s: Stop) -> Self {
        Ending::Stopped(s)
    }
}

/// A finished repetition's report: the measured figure's name, each run's
/// value (warm-up runs apart), the statistics, how it ended.
#[derive(Debug, Clone, Serialize)]
pub struct Report<'a> {
    pub figure: &'a str,
    pub values: &'a [f64],
    pub warmup_values: &'a [f64],
    pub statistics: Option<Summary>,
    pub stop: Ending,
    pub confidence: f64,
    pub ci_target: Option<f64>,
    pub max_runs: usize,
}

/// One line for people: `5 runs: mean 9.41 Gbit/s, stdev 0.12, 95% CI
/// ±0.15 (±1.6%)`.
pub fn line(
    all: &[f64],
    p: &Policy,
    stop: Stop,
    unit: &str,
    fmt: &dyn Fn(f64) -> String,
) -> String {
    let kept = all.get(p.warmup_runs..).unwrap_or(&[]);
    let vals: Vec<String> = kept.iter().map(|v| fmt(*v)).collect();
    let why = match stop {
        Stop::Count => "the runs asked for",
        Stop::Confident => "the confidence interval is within the target",
        Stop::MaxRuns => "--max-runs reached before the target",
    };
    match summarize(kept, p.confidence) {
        Some(s) => format!(
            "repeat: {} runs ({} warm-up left out), {unit}: mean {}, stdev {}, {:.0}% CI ±{} (±{:.2}%), t={:.3}; values [{}]; stopped: {why}",
            s.n,
            p.warmup_runs.min(all.len()),
            fmt(s.mean),
            fmt(s.stdev),
            p.confidence * 100.0,
            fmt(s.half_width),
            s.half_width_ratio * 100.0,
            s.t,
            vals.join(", ")
        ),
        None => format!(
            "repeat: {} run(s), {unit}: [{}]; stopped: {why}",
            kept.len(),
            vals.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stops_name_is_the_reports() {
        for s in [Stop::Count, Stop::Confident, Stop::MaxRuns] {
            assert_eq!(serde_json::json!(s), s.name());
        }
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        for (conf, df, want) in [
            (0.95, 1.0, 12.706),
            (0.95, 4.0, 2.776),
            (0.95, 10.0, 2.228),
            (0.95, 30.0, 2.042),
            (0.99, 5.0, 4.032),
            (0.90, 2.0, 2.920),
            (0.95, 1e6, 1.960),
        ] {
            let t = t_quantile(conf, df);
            assert!(
                (t - want).abs() < 0.0015,
                "t({conf}, {df}) = {t}, tables say {want}"
            );
        }
    }

    /// By hand: 10, 12, 11, 13, 9 -> mean 11, s^2 = (1+1+0+4+4)/4 = 2.5,
    /// s = 1.5811, t(0.95, 4) = 2.7764, half-width = 2.7764 * 1.5811 / sqrt 5
    /// = 1.9632.
    #[test]
    fn a_hand_computed_example() {
        let s = summarize(&[10.0, 12.0, 11.0, 13.0, 9.0], 0.95).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.mean - 11.0).abs() < 1e-12);
        assert!((s.stdev - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.t - 2.7764).abs() < 1e-3, "{}", s.t);
        assert!((s.half_width - 1.9632).abs() < 1e-3, "{}", s.half_width);
        assert!((s.low - (11.0 - s.half_width)).abs() < 1e-12);
        assert!(summarize(&[1.0], 0.95).is_none());
    }

    #[test]
    fn the_policy_stops_for_its_reason() {
        let fixed = Policy {
            runs: Some(3),
            confidence: 0.95,
            ci_target: None,
            max_runs: 10,
            warmup_runs: 1,
        };
        assert_eq!(
            fixed.stop(&[1.0, 2.0, 3.0]),
            None,
            "the warm-up run does not count"
        );
        assert_eq!(fixed.stop(&[1.0, 2.0, 3.0, 4.0]), Some(Stop::Count));
        let ci = Policy {
            runs: None,
            confidence: 0.95,
            ci_target: Some(0.02),
            max_runs: 6,
            warmup_runs: 0,
        };
        assert_eq!(ci.stop(&[100.0, 100.5]), None);
        assert_eq!(ci.stop(&[100.0, 100.5, 100.2]), Some(Stop::Confident));
        assert_eq!(ci.stop(&[100.0, 150.0, 80.0, 120.0, 60.0]), None);
        assert_eq!(
            ci.stop(&[100.0, 150.0, 80.0, 120.0, 60.0, 90.0]),
            Some(Stop::MaxRuns)
        );
        let r = ci.report(&[100.0, 100.5, 100.2], Stop::Confident, "x");
        assert_eq!(r["stop"], "confident");
        assert_eq!(r["statistics"]["n"], 3);
    }
}
