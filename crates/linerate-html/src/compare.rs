//! `linerate compare A… --vs B…`: two sets of runs of one test, each
//! headline figure's change from B (the baseline) to A with Welch's t
//! test and the confidence interval of the difference, the `--fail-if`
//! verdicts, and the same as a report section with both sets' plots
//! overlaid.

use crate::figures::{self, FigureName};
use crate::gate::{Condition, Verdict};
use crate::html::{Cell, esc, figure, plain, si, table};
use crate::input::Loaded;
use crate::stats::{Change, change};

/// One figure over both sets.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: FigureName,
    pub qualifier: String,
    pub source: String,
    /// Each run's value in A and in B.
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    /// `None`: the figure is missing from a set.
    pub change: Option<Change>,
}

impl Line {
    pub fn label(&self) -> String {
        if self.qualifier.is_empty() {
            self.name.name().to_string()
        } else {
            format!("{} {}", self.name.name(), self.qualifier)
        }
    }
}

/// The comparison of two sets.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub confidence: f64,
    pub a_runs: usize,
    pub b_runs: usize,
    pub lines: Vec<Line>,
}

/// Why two sets cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{0} has no run with a headline figure")]
    NoRuns(&'static str),
    #[error("A and B are different tests: A is {a}, B is {b}")]
    Modes { a: String, b: String },
}

/// Compares the runs of `a` against those of `b` (the baseline).
pub fn compare(a: &[Loaded], b: &[Loaded], confidence: f64) -> Result<Comparison, CompareError> {
    let runs = |set: &[Loaded]| -> Vec<Vec<figures::Figure>> {
        set.iter().flat_map(figures::runs).collect()
    };
    let (ra, rb) = (runs(a), runs(b));
    if ra.is_empty() {
        return Err(CompareError::NoRuns("A"));
    }
    if rb.is_empty() {
        return Err(CompareError::NoRuns("B"));
    }
    let mode = |set: &[Loaded]| set.first().map(Loaded::mode).unwrap_or_default();
    let (ma, mb) = (mode(a), mode(b));
    if ma != mb && ma != "repetition" && mb != "repetition" {
        return Err(CompareError::Modes { a: ma, b: mb });
    }
    let mut lines: Vec<Line> = Vec::new();
    for (side, runs) in [(0, &ra), (1, &rb)] {
        for f in runs.iter().flatten() {
            let i = match lines
                .iter()
                .position(|l| l.name == f.name && l.qualifier == f.qualifier)
            {
                Some(i) => i,
                None => {
                    lines.push(Line {
                        name: f.name,
                        qualifier: f.qualifier.clone(),
                        source: f.source.clone(),
                        a: Vec::new(),
                        b: Vec::new(),
                        change: None,
                    });
                    lines.len() - 1
                }
            };
            if side == 0 {
                lines[i].a.push(f.value);
            } else {
                lines[i].b.push(f.value);
            }
        }
    }
    for l in &mut lines {
        l.change = change(&l.a, &l.b, confidence);
    }
    Ok(Comparison {
        confidence,
        a_runs: ra.len(),
        b_runs: rb.len(),
        lines,
    })
}

/// How a value of this figure reads.
fn show(name: FigureName, v: f64) -> String {
    match name.unit() {
        "%" => format!("{}%", plain(v, 4)),
        u @ ("µs" | "ms") => format!("{} {u}", plain(v, 3)),
        u => si(v, u),
    }
}

fn signed_pct(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), |r| format!("{:+.2}%", r * 100.0))
}

impl Comparison {
    /// `--fail-if` conditions judged: each with its verdict. A condition
    /// on a figure with several qualifiers (RFC 2544 frame sizes) is
    /// judged on each; it holds when one does.
    pub fn judge(&self, conds: &[Condition]) -> Vec<(Condition, Verdict)> {
        conds
            .iter()
            .map(|c| {
                let mine: Vec<&Line> = self.lines.iter().filter(|l| l.name == c.figure).collect();
                if mine.is_empty() {
                    return (c.clone(), c.judge(None));
                }
                let verdicts: Vec<Verdict> =
                    mine.iter().map(|l| c.judge(l.change.as_ref())).collect();
                let v = verdicts
                    .iter()
                    .find(|v| matches!(v, Verdict::Holds))
                    .or_else(|| verdicts.iter().find(|v| matches!(v, Verdict::Unknown(_))))
                    .cloned()
                    .unwrap_or(Verdict::Clear);
                (c.clone(), v)
            })
            .collect()
    }

    /// The comparison as text, a line per figure.
    pub fn text(&self) -> String {
        let conf = plain(self.confidence * 100.0, 2);
        let mut s = format!(
            "A: {} run(s), B (baseline): {} run(s); change = mean A - mean B, {conf}% confidence interval and significance by Welch's t test (Welch–Satterthwaite df)\n",
            self.a_runs, self.b_runs
        );
        for l in &self.lines {
            let Some(c) = &l.change else {
                s += &format!(
                    "  {}: only in {}\n",
                    l.label(),
                    if l.a.is_empty() { "B" } else { "A" }
                );
                continue;
            };
            s += &format!(
                "  {}: A {} (n={}), B {} (n={}): {} ({})",
                l.label(),
                show(l.name, c.a.mean),
                c.a.n,
                show(l.name, c.b.mean),
                c.b.n,
                signed_pct(c.ratio),
                show(l.name, c.diff)
            );
            match &c.test {
                Ok(w) => {
                    s += &format!(
                        ", CI [{}, {}], t = {:.3}, df = {:.1}, p {}: {}\n",
                        signed_pct(c.ratio_of(w.low)),
                        signed_pct(c.ratio_of(w.high)),
                        w.t,
                        w.df,
                        if w.p < 1e-4 {
                            "< 0.0001".to_string()
                        } else {
                            format!("= {:.4}", w.p)
                        },
                        if w.significant() {
                            "significant"
                        } else {
                            "not significant"
                        }
                    );
                }
                Err(u) => s += &format!(": {}\n", u.reason()),
            }
        }
        s
    }

    /// The comparison as a report section: the table, the verdicts, and
    /// the plots of both sets overlaid.
    pub fn section(&self, a: &[Loaded], b: &[Loaded], verdicts: &[(Condition, Verdict)]) -> String {
        let conf = plain(self.confidence * 100.0, 2);
        let mut s = String::from("<section class=\"compare\"><h2>Comparison: A against B</h2>\n");
        s += &format!(
            "<p>A: {} run(s) from {}. B, the baseline: {} run(s) from {}. The change is mean A − mean B; its {conf}% confidence interval and its significance come from Welch's unequal-variances t test (degrees of freedom by Welch–Satterthwaite, Student's t quantile computed from the distribution).</p>\n",
            self.a_runs,
            esc(&names(a)),
            self.b_runs,
            esc(&names(b))
        );
        let rows: Vec<Vec<Cell>> = self.lines.iter().map(line_cells).collect();
        s += &table(
            "comparison",
            "Each headline figure: A, B and the change",
            &[
                "figure",
                "A mean",
                "A sd",
                "A n",
                "B mean",
                "B sd",
                "B n",
                "change",
                "change %",
                &format!("{conf}% CI of change"),
                "t",
                "df",
                "p",
                "verdict",
                "source",
            ],
            &rows,
        );
        if !verdicts.is_empty() {
            let rows: Vec<Vec<Cell>> = verdicts
                .iter()
                .map(|(c, v)| {
                    vec![
                        Cell::text(&c.text),
                        Cell::text(match v {
                            Verdict::Holds => "holds: fail".to_string(),
                            Verdict::Clear => "does not hold: pass".to_string(),
                            Verdict::Unknown(why) => format!("cannot judge ({why}): fail"),
                        }),
                    ]
                })
                .collect();
            s += &table("gate", "--fail-if", &["condition", "verdict"], &rows);
        }
        s += &overlaid(a, b);
        s + "</section>\n"
    }
}

fn names(set: &[Loaded]) -> String {
    set.iter()
        .map(|l| l.path.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn line_cells(l: &Line) -> Vec<Cell> {
    let Some(c) = &l.change else {
        return vec![
            Cell::text(l.label()),
            Cell::text(format!(
                "only in {}",
                if l.a.is_empty() { "B" } else { "A" }
            )),
        ];
    };
    let n = |v: f64| Cell::num(v, 6);
    let mut row = vec![
        Cell::text(l.label()),
        Cell {
            text: show(l.name, c.a.mean),
            value: Some(c.a.mean),
        },
        n(c.a.stdev),
        Cell::int(c.a.n as u64),
        Cell {
            text: show(l.name, c.b.mean),
            value: Some(c.b.mean),
        },
        n(c.b.stdev),
        Cell::int(c.b.n as u64),
        Cell {
            text: show(l.name, c.diff),
            value: Some(c.diff),
        },
        Cell {
            text: signed_pct(c.ratio),
            value: c.ratio,
        },
    ];
    match &c.test {
        Ok(w) => {
            let better = (c.diff > 0.0) == l.name.higher_is_better();
            row.extend([
                Cell::text(format!(
                    "{} to {} ({} to {})",
                    show(l.name, w.low),
                    show(l.name, w.high),
                    signed_pct(c.ratio_of(w.low)),
                    signed_pct(c.ratio_of(w.high))
                )),
                Cell::num(w.t, 4),
                Cell::num(w.df, 2),
                Cell::num(w.p, 5),
                Cell::text(match (w.significant(), better) {
                    (false, _) => "not significant",
                    (true, true) => "significant: better",
                    (true, false) => "significant: worse",
                }),
            ]);
        }
        Err(u) => {
            row.extend([
                Cell::text("–"),
                Cell::text("–"),
                Cell::text("–"),
                Cell::text("–"),
                Cell::text(u.reason()),
            ]);
        }
    }
    row.push(Cell::text(&l.source));
    row
}

/// Both sets' rate, loss, latency and CDF plots laid over each other.
fn overlaid(a: &[Loaded], b: &[Loaded]) -> String {
    let mut parts = Vec::new();
    for (set, list) in [("A", a), ("B", b)] {
        for (i, l) in list.iter().enumerate() {
            if let Ok(input) = linerate_plot::Input::parse(&l.text) {
                let label = if list.len() == 1 {
                    set.to_string()
                } else {
                    format!("{set}{}", i + 1)
                };
                parts.push((label, input));
            }
        }
    }
    let input = linerate_plot::Input::overlay(parts);
    [
        linerate_plot::Figure::Rate,
        linerate_plot::Figure::Loss,
        linerate_plot::Figure::Latency,
        linerate_plot::Figure::Cdf,
    ]
    .into_iter()
    .filter_map(|f| figure(input.chart(f)))
    .collect()
}
