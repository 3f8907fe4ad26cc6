//! linerate's benchmark harness: brings the namespace rig up, runs the
//! contenders of a scenario alternately, counts what arrived at the receiver
//! (its interface counters, not the sender's claim), and prints medians and
//! ratios with the machine, kernel, date and commit beside the raw numbers.
//!
//! Usage: `cargo run --release -p linerate-bench -- <scenario> [--runs N] [--duration S]`
//! (as root). `--list` names the scenarios.

mod harness;
mod instr;
mod machine;
mod null;
mod scenarios;
mod soak;

use anyhow::{Result, bail};
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(name = "linerate-bench", about = "A/B benchmarks on the namespace rig")]
struct Args {
    /// Scenarios to run (see --list); `iperf` runs the six iperf-* ones.
    scenarios: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Runs per contender (alternating A, B, A, B, …).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seconds of each measured window (the sender runs a little longer).
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Run only the contenders whose name contains one of these words
    /// (comma-separated), e.g. `--only af_xdp,trafgen`.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// instr: the two frame counts each path runs with under callgrind.
    #[arg(long, value_delimiter = ',', default_value = "20000,100000")]
    frames: Vec<u64>,
    /// soak: how long it runs, seconds (60 to 14400).
    #[arg(long, default_value_t = 3600.0)]
    soak_for: f64,
    /// dpdk-null: also count linerate's worker instructions per frame
    /// under callgrind.
    #[arg(long)]
    callgrind: bool,
    /// Where the receiver's kernel work runs, for the scenarios that pin
    /// it (the transaction and UDP ones): `default` (the kernel's path as
    /// a host has it), `threaded` (threaded NAPI pinned to the receiver's
    /// CPU), or both, default first.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "default,threaded"
    )]
    placement: Vec<harness::Placement>,
    /// Where to write the raw results (JSON).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let all = scenarios::all();
    if args.list || args.scenarios.is_empty() {
        for s in &all {
            println!("{:<16} {}", s.name, (s.build)().about);
        }
        println!("{:<16} the six iperf-* scenarios", "iperf");
        println!(
            "{:<16} user-space instructions per frame under callgrind (blast, sink, fwd; --frames A,B, --only)",
            "instr"
        );
        println!(
            "{:<16} DPDK net_null: linerate blast/fwd io vs testpmd txonly/io, the frame builders alone (--callgrind adds instructions per frame)",
            "dpdk-null"
        );
        println!(
            "{:<16} an hour of churned tests against linerate's daemons: memory and descriptors flat (--soak-for S)",
            "soak"
        );
        return Ok(());
    }

    if !(1..=50).contains(&args.runs) {
        bail!("--runs must be 1..=50");
    }
    if !(0.5..=60.0).contains(&args.duration) {
        bail!("--duration must be 0.5..=60 seconds");
    }
    let cfg = harness::Config {
        runs: args.runs,
        window: Duration::from_secs_f64(args.duration),
        out_dir: args.out,
    };
    let mut names = Vec::new();
    for n in &args.scenarios {
        match scenarios::group(n) {
            Some(g) => names.extend(g.iter().map(|s| s.to_string())),
            None => names.push(n.clone()),
        }
    }
    for name in names {
        if name == "dpdk-null" {
            null::run(
                cfg.runs,
                cfg.window.as_secs_f64(),
                args.callgrind,
                &cfg.out_dir,
            )?;
            println!();
            continue;
        }
        if name == "soak" {
            soak::run(args.soak_for, &cfg.out_dir)?;
            continue;
        }
        if name == "instr" {
            // Not an A/B comparison: instructions per frame per path.
            let [small, large] = args.frames[..] else {
                bail!("--frames takes two counts (20000,100000)");
            };
            instr::run(small, large, &args.only, &cfg.out_dir)?;
            println!();
            continue;
        }
        let Some(entry) = all.iter().find(|s| s.name == name) else {
            bail!("no scenario '{name}' (see --list)");
        };
        // A scenario that pins its receive path runs in each placement
        // asked; one that does not has only the default.
        let placements: Vec<harness::Placement> = if (entry.build)().receive_cpu.is_some() {
            args.placement.clone()
        } else {
            vec![harness::Placement::Default]
        };
        for placement in placements {
            let mut sc = (entry.build)();
            if !args.only.is_empty() {
                sc.contenders
                    .retain(|c| args.only.iter().any(|w| c.name.contains(w.as_str())));
                if sc.contenders.len() < 2 {
                    bail!("--only leaves fewer than two contenders in {name}");
                }
            }
            harness::run(sc, &cfg, placement)?;
            println!();
        }
    }
    Ok(())
}
