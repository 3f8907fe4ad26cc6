//! `linerate lab up|down|status`: the namespace topologies the docs'
//! examples and the tests use, on one machine, with addresses from
//! 198.18.0.0/15 and 2001:db8::/32 only.
//!
//! - `pair`: `lr-a` and `lr-b`, each with `veth0`, joined.
//! - `dut`: a generator `lr-gen` with two ports (`ga`, `gb`) and a device
//!   under test `lr-dut` (`da`, `db`) between them: the kernel routing,
//!   optionally shaped by a TBF qdisc on `db` (`--dut-rate`), or `linerate
//!   fwd` forwarding da -> db (`--dut fwd`, with the loaded-server options
//!   in `--fwd-args`).
//!
//! `--prefix` names another lab (the tests' own, `lr` by default); `lab
//! down` ends the lab's forwarder by the PID it recorded and deletes only
//! the namespaces of its prefix. The labs themselves are
//! `linerate_lab::{up, down, status}`; here are their options.

use crate::output::Console;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: LabCmd,
}

/// Which lab: its namespaces are PREFIX-a, PREFIX-b, PREFIX-gen, PREFIX-dut.
#[derive(Debug, Clone, Args)]
struct Prefix {
    /// Name prefix of the lab's namespaces (letters, digits, '-').
    #[arg(long, default_value = "lr", value_parser = linerate_lab::valid_prefix)]
    prefix: String,
}

#[derive(Debug, Subcommand)]
enum LabCmd {
    /// Create a topology (namespaces, veths, addresses, routes).
    Up {
        /// pair: two hosts joined by a veth; dut: a generator with two
        /// ports and a device under test between them.
        #[arg(long, default_value = "pair")]
        topology: String,
        /// dut: route (the kernel; default) or fwd (`linerate fwd` in the
        /// device namespace forwards da -> db, the kernel does not).
        #[arg(long, default_value = "route")]
        dut: String,
        /// dut: shape the device's egress towards the generator's second
        /// port with TBF at this rate (tc's units: 100mbit, 1gbit).
        #[arg(long)]
        dut_rate: Option<String>,
        /// TBF's queue (limit), bytes.
        #[arg(long, default_value_t = 100_000, requires = "dut_rate")]
        dut_limit: u32,
        /// TBF's bucket (burst), tc's units (32kbit, 10kb): what it lets
        /// through at once above its rate.
        #[arg(long, default_value = "32kbit", requires = "dut_rate")]
        dut_burst: String,
        /// --dut fwd: more options for `linerate fwd` (the loaded-server
        /// simulation: "--fifo 64 --flush-us 200 --mem-mb 64 --reads 50").
        #[arg(long, allow_hyphen_values = true, default_value = "")]
        fwd_args: String,
        /// --dut fwd: seconds the forwarder runs before it stops by itself.
        #[arg(long, default_value_t = 3600.0)]
        fwd_time: f64,
        #[command(flatten)]
        p: Prefix,
    },
    /// Delete the lab's namespaces (only those this command creates) and
    /// end its forwarder.
    Down {
        #[command(flatten)]
        p: Prefix,
    },
    /// Which lab namespaces exist, with their interfaces and addresses.
    Status {
        #[command(flatten)]
        p: Prefix,
    },
}

pub fn run(a: &LabArgs, c: &Console) -> Result<u8> {
    match &a.cmd {
        LabCmd::Up {
            topology,
            dut,
            dut_rate,
            dut_limit,
            dut_burst,
            fwd_args,
            fwd_time,
            p,
        } => {
            let exe = std::env::current_exe().context("this program's path")?;
            let text = linerate_lab::up(&linerate_lab::Up {
                prefix: &p.prefix,
                topology,
                dut,
                dut_rate: dut_rate.as_deref(),
                dut_limit: *dut_limit,
                dut_burst,
                fwd_args,
                fwd_time: *fwd_time,
                exe: &exe,
            })?;
            crate::say_raw!(c, "{text}");
        }
        LabCmd::Down { p } => {
            crate::say_raw!(
                c,
                "{}",
                linerate_lab::down_text(&linerate_lab::down(&p.prefix)?)
            );
        }
        LabCmd::Status { p } => {
            let found = linerate_lab::status(&p.prefix)?;
            crate::say_raw!(c, "{}", linerate_lab::status_text(&found));
        }
    }
    Ok(0)
}

#[cfg(test)]
mod try_tests {
    use clap::{CommandFactory, FromArgMatches};

    /// Every command `lab up` suggests is one linerate takes (a suggestion
    /// once named a flag that did not exist).
    #[test]
    fn every_suggested_command_parses() {
        for args in linerate_lab::suggested_commands() {
            let argv: Vec<std::ffi::OsString> = std::iter::once("linerate")
                .chain(args.split_whitespace())
                .map(Into::into)
                .collect();
            if crate::iperf3_form(&argv) {
                let r = <crate::IperfArgs as clap::Parser>::try_parse_from(&argv);
                assert!(r.is_ok(), "{args}: {:?}", r.err());
            } else {
                let m = crate::Cli::command().try_get_matches_from(&argv);
                let cli = m.and_then(|m| crate::Cli::from_arg_matches(&m));
                assert!(cli.is_ok(), "{args}: {:?}", cli.err());
            }
        }
    }
}
