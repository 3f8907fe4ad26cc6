//! `linerate selftest`: the main job on an embedded default. Starts an
//! iperf3-compatible server inside this process on loopback, runs a short
//! client test against it, and prints iperf3's report. No root, no setup.

use crate::output::Console;
use anyhow::{Context, Result};
use clap::Args;
use linerate_iperf::output::LockedWriter;
use linerate_iperf::{ClientOptions, Family, Limits, ServerOptions};
use linerate_iperf_proto::report::OutputMode;
use linerate_iperf_proto::{Params, Protocol};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the set-up and the end of a selftest may take at most (each);
/// on a 2-CPU VM under six busy loops they took 0.1-0.35 s together.
const SELFTEST_PHASE_MAX: Duration = Duration::from_secs(5);

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
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a loopback port")?;
    let port = listener.local_addr()?.port();
    let server_opts = server_options(port);
    let stop = Arc::new(AtomicBool::new(false));
    let server_out: Arc<Mutex<dyn Write + Send>> = Arc::new(Mutex::new(std::io::sink()));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            linerate_iperf::server::serve(listener, &server_opts, server_out, stop)
        })
    };
    if !a.json {
        crate::say!(
            c,
            "linerate selftest: {} {}s to an in-process iperf3-compatible server on 127.0.0.1:{port} \
             (receiver = the server; figures below are iperf3's: sender = bytes the kernel accepted, receiver = bytes that arrived)",
            if a.udp { "UDP" } else { "TCP" },
            a.time
        );
    }
    // Ctrl-C (or SIGTERM) ends the test early with its results, as if its
    // time ran out: what ran is reported.
    let early = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, early.clone()).context("installing signal handlers")?;
    }
    let opts = client_options(a, port, early);
    let out: Arc<Mutex<dyn Write + Send>> = Arc::new(Mutex::new(c.stdout()));
    let interrupted = AtomicBool::new(false);
    let result = linerate_iperf::client::run(&opts, &mut LockedWriter(out), &interrupted);
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    match result {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("linerate: selftest failed: {e}");
            Ok(1)
        }
    }
}

/// The in-process server: one test on 127.0.0.1:`port`, its output held.
fn server_options(port: u16) -> ServerOptions {
    ServerOptions {
        events: None,
        bind_dev: None,
        auth: None,
        debug: 0,
        file: None,
        mptcp: false,
        port,
        bind: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        family: Family::V4,
        one_off: true,
        idle_timeout: None,
        interval: Duration::from_secs(1),
        output: OutputMode {
            json: true,
            ..OutputMode::default()
        },
        rcv_timeout: Duration::from_secs(10),
        control_timeout: Duration::from_secs(10),
        limits: Limits::default(),
        udp_gso: true,
        affinity: vec![],
    }
}

/// The selftest's client: `a`'s test against 127.0.0.1:`port`, ended early
/// (with its results) when `early` is raised.
fn client_options(a: &SelftestArgs, port: u16, early: Arc<AtomicBool>) -> ClientOptions {
    ClientOptions {
        time: None,
        events: None,
        bind_dev: None,
        auth: None,
        debug: 0,
        file: None,
        finish_early: Some(early),
        cntl_ka: None,
        rcv_timeout: Duration::from_secs(120),
        snd_timeout: None,
        host: "127.0.0.1".into(),
        port,
        params: Params {
            protocol: if a.udp { Protocol::Udp } else { Protocol::Tcp },
            time_s: a.time,
            parallel: a.parallel,
            len: if a.udp { 1400 } else { 0 },
            client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
            ..Params::default()
        },
        bandwidth_given: true,
        bind: None,
        cport: None,
        family: Family::V4,
        interval: Duration::from_secs(1),
        output: OutputMode {
            json: a.json,
            ..OutputMode::default()
        },
        connect_timeout: Duration::from_secs(5),
        // What bounds the end: the senders stop at the scheduled end by
        // themselves, the server's drain ends within 20 ms of the last
        // data (1 s at most), and the client gives the end of the test
        // (TEST_END to the server's results) and its set-up this long at
        // most, whatever the load (30 s let a stalled end hold a 3 s test
        // for half a minute; issue 26 item 9).
        control_timeout: SELFTEST_PHASE_MAX,
        udp_gso: true,
        affinity: vec![],
        zerocopy: false,
    }
}
