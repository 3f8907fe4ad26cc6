//! `linerate report` and `linerate compare`: the flags, and a call to
//! `linerate-html`, where the work is.

use crate::output::Console;
use anyhow::{Context, Result};
use clap::Args;
use linerate_html::Condition;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `linerate report RESULT… -o FILE.html`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results: any mode's -J document (a --repeat one too) or
    /// --json-stream file.
    #[arg(required = true, value_name = "RESULT")]
    pub results: Vec<PathBuf>,
    /// The HTML file to write (one file: CSS and plots inline).
    #[arg(short = 'o', long, value_name = "FILE.html")]
    pub output: PathBuf,
    /// Replace FILE if it exists (a regular file only).
    #[arg(long)]
    pub force: bool,
}

/// `linerate compare A… --vs B…`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The runs compared (files or directories of them): any mode's -J or
    /// --json-stream.
    #[arg(required = true, value_name = "A")]
    pub a: Vec<PathBuf>,
    /// The baseline runs (files or directories).
    #[arg(long = "vs", required = true, num_args = 1.., value_name = "B")]
    pub b: Vec<PathBuf>,
    /// Exit 1 when a figure's change from B to A meets this condition:
    /// 'FIGURE OP NUMBER[%] [significant]', e.g. 'throughput < -5%'
    /// (repeatable; figures: throughput, pps, loss, latency_p50,
    /// latency_p99, transactions, retransmits, jitter).
    #[arg(long = "fail-if", value_name = "EXPR", value_parser = condition)]
    pub fail_if: Vec<Condition>,
    /// Confidence of the intervals and of the test.
    #[arg(long, default_value = "95%", value_parser = super::out::share)]
    pub confidence: f64,
    /// Also write the comparison as an HTML report.
    #[arg(short = 'o', long, value_name = "FILE.html")]
    pub output: Option<PathBuf>,
    /// Replace the report if it exists (a regular file only).
    #[arg(long)]
    pub force: bool,
}

fn condition(s: &str) -> Result<Condition, String> {
    s.parse()
        .map_err(|e: linerate_html::GateError| e.to_string())
}

/// The results named, read (a damaged file read as far as it goes).
fn load(paths: &[PathBuf]) -> Result<Vec<linerate_html::Loaded>> {
    Ok(linerate_html::load_all(paths)?)
}

fn write(path: &Path, force: bool, page: &str) -> Result<()> {
    let mut f = crate::output::create_new(path, force, "-o")?;
    f.write_all(page.as_bytes())
        .with_context(|| format!("-o {}", path.display()))
}

pub fn report(args: &ReportArgs, _console: &Console) -> Result<u8> {
    let results = load(&args.results)?;
    for l in &results {
        for n in &l.notes {
            eprintln!("linerate: {}: {n}", l.path);
        }
    }
    write(
        &args.output,
        args.force,
        &linerate_html::report_page(&results),
    )?;
    Ok(0)
}

pub fn compare(args: &CompareArgs, console: &Console) -> Result<u8> {
    let (a, b) = (load(&args.a)?, load(&args.b)?);
    let c = linerate_html::compare(&a, &b, args.confidence)?;
    let verdicts = c.judge(&args.fail_if);
    crate::say!(console, "{}", c.text().trim_end());
    let mut failed = false;
    for (cond, v) in &verdicts {
        let (what, fails) = v.said();
        failed |= fails;
        crate::say!(console, "--fail-if '{}': {what}", cond.text);
    }
    if let Some(p) = &args.output {
        write(
            p,
            args.force,
            &linerate_html::compare_page(&c, &a, &b, &verdicts),
        )?;
    }
    Ok(u8::from(failed))
}
