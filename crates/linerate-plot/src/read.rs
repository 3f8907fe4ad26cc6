//! Result documents read into intervals of rows: iperf3's `-J` (client
//! and server), run-model `-J` and `--json-stream` lines, the rr client's
//! `-J`, a repetition's runs, results overlaid.

use crate::{Input, PlotError, Rec, Repeat, Span};
use serde_json::Value;

/// One result document, normalized.
#[derive(Debug, Default)]
struct Run {
    intervals: Vec<(Span, Vec<Rec>)>,
    percentiles: Vec<(f64, f64)>,
    mode: String,
}

pub(crate) fn f(v: &Value, k: &str) -> Option<f64> {
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
}
