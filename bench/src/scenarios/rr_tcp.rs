//! TCP request/response on the rig (`rr-tcp-pingpong`): one persistent
//! connection, one 64-byte request in flight, linerate `rr client --tcp
//! --outstanding 1` against `rr server --tcp` vs `sockperf ping-pong
//! --tcp`, each spinning on non-blocking sockets (linerate's client
//! --busy-poll and server --spin, sockperf's --nonblocked on both sides)
//! and sleeping. Client pinned to CPU0, server to CPU1. The figure is
//! packets arriving at the server's interface per second: with one
//! request in flight and its ACK riding on the answer, about one per
//! transaction, the same for both tools, so their ratio is the ratio of
//! transaction rates (1/RTT).
//!
//! TCP_RR and TCP_CRR against neper (static builds in `shared/bin/` or on
//! PATH): `rr-tcp-neper`, `rr-tcp-neper-100`, `rr-tcp-crr`
//! and `rr-tcp-crr-16` in `neper.rs`.

use super::tools::{linerate_bin, need, spawn_pinned, wait_tcp_listen};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::Result;
use linerate_lab::Rig;
use std::time::Duration;

const CLIENT: usize = 0;
const SERVER: usize = 1;
const RR_PORT: u16 = 5301;
const SOCKPERF_PORT: u16 = 11112;
const SIZE: &str = "64";

fn linerate(
    rig: &Rig,
    run_for: Duration,
    server_extra: &[&str],
    client_extra: &[&str],
) -> Result<Running> {
    let bin = linerate_bin()?.to_string_lossy().to_string();
    let ip = rig.host(SERVER).ipv4.to_string();
    let port = RR_PORT.to_string();
    let mut sargs = vec![
        bin.as_str(),
        "rr",
        "server",
        "--tcp",
        "-B",
        &ip,
        "-p",
        &port,
        "--cores",
        "1",
        "-i",
        "0",
    ];
    sargs.extend_from_slice(server_extra);
    let server = spawn_pinned(rig, SERVER, 1, &sargs)?;
    wait_tcp_listen(rig, SERVER, RR_PORT)?;
    let secs = format!("{}", run_for.as_secs().max(1));
    let mut argv = vec![
        bin.as_str(),
        "rr",
        "client",
        &ip,
        "--tcp",
        "-p",
        &port,
        "-t",
        &secs,
        "-i",
        "0",
        "--cores",
        "0",
        "-l",
        SIZE,
        "--outstanding",
        "1",
    ];
    argv.extend_from_slice(client_extra);
    let child = spawn_pinned(rig, CLIENT, 0, &argv)?;
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
        report: None,
        claim: None,
    })
}

fn sockperf(rig: &Rig, run_for: Duration, extra: &[&str]) -> Result<Running> {
    let ip = rig.host(SERVER).ipv4.to_string();
    let port = SOCKPERF_PORT.to_string();
    let mut server_argv = vec!["sockperf", "server", "--tcp", "-i", &ip, "-p", &port];
    server_argv.extend_from_slice(extra);
    let server = spawn_pinned(rig, SERVER, 1, &server_argv)?;
    wait_tcp_listen(rig, SERVER, SOCKPERF_PORT)?;
    // sockperf takes a while to start and warms up 0.4 s: give it the
    // whole run past that (as the UDP scenario does).
    let secs = format!("{}", run_for.as_secs().max(1) + 1);
    let mut argv = vec![
        "sockperf",
        "ping-pong",
        "--tcp",
        "-i",
        &ip,
        "-p",
        &port,
        "-m",
        SIZE,
        "-t",
        &secs,
    ];
    argv.extend_from_slice(extra);
    let child = spawn_pinned(rig, CLIENT, 0, &argv)?;
    std::thread::sleep(Duration::from_millis(1500));
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
        report: None,
        claim: None,
    })
}

fn lr_spin(rig: &Rig, d: Duration) -> Result<Running> {
    linerate(rig, d, &["--spin"], &["--busy-poll"])
}

fn lr_sleep(rig: &Rig, d: Duration) -> Result<Running> {
    linerate(rig, d, &[], &[])
}

fn sockperf_nonblocked(rig: &Rig, d: Duration) -> Result<Running> {
    sockperf(rig, d, &["--nonblocked"])
}

fn sockperf_sleep(rig: &Rig, d: Duration) -> Result<Running> {
    sockperf(rig, d, &[])
}

pub fn pingpong() -> Scenario {
    Scenario {
        name: "rr-tcp-pingpong",
        about: "TCP 64 B request/response, 1 connection, 1 in flight: linerate rr --tcp (spinning: client --busy-poll, server --spin; and sleeping) vs sockperf ping-pong --tcp (--nonblocked on both sides; and sleeping) (packets/s at the server's veth, about one per transaction)",
        receiver: SERVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: None,
        contenders: vec![
            Contender {
                name: "linerate rr --tcp spinning",
                start: lr_spin,
            },
            Contender {
                name: "sockperf --tcp --nonblocked",
                start: sockperf_nonblocked,
            },
            Contender {
                name: "linerate rr --tcp",
                start: lr_sleep,
            },
            Contender {
                name: "sockperf --tcp",
                start: sockperf_sleep,
            },
        ],
        check: || {
            need(&["sockperf", "taskset", "ss"])?;
            linerate_bin().map(|_| ())
        },
    }
}
