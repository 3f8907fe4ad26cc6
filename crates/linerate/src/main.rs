//! `linerate`: one binary, many subcommands. This file only parses the
//! command line and dispatches; the work lives in the library crates.
//!
//! iperf3's forms work too: `linerate -s`, `linerate -c HOST …`, and any
//! invocation through a link named `iperf3`.

mod cmd;
mod output;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use cmd::iperf::IperfArgs;
use linerate_iperf::getopt::iperf3_form;
use std::ffi::OsString;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "linerate",
    version,
    about = "Traffic generator and network benchmark",
    long_about = None,
    after_help = "iperf3's own command line works as it is: `linerate -s [FLAGS]` is `linerate server`, \
`linerate -c HOST [FLAGS]` is `linerate client HOST` (iperf3's flags, -J and text output).\n\
Each command's flags: `linerate COMMAND --help`; the guide: `man linerate` or docs/README.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Short throughput test against an in-process server on loopback (no root needed).
    Selftest(cmd::selftest::SelftestArgs),
    /// iperf3-compatible server (same flags as `iperf3 -s`).
    Server(Box<IperfArgs>),
    /// iperf3-compatible client (same flags as `iperf3 -c HOST`).
    Client {
        /// Server to test against.
        host: String,
        #[command(flatten)]
        args: Box<IperfArgs>,
    },
    /// Send crafted frames with linerate's probe (AF_XDP, AF_PACKET or sockets), paced, from ranges, IMIX or a pcap.
    Blast(Box<cmd::blast::BlastArgs>),
    /// Count what arrives: per-flow loss, reordering, duplicates, latency.
    Sink(cmd::blast::SinkArgs),
    /// Reflect or forward frames (io, mac, macswap, 5tswap), optionally as a loaded server.
    Fwd(Box<cmd::fwd::FwdArgs>),
    /// UDP request/response transactions: transactions/s and latency percentiles.
    Rr(cmd::rr::RrArgs),
    /// What on this host limits throughput, with the evidence and the fix.
    Doctor(cmd::doctor::DoctorArgs),
    /// Line-rate arithmetic (10 Gbit/s at 64-byte frames = 14,880,952 pps).
    Calc(cmd::calc::CalcArgs),
    /// RFC 2544 through a device under test: throughput (NDR/PDR), latency, frame loss, back-to-back.
    Rfc2544(Box<cmd::rfc2544::Rfc2544Args>),
    /// Namespace topologies on this machine for examples and tests: pair, or a device under test.
    Lab(cmd::lab::LabArgs),
    /// Figures from a result: rate, loss, latency over time, latency CDF (SVG or PNG).
    Plot(cmd::plot::PlotArgs),
    /// One self-contained HTML report of results (any mode's -J or --json-stream).
    Report(cmd::report::ReportArgs),
    /// Two sets of runs compared: each figure's change, its confidence interval, Welch's t test; --fail-if for CI.
    Compare(cmd::report::CompareArgs),
    /// perfSONAR pScheduler tool methods (enumerate, can-run, duration, participant-data, run, merged-results): JSON in, JSON out.
    Pscheduler(cmd::pscheduler::PschedulerArgs),
    /// Open Traffic Generator API (the subset snappi drives) over HTTPS: flows run as blast and sink on allowed interfaces.
    Agent(Box<cmd::agent::AgentArgs>),
    /// Print the shell completion script for bash, zsh or fish.
    Completions(cmd::manual::CompletionsArgs),
    /// Print a man page, or write every page (one per subcommand) with --dir.
    Man(cmd::manual::ManArgs),
}

/// The command line as parsed: the clap definitions with the iperf3
/// subcommands' help split (also what completions and man pages are
/// generated from).
fn cli_command() -> clap::Command {
    cmd::iperf::split_help(Cli::command())
}

/// The options of `cmd` as getopt reads them (`linerate_iperf::getopt`
/// writes iperf3's abbreviations out against them).
pub(crate) fn getopt_table(cmd: &clap::Command) -> linerate_iperf::getopt::Table {
    use linerate_iperf::getopt::{Opt, Table, Takes};
    Table::new(cmd.get_arguments().map(|a| {
        Opt {
            long: a.get_long().map(str::to_string),
            aliases: (a.get_all_aliases().unwrap_or_default().iter())
                .map(|s| s.to_string())
                .collect(),
            short: a.get_short(),
            takes: if !a.get_action().takes_values() {
                Takes::Nothing
            } else if a.get_num_args().is_some_and(|r| r.min_values() == 0) {
                Takes::Optional
            } else {
                Takes::Required
            },
        }
    }))
}

/// The command line with iperf3's long-option abbreviations written out
/// (for the iperf3 forms and `server`/`client`); an ambiguous one ends
/// the run as a usage error.
fn expand_iperf3_options(argv: Vec<OsString>) -> Vec<OsString> {
    let skip = if iperf3_form(&argv) {
        1
    } else if argv.get(1).is_some_and(|a| a == "server" || a == "client") {
        2
    } else {
        return argv;
    };
    let table = getopt_table(&IperfArgs::command());
    match linerate_iperf::getopt::expand(&argv[skip.min(argv.len())..], &table) {
        Ok(rest) => argv.iter().take(skip).cloned().chain(rest).collect(),
        Err(e) => {
            eprintln!("linerate: error: {e}");
            std::process::exit(2);
        }
    }
}

fn main() -> ExitCode {
    let argv = expand_iperf3_options(std::env::args_os().collect());
    let console = output::console();
    let c = &console;
    let result = if iperf3_form(&argv) {
        cmd::iperf::run(&IperfArgs::parse_from(argv), c)
    } else {
        let matches = cli_command().get_matches_from(argv);
        let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        match cli.command {
            Command::Completions(args) => cmd::manual::completions(&args, cli_command(), c),
            Command::Man(args) => cmd::manual::man(&args, cli_command(), c),
            Command::Calc(args) => cmd::calc::run(&args, c).map(|()| 0),
            Command::Plot(args) => cmd::plot::run(&args, c),
            Command::Report(args) => cmd::report::report(&args, c),
            Command::Compare(args) => cmd::report::compare(&args, c),
            Command::Pscheduler(args) => cmd::pscheduler::run(&args, c),
            Command::Agent(args) => cmd::agent::run(&args, c),
            Command::Lab(args) => cmd::lab::run(&args, c),
            Command::Rfc2544(args) => cmd::rfc2544::run(&args, c),
            Command::Selftest(args) => cmd::selftest::run(&args, c),
            Command::Doctor(args) => cmd::doctor::run(&args, c),
            Command::Rr(args) => cmd::rr::run(&args, c),
            Command::Fwd(args) => cmd::fwd::run(&args, c),
            Command::Blast(args) => cmd::blast::run_blast(&args, c),
            Command::Sink(args) => cmd::blast::run_sink(&args, c),
            Command::Server(mut args) => {
                args.server = true;
                cmd::iperf::run(&args, c)
            }
            Command::Client { host, mut args } => {
                args.client = Some(host);
                cmd::iperf::run(&args, c)
            }
        }
    };
    match result {
        Ok(code) => ExitCode::from(console.finish(code)),
        Err(e) => {
            // The chain, without causes a message already spells out
            // (typed errors often embed their source in their text).
            let msg = linerate_run::without_repeats(&format!("{e:#}"));
            eprintln!("linerate: error: {msg}");
            // An OS error says what the user can do about it.
            if let Some(fix) = linerate_run::advice::for_error(e.chain(), &msg) {
                eprintln!("linerate: what to do: {fix}");
            }
            ExitCode::from(console.finish(2))
        }
    }
}
