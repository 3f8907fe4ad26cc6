//! `linerate selftest`: its flags, wired to `linerate_iperf::selftest` (an
//! iperf3-compatible server inside this process on loopback, a short client
//! test against it, iperf3's report).

use crate::output::Console;
use anyhow::{Context, Result};
use clap::Args;
use linerate_iperf::selftest::{LoopbackServer, Selftest};
use std::sync::{Arc, Mutex};

/// A short throughput test against an in-process server on loopback.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    /// Seconds to run.
    #[arg(short = 't', long, default_value_t = 3)]
    time: u32,
    /// Parallel streams.
    #[arg(short = 'P', long, default_value_t = 1)]
    parallel: u32,
    /// UDP (unlimited rate, 1400-byte datagrams) instead of TCP.
    #[arg(short = 'u', long)]
    udp: bool,
    /// iperf3's -J document instead of text.
    #[arg(short = 'J', long)]
    json: bool,
}

pub fn run(a: &SelftestArgs, c: &Console) -> Result<u8> {
    let test = Selftest {
        time_s: a.time,
        parallel: a.parallel,
        udp: a.udp,
        json: a.json,
    };
    let server = LoopbackServer::start().context("binding a loopback port")?;
    if !a.json {
        crate::say!(c, "{}", test.banner(server.port()));
    }
    // Ctrl-C (or SIGTERM) ends the test early with its results, as if its
    // time ran out: what ran is reported.
    let early = super::flag_on(&[signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])?;
    match test.run(server, Arc::new(Mutex::new(c.stdout())), early) {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("linerate: selftest failed: {e}");
            Ok(1)
        }
    }
}
