//! The output flags every mode shares, and the one way a run reaches its
//! reporters: `Start`, intervals as they end, then `End` (also after an
//! error, with what was measured).

use anyhow::{Context, Result, bail};
use clap::Args;
use linerate_run::{
    Csv, Document, End, Event, Fanout, Host, Interval, JsonLines, Mode, Reporter, Row, Start, Text,
    sums,
};
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

    fn csv_to_stdout(&self) -> bool {
        self.csv.as_deref() == Some(Path::new("-"))
    }

    /// The reporters these flags ask for.
    pub fn reporters(&self) -> Result<Fanout> {
        let main: Box<dyn Write + Send> = match &self.logfile {
            Some(p) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("--logfile {}", p.display()))?,
            ),
            None => Box::new(std::io::stdout()),
        };
        let mut f = Fanout::new();
        // First: it gives the terminal back at the end before any other
        // reporter prints.
        let live = self.live && self.logfile.is_none() && crate::live::available();
        if live {
            f.push(Box::new(crate::live::Live::new(self.human())));
        } else if crate::live::Progress::wanted(self.human()) {
            f.push(Box::new(crate::live::Progress::default()));
        }
        if let Some(addr) = &self.metrics {
            f.push(Box::new(metrics_reporter(addr)?));
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
            Some(p) => f.push(Box::new(Csv::new(
                std::fs::File::create(p).with_context(|| format!("--csv {}", p.display()))?,
            ))),
            None => {}
        }
        if self.json_stream {
            f.push(Box::new(JsonLines(main)));
        } else if self.json {
            f.push(Box::new(Document(main)));
        } else if !live {
            f.push(Box::new(Text::new(main)));
        }
        Ok(f)
    }
}

/// The process's metrics endpoint (started once, on the first run that
/// asks for it) and a reporter feeding it.
pub fn metrics_reporter(addr: &str) -> Result<linerate_run::MetricsReporter> {
    static ENDPOINT: std::sync::OnceLock<(linerate_run::Metrics, linerate_run::Endpoint)> =
        std::sync::OnceLock::new();
    if let Some((m, _)) = ENDPOINT.get() {
        return Ok(m.reporter());
    }
    let m = linerate_run::Metrics::new();
    let ep = m.serve(addr)?;
    let (m, _) = ENDPOINT.get_or_init(|| (m, ep));
    Ok(m.reporter())
}

/// `-i` checked: 0 = no intervals, else between 0.1 and 3600 seconds.
pub fn interval(s: f64) -> Result<Option<Duration>> {
    if s == 0.0 {
        return Ok(None);
    }
    if !(0.1..=3600.0).contains(&s) {
        bail!("--interval must be 0 (none) or between 0.1 and 3600 seconds, not {s}");
    }
    Ok(Some(Duration::from_secs_f64(s)))
}

/// One run on its way through the reporters.
pub struct Run {
    rep: Fanout,
    warned: bool,
}

impl Run {
    /// Reports the start.
    pub fn start(
        out: &OutputArgs,
        mode: Mode,
        config: Value,
        doctor: Option<Value>,
    ) -> Result<Self> {
        let mut r = Run {
            rep: out.reporters()?,
            warned: false,
        };
        r.emit(&Event::Start(Box::new(Start {
            mode,
            config,
            doctor,
            host: Host::here(),
        })));
        Ok(r)
    }

    fn emit(&mut self, ev: &Event) {
        if let Err(e) = self.rep.report(ev)
            && !self.warned
        {
            // The run goes on: what it measures still reaches the others.
            eprintln!("linerate: warning: writing the report: {e}");
            self.warned = true;
        }
    }

    /// Reports an interval as it ends.
    pub fn interval(&mut self, iv: &Interval) {
        self.emit(&Event::Interval(iv.clone()));
    }

    /// Reports the end; returns the exit code.
    pub fn end(
        mut self,
        duration_s: f64,
        rows: Vec<Row>,
        result: Value,
        text: String,
        error: Option<&str>,
    ) -> u8 {
        if let Some(e) = error {
            self.emit(&Event::Error(e.to_string()));
        }
        let exit_code = u8::from(error.is_some());
        self.emit(&Event::End(Box::new(End {
            duration_s,
            sums: sums(&rows),
            rows,
            result,
            text,
            exit_code,
        })));
        exit_code
    }

    /// The run failed before it measured anything worth keeping: an error
    /// event and an empty end, then the error for the caller to print.
    pub fn fail(mut self, e: anyhow::Error) -> anyhow::Error {
        let msg = format!("{e:#}");
        self.emit(&Event::Error(msg.clone()));
        self.emit(&Event::End(Box::new(End {
            duration_s: 0.0,
            rows: Vec::new(),
            sums: Vec::new(),
            result: serde_json::json!({ "error": msg }),
            text: String::new(),
            exit_code: 2,
        })));
        e
    }
}
