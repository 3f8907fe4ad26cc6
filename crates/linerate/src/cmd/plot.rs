//! `linerate plot RESULT -o FILE.svg|FILE.png`: figures from any mode's
//! result (`-J` document or `--json-stream` file).

use anyhow::{Context, Result};
use clap::Args;
use linerate_plot::{Figure, Input};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A result: a `-J` document or a `--json-stream` file ("-": standard input).
    pub result: PathBuf,
    /// Where to draw: .svg or .png. With several --figure values, each
    /// figure's name is put before the extension (run.rate.svg, …).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// rate (over time, per stream/flow and total), loss (over time),
    /// latency (p50/p99 over time; TCP RTT for iperf senders), cdf (latency
    /// CDF from the result's percentiles); several comma-separated.
    #[arg(short = 'f', long, default_value = "rate", value_delimiter = ',', value_parser = parse_figure)]
    pub figure: Vec<Figure>,
}

fn parse_figure(s: &str) -> Result<Figure, String> {
    Figure::parse(s).ok_or_else(|| format!("{s:?}: one of rate, loss, latency, cdf"))
}

pub fn run(args: &PlotArgs) -> Result<u8> {
    let text = if args.result.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(&args.result)
            .with_context(|| format!("reading {}", args.result.display()))?
    };
    let input = Input::parse(&text).with_context(|| args.result.display().to_string())?;
    for &fig in &args.figure {
        let out = if args.figure.len() == 1 {
            args.output.clone()
        } else {
            let stem = args
                .output
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy();
            let ext = args
                .output
                .extension()
                .unwrap_or_default()
                .to_string_lossy();
            args.output
                .with_file_name(format!("{stem}.{}.{ext}", fig.name()))
        };
        let chart = input.chart(fig)?;
        linerate_plot::render(&chart, &out)?;
        eprintln!(
            "linerate: {} figure written to {}",
            fig.name(),
            out.display()
        );
    }
    Ok(0)
}
