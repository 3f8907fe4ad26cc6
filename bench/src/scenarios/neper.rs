//! TCP request/response against neper (google/neper at ea5890f, its
//! `tcp_rr` and `tcp_crr` built static, found by [`neper_bin`] in
//! `shared/bin/` beside the checkout or on PATH; the project holds no copy
//! of their sources). 64-byte requests and
//! responses (linerate's TCP frames add a 4-byte length: 68 bytes on the
//! wire against neper's 64), client pinned to CPU0, server to CPU1 (every
//! thread of each process, by taskset), one worker (linerate `--cores`) or
//! thread (neper `-T 1`) on each side.
//!
//! - `rr-tcp-neper`: TCP_RR, one persistent connection, one request in
//!   flight: linerate `rr client --tcp --outstanding 1` against `rr server
//!   --tcp`, spinning (client `--busy-poll`, server `--spin`) and sleeping,
//!   vs neper `tcp_rr`. neper has no spinning mode: it always sleeps in
//!   `epoll_wait` on non-blocking data sockets (its `--nonblocking` only
//!   makes the control sockets non-blocking and bounds that wait at 600 s;
//!   `--edge-trigger` is for the stream tests; there is no busy-poll
//!   flag), so it runs with its defaults, and the pair to compare it with
//!   is linerate sleeping. The figure is packets arriving at the server's
//!   interface per second, as in `rr-tcp-pingpong`: one request in flight
//!   per connection, its ACK riding on the answer and the answer's on the
//!   next request, about one per transaction for both tools.
//! - `rr-tcp-neper-100`: the same with 100 connections on the one worker
//!   or thread of each side (linerate `--flows 100 --outstanding 1`, neper
//!   `-F 100 -T 1`).
//! - `rr-tcp-crr`: TCP_CRR, a connection per transaction (connect, send
//!   the request, read the response, close), 1 at a time (linerate
//!   `--connect-per-transaction --flows 1`, neper `tcp_crr -F 1 -T 1`, as
//!   netperf's TCP_CRR), and `rr-tcp-crr-16`, 16 at a time. Each tool's
//!   client closes both ways: with a FIN (linerate's default, neper's
//!   `--time-wait`; the client keeps the TIME_WAIT) and with a reset
//!   (SO_LINGER 0: linerate's `--close-reset`, neper's default). The
//!   figure is connections the server's kernel accepted per second: the
//!   `PassiveOpens` counter of the server namespace's `/proc/net/snmp`,
//!   which neither tool keeps. The client's namespace reuses ports in
//!   TIME_WAIT
//!   (`net.ipv4.tcp_tw_reuse=1`; its default, 2, is for loopback only): at
//!   thousands of connections a second the 28,232 ephemeral ports would
//!   otherwise all be waiting after a few seconds.
//!   linerate runs each close sleeping (as neper) and spinning (client
//!   `--busy-poll`, server `--spin`): neper has no spinning mode (its
//!   `--nonblocking` makes the sockets non-blocking and still waits in
//!   `epoll_wait`), so the spinning rows are linerate at its best against
//!   neper at its, and the sleeping rows like for like.
//!
//! Each client's own claim (linerate's `transactions_per_s` from `-J`,
//! neper's `throughput=`) is printed beside the count, over its whole run.

use super::tools::{linerate_bin, need, spawn_pinned, spawn_pinned_out, wait_tcp_listen};
use crate::harness::{Claim, Contender, Count, Metric, Running, Scenario, netns_snmp};
use anyhow::{Result, bail};
use linerate_lab::Rig;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CLIENT: usize = 0;
const SERVER: usize = 1;
const RR_PORT: u16 = 5302;
const NEPER_CONTROL: u16 = 12866;
const NEPER_DATA: u16 = 12867;
const SIZE: &str = "64";

/// Where neper's static binaries are kept for this project:
/// `shared/bin/` beside the checkout this program was built from.
fn shared_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/bin")
}

/// neper's `tcp_rr` or `tcp_crr`: `shared/bin/neper-<name>` beside the
/// checkout, else `<name>` on PATH; an error saying where it looked
/// (the neper scenarios then skip with it).
fn neper_bin(name: &str) -> Result<String> {
    let shared = shared_bin().join(format!("neper-{name}"));
    if shared.is_file() {
        return Ok(shared.to_string_lossy().into_owned());
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    match on_path {
        Some(p) => Ok(p.to_string_lossy().into_owned()),
        None => bail!(
            "neper's {name} is neither at {} nor on PATH (the project keeps static builds in shared/bin: see its README)",
            shared.display()
        ),
    }
}

/// linerate's claim: `transactions_per_s` of its `-J` report.
fn linerate_claim(out: &str) -> Option<f64> {
    let doc: serde_json::Value = serde_json::from_str(out).ok()?;
    doc.get("transactions_per_s")?.as_f64()
}

/// neper's claim: its `throughput=` line (transactions per second).
fn neper_claim(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.strip_prefix("throughput="))
        .and_then(|v| v.trim().parse().ok())
}

/// What a linerate pair does.
struct Lr<'a> {
    flows: &'a str,
    client: &'a [&'a str],
    server: &'a [&'a str],
}

fn linerate(rig: &Rig, run_for: Duration, lr: &Lr<'_>) -> Result<Running> {
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
    sargs.extend_from_slice(lr.server);
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
        "--flows",
        lr.flows,
        "-J",
    ];
    argv.extend_from_slice(lr.client);
    let claim = Claim::new("linerate", linerate_claim);
    let out = std::fs::File::create(&claim.path)?;
    let child = spawn_pinned_out(rig, CLIENT, 0, &argv, out)?;
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
        report: None,
        claim: Some(claim),
    })
}

/// neper's `tool` (`tcp_rr`, `tcp_crr`) with `flows` flows on one thread
/// each side; `client_extra` on the client's command line.
fn neper(
    rig: &Rig,
    run_for: Duration,
    tool: &str,
    flows: &str,
    client_extra: &[&str],
) -> Result<Running> {
    let bin = neper_bin(tool)?;
    let ip = rig.host(SERVER).ipv4.to_string();
    let (control, data) = (NEPER_CONTROL.to_string(), NEPER_DATA.to_string());
    let secs = format!("{}", run_for.as_secs().max(1));
    let common = [
        "-C",
        control.as_str(),
        "-P",
        data.as_str(),
        "-F",
        flows,
        "-T",
        "1",
        "-Q",
        SIZE,
        "-R",
        SIZE,
        "-l",
        secs.as_str(),
        "--logtostderr",
    ];
    let mut sargs = vec![bin.as_str()];
    sargs.extend_from_slice(&common);
    let server = spawn_pinned(rig, SERVER, 1, &sargs)?;
    wait_tcp_listen(rig, SERVER, NEPER_CONTROL)?;
    wait_tcp_listen(rig, SERVER, NEPER_DATA)?;
    let mut argv = vec![bin.as_str(), "-c", "-H", &ip];
    argv.extend_from_slice(&common);
    argv.extend_from_slice(client_extra);
    let claim = Claim::new("neper", neper_claim);
    let out = std::fs::File::create(&claim.path)?;
    let child = spawn_pinned_out(rig, CLIENT, 0, &argv, out)?;
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
        report: None,
        claim: Some(claim),
    })
}

fn rr1_lr_spin(rig: &Rig, d: Duration) -> Result<Running> {
    let lr = Lr {
        flows: "1",
        client: &["--outstanding", "1", "--busy-poll"],
        server: &["--spin"],
    };
    linerate(rig, d, &lr)
}

fn rr1_lr(rig: &Rig, d: Duration) -> Result<Running> {
    let lr = Lr {
        flows: "1",
        client: &["--outstanding", "1"],
        server: &[],
    };
    linerate(rig, d, &lr)
}

fn rr1_neper(rig: &Rig, d: Duration) -> Result<Running> {
    neper(rig, d, "tcp_rr", "1", &[])
}

fn rr100_lr_spin(rig: &Rig, d: Duration) -> Result<Running> {
    let lr = Lr {
        flows: "100",
        client: &["--outstanding", "1", "--busy-poll"],
        server: &["--spin"],
    };
    linerate(rig, d, &lr)
}

fn rr100_lr(rig: &Rig, d: Duration) -> Result<Running> {
    let lr = Lr {
        flows: "100",
        client: &["--outstanding", "1"],
        server: &[],
    };
    linerate(rig, d, &lr)
}

fn rr100_neper(rig: &Rig, d: Duration) -> Result<Running> {
    neper(rig, d, "tcp_rr", "100", &[])
}

/// linerate's TCP_CRR with `flows` at a time, closing with a reset or a
/// FIN, spinning (client `--busy-poll`, server `--spin`) or sleeping.
fn crr_lr(rig: &Rig, d: Duration, flows: &str, reset: bool, spin: bool) -> Result<Running> {
    let mut client = vec!["--connect-per-transaction"];
    if reset {
        client.push("--close-reset");
    }
    if spin {
        client.push("--busy-poll");
    }
    let server: &[&str] = if spin { &["--spin"] } else { &[] };
    let lr = Lr {
        flows,
        client: &client,
        server,
    };
    linerate(rig, d, &lr)
}

fn crr1_lr(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "1", false, false)
}

fn crr1_lr_reset(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "1", true, false)
}

fn crr1_lr_spin(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "1", false, true)
}

fn crr1_lr_reset_spin(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "1", true, true)
}

fn crr1_neper_fin(rig: &Rig, d: Duration) -> Result<Running> {
    neper(rig, d, "tcp_crr", "1", &["--time-wait"])
}

fn crr1_neper_rst(rig: &Rig, d: Duration) -> Result<Running> {
    neper(rig, d, "tcp_crr", "1", &[])
}

fn crr16_lr(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "16", false, false)
}

fn crr16_lr_reset(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "16", true, false)
}

fn crr16_lr_spin(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "16", false, true)
}

fn crr16_lr_reset_spin(rig: &Rig, d: Duration) -> Result<Running> {
    crr_lr(rig, d, "16", true, true)
}

fn crr16_neper_fin(rig: &Rig, d: Duration) -> Result<Running> {
    neper(rig, d, "tcp_crr", "16", &["--time-wait"])
}

fn crr16_neper_rst(rig: &Rig, d: Duration) -> Result<Running> {
    neper(rig, d, "tcp_crr", "16", &[])
}

fn check() -> Result<()> {
    need(&["taskset", "ss"])?;
    linerate_bin()?;
    neper_bin("tcp_rr")?;
    neper_bin("tcp_crr").map(|_| ())
}

fn rr_scenario(
    name: &'static str,
    about: &'static str,
    [spin, sleep, peer]: [fn(&Rig, Duration) -> Result<Running>; 3],
) -> Scenario {
    Scenario {
        name,
        about,
        receiver: SERVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: None,
        contenders: vec![
            Contender {
                name: "linerate rr --tcp spinning",
                start: spin,
            },
            Contender {
                name: "linerate rr --tcp",
                start: sleep,
            },
            Contender {
                name: "neper tcp_rr",
                start: peer,
            },
        ],
        check,
    }
}

pub fn rr() -> Scenario {
    rr_scenario(
        "rr-tcp-neper",
        "TCP_RR, 64 B, 1 connection, 1 in flight, 1 worker/thread each side: linerate rr --tcp (spinning: client --busy-poll, server --spin; and sleeping) vs neper tcp_rr (epoll, sleeping: it has no spinning mode) (packets/s at the server's veth, about one per transaction)",
        [rr1_lr_spin, rr1_lr, rr1_neper],
    )
}

pub fn rr100() -> Scenario {
    rr_scenario(
        "rr-tcp-neper-100",
        "TCP_RR, 64 B, 100 connections on 1 worker/thread each side, 1 in flight each: linerate rr --tcp --flows 100 (spinning and sleeping) vs neper tcp_rr -F 100 -T 1 (packets/s at the server's veth, about one per transaction)",
        [rr100_lr_spin, rr100_lr, rr100_neper],
    )
}

/// Connections the server's kernel accepted.
fn passive_opens(rig: &Rig) -> Result<u64> {
    netns_snmp(rig, SERVER, "Tcp", "PassiveOpens")
}

/// The client's namespace reuses ports in TIME_WAIT (both tools' clients
/// run there; the namespace goes with the rig).
fn reuse_time_wait(rig: &Rig) -> Result<Box<dyn std::any::Any>> {
    let out = rig
        .command(CLIENT, "sysctl")
        .args(["-q", "-w", "net.ipv4.tcp_tw_reuse=1"])
        .output()?;
    if !out.status.success() {
        bail!(
            "sysctl net.ipv4.tcp_tw_reuse=1 in the client's namespace: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(Box::new(()))
}

fn crr_scenario(
    name: &'static str,
    about: &'static str,
    [lr, lr_reset, lr_spin, lr_reset_spin, fin, rst]: [fn(&Rig, Duration) -> Result<Running>; 6],
) -> Scenario {
    Scenario {
        name,
        about,
        receiver: SERVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
        metric: Metric::Count(Count {
            what: "connections the server's kernel accepted (Tcp PassiveOpens of its namespace's /proc/net/snmp)",
            unit: "connections/s",
            read: passive_opens,
        }),
        setup: Some(reuse_time_wait),
        contenders: vec![
            Contender {
                name: "linerate rr --tcp --connect-per-transaction",
                start: lr,
            },
            Contender {
                name: "linerate rr --tcp --connect-per-transaction --close-reset",
                start: lr_reset,
            },
            Contender {
                name: "linerate rr --tcp --connect-per-transaction spinning",
                start: lr_spin,
            },
            Contender {
                name: "linerate rr --tcp --connect-per-transaction --close-reset spinning",
                start: lr_reset_spin,
            },
            Contender {
                name: "neper tcp_crr --time-wait",
                start: fin,
            },
            Contender {
                name: "neper tcp_crr",
                start: rst,
            },
        ],
        check,
    }
}

pub fn crr() -> Scenario {
    crr_scenario(
        "rr-tcp-crr",
        "TCP_CRR, 64 B, a connection per transaction, 1 at a time, 1 worker/thread each side: linerate rr --tcp --connect-per-transaction (closing with a FIN, and with --close-reset a reset; sleeping, and spinning: client --busy-poll, server --spin) vs neper tcp_crr --time-wait (FIN) and tcp_crr (its default: a reset), both sleeping in epoll (neper has no spinning mode: its --nonblocking still waits in epoll_wait) (connections/s the server's kernel accepted)",
        [
            crr1_lr,
            crr1_lr_reset,
            crr1_lr_spin,
            crr1_lr_reset_spin,
            crr1_neper_fin,
            crr1_neper_rst,
        ],
    )
}

pub fn crr16() -> Scenario {
    crr_scenario(
        "rr-tcp-crr-16",
        "TCP_CRR as rr-tcp-crr with 16 transactions at a time: linerate --flows 16 (sleeping and spinning) vs neper tcp_crr -F 16 -T 1 (connections/s the server's kernel accepted)",
        [
            crr16_lr,
            crr16_lr_reset,
            crr16_lr_spin,
            crr16_lr_reset_spin,
            crr16_neper_fin,
            crr16_neper_rst,
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::{linerate_claim, neper_bin, neper_claim, shared_bin};

    #[test]
    fn claims_are_read_from_each_tools_report() {
        let neper = "num_transactions=45890\nthroughput=28402.79\nlocal_throughput=28402\nremote_throughput=28400\n";
        assert_eq!(neper_claim(neper), Some(28402.79));
        assert_eq!(neper_claim("local_throughput=1\n"), None);
        let lr = r#"{"server": "x", "transactions_per_s": 9839.5, "counts": {}}"#;
        assert_eq!(linerate_claim(lr), Some(9839.5));
        assert_eq!(linerate_claim("total: 1 transactions"), None);
    }

    #[test]
    fn neper_is_taken_from_shared_bin_or_path_and_the_error_says_where_it_looked() {
        let e = neper_bin("tcp_rr_not_a_tool").unwrap_err().to_string();
        assert!(
            e.contains("neper-tcp_rr_not_a_tool") && e.contains("nor on PATH"),
            "{e}"
        );
        // The project's static builds, where shared/ lies beside the
        // checkout (as for CI): taken from there.
        if shared_bin().join("neper-tcp_rr").is_file() {
            let p = neper_bin("tcp_rr").unwrap();
            assert!(p.ends_with("shared/bin/neper-tcp_rr"), "{p}");
        }
    }
}
