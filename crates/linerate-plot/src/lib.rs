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

mod chart;
mod draw;
mod read;

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

/// An interval's start and end (s).
type Span = (f64, f64);

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
