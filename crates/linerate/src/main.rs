//! `linerate`: one binary, many subcommands. This file only parses the
//! command line and dispatches; the work lives in the library crates.

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "linerate", version, about = "Traffic generator and network benchmark", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Line-rate arithmetic (10 Gbit/s at 64-byte frames = 14,880,952 pps).
    Calc(cmd::calc::CalcArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Calc(args) => cmd::calc::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("linerate: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
