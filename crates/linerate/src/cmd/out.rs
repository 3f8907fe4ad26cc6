//! The output flags every mode shares, and the one way a run reaches its
//! reporters: `Start`, intervals as they end, then `End` (also after an
//! error, with what was measured).

use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::Args;
use linerate_report::{Csv, Document, JsonLines, Text};
pub use linerate_run::{Ended, Measured, Run};
use linerate_run::{Fanout, Mode, Reporter};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Output: `-J`, `--json-stream`, `--csv`, `--logfile`, `-i`.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Print the final JSON document.
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Print one JSON object per event as it happens (start, interval,
    /// error, end), one per line.
    #[arg(long)]
    pub json_stream: bool,
    /// Also write CSV to FILE ("-": standard output, instead of the text):
    /// a header, a row per interval per flow/stream/worker and per sum, and
    /// the totals.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the output to FILE (appended) instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<PathBuf>,
    /// A live terminal view of the run (rows, totals, a sparkline of the
    /// rate; q or Ctrl-C stops the run, the end report follows). Without a
    /// terminal on stdout: interval lines as usual.
    #[arg(long, conflicts_with = "json_stream")]
    pub live: bool,
    /// Serve Prometheus/OpenMetrics metrics on ADDR:PORT (GET /metrics)
    /// while the run goes on.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Seconds between interval reports (0: none).
    #[arg(short = 'i', long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Replace result files that exist (--csv, and the sink's --write and
    /// --hist); a symbolic link or anything but a regular file is refused
    /// all the same.
    #[arg(long)]
    pub force: bool,
    /// Write an HTML report of the run to FILE at its end (one file: CSS
    /// and plots inline; see also `linerate report`).
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// `--metrics`' endpoint, started by the first run that asks for it and
    /// kept for the command's later runs (a repetition's).
    #[arg(skip)]
    pub endpoint: Endpoint,
}

impl OutputArgs {
    /// The interval, checked (0 = none; otherwise 0.1 to 3600 s).
    pub fn interval(&self) -> Result<Option<Duration>> {
        interval(self.interval)
    }

    /// Whether the human text goes to standard output.
    pub fn human(&self) -> bool {
        !self.json && !self.json_stream && !self.csv_to_stdout()
    }

    /// Whether an output that carries the mode's end document is asked
    /// for: `-J`, `--json-stream`'s end line, `--report` (what a server
    /// keeps its intervals for).
    pub fn document_wanted(&self) -> bool {
        self.json || self.json_stream || self.report.is_some()
    }

    /// Whether the run draws the live view (asked, on a terminal, and the
    /// output not going to a log file).
    fn live_view(&self, c: &Console) -> bool {
        self.live && self.logfile.is_none() && linerate_live::available(|w| c.warn_once(w))
    }

    fn csv_to_stdout(&self) -> bool {
        self.csv.as_deref() == Some(Path::new("-"))
    }

    /// The reporters these flags ask for; `hold_document`: a repetition
    /// prints one `-J` document for all its runs, so a run's own is held.
    pub fn reporters(&self, hold_document: bool, c: &Console) -> Result<Fanout> {
        let main = main_output(self.logfile.as_deref(), c)?;
        let live = self.live_view(c);
        let view = if live {
            View::Live(linerate_live::LiveView::new(
                self.human(),
                Box::new(c.stdout()),
            ))
        } else {
            View::Progress
        };
        let metrics = self.metrics.as_deref().map(|a| (a, &self.endpoint));
        let mut f = side_reporters(view, self.human(), metrics, None, c)?;
        // A repetition writes one report of all its runs (`RepeatArgs::run`).
        if let Some(p) = self.report.as_deref().filter(|_| !hold_document) {
            f.push(html_report(p, self.force)?);
        }
        match &self.csv {
            Some(p) if p == Path::new("-") => {
                if self.json || self.json_stream {
                    bail!(
                        "--csv - and -J/--json-stream would share standard output: give --csv a file"
                    );
                }
                f.push(Box::new(Csv::new(main)));
                return Ok(f);
            }
            Some(p) => f.push(csv_file(p, self.force, c)?),
            None => {}
        }
        if self.json_stream {
            f.push(Box::new(JsonLines(main)));
        } else if self.json {
            if !hold_document {
                f.push(Box::new(Document::new(main)));
            }
        } else if !live {
            use std::io::IsTerminal;
            // On one terminal the error is shown once, from stderr.
            let one_terminal = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
            f.push(Box::new(
                Text::new(main)
                    .echo_errors(!one_terminal)
                    .intervals(self.interval != 0.0),
            ));
        }
        Ok(f)
    }
}

/// The main output: `--logfile` (appended, whole records), else standard
/// output; checked.
pub fn main_output(logfile: Option<&Path>, c: &Console) -> Result<Box<dyn Write + Send>> {
    Ok(match logfile {
        Some(p) => Box::new(c.checked(
            crate::output::Whole::new(crate::output::append_log(p, "--logfile")?),
            format!("--logfile {}", p.display()),
        )),
        None => Box::new(c.stdout()),
    })
}

/// What a run shows on the terminal beside its main output.
pub enum View {
    /// The live view (`--live` on a terminal).
    Live(linerate_live::LiveView),
    /// The one-line progress on stderr, when the run prints text to a
    /// terminal.
    Progress,
    /// Nothing.
    None,
}

/// The reporters beside a run's main output (its text or document), set up
/// the same way for every mode: the view first (it gives the terminal back
/// at the end before any other reporter prints), `--metrics`, `--csv` to a
/// file.
pub fn side_reporters(
    view: View,
    human: bool,
    metrics: Option<(&str, &Endpoint)>,
    csv_file_at: Option<(&Path, bool)>,
    c: &Console,
) -> Result<Fanout> {
    let mut f = Fanout::new();
    match view {
        View::Live(l) => f.push(Box::new(l)),
        View::Progress if linerate_live::Progress::wanted(human) => {
            f.push(Box::new(linerate_live::Progress::default()));
        }
        View::Progress | View::None => {}
    }
    if let Some((addr, endpoint)) = metrics {
        f.push(Box::new(endpoint.reporter(addr)?));
    }
    if let Some((p, force)) = csv_file_at {
        f.push(csv_file(p, force, c)?);
    }
    Ok(f)
}

/// `--report FILE`: the HTML report, the file created new now (`--force`
/// replaces a regular file) and written whole at each run's end.
pub fn html_report(p: &Path, force: bool) -> Result<Box<dyn Reporter>> {
    let first = crate::output::create_new(p, force, "--report")?;
    Ok(Box::new(linerate_html::HtmlReporter::to_file(p, first)))
}

/// `--csv FILE`: a CSV reporter writing to a new file (`--force` replaces
/// a regular file).
fn csv_file(p: &Path, force: bool, c: &Console) -> Result<Box<dyn Reporter>> {
    Ok(Box::new(Csv::new(c.checked(
        crate::output::Whole::new(crate::output::create_new(p, force, "--csv")?),
        format!("--csv {}", p.display()),
    ))))
}

/// Repeat until confident (`--repeat`, `--ci-target`): for the modes that
/// measure one figure per run.
#[derive(Debug, Clone, Default, Args)]
pub struct RepeatArgs {
    /// Run N times (after --warmup-runs) and report the figure over the
    /// runs: mean, stdev, confidence interval.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    /// Repeat until the confidence interval of the mean is within this
    /// share of it (2%), at most --max-runs.
    #[arg(long, value_name = "PCT", value_parser = share)]
    pub ci_target: Option<f64>,
    /// Confidence of the interval.
    #[arg(long, value_name = "PCT", default_value = "95%", value_parser = share)]
    pub confidence: f64,
    /// Most runs with --ci-target.
    #[arg(long, default_value_t = 20)]
    pub max_runs: usize,
    /// Runs made first and left out of the statistics.
    #[arg(long, default_value_t = 0)]
    pub warmup_runs: usize,
}

pub use linerate_calc::{ratio, share};

/// How a mode shows its output, for the repetition's own printing.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    pub json: bool,
    pub json_stream: bool,
    pub live: bool,
    /// `--report FILE` and `--force`.
    pub report: Option<(&'a Path, bool)>,
}

impl Shown<'_> {
    fn human(&self) -> bool {
        !self.json && !self.json_stream
    }
}

impl<'a> From<&'a OutputArgs> for Shown<'a> {
    fn from(o: &'a OutputArgs) -> Self {
        Shown {
            json: o.json || o.csv_to_stdout(),
            json_stream: o.json_stream,
            live: o.live,
            report: o.report.as_deref().map(|p| (p, o.force)),
        }
    }
}

impl RepeatArgs {
    pub fn asked(&self) -> bool {
        self.repeat.is_some() || self.ci_target.is_some()
    }

    /// The stop rule these flags ask for.
    pub fn policy(&self) -> linerate_run::stats::Policy {
        linerate_run::stats::Policy {
            runs: self.repeat.map(|n| n as usize),
            confidence: self.confidence,
            ci_target: self.ci_target,
            max_runs: self.max_runs.max(self.warmup_runs + 2),
            warmup_runs: self.warmup_runs,
        }
    }

    /// Runs `once` until the policy stops, each run's figure read from its
    /// typed outcome; `once(hold)` runs the mode once, holding its own `-J`
    /// document back when `hold`. Prints the summary (text, or with -J one
    /// document: `runs` and `repeat`).
    pub fn run(
        &self,
        out: Shown,
        c: &Console,
        once: &mut dyn FnMut(bool) -> Result<Ended>,
    ) -> Result<u8> {
        if out.live || out.json_stream {
            bail!(
                "--repeat/--ci-target print a summary over the runs: not with --live or --json-stream"
            );
        }
        let policy = self.policy();
        // The report's file is made before the first run: a refusal comes
        // before the runs, not after them.
        let mut report_file = match out.report {
            Some((p, force)) => Some((p, crate::output::create_new(p, force, "--report")?)),
            None => None,
        };
        let rep = linerate_run::repeat(&policy, |n| {
            if out.human() {
                let warm = if n <= self.warmup_runs {
                    " (warm-up)"
                } else {
                    ""
                };
                crate::say!(c, "run {n}{warm}:");
            }
            once(out.json)
        })?;
        if rep.stop.is_none() {
            eprintln!(
                "linerate: run {} failed: the repetition stops (the runs before it stand)",
                rep.outcomes.len()
            );
        }
        // One typed document: -J prints it, --report draws it.
        let doc = rep.document(&policy);
        if let Some((p, file)) = &mut report_file {
            let value = serde_json::to_value(&doc).unwrap_or_default();
            let page = linerate_html::repeat_page(&p.display().to_string(), &value)?;
            file.write_all(page.as_bytes())
                .with_context(|| format!("--report {}", p.display()))?;
        }
        if out.json {
            crate::say!(
                c,
                "{}",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            );
        } else {
            crate::say!(c, "\n{}", rep.line(&policy));
        }
        Ok(u8::from(rep.stop.is_none()))
    }
}

/// A command's metrics endpoint, owned by its arguments.
pub use linerate_report::metrics::Shared as Endpoint;

/// `-i` checked: 0 = no intervals, else between 0.1 and 3600 seconds.
pub fn interval(s: f64) -> Result<Option<Duration>> {
    Ok(linerate_run::sample::interval(s)?)
}

/// Runs a mode through the run model (`linerate_run::drive_planned`) with
/// the reporters `out` asks for; `planned_s`: how long the run is to last
/// (none: until stopped or counted). Returns the run's end.
pub fn drive(
    (out, c): (&OutputArgs, &Console),
    hold_document: bool,
    mode: Mode,
    (config, planned_s): (Value, Option<f64>),
    doctor: Option<Value>,
    body: impl FnOnce(&mut Run) -> Result<Measured>,
) -> Result<Ended> {
    linerate_run::drive_planned(
        Box::new(out.reporters(hold_document, c)?),
        mode,
        config,
        doctor,
        planned_s,
        body,
    )
}
