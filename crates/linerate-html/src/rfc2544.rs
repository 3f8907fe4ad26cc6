//! An RFC 2544 campaign, typed as `rfc2544 -J` writes it, and its report
//! section: the tables RFC 2544 section 26 asks for (throughput per frame
//! size in frames/s and bit/s, latency, the frame-loss-rate curve,
//! back-to-back) and every search's trials.

use crate::html::{Cell, esc, figure, table};
use serde::Deserialize;
use serde_json::Value;

/// One trial as run and judged.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Trial {
    pub frame_size: Value,
    pub asked_fps: f64,
    pub offered_fps: f64,
    pub forwarded_fps: f64,
    pub sent: u64,
    pub received: u64,
    pub loss_ratio: f64,
    pub passed: bool,
    pub reason: Option<String>,
    pub held_back: bool,
    /// min, mean, p50, p99, max (ns).
    pub latency_ns: Option<[f64; 5]>,
    pub spoiled: Option<String>,
    pub interrupted: bool,
}

/// A throughput search's outcome for one frame size and loss allowed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Throughput {
    pub frame_size: Value,
    pub mean_frame_size: f64,
    pub bidirectional: bool,
    pub loss_allowed: f64,
    pub rate_fps: f64,
    pub rate_l1_bps: f64,
    pub rate_l2_bps: f64,
    pub loss_ratio: f64,
    pub of_max: f64,
    pub held_back: bool,
    pub converged: bool,
    pub spoiled_trials: u64,
    pub interrupted: bool,
    pub trials: Vec<Trial>,
}

/// A latency measurement at a load.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Latency {
    pub frame_size: Value,
    pub load: f64,
    pub rate_fps: f64,
    pub trial: Trial,
}

/// A step of the frame-loss-rate curve.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FrameLossStep {
    pub frame_size: Value,
    pub load: f64,
    pub rate_fps: f64,
    pub loss_ratio: f64,
    /// Its sender was held back below `--offered-min` in every run: the
    /// loss is of `trial.offered_fps`, not of `rate_fps`.
    pub offered_short: bool,
    pub trial: Trial,
}

impl FrameLossStep {
    /// The load the step offered (a share of the maximum rate): its own,
    /// or for a step held back, what its sender offered of it.
    fn offered_load(&self) -> f64 {
        if self.offered_short && self.rate_fps > 0.0 && self.trial.offered_fps > 0.0 {
            self.load * self.trial.offered_fps / self.rate_fps
        } else {
            self.load
        }
    }

    /// What the table says beside the step: that it was held back (and
    /// at which rate its loss was counted), and the trial's own note.
    fn note(&self) -> String {
        let mut n = Vec::new();
        if self.offered_short {
            n.push(format!(
                "held back: offered {:.0} fps ({}), the loss is of that",
                self.trial.offered_fps,
                crate::html::plain(self.offered_load() * 100.0, 1) + "% of the maximum"
            ));
        }
        // (Held back is said above, with the rate.)
        let own = trial_note_but(&self.trial, self.offered_short);
        if !own.is_empty() {
            n.push(own);
        }
        n.join("; ")
    }
}

/// A back-to-back search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct BackToBack {
    pub frame_size: Value,
    pub rate_fps: f64,
    pub bursts: Vec<u64>,
    pub mean_burst: f64,
    pub trials: Vec<Trial>,
}

/// `rfc2544 -J`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Rfc2544Doc {
    pub config: Value,
    pub throughput: Vec<Throughput>,
    pub latency: Vec<Latency>,
    pub frame_loss: Vec<FrameLossStep>,
    pub back_to_back: Vec<BackToBack>,
    pub error: Option<String>,
}

/// A frame size as written: a number of bytes or a mix's name.
pub fn size_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "–".into(),
        v => v.to_string(),
    }
}

fn size_cell(v: &Value) -> Cell {
    match v.as_f64() {
        Some(n) => Cell::num(n, 0),
        None => Cell::text(size_text(v)),
    }
}

/// What is odd about a trial, in words.
fn trial_note(t: &Trial) -> String {
    trial_note_but(t, false)
}

/// [`trial_note`], without its "held back" when `held_said` (a caller
/// that says it with the rate offered).
fn trial_note_but(t: &Trial, held_said: bool) -> String {
    let mut n = Vec::new();
    if let Some(s) = &t.spoiled {
        n.push(format!("spoiled (not scored): {s}"));
    }
    if t.interrupted {
        n.push("interrupted (not scored)".into());
    }
    if t.held_back && !held_said {
        n.push("held back".into());
    }
    if let Some(r) = &t.reason {
        n.push(r.clone());
    }
    n.join("; ")
}

fn trial_rows(label: &str, trials: &[Trial], rows: &mut Vec<Vec<Cell>>) {
    for (i, t) in trials.iter().enumerate() {
        rows.push(vec![
            Cell::text(label),
            Cell::int(i as u64 + 1),
            Cell::si(t.asked_fps, "frames/s"),
            Cell::si(t.offered_fps, "frames/s"),
            Cell::si(t.forwarded_fps, "frames/s"),
            Cell::int(t.sent),
            Cell::int(t.received),
            Cell::pct(t.loss_ratio),
            Cell::text(if t.passed { "pass" } else { "fail" }),
            Cell::text(trial_note(t)),
        ]);
    }
}

/// The frame-loss-rate curve: loss against load, a line per frame size.
fn loss_chart(d: &Rfc2544Doc) -> linerate_plot::Chart {
    let mut series: Vec<linerate_plot::Series> = Vec::new();
    for s in &d.frame_loss {
        let name = format!("{} bytes", size_text(&s.frame_size));
        // (A step held back at the load it offered, not the one asked.)
        let p = (s.offered_load() * 100.0, s.loss_ratio * 100.0);
        match series.iter_mut().find(|x| x.name == name) {
            Some(x) => x.points.push(p),
            None => series.push(linerate_plot::Series {
                name,
                points: vec![p],
                starts: Vec::new(),
                total: false,
                marks: true,
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    linerate_plot::Chart {
        title: "Frame loss rate by offered load (RFC 2544 26.3)".into(),
        x_label: "offered load (% of the maximum rate)".into(),
        y_label: "frame loss rate (%)".into(),
        series,
        left_out: 0,
        log_x: false,
        y_max: None,
        x_whole: false,
    }
}

/// The campaign's section: its tables, charts (from `text`, the result
/// as `linerate-plot` reads it) and trials.
pub fn section(d: &Rfc2544Doc, text: &str) -> String {
    let mut s = String::from("<section class=\"rfc2544\"><h2>RFC 2544</h2>\n");
    let plots = linerate_plot::Input::parse(text).ok();
    s += &throughput(d, plots.as_ref());
    s += &latency(d, plots.as_ref());
    s += &curves(d);
    s += &trials(d);
    if let Some(e) = &d.error {
        s += &format!(
            "<p class=\"note\">The campaign ended with an error: {}</p>",
            esc(e)
        );
    }
    s + "</section>\n"
}

/// 26.1: the throughput table and its chart.
fn throughput(d: &Rfc2544Doc, plots: Option<&linerate_plot::Input>) -> String {
    let mut s = String::new();
    if !d.throughput.is_empty() {
        let rows: Vec<Vec<Cell>> = d
            .throughput
            .iter()
            .map(|t| {
                vec![
                    size_cell(&t.frame_size),
                    Cell::pct(t.loss_allowed),
                    Cell::si(t.rate_fps, "frames/s"),
                    Cell::si(t.rate_l1_bps, "bit/s"),
                    Cell::si(t.rate_l2_bps, "bit/s"),
                    Cell::pct(t.of_max),
                    Cell::pct(t.loss_ratio),
                    Cell::int(t.trials.len() as u64),
                    Cell::text(
                        [
                            (t.bidirectional, "bidirectional (per direction)"),
                            (t.converged, "converged"),
                            (!t.converged, "not converged"),
                            (t.held_back, "held back"),
                            (t.interrupted, "interrupted: a lower bound"),
                        ]
                        .iter()
                        .filter(|(b, _)| *b)
                        .map(|(_, w)| *w)
                        .collect::<Vec<_>>()
                        .join(", "),
                    ),
                ]
            })
            .collect();
        s += "<h3>Throughput (26.1)</h3>";
        s += &table(
            "rfc2544-throughput",
            "The highest rate with no more loss than allowed (sender's frames, receiver's count; L1 includes preamble and gap, L2 the FCS)",
            &[
                "frame size (B)",
                "loss allowed",
                "frames/s",
                "L1 bit/s",
                "L2 bit/s",
                "of max",
                "loss",
                "trials",
                "search",
            ],
            &rows,
        );
        if let Some(p) = plots {
            s += &figure(p.chart(linerate_plot::Figure::Rate)).unwrap_or_default();
        }
    }
    s
}

/// 26.2: the latency table and its chart.
fn latency(d: &Rfc2544Doc, plots: Option<&linerate_plot::Input>) -> String {
    let mut s = String::new();
    if !d.latency.is_empty() {
        let us =
            |t: &Trial, i: usize| Cell::opt(t.latency_ns.map(|l| l[i] / 1e3), |v| Cell::num(v, 3));
        let rows: Vec<Vec<Cell>> = d
            .latency
            .iter()
            .map(|l| {
                vec![
                    size_cell(&l.frame_size),
                    Cell::pct(l.load),
                    Cell::si(l.rate_fps, "frames/s"),
                    us(&l.trial, 0),
                    us(&l.trial, 1),
                    us(&l.trial, 2),
                    us(&l.trial, 3),
                    us(&l.trial, 4),
                ]
            })
            .collect();
        s += "<h3>Latency (26.2)</h3>";
        s += &table(
            "rfc2544-latency",
            "One-way latency at the throughput rate (µs, receiver's clock shared with the sender)",
            &[
                "frame size (B)",
                "load",
                "rate",
                "min",
                "mean",
                "p50",
                "p99",
                "max",
            ],
            &rows,
        );
        if let Some(p) = plots {
            s += &figure(p.chart(linerate_plot::Figure::Latency)).unwrap_or_default();
        }
    }
    s
}

/// 26.3 and 26.4: the frame-loss-rate curve and back-to-back.
fn curves(d: &Rfc2544Doc) -> String {
    let mut s = String::new();
    if !d.frame_loss.is_empty() {
        let rows: Vec<Vec<Cell>> = d
            .frame_loss
            .iter()
            .map(|f| {
                vec![
                    size_cell(&f.frame_size),
                    Cell::pct(f.load),
                    Cell::si(f.rate_fps, "frames/s"),
                    Cell::pct(f.loss_ratio),
                    // (A document from before the steps kept their trial.)
                    if f.trial.offered_fps > 0.0 {
                        Cell::si(f.trial.offered_fps, "frames/s")
                    } else {
                        Cell::text("–")
                    },
                    Cell::text(f.note()),
                ]
            })
            .collect();
        s += "<h3>Frame loss rate (26.3)</h3>";
        s += &table(
            "rfc2544-frame-loss",
            "Frame loss rate at each load, from the maximum down: asked (rate) and \
             offered (sender)",
            &[
                "frame size (B)",
                "load",
                "rate",
                "frame loss rate",
                "offered",
                "note",
            ],
            &rows,
        );
        s += &figure(Ok(loss_chart(d))).unwrap_or_default();
    }
    if !d.back_to_back.is_empty() {
        let rows: Vec<Vec<Cell>> = d
            .back_to_back
            .iter()
            .map(|b| {
                vec![
                    size_cell(&b.frame_size),
                    Cell::si(b.rate_fps, "frames/s"),
                    Cell::num(b.mean_burst, 1),
                    Cell::text(
                        b.bursts
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                ]
            })
            .collect();
        s += "<h3>Back-to-back frames (26.4)</h3>";
        s += &table(
            "rfc2544-back-to-back",
            "The longest burst at the maximum rate with no loss, per repetition",
            &["frame size (B)", "rate", "mean burst (frames)", "bursts"],
            &rows,
        );
    }
    s
}

/// Every search's trials.
fn trials(d: &Rfc2544Doc) -> String {
    let mut s = String::new();
    let mut rows = Vec::new();
    for t in &d.throughput {
        let label = format!(
            "throughput {} B, {} loss",
            size_text(&t.frame_size),
            crate::html::plain(t.loss_allowed * 100.0, 4) + "%"
        );
        trial_rows(&label, &t.trials, &mut rows);
    }
    for b in &d.back_to_back {
        trial_rows(
            &format!("back-to-back {} B", size_text(&b.frame_size)),
            &b.trials,
            &mut rows,
        );
    }
    if !rows.is_empty() {
        s += "<h3>The searches' trials</h3>";
        s += &table(
            "rfc2544-trials",
            "Every trial in the order run: asked, offered (sender) and forwarded (receiver) rates",
            &[
                "search",
                "trial",
                "asked",
                "offered",
                "forwarded",
                "sent",
                "received",
                "loss",
                "verdict",
                "note",
            ],
            &rows,
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two steps of a curve, the first (100%) held back to 63,000 of
    /// 74,404 fps in every run.
    fn held_back_curve() -> Rfc2544Doc {
        serde_json::from_value(serde_json::json!({"frame_loss": [
            {"frame_size": 64, "load": 1.0, "rate_fps": 74404.0, "loss_ratio": 0.25,
             "offered_short": true,
             "trial": {"asked_fps": 74404.0, "offered_fps": 63000.0, "sent": 63000,
                       "received": 47250, "loss_ratio": 0.25, "held_back": true}},
            {"frame_size": 64, "load": 0.9, "rate_fps": 66963.6, "loss_ratio": 0.0,
             "trial": {"asked_fps": 66963.6, "offered_fps": 66956.9, "sent": 66963,
                       "received": 66963, "passed": true}}
        ]}))
        .unwrap()
    }

    #[test]
    fn a_held_back_frame_loss_step_says_so_with_the_rate_it_offered() {
        let html = curves(&held_back_curve());
        let rows: Vec<&str> = html.split("<tr>").skip(2).collect();
        assert_eq!(rows.len(), 2, "{html}");
        assert!(
            rows[0].contains(
                "<td>held back: offered 63000 fps (84.7% of the maximum), the loss is of that</td>"
            ),
            "{}",
            rows[0]
        );
        assert!(rows[0].contains("data-value=\"63000\""), "{}", rows[0]);
        // The step not held back has no note.
        assert!(rows[1].contains("<td></td></tr>"), "{}", rows[1]);
        assert!(!rows[1].contains("held back"), "{}", rows[1]);
    }

    #[test]
    fn the_loss_chart_puts_a_held_back_step_at_the_load_it_offered() {
        let c = loss_chart(&held_back_curve());
        let pts = &c.series[0].points;
        assert_eq!(pts.len(), 2);
        // Sorted by load: 84.67% (held back from 100%), then 90%.
        assert!(
            (pts[0].0 - 100.0 * 63000.0 / 74404.0).abs() < 1e-9,
            "{pts:?}"
        );
        assert_eq!(pts[0].1, 25.0);
        assert!((pts[1].0 - 90.0).abs() < 1e-9, "{pts:?}");
    }

    #[test]
    fn a_step_without_its_trial_shows_no_offered_rate() {
        let d: Rfc2544Doc = serde_json::from_value(serde_json::json!({"frame_loss": [
            {"frame_size": 64, "load": 1.0, "rate_fps": 74404.0, "loss_ratio": 0.0}
        ]}))
        .unwrap();
        let html = curves(&d);
        assert!(html.contains("<td>–</td><td></td></tr>"), "{html}");
    }
}
