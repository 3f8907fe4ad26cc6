//! Charts from a read result: rate, loss and latency over time, the
//! latency CDF, a repetition's runs, an RFC 2544 campaign by frame size.

use crate::read::f;
use crate::{Chart, Figure, Input, PlotError, Rec, Series};
use serde_json::Value;

impl Input {
    /// The chart of `fig` from this result.
    pub fn chart(&self, fig: Figure) -> Result<Chart, PlotError> {
        // An RFC 2544 campaign's document is not a repetition's.
        if let Some(c) = self.campaign.as_ref().filter(|_| fig != Figure::Runs) {
            return campaign_chart(c, fig);
        }
        match fig {
            Figure::Rate if self.has(|r| r.bps.is_some()) => {
                self.over_time("Rate over time", "rate", |r| r.bps, rate_unit)
            }
            // rr counts transactions, not bits.
            Figure::Rate => self.over_time(
                "Rate over time",
                "rate",
                |r| r.pps,
                |max| {
                    let (label, scale) = rate_unit(max);
                    (label.replace("bit/s", "packets/s"), scale)
                },
            ),
            Figure::Loss => self.over_time(
                "Loss over time",
                "loss",
                |r| r.lost,
                |_| ("lost packets per interval".into(), 1.0),
            ),
            Figure::Latency => self.latency(),
            Figure::Cdf => self.cdf(),
            Figure::Runs => self.runs(),
        }
    }

    fn has(&self, pred: impl Fn(&Rec) -> bool) -> bool {
        self.intervals
            .iter()
            .any(|(_, recs)| recs.iter().any(&pred))
    }

    /// One line per row name over the intervals; totals kept, the largest
    /// rows kept up to 12. A repetition: each run's totals (its rows where
    /// an interval has no total), the first 20 runs.
    fn over_time(
        &self,
        title: &str,
        what: &'static str,
        value: impl Fn(&Rec) -> Option<f64>,
        unit: impl Fn(f64) -> (String, f64),
    ) -> Result<Chart, PlotError> {
        let mut series: Vec<(Series, f64)> = Vec::new();
        for ((start, end), recs) in &self.intervals {
            let have_total = recs.iter().any(|r| r.total && value(r).is_some());
            for r in recs {
                if (self.repeat.is_some() || self.overlay) && r.total != have_total {
                    continue;
                }
                let Some(v) = value(r) else { continue };
                match series.iter_mut().find(|(s, _)| s.name == r.name) {
                    Some((s, sum)) => {
                        s.points.push((*end, v));
                        s.starts.push(*start);
                        *sum += v;
                    }
                    None => series.push((
                        Series {
                            name: r.name.clone(),
                            points: vec![(*end, v)],
                            total: r.total,
                            marks: false,
                            starts: vec![*start],
                        },
                        v,
                    )),
                }
            }
        }
        if series.is_empty() {
            return Err(PlotError::NoData(what));
        }
        let max = series
            .iter()
            .flat_map(|(s, _)| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        let (label, scale) = unit(max);
        let (mut totals, mut rows): (Vec<_>, Vec<_>) =
            series.into_iter().partition(|(s, _)| s.total);
        // A lone row and its total are the same line: keep the row.
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        const ROWS_MAX: usize = 12;
        // A repetition's runs, in order.
        const TOTALS_MAX: usize = 20;
        let left_out =
            rows.len().saturating_sub(ROWS_MAX) + totals.len().saturating_sub(TOTALS_MAX);
        rows.truncate(ROWS_MAX);
        totals.truncate(TOTALS_MAX);
        let mut out: Vec<Series> = rows.into_iter().chain(totals).map(|(s, _)| s).collect();
        for s in &mut out {
            for p in &mut s.points {
                p.1 /= scale;
            }
        }
        Ok(Chart {
            title: self.titled(title),
            x_label: "time (s)".into(),
            y_label: label,
            series: out,
            left_out,
            log_x: false,
            y_max: None,
            x_whole: false,
        })
    }

    /// A title, said to be run by run for a repetition.
    fn titled(&self, title: &str) -> String {
        match &self.repeat {
            _ if self.overlay => format!("{title}, overlaid"),
            Some(_) => format!("{title}, run by run"),
            None => title.into(),
        }
    }

    fn latency(&self) -> Result<Chart, PlotError> {
        let mut series: Vec<Series> = Vec::new();
        // `start`: the interval's start, for a figure over the interval
        // (a percentile); none for one taken at its end (TCP's RTT).
        let mut add = |name: String, total: bool, start: Option<f64>, t: f64, v: Option<f64>| {
            let Some(v) = v else { return };
            let i = match series.iter().position(|s| s.name == name) {
                Some(i) => i,
                None => {
                    series.push(Series {
                        name,
                        points: Vec::new(),
                        starts: Vec::new(),
                        total,
                        marks: false,
                    });
                    series.len() - 1
                }
            };
            series[i].points.push((t, v));
            series[i].starts.extend(start);
        };
        for ((start, end), recs) in &self.intervals {
            // The sums' percentiles where there are any, else each row's.
            let have_sum = recs.iter().any(|r| r.total && r.p50_us.is_some());
            for r in recs
                .iter()
                .filter(|r| r.total == have_sum || r.rtt_us.is_some())
            {
                add(
                    format!("{} p50", r.name),
                    r.total,
                    Some(*start),
                    *end,
                    r.p50_us,
                );
                add(
                    format!("{} p99", r.name),
                    r.total,
                    Some(*start),
                    *end,
                    r.p99_us,
                );
                add(
                    format!("{} RTT (sender's TCP_INFO)", r.name),
                    false,
                    None,
                    *end,
                    r.rtt_us,
                );
            }
        }
        if series.is_empty() {
            return Err(PlotError::NoData("latency"));
        }
        let left_out = series.len().saturating_sub(12);
        series.truncate(12);
        Ok(Chart {
            title: self.titled("Latency over time"),
            x_label: "time (s)".into(),
            y_label: "latency (µs)".into(),
            series,
            left_out,
            log_x: false,
            y_max: None,
            x_whole: false,
        })
    }

    /// One line per result (per run of a repetition) through its
    /// percentiles.
    fn cdf(&self) -> Result<Chart, PlotError> {
        if self.percentiles.is_empty() {
            return Err(PlotError::NoData("latency percentile"));
        }
        let min = self
            .percentiles
            .iter()
            .filter_map(|(_, p)| p.first())
            .map(|p| p.1.max(1e-3))
            .fold(f64::MAX, f64::min);
        let max = self
            .percentiles
            .iter()
            .filter_map(|(_, p)| p.last())
            .map(|p| p.1)
            .fold(0.0, f64::max);
        let log_x = max / min > 20.0;
        let mut series = Vec::new();
        for (name, pct) in &self.percentiles {
            let mut points: Vec<(f64, f64)> = vec![(0.0, 0.0)];
            points.extend(pct.iter().map(|&(q, us)| (us, q)));
            // A min percentile (fraction 0) makes the (0, 0) start redundant.
            if pct.first().is_some_and(|p| p.0 == 0.0) {
                points.remove(0);
            }
            if log_x {
                points.retain(|p| p.0 > 0.0);
            }
            let name = if name.is_empty() {
                format!(
                    "{} latency",
                    if self.mode.is_empty() {
                        "run"
                    } else {
                        &self.mode
                    }
                )
            } else {
                name.clone()
            };
            series.push(Series {
                name,
                points,
                total: true,
                marks: false,
                starts: Vec::new(),
            });
        }
        const RUNS_MAX: usize = 20;
        let left_out = series.len().saturating_sub(RUNS_MAX);
        series.truncate(RUNS_MAX);
        Ok(Chart {
            title: self.titled("Latency CDF (the result's percentiles)"),
            x_label: "latency (µs)".into(),
            y_label: "fraction of packets".into(),
            series,
            left_out,
            log_x,
            y_max: Some(1.05),
            x_whole: false,
        })
    }

    /// A repetition's figure run by run (warm-up runs apart), with the
    /// mean and the confidence interval of the runs after the warm-up.
    fn runs(&self) -> Result<Chart, PlotError> {
        let Some(rep) = &self.repeat else {
            return Err(PlotError::NotRepeated);
        };
        if rep.warmup.is_empty() && rep.values.is_empty() {
            return Err(PlotError::NoData("run"));
        }
        let max = rep
            .warmup
            .iter()
            .chain(&rep.values)
            .fold(0.0, |a, &v| f64::max(a, v));
        let (unit, scale) = figure_unit(&rep.figure, max);
        let first = rep.warmup.len() as f64 + 1.0;
        let mut series = Vec::new();
        let mark = |name: String, total: bool, points: Vec<(f64, f64)>| Series {
            name,
            points,
            total,
            marks: true,
            starts: Vec::new(),
        };
        if !rep.warmup.is_empty() {
            series.push(mark(
                "warm-up runs (left out)".into(),
                false,
                (1..)
                    .map(f64::from)
                    .zip(rep.warmup.iter().map(|v| v / scale))
                    .collect(),
            ));
        }
        if !rep.values.is_empty() {
            let figure = if rep.figure.is_empty() {
                "value".to_string()
            } else {
                rep.figure.clone()
            };
            series.push(mark(
                figure,
                true,
                (0..)
                    .map(|i| first + f64::from(i))
                    .zip(rep.values.iter().map(|v| v / scale))
                    .collect(),
            ));
        }
        if let Some((mean, low, high)) = rep.stats {
            // Across the runs counted (a lone run: a short level line).
            let last = first + rep.values.len().saturating_sub(1) as f64;
            let (a, b) = if last > first {
                (first, last)
            } else {
                (first - 0.25, first + 0.25)
            };
            let level = |name: String, v: f64| Series {
                name,
                points: vec![(a, v / scale), (b, v / scale)],
                total: false,
                marks: false,
                starts: Vec::new(),
            };
            series.push(level("mean".into(), mean));
            let pct = (rep.confidence * 100.0).round();
            series.push(level(format!("{pct}% CI high"), high));
            series.push(level(format!("{pct}% CI low"), low));
        }
        Ok(Chart {
            title: format!(
                "{} over the runs",
                if rep.figure.is_empty() {
                    "The figure"
                } else {
                    &rep.figure
                }
            ),
            x_label: "run".into(),
            y_label: if unit.is_empty() {
                rep.figure.clone()
            } else {
                format!("{} ({unit})", rep.figure)
            },
            series,
            left_out: 0,
            log_x: false,
            y_max: None,
            x_whole: true,
        })
    }
}

/// The unit of a repetition's figure ("receiver bits_per_second",
/// "sender pps", "transactions_per_s") for values up to `max`: the unit
/// with its SI prefix and the divisor; none known: ("", 1).
fn figure_unit(figure: &str, max: f64) -> (String, f64) {
    let unit = if figure.ends_with("bits_per_second") {
        "bit/s"
    } else if figure.ends_with("pps") {
        "packets/s"
    } else if let Some(what) = figure.strip_suffix("_per_s") {
        return si(max, &format!("{what}/s"));
    } else {
        return (String::new(), 1.0);
    };
    si(max, unit)
}

/// `unit` with the SI prefix for values up to `max`, and the divisor.
fn si(max: f64, unit: &str) -> (String, f64) {
    let (prefix, scale) = if max >= 1e9 {
        ("G", 1e9)
    } else if max >= 1e6 {
        ("M", 1e6)
    } else if max >= 1e3 {
        ("k", 1e3)
    } else {
        ("", 1.0)
    };
    (format!("{prefix}{unit}"), scale)
}

/// An RFC 2544 campaign: throughput (L1 Mbit/s per loss ratio allowed)
/// or latency (p50/p99/max) against the frame size.
fn campaign_chart(doc: &Value, fig: Figure) -> Result<Chart, PlotError> {
    let mut series: Vec<Series> = Vec::new();
    let mut add = |name: String, total: bool, x: f64, y: f64| match series
        .iter_mut()
        .find(|s| s.name == name)
    {
        Some(s) => s.points.push((x, y)),
        None => series.push(Series {
            name,
            points: vec![(x, y)],
            total,
            marks: false,
            starts: Vec::new(),
        }),
    };
    let (title, y_label) = match fig {
        Figure::Rate => {
            for r in doc["throughput"].as_array().into_iter().flatten() {
                // A mix (imix) is placed at its mean frame size.
                let size = f(r, "frame_size").or_else(|| f(r, "mean_frame_size"));
                let (Some(size), Some(l1)) = (size, f(r, "rate_l1_bps")) else {
                    continue;
                };
                let loss = f(r, "loss_allowed").unwrap_or(0.0);
                let name = if loss == 0.0 {
                    "NDR (no loss)".to_string()
                } else {
                    format!("PDR ({}% loss)", loss * 100.0)
                };
                add(name, loss == 0.0, size, l1 / 1e6);
            }
            ("Throughput by frame size (RFC 2544)", "L1 rate (Mbit/s)")
        }
        Figure::Latency => {
            for l in doc["latency"].as_array().into_iter().flatten() {
                let (Some(size), Some(v)) =
                    (f(l, "frame_size"), l["trial"]["latency_ns"].as_array())
                else {
                    continue;
                };
                // Several loads: a series per figure and load.
                let load = f(l, "load").unwrap_or(1.0);
                for (i, name) in [(2, "p50"), (3, "p99"), (4, "max")] {
                    if let Some(ns) = v.get(i).and_then(Value::as_f64) {
                        let name = if load == 1.0 {
                            name.to_string()
                        } else {
                            format!("{name} at {:.0}% load", load * 100.0)
                        };
                        add(name, i == 2, size, ns / 1e3);
                    }
                }
            }
            ("Latency by frame size (RFC 2544)", "latency (µs)")
        }
        _ => {
            return Err(PlotError::NoData(if fig == Figure::Loss {
                "loss-over-time"
            } else {
                "CDF"
            }));
        }
    };
    if series.is_empty() {
        return Err(PlotError::NoData(if fig == Figure::Rate {
            "throughput"
        } else {
            "latency"
        }));
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Ok(Chart {
        title: title.into(),
        x_label: "frame size (bytes)".into(),
        y_label: y_label.into(),
        series,
        left_out: 0,
        log_x: false,
        y_max: None,
        x_whole: false,
    })
}

/// A bit-rate axis unit for values up to `max` bit/s: label and divisor.
fn rate_unit(max: f64) -> (String, f64) {
    let (name, scale) = si(max, "bit/s");
    (format!("rate ({name})"), scale)
}
