//! `linerate plot RESULT -o FILE.svg|FILE.png`: figures from any mode's
//! result (`-J` document, a `--repeat` `-J` document, or a `--json-stream`
//! file). Of several figures asked, each one the result has is drawn; each
//! one it has not is said on a line of its own (exit 1, or 2 when none
//! was drawn).

use crate::output::Console;
use anyhow::{Context, Result};
use clap::Args;
use linerate_plot::{Figure, Input};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A result: a `-J` document (a --repeat/--ci-target one too) or a
    /// `--json-stream` file ("-": standard input).
    pub result: PathBuf,
    /// Where to draw: .svg or .png. With several --figure values, each
    /// figure's name is put before the extension (run.rate.svg, …).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// rate (over time, per stream/flow and total; a line per run of a
    /// --repeat result), loss (over time), latency (p50/p99 over time; TCP
    /// RTT for iperf senders), cdf (latency CDF from the result's
    /// percentiles), runs (a --repeat result's figure run by run, with its
    /// mean and confidence interval); several comma-separated: those the
    /// result has are drawn, the others said (exit 1).
    #[arg(short = 'f', long, default_value = "rate", value_delimiter = ',', value_parser = parse_figure)]
    pub figure: Vec<Figure>,
    /// Replace output files that exist (a symbolic link or anything but a
    /// regular file is refused all the same).
    #[arg(long)]
    pub force: bool,
}

fn parse_figure(s: &str) -> Result<Figure, String> {
    Figure::parse(s).ok_or_else(|| format!("{s:?}: one of rate, loss, latency, cdf, runs"))
}

pub fn run(args: &PlotArgs, _console: &Console) -> Result<u8> {
    let text = if args.result.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(&args.result)
            .with_context(|| format!("reading {}", args.result.display()))?
    };
    let input = Input::parse(&text).with_context(|| args.result.display().to_string())?;
    // The same extension for every figure: refused once, before drawing.
    if !matches!(
        args.output.extension().and_then(|e| e.to_str()),
        Some("svg" | "png")
    ) {
        return Err(linerate_plot::PlotError::Format(args.output.display().to_string()).into());
    }
    // Each figure once (`-f rate,rate` draws one file).
    let outputs = linerate_plot::outputs(&args.output, &args.figure);
    let mut drawn = 0;
    for &(fig, ref out) in &outputs {
        // A figure this result has not (latency of a TCP receiver, loss of
        // a sender) does not keep the others from being drawn.
        match input
            .chart(fig)
            .map_err(anyhow::Error::from)
            .and_then(|chart| draw(&chart, out, args.force))
        {
            Ok(()) => {
                drawn += 1;
                eprintln!(
                    "linerate: {} figure written to {}",
                    fig.name(),
                    out.display()
                );
            }
            Err(e) => eprintln!("linerate: {} figure not drawn: {e}", fig.name()),
        }
    }
    // 0: all drawn; 1: some; 2: none (nothing could be done).
    Ok(match outputs.len() - drawn {
        0 => 0,
        _ if drawn > 0 => 1,
        _ => 2,
    })
}

/// Draws `chart` into a file `out` created new (`force`: an existing
/// regular file replaced), as `--csv` does: drawn first, so a figure the
/// result has not leaves no file behind.
fn draw(chart: &linerate_plot::Chart, out: &std::path::Path, force: bool) -> Result<()> {
    use std::io::Write;
    if out.extension().is_some_and(|e| e == "svg") {
        let svg = linerate_plot::svg(chart)?;
        let mut f = crate::output::create_new(out, force, "-o")?;
        f.write_all(svg.as_bytes())
            .with_context(|| out.display().to_string())?;
    } else {
        // The PNG encoder writes to a path: the file made first (refused
        // where it exists), then drawn over.
        drop(crate::output::create_new(out, force, "-o")?);
        linerate_plot::render(chart, out)?;
    }
    Ok(())
}
