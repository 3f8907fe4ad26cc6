//! Two sets of runs compared: Welch's unequal-variances t test on one
//! figure, the difference of the means with its confidence interval
//! (Welch–Satterthwaite degrees of freedom, Student's t quantile computed
//! from the t distribution function of `linerate_run::stats`, not looked
//! up in a table).

use linerate_run::stats::{t_cdf, t_quantile};
use serde::Serialize;

/// Mean, sample standard deviation (n - 1) and count of one set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    pub n: usize,
    pub mean: f64,
    /// 0 for a single value.
    pub stdev: f64,
}

impl Sample {
    /// `None` for no values.
    pub fn of(values: &[f64]) -> Option<Sample> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let stdev = if n > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Sample { n, mean, stdev })
    }

    /// The variance of the mean, s²/n.
    fn var_of_mean(&self) -> f64 {
        self.stdev * self.stdev / self.n as f64
    }
}

/// Why a difference has no test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Untested {
    /// A set has fewer than two runs: no variance to test against.
    TooFewRuns,
    /// Both sets' runs are all equal: the difference is exact (or nil).
    NoVariance,
}

impl Untested {
    pub fn reason(self) -> &'static str {
        match self {
            Untested::TooFewRuns => "fewer than two runs on a side: no test",
            Untested::NoVariance => "no variance on either side: no test",
        }
    }
}

/// Welch's t test of `a` against `b` (the baseline).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    /// t = (mean a - mean b) / standard error.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p value.
    pub p: f64,
    pub confidence: f64,
    /// The confidence interval of mean a - mean b.
    pub low: f64,
    pub high: f64,
}

impl Welch {
    /// Whether the difference is significant at the test's confidence
    /// (p < 1 - confidence, the same as the interval excluding 0).
    pub fn significant(&self) -> bool {
        self.p < 1.0 - self.confidence
    }
}

/// The change of one figure from `b` (the baseline) to `a`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    pub a: Sample,
    pub b: Sample,
    /// mean a - mean b.
    pub diff: f64,
    /// diff / |mean b| (`None` when mean b is 0).
    pub ratio: Option<f64>,
    pub test: Result<Welch, Untested>,
}

impl Change {
    /// A relative bound of the interval (its `low` or `high` over |mean b|).
    pub fn ratio_of(&self, v: f64) -> Option<f64> {
        (self.b.mean != 0.0).then(|| v / self.b.mean.abs())
    }
}

/// Welch's t test and interval of `a` against `b` at `confidence`.
pub fn welch(a: &Sample, b: &Sample, confidence: f64) -> Result<Welch, Untested> {
    if a.n < 2 || b.n < 2 {
        return Err(Untested::TooFewRuns);
    }
    let (va, vb) = (a.var_of_mean(), b.var_of_mean());
    let se2 = va + vb;
    if se2 <= 0.0 || !se2.is_finite() {
        return Err(Untested::NoVariance);
    }
    let se = se2.sqrt();
    let df = se2 * se2 / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    let diff = a.mean - b.mean;
    let t = diff / se;
    let p = (2.0 * (1.0 - t_cdf(t.abs(), df))).clamp(0.0, 1.0);
    let half = t_quantile(confidence, df) * se;
    Ok(Welch {
        t,
        df,
        p,
        confidence,
        low: diff - half,
        high: diff + half,
    })
}

/// The change of a figure measured `a` times against `b` times.
pub fn change(a: &[f64], b: &[f64], confidence: f64) -> Option<Change> {
    let (sa, sb) = (Sample::of(a)?, Sample::of(b)?);
    let diff = sa.mean - sb.mean;
    Some(Change {
        a: sa,
        b: sb,
        diff,
        ratio: (sb.mean != 0.0).then(|| diff / sb.mean.abs()),
        test: welch(&sa, &sb, confidence),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wikipedia's first example of Welch's t test (two samples of 15).
    const A1: [f64; 15] = [
        27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
    ];
    const A2: [f64; 15] = [
        27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
    ];

    #[test]
    fn welch_on_the_textbook_example() {
        let c = change(&A1, &A2, 0.95).unwrap();
        let w = c.test.unwrap();
        // Published: t = -2.46, df = 25.0, p = 0.021. Exact figures from
        // the formulas (computed apart: exact sums in Python's fractions, p and
        // the quantile by Simpson's rule on the t density).
        assert!((w.t - -2.455_356).abs() < 1e-5, "t {}", w.t);
        assert!((w.df - 24.988_529).abs() < 1e-5, "df {}", w.df);
        assert!((w.p - 0.021_378).abs() < 1e-5, "p {}", w.p);
        assert!(w.significant());
        // The interval: diff ± t(0.975, 25.0) · se, t(0.975, 24.99) = 2.059586.
        let se = c.diff / w.t;
        let half = (w.high - w.low) / 2.0;
        assert!((half / se.abs() - 2.059_586).abs() < 1e-5, "{}", half / se);
        assert!(w.high < 0.0 && w.low < w.high);
        assert!((c.diff - (c.a.mean - c.b.mean)).abs() < 1e-12);
    }

    #[test]
    fn equal_samples_are_not_significant_and_degenerate_ones_say_why() {
        let w = welch(&Sample::of(&A1).unwrap(), &Sample::of(&A1).unwrap(), 0.95).unwrap();
        assert_eq!(w.t, 0.0);
        assert!((w.p - 1.0).abs() < 1e-9);
        assert!(!w.significant());
        assert_eq!(
            change(&[1.0], &[1.0, 2.0], 0.95).unwrap().test,
            Err(Untested::TooFewRuns)
        );
        assert_eq!(
            change(&[3.0, 3.0], &[2.0, 2.0], 0.95).unwrap().test,
            Err(Untested::NoVariance)
        );
        assert!(change(&[], &[1.0], 0.95).is_none());
        assert_eq!(change(&[1.0], &[0.0], 0.95).unwrap().ratio, None);
    }

    /// SplitMix64 and Box–Muller: normal draws, seeded.
    struct Normal(u64);
    impl Normal {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn draw(&mut self, mean: f64, sd: f64) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            mean + sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    #[test]
    fn the_interval_covers_the_true_difference_as_often_as_it_says() {
        // Unequal variances and sizes (Welch's case): 4 runs of sd 1 against
        // 7 of sd 3, true difference 2. A 95% interval covers it in 95% of
        // experiments: 4000 of them, binomial sd 0.34%.
        let mut rng = Normal(44);
        let (mut covered, mut rejected_null) = (0, 0);
        let trials = 4000;
        for _ in 0..trials {
            let a: Vec<f64> = (0..4).map(|_| rng.draw(12.0, 1.0)).collect();
            let b: Vec<f64> = (0..7).map(|_| rng.draw(10.0, 3.0)).collect();
            let w = change(&a, &b, 0.95).unwrap().test.unwrap();
            if w.low <= 2.0 && 2.0 <= w.high {
                covered += 1;
            }
            // Another experiment with no true difference: false alarms at 5%.
            let b0: Vec<f64> = (0..7).map(|_| rng.draw(12.0, 3.0)).collect();
            if change(&a, &b0, 0.95).unwrap().test.unwrap().significant() {
                rejected_null += 1;
            }
        }
        let coverage = f64::from(covered) / f64::from(trials);
        assert!((0.935..=0.965).contains(&coverage), "coverage {coverage}");
        let alarms = f64::from(rejected_null) / f64::from(trials);
        assert!((0.035..=0.065).contains(&alarms), "false alarms {alarms}");
    }
}
