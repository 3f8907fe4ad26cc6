//! UDP request/response on the rig: linerate rr (server and client) vs
//! sockperf (server and client), 64-byte requests and responses, client
//! pinned to CPU0, server on CPU1 with its veth's NAPI thread (requests
//! are received there: `rx-udp-gro-forwarding` is turned on, without which
//! a veth receives socket UDP on the sending CPU; replies are received on
//! CPU1 too, in the server's sending context). The figure is
//! requests arriving at the server's interface per second (the receiver's
//! count); with each request answered before (ping-pong) or while (load)
//! the next go out, that is the transaction rate.
//!
//! - `rr-pingpong`: one flow, one request in flight: the rate is 1/RTT.
//!   linerate `rr client --outstanding 1` vs `sockperf ping-pong`.
//! - `rr-load`: as many transactions as one client core can drive:
//!   linerate `rr client --flows 4 --outstanding 16` (closed loop) vs
//!   `sockperf under-load --mps max --reply-every 1` (open loop at its
//!   top rate, every message answered).

use super::tools::{linerate_bin, need, spawn_pinned, wait_udp_listen};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::Result;
use linerate_lab::Rig;
use std::time::Duration;

const CLIENT: usize = 0;
const SERVER: usize = 1;
const RR_PORT: u16 = 5300;
const SOCKPERF_PORT: u16 = 11111;
const SIZE: &str = "64";

fn linerate(rig: &Rig, run_for: Duration, load: &[&str]) -> Result<Running> {
    linerate_with(rig, run_for, load, &[])
}

fn linerate_with(
    rig: &Rig,
    run_for: Duration,
    load: &[&str],
    server_extra: &[&str],
) -> Result<Running> {
    rr_pair(rig, run_for, Placement::Apart, server_extra, load)
}

/// Where an rr pair runs.
#[derive(Clone, Copy)]
enum Placement {
    /// Client on CPU0, server on CPU1, each held there by taskset.
    Apart,
    /// Both on CPUs 0 and 1, each pinning its own workers.
    Shared,
}

/// A linerate rr server and client on the rig, 64-byte requests.
fn rr_pair(
    rig: &Rig,
    run_for: Duration,
    placement: Placement,
    server_extra: &[&str],
    client_extra: &[&str],
) -> Result<Running> {
    let bin = linerate_bin()?.to_string_lossy().to_string();
    let ip = rig.host(SERVER).ipv4.to_string();
    let port = RR_PORT.to_string();
    let (server_cores, client_cores) = match placement {
        Placement::Apart => ("1", "0"),
        Placement::Shared => ("0,1", "0,1"),
    };
    let mut sargs = vec![
        bin.as_str(),
        "rr",
        "server",
        "-B",
        &ip,
        "-p",
        &port,
        "--cores",
        server_cores,
        "-i",
        "0",
    ];
    sargs.extend_from_slice(server_extra);
    let start = |host: usize, cpu: usize, argv: &[&str]| match placement {
        Placement::Apart => spawn_pinned(rig, host, cpu, argv),
        Placement::Shared => super::tools::spawn(rig, host, argv),
    };
    let server = start(SERVER, 1, &sargs)?;
    wait_udp_listen(rig, SERVER, RR_PORT)?;
    let secs = format!("{}", run_for.as_secs().max(1));
    let mut argv = vec![
        bin.as_str(),
        "rr",
        "client",
        &ip,
        "-p",
        &port,
        "-t",
        &secs,
        "-i",
        "0",
        "--cores",
        client_cores,
        "-l",
        SIZE,
    ];
    argv.extend_from_slice(client_extra);
    let child = start(CLIENT, 0, &argv)?;
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
        report: None,
        claim: None,
    })
}

fn sockperf(rig: &Rig, run_for: Duration, mode: &[&str]) -> Result<Running> {
    sockperf_with(rig, run_for, mode, &[])
}

/// sockperf with `extra` flags on both sides (`--nonblocked`: both spin on
/// non-blocking sockets, its fastest ping-pong).
fn sockperf_with(rig: &Rig, run_for: Duration, mode: &[&str], extra: &[&str]) -> Result<Running> {
    let ip = rig.host(SERVER).ipv4.to_string();
    let port = SOCKPERF_PORT.to_string();
    let mut server_argv = vec!["sockperf", "server", "-i", &ip, "-p", &port];
    server_argv.extend_from_slice(extra);
    let server = spawn_pinned(rig, SERVER, 1, &server_argv)?;
    wait_udp_listen(rig, SERVER, SOCKPERF_PORT)?;
    // sockperf spends seconds starting (more the longer its -t: it sizes
    // its records by it) and 0.4 s warming up before its test: return once
    // it is sending, with the whole run still ahead of it.
    let secs = format!("{}", run_for.as_secs().max(1) + 1);
    let mut argv = vec!["sockperf"];
    argv.extend_from_slice(mode);
    argv.extend_from_slice(&["-i", &ip, "-p", &port, "-m", SIZE, "-t", &secs]);
    argv.extend_from_slice(extra);
    let child = spawn_pinned(rig, CLIENT, 0, &argv)?;
    wait_for_traffic(rig, SOCKPERF_LEAD)?;
    // past its own warm-up
    std::thread::sleep(Duration::from_millis(500));
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
        report: None,
        claim: None,
    })
}

/// Longest sockperf may take to start sending.
const SOCKPERF_LEAD: Duration = Duration::from_secs(15);

/// Waits until requests arrive at the server's interface.
fn wait_for_traffic(rig: &Rig, limit: Duration) -> Result<()> {
    let t0 = std::time::Instant::now();
    let first = rig.stats(SERVER)?.rx_packets;
    while t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
        if rig.stats(SERVER)?.rx_packets > first + 10 {
            return Ok(());
        }
    }
    anyhow::bail!("sockperf sent nothing within {limit:?}")
}

fn pingpong_lr(rig: &Rig, d: Duration) -> Result<Running> {
    linerate(rig, d, &["--outstanding", "1"])
}

/// Both sides spinning: the client on its socket, the server's socket
/// with SO_BUSY_POLL.
fn pingpong_lr_busy(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_with(
        rig,
        d,
        &["--outstanding", "1", "--busy-poll"],
        &["--busy-poll", "50"],
    )
}

/// Both sides spinning on non-blocking sockets: the client's
/// --busy-poll, the server's --spin (as sockperf --nonblocked).
fn pingpong_lr_spin(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_with(rig, d, &["--outstanding", "1", "--busy-poll"], &["--spin"])
}

/// As `pingpong_lr_spin`, the server answering on its group socket only
/// (no connected socket per client: the route lookups of an unconnected
/// socket on each request and answer, as sockperf's server has them).
fn pingpong_lr_spin_one_socket(rig: &Rig, d: Duration) -> Result<Running> {
    linerate_with(
        rig,
        d,
        &["--outstanding", "1", "--busy-poll"],
        &["--spin", "--client-sockets", "0"],
    )
}

/// The client spinning as in `pingpong_lr_spin`; the server answering
/// over AF_XDP on its veth (`--af-xdp`: no kernel UDP receive on its side;
/// copy mode on a veth).
fn pingpong_lr_af_xdp(rig: &Rig, d: Duration) -> Result<Running> {
    let iface = rig.host(SERVER).iface.clone();
    linerate_with(
        rig,
        d,
        &["--outstanding", "1", "--busy-poll"],
        &["--af-xdp", &iface],
    )
}

fn pingpong_sockperf(rig: &Rig, d: Duration) -> Result<Running> {
    sockperf(rig, d, &["ping-pong"])
}

/// sockperf at its best for ping-pong: both sides --nonblocked.
fn pingpong_sockperf_nonblocked(rig: &Rig, d: Duration) -> Result<Running> {
    sockperf_with(rig, d, &["ping-pong"], &["--nonblocked"])
}

fn load_lr(rig: &Rig, d: Duration) -> Result<Running> {
    linerate(rig, d, &["--flows", "4", "--outstanding", "16"])
}

fn load_sockperf(rig: &Rig, d: Duration) -> Result<Running> {
    sockperf(
        rig,
        d,
        &["under-load", "--mps", "max", "--reply-every", "1"],
    )
}

/// The server's veth takes requests in its own NAPI thread (on CPU1, as
/// the harness pins it), as a NIC's receive queue interrupting the
/// server's CPU would: without it a veth receives socket UDP on the
/// sending CPU, the client's.
fn requests_through_napi(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    rig.udp_through_napi(SERVER)?;
    Ok(Box::new(()))
}

fn scenario(
    name: &'static str,
    about: &'static str,
    lr: fn(&Rig, Duration) -> Result<Running>,
    peer: fn(&Rig, Duration) -> Result<Running>,
) -> Scenario {
    Scenario {
        name,
        about,
        receiver: SERVER,
        receive_cpu: Some(1),
        napi_setup: true,
        queues: 1,
        metric: Metric::Packets,
        setup: Some(requests_through_napi),
        contenders: vec![
            Contender {
                name: "linerate rr",
                start: lr,
            },
            Contender {
                name: "sockperf",
                start: peer,
            },
        ],
        check: || {
            need(&["sockperf", "taskset", "ss"])?;
            linerate_bin().map(|_| ())
        },
    }
}

pub fn pingpong() -> Scenario {
    let mut sc = scenario(
        "rr-pingpong",
        "UDP 64 B request/response, 1 flow, 1 in flight: linerate rr (spinning on both sides, the server over AF_XDP or its sockets; busy polling; sleeping) vs sockperf ping-pong (--nonblocked on both sides: spinning, its best; and sleeping) (requests/s at the server's veth = 1/RTT)",
        pingpong_lr,
        pingpong_sockperf,
    );
    sc.contenders.insert(
        0,
        Contender {
            name: "linerate rr --busy-poll",
            start: pingpong_lr_busy,
        },
    );
    sc.contenders.insert(
        0,
        Contender {
            name: "linerate rr spinning, group socket only (server --spin --client-sockets 0)",
            start: pingpong_lr_spin_one_socket,
        },
    );
    sc.contenders.insert(
        0,
        Contender {
            name: "linerate rr spinning (client --busy-poll, server --spin)",
            start: pingpong_lr_spin,
        },
    );
    sc.contenders.insert(
        0,
        Contender {
            name: "linerate rr spinning, server over AF_XDP (client --busy-poll, server --af-xdp)",
            start: pingpong_lr_af_xdp,
        },
    );
    sc.contenders.push(Contender {
        name: "sockperf --nonblocked",
        start: pingpong_sockperf_nonblocked,
    });
    sc
}

pub fn load() -> Scenario {
    scenario(
        "rr-load",
        "UDP 64 B request/response, one client core at its top rate: linerate rr (4 flows x 16 in flight) vs sockperf under-load --mps max --reply-every 1 (requests/s at the server's veth)",
        load_lr,
        load_sockperf,
    )
}

/// The rr server's recipe switch by switch (`rr-recipe`): the same client
/// (two pinned workers, 8 flows each, 16 in flight per flow) against a
/// two-worker server with one more part of the recipe on each time. No
/// receive CPU is set aside: a veth processes a packet on the sending CPU,
/// as an RSS queue's interrupt would place it on a NIC, which is where
/// steering by CPU and pinning matter.
fn recipe(rig: &Rig, run_for: Duration, server_flags: &[&str]) -> Result<Running> {
    rr_pair(
        rig,
        run_for,
        Placement::Shared,
        server_flags,
        &["--flows", "8", "--outstanding", "16"],
    )
}

macro_rules! step {
    ($f:ident, $flags:expr) => {
        fn $f(rig: &Rig, d: Duration) -> Result<Running> {
            recipe(rig, d, $flags)
        }
    };
}

step!(
    r_off,
    &["--no-reuseport", "--no-pin", "--batch", "1", "--no-gso"]
);
step!(
    r_reuseport,
    &["--steering", "hash", "--no-pin", "--batch", "1", "--no-gso"]
);
step!(r_steering, &["--no-pin", "--batch", "1", "--no-gso"]);
step!(r_pin, &["--batch", "1", "--no-gso"]);
step!(r_batch, &["--no-gso"]);
step!(r_gso, &[]);
step!(r_busy, &["--busy-poll", "50"]);
step!(r_coalesce, &["--busy-poll", "50", "--coalesce", "100"]);
step!(r_coalesce_only, &["--coalesce", "100"]);

/// The server's veth as a two-queue NIC with RSS (`rr-recipe-rss`): each
/// receive queue's NAPI thread pinned to one of the two CPUs the server's
/// workers are on, requests spread over the queues by their flow's hash.
fn rss_queues(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    let placed = rig.spread_receive_queues(SERVER, &[0, 1])?;
    println!("receive queues: NAPI threads (pid, CPU) {placed:?}");
    Ok(Box::new(()))
}

/// The same steps on a two-queue veth whose receive queues are processed
/// by NAPI threads pinned to CPUs 0 and 1 (RSS on a NIC).
pub fn recipe_rss_scenario() -> Scenario {
    Scenario {
        name: "rr-recipe-rss",
        about: "rr-recipe on a two-queue veth: requests spread over the queues by flow hash and received in each queue's NAPI thread, pinned to CPU0 and CPU1 (a NIC's RSS queues and their interrupts); the server's workers on the same CPUs",
        queues: 2,
        setup: Some(rss_queues),
        ..recipe_scenario()
    }
}

pub fn recipe_scenario() -> Scenario {
    Scenario {
        name: "rr-recipe",
        about: "the rr server's recipe switch by switch, cumulative: all off (one shared socket, unpinned, 1 datagram per call) -> SO_REUSEPORT (hash) -> CPU steering -> pinning -> batches of 64 -> answers to one client as one UDP GSO message -> busy polling 50 us -> naps of 100 us after a drained receive, then the same naps without busy polling (requests/s at the server's veth, closed loop)",
        receiver: SERVER,
        receive_cpu: None,
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: None,
        contenders: vec![
            Contender {
                name: "all off",
                start: r_off,
            },
            Contender {
                name: "+ SO_REUSEPORT (hash)",
                start: r_reuseport,
            },
            Contender {
                name: "+ CPU steering",
                start: r_steering,
            },
            Contender {
                name: "+ pinned workers",
                start: r_pin,
            },
            Contender {
                name: "+ batches of 64",
                start: r_batch,
            },
            Contender {
                name: "+ GSO answers",
                start: r_gso,
            },
            Contender {
                name: "+ busy poll 50 us",
                start: r_busy,
            },
            Contender {
                name: "+ coalesce 100 us",
                start: r_coalesce,
            },
            Contender {
                name: "+ coalesce 100 us, busy poll off",
                start: r_coalesce_only,
            },
        ],
        check: || {
            need(&["taskset", "ss"])?;
            linerate_bin().map(|_| ())
        },
    }
}
