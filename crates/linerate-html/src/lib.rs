//! linerate's reports: one self-contained HTML file for any mode's result
//! (`linerate report`, `--report FILE`), and the statistical comparison of
//! two sets of runs (`linerate compare A… --vs B…`).
//!
//! A report needs nothing else: its CSS is inline, its plots are inline
//! SVG drawn by `linerate-plot` with the bundled font, and it has no
//! script; its Content-Security-Policy forbids fetching anything. Its
//! tables' numbers carry the exact figure of the JSON they come from
//! (`data-value`), so a test can read them back from the browser's DOM.
//!
//! Modules: `input` reads results into typed documents per mode,
//! `figures` names each result's headline figures and their sources,
//! `report`/`repeat`/`rfc2544` write a result's sections, `stats` is
//! Welch's t test, `compare` the comparison, `gate` the `--fail-if`
//! expressions, `html` the page and its pieces.

pub mod compare;
pub mod figures;
pub mod files;
pub mod gate;
pub mod html;
pub mod input;
mod repeat;
mod report;
pub mod rfc2544;
pub mod stats;

pub use compare::{CompareError, Comparison, compare};
pub use figures::{Figure, FigureName};
pub use files::{expand, load_all};
pub use gate::{Condition, GateError, Verdict};
pub use input::{Doc, Loaded, ReadError};

use linerate_run::{Event, Reporter};
use std::io::{self, Write};

/// A report of these results, one section each.
pub fn report_page(results: &[Loaded]) -> String {
    let body: String = results
        .iter()
        .enumerate()
        .map(|(i, l)| report::section(l, i + 1))
        .collect();
    let title = match results {
        [one] => format!("linerate report: {} ({})", one.mode(), one.path),
        _ => format!("linerate report: {} results", results.len()),
    };
    html::page(&title, &body)
}

/// A comparison's page: the comparison first, then each run's section.
pub fn compare_page(
    c: &Comparison,
    a: &[Loaded],
    b: &[Loaded],
    verdicts: &[(Condition, Verdict)],
) -> String {
    let mut body = c.section(a, b, verdicts);
    for (i, l) in a.iter().chain(b).enumerate() {
        let side = if i < a.len() { "A" } else { "B" };
        body += &format!("<h2 class=\"side\">{side}</h2>");
        body += &report::section(l, i + 1);
    }
    html::page("linerate compare: A against B", &body)
}

/// Opens the report's output afresh (the page is written whole at each
/// run's end).
pub type Open = Box<dyn FnMut() -> io::Result<Box<dyn Write>> + Send>;

/// `--report FILE`: the run's events kept, and at each run's end the
/// page of every run so far written whole (a server's tests, one after
/// another, each a section).
pub struct HtmlReporter {
    name: String,
    open: Open,
    /// Each run's events as `--json-stream` lines.
    runs: Vec<String>,
}

impl std::fmt::Debug for HtmlReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HtmlReporter({})", self.name)
    }
}

impl HtmlReporter {
    /// A reporter writing the report named `name` through `open`.
    pub fn new(name: impl Into<String>, open: Open) -> Self {
        HtmlReporter {
            name: name.into(),
            open,
            runs: Vec::new(),
        }
    }

    /// A reporter writing to `path`: the first page into `first` (the
    /// file made new by the caller), later runs' pages (a server's tests)
    /// over it, the file opened again and truncated.
    pub fn to_file(path: &std::path::Path, first: std::fs::File) -> Self {
        let mut first = Some(first);
        let at = path.to_path_buf();
        let open: Open = Box::new(move || {
            let f = match first.take() {
                Some(f) => f,
                None => std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&at)?,
            };
            Ok(Box::new(f) as Box<dyn Write>)
        });
        HtmlReporter::new(path.display().to_string(), open)
    }

    /// The page of the runs so far.
    fn page(&self) -> String {
        let loaded: Vec<Loaded> = self
            .runs
            .iter()
            .enumerate()
            .filter_map(|(i, text)| {
                let name = if self.runs.len() == 1 {
                    self.name.clone()
                } else {
                    format!("{} (run {})", self.name, i + 1)
                };
                Loaded::parse(&name, text.clone()).ok()
            })
            .collect();
        report_page(&loaded)
    }
}

impl Reporter for HtmlReporter {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        if matches!(ev, Event::Start(_)) || self.runs.is_empty() {
            self.runs.push(String::new());
        }
        let line = serde_json::to_string(&ev.json())?;
        if let Some(run) = self.runs.last_mut() {
            run.push_str(&line);
            run.push('\n');
        }
        if let Event::End(_) = ev {
            let page = self.page();
            let mut w = (self.open)()?;
            w.write_all(page.as_bytes())?;
            w.flush()?;
        }
        Ok(())
    }
}

/// The page of a `--repeat` document (its runs and the figure over them),
/// named `name`.
pub fn repeat_page(name: &str, doc: &serde_json::Value) -> Result<String, ReadError> {
    let l = Loaded::parse(name, serde_json::to_string(doc).unwrap_or_default())?;
    Ok(report_page(&[l]))
}
