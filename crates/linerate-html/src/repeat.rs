//! A `--repeat`/`--ci-target` result's section: each run, the mean and
//! the confidence interval, the figure run by run, and each run's own
//! headline figures.

use crate::html::{Cell, esc, figure, plain, table};
use crate::input::{Doc, RepeatSummary};

/// The section of a repetition (`text`: the document, for the plots).
pub fn section(runs: &[Result<Doc, String>], summary: &RepeatSummary, text: &str) -> String {
    let mut s = String::from("<h3>Runs</h3>\n");
    let warm = summary.warmup_values.len();
    let mut values = summary.warmup_values.iter().chain(&summary.values);
    let rows: Vec<Vec<Cell>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let v = match r {
                Ok(_) => values.next().copied(),
                Err(_) => None,
            };
            vec![
                Cell::int(i as u64 + 1),
                Cell::text(if i < warm {
                    "warm-up (left out)"
                } else {
                    "counted"
                }),
                Cell::opt(v, |v| Cell::num(v, 3)),
                Cell::text(match r {
                    Ok(d) => d.mode().to_string(),
                    Err(e) => format!("failed: {e}"),
                }),
            ]
        })
        .collect();
    s += &table(
        "runs",
        &format!("Each run's {}", summary.figure),
        &["run", "", &summary.figure, "result"],
        &rows,
    );
    match &summary.statistics {
        Some(st) => {
            let conf = plain(summary.confidence * 100.0, 2);
            s += &table(
                "repeat-statistics",
                &format!(
                    "{} over the runs counted (Student's t, {conf}% confidence)",
                    summary.figure
                ),
                &[
                    "runs",
                    "mean",
                    "stdev",
                    &format!("{conf}% CI low"),
                    &format!("{conf}% CI high"),
                    "± share of mean",
                ],
                &[vec![
                    Cell::int(st.n),
                    Cell::num(st.mean, 3),
                    Cell::num(st.stdev, 3),
                    Cell::num(st.low, 3),
                    Cell::num(st.high, 3),
                    Cell::pct(st.half_width_ratio),
                ]],
            );
        }
        None => {
            s += "<p class=\"note\">Fewer than two runs counted: no confidence interval.</p>\n";
        }
    }
    if !summary.stop.is_null() {
        s += &format!(
            "<p>The repetition stopped: {}.</p>\n",
            esc(summary.stop.as_str().unwrap_or(&summary.stop.to_string()))
        );
    }
    if let Ok(input) = linerate_plot::Input::parse(text) {
        for f in [
            linerate_plot::Figure::Runs,
            linerate_plot::Figure::Rate,
            linerate_plot::Figure::Latency,
            linerate_plot::Figure::Cdf,
        ] {
            s += &figure(input.chart(f)).unwrap_or_default();
        }
    }
    s + &per_run(runs)
}

/// Each run's own headline figures.
fn per_run(runs: &[Result<Doc, String>]) -> String {
    let mut per_run = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        if let Ok(d) = r {
            for f in crate::figures::of_doc(d) {
                per_run.push(vec![
                    Cell::int(i as u64 + 1),
                    Cell::text(f.label()),
                    Cell::num(f.value, 3),
                    Cell::text(f.name.unit()),
                    Cell::text(&f.source),
                ]);
            }
        }
    }
    if !per_run.is_empty() {
        return table(
            "run-figures",
            "Each run's headline figures",
            &["run", "figure", "value", "unit", "source"],
            &per_run,
        );
    }
    String::new()
}
