//! `linerate plot`: figures from any mode's result.
//!
//! Inputs (detected): an iperf3-style `-J` document (client or server), a
//! packet mode's `-J` document with run-model `intervals` (blast, sink),
//! the rr client's `-J` document, a `--repeat`/`--ci-target` `-J` document
//! (`runs` and `repeat`: each run's document and the figure over the runs),
//! an RFC 2544 campaign, or a `--json-stream` file (run-model events of
//! blast, sink, fwd, rr; iperf3's events of client and server). Figures:
//! rate over time (per stream / flow and the total per direction; one line
//! per run of a repetition), loss over time, latency over time (p50/p99
//! where the mode measures it; TCP RTT of iperf senders), the latency CDF
//! from the result's percentiles, and a repetition's figure run by run.
//! A line of one point (a one-interval result) is drawn as a marker. SVG or
//! PNG by the output's extension, drawn with `plotters` and a bundled
//! DejaVu Sans (no system fonts).

mod draw;

pub use draw::{outputs, render, svg};
use serde_json::Value;

/// What to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Rate,
    Loss,
    Latency,
    Cdf,
    /// A repetition's figure, run by run, with its mean and confidence
    /// interval.
    Runs,
}

impl Figure {
    pub fn parse(s: &str) -> Option<Figure> {
        match s {
            "rate" => Some(Figure::Rate),
            "loss" => Some(Figure::Loss),
            "latency" => Some(Figure::Latency),
            "cdf" => Some(Figure::Cdf),
            "runs" => Some(Figure::Runs),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Figure::Rate => "rate",
            Figure::Loss => "loss",
            Figure::Latency => "latency",
            Figure::Cdf => "cdf",
            Figure::Runs => "runs",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("not a linerate or iperf3 result: {0}")]
    Input(String),
    #[error("this result has no {0} figures")]
    NoData(&'static str),
    #[error("this result is not a --repeat/--ci-target result (it has no runs)")]
    NotRepeated,
    #[error("drawing failed: {0}")]
    Draw(String),
    #[error("the output must end in .svg or .png: {0}")]
    Format(String),
}

/// One line on a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Where each point is a figure over an interval ending at its x: each
    /// interval's start (drawn as a step function, the level held from the
    /// interval's start to its end). Empty: the points are joined.
    pub starts: Vec<f64>,
    /// A total: drawn thicker.
    pub total: bool,
    /// Each point marked (a line of one point always is).
    pub marks: bool,
}

impl Series {
    /// Whether its points are drawn as markers: asked, or a lone point
    /// (not an interval's: that is a level from its start to its end).
    pub fn marked(&self) -> bool {
        self.marks || (self.points.len() == 1 && self.starts.is_empty())
    }
}

/// A chart: axes and lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Lines left out (only the largest rows, the first runs are drawn).
    pub left_out: usize,
    pub log_x: bool,
    /// The y axis's top, where it is fixed (a CDF's 1.05).
    pub y_max: Option<f64>,
    /// The x axis counts (runs): whole numbers only on it.
    pub x_whole: bool,
}

/// One row of one interval, normalized.
#[derive(Debug, Clone, Default)]
struct Rec {
    name: String,
    total: bool,
    bps: Option<f64>,
    pps: Option<f64>,
    lost: Option<f64>,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    rtt_us: Option<f64>,
}

/// A result, normalized: per interval, its end (s) and rows. A
/// repetition's runs are laid over each other: each run's intervals (from
/// its own start), its rows named after the run ("run 2", "run 2: stream 5").
#[derive(Debug, Default)]
pub struct Input {
    intervals: Vec<(Span, Vec<Rec>)>,
    /// Latency percentiles of the whole run, or of each run of a
    /// repetition: the line's name ("" for the run's mode) and
    /// (fraction, microseconds).
    percentiles: Vec<(String, Vec<(f64, f64)>)>,
    mode: String,
    /// An RFC 2544 campaign's result (`throughput`, `latency` arrays).
    campaign: Option<Value>,
    /// A `--repeat`/`--ci-target` document's summary.
    repeat: Option<Repeat>,
    /// Several results laid over each other (`Input::overlay`): their
    /// totals only, named after each result.
    overlay: bool,
}

/// A repetition's figure over the runs.
#[derive(Debug, Default)]
struct Repeat {
    figure: String,
    /// The warm-up runs' values, then the others'.
    warmup: Vec<f64>,
    values: Vec<f64>,
    confidence: f64,
    /// (mean, low, high) of the values after the warm-up.
    stats: Option<(f64, f64, f64)>,
}

/// One result document, normalized.
#[derive(Debug, Default)]
struct Run {
    intervals: Vec<(Span, Vec<Rec>)>,
    percentiles: Vec<(f64, f64)>,
    mode: String,
}

fn f(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

/// iperf3's interval: streams and the sum(s).
fn iperf_interval(iv: &Value, bidir: bool) -> (Span, Vec<Rec>) {
    let span = (
        f(&iv["sum"], "start").unwrap_or(f64::NAN),
        f(&iv["sum"], "end").unwrap_or(0.0),
    );
    let mut recs = Vec::new();
    for s in iv["streams"].as_array().into_iter().flatten() {
        let dir = match s.get("sender").and_then(Value::as_bool) {
            Some(true) if bidir => " (sent)",
            Some(false) if bidir => " (received)",
            _ => "",
        };
        recs.push(Rec {
            name: format!("stream {}{dir}", s["socket"]),
            bps: f(s, "bits_per_second"),
            lost: f(s, "lost_packets"),
            rtt_us: f(s, "rtt").filter(|r| *r > 0.0),
            ..Rec::default()
        });
    }
    for (key, name) in [("sum", "total"), ("sum_bidir_reverse", "total (reverse)")] {
        if let Some(s) = iv.get(key).filter(|s| s.is_object()) {
            recs.push(Rec {
                name: name.into(),
                total: true,
                bps: f(s, "bits_per_second"),
                lost: f(s, "lost_packets"),
                ..Rec::default()
            });
        }
    }
    (span, recs)
}

/// A run-model interval (`start`, `end`, `rows`, `sums`).
fn run_interval(iv: &Value) -> (Span, Vec<Rec>) {
    let span = (
        f(iv, "start").unwrap_or(f64::NAN),
        f(iv, "end").unwrap_or(0.0),
    );
    let mut recs = Vec::new();
    for (key, total) in [("rows", false), ("sums", true)] {
        for r in iv[key].as_array().into_iter().flatten() {
            let role = r["role"].as_str().unwrap_or("");
            let name = if total {
                format!("total {role}")
            } else {
                format!(
                    "{} {} {role}",
                    r["scope"].as_str().unwrap_or(""),
                    r["id"]
                        .as_str()
                        .map_or_else(|| r["id"].to_string(), str::to_string)
                )
            };
            recs.push(Rec {
                name,
                total,
                bps: f(r, "bits_per_second"),
                pps: f(r, "packets_per_second"),
                lost: f(r, "lost"),
                p50_us: f(r, "latency_p50_ns").map(|n| n / 1e3),
                p99_us: f(r, "latency_p99_ns").map(|n| n / 1e3),
                ..Rec::default()
            });
        }
    }
    (span, recs)
}

/// The rr client's `-J` interval (`end`, `transactions_per_s`, `lost`,
/// `latency_us`): the total transactions, named as its run-model row.
fn rr_interval(iv: &Value) -> (Span, Vec<Rec>) {
    let lat = &iv["latency_us"];
    (
        (
            f(iv, "start").unwrap_or(f64::NAN),
            f(iv, "end").unwrap_or(0.0),
        ),
        vec![Rec {
            name: "total transactions".into(),
            total: true,
            pps: f(iv, "transactions_per_s"),
            lost: f(iv, "lost"),
            p50_us: f(lat, "p50"),
            p99_us: f(lat, "p99"),
            ..Rec::default()
        }],
    )
}

/// A UDP sender's document has no loss in its intervals (the receiver
/// counts it): the receiver's intervals where the server's output came
/// with it (`--get-server-output`), else the receiver's count over the
/// whole run from `end`, as one interval from the start to the end.
fn receivers_loss(doc: &Value, intervals: &mut Vec<(Span, Vec<Rec>)>) {
    if intervals
        .iter()
        .any(|(_, recs)| recs.iter().any(|r| r.lost.is_some()))
    {
        return;
    }
    let server = &doc["server_output_json"];
    if let Some(ivs) = server["intervals"].as_array() {
        let bidir = server["start"]["test_start"]["bidir"].as_i64() == Some(1);
        for (i, iv) in ivs.iter().enumerate() {
            let (span, recs) = iperf_interval(iv, bidir);
            let recs = recs.into_iter().filter(|r| r.lost.is_some()).map(|r| Rec {
                name: format!("{} (receiver's count)", r.name),
                total: r.total,
                lost: r.lost,
                ..Rec::default()
            });
            match intervals.get_mut(i) {
                Some((_, mine)) => mine.extend(recs),
                None => push_interval(intervals, (span, recs.collect())),
            }
        }
        if intervals
            .iter()
            .any(|(_, recs)| recs.iter().any(|r| r.lost.is_some()))
        {
            return;
        }
    }
    let end = &doc["end"];
    let Some(sum) = [&end["sum_received"], &end["sum"]]
        .into_iter()
        .find(|s| f(s, "lost_packets").is_some())
    else {
        return;
    };
    intervals.push((
        (f(sum, "start").unwrap_or(0.0), f(sum, "end").unwrap_or(0.0)),
        vec![Rec {
            name: "total over the whole run (receiver's count)".into(),
            total: true,
            lost: f(sum, "lost_packets"),
            ..Rec::default()
        }],
    ));
}

/// An interval's start and end (s).
type Span = (f64, f64);

/// Adds an interval; one without a start (NaN) starts where the one
/// before ended (the first: at 0).
fn push_interval(list: &mut Vec<(Span, Vec<Rec>)>, ((start, end), recs): (Span, Vec<Rec>)) {
    let start = if start.is_nan() {
        list.last().map_or(0.0, |((_, e), _)| *e)
    } else {
        start
    };
    list.push(((start, end), recs));
}

/// One result document (a client's, a mode's, one run of a repetition).
fn read_run(doc: &Value) -> Result<Run, PlotError> {
    let intervals = doc["intervals"]
        .as_array()
        .ok_or_else(|| PlotError::Input("a JSON document without \"intervals\"".into()))?;
    let iperf = doc["start"].get("connected").is_some();
    let bidir = doc["start"]["test_start"]["bidir"].as_i64() == Some(1);
    let rr = doc.get("transactions_per_s").is_some();
    let intervals = intervals
        .iter()
        .map(|iv| {
            if iperf {
                iperf_interval(iv, bidir)
            } else if rr && iv.get("rows").is_none() {
                rr_interval(iv)
            } else {
                run_interval(iv)
            }
        })
        .fold(Vec::new(), |mut ivs, iv| {
            push_interval(&mut ivs, iv);
            ivs
        });
    let mut intervals = intervals;
    if iperf {
        receivers_loss(doc, &mut intervals);
    }
    let mode = if iperf {
        "iperf3".into()
    } else if rr {
        "rr_client".into()
    } else {
        doc["role"].as_str().unwrap_or("").into()
    };
    Ok(Run {
        intervals,
        percentiles: percentiles(doc),
        mode,
    })
}

/// Latency percentiles in a mode's result document, where it has them:
/// (fraction, µs). The sink's `latency_ns`, rr's `latency_us`.
fn percentiles(doc: &Value) -> Vec<(f64, f64)> {
    let ns = &doc["latency_ns"];
    let us = &doc["latency_us"];
    let keys = [
        ("min", 0.0),
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p999", 0.999),
        ("p99.9", 0.999),
        ("p99.99", 0.9999),
        ("max", 1.0),
    ];
    let mut out: Vec<(f64, f64)> = keys
        .iter()
        .filter_map(|&(k, q)| {
            f(ns, k)
                .map(|v| (q, v / 1e3))
                .or_else(|| f(us, k).map(|v| (q, v)))
        })
        .collect();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

impl Input {
    /// Reads a result: one JSON document, or JSON lines of events.
    pub fn parse(text: &str) -> Result<Input, PlotError> {
        let mut input = Input::default();
        if let Ok(doc) = serde_json::from_str::<Value>(text) {
            input.read_document(&doc)?;
        } else {
            for (i, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let ev: Value = serde_json::from_str(line)
                    .map_err(|e| PlotError::Input(format!("line {}: {e}", i + 1)))?;
                let data = &ev["data"];
                match ev["event"].as_str() {
                    Some("start") => {
                        input.mode = data["mode"].as_str().unwrap_or("").to_string();
                    }
                    Some("interval") if data.get("rows").is_some() => {
                        push_interval(&mut input.intervals, run_interval(data));
                    }
                    Some("interval") => {
                        let bidir = data.get("sum_bidir_reverse").is_some();
                        push_interval(&mut input.intervals, iperf_interval(data, bidir));
                    }
                    Some("end") => {
                        input.percentiles = vec![(String::new(), percentiles(&data["result"]))];
                        if data["result"]
                            .get("throughput")
                            .is_some_and(Value::is_array)
                        {
                            input.campaign = Some(data["result"].clone());
                        }
                    }
                    _ => {}
                }
            }
        }
        input.percentiles.retain(|(_, p)| !p.is_empty());
        if input.intervals.is_empty() && input.percentiles.is_empty() && input.campaign.is_none() {
            return Err(PlotError::Input(
                "no intervals and no latency figures in it".into(),
            ));
        }
        Ok(input)
    }

    fn read_document(&mut self, doc: &Value) -> Result<(), PlotError> {
        if doc.get("throughput").is_some_and(Value::is_array)
            || doc.get("latency").is_some_and(Value::is_array)
        {
            self.campaign = Some(doc.clone());
            self.mode = "rfc2544".into();
            return Ok(());
        }
        if let (Some(runs), Some(summary)) = (
            doc.get("runs").and_then(Value::as_array),
            doc.get("repeat").filter(|r| r.is_object()),
        ) {
            return self.read_repetition(runs, summary);
        }
        let run = read_run(doc)?;
        self.intervals = run.intervals;
        self.mode = run.mode;
        self.percentiles = vec![(String::new(), run.percentiles)];
        Ok(())
    }

    /// A `--repeat`/`--ci-target` document: `runs` (each run's document,
    /// the warm-up runs first; a failed run's is only its error) and
    /// `repeat` (the figure, its values, the statistics).
    fn read_repetition(&mut self, runs: &[Value], summary: &Value) -> Result<(), PlotError> {
        let values = |k: &str| -> Vec<f64> {
            summary[k]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect()
        };
        let st = &summary["statistics"];
        let rep = Repeat {
            figure: summary["figure"].as_str().unwrap_or("").to_string(),
            warmup: values("warmup_values"),
            values: values("values"),
            confidence: f(summary, "confidence").unwrap_or(0.95),
            stats: match (f(st, "mean"), f(st, "low"), f(st, "high")) {
                (Some(m), Some(l), Some(h)) => Some((m, l, h)),
                _ => None,
            },
        };
        for (i, doc) in runs.iter().enumerate() {
            let label = format!(
                "run {}{}",
                i + 1,
                if i < rep.warmup.len() {
                    " (warm-up)"
                } else {
                    ""
                }
            );
            // A failed run ("error" only) has nothing to draw.
            let Ok(run) = read_run(doc) else { continue };
            for (span, mut recs) in run.intervals {
                for r in &mut recs {
                    r.name = match r.name.strip_prefix("total") {
                        Some(rest) if r.total => format!("{label}{rest}"),
                        _ => format!("{label}: {}", r.name),
                    };
                }
                self.intervals.push((span, recs));
            }
            self.percentiles
                .push((format!("{label} latency"), run.percentiles));
            if self.mode.is_empty() {
                self.mode = run.mode;
            }
        }
        self.repeat = Some(rep);
        Ok(())
    }

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

    /// Results laid over each other, each one's lines named after its
    /// label (`A: total rx`, `B: run 2`): the rate, loss and latency over
    /// time draw each result's totals, the CDF a curve per result. An RFC
    /// 2544 campaign has no lines over time: it is left out.
    pub fn overlay(parts: Vec<(String, Input)>) -> Input {
        let mut out = Input {
            overlay: true,
            ..Input::default()
        };
        for (label, input) in parts {
            for (span, mut recs) in input.intervals {
                for r in &mut recs {
                    r.name = format!("{label}: {}", r.name);
                }
                out.intervals.push((span, recs));
            }
            for (name, p) in input.percentiles {
                let name = if name.is_empty() {
                    format!("{label} latency")
                } else {
                    format!("{label}: {name}")
                };
                out.percentiles.push((name, p));
            }
            if out.mode.is_empty() {
                out.mode = input.mode;
            }
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A three-interval iperf3 document with two streams.
    fn iperf_doc() -> String {
        let iv = |t: f64, a: f64, b: f64| {
            serde_json::json!({
                "streams": [
                    {"socket": 5, "end": t, "bits_per_second": a, "rtt": 40, "sender": true},
                    {"socket": 7, "end": t, "bits_per_second": b, "rtt": 60, "sender": true}
                ],
                "sum": {"end": t, "bits_per_second": a + b, "sender": true}
            })
        };
        serde_json::json!({
            "start": {"connected": [], "test_start": {"bidir": 0}},
            "intervals": [iv(1.0, 1e9, 2e9), iv(2.0, 1.5e9, 2.5e9), iv(3.0, 1e9, 1e9)],
            "end": {}
        })
        .to_string()
    }

    /// The text of each `<text>` element in an SVG.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let body = t.split_once('>')?.1.split("</text>").next()?;
                Some(body.trim().to_string())
            })
            .collect()
    }

    /// The points of each `<polyline>` in an SVG.
    fn polylines(svg: &str) -> Vec<usize> {
        lines(svg).iter().map(Vec::len).collect()
    }

    #[test]
    fn the_rate_of_an_iperf_document_has_a_line_per_stream_and_the_total() {
        let input = Input::parse(&iperf_doc()).unwrap();
        let c = input.chart(Figure::Rate).unwrap();
        assert_eq!(c.y_label, "rate (Gbit/s)");
        let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["stream 7", "stream 5", "total"]);
        assert_eq!(c.series[2].points, vec![(1.0, 3.0), (2.0, 4.0), (3.0, 2.0)]);
        let svg = svg(&c).unwrap();
        let t = texts(&svg);
        for text in [
            "Rate over time",
            "time (s)",
            "rate (Gbit/s)",
            "stream 5",
            "stream 7",
            "total",
        ] {
            assert!(t.iter().any(|x| x == text), "no {text:?} in the SVG: {t:?}");
        }
        // Three data lines, each three intervals drawn as steps: a level
        // from each one's start to its end (the legend's marks are 2-point
        // lines).
        let mut data: Vec<usize> = polylines(&svg).into_iter().filter(|&n| n > 2).collect();
        data.sort_unstable();
        assert_eq!(data, [6, 6, 6], "{:?}", polylines(&svg));
    }

    #[test]
    fn run_model_lines_give_rate_loss_latency_and_cdf() {
        let iv = |t: f64, lost: u64, p50: u64| {
            serde_json::json!({"event": "interval", "data": {"start": t - 1.0, "end": t,
                "rows": [{"scope": "flow", "id": "1", "role": "rx", "bits_per_second": 1e6, "lost": lost,
                          "latency_p50_ns": p50, "latency_p99_ns": p50 * 3}],
                "sums": [{"scope": "sum", "id": "sum", "role": "rx", "bits_per_second": 1e6, "lost": lost,
                          "latency_p50_ns": p50, "latency_p99_ns": p50 * 3}]}})
            .to_string()
        };
        let end = serde_json::json!({"event": "end", "data": {"result": {"latency_ns":
            {"p50": 10000, "p90": 20000, "p99": 50000, "p999": 90000, "max": 120000}}}});
        let text = [
            r#"{"event":"start","data":{"mode":"sink"}}"#.to_string(),
            iv(1.0, 0, 10_000),
            iv(2.0, 5, 20_000),
            end.to_string(),
        ]
        .join("\n");
        let input = Input::parse(&text).unwrap();
        let rate = input.chart(Figure::Rate).unwrap();
        assert_eq!(rate.y_label, "rate (Mbit/s)");
        let loss = input.chart(Figure::Loss).unwrap();
        let total = loss.series.iter().find(|s| s.total).unwrap();
        assert_eq!(total.points, vec![(1.0, 0.0), (2.0, 5.0)]);
        let lat = input.chart(Figure::Latency).unwrap();
        let p99 = lat
            .series
            .iter()
            .find(|s| s.name == "total rx p99")
            .unwrap();
        assert_eq!(p99.points, vec![(1.0, 30.0), (2.0, 60.0)]);
        let cdf = input.chart(Figure::Cdf).unwrap();
        assert_eq!(
            cdf.series[0].points,
            vec![
                (0.0, 0.0),
                (10.0, 0.5),
                (20.0, 0.9),
                (50.0, 0.99),
                (90.0, 0.999),
                (120.0, 1.0)
            ]
        );
        let t = texts(&svg(&cdf).unwrap());
        assert!(t.iter().any(|x| x == "fraction of packets"), "{t:?}");
        assert!(t.iter().any(|x| x == "latency (µs)"), "{t:?}");
        assert!(matches!(
            Input::parse(&iperf_doc()).unwrap().chart(Figure::Cdf),
            Err(PlotError::NoData(_))
        ));
    }

    #[test]
    fn an_rfc2544_campaign_plots_throughput_and_latency_by_frame_size() {
        let doc = serde_json::json!({
            "config": {},
            "throughput": [
                {"frame_size": 1518, "loss_allowed": 0.0, "rate_l1_bps": 4.9e7},
                {"frame_size": 64, "loss_allowed": 0.0, "rate_l1_bps": 7.0e7},
                {"frame_size": 64, "loss_allowed": 0.001, "rate_l1_bps": 7.1e7}
            ],
            "latency": [
                {"frame_size": 64, "trial": {"latency_ns": [1000, 2000, 5000, 9000, 12000]}},
                {"frame_size": 1518, "trial": {"latency_ns": [1500, 2500, 6000, 8000, 10000]}}
            ]
        });
        let input = Input::parse(&doc.to_string()).unwrap();
        let t = input.chart(Figure::Rate).unwrap();
        assert_eq!(t.x_label, "frame size (bytes)");
        let ndr = t.series.iter().find(|s| s.name == "NDR (no loss)").unwrap();
        assert_eq!(ndr.points, vec![(64.0, 70.0), (1518.0, 49.0)]);
        assert!(t.series.iter().any(|s| s.name == "PDR (0.1% loss)"));
        let l = input.chart(Figure::Latency).unwrap();
        let p99 = l.series.iter().find(|s| s.name == "p99").unwrap();
        assert_eq!(p99.points, vec![(64.0, 9.0), (1518.0, 8.0)]);
        let txt = texts(&svg(&t).unwrap());
        assert!(
            txt.iter()
                .any(|x| x == "Throughput by frame size (RFC 2544)"),
            "{txt:?}"
        );
        assert!(matches!(
            input.chart(Figure::Cdf),
            Err(PlotError::NoData(_))
        ));
    }

    /// An iperf3 client's document of `rates` (one stream and the sum a
    /// second each).
    fn iperf_run(rates: &[f64]) -> Value {
        let ivs: Vec<Value> = rates
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let t = i as f64 + 1.0;
                serde_json::json!({
                    "streams": [{"socket": 5, "end": t, "bits_per_second": r, "rtt": 40, "sender": true}],
                    "sum": {"end": t, "bits_per_second": r, "sender": true}
                })
            })
            .collect();
        serde_json::json!({
            "start": {"connected": [], "test_start": {"bidir": 0}},
            "intervals": ivs,
            "end": {}
        })
    }

    /// The `<circle>` centres' x of an SVG.
    fn circles_x(svg: &str) -> Vec<f64> {
        svg.split("<circle")
            .skip(1)
            .filter_map(|c| c.split(" cx=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect()
    }

    /// The `<polyline>`s' points: (x, y) each.
    fn lines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        linerate_testkit::svg_polylines(svg)
    }

    /// Issue 43 item 7: a one-interval result is a level from the
    /// interval's start to its end (before: a lone marked point).
    #[test]
    fn a_one_interval_result_is_a_level_over_its_interval() {
        let input = Input::parse(&iperf_run(&[2e9]).to_string()).unwrap();
        let c = input.chart(Figure::Rate).unwrap();
        assert_eq!(c.series.len(), 2);
        assert!(
            c.series
                .iter()
                .all(|s| s.points == [(1.0, 2.0)] && s.starts == [0.0] && !s.marked())
        );
        let svg = svg(&c).unwrap();
        assert!(circles_x(&svg).is_empty(), "{svg}");
        // A point where nothing is an interval (a CDF's) is still marked.
        let lone = Series {
            name: "p".into(),
            points: vec![(1.0, 1.0)],
            starts: Vec::new(),
            total: true,
            marks: false,
        };
        assert!(lone.marked());
    }

    /// A steady blast's run-model document: two intervals of 1 s at 10
    /// Mbit/s, the sender's row and its sum.
    fn steady_blast() -> String {
        let iv = |t: f64| {
            serde_json::json!({"start": t - 1.0, "end": t,
                "rows": [{"scope": "worker", "id": "0", "role": "tx", "bits_per_second": 1e7}],
                "sums": [{"scope": "sum", "id": "sum", "role": "tx", "bits_per_second": 1e7}]})
        };
        serde_json::json!({"role": "blast", "intervals": [iv(1.0), iv(2.0)]}).to_string()
    }

    /// Issue 43 item 7: a steady 2 s blast's rate is a flat line over
    /// the whole 2 s (it was a triangle: points at the intervals' ends
    /// joined from 0), and the legend is right of the plotting area.
    #[test]
    fn a_steady_rate_is_drawn_flat_and_the_legend_covers_no_line() {
        let c = Input::parse(&steady_blast())
            .unwrap()
            .chart(Figure::Rate)
            .unwrap();
        let svg = svg(&c).unwrap();
        let data: Vec<Vec<(f64, f64)>> = lines(&svg).into_iter().filter(|l| l.len() > 2).collect();
        // The row and its total, each: from x(0 s) = 88 to x(2 s) = 836 at
        // y(10 Mbit/s) = 83, the step at x(1 s) = 462 of height 0.
        assert_eq!(data.len(), 2, "{:?}", lines(&svg));
        for l in &data {
            assert_eq!(
                l,
                &[(88.0, 83.0), (462.0, 83.0), (462.0, 83.0), (836.0, 83.0)],
                "{svg}"
            );
        }
        // The x axis ends at 836; each legend label starts right of it, so
        // the legend covers no line.
        assert!(lines(&svg).contains(&vec![(88.0, 476.0), (836.0, 476.0)]));
        for name in ["worker 0 tx", "total tx"] {
            let x: f64 = svg
                .split("<text")
                .find(|t| t.contains(&format!(">\n{name}\n</text>")))
                .and_then(|t| t.split(" x=\"").nth(1)?.split('"').next()?.parse().ok())
                .unwrap_or_else(|| panic!("no legend label {name:?}: {svg}"));
            assert!(x > 836.0, "{name} at x {x}");
        }
    }

    /// Issue 43 item 7: a UDP sender's document (its intervals have no
    /// loss: the receiver counts it) draws the receiver's loss: each
    /// interval's with the server's output, else the run's from `end`.
    #[test]
    fn a_udp_senders_loss_is_the_receivers() {
        let iv = |t: f64, lost: Option<u64>| {
            let mut s = serde_json::json!({"socket": 5, "start": t - 1.0, "end": t,
                "bits_per_second": 1e6, "sender": lost.is_none()});
            if let Some(l) = lost {
                s["lost_packets"] = l.into();
            }
            serde_json::json!({"streams": [s.clone()], "sum": s})
        };
        let mut doc = serde_json::json!({
            "start": {"connected": [], "test_start": {"bidir": 0}},
            "intervals": [iv(1.0, None), iv(2.0, None)],
            "end": {"sum": {"start": 0, "end": 2.0, "lost_packets": 270, "packets": 1000}}
        });
        let loss = Input::parse(&doc.to_string())
            .unwrap()
            .chart(Figure::Loss)
            .unwrap();
        assert_eq!(loss.series.len(), 1, "{:?}", loss.series);
        let s = &loss.series[0];
        assert_eq!(s.name, "total over the whole run (receiver's count)");
        assert_eq!(
            (&s.points[..], &s.starts[..]),
            (&[(2.0, 270.0)][..], &[0.0][..])
        );
        // With the server's output: its intervals.
        doc["server_output_json"] = serde_json::json!({
            "start": {"test_start": {"bidir": 0}},
            "intervals": [iv(1.0, Some(100)), iv(2.0, Some(170))]
        });
        let loss = Input::parse(&doc.to_string())
            .unwrap()
            .chart(Figure::Loss)
            .unwrap();
        let total = loss.series.iter().find(|s| s.total).unwrap();
        assert_eq!(total.name, "total (receiver's count)");
        assert_eq!(total.points, [(1.0, 100.0), (2.0, 170.0)]);
        // The rate is still the sender's alone.
        let rate = Input::parse(&doc.to_string())
            .unwrap()
            .chart(Figure::Rate)
            .unwrap();
        assert_eq!(rate.series.len(), 2, "{:?}", rate.series);
    }

    /// A `--repeat 2 --warmup-runs 1` document, its third run failed.
    fn repeat_doc() -> String {
        serde_json::json!({
            "runs": [iperf_run(&[1e9, 1e9]), iperf_run(&[2e9, 3e9]), iperf_run(&[4e9]),
                     {"error": "connection refused"}],
            "repeat": {
                "figure": "receiver bits_per_second",
                "warmup_values": [1e9],
                "values": [2.5e9, 4e9],
                "statistics": {"mean": 3.25e9, "low": 2.0e9, "high": 4.5e9, "n": 2},
                "confidence": 0.95,
                "stop": "a run failed"
            }
        })
        .to_string()
    }

    #[test]
    fn a_repetition_has_a_line_per_run_and_its_figure_over_the_runs() {
        let input = Input::parse(&repeat_doc()).unwrap();
        let c = input.chart(Figure::Rate).unwrap();
        assert_eq!(c.title, "Rate over time, run by run");
        let lines: Vec<(&str, &[(f64, f64)])> = c
            .series
            .iter()
            .map(|s| (s.name.as_str(), &s.points[..]))
            .collect();
        assert_eq!(
            lines,
            [
                ("run 1 (warm-up)", &[(1.0, 1.0), (2.0, 1.0)][..]),
                ("run 2", &[(1.0, 2.0), (2.0, 3.0)][..]),
                ("run 3", &[(1.0, 4.0)][..]),
            ]
        );
        // The streams' RTT, a line per run.
        let lat = input.chart(Figure::Latency).unwrap();
        let names: Vec<&str> = lat.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "run 1 (warm-up): stream 5 RTT (sender's TCP_INFO)",
                "run 2: stream 5 RTT (sender's TCP_INFO)",
                "run 3: stream 5 RTT (sender's TCP_INFO)"
            ]
        );
        let r = input.chart(Figure::Runs).unwrap();
        assert_eq!(r.title, "receiver bits_per_second over the runs");
        assert_eq!(r.y_label, "receiver bits_per_second (Gbit/s)");
        assert!(r.x_whole);
        let by_name = |n: &str| {
            r.series
                .iter()
                .find(|s| s.name == n)
                .unwrap_or_else(|| panic!("no {n}: {:?}", r.series))
                .points
                .clone()
        };
        assert_eq!(by_name("warm-up runs (left out)"), [(1.0, 1.0)]);
        assert_eq!(
            by_name("receiver bits_per_second"),
            [(2.0, 2.5), (3.0, 4.0)]
        );
        assert_eq!(by_name("mean"), [(2.0, 3.25), (3.0, 3.25)]);
        assert_eq!(by_name("95% CI low"), [(2.0, 2.0), (3.0, 2.0)]);
        assert_eq!(by_name("95% CI high"), [(2.0, 4.5), (3.0, 4.5)]);
        let svg = svg(&r).unwrap();
        // The three runs marked, in order; whole run numbers on the axis.
        let xs = circles_x(&svg);
        assert_eq!(xs.len(), 3, "{xs:?}");
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
        // The x axis's tick labels: the texts just below it (y 486; the
        // axis is at 476).
        let t: Vec<String> = svg
            .split("<text")
            .skip(1)
            .filter(|e| e.contains(" y=\"486\""))
            .filter_map(|e| {
                Some(
                    e.split_once('>')?
                        .1
                        .split("</text>")
                        .next()?
                        .trim()
                        .to_string(),
                )
            })
            .collect();
        for n in ["1", "2", "3"] {
            assert!(t.iter().any(|x| x == n), "{t:?}");
        }
        assert!(!t.iter().any(|x| x == "1.5"), "{t:?}");
        // Not a repetition: no runs figure.
        for doc in [
            iperf_doc(),
            serde_json::json!({"throughput": []}).to_string(),
        ] {
            assert!(matches!(
                Input::parse(&doc).unwrap().chart(Figure::Runs),
                Err(PlotError::NotRepeated)
            ));
        }
    }

    #[test]
    fn the_rr_client_document_plots_and_repeats() {
        let rr = |tps: [f64; 2]| {
            serde_json::json!({
                "mode": "closed loop",
                "transactions_per_s": tps[0] + tps[1] / 2.0,
                "latency_us": {"min": 10.0, "p50": 20.0, "p99": 40.0, "max": 900.0},
                "intervals": [
                    {"end": 1.0, "transactions_per_s": tps[0], "lost": 0,
                     "latency_us": {"p50": 20.0, "p99": 40.0}},
                    {"end": 2.0, "transactions_per_s": tps[1], "lost": 2,
                     "latency_us": {"p50": 21.0, "p99": 45.0}}
                ]
            })
        };
        let one = Input::parse(&rr([48e3, 50e3]).to_string()).unwrap();
        let rate = one.chart(Figure::Rate).unwrap();
        assert_eq!(rate.series[0].name, "total transactions");
        assert_eq!(rate.series[0].points, [(1.0, 48.0), (2.0, 50.0)]);
        let lat = one.chart(Figure::Latency).unwrap();
        let p99 = lat
            .series
            .iter()
            .find(|s| s.name == "total transactions p99")
            .unwrap();
        assert_eq!(p99.points, [(1.0, 40.0), (2.0, 45.0)]);
        let loss = one.chart(Figure::Loss).unwrap();
        assert_eq!(loss.series[0].points, [(1.0, 0.0), (2.0, 2.0)]);
        let cdf = one.chart(Figure::Cdf).unwrap();
        assert_eq!(cdf.series[0].name, "rr_client latency");
        // Repeated: a line per run, a CDF per run, transactions per run.
        let doc = serde_json::json!({
            "runs": [rr([48e3, 50e3]), rr([47e3, 49e3])],
            "repeat": {"figure": "transactions_per_s", "warmup_values": [],
                       "values": [49e3, 48e3], "statistics": null, "confidence": 0.95}
        });
        let rep = Input::parse(&doc.to_string()).unwrap();
        let names = |c: Chart| c.series.into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(
            names(rep.chart(Figure::Rate).unwrap()),
            ["run 1 transactions", "run 2 transactions"]
        );
        assert_eq!(
            names(rep.chart(Figure::Cdf).unwrap()),
            ["run 1 latency", "run 2 latency"]
        );
        let runs = rep.chart(Figure::Runs).unwrap();
        assert_eq!(runs.y_label, "transactions_per_s (ktransactions/s)");
        // No statistics (the repetition stopped early): the values only.
        assert_eq!(names(runs), ["transactions_per_s"]);
    }

    #[test]
    fn results_overlaid_draw_each_ones_totals_under_its_label() {
        let a = Input::parse(&iperf_run(&[1e9, 2e9]).to_string()).unwrap();
        let b = Input::parse(&iperf_run(&[3e9, 4e9]).to_string()).unwrap();
        let both = Input::overlay(vec![("A".into(), a), ("B".into(), b)]);
        let c = both.chart(Figure::Rate).unwrap();
        assert_eq!(c.title, "Rate over time, overlaid");
        let lines: Vec<(&str, &[(f64, f64)])> = c
            .series
            .iter()
            .map(|s| (s.name.as_str(), &s.points[..]))
            .collect();
        // The totals only (not each stream), one scale for both.
        assert_eq!(
            lines,
            [
                ("A: total", &[(1.0, 1.0), (2.0, 2.0)][..]),
                ("B: total", &[(1.0, 3.0), (2.0, 4.0)][..]),
            ]
        );
        assert_eq!(c.y_label, "rate (Gbit/s)");
    }

    #[test]
    fn junk_is_refused_with_the_reason() {
        assert!(matches!(
            Input::parse("{\"a\":1}"),
            Err(PlotError::Input(_))
        ));
        assert!(matches!(
            Input::parse("not json\n"),
            Err(PlotError::Input(_))
        ));
        let c = Input::parse(&iperf_doc())
            .unwrap()
            .chart(Figure::Rate)
            .unwrap();
        assert!(matches!(
            render(&c, std::path::Path::new("x.jpg")),
            Err(PlotError::Format(_))
        ));
    }
}
